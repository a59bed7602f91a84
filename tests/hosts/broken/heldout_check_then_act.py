"""Broken hosts: a held-out set (stale state and check-then-act), written from the contract
alone. Each host checks one thing and acts on another: a row read once and used after it
changed, a cache not invalidated, a clock value read earlier than the action."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from hosts.registry import BrokenCase, patch, variant

if TYPE_CHECKING:
    from reference_host.approvals import Approvals
    from reference_host.clock import Clock
    from reference_host.storage import ApprovalRow, SessionRow


def _submit_with(
    created_at: Callable[[Approvals, str], Awaitable[int]],
    on_deadline: Callable[[Approvals, ApprovalRow], Callable[[], Awaitable[None]]],
) -> Callable[[Approvals, SessionRow, str, dict[str, Any]], Awaitable[ApprovalRow]]:
    """``Approvals.submit`` as the reference host writes it, with the creation time and the
    deadline timer's callback taken from the given functions."""
    import sqlite3

    from reference_host import approvals as approvals_module
    from reference_host.artifacts import discard_artifact, encode_markdown, write_artifact
    from reference_host.errors import HostError
    from reference_host.state import deadline_for
    from reference_host.storage import ApprovalRow

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
        title = approvals_module._require_text(args, "title")
        question = approvals_module._require_text(args, "question")
        content = encode_markdown(args["markdown"])
        artifact = await asyncio.to_thread(
            write_artifact, session.workspace_root, content, host.faults.take
        )
        created = await created_at(self, turn_id)
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
        host.clock.call_at(row.expires_at, on_deadline(self, row))
        host.notify("approval/updated", {"approval": approvals_module.approval_wire(row)})
        await host.publish_session(session.id)
        return row

    return submit


# ADR §5 / R1.4 (and "EnterPlanMode in an Agent turn turns the running turn into a Plan
# turn: the next provider request offers exactly the Plan tools, SubmitPlan is valid for
# the rest of the turn"; "What you offer follows the session's mode as it is when you send
# the request").
# Bug: the agent loop reads the session row once, when the turn starts, and builds every
# provider request and gates every call from that copy. After EnterPlanMode the row says
# plan, but the loop still offers the Agent tools and a later SubmitPlan in that turn is
# refused with SUBMIT_PLAN_OUTSIDE_PLAN_TURN (Write is not denied either).
# Recipe: Agent session; prompt; the model calls EnterPlanMode; the next provider request
# still offers Write/Edit and no SubmitPlan; the model calls SubmitPlan -> turn/toolResult
# denied SUBMIT_PLAN_OUTSIDE_PLAN_TURN, no approval.
@variant("chk-loop-mode-at-turn-start")
def loop_mode_at_turn_start() -> None:
    from reference_host import turns
    from reference_host.errors import HostError
    from reference_host.turns import TurnRunner

    async def _loop(self: TurnRunner, session_id: str, turn_id: str, unattended: bool) -> None:
        host = self.host
        messages = await self._history(session_id)
        session = await host.require_session(session_id)  # read once for the whole turn
        for _ in range(turns.MAX_STEPS):
            reply = await self._ask_model(session, turn_id, messages)
            assistant = turns._assistant_message(reply)
            await host.storage.append_transcript(
                session_id, turn_id, "assistant", assistant, host.clock.now_ms()
            )
            messages.append(assistant)
            if not reply.tool_calls:
                return
            outcomes = await self._run_batch(session, turn_id, reply.tool_calls, unattended)
            for call, result in zip(reply.tool_calls, outcomes, strict=True):
                message = {"role": "tool", "tool_call_id": call.call_id, "content": result.output}
                await host.storage.append_transcript(
                    session_id, turn_id, "tool", message, host.clock.now_ms()
                )
                messages.append(message)
            if any(result.ends_turn for result in outcomes):
                return
            if any(call.name == "new_context" for call in reply.tool_calls):
                messages = await self._history(session_id)
        raise HostError(
            "PROVIDER_ERROR", f"the model did not finish within {turns.MAX_STEPS} steps"
        )

    patch(TurnRunner, "_loop", _loop)


