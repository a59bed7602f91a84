"""The registry of host variants and the cases that run the suite against them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Patch = Callable[[], None]
FROM_ENV = "from-env"  # serve.py's variant argument: the variant named in VARIANT_VARIABLE
VARIANT_VARIABLE = "PI_HOST_VARIANT"
MAP_VARIABLE = "PI_HOST_VARIANTS"  # a JSON file: scenario id -> variant
VARIANTS: dict[str, Patch] = {}


def patch(owner: object, name: str, value: object) -> None:
    """Replace ``owner.name`` in this host process (the variant's one changed piece)."""
    setattr(owner, name, value)


Send = Callable[[str, dict[str, Any]], None]


def relay_notifications(relay: Callable[[Send, str, dict[str, Any]], None]) -> None:
    """Hand every notification the host sends to ``relay(send, method, params)``, which
    decides what, if anything, ``send`` puts on the wire in its place."""
    from reference_host.host import Host

    original = Host.__init__

    def init(self: Host, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        send = self.notify

        def relayed(method: str, params: dict[str, Any]) -> None:
            relay(send, method, params)

        self.notify = relayed

    patch(Host, "__init__", init)


def rewrite_notifications(
    rewrite: Callable[[str, dict[str, Any]], dict[str, Any] | None],
) -> None:
    """Pass every notification the host sends through ``rewrite(method, params)``; one it
    turns into None is not sent."""

    def relay(send: Send, method: str, params: dict[str, Any]) -> None:
        changed = rewrite(method, params)
        if changed is not None:
            send(method, changed)

    relay_notifications(relay)


def rewrite_provider_messages(
    rewrite: Callable[[list[dict[str, Any]]], list[dict[str, Any]]],
) -> None:
    """Pass the messages of every provider request through ``rewrite(messages)``."""
    from reference_host import turns

    original = turns.complete

    async def complete(client: Any, config: Any, messages: Any, *args: Any, **kw: Any) -> Any:
        return await original(client, config, rewrite([dict(m) for m in messages]), *args, **kw)

    patch(turns, "complete", complete)


def variant(name: str) -> Callable[[Patch], Patch]:
    """Register a patch under ``name``."""

    def register(function: Patch) -> Patch:
        assert name not in VARIANTS, f"two variants are called {name!r}"
        VARIANTS[name] = function
        return function

    return register


@dataclass(frozen=True)
class BrokenCase:
    """A broken variant, the scenarios to run, and the requirement that must be blamed.

    ``reason`` is part of the failed check's message, so the case proves that the right
    check caught the variant, not a timeout or another check by accident.
    """

    variant: str
    areas: str
    keyword: str
    requirement: str
    reason: str
    slow: bool = False  # caught only once a wait of the step timeout has run out
    label: str = ""  # tells apart two cases of one variant
    # another check's message that catches the same bug when the host's timing differs
    or_reason: str = ""

    @property
    def id(self) -> str:
        """The test id."""
        return f"{self.variant}-{self.label}" if self.label else self.variant


@dataclass(frozen=True)
class AllowedCase:
    """A variant that differs only in contract-allowed ways, and the scenarios it must pass."""

    variant: str
    areas: str
    keyword: str = ""
    why: str = ""  # which freedom of the contract the variant takes

    @property
    def id(self) -> str:
        """The test id."""
        return self.variant
