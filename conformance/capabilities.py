"""Optional host capabilities: a check that needs one the host did not declare is
*unverified*, never failed.

A host declares fault points in ``initialize.capabilities.faultInjection`` and its shells
by kind in ``shell/list``. Steps call :func:`require_fault_point` or
:func:`require_shell_kind`; when the host lacks the capability the scenario stops there
and is reported ``unverified`` with the reason (``--require-full`` counts that as a
failure).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from _pytest.outcomes import Skipped

if TYPE_CHECKING:
    from conformance.world import World

# test262-style feature flags: each optional capability and what it unlocks.
FAULT_POINTS: dict[str, str] = {
    "artifactWrite": "a failed artifact write creates no approval (R2.12)",
    "artifactFlush": "the artifact is flushed before the approval commits (R2.10)",
    "approvalCommit": "approval is one transaction (R4.6)",
    "holdExecution": "an execution still queued at a restart is interrupted (R4.10, R4.14, C8)",
}
SHELL_KINDS: dict[str, str] = {
    "posix-sh": "commands in a POSIX sh (shell scenarios)",
    "bash": "commands in bash (shell scenarios)",
}


class Unverified(Skipped):
    """The scenario needs a capability the host did not declare."""

    def __init__(self, capability: str, reason: str) -> None:
        super().__init__(f"unverified: {reason}")
        self.capability = capability
        self.reason = reason


def require_fault_point(world: World, fault: str) -> None:
    """Stop the scenario as unverified unless the host offers the fault point."""
    offered = world.capabilities().get("faultInjection", [])
    if fault not in offered:
        raise Unverified(
            f"fault:{fault}",
            f"the host does not declare the fault point {fault!r} "
            f"(capabilities.faultInjection), which this check needs: {FAULT_POINTS[fault]}",
        )


def shell_of_kind(world: World, kind: str) -> dict[str, Any]:
    """The host's shell of ``kind`` with the lowest id (the catalog's order is the host's,
    so every read picks the same one); unverified when there is none."""
    shells: list[dict[str, Any]] = world.rpc.request("shell/list", {})["shells"]
    of_kind = sorted((s for s in shells if s.get("kind") == kind), key=lambda s: str(s["shellId"]))
    if of_kind:
        return of_kind[0]
    raise Unverified(
        f"shell:{kind}",
        f"the host's shell catalog has no shell of kind {kind!r}, which this check needs: "
        f"{SHELL_KINDS.get(kind, kind)}",
    )


def require_output_room(world: World, size: int) -> None:
    """Unverified when the host's announced output cap (its choice, P20) is below the
    ``size`` bytes of command output a check needs whole."""
    cap = int(world.capabilities()["maxCommandOutputBytes"])
    if cap < size:
        raise Unverified(
            "maxCommandOutputBytes",
            f"the announced output cap of {cap} bytes is smaller than the {size} bytes of "
            "output this check needs whole",
        )