# P7 ("each execution runs under the mode its own approve chose"; "Permission modes apply
# to every Agent turn, the execution and later prompts alike"), R3.4, C4.
# Bug: the turn runner builds a session's permission policy the first time one of its
# tool calls is gated and keeps it for the host's lifetime; a later change of the
# session's permission mode (approve with another mode, or session/configure while idle)
# is stored and reported, but calls are still gated by the first mode.
# Recipe: session in Plan with permissionMode ask; prompt; the model calls SubmitPlan
# (gated under ask); approve with permissionMode auto; the execution's model calls Write
# -> a permission/requested is sent (should run at once). Or: ask session, Bash asks;
# session/configure permissionMode auto; next prompt's Bash still asks.
@variant("chk-permission-policy-cached")
def permission_policy_cached() -> None:
    from reference_host.provider_client import ToolCall
    from reference_host.turns import CallOutcome, TurnRunner

    original = TurnRunner._run_call
    policies: WeakKeyDictionary[TurnRunner, dict[str, Any]] = WeakKeyDictionary()

    async def _run_call(
        self: TurnRunner, session: SessionRow, turn_id: str, call: ToolCall, unattended: bool
    ) -> CallOutcome:
        known = policies.setdefault(self, {})
        mode = known.setdefault(session.id, session.permission_mode)
        return await original(
            self, replace(session, permission_mode=mode), turn_id, call, unattended
        )

    patch(TurnRunner, "_run_call", _run_call, wraps=True)


# R7.2 ("approval/get, approval/list and the approval/updated that announced it report the
# same record"), R4.3.
# Bug: approval/list is served from a per-session cache that insert_approval and
# update_approval invalidate, but the approve transaction writes the row through the
# transaction's own writer (write_approval), which does not. Until something else updates
# the row (the execution turn starting), approval/list still shows the approval pending
# while approval/get and the approve answer show it approved.
# Recipe: submit a plan; approval/list (fills the cache); conformance/fault/arm
# holdExecution; approval/approve -> approval/list still lists it "pending" with
# executionId null; approval/get says approved/queued.
@variant("chk-approval-list-cache")
def approval_list_cache() -> None:
    from reference_host.storage import Storage

    listed: WeakKeyDictionary[Storage, dict[str, list[ApprovalRow]]] = WeakKeyDictionary()
    original_list = Storage.list_approvals
    original_insert = Storage.insert_approval
    original_update = Storage.update_approval

    async def list_approvals(self: Storage, session_id: str) -> list[ApprovalRow]:
        cache = listed.setdefault(self, {})
        if session_id not in cache:
            cache[session_id] = await original_list(self, session_id)
        return list(cache[session_id])

    async def insert_approval(self: Storage, row: ApprovalRow) -> None:
        await original_insert(self, row)
        listed.setdefault(self, {}).pop(row.session_id, None)

    async def update_approval(self: Storage, row: ApprovalRow) -> None:
        await original_update(self, row)
        listed.setdefault(self, {}).pop(row.session_id, None)

    patch(Storage, "list_approvals", list_approvals, wraps=True)
    patch(Storage, "insert_approval", insert_approval, wraps=True)
    patch(Storage, "update_approval", update_approval, wraps=True)


# R3.9 ("The deadline is createdAt + 30 minutes on the host clock, where createdAt is the
# clock when the approval is created, at the SubmitPlan, however long the Plan turn ran
# before").
# Bug: the approval's createdAt (and so expiresAt) is the clock value recorded when the
# Plan turn started, read back from the turn's row, not the clock at the SubmitPlan.
# Recipe: Plan session; prompt (clock T0); while the provider request is open,
# conformance/clock/advance 10 minutes; the model calls SubmitPlan -> approval createdAt
# is T0 (should be T0+10min) and expiresAt T0+30min; advancing 20 more minutes expires it.
@variant("chk-plan-created-at-turn-start")
def plan_created_at_turn_start() -> None:
    from reference_host.approvals import Approvals

    async def created_at(self: Approvals, turn_id: str) -> int:
        storage = self.host.storage
        async with storage._conn.execute(
            "SELECT started_at FROM turns WHERE id = ?", (turn_id,)
        ) as cursor:
            row = await cursor.fetchone()
        return int(row[0]) if row is not None else self.host.clock.now_ms()

    def on_deadline(self: Approvals, row: ApprovalRow) -> Callable[[], Awaitable[None]]:
        return lambda: self.expire(row.id)

    patch(Approvals, "submit", _submit_with(created_at, on_deadline))


