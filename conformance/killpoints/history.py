"""The client's history: every operation and how it ended, and what it acknowledged.

A write is acknowledged when the host answered its request with success, or announced the
state it committed in a notification (an approval's status, an execution's state, a
command's printed line). What the client knows before a crash is what the restarted host
must still show, after the startup recovery of §4 has mapped every pending approval and
every queued or running execution to ``interrupted``. A request that was in flight at the
kill and got no answer is uncertain: either outcome is allowed, but only a consistent one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Outcome = Literal["ok", "error", "unknown"]
ModePair = tuple[str, str]


def after_restart(status: str) -> str:
    """What an approval status reads as after a restart (§4)."""
    return "interrupted" if status == "pending" else status


def execution_after_restart(state: str | None) -> str | None:
    """What an execution state reads as after a restart (§4)."""
    return "interrupted" if state in ("queued", "running") else state


@dataclass(frozen=True)
class Operation:
    """One client operation and how it ended."""

    op: str
    detail: str
    outcome: Outcome
    answer: str = ""

    def line(self) -> str:
        """One line for a report."""
        answer = f" -> {self.answer}" if self.answer else ""
        return f"{self.op} {self.detail} [{self.outcome}]{answer}".replace("  ", " ")


@dataclass
class SessionFacts:
    """A session the host acknowledged, as it must read after the restart.

    ``pending_approve`` names an approval whose approve was in flight at the kill and the
    (mode, permission mode) that approve would have set: the session must then read that
    way exactly when the approval reads approved (§4: approve is one transaction).
    """

    session_id: str
    workspace_root: str | None
    provider: dict[str, Any] | None
    shell_id: str | None
    mode: ModePair
    pending_approve: tuple[str, ModePair] | None = None
    prompts: list[str] = field(default_factory=list)


@dataclass
class ApprovalFacts:
    """An approval the host acknowledged or announced; the statuses allowed after the restart."""

    approval_id: str
    session_id: str
    statuses: frozenset[str]
    executions: frozenset[str | None]
    execution_id: str | None = None
    permission_mode: str | None = None
    markdown: bytes | None = None


@dataclass
class TaskFacts:
    """A scheduled task as last acknowledged (``None`` fields were not acknowledged)."""

    task_id: str
    fields: dict[str, Any]
    last_run: dict[str, Any] | None = None
    deleted: bool = False


STABLE_TASK_FIELDS = ("name", "prompt", "mode", "workspaceRoot", "permissionMode", "enabled")


@dataclass
class History:
    """The operations of one run and the acknowledged state they add up to."""

    operations: list[Operation] = field(default_factory=list)
    sessions: dict[str, SessionFacts] = field(default_factory=dict)
    approvals: dict[str, ApprovalFacts] = field(default_factory=dict)
    tasks: dict[str, TaskFacts] = field(default_factory=dict)
    default_shell: str | None = None
    lines_started: set[str] = field(default_factory=set)
    lines_acknowledged: set[str] = field(default_factory=set)

    def record(self, op: str, detail: str, outcome: Outcome, answer: str = "") -> None:
        """Add one operation to the history."""
        self.operations.append(Operation(op, detail, outcome, answer))

    # -- what the host said -------------------------------------------------------------

    def saw_session(self, wire: dict[str, Any]) -> SessionFacts:
        """A session object from an answer: its configuration is acknowledged."""
        sid = wire["sessionId"]
        known = self.sessions.get(sid)
        facts = SessionFacts(
            session_id=sid,
            workspace_root=wire["workspaceRoot"],
            provider=wire["provider"],
            shell_id=wire["shellId"],
            mode=(wire["mode"], wire["permissionMode"]),
            prompts=known.prompts if known else [],
        )
        self.sessions[sid] = facts
        return facts

    def saw_approval(self, wire: dict[str, Any], markdown: bytes | None = None) -> ApprovalFacts:
        """An approval object from an answer or an announcement."""
        aid = wire["approvalId"]
        known = self.approvals.get(aid)
        facts = ApprovalFacts(
            approval_id=aid,
            session_id=wire["sessionId"],
            statuses=frozenset({after_restart(wire["status"])}),
            executions=frozenset({execution_after_restart(wire["executionState"])}),
            execution_id=wire["executionId"],
            permission_mode=wire["permissionMode"],
            markdown=markdown if markdown is not None else (known.markdown if known else None),
        )
        self.approvals[aid] = facts
        return facts

    def announced_approval(self, wire: dict[str, Any]) -> None:
        """An ``approval/updated`` from before the kill. Announcements are taken in after
        the kill, so one only moves what is known forward, never back."""
        facts = self.approvals.get(wire["approvalId"])
        if facts is None:
            self.saw_approval(wire)
            return
        if wire["status"] != "pending":
            facts.statuses = frozenset({wire["status"]})
            facts.permission_mode = wire["permissionMode"]
        if wire["executionState"] is not None:
            self.saw_execution(wire["approvalId"], wire["executionState"])

    def saw_execution(self, approval_id: str, state: str) -> None:
        """An announced execution state: its approval was approved."""
        facts = self.approvals.get(approval_id)
        if facts is None:
            return
        facts.statuses = frozenset({"approved"})
        if facts.executions != {"completed"}:
            facts.executions = frozenset({execution_after_restart(state)})

    def saw_task(self, wire: dict[str, Any]) -> None:
        """A scheduled task object from an answer."""
        fields = {name: wire[name] for name in (*STABLE_TASK_FIELDS, "runAt")}
        self.tasks[wire["taskId"]] = TaskFacts(wire["taskId"], fields, wire["lastRun"])

    # -- requests in flight at the kill ---------------------------------------------------

    def approve_in_flight(self, session_id: str, approval_id: str, mode: str) -> None:
        """Approve was sent and may or may not commit before the kill."""
        approval = self.approvals[approval_id]
        approval.statuses = frozenset({"approved", "interrupted"})
        approval.executions = frozenset({"interrupted", None})
        self.sessions[session_id].pending_approve = (approval_id, ("agent", mode))

    def decision_in_flight(self, approval_id: str, status: str) -> None:
        """Reject (or the deadline) may or may not be recorded before the kill."""
        approval = self.approvals[approval_id]
        approval.statuses = frozenset({status, "interrupted"})

    def settled(self, session_id: str) -> None:
        """The request in flight for this session was answered: no more uncertainty."""
        self.sessions[session_id].pending_approve = None
