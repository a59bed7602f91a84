"""The session and approval state machine, free of I/O.

Every decision about what a session may do next is made here, from plain values, so it
can be tested directly; the host applies the outcome to storage and to the wire.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from reference_host.errors import HostError

Mode = Literal["agent", "plan"]
PermissionMode = Literal["ask", "accept-edits", "auto"]
ApprovalStatus = Literal["pending", "approved", "rejected", "expired", "interrupted"]
ExecutionState = Literal["queued", "running", "completed", "interrupted"]

APPROVAL_TTL_MS = 30 * 60 * 1000
"""§3: the approval deadline is absolute, 30 minutes after the host created the approval."""

_EXECUTION_NEXT: dict[ExecutionState, frozenset[ExecutionState]] = {
    "queued": frozenset({"running", "interrupted"}),
    "running": frozenset({"completed", "interrupted"}),
    "completed": frozenset(),
    "interrupted": frozenset(),
}


@dataclass(frozen=True)
class Activity:
    """What a session is busy with right now."""

    active_turn_id: str | None = None
    pending_approval_id: str | None = None
    active_execution_id: str | None = None

    @property
    def idle(self) -> bool:
        """No turn, no pending approval, no queued or running execution."""
        return (
            self.active_turn_id is None
            and self.pending_approval_id is None
            and self.active_execution_id is None
        )


def ensure_idle_for(activity: Activity, what: str) -> None:
    """Refuse ``what`` (a prompt, a configuration change, a Plan run) unless idle (§5)."""
    if activity.pending_approval_id is not None:
        raise HostError(
            "APPROVAL_PENDING",
            f"{what} refused: a plan approval is pending; approve or reject it first",
            {"approvalId": activity.pending_approval_id},
        )
    if activity.active_turn_id is not None or activity.active_execution_id is not None:
        raise HostError(
            "SESSION_BUSY",
            f"{what} refused: the session has an active turn",
            {"turnId": activity.active_turn_id, "executionId": activity.active_execution_id},
        )


def ensure_can_cancel(activity: Activity) -> None:
    """While an approval is pending only approve and reject are accepted (§5)."""
    if activity.pending_approval_id is not None:
        raise HostError(
            "APPROVAL_PENDING",
            "cancel refused: a plan approval is pending; approve or reject it",
            {"approvalId": activity.pending_approval_id},
        )


def deadline_for(created_at_ms: int) -> int:
    """The absolute expiry of an approval created at ``created_at_ms`` (§3)."""
    return created_at_ms + APPROVAL_TTL_MS


def is_expired(expires_at_ms: int, now_ms: int) -> bool:
    """An approval is expired from its deadline onwards (``now >= expiresAt``)."""
    return now_ms >= expires_at_ms


@dataclass(frozen=True)
class ApprovalFacts:
    """The fields of an approval that decide what may happen to it."""

    status: ApprovalStatus
    expires_at: int
    permission_mode: PermissionMode | None = None
    execution_id: str | None = None
    execution_state: ExecutionState | None = None


def ensure_decidable(approval: ApprovalFacts, now_ms: int) -> None:
    """Approve and reject need a pending approval whose deadline has not passed (§3)."""
    if approval.status == "pending" and is_expired(approval.expires_at, now_ms):
        raise HostError("PLAN_APPROVAL_TIMEOUT", "the approval's deadline has passed")
    if approval.status == "expired":
        raise HostError("PLAN_APPROVAL_TIMEOUT", "the approval already expired")
    if approval.status != "pending":
        raise HostError(
            "APPROVAL_NOT_PENDING",
            f"the approval is {approval.status}; only a pending approval can be decided",
            {"status": approval.status},
        )


def approve(approval: ApprovalFacts, mode: PermissionMode, execution_id: str) -> ApprovalFacts:
    """Approval: status approved, the chosen mode, a new execution, queued (§4)."""
    return replace(
        approval,
        status="approved",
        permission_mode=mode,
        execution_id=execution_id,
        execution_state="queued",
    )


def reject(approval: ApprovalFacts) -> ApprovalFacts:
    """Rejection is terminal and selects no permission mode (§3)."""
    return replace(approval, status="rejected")


def advance_execution(current: ExecutionState, target: ExecutionState) -> ExecutionState:
    """Move an execution along queued -> running -> completed | interrupted (§4)."""
    if target not in _EXECUTION_NEXT[current]:
        raise ValueError(f"execution cannot move from {current} to {target}")
    return target