# C5 ("A command's timeout counts from that command's own start, when you start it and
# announce it with command/started, not from its turn's or from an earlier command of the
# same message"), P7.
# Bug: the command's deadline is computed from the clock read when the tool call was
# accepted, before the permission question; the time the user took to answer is counted
# against the command's timeout.
# Recipe: session with permissionMode ask; the model calls Bash {"command": "<waits on a
# gate>", "timeout_ms": 60000}; permission/requested; conformance/clock/advance 50000;
# permission/respond allow; command/started; conformance/clock/advance 20000 -> the
# command is ended timedOut: true (should still run: it started 20 s ago).
@variant("chk-command-deadline-from-call")
def command_deadline_from_call() -> None:
    from reference_host import turns
    from reference_host.provider_client import ToolCall
    from reference_host.turns import CallOutcome, TurnRunner

    accepted: WeakKeyDictionary[Clock, dict[str, int]] = WeakKeyDictionary()
    original_call = TurnRunner._run_call
    original_run = turns.__dict__["run_command"]

    async def _run_call(
        self: TurnRunner, session: SessionRow, turn_id: str, call: ToolCall, unattended: bool
    ) -> CallOutcome:
        accepted.setdefault(self.host.clock, {})[session.id] = self.host.clock.now_ms()
        return await original_call(self, session, turn_id, call, unattended)

    async def run_command(**kwargs: Any) -> Any:
        clock: Clock = kwargs["clock"]
        since = accepted.get(clock, {}).get(kwargs["session_id"])
        if since is not None:
            kwargs["timeout_ms"] = max(kwargs["timeout_ms"] - (clock.now_ms() - since), 0)
        return await original_run(**kwargs)

    patch(TurnRunner, "_run_call", _run_call, wraps=True)
    patch(turns, "run_command", run_command, wraps=True)


# P7 ("A second answer to the same question, an answer to an id never asked, or one to the
# question of a turn that has ended (a cancelled one included) gets
# PERMISSION_REQUEST_NOT_FOUND and changes nothing"; "answered once").
# Bug: an answer is routed by session: the broker remembers which session each request id
# was asked in and, when that request is no longer open, resolves the question that session
# has open now. A stale or repeated answer decides the session's current question.
# Recipe: ask session; the model makes two Bash calls in one message; permission/requested
# r1; respond r1 allow; permission/requested r2; respond r1 deny again -> answered {}
# (should be PERMISSION_REQUEST_NOT_FOUND) and the second call is denied. Or: cancel a
# turn with r1 open, a new turn asks r2, respond r1 -> decides r2.
@variant("chk-permission-answer-by-session")
def permission_answer_by_session() -> None:
    from reference_host import permissions
    from reference_host.errors import HostError
    from reference_host.ids import new_id
    from reference_host.permissions import PermissionBroker

    asked_in: WeakKeyDictionary[PermissionBroker, dict[str, str]] = WeakKeyDictionary()

    async def ask(
        self: PermissionBroker, session_id: str, turn_id: str, tool: str, tool_input: Any
    ) -> bool:
        request_id = new_id("perm")
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._open[request_id] = permissions._Request(session_id, answer)
        asked_in.setdefault(self, {})[request_id] = session_id
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

    def respond(self: PermissionBroker, request_id: str, decision: str) -> None:
        request = self._open.get(request_id)
        if request is None or request.answer.done():
            session_id = asked_in.get(self, {}).get(request_id)
            current = [
                open_request
                for open_request in self._open.values()
                if open_request.session_id == session_id and not open_request.answer.done()
            ]
            request = current[0] if session_id is not None and current else None
        if request is None:
            raise HostError(
                "PERMISSION_REQUEST_NOT_FOUND", f"no open permission request {request_id!r}"
            )
        request.answer.set_result(decision == "allow")

    patch(PermissionBroker, "ask", ask)
    patch(PermissionBroker, "respond", respond)


