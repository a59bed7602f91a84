"""Broken hosts: a held-out set (transition-table mistakes), written from the contract
alone. Each host's session, approval, execution, turn or task state machine has one entry
wrong: an event accepted where it is refused, a terminal state left, a state not reset,
a self-transition misread, a side effect missing on one edge, or guards in the wrong
order."""

from __future__ import annotations

import weakref
from dataclasses import replace
from typing import Any

from hosts.registry import BrokenCase, patch, variant


# R7.2 (implementing-a-host.md, Sessions: "Every change of what session/get reports ...
# is announced by a session/updated carrying the whole session as it now is, so the last
# one you sent for a session reads as session/get does"; Ordering: "a reject's
# approval/updated ... come before its answer and report the approval and the session").
# Bug: the reject edge announces the session before it clears the session's pending
# approval, so the only session/updated of the reject still names the rejected approval
# in pendingApprovalId; session/get (read afterwards) shows null.
# Recipe: Plan session, a Plan turn calls SubmitPlan; approval/reject; compare the last
# session/updated with session/get: pendingApprovalId differs.
@variant("tx-reject-announces-stale-session")
def reject_announces_stale_session() -> None:
    from reference_host import state
    from reference_host.approvals import Approvals, _facts, _with, approval_wire

    async def reject(self: Approvals, session_id: str, approval_id: str) -> dict[str, Any]:
        host = self.host
        row = await self.require(session_id, approval_id)
        await host.turns.settle(session_id, row.turn_id)
        await self._ensure_decidable(row)
        rejected = _with(row, state.reject(_facts(row)), decided_at=host.clock.now_ms())
        await host.storage.update_approval(rejected)
        host.notify("approval/updated", {"approval": approval_wire(rejected)})
        await host.publish_session(session_id)
        host.set_activity(session_id, pending_approval_id=None)
        return {"approval": approval_wire(rejected)}

    patch(Approvals, "reject", reject)


# P14 (Approval, "At or after the deadline": "an expired approval keeps answering both
# actions with PLAN_APPROVAL_TIMEOUT"), R3.11.
# Bug: the decidability guard tests "not pending" before "expired", so once the deadline
# has been recorded (the timer fired), approve and reject answer APPROVAL_NOT_PENDING
# instead of PLAN_APPROVAL_TIMEOUT. A pending approval hit at its deadline (timer not yet
# fired) still answers PLAN_APPROVAL_TIMEOUT.
# Recipe: submit a plan; conformance/clock/advance 30 min (the approval expires);
# approval/approve or approval/reject -> APPROVAL_NOT_PENDING (expected
# PLAN_APPROVAL_TIMEOUT).
@variant("tx-expired-answers-not-pending")
def expired_answers_not_pending() -> None:
    from reference_host import approvals as approvals_module
    from reference_host.errors import HostError
    from reference_host.state import ApprovalFacts, is_expired

    def ensure_decidable(approval: ApprovalFacts, now_ms: int) -> None:
        if approval.status != "pending":
            raise HostError(
                "APPROVAL_NOT_PENDING",
                f"the approval is {approval.status}; only a pending approval can be decided",
                {"status": approval.status},
            )
        if is_expired(approval.expires_at, now_ms):
            raise HostError("PLAN_APPROVAL_TIMEOUT", "the approval's deadline has passed")

    patch(approvals_module, "ensure_decidable", ensure_decidable)


# R4.4 / R4.12 / C6 (Execution and restart: "an interrupted approval can be neither
# approved nor rejected (APPROVAL_NOT_PENDING)"; Approval: "approve and reject of an
# approval that is approved, rejected or interrupted get APPROVAL_NOT_PENDING and change
# nothing").
# Bug: the guard lists the decided states as approved and rejected only; an approval the
# start-up recovery interrupted is treated as still decidable, so it can be approved (an
# execution starts, a provider call is made: work replayed after a restart) or rejected.
# Recipe: submit a plan; restart the host; approval/approve (or reject) of the
# interrupted approval -> accepted (expected APPROVAL_NOT_PENDING, nothing changes).
@variant("tx-interrupted-approval-decidable")
def interrupted_approval_decidable() -> None:
    from reference_host import approvals as approvals_module
    from reference_host.errors import HostError
    from reference_host.state import ApprovalFacts, is_expired

    def ensure_decidable(approval: ApprovalFacts, now_ms: int) -> None:
        if approval.status == "expired" or (
            approval.status == "pending" and is_expired(approval.expires_at, now_ms)
        ):
            raise HostError("PLAN_APPROVAL_TIMEOUT", "the approval's deadline has passed")
        if approval.status in ("approved", "rejected"):
            raise HostError(
                "APPROVAL_NOT_PENDING",
                f"the approval is {approval.status}; only a pending approval can be decided",
                {"status": approval.status},
            )

    patch(approvals_module, "ensure_decidable", ensure_decidable)


