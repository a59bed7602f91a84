"""Broken hosts: a held-out set (one field in one place), written from the contract alone.

Seven of these eleven were caught at first; all are caught now. What was missed was a
field no read had compared: a run's start once the clock moved during the run, the last run
in task/update's answer, the turn a command of an execution is audited under, and the
deadline of an approval a recovery interrupted.
"""

from __future__ import annotations

from typing import Any

from hosts.registry import BrokenCase, patch, rewrite_notifications, variant
from reference_host import tasks
from reference_host.approvals import Approvals, approval_wire
from reference_host.errors import HostError
from reference_host.host import Host
from reference_host.storage import Storage
from reference_host.tasks import Tasks
from reference_host.turns import TurnRunner


@variant("approve-answers-session-without-execution")
def _approve_answers_session_without_execution() -> None:
    # R4.5 / C4: the approve result's `session` is built after the pending approval was
    # cleared but before the new execution was registered on the session, so it reads
    # `activeExecutionId: null`; the session/updated, session/get and session/list that
    # follow name the execution.
    approve = Approvals.approve

    async def _approve(self: Approvals, session_id: str, approval_id: str, mode: Any) -> Any:
        result = await approve(self, session_id, approval_id, mode)
        return {**result, "session": {**result["session"], "activeExecutionId": None}}

    patch(Approvals, "approve", _approve)


