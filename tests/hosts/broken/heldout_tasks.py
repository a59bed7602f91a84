"""Broken hosts: a fourth held-out set (deadline and expiry, approve and reject, session
and approval reads, scheduled tasks, fault points), written from the contract alone before
the suite's checks were read. Seven of these twelve went uncaught, and two more were caught
only by accident, until the scenarios and checks their cases name were added."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hosts.registry import BrokenCase, patch, variant
from reference_host import approvals as approvals_module
from reference_host.approvals import TIMEOUT_CODE, Approvals, approval_wire
from reference_host.clock import ManualClock
from reference_host.errors import HostError
from reference_host.host import Host
from reference_host.state import is_expired
from reference_host.storage import APPROVAL_COLUMNS, ApprovalRow, Storage
from reference_host.tasks import Tasks
from reference_host.turns import TurnRunner

# -- the deadline ------------------------------------------------------------------------


@variant("revision-keeps-first-deadline")
def _revision_keeps_first_deadline() -> None:
    # The host keeps "the session's plan deadline": it is fixed when the session submits its
    # first plan, and a revision (after a reject or an expiry) is given that same deadline
    # instead of its own createdAt + 30 minutes.
    first: dict[str, int] = {}
    original = Approvals.submit

    async def submit(self: Approvals, session: Any, turn_id: str, args: Any) -> ApprovalRow:
        known = first.get(session.id)
        saved = approvals_module.deadline_for
        if known is not None:
            approvals_module.deadline_for = lambda created_at_ms: known
        try:
            row = await original(self, session, turn_id, args)
        finally:
            approvals_module.deadline_for = saved
        first.setdefault(session.id, row.expires_at)
        return row

    patch(Approvals, "submit", submit)


@variant("expiry-notice-without-decided-at")
def _expiry_notice_without_decided_at() -> None:
    # The eager expiry stores decided_at, but the approval/updated that announces it is
    # built from the row with only status and statusCode changed: decidedAt null.
    async def expire(self: Approvals, approval_id: str) -> None:
        host = self.host
        row = await host.storage.get_approval(approval_id)
        if row is None or row.status != "pending":
            return
        if not is_expired(row.expires_at, host.clock.now_ms()):
            return
        announced = replace(row, status="expired", status_code=TIMEOUT_CODE)
        await host.storage.update_approval(replace(announced, decided_at=host.clock.now_ms()))
        host.set_activity(row.session_id, pending_approval_id=None)
        host.notify("approval/updated", {"approval": approval_wire(announced)})
        await host.publish_session(row.session_id)

    patch(Approvals, "expire", expire)


# -- approval reads ------------------------------------------------------------------------


@variant("approval-list-newest-first")
def _approval_list_newest_first() -> None:
    # approval/list shows the most recent plan first (as a UI would), not oldest first.
    async def list_approvals(self: Storage, session_id: str) -> list[ApprovalRow]:
        async with self._conn.execute(
            f"SELECT {APPROVAL_COLUMNS} FROM plan_approvals WHERE session_id = ? "
            "ORDER BY created_at DESC, rowid DESC",
            (session_id,),
        ) as cursor:
            rows = await cursor.fetchall()
        return [ApprovalRow(*row) for row in rows]

    patch(Storage, "list_approvals", list_approvals)


@variant("artifact-read-only-while-open")
def _artifact_read_only_while_open() -> None:
    # Only the artifact of a live plan (pending or approved) is served: once a plan was
    # rejected, expired or interrupted, artifact/read answers ARTIFACT_UNREADABLE although
    # the file is still there, unchanged.
    original = Host.artifact_read

    async def artifact_read(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.approvals.require(params["sessionId"], params["approvalId"])
        if row.status in ("rejected", "expired", "interrupted"):
            raise HostError("ARTIFACT_UNREADABLE", f"the plan is {row.status}; it is archived")
        return await original(self, params)

    patch(Host, "artifact_read", artifact_read)


# -- executions and the session ------------------------------------------------------------


@variant("execution-end-clears-pending")
def _execution_end_clears_pending() -> None:
    # When an execution ends the session is reset to idle: its activity is cleared as a
    # whole, also the pending approval that the execution turn itself just submitted
    # (EnterPlanMode + SubmitPlan). The approval row stays pending.
    original = Approvals.execution_finished

    async def execution_finished(self: Approvals, approval_id: str, final: Any) -> None:
        row = await self._execution(approval_id)
        await original(self, approval_id, final)
        self.host.set_activity(row.session_id, pending_approval_id=None)

    patch(Approvals, "execution_finished", execution_finished)


@variant("list-hides-queued-execution")
def _list_hides_queued_execution() -> None:
    # session/list derives a session's execution from its active turn (an execution turn
    # that runs): an execution still queued (no turn yet) is not named there. session/get
    # and the approve result name it.
    original = Host.session_list

    async def session_list(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await original(self, params)
        for session in result["sessions"]:
            if session["activeTurnId"] is None:
                session["activeExecutionId"] = None
        return result

    patch(Host, "session_list", session_list)


# -- fault points --------------------------------------------------------------------------


@variant("approval-commit-fault-hits-reject")
def _approval_commit_fault_hits_reject() -> None:
    # Approve and reject share one "commit the decision" step, and the approvalCommit fault
    # sits in it: a reject after arming fails with INTERNAL_ERROR (changing nothing) and
    # uses the fault up.
    original = Approvals.reject

    async def reject(self: Approvals, session_id: str, approval_id: str) -> dict[str, Any]:
        row = await self.require(session_id, approval_id)
        await self.host.turns.settle(session_id, row.turn_id)
        await self._ensure_decidable(row)
        if self.host.faults.take("approvalCommit"):
            raise HostError("INTERNAL_ERROR", "injected failure before the decision commit")
        return await original(self, session_id, approval_id)

    patch(Approvals, "reject", reject)


# -- scheduled tasks -----------------------------------------------------------------------


@variant("task-update-clears-run-at")
def _task_update_clears_run_at() -> None:
    # task/update reads runAt as params.get("runAt"): an update that leaves runAt out
    # (a rename, a mode change) clears the task's time, in the answer, the row and the timer.
    original = Tasks.update

    async def update(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        if "runAt" not in params:
            params = {**params, "runAt": None}
        return await original(self, params)

    patch(Tasks, "update", update)


@variant("last-run-any-task")
def _last_run_any_task() -> None:
    # lastRun is read without its task filter: every task reports the newest run of any
    # task (null only while no task has run).
    async def last_task_run(self: Storage, task_id: str) -> dict[str, Any] | None:
        rows = await self._dicts(
            "SELECT * FROM scheduled_task_runs ORDER BY started_at DESC, rowid DESC LIMIT 1"
        )
        return rows[0] if rows else None

    patch(Storage, "last_task_run", last_task_run)


@variant("manual-run-drops-schedule")
def _manual_run_drops_schedule() -> None:
    # A task run by hand (task/run) counts as done: its timer is dropped, so the task does
    # not run when its runAt comes due, although task/list still shows that runAt.
    original = Tasks.run_now

    async def run_now(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        result = await original(self, params)
        self._arm(params["taskId"], None)
        return result

    patch(Tasks, "run_now", run_now)


@variant("unattended-accept-edits-as-ask")
def _unattended_accept_edits_as_ask() -> None:
    # Unattended runs trust only auto: a task in accept-edits is gated as ask, so its Write
    # and Edit calls are refused with PERMISSION_UNAVAILABLE (Bash is refused, as it should).
    original = TurnRunner._run_call

    async def run_call(
        self: TurnRunner, session: Any, turn_id: str, call: Any, unattended: bool
    ) -> Any:
        if unattended and session.permission_mode == "accept-edits":
            session = replace(session, permission_mode="ask")
        return await original(self, session, turn_id, call, unattended)

    patch(TurnRunner, "_run_call", run_call)


# -- the clock -----------------------------------------------------------------------------


@variant("clock-resumes-after-restart")
def _clock_resumes_after_restart() -> None:
    # The host keeps its clock from going backwards across a restart: at start-up it moves
    # the clock to the latest time it finds recorded, when that is ahead of the system time.
    original = Tasks.schedule_all

    async def schedule_all(self: Tasks) -> None:
        clock = self.host.clock
        if isinstance(clock, ManualClock):
            rows = await self.host.storage._dicts(
                "SELECT max(t) AS latest FROM ("
                "SELECT max(updated_at) AS t FROM sessions "
                "UNION ALL SELECT max(max(created_at), coalesce(max(decided_at), 0)) "
                "FROM plan_approvals "
                "UNION ALL SELECT max(max(started_at), coalesce(max(ended_at), 0)) FROM turns "
                "UNION ALL SELECT max(updated_at) FROM scheduled_tasks "
                "UNION ALL SELECT max(started_at) FROM scheduled_task_runs "
                "UNION ALL SELECT max(created_at) FROM transcript)"
            )
            latest = rows[0]["latest"] if rows else None
            if latest is not None and latest > clock.now_ms():
                clock._now = int(latest)
        await original(self)

    patch(Tasks, "schedule_all", schedule_all)


CASES = [
    BrokenCase(
        "revision-keeps-first-deadline",
        "submit_plan",
        "revised and expired",
        "R3.9",
        "not 30 minutes later",
    ),
    BrokenCase(
        "expiry-notice-without-decided-at",
        "deadline",
        "expires_when_the_time_is_up",
        "R7.2",
        "the expiry was announced with {'decidedAt': None}",
    ),
    BrokenCase(
        "approval-list-newest-first",
        "restart_interruption",
        "user_can_ask_for_a_new_plan",
        "R4.13",
        "no new plan is pending",
    ),
    BrokenCase(
        "artifact-read-only-while-open",
        "artifact_integrity",
        "opening_the_earlier_plan",
        "R3.2",
        "artifact/read failed with ARTIFACT_UNREADABLE",
    ),
    BrokenCase(
        "execution-end-clears-pending",
        "execution",
        "still_waits_for_the_user_once",
        "R4.8",
        "expected the host to refuse",
    ),
    BrokenCase(
        "list-hides-queued-execution",
        "turn_boundaries",
        "approved_plan_waits_to_run",
        "R7.2",
        "session/list shows the session with {'activeExecutionId': None}",
    ),
    BrokenCase(
        "approval-commit-fault-hits-reject",
        "approval",
        "leaves_a_rejection_alone",
        "R4.6",
        "the rejection failed",
    ),
    BrokenCase(
        "task-update-clears-run-at",
        "scheduled_plan",
        "switchedoff_task",
        "P29",
        "the scenario's task was never due",
    ),
    BrokenCase(
        "last-run-any-task",
        "scheduled_plan",
        "its_own_last_run",
        "P29",
        "the task that never ran reports the last run",
    ),
    BrokenCase(
        "manual-run-drops-schedule",
        "scheduled_plan",
        "run_by_hand_still_runs",
        "P29",
        "the task did not run when its time came",
    ),
    BrokenCase(
        "unattended-accept-edits-as-ask",
        "scheduled_plan",
        "needs_no_permission_runs",
        "P8",
        "the Write call ended denied",
    ),
    BrokenCase(
        "clock-resumes-after-restart",
        "restart_interruption",
        "clock_starts_at_the_present",
        "P32",
        "+120.0 minutes from the system time",
    ),
]
