"""Broken hosts: a held-out set (SQL mistakes in the host's queries and statements),
written from the contract alone."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hosts.registry import BrokenCase, patch, variant


def _recover_with(
    approvals_where: str = "status = 'pending'",
    executions_where: str = "execution_state IN ('queued', 'running')",
    runs_where: str = "outcome = 'running'",
    turns_where: str = "state = 'active'",
) -> None:
    """Replace the start-up recovery (§4) by one whose WHERE clauses are the given ones."""
    from reference_host.storage import Storage

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self.transaction() as conn:
            approvals = await conn.execute(
                "UPDATE plan_approvals SET status = 'interrupted', "
                f"status_code = 'TURN_INTERRUPTED', decided_at = ? WHERE {approvals_where}",
                (now,),
            )
            executions = await conn.execute(
                "UPDATE plan_approvals SET execution_state = 'interrupted' "
                f"WHERE {executions_where}"
            )
            turns = await conn.execute(
                f"UPDATE turns SET state = 'interrupted', ended_at = ? WHERE {turns_where}",
                (now,),
            )
            await conn.execute(
                "UPDATE scheduled_task_runs SET outcome = 'failed', "
                "error_code = 'TURN_INTERRUPTED', "
                "error_message = 'the host stopped before the run finished' "
                f"WHERE {runs_where}"
            )
        return approvals.rowcount, executions.rowcount, turns.rowcount

    patch(Storage, "recover", recover)


# R4.10 (implementing-a-host "Startup recovery": "finished work (a `completed` execution
# ...) stays exactly as it was"; ADR §4 "all prior queued or running execution states").
# Bug: the recovery's execution UPDATE reads "every approval that has an execution"
# (`execution_state IS NOT NULL`) instead of only the queued or running ones, so every
# restart turns a completed execution into an interrupted one.
# Observe: approval/get of an executed plan reads executionState "completed" before a
# restart and "interrupted" after it (plan_approvals.execution_state alike).
# Recipe: Plan session, SubmitPlan, approve, execution turn completes; restart the host;
# approval/get.
@variant("sql-recover-finished-executions")
def recover_finished_executions() -> None:
    _recover_with(executions_where="execution_state IS NOT NULL")


# R4.10 / C3 (ADR §4 "marks all prior pending approvals as interrupted"; implementing-a-host
# "Startup recovery": every earlier pending approval becomes interrupted with statusCode
# TURN_INTERRUPTED).
# Bug: "an approval nobody decided" is written `decided_at = NULL` where `IS NULL` was
# meant; the comparison is never true, so the recovery interrupts no approval at all.
# Observe: after a restart the pending approval still reads status "pending" (and
# statusCode null) in approval/get and plan_approvals, while session/get shows no
# pendingApprovalId; the plan can even be approved after the restart.
# Recipe: Plan session, SubmitPlan (pending); restart; approval/get -> still pending.
@variant("sql-recover-undecided-eq-null")
def recover_undecided_eq_null() -> None:
    _recover_with(approvals_where="decided_at = NULL")


# P28 / R4.10 (implementing-a-host "A run cut short": only a run under way when the host
# stopped reads failed with TURN_INTERRUPTED; "Startup recovery": "That is all it changes:
# finished work ... stays exactly as it was").
# Bug: the recovery fails "every run that did not complete" (`outcome != 'completed'`)
# instead of the runs still `running`, so a refused Plan run and a run that failed with
# PROVIDER_ERROR are rewritten as failed / TURN_INTERRUPTED by every restart.
# Observe: task/list lastRun of a refused Plan task reads outcome "refused",
# PLAN_REQUIRES_INTERACTIVE_SESSION before a restart and "failed", TURN_INTERRUPTED after.
# Recipe: task/create mode plan; task/run (refused); restart; task/list.
@variant("sql-recover-runs-not-completed")
def recover_runs_not_completed() -> None:
    _recover_with(runs_where="outcome != 'completed'")


# ScheduledTask.lastRun (protocol.md Types; implementing-a-host §6: task/list shows the
# refused run "as the task's lastRun"; P35 every task/run is a run of its own).
# Bug: "the latest run" is fetched with `ORDER BY started_at LIMIT 1`, ascending: LIMIT 1
# on the wrong order, so lastRun is the task's first run forever.
# Observe: after two runs of one task, task/list (and task/update's answer) shows the
# first run's runId/outcome as lastRun.
# Recipe: task/create (plan); task/run (refused); task/update mode agent; task/run
# (running, later completed); task/list -> lastRun is still the refused run.
@variant("sql-last-run-oldest")
def last_run_oldest() -> None:
    from reference_host.storage import Storage

    async def last_task_run(self: Storage, task_id: str) -> dict[str, Any] | None:
        rows = await self._dicts(
            "SELECT * FROM scheduled_task_runs WHERE task_id = ? "
            "ORDER BY started_at, rowid LIMIT 1",
            (task_id,),
        )
        return rows[0] if rows else None

    patch(Storage, "last_task_run", last_task_run)


# R7.2 (approval/list "Lists a session's approvals"; approval/list, approval/get and
# approval/updated report the same record).
# Bug: approval/list joins each approval to its turns (the Plan turn and the execution
# turn, `t.id IN (a.turn_id, a.execution_turn_id)`), so an approval whose execution turn
# has started is listed twice.
# Observe: after an approve whose execution turn started, approval/list holds the same
# approvalId twice.
# Recipe: Plan session, SubmitPlan, approve; wait for turn/started kind execution;
# approval/list.
@variant("sql-approval-list-join-duplicates")
def approval_list_join_duplicates() -> None:
    from reference_host.storage import APPROVAL_COLUMNS, ApprovalRow, Storage

    columns = ", ".join(f"a.{c.strip()}" for c in APPROVAL_COLUMNS.split(","))

    async def list_approvals(self: Storage, session_id: str) -> list[ApprovalRow]:
        query = (
            f"SELECT {columns} FROM plan_approvals a "
            "LEFT JOIN turns t ON t.id IN (a.turn_id, a.execution_turn_id) "
            "WHERE a.session_id = ? ORDER BY a.created_at, a.rowid"
        )
        async with self._conn.execute(query, (session_id,)) as cursor:
            rows = await cursor.fetchall()
        return [ApprovalRow(*row) for row in rows]

    patch(Storage, "list_approvals", list_approvals)


# R7.2 (implementing-a-host "Sessions": "`approval/list` lists a session's approvals
# oldest first: `createdAt` never decreases along the list"; protocol approval/list).
# Bug: the list is ordered by the primary key (`ORDER BY id`), as if ids grew with time;
# they are random, so the order is whatever the ids sort to.
# Observe: with two approvals created at different clock times, approval/list gives the
# newer first about half the time.
# Recipe: Plan session, SubmitPlan, reject; clock/advance; SubmitPlan again (a few times);
# approval/list -> createdAt decreases somewhere.
@variant("sql-approval-list-order-by-id")
def approval_list_order_by_id() -> None:
    from reference_host.storage import APPROVAL_COLUMNS, ApprovalRow, Storage

    async def list_approvals(self: Storage, session_id: str) -> list[ApprovalRow]:
        async with self._conn.execute(
            f"SELECT {APPROVAL_COLUMNS} FROM plan_approvals WHERE session_id = ? ORDER BY id",
            (session_id,),
        ) as cursor:
            rows = await cursor.fetchall()
        return [ApprovalRow(*row) for row in rows]

    patch(Storage, "list_approvals", list_approvals)


# R4.5 / R4.4 (execution state moves queued -> running -> completed | interrupted, once;
# R4.3 every field of an approval equals its row and what approval/get reports).
# Bug: the end of an execution is written per session: `UPDATE plan_approvals SET
# execution_state = ? WHERE session_id = ? AND execution_id IS NOT NULL` (the WHERE lacks
# `id = ?`), so it also rewrites every earlier execution of the session.
# Observe: a session's first execution was cancelled (interrupted); its second one
# completes; approval/get of the first approval now reads executionState "completed"
# (with no approval/updated for it).
# Recipe: Plan, SubmitPlan, approve, cancel the execution turn; configure mode plan,
# SubmitPlan again, approve, let it complete; approval/get of the first approval.
@variant("sql-execution-end-session-wide")
def execution_end_session_wide() -> None:
    from reference_host import state
    from reference_host.approvals import Approvals, approval_wire
    from reference_host.state import ExecutionState

    async def execution_finished(self: Approvals, approval_id: str, final: ExecutionState) -> None:
        row = await self._execution(approval_id)
        assert row.execution_state is not None
        done = replace(row, execution_state=state.advance_execution(row.execution_state, final))
        async with self.host.storage.transaction() as conn:
            await conn.execute(
                "UPDATE plan_approvals SET execution_state = ? "
                "WHERE session_id = ? AND execution_id IS NOT NULL",
                (done.execution_state, row.session_id),
            )
        self.host.set_activity(row.session_id, active_execution_id=None)
        self._notify_execution(done, row.execution_turn_id)
        self.host.notify("approval/updated", {"approval": approval_wire(done)})

    patch(Approvals, "execution_finished", execution_finished)


# R4.6 (implementing-a-host "Execution and restart": "Approve is one transaction ... all or
# nothing. A failed approval (the `approvalCommit` fault makes its transaction fail) ...
# leaves the approval pending and the session as it was, and the plan can then be approved
# again"; ADR §4 "Approval atomically changes the session to Agent").
# Bug: approve commits the approval row and the session row as two statements, each in its
# own transaction; a failure between them leaves the approval approved (execution queued)
# and the session still in Plan.
# Observe: after approve with the approvalCommit fault armed, approval/get reads
# "approved" with an executionId and executionState "queued" (and the row alike) while
# the session stays in Plan; a second approve gets APPROVAL_NOT_PENDING.
# Recipe: Plan session, SubmitPlan; conformance/fault/arm approvalCommit; approve
# (INTERNAL_ERROR); approval/get; approve again.
@variant("sql-approve-two-transactions")
def approve_two_transactions() -> None:
    from reference_host import state
    from reference_host.approvals import Approvals, approval_wire
    from reference_host.approvals import _execution_prompt as execution_prompt
    from reference_host.approvals import _facts as facts
    from reference_host.approvals import _with as with_facts
    from reference_host.errors import HostError
    from reference_host.state import PermissionMode

    async def approve(
        self: Approvals, session_id: str, approval_id: str, mode: PermissionMode
    ) -> dict[str, Any]:
        host = self.host
        row = await self.require(session_id, approval_id)
        await host.turns.settle(session_id, row.turn_id)
        await self._ensure_decidable(row)
        activity = host.activity_of(session_id)
        if activity.active_execution_id is not None:
            raise HostError("EXECUTION_ACTIVE", "another execution is queued or running")
        session = await host.require_session(session_id)
        content = await self.verified_content(session, row)
        now = host.clock.now_ms()
        approved = with_facts(
            row, state.approve(facts(row), mode, host.new_id("exe")), decided_at=now
        )
        agent = replace(session, mode="agent", permission_mode=mode, updated_at=now)
        await host.storage.update_approval(approved)
        if host.faults.take("approvalCommit"):
            raise HostError("INTERNAL_ERROR", "injected failure before the approval commit")
        await host.storage.update_session(agent)
        host.set_activity(
            session_id, pending_approval_id=None, active_execution_id=approved.execution_id
        )
        host.notify("approval/updated", {"approval": approval_wire(approved)})
        self._notify_execution(approved, None)
        session_wire = await host.publish_session(session_id)
        if not host.faults.take("holdExecution"):
            prompt = execution_prompt(approved, content)
            try:
                await host.turns.start(agent, "execution", prompt, approved)
            except BaseException:
                try:
                    await self.execution_finished(approved.id, "interrupted")
                finally:
                    host.set_activity(session_id, active_execution_id=None)
                raise
        return {"approval": approval_wire(approved), "session": session_wire}

    patch(Approvals, "approve", approve)


# R4.8 / R5.9 (at most one pending approval per session; ADR §5 "Cross-session work keeps
# the existing session-scoped workspace and event isolation"; implementing-a-host: busy
# is each session's own).
# Bug: SubmitPlan checks "is a plan already pending?" with `SELECT id FROM plan_approvals
# WHERE status = 'pending' LIMIT 1`, without `session_id = ?`: any other session's pending
# plan blocks this one.
# Observe: session A has a pending plan; session B's SubmitPlan gets a tool result
# APPROVAL_PENDING (status error) and B gets no approval.
# Recipe: two Plan sessions; A SubmitPlan (pending); B SubmitPlan -> refused.
@variant("sql-pending-check-all-sessions")
def pending_check_all_sessions() -> None:
    from reference_host.approvals import Approvals
    from reference_host.errors import HostError
    from reference_host.storage import ApprovalRow, SessionRow

    original = Approvals.submit

    async def submit(
        self: Approvals, session: SessionRow, turn_id: str, args: dict[str, Any]
    ) -> ApprovalRow:
        async with self.host.storage._conn.execute(
            "SELECT id FROM plan_approvals WHERE status = 'pending' LIMIT 1"
        ) as cursor:
            pending = await cursor.fetchone()
        if pending is not None:
            raise HostError(
                "APPROVAL_PENDING", "an earlier plan is still pending", {"approvalId": pending[0]}
            )
        return await original(self, session, turn_id, args)

    patch(Approvals, "submit", submit, wraps=True)


# R7.2 (implementing-a-host "Sessions": "The `sessions` row holds what `session/get`
# reports: mode, permission mode, workspace root, provider ..., shell and creation time").
# Bug: the session writer is an `INSERT OR REPLACE INTO sessions (...)` naming the
# configurable columns (and the times), not workspace_root: the REPLACE deletes the old
# row and inserts one whose workspace_root is NULL.
# Observe: after session/configure (or an approve, or EnterPlanMode), the answer still
# shows the workspaceRoot, but session/get, session/list and sessions.workspace_root read
# null.
# Recipe: session/create with a workspaceRoot; session/configure mode plan; session/get.
@variant("sql-session-replace-drops-root")
def session_replace_drops_root() -> None:
    import aiosqlite

    from reference_host.storage import SessionRow, Storage

    async def write_session(conn: aiosqlite.Connection, session: SessionRow) -> None:
        await conn.execute(
            "INSERT OR REPLACE INTO sessions (id, mode, permission_mode, provider_base_url, "
            "model, shell_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                session.id,
                session.mode,
                session.permission_mode,
                session.provider_base_url,
                session.model,
                session.shell_id,
                session.created_at,
                session.updated_at,
            ),
        )

    patch(Storage, "write_session", staticmethod(write_session))


# R1.3 / R7.7 (implementing-a-host "Migrating from v8": "`session/transcript` reports each
# row, in `id` order"; "Sessions": the conversation, which the model is shown in the next
# turn and which session/transcript keeps).
# Bug: the transcript query groups a session's messages by turn, `ORDER BY turn_id, id`;
# turn ids are random, so from the second turn on the turns come in id order, not in the
# order they happened (and rows without a turn come first).
# Observe: after two prompts, session/transcript lists the second turn's messages before
# the first's (about half the time), and the next provider request carries them so.
# Recipe: session/prompt "one" (completes); session/prompt "two" (completes);
# session/transcript -> seq not increasing.
@variant("sql-transcript-order-by-turn")
def transcript_order_by_turn() -> None:
    import json

    from reference_host.storage import Storage

    async def transcript(
        self: Storage, session_id: str
    ) -> list[tuple[int, str | None, str, Any, int]]:
        async with self._conn.execute(
            "SELECT id, turn_id, role, content, created_at FROM transcript "
            "WHERE session_id = ? ORDER BY turn_id, id",
            (session_id,),
        ) as cursor:
            rows = await cursor.fetchall()
        return [(r[0], r[1], r[2], json.loads(r[3]), r[4]) for r in rows]

    patch(Storage, "transcript", transcript)


# P29 (implementing-a-host "A task as given": "A task with `enabled: false` does not run
# when its `runAt` comes due"; "A task keeps its time across a restart: an enabled task
# whose `runAt` is still ahead when your host starts runs when it comes due").
# Bug: at start-up the timers are armed from `SELECT id, run_at FROM scheduled_tasks WHERE
# run_at > ?` and a timer claims its run with `UPDATE ... SET run_at = NULL WHERE id = ?
# AND run_at IS NOT NULL`; neither says `enabled = 1`. A running host disarms a task that
# is switched off, but after a restart a disabled task runs when its runAt comes due.
# Observe: a disabled task with a future runAt: restart; clock past runAt ->
# task/runFinished, a new session and a provider call.
# Recipe: task/create enabled false, runAt now+1h (agent); restart; clock/advance 2h.
@variant("sql-disabled-task-fires-after-restart")
def disabled_task_fires_after_restart() -> None:
    import contextlib

    from reference_host.errors import HostError
    from reference_host.tasks import Tasks

    async def schedule_all(self: Tasks) -> None:
        storage = self.host.storage
        async with storage._conn.execute(
            "SELECT id, run_at FROM scheduled_tasks WHERE run_at > ?",
            (self.host.clock.now_ms(),),
        ) as cursor:
            rows = await cursor.fetchall()
        for task_id, run_at in rows:
            self._arm(task_id, run_at)

    async def fire(self: Tasks, task_id: str) -> None:
        self._timers.pop(task_id, None)
        storage = self.host.storage
        row = await storage.get_task(task_id)
        if row is None:
            return
        async with storage.transaction() as conn:
            claimed = await conn.execute(
                "UPDATE scheduled_tasks SET run_at = NULL WHERE id = ? AND run_at IS NOT NULL",
                (task_id,),
            )
        if claimed.rowcount == 0:
            return
        with contextlib.suppress(HostError):
            await self.run(row)

    patch(Tasks, "schedule_all", schedule_all)
    patch(Tasks, "_fire", fire)


# R5.1 (implementing-a-host "Cancel": "`session/cancel` answers with the id of the turn it
# cancels, or `turnId: null` when the session has no active turn (a second cancel
# included)"; protocol session/cancel "Returns the cancelled turn's id, or null when idle").
# Bug: the turn to report is looked up as the session's latest turn, `SELECT id FROM turns
# WHERE session_id = ? ORDER BY started_at DESC LIMIT 1`, without `state = 'active'`: on an
# idle session it names the last finished turn.
# Observe: after a turn completed (or after a first cancel), session/cancel answers that
# turn's id instead of null.
# Recipe: session/prompt; wait for turn/ended; session/cancel -> turnId not null.
@variant("sql-cancel-reports-finished-turn")
def cancel_reports_finished_turn() -> None:
    from reference_host.host import Host
    from reference_host.state import ensure_can_cancel

    async def session_cancel(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        ensure_can_cancel(self.activity_of(row.id))
        async with self.storage._conn.execute(
            "SELECT id FROM turns WHERE session_id = ? ORDER BY started_at DESC, rowid DESC "
            "LIMIT 1",
            (row.id,),
        ) as cursor:
            latest = await cursor.fetchone()
        cancelled = await self.turns.cancel(row.id)
        return {"turnId": cancelled if cancelled is not None else (latest and latest[0])}

    patch(Host, "session_cancel", session_cancel)


# §6 / P28 (protocol ScheduledTask.lastRun; implementing-a-host §6: "`task/list` shows it
# as the task's `lastRun`").
# Bug: the newest run is found as the run whose started_at equals `(SELECT max(started_at)
# FROM scheduled_task_runs)`: the MAX is taken over every task's runs, not this task's, so
# a task whose last run is not the newest run of all reads lastRun null.
# Observe: tasks A and B; task/run A, clock/advance, task/run B; task/list shows A with
# lastRun null (only B has one).
# Recipe: two Plan tasks; task/run A (refused); clock/advance 1000; task/run B (refused);
# task/list -> A.lastRun is null.
@variant("sql-last-run-max-all-tasks")
def last_run_max_all_tasks() -> None:
    from reference_host.storage import Storage

    async def last_task_run(self: Storage, task_id: str) -> dict[str, Any] | None:
        rows = await self._dicts(
            "SELECT * FROM scheduled_task_runs WHERE task_id = ? AND started_at = "
            "(SELECT max(started_at) FROM scheduled_task_runs) ORDER BY rowid DESC LIMIT 1",
            (task_id,),
        )
        return rows[0] if rows else None

    patch(Storage, "last_task_run", last_task_run)


# R7.2 (implementing-a-host "Sessions": "`session/list` lists every session exactly as
# `session/get` reports it"; protocol session/list "Lists all sessions").
# Bug: session/list orders sessions by their latest activity through an inner JOIN on
# turns (`JOIN turns t ON t.session_id = s.id GROUP BY s.id ORDER BY max(t.started_at)`),
# which drops every session that never had a turn.
# Observe: session/create, then session/list: the new session is missing (session/get
# finds it).
# Recipe: session/create; session/list -> no entry for it.
@variant("sql-session-list-join-drops-idle")
def session_list_join_drops_idle() -> None:
    from reference_host.storage import SessionRow, Storage

    columns = (
        "s.id, s.workspace_root, s.mode, s.permission_mode, s.provider_base_url, s.model, "
        "s.shell_id, s.created_at, s.updated_at"
    )

    async def list_sessions(self: Storage) -> list[SessionRow]:
        async with self._conn.execute(
            f"SELECT {columns} FROM sessions s JOIN turns t ON t.session_id = s.id "
            "GROUP BY s.id ORDER BY max(t.started_at), s.id"
        ) as cursor:
            rows = await cursor.fetchall()
        return [SessionRow(*row) for row in rows]

    patch(Storage, "list_sessions", list_sessions)


# R4.11 / R4.10 (implementing-a-host "Startup recovery": it "ends the turns the previous
# process left active ... That is all it changes: finished work ... stays exactly as it
# was"; "The suite compares every ended turn's stored state with its `turn/ended`").
# Bug: the recovery interrupts "the turns of every session that was busy":
# `WHERE session_id IN (SELECT session_id FROM turns WHERE state = 'active')`, so every
# earlier, finished turn of such a session (completed, cancelled, failed) is rewritten as
# interrupted, with a new ended_at.
# Observe: a session's first prompt completes (turn/ended completed, turns.state
# 'completed'); its second turn is still running when the host restarts; afterwards the
# first turn's row reads state 'interrupted'.
# Recipe: session/prompt (completes); session/prompt whose model call hangs or a Bash
# waiting on the clock; restart; read turns.state of the first turn.
@variant("sql-recover-turns-session-wide")
def recover_turns_session_wide() -> None:
    _recover_with(turns_where="session_id IN (SELECT session_id FROM turns WHERE state = 'active')")


CASES = [
    BrokenCase(
        "sql-recover-finished-executions",
        "restart_interruption",
        "plan_that_was and approved_and_carried_out_is_left_as_it_was",
        "R4.10",
        "recovery changed a finished plan",
    ),
    BrokenCase(
        "sql-recover-undecided-eq-null",
        "restart_interruption",
        "plan_interrupted_by_a_restart_stays_interrupted_when_its_deadline_passes",
        "R4.12",
        "the interrupted approval now reads pending",
    ),
    BrokenCase(
        "sql-recover-runs-not-completed",
        "restart_interruption",
        "restart_with_nothing_to_recover_changes_no_answer",
        "R4.2",
        "after a restart with nothing to recover the host answers differently",
    ),
    BrokenCase(
        "sql-last-run-oldest",
        "scheduled_plan",
        "never_switches_a_refused_task_to_agent_when_it_is_run_now",
        "R6.3",
        "not the second run",
    ),
    BrokenCase(
        "sql-approval-list-join-duplicates",
        "execution",
        "execution_whose_turn_fails_is_interrupted",
        "R7.2",
        "approval/list shows the approval",
    ),
    BrokenCase(
        "sql-approval-list-order-by-id",
        "migration",
        "earlier_approvals_are_kept_and_a_pending_one_is_interrupted",
        "R7.2",
        "lists the migrated approvals as",
    ),
    BrokenCase(
        "sql-execution-end-session-wide",
        "execution",
        "next_plan_leaves_the_cancelled_execution_interrupted",
        "R4.5",
        "the cancelled plan's execution reads completed",
    ),
    BrokenCase(
        "sql-approve-two-transactions",
        "approval",
        "failure_armed_twice_for_approving_fails_only_the_next_approval",
        "R4.6",
        "refused with APPROVAL_NOT_PENDING",
    ),
    BrokenCase(
        "sql-pending-check-all-sessions",
        "execution",
        "execution_held_back_stays_queued_while_another_session_plans",
        "C8",
        "the other session's Plan turn ended",
    ),
    BrokenCase(
        "sql-session-replace-drops-root",
        "protocol_errors",
        "decision_with_feedback_is_refused and approving",
        "R3.7",
        "the Plan turn ended",
    ),
    BrokenCase(
        "sql-transcript-order-by-turn",
        # the migrated turns' ids are fixed, so their order is too (new turns' ids are
        # random, and two of them come in order half the time)
        "migration",
        "v8_database_is_upgraded_and_its_data_survives",
        "R7.7",
        "seq does not increase",
    ),
    BrokenCase(
        "sql-disabled-task-fires-after-restart",
        "scheduled_plan",
        "task_stays_off_across_a_restart",
        "P29",
        "the host sent turn/started for the switched-off task",
    ),
    BrokenCase(
        "sql-cancel-reports-finished-turn",
        "turn_boundaries",
        "second_cancel_after_the_turn_ended_cancels_nothing",
        "R5.1",
        "the host says it cancelled the turn",
    ),
    BrokenCase(
        "sql-last-run-max-all-tasks",
        "scheduled_plan",
        "last_run_stays_its_own_when_another_task_runs_later",
        "P29",
        "not its own run",
    ),
    BrokenCase(
        "sql-session-list-join-drops-idle",
        "protocol_errors",
        "change_with_one_invalid_setting_changes_nothing and malformed",
        "R7.2",
        "session/list shows the session",
    ),
    BrokenCase(
        "sql-recover-turns-session-wide",
        "restart_interruption",
        "restart_that_interrupts_a_turn_leaves_the_sessions_earlier_turn",
        "R4.11",
        "recovery changed the session's earlier turn",
    ),
]
