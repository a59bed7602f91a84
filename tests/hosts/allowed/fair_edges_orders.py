"""Allowed variations at the edges, in orders, in partial changes and in clean-up, written
from the published contract alone (docs/implementing-a-host.md, docs/protocol.md, schemas/).

Each host below differs from the reference host in one choice the contract leaves to the
host; the comment above it quotes the sentence that leaves it open.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import errno
import functools
import hashlib
import heapq
import itertools
import os
import random
import signal
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hosts.registry import AllowedCase, Send, patch, variant
from reference_host import approvals as approvals_module
from reference_host import artifacts, commands, permissions, server, shells, tasks, turns
from reference_host import host as host_module
from reference_host.approvals import TIMEOUT_CODE, Approvals, approval_wire
from reference_host.clock import Clock, wall_time_ms
from reference_host.errors import HostError
from reference_host.host import Host
from reference_host.options import HostOptions
from reference_host.provider_client import ToolCall
from reference_host.rpc import Dispatcher
from reference_host.state import is_expired
from reference_host.storage import ApprovalRow, SessionRow, Storage
from reference_host.tasks import Tasks
from reference_host.turns import CallOutcome, TurnRunner
from reference_host.workspace import validate_root

Relay = Callable[[str, dict[str, Any]], None]
Callback = Callable[[], None]


# -- helpers ------------------------------------------------------------------------------


def _each_host(setup: Callable[[Host], None]) -> None:
    """Run ``setup`` on every host once it is built."""
    init = Host.__init__

    def built(self: Host, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        setup(self)

    patch(Host, "__init__", built, wraps=True)


def _relay(make: Callable[[Host, Send], Relay]) -> None:
    """Pass each host's notifications through the relay ``make(host, send)`` builds for it
    (so a relay keeps its state on its own host)."""

    def setup(host: Host) -> None:
        patch(host, "notify", make(host, host.notify))

    _each_host(setup)


def _after_answers() -> Callable[[Host, Callback], None]:
    """``later(host, callback)``: run ``callback`` once the answer to the request the host is
    serving has been sent, before the next request is read."""
    dispatcher_of: weakref.WeakKeyDictionary[Host, Dispatcher] = weakref.WeakKeyDictionary()
    pending: weakref.WeakKeyDictionary[Dispatcher, list[Callback]] = weakref.WeakKeyDictionary()

    init = Host.__init__

    def built(self: Host, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        notify = args[3] if len(args) > 3 else kwargs.get("notify")
        owner = getattr(notify, "__self__", None)  # the dispatcher's own notify
        if isinstance(owner, Dispatcher):
            dispatcher_of[self] = owner

    handle = Dispatcher.handle

    async def handled(self: Dispatcher, frame: Any) -> None:
        try:
            await handle(self, frame)
        finally:
            for callback in pending.pop(self, []):
                callback()

    def later(host: Host, callback: Callback) -> None:
        dispatcher = dispatcher_of.get(host)
        if dispatcher is None:  # not served by a dispatcher: nothing to wait for
            callback()
        else:
            pending.setdefault(dispatcher, []).append(callback)

    patch(Host, "__init__", built, wraps=True)
    patch(Dispatcher, "handle", handled, wraps=True)
    return later


def _ids(make: Callable[[str], str]) -> None:
    """Every identifier the host makes (sessions, turns, approvals, executions, tasks, runs,
    commands, permission requests) comes from ``make(prefix)``."""
    for owner in (host_module, commands, permissions):
        patch(owner, "new_id", make)


def _wall_ms() -> int:
    return wall_time_ms()


# -- identifiers --------------------------------------------------------------------------


@variant("fe-ids-unusual-chars")
def _ids_unusual_chars() -> None:
    # Id: "An opaque identifier chosen by the host", a `string` of "min length 1; max length
    # 200" with no pattern; "identifiers' format (session, turn, approval, execution,
    # command and shell ids)" is listed among the host's choices. This host's ids are
    # exactly 200 characters long, the longest allowed, and hold spaces, non-ASCII letters,
    # quotes, a backslash and characters a URI or a shell reads specially.
    def odd_id(prefix: str) -> str:
        head = f"{prefix} «{os.urandom(8).hex()}» /ü #1 50% ?&=;$`'\"\\ "
        return head + os.urandom(100).hex()[: 200 - len(head)]

    _ids(odd_id)


# -- list orders ----------------------------------------------------------------------------


@variant("fe-listings-shuffled")
def _listings_shuffled() -> None:
    # "session/list, task/list and shell/list have no published order, and approvals
    # created at one instant may come in either order; two reads may order them
    # differently." This host shuffles those lists afresh at every read; approvals stay
    # oldest first, ties shuffled.
    list_sessions = Storage.list_sessions
    list_tasks = Storage.list_tasks
    list_approvals = Storage.list_approvals
    shell_list = Host.shell_list

    async def sessions(self: Storage) -> list[SessionRow]:
        rows = await list_sessions(self)
        random.shuffle(rows)
        return rows

    async def task_rows(self: Storage) -> list[dict[str, Any]]:
        rows = await list_tasks(self)
        random.shuffle(rows)
        return rows

    async def approvals(self: Storage, session_id: str) -> list[ApprovalRow]:
        groups: dict[int, list[ApprovalRow]] = {}
        for row in await list_approvals(self, session_id):  # oldest first
            groups.setdefault(row.created_at, []).append(row)
        shuffled: list[ApprovalRow] = []
        for group in groups.values():
            random.shuffle(group)
            shuffled += group
        return shuffled

    async def shell_rows(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await shell_list(self, params)
        listed = list(result["shells"])
        random.shuffle(listed)
        return {**result, "shells": listed}

    patch(Storage, "list_sessions", sessions, wraps=True)
    patch(Storage, "list_tasks", task_rows, wraps=True)
    patch(Storage, "list_approvals", approvals, wraps=True)
    patch(Host, "shell_list", shell_rows, wraps=True)


# -- orders of notifications and answers ----------------------------------------------------


@variant("fe-run-finished-after-answer")
def _run_finished_after_answer() -> None:
    # "The order of task/runFinished and the task/run response is yours" (listed again
    # under What the suite does not require). A task/run of a Plan task is refused at once;
    # the reference host reports the refused run before it answers, this host answers
    # first and reports the run right after (a run a clock move makes due is still
    # reported before the clock's answer, as Ordering requires).
    later = _after_answers()
    answering: weakref.WeakSet[Tasks] = weakref.WeakSet()
    run_now = Tasks.run_now

    async def run_now_answering(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        answering.add(self)
        try:
            return await run_now(self, params)
        finally:
            answering.discard(self)

    async def finish(
        self: Tasks, run: dict[str, Any], outcome: str, error: HostError | None
    ) -> None:
        run.update(
            outcome=outcome,
            error_code=error.code if error else None,
            error_message=error.message if error else None,
        )
        await self.host.storage.record_task_run(run)
        params = {"run": tasks._run_wire(run)}
        host = self.host
        if self in answering and isinstance(host, Host):
            later(host, lambda: host.notify("task/runFinished", params))
        else:
            host.notify("task/runFinished", params)

    patch(Tasks, "run_now", run_now_answering, wraps=True)
    patch(Tasks, "_finish", finish)


@variant("fe-turn-announced-after-answer")
def _turn_announced_after_answer() -> None:
    # Ordering: "What a request only sets going may be announced before or after its answer
    # (session/prompt may answer before or after turn/started)"; an approve "only sets the
    # execution going", and task/run "answers at once with the run running". This host
    # answers session/prompt, approval/approve and task/run first and only then sends the
    # turn/started of the turn they set going, with everything after it (the approve's own
    # approval/updated and session/updated still come before its answer).
    later = _after_answers()

    @dataclass
    class Held:
        starting: bool = False  # serving a request whose turn may be announced after it
        held: list[tuple[str, dict[str, Any]]] | None = None

    held_by: weakref.WeakKeyDictionary[Host, Held] = weakref.WeakKeyDictionary()

    def make(host: Host, send: Send) -> Relay:
        state = held_by.setdefault(host, Held())

        def relay(method: str, params: dict[str, Any]) -> None:
            if state.held is not None:
                state.held.append((method, params))
            else:
                send(method, params)

        return relay

    def flush(host: Host) -> None:
        state = held_by.get(host)
        if state is None or state.held is None:
            return
        held, state.held = state.held, None
        for method, params in held:
            host.notify(method, params)

    def starting_turns(handler: Any) -> Any:
        async def serve(self: Any, params: dict[str, Any]) -> dict[str, Any]:
            host = self if isinstance(self, Host) else self.host
            state = held_by.setdefault(host, Held())
            state.starting = True
            try:
                result: dict[str, Any] = await handler(self, params)
                return result
            finally:
                state.starting = False
                later(host, lambda: flush(host))

        return serve

    start = TurnRunner.start

    async def start_held(self: TurnRunner, *args: Any, **kwargs: Any) -> str:
        host = self.host
        if isinstance(host, Host):
            state = held_by.setdefault(host, Held())
            if state.starting and state.held is None:
                state.held = []
        return await start(self, *args, **kwargs)

    _relay(make)
    patch(Host, "session_prompt", starting_turns(Host.session_prompt), wraps=True)
    patch(Host, "approval_approve", starting_turns(Host.approval_approve), wraps=True)
    patch(Tasks, "run_now", starting_turns(Tasks.run_now), wraps=True)
    patch(TurnRunner, "start", start_held, wraps=True)


@variant("fe-no-queued-notice")
def _no_queued_notice() -> None:
    # "a notification for queued is optional, since the approve result already says
    # queued"; "a queued notification for an execution" is listed among the host's
    # choices. This host sends no execution/updated for queued.
    notify_execution = Approvals._notify_execution

    def without_queued(self: Approvals, row: ApprovalRow, turn_id: str | None) -> None:
        if row.execution_state != "queued":
            notify_execution(self, row, turn_id)

    patch(Approvals, "_notify_execution", without_queued, wraps=True)


@variant("fe-reannounce-on-read")
def _reannounce_on_read() -> None:
    # "announcing a session or an approval again when nothing changed (session/updated and
    # approval/updated carry the record as it now is, so a repeat says nothing new)" is the
    # host's. This host announces what a read returns before it answers session/get,
    # session/list, approval/get and approval/list.
    session_get = Host.session_get
    session_list = Host.session_list
    approval_get = Host.approval_get
    approval_list = Host.approval_list

    async def get_session(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await session_get(self, params)
        self.notify("session/updated", {"session": result["session"]})
        return result

    async def list_sessions(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await session_list(self, params)
        for session in result["sessions"]:
            self.notify("session/updated", {"session": session})
        return result

    async def get_approval(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await approval_get(self, params)
        self.notify("approval/updated", {"approval": result["approval"]})
        return result

    async def list_approvals(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await approval_list(self, params)
        for approval in result["approvals"]:
            self.notify("approval/updated", {"approval": approval})
        return result

    patch(Host, "session_get", get_session, wraps=True)
    patch(Host, "session_list", list_sessions, wraps=True)
    patch(Host, "approval_get", get_approval, wraps=True)
    patch(Host, "approval_list", list_approvals, wraps=True)


@variant("fe-recovery-announced")
def _recovery_announced() -> None:
    # §4 recovery: "Whether you announce what the recovery changed once a client is
    # connected (approval/updated, execution/updated with interrupted, turn/ended,
    # task/runFinished of a run cut short) is yours." This host announces all of it, and
    # the sessions concerned, right after it answers the first initialize (a start that
    # recovered nothing announces nothing).
    later = _after_answers()

    @dataclass
    class Recovered:
        approvals: list[str] = field(default_factory=list)  # pending ones
        executions: dict[str, str | None] = field(default_factory=dict)  # approval: turn
        turns: list[tuple[str, str]] = field(default_factory=list)  # (turn, session)
        runs: list[str] = field(default_factory=list)

    recovered: weakref.WeakKeyDictionary[Storage, Recovered] = weakref.WeakKeyDictionary()
    recover = Storage.recover

    async def recover_noting(self: Storage, now: int) -> tuple[int, int, int]:
        found = Recovered(
            approvals=[
                row["id"]
                for row in await self._dicts(
                    "SELECT id FROM plan_approvals WHERE status = 'pending' ORDER BY rowid"
                )
            ],
            executions={
                # the execution's turn: recorded once it ran, else the execution turn the
                # session had active (announced, not yet recorded running), if any
                row["id"]: row["turn"]
                for row in await self._dicts(
                    "SELECT a.id, coalesce(a.execution_turn_id, ("
                    "SELECT t.id FROM turns t WHERE t.session_id = a.session_id "
                    "AND t.kind = 'execution' AND t.state = 'active')) AS turn "
                    "FROM plan_approvals a "
                    "WHERE a.execution_state IN ('queued', 'running') ORDER BY a.rowid"
                )
            },
            turns=[
                (row["id"], row["session_id"])
                for row in await self._dicts(
                    "SELECT id, session_id FROM turns WHERE state = 'active' ORDER BY rowid"
                )
            ],
            runs=[
                row["id"]
                for row in await self._dicts(
                    "SELECT id FROM scheduled_task_runs WHERE outcome = 'running' ORDER BY rowid"
                )
            ],
        )
        counts = await recover(self, now)
        if found.approvals or found.executions or found.turns or found.runs:
            recovered[self] = found
        return counts

    initialize = Host.initialize

    async def initialize_announcing(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await initialize(self, params)
        found = recovered.pop(self.storage, None)
        if found is None:
            return result
        messages: list[tuple[str, dict[str, Any]]] = []
        sessions: dict[str, None] = {}
        interrupted = {"code": "TURN_INTERRUPTED", "message": "the host restarted"}
        for turn_id, session_id in found.turns:
            messages.append(
                (
                    "turn/ended",
                    {
                        "sessionId": session_id,
                        "turnId": turn_id,
                        "outcome": "interrupted",
                        "error": interrupted,
                    },
                )
            )
            sessions[session_id] = None
        for approval_id in [*found.executions, *found.approvals]:
            row = await self.storage.get_approval(approval_id)
            if row is None:
                continue
            if approval_id in found.executions and row.execution_id is not None:
                messages.append(
                    (
                        "execution/updated",
                        {
                            "sessionId": row.session_id,
                            "approvalId": row.id,
                            "executionId": row.execution_id,
                            "executionState": row.execution_state,
                            "turnId": found.executions[approval_id],
                        },
                    )
                )
            messages.append(("approval/updated", {"approval": approval_wire(row)}))
            sessions[row.session_id] = None
        for run_id in found.runs:
            for run in await self.storage._dicts(
                "SELECT * FROM scheduled_task_runs WHERE id = ?", (run_id,)
            ):
                messages.append(("task/runFinished", {"run": tasks._run_wire(run)}))
        for session_id in sessions:
            stored = await self.storage.get_session(session_id)
            if stored is not None:
                messages.append(("session/updated", {"session": self.session_wire(stored)}))

        def announce() -> None:
            for method, message in messages:
                self.notify(method, message)

        later(self, announce)
        return result

    patch(Storage, "recover", recover_noting, wraps=True)
    patch(Host, "initialize", initialize_announcing, wraps=True)


@variant("fe-cancel-answers-early")
def _cancel_answers_early() -> None:
    # "session/cancel ... may answer before the turn has ended; the turn then ends with
    # outcome cancelled"; "what a second session/cancel answers while the turn the first
    # one cancelled is still ending (that turn's id, or null)" is the host's. This host
    # answers a cancel as soon as it has asked the turn to stop (its commands and its end
    # follow), and a second cancel meanwhile answers the same turn's id.

    async def cancel(self: TurnRunner, session_id: str) -> str | None:
        task = self.tasks.get(session_id)
        turn_id = self.host.activity_of(session_id).active_turn_id
        if task is None or task.done():
            return None
        if task in self.closing:  # its work is done and its end is being recorded
            await asyncio.shield(task)
            return None
        if not task.cancelling():
            task.cancel()
        return turn_id

    patch(TurnRunner, "cancel", cancel)


@variant("fe-tool-notices-reversed")
def _tool_notices_reversed() -> None:
    # P9: each call "is announced by one turn/toolCall before it runs (or is refused), and
    # gets exactly one turn/toolResult"; no order is given among the calls' notifications
    # ("the order of notifications and responses where Ordering names none" is the host's;
    # Ordering asks only that every turn/toolResult come before turn/ended). This host
    # announces the calls of a message, and then their results, last call first.
    announce = TurnRunner._announce_results

    def results_reversed(
        self: TurnRunner,
        session_id: str,
        turn_id: str,
        calls: tuple[ToolCall, ...],
        outcomes: list[CallOutcome],
    ) -> None:
        announce(self, session_id, turn_id, tuple(reversed(calls)), list(reversed(outcomes)))

    async def run_batch(
        self: TurnRunner,
        session: SessionRow,
        turn_id: str,
        calls: tuple[ToolCall, ...],
        unattended: bool,
    ) -> list[CallOutcome]:
        for call in reversed(calls):
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
        outcomes: list[CallOutcome] = []
        try:
            if any(call.name == "SubmitPlan" for call in calls) and len(calls) > 1:
                refusal = HostError(
                    "SUBMIT_PLAN_NOT_ALONE",
                    "SubmitPlan must be the only tool call of its message; no call of it ran",
                )
                outcomes = [turns._failure(refusal) for _ in calls]
            else:
                for call in calls:
                    outcomes.append(await self._run_call(session, turn_id, call, unattended))
                    session = await self.host.require_session(session.id)
        except asyncio.CancelledError:
            cut = turns._failure(HostError("TURN_CANCELLED", "the turn was cancelled"))
            outcomes += [cut] * (len(calls) - len(outcomes))
            self._announce_results(session.id, turn_id, calls, outcomes)
            raise
        self._announce_results(session.id, turn_id, calls, outcomes)
        return outcomes

    patch(TurnRunner, "_announce_results", results_reversed, wraps=True)
    patch(TurnRunner, "_run_batch", run_batch)


@variant("fe-calls-side-by-side")
def _calls_side_by_side() -> None:
    # Commands: "Whether the calls of one message run one after another or side by side is
    # yours." This host runs all the calls of one message at once (each under the session
    # as it stood when the message arrived), and announces their results once all are done.

    async def run_batch(
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
                    "input": turns._parse_arguments(call),
                },
            )
        outcomes: list[CallOutcome | None] = [None] * len(calls)

        async def one(index: int, call: ToolCall) -> None:
            outcomes[index] = await self._run_call(session, turn_id, call, unattended)

        try:
            if any(call.name == "SubmitPlan" for call in calls) and len(calls) > 1:
                refusal = HostError(
                    "SUBMIT_PLAN_NOT_ALONE",
                    "SubmitPlan must be the only tool call of its message; no call of it ran",
                )
                outcomes = [turns._failure(refusal) for _ in calls]
            else:
                await asyncio.gather(*(one(n, call) for n, call in enumerate(calls)))
        except asyncio.CancelledError:
            cut = turns._failure(HostError("TURN_CANCELLED", "the turn was cancelled"))
            ended = [outcome or cut for outcome in outcomes]
            self._announce_results(session.id, turn_id, calls, ended)
            raise
        done = [outcome for outcome in outcomes if outcome is not None]
        assert len(done) == len(calls)
        self._announce_results(session.id, turn_id, calls, done)
        return done

    patch(TurnRunner, "_run_batch", run_batch)


@variant("fe-text-per-character")
def _text_per_character() -> None:
    # P31: "the turn reports the assistant's text in turn/text notifications whose texts,
    # joined in order, are the model's full answer"; how the answer is cut into pieces is
    # not stated. This host sends the text one character per piece (a long piece in
    # pieces of 64 characters after its first 256).
    def make(host: Host, send: Send) -> Relay:
        def relay(method: str, params: dict[str, Any]) -> None:
            if method != "turn/text" or len(params["text"]) <= 1:
                send(method, params)
                return
            text: str = params["text"]
            pieces = list(text[:256]) + [text[n : n + 64] for n in range(256, len(text), 64)]
            for piece in pieces:
                send(method, {**params, "text": piece})

        return relay

    _relay(make)


@variant("fe-output-pieces-split")
def _output_pieces_split() -> None:
    # P20: output streams "as command/output notifications numbered by seq from 0 across
    # both streams ... with no gap and no number used twice ... at most 16384 characters of
    # text each"; "where its output is cut into command/output pieces" is the host's. This
    # host cuts every piece it reads into two, its first character and the rest, numbered
    # on without a gap.
    def make(host: Host, send: Send) -> Relay:
        next_seq: dict[str, int] = {}

        def relay(method: str, params: dict[str, Any]) -> None:
            if method == "command/exited":
                next_seq.pop(params["commandId"], None)
            if method != "command/output":
                send(method, params)
                return
            command_id = params["commandId"]
            text: str = params["text"]
            pieces = [text[:1], text[1:]] if len(text) > 1 else [text]
            for piece in pieces:
                seq = next_seq.get(command_id, 0)
                next_seq[command_id] = seq + 1
                send(method, {**params, "seq": seq, "text": piece})

        return relay

    _relay(make)


# -- limits ---------------------------------------------------------------------------------


@variant("fe-frame-limit-minimum")
def _frame_limit_minimum() -> None:
    # P2: "announce the longest request line you accept in capabilities.maxFrameBytes (at
    # least 65536 bytes, newline excluded) ... The limit is yours to choose." This host
    # takes the smallest limit allowed, 65536 bytes.
    patch(server, "DEFAULT_MAX_FRAME_BYTES", 65536)


@variant("fe-output-cap-5000")
def _output_cap_5000() -> None:
    # "your command output cap, as long as you announce it" is the host's;
    # maxCommandOutputBytes has "Min 1". This host keeps and streams 5000 bytes of each
    # command's output (not a power of two, nor a multiple of its read size).
    patch(commands, "OUTPUT_CAP_BYTES", 5000)
    patch(host_module, "OUTPUT_CAP_BYTES", 5000)


@variant("fe-truncation-notice-1kib")
def _truncation_notice_1kib() -> None:
    # P20: past the cap "you stream nothing more of it (a notice of your own of at most
    # 1 KiB is allowed)"; "what your truncation notice says, within its 1 KiB" is the
    # host's. This host's notice is exactly 1024 bytes long.
    head = "\n[the host kept only the first part of this command's output; the rest was "
    tail = "dropped]\n"
    notice = head + "." * (1024 - len(head) - len(tail)) + tail
    assert len(notice.encode("utf-8")) == 1024
    patch(commands, "TRUNCATION_MARKER", notice)


@variant("fe-default-timeout-10s")
def _default_timeout_10s() -> None:
    # As above: the default command timeout is the host's. This host gives a command that
    # names no timeout_ms ten seconds on the host clock.
    patch(server, "HostOptions", functools.partial(HostOptions, command_timeout_ms=10_000))


# -- timestamps -----------------------------------------------------------------------------


@variant("fe-timers-record-due-time")
def _timers_record_due_time() -> None:
    # Ordering: "A timer the move jumped past may record its own time or the clock the move
    # ended on (an expired approval's decidedAt, a run's startedAt), never a time before it
    # was due." This host records the timer's own time: an expired approval's decidedAt is
    # its expiresAt, and a run its timer started has the startedAt at which it came due
    # (its runAt, or the moment that runAt was set if it was already past).
    due_at: contextvars.ContextVar[int | None] = contextvars.ContextVar("due_at", default=None)
    armed_at: weakref.WeakKeyDictionary[Tasks, dict[str, int]] = weakref.WeakKeyDictionary()

    async def expire(self: Approvals, approval_id: str) -> None:
        host = self.host
        row = await host.storage.get_approval(approval_id)
        if row is None or row.status != "pending":
            return
        if not is_expired(row.expires_at, host.clock.now_ms()):
            return
        expired = replace(
            row, status="expired", status_code=TIMEOUT_CODE, decided_at=row.expires_at
        )
        await host.storage.update_approval(expired)
        host.set_activity(row.session_id, pending_approval_id=None)
        host.notify("approval/updated", {"approval": approval_wire(expired)})
        await host.publish_session(row.session_id)

    arm = Tasks._arm

    def arm_noting(self: Tasks, task_id: str, run_at: int | None) -> None:
        armed_at.setdefault(self, {})[task_id] = self.host.clock.now_ms()
        arm(self, task_id, run_at)

    fire = Tasks._fire

    async def fire_at_due_time(self: Tasks, task_id: str) -> None:
        row = await self.host.storage.get_task(task_id)
        due = None
        if row is not None and row["run_at"] is not None:
            due = max(row["run_at"], armed_at.get(self, {}).get(task_id, row["run_at"]))
        token = due_at.set(due)
        try:
            await fire(self, task_id)
        finally:
            due_at.reset(token)

    def pin(run: dict[str, Any]) -> dict[str, Any]:
        due = due_at.get()
        if due is not None:
            run["started_at"] = due  # the same run record the host goes on to report
        return run

    finish = Tasks._finish

    async def finish_pinned(
        self: Tasks, run: dict[str, Any], outcome: str, error: HostError | None
    ) -> None:
        await finish(self, pin(run), outcome, error)

    record_task_run = Storage.record_task_run

    async def record_pinned(self: Storage, run: dict[str, Any]) -> None:
        await record_task_run(self, pin(run))

    patch(Approvals, "expire", expire)
    patch(Tasks, "_arm", arm_noting, wraps=True)
    patch(Tasks, "_fire", fire_at_due_time, wraps=True)
    patch(Tasks, "_finish", finish_pinned, wraps=True)
    patch(Storage, "record_task_run", record_pinned, wraps=True)


@variant("fe-bookkeeping-on-system-clock")
def _bookkeeping_on_system_clock() -> None:
    # Conformance mode: "bookkeeping columns the protocol never reports (updated_at, the
    # times of command_audit) may follow the system clock"; "turns.ended_at" is listed
    # among the host's choices. This host writes those columns from the system clock, not
    # from its (standing) host clock.
    write_session = Storage.write_session
    insert_session = Storage.insert_session
    insert_task = Storage.insert_task
    update_task = Storage.update_task
    record_command = Storage.record_command
    end_turn = Storage.end_turn

    async def write_session_wall(conn: Any, session: SessionRow) -> None:
        await write_session(conn, replace(session, updated_at=_wall_ms()))

    async def insert_session_wall(self: Storage, session: SessionRow) -> None:
        await insert_session(self, replace(session, updated_at=_wall_ms()))

    async def insert_task_wall(self: Storage, task: dict[str, Any]) -> None:
        await insert_task(self, {**task, "updated_at": _wall_ms()})

    async def update_task_wall(self: Storage, task_id: str, changes: dict[str, Any]) -> None:
        if "updated_at" in changes:
            changes = {**changes, "updated_at": _wall_ms()}
        await update_task(self, task_id, changes)

    async def record_command_wall(self: Storage, values: dict[str, Any]) -> None:
        now = _wall_ms()
        if values.get("ended_at") is not None:
            duration = values.get("duration_ms") or 0
            values = {**values, "ended_at": now, "started_at": max(0, now - duration)}
        elif "started_at" in values:
            values = {**values, "started_at": now}
        await record_command(self, values)

    async def end_turn_wall(self: Storage, turn_id: str, state: str, at: int) -> None:
        await end_turn(self, turn_id, state, _wall_ms())

    patch(Storage, "write_session", staticmethod(write_session_wall), wraps=True)
    patch(Storage, "insert_session", insert_session_wall, wraps=True)
    patch(Storage, "insert_task", insert_task_wall, wraps=True)
    patch(Storage, "update_task", update_task_wall, wraps=True)
    patch(Storage, "record_command", record_command_wall, wraps=True)
    patch(Storage, "end_turn", end_turn_wall, wraps=True)


@variant("fe-timers-fire-latest-first")
def _timers_fire_latest_first() -> None:
    # Ordering: "One move can make many timers due ... each of them fires in that move, in
    # an order of your choosing." This host fires the timers a move made due latest first.

    async def fire_due(self: Clock) -> None:
        while True:
            now = self.now_ms()
            due = []
            while self._timers and self._timers[0].due_ms <= now:
                due.append(heapq.heappop(self._timers))
            if not due:
                break
            for timer in reversed(due):
                if not timer.cancelled:
                    await timer.callback()
        self._schedule_wakeup()

    patch(Clock, "fire_due", fire_due)


# -- names and texts ------------------------------------------------------------------------


@variant("fe-artifact-names-unusual")
def _artifact_names_unusual() -> None:
    # §2: "The name is yours; it must be new for every submission"; ArtifactRef.path is
    # `^\.pi/plan/[^/]+\.md$`. This host's names hold spaces, non-ASCII letters and
    # characters a URI or a shell reads specially.
    def name() -> str:
        return f"Plan «ü» #1 50% & 'x' ?;$ {os.urandom(6).hex()}.md"

    patch(artifacts, "_unique_name", name)


@variant("fe-artifact-names-hidden")
def _artifact_names_hidden() -> None:
    # As above, the name is the host's within `^\.pi/plan/[^/]+\.md$`: this host's artifact
    # names start with a dot (a hidden file on POSIX).
    def name() -> str:
        return f".plan-{os.urandom(8).hex()}.md"

    patch(artifacts, "_unique_name", name)


@variant("fe-failure-notes-in-transcript")
def _failure_notes_in_transcript() -> None:
    # "transcript rows you write yourself (the execution prompt, a new_context summary, a
    # system or developer note that a turn failed) and which turn, if any, they name" are
    # the host's; "the rows of the prompts, the model's messages and the tool results stay,
    # in their order". This host writes a `system` note naming the turn when a turn fails
    # or is cancelled; the model sees it in later turns as context of the host's own.
    end = TurnRunner._end

    async def end_with_note(
        self: TurnRunner,
        session_id: str,
        turn_id: str,
        approval: ApprovalRow | None,
        on_end: Any,
        outcome: str,
        error: HostError | None,
    ) -> None:
        if outcome != "completed":
            why = f" ({error.code})" if error is not None else ""
            note = {"role": "system", "content": f"Note: the previous turn was {outcome}{why}."}
            await self.host.storage.append_transcript(
                session_id, turn_id, "system", note, self.host.clock.now_ms()
            )
        await end(self, session_id, turn_id, approval, on_end, outcome, error)

    patch(TurnRunner, "_end", end_with_note, wraps=True)


# -- commands -------------------------------------------------------------------------------


def _on_commands(change: Callable[[commands.CommandResult], commands.CommandResult]) -> None:
    """Pass every command's result, and its command/exited, through ``change``."""
    run_command = vars(turns)["run_command"]  # as the turn runner calls it

    async def changed(**kw: Any) -> commands.CommandResult:
        notify = kw["notify"]
        cell: list[commands.CommandResult] = []

        def relay(method: str, params: dict[str, Any]) -> None:
            if method == "command/exited":
                result = change(
                    commands.CommandResult(
                        command_id=params["commandId"],
                        exit_code=params["exitCode"],
                        signal=params["signal"],
                        timed_out=params["timedOut"],
                        cancelled=params["cancelled"],
                        truncated=params["truncated"],
                        duration_ms=params["durationMs"],
                        output="",
                    )
                )
                cell.append(result)
                params = {**params, "exitCode": result.exit_code, "signal": result.signal}
            notify(method, params)

        try:
            result = await run_command(**{**kw, "notify": relay})
        except commands.CommandCancelledError as cancelled:
            raise commands.CommandCancelledError(change(cancelled.result)) from cancelled
        return change(result)

    patch(turns, "run_command", changed, wraps=True)


