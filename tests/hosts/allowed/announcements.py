"""Allowed variations for the whole-scenario announcement checks: hosts that announce more
often than the reference host, which the contract never forbids, so the checks are proven
to hold their rules (a change announced as it now is, before the answer that reports it,
a turn at work shown active) and nothing more."""

from __future__ import annotations

from typing import Any

from hosts.registry import AllowedCase, patch, variant
from reference_host.host import Host


def _wrap_notify(relay: Any) -> None:
    """Route every notification of each host through ``relay(send, method, params)``."""
    original = Host.__init__

    def init(self: Host, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        send = self.notify

        def relayed(method: str, params: dict[str, Any]) -> None:
            relay(send, method, params)

        self.notify = relayed

    patch(Host, "__init__", init)


@variant("announces-every-change-twice")
def _announces_every_change_twice() -> None:
    # R7.2 asks that every change be announced with the record as it now is; nothing says
    # once. This host sends each session/updated and approval/updated twice in a row.
    def relay(send: Any, method: str, params: dict[str, Any]) -> None:
        send(method, params)
        if method in ("session/updated", "approval/updated"):
            send(method, params)

    _wrap_notify(relay)


@variant("repeats-the-session-at-every-call")
def _repeats_the_session_at_every_call() -> None:
    # A session/updated carries the whole session as it now is (R7.2); a host may send one
    # when nothing changed. This host repeats the session's last announcement after every
    # tool call the model makes, so announcements arrive in the middle of every turn.
    last: dict[str, dict[str, Any]] = {}

    def relay(send: Any, method: str, params: dict[str, Any]) -> None:
        send(method, params)
        if method == "session/updated":
            last[params["session"]["sessionId"]] = params
        elif method == "turn/toolCall" and params["sessionId"] in last:
            send("session/updated", last[params["sessionId"]])

    _wrap_notify(relay)


CASES = [
    AllowedCase(
        "announces-every-change-twice",
        "sessions,turn_boundaries,approval,execution",
        why="every change is announced as the record now is; announcing it twice is not forbidden",
    ),
    AllowedCase(
        "repeats-the-session-at-every-call",
        "plan_tools,execution,isolation,shell",
        why="a session/updated may repeat the session as it is; only what it shows is judged",
    ),
]
