"""Broken hosts: a held-out set (the second time around), written from the contract alone.

Six of these twelve were caught at first (one only by accident); all are caught now. What
was missed needed a second occurrence: a second cancelled turn, a second execution approved
with another mode, a revision approved after an expiry, two commands of one turn near the
output cap, a call id used again in one turn, a fault armed again, a second restart.
"""

from __future__ import annotations

import asyncio
import contextvars
from dataclasses import replace
from typing import Any

from hosts.registry import BrokenCase, patch, rewrite_notifications, variant
from reference_host import commands, ids, turns
from reference_host.approvals import Approvals
from reference_host.errors import HostError
from reference_host.options import OUTPUT_CAP_BYTES, Faults
from reference_host.storage import ApprovalRow, Storage
from reference_host.tasks import PLAN_REFUSAL, Tasks
from reference_host.turns import TurnRunner


@variant("cancel-flag-outlives-the-cancelled-turn")
def _cancel_flag_outlives_the_cancelled_turn() -> None:
    # R5.1: after a cancel the session is idle and takes a new prompt like any other. The
    # host marks the session "stop requested" for the loop to see between steps, and also
    # cancels the turn's task outright; the task dies before it reads (and clears) the
    # mark, so the session's NEXT turn finds it after its first model reply and ends
    # `cancelled` although nobody cancelled it.
    stop_requested: set[str] = set()
    cancel = TurnRunner.cancel
    ask = TurnRunner._ask_model

    async def _cancel(self: TurnRunner, session_id: str) -> str | None:
        if self.host.activity_of(session_id).active_turn_id is not None:
            stop_requested.add(session_id)
        return await cancel(self, session_id)

    async def _ask_model(self: TurnRunner, session: Any, turn_id: str, messages: Any) -> Any:
        reply = await ask(self, session, turn_id, messages)
        if session.id in stop_requested:
            stop_requested.discard(session.id)
            raise asyncio.CancelledError
        return reply

    patch(TurnRunner, "cancel", _cancel)
    patch(TurnRunner, "_ask_model", _ask_model)


@variant("cancel-answers-the-first-cancelled-turn")
def _cancel_answers_the_first_cancelled_turn() -> None:
    # R5.1: session/cancel answers with the id of the turn it cancels. The host remembers,
    # per session, the turn it is cancelling (so that a cancel repeated while that turn
    # winds down answers the same id) and never forgets it: the session's second cancelled
    # turn is answered with the first one's id.
    cancelling: dict[str, str] = {}
    cancel = TurnRunner.cancel

    async def _cancel(self: TurnRunner, session_id: str) -> str | None:
        active = self.host.activity_of(session_id).active_turn_id
        if active is not None:
            cancelling.setdefault(session_id, active)
        cancelled = await cancel(self, session_id)
        if cancelled is None:
            return None
        return cancelling.get(session_id, cancelled)

    patch(TurnRunner, "cancel", _cancel)


@variant("second-execution-keeps-first-permission-mode")
def _second_execution_keeps_first_permission_mode() -> None:
    # P7 / R3.4: the execution runs under the permission mode chosen when ITS plan was
    # approved. The host caches the execution's permission mode per session on the first
    # approve (setdefault) and applies the cache to every execution turn of the session, so
    # a second plan approved with `ask` after one approved with `auto` runs unasked (or the
    # other way round). The session row, approval and later prompt turns are right.
    first_mode: dict[str, str] = {}
    execution_turns: set[str] = set()
    approve = Approvals.approve
    start = TurnRunner.start
    run_call = TurnRunner._run_call

    async def _approve(self: Approvals, session_id: str, approval_id: str, mode: Any) -> Any:
        result = await approve(self, session_id, approval_id, mode)
        first_mode.setdefault(session_id, mode)
        return result

    async def _start(self: TurnRunner, session: Any, kind: str, *args: Any, **kw: Any) -> str:
        turn_id = await start(self, session, kind, *args, **kw)
        if kind == "execution":
            execution_turns.add(turn_id)
        return turn_id

    async def _run_call(
        self: TurnRunner, session: Any, turn_id: str, call: Any, unattended: bool
    ) -> Any:
        if turn_id in execution_turns and session.id in first_mode:
            session = replace(session, permission_mode=first_mode[session.id])
        return await run_call(self, session, turn_id, call, unattended)

    patch(Approvals, "approve", _approve)
    patch(TurnRunner, "start", _start)
    patch(TurnRunner, "_run_call", _run_call)


