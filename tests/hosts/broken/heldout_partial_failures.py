"""Broken hosts: a held-out set (what a failure part-way leaves behind), written from the
contract alone.

Two of these eleven were caught at first; all are caught now. Scenarios had failed a turn
only at its first provider request, in a session that was alone. New: a provider error after
a failed tool call ends the turn with the provider's error, and the failed turn keeps its
call and result in the transcript; a turn that entered Plan mode and then failed leaves the
session in Plan; a failed turn in one session leaves another's command running and its
question open; a failed SubmitPlan leaves SubmitPlan offered; a failed scheduled run is
recorded with its error everywhere; a command whose project folder is gone gets an error
result and the turn goes on, and every command announced ends before its turn does.
"""

from __future__ import annotations

import asyncio
import contextvars
from dataclasses import replace
from typing import Any

from hosts.registry import BrokenCase, patch, variant
from reference_host import commands, reaper, turns
from reference_host.approvals import Approvals, approval_wire
from reference_host.errors import HostError
from reference_host.ids import new_id
from reference_host.storage import SessionRow
from reference_host.tasks import Tasks, _run_wire
from reference_host.turns import CallOutcome, TurnRunner, _failure


@variant("turn-error-is-first-failure-of-the-turn")
def _turn_error_is_first_failure_of_the_turn() -> None:
    # P25 / P9: a turn whose provider fails after one of its tool calls failed (a Read of a
    # missing file, a denied call) reports that earlier tool error in turn/ended instead of
    # PROVIDER_ERROR: the host keeps "the turn's error" from the first failure it saw.
    first: dict[str, HostError] = {}
    run_batch = TurnRunner._run_batch
    end = TurnRunner._end

    async def _run_batch(
        self: TurnRunner, session: Any, turn_id: str, calls: Any, unattended: bool
    ) -> list[CallOutcome]:
        outcomes = await run_batch(self, session, turn_id, calls, unattended)
        for outcome in outcomes:
            if outcome.error is not None:
                first.setdefault(turn_id, outcome.error)
        return outcomes

    async def _end(
        self: TurnRunner,
        session_id: str,
        turn_id: str,
        approval: Any,
        on_end: Any,
        outcome: str,
        error: HostError | None,
    ) -> None:
        earlier = first.pop(turn_id, None)
        if outcome == "failed" and earlier is not None:
            error = earlier
        await end(self, session_id, turn_id, approval, on_end, outcome, error)

    patch(TurnRunner, "_run_batch", _run_batch)
    patch(TurnRunner, "_end", _end)


@variant("failed-turn-drops-its-tool-rows")
def _failed_turn_drops_its_tool_rows() -> None:
    # R1.3 / P25: a turn that fails part-way (the provider errors after some tool calls ran)
    # is "rolled back": its assistant and tool rows are deleted from the transcript and only
    # its prompt stays, so session/transcript and the next turn's request lose the calls
    # that ran and their results.
    end = TurnRunner._end

    async def _end(
        self: TurnRunner,
        session_id: str,
        turn_id: str,
        approval: Any,
        on_end: Any,
        outcome: str,
        error: HostError | None,
    ) -> None:
        if outcome == "failed":
            async with self.host.storage.transaction() as conn:
                await conn.execute(
                    "DELETE FROM transcript WHERE turn_id = ? AND role <> 'user'", (turn_id,)
                )
        await end(self, session_id, turn_id, approval, on_end, outcome, error)

    patch(TurnRunner, "_end", _end)


@variant("failed-call-skips-the-rest-of-batch")
def _failed_call_skips_the_rest_of_batch() -> None:
    # P9: once a call of a message fails (status error: a missing file, an Edit that does not
    # match, bad input), the later calls of the same message are not run: each gets a
    # TOOL_FAILED result "skipped", although a failed call must not stop the others.
    failed: dict[str, bool] = {}
    run_batch = TurnRunner._run_batch
    run_call = TurnRunner._run_call

    async def _run_batch(
        self: TurnRunner, session: Any, turn_id: str, calls: Any, unattended: bool
    ) -> list[CallOutcome]:
        failed[turn_id] = False
        try:
            return await run_batch(self, session, turn_id, calls, unattended)
        finally:
            failed.pop(turn_id, None)

    async def _run_call(
        self: TurnRunner, session: Any, turn_id: str, call: Any, unattended: bool
    ) -> CallOutcome:
        if failed.get(turn_id):
            skipped = f"{call.name} was not run: an earlier call of this message failed"
            return _failure(HostError("TOOL_FAILED", skipped))
        outcome = await run_call(self, session, turn_id, call, unattended)
        if outcome.status == "error" and turn_id in failed:
            failed[turn_id] = True
        return outcome

    patch(TurnRunner, "_run_batch", _run_batch)
    patch(TurnRunner, "_run_call", _run_call)


