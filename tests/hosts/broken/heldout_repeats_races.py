"""Broken hosts: a held-out set (repeats and races), written from the contract alone.

Six of these twelve were caught from the start (one only through timeouts elsewhere);
all are caught now: two prompts sent at once (R5.1), an id used again once answered
(P1, a sentence now says every request is served as it comes), an approve after the
execution was cancelled (R4.4), a task renamed before its time runs once (P29), a fault
armed twice fires once, the same prompt sent again at the same host-clock instant starts
a turn of its own (R5.1), and a task run again while its first run is under way starts a
second run (P35, a new rule).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
from collections import Counter
from typing import Any

from hosts.registry import BrokenCase, patch, variant
from reference_host.approvals import Approvals, approval_wire
from reference_host.errors import HostError
from reference_host.framing import Frame
from reference_host.host import Host
from reference_host.options import Faults
from reference_host.rpc import Dispatcher
from reference_host.state import ensure_idle_for
from reference_host.tasks import Tasks, _run_wire


def _method_of(frame: Frame) -> str | None:
    """The method a request frame names, or None when it is not a readable request."""
    try:
        message = json.loads(bytes(frame).decode("utf-8"))
    except (ValueError, TypeError):
        return None
    if isinstance(message, dict) and isinstance(message.get("method"), str):
        return str(message["method"])
    return None


# How long a request served on its own task waits for the next request before it runs.
# Requests written in one go arrive within microseconds; a request sent alone waits this
# long once, and the race no longer depends on which thread the scheduler runs first.
_PARTNER_WAIT = 0.3


def _handle_concurrently(methods: frozenset[str]) -> None:
    """Requests of ``methods`` are handled on a task of their own, so the next request is
    read while they still run (a host that serves requests concurrently).

    The race is made certain rather than likely: such a request waits (bounded) until
    the next request arrives, and that one runs at once beside it, so two requests written
    in one go always overlap, however the threads of a loaded machine are scheduled.
    """
    original = Dispatcher.handle
    running: set[asyncio.Task[None]] = set()
    waiting: list[asyncio.Event] = []

    async def after(gate: asyncio.Event | None, self: Dispatcher, frame: Frame) -> None:
        if gate is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(gate.wait(), _PARTNER_WAIT)
        await original(self, frame)

    async def handle(self: Dispatcher, frame: Frame) -> None:
        partnered = bool(waiting)
        for gate in waiting:
            gate.set()
        waiting.clear()
        if isinstance(frame, bytes) and _method_of(frame) in methods:
            gate = None if partnered else asyncio.Event()
            if gate is not None:
                waiting.append(gate)
            task = asyncio.create_task(after(gate, self, frame))
            running.add(task)
            task.add_done_callback(running.discard)
            return
        await original(self, frame)

    patch(Dispatcher, "handle", handle)


@variant("second-reject-answers-success")
def _second_reject_answers_success() -> None:
    # R4.4 / C6: a reject of an approval that is already rejected is treated as an
    # idempotent retry: it answers the rejected approval again (nothing changes) instead of
    # APPROVAL_NOT_PENDING. An approve of it is still refused.
    original = Approvals.reject

    async def reject(self: Approvals, session_id: str, approval_id: str) -> dict[str, Any]:
        row = await self.require(session_id, approval_id)
        if row.status == "rejected":
            return {"approval": approval_wire(row)}
        return await original(self, session_id, approval_id)

    patch(Approvals, "reject", reject)


@variant("decisions-race-past-pending-check")
def _decisions_race_past_pending_check() -> None:
    # R4.4: the host serves approve and reject each on its own task, and checks that the
    # approval is pending before it awaits the artifact check and the commit, without a
    # lock: two decisions sent back to back (approve and reject, or two approves) both
    # pass the check and both succeed; the status is decided twice. One decision at a time
    # behaves as the reference host.
    _handle_concurrently(frozenset({"approval/approve", "approval/reject"}))


@variant("prompts-race-past-busy-check")
def _prompts_race_past_busy_check() -> None:
    # R5.1: session/prompt is served on its own task, and the busy check and the recording
    # of the new active turn are separated by the turn row's insert. Of two prompts sent to
    # one session back to back both pass the check; the second then trips the storage's
    # one-active-turn index and is answered INTERNAL_ERROR instead of SESSION_BUSY. A
    # prompt sent after the answer to the first is refused with SESSION_BUSY as it should.
    _handle_concurrently(frozenset({"session/prompt"}))


@variant("same-prompt-same-instant-deduplicated")
def _same_prompt_same_instant_deduplicated() -> None:
    # R5.1 / R5.6 (an idle session takes a new prompt) and P31: a double-submit guard. A
    # prompt with the same text as the session's previous one, at the same host-clock
    # instant, is taken for a client retry: the idle session answers the earlier turn's id
    # and starts no turn (no provider call, nothing in the transcript).
    last: dict[str, tuple[str, int, str]] = {}

    async def session_prompt(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        ensure_idle_for(self.activity_of(row.id), "a new prompt")
        if row.provider_base_url is None or row.model is None:
            raise HostError("PROVIDER_NOT_CONFIGURED", "configure a model provider first")
        now = self.clock.now_ms()
        earlier = last.get(row.id)
        if earlier is not None and earlier[:2] == (params["text"], now):
            return {"turnId": earlier[2]}
        turn_id = await self.turns.start(row, "prompt", params["text"])
        last[row.id] = (params["text"], now, turn_id)
        return {"turnId": turn_id}

    patch(Host, "session_prompt", session_prompt)


@variant("repeated-request-replays-answer")
def _repeated_request_replays_answer() -> None:
    # P1 (request ids: answer every request; ids need not follow one another): a request
    # that repeats an answered one, same id, same method and same params, is taken for a
    # retransmission and gets the earlier answer again without being served. A client
    # that reuses an id (a second approve, a second session/get after a change) gets a
    # stale answer.
    original = Dispatcher.handle

    async def handle(self: Dispatcher, frame: Frame) -> None:
        answered: dict[tuple[str, str, str], dict[str, Any]]
        answered = self.__dict__.setdefault("_answered", {})
        key = None
        if isinstance(frame, bytes):
            try:
                message = json.loads(bytes(frame).decode("utf-8"))
            except (ValueError, TypeError):
                message = None
            if (
                isinstance(message, dict)
                and isinstance(message.get("id"), int | str)
                and not isinstance(message.get("id"), bool)
                and isinstance(message.get("method"), str)
            ):
                key = (
                    json.dumps(message["id"]),
                    message["method"],
                    json.dumps(message.get("params", {}), sort_keys=True),
                )
        if key is not None and key in answered:
            self._send(answered[key])
            return
        send = self._send

        def capture(out: dict[str, Any]) -> None:
            if (
                key is not None
                and ("result" in out or "error" in out)
                and out.get("id") is not None
            ):
                answered[key] = out
            send(out)

        self._send = capture
        try:
            await original(self, frame)
        finally:
            self._send = send

    patch(Dispatcher, "handle", handle)


@variant("approve-retries-cancelled-execution")
def _approve_retries_cancelled_execution() -> None:
    # R4.4 / C6: an approve of an approval that is approved but whose execution ended
    # interrupted (its turn was cancelled or failed) is taken as "run it again": it passes
    # the pending check, gets a new execution and starts a new execution turn, instead of
    # APPROVAL_NOT_PENDING. A reject of it is still refused.
    check = Approvals._ensure_decidable
    original_reject = Approvals.reject

    async def _ensure_decidable(self: Approvals, row: Any) -> None:
        if row.status == "approved" and row.execution_state == "interrupted":
            return
        await check(self, row)

    async def reject(self: Approvals, session_id: str, approval_id: str) -> dict[str, Any]:
        row = await self.require(session_id, approval_id)
        if row.status == "approved":
            await check(self, row)
        return await original_reject(self, session_id, approval_id)

    patch(Approvals, "_ensure_decidable", _ensure_decidable)
    patch(Approvals, "reject", reject)


@variant("task-delete-twice-succeeds")
def _task_delete_twice_succeeds() -> None:
    # P26: task/delete is made idempotent: a second task/delete of a task this host
    # deleted answers {} again instead of TASK_NOT_FOUND (a task that never existed, and
    # task/run or task/update of the deleted one, still get TASK_NOT_FOUND).
    original = Tasks.delete
    deleted: set[str] = set()

    async def delete(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        if params["taskId"] in deleted:
            return {}
        result = await original(self, params)
        deleted.add(params["taskId"])
        return result

    patch(Tasks, "delete", delete)


@variant("task-run-joins-running-run")
def _task_run_joins_running_run() -> None:
    # §6 / P28 (task/run starts an unattended run; a task runs again only as a new run): a
    # task/run of a task whose earlier run is still under way starts nothing and answers
    # that earlier run ("already running"); no second session, turn or runFinished.
    async def run_now(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require(params["taskId"])
        last = await self.host.storage.last_task_run(row["id"])
        if last is not None and last["outcome"] == "running":
            return {"run": _run_wire(last)}
        return {"run": await self.run(row)}

    patch(Tasks, "run_now", run_now)


@variant("run-ids-from-task-and-clock")
def _run_ids_from_task_and_clock() -> None:
    # §6 (every task/run and every due time starts a run of its own, recorded in
    # scheduled_task_runs): a run's id is the task's id and the host-clock instant it
    # started. Two runs of one task at one instant (two task/run, or a task/run beside its
    # due time) share one id: the later overwrites the earlier's row, and both
    # runFinished name the same run.
    current: contextvars.ContextVar[str | None] = contextvars.ContextVar("run_id", default=None)
    original_run = Tasks.run
    original_new_id = Host.new_id

    async def run(self: Tasks, row: dict[str, Any]) -> dict[str, Any]:
        token = current.set(f"run_{row['id']}_{self.host.clock.now_ms()}")
        try:
            return await original_run(self, row)
        finally:
            current.reset(token)

    def new_id(prefix: str) -> str:
        chosen = current.get()
        if prefix == "run" and chosen is not None:
            return chosen
        return original_new_id(prefix)

    patch(Tasks, "run", run)
    patch(Host, "new_id", staticmethod(new_id))


@variant("task-update-adds-a-second-timer")
def _task_update_adds_a_second_timer() -> None:
    # P29 (a task runs when its runAt comes due; an update replaces the earlier time): when
    # a task/update leaves runAt as it was (it changes the name, the prompt, or sends
    # enabled: true again), the host keeps the old timer, since its time is still right,
    # but arms a new one as well: the task runs twice when it comes due.
    def _arm(self: Tasks, task_id: str, run_at: int | None) -> None:
        dues: dict[str, int | None] = self.__dict__.setdefault("_dues", {})
        previous = self._timers.get(task_id)
        if previous is not None and dues.get(task_id) != run_at:
            previous.cancel()
        if run_at is not None:
            self._timers[task_id] = self.host.clock.call_at(run_at, lambda: self._fire(task_id))
        else:
            self._timers.pop(task_id, None)
        dues[task_id] = run_at

    patch(Tasks, "_arm", _arm)


@variant("fault-arms-are-counted")
def _fault_arms_are_counted() -> None:
    # Conformance mode, fault points ("arming a fault that is already armed changes
    # nothing: it still fires once"): arms are counted, so a fault armed twice fires at
    # the next two times its point is reached.
    original_take = Faults.take

    def _counts(faults: Faults) -> Counter[str]:
        counts: Counter[str] = faults.__dict__.setdefault("_arms", Counter())
        return counts

    async def fault_arm(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        _counts(self.faults)[params["fault"]] += 1
        self.faults.armed.add(params["fault"])
        return {}

    def take(self: Faults, point: str) -> bool:
        counts = _counts(self)
        if counts[point] > 1:
            counts[point] -= 1
            return True
        counts[point] = 0
        return original_take(self, point)

    patch(Host, "fault_arm", fault_arm)
    patch(Faults, "take", take)


@variant("identical-creates-share-a-session")
def _identical_creates_share_a_session() -> None:
    # R5.9 / R7.2 (each session is its own, also when several share a workspace root): a
    # retry guard on session/create. A second create with exactly the same params at the
    # same host-clock instant answers the session the first one created, so two clients
    # that open the same project at one moment share one session (one conversation, one
    # busy state).
    original = Host.session_create

    async def session_create(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        made: dict[tuple[str, int], str] = self.__dict__.setdefault("_created", {})
        key = (json.dumps(params, sort_keys=True), self.clock.now_ms())
        earlier = made.get(key)
        if earlier is not None:
            row = await self.storage.get_session(earlier)
            if row is not None:
                return {"session": self.session_wire(row)}
        result = await original(self, params)
        made[key] = result["session"]["sessionId"]
        return result

    patch(Host, "session_create", session_create)


CASES = [
    BrokenCase(
        "task-run-joins-running-run",
        "scheduled_plan",
        "task_run_again_while_its_first_run",
        "P35",
        "every task/run runs the task now, as a run of its own",
    ),
    BrokenCase(
        "same-prompt-same-instant-deduplicated",
        "turn_boundaries",
        "same_prompt_sent_again_once_its_turn",
        "R5.1",
        "the second prompt was answered with the first one's turn",
    ),
    BrokenCase(
        "second-reject-answers-success",
        "approval",
        "a_rejected_plan_cannot_be_decision_afterwards",
        "C6",
        "expected the host to refuse, but it answered",
    ),
    BrokenCase(
        "decisions-race-past-pending-check",
        "approval",
        "two_approvals_sent_at_once_exactly_one_wins",
        "R4.4",
        "the second approval failed with INTERNAL_ERROR",
    ),
    BrokenCase(
        "prompts-race-past-busy-check",
        "turn_boundaries",
        "two_prompts_sent_at_once",
        "R5.1",
        "the other prompt was answered",
    ),
    BrokenCase(
        "repeated-request-replays-answer",
        "protocol_errors",
        "an_identifier_used_again_once_its_request_was",
        "P1",
        "a request is served afresh",
    ),
    BrokenCase(
        "approve-retries-cancelled-execution",
        "execution",
        "a_plan_whose_execution_was_cancelled_cannot_be",
        "R4.4",
        "expected the host to refuse, but it answered",
    ),
    BrokenCase(
        "task-delete-twice-succeeds",
        "scheduled_plan",
        "acting_on_a_deleted_task_is_refused_action",
        "P26",
        "expected the host to refuse, but it answered",
    ),
    BrokenCase(
        "run-ids-from-task-and-clock",
        "scheduled_plan",
        "the_host_never_switches_a_refused_task_to",
        "R6.3",
        "the second run reused the first run",
    ),
    BrokenCase(
        "task-update-adds-a-second-timer",
        "scheduled_plan",
        "a_task_renamed_before_its_time_runs_once",
        "P29",
        "the task ran more than once when its time came",
    ),
    BrokenCase(
        "fault-arms-are-counted",
        "approval",
        "a_failure_armed_twice_for_approving",
        "R4.6",
        "a fault armed twice fires once",
    ),
    BrokenCase(
        "identical-creates-share-a-session",
        "artifact_integrity",
        "two_sessions_of_one_project_submitting_at_the",
        "R2.4",
        "the host refused a request the scenario needed",
    ),
]
