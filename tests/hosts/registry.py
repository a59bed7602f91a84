"""The registry of host variants and the cases that run the suite against them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

Patch = Callable[[], None]
FROM_ENV = "from-env"  # serve.py's variant argument: the variant named in VARIANT_VARIABLE
VARIANT_VARIABLE = "PI_HOST_VARIANT"
MAP_VARIABLE = "PI_HOST_VARIANTS"  # a JSON file: scenario id -> variant
COMPOSED = ","  # joins the variants that one composite host applies together
WRAPPED = " (wrapped)"  # marks a recorded part that the variant wraps rather than replaces
VARIANTS: dict[str, Patch] = {}
_TARGETS: list[set[str]] = []  # while variants are applied by apply_recording: their targets
_MISSING = object()
# what patch() replaced, to undo: owner, name, and the value the owner itself held
_UNDO: list[tuple[object, str, object]] = []


def patch(owner: object, name: str, value: object, *, wraps: bool = False) -> None:
    """Replace ``owner.name`` in this host process (the variant's one changed piece).
    ``wraps``: the new value calls the one it replaced, as read when the variant is applied,
    so another variant's wrapper of the same piece stays live beside it."""
    if _TARGETS:
        where = owner.__name__ if isinstance(owner, ModuleType) else _qualified(owner)
        _TARGETS[-1].add(f"{where}.{name}{WRAPPED if wraps else ''}")
    own = getattr(owner, "__dict__", {})
    _UNDO.append((owner, name, own.get(name, _MISSING)))
    setattr(owner, name, value)


def undo_all() -> None:
    """Put back, last first, everything ``patch`` replaced in this process."""
    while _UNDO:
        owner, name, held = _UNDO.pop()
        if held is not _MISSING:
            setattr(owner, name, held)
        elif name in getattr(owner, "__dict__", {}):  # not taken back by the variant itself
            delattr(owner, name)


def _qualified(owner: object) -> str:
    kind = owner if isinstance(owner, type) else type(owner)
    return f"{kind.__module__}:{kind.__qualname__}"


def apply(names: str) -> None:
    """Apply one variant, or the variants of a composite (names joined by ``COMPOSED``)."""
    for name in names.split(COMPOSED):
        VARIANTS[name]()


def apply_recording(names: Iterable[str]) -> dict[str, list[str]]:
    """Apply each variant in turn and give what each one replaced (``module.name`` or
    ``module:Class.name``). It patches this process: call it in a process of its own."""
    replaced: dict[str, list[str]] = {}
    for name in names:
        _TARGETS.append(set())
        try:
            VARIANTS[name]()
        finally:
            replaced[name] = sorted(_TARGETS.pop())
    return replaced


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

    patch(Host, "__init__", init, wraps=True)


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

    patch(turns, "complete", complete, wraps=True)


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
    process: str = ""  # why the variant needs a host process of its own (it ends it, say)

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
    # why the variant runs alone, on its areas, and not in a composite over the whole suite
    # (a host that announces less leaves the other members' scenarios unverified)
    alone: str = ""

    @property
    def id(self) -> str:
        """The test id."""
        return self.variant