@variant("submit-plan-withdrawn-after-a-failed-try")
def _submit_plan_withdrawn_after_a_failed_try() -> None:
    # R1.4 / R2.12: after a SubmitPlan of the turn was refused or failed (ARTIFACT_WRITE_FAILED,
    # SUBMIT_PLAN_NOT_ALONE, bad input), the rest of the Plan turn's requests no longer offer
    # SubmitPlan (the host drops a tool "already used"), though the Plan tools must be offered
    # in every request and the model may submit again.
    withdrawn: set[str] = set()
    asking: contextvars.ContextVar[str | None] = contextvars.ContextVar("asking", default=None)
    run_batch = TurnRunner._run_batch
    ask = TurnRunner._ask_model
    offered = turns.offered_tools

    async def _run_batch(
        self: TurnRunner, session: Any, turn_id: str, calls: Any, unattended: bool
    ) -> list[CallOutcome]:
        outcomes = await run_batch(self, session, turn_id, calls, unattended)
        for call, outcome in zip(calls, outcomes, strict=True):
            if call.name == "SubmitPlan" and outcome.status != "ok":
                withdrawn.add(turn_id)
        return outcomes

    async def _ask_model(self: TurnRunner, session: Any, turn_id: str, messages: Any) -> Any:
        token = asking.set(turn_id)
        try:
            return await ask(self, session, turn_id, messages)
        finally:
            asking.reset(token)

    def offered_tools(mode: str) -> list[Any]:
        tools = offered(mode)
        if asking.get() in withdrawn:
            tools = [tool for tool in tools if tool.name != "SubmitPlan"]
        return tools

    patch(TurnRunner, "_run_batch", _run_batch)
    patch(TurnRunner, "_ask_model", _ask_model)
    patch(turns, "offered_tools", offered_tools)


@variant("execution-failing-at-once-rolls-back-approve")
def _execution_failing_at_once_rolls_back_approve() -> None:
    # R4.4 / R4.5: an execution turn that fails before the model said anything (its first
    # provider request fails) is treated as never started: the host undoes the approve, so
    # the approval reads pending again (no decision, no execution) and the session is back in
    # Plan with its earlier permission mode, instead of approved with execution interrupted.
    before: dict[str, SessionRow] = {}
    approve = Approvals.approve
    end = TurnRunner._end

    async def _approve(self: Approvals, session_id: str, approval_id: str, mode: Any) -> Any:
        session = await self.host.storage.get_session(session_id)
        if session is not None:
            before[approval_id] = session
        return await approve(self, session_id, approval_id, mode)

    async def _end(
        self: TurnRunner,
        session_id: str,
        turn_id: str,
        approval: Any,
        on_end: Any,
        outcome: str,
        error: HostError | None,
    ) -> None:
        host = self.host
        earlier = before.pop(approval.id, None) if approval is not None else None
        said = any(
            turn == turn_id and role != "user"
            for _seq, turn, role, _content, _at in await host.storage.transcript(session_id)
        )
        if earlier is None or outcome != "failed" or said:
            await end(self, session_id, turn_id, approval, on_end, outcome, error)
            return
        now = host.clock.now_ms()
        await host.storage.end_turn(turn_id, outcome, now)
        row = await host.storage.get_approval(approval.id)
        assert row is not None
        pending = replace(
            row,
            status="pending",
            status_code=None,
            decided_at=None,
            permission_mode=None,
            execution_id=None,
            execution_state=None,
            execution_turn_id=None,
        )
        async with host.storage.transaction() as conn:
            await host.storage.write_approval(conn, pending)
            await host.storage.write_session(conn, replace(earlier, updated_at=now))
        host.set_activity(
            session_id,
            active_turn_id=None,
            active_execution_id=None,
            pending_approval_id=approval.id,
        )
        host.notify(
            "execution/updated",
            {
                "sessionId": session_id,
                "approvalId": approval.id,
                "executionId": approval.execution_id,
                "executionState": "interrupted",
                "turnId": turn_id,
            },
        )
        host.notify("approval/updated", {"approval": approval_wire(pending)})
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

    patch(Approvals, "approve", _approve)
    patch(TurnRunner, "_end", _end)