@variant("approved-plan-blocks-the-next-submit")
def _approved_plan_blocks_the_next_submit() -> None:
    # R4.8 / R1.11: only a PENDING approval blocks a new SubmitPlan. The host refuses a
    # submission while the session's latest approval is "still open", reading open as
    # `pending` or `approved`: once a plan was approved, the session can never plan again
    # (after its execution completed or was interrupted, or from inside the execution).
    submit = Approvals.submit

    async def _submit(self: Approvals, session: Any, turn_id: str, args: Any) -> ApprovalRow:
        earlier = await self.host.storage.list_approvals(session.id)
        if earlier and earlier[-1].status in ("pending", "approved"):
            raise HostError(
                "APPROVAL_PENDING",
                "the session's latest plan is still open",
                {"approvalId": earlier[-1].id},
            )
        return await submit(self, session, turn_id, args)

    patch(Approvals, "submit", _submit)


@variant("expired-flag-kept-by-the-session")
def _expired_flag_kept_by_the_session() -> None:
    # P14 / R1.11: a revision submitted after an expiry is a new pending approval that can
    # be approved or rejected before its own deadline. The host notes "this session's plan
    # expired" (to answer late clients with PLAN_APPROVAL_TIMEOUT at once) per session,
    # not per approval, and never clears it: every later plan of that session is answered
    # PLAN_APPROVAL_TIMEOUT, though it stays pending.
    expired_sessions: set[str] = set()
    expire = Approvals.expire
    ensure = Approvals._ensure_decidable

    async def _expire(self: Approvals, approval_id: str) -> None:
        await expire(self, approval_id)
        row = await self.host.storage.get_approval(approval_id)
        if row is not None and row.status == "expired":
            expired_sessions.add(row.session_id)

    async def _ensure_decidable(self: Approvals, row: ApprovalRow) -> None:
        if row.status == "pending" and row.session_id in expired_sessions:
            raise HostError("PLAN_APPROVAL_TIMEOUT", "the session's plan has expired")
        await ensure(self, row)

    patch(Approvals, "expire", _expire)
    patch(Approvals, "_ensure_decidable", _ensure_decidable)


