"""Broken hosts: a held-out set (state carried across cycles), written from the contract alone.

Seven of these twelve were caught at first, two of them only by scenarios about other
rules; all are caught now. New scenarios: a task given a new time after it ran, a task run
by hand keeps its time across a restart, a task whose run failed runs again when asked, the
next plan after a cancelled execution is carried out, a session switched to Plan after a
conversation is offered the planning tools, a plan submitted after a rejected one expires
at its own deadline, and a command in a session's second turn is recorded under that turn.
"""

from __future__ import annotations

import contextvars
import itertools
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from hosts.registry import BrokenCase, patch, variant
from reference_host import tasks as tasks_module
from reference_host.approvals import Approvals
from reference_host.clock import Clock, TimerCallback, TimerHandle, _Timer
from reference_host.errors import HostError
from reference_host.host import Host
from reference_host.ids import new_id
from reference_host.tasks import Tasks
from reference_host.turns import TurnRunner


def _host_state(host: Any, name: str, factory: Callable[[], Any]) -> Any:
    """In-memory state the (broken) host keeps for its whole process lifetime."""
    return host.__dict__.setdefault(f"_cycles_{name}", factory())


@variant("second-execution-names-first-turn")
def _second_execution_names_first_turn() -> None:
    # R4.7: execution/updated's turnId names the execution's own turn, never another. The
    # host remembers "the session's execution turn" in a per-session slot that is filled
    # when an execution first starts running and never cleared when it ends, so every later
    # execution of the session is announced with the first execution's turn.
    original = Approvals._notify_execution

    def _notify_execution(self: Approvals, row: Any, turn_id: str | None) -> None:
        if turn_id is not None:
            slots = _host_state(self.host, "execution_turn", dict)
            turn_id = slots.setdefault(row.session_id, turn_id)
        original(self, row, turn_id)

    patch(Approvals, "_notify_execution", _notify_execution)


_arming: contextvars.ContextVar[str | None] = contextvars.ContextVar("_arming", default=None)


@variant("expiry-armed-once-per-session")
def _expiry_armed_once_per_session() -> None:
    # R3.11: expiry is eager for every approval. The host keeps one expiry timer per session
    # and arms one only when the session has none; the entry is dropped when the timer
    # fires, not when the approval is rejected. A revision submitted after a reject, before
    # the first plan's deadline, gets no timer: it expires only when someone reads or
    # decides it.
    original_submit = Approvals.submit
    original_call_at = Clock.call_at

    async def submit(self: Approvals, session: Any, turn_id: str, args: dict[str, Any]) -> Any:
        token = _arming.set(session.id)
        try:
            return await original_submit(self, session, turn_id, args)
        finally:
            _arming.reset(token)

    def call_at(self: Clock, due_ms: int, callback: TimerCallback) -> TimerHandle:
        session_id = _arming.get()
        if session_id is None:
            return original_call_at(self, due_ms, callback)
        armed: set[str] = self.__dict__.setdefault("_cycles_expiry_armed", set())
        if session_id in armed:
            return TimerHandle(_Timer(due_ms, -1, callback, cancelled=True))
        armed.add(session_id)

        async def fire() -> None:
            armed.discard(session_id)
            await callback()

        return original_call_at(self, due_ms, fire)

    patch(Approvals, "submit", submit)
    patch(Clock, "call_at", call_at)


@variant("execution-permission-outlives-execution")
def _execution_permission_outlives_execution() -> None:
    # P7: the session's permission mode applies to every Agent turn, later prompts alike.
    # The host keeps the mode chosen at approve as an in-memory override for the session's
    # tool calls and never drops it when the execution ends, so a permission mode set later
    # with session/configure is reported and stored but not applied to later turns.
    original_approve = Approvals.approve
    original_run_call = TurnRunner._run_call

    async def approve(self: Approvals, session_id: str, approval_id: str, mode: Any) -> Any:
        result = await original_approve(self, session_id, approval_id, mode)
        _host_state(self.host, "execution_permission", dict)[session_id] = mode
        return result

    async def _run_call(
        self: TurnRunner, session: Any, turn_id: str, call: Any, unattended: bool
    ) -> Any:
        override = _host_state(self.host, "execution_permission", dict).get(session.id)
        if override is not None:
            session = replace(session, permission_mode=override)
        return await original_run_call(self, session, turn_id, call, unattended)

    patch(Approvals, "approve", approve)
    patch(TurnRunner, "_run_call", _run_call)


