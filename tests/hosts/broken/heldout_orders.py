"""Broken hosts: a held-out set (orders and sequences: the order in which things happen,
are recorded and are announced), written from the contract alone."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import weakref
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from hosts.registry import BrokenCase, patch, variant


# R7.3 / P20 (implementing-a-host.md, Commands and shells, "Output"): `command/output`
# pieces are "numbered by `seq` from 0 across both streams (each command counts its own
# pieces ...), with no gap and no number used twice".
# Bug: each stream's reader numbers its own pieces, so stdout and stderr both count
# 0, 1, 2 ... and the numbers of one command repeat.
# A client sees: a command that writes to both streams sends two `command/output` pieces
# with `seq: 0` (one stdout, one stderr); sorting by seq cannot rebuild the interleaving.
# Recipe: Agent session with `auto`; the model calls Bash `echo out; echo err >&2`;
# collect the command's `command/output` notifications: their seqs are {0, 0}, not {0, 1}.
@variant("ord-output-seq-per-stream")
def output_seq_per_stream() -> None:
    from reference_host import turns

    original: Any = vars(turns)["run_command"]  # as the turn runner calls it now

    async def run_command(*, notify: Any, **kwargs: Any) -> Any:
        per_stream: dict[str, int] = {}

        def numbered(method: str, params: dict[str, Any]) -> None:
            if method == "command/output":
                seq = per_stream.get(params["stream"], 0)
                per_stream[params["stream"]] = seq + 1
                params = {**params, "seq": seq}
            notify(method, params)

        return await original(notify=numbered, **kwargs)

    patch(turns, "run_command", run_command, wraps=True)


# R1.3 / R7.7 and "What the suite does not require" (implementing-a-host.md):
# `session/transcript` reports every row in `id` order, and its `seq` is "the row id or
# any other whole number that grows from each entry to the next".
# Bug: seq is the entry's position within its turn (the renderer groups by turn), so it
# starts again at 0 with every turn.
# A client sees: after two turns, the second turn's user entry has seq 0 although it
# follows entries with seq 0 and 1: seq does not grow along the transcript.
# Recipe: prompt "one" (model answers text), prompt "two" (model answers text);
# session/transcript: seqs read 0, 1, 0, 1 instead of increasing.
@variant("ord-transcript-seq-per-turn")
def transcript_seq_per_turn() -> None:
    from reference_host.host import Host

    async def session_transcript(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        position: dict[str | None, int] = {}
        entries = []
        for _id, turn, role, content, at in await self.storage.transcript(row.id):
            seq = position.get(turn, 0)
            position[turn] = seq + 1
            entries.append(
                {"seq": seq, "turnId": turn, "role": role, "content": content, "createdAt": at}
            )
        return {"entries": entries}

    patch(Host, "session_transcript", session_transcript)


# R7.2 (implementing-a-host.md, Sessions, turns and boundaries; protocol.md approval/list):
# "`approval/list` lists a session's approvals oldest first: `createdAt` never decreases
# along the list".
# Bug: the list is ordered by rowid (insertion order), taken to be the same as creation
# order. It is not once the clock was set back between two submissions, nor for legacy
# rows a v8 file holds in another order than their created_at.
# A client sees: approval/list with a later createdAt before an earlier one.
# Recipe: Plan session; SubmitPlan A1 at T; reject A1; conformance/clock/set T - 1 h;
# SubmitPlan A2 (createdAt T - 1 h); approval/list gives [A1, A2]: createdAt decreases.
# (Or: migrate a v8 file whose plan_approvals rows were inserted newest first.)
@variant("ord-approval-list-by-rowid")
def approval_list_by_rowid() -> None:
    from reference_host.storage import APPROVAL_COLUMNS, ApprovalRow, Storage

    async def list_approvals(self: Storage, session_id: str) -> list[ApprovalRow]:
        async with self._conn.execute(
            f"SELECT {APPROVAL_COLUMNS} FROM plan_approvals WHERE session_id = ? ORDER BY rowid",
            (session_id,),
        ) as cursor:
            rows = await cursor.fetchall()
        return [ApprovalRow(*row) for row in rows]

    patch(Storage, "list_approvals", list_approvals)


# R6.1 / R6.2 / P28 (implementing-a-host.md, Scheduled tasks): a run's outcome shows as the
# task's `lastRun` in `task/list` ("task/runFinished reports the run refused ..., and
# task/list shows it as the task's lastRun"; a run cut short reads failed "in task/list's
# lastRun"). Only two runs started at one host-clock instant may show either.
# Bug: the query for the newest run lost its DESC: lastRun is the task's first run.
# A client sees: after a second run (at a later clock), task/list still reports the first.
# Recipe: Agent task; task/run (completes); clock/advance 1000; task/update mode plan;
# task/run (refused, PLAN_REQUIRES_INTERACTIVE_SESSION); task/list: lastRun is the first,
# completed run, not the refused one.
@variant("ord-lastrun-oldest")
def lastrun_oldest() -> None:
    from reference_host.storage import Storage

    async def last_task_run(self: Storage, task_id: str) -> dict[str, Any] | None:
        rows = await self._dicts(
            "SELECT * FROM scheduled_task_runs WHERE task_id = ? "
            "ORDER BY started_at, rowid LIMIT 1",
            (task_id,),
        )
        return rows[0] if rows else None

    patch(Storage, "last_task_run", last_task_run)


# R3.11 (implementing-a-host.md, Approval, "Expiry is eager"): "Each approval expires at
# its own deadline ... an earlier approval's deadline never expires a later one of the
# same session, nor takes it out of its session's pendingApprovalId."
# Bug: the expiry timer checks the deadline of the approval it was set for, then expires
# "the session's pending approval" (looked up by session), which after a reject and a
# revision is the newer one.
# A client sees: approval/updated with the revision `expired` (PLAN_APPROVAL_TIMEOUT)
# while the clock is still before its expiresAt; pendingApprovalId becomes null.
# Recipe: Plan session; SubmitPlan A1 at T; reject A1; clock/advance 10 min; prompt and
# SubmitPlan A2 (expiresAt T + 40 min); clock/advance 20 min (T + 30 min): A2 reads
# expired, 10 minutes early.
@variant("ord-expire-session-pending")
def expire_session_pending() -> None:
    from reference_host.approvals import TIMEOUT_CODE, Approvals, approval_wire
    from reference_host.state import is_expired

    async def expire(self: Approvals, approval_id: str) -> None:
        host = self.host
        fired = await host.storage.get_approval(approval_id)
        if fired is None or not is_expired(fired.expires_at, host.clock.now_ms()):
            return
        pending_id = host.activity_of(fired.session_id).pending_approval_id
        row = await host.storage.get_approval(pending_id) if pending_id is not None else None
        if row is None or row.status != "pending":
            return
        expired = replace(
            row, status="expired", status_code=TIMEOUT_CODE, decided_at=host.clock.now_ms()
        )
        await host.storage.update_approval(expired)
        host.set_activity(row.session_id, pending_approval_id=None)
        host.notify("approval/updated", {"approval": approval_wire(expired)})
        await host.publish_session(row.session_id)

    patch(Approvals, "expire", expire)


# Ordering (implementing-a-host.md): "One move can make many timers due, however far it
# jumps (days, past items due at different times): each of them fires in that move";
# also R3.11 (each approval expires at its own deadline) and P29 (every enabled task whose
# runAt comes due runs).
# Bug: a clock move steps to the next deadline only: it fires the timers due at the
# earliest due instant and leaves later ones, although already due, for the next move.
# A client sees: after one advance past two deadlines, only the first has fired; the
# second approval stays pending with expiresAt in the past (or the second task has not
# run) until the clock moves again.
# Recipe: session S1 submits a plan at T; clock/advance 1 min; session S2 submits a plan;
# clock/advance 60 min: S1's approval expired, S2's still pending. (Or two tasks with
# runAt T+1 s and T+2 s, one clock/advance 5 s: only the first runs.)
@variant("ord-clock-fires-first-due-only")
def clock_fires_first_due_only() -> None:
    from reference_host.clock import Clock

    async def fire_due(self: Clock) -> None:
        while self._timers and self._timers[0].cancelled:
            heapq.heappop(self._timers)
        if self._timers and self._timers[0].due_ms <= self.now_ms():
            instant = self._timers[0].due_ms
            while self._timers and self._timers[0].due_ms == instant:
                timer = heapq.heappop(self._timers)
                if not timer.cancelled:
                    await timer.callback()
        self._schedule_wakeup()

    patch(Clock, "fire_due", fire_due)


# Ordering (implementing-a-host.md): "A response comes after the notifications of every
# change it already reports: ... a reject's `approval/updated` come[s] before its answer
# and report[s] the approval ... as the answer does" (R7.2 for session/updated).
# Bug: reject commits, then announces from a background task so the answer is not held up
# by the notifications; the answer goes out first.
# A client sees: the approval/reject response, then approval/updated (rejected) and
# session/updated (pendingApprovalId null).
# Recipe: Plan session; SubmitPlan; approval/reject: the response precedes its
# approval/updated and session/updated on the wire.
_ANNOUNCING: weakref.WeakKeyDictionary[Any, set[asyncio.Task[None]]] = weakref.WeakKeyDictionary()


@variant("ord-reject-announced-after-answer")
def reject_announced_after_answer() -> None:
    from reference_host import state
    from reference_host.approvals import Approvals, _facts, _with, approval_wire

    async def reject(self: Approvals, session_id: str, approval_id: str) -> dict[str, Any]:
        host = self.host
        row = await self.require(session_id, approval_id)
        await host.turns.settle(session_id, row.turn_id)
        await self._ensure_decidable(row)
        rejected = _with(row, state.reject(_facts(row)), decided_at=host.clock.now_ms())
        await host.storage.update_approval(rejected)
        host.set_activity(session_id, pending_approval_id=None)

        async def announce() -> None:
            host.notify("approval/updated", {"approval": approval_wire(rejected)})
            await host.publish_session(session_id)

        tasks = _ANNOUNCING.setdefault(self, set())
        task = asyncio.get_running_loop().create_task(announce())
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return {"approval": approval_wire(rejected)}

    patch(Approvals, "reject", reject)


# R7.2 (implementing-a-host.md, Sessions, turns and boundaries): "Every change of what
# `session/get` reports (..., and the active turn, ...) is announced by a
# `session/updated` carrying the whole session as it now is, so the last one you sent
# for a session reads as `session/get` does"; activeTurnId is "null when none runs".
# Bug: at a turn's end the session is published before the turn is cleared from the
# session's activity (two lines swapped), so the last session/updated still names the
# ended turn as active.
# A client sees: turn/ended, then session/updated with activeTurnId = that turn; a
# session/get right after reads activeTurnId null. A client that trusts the
# notification keeps the session busy.
# Recipe: prompt; model answers text; after turn/ended, compare the last session/updated
# with session/get.
@variant("ord-session-updated-before-turn-cleared")
def session_updated_before_turn_cleared() -> None:
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
        if on_end is not None:
            await on_end(outcome, error)
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
        host.set_activity(session_id, active_turn_id=None)

    patch(TurnRunner, "_end", _end)


# Ordering (implementing-a-host.md): "A change made during a turn (EnterPlanMode switching
# the session to Plan) is announced when it is made, while the turn still runs, not only
# once the turn has ended" (R7.2).
# Bug: EnterPlanMode stores the new mode but leaves the announcement to the session/updated
# that the turn's end sends anyway.
# A client sees: turn/toolResult of EnterPlanMode (ok) and the next provider request
# offering the Plan tools, but no session/updated with mode plan until turn/ended.
# Recipe: Agent session; prompt; model calls EnterPlanMode; hold the second provider
# request open; look for session/updated mode plan before turn/ended: there is none.
@variant("ord-enter-plan-announced-at-end")
def enter_plan_announced_at_end() -> None:
    from reference_host.host import Host
    from reference_host.storage import SessionRow

    async def enter_plan_mode(self: Host, session: SessionRow) -> None:
        await self.storage.update_session(
            replace(session, mode="plan", updated_at=self.clock.now_ms())
        )

    patch(Host, "enter_plan_mode", enter_plan_mode)


# P9 (implementing-a-host.md, Errors and tool results): "Each tool call the model made is
# announced by one `turn/toolCall` before it runs (or is refused)".
# Bug: the batch's calls are announced together with their results once the batch has
# run (toolCall, toolCall, ..., toolResult, toolResult, ...), not before the first runs.
# A client sees: a Bash call's command/started, command/output and command/exited (or a
# permission/requested) before the turn/toolCall that announces the call.
# Recipe: Agent session with `auto`; model calls Bash `echo hi`; command/started arrives
# before turn/toolCall. (Under `ask`: permission/requested precedes turn/toolCall.)
@variant("ord-toolcall-announced-after-run")
def toolcall_announced_after_run() -> None:
    from reference_host.errors import HostError
    from reference_host.provider_client import ToolCall
    from reference_host.storage import SessionRow
    from reference_host.turns import CallOutcome, TurnRunner, _failure, _parse_arguments

    def announce_calls(
        runner: TurnRunner, session_id: str, turn_id: str, calls: tuple[ToolCall, ...]
    ) -> None:
        for call in calls:
            runner.host.notify(
                "turn/toolCall",
                {
                    "sessionId": session_id,
                    "turnId": turn_id,
                    "toolCallId": call.call_id,
                    "tool": call.name,
                    "input": _parse_arguments(call),
                },
            )

    async def _run_batch(
        self: TurnRunner,
        session: SessionRow,
        turn_id: str,
        calls: tuple[ToolCall, ...],
        unattended: bool,
    ) -> list[CallOutcome]:
        outcomes: list[CallOutcome] = []
        try:
            if any(call.name == "SubmitPlan" for call in calls) and len(calls) > 1:
                refusal = HostError(
                    "SUBMIT_PLAN_NOT_ALONE",
                    "SubmitPlan must be the only tool call of its message; no call of it ran",
                )
                outcomes = [_failure(refusal) for _ in calls]
            else:
                for call in calls:
                    outcomes.append(await self._run_call(session, turn_id, call, unattended))
                    session = await self.host.require_session(session.id)
        except asyncio.CancelledError:
            cut = _failure(HostError("TURN_CANCELLED", "the turn was cancelled before it ran"))
            outcomes += [cut] * (len(calls) - len(outcomes))
            announce_calls(self, session.id, turn_id, calls)
            self._announce_results(session.id, turn_id, calls, outcomes)
            raise
        announce_calls(self, session.id, turn_id, calls)
        self._announce_results(session.id, turn_id, calls, outcomes)
        return outcomes

    patch(TurnRunner, "_run_batch", _run_batch)


# P10 (implementing-a-host.md, Planning, "The tools work"): "When one message makes
# several calls, the tool message that answers a call (by its tool_call_id) carries that
# call's own result, never another call's"; P9: each call gets its one turn/toolResult.
# Bug: the batch runs its read-only calls (Read, Glob, Grep, BrowserPreview) first, so
# they never see a half-done change of a call before them, and the outcomes, collected in
# the order run, are then paired with the calls in the order the model made them.
# A client sees: in a batch [Bash, Read], the Bash call's turn/toolResult carries the
# file's text and the Read call's the command's output; the tool messages sent back to
# the provider are swapped the same way.
# Recipe: Agent session with `auto`; one assistant message with Bash `echo from-bash` then
# Read `a.txt`; compare each turn/toolResult's output with its call.
@variant("ord-results-misaligned")
def results_misaligned() -> None:
    from reference_host.errors import HostError
    from reference_host.provider_client import ToolCall
    from reference_host.storage import SessionRow
    from reference_host.turns import CallOutcome, TurnRunner, _failure, _parse_arguments

    read_only = frozenset({"Read", "Glob", "Grep", "BrowserPreview"})

    async def _run_batch(
        self: TurnRunner,
        session: SessionRow,
        turn_id: str,
        calls: tuple[ToolCall, ...],
        unattended: bool,
    ) -> list[CallOutcome]:
        for call in calls:
            self.host.notify(
                "turn/toolCall",
                {
                    "sessionId": session.id,
                    "turnId": turn_id,
                    "toolCallId": call.call_id,
                    "tool": call.name,
                    "input": _parse_arguments(call),
                },
            )
        outcomes: list[CallOutcome] = []
        try:
            if any(call.name == "SubmitPlan" for call in calls) and len(calls) > 1:
                refusal = HostError(
                    "SUBMIT_PLAN_NOT_ALONE",
                    "SubmitPlan must be the only tool call of its message; no call of it ran",
                )
                outcomes = [_failure(refusal) for _ in calls]
            else:
                ordered = sorted(calls, key=lambda call: call.name not in read_only)
                for call in ordered:
                    outcomes.append(await self._run_call(session, turn_id, call, unattended))
                    session = await self.host.require_session(session.id)
        except asyncio.CancelledError:
            cut = _failure(HostError("TURN_CANCELLED", "the turn was cancelled before it ran"))
            outcomes += [cut] * (len(calls) - len(outcomes))
            self._announce_results(session.id, turn_id, calls, outcomes)
            raise
        self._announce_results(session.id, turn_id, calls, outcomes)
        return outcomes

    patch(TurnRunner, "_run_batch", _run_batch)


# Ordering (implementing-a-host.md): "`turn/toolResult` for every call of a turn, and
# `command/exited` for every command, before that turn's `turn/ended`"; P19: "for one turn
# every `command/exited` comes before its `turn/ended`".
# Bug: a cancelled command's exit is reported by the cleanup that runs once the turn's
# cancellation has been reported: its command/exited (cancelled: true) is held back until
# the session's turn/ended has gone out.
# A client sees: turn/ended (cancelled), then command/exited (cancelled: true).
# Recipe: Agent session with `auto`; model calls Bash on a command that waits (a gate
# pipe, `sleep 30`); after command/started, session/cancel; turn/ended arrives before
# command/exited.
_HELD_EXITS: weakref.WeakKeyDictionary[Any, dict[str, list[dict[str, Any]]]] = (
    weakref.WeakKeyDictionary()
)


@variant("ord-exited-after-turn-ended")
def exited_after_turn_ended() -> None:
    from reference_host.host import Host

    original_init = Host.__init__
    original_close = Host.close

    def init(self: Host, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        send = self.notify
        held = _HELD_EXITS.setdefault(self, {})

        def notify(method: str, params: dict[str, Any]) -> None:
            if method == "command/exited" and params.get("cancelled"):
                held.setdefault(params["sessionId"], []).append(params)
                return
            send(method, params)
            if method == "turn/ended":
                for exited in held.pop(params["sessionId"], []):
                    send("command/exited", exited)

        self.notify = notify

    async def close(self: Host) -> None:
        await original_close(self)
        held = _HELD_EXITS.get(self, {})
        for session_id in list(held):
            for exited in held.pop(session_id):
                self.notify("command/exited", exited)

    patch(Host, "__init__", init, wraps=True)
    patch(Host, "close", close, wraps=True)


# P7 (implementing-a-host.md, Approval, "Permission modes"): "A `requestId` names one
# question among all the host's sessions ... and a question asked after a restart never
# has the id of one asked before it (a client may still hold the old one)."
# Bug: permission requests are numbered perm_1, perm_2, ... by a counter of the running
# host, which starts again at 1 in every new process.
# A client sees: after a restart the first question has the id of the first question of
# the previous process; a stale permission/respond with the old id answers the new
# question instead of getting PERMISSION_REQUEST_NOT_FOUND.
# Recipe: ask session; model calls Bash; note requestId (perm_1); restart the host; new
# prompt, model calls Bash: requestId is perm_1 again; permission/respond perm_1 "allow"
# (the stale answer) is accepted and runs the command.
_COUNTERS: weakref.WeakKeyDictionary[Any, Iterator[int]] = weakref.WeakKeyDictionary()


@variant("ord-permission-ids-restart")
def permission_ids_restart() -> None:
    from reference_host.permissions import PermissionBroker, _Request

    async def ask(
        self: PermissionBroker, session_id: str, turn_id: str, tool: str, tool_input: Any
    ) -> bool:
        counter = _COUNTERS.setdefault(self, itertools.count(1))
        request_id = f"perm_{next(counter)}"
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


# R1.3 and the freedoms list (implementing-a-host.md): "the rows of the prompts, the
# model's messages and the tool results stay, in their order", and session/transcript
# reports them in `id` order; the provider requests built from them stay valid Chat
# Completions ("an assistant message with tool_calls is followed directly by one tool
# message for each of its calls").
# Bug: the assistant message that made tool calls is written to the transcript once its
# calls have results (so that no stored call is left unanswered), i.e. after its tool
# rows: storage holds tool results before the message that asked for them.
# A client sees: session/transcript lists the tool entries before the assistant entry
# with their tool_calls; the next turn's request, built from the transcript, carries the
# assistant message's tool_calls without the tool messages after them.
# Recipe: Agent session with `auto`; model calls Read, then answers text; session/
# transcript: user, tool, assistant(tool_calls), assistant(text). A second prompt's
# provider request is not valid Chat Completions.
@variant("ord-transcript-assistant-after-tools")
def transcript_assistant_after_tools() -> None:
    from reference_host.errors import HostError
    from reference_host.turns import MAX_STEPS, TurnRunner, _assistant_message

    async def _loop(self: TurnRunner, session_id: str, turn_id: str, unattended: bool) -> None:
        host = self.host
        messages = await self._history(session_id)
        for _ in range(MAX_STEPS):
            session = await host.require_session(session_id)
            reply = await self._ask_model(session, turn_id, messages)
            assistant = _assistant_message(reply)
            messages.append(assistant)
            if not reply.tool_calls:
                await host.storage.append_transcript(
                    session_id, turn_id, "assistant", assistant, host.clock.now_ms()
                )
                return
            try:
                outcomes = await self._run_batch(session, turn_id, reply.tool_calls, unattended)
            except BaseException:
                await host.storage.append_transcript(
                    session_id, turn_id, "assistant", assistant, host.clock.now_ms()
                )
                raise
            for call, result in zip(reply.tool_calls, outcomes, strict=True):
                message = {"role": "tool", "tool_call_id": call.call_id, "content": result.output}
                await host.storage.append_transcript(
                    session_id, turn_id, "tool", message, host.clock.now_ms()
                )
                messages.append(message)
            await host.storage.append_transcript(
                session_id, turn_id, "assistant", assistant, host.clock.now_ms()
            )
            if any(result.ends_turn for result in outcomes):
                return
            if any(call.name == "new_context" for call in reply.tool_calls):
                messages = await self._history(session_id)
        raise HostError("PROVIDER_ERROR", f"the model did not finish within {MAX_STEPS} steps")

    patch(TurnRunner, "_loop", _loop)


CASES = [
    BrokenCase(
        "ord-output-seq-per-stream",
        "shell",
        "stream_apart_in_order",
        "P20",
        "output sequence numbers: [0, 0]",
    ),
    BrokenCase(
        "ord-transcript-seq-per-turn",
        "sessions",
        "switching_to_plan_keeps_the_agent",
        "R1.3",
        "seq does not increase from entry to entry",
    ),
    BrokenCase(
        "ord-approval-list-by-rowid",
        "approval",
        "round_clock_reading",
        "R7.2",
        "approval/list lists (title, createdAt)",
    ),
    BrokenCase(
        "ord-lastrun-oldest",
        "scheduled_plan",
        "never_switches_a_refused_task_to_agent_when_it_is_run_now",
        "R6.3",
        "after a second run the task's last run is",
    ),
    BrokenCase(
        "ord-expire-session-pending",
        "deadline",
        "after_a_rejected_one_still_waits",
        "R3.9",
        "the revised plan reads expired at the first plan's deadline",
    ),
    BrokenCase(
        "ord-clock-fires-first-due-only",
        "scheduled_plan",
        "tasks_due_at_different_times_all_run_after",
        "P29",
        "enabled tasks that came due",
    ),
    BrokenCase(
        "ord-reject-announced-after-answer",
        "approval",
        "rejecting_keeps_the_session_in_plan",
        "R7.2",
        "was answered before the approval/updated",
    ),
    BrokenCase(
        "ord-session-updated-before-turn-cleared",
        "sessions",
        "a_provider_error_ends_the_turn_as_failed",
        "R7.2",
        "the last session/updated of session",
    ),
    BrokenCase(
        "ord-enter-plan-announced-at-end",
        "plan_tools",
        "announced_while_the_turn_runs",
        "R7.2",
        "no session/updated showed the session in Plan",
    ),
    BrokenCase(
        "ord-toolcall-announced-after-run",
        "shell",
        "stream_apart_in_order",
        "P9",
        "before any turn/toolCall",
    ),
    BrokenCase(
        "ord-results-misaligned",
        "plan_tools",
        "a_command_and_a_read_in_one_message",
        "P10",
        "it should carry that call's own result",
    ),
    BrokenCase(
        "ord-exited-after-turn-ended",
        "shell",
        "ends_when_the_turn_is_cancelled",
        "R7.3",
        "announced in the order ['turn/ended', 'command/exited']",
    ),
    BrokenCase(
        "ord-permission-ids-restart",
        "execution",
        "a_question_asked_after_a_restart",
        "P7",
        "expected the host to refuse",
    ),
    BrokenCase(
        "ord-transcript-assistant-after-tools",
        "plan_tools",
        "a_new_context_keeps_the_earlier_conversation",
        "R1.3",
        "malformed request(s)",
    ),
]
