"""Broken hosts: a held-out set (derived state derived wrongly), written from the contract
alone."""

from __future__ import annotations

import asyncio
import hashlib
import weakref
from dataclasses import replace
from typing import Any

from hosts.registry import BrokenCase, patch, variant


# R3.11, R5.7, R7.2: when the clock reaches expiresAt the approval expires by itself, and
# once it is no longer pending the session takes changes again; session/get reports the
# pending approval as it now is (`pendingApprovalId`).
# Bug: the session's pendingApprovalId is a flag kept beside the approval row; the expiry
# timer updates the row (status expired, PLAN_APPROVAL_TIMEOUT) but forgets the flag, so
# the session still names the expired approval and refuses a prompt with APPROVAL_PENDING.
# Recipe: Plan session, prompt -> model SubmitPlan; clock/advance 30 min; approval/get ->
# expired; session/get -> pendingApprovalId still the approval id (expected null);
# session/prompt -> APPROVAL_PENDING (expected a turn).
@variant("der-expiry-keeps-pending-flag")
def expiry_keeps_pending_flag() -> None:
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


# R4.12, R4.4, R3.8: an interrupted approval (start-up recovery, or a v8 `pending` row
# migrated as `interrupted`) can be neither approved nor rejected: APPROVAL_NOT_PENDING.
# Bug: "pending" is derived as "no decidedAt yet (and the deadline not reached)". The
# recovery records the interrupted approvals with decidedAt null (a choice the contract
# leaves open), and a migrated v8 pending row has none either, so such an approval still
# counts as decidable: approve starts an execution of an interrupted plan (or, for a legacy
# row, fails on its missing artifact with ARTIFACT_UNREADABLE), reject turns it `rejected`.
# Recipe: Plan prompt -> SubmitPlan (pending); restart the host; approval/get -> interrupted;
# approval/approve {permissionMode: ask} -> expected APPROVAL_NOT_PENDING, gets a result
# with status approved and an execution turn (an unscripted provider request). Or
# approval/reject -> gets status rejected.
@variant("der-undecided-means-pending")
def undecided_means_pending() -> None:
    from reference_host.approvals import Approvals
    from reference_host.state import is_expired
    from reference_host.storage import ApprovalRow, Storage

    original = Approvals._ensure_decidable

    async def ensure_decidable(self: Approvals, row: ApprovalRow) -> None:
        if row.decided_at is None and not is_expired(row.expires_at, self.host.clock.now_ms()):
            return  # nobody decided it yet: still open
        await original(self, row)

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self.transaction() as conn:
            approvals = await conn.execute(
                "UPDATE plan_approvals SET status = 'interrupted', "
                "status_code = 'TURN_INTERRUPTED', decided_at = NULL WHERE status = 'pending'"
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

    patch(Approvals, "_ensure_decidable", ensure_decidable)
    patch(Storage, "recover", recover)


# R4.5, C4, R5.1: when the execution turn ends, the execution is `completed` or
# `interrupted` and the session's activeExecutionId is null; a cancelled session is idle
# and takes a new prompt.
# Bug: activeExecutionId is cleared only on the success path (execution completed); an
# execution that ends `interrupted` (its turn cancelled or failed) leaves the flag set, so
# the session reports an active execution that the approval row says is over, and refuses
# the next prompt with SESSION_BUSY.
# Recipe: approve a plan; while its execution turn waits on the provider, session/cancel;
# turn/ended cancelled, approval executionState interrupted; session/get ->
# activeExecutionId still the execution id (expected null); session/prompt -> SESSION_BUSY.
@variant("der-interrupted-execution-stays-active")
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


# R3.9: the deadline is createdAt + 30 minutes, where createdAt is the host clock when the
# approval is created, at the SubmitPlan, however long the Plan turn ran before.
# Bug: the approval's createdAt is taken from the Plan turn's row (its started_at) instead
# of the clock at the submission, so a plan that took the model a while gets an earlier
# createdAt and expiresAt, and expires early.
# Recipe: Plan session, session/prompt; while the provider request is open,
# clock/advance 10 min; model answers SubmitPlan; approval.createdAt is the time of the
# prompt (expected the clock after the advance), expiresAt 10 min early; clock/advance
# 20 min -> approval expired (expected still pending).
@variant("der-deadline-from-turn-start")
def deadline_from_turn_start() -> None:
    import sqlite3

    from reference_host import approvals as approvals_module
    from reference_host import artifacts
    from reference_host.approvals import Approvals, approval_wire
    from reference_host.errors import HostError
    from reference_host.state import deadline_for
    from reference_host.storage import ApprovalRow, SessionRow

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
        content = artifacts.encode_markdown(args["markdown"])
        artifact = await asyncio.to_thread(
            artifacts.write_artifact, session.workspace_root, content, host.faults.take
        )
        # the approval belongs to its Plan turn: date it by the turn
        async with host.storage._conn.execute(
            "SELECT started_at FROM turns WHERE id = ?", (turn_id,)
        ) as cursor:
            found = await cursor.fetchone()
        created = int(found[0]) if found is not None else host.clock.now_ms()
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
            expires_at=deadline_for(created),
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
                artifacts.discard_artifact, session.workspace_root, artifact.relative_path
            )
            raise HostError("TOOL_FAILED", f"the approval could not be recorded: {exc}") from exc
        host.set_activity(session.id, pending_approval_id=row.id)
        host.clock.call_at(row.expires_at, lambda: self.expire(row.id))
        host.notify("approval/updated", {"approval": approval_wire(row)})
        await host.publish_session(session.id)
        return row

    patch(Approvals, "submit", submit)