# R4.4 / C6 (Approval, "A decided approval stays decided": approve of an approval that is
# approved gets APPROVAL_NOT_PENDING). The EXECUTION_ACTIVE freedom covers only an approve
# of a new pending plan while an earlier execution is ending.
# Bug: approve checks "another execution is queued or running" before it checks the
# approval's own status, so a second approve of the same approval (a double click) while
# its own execution is queued or running answers EXECUTION_ACTIVE instead of
# APPROVAL_NOT_PENDING.
# Recipe: conformance/fault/arm holdExecution (or let the execution wait on a permission
# question); submit a plan; approval/approve; approval/approve the same approval again ->
# EXECUTION_ACTIVE (expected APPROVAL_NOT_PENDING).
@variant("tx-approve-again-execution-active")
def approve_again_execution_active() -> None:
    from reference_host.approvals import Approvals
    from reference_host.errors import HostError

    original = Approvals.approve

    async def approve(
        self: Approvals, session_id: str, approval_id: str, mode: Any
    ) -> dict[str, Any]:
        await self.require(session_id, approval_id)
        if self.host.activity_of(session_id).active_execution_id is not None:
            raise HostError("EXECUTION_ACTIVE", "another execution is queued or running")
        return await original(self, session_id, approval_id, mode)

    patch(Approvals, "approve", approve, wraps=True)


# R5.7 (Sessions: "While a Plan approval is pending, approve and reject are the only
# controls the session accepts: a prompt, a configuration change or a cancel gets
# APPROVAL_PENDING").
# Bug: cancel only looks for an active turn; with a plan pending (the Plan turn has ended)
# it answers turnId null instead of refusing with APPROVAL_PENDING.
# Recipe: submit a plan (the Plan turn ends, the approval is pending); session/cancel ->
# {"turnId": null} (expected APPROVAL_PENDING).
@variant("tx-cancel-while-pending-accepted")
def cancel_while_pending_accepted() -> None:
    from reference_host import host as host_module
    from reference_host.state import Activity

    def ensure_can_cancel(activity: Activity) -> None:
        return None

    patch(host_module, "ensure_can_cancel", ensure_can_cancel)


# R5.3 / R5.6 (Sessions: "naming a setting with the value the session already has is a
# change like any other: it is accepted while idle, refused while busy or pending").
# Bug: session/configure first compares the requested settings with the stored ones, and
# when every one already has that value it answers the session at once, as a no-op,
# without the busy/pending guard; so a same-value configure is accepted during a turn, an
# execution or a pending approval.
# Recipe: Plan session; submit a plan (approval pending); session/configure
# {"mode": "plan"} -> accepted (expected APPROVAL_PENDING). Or during a running turn,
# session/configure with the session's own permissionMode -> accepted (expected
# SESSION_BUSY).
@variant("tx-configure-same-value-while-busy")
def configure_same_value_while_busy() -> None:
    from reference_host.host import Host

    original = Host.session_configure
    fields = {"mode": "mode", "permissionMode": "permission_mode", "shellId": "shell_id"}

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        same = all(
            getattr(row, column) == params[key] for key, column in fields.items() if key in params
        )
        if "provider" in params:
            same = same and (
                row.provider_base_url == params["provider"]["baseUrl"]
                and row.model == params["provider"]["model"]
            )
        if same:
            wire = self.session_wire(row)
            self.notify("session/updated", {"session": wire})
            return {"session": wire}
        return await original(self, params)

    patch(Host, "session_configure", session_configure, wraps=True)


