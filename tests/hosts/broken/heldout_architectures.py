"""Broken hosts: a held-out set (bugs of another architecture: mirrors, write-behind,
mailboxes, global locks, event logs, timer wheels, derived values), written from the
contract alone.

Every variant keeps the state its bug needs on the host's own objects (the Host, its
Storage, its TurnRunner or Tasks), or in a WeakKeyDictionary keyed by one of them, so a
restarted host starts with nothing of it.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import aiosqlite

from hosts.registry import BrokenCase, patch, relay_notifications, variant


# R7.2: "session/list lists every session exactly as session/get reports it" and "the
# sessions row holds what session/get reports"; C4 / R4.6: the approve commits the session
# to Agent with the chosen permission mode.
# Architecture: a read model (CQRS). session/get and session/list answer from an in-memory
# mirror of the sessions table, kept current by Storage.insert_session and
# Storage.update_session (configure, EnterPlanMode, task runs).
# Bug: the approve writes the session inside its own transaction (Storage.write_session),
# which bypasses the mirror, so the mirror keeps the session as it was before the approve.
# Observed: the approve result and its session/updated say mode "agent" with the chosen
# permission mode, the sessions row too, but session/get and session/list keep saying
# "plan" with the old permission mode (until the next session/configure).
# Recipe: session/create (plan, permissionMode ask); prompt -> SubmitPlan; approval/approve
# with "auto"; session/get -> mode "plan", permissionMode "ask".
@variant("arch-session-mirror-misses-approve")
def session_mirror_misses_approve() -> None:
    from reference_host.host import Host
    from reference_host.storage import SessionRow, Storage

    mirrors: weakref.WeakKeyDictionary[Storage, dict[str, SessionRow]] = weakref.WeakKeyDictionary()
    insert_session = Storage.insert_session
    update_session = Storage.update_session

    def mirror(storage: Storage) -> dict[str, SessionRow]:
        return mirrors.setdefault(storage, {})

    async def inserted(self: Storage, session: SessionRow) -> None:
        await insert_session(self, session)
        mirror(self)[session.id] = session

    async def updated(self: Storage, session: SessionRow) -> None:
        await update_session(self, session)
        mirror(self)[session.id] = session

    async def session_get(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = mirror(self.storage).get(params["sessionId"])
        if row is None:  # not mirrored yet (a session from before this start): load it
            row = await self.require_session(params["sessionId"])
            mirror(self.storage)[row.id] = row
        return {"session": self.session_wire(row)}

    async def session_list(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        known = mirror(self.storage)
        rows = [known.setdefault(row.id, row) for row in await self.storage.list_sessions()]
        return {"sessions": [self.session_wire(row) for row in rows]}

    patch(Storage, "insert_session", inserted, wraps=True)
    patch(Storage, "update_session", updated, wraps=True)
    patch(Host, "session_get", session_get)
    patch(Host, "session_list", session_list)


# R4.3: "A response or notification reports state you have already stored", and "every
# field of an approval ... always equals its plan_approvals row"; R4.4: decisions are
# recorded; "after a SIGKILL at any moment the restarted host shows every ... approval ...
# as last reported".
# Architecture: write-behind. A reject is answered from memory; the changed row waits in a
# per-Storage buffer and is written by the next transaction the host opens (a new turn, a
# transcript row, a configure ...), and approval/get and approval/list read through it.
# Bug: nothing forces the buffer out before the answer, nor on shutdown: until the session
# does something else the row still reads `pending`, and a restart before that loses the
# reject, so the recovery turns the approval into `interrupted` / TURN_INTERRUPTED.
# Recipe: prompt -> SubmitPlan; approval/reject; read plan_approvals -> status pending,
# decided_at NULL (approval/get says rejected); or restart the host -> approval/get says
# status interrupted, statusCode TURN_INTERRUPTED.
@variant("arch-reject-write-behind")
def reject_write_behind() -> None:
    from reference_host import state
    from reference_host.approvals import Approvals, _facts, _with, approval_wire
    from reference_host.storage import ApprovalRow, Storage

    buffers: weakref.WeakKeyDictionary[Storage, dict[str, ApprovalRow]] = (
        weakref.WeakKeyDictionary()
    )
    get_approval = Storage.get_approval
    list_approvals = Storage.list_approvals
    transaction = Storage.transaction

    def unwritten(storage: Storage) -> dict[str, ApprovalRow]:
        return buffers.setdefault(storage, {})

    async def reject(self: Approvals, session_id: str, approval_id: str) -> dict[str, Any]:
        host = self.host
        row = await self.require(session_id, approval_id)
        await host.turns.settle(session_id, row.turn_id)
        await self._ensure_decidable(row)
        rejected = _with(row, state.reject(_facts(row)), decided_at=host.clock.now_ms())
        unwritten(host.storage)[rejected.id] = rejected  # written by the next transaction
        host.set_activity(session_id, pending_approval_id=None)
        host.notify("approval/updated", {"approval": approval_wire(rejected)})
        await host.publish_session(session_id)
        return {"approval": approval_wire(rejected)}

    async def get(self: Storage, approval_id: str) -> ApprovalRow | None:
        row = unwritten(self).get(approval_id)
        return row if row is not None else await get_approval(self, approval_id)

    async def listed(self: Storage, session_id: str) -> list[ApprovalRow]:
        waiting = unwritten(self)
        return [waiting.get(row.id, row) for row in await list_approvals(self, session_id)]

    @asynccontextmanager
    async def flushing(self: Storage) -> AsyncIterator[aiosqlite.Connection]:
        waiting = unwritten(self)
        rows = list(waiting.values())
        async with transaction(self) as conn:
            for row in rows:
                await Storage.write_approval(conn, row)
            yield conn
        for row in rows:
            if waiting.get(row.id) is row:
                del waiting[row.id]

    patch(Approvals, "reject", reject)
    patch(Storage, "get_approval", get, wraps=True)
    patch(Storage, "list_approvals", listed, wraps=True)
    patch(Storage, "transaction", flushing, wraps=True)


# Ordering: "A response comes after the notifications of every change it already reports:
# session/configure's session/updated comes before its answer, which reports the same
# session" (R7.2).
# Architecture: one actor per session. Session events are posted to the session's mailbox,
# which the event loop drains on its next turn; responses are written by the dispatcher
# directly.
# Bug: a handler that returns without awaiting anything after posting its session/updated
# has its answer written first, so the answer overtakes the notification it reports.
# Observed: session/configure's answer arrives before its session/updated (also a reject's,
# and an approve's when the holdExecution fault keeps the execution from starting).
# Recipe: session/create; session/configure {permissionMode: "auto"}; the response line
# precedes the session/updated line.
@variant("arch-session-updated-via-mailbox")
def session_updated_via_mailbox() -> None:
    from hosts.registry import Send

    def relay(send: Send, method: str, params: dict[str, Any]) -> None:
        if method != "session/updated":
            send(method, params)
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            send(method, params)
            return
        loop.call_soon(send, method, params)  # the session's mailbox, drained next loop turn

    relay_notifications(relay)


# R5.6 / §5: "Busy is each session's own: ... no turn of another session (of the same
# workspace root or a scheduled run's) keeps an idle session from taking a change."
# Architecture: one host-wide turn lock. Shells and providers are host resources, so a
# configuration change is refused while any turn holds the lock.
# Bug: the lock is global, not per session: an idle session's session/configure gets
# SESSION_BUSY while another session's turn runs.
# Recipe: sessions A and B; prompt A with a provider answer held open (or a Bash that waits
# on a gate, or a permission question); session/configure B {mode: "plan"} -> SESSION_BUSY
# (should be accepted).
@variant("arch-config-global-busy")
def config_global_busy() -> None:
    from reference_host.errors import HostError
    from reference_host.host import Host, _require_shell
    from reference_host.state import ensure_idle_for

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        ensure_idle_for(self.activity_of(row.id), "configuration change")
        holders = [a.active_turn_id for a in self.activity.values() if a.active_turn_id]
        if holders:  # the host-wide turn lock is held
            raise HostError(
                "SESSION_BUSY",
                "configuration change refused: a turn is running",
                {"turnId": holders[0], "executionId": None},
            )
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
                _require_shell(params["shellId"])
            changes["shell_id"] = params["shellId"]
        updated = replace(row, **changes, updated_at=self.clock.now_ms())
        await self.storage.update_session(updated)
        wire = self.session_wire(updated)
        self.notify("session/updated", {"session": wire})
        return {"session": wire}

    patch(Host, "session_configure", session_configure)


# R1.3: "session/transcript reports each row, in id order"; "the transcript table and
# session/transcript still hold the whole conversation, every row in id order"; P31: the
# prompt is "the last user message of the turn's first request ... no user message after
# it".
# Architecture: an event log replayed by timestamp. The transcript is read back ordered by
# the host-clock time each entry was recorded at (ties by id).
# Bug: the host clock can be set back; entries recorded after such a move sort before
# older ones, so session/transcript and the conversation sent to the model come out of
# order.
# Recipe: prompt "one" (model answers); conformance/clock/set to an hour earlier; prompt
# "two" -> the request's messages are [user "two", user "one", assistant ...] (the prompt
# is not the last user message), and session/transcript lists "two" first.
@variant("arch-transcript-by-timestamp")
def transcript_by_timestamp() -> None:
    import json

    from reference_host.storage import Storage

    async def transcript(
        self: Storage, session_id: str
    ) -> list[tuple[int, str | None, str, Any, int]]:
        async with self._conn.execute(
            "SELECT id, turn_id, role, content, created_at FROM transcript "
            "WHERE session_id = ? ORDER BY created_at, id",
            (session_id,),
        ) as cursor:
            rows = await cursor.fetchall()
        return [(r[0], r[1], r[2], json.loads(r[3]), r[4]) for r in rows]

    patch(Storage, "transcript", transcript)


# R4.10: the recovery changes nothing else: "finished work (a completed execution, a
# rejected, expired or earlier interrupted approval) stays exactly as it was"; R4.1: "a
# restart that finds nothing to recover changes no stored value and no answer".
# Architecture: event-sourced recovery. Each start applies the Interrupted event to every
# approval whose last event is an interruption by a start, not only to pending ones.
# Bug: an approval interrupted by an earlier start is interrupted again by every later
# start: its decided_at moves to the new start's clock.
# Recipe: prompt -> SubmitPlan; restart (approval interrupted, note decidedAt); restart
# again -> approval/get and the plan_approvals row show a later decidedAt.
@variant("arch-recovery-reapplies")
def recovery_reapplies() -> None:
    from reference_host.storage import Storage

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self.transaction() as conn:
            approvals = await conn.execute(
                "UPDATE plan_approvals SET status = 'interrupted', "
                "status_code = 'TURN_INTERRUPTED', decided_at = ? "
                "WHERE status = 'pending' OR status_code = 'TURN_INTERRUPTED'",
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
                "UPDATE scheduled_task_runs SET outcome = 'failed', "
                "error_code = 'TURN_INTERRUPTED', "
                "error_message = 'the host stopped before the run finished' "
                "WHERE outcome = 'running'"
            )
        return approvals.rowcount, executions.rowcount, turns.rowcount

    patch(Storage, "recover", recover)


# R3.11: "Each approval expires at its own deadline ... and an earlier approval's deadline
# never expires a later one of the same session, nor takes it out of its session's
# pendingApprovalId."
# Architecture: a timer wheel whose entries name the session (a session has at most one
# pending approval); when an entry comes due, the session's pending approval is expired.
# Bug: the entry of an approval that was decided early is still in the wheel; at its time
# it expires the session's newer pending approval, before that one's own deadline.
# Recipe: prompt -> SubmitPlan (A, at T); approval/reject A; prompt -> SubmitPlan (B, at
# T + 10 min); clock to T + 30 min -> B expired (PLAN_APPROVAL_TIMEOUT, approval/updated)
# although its expiresAt is T + 40 min.
@variant("arch-expiry-timer-keyed-by-session")
def expiry_timer_keyed_by_session() -> None:
    from reference_host.approvals import TIMEOUT_CODE, Approvals, approval_wire
    from reference_host.state import is_expired

    async def expire(self: Approvals, approval_id: str) -> None:
        host = self.host
        due = await host.storage.get_approval(approval_id)
        if due is None or not is_expired(due.expires_at, host.clock.now_ms()):
            return
        # the wheel's entry is the session's: expire whatever approval it has pending
        target = host.activity_of(due.session_id).pending_approval_id or approval_id
        row = await host.storage.get_approval(target)
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


# R3.9: "The deadline is createdAt + 30 minutes on the host clock, where createdAt is the
# clock when the approval is created, at the SubmitPlan, however long the Plan turn ran
# before."
# Architecture: the approval is derived from the Plan turn's record: it takes its
# timestamp from the turns row (the plan request) rather than from the clock at SubmitPlan.
# Bug: when the clock moved while the Plan turn ran (a model that takes its time to plan),
# createdAt is the turn's start and the deadline comes that much early.
# Recipe: prompt in Plan; while the provider request is open, clock/advance 10 min; the
# model calls SubmitPlan -> approval createdAt = prompt time, expiresAt = prompt time + 30
# min (should be 10 min later); clock/advance 20 min -> the approval expires.
@variant("arch-approval-stamped-turn-start")
def approval_stamped_turn_start() -> None:
    import sqlite3

    from reference_host.approvals import Approvals, _require_text, approval_wire
    from reference_host.artifacts import discard_artifact, encode_markdown, write_artifact
    from reference_host.errors import HostError
    from reference_host.state import deadline_for
    from reference_host.storage import ApprovalRow, SessionRow

    async def submit(
        self: Approvals, session: SessionRow, turn_id: str, args: dict[str, Any]
    ) -> ApprovalRow:
        host = self.host
        pending = host.activity_of(session.id).pending_approval_id
        if pending is not None:
            raise HostError(
                "APPROVAL_PENDING", "an earlier plan is still pending", {"approvalId": pending}
            )
        if session.workspace_root is None:
            raise HostError(
                "WORKSPACE_REQUIRED", "a plan artifact needs a session bound to a project"
            )
        title = _require_text(args, "title")
        question = _require_text(args, "question")
        content = encode_markdown(args["markdown"])
        artifact = await asyncio.to_thread(
            write_artifact, session.workspace_root, content, host.faults.take
        )
        async with host.storage._conn.execute(
            "SELECT started_at FROM turns WHERE id = ?", (turn_id,)
        ) as cursor:
            turn = await cursor.fetchone()
        created = int(turn[0]) if turn is not None else host.clock.now_ms()
        row = ApprovalRow(
            id=host.new_id("apr"),
            session_id=session.id,
            turn_id=turn_id,
            title=title,
            question=question,
            artifact_path=artifact.relative_path,
            artifact_sha256=artifact.sha256,
            artifact_bytes=artifact.byte_size,
            created_at=created,
            expires_at=deadline_for(created),
            status="pending",
            status_code=None,
            decided_at=None,
            permission_mode=None,
            execution_id=None,
            execution_state=None,
            execution_turn_id=None,
        )
        try:
            await host.storage.insert_approval(row)
        except sqlite3.Error as exc:
            await asyncio.to_thread(
                discard_artifact, session.workspace_root, artifact.relative_path
            )
            raise HostError("TOOL_FAILED", f"the approval could not be recorded: {exc}") from exc
        host.set_activity(session.id, pending_approval_id=row.id)
        host.clock.call_at(row.expires_at, lambda: self.expire(row.id))
        host.notify("approval/updated", {"approval": approval_wire(row)})
        return row

    patch(Approvals, "submit", submit)


# R4.14: "one whose execution was interrupted stays in Agent with its permission mode and
# accepts a new prompt"; R4.1: a restart that finds nothing to recover changes no answer.
# Architecture: the in-memory activity mirror (active turn, pending approval, active
# execution per session) is rebuilt from storage at start, from the approval rows whose
# execution is not finished.
# Bug: "not finished" is written as `execution_state <> 'completed'`, which also takes the
# executions the recovery has just marked `interrupted` (and those interrupted by any
# earlier start): after a restart such a session reports activeExecutionId and refuses
# prompts and configuration with SESSION_BUSY.
# Recipe: arm holdExecution; prompt -> SubmitPlan; approve (queued); restart;
# session/get -> activeExecutionId set (should be null); session/prompt -> SESSION_BUSY.
@variant("arch-activity-rebuilt-from-unfinished")
def activity_rebuilt_from_unfinished() -> None:
    from reference_host.tasks import Tasks

    schedule_all = Tasks.schedule_all

    async def starting(self: Tasks) -> None:  # the host's start-up hook, after recovery
        await schedule_all(self)
        async with self.host.storage._conn.execute(
            "SELECT session_id, execution_id FROM plan_approvals "
            "WHERE execution_id IS NOT NULL AND execution_state <> 'completed' "
            "ORDER BY created_at, rowid"
        ) as cursor:
            rows = await cursor.fetchall()
        for session_id, execution_id in rows:
            self.host.set_activity(session_id, active_execution_id=execution_id)

    patch(Tasks, "schedule_all", starting, wraps=True)


# "Each session's requests carry its own provider as it now stands: a model changed by
# session/configure counts from the next request on, also when the base URL stays."
# Architecture: provider clients are pooled per session and base URL; a pooled entry keeps
# the configuration it was created with.
# Bug: the pool's key leaves out the model, so after session/configure changes only the
# model, the session's requests still name the old model.
# Recipe: session with provider {baseUrl U, model "m1"}; prompt (request model m1);
# session/configure provider {baseUrl U, model "m2"}; prompt -> the request says "m1".
@variant("arch-provider-config-cache")
def provider_config_cache() -> None:
    import os

    from reference_host import turns as turns_module
    from reference_host.errors import HostError
    from reference_host.provider_client import AssistantReply, ProviderConfig, ProviderError
    from reference_host.storage import SessionRow
    from reference_host.turns import API_KEY_ENV, TurnRunner, offered_tools

    pools: weakref.WeakKeyDictionary[TurnRunner, dict[tuple[str, str], ProviderConfig]] = (
        weakref.WeakKeyDictionary()
    )

    async def ask_model(
        self: TurnRunner, session: SessionRow, turn_id: str, messages: list[dict[str, Any]]
    ) -> AssistantReply:
        if session.provider_base_url is None or session.model is None:
            raise HostError("PROVIDER_NOT_CONFIGURED", "the session has no model provider")
        pool = pools.setdefault(self, {})
        key = (session.id, session.provider_base_url)
        config = pool.get(key)
        if config is None:
            config = ProviderConfig(
                session.provider_base_url, session.model, os.environ.get(API_KEY_ENV) or None
            )
            pool[key] = config

        async def on_text(text: str) -> None:
            self.host.notify(
                "turn/text", {"sessionId": session.id, "turnId": turn_id, "text": text}
            )

        try:
            # looked up on the module, as the reference does, so a wrapper of it stays live
            # looked up on each call, through the module the host calls it from
            return await vars(turns_module)["complete"](
                self.host.http, config, messages, offered_tools(session.mode), on_text
            )
        except ProviderError as error:
            raise HostError(
                "PROVIDER_ERROR", str(error), {"kind": error.kind, "status": error.status}
            ) from error

    patch(TurnRunner, "_ask_model", ask_model)


# Conformance mode: "A timer is due once the clock is at or past its time: an approval
# expires when the clock reaches expiresAt, a command times out when it reaches the
# command's start plus timeout_ms, a task runs when it reaches runAt"; R3.11 (expiry is
# eager); P14: "One millisecond before expiresAt the plan can still be approved"; a timer
# fired late or early never records "a time before it was due".
# Architecture: a hashed timer wheel with one-second slots: when the clock enters a slot,
# every timer of that slot fires.
# Bug: a timer fires as soon as the clock is in the same second as its due time, up to 999
# ms early. A task then runs before its runAt; a command times out early; an approval's
# expiry callback finds the deadline not reached and does nothing, and its timer is gone,
# so when the clock then reaches expiresAt nothing expires the approval.
# Recipe: prompt -> SubmitPlan; clock/set expiresAt - 1 (approval still pending, as it
# should be); clock/set expiresAt -> no approval/updated, approval/get still pending
# (should be expired with PLAN_APPROVAL_TIMEOUT). Or task/create with runAt = now + 1500
# (not on a second boundary); clock/set runAt - 1 -> the task runs.
@variant("arch-timer-wheel-second-ticks")
def timer_wheel_second_ticks() -> None:
    import heapq

    from reference_host.clock import Clock

    tick_ms = 1000

    async def fire_due(self: Clock) -> None:
        while self._timers and self._timers[0].due_ms // tick_ms <= self.now_ms() // tick_ms:
            timer = heapq.heappop(self._timers)
            if not timer.cancelled:
                await timer.callback()
        self._schedule_wakeup()

    patch(Clock, "fire_due", fire_due)


# P10: "When one message makes several calls, the tool message that answers a call (by its
# tool_call_id) carries that call's own result, never another call's, also for two calls
# of one tool"; P9: each call gets exactly one turn/toolResult (its own).
# Architecture: a batch's calls post their results to a mailbox, and each call's result
# is taken from it by the tool's name.
# Bug: two calls of one tool in one message share one mailbox slot: both are answered
# with the last one's result (in turn/toolResult and in the tool messages to the model).
# Recipe: Agent session with files a.txt ("alpha") and b.txt ("beta"); the model calls
# Read a.txt and Read b.txt in one message -> both results, and both tool messages of the
# next request, hold "beta".
@variant("arch-tool-results-by-name")
def tool_results_by_name() -> None:
    from reference_host.errors import HostError
    from reference_host.provider_client import ToolCall
    from reference_host.storage import SessionRow
    from reference_host.turns import CallOutcome, TurnRunner, _failure, _parse_arguments

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
                mailbox: dict[str, CallOutcome] = {}
                for call in calls:
                    mailbox[call.name] = await self._run_call(session, turn_id, call, unattended)
                    session = await self.host.require_session(session.id)
                outcomes = [mailbox[call.name] for call in calls]
        except asyncio.CancelledError:
            cut = _failure(HostError("TURN_CANCELLED", "the turn was cancelled before it ran"))
            outcomes += [cut] * (len(calls) - len(outcomes))
            self._announce_results(session.id, turn_id, calls, outcomes)
            raise
        self._announce_results(session.id, turn_id, calls, outcomes)
        return outcomes

    patch(TurnRunner, "_run_batch", run_batch)


# R1.3 / "What you reported survives a crash ... the restarted host shows ... each prompt
# you accepted in its session's transcript (R1.3)"; "The conversation outlives a
# restart"; R4.3: a notification reports state already stored.
# Architecture: a turn is one unit of work. The rows a turn adds to the transcript (its
# prompt, the model's messages, the tool results) are kept in memory while it runs and
# written in one go with the turn's end; session/transcript and the next provider request
# read through the buffer, so everything looks right while the host runs.
# Bug: a turn that never ends in this process (the host stops or crashes meanwhile) never
# writes its rows: after the restart the accepted prompt and what the model said are gone
# from session/transcript, the transcript table and the next turn's request. While the
# turn runs, the transcript table lacks rows that session/transcript shows.
# Recipe: prompt "keep me" with the provider answer held open (or a Bash gate / a
# permission question pending); restart the host; session/transcript -> no "keep me" row;
# the next prompt's request carries no "keep me".
@variant("arch-transcript-write-behind")
def transcript_write_behind() -> None:
    from reference_host.storage import Storage, _insert_transcript

    Row = tuple[str, str, dict[str, Any], int]  # session, role, content, created_at
    buffers: weakref.WeakKeyDictionary[Storage, dict[str, list[Row]]] = weakref.WeakKeyDictionary()
    append_transcript = Storage.append_transcript
    transcript = Storage.transcript

    def turns_of(storage: Storage) -> dict[str, list[Row]]:
        return buffers.setdefault(storage, {})

    async def start_turn(
        self: Storage,
        turn_id: str,
        session_id: str,
        kind: str,
        at: int,
        user_message: dict[str, Any] | None = None,
    ) -> None:
        async with self.transaction() as conn:
            await conn.execute(
                "INSERT INTO turns (id, session_id, kind, state, started_at) "
                "VALUES (?, ?, ?, 'active', ?)",
                (turn_id, session_id, kind, at),
            )
        rows = turns_of(self).setdefault(turn_id, [])
        if user_message is not None:
            rows.append((session_id, "user", user_message, at))

    async def append(
        self: Storage,
        session_id: str,
        turn_id: str | None,
        role: str,
        content: dict[str, Any],
        at: int,
    ) -> None:
        rows = turns_of(self).get(turn_id) if turn_id is not None else None
        if rows is None:
            await append_transcript(self, session_id, turn_id, role, content, at)
            return
        rows.append((session_id, role, content, at))

    async def end_turn(self: Storage, turn_id: str, state: str, at: int) -> None:
        rows = turns_of(self).get(turn_id, [])
        async with self.transaction() as conn:
            await conn.execute(
                "UPDATE turns SET state = ?, ended_at = ? WHERE id = ? AND state = 'active'",
                (state, at, turn_id),
            )
            for session_id, role, content, created in rows:
                await _insert_transcript(conn, session_id, turn_id, role, content, created)
        turns_of(self).pop(turn_id, None)

    async def read(self: Storage, session_id: str) -> list[tuple[int, str | None, str, Any, int]]:
        stored = await transcript(self, session_id)
        seq = stored[-1][0] if stored else 0
        for turn_id, rows in turns_of(self).items():
            for row_session, role, content, created in rows:
                if row_session == session_id:
                    seq += 1
                    stored.append((seq, turn_id, role, content, created))
        return stored

    patch(Storage, "start_turn", start_turn)
    patch(Storage, "append_transcript", append, wraps=True)
    patch(Storage, "end_turn", end_turn)
    patch(Storage, "transcript", read, wraps=True)


# P29: "A task/update that changes runAt replaces the earlier time: the task runs at the
# new time only, not also at the old one. Whatever updates a task had, it runs once when
# its runAt comes due."
# Architecture: the scheduler's entries are keyed by task and due time, so re-arming a task
# at the time it already has is a no-op.
# Bug: re-arming a task at another time cancels only an entry of that new key; the entry
# at the old time stays armed. The task fires at its old time (the row is enabled, so it
# runs) and again at its new time.
# Recipe: task/create (agent) with runAt T1; task/update runAt T2 > T1; clock to T1 -> a
# run starts (should not); clock to T2 -> a second run starts.
@variant("arch-task-timer-per-runat")
def task_timer_per_runat() -> None:
    from reference_host.tasks import Tasks

    def arm(self: Tasks, task_id: str, run_at: int | None) -> None:
        key = f"{task_id}@{run_at}"
        previous = self._timers.pop(key, None)
        if previous is not None:
            previous.cancel()
        if run_at is not None:
            self._timers[key] = self.host.clock.call_at(run_at, lambda: self._fire(task_id))

    patch(Tasks, "_arm", arm)


CASES = [
    BrokenCase(
        "arch-session-mirror-misses-approve",
        "restart_interruption",
        "restart_with_nothing_to_recover_changes_no_answer",
        "R4.2",
        "the host answers differently",
    ),
    BrokenCase(
        "arch-reject-write-behind",
        "approval",
        "rejected_plan_cannot_be_rejected_again_afterwards",
        "R4.3",
        "storage status 'pending'",
    ),
    BrokenCase(
        "arch-session-updated-via-mailbox",
        "sessions",
        "idle_session_switches_to_plan_mode",
        "R7.2",
        "was answered before the session/updated",
    ),
    BrokenCase(
        "arch-config-global-busy",
        "turn_boundaries",
        "idle_session_takes_a_change_while_a_turn_of_another",
        "R5.6",
        "session/configure failed with SESSION_BUSY",
    ),
    BrokenCase(
        "arch-transcript-by-timestamp",
        "sessions",
        "keeps_its_order_when_the_clock_was_set_back",
        "R1.3",
        "does not increase from entry to entry",
    ),
    BrokenCase(
        "arch-recovery-reapplies",
        "restart_interruption",
        "interrupted_by_an_earlier_restart_is_left_as_it_was",
        "R4.10",
        "recovery changed a finished plan",
    ),
    BrokenCase(
        "arch-expiry-timer-keyed-by-session",
        "deadline",
        "submitted_after_a_rejected_one_still_waits",
        "R3.9",
        "each plan expires at its own deadline",
    ),
    BrokenCase(
        "arch-approval-stamped-turn-start",
        "deadline",
        "deadline_is_30_minutes_after_the_host_created",
        "R3.9",
        "when the model submitted the plan",
    ),
    BrokenCase(
        "arch-activity-rebuilt-from-unfinished",
        "restart_interruption",
        "running_execution_is_interrupted_when_the_host_restarts",
        "R4.14",
        "the restarted host shows the session busy",
    ),
    BrokenCase(
        "arch-provider-config-cache",
        "sessions",
        "next_turn_asks_for_the_model_the_session_was_changed_to",
        "R5.6",
        "the session was changed to",
    ),
    BrokenCase(
        "arch-timer-wheel-second-ticks",
        "scheduled_plan",
        "task_does_not_run_a_millisecond_before_its_time",
        "P32",
        "a millisecond before its runAt",
    ),
    BrokenCase(
        "arch-tool-results-by-name",
        "plan_tools",
        "two_files_read_in_one_message_each_reach",
        "P10",
        "and no other call's",
    ),
    BrokenCase(
        "arch-transcript-write-behind",
        "restart_interruption",
        "accepted_just_before_the_host_restarts_stays",
        "R1.3",
        "lost the accepted prompt",
    ),
    BrokenCase(
        "arch-task-timer-per-runat",
        "scheduled_plan",
        "task_moved_to_a_later_time_does_not_run_at_its_earlier",
        "P29",
        "at the time it was moved from",
    ),
]