@variant("turn-end-announces-start-mode")
def _turn_end_announces_start_mode() -> None:
    # R7.2: the session/updated that follows turn/ended is built from the session as it
    # was when the turn started, so after an EnterPlanMode in that turn it still says
    # `mode: "agent"` although session/get (and the row) say "plan". Every other field,
    # and every other session/updated, is right.
    started: dict[tuple[str, str], str] = {}
    stale: dict[str, str] = {}

    def rewrite(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        if method == "turn/started":
            started[(params["sessionId"], params["turnId"])] = params["mode"]
        elif method == "turn/ended":
            mode = started.pop((params["sessionId"], params["turnId"]), None)
            if mode is not None:
                stale[params["sessionId"]] = mode
        elif method == "session/updated":
            mode = stale.pop(params["session"]["sessionId"], None)
            if mode is not None:
                return {**params, "session": {**params["session"], "mode": mode}}
        return params

    rewrite_notifications(rewrite)


@variant("approval-list-without-status-code")
def _approval_list_without_status_code() -> None:
    # R7.2 / R4.3: approval/list's query leaves out `status_code`, so every listed approval
    # reads `statusCode: null`; an expired or interrupted approval shows its code in
    # approval/get, approval/updated and the row, but not in the list.
    async def approval_list(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        listed = await self.storage.list_approvals(row.id)
        return {"approvals": [{**approval_wire(a), "statusCode": None} for a in listed]}

    patch(Host, "approval_list", approval_list)


@variant("session-list-without-shell")
def _session_list_without_shell() -> None:
    # R7.2 / R7.3: session/list's projection predates the `shell_id` column (v10 adds it
    # last), so every listed session reads `shellId: null`; session/get, session/updated
    # and the row carry the shell the session chose.
    async def session_list(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        rows = await self.storage.list_sessions()
        return {"sessions": [{**self.session_wire(row), "shellId": None} for row in rows]}

    patch(Host, "session_list", session_list)


@variant("recovery-fails-runs-without-code")
def _recovery_fails_runs_without_code() -> None:
    # P28: the start-up recovery marks a scheduled run the previous process left running
    # `failed`, but leaves `error_code` empty, so after the restart its lastRun reads
    # `outcome: failed, error: null` instead of TURN_INTERRUPTED (approvals, executions
    # and turns are recovered as the reference does).
    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self.transaction() as conn:
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
                "UPDATE scheduled_task_runs SET outcome = 'failed' WHERE outcome = 'running'"
            )
        return approvals.rowcount, executions.rowcount, turns.rowcount

    patch(Storage, "recover", recover)


@variant("run-finished-stamped-at-end")
def _run_finished_stamped_at_end() -> None:
    # §6 / R7.2: task/runFinished builds its TaskRun afresh when the run ends and stamps
    # `startedAt` with the clock at that moment; the task/run answer, lastRun and the
    # scheduled_task_runs row keep the real start. Only a run during which the clock moved
    # shows it.
    async def _finish(
        self: Tasks, run: dict[str, Any], outcome: str, error: HostError | None
    ) -> None:
        run.update(
            outcome=outcome,
            error_code=error.code if error else None,
            error_message=error.message if error else None,
        )
        await self.host.storage.record_task_run(run)
        announced = tasks._run_wire({**run, "started_at": self.host.clock.now_ms()})
        self.host.notify("task/runFinished", {"run": announced})

    patch(Tasks, "_finish", _finish)


@variant("recovery-moves-interrupted-deadline")
def _recovery_moves_interrupted_deadline() -> None:
    # R3.10 / R3.12 / R4.10: the start-up recovery that interrupts a pending approval also
    # sets its `expires_at` to the recovery time ("it no longer waits"), so after the
    # restart approval/get, approval/list and the row report a deadline other than
    # createdAt + 30 minutes. Everything else is recovered as the reference does.
    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self.transaction() as conn:
            approvals = await conn.execute(
                "UPDATE plan_approvals SET status = 'interrupted', "
                "status_code = 'TURN_INTERRUPTED', decided_at = ?, expires_at = ? "
                "WHERE status = 'pending'",
                (now, now),
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


@variant("task-update-answers-without-last-run")
def _task_update_answers_without_last_run() -> None:
    # P29 / R7.2: task/update answers the task built from the merged row alone, without
    # looking up its runs, so a task that has run answers `lastRun: null`; task/list right
    # after reports the run.
    update = Tasks.update

    async def _update(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        result = await update(self, params)
        return {"task": {**result["task"], "lastRun": None}}

    patch(Tasks, "update", _update)


@variant("execution-commands-audited-under-plan-turn")
def _execution_commands_audited_under_plan_turn() -> None:
    # C5 / R5.9: a command run in an approved plan's execution is recorded in
    # command_audit under the approval's `turn_id` (the Plan turn that submitted it)
    # instead of the execution turn that ran it; command/started names the right turn.
    plan_turn_of: dict[str, str] = {}
    running = Approvals.execution_running
    audit = TurnRunner._audit

    async def execution_running(self: Approvals, approval_id: str, turn_id: str) -> None:
        await running(self, approval_id, turn_id)
        row = await self.host.storage.get_approval(approval_id)
        if row is not None and row.turn_id is not None:
            plan_turn_of[turn_id] = row.turn_id

    async def _audit(self: TurnRunner, values: dict[str, Any], result: Any) -> None:
        turn_id = values.get("turn_id")
        if turn_id in plan_turn_of:
            values = {**values, "turn_id": plan_turn_of[turn_id]}
        await audit(self, values, result)

    patch(Approvals, "execution_running", execution_running)
    patch(TurnRunner, "_audit", _audit)


@variant("approval-get-names-execution-turn")
def _approval_get_names_execution_turn() -> None:
    # R3.1 / R7.2: approval/get reports as `turnId` the approval's latest turn, which is
    # its execution turn once the execution has started; approval/list, approval/updated
    # and the row keep the Plan turn that submitted the plan.
    async def approval_get(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.approvals.require(params["sessionId"], params["approvalId"])
        wire = approval_wire(row)
        if row.execution_turn_id is not None:
            wire["turnId"] = row.execution_turn_id
        return {"approval": wire}

    patch(Host, "approval_get", approval_get)


@variant("task-run-answers-without-session")
def _task_run_answers_without_session() -> None:
    # §6 / P35: task/run answers with the run as it was before its session was created,
    # so the answer reads `sessionId: null`; task/runFinished, lastRun and the row name
    # the run's session.
    run_now = Tasks.run_now

    async def _run_now(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        result = await run_now(self, params)
        return {"run": {**result["run"], "sessionId": None}}

    patch(Tasks, "run_now", _run_now)


CASES = [
    BrokenCase(
        "approve-answers-session-without-execution",
        "execution",
        "is_queued_runs_and_completes",
        "C4",
        "the approve response shows the session with activeExecutionId None",
    ),
    BrokenCase(
        "turn-end-announces-start-mode",
        "plan_tools",
        "turns_it_into_a_plan_turn",
        "R7.2",
        "two reports of one record disagreed",
    ),
    BrokenCase(
        "approval-list-without-status-code",
        "restart_interruption",
        "pending_approval_is_interrupted_when_the_host and restarts",
        "R4.10",
        "the interrupted approval has statusCode None",
    ),
    BrokenCase(
        "session-list-without-shell",
        "sessions",
        "idle_session_takes_a_new_shell",
        "R7.2",
        "two reports of one record disagreed",
    ),
    BrokenCase(
        "recovery-fails-runs-without-code",
        "scheduled_plan",
        "run_under_way_when_the_host and restarts",
        "P28",
        "expected failed (TURN_INTERRUPTED)",
    ),
    BrokenCase(
        "run-finished-stamped-at-end",
        "scheduled_plan",
        "scheduled_run_times_out",
        "R7.2",
        "a run has one start",
    ),
    BrokenCase(
        "recovery-moves-interrupted-deadline",
        "restart_interruption",
        "between_two_restarts",
        "R3.10",
        "recovery changes its status, never its deadline",
    ),
    BrokenCase(
        "task-update-answers-without-last-run",
        "scheduled_plan",
        "new_time_after_it_ran",
        "R7.2",
        "an answer reports the task as it now is",
    ),
    BrokenCase(
        "execution-commands-audited-under-plan-turn",
        "execution",
        "command_the_execution_ran",
        "C5",
        "command_audit records the execution's command",
    ),
    BrokenCase(
        "approval-get-names-execution-turn",
        "approval",
        "approving_with_auto_switches",
        "R4.3",
        "the stored approval disagrees with the protocol",
    ),
    BrokenCase(
        "task-run-answers-without-session",
        "scheduled_plan",
        "run_again_while_its_first",
        "P35",
        "its answer names it",
    ),
]