@variant("fe-signal-exit-code-128")
def _signal_exit_code_128() -> None:
    # "exitCode of a command a signal ended (null or 128 plus the signal), wherever the
    # contract does not fix it above" is the host's (and a timed-out command's "exitCode may
    # be null or 128 plus the signal"). This host reports 128 plus the signal, in
    # command/exited and command_audit alike.
    def plus_128(result: commands.CommandResult) -> commands.CommandResult:
        if result.signal is not None and result.exit_code is None:
            return replace(result, exit_code=128 + result.signal)
        return result

    _on_commands(plus_128)


@variant("fe-timeout-sigterm-first")
def _timeout_sigterm_first() -> None:
    # "which signal ends a timed-out command (SIGKILL at once, or SIGTERM first)" is the
    # host's; "A command that timed out was ended by your signal, so its signal is never
    # null". This host sends SIGTERM to the command's process group first and SIGKILL to
    # everything the command started a moment later; a timed-out command reports SIGTERM.
    def expire_gently(flag: asyncio.Event, process: asyncio.subprocess.Process) -> Any:
        async def expire() -> None:
            flag.set()
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGTERM)
            for _ in range(30):  # a grace of up to 0.3 s on real time
                if process.returncode is not None:
                    break
                await asyncio.sleep(0.01)
            commands._kill_group(process)

        return expire

    def term_reported(result: commands.CommandResult) -> commands.CommandResult:
        if result.timed_out and result.signal is None:  # its shell exited on the SIGTERM
            return replace(result, exit_code=None, signal=int(signal.SIGTERM))
        return result

    patch(commands, "_expire", expire_gently)
    _on_commands(term_reported)