@variant("task-fires-only-once-ever")
def _task_fires_only_once_ever() -> None:
    # P29: a task/update that changes runAt replaces the earlier time and the task runs when
    # the new time comes due. The host guards against firing a task twice with a "fired"
    # set that is never cleared, so once a task has fired on its schedule, no later runAt
    # given to it arms a timer again (until the host restarts).
    original_arm = Tasks._arm
    original_fire = Tasks._fire

    def _arm(self: Tasks, task_id: str, run_at: int | None) -> None:
        if task_id in _host_state(self.host, "fired", set):
            run_at = None
        original_arm(self, task_id, run_at)

    async def _fire(self: Tasks, task_id: str) -> None:
        _host_state(self.host, "fired", set).add(task_id)
        await original_fire(self, task_id)

    patch(Tasks, "_arm", _arm)
    patch(Tasks, "_fire", _fire)


@variant("failed-run-blocks-later-runs")
def _failed_run_blocks_later_runs() -> None:
    # §6 / P28: task/run (and the task coming due) starts a new unattended run. The host
    # joins a task/run to the task's live run, and drops the live-run entry only when a run
    # completes: after a run that failed (a provider error), every later run of the task
    # answers that old run and starts nothing.
    original_run = Tasks.run
    original_finish = Tasks._finish

    async def run(self: Tasks, row: dict[str, Any]) -> dict[str, Any]:
        live = _host_state(self.host, "live_runs", dict)
        if row["id"] in live and row["mode"] == "agent":
            last = await self.host.storage.last_task_run(row["id"])
            wire = tasks_module._run_wire(last)
            if wire is not None:
                return wire
        wire = await original_run(self, row)
        live[row["id"]] = wire["runId"]
        return wire

    async def _finish(self: Tasks, run: dict[str, Any], outcome: str, error: Any) -> None:
        await original_finish(self, run, outcome, error)
        if outcome == "completed":
            _host_state(self.host, "live_runs", dict).pop(run["task_id"], None)

    patch(Tasks, "run", run)
    patch(Tasks, "_finish", _finish)


@variant("cancelled-execution-blocks-next-approve")
def _cancelled_execution_blocks_next_approve() -> None:
    # R4.9: at most one queued or running execution; once the earlier one has ended, the
    # session's next plan can be approved. The host marks the session as executing at
    # approve and unmarks it only when an execution completes: after an execution that was
    # cancelled or failed, every later approve in the session is refused EXECUTION_ACTIVE.
    original_approve = Approvals.approve
    original_finished = Approvals.execution_finished

    async def approve(self: Approvals, session_id: str, approval_id: str, mode: Any) -> Any:
        executing = _host_state(self.host, "executing", set)
        row = await self.require(session_id, approval_id)
        if session_id in executing and row.status == "pending":
            raise HostError("EXECUTION_ACTIVE", "another execution is queued or running")
        result = await original_approve(self, session_id, approval_id, mode)
        executing.add(session_id)
        return result

    async def execution_finished(self: Approvals, approval_id: str, final: Any) -> None:
        row = await self.host.storage.get_approval(approval_id)
        await original_finished(self, approval_id, final)
        if final == "completed" and row is not None:
            _host_state(self.host, "executing", set).discard(row.session_id)

    patch(Approvals, "approve", approve)
    patch(Approvals, "execution_finished", execution_finished)