# R4.7 / R4.5 (Execution and restart: execution/updated's "turnId names the execution's
# turn ...: always once that turn has started (running, completed, and interrupted by a
# cancel, a failure or a restart after it started)").
# Bug: the edge running -> interrupted announces execution/updated with turnId null (the
# implementer treated "interrupted" as possibly-before-the-turn, as for queued); the
# completed edge names the turn correctly.
# Recipe: approve a plan whose execution turn asks a permission question (mode ask, a
# Bash call) or waits on the provider; session/cancel; the execution/updated with
# executionState interrupted has turnId null (expected the execution turn's id).
@variant("tx-interrupted-execution-turnid-null")
def interrupted_execution_turnid_null() -> None:
    from reference_host import state
    from reference_host.approvals import Approvals, approval_wire
    from reference_host.state import ExecutionState

    async def execution_finished(self: Approvals, approval_id: str, final: ExecutionState) -> None:
        row = await self._execution(approval_id)
        assert row.execution_state is not None
        done = replace(row, execution_state=state.advance_execution(row.execution_state, final))
        await self.host.storage.update_approval(done)
        self.host.set_activity(row.session_id, active_execution_id=None)
        self._notify_execution(done, row.execution_turn_id if final == "completed" else None)
        self.host.notify("approval/updated", {"approval": approval_wire(done)})

    patch(Approvals, "execution_finished", execution_finished)


# C4 / R4.5 (Execution and restart: "while the execution is queued or running, the
# session's activeExecutionId names it ..., until its turn ends, also after the turn
# entered Plan with EnterPlanMode").
# Bug: EnterPlanMode is handled as leaving the execution: the session's activeExecutionId
# is cleared when the running turn switches to Plan, although the execution is still
# running (approval/get says running) until the turn ends.
# Recipe: approve a plan; in the execution turn the model calls EnterPlanMode; the
# session/updated announcing mode plan (and session/get while the turn still runs) shows
# activeExecutionId null (expected the execution's id).
@variant("tx-enterplan-drops-active-execution")
def enterplan_drops_active_execution() -> None:
    from reference_host.host import Host
    from reference_host.storage import SessionRow

    async def enter_plan_mode(self: Host, session: SessionRow) -> None:
        await self.storage.update_session(
            replace(session, mode="plan", updated_at=self.clock.now_ms())
        )
        self.set_activity(session.id, active_execution_id=None)
        await self.publish_session(session.id)

    patch(Host, "enter_plan_mode", enter_plan_mode)


# R4.10 / C8 (Execution and restart: the start-up recovery "marks every earlier queued or
# running execution interrupted"; R4.5: queued -> interrupted).
# Bug: the recovery's execution UPDATE matches only execution_state = 'running' (the
# implementer thought of executions as turns); an execution still queued when the host
# stopped stays queued for ever in plan_approvals and approval/get.
# Recipe: conformance/fault/arm holdExecution; submit and approve a plan (the execution
# stays queued); restart the host; approval/get -> executionState "queued" (expected
# "interrupted").
@variant("tx-recovery-skips-queued")
def recovery_skips_queued() -> None:
    from reference_host.storage import Storage

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self.transaction() as conn:
            approvals = await conn.execute(
                "UPDATE plan_approvals SET status = 'interrupted', "
                "status_code = 'TURN_INTERRUPTED', decided_at = ? WHERE status = 'pending'",
                (now,),
            )
            executions = await conn.execute(
                "UPDATE plan_approvals SET execution_state = 'interrupted' "
                "WHERE execution_state = 'running'"
            )
            turns = await conn.execute(
                "UPDATE turns SET state = 'interrupted', ended_at = ? WHERE state = 'active'",
                (now,),
            )
            await conn.execute(
                "UPDATE scheduled_task_runs SET outcome = 'failed', "
                "error_code = 'TURN_INTERRUPTED', "
                "error_message = 'the host stopped before the run finished' "
                "WHERE outcome = 'running'"
            )
        return approvals.rowcount, executions.rowcount, turns.rowcount

    patch(Storage, "recover", recover)


