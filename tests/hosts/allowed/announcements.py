"""Allowed variations for the whole-scenario announcement checks: hosts that announce more
often than the reference host, which the contract never forbids, so the checks are proven
to hold their rules (a change announced as it now is, before the answer that reports it,
a turn at work shown active) and nothing more."""

from __future__ import annotations

from typing import Any

from hosts.registry import AllowedCase, Send, relay_notifications, variant


@variant("announces-every-change-twice")
def _announces_every_change_twice() -> None:
    # R7.2 asks that every change be announced with the record as it now is; nothing says
    # once. This host sends each session/updated and approval/updated twice in a row.
    def relay(send: Send, method: str, params: dict[str, Any]) -> None:
        send(method, params)
        if method in ("session/updated", "approval/updated"):
            send(method, params)

    relay_notifications(relay)


@variant("repeats-the-session-at-every-call")
def _repeats_the_session_at_every_call() -> None:
    # A session/updated carries the whole session as it now is (R7.2); a host may send one
    # when nothing changed. This host repeats the session's last announcement after every
    # tool call the model makes, so announcements arrive in the middle of every turn.
    last: dict[str, dict[str, Any]] = {}

    def relay(send: Send, method: str, params: dict[str, Any]) -> None:
        send(method, params)
        if method == "session/updated":
            last[params["session"]["sessionId"]] = params
        elif method == "turn/toolCall" and params["sessionId"] in last:
            send("session/updated", last[params["sessionId"]])

    relay_notifications(relay)


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