@variant("failed-run-error-not-stored")
def _failed_run_error_not_stored() -> None:
    # P25 / R7.2: a scheduled run whose turn failed (a provider error) is announced in
    # task/runFinished with its error, but only its outcome is written to
    # scheduled_task_runs: lastRun and the row read failed with error null.
    finish = Tasks._finish

    async def _finish(
        self: Tasks, run: dict[str, Any], outcome: str, error: HostError | None
    ) -> None:
        if outcome != "failed" or error is None:
            await finish(self, run, outcome, error)
            return
        run.update(outcome=outcome, error_code=None, error_message=None)
        await self.host.storage.record_task_run(run)
        announced = {**run, "error_code": error.code, "error_message": error.message}
        self.host.notify("task/runFinished", {"run": _run_wire(announced)})

    patch(Tasks, "_finish", _finish)


class _SpawnEscape(BaseException):
    """An OSError from starting a shell, let past the tool call's own error handling."""


@variant("spawn-failure-fails-the-turn")
def _spawn_failure_fails_the_turn() -> None:
    # P9: a Bash whose shell cannot be started (the workspace folder was removed, the shell
    # is gone) is not reported as that call's failure: the OSError escapes the tool call and
    # the whole turn ends failed with TOOL_FAILED, with no turn/toolResult for the call and
    # no further provider request, though a failed call must not end the turn.
    run_command = turns.run_command
    run_call = TurnRunner._run_call

    async def _run_command(**kwargs: Any) -> Any:
        try:
            return await run_command(**kwargs)
        except OSError as exc:
            raise _SpawnEscape(str(exc)) from exc

    async def _run_call(
        self: TurnRunner, session: Any, turn_id: str, call: Any, unattended: bool
    ) -> CallOutcome:
        try:
            return await run_call(self, session, turn_id, call, unattended)
        except _SpawnEscape as escaped:
            raise HostError("TOOL_FAILED", f"the shell could not start: {escaped}") from None

    patch(turns, "run_command", _run_command)
    patch(TurnRunner, "_run_call", _run_call)


@variant("unspawned-command-announced")
def _unspawned_command_announced() -> None:
    # R7.3 / C5: the host announces command/started before it spawns the shell; when the
    # spawn fails (a workspace folder that is gone) the call fails with TOOL_FAILED, but the
    # announced command never gets its command/exited nor a command_audit row.
    run_command = turns.run_command

    async def _run_command(**kwargs: Any) -> Any:
        try:
            return await run_command(**kwargs)
        except OSError:
            kwargs["notify"](
                "command/started",
                {
                    "sessionId": kwargs["session_id"],
                    "turnId": kwargs["turn_id"],
                    "commandId": new_id("cmd"),
                    "shellId": kwargs["shell"].shell_id,
                    "command": kwargs["command"],
                    "cwd": kwargs["cwd"],
                },
            )
            raise

    patch(turns, "run_command", _run_command)


@variant("turn-failure-denies-every-open-question")
def _turn_failure_denies_every_open_question() -> None:
    # P7 / R5.9: when a turn fails, the host abandons "the open permission questions" to
    # leave none dangling, but it abandons every open question of the host: another
    # session's call waiting for an answer is denied without one, and the user's later
    # answer gets PERMISSION_REQUEST_NOT_FOUND.
    end = TurnRunner._end

    async def _end(
        self: TurnRunner,
        session_id: str,
        turn_id: str,
        approval: Any,
        on_end: Any,
        outcome: str,
        error: HostError | None,
    ) -> None:
        if outcome == "failed":
            for request in list(self.host.permissions._open.values()):
                if not request.answer.done():
                    request.answer.set_result(False)
        await end(self, session_id, turn_id, approval, on_end, outcome, error)

    patch(TurnRunner, "_end", _end)