# P29 (Scheduled tasks: "a task switched off and on again (enabled alone) keeps its runAt
# and runs when it comes due").
# Bug: task/update re-arms the task's timer only when the update names runAt, or disarms
# it when the task is switched off; switching it on again with enabled alone leaves it
# without a timer, so it never runs although task/list shows it enabled with its runAt.
# Recipe: task/create (Agent, runAt = now + 1 min); task/update {"enabled": false};
# task/update {"enabled": true}; conformance/clock/advance 2 min -> no run, no
# task/runFinished (expected a run).
@variant("tx-reenabled-task-not-rearmed")
def reenabled_task_not_rearmed() -> None:
    from reference_host.tasks import Tasks

    async def update(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require(params["taskId"])
        columns = {
            "name": "name",
            "prompt": "prompt",
            "mode": "mode",
            "permissionMode": "permission_mode",
            "runAt": "run_at",
            "enabled": "enabled",
        }
        changes = {column: params[key] for key, column in columns.items() if key in params}
        if "provider" in params:
            changes["provider_base_url"] = params["provider"]["baseUrl"]
            changes["model"] = params["provider"]["model"]
        if "enabled" in changes:
            changes["enabled"] = int(changes["enabled"])
        changes["updated_at"] = self.host.clock.now_ms()
        await self.host.storage.update_task(row["id"], changes)
        updated = {**row, **changes}
        if not updated["enabled"]:
            self._arm(row["id"], None)
        elif "runAt" in params:
            self._arm(row["id"], updated["run_at"])
        return {"task": await self.wire(updated)}

    patch(Tasks, "update", update)


# R4.4 / C6 (Execution and restart: "Status moves pending -> approved | rejected |
# expired | interrupted once"; Approval: "Each approval expires at its own deadline ...
# an earlier approval's deadline never expires a later one of the same session, nor takes
# it out of its session's pendingApprovalId").
# Bug: the expiry timer decides "still undecided" by the absence of an execution
# (execution_id is null) instead of by status == pending, so a rejected approval leaves
# its terminal state at its deadline: it becomes expired with PLAN_APPROVAL_TIMEOUT, and
# the session's pendingApprovalId is cleared, even when it names a newer revision.
# Recipe: submit a plan; approval/reject; conformance/clock/advance 30 min ->
# approval/get shows expired (expected rejected). With a revision submitted after the
# reject, its session's pendingApprovalId becomes null while it is still pending.
@variant("tx-rejected-later-expires")
def rejected_later_expires() -> None:
    from reference_host.approvals import TIMEOUT_CODE, Approvals, approval_wire
    from reference_host.state import is_expired

    async def expire(self: Approvals, approval_id: str) -> None:
        host = self.host
        row = await host.storage.get_approval(approval_id)
        if row is None or row.execution_id is not None or row.status == "expired":
            return
        if not is_expired(row.expires_at, host.clock.now_ms()):
            return
        expired = replace(
            row, status="expired", status_code=TIMEOUT_CODE, decided_at=host.clock.now_ms()
        )
        await host.storage.update_approval(expired)
        host.set_activity(row.session_id, pending_approval_id=None)
        host.notify("approval/updated", {"approval": approval_wire(expired)})
        await host.publish_session(row.session_id)

    patch(Approvals, "expire", expire)


# R3.6 / R3.11 (Approval: "Reject takes no permission mode ... After a reject, and after
# an expiry, the session stays in Plan with its permission mode"; ADR §3 "Reject never
# selects or grants an execution mode").
# Bug: the reject edge resets the session's permission mode to the default "ask" (read as
# "reject grants no mode"); the expiry edge leaves it alone, as it should.
# Recipe: session/create {"mode": "plan", "permissionMode": "auto"}; submit a plan;
# approval/reject; session/get -> permissionMode "ask" (expected "auto").
@variant("tx-reject-resets-permission-mode")
def reject_resets_permission_mode() -> None:
    from reference_host.approvals import Approvals

    original = Approvals.reject

    async def reject(self: Approvals, session_id: str, approval_id: str) -> dict[str, Any]:
        host = self.host
        session = await host.require_session(session_id)
        answer = await original(self, session_id, approval_id)
        if session.permission_mode != "ask":
            await host.storage.update_session(
                replace(session, permission_mode="ask", updated_at=host.clock.now_ms())
            )
            await host.publish_session(session_id)
        return answer

    patch(Approvals, "reject", reject, wraps=True)


# R5.1 / R5.3 / R4.9 (Sessions: "While a turn, a Plan run or an approved execution (queued
# or running) is active ..., a second prompt ... a mode, provider, model or
# permission-mode change ... is refused with SESSION_BUSY").
# Bug: "busy" is computed from the active turn only; an approved execution that is still
# queued (its turn not started) does not make the session busy, so a prompt starts a new
# turn and a configuration change is applied beside the queued execution.
# Recipe: conformance/fault/arm holdExecution; submit and approve a plan (execution
# queued); session/prompt -> a turn starts (expected SESSION_BUSY); or session/configure
# {"permissionMode": "auto"} -> accepted (expected SESSION_BUSY).
@variant("tx-queued-execution-not-busy")
def queued_execution_not_busy() -> None:
    from reference_host import host as host_module
    from reference_host.errors import HostError
    from reference_host.state import Activity

    def ensure_idle_for(activity: Activity, what: str) -> None:
        if activity.pending_approval_id is not None:
            raise HostError(
                "APPROVAL_PENDING",
                f"{what} refused: a plan approval is pending; approve or reject it first",
                {"approvalId": activity.pending_approval_id},
            )
        if activity.active_turn_id is not None:
            raise HostError(
                "SESSION_BUSY",
                f"{what} refused: the session has an active turn",
                {"turnId": activity.active_turn_id},
            )

    patch(host_module, "ensure_idle_for", ensure_idle_for)


# P35 (Scheduled tasks: "Every task/run runs the task at once, as a run of its own with
# its own runId and session, also while an earlier run of the same task is still under
# way: it never answers with the earlier run").
# Bug: task/run treats "running" as a state it is already in (a self-transition, read as
# no change): while the task's last run is still running it answers that run again and
# starts nothing.
# Recipe: task/create (Agent); task/run (the provider holds its answer); task/run again
# -> the same runId and sessionId, no second session or provider request (expected a new
# run).
@variant("tx-task-run-returns-running-run")
def task_run_returns_running_run() -> None:
    from reference_host import tasks as tasks_module
    from reference_host.tasks import Tasks

    original = Tasks.run_now

    async def run_now(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require(params["taskId"])
        last = await self.host.storage.last_task_run(row["id"])
        if last is not None and last["outcome"] == "running":
            return {"run": tasks_module._run_wire(last)}
        return await original(self, params)

    patch(Tasks, "run_now", run_now, wraps=True)


# R3.9 / C7 (Approval, "The deadline is createdAt + 30 minutes on the host clock, where
# createdAt is the clock when the approval is created"; Planning, "Revisions": a new
# SubmitPlan creates a new approval).
# Bug: the deadline belongs to the session's plan cycle and is reset only when a plan is
# approved; after a reject or an expiry the revision inherits the earlier approval's
# expiresAt (in the past after an expiry, so the revision expires at the next clock move).
# Recipe: submit a plan; approval/reject; conformance/clock/advance 10 min; submit a
# revision -> its expiresAt is the first approval's (expected its createdAt + 30 min).
@variant("tx-revision-inherits-deadline")
def revision_inherits_deadline() -> None:
    import asyncio
    import sqlite3

    from reference_host import approvals as approvals_module
    from reference_host.approvals import Approvals, approval_wire
    from reference_host.artifacts import discard_artifact, encode_markdown, write_artifact
    from reference_host.errors import HostError
    from reference_host.host import Host
    from reference_host.state import deadline_for
    from reference_host.storage import ApprovalRow, SessionRow

    # each host's open plan cycles: session id -> the cycle's deadline
    cycles: weakref.WeakKeyDictionary[Host, dict[str, int]] = weakref.WeakKeyDictionary()
    approve = Approvals.approve

    def deadlines(approvals: Approvals) -> dict[str, int]:
        host = approvals.host
        assert isinstance(host, Host)
        return cycles.setdefault(host, {})

    async def submit(
        self: Approvals, session: SessionRow, turn_id: str, args: dict[str, Any]
    ) -> ApprovalRow:
        host = self.host
        pending = host.activity_of(session.id).pending_approval_id
        if pending is not None:
            raise HostError(
                "APPROVAL_PENDING", "an earlier plan is still pending", {"approvalId": pending}
            )
        if session.workspace_root is None:
            raise HostError(
                "WORKSPACE_REQUIRED", "a plan artifact needs a session bound to a project"
            )
        title = approvals_module._require_text(args, "title")
        question = approvals_module._require_text(args, "question")
        content = encode_markdown(args["markdown"])
        artifact = await asyncio.to_thread(
            write_artifact, session.workspace_root, content, host.faults.take
        )
        created = host.clock.now_ms()
        cycle = deadlines(self)
        expires = cycle.setdefault(session.id, deadline_for(created))
        row = ApprovalRow(
            id=host.new_id("apr"),
            session_id=session.id,
            turn_id=turn_id,
            title=title,
            question=question,
            artifact_path=artifact.relative_path,
            artifact_sha256=artifact.sha256,
            artifact_bytes=artifact.byte_size,
            created_at=created,
            expires_at=expires,
            status="pending",
            status_code=None,
            decided_at=None,
            permission_mode=None,
            execution_id=None,
            execution_state=None,
            execution_turn_id=None,
        )
        try:
            await host.storage.insert_approval(row)
        except sqlite3.Error as exc:
            await asyncio.to_thread(
                discard_artifact, session.workspace_root, artifact.relative_path
            )
            raise HostError("TOOL_FAILED", f"the approval could not be recorded: {exc}") from exc
        host.set_activity(session.id, pending_approval_id=row.id)
        host.clock.call_at(row.expires_at, lambda: self.expire(row.id))
        host.notify("approval/updated", {"approval": approval_wire(row)})
        return row

    async def approve_ends_cycle(
        self: Approvals, session_id: str, approval_id: str, mode: Any
    ) -> dict[str, Any]:
        answer = await approve(self, session_id, approval_id, mode)
        deadlines(self).pop(session_id, None)
        return answer

    patch(Approvals, "submit", submit)
    patch(Approvals, "approve", approve_ends_cycle, wraps=True)


# R5.3 / R7.2 (Sessions: "naming a setting with the value the session already has is a
# change like any other: it is accepted while idle, refused while busy or pending, and
# announced with session/updated before its answer").
# Bug: the busy/pending guard is right, but an accepted configure whose settings all
# equal the stored ones is treated as a self-transition that changes nothing: it answers
# the session and sends no session/updated.
# Recipe: idle Agent session; session/configure {"mode": "agent"} -> answered with the
# session, but no session/updated arrives before the answer (expected one).
@variant("tx-configure-same-value-silent")
def configure_same_value_silent() -> None:
    from reference_host.host import Host
    from reference_host.state import ensure_idle_for

    original = Host.session_configure
    fields = {"mode": "mode", "permissionMode": "permission_mode", "shellId": "shell_id"}

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        ensure_idle_for(self.activity_of(row.id), "configuration change")
        same = all(
            getattr(row, column) == params[key] for key, column in fields.items() if key in params
        )
        if "provider" in params:
            same = same and (
                row.provider_base_url == params["provider"]["baseUrl"]
                and row.model == params["provider"]["model"]
            )
        if same:
            return {"session": self.session_wire(row)}
        return await original(self, params)

    patch(Host, "session_configure", session_configure, wraps=True)


# R4.14 (ADR §4: "If approval already committed the session to Agent, interrupting its
# queued or running execution leaves the session in Agent; the user may start a new turn
# without automatic Plan re-entry"; Execution and restart: "the recovery changes no
# session's mode").
# Bug: the start-up recovery treats an interrupted execution like an interrupted
# approval and puts its session back in Plan, so the user can re-plan the work that was
# cut short.
# Recipe: conformance/fault/arm holdExecution; submit and approve a plan (session in
# Agent, execution queued); restart; session/get -> mode "plan" (expected "agent").
@variant("tx-recovery-execution-back-to-plan")
def recovery_execution_back_to_plan() -> None:
    from reference_host.storage import Storage

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self.transaction() as conn:
            approvals = await conn.execute(
                "UPDATE plan_approvals SET status = 'interrupted', "
                "status_code = 'TURN_INTERRUPTED', decided_at = ? WHERE status = 'pending'",
                (now,),
            )
            await conn.execute(
                "UPDATE sessions SET mode = 'plan' WHERE id IN (SELECT session_id FROM "
                "plan_approvals WHERE execution_state IN ('queued', 'running'))"
            )
            executions = await conn.execute(
                "UPDATE plan_approvals SET execution_state = 'interrupted' "
                "WHERE execution_state IN ('queued', 'running')"
            )
            turns = await conn.execute(
                "UPDATE turns SET state = 'interrupted', ended_at = ? WHERE state = 'active'",
                (now,),
            )
            await conn.execute(
                "UPDATE scheduled_task_runs SET outcome = 'failed', "
                "error_code = 'TURN_INTERRUPTED', "
                "error_message = 'the host stopped before the run finished' "
                "WHERE outcome = 'running'"
            )
        return approvals.rowcount, executions.rowcount, turns.rowcount

    patch(Storage, "recover", recover)


# R6.3 (Scheduled tasks: "a refused Plan task stays in Plan, and each later run is
# refused again ... A refused run changes nothing else of the task either: it stays
# enabled").
# Bug: a refused run moves the task to a "switched off" state (so that it does not keep
# firing and being refused): the task is stored and listed with enabled false.
# Recipe: task/create {"mode": "plan", ...}; task/run -> PLAN_REQUIRES_INTERACTIVE_SESSION;
# task/list -> enabled false (expected true).
@variant("tx-refused-task-disabled")
def refused_task_disabled() -> None:
    from reference_host.errors import HostError
    from reference_host.tasks import PLAN_REFUSAL, Tasks

    original = Tasks.run

    async def run(self: Tasks, row: dict[str, Any]) -> dict[str, Any]:
        try:
            return await original(self, row)
        except HostError as error:
            if error.code == PLAN_REFUSAL:
                await self.host.storage.update_task(
                    row["id"], {"enabled": 0, "updated_at": self.host.clock.now_ms()}
                )
                self._arm(row["id"], None)
            raise

    patch(Tasks, "run", run, wraps=True)


# P7 (Approval, Permission modes: "A second answer to the same question ... gets
# PERMISSION_REQUEST_NOT_FOUND and changes nothing").
# Bug: an answered question stays known, and a repeat of the same answer is taken as a
# self-transition (answered -> answered) and acknowledged with {} instead of refused; a
# different second answer is still refused.
# Recipe: session in ask mode; a turn's Bash call asks; permission/respond allow;
# permission/respond allow again for the same requestId -> {} (expected
# PERMISSION_REQUEST_NOT_FOUND).
@variant("tx-repeat-permission-answer-accepted")
def repeat_permission_answer_accepted() -> None:
    from reference_host.permissions import PermissionBroker

    answered: weakref.WeakKeyDictionary[PermissionBroker, dict[str, str]] = (
        weakref.WeakKeyDictionary()
    )
    original = PermissionBroker.respond

    def respond(self: PermissionBroker, request_id: str, decision: str) -> None:
        seen = answered.setdefault(self, {})
        if seen.get(request_id) == decision:
            return
        original(self, request_id, decision)
        seen[request_id] = decision

    patch(PermissionBroker, "respond", respond, wraps=True)


# R5.1 (Sessions, Cancel: "session/cancel answers with the id of the turn it cancels, or
# turnId: null when the session has no active turn (a second cancel included)").
# Bug: cancel is made idempotent: a repeat cancel once the cancelled turn has ended
# answers that turn's id again (cancelled -> cancelled read as the same transition)
# instead of null. The record is cleared when the session's next turn starts.
# Recipe: start a turn (the provider holds its answer); session/cancel -> the turn's id;
# after turn/ended, session/cancel again -> the same id (expected null).
@variant("tx-repeat-cancel-answers-turn")
def repeat_cancel_answers_turn() -> None:
    from reference_host.turns import TurnRunner

    cancelled: weakref.WeakKeyDictionary[TurnRunner, dict[str, str]] = weakref.WeakKeyDictionary()
    cancel = TurnRunner.cancel
    start = TurnRunner.start

    async def cancel_once(self: TurnRunner, session_id: str) -> str | None:
        last = cancelled.setdefault(self, {})
        turn_id = await cancel(self, session_id)
        if turn_id is not None:
            last[session_id] = turn_id
            return turn_id
        return last.get(session_id)

    async def start_clears(self: TurnRunner, session: Any, *args: Any, **kwargs: Any) -> str:
        cancelled.setdefault(self, {}).pop(session.id, None)
        return await start(self, session, *args, **kwargs)

    patch(TurnRunner, "cancel", cancel_once, wraps=True)
    patch(TurnRunner, "start", start_clears, wraps=True)


CASES = [
    BrokenCase(
        "tx-reject-announces-stale-session",
        "submit_plan",
        "rejecting_a_plan_leaves_the_sessions_permission_mode",
        "R7.2",
        "two reports of one record disagreed",
    ),
    BrokenCase(
        "tx-expired-answers-not-pending",
        "deadline",
        "an_expired_plan_cannot_be_rejected_afterwards",
        "P14",
        "expected PLAN_APPROVAL_TIMEOUT",
    ),
    BrokenCase(
        "tx-interrupted-approval-decidable",
        "approval",
        "interrupted_by_a_restart_cannot_be_approved_afterwards",
        "R4.4",
        "expected the host to refuse",
    ),
    BrokenCase(
        "tx-approve-again-execution-active",
        "approval",
        "two_approvals_sent_at_once",
        "R4.4",
        "the second approval failed with EXECUTION_ACTIVE",
    ),
    BrokenCase(
        "tx-cancel-while-pending-accepted",
        "turn_boundaries",
        "cancelling_while_a_plan_is_pending_is_refused",
        "R5.7",
        "expected the host to refuse",
    ),
    BrokenCase(
        "tx-configure-same-value-while-busy",
        "turn_boundaries",
        "changing_the_mode_to_the_same_one_during_a_turn",
        "R5.3",
        "expected the host to refuse",
    ),
    BrokenCase(
        "tx-interrupted-execution-turnid-null",
        "execution",
        "cancelled_as_soon_as_it_has_started_is_interrupted",
        "R4.7",
        "interrupted with turnId None",
    ),
    BrokenCase(
        "tx-enterplan-drops-active-execution",
        "execution",
        "still_waits_for_the_user_once_that_execution_ended",
        "R7.2",
        "activeExecutionId",
    ),
    BrokenCase(
        "tx-recovery-skips-queued",
        "restart_interruption",
        "queued_execution_and_another_sessions_pending_plan",
        "R4.10",
        "storage showed the execution queued",
    ),
    BrokenCase(
        "tx-reenabled-task-not-rearmed",
        "scheduled_plan",
        "switched_off_and_on_again_runs_when_its_time_comes",
        "P29",
        "the task did not",
    ),
    BrokenCase(
        "tx-rejected-later-expires",
        "deadline",
        "still_waits_at_the_rejected_plans_deadline",
        "R3.8",
        "the session names the pending approval None",
    ),
    BrokenCase(
        "tx-reject-resets-permission-mode",
        "submit_plan",
        "rejecting_a_plan_leaves_the_sessions_permission_mode_auto",
        "R3.6",
        "permission mode changed from auto to ask",
    ),
    BrokenCase(
        "tx-queued-execution-not-busy",
        "turn_boundaries",
        "prompt_while_an_approved_plan_waits_to_run",
        "R5.1",
        "expected the host to refuse",
    ),
    BrokenCase(
        "tx-task-run-returns-running-run",
        "scheduled_plan",
        "run_again_while_its_first_run_is_under_way",
        "P35",
        "instead of starting one",
    ),
    BrokenCase(
        "tx-revision-inherits-deadline",
        "deadline",
        "still_waits_at_the_rejected_plans_deadline",
        "R3.9",
        "each plan expires at its own deadline",
    ),
    BrokenCase(
        "tx-configure-same-value-silent",
        "sessions",
        "takes_the_settings_it_already_has",
        "R7.2",
        "answered without a session/updated",
    ),
    BrokenCase(
        "tx-recovery-execution-back-to-plan",
        "restart_interruption",
        "running_execution_is_interrupted_when_the_host_restarts",
        "R4.14",
        "after the restart the session is in plan",
    ),
    BrokenCase(
        "tx-refused-task-disabled",
        "scheduled_plan",
        "refused_task_stays_switched_on_when_it_comes_due",
        "P29",
        "enabled: False",
    ),
    BrokenCase(
        "tx-repeat-cancel-answers-turn",
        "turn_boundaries",
        "second_cancel_after_the_turn_ended_cancels_nothing",
        "R5.1",
        "the host says it cancelled the turn",
    ),
    BrokenCase(
        "tx-repeat-permission-answer-accepted",
        "execution",
        "cannot_be_answered_again_with_the_same_answer",
        "P7",
        "expected the host to refuse",
    ),
]
