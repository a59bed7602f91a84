"""What ADR 0053 says a host's sessions and approvals must look like, without I/O.

The model is built only from the explorer's own actions (what it created, submitted,
approved, rejected, cancelled, how it moved the clock and when it restarted the host),
never from what the host claims, so that it can judge the host's answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

APPROVAL_TTL_MS: Final = 30 * 60 * 1000
"""§3: a plan waits at most 30 minutes from the moment the host created it."""

PERMISSION_MODES: Final = ("ask", "accept-edits", "auto")

# Where a status stands on its one-way road; a final status has no successor (§4).
_STATUS_RANK: Final = {
    "pending": 0,
    "approved": 1,
    "rejected": 1,
    "expired": 1,
    "interrupted": 1,
}
_EXECUTION_RANK: Final[dict[str | None, int]] = {
    None: 0,
    "queued": 1,
    "running": 2,
    "completed": 3,
    "interrupted": 3,
}


def status_moves_forward(before: str, after: str) -> bool:
    """pending -> approved | rejected | expired | interrupted, and nothing else (§4)."""
    if before == after:
        return True
    return _STATUS_RANK.get(before, 9) == 0 and _STATUS_RANK.get(after, 0) == 1


def execution_moves_forward(before: str | None, after: str | None) -> bool:
    """queued -> running -> completed | interrupted, also queued -> interrupted (§4).

    States in between may go unobserved (queued, then completed), so the check is on rank;
    a final state stays final.
    """
    if before == after:
        return True
    if before not in _EXECUTION_RANK or after not in _EXECUTION_RANK:
        return False
    rank_before, rank_after = _EXECUTION_RANK[before], _EXECUTION_RANK[after]
    return rank_after > rank_before and rank_before < 3


@dataclass
class ModelApproval:
    """One plan the explorer had submitted, and what must have happened to it since."""

    approval_id: str
    session: str  # the alias of the owning session
    title: str
    markdown: str
    artifact_path: str
    created_at: int
    status: str = "pending"
    status_code: str | None = None
    permission_mode: str | None = None
    execution_id: str | None = None
    execution_state: str | None = None
    approved_by_user: bool = False

    @property
    def expires_at(self) -> int:
        """The absolute deadline: creation plus 30 minutes, fixed at creation (§3)."""
        return self.created_at + APPROVAL_TTL_MS

    @property
    def executing(self) -> bool:
        """Its execution is queued or running."""
        return self.execution_state in ("queued", "running")


@dataclass
class ModelSession:
    """One session the explorer created."""

    alias: str
    session_id: str
    project: str
    mode: str
    permission_mode: str
    model_name: str = "explorer-model"
    active_turn: str | None = None  # a turn that is still running (the model takes its time)
    approvals: list[str] = field(default_factory=list)


@dataclass
class Model:
    """Every session and approval the explorer knows about, and the host clock."""

    now: int = 0
    sessions: dict[str, ModelSession] = field(default_factory=dict)
    approvals: dict[str, ModelApproval] = field(default_factory=dict)

    def session_by_id(self, session_id: str) -> ModelSession | None:
        """The session with this host id, if the explorer created it."""
        return next((s for s in self.sessions.values() if s.session_id == session_id), None)

    def approvals_of(self, alias: str) -> list[ModelApproval]:
        """A session's approvals, oldest first."""
        return [self.approvals[a] for a in self.sessions[alias].approvals]

    def pending(self, alias: str) -> ModelApproval | None:
        """The session's approval that awaits a decision, if any."""
        return next((a for a in self.approvals_of(alias) if a.status == "pending"), None)

    def executing(self, alias: str) -> ModelApproval | None:
        """The session's approval whose execution is queued or running, if any."""
        return next((a for a in self.approvals_of(alias) if a.executing), None)

    def busy(self, alias: str) -> str | None:
        """Why the session must refuse a prompt or a configuration change (§5), if it must."""
        if self.pending(alias) is not None:
            return "a plan awaits approval"
        if self.sessions[alias].active_turn is not None:
            return "a turn is running"
        if self.executing(alias) is not None:
            return "an approved plan is queued or running"
        return None

    def decision_refusals(self, approval: ModelApproval) -> frozenset[str] | None:
        """The codes a decision on ``approval`` may be refused with, or None if it must succeed.

        A pending approval past its deadline, and an expired one, answer
        PLAN_APPROVAL_TIMEOUT (P14); one approved, rejected or interrupted answers
        APPROVAL_NOT_PENDING, before its deadline and after it (R4.4).
        """
        if approval.status == "pending":
            late = self.now >= approval.expires_at
            return frozenset({"PLAN_APPROVAL_TIMEOUT"}) if late else None
        if approval.status == "expired":
            return frozenset({"PLAN_APPROVAL_TIMEOUT"})
        return frozenset({"APPROVAL_NOT_PENDING"})

    def expire_due(self) -> list[ModelApproval]:
        """Pending approvals whose deadline the clock reached: the host expires them (§3)."""
        expired: list[ModelApproval] = []
        for approval in self.approvals.values():
            if approval.status == "pending" and self.now >= approval.expires_at:
                approval.status = "expired"
                approval.status_code = "PLAN_APPROVAL_TIMEOUT"
                expired.append(approval)
        return expired

    def interrupt_all(self) -> None:
        """A restart interrupts what was pending, queued or running, and every turn (§4)."""
        for approval in self.approvals.values():
            if approval.status == "pending":
                approval.status = "interrupted"
            if approval.executing:
                approval.execution_state = "interrupted"
        for session in self.sessions.values():
            session.active_turn = None
