"""Broken hosts: a tenth held-out set (notifications and what they report), written from
the contract alone.

Eight of these thirteen went uncaught at first; six of them are caught now (a scheduled
run's turn kind, output after a command's end, the execution's states announced on its
approval, a tool call's raw input, a due task under way before the clock's answer, and
output of commands in two sessions at once). The last two are caught since the contract
fixes that order and that moment (Ordering): a configure's session/updated before its
answer, and a switch to Plan announced while its turn runs.
"""

from __future__ import annotations

import asyncio
import contextvars
from dataclasses import replace
from typing import Any

from hosts.registry import BrokenCase, patch, rewrite_notifications, variant
from reference_host import turns
from reference_host.host import Host
from reference_host.storage import SessionRow
from reference_host.tasks import Tasks
from reference_host.turns import TurnRunner


# P9: a batch is run in two passes, first the calls the host refuses by policy, then the
# others; the outcomes are kept in that processing order and paired with the calls in the
# model's order, so in a batch where a refused call follows an allowed one each
# turn/toolResult (and the tool message given to the model) carries the other call's result.
@variant("batch-results-out-of-step")
def _batch_results_out_of_step() -> None:
    async def _run_batch(
        self: TurnRunner, session: SessionRow, turn_id: str, calls: Any, unattended: bool
    ) -> list[Any]:
        for call in calls:
            self.host.notify(
                "turn/toolCall",
                {
                    "sessionId": session.id,
                    "turnId": turn_id,
                    "toolCallId": call.call_id,
                    "tool": call.name,
                    "input": turns._parse_arguments(call),
                },
            )
        outcomes: list[Any] = []
        try:
            if any(call.name == "SubmitPlan" for call in calls) and len(calls) > 1:
                refusal = turns.HostError(
                    "SUBMIT_PLAN_NOT_ALONE",
                    "SubmitPlan must be the only tool call of its message; no call of it ran",
                )
                outcomes = [turns._failure(refusal) for _ in calls]
            else:
                runnable = []
                for call in calls:  # first pass: what policy refuses outright
                    refused = turns._gate(session.mode, call.name)
                    if refused is not None:
                        outcomes.append(turns._failure(refused))
                    else:
                        runnable.append(call)
                for call in runnable:  # second pass: run the rest
                    outcomes.append(await self._run_call(session, turn_id, call, unattended))
                    session = await self.host.require_session(session.id)
        except asyncio.CancelledError:
            cut = turns._failure(
                turns.HostError("TURN_CANCELLED", "the turn was cancelled before it ran")
            )
            outcomes += [cut] * (len(calls) - len(outcomes))
            self._announce_results(session.id, turn_id, calls, outcomes)
            raise
        self._announce_results(session.id, turn_id, calls, outcomes)
        return outcomes

    patch(TurnRunner, "_run_batch", _run_batch)


# R4.7: the execution's turn/started reports the mode of the session as the approve handler
# read it before its transaction (still Plan); the turn itself runs in Agent.
@variant("execution-started-in-plan-mode")
def _execution_started_in_plan_mode() -> None:
    original = TurnRunner.start

    async def start(
        self: TurnRunner, session: SessionRow, kind: str, user_text: str, *args: Any, **kw: Any
    ) -> str:
        if kind == "execution":
            session = replace(session, mode="plan")
        return await original(self, session, kind, user_text, *args, **kw)

    patch(TurnRunner, "start", start)


