"""Broken hosts: a held-out set (asyncio pitfalls), written from the contract alone.

Each host is the reference host with one mistake of asyncio code that works in the demo:
a coroutine not awaited, a task not kept, a lock that guards nothing, a cancellation
swallowed, a closure over a loop variable, a shared mutable default, a timeout that
cancels work, a timer that outlives what it belongs to.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

from hosts.registry import BrokenCase, patch, variant


# Ordering / R5.3, R7.2: "`session/configure`'s `session/updated` comes before its answer,
# which reports the same session"; a change "is accepted while idle ... and announced with
# `session/updated` before its answer".
# Bug: session/configure hands the announcement to a background task
# (`asyncio.create_task(self.publish_session(...))`, "so the answer is not held up by a
# re-read"), so `session/updated` is written only after the answer has gone out.
# Observed: the configure response line comes before its `session/updated`.
# Recipe: session/create; session/configure {permissionMode: "auto"}; look at the order of
# the response and the `session/updated` on the wire.
@variant("async-configure-announce-after-answer")
def configure_announce_after_answer() -> None:
    from reference_host import host as host_module
    from reference_host.host import Host
    from reference_host.state import ensure_idle_for

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        ensure_idle_for(self.activity_of(row.id), "configuration change")
        changes: dict[str, Any] = {}
        if "mode" in params:
            changes["mode"] = params["mode"]
        if "permissionMode" in params:
            changes["permission_mode"] = params["permissionMode"]
        if "provider" in params:
            changes["provider_base_url"] = params["provider"]["baseUrl"]
            changes["model"] = params["provider"]["model"]
        if "shellId" in params:
            if params["shellId"] is not None:
                host_module._require_shell(params["shellId"])
            changes["shell_id"] = params["shellId"]
        updated = replace(row, **changes, updated_at=self.clock.now_ms())
        await self.storage.update_session(updated)
        asyncio.create_task(self.publish_session(row.id))  # noqa: RUF006 - the bug
        return {"session": self.session_wire(updated)}

    patch(Host, "session_configure", session_configure)


# R5.1 (implementing-a-host.md, Cancel): after `session/cancel` "the turn then ends with
# outcome `cancelled` (also in storage)".
# Bug: the provider call maps every exception of the HTTP exchange to PROVIDER_ERROR,
# `asyncio.CancelledError` included ("the stream broke"), so a cancel that arrives while
# the provider request is open turns into an ordinary failure.
# Observed: `turn/ended` says `outcome: "failed"` with `PROVIDER_ERROR` and `turns.state`
# reads `failed`, instead of `cancelled` / `TURN_CANCELLED`.
# Recipe: session/prompt with a provider that holds its answer; session/cancel while the
# provider request is open; read `turn/ended` and `turns.state`.
@variant("async-provider-cancel-as-error")
def provider_cancel_as_error() -> None:
    from reference_host import turns as turns_module
    from reference_host.errors import HostError
    from reference_host.provider_client import AssistantReply, ProviderConfig, ProviderError
    from reference_host.storage import SessionRow
    from reference_host.turns import TurnRunner

    async def _ask_model(
        self: TurnRunner, session: SessionRow, turn_id: str, messages: list[dict[str, Any]]
    ) -> AssistantReply:
        if session.provider_base_url is None or session.model is None:
            raise HostError("PROVIDER_NOT_CONFIGURED", "the session has no model provider")
        config = ProviderConfig(
            session.provider_base_url,
            session.model,
            os.environ.get(turns_module.API_KEY_ENV) or None,
        )

        async def on_text(text: str) -> None:
            self.host.notify(
                "turn/text", {"sessionId": session.id, "turnId": turn_id, "text": text}
            )

        try:
            complete = vars(turns_module)["complete"]  # as patched, if it is
            reply: AssistantReply = await complete(
                self.host.http,
                config,
                messages,
                turns_module.offered_tools(session.mode),
                on_text,
            )
            return reply
        except ProviderError as error:
            raise HostError(
                "PROVIDER_ERROR", str(error), {"kind": error.kind, "status": error.status}
            ) from error
        except asyncio.CancelledError as aborted:  # the bug: a cancel is not a broken stream
            raise HostError(
                "PROVIDER_ERROR",
                "provider stream broke: the request was aborted",
                {"kind": "stream", "status": None},
            ) from aborted

    patch(TurnRunner, "_ask_model", _ask_model)


# P7 (implementing-a-host.md, Permission modes): "an answer ... to the question of a turn
# that has ended (a cancelled one included) gets `PERMISSION_REQUEST_NOT_FOUND` and changes
# nothing".
# Bug: the broker waits for the answer through `asyncio.shield` (so that "a respond racing
# a cancel is not lost") and removes the open request only after the await returns, not in
# a `finally`. A cancel cancels the shield, not the answer future, and the request stays
# open for good.
# Observed: `permission/respond` to the cancelled turn's `requestId` answers `{}` (success).
# Recipe: session in `ask`; prompt; the model calls Bash -> `permission/requested`;
# session/cancel; wait for `turn/ended` (cancelled); permission/respond {requestId,
# decision: "allow"} -> expected PERMISSION_REQUEST_NOT_FOUND.
@variant("async-permission-open-after-cancel")
def permission_open_after_cancel() -> None:
    from reference_host import permissions as permissions_module
    from reference_host.ids import new_id
    from reference_host.permissions import PermissionBroker

    async def ask(
        self: PermissionBroker, session_id: str, turn_id: str, tool: str, tool_input: Any
    ) -> bool:
        request_id = new_id("perm")
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._open[request_id] = permissions_module._Request(session_id, answer)
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
        decision = await asyncio.shield(answer)
        self._open.pop(request_id, None)  # the bug: not reached when the wait is cancelled
        return decision

    patch(PermissionBroker, "ask", ask)


# P29: "A task keeps its time across a restart: an enabled task whose `runAt` is still
# ahead when your host starts runs when it comes due. Every enabled task whose `runAt`
# comes due runs".
# Bug: the start-up scheduling arms each task's timer with `lambda: self._fire(row["id"])`
# inside the loop over the stored tasks: the closure reads the loop variable when the timer
# fires, so every timer armed at start-up fires the task of the *last* row listed.
# (task/create and task/update still arm their timers correctly.)
# Observed: after a restart, of two tasks with `runAt` ahead, one never runs and the other
# runs twice (or, when the last listed task is disabled or has no `runAt`, none runs).
# Recipe: task/create A (runAt now+1 min), task/create B (runAt now+2 min); restart the
# host; conformance/clock/advance 3 min -> expected one `task/runFinished` for A and one
# for B.
@variant("async-startup-timers-late-binding")
def startup_timers_late_binding() -> None:
    from reference_host.tasks import Tasks

    async def schedule_all(self: Tasks) -> None:
        now = self.host.clock.now_ms()
        for row in await self.host.storage.list_tasks():
            if row["enabled"] and row["run_at"] is not None and row["run_at"] > now:
                self._timers[row["id"]] = self.host.clock.call_at(
                    row["run_at"],
                    lambda: self._fire(row["id"]),  # noqa: B023 - the bug: late binding
                )

    patch(Tasks, "schedule_all", schedule_all)


# P10: "When one message makes several calls, the tool message that answers a call (by its
# `tool_call_id`) carries that call's own result, never another call's, also for two calls
# of one tool".
# Bug: a batch made only of read-only calls (Read, Glob, Grep) runs side by side (allowed)
# as tasks named after their tool; `asyncio.wait` gives back an unordered set, and the
# results are matched to the calls again by task name, i.e. by tool name. Two calls of one
# tool both get the result of whichever task the set yields last.
# Observed: two Reads of different files in one message: both tool messages (and both
# `turn/toolResult`s) carry the same file's text.
# Recipe: workspace with a.txt ("alpha") and b.txt ("beta"); the model sends one message
# with Read a.txt and Read b.txt; the next provider request's tool message for the a.txt
# call must hold "alpha".
@variant("async-parallel-reads-keyed-by-tool")
def parallel_reads_keyed_by_tool() -> None:
    from reference_host.errors import HostError
    from reference_host.provider_client import ToolCall
    from reference_host.storage import SessionRow
    from reference_host.turns import CallOutcome, TurnRunner, _failure, _parse_arguments

    read_only = frozenset({"Read", "Glob", "Grep"})
    original = TurnRunner._run_batch

    async def _run_batch(
        self: TurnRunner,
        session: SessionRow,
        turn_id: str,
        calls: tuple[ToolCall, ...],
        unattended: bool,
    ) -> list[CallOutcome]:
        if len(calls) < 2 or not all(call.name in read_only for call in calls):
            return await original(self, session, turn_id, calls, unattended)
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
        running = [
            asyncio.create_task(self._run_call(session, turn_id, call, unattended), name=call.name)
            for call in calls
        ]
        try:
            done, _pending = await asyncio.wait(running)
        except asyncio.CancelledError:
            for task in running:
                task.cancel()
            cut = _failure(HostError("TURN_CANCELLED", "the turn was cancelled before it ran"))
            self._announce_results(session.id, turn_id, calls, [cut] * len(calls))
            raise
        by_tool = {task.get_name(): task.result() for task in done}  # the bug
        outcomes = [by_tool[call.name] for call in calls]
        self._announce_results(session.id, turn_id, calls, outcomes)
        return outcomes

    patch(TurnRunner, "_run_batch", _run_batch)


# C5 / R7.3 (Commands and shells): "The per-call timeout is the tool argument
# `timeout_ms` ... Both run on the host clock, so under `--conformance` they fire when the
# harness moves it"; "A timed-out command's `command/exited` says `timedOut: true` and its
# tool result is `error` with `COMMAND_TIMED_OUT`"; every command is recorded in
# `command_audit`.
# Bug: as a safety net the Bash tool also wraps the command in
# `asyncio.wait_for(..., timeout_ms / 1000)` on real time. When real time runs out before
# the host clock does, wait_for cancels the command: it is ended as *cancelled*, the
# TimeoutError that wait_for raises is not the cancellation the audit code expects, so the
# call fails with TOOL_FAILED and no `command_audit` row is written.
# The same wrapper also loses the audit of a command whose turn is cancelled: on an outer
# cancel, wait_for re-raises a plain `CancelledError`, not the command's own
# `CommandCancelledError` that carries how it ended, so no `command_audit` row is written.
# Observed: a command with `timeout_ms: 500` that waits on a gate for a second of real time
# (the harness never moves the clock) is ended: `command/exited` with `cancelled: true`,
# `timedOut: false`, result `TOOL_FAILED`, no audit row. A cancelled command has no audit
# row either.
# Recipe: Bash {command: "cat .gate-x; echo done", timeout_ms: 500}; wait 1 s of real time;
# open the gate -> expected the command to finish `ok` with exit code 0.
@variant("async-command-real-time-wait-for")
def command_real_time_wait_for() -> None:
    from reference_host import commands as commands_module
    from reference_host import turns as turns_module
    from reference_host.commands import CommandResult

    original = commands_module.run_command

    async def run_command(
        *, timeout_ms: int = commands_module.DEFAULT_TIMEOUT_MS, **kwargs: Any
    ) -> CommandResult:
        return await asyncio.wait_for(
            original(timeout_ms=timeout_ms, **kwargs), timeout=timeout_ms / 1000
        )

    patch(turns_module, "run_command", run_command)


# R3.11 / R4.4: "an earlier approval's deadline never expires a later one of the same
# session, nor takes it out of its session's `pendingApprovalId`"; a decided approval stays
# decided (C6).
# Bug: the expiry timer armed at submission is never cancelled when the approval is
# decided, and its callback checks "is the session still waiting for a plan?" (the
# in-memory `pendingApprovalId`) instead of the approval's own status. When the rejected
# plan's deadline comes while a revision is pending, the old timer rewrites the rejected
# approval as `expired` and clears the session's `pendingApprovalId`.
# Observed: approval 1 goes from `rejected` to `expired` (`approval/updated`), and the
# session reports `pendingApprovalId: null` while approval 2 is still pending.
# Recipe: plan 1 submitted at t; approval/reject; clock +10 min; a new prompt submits
# plan 2; clock to t+30 min -> expected approval 1 still `rejected`, session
# `pendingApprovalId` = approval 2.
@variant("async-expiry-timer-checks-session")
def expiry_timer_checks_session() -> None:
    from reference_host import approvals as approvals_module
    from reference_host.approvals import Approvals, approval_wire
    from reference_host.state import is_expired

    async def expire(self: Approvals, approval_id: str) -> None:
        host = self.host
        row = await host.storage.get_approval(approval_id)
        if row is None:
            return
        if host.activity_of(row.session_id).pending_approval_id is None:
            return  # the bug: the session's state, not this approval's
        if not is_expired(row.expires_at, host.clock.now_ms()):
            return
        expired = replace(
            row,
            status="expired",
            status_code=approvals_module.TIMEOUT_CODE,
            decided_at=host.clock.now_ms(),
        )
        await host.storage.update_approval(expired)
        host.set_activity(row.session_id, pending_approval_id=None)
        host.notify("approval/updated", {"approval": approval_wire(expired)})
        await host.publish_session(row.session_id)

    patch(Approvals, "expire", expire)


# Ordering / R6.1: "When `conformance/clock/set` or `advance` makes a timer due, its
# notifications come before the clock call's response"; a due Plan task's
# `task/runFinished` (refused) is one of them.
# Bug: the task timer starts the run with a fire-and-forget `asyncio.create_task(...)`
# ("don't hold the clock up while a run starts"); the task is not kept and its exception
# (the Plan refusal) is never retrieved. The clock call answers before the run has
# recorded or announced anything.
# Observed: the `conformance/clock/advance` response arrives before `task/runFinished`
# (Plan task) or before `turn/started` / `session/updated` of the run (Agent task).
# Recipe: task/create {mode: "plan", runAt: now+60000}; conformance/clock/advance 60000;
# expected `task/runFinished` (refused) before the advance's response.
@variant("async-task-timer-run-not-awaited")
def task_timer_run_not_awaited() -> None:
    from reference_host.tasks import Tasks

    async def _fire(self: Tasks, task_id: str) -> None:
        self._timers.pop(task_id, None)
        row = await self.host.storage.get_task(task_id)
        if row is None or not row["enabled"]:
            return
        await self.host.storage.update_task(task_id, {"run_at": None})
        asyncio.create_task(self.run(row))  # noqa: RUF006 - the bug

    patch(Tasks, "_fire", _fire)


# R5.1, R5.9, R7.2: one active turn per session, busy is each session's own ("no turn of
# another session ... keeps an idle session from taking a change"), and `session/list`
# lists every session exactly as `session/get` reports it.
# Bug: the session's activity became a mutable record updated in place, and
# `activity_of` falls back to one shared "idle" record (`self.activity.get(id, idle)`):
# the first `set_activity` of each session mutates that shared default and stores it, so
# every session that ever had activity shares one record.
# Observed: while session A runs a turn, session B (created before or after) reports A's
# `activeTurnId`, and a prompt or configure in B is refused with SESSION_BUSY.
# Recipe: create A and B; prompt A (provider holds the answer); session/get B -> expected
# `activeTurnId: null`; session/prompt B -> expected a turn, not SESSION_BUSY.
@variant("async-activity-shared-default")
def activity_shared_default() -> None:
    from reference_host.host import Host

    @dataclass
    class MutableActivity:
        active_turn_id: str | None = None
        pending_approval_id: str | None = None
        active_execution_id: str | None = None

        @property
        def idle(self) -> bool:
            return (
                self.active_turn_id is None
                and self.pending_approval_id is None
                and self.active_execution_id is None
            )

    # The shared default, one per host (as a default argument it would be one per process:
    # kept per Host here so a restarted in-process host starts afresh).
    idle_records: weakref.WeakKeyDictionary[Host, MutableActivity] = weakref.WeakKeyDictionary()

    def activity_of(self: Host, session_id: str) -> Any:
        idle = idle_records.setdefault(self, MutableActivity())
        return self.activity.get(session_id, idle)

    def set_activity(self: Host, session_id: str, **changes: str | None) -> None:
        record = activity_of(self, session_id)
        for name, value in changes.items():
            setattr(record, name, value)
        self.activity[session_id] = record

    patch(Host, "activity_of", activity_of)
    patch(Host, "set_activity", set_activity)


# R4.3 / R5.9 / errors: work of several sessions goes on side by side ("Work and events
# stay in their session (R5.8, R5.9), also while other sessions are busy"), a response or
# notification reports state already stored, and INTERNAL_ERROR is listed only where an
# armed fault can cause it.
# Bug: `Storage.transaction` serialises transactions with `async with asyncio.Lock():`, a
# new lock per call that guards nothing. Two coroutines that write at the same moment (two
# sessions' turns, a turn and a request) interleave their BEGIN/COMMIT on the one
# connection: "cannot start a transaction within a transaction", or one's statements
# committed or rolled back by the other.
# Observed: with two sessions working at once, a turn ends `failed` with INTERNAL_ERROR, a
# request answers INTERNAL_ERROR, or a transcript row is missing.
# Recipe: two sessions, each prompted; the provider answers both at once with tool calls
# (Read) so that both turns append transcript rows together; expected both turns
# `completed` with every row stored.
@variant("async-transaction-lock-per-call")
def transaction_lock_per_call() -> None:
    import sqlite3
    from contextlib import asynccontextmanager

    import aiosqlite

    from reference_host.storage import Storage

    @asynccontextmanager
    async def transaction(self: Storage) -> AsyncIterator[aiosqlite.Connection]:
        async with asyncio.Lock():  # the bug: a new lock for every transaction
            try:
                await self._conn.execute("BEGIN IMMEDIATE")
                # held 20 ms so that two writers of one moment surely meet (a bounded
                # wait that makes the race this host carries certain)
                await asyncio.sleep(0.02)
            except asyncio.CancelledError:
                with contextlib.suppress(sqlite3.OperationalError):
                    await self._conn.execute("ROLLBACK")
                raise
            try:
                yield self._conn
            except BaseException:
                await self._conn.execute("ROLLBACK")
                raise
            await self._conn.execute("COMMIT")

    patch(Storage, "transaction", transaction)


# R5.1 (Cancel): after `session/cancel` "the turn then ends with outcome `cancelled` (also
# in storage)"; a cancelled command says `cancelled: true` (Commands and shells); the
# harness's provider gets no request the scenario did not script.
# Bug: the Bash tool treats a cancelled command as an ordinary failed call: it catches the
# `CancelledError` that ended the command (records the audit, as it should) and returns an
# error result instead of re-raising. The cancellation is swallowed: the turn goes on, gives
# the model the "cancelled" result and asks it again, and `session/cancel` answers only once
# that turn has ended (completed, or failed when the provider refuses the extra request).
# Observed: cancel during a running command -> a further provider request after the cancel,
# and `turn/ended` with outcome `completed` or `failed`, not `cancelled`.
# Recipe: auto session; prompt; the model calls Bash {command: "cat .gate-x"}; after
# `command/started` send session/cancel -> expected `command/exited` (cancelled: true),
# `turn/ended` outcome `cancelled`, and no further provider request.
@variant("async-bash-cancel-swallowed")
def bash_cancel_swallowed() -> None:
    from reference_host import shells
    from reference_host import turns as turns_module
    from reference_host.commands import CommandCancelledError, CommandResult
    from reference_host.errors import HostError
    from reference_host.storage import SessionRow
    from reference_host.turns import CallOutcome, TurnRunner, _failure

    async def _bash(
        self: TurnRunner, session: SessionRow, turn_id: str, args: dict[str, Any]
    ) -> CallOutcome:
        host = self.host
        if session.workspace_root is None:
            raise HostError("WORKSPACE_REQUIRED", "Bash runs in the session's workspace")
        shell_id = session.shell_id or await host.default_shell_id()
        shell = shells.find(shell_id) if shell_id else None
        if shell is None:
            raise HostError("SHELL_NOT_FOUND", f"the shell {shell_id!r} is not on this machine")
        audit: dict[str, Any] = {
            "session_id": session.id,
            "turn_id": turn_id,
            "shell_id": shell.shell_id,
            "shell_path": shell.path,
            "command": args["command"],
            "cwd": session.workspace_root,
            "started_at": host.clock.now_ms(),
        }
        try:
            run_command = vars(turns_module)["run_command"]  # as patched, if it is
            result: CommandResult = await run_command(
                shell=shell,
                command=args["command"],
                cwd=session.workspace_root,
                session_id=session.id,
                turn_id=turn_id,
                clock=host.clock,
                notify=host.notify,
                timeout_ms=args.get("timeout_ms", host.options.command_timeout_ms),
            )
        except CommandCancelledError as cancelled:
            if not self.stopping:
                await self._audit(audit, cancelled.result)
            # the bug: the cancellation ends here, as a failed call
            failure = _failure(HostError("TURN_CANCELLED", "the command was cancelled"))
            return replace(failure, output=cancelled.result.summary())
        await self._audit(audit, result)
        if result.timed_out:
            error = HostError("COMMAND_TIMED_OUT", "the command exceeded its timeout")
            return replace(_failure(error), output=result.summary())
        return CallOutcome("ok", result.summary())

    patch(TurnRunner, "_bash", _bash)


# Ordering / R7.2: "A change made during a turn (`EnterPlanMode` switching the session to
# Plan) is announced when it is made, while the turn still runs, not only once the turn
# has ended"; every change of mode is announced by `session/updated`.
# Bug: the EnterPlanMode handler calls `self.publish_session(session.id)` without `await`:
# the coroutine is created and dropped ("coroutine was never awaited"), so no
# `session/updated` is sent when the mode changes; the session is announced in Plan only
# by the `session/updated` that follows `turn/ended`.
# Observed: between the EnterPlanMode `turn/toolCall` and `turn/ended`, no
# `session/updated` with `mode: "plan"`.
# Recipe: Agent session; prompt; the model calls EnterPlanMode, then (next request) ends
# with text; expected a `session/updated` with mode `plan` before `turn/ended`.
@variant("async-enter-plan-announce-not-awaited")
def enter_plan_announce_not_awaited() -> None:
    from reference_host.host import Host
    from reference_host.storage import SessionRow

    async def enter_plan_mode(self: Host, session: SessionRow) -> None:
        await self.storage.update_session(
            replace(session, mode="plan", updated_at=self.clock.now_ms())
        )
        self.publish_session(session.id)  # type: ignore[unused-coroutine]  # the bug

    patch(Host, "enter_plan_mode", enter_plan_mode)


CASES = [
    BrokenCase(
        "async-configure-announce-after-answer",
        "sessions",
        "an_idle_session_takes_a_new_shell",
        "R7.2",
        "was answered before the session/updated that announces the change",
    ),
    BrokenCase(
        "async-provider-cancel-as-error",
        "turn_boundaries",
        "second_cancelled_turn_is_the_one_its_cancel_names",
        "R5.1",
        "the turn ended failed, not cancelled",
    ),
    BrokenCase(
        "async-permission-open-after-cancel",
        "turn_boundaries",
        "question_of_a_cancelled_turn_can_no_longer_be_answered",
        "P7",
        "expected the host to refuse",
    ),
    BrokenCase(
        "async-startup-timers-late-binding",
        "migration",
        "migrated_scheduled_task_runs_when_its_time_comes",
        "P29",
        "had not run when the host clock passed its time",
    ),
    BrokenCase(
        "async-parallel-reads-keyed-by-tool",
        "plan_tools",
        "two_files_read_in_one_message",
        "P10",
        "it should carry that call's file",
    ),
    BrokenCase(
        "async-command-real-time-wait-for",
        "shell",
        "outlasting_its_timeout_in_real_time",
        "C5",
        "command timeouts are measured on the host clock",
    ),
    BrokenCase(
        "async-expiry-timer-checks-session",
        "deadline",
        "still_waits_at_the_rejected_plans_deadline",
        "R3.8",
        "the session names the pending approval None",
    ),
    BrokenCase(
        "async-task-timer-run-not-awaited",
        "scheduled_plan",
        "an_agent_task_runs_when_its_time_comes",
        "P32",
        "its run was announced only after that move was answered",
    ),
    BrokenCase(
        "async-activity-shared-default",
        "isolation",
        "does_not_read_through_a_file_linked_into_another_project",
        "R5.8",
        "SESSION_BUSY",
    ),
    BrokenCase(
        "async-transaction-lock-per-call",
        "isolation",
        "running_commands_at_once_each_run_them_in_their_own_project",
        "R5.8",
        "INTERNAL_ERROR",
        # where the two writers meet decides how the failure shows: a refused prompt, or a
        # turn that died before its command
        or_reason="no command/started notification matched",
        slow=True,
    ),
    BrokenCase(
        "async-bash-cancel-swallowed",
        "restart_interruption",
        "command_that_was_running_is_not_run_again",
        "R4.12",
        "requests for one new prompt",
    ),
    BrokenCase(
        "async-enter-plan-announce-not-awaited",
        "plan_tools",
        "entering_plan_mode_during_a_turn_is_announced",
        "R7.2",
        "no session/updated showed the session in Plan",
    ),
]