@variant("turn-failure-kills-every-command")
def _turn_failure_kills_every_command() -> None:
    # R5.9 / P19: to leave no process of a failed turn behind, the host ends every command
    # it is running when a turn fails, also those of other sessions' turns, which then end
    # killed by SIGKILL although nothing cancelled them.
    end = TurnRunner._end

    async def _end(
        self: TurnRunner,
        session_id: str,
        turn_id: str,
        approval: Any,
        on_end: Any,
        outcome: str,
        error: HostError | None,
    ) -> None:
        if outcome == "failed":
            for pid, command_id in list(commands._COMMANDS.items()):
                await asyncio.to_thread(reaper.end_command, pid, command_id, True)
        await end(self, session_id, turn_id, approval, on_end, outcome, error)

    patch(TurnRunner, "_end", _end)


@variant("failed-turn-reverts-enter-plan-mode")
def _failed_turn_reverts_enter_plan_mode() -> None:
    # R4.9 / R1.4: a turn that called EnterPlanMode and then failed (a provider error) is put
    # back in the mode it started in: the session returns to Agent (announced), although
    # EnterPlanMode put it in Plan and a turn ends in whatever mode it reached.
    started: dict[str, str] = {}
    start = TurnRunner.start
    end = TurnRunner._end

    async def _start(self: TurnRunner, session: Any, kind: str, *args: Any, **kw: Any) -> str:
        turn_id = await start(self, session, kind, *args, **kw)
        started[turn_id] = session.mode
        return turn_id

    async def _end(
        self: TurnRunner,
        session_id: str,
        turn_id: str,
        approval: Any,
        on_end: Any,
        outcome: str,
        error: HostError | None,
    ) -> None:
        mode = started.pop(turn_id, None)
        if outcome == "failed" and mode is not None:
            row = await self.host.storage.get_session(session_id)
            if row is not None and row.mode != mode:
                now = self.host.clock.now_ms()
                await self.host.storage.update_session(replace(row, mode=mode, updated_at=now))
                await self.host.publish_session(session_id)
        await end(self, session_id, turn_id, approval, on_end, outcome, error)

    patch(TurnRunner, "start", _start)
    patch(TurnRunner, "_end", _end)


CASES = [
    BrokenCase(
        "turn-error-is-first-failure-of-the-turn",
        "sessions",
        "provider_error_after_a_failed_tool_call",
        "P25",
        "reports that error (PROVIDER_ERROR), whatever tool call failed before it",
    ),
    BrokenCase(
        "failed-turn-drops-its-tool-rows",
        "sessions",
        "failed_after_a_tool_call_keeps_the_call",
        "R1.3",
        "a turn that failed is not undone",
    ),
    BrokenCase(
        "failed-call-skips-the-rest-of-batch",
        "plan_tools",
        "every_call_of_a_message_gets_exactly_one_result",
        "P9",
        "expected UNKNOWN_TOOL",
    ),
    BrokenCase(
        "submit-plan-withdrawn-after-a-failed-try",
        "artifact_integrity",
        "submits_the_plan_again_after",
        "R1.4",
        "a failed SubmitPlan leaves the planning tools as they were",
    ),
    BrokenCase(
        "execution-failing-at-once-rolls-back-approve",
        "execution",
        "execution_whose_turn_fails_is_interrupted",
        "R4.5",
        "after its turn ended the execution is reported",
    ),
    BrokenCase(
        "failed-run-error-not-stored",
        "scheduled_plan",
        "run_whose_model_provider_answers_with_an_error",
        "P25",
        "a run whose turn failed is recorded with its turn's error",
    ),
    BrokenCase(
        "spawn-failure-fails-the-turn",
        "shell",
        "project_folder_is_gone_gets_an_error_result",
        "P9",
        "the host reported no result for the Bash call",
    ),
    BrokenCase(
        "unspawned-command-announced",
        "shell",
        "project_folder_is_gone_gets_an_error_result",
        "R7.3",
        "ended before the command/exited of command(s)",
    ),
    BrokenCase(
        "turn-failure-denies-every-open-question",
        "isolation",
        "fails_in_one_session_leaves_another_sessions_question",
        "R5.9",
        "the end of the first session's turn closed the second session's question",
    ),
    BrokenCase(
        "turn-failure-kills-every-command",
        "isolation",
        "fails_in_one_session_leaves_another_sessions_command",
        "R5.9",
        "the end of the first session's turn ended the second session's command",
    ),
    BrokenCase(
        "failed-turn-reverts-enter-plan-mode",
        "plan_tools",
        "entered_plan_mode_and_then_failed",
        "P10",
        "a turn that fails afterwards is not undone",
    ),
]