# R4.7 / §6 (TurnKind): a scheduled task's run goes through the same announcement as a
# user's prompt, so its turn/started says kind "prompt"; the turns row says "scheduled".
@variant("scheduled-run-announced-as-prompt")
def _scheduled_run_announced_as_prompt() -> None:
    def rewrite(method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "turn/started" and params.get("kind") == "scheduled":
            return {**params, "kind": "prompt"}
        return params

    rewrite_notifications(rewrite)


# R5.9: the output pump stamps each command/output with the session of the command the host
# started last (kept host-wide), so while two sessions run commands at once the earlier
# command's output names the other session.
@variant("command-output-names-latest-session")
def _command_output_names_latest_session() -> None:
    original = turns.run_command
    latest: dict[str, str] = {}

    async def run_command(**kw: Any) -> Any:
        latest["session"] = kw["session_id"]
        notify = kw["notify"]

        def stamped(method: str, params: dict[str, Any]) -> None:
            if method == "command/output":
                params = {**params, "sessionId": latest["session"]}
            notify(method, params)

        return await original(**{**kw, "notify": stamped})

    patch(turns, "run_command", run_command)


# R7.3 / P20: output is sent in 500 ms batches, and command/exited as soon as the shell is
# reaped, without flushing the batch first: output read in the command's last moment (for a
# short command, all of it) arrives after its command/exited (still before turn/ended). The
# batch was 50 ms; on a loaded machine a shell's exit then came after the batch went out.
@variant("output-tail-after-exited")
def _output_tail_after_exited() -> None:
    original = turns.run_command

    async def run_command(**kw: Any) -> Any:
        notify = kw["notify"]
        loop = asyncio.get_running_loop()
        held: list[dict[str, Any]] = []  # the chunk read last, sent a moment later

        def flush() -> None:
            while held:
                notify("command/output", held.pop(0))

        def late_tail(method: str, params: dict[str, Any]) -> None:
            if method == "command/output":
                flush()
                held.append(params)
                loop.call_later(0.5, flush)
                return
            notify(method, params)
            if method == "command/exited":
                flush()  # what was read as the shell exited goes out after command/exited

        return await original(**{**kw, "notify": late_tail})

    patch(turns, "run_command", run_command)


# R7.3 / C5: command/started names the host's default shell, looked up for the
# announcement, while the command runs in (and command_audit records) the session's own
# shell; only a session whose shell differs from the default shows it.
@variant("started-names-the-default-shell")
def _started_names_the_default_shell() -> None:
    default: contextvars.ContextVar[str | None] = contextvars.ContextVar("default", default=None)
    bash = TurnRunner._bash
    original = turns.run_command

    async def _bash(self: TurnRunner, session: SessionRow, turn_id: str, args: Any) -> Any:
        token = default.set(await self.host.default_shell_id())
        try:
            return await bash(self, session, turn_id, args)
        finally:
            default.reset(token)

    async def run_command(**kw: Any) -> Any:
        notify = kw["notify"]
        announced = default.get()

        def named(method: str, params: dict[str, Any]) -> None:
            if method == "command/started" and announced is not None:
                params = {**params, "shellId": announced}
            notify(method, params)

        return await original(**{**kw, "notify": named})

    patch(TurnRunner, "_bash", _bash)
    patch(turns, "run_command", run_command)


# §6 / R5.9: the task runner keeps the run it started last; when a run ends its
# task/runFinished reports that latest run (its runId, taskId, session, startedAt) with this
# run's outcome. The stored rows are right; with one run at a time nothing shows.
@variant("run-finished-reports-latest-run")
def _run_finished_reports_latest_run() -> None:
    from reference_host import tasks

    run = Tasks.run
    latest: dict[str, dict[str, Any]] = {}

    async def run_latest(self: Tasks, row: dict[str, Any]) -> dict[str, Any]:
        wire = await run(self, row)
        latest["run"] = wire
        return wire

    async def _finish(self: Tasks, record: dict[str, Any], outcome: str, error: Any) -> None:
        record.update(
            outcome=outcome,
            error_code=error.code if error else None,
            error_message=error.message if error else None,
        )
        await self.host.storage.record_task_run(record)
        wire = tasks._run_wire(record)
        assert wire is not None
        if record["session_id"] is not None and "run" in latest:
            keep = {k: wire[k] for k in ("outcome", "error")}
            wire = {**latest["run"], **keep}
        self.host.notify("task/runFinished", {"run": wire})

    patch(Tasks, "run", run_latest)
    patch(Tasks, "_finish", _finish)


# R7.2 / R4.5: a change of the execution state (running, completed, interrupted) is
# announced by execution/updated only; no approval/updated carries the approval's new
# executionState, though approval/updated announces every change of status or execution
# state (methods.json).
@variant("execution-progress-not-on-approval")
def _execution_progress_not_on_approval() -> None:
    def rewrite(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        if method == "approval/updated" and params["approval"].get("executionState") in (
            "running",
            "completed",
            "interrupted",
        ):
            return None
        return params

    rewrite_notifications(rewrite)


# Ordering: session/configure's session/updated is queued on the event loop and sent after
# the configure response, though the response reports the state it announces.
@variant("configure-notice-after-answer")
def _configure_notice_after_answer() -> None:
    original = Host.session_configure

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        notify = self.notify
        held: list[dict[str, Any]] = []

        def hold(method: str, sent: dict[str, Any]) -> None:
            if method == "session/updated" and sent["session"]["sessionId"] == params.get(
                "sessionId"
            ):
                held.append(sent)
            else:
                notify(method, sent)

        self.notify = hold
        try:
            result = await original(self, params)
        finally:
            self.notify = notify
        for sent in held:
            asyncio.get_running_loop().call_soon(notify, "session/updated", sent)
        return result

    patch(Host, "session_configure", session_configure)


# P31: each turn/text is tidied for display, a CR LF inside a delta becoming LF, so the
# texts joined are not the model's answer when it wrote Windows line ends.
@variant("text-crlf-folded")
def _text_crlf_folded() -> None:
    def rewrite(method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "turn/text":
            return {**params, "text": params["text"].replace("\r\n", "\n")}
        return params

    rewrite_notifications(rewrite)


# P9 / P27 (TurnToolCallParams.input): arguments that are not valid JSON are announced in
# turn/toolCall as null instead of the raw text the model sent.
@variant("unparsable-input-announced-as-null")
def _unparsable_input_announced_as_null() -> None:
    arguments = turns._arguments

    def _parse_arguments(call: Any) -> Any:
        try:
            return arguments(call)
        except turns.HostError:
            return None

    patch(turns, "_parse_arguments", _parse_arguments)


# Ordering / P32: a task that comes due on conformance/clock/set or advance is started in
# the background, so the clock call answers before the run's turn/started, session and
# task/list show it (the timer's effect is not there in the harness's next request).
@variant("due-task-started-after-clock-answer")
def _due_task_started_after_clock_answer() -> None:
    fire = Tasks._fire
    running: set[asyncio.Task[None]] = set()

    async def _fire(self: Tasks, task_id: str) -> None:
        task = asyncio.get_running_loop().create_task(fire(self, task_id))
        running.add(task)
        task.add_done_callback(running.discard)

    patch(Tasks, "_fire", _fire)


# R1.3 / R7.2 (session/updated: "a session's mode ... changed"): EnterPlanMode stores the
# session in Plan but announces nothing; the next session/updated comes only when the turn
# ends.
@variant("enter-plan-mode-not-announced")
def _enter_plan_mode_not_announced() -> None:
    async def enter_plan_mode(self: Host, session: SessionRow) -> None:
        await self.storage.update_session(
            replace(session, mode="plan", updated_at=self.clock.now_ms())
        )

    patch(Host, "enter_plan_mode", enter_plan_mode)


CASES = [
    BrokenCase(
        "batch-results-out-of-step",
        "plan_tools",
        "every_call_of_a_message_gets",
        "P9",
        "the Read call failed",
    ),
    BrokenCase(
        "execution-started-in-plan-mode",
        "execution",
        "same_agent_carries_out",
        "R4.7",
        "the execution turn ran in plan mode",
    ),
    BrokenCase(
        "scheduled-run-announced-as-prompt",
        "scheduled_plan",
        "changed_to_agent_runs_unattended",
        "R6.3",
        "announced as a 'prompt' turn",
    ),
    BrokenCase(
        "output-tail-after-exited",
        "shell",
        "output_arrives_while",
        "R7.3",
        "came after its command/exited",
    ),
    BrokenCase(
        "started-names-the-default-shell",
        "shell",
        "shell_wins_over_the_default",
        "R7.3",
        "the command was announced in",
    ),
    BrokenCase(
        "run-finished-reports-latest-run",
        "scheduled_plan",
        "two_tasks_due_at_the_same_time",
        "P29",
        "did not",
        slow=True,
    ),
    BrokenCase(
        "execution-progress-not-on-approval",
        "execution",
        "queued_runs_and_completes",
        "R7.2",
        "the last approval/updated",
    ),
    BrokenCase(
        "text-crlf-folded",
        "sessions",
        "answer_reaches_the_user_exactly",
        "P31",
        "joined, read",
    ),
    BrokenCase(
        "unparsable-input-announced-as-null",
        "submit_plan",
        "malformed_submission and NaN",
        "P27",
        "announced the SubmitPlan call's input",
    ),
    BrokenCase(
        "due-task-started-after-clock-answer",
        "scheduled_plan",
        "plan_task_that_comes_due",
        "P32",
        "only after that move was answered",
    ),
    BrokenCase(
        "command-output-names-latest-session",
        "isolation",
        "running_commands_at_once",
        "R5.9",
        "names session",
    ),
    BrokenCase(
        "configure-notice-after-answer",
        "turn_boundaries",
        "once_the_plan_is_rejected_the_session_takes",
        "R7.2",
        "was answered before the session/updated",
    ),
    BrokenCase(
        "enter-plan-mode-not-announced",
        "plan_tools",
        "announced_while_the_turn_runs",
        "R7.2",
        "no session/updated showed the session in Plan",
    ),
]
