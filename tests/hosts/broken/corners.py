"""Broken hosts: corners of the contract that earlier rounds left open and this one settled."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import json
import weakref
from dataclasses import replace
from typing import Any, cast

from hosts.allowed.fair_round_rules import plan_turn_ends_slowly
from hosts.registry import BrokenCase, patch, variant
from reference_host import host as host_module
from reference_host import permissions, state
from reference_host.approvals import Approvals
from reference_host.errors import HostError
from reference_host.host import Host
from reference_host.ids import new_id
from reference_host.permissions import PermissionBroker
from reference_host.provider_client import ToolCall, _Accumulator
from reference_host.storage import ApprovalRow, SessionRow, Storage
from reference_host.turns import CallOutcome, TurnRunner, _failure

# P7: question ids come from a counter that starts again with each process, so the first
# question after a restart has the id of the first question before it, and an answer a
# stale client meant for the old question answers the new one.


@variant("assigns-constant-behind-patch")
def _assigns_constant_behind_patch() -> None:
    # Not a case: as assigns-behind-patch, for a constant of the reference host (the
    # approval deadline) assigned directly instead of through hosts.registry.patch.
    state.APPROVAL_TTL_MS = 60 * 1000


@variant("assigns-behind-patch")
def _assigns_behind_patch() -> None:
    # Not a case: tests/test_batches.py proves that an in-process batch refuses to go on
    # after a variant that changed the host without hosts.registry.patch, which no undo
    # can take back.
    name = "session_get"
    wrapped = getattr(Host, name)

    async def session_get(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await wrapped(self, params)
        return result

    setattr(Host, name, session_get)


@variant("question-ids-restart-with-the-process")
def _question_ids_restart_with_the_process() -> None:
    counter = itertools.count(1)
    init = PermissionBroker.__init__

    def counted_id(prefix: str) -> str:
        return f"perm-{next(counter)}" if prefix == "perm" else new_id(prefix)

    def init_counting(self: PermissionBroker, notify: Any) -> None:
        nonlocal counter
        counter = itertools.count(1)  # each host process starts its own count
        init(self, notify)

    patch(permissions, "new_id", counted_id)
    patch(PermissionBroker, "__init__", init_counting)


# P25: a stream piece that cannot be read (not JSON, or JSON that is not an object) is
# skipped as if it were a keep-alive line, and the turn completes with what was read.
@variant("unreadable-stream-pieces-skipped")
def _unreadable_stream_pieces_skipped() -> None:
    feed = _Accumulator.feed

    async def skipping_feed(self: _Accumulator, data: str) -> None:
        try:
            readable = isinstance(json.loads(data), dict)
        except ValueError:
            readable = False
        if readable:
            await feed(self, data)

    patch(_Accumulator, "feed", skipping_feed)


# R4.7: the announcement of an execution that ends `interrupted` is built as for one still
# queued, with `turnId: null`, also when its turn had started and was cancelled.
@variant("interrupted-execution-names-no-turn")
def _interrupted_execution_names_no_turn() -> None:
    notify = Approvals._notify_execution

    def notify_execution(self: Approvals, row: ApprovalRow, turn_id: str | None) -> None:
        interrupted = row.execution_state == "interrupted"
        notify(self, row, None if interrupted else turn_id)

    patch(Approvals, "_notify_execution", notify_execution)


# R1.6 / R1.8: a Plan turn gets one try at SubmitPlan; once a submission of the turn was
# refused (not alone, or bad input), every later SubmitPlan of that turn is refused as if
# the Plan turn were over, though the turn goes on and the model may submit again.
_REFUSALS = ("SUBMIT_PLAN_NOT_ALONE", "INVALID_TOOL_INPUT")


@variant("one-submission-try-per-turn")
def _one_submission_try_per_turn() -> None:
    refused: set[str] = set()
    run_batch = TurnRunner._run_batch
    run_call = TurnRunner._run_call

    async def counting_batch(
        self: TurnRunner,
        session: SessionRow,
        turn_id: str,
        calls: tuple[ToolCall, ...],
        unattended: bool,
    ) -> list[CallOutcome]:
        outcomes = await run_batch(self, session, turn_id, calls, unattended)
        for call, outcome in zip(calls, outcomes, strict=True):
            code = outcome.error.code if outcome.error else None
            if call.name == "SubmitPlan" and code in (
                "SUBMIT_PLAN_NOT_ALONE",
                "INVALID_TOOL_INPUT",
            ):
                refused.add(turn_id)
        return outcomes

    async def refusing_call(
        self: TurnRunner, session: SessionRow, turn_id: str, call: ToolCall, unattended: bool
    ) -> CallOutcome:
        if call.name == "SubmitPlan" and turn_id in refused:
            return _failure(HostError("SUBMIT_PLAN_OUTSIDE_PLAN_TURN", "this turn's try is used"))
        return await run_call(self, session, turn_id, call, unattended)

    patch(TurnRunner, "_run_batch", counting_batch)
    patch(TurnRunner, "_run_call", refusing_call)


# R3.8: nobody attends a scheduled run, so a plan its model submits is approved at once with
# the task's permission mode, as if the run's own authority were the user's.
@variant("unattended-plan-approved-by-the-run")
def _unattended_plan_approved_by_the_run() -> None:
    run_call = TurnRunner._run_call

    async def approving_call(
        self: TurnRunner, session: SessionRow, turn_id: str, call: ToolCall, unattended: bool
    ) -> CallOutcome:
        outcome = await run_call(self, session, turn_id, call, unattended)
        if unattended and call.name == "SubmitPlan" and outcome.status == "ok":
            pending = self.host.activity_of(session.id).pending_approval_id
            if pending is not None:
                mode = session.permission_mode
                await cast(Approvals, self.host.approvals).approve(session.id, pending, mode)
        return outcome

    patch(TurnRunner, "_run_call", approving_call)


# R5.6: the sessions the scheduler created stay marked as its own after their run has
# ended, so a change to one is refused as if the run still held it.
@variant("run-sessions-refuse-changes-after-the-run")
def _run_sessions_refuse_changes_after_the_run() -> None:
    scheduled: set[str] = set()
    record = Storage.record_task_run
    configure = Host.session_configure

    async def recording(self: Storage, run: dict[str, Any]) -> None:
        if run.get("session_id"):
            scheduled.add(run["session_id"])
        await record(self, run)

    async def refusing(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("sessionId") in scheduled:
            raise HostError("SESSION_BUSY", "the scheduler owns this session")
        return await configure(self, params)

    patch(Storage, "record_task_run", recording)
    patch(Host, "session_configure", refusing)


# R4.4: an approval's statusCode says why it ended without a decision. The host reads an
# interrupted execution as an interrupted approval and writes TURN_INTERRUPTED into the
# row of an approval that stays approved.
@variant("interrupted-execution-marks-the-approval")
def _interrupted_execution_marks_the_approval() -> None:
    finished = Approvals.execution_finished

    async def execution_finished(self: Approvals, approval_id: str, final: Any) -> None:
        if final == "interrupted":
            row = await self.host.storage.get_approval(approval_id)
            assert row is not None
            await self.host.storage.update_approval(replace(row, status_code="TURN_INTERRUPTED"))
        await finished(self, approval_id, final)

    patch(Approvals, "execution_finished", execution_finished)


# P7: the permission mode applies to every turn. The host reads Plan as read-only and runs
# a Plan turn's commands without asking, whatever the session's permission mode.
@variant("plan-commands-never-ask")
def _plan_commands_never_ask() -> None:
    run_call = TurnRunner._run_call

    async def _run_call(
        self: TurnRunner, session: SessionRow, turn_id: str, call: Any, unattended: bool
    ) -> CallOutcome:
        if session.mode == "plan" and call.name == "Bash":
            session = replace(session, permission_mode="auto")
        return await run_call(self, session, turn_id, call, unattended)

    patch(TurnRunner, "_run_call", _run_call)


@variant("configure-applies-settings-before-the-shell")
def _configure_applies_settings_before_the_shell() -> None:
    # A refused request changes nothing: this host stores the other settings of a
    # session/configure first, then finds its shell unknown and refuses the request, so the
    # session keeps a change the user was told did not happen.
    from reference_host import host as host_module

    configure = Host.session_configure

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        shell = params.get("shellId")
        if shell is not None and host_module.shells.find(shell) is None:
            others = {k: v for k, v in params.items() if k != "shellId"}
            if len(others) > 1:
                await configure(self, others)
        result: dict[str, Any] = await configure(self, params)
        return result

    patch(Host, "session_configure", session_configure)


# The two hosts below count a turn as ending as soon as the model's last answer is in
# (the turn's work is done) and record its end slowly (a bounded 0.3 s), so that a cancel
# sent as that answer arrives meets the turn while it ends: the race a slower host (a
# remote database) meets as a matter of course is certain here.
_SLOW_END = 0.3


def _ending_early_and_slowly() -> None:
    ask = TurnRunner._ask_model

    async def _ask_model(self: TurnRunner, *args: Any) -> Any:
        reply = await ask(self, *args)
        if not reply.tool_calls:
            this = asyncio.current_task()
            assert this is not None
            self.closing.add(this)
            await asyncio.sleep(_SLOW_END)
        return reply

    patch(TurnRunner, "_ask_model", _ask_model)


@variant("late-cancel-claims-the-finished-turn")
def _late_cancel_claims_the_finished_turn() -> None:
    # R5.1: a cancel that arrives once the turn's work is done lets the turn end as it
    # finished, as it must, but answers the id of the turn it found active, so the client
    # is told it cancelled a turn that ends completed.
    _ending_early_and_slowly()

    async def cancel(self: TurnRunner, session_id: str) -> str | None:
        task = self.tasks.get(session_id)
        turn_id = self.host.activity_of(session_id).active_turn_id
        if task is None or task.done():
            return None
        if task in self.closing:
            await asyncio.shield(task)
            return turn_id
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return turn_id

    patch(TurnRunner, "cancel", cancel)


@variant("late-cancel-announces-a-finished-turn-cancelled")
def _late_cancel_announces_a_finished_turn_cancelled() -> None:
    # R5.1: a cancel that arrives while a finished turn's end is being recorded answers
    # null (too late) and the turn is stored completed, but the turn/ended announcement is
    # built from the in-memory turn, which the cancel had flagged: the client is told the
    # turn was cancelled and that nothing was.
    late: weakref.WeakKeyDictionary[TurnRunner, set[str]] = weakref.WeakKeyDictionary()
    cancel = TurnRunner.cancel

    async def cancel_turn(self: TurnRunner, session_id: str) -> str | None:
        task = self.tasks.get(session_id)
        if task is not None and task in self.closing:
            late.setdefault(self, set()).add(session_id)
        return await cancel(self, session_id)

    async def _end(
        self: TurnRunner,
        session_id: str,
        turn_id: str,
        approval: ApprovalRow | None,
        on_end: Any,
        outcome: str,
        error: HostError | None,
    ) -> None:
        host = self.host
        await host.storage.end_turn(turn_id, outcome, host.clock.now_ms())
        if approval is not None:
            final: Any = "completed" if outcome == "completed" else "interrupted"
            await host.approvals.execution_finished(approval.id, final)
        if on_end is not None:
            await on_end(outcome, error)
        host.set_activity(session_id, active_turn_id=None)
        if session_id in late.get(self, set()):
            late[self].discard(session_id)
            outcome, error = "cancelled", HostError("TURN_CANCELLED", "the turn was cancelled")
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

    patch(TurnRunner, "cancel", cancel_turn)
    patch(TurnRunner, "_end", _end)
    _ending_early_and_slowly()


@variant("plan-refused-during-an-execution")
def _plan_refused_during_an_execution() -> None:
    # R4.9: a plan the model submits while carrying out another is refused (the tool call
    # gets EXECUTION_ACTIVE), as if one execution at a time also meant one plan at a time;
    # the plan never waits for the user.
    submit = Approvals.submit

    async def submit_unless_executing(
        self: Approvals, session: SessionRow, turn_id: str, args: dict[str, Any]
    ) -> ApprovalRow:
        running = self.host.activity_of(session.id).active_execution_id
        if running is not None:
            raise HostError("EXECUTION_ACTIVE", "an execution is running", {"executionId": running})
        return await submit(self, session, turn_id, args)

    patch(Approvals, "submit", submit_unless_executing)


@variant("database-named-in-capitals")
def _database_named_in_capitals() -> None:
    # R7.4: the database is DIR/HOST.DB, not DIR/host.db, so nothing the harness reads
    # after a scenario is there. Before the after-checks were guarded, this host's first
    # scenario stopped the whole run with a harness error and every scenario read not-run.
    from reference_host import datadir, storage

    patch(datadir, "DB_FILE", "HOST.DB")
    patch(storage, "DB_FILE", "HOST.DB")


@variant("nul-path-fails-the-tool")
def _nul_path_fails_the_tool() -> None:
    # P27: a path holding a NUL character reaches the file system, which cannot take it,
    # and the call fails with TOOL_FAILED instead of being refused as invalid input.
    from pathlib import Path

    from reference_host.tools import files
    from reference_host.workspace import resolve_inside

    def resolve(root: Path, relative: str, *, must_exist: bool) -> Path:
        if "\0" in relative:
            raise HostError("TOOL_FAILED", "embedded null byte", {"path": relative})
        return resolve_inside(root, relative, must_exist=must_exist)

    patch(files, "resolve_inside", resolve)


_SUBMITTING: contextvars.ContextVar[bool] = contextvars.ContextVar("submitting", default=False)


@variant("pending-announced-only-when-the-plan-turn-ends")
def _pending_announced_only_when_the_plan_turn_ends() -> None:
    # R7.2: every change of what session/get reports is announced by a session/updated. This
    # host announces a session once per turn, when the turn's end is stored; the pending
    # approval a SubmitPlan makes shows in session/get at once but is announced only then.
    # Its Plan turn takes 50 ms to end, so a read in between surely sees the difference.
    publish = Host.publish_session
    submit = Approvals.submit

    async def publish_unless_submitting(self: Host, session_id: str) -> dict[str, Any]:
        if _SUBMITTING.get():
            return self.session_wire(await self.require_session(session_id))
        return await publish(self, session_id)

    async def quietly(
        self: Approvals, session: SessionRow, turn_id: str, args: dict[str, Any]
    ) -> ApprovalRow:
        token = _SUBMITTING.set(True)
        try:
            return await submit(self, session, turn_id, args)
        finally:
            _SUBMITTING.reset(token)

    patch(Host, "publish_session", publish_unless_submitting)
    patch(Approvals, "submit", quietly)
    plan_turn_ends_slowly()


_DEFERRED: weakref.WeakKeyDictionary[object, dict[str, str]] = weakref.WeakKeyDictionary()


@variant("plan-turn-freed-at-submit")
def _plan_turn_freed_at_submit() -> None:
    # R5.7, R5.3: while a plan is pending (or its Plan turn still ends) a prompt or change is
    # refused. This host counts the session idle as soon as the model's plan is submitted
    # (the model is done) and records the pending approval only when the turn's end is
    # stored, 50 ms later: a prompt or change in between is accepted.
    submit = Approvals.submit
    end = TurnRunner._end

    async def freed(
        self: Approvals, session: SessionRow, turn_id: str, args: dict[str, Any]
    ) -> ApprovalRow:
        row = await submit(self, session, turn_id, args)
        _DEFERRED.setdefault(self.host, {})[session.id] = row.id
        self.host.set_activity(session.id, active_turn_id=None, pending_approval_id=None)
        return row

    async def recorded_at_end(
        self: TurnRunner,
        session_id: str,
        turn_id: str,
        approval: ApprovalRow | None,
        on_end: Any,
        outcome: str,
        error: HostError | None,
    ) -> None:
        deferred = _DEFERRED.setdefault(self.host, {}).pop(session_id, None)
        if deferred is not None:
            await asyncio.sleep(0.05)
            self.host.set_activity(session_id, pending_approval_id=deferred)
        await end(self, session_id, turn_id, approval, on_end, outcome, error)

    patch(Approvals, "submit", freed)
    patch(TurnRunner, "_end", recorded_at_end)


@variant("cancel-reaches-the-ending-plan-turn")
def _cancel_reaches_the_ending_plan_turn() -> None:
    # R5.7: a cancel while a plan is pending gets APPROVAL_PENDING, also while the Plan turn
    # that submitted it is still ending. This host looks for a turn to cancel first and
    # refuses for the pending plan only when there is none: a cancel right after the plan's
    # approval/updated cancels its Plan turn (which takes 50 ms to end here).
    ensure_can_cancel = state.ensure_can_cancel

    def turn_first(activity: state.Activity) -> None:
        if activity.active_turn_id is None:
            ensure_can_cancel(activity)

    patch(host_module, "ensure_can_cancel", turn_first)
    plan_turn_ends_slowly()


@variant("empty-answer-taken-for-a-provider-failure")
def _empty_answer_taken_for_a_provider_failure() -> None:
    # P31, R1.3: the model's answer passes through as it is, an empty one too: the turn
    # completes. This host takes an answer with neither text nor tool calls for a broken
    # response and fails the turn with PROVIDER_ERROR.
    from reference_host import turns
    from reference_host.provider_client import AssistantReply

    complete = turns.complete

    async def non_empty(*args: Any, **kwargs: Any) -> AssistantReply:
        reply: AssistantReply = await complete(*args, **kwargs)
        if not reply.text and not reply.tool_calls:
            raise HostError("PROVIDER_ERROR", "the model returned an empty answer")
        return reply

    patch(turns, "complete", non_empty)


# P9: a tool that finds the session's project folder gone ends the whole turn as failed
# (its author took the folder's loss for the session's failure), where the call should get
# its error result and the turn go on.
@variant("project-gone-fails-the-turn")
def project_gone_fails_the_turn() -> None:
    run_call = TurnRunner._run_call

    async def failing(
        self: TurnRunner, session: SessionRow, turn_id: str, call: ToolCall, unattended: bool
    ) -> CallOutcome:
        outcome = await run_call(self, session, turn_id, call, unattended)
        if outcome.error is not None and outcome.error.code == "WORKSPACE_INVALID":
            raise outcome.error
        return outcome

    patch(TurnRunner, "_run_call", failing, wraps=True)


@variant("answers-only-initialize")
def _answers_only_initialize() -> None:
    # Not a case: tests/test_cli_unserved.py proves that a run against a host that answers
    # the handshake (so the preflight passes) and then nothing within the test's step
    # timeout of 1 s stops after its first scenarios with one diagnosis, instead of waiting
    # out every scenario's timeouts. Each answer comes 3 s late, so that a host the harness
    # stops after its scenario ends at once, as a host whose requests never end would not.
    from reference_host.rpc import Dispatcher

    call = Dispatcher._call

    async def _call(self: Dispatcher, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method != "initialize":
            await asyncio.sleep(3.0)
        result: dict[str, Any] = await call(self, method, params)
        return result

    patch(Dispatcher, "_call", _call)


CASES = [
    BrokenCase(
        "project-gone-fails-the-turn",
        "plan_tools",
        "file_read_in_a_session_whose_project_folder_is_gone",
        "P9",
        "the host reported no result for the Read call",
    ),
    BrokenCase(
        "empty-answer-taken-for-a-provider-failure",
        "sessions",
        "no_text",
        "P31",
        "the turn ended failed",
    ),
    BrokenCase(
        "cancel-reaches-the-ending-plan-turn",
        "turn_boundaries",
        "cancelling_the_moment_a_plan_is_submitted",
        "R5.7",
        "expected the host to refuse",
    ),
    BrokenCase(
        "pending-announced-only-when-the-plan-turn-ends",
        "turn_boundaries",
        "the_moment_a_plan_is_submitted",
        "R7.2",
        "two reports of one record disagreed",
    ),
    BrokenCase(
        "plan-turn-freed-at-submit",
        "turn_boundaries",
        "the_moment_a_plan_is_submitted",
        "R5.7",
        "expected SESSION_BUSY or APPROVAL_PENDING",
    ),
    BrokenCase(
        "question-ids-restart-with-the-process",
        "execution",
        "restart_takes_no_answer",
        "P7",
        "expected the host to refuse, but it answered",
    ),
    BrokenCase(
        "unreadable-stream-pieces-skipped",
        "sessions",
        "breaks_off and piece",
        "P25",
        "expected failed with PROVIDER_ERROR",
    ),
    BrokenCase(
        "interrupted-execution-names-no-turn",
        "execution",
        "execution_whose_turn",
        "R4.7",
        "with turnId None; the execution's turn is",
    ),
    BrokenCase(
        "one-submission-try-per-turn",
        "submit_plan",
        "submitted_again_alone",
        "R1.6",
        "a refused SubmitPlan leaves the Plan turn going",
    ),
    BrokenCase(
        "unattended-plan-approved-by-the-run",
        "scheduled_plan",
        "never_approved_by_the_run",
        "R3.8",
        "the run's plan was set going without the user",
    ),
    BrokenCase(
        "run-sessions-refuse-changes-after-the-run",
        "scheduled_plan",
        "session_a_run_created_takes",
        "R5.6",
        "SESSION_BUSY",
    ),
    BrokenCase(
        "interrupted-execution-marks-the-approval",
        "execution",
        "execution_whose_turn_is_cancelled",
        "R4.4",
        "is reported approved with statusCode 'TURN_INTERRUPTED'",
    ),
    BrokenCase(
        "plan-commands-never-ask",
        "plan_tools",
        "while_planning_waits",
        "P7",
        "Bash ran without asking for permission",
    ),
    BrokenCase(
        "configure-applies-settings-before-the-shell",
        "sessions",
        "names_an_unknown_shell_beside",
        "P4",
        "a refused request changed",
    ),
    BrokenCase(
        "late-cancel-claims-the-finished-turn",
        "turn_boundaries",
        "last_answer_arrives_cancels",
        "R5.1",
        "a cancel that names a turn ends it cancelled",
    ),
    BrokenCase(
        "late-cancel-announces-a-finished-turn-cancelled",
        "turn_boundaries",
        "last_answer_arrives_cancels",
        "R5.1",
        "a cancel that comes too late leaves the turn to end as it finished",
    ),
    BrokenCase(
        "plan-refused-during-an-execution",
        "execution",
        "plan_made_during_an_execution_is_carried_out_after",
        "R4.9",
        "without submitting the plan",
    ),
    BrokenCase(
        "database-named-in-capitals",
        "plan_tools",
        "editing_a_file_in_agent_mode_changes_the_text",
        "R7.4",
        "the host's database could not be read once the scenario had run",
    ),
    BrokenCase(
        "nul-path-fails-the-tool",
        "plan_tools",
        "published_input_is_refused and NUL",
        "P27",
        "stopped with TOOL_FAILED, expected INVALID_TOOL_INPUT",
    ),
]