# R4.4 ("A decided approval stays decided"), R3.11, R4.3.
# Bug: the deadline timer is armed with the approval row as it was submitted, and when it
# fires it checks that copy's status ("pending", always) instead of reading the row again,
# then writes the expiry over it. An approval approved or rejected before its deadline
# turns "expired" (PLAN_APPROVAL_TIMEOUT, its execution fields cleared) once the clock
# reaches expiresAt.
# Recipe: submit a plan; approval/reject (or approve and let the execution complete);
# conformance/clock/advance 30 minutes -> approval/updated status "expired"; approval/get
# shows expired with statusCode PLAN_APPROVAL_TIMEOUT (should stay rejected / approved).
@variant("chk-expire-captured-row")
def expire_captured_row() -> None:
    from reference_host.approvals import TIMEOUT_CODE, Approvals, approval_wire
    from reference_host.state import is_expired

    async def created_at(self: Approvals, turn_id: str) -> int:
        return self.host.clock.now_ms()

    def on_deadline(self: Approvals, row: ApprovalRow) -> Callable[[], Awaitable[None]]:
        async def expire() -> None:
            host = self.host
            if row.status != "pending":  # the row as it was submitted
                return
            if not is_expired(row.expires_at, host.clock.now_ms()):
                return
            expired = replace(
                row, status="expired", status_code=TIMEOUT_CODE, decided_at=host.clock.now_ms()
            )
            await host.storage.update_approval(expired)
            host.set_activity(row.session_id, pending_approval_id=None)
            host.notify("approval/updated", {"approval": approval_wire(expired)})
            await host.publish_session(row.session_id)

        return expire

    patch(Approvals, "submit", _submit_with(created_at, on_deadline))


# R3.11 ("an earlier approval's deadline never expires a later one of the same session, nor
# takes it out of its session's pendingApprovalId"), R4.8, R5.7.
# Bug: the deadline timer clears the session's pending slot before it checks whether its
# approval is still pending (it assumes the session's pending approval is its own). When
# an earlier, already rejected approval's deadline passes while a later one waits, the
# later one drops out of pendingApprovalId and the session takes a prompt.
# Recipe: submit plan A; reject A; new prompt, submit plan B (a few minutes later);
# conformance/clock/advance to A's expiresAt -> session/get pendingApprovalId null (should
# be B); session/prompt is accepted (should be APPROVAL_PENDING).
@variant("chk-expire-clears-pending")
def expire_clears_pending() -> None:
    from reference_host.approvals import TIMEOUT_CODE, Approvals, approval_wire
    from reference_host.state import is_expired

    async def expire(self: Approvals, approval_id: str) -> None:
        host = self.host
        row = await host.storage.get_approval(approval_id)
        if row is None:
            return
        host.set_activity(row.session_id, pending_approval_id=None)
        if row.status != "pending":
            return
        if not is_expired(row.expires_at, host.clock.now_ms()):
            return
        expired = replace(
            row, status="expired", status_code=TIMEOUT_CODE, decided_at=host.clock.now_ms()
        )
        await host.storage.update_approval(expired)
        host.notify("approval/updated", {"approval": approval_wire(expired)})
        await host.publish_session(row.session_id)

    patch(Approvals, "expire", expire)


# P13 ("approve and artifact/read check the file's bytes against its recorded SHA-256 and
# size, on every call: a read that matched does not vouch for a later one").
# Bug: once an approval's artifact has been verified, its bytes are kept in memory and the
# next artifact/read or approve uses them without reading the file again. A file changed
# after a successful artifact/read is approved, and read back as the old bytes.
# Recipe: submit a plan; artifact/read (ok); overwrite the artifact file with other bytes;
# approval/approve -> approved and the execution starts (should be ARTIFACT_MODIFIED with
# the approval still pending); artifact/read also answers the old bytes.
@variant("chk-artifact-verified-once")
def artifact_verified_once() -> None:
    from reference_host.approvals import Approvals

    verified: WeakKeyDictionary[Approvals, dict[str, bytes]] = WeakKeyDictionary()
    original = Approvals.verified_content

    async def verified_content(self: Approvals, session: SessionRow, row: ApprovalRow) -> bytes:
        known = verified.setdefault(self, {})
        if row.id not in known:
            known[row.id] = await original(self, session, row)
        return known[row.id]

    patch(Approvals, "verified_content", verified_content, wraps=True)