@variant("transcript-seq-per-turn")
def _transcript_seq_per_turn() -> None:
    # R1.3 (session/transcript's seq grows from each entry to the next): the host numbers
    # the entries of each turn from 0, so the seq starts again with every later turn of the
    # session and repeats numbers of the earlier turns.
    async def session_transcript(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        counters: dict[str | None, itertools.count[int]] = {}
        entries = []
        for _seq, turn, role, content, at in await self.storage.transcript(row.id):
            seq = next(counters.setdefault(turn, itertools.count()))
            entries.append(
                {"seq": seq, "turnId": turn, "role": role, "content": content, "createdAt": at}
            )
        return {"entries": entries}

    patch(Host, "session_transcript", session_transcript)


@variant("approval-ids-count-from-process-start")
def _approval_ids_count_from_process_start() -> None:
    # R1.11 / R4.13: a new SubmitPlan creates a new approval, also after a restart. The host
    # numbers approvals apr-1, apr-2, ... from an in-memory counter that starts at 1 with
    # every process, so the first plan submitted after a restart collides with a stored
    # approval and fails.
    def new_id_(self: Host, prefix: str) -> str:
        if prefix != "apr":
            return new_id(prefix)
        counter = _host_state(self, "approval_counter", lambda: itertools.count(1))
        return f"apr-{next(counter)}"

    patch(Host, "new_id", new_id_)


@variant("restart-skips-tasks-that-ran")
def _restart_skips_tasks_that_ran() -> None:
    # P29: a task keeps its time across a restart: an enabled task whose runAt is still ahead
    # when the host starts runs when it comes due. The host treats tasks as one-shot at
    # start-up and re-arms only tasks that have never run, so a task that already ran once
    # (by task/run, or at an earlier runAt) and was given a time still ahead is not armed
    # again after a restart.
    async def schedule_all(self: Tasks) -> None:
        now = self.host.clock.now_ms()
        for row in await self.host.storage.list_tasks():
            if not row["enabled"] or row["run_at"] is None or row["run_at"] <= now:
                continue
            if await self.host.storage.last_task_run(row["id"]) is not None:
                continue  # it has had its run
            self._arm(row["id"], row["run_at"])

    patch(Tasks, "schedule_all", schedule_all)


@variant("configured-mode-misses-tool-cache")
def _configured_mode_misses_tool_cache() -> None:
    # R1.4 (and R1.2: Agent tools in Agent): the tools offered follow the session's mode in
    # every request. The host caches each session's tool mode when it first asks the model
    # and refreshes it on the mode changes it makes itself (EnterPlanMode, approve), not on
    # session/configure: a session switched by the client offers the previous mode's tools.
    original_ask = TurnRunner._ask_model
    original_enter = Host.enter_plan_mode
    original_approve = Approvals.approve

    async def _ask_model(self: TurnRunner, session: Any, turn_id: str, messages: Any) -> Any:
        cache = _host_state(self.host, "tool_mode", dict)
        mode = cache.setdefault(session.id, session.mode)
        return await original_ask(self, replace(session, mode=mode), turn_id, messages)

    async def enter_plan_mode(self: Host, session: Any) -> None:
        await original_enter(self, session)
        _host_state(self, "tool_mode", dict)[session.id] = "plan"

    async def approve(self: Approvals, session_id: str, approval_id: str, mode: Any) -> Any:
        cache = _host_state(self.host, "tool_mode", dict)
        before = cache.get(session_id)
        cache[session_id] = "agent"  # the execution turn may ask the model at once
        try:
            return await original_approve(self, session_id, approval_id, mode)
        except BaseException:
            if before is None:
                cache.pop(session_id, None)
            else:
                cache[session_id] = before
            raise

    patch(TurnRunner, "_ask_model", _ask_model)
    patch(Host, "enter_plan_mode", enter_plan_mode)
    patch(Approvals, "approve", approve)


@variant("expiry-leaves-submit-blocked")
def _expiry_leaves_submit_blocked() -> None:
    # R1.11 / C7: after a plan was rejected or expired, a new SubmitPlan in a new turn creates
    # a new approval. The host keeps its own "plan awaiting a decision" flag per session for
    # SubmitPlan, cleared by approve and reject but not by expiry: once a plan has expired,
    # every later SubmitPlan of the session fails with APPROVAL_PENDING.
    original_submit = Approvals.submit
    original_approve = Approvals.approve
    original_reject = Approvals.reject

    async def submit(self: Approvals, session: Any, turn_id: str, args: dict[str, Any]) -> Any:
        awaiting = _host_state(self.host, "awaiting", dict)
        if session.id in awaiting:
            raise HostError(
                "APPROVAL_PENDING",
                "an earlier plan is still pending",
                {"approvalId": awaiting[session.id]},
            )
        row = await original_submit(self, session, turn_id, args)
        awaiting[session.id] = row.id
        return row

    async def approve(self: Approvals, session_id: str, approval_id: str, mode: Any) -> Any:
        result = await original_approve(self, session_id, approval_id, mode)
        _host_state(self.host, "awaiting", dict).pop(session_id, None)
        return result

    async def reject(self: Approvals, session_id: str, approval_id: str) -> Any:
        result = await original_reject(self, session_id, approval_id)
        _host_state(self.host, "awaiting", dict).pop(session_id, None)
        return result

    patch(Approvals, "submit", submit)
    patch(Approvals, "approve", approve)
    patch(Approvals, "reject", reject)


@variant("command-turn-bound-at-first-command")
def _command_turn_bound_at_first_command() -> None:
    # R5.9 / C5: every notification names the turn it reports, and command_audit records the
    # command's turn. The host creates a session's shell runner lazily at its first Bash
    # call and binds it to that call's turn, so commands of later turns of the session are
    # announced (command/started) and audited under the first command's turn.
    original = TurnRunner._bash

    async def _bash(self: TurnRunner, session: Any, turn_id: str, args: dict[str, Any]) -> Any:
        runners = _host_state(self.host, "shell_runner_turn", dict)
        return await original(self, session, runners.setdefault(session.id, turn_id), args)

    patch(TurnRunner, "_bash", _bash)


CASES = [
    BrokenCase(
        "second-execution-names-first-turn",
        "execution",
        "plan_made_during_an_execution_is_carried_out_after",
        "R4.7",
        "the execution's turn is",
    ),
    BrokenCase(
        "expiry-armed-once-per-session",
        "deadline",
        "submitted_after_a_rejected_one_expires",
        "R3.11",
        "the deadline passed but no expiry was announced",
    ),
    BrokenCase(
        "execution-permission-outlives-execution",
        "execution",
        "permission_mode_chosen_after_the_execution",
        "P7",
        "Write ran without asking for permission",
        slow=True,  # caught once the wait for the permission question runs out
    ),
    BrokenCase(
        "task-fires-only-once-ever",
        "scheduled_plan",
        "given_a_new_time_after_it_ran",
        "P29",
        "the task did not run when its time came",
    ),
    BrokenCase(
        "failed-run-blocks-later-runs",
        "scheduled_plan",
        "whose_run_failed_runs_again",
        "P35",
        "every task/run runs the task now, as a run of its own",
    ),
    BrokenCase(
        "cancelled-execution-blocks-next-approve",
        "execution",
        "after_a_cancelled_execution_the_sessions",
        "R4.9",
        "approving the session's new plan was refused with EXECUTION_ACTIVE",
    ),
    BrokenCase(
        "transcript-seq-per-turn",
        "sessions",
        "switching_to_plan_keeps_the_agent",
        "R1.3",
        "seq does not increase from entry to entry",
    ),
    BrokenCase(
        "approval-ids-count-from-process-start",
        "restart_interruption",
        "after_the_restart_the_user_can_ask_for_a_new_plan",
        "R4.13",
        "the new Plan turn ended",
    ),
    BrokenCase(
        "restart-skips-tasks-that-ran",
        "scheduled_plan",
        "run_by_hand_keeps_its_time_across",
        "P29",
        "the task did not run when its time came",
    ),
    BrokenCase(
        "configured-mode-misses-tool-cache",
        "plan_tools",
        "switched_to_plan_after_a_conversation",
        "R1.4",
        "expected ['Bash', 'BrowserPreview', 'EnterPlanMode'",
    ),
    BrokenCase(
        "expiry-leaves-submit-blocked",
        "deadline",
        "after_expiry_a_new_plan_can_be_submitted",
        "R1.11",
        "the Plan turn ended",
    ),
    BrokenCase(
        "command-turn-bound-at-first-command",
        "shell",
        "second_turn_is_recorded_under_that_turn",
        "R5.9",
        "a command belongs to the turn whose call ran it",
    ),
]