# R6.1, P35, R7.2: task/list shows the task's latest run as `lastRun` (a refused Plan run,
# then a later run); an error is never carried over from an earlier run.
# Bug: the "last run" query forgets its ORDER BY and takes the first row SQLite gives for
# the task, which is its first run; lastRun is right only until the task runs again.
# Recipe: task/create mode plan; task/run -> PLAN_REQUIRES_INTERACTIVE_SESSION;
# task/update mode agent; task/run (model answers text) -> task/runFinished completed;
# task/list -> lastRun is the refused run with its error (expected the completed run).
@variant("der-lastrun-first-run")
def lastrun_first_run() -> None:
    from reference_host.storage import Storage

    async def last_task_run(self: Storage, task_id: str) -> dict[str, Any] | None:
        rows = await self._dicts(
            "SELECT * FROM scheduled_task_runs WHERE task_id = ? LIMIT 1", (task_id,)
        )
        return rows[0] if rows else None

    patch(Storage, "last_task_run", last_task_run)


# R7.3, P20: command/output pieces are numbered by seq from 0 across both streams, each
# command its own count, with no gap and no number used twice.
# Bug: the counter is kept per stream (stdout and stderr each count from 0), so a command
# that writes to both streams sends two pieces with seq 0, and the numbers used by one
# stream are missing from the other's sequence.
# Recipe: Agent session, permission auto, posix shell; model calls Bash
# `echo out; echo err >&2` (or printf to both with a gate between them); command/output
# pieces carry seq 0 (stdout) and seq 0 (stderr) (expected 0 and 1).
@variant("der-output-seq-per-stream")
def output_seq_per_stream() -> None:
    from reference_host.host import Host

    counters: weakref.WeakKeyDictionary[Host, dict[tuple[str, str], int]] = (
        weakref.WeakKeyDictionary()
    )
    original = Host.__init__

    def init(self: Host, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        send = self.notify
        counters[self] = {}
        host_ref = weakref.ref(self)

        def relayed(method: str, params: dict[str, Any]) -> None:
            host = host_ref()
            if method == "command/output" and host is not None:
                per_stream = counters[host]
                key = (str(params["commandId"]), str(params["stream"]))
                seq = per_stream.get(key, 0)
                per_stream[key] = seq + 1
                params = {**params, "seq": seq}
            send(method, params)

        self.notify = relayed

    patch(Host, "__init__", init, wraps=True)


# P29: once a task has run at its runAt, it has run for that time: the clock reaching the
# time again (a restarted host's fresh clock, which starts before it) does not run it
# again; whatever updates a task had, it runs once when its runAt comes due.
# Bug: the host keeps runAt after the task fires (a freedom) but still decides "due" from
# runAt alone: the start-up scheduling and task/update re-arm every enabled task whose
# runAt is ahead of (or, for an update, at or behind) the clock, so a task that already ran
# for its time runs again.
# Recipe: task/create agent, runAt = now + 1 h; clock/advance 1 h -> task/runFinished;
# task/update {name: "x"}; clock/advance 1 s -> a second run (expected none). Or restart
# the host (fresh clock before runAt) and clock/set past runAt -> a second run.
@variant("der-runat-kept-rearmed")
def runat_kept_rearmed() -> None:
    import contextlib

    from reference_host.errors import HostError
    from reference_host.tasks import Tasks

    async def fire(self: Tasks, task_id: str) -> None:
        self._timers.pop(task_id, None)
        row = await self.host.storage.get_task(task_id)
        if row is None or not row["enabled"]:
            return
        with contextlib.suppress(HostError):
            await self.run(row)

    patch(Tasks, "_fire", fire)


# P7, R5.6: permission modes apply to every Agent turn; the session keeps the mode the plan
# was approved with, and a later session/configure of permissionMode applies from the next
# turn on (each execution runs under the mode its own approve chose).
# Bug: a tool call's permission mode is taken from the session's last approved plan rather
# than from the session's own row, so after an approve with `auto` a later configure to
# `ask` has no effect: Write, Edit and Bash run without a permission question.
# Recipe: Plan prompt -> SubmitPlan; approve with auto; execution completes; session/configure
# {permissionMode: ask}; session/prompt -> model calls Write -> expected
# permission/requested, gets a toolResult ok and the file written.
@variant("der-permission-from-last-approval")
def permission_from_last_approval() -> None:
    from reference_host.storage import SessionRow
    from reference_host.turns import CallOutcome, TurnRunner

    original = TurnRunner._run_call

    async def run_call(
        self: TurnRunner, session: SessionRow, turn_id: str, call: Any, unattended: bool
    ) -> CallOutcome:
        approvals = await self.host.storage.list_approvals(session.id)
        approved = [a for a in approvals if a.status == "approved" and a.permission_mode]
        if approved and approved[-1].permission_mode is not None:
            session = replace(session, permission_mode=approved[-1].permission_mode)
        return await original(self, session, turn_id, call, unattended)

    patch(TurnRunner, "_run_call", run_call)


# P13, R3.2, C1: artifact/read checks the file's bytes against the recorded SHA-256 and size
# on every call and never returns bytes that disagree with the record (ARTIFACT_MODIFIED).
# Bug: artifact/read reads the file and reports the sha256 and byteSize of what it read,
# recomputed at read time, instead of checking them against the values recorded at
# submission; approve still checks. A changed artifact is served with its new hash.
# Recipe: SubmitPlan; overwrite .pi/plan/<file> with other bytes (chmod first);
# artifact/read -> expected ARTIFACT_MODIFIED, gets the new bytes with a sha256 that differs
# from approval.artifact.sha256.
@variant("der-artifact-read-recomputes-hash")
def artifact_read_recomputes_hash() -> None:
    import base64

    from reference_host import artifacts
    from reference_host.approvals import Approvals
    from reference_host.storage import ApprovalRow

    original = Approvals.read_artifact

    async def read_artifact(self: Approvals, row: ApprovalRow) -> dict[str, Any]:
        session = await self.host.require_session(row.session_id)
        if session.workspace_root is None or row.artifact_path is None:
            return await original(self, row)
        content = await asyncio.to_thread(
            artifacts.read_artifact, session.workspace_root, row.artifact_path
        )
        return {
            "approvalId": row.id,
            "path": row.artifact_path,
            "contentBase64": base64.b64encode(content).decode("ascii"),
            "sha256": hashlib.sha256(content).hexdigest(),
            "byteSize": len(content),
        }

    patch(Approvals, "read_artifact", read_artifact)


# ADR §4, R4.14: "If approval already committed the session to Agent, interrupting its
# queued or running execution leaves the session in Agent"; the recovery changes no
# session's mode.
# Bug: the start-up recovery derives each session's mode from its interrupted approvals
# and puts back in Plan every session whose approval it touched, also the sessions whose
# *execution* it interrupted (the rule for a pending approval applied to both).
# Recipe: approve a plan with accept-edits (holdExecution fault, or a provider request left
# open); restart the host; session/get -> mode plan (expected agent, accept-edits), the
# sessions row too.
@variant("der-recovery-reverts-mode")
def recovery_reverts_mode() -> None:
    from reference_host.storage import Storage

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self.transaction() as conn:
            await conn.execute(
                "UPDATE sessions SET mode = 'plan' WHERE id IN (SELECT session_id FROM "
                "plan_approvals WHERE status = 'pending' "
                "OR execution_state IN ('queued', 'running'))"
            )
            approvals = await conn.execute(
                "UPDATE plan_approvals SET status = 'interrupted', "
                "status_code = 'TURN_INTERRUPTED', decided_at = ? WHERE status = 'pending'",
                (now,),
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


# R4.3 ("a response or notification reports state you have already stored"; what you
# reported survives), R7.2 and protocol TaskRun.startedAt: a run's startedAt is the host
# clock when the run started, the same in the task/run answer, task/runFinished, lastRun
# and scheduled_task_runs.started_at.
# Bug: the run record is written again when the run finishes, with started_at taken from
# the clock at that moment, so a run whose turn took a while reports a startedAt that
# moved from the one task/run answered.
# Recipe: task/create agent; task/run -> run.startedAt = T; while its provider request is
# open clock/advance 5 min; model answers -> task/runFinished.run.startedAt = T + 5 min
# (expected T); task/list lastRun.startedAt the same.
@variant("der-run-startedat-at-finish")
def run_startedat_at_finish() -> None:
    from reference_host.errors import HostError
    from reference_host.tasks import Tasks

    original = Tasks._finish

    async def finish(
        self: Tasks, run: dict[str, Any], outcome: str, error: HostError | None
    ) -> None:
        run["started_at"] = self.host.clock.now_ms()
        await original(self, run, outcome, error)

    patch(Tasks, "_finish", finish)


# R4.5, R5.1: only the execution reads `interrupted`; its turn keeps its own outcome, so a
# cancelled execution turn ends `cancelled` in turn/ended and in turns.state, a failed one
# `failed`.
# Bug: the execution turn's stored state is derived from its execution: an execution turn
# that did not complete is stored as `interrupted` in the turns row, while turn/ended still
# says `cancelled` (or `failed`).
# Recipe: approve a plan; cancel its execution turn (or let its provider answer 400);
# turn/ended outcome cancelled; turns.state for that turn reads 'interrupted' (expected
# 'cancelled').
@variant("der-exec-turn-state-from-execution")
def exec_turn_state_from_execution() -> None:
    from reference_host.errors import HostError
    from reference_host.ports import TurnEnded
    from reference_host.storage import ApprovalRow
    from reference_host.turns import TurnRunner

    original = TurnRunner._end

    async def end(
        self: TurnRunner,
        session_id: str,
        turn_id: str,
        approval: ApprovalRow | None,
        on_end: TurnEnded | None,
        outcome: str,
        error: HostError | None,
    ) -> None:
        if approval is not None and outcome != "completed":
            await self.host.storage.end_turn(turn_id, "interrupted", self.host.clock.now_ms())
        await original(self, session_id, turn_id, approval, on_end, outcome, error)

    patch(TurnRunner, "_end", end)


# P7: a requestId names one question among all the host's sessions, and a question asked
# after a restart never has the id of one asked before it (a client may still hold the old
# one); an answer to the question of a turn that has ended gets PERMISSION_REQUEST_NOT_FOUND.
# Bug: request ids come from a counter kept on the permission broker ("perm-1", "perm-2",
# ...), unique while the process lives but started again at 1 by every host process, so
# the first question after a restart reuses the id of the first question before it, and a
# stale answer meant for the old question decides the new one.
# Recipe: Agent session, permission ask; prompt -> model calls Write -> permission/requested
# (requestId R); restart the host before answering; prompt again -> Write ->
# permission/requested has requestId R again (expected a new id); permission/respond
# {requestId: R, decision: allow} -> the new Write runs.
@variant("der-permission-id-counter")
def permission_id_counter() -> None:
    from reference_host.permissions import PermissionBroker, _Request

    counters: weakref.WeakKeyDictionary[PermissionBroker, int] = weakref.WeakKeyDictionary()

    async def ask(
        self: PermissionBroker, session_id: str, turn_id: str, tool: str, tool_input: Any
    ) -> bool:
        counters[self] = counters.get(self, 0) + 1
        request_id = f"perm-{counters[self]}"
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._open[request_id] = _Request(session_id, answer)
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


# P29: task/create and task/update answer the task as given, task/list reports the same,
# and whatever updates a task had, its createdAt stays the time it was created.
# Bug: the task's createdAt on the wire is read from the row's updated_at column (the
# "time of the row"), which equals created_at until the first task/update; after an
# update at a later clock, task/update and task/list report the update's time.
# Recipe: task/create -> createdAt C; clock/advance 1 min; task/update {name: "b"} ->
# task.createdAt = C + 60000 (expected C); task/list the same.
@variant("der-task-createdat-from-updated")
def task_createdat_from_updated() -> None:
    from reference_host.tasks import Tasks

    original = Tasks.wire

    async def wire(self: Tasks, row: dict[str, Any]) -> dict[str, Any]:
        task = await original(self, row)
        return {**task, "createdAt": row.get("updated_at", row["created_at"])}

    patch(Tasks, "wire", wire)


CASES = [
    BrokenCase(
        "der-expiry-keeps-pending-flag",
        "submit_plan",
        "plan_that_ran_out_of_time_leaves_the_sessions_permission_mode",
        "R3.11",
        "the session still waits",
    ),
    BrokenCase(
        "der-undecided-means-pending",
        "approval",
        "plan_interrupted_by_a_restart_cannot_be and approved",
        "R4.4",
        "expected the host to refuse",
    ),
    BrokenCase(
        "der-interrupted-execution-stays-active",
        "execution",
        "execution_whose_turn_is_cancelled_as_soon_as_it_has_started_is_interrupted",
        "R4.5",
        "the session still runs",
    ),
    BrokenCase(
        "der-deadline-from-turn-start",
        "deadline",
        "deadline_is_30_minutes_after_the_host_created_the_approval",
        "R3.9",
        "when the model submitted the plan",
    ),
    BrokenCase(
        "der-lastrun-first-run",
        "scheduled_plan",
        "never_switches_a_refused_task_to_agent_when_it_is_run_now",
        "R6.3",
        "not the second run",
    ),
    BrokenCase(
        "der-output-seq-per-stream",
        "shell",
        "command_runs_in_the_projects_path_exactly_as_the_session_was_given_it",
        "P20",
        "is numbered",
    ),
    BrokenCase(
        "der-runat-kept-rearmed",
        "scheduled_plan",
        "ran_at_its_time_does_not_run_again_when_that_time_comes_again and restarted",
        "P29",
        "the task ran again",
    ),
    BrokenCase(
        "der-permission-from-last-approval",
        "execution",
        "permission_mode_chosen_after_the_execution_is_the_one_that_counts",
        "P7",
        "ran without asking for permission",
    ),
    BrokenCase(
        "der-artifact-read-recomputes-hash",
        "artifact_integrity",
        "opened_before_its_file_changed_is_refused_when_opened_again and size",
        "P13",
        "bytes that disagree with the record",
    ),
    BrokenCase(
        "der-recovery-reverts-mode",
        "restart_interruption",
        "execution_still_waiting_in_the_queue_is_interrupted_when_the_host_restarts",
        "R4.14",
        "after the restart the session is in plan",
    ),
    BrokenCase(
        "der-run-startedat-at-finish",
        "scheduled_plan",
        "command_in_a_scheduled_run_times_out_on_the_host_clock",
        "R7.2",
        "the run's startedAt reads",
    ),
    BrokenCase(
        "der-exec-turn-state-from-execution",
        "execution",
        "execution_whose_turn_is_cancelled_as_soon_as_it_has_started_is_interrupted",
        "R5.1",
        "but its turns row reads interrupted",
    ),
    BrokenCase(
        "der-permission-id-counter",
        "execution",
        "question_asked_after_a_restart_takes_no_answer_meant_for_one_asked_before_it",
        "P7",
        "expected the host to refuse",
    ),
    BrokenCase(
        "der-task-createdat-from-updated",
        "scheduled_plan",
        "changed_an_hour_after_it_was_listed",
        "P29",
        "createdAt",
    ),
]