@variant("plan-refusal-announced-once")
def _plan_refusal_announced_once() -> None:
    # R6.1 / R6.3: each run of a Plan task is refused again, and each refusal is reported
    # by task/runFinished (`refused`) and becomes the task's lastRun. The host records and
    # announces a task's refusal only the first time (it does not repeat itself until
    # the task's mode is changed): a second task/run still answers the error, but no
    # run is recorded or announced, and a second due time passes silently.
    run = Tasks.run
    update = Tasks.update

    def refused(self: Tasks) -> set[str]:
        reported: set[str] = self.__dict__.setdefault("_refusal_reported", set())
        return reported

    async def _run(self: Tasks, row: dict[str, Any]) -> dict[str, Any]:
        if row["mode"] != "agent" and row["id"] in refused(self):
            raise HostError(
                PLAN_REFUSAL,
                "a Plan run needs an interactive session (already reported)",
                {"taskId": row["id"]},
            )
        try:
            return await run(self, row)
        except HostError as error:
            if error.code == PLAN_REFUSAL:
                refused(self).add(row["id"])
            raise

    async def _update(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        result = await update(self, params)
        if "mode" in params:
            refused(self).discard(params["taskId"])
        return result

    patch(Tasks, "run", _run)
    patch(Tasks, "update", _update)


@variant("run-error-carried-to-next-run")
def _run_error_carried_to_next_run() -> None:
    # P25 / R7.2: a scheduled run that completed has `error: null` in task/runFinished and
    # lastRun; an error is never carried over from an earlier run. The host keeps each
    # task's last error for lastRun and fills it in for a run that reports none, so the
    # run after a failed (or refused) one reads `completed` with the old error.
    finish = Tasks._finish

    async def _finish(
        self: Tasks, run: dict[str, Any], outcome: str, error: HostError | None
    ) -> None:
        last: dict[str, HostError] = self.__dict__.setdefault("_last_error", {})
        if error is not None:
            last[run["task_id"]] = error
        else:
            error = last.get(run["task_id"])
        await finish(self, run, outcome, error)

    patch(Tasks, "_finish", _finish)


@variant("output-cap-shared-by-the-turn")
def _output_cap_shared_by_the_turn() -> None:
    # P20: each command may stream up to maxCommandOutputBytes and is truncated only past
    # it. The host keeps the output budget per turn, not per command: the second command
    # of a turn gets only what the first left, and is cut short (`truncated: true`) even
    # though its own output is under the cap.
    used: dict[str, int] = {}
    command_turn: contextvars.ContextVar[str | None] = contextvars.ContextVar(
        "command_turn", default=None
    )
    run_command = commands.run_command

    class TurnBudget(commands._Collector):
        def __init__(self) -> None:
            super().__init__()
            self.turn = command_turn.get()

        def keep(self, data: bytes) -> bytes:
            if self.turn is None:
                return super().keep(data)
            spent = used.get(self.turn, 0)
            room = max(OUTPUT_CAP_BYTES - spent, 0)
            if len(data) > room:
                self.truncated = True
            part = data[:room]
            self.kept += part
            used[self.turn] = spent + len(part)
            return part

    async def _run_command(**kw: Any) -> Any:
        token = command_turn.set(kw.get("turn_id"))
        try:
            return await run_command(**kw)
        finally:
            command_turn.reset(token)

    patch(commands, "_Collector", TurnBudget)
    patch(turns, "run_command", _run_command)


@variant("command-id-from-turn-and-call-index")
def _command_id_from_turn_and_call_index() -> None:
    # C5 / R7.3: every command has its own commandId, which is its command_audit row's id.
    # The host builds the id from the turn and the call's position among the commands of
    # the model's message; the position starts again at 0 for each message, so the first
    # command of the turn's second message gets the id of the first message's command
    # (its output is numbered from 0 again and its audit row overwrites the earlier one).
    batch: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar(
        "command_batch", default=None
    )
    run_batch = TurnRunner._run_batch
    new_id = ids.new_id

    async def _run_batch(
        self: TurnRunner, session: Any, turn_id: str, calls: Any, unattended: bool
    ) -> Any:
        token = batch.set([turn_id, 0])
        try:
            return await run_batch(self, session, turn_id, calls, unattended)
        finally:
            batch.reset(token)

    def _new_id(prefix: str) -> str:
        current = batch.get()
        if prefix != "cmd" or current is None:
            return new_id(prefix)
        turn_id, index = current
        current[1] = index + 1
        return f"cmd_{turn_id}_{index}"

    patch(TurnRunner, "_run_batch", _run_batch)
    patch(commands, "new_id", _new_id)


@variant("repeated-call-id-announced-once")
def _repeated_call_id_announced_once() -> None:
    # P9 / R1.3: each tool call is announced by one turn/toolCall, and call ids are unique
    # only within one assistant message. The host keeps the call ids it has announced in a
    # turn (to never announce a call twice) and skips a call of a later message that
    # reuses an id: that call runs and gets its turn/toolResult, but no turn/toolCall.
    announced: set[tuple[str, str, str]] = set()

    def rewrite(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        if method == "turn/toolCall":
            key = (params["sessionId"], params["turnId"], str(params["toolCallId"]))
            if key in announced:
                return None
            announced.add(key)
        return params

    rewrite_notifications(rewrite)


@variant("fault-fires-once-per-process")
def _fault_fires_once_per_process() -> None:
    # Fault points: a fault fires once, the next time its point is reached, and is then
    # disarmed; arming it again arms it again. The host makes faults one-shot with a
    # "fired" set it never clears: a fault armed a second time in the same process (after
    # it fired once) silently never fires.
    def take(self: Faults, point: str) -> bool:
        fired: set[str] = self.__dict__.setdefault("_fired", set())
        if point in self.armed and point not in fired:
            fired.add(point)
            self.armed.discard(point)
            return True
        self.armed.discard(point)
        return False

    patch(Faults, "take", take)


@variant("recovery-skips-sessions-recovered-before")
def _recovery_skips_sessions_recovered_before() -> None:
    # R4.10 / C3: every start's recovery marks every earlier `pending` approval
    # `interrupted`. To keep recovery from touching a session twice, the host skips
    # sessions that already hold an approval an earlier recovery interrupted: a session
    # that planned again after a first restart keeps its new plan `pending` in storage
    # across the second restart (with no deadline timer and no pendingApprovalId).
    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self.transaction() as conn:
            approvals = await conn.execute(
                "UPDATE plan_approvals SET status = 'interrupted', "
                "status_code = 'TURN_INTERRUPTED', decided_at = ? WHERE status = 'pending' "
                "AND session_id NOT IN (SELECT session_id FROM plan_approvals "
                "WHERE status = 'interrupted' AND status_code = 'TURN_INTERRUPTED')",
                (now,),
            )
            executions = await conn.execute(
                "UPDATE plan_approvals SET execution_state = 'interrupted' "
                "WHERE execution_state IN ('queued', 'running')"
            )
            ended = await conn.execute(
                "UPDATE turns SET state = 'interrupted', ended_at = ? WHERE state = 'active'",
                (now,),
            )
            await conn.execute(
                "UPDATE scheduled_task_runs SET outcome = 'failed', "
                "error_code = 'TURN_INTERRUPTED', "
                "error_message = 'the host stopped before the run finished' "
                "WHERE outcome = 'running'"
            )
        return approvals.rowcount, executions.rowcount, ended.rowcount

    patch(Storage, "recover", recover)


CASES = [
    BrokenCase(
        "cancel-flag-outlives-the-cancelled-turn",
        "turn_boundaries",
        "ends_it_and_frees",
        "R5.1",
        "the new turn ended",
    ),
    BrokenCase(
        "cancel-answers-the-first-cancelled-turn",
        "turn_boundaries",
        "second_cancelled_turn",
        "R5.1",
        "a cancel answers the id of the turn it cancels",
    ),
    BrokenCase(
        "second-execution-keeps-first-permission-mode",
        "execution",
        "earlier_plan_ran_with_auto",
        "P7",
        "Bash ran without asking for permission",
    ),
    BrokenCase(
        "approved-plan-blocks-the-next-submit",
        "execution",
        "next_plan_is_carried_out",
        "R4.9",
        "the Plan turn ended",
    ),
    BrokenCase(
        "expired-flag-kept-by-the-session",
        "deadline",
        "after_an_expiry_can_be",
        "P14",
        "the approve was refused with PLAN_APPROVAL_TIMEOUT",
    ),
    BrokenCase(
        "plan-refusal-announced-once",
        "scheduled_plan",
        "never_switches_a_refused_task",
        "R6.3",
        "no task/runFinished notification matched",
        slow=True,
    ),
    BrokenCase(
        "run-error-carried-to-next-run",
        "scheduled_plan",
        "whose_run_failed_runs_again",
        "R7.2",
        "completed with the error",
    ),
    BrokenCase(
        "output-cap-shared-by-the-turn",
        "shell",
        "own_output",
        "P20",
        "the cap counts each command's own output",
    ),
    BrokenCase(
        "command-id-from-turn-and-call-index",
        "shell",
        "numbers_its_output_from_0",
        "P20",
        "each command numbers its own output from 0",
    ),
    BrokenCase(
        "repeated-call-id-announced-once",
        "sessions",
        "named_alike_are",
        "P9",
        "is announced by its own turn/toolCall",
    ),
    BrokenCase(
        "fault-fires-once-per-process",
        "artifact_integrity",
        "armed_again_after",
        "R2.12",
        "the SubmitPlan call ran, expected ARTIFACT_WRITE_FAILED",
    ),
    BrokenCase(
        "recovery-skips-sessions-recovered-before",
        "restart_interruption",
        "between_two_restarts",
        "R4.10",
        "storage still showed the approval pending",
    ),
]
