"""Broken hosts: a held-out set (the wrong value in the right place: copy-paste and
wrong-variable mistakes), written from the contract alone."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hosts.registry import BrokenCase, patch, variant


# ADR §3 ("Reject never selects or grants an execution mode"); implementing-a-host.md,
# Approval (§3): "After a reject, and after an expiry (R3.11), the session stays in Plan with
# its permission mode" (R3.6).
# Bug: reject was written by copying approve: it still builds the "session -> Agent" row
# and writes it in the same transaction as the rejected approval (only the permission mode
# was taken out, as reject has none). A client sees the reject answer as expected, but
# session/get, session/list, the session/updated that follows and sessions.mode then read
# "agent" with the old permission mode.
# Recipe: Plan session; a Plan turn whose model calls SubmitPlan; approval/reject; then
# session/get: mode is "agent" (expected "plan").
@variant("wv-reject-switches-to-agent")
def reject_switches_to_agent() -> None:
    from reference_host import state
    from reference_host.approvals import Approvals, _facts, _with, approval_wire

    async def reject(self: Approvals, session_id: str, approval_id: str) -> dict[str, Any]:
        host = self.host
        row = await self.require(session_id, approval_id)
        await host.turns.settle(session_id, row.turn_id)
        await self._ensure_decidable(row)
        now = host.clock.now_ms()
        rejected = _with(row, state.reject(_facts(row)), decided_at=now)
        session = await host.require_session(session_id)
        agent = replace(session, mode="agent", updated_at=now)
        async with host.storage.transaction() as conn:
            await host.storage.write_approval(conn, rejected)
            await host.storage.write_session(conn, agent)
        host.set_activity(session_id, pending_approval_id=None)
        host.notify("approval/updated", {"approval": approval_wire(rejected)})
        await host.publish_session(session_id)
        return {"approval": approval_wire(rejected)}

    patch(Approvals, "reject", reject)


# R3.2, P13, C1: artifact/read returns the named approval's artifact path and bytes ("The
# bytes checked are those of the approval's own file").
# Bug: artifact/read answers from the session's newest approval (the one the approval card
# usually shows) instead of the approval named: it echoes the requested approvalId but
# returns the newest approval's path, bytes, hash and size. With one approval per session
# nothing differs.
# Recipe: Plan turn submits plan A; approval/reject; a second Plan turn submits plan B;
# artifact/read of A: path and contentBase64 are B's (expected A's, matching A's
# approval/get artifact).
@variant("wv-artifact-read-newest-approval")
def artifact_read_newest_approval() -> None:
    import base64

    from reference_host.approvals import Approvals
    from reference_host.storage import ApprovalRow

    async def read_artifact(self: Approvals, row: ApprovalRow) -> dict[str, Any]:
        session = await self.host.require_session(row.session_id)
        shown = (await self.host.storage.list_approvals(row.session_id))[-1]
        content = await self.verified_content(session, shown)
        return {
            "approvalId": row.id,
            "path": shown.artifact_path,
            "contentBase64": base64.b64encode(content).decode("ascii"),
            "sha256": shown.artifact_sha256,
            "byteSize": shown.artifact_bytes,
        }

    patch(Approvals, "read_artifact", read_artifact)


# R4.7: execution/updated's turnId "names the execution's turn (the turn/started of kind
# execution that names the execution): always once that turn has started (running,
# completed, and interrupted ...), and never another turn".
# Bug: when the execution ends, the notification takes the approval row's `turn_id` (the
# Plan turn that submitted the plan) instead of its `execution_turn_id`. The `running`
# notification is right; the `completed` / `interrupted` one names the Plan turn.
# Recipe: Plan turn submits a plan; approval/approve; the execution turn's model answers
# with text only; the execution/updated with executionState "completed" has turnId = the
# Plan turn's id (expected the execution turn's id from turn/started kind execution).
@variant("wv-execution-end-names-plan-turn")
def execution_end_names_plan_turn() -> None:
    from reference_host import state
    from reference_host.approvals import Approvals, approval_wire
    from reference_host.state import ExecutionState

    async def execution_finished(self: Approvals, approval_id: str, final: ExecutionState) -> None:
        row = await self._execution(approval_id)
        assert row.execution_state is not None
        done = replace(row, execution_state=state.advance_execution(row.execution_state, final))
        await self.host.storage.update_approval(done)
        self.host.set_activity(row.session_id, active_execution_id=None)
        self._notify_execution(done, row.turn_id)
        self.host.notify("approval/updated", {"approval": approval_wire(done)})

    patch(Approvals, "execution_finished", execution_finished)


# implementing-a-host.md, Sessions (§1, §5): "The sessions row holds what session/get
# reports: mode, permission mode, workspace root, provider ..., shell and creation time";
# R7.2 (session/list and session/get report the same session); P32 (every reported
# createdAt is read from the host clock when the thing was created).
# Bug: the SELECT column list used to read sessions back has `updated_at, created_at` in
# the wrong order, so the positional SessionRow gets them swapped: a session's createdAt
# reads as the time of its last change. Until the first change both are equal.
# Recipe: session/create (note createdAt); conformance/clock/advance 60000;
# session/configure {permissionMode: "auto"}; session/get: createdAt moved by 60000
# (expected unchanged, equal to sessions.created_at).
@variant("wv-session-created-reads-updated")
def session_created_reads_updated() -> None:
    from reference_host.storage import SessionRow, Storage

    columns = (
        "id, workspace_root, mode, permission_mode, provider_base_url, model, shell_id, "
        "updated_at, created_at"
    )

    async def get_session(self: Storage, session_id: str) -> SessionRow | None:
        async with self._conn.execute(
            f"SELECT {columns} FROM sessions WHERE id = ?", (session_id,)
        ) as cursor:
            row = await cursor.fetchone()
        return SessionRow(*row) if row is not None else None

    async def list_sessions(self: Storage) -> list[SessionRow]:
        async with self._conn.execute(
            f"SELECT {columns} FROM sessions ORDER BY created_at, id"
        ) as cursor:
            rows = await cursor.fetchall()
        return [SessionRow(*row) for row in rows]

    patch(Storage, "get_session", get_session)
    patch(Storage, "list_sessions", list_sessions)


# R7.2: every change of what session/get reports is announced by a session/updated
# "carrying the whole session as it now is"; Ordering: "session/configure's session/updated
# comes before its answer, which reports the same session".
# Bug: session/configure builds the notification from the row it read (`row`) instead of
# the changed one (`updated`); the answer, session/get and storage carry the new values.
# Recipe: session/create (mode agent); session/configure {mode: "plan"}: the session/updated
# before the answer says mode "agent" (expected "plan", as the answer says).
@variant("wv-configure-announces-old-row")
def configure_announces_old_row() -> None:
    from reference_host.host import Host, _require_shell
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
                _require_shell(params["shellId"])
            changes["shell_id"] = params["shellId"]
        updated = replace(row, **changes, updated_at=self.clock.now_ms())
        await self.storage.update_session(updated)
        self.notify("session/updated", {"session": self.session_wire(row)})
        return {"session": self.session_wire(updated)}

    patch(Host, "session_configure", session_configure)


# R4.7: "a turn/started of kind execution in the approval's session, naming the approval
# and the execution".
# Bug: the ids of the execution's turn/started are unpacked from a pair in the wrong order:
# approvalId carries the execution id and executionId the approval id. Both are opaque
# ids, so the message is well formed; storage and the other notifications are right.
# Recipe: Plan turn submits a plan; approval/approve (result has approvalId A and
# executionId E); the turn/started of kind "execution" says approvalId E, executionId A.
@variant("wv-execution-started-ids-swapped")
def execution_started_ids_swapped() -> None:
    import asyncio

    from reference_host.ports import TurnEnded
    from reference_host.storage import ApprovalRow, SessionRow
    from reference_host.turns import TurnRunner

    async def start(
        self: TurnRunner,
        session: SessionRow,
        kind: str,
        user_text: str,
        approval: ApprovalRow | None = None,
        unattended: bool = False,
        on_end: TurnEnded | None = None,
    ) -> str:
        host = self.host
        turn_id = host.new_id("turn")
        user = {"role": "user", "content": user_text}
        await host.storage.start_turn(turn_id, session.id, kind, host.clock.now_ms(), user)
        host.set_activity(session.id, active_turn_id=turn_id)
        approval_id, execution_id = (
            (approval.execution_id, approval.id) if approval else (None, None)
        )
        host.notify(
            "turn/started",
            {
                "sessionId": session.id,
                "turnId": turn_id,
                "kind": kind,
                "mode": session.mode,
                "approvalId": approval_id,
                "executionId": execution_id,
            },
        )
        await host.publish_session(session.id)
        task = asyncio.create_task(self._run(session.id, turn_id, approval, unattended, on_end))
        self.tasks[session.id] = task
        return turn_id

    patch(TurnRunner, "start", start)


# P10: "Read gives the file's text as stored ... With offset it starts at that line,
# counted from 1, and with limit it gives at most that many lines".
# Bug: Read passes offset and limit to its worker in the wrong order (both are optional
# ints). A Read without either is right; with offset only it returns the first `offset`
# lines; with both it starts at line `limit` and returns `offset` lines.
# Recipe: a file of 10 numbered lines; the model calls Read {path, offset: 3, limit: 2};
# the tool message carries lines 2-4 (expected lines 3-4).
@variant("wv-read-offset-limit-swapped")
def read_offset_limit_swapped() -> None:
    import asyncio

    from reference_host.tools.base import ToolContext, validate_args
    from reference_host.tools.files import Read
    from reference_host.workspace import require_root

    async def run(self: Read, ctx: ToolContext, args: dict[str, Any]) -> str:
        args = validate_args(self.spec, args)
        root = require_root(ctx.workspace_root)
        return await asyncio.to_thread(
            self._read, root, args["path"], args.get("limit"), args.get("offset")
        )

    patch(Read, "run", run)


# P14: "an expired approval keeps answering both actions with PLAN_APPROVAL_TIMEOUT" (and
# error-codes.json, APPROVAL_NOT_PENDING: "Acting on an approval at or after its
# expiresAt, whether still pending or already recorded as expired, gets
# PLAN_APPROVAL_TIMEOUT instead").
# Bug: the decidability check treats "expired" like every other decided status and answers
# the sibling code APPROVAL_NOT_PENDING. A pending approval past its deadline whose timer
# has not fired still gets PLAN_APPROVAL_TIMEOUT; once the timer has recorded the expiry,
# approve and reject get APPROVAL_NOT_PENDING. Nothing changes either way.
# Recipe: Plan turn submits a plan; conformance/clock/advance 1800000 (the approval/updated
# says expired); approval/approve {permissionMode: "ask"}: APPROVAL_NOT_PENDING (expected
# PLAN_APPROVAL_TIMEOUT); the same for approval/reject.
@variant("wv-expired-answers-not-pending")
def expired_answers_not_pending() -> None:
    from reference_host import approvals
    from reference_host.errors import HostError
    from reference_host.state import ApprovalFacts, is_expired

    def ensure_decidable(approval: ApprovalFacts, now_ms: int) -> None:
        if approval.status == "pending" and is_expired(approval.expires_at, now_ms):
            raise HostError("PLAN_APPROVAL_TIMEOUT", "the approval's deadline has passed")
        if approval.status != "pending":
            raise HostError(
                "APPROVAL_NOT_PENDING",
                f"the approval is {approval.status}; only a pending approval can be decided",
                {"status": approval.status},
            )

    patch(approvals, "ensure_decidable", ensure_decidable)


# P29: "A task/update that changes runAt replaces the earlier time: the task runs at the
# new time only, not also at the old one."
# Bug: task/update re-arms the task's timer from the row it read (`row`) instead of the
# merged one (`updated`). The answer, task/list and scheduled_tasks show the new runAt,
# but the timer still waits for the old one: the task runs at the old time and not at the
# new one (a task that had no runAt is never armed).
# Recipe: task/create agent task runAt = now + 10 min; task/update runAt = now + 20 min;
# conformance/clock/advance 10 min: task/runFinished arrives (expected nothing); advance
# to +20 min: nothing runs (expected the run).
@variant("wv-task-update-arms-old-time")
def task_update_arms_old_time() -> None:
    from reference_host.tasks import Tasks

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
        self._arm(row["id"], row["run_at"] if updated["enabled"] else None)
        return {"task": await self.wire(updated)}

    patch(Tasks, "update", update)


# C5: every command is recorded in command_audit with "what command/exited reported (exit
# code, signal, timed_out, cancelled, truncated, duration_ms)"; P19.
# Bug: the audit row takes timed_out from the result's `cancelled` and cancelled from its
# `timed_out` (two booleans side by side). command/exited is right; the stored row of a
# timed-out command says cancelled = 1, timed_out = 0, and a cancelled one the reverse.
# Recipe: Agent session, permission mode auto; the model calls Bash {command: "sleep 30",
# timeout_ms: 1000}; conformance/clock/advance 1000; command/exited says timedOut true;
# command_audit row of that commandId has timed_out 0, cancelled 1 (expected 1, 0).
@variant("wv-audit-timeout-cancel-swapped")
def audit_timeout_cancel_swapped() -> None:
    from reference_host import turns
    from reference_host.commands import CommandResult

    def audit_row(audit: dict[str, Any], result: CommandResult, ended_at: int) -> dict[str, Any]:
        return {
            "id": result.command_id,
            **audit,
            "ended_at": ended_at,
            "exit_code": result.exit_code,
            "signal": result.signal,
            "timed_out": int(result.cancelled),
            "cancelled": int(result.timed_out),
            "truncated": int(result.truncated),
            "duration_ms": result.duration_ms,
        }

    patch(turns, "_audit_row", audit_row)


# P10 / R1.3: "new_context replaces the earlier conversation with its summary: the next
# request of the turn, and the first request of later turns, carry the summary and none of
# the messages of earlier turns."
# Bug: after recording a batch's tool results, the turn loop decides whether the context
# was reset from the loop variable `call` left over from that loop (the batch's last call)
# instead of looking at every call. A new_context that is the only or the last call of its
# message resets the context; one followed by another call in the same message does not,
# so the next request of the turn still carries the earlier turns. Later turns are right
# (they rebuild the history from the transcript).
# Recipe: a turn with an earlier conversation; the model answers with two calls in one
# message, new_context {summary: "S"} then Read {path}; the turn's next provider request
# still holds the earlier turn's prompt (expected only the summary's side).
@variant("wv-new-context-last-call-only")
def new_context_last_call_only() -> None:
    from reference_host.errors import HostError
    from reference_host.turns import MAX_STEPS, TurnRunner, _assistant_message

    async def _loop(self: TurnRunner, session_id: str, turn_id: str, unattended: bool) -> None:
        host = self.host
        messages = await self._history(session_id)
        for _ in range(MAX_STEPS):
            session = await host.require_session(session_id)
            reply = await self._ask_model(session, turn_id, messages)
            assistant = _assistant_message(reply)
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
            if call.name == "new_context":
                messages = await self._history(session_id)
        raise HostError("PROVIDER_ERROR", f"the model did not finish within {MAX_STEPS} steps")

    patch(TurnRunner, "_loop", _loop)


# R3.9: "The deadline is createdAt + 30 minutes on the host clock, where createdAt is the
# clock when the approval is created, at the SubmitPlan, however long the Plan turn ran
# before"; Approval.expiresAt: "createdAt + 30 minutes, fixed at creation".
# Bug: the deadline is computed from the session's created_at (the row at hand in submit)
# instead of the approval's own `created`. When the session was created at the same
# instant as the plan, nothing differs; when the clock moved in between, expiresAt is
# early (and the approval expires early, even at once when the session is older than 30
# minutes).
# Recipe: session/create; conformance/clock/advance 600000; prompt a Plan turn that
# submits: approval expiresAt = createdAt + 1200000 (expected createdAt + 1800000); advance
# 1200000: the approval expires (expected still pending).
@variant("wv-deadline-from-session-created")
def deadline_from_session_created() -> None:
    import asyncio
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
        created = host.clock.now_ms()
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
            expires_at=deadline_for(session.created_at),
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


# R2.6 (title and question as separate structured fields), R4.3 ("every field of an
# approval ... always equals its plan_approvals row"), R7.2 (approval/get, approval/list
# and the approval/updated that announced it report the same record).
# Bug: the INSERT of a new approval names its columns by hand, with `question, title` in
# the wrong order against the row's values: the stored title is the submitted question and
# the stored question the title. The approval/updated sent at submission (built from the
# in-memory row) is right; every read from storage (approval/get, approval/list, later
# notifications, the execution prompt) has them swapped.
# Recipe: Plan turn calls SubmitPlan {title: "T", markdown, question: "Q"}; approval/get:
# title "Q", question "T" (expected "T", "Q", as in the first approval/updated).
@variant("wv-insert-title-question-swapped")
def insert_title_question_swapped() -> None:
    from reference_host.storage import ApprovalRow, Storage

    columns = (
        "id, session_id, turn_id, question, title, artifact_path, artifact_sha256, "
        "artifact_bytes, created_at, expires_at, status, status_code, decided_at, "
        "permission_mode, execution_id, execution_state, execution_turn_id"
    )

    async def insert_approval(self: Storage, row: ApprovalRow) -> None:
        async with self._writing:
            await self._conn.execute(
                f"INSERT INTO plan_approvals ({columns}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                tuple(row.__dict__.values()),
            )

    patch(Storage, "insert_approval", insert_approval)


# R4.5 / R5.1: "Only the execution reads interrupted: its turn keeps its own outcome, so a
# cancelled execution turn ends cancelled in turn/ended and in turns.state (R5.1), and a
# failed one failed."
# Bug: the turn's end computes the execution's final state first and then records the
# turn with that value, so an execution turn that was cancelled or failed is stored as
# turns.state "interrupted". turn/ended still says cancelled / failed, and prompt and
# scheduled turns are right.
# Recipe: Plan turn submits a plan; approval/approve; while the execution turn waits on
# the provider, session/cancel; turn/ended outcome "cancelled", but the turns row of that
# turn has state "interrupted" (expected "cancelled").
@variant("wv-execution-turn-stored-interrupted")
def execution_turn_stored_interrupted() -> None:
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
        final: ExecutionState = "completed" if outcome == "completed" else "interrupted"
        stored = final if approval is not None else outcome
        await host.storage.end_turn(turn_id, stored, host.clock.now_ms())
        if approval is not None:
            await host.approvals.execution_finished(approval.id, final)
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


CASES = [
    BrokenCase(
        "wv-reject-switches-to-agent",
        "execution",
        "given_the_plans_text_exactly_as_submitted and decomposed",
        "P15",
        "the newest approval is",
    ),
    BrokenCase(
        "wv-artifact-read-newest-approval",
        "artifact_integrity",
        "after_a_revision_opening_the_earlier_plan_returns",
        "R3.2",
        "another plan's bytes",
    ),
    BrokenCase(
        "wv-execution-end-names-plan-turn",
        "execution",
        "the_execution_starts_from_the_approved_plans_artifact",
        "R4.7",
        "the execution's turn is",
    ),
    BrokenCase(
        "wv-session-created-reads-updated",
        "sessions",
        "a_change_of_two_settings_at_once_is_announced_whole",
        "R7.2",
        "also changed {'createdAt'",
    ),
    BrokenCase(
        "wv-configure-announces-old-row",
        "sessions",
        "idle_session_switches_to_plan_mode",
        "R7.2",
        "a change was announced with a stale record",
    ),
    BrokenCase(
        "wv-execution-started-ids-swapped",
        "execution",
        "an_approved_plan_is_queued_runs_and_completes",
        "R4.7",
        "but the approve answered execution",
    ),
    BrokenCase(
        "wv-read-offset-limit-swapped",
        "plan_tools",
        "reading_part_of_a_file_gives_the_model_the_lines and middle",
        "P10",
        "after its Read call the model was given",
    ),
    BrokenCase(
        "wv-expired-answers-not-pending",
        "deadline",
        "an_expired_plan_cannot_be_approved_afterwards",
        "P14",
        "expected PLAN_APPROVAL_TIMEOUT",
    ),
    BrokenCase(
        "wv-task-update-arms-old-time",
        "scheduled_plan",
        "a_task_due_in_three_days_runs_when_the_clock_jumps",
        "P29",
        "the host announced no run of it",
    ),
    BrokenCase(
        "wv-audit-timeout-cancel-swapped",
        "shell",
        "a_command_that_times_out_is_recorded_for_audit",
        "C5",
        "the audit row differs from the command",
    ),
    BrokenCase(
        "wv-new-context-last-call-only",
        "plan_tools",
        "new_context_called_beside_another_tool and before",
        "P10",
        "after the new context the model was not given the summary",
    ),
    BrokenCase(
        "wv-deadline-from-session-created",
        "deadline",
        "deadline_is_30_minutes_after_the_host_created",
        "R3.9",
        "ms after creation",
    ),
    BrokenCase(
        "wv-insert-title-question-swapped",
        "submit_plan",
        "the_model_submits_a_plan",
        "R2.1",
        "the approval is 'Shall I go ahead?'",
    ),
    BrokenCase(
        "wv-execution-turn-stored-interrupted",
        "execution",
        "an_execution_whose_turn_fails_is_interrupted",
        "R5.1",
        "but its turns row reads interrupted",
    ),
]