# P29 ("A task/update that changes runAt replaces the earlier time"; task/update fields
# apply), R6.3 ("Only task/update with mode: "agent" changes it"), P31 (the task's prompt
# reaches the provider).
# Bug: a task's timer holds the task row as it was armed, and task/update re-arms the timer
# only when runAt or enabled changed. An update of the mode, prompt, provider or permission
# mode alone is stored and answered, but the run that fires uses the old row.
# Recipe: task/create mode plan, runAt = now + 1 min; task/update mode agent (runAt not
# given); conformance/clock/advance 1 min -> task/runFinished refused
# PLAN_REQUIRES_INTERACTIVE_SESSION (should run as Agent). Or update the prompt: the run's
# provider request carries the old prompt.
@variant("chk-task-timer-stale-row")
def task_timer_stale_row() -> None:
    from reference_host.errors import HostError
    from reference_host.tasks import Tasks

    armed: WeakKeyDictionary[Tasks, dict[str, dict[str, Any]]] = WeakKeyDictionary()
    original_create = Tasks.create
    original_schedule = Tasks.schedule_all

    async def create(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        answer = await original_create(self, params)
        row = await self.host.storage.get_task(answer["task"]["taskId"])
        if row is not None:
            armed.setdefault(self, {})[row["id"]] = row
        return answer

    async def schedule_all(self: Tasks) -> None:
        await original_schedule(self)
        for row in await self.host.storage.list_tasks():
            armed.setdefault(self, {})[row["id"]] = row

    async def update(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require(params["taskId"])
        columns = {
            "name": "name",
            "prompt": "prompt",
            "mode": "mode",
            "permissionMode": "permission_mode",
            "runAt": "run_at",
            "enabled": "enabled",
        }
        changes = {column: params[key] for key, column in columns.items() if key in params}
        if "provider" in params:
            changes["provider_base_url"] = params["provider"]["baseUrl"]
            changes["model"] = params["provider"]["model"]
        if "enabled" in changes:
            changes["enabled"] = int(changes["enabled"])
        changes["updated_at"] = self.host.clock.now_ms()
        await self.host.storage.update_task(row["id"], changes)
        updated = {**row, **changes}
        if "run_at" in changes or "enabled" in changes:  # only the schedule moves the timer
            self._arm(row["id"], updated["run_at"] if updated["enabled"] else None)
            armed.setdefault(self, {})[row["id"]] = updated
        return {"task": await self.wire(updated)}

    async def _fire(self: Tasks, task_id: str) -> None:
        self._timers.pop(task_id, None)
        row = armed.get(self, {}).get(task_id)
        if row is None:
            row = await self.host.storage.get_task(task_id)
        if row is None or not row["enabled"]:
            return
        await self.host.storage.update_task(task_id, {"run_at": None})
        with contextlib.suppress(HostError):
            await self.run(row)

    patch(Tasks, "create", create, wraps=True)
    patch(Tasks, "schedule_all", schedule_all, wraps=True)
    patch(Tasks, "update", update)
    patch(Tasks, "_fire", _fire)


# R4.7 ("Its turnId names the execution's turn ... always once that turn has started
# (running, completed, and interrupted by a cancel, a failure or a restart after it
# started)"), R4.3.
# Bug: when the execution turn ends, the execution is finished from the approval row the
# turn was started with (taken before the turn recorded itself on the row), not from the
# row as it now is: the row's execution turn is written back as null, and the final
# execution/updated (completed or interrupted) carries turnId null.
# Recipe: submit a plan; approve (auto); the execution's model answers with text ->
# execution/updated "running" names the turn, execution/updated "completed" has turnId
# null (should be the execution turn's id).
@variant("chk-execution-end-stale-row")
def execution_end_stale_row() -> None:
    from reference_host.approvals import approval_wire
    from reference_host.errors import HostError
    from reference_host.ports import TurnEnded
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
            done = replace(
                approval, execution_state="completed" if outcome == "completed" else "interrupted"
            )
            await host.storage.update_approval(done)
            host.set_activity(session_id, active_execution_id=None)
            host.notify(
                "execution/updated",
                {
                    "sessionId": done.session_id,
                    "approvalId": done.id,
                    "executionId": done.execution_id,
                    "executionState": done.execution_state,
                    "turnId": done.execution_turn_id,
                },
            )
            host.notify("approval/updated", {"approval": approval_wire(done)})
        if on_end is not None:
            await on_end(outcome, error)
        host.set_activity(session_id, active_turn_id=None)
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

    patch(TurnRunner, "_end", _end)


# P8 ("Once the run has ended, the user may prompt that session, and its turns are
# attended: its permission mode asks as in any session (P7); only the run's own turn is
# unattended").
# Bug: the turn runner remembers which sessions a scheduled run started as unattended and
# runs every later turn of such a session unattended too: a call that needs an answer is
# refused with PERMISSION_UNAVAILABLE instead of asking.
# Recipe: task/create (agent, permissionMode ask); task/run; wait task/runFinished;
# session/prompt in the run's session; the model calls Bash -> turn/toolResult denied
# PERMISSION_UNAVAILABLE, no permission/requested (should ask).
@variant("chk-run-session-stays-unattended")
def run_session_stays_unattended() -> None:
    from reference_host.ports import TurnEnded
    from reference_host.turns import TurnRunner

    unattended_sessions: WeakKeyDictionary[TurnRunner, set[str]] = WeakKeyDictionary()
    original = TurnRunner.start

    async def start(
        self: TurnRunner,
        session: SessionRow,
        kind: str,
        user_text: str,
        approval: ApprovalRow | None = None,
        unattended: bool = False,
        on_end: TurnEnded | None = None,
    ) -> str:
        marked = unattended_sessions.setdefault(self, set())
        if unattended:
            marked.add(session.id)
        return await original(
            self, session, kind, user_text, approval, session.id in marked, on_end
        )

    patch(TurnRunner, "start", start, wraps=True)


# R7.6 (shell/setDefault persists the default), R7.3 ("shellId: null clears the session's
# own choice: from then on ... its commands run in the default shell"; "command/started
# names the shell").
# Bug: the host resolves the default shell once, the first time a command needs it, and
# keeps that answer; shell/setDefault stores the new default and shell/list reports it,
# but Bash in a session without its own shell keeps running in the first default.
# Recipe: session without shellId; a Bash call (runs in default D1); shell/setDefault D2;
# another prompt with a Bash call -> command/started shellId D1 (should be D2).
@variant("chk-default-shell-cached")
def default_shell_cached() -> None:
    from reference_host import shells
    from reference_host.host import Host

    resolved: WeakKeyDictionary[Host, str | None] = WeakKeyDictionary()
    original = Host.default_shell_id

    async def default_shell_id(self: Host) -> str | None:
        if self not in resolved:
            resolved[self] = await original(self)
        return resolved[self]

    async def shell_list(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "shells": [shell.to_wire() for shell in shells.catalog()],
            "defaultShellId": await original(self),
        }

    patch(Host, "default_shell_id", default_shell_id, wraps=True)
    patch(Host, "shell_list", shell_list)


# P29 ("task/list reports the same"; lastRun), R6.2 ("task/list shows it as the task's
# lastRun"), P28.
# Bug: task/list is served from a snapshot that the task handlers (create, update, delete,
# run) invalidate; a run that a timer starts, and the end of any run (announced with
# task/runFinished), are not handlers, so task/list keeps showing the lastRun of the
# snapshot.
# Recipe: task/create; task/run; task/list (lastRun running); wait task/runFinished
# completed -> task/list still shows lastRun outcome "running" (should be "completed").
# Or: task/list; clock advance to runAt; task/runFinished -> task/list lastRun null.
@variant("chk-task-list-snapshot")
def task_list_snapshot() -> None:
    from reference_host.tasks import Tasks

    snapshots: WeakKeyDictionary[Tasks, dict[str, Any]] = WeakKeyDictionary()
    original_list = Tasks.list

    async def listing(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        if self not in snapshots:
            snapshots[self] = await original_list(self, params)
        return snapshots[self]

    def invalidating(
        handler: Callable[[Tasks, dict[str, Any]], Awaitable[dict[str, Any]]],
    ) -> Callable[[Tasks, dict[str, Any]], Awaitable[dict[str, Any]]]:
        async def handle(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
            snapshots.pop(self, None)
            try:
                return await handler(self, params)
            finally:
                snapshots.pop(self, None)

        return handle

    patch(Tasks, "list", listing, wraps=True)
    for name in ("create", "update", "delete", "run_now"):
        patch(Tasks, name, invalidating(getattr(Tasks, name)), wraps=True)


CASES = [
    BrokenCase(
        "chk-loop-mode-at-turn-start",
        "plan_tools",
        "entering_plan_mode_during_an_agent_turn_turns_it_into_a_plan_turn",
        "P10",
        "after EnterPlanMode offered",
    ),
    BrokenCase(
        "chk-permission-policy-cached",
        "execution",
        "after_a_cancelled_execution_later_requests_keep_the_permission_mode",
        "P7",
        "the host asked before the Bash call",
    ),
    BrokenCase(
        "chk-approval-list-cache",
        "execution",
        "cancel_while_an_approved_plan_waits_in_the_queue",
        "R7.2",
        "approval/list shows the approval",
    ),
    BrokenCase(
        "chk-plan-created-at-turn-start",
        "deadline",
        "deadline_is_30_minutes_after_the_host_created_the_approval",
        "R3.9",
        "when the model submitted the plan",
    ),
    BrokenCase(
        "chk-command-deadline-from-call",
        "shell",
        "commands_timeout_counts_from_the_commands_own_start and 90500",
        "C5",
        "the command ended before its own timeout had run out",
    ),
    BrokenCase(
        "chk-permission-answer-by-session",
        "execution",
        "second_answer_to_an_answered_question_leaves_the_next_question_waiting",
        "P7",
        "expected the host to refuse",
    ),
    BrokenCase(
        "chk-expire-captured-row",
        "approval",
        "plan_rejected_before_its_deadline_stays_rejected_after_it",
        "R4.4",
        "expected APPROVAL_NOT_PENDING",
    ),
    BrokenCase(
        "chk-expire-clears-pending",
        "deadline",
        "submitted_after_a_rejected_one_still_waits_at_the_rejected_plans_deadline",
        "R3.8",
        "the session names the pending approval None",
    ),
    BrokenCase(
        "chk-artifact-verified-once",
        "artifact_integrity",
        "plan_opened_before_its_file_changed_is_not_approved",
        "P13",
        "expected the host to refuse",
    ),
    BrokenCase(
        "chk-task-timer-stale-row",
        "scheduled_plan",
        "changed_to_agent_after_it_was_given_its_time",
        "P29",
        "PLAN_REQUIRES_INTERACTIVE_SESSION",
    ),
    BrokenCase(
        "chk-execution-end-stale-row",
        "execution",
        "same_agent_carries_out_the_plan_with_the_conversation",
        "R4.7",
        "with turnId None",
    ),
    BrokenCase(
        "chk-run-session-stays-unattended",
        "scheduled_plan",
        "once_its_run_has_ended_the_session_a_run_created_asks_its_user",
        "P8",
        "without asking the user",
    ),
    BrokenCase(
        "chk-default-shell-cached",
        "shell",
        "session_without_a_shell_of_its_own_follows_a_change_of_the_default",
        "R7.6",
        "the command was announced in",
    ),
    BrokenCase(
        "chk-task-list-snapshot",
        "scheduled_plan",
        "task_list_shows_how_a_run_ended",
        "P29",
        "task/list shows the last run as",
    ),
]
