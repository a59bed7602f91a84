"""The invariants the explorer checks, each with the failure it raises.

Each invariant has its own exception class, so that while shrinking a failing sequence
the search keeps to the invariant it first saw broken instead of wandering to another.
"""

from __future__ import annotations

from typing import Final

INVARIANTS: Final[dict[str, str]] = {
    "one-pending": "a session has at most one plan awaiting approval",
    "one-execution": "a session has at most one queued or running execution",
    "forward-only": (
        "approval and execution statuses only move forward, and a final status stays final"
    ),
    "fixed-deadline": "a plan's deadline is 30 minutes after the host created it and never moves",
    "no-implicit-approval": (
        "a plan is approved only when the user approves it, with the permission mode the user chose"
    ),
    "no-replay": (
        "nothing is replayed: the model is called and commands run only for work the user started"
    ),
    "recovery": "a restart interrupts whatever was pending, queued or running, and nothing else",
    "isolation": "each session sees only its own events, plans and project files",
    "artifact": "a plan's artifact holds exactly the submitted bytes, as recorded",
    "state": "the host's answers and records follow the ADR's state machine",
    "contract": "every message follows the published protocol",
    "alive": "the host keeps running and answering",
}


class InvariantBrokenError(AssertionError):
    """The host broke an invariant; ``key`` names it, ``detail`` says what was seen."""

    key = "state"

    def __init__(self, detail: str) -> None:
        super().__init__(f"{INVARIANTS[self.key]}: {detail}")
        self.detail = detail

    @property
    def statement(self) -> str:
        """The invariant, in business language."""
        return INVARIANTS[self.key]


_CLASSES: dict[str, type[InvariantBrokenError]] = {
    key: type(
        "".join(part.capitalize() for part in key.split("-")) + "Broken",
        (InvariantBrokenError,),
        {"key": key, "__doc__": f"Broken: {text}."},
    )
    for key, text in INVARIANTS.items()
}


def broken(key: str, detail: str) -> InvariantBrokenError:
    """The failure for invariant ``key``."""
    return _CLASSES[key](detail)