# -- cancel, clean-up and speed --------------------------------------------------------------


@variant("fe-cancel-drops-queued-execution")
def _cancel_drops_queued_execution() -> None:
    # "whether a cancel while an approved execution waits in the queue (no turn is active,
    # so the answer is turnId: null) also interrupts that execution" is the host's. This
    # host interrupts it: the execution reads interrupted (queued -> interrupted, R4.5)
    # and the session is idle in Agent.
    session_cancel = Host.session_cancel

    async def cancel(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await session_cancel(self, params)
        session_id = params["sessionId"]
        activity = self.activity_of(session_id)
        execution_id = activity.active_execution_id
        if result["turnId"] is None and activity.active_turn_id is None and execution_id:
            for row in await self.storage.list_approvals(session_id):
                if row.execution_id == execution_id and row.execution_state == "queued":
                    await self.approvals.execution_finished(row.id, "interrupted")
                    await self.publish_session(session_id)
        return result

    patch(Host, "session_cancel", cancel, wraps=True)


@variant("fe-stop-cleans-up")
def _stop_cleans_up() -> None:
    # "whether a command that your clean stop ended has a command_audit row, and whether it
    # reads cancelled" and "turns.ended_at, and when your start-up recovery runs, as long
    # as it is done before your first answer" are the host's. At a clean stop this host
    # records the commands it ended (as their command/exited said) and ends the turns it
    # abandons as interrupted at once, instead of leaving them to the next start.
    bash = TurnRunner._bash

    async def bash_audited(
        self: TurnRunner, session: SessionRow, turn_id: str, args: dict[str, Any]
    ) -> CallOutcome:
        shell_id = session.shell_id or await self.host.default_shell_id()
        shell = shells.find(shell_id) if shell_id else None
        started_at = self.host.clock.now_ms()
        try:
            return await bash(self, session, turn_id, args)
        except commands.CommandCancelledError as cancelled:
            if self.stopping and shell is not None and session.workspace_root is not None:
                audit = {
                    "session_id": session.id,
                    "turn_id": turn_id,
                    "shell_id": shell.shell_id,
                    "shell_path": shell.path,
                    "command": args["command"],
                    "cwd": session.workspace_root,
                    "started_at": started_at,
                }
                await self._audit(audit, cancelled.result)
            raise

    shutdown = TurnRunner.shutdown

    async def shutdown_ending_turns(self: TurnRunner) -> None:
        abandoned = [
            turn_id
            for session_id in list(self.tasks)
            if (turn_id := self.host.activity_of(session_id).active_turn_id) is not None
        ]
        await shutdown(self)
        for turn_id in abandoned:
            await self.host.storage.end_turn(turn_id, "interrupted", self.host.clock.now_ms())

    patch(TurnRunner, "_bash", bash_audited, wraps=True)
    patch(TurnRunner, "shutdown", shutdown_ending_turns, wraps=True)


@variant("fe-slow-turn-edges")
def _slow_turn_edges() -> None:
    # The contract bounds how long a host may take only by the harness's step timeout ("the
    # call ends within the harness's step timeout (10 s by default)") and by Ordering
    # ("the harness waits for whichever message comes later, within its timeout"). This
    # host takes its time at both ends of a turn: 0.1 s after it started before the first
    # provider request, and 0.1 s once the work is done before the turn ends.
    loop = TurnRunner._loop
    end = TurnRunner._end

    async def slow_loop(self: TurnRunner, *args: Any) -> None:
        await asyncio.sleep(0.1)
        await loop(self, *args)

    async def slow_end(self: TurnRunner, *args: Any) -> None:
        await asyncio.sleep(0.1)
        await end(self, *args)

    patch(TurnRunner, "_loop", slow_loop, wraps=True)
    patch(TurnRunner, "_end", slow_end, wraps=True)


@variant("fe-ids-numeric")
def _ids_numeric() -> None:
    # Id: "An opaque identifier chosen by the host" (a string); its format is the host's.
    # This host's ids are decimal numbers written as strings, from one counter that starts
    # at the system time in nanoseconds (so no id repeats across restarts), the same kind of
    # text as the integer ids of JSON-RPC requests.
    counter = itertools.count(time.time_ns())

    def numeric_id(prefix: str) -> str:
        return str(next(counter))

    _ids(numeric_id)


@variant("fe-session-announced-at-submit")
def _session_announced_at_submit() -> None:
    # "Every change of what session/get reports (..., pending approval ...) is announced by
    # a session/updated carrying the whole session as it now is"; Ordering: "A change made
    # during a turn ... is announced when it is made, while the turn still runs". The
    # reference host announces the new pendingApprovalId with the end of the Plan turn;
    # this host announces it as soon as the approval exists (the turn still active), and
    # again when the turn has ended.
    submit = Approvals.submit

    async def submit_announcing(
        self: Approvals, session: SessionRow, turn_id: str, args: dict[str, Any]
    ) -> ApprovalRow:
        row = await submit(self, session, turn_id, args)
        await self.host.publish_session(session.id)
        return row

    patch(Approvals, "submit", submit_announcing, wraps=True)


@variant("fe-transcript-seq-sparse")
def _transcript_seq_sparse() -> None:
    # "session/transcript's seq: the row id or any other whole number that grows from each
    # entry to the next" is the host's (TranscriptEntry.seq: integer, min 0). This host's
    # seq starts far from 0 and leaves gaps: 2^40 plus three times the row id.
    session_transcript = Host.session_transcript

    async def sparse(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await session_transcript(self, params)
        entries = [{**entry, "seq": 2**40 + 3 * entry["seq"]} for entry in result["entries"]]
        return {**result, "entries": entries}

    patch(Host, "session_transcript", sparse, wraps=True)


@variant("fe-partial-artifact-kept")
def _partial_artifact_kept() -> None:
    # §2: "a write or flush that fails ... is ARTIFACT_WRITE_FAILED. Either way no approval
    # and no execution is created (R2.12); whether a partly written file remains is yours."
    # This host leaves what it wrote: a failed write leaves half of the plan's bytes in a
    # new file of .pi/plan/, a failed flush the whole of them; no approval names either.

    def write_all(fd: int, content: bytes, fault: artifacts.FaultCheck) -> None:
        try:
            if fault("artifactWrite"):
                os.write(fd, content[: len(content) // 2])
                raise OSError(errno.EIO, "injected artifact write failure")
            view = memoryview(content)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if fault("artifactFlush"):
                raise OSError(errno.EIO, "injected artifact flush failure")
            os.fsync(fd)
        except OSError as exc:
            raise HostError("ARTIFACT_WRITE_FAILED", f"writing the artifact failed: {exc}") from exc

    def write_keeping(root: str, content: bytes, fault: artifacts.FaultCheck) -> Any:
        root_path = validate_root(root)
        try:
            root_fd = os.open(root_path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise HostError("WORKSPACE_INVALID", f"cannot open workspace root: {exc}") from exc
        opened = [root_fd]
        digest = hashlib.sha256(content).hexdigest()
        try:
            pi_fd, pi_created = artifacts._open_plan_dir(root_fd, ".pi", ".pi")
            opened.append(pi_fd)
            plan_fd, plan_created = artifacts._open_plan_dir(pi_fd, "plan", ".pi/plan")
            opened.append(plan_fd)
            to_flush = [
                plan_fd,
                *([pi_fd] if plan_created else []),
                *([root_fd] if pi_created else []),
            ]
            name, file_fd = artifacts._create_exclusive(plan_fd)
            try:
                write_all(file_fd, content, fault)
            except BaseException:  # the file stays, whole or in part
                with contextlib.suppress(OSError):
                    os.close(file_fd)
                raise
            artifacts._close(file_fd)
            for directory_fd in to_flush:
                artifacts._flush_directory(directory_fd)
        finally:
            for fd in opened:
                with contextlib.suppress(OSError):
                    os.close(fd)
        return artifacts.Artifact(f".pi/plan/{name}", digest, len(content))

    patch(approvals_module, "write_artifact", write_keeping)


@variant("fe-stderr-lags")
def _stderr_lags() -> None:
    # P20: output streams while the command runs, "numbered by seq from 0 across both
    # streams ... with no gap and no number used twice"; "the order of stdout pieces
    # against stderr pieces" is the host's. This host passes stderr on 30 ms (real time)
    # after it read it, stdout at once, and numbers the pieces as it sends them; a
    # command's command/exited still comes after all of its pieces.
    lag_s = 0.03

    def make(host: Host, send: Send) -> Relay:
        next_seq: dict[str, int] = {}
        held: dict[str, list[dict[str, Any]]] = {}

        def emit(params: dict[str, Any]) -> None:
            command_id = params["commandId"]
            seq = next_seq.get(command_id, 0)
            next_seq[command_id] = seq + 1
            send("command/output", {**params, "seq": seq})

        def release(command_id: str) -> None:
            waiting = held.get(command_id)
            if waiting:
                emit(waiting.pop(0))

        def relay(method: str, params: dict[str, Any]) -> None:
            if method == "command/output" and params["stream"] == "stderr":
                command_id = params["commandId"]
                held.setdefault(command_id, []).append(params)
                asyncio.get_running_loop().call_later(lag_s, release, command_id)
            elif method == "command/output":
                emit(params)
            elif method == "command/exited":
                command_id = params["commandId"]
                for waiting in held.pop(command_id, []):
                    emit(waiting)
                next_seq.pop(command_id, None)
                send(method, params)
            else:
                send(method, params)

        return relay

    _relay(make)


@variant("fe-approve-refused-while-execution-ends")
def _approve_refused_while_execution_ends() -> None:
    # §4: "An approve of the new plan that arrives before the earlier execution has ended
    # either waits until it has, or is refused with EXECUTION_ACTIVE (the approval stays
    # pending and can be approved once it has ended)". The reference host waits; this host
    # refuses. It also takes 0.2 s to end an execution turn once its work is done (a host
    # may take its time within the stated timeouts), so a plan the execution submitted is
    # pending while the execution has not yet ended.
    approve = Approvals.approve
    end = TurnRunner._end

    async def approve_or_refuse(
        self: Approvals, session_id: str, approval_id: str, mode: Any
    ) -> dict[str, Any]:
        row = await self.require(session_id, approval_id)
        active = self.host.activity_of(session_id).active_execution_id
        now = self.host.clock.now_ms()
        if active is not None and row.status == "pending" and not is_expired(row.expires_at, now):
            raise HostError(
                "EXECUTION_ACTIVE",
                "the session's earlier execution has not ended yet; approve once it has",
                {"executionId": active},
            )
        return await approve(self, session_id, approval_id, mode)

    async def slow_execution_end(
        self: TurnRunner, session_id: str, turn_id: str, approval: ApprovalRow | None, *rest: Any
    ) -> None:
        if approval is not None:
            await asyncio.sleep(0.2)
        await end(self, session_id, turn_id, approval, *rest)

    patch(Approvals, "approve", approve_or_refuse, wraps=True)
    patch(TurnRunner, "_end", slow_execution_end, wraps=True)


@variant("fe-late-cancel-still-cancels")
def _late_cancel_still_cancels() -> None:
    # "whether a cancel that arrives once the turn's work is done but before its
    # turn/ended still cancels it (answer its id; it ends cancelled) or comes too late
    # (answer null once the turn has ended as it finished)" is the host's. The reference
    # host answers null; this host still cancels such a turn. It takes 50 ms between a
    # turn's work and the record of its end, and a cancel in that time answers the turn's
    # id and the turn ends cancelled (an execution then reads interrupted).

    @dataclass
    class Ending:
        late: set[str] = field(default_factory=set)  # turns a late cancel reached
        recording: set[str] = field(default_factory=set)  # turns whose end is being recorded

    ending: weakref.WeakKeyDictionary[TurnRunner, Ending] = weakref.WeakKeyDictionary()
    end = TurnRunner._end
    cancel = TurnRunner.cancel

    async def end_or_cancelled(
        self: TurnRunner,
        session_id: str,
        turn_id: str,
        approval: ApprovalRow | None,
        on_end: Any,
        outcome: str,
        error: HostError | None,
    ) -> None:
        state = ending.setdefault(self, Ending())
        await asyncio.sleep(0.05)
        if turn_id in state.late and outcome != "cancelled":
            outcome, error = "cancelled", HostError("TURN_CANCELLED", "the turn was cancelled")
        state.late.discard(turn_id)
        state.recording.add(turn_id)
        try:
            await end(self, session_id, turn_id, approval, on_end, outcome, error)
        finally:
            state.recording.discard(turn_id)

    async def cancel_late(self: TurnRunner, session_id: str) -> str | None:
        task = self.tasks.get(session_id)
        turn_id = self.host.activity_of(session_id).active_turn_id
        state = ending.setdefault(self, Ending())
        if (
            task is not None
            and task in self.closing
            and turn_id is not None
            and turn_id not in state.recording
        ):
            state.late.add(turn_id)
            await asyncio.shield(task)
            return turn_id
        return await cancel(self, session_id)

    patch(TurnRunner, "_end", end_or_cancelled, wraps=True)
    patch(TurnRunner, "cancel", cancel_late, wraps=True)


@variant("fe-unstartable-command-announced")
def _unstartable_command_announced() -> None:
    # P9: "A command that cannot be started (the session's project folder is gone, the
    # shell will not run) gets an error result, TOOL_FAILED or WORKSPACE_INVALID as you
    # choose, and the turn goes on. Whether you announce it with command/started (and then
    # its command/exited) and record it is yours." When the project folder is gone, this
    # host announces the command, reports it exited with status 127 without running it,
    # records it in command_audit, and answers the call with WORKSPACE_INVALID.
    bash = TurnRunner._bash

    async def bash_announcing(
        self: TurnRunner, session: SessionRow, turn_id: str, args: dict[str, Any]
    ) -> CallOutcome:
        root = session.workspace_root
        if root is not None and not Path(root).is_dir():
            shell_id = session.shell_id or await self.host.default_shell_id()
            shell = shells.find(shell_id) if shell_id else None
            if shell is not None:
                host = self.host
                command_id = host.new_id("cmd")
                now = host.clock.now_ms()
                host.notify(
                    "command/started",
                    {
                        "sessionId": session.id,
                        "turnId": turn_id,
                        "commandId": command_id,
                        "shellId": shell.shell_id,
                        "command": args["command"],
                        "cwd": root,
                    },
                )
                host.notify(
                    "command/exited",
                    {
                        "sessionId": session.id,
                        "commandId": command_id,
                        "exitCode": 127,
                        "signal": None,
                        "timedOut": False,
                        "cancelled": False,
                        "truncated": False,
                        "durationMs": 0,
                    },
                )
                await host.storage.record_command(
                    {
                        "id": command_id,
                        "session_id": session.id,
                        "turn_id": turn_id,
                        "shell_id": shell.shell_id,
                        "shell_path": shell.path,
                        "command": args["command"],
                        "cwd": root,
                        "started_at": now,
                        "ended_at": now,
                        "exit_code": 127,
                        "signal": None,
                        "timed_out": 0,
                        "cancelled": 0,
                        "truncated": 0,
                        "duration_ms": 0,
                    }
                )
                raise HostError(
                    "WORKSPACE_INVALID", f"the project folder {root!r} is gone; nothing ran"
                )
        return await bash(self, session, turn_id, args)

    patch(TurnRunner, "_bash", bash_announcing, wraps=True)


CASES = [
    AllowedCase(
        "fe-ids-unusual-chars",
        "sessions,approval,execution,shell,scheduled_plan",
        why="ids are opaque strings of 1 to 200 characters chosen by the host, of no pattern",
    ),
    AllowedCase(
        "fe-listings-shuffled",
        "sessions,scheduled_plan,shell,approval",
        why="session/list, task/list, shell/list and same-instant approvals have no order",
    ),
    AllowedCase(
        "fe-run-finished-after-answer",
        "scheduled_plan",
        why="the order of task/runFinished and the task/run response is the host's",
    ),
    AllowedCase(
        "fe-turn-announced-after-answer",
        "sessions,turn_boundaries,execution,scheduled_plan",
        why="what a request only sets going may be announced before or after its answer",
    ),
    AllowedCase(
        "fe-no-queued-notice",
        "execution,approval",
        why="a queued execution/updated is optional",
    ),
    AllowedCase(
        "fe-reannounce-on-read",
        "sessions,approval,deadline",
        why="announcing a session or an approval again when nothing changed is the host's",
    ),
    AllowedCase(
        "fe-recovery-announced",
        "restart_interruption,scheduled_plan",
        why="whether the start-up recovery's changes are announced is the host's",
    ),
    AllowedCase(
        "fe-cancel-answers-early",
        "turn_boundaries,shell,execution",
        why="session/cancel may answer before the turn has ended",
    ),
    AllowedCase(
        "fe-tool-notices-reversed",
        "plan_tools,submit_plan,isolation",
        why="no order is stated among the toolCall and toolResult notices of one message",
    ),
    AllowedCase(
        "fe-calls-side-by-side",
        "plan_tools,shell,isolation",
        why="the calls of one message may run one after another or side by side",
    ),
    AllowedCase(
        "fe-text-per-character",
        "sessions,plan_tools",
        why="turn/text pieces need only join to the model's full answer",
    ),
    AllowedCase(
        "fe-output-pieces-split",
        "shell",
        why="where a command's output is cut into command/output pieces is the host's",
    ),
    AllowedCase(
        "fe-frame-limit-minimum",
        "protocol_errors,handshake",
        why="the frame limit is the host's, at least 65536 bytes",
    ),
    AllowedCase(
        "fe-output-cap-5000",
        "shell",
        why="the command output cap is the host's, as long as it is announced",
        alone="a scenario that prints more than the announced cap is unverified",
    ),
    AllowedCase(
        "fe-truncation-notice-1kib",
        "shell",
        why="the truncation notice is the host's, within 1 KiB",
    ),
    AllowedCase(
        "fe-default-timeout-10s",
        "shell",
        why="the default command timeout is the host's",
    ),
    AllowedCase(
        "fe-timers-record-due-time",
        "deadline,scheduled_plan",
        why="a timer a clock move jumped past may record its own time",
    ),
    AllowedCase(
        "fe-bookkeeping-on-system-clock",
        "sessions,shell,scheduled_plan",
        why="updated_at, command_audit times and turns.ended_at may follow the system clock",
    ),
    AllowedCase(
        "fe-timers-fire-latest-first",
        "deadline,scheduled_plan",
        why="timers one clock move makes due fire in an order of the host's choosing",
    ),
    AllowedCase(
        "fe-artifact-names-unusual",
        "submit_plan,artifact_integrity,execution",
        why="the artifact's file name is the host's",
    ),
    AllowedCase(
        "fe-artifact-names-hidden",
        "submit_plan,artifact_integrity,execution",
        why="the artifact's file name is the host's",
    ),
    AllowedCase(
        "fe-failure-notes-in-transcript",
        "sessions,turn_boundaries,execution",
        why="transcript rows the host writes itself, such as a note that a turn failed",
    ),
    AllowedCase(
        "fe-signal-exit-code-128",
        "shell",
        why="exitCode of a command a signal ended may be null or 128 plus the signal",
    ),
    AllowedCase(
        "fe-timeout-sigterm-first",
        "shell",
        why="a timed-out command may be ended with SIGTERM first",
    ),
    AllowedCase(
        "fe-cancel-drops-queued-execution",
        "execution,restart_interruption",
        why="whether a cancel also interrupts a queued execution is the host's",
    ),
    AllowedCase(
        "fe-stop-cleans-up",
        "shell,restart_interruption",
        why="audit rows of commands a clean stop ended, and turns.ended_at, are the host's",
    ),
    AllowedCase(
        "fe-slow-turn-edges",
        "sessions,turn_boundaries,execution,approval",
        why="a host may take its time within the stated timeouts",
        alone="it slows every turn by 0.2 s, and so every member of a composite",
    ),
    AllowedCase(
        "fe-ids-numeric",
        "sessions,approval,execution,shell,scheduled_plan",
        why="ids are opaque strings chosen by the host; numerals are strings too",
    ),
    AllowedCase(
        "fe-session-announced-at-submit",
        "submit_plan,approval,sessions",
        why="a change of the pending approval may be announced when it is made",
    ),
    AllowedCase(
        "fe-transcript-seq-sparse",
        "sessions,migration",
        why="session/transcript's seq is any whole number that grows from entry to entry",
    ),
    AllowedCase(
        "fe-partial-artifact-kept",
        "submit_plan,artifact_integrity",
        why="whether a partly written artifact remains after a failed write is the host's",
    ),
    AllowedCase(
        "fe-stderr-lags",
        "shell",
        why="the order of stdout pieces against stderr pieces is the host's",
    ),
    AllowedCase(
        "fe-approve-refused-while-execution-ends",
        "execution,approval",
        why="an approve while the earlier execution is ending may be refused (EXECUTION_ACTIVE)",
    ),
    AllowedCase(
        "fe-late-cancel-still-cancels",
        "turn_boundaries,execution,scheduled_plan",
        why="a cancel after the turn's work but before turn/ended may still cancel it",
    ),
    AllowedCase(
        "fe-unstartable-command-announced",
        "shell,plan_tools",
        why="whether a command that cannot start is announced and recorded is the host's",
    ),
]
