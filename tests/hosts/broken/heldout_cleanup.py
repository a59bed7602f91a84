"""Broken hosts: a held-out set (what ends must be cleaned up, and nothing else with it),
written from the contract alone."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import weakref
from dataclasses import replace
from typing import Any

from hosts.registry import BrokenCase, patch, variant


# P26 ("deleting one task leaves every other task's time as it was"; "A task's `name` need
# not be unique: two tasks of one name are two tasks, each with its own time").
# Bug: task/delete unschedules the deleted task's timer by the task's name (the label the
# scheduler shows) instead of by its id, so every other task of the same name is taken off
# the schedule too; their rows still show their runAt.
# Observe: the surviving namesake never runs when its runAt comes due (no
# task/runFinished, no session, no provider call).
# Recipe: task/create A {name "nightly", runAt now+1min}; task/create B {name "nightly",
# runAt now+2min}; task/delete B; clock/advance 5 minutes -> A does not run.
@variant("cln-delete-disarms-namesake")
def delete_disarms_namesake() -> None:
    from reference_host.tasks import Tasks

    async def delete(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require(params["taskId"])
        for other in await self.host.storage.list_tasks():
            if other["name"] == row["name"]:
                self._arm(other["id"], None)
        await self.host.storage.delete_task(row["id"])
        return {}

    patch(Tasks, "delete", delete)


# P29 ("A `task/update` that changes `runAt` replaces the earlier time: the task runs at the
# new time only, not also at the old one"; "it runs once when its `runAt` comes due").
# Bug: arming a task's timer stores the new handle over the old one without cancelling the
# old one (only an unschedule, runAt null or disabled, cancels). Every task/update of an
# armed task leaves its earlier timer live, and that timer runs the task too.
# Observe: two runs (two task/runFinished, two sessions) for one due time, or a run at the
# old time.
# Recipe: task/create Agent task runAt T1; task/update runAt T2 (> T1); clock/set T1 -> the
# task runs (it should not); clock/set T2 -> it runs again.
@variant("cln-rearm-keeps-old-timer")
def rearm_keeps_old_timer() -> None:
    from reference_host.tasks import Tasks

    def _arm(self: Tasks, task_id: str, run_at: int | None) -> None:
        if run_at is None:
            previous = self._timers.pop(task_id, None)
            if previous is not None:
                previous.cancel()
            return
        self._timers[task_id] = self.host.clock.call_at(run_at, lambda: self._fire(task_id))

    patch(Tasks, "_arm", _arm)


# P7 ("A second answer to the same question, an answer to an id never asked, or one to the
# question of a turn that has ended (a cancelled one included) gets
# `PERMISSION_REQUEST_NOT_FOUND` and changes nothing").
# Bug: an open question is forgotten only when it was answered (the pop follows the await,
# not a `finally`), and permission/respond checks only that the id is known, quietly
# ignoring an answer to a question that can no longer be resolved. A question of a
# cancelled turn therefore lives on.
# Observe: permission/respond to the question of a cancelled turn answers `{}` instead of
# PERMISSION_REQUEST_NOT_FOUND.
# Recipe: session in `ask`; prompt; model calls Bash -> permission/requested R;
# session/cancel; permission/respond R allow -> success (expected the error).
@variant("cln-question-outlives-cancel")
def question_outlives_cancel() -> None:
    from reference_host import permissions
    from reference_host.errors import HostError
    from reference_host.ids import new_id
    from reference_host.permissions import PermissionBroker

    async def ask(
        self: PermissionBroker, session_id: str, turn_id: str, tool: str, tool_input: Any
    ) -> bool:
        request_id = new_id("perm")
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._open[request_id] = permissions._Request(session_id, answer)
        self._notify(
            "permission/requested",
            {
                "sessionId": session_id,
                "turnId": turn_id,
                "requestId": request_id,
                "tool": tool,
                "input": tool_input,
            },
        )
        allowed = await answer
        self._open.pop(request_id, None)
        return allowed

    def respond(self: PermissionBroker, request_id: str, decision: str) -> None:
        request = self._open.get(request_id)
        if request is None:
            raise HostError(
                "PERMISSION_REQUEST_NOT_FOUND", f"no open permission request {request_id!r}"
            )
        if not request.answer.done():
            request.answer.set_result(decision == "allow")

    patch(PermissionBroker, "ask", ask)
    patch(PermissionBroker, "respond", respond)


# R5.9 ("cancelling one session never ends another's turn"; work and events stay in their
# session) and P7 (a question "answered once by `permission/respond`"; "a denied call ...
# reports `PERMISSION_DENIED`" only on the user's deny).
# Bug: session/cancel withdraws the open permission questions so that no stale card stays
# on screen, but it withdraws every open question of the host, not only the cancelled
# session's: each one is resolved as denied.
# Observe: another session's call that waits for an answer ends `denied` with
# PERMISSION_DENIED although nobody answered it; answering it afterwards gets
# PERMISSION_REQUEST_NOT_FOUND.
# Recipe: sessions A and B in `ask`; prompt both; both models call Bash -> two
# permission/requested; session/cancel A -> B's turn/toolResult arrives `denied`
# PERMISSION_DENIED; permission/respond B's request -> PERMISSION_REQUEST_NOT_FOUND.
@variant("cln-cancel-withdraws-all-questions")
def cancel_withdraws_all_questions() -> None:
    from reference_host.turns import TurnRunner

    original = TurnRunner.cancel

    async def cancel(self: TurnRunner, session_id: str) -> str | None:
        for request in list(self.host.permissions._open.values()):
            if not request.answer.done():
                request.answer.set_result(False)
        return await original(self, session_id)

    patch(TurnRunner, "cancel", cancel, wraps=True)


# R4.4 (status moves `pending -> approved | rejected | expired | interrupted` once; "A
# decided approval stays decided"; "An approval approved, rejected or interrupted before its
# deadline keeps answering APPROVAL_NOT_PENDING after it too") and R3.11 ("an earlier
# approval's deadline never expires a later one of the same session, nor takes it out of its
# session's pendingApprovalId").
# Bug: the deadline timer of a rejected plan still acts: the expiry callback skips the
# terminal statuses it lists, and the list misses `rejected`. At the old deadline the
# rejected approval is rewritten `expired` / PLAN_APPROVAL_TIMEOUT, and the session's
# pending slot is cleared, even when it now holds a newer plan.
# Observe: approval/get of the rejected approval reads `expired` after its deadline (and an
# approve or reject of it answers PLAN_APPROVAL_TIMEOUT); a revision submitted after the
# rejection drops out of session/get's pendingApprovalId at the old deadline.
# Recipe: Plan prompt -> SubmitPlan (approval A); approval/reject A; prompt -> SubmitPlan
# (approval B); clock/advance 30 min from A's createdAt (before B's expiresAt) -> A reads
# expired, session's pendingApprovalId is null while B is still pending.
@variant("cln-rejected-plan-still-expires")
def rejected_plan_still_expires() -> None:
    from reference_host import approvals as approvals_module
    from reference_host.approvals import Approvals, approval_wire
    from reference_host.state import is_expired

    async def expire(self: Approvals, approval_id: str) -> None:
        host = self.host
        row = await host.storage.get_approval(approval_id)
        if row is None or row.status in ("approved", "expired", "interrupted"):
            return
        if not is_expired(row.expires_at, host.clock.now_ms()):
            return
        expired = replace(
            row,
            status="expired",
            status_code=approvals_module.TIMEOUT_CODE,
            decided_at=host.clock.now_ms(),
        )
        await host.storage.update_approval(expired)
        host.set_activity(row.session_id, pending_approval_id=None)
        host.notify("approval/updated", {"approval": approval_wire(expired)})
        await host.publish_session(row.session_id)

    patch(Approvals, "expire", expire)


# R4.5 ("when the turn ends it is ... `interrupted` when it did not (cancelled, failed, ...),
# and `activeExecutionId` is null, in notifications, `approval/get` and storage alike") and
# R5.6 / R5.1 (the session is idle afterwards and takes a new prompt).
# Bug: the session's active-execution slot is released only when the execution completes;
# an execution that ends interrupted (its turn cancelled or failed) is recorded interrupted
# but stays the session's activeExecutionId.
# Observe: after cancelling an execution turn, session/get still names the execution in
# activeExecutionId, and the next session/prompt (or configure) gets SESSION_BUSY; a later
# plan's approve gets EXECUTION_ACTIVE.
# Recipe: Plan prompt -> SubmitPlan; approve (auto); the execution's model calls Bash on a
# gate; session/cancel -> turn/ended cancelled, execution interrupted; session/get ->
# activeExecutionId still set; session/prompt -> SESSION_BUSY.
@variant("cln-interrupted-execution-stays-active")
def interrupted_execution_stays_active() -> None:
    from reference_host import state
    from reference_host.approvals import Approvals, approval_wire
    from reference_host.state import ExecutionState

    async def execution_finished(self: Approvals, approval_id: str, final: ExecutionState) -> None:
        row = await self._execution(approval_id)
        assert row.execution_state is not None
        done = replace(row, execution_state=state.advance_execution(row.execution_state, final))
        await self.host.storage.update_approval(done)
        if final == "completed":
            self.host.set_activity(row.session_id, active_execution_id=None)
        self._notify_execution(done, row.execution_turn_id)
        self.host.notify("approval/updated", {"approval": approval_wire(done)})

    patch(Approvals, "execution_finished", execution_finished)


# P19 ("when a command ends, because its shell exited, it timed out or its turn was
# cancelled, every process it started ends too, including ones that left its process group
# (`setsid`, double fork) ...; none outlives the command or your host").
# Bug: the cancel path takes a shortcut: it kills the command's process group at once and
# skips the sweep for processes that left the group, which only the exit and timeout paths
# run. (The same shortcut serves the clean stop, which also cancels the running turns.)
# Observe: a process the command started under `setsid` is still alive after the cancelled
# command's command/exited (and after the host stopped).
# Recipe: Agent `auto`; prompt; model calls Bash "setsid sleep 600 & wait"; after
# command/started, session/cancel -> command/exited cancelled: true, yet the setsid'd sleep
# still runs.
@variant("cln-cancel-kills-group-only")
def cancel_kills_group_only() -> None:
    from reference_host import commands

    original = commands._kill_group

    def _kill_group(process: asyncio.subprocess.Process) -> None:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            return
        original(process)

    patch(commands, "_kill_group", _kill_group, wraps=True)


# R4.10 ("marks every earlier `queued` or `running` execution `interrupted`"), C8 and R4.14
# (held executions: `holdExecution` | R4.10, R4.14, C8).
# Bug: the start-up recovery finds the executions to interrupt through the turns the
# previous process left active (execution_turn_id of an active turn), so an execution that
# was still queued, whose turn had not started, is missed and reads `queued` for ever.
# Observe: after a restart, approval/get and plan_approvals show executionState `queued`
# (expected `interrupted`).
# Recipe: Plan prompt -> SubmitPlan; conformance/fault/arm holdExecution; approve; restart
# the host; approval/get -> executionState still queued.
@variant("cln-recovery-misses-queued-execution")
def recovery_misses_queued_execution() -> None:
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
                "WHERE execution_state IN ('queued', 'running') AND execution_turn_id IN "
                "(SELECT id FROM turns WHERE state = 'active')"
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


# P7 ("a question asked after a restart never has the id of one asked before it (a client
# may still hold the old one)").
# Bug: permission request ids are numbered per host process (perm-1, perm-2, ...), which is
# unique among live questions, but the numbering starts again with every start, so a
# question asked after a restart re-uses the id of one the previous process asked.
# (The counter lives on the PermissionBroker instance: each new host process, or in-process
# host, starts it afresh; that is the bug.)
# Observe: the first permission/requested after a restart carries the same requestId as the
# first one before it; a stale client's answer to the old question answers the new one.
# Recipe: `ask` session; prompt; Bash -> permission/requested perm-1; answer it; restart;
# prompt; Bash -> permission/requested perm-1 again.
# Keyed by the host's PermissionBroker: one per Host, gone with it.
_PERMISSION_NUMBERS: weakref.WeakKeyDictionary[Any, itertools.count[int]] = (
    weakref.WeakKeyDictionary()
)


@variant("cln-question-ids-restart-at-one")
def question_ids_restart_at_one() -> None:
    from reference_host import permissions
    from reference_host.permissions import PermissionBroker

    async def ask(
        self: PermissionBroker, session_id: str, turn_id: str, tool: str, tool_input: Any
    ) -> bool:
        numbers = _PERMISSION_NUMBERS.setdefault(self, itertools.count(1))
        request_id = f"perm-{next(numbers)}"
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._open[request_id] = permissions._Request(session_id, answer)
        self._notify(
            "permission/requested",
            {
                "sessionId": session_id,
                "turnId": turn_id,
                "requestId": request_id,
                "tool": tool,
                "input": tool_input,
            },
        )
        try:
            return await answer
        finally:
            self._open.pop(request_id, None)

    patch(PermissionBroker, "ask", ask)


# R3.11 (expiry: "the row becomes `expired` ... and an `approval/updated` announces it"),
# R1.11 ("after a plan was rejected or expired, a new `SubmitPlan` in a new turn creates a
# new approval"), R5.7 ("Once the approval is decided, the session takes changes again")
# and R7.2 (session/list and session/get report pendingApprovalId as it is).
# Bug: the deadline timer records the expiry in the row and announces it, but the session's
# in-memory pending slot is cleared only by approve and reject, so an expired approval stays
# the session's pendingApprovalId.
# Observe: after the expiry, session/get still names the expired approval in
# pendingApprovalId, and session/prompt / session/configure get APPROVAL_PENDING.
# Recipe: Plan prompt -> SubmitPlan; clock/advance 30 min -> approval/updated expired;
# session/get -> pendingApprovalId still set; session/prompt -> APPROVAL_PENDING.
@variant("cln-expiry-keeps-pending-slot")
def expiry_keeps_pending_slot() -> None:
    from reference_host import approvals as approvals_module
    from reference_host.approvals import Approvals, approval_wire
    from reference_host.state import is_expired

    async def expire(self: Approvals, approval_id: str) -> None:
        host = self.host
        row = await host.storage.get_approval(approval_id)
        if row is None or row.status != "pending":
            return
        if not is_expired(row.expires_at, host.clock.now_ms()):
            return
        expired = replace(
            row,
            status="expired",
            status_code=approvals_module.TIMEOUT_CODE,
            decided_at=host.clock.now_ms(),
        )
        await host.storage.update_approval(expired)
        host.notify("approval/updated", {"approval": approval_wire(expired)})
        await host.publish_session(row.session_id)

    patch(Approvals, "expire", expire)


# P8 / P7 ("Once the run has ended, the user may prompt that session, and its turns are
# attended: its permission mode asks as in any session (P7); only the run's own turn is
# unattended (P8)").
# Bug: the host marks the session it creates for a scheduled run as unattended and never
# takes the mark off when the run ends, so every later turn of that session is treated as
# unattended too.
# Observe: a prompt in a finished run's session whose model calls Bash (task permission
# mode `ask`) gets turn/toolResult `denied` PERMISSION_UNAVAILABLE at once, with no
# permission/requested.
# Recipe: task/create Agent task, permissionMode ask; task/run -> run completes
# (task/runFinished); session/prompt in run.sessionId; model calls Bash -> expected
# permission/requested, got PERMISSION_UNAVAILABLE.
# Keyed by the host's TurnRunner: one per Host, gone with it.
_UNATTENDED_SESSIONS: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()


@variant("cln-run-session-stays-unattended")
def run_session_stays_unattended() -> None:
    from reference_host.ports import TurnEnded
    from reference_host.storage import ApprovalRow, SessionRow
    from reference_host.turns import TurnRunner

    original = TurnRunner.start

    async def start(
        self: TurnRunner,
        session: SessionRow,
        kind: str,
        user_text: str,
        approval: ApprovalRow | None = None,
        unattended: bool = False,
        on_end: TurnEnded | None = None,
    ) -> str:
        marked = _UNATTENDED_SESSIONS.setdefault(self, set())
        if unattended:
            marked.add(session.id)
        return await original(
            self, session, kind, user_text, approval, session.id in marked, on_end
        )

    patch(TurnRunner, "start", start, wraps=True)


# P10 ("`Bash` runs the command and gives its output, in Plan as in Agent") and R5.1 / P19
# (a cancelled turn's command has ended; "the session is idle afterwards and takes a new
# prompt").
# Bug: the host allows one command at a time per session and releases the session's command
# slot after the command returns, not in a `finally`: a command that ends by its turn's
# cancellation (or a Bash refused before it starts) leaves the slot taken, and every later
# Bash of that session is refused as if a command were still running.
# Observe: after a turn was cancelled during a command, the next turn's Bash gets
# turn/toolResult `error` TOOL_FAILED without command/started.
# Recipe: Agent `auto`; prompt; Bash on a gate; session/cancel; prompt again; model calls
# Bash "echo hi" -> TOOL_FAILED instead of output "hi".
# Keyed by the host's TurnRunner: one per Host, gone with it.
_COMMAND_SLOTS: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()


@variant("cln-cancelled-command-holds-slot")
def cancelled_command_holds_slot() -> None:
    from reference_host.errors import HostError
    from reference_host.storage import SessionRow
    from reference_host.turns import CallOutcome, TurnRunner

    original = TurnRunner._bash

    async def _bash(
        self: TurnRunner, session: SessionRow, turn_id: str, args: dict[str, Any]
    ) -> CallOutcome:
        running = _COMMAND_SLOTS.setdefault(self, set())
        if session.id in running:
            raise HostError("TOOL_FAILED", "a command is already running in this session")
        running.add(session.id)
        outcome = await original(self, session, turn_id, args)
        running.discard(session.id)
        return outcome

    patch(TurnRunner, "_bash", _bash, wraps=True)


# P35 ("Every run ends: a run whose turn was cancelled (`session/cancel` on the run's
# session) ends `failed`, with `task/runFinished`, like one whose provider failed").
# Bug: the turn's end hook (which records and announces the run's end) is called only for
# turns that completed or failed: a cancelled turn is taken for the user's doing, not a run
# result, so the run is left `running`.
# Observe: after session/cancel of a run's session, no task/runFinished arrives, and
# task/list's lastRun and scheduled_task_runs keep outcome `running`.
# Recipe: task/create Agent task (auto); task/run; the model calls Bash on a gate;
# session/cancel run.sessionId -> turn/ended cancelled but no task/runFinished; task/list ->
# lastRun.outcome running.
@variant("cln-cancelled-run-never-finishes")
def cancelled_run_never_finishes() -> None:
    from reference_host.errors import HostError
    from reference_host.ports import TurnEnded
    from reference_host.state import ExecutionState
    from reference_host.storage import ApprovalRow
    from reference_host.turns import TurnRunner

    async def _end(
        self: TurnRunner,
        session_id: str,
        turn_id: str,
        approval: ApprovalRow | None,
        on_end: TurnEnded | None,
        outcome: str,
        error: HostError | None,
    ) -> None:
        host = self.host
        await host.storage.end_turn(turn_id, outcome, host.clock.now_ms())
        if approval is not None:
            final: ExecutionState = "completed" if outcome == "completed" else "interrupted"
            await host.approvals.execution_finished(approval.id, final)
        if on_end is not None and outcome != "cancelled":
            await on_end(outcome, error)
        host.set_activity(session_id, active_turn_id=None)
        host.notify(
            "turn/ended",
            {
                "sessionId": session_id,
                "turnId": turn_id,
                "outcome": outcome,
                "error": error.to_data() if error else None,
            },
        )
        await host.publish_session(session_id)

    patch(TurnRunner, "_end", _end)


CASES = [
    BrokenCase(
        "cln-delete-disarms-namesake",
        "scheduled_plan",
        "deleting_a_task_leaves",
        "P29",
        "the host announced no run of it",
    ),
    BrokenCase(
        "cln-rearm-keeps-old-timer",
        "scheduled_plan",
        "moved_to_a_later_time",
        "P29",
        "the host sent turn/started for the task at the time it was moved from",
    ),
    BrokenCase(
        "cln-question-outlives-cancel",
        "turn_boundaries",
        "a_question_of_a_cancelled_turn",
        "P7",
        "expected the host to refuse",
    ),
    BrokenCase(
        "cln-cancel-withdraws-all-questions",
        "isolation",
        "leaves_another_sessions_question_open",
        "R5.9",
        "closed the second session's question",
    ),
    BrokenCase(
        "cln-rejected-plan-still-expires",
        "approval",
        "rejected_before_its_deadline_stays_rejected",
        "R4.4",
        "expected APPROVAL_NOT_PENDING",
    ),
    BrokenCase(
        "cln-interrupted-execution-stays-active",
        "execution",
        "an_execution_whose_turn_is_cancelled_is_interrupted",
        "R4.5",
        "the session still runs",
    ),
    BrokenCase(
        "cln-cancel-kills-group-only",
        "shell",
        "ends_when_the_turn_is_cancelled",
        "P19",
        "processes the command started are still alive after it ended",
    ),
    BrokenCase(
        "cln-recovery-misses-queued-execution",
        "restart_interruption",
        "still_waiting_in_the_queue",
        "R4.10",
        "storage showed the execution queued, not interrupted",
    ),
    BrokenCase(
        "cln-question-ids-restart-at-one",
        "execution",
        "a_question_asked_after_a_restart",
        "P7",
        "expected the host to refuse",
    ),
    BrokenCase(
        "cln-expiry-keeps-pending-slot",
        "deadline",
        "with_nobody_looking",
        "R3.11",
        "the session still waits",
    ),
    BrokenCase(
        "cln-run-session-stays-unattended",
        "scheduled_plan",
        "once_its_run_has_ended",
        "P8",
        "without asking the user",
    ),
    BrokenCase(
        "cln-cancelled-command-holds-slot",
        "shell",
        "next_command_runs_after_a_cancelled",
        "C5",
        "ended without starting the model's command",
    ),
    BrokenCase(
        "cln-cancelled-run-never-finishes",
        "scheduled_plan",
        "a_run_whose_turn_is_cancelled_ends_failed",
        "P35",
        "never finished (no task/runFinished)",
        slow=True,
    ),
]
