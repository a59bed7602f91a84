"""Broken hosts: approval."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import aiosqlite

from hosts.registry import BrokenCase, patch, variant
from reference_host import approvals, permissions, state, turns
from reference_host import host as host_module
from reference_host.approvals import Approvals
from reference_host.errors import HostError
from reference_host.host import Host
from reference_host.permissions import PermissionBroker
from reference_host.rpc import Dispatcher
from reference_host.state import PermissionMode, deadline_for, is_expired
from reference_host.storage import ApprovalRow, SessionRow, Storage


@variant("extends-deadline-on-read")
def _extends_deadline_on_read() -> None:
    # Every read of a session's approvals restarts the 30 minutes of those still pending,
    # in storage too, as a "sliding" deadline would.
    async def extend(host: Host, session_id: str) -> None:
        async with host.storage.transaction() as conn:
            await conn.execute(
                "UPDATE plan_approvals SET expires_at = ? "
                "WHERE session_id = ? AND status = 'pending'",
                (deadline_for(host.clock.now_ms()), session_id),
            )

    def extending(original: Any) -> Any:
        async def read(self: Host, params: dict[str, Any]) -> dict[str, Any]:
            await extend(self, params["sessionId"])
            result: dict[str, Any] = await original(self, params)
            return result

        return read

    for name in ("approval_get", "approval_list", "artifact_read"):
        patch(Host, name, extending(getattr(Host, name)))


@variant("no-active-execution-while-queued")
def _no_active_execution_while_queued() -> None:
    # The approve result shows the session without its execution: activeExecutionId is
    # only set once the execution runs.
    original = Approvals.approve

    async def approve(self: Approvals, session_id: str, approval_id: str, mode: Any) -> Any:
        answer = await original(self, session_id, approval_id, mode)
        return {**answer, "session": {**answer["session"], "activeExecutionId": None}}

    patch(Approvals, "approve", approve)


@variant("failed-approve-is-storage-unavailable")
def _failed_approve_is_storage_unavailable() -> None:
    # An approve whose transaction fails is answered with STORAGE_UNAVAILABLE, not
    # INTERNAL_ERROR (nothing else changes).
    original = Approvals.approve

    async def approve(self: Approvals, session_id: str, approval_id: str, mode: Any) -> Any:
        try:
            return await original(self, session_id, approval_id, mode)
        except HostError as error:
            if error.code != "INTERNAL_ERROR":
                raise
            raise HostError("STORAGE_UNAVAILABLE", "the approval could not be stored") from error

    patch(Approvals, "approve", approve)


@variant("execution-running-announced-twice")
def _execution_running_announced_twice() -> None:
    # Every execution/updated for running is sent twice.
    original = Approvals._notify_execution

    def notify(self: Approvals, row: Any, turn_id: str | None) -> None:
        original(self, row, turn_id)
        if row.execution_state == "running":
            original(self, row, turn_id)

    patch(Approvals, "_notify_execution", notify)


@variant("approves-on-timeout")
def _approves_on_timeout() -> None:
    # At the deadline the pending approval is recorded as approved (mode ask), not expired.
    async def expire(self: Approvals, approval_id: str) -> None:
        host = self.host
        row = await host.storage.get_approval(approval_id)
        if row is None or row.status != "pending":
            return
        if not is_expired(row.expires_at, host.clock.now_ms()):
            return
        approved = replace(
            row, status="approved", permission_mode="ask", decided_at=host.clock.now_ms()
        )
        await host.storage.update_approval(approved)
        host.set_activity(row.session_id, pending_approval_id=None)
        host.notify("approval/updated", {"approval": approvals.approval_wire(approved)})
        await host.publish_session(row.session_id)

    patch(Approvals, "expire", expire)


@variant("reject-grants-mode")
def _reject_grants_mode() -> None:
    # Rejecting also switches the session's permission mode to auto.
    original = Approvals.reject

    async def reject(self: Approvals, session_id: str, approval_id: str) -> dict[str, Any]:
        result = await original(self, session_id, approval_id)
        session = await self.host.require_session(session_id)
        await self.host.storage.update_session(replace(session, permission_mode="auto"))
        await self.host.publish_session(session_id)
        return result

    patch(Approvals, "reject", reject)


@variant("reject-reports-mode")
def _reject_reports_mode() -> None:
    # A rejected approval is reported with a selected permission mode. (Storage v10 cannot
    # hold one: plan_approvals has CHECK (status = 'approved' OR permission_mode IS NULL).)
    original = approvals.approval_wire

    def approval_wire(row: ApprovalRow) -> dict[str, Any]:
        wire = original(row)
        if row.status == "rejected":
            wire["permissionMode"] = "auto"
        return wire

    patch(approvals, "approval_wire", approval_wire)
    patch(host_module, "approval_wire", approval_wire)


@variant("defaults-missing-permission-mode")
def _defaults_missing_permission_mode() -> None:
    # An approve without permissionMode is completed with "ask" before validation.
    original = Dispatcher._call

    async def call(self: Dispatcher, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "approval/approve" and isinstance(params, dict):
            params = {"permissionMode": "ask", **params}
        return await original(self, method, params)

    patch(Dispatcher, "_call", call)


@variant("approves-in-two-commits")
def _approves_in_two_commits() -> None:
    # The session is committed to Agent first; the approval row follows in a later commit,
    # so the approvalCommit fault (before that later commit) leaves the session in Agent.
    original = Approvals.approve

    async def approve(
        self: Approvals, session_id: str, approval_id: str, mode: PermissionMode
    ) -> dict[str, Any]:
        row = await self.require(session_id, approval_id)
        if row.status == "pending" and not is_expired(row.expires_at, self.host.clock.now_ms()):
            session = await self.host.require_session(session_id)
            agent = replace(session, mode="agent", permission_mode=mode)
            await self.host.storage.update_session(agent)
        return await original(self, session_id, approval_id, mode)

    patch(Approvals, "approve", approve)


@variant("double-approve")
def _double_approve() -> None:
    # An already approved approval may be approved again, starting another execution.
    original = approvals.ensure_decidable

    def ensure_decidable(facts: Any, now_ms: int) -> None:
        if facts.status == "approved":
            facts = replace(facts, status="pending")
        original(facts, now_ms)

    patch(approvals, "ensure_decidable", ensure_decidable)
    original_approve = approvals.Approvals.approve

    async def approve(self: Any, session_id: str, approval_id: str, mode: str) -> Any:
        # ... and the host forgets the execution it is already running.
        self.host.set_activity(session_id, active_execution_id=None)
        return await original_approve(self, session_id, approval_id, mode)

    patch(approvals.Approvals, "approve", approve)


@variant("ignores-permission-mode")
def _ignores_permission_mode() -> None:
    # The session and the approval show the chosen mode, but the execution turn runs as auto.
    execution_turns: set[str] = set()
    original_start = turns.TurnRunner.start
    original_run_call = turns.TurnRunner._run_call

    async def start(
        self: turns.TurnRunner, session: SessionRow, kind: str, *args: Any, **kw: Any
    ) -> str:
        turn_id = await original_start(self, session, kind, *args, **kw)
        if kind == "execution":
            execution_turns.add(turn_id)
        return turn_id

    async def run_call(
        self: turns.TurnRunner, session: SessionRow, turn_id: str, call: Any, unattended: bool
    ) -> turns.CallOutcome:
        if turn_id in execution_turns:
            session = replace(session, permission_mode="auto")
        return await original_run_call(self, session, turn_id, call, unattended)

    patch(turns.TurnRunner, "start", start)
    patch(turns.TurnRunner, "_run_call", run_call)


@variant("keeps-old-permission-mode")
def _keeps_old_permission_mode() -> None:
    # Approval switches the session to Agent but keeps the permission mode it had before.
    approving: dict[str, PermissionMode] = {}
    original_approve = Approvals.approve
    original_write = Storage.write_session

    async def approve(
        self: Approvals, session_id: str, approval_id: str, mode: PermissionMode
    ) -> dict[str, Any]:
        approving[session_id] = (await self.host.require_session(session_id)).permission_mode
        try:
            return await original_approve(self, session_id, approval_id, mode)
        finally:
            approving.pop(session_id, None)

    async def write_session(conn: aiosqlite.Connection, session: SessionRow) -> None:
        if session.id in approving:
            session = replace(session, permission_mode=approving[session.id])
        await original_write(conn, session)

    patch(Approvals, "approve", approve)
    patch(Storage, "write_session", staticmethod(write_session))


def _replace_wire(change: Any) -> None:
    """Report every approval through ``change(row, wire)`` (list, get, notifications)."""
    original = approvals.approval_wire

    def approval_wire(row: ApprovalRow) -> dict[str, Any]:
        wire = original(row)
        change(row, wire)
        return wire

    patch(approvals, "approval_wire", approval_wire)
    patch(host_module, "approval_wire", approval_wire)


@variant("card-shows-title-as-question")
def _card_shows_title_as_question() -> None:
    # The approval card's question field is filled from the title.
    _replace_wire(lambda row, wire: wire.update(question=row.title))


@variant("approve-answers-pending-approval")
def _approve_answers_pending_approval() -> None:
    # The approve response carries the approval as it was read before the decision.
    original = Approvals.approve

    async def approve(
        self: Approvals, session_id: str, approval_id: str, mode: PermissionMode
    ) -> dict[str, Any]:
        before = await self.host.storage.get_approval(approval_id)
        result = await original(self, session_id, approval_id, mode)
        assert before is not None
        return {**result, "approval": approvals.approval_wire(before)}

    patch(Approvals, "approve", approve)


@variant("approve-answers-plan-session")
def _approve_answers_plan_session() -> None:
    # The approve response carries the session as it was before the approval (Plan).
    original = Approvals.approve

    async def approve(
        self: Approvals, session_id: str, approval_id: str, mode: PermissionMode
    ) -> dict[str, Any]:
        before = self.host.session_wire(await self.host.require_session(session_id))
        result = await original(self, session_id, approval_id, mode)
        return {**result, "session": before}

    patch(Approvals, "approve", approve)


@variant("approve-answers-running")
def _approve_answers_running() -> None:
    # The approve response is read back after the execution turn started: not queued.
    original = Approvals.approve

    async def approve(
        self: Approvals, session_id: str, approval_id: str, mode: PermissionMode
    ) -> dict[str, Any]:
        result = await original(self, session_id, approval_id, mode)
        wire = dict(result["approval"])
        if wire["executionState"] == "queued":
            wire["executionState"] = "running"
        return {**result, "approval": wire}

    patch(Approvals, "approve", approve)


@variant("request-changes-as-reject")
def _request_changes_as_reject() -> None:
    # The pre-ADR request-changes action is kept as an alias of reject.
    original = Dispatcher._call

    async def call(self: Dispatcher, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "approval/requestChanges" and isinstance(params, dict):
            method = "approval/reject"
            params = {k: v for k, v in params.items() if k in ("sessionId", "approvalId")}
        return await original(self, method, params)

    patch(Dispatcher, "_call", call)


@variant("unknown-mode-means-ask")
def _unknown_mode_means_ask() -> None:
    # An approve with a permission mode the host does not know falls back to ask.
    original = Dispatcher._call

    async def call(self: Dispatcher, method: str, params: dict[str, Any]) -> dict[str, Any]:
        known = (None, "ask", "accept-edits", "auto")
        if method == "approval/approve" and params.get("permissionMode") not in known:
            params = {**params, "permissionMode": "ask"}
        return await original(self, method, params)

    patch(Dispatcher, "_call", call)


def _decidable_also(*statuses: str) -> None:
    """Approve and reject treat approvals in ``statuses`` as still pending."""
    original = state.ensure_decidable

    def ensure_decidable(facts: Any, now_ms: int) -> None:
        if facts.status in statuses:
            facts = replace(facts, status="pending")
        original(facts, now_ms)

    patch(approvals, "ensure_decidable", ensure_decidable)


@variant("idempotent-approve")
def _idempotent_approve() -> None:
    # Approving an approved plan again answers success with the approval as it is.
    original = Approvals.approve

    async def approve(
        self: Approvals, session_id: str, approval_id: str, mode: PermissionMode
    ) -> dict[str, Any]:
        row = await self.require(session_id, approval_id)
        if row.status == "approved":
            session = self.host.session_wire(await self.host.require_session(session_id))
            return {"approval": approvals.approval_wire(row), "session": session}
        return await original(self, session_id, approval_id, mode)

    patch(Approvals, "approve", approve)


@variant("approve-acts-on-pending")
def _approve_acts_on_pending() -> None:
    # Approve looks up the session's pending approval instead of the one named.
    original = Approvals.approve

    async def approve(
        self: Approvals, session_id: str, approval_id: str, mode: PermissionMode
    ) -> dict[str, Any]:
        pending = self.host.activity_of(session_id).pending_approval_id
        return await original(self, session_id, pending or approval_id, mode)

    patch(Approvals, "approve", approve)


@variant("reject-cancels-approved")
def _reject_cancels_approved() -> None:
    # Rejecting an approved plan withdraws the approval: it becomes rejected.
    original = Approvals.reject

    async def reject(self: Approvals, session_id: str, approval_id: str) -> dict[str, Any]:
        row = await self.require(session_id, approval_id)
        if row.status != "approved":
            return await original(self, session_id, approval_id)
        withdrawn = replace(
            row,
            status="rejected",
            permission_mode=None,
            execution_id=None,
            execution_state=None,
            decided_at=self.host.clock.now_ms(),
        )
        await self.host.storage.update_approval(withdrawn)
        return {"approval": approvals.approval_wire(withdrawn)}

    patch(Approvals, "reject", reject)


@variant("interrupted-can-be-resumed")
def _interrupted_can_be_resumed() -> None:
    # An approval interrupted by a restart may still be approved or rejected.
    _decidable_also("interrupted")


@variant("rejected-can-be-approved")
def _rejected_can_be_approved() -> None:
    # A rejected plan may still be approved: the user "changed their mind".
    _decidable_also("rejected")


@variant("decided-at-in-seconds")
def _decided_at_in_seconds() -> None:
    # decidedAt is recorded in seconds since the epoch, not milliseconds.
    original = approvals._with

    def with_facts(row: ApprovalRow, facts: Any, **extra: Any) -> ApprovalRow:
        if isinstance(extra.get("decided_at"), int):
            extra["decided_at"] //= 1000
        return original(row, facts, **extra)

    patch(approvals, "_with", with_facts)


def _turn_starts() -> dict[str, int]:
    """Record the host clock at the start of every turn."""
    starts: dict[str, int] = {}
    original = turns.TurnRunner.start

    async def start(
        self: turns.TurnRunner, session: SessionRow, kind: str, *args: Any, **kw: Any
    ) -> str:
        now = self.host.clock.now_ms()
        turn_id = await original(self, session, kind, *args, **kw)
        starts[turn_id] = now
        return turn_id

    patch(turns.TurnRunner, "start", start)
    return starts


@variant("created-at-turn-start")
def _created_at_turn_start() -> None:
    # The approval is stamped with the time its Plan turn started, not the submission's.
    starts = _turn_starts()
    original = Approvals.submit

    async def submit(
        self: Approvals, session: SessionRow, turn_id: str, args: dict[str, Any]
    ) -> ApprovalRow:
        clock = self.host.clock
        clock.now_ms = lambda: starts[turn_id]  # type: ignore[method-assign]
        try:
            return await original(self, session, turn_id, args)
        finally:
            del clock.now_ms

    patch(Approvals, "submit", submit)


@variant("deadline-from-turn-start")
def _deadline_from_turn_start() -> None:
    # The 30 minutes are counted from the start of the Plan turn, not from the approval.
    starts = _turn_starts()
    current: dict[str, int] = {}
    original = Approvals.submit

    async def submit(
        self: Approvals, session: SessionRow, turn_id: str, args: dict[str, Any]
    ) -> ApprovalRow:
        current["start"] = starts[turn_id]
        try:
            return await original(self, session, turn_id, args)
        finally:
            current.clear()

    def deadline(created_at_ms: int) -> int:
        return deadline_for(current.get("start", created_at_ms))

    patch(Approvals, "submit", submit)
    patch(approvals, "deadline_for", deadline)


@variant("expires-only-when-read")
def _expires_only_when_read() -> None:
    # No timer: an approval is found expired only when somebody reads it.
    original_submit = Approvals.submit

    async def submit(
        self: Approvals, session: SessionRow, turn_id: str, args: dict[str, Any]
    ) -> ApprovalRow:
        clock = self.host.clock
        clock.call_at = lambda due, callback: None  # type: ignore[assignment, method-assign, return-value]
        try:
            return await original_submit(self, session, turn_id, args)
        finally:
            del clock.call_at

    def expiring(original: Any) -> Any:
        async def read(self: Host, params: dict[str, Any]) -> dict[str, Any]:
            for row in await self.storage.list_approvals(params["sessionId"]):
                await self.approvals.expire(row.id)
            result: dict[str, Any] = await original(self, params)
            return result

        return read

    patch(Approvals, "submit", submit)
    for name in ("approval_get", "approval_list", "session_get", "session_list"):
        patch(Host, name, expiring(getattr(Host, name)))


@variant("expiry-without-code")
def _expiry_without_code() -> None:
    # The expiry is recorded without the canonical PLAN_APPROVAL_TIMEOUT.
    original = Storage.write_approval

    async def write_approval(conn: aiosqlite.Connection, row: ApprovalRow) -> None:
        if row.status == "expired":
            row = replace(row, status_code=None)
        await original(conn, row)

    patch(Storage, "write_approval", staticmethod(write_approval))


@variant("expired-is-not-pending")
def _expired_is_not_pending() -> None:
    # An expired approval is answered like any other decided one: APPROVAL_NOT_PENDING.
    original = state.ensure_decidable

    def ensure_decidable(facts: Any, now_ms: int) -> None:
        if facts.status == "expired":
            raise HostError("APPROVAL_NOT_PENDING", "the approval is no longer pending")
        original(facts, now_ms)

    patch(approvals, "ensure_decidable", ensure_decidable)


@variant("deadline-exclusive")
def _deadline_exclusive() -> None:
    # The approval expires only after expiresAt, not at it.
    def expired(expires_at_ms: int, now_ms: int) -> bool:
        return now_ms > expires_at_ms

    patch(state, "is_expired", expired)
    patch(approvals, "is_expired", expired)


@variant("running-not-stored")
def _running_not_stored() -> None:
    # The running state is announced but never written: storage and reads say queued.
    async def execution_running(self: Approvals, approval_id: str, turn_id: str) -> None:
        row = await self._execution(approval_id)
        running = replace(row, execution_state="running", execution_turn_id=turn_id)
        self._notify_execution(running, turn_id)

    async def execution_finished(self: Approvals, approval_id: str, final: Any) -> None:
        row = await self._execution(approval_id)
        done = replace(row, execution_state=final)
        await self.host.storage.update_approval(done)
        self.host.set_activity(row.session_id, active_execution_id=None)
        self._notify_execution(done, row.execution_turn_id)

    patch(Approvals, "execution_running", execution_running)
    patch(Approvals, "execution_finished", execution_finished)


@variant("execution-stays-active")
def _execution_stays_active() -> None:
    # A completed execution is still named as the session's active execution.
    original = Approvals.execution_finished

    async def execution_finished(self: Approvals, approval_id: str, final: Any) -> None:
        await original(self, approval_id, final)
        row = await self._execution(approval_id)
        self.host.set_activity(row.session_id, active_execution_id=row.execution_id)

    patch(Approvals, "execution_finished", execution_finished)


@variant("execution-left-running-after-planning")
def _execution_left_running_after_planning() -> None:
    # An execution whose turn ended in Plan mode (it submitted a new plan) is never
    # finished: it stays running.
    original = Approvals.execution_finished

    async def execution_finished(self: Approvals, approval_id: str, final: Any) -> None:
        row = await self._execution(approval_id)
        session = await self.host.require_session(row.session_id)
        if session.mode == "plan":
            return
        await original(self, approval_id, final)

    patch(Approvals, "execution_finished", execution_finished)


def _execution_turns() -> set[str]:
    """Record the ids of execution turns."""
    found: set[str] = set()
    original = turns.TurnRunner.start

    async def start(
        self: turns.TurnRunner, session: SessionRow, kind: str, *args: Any, **kw: Any
    ) -> str:
        turn_id = await original(self, session, kind, *args, **kw)
        if kind == "execution":
            found.add(turn_id)
        return turn_id

    patch(turns.TurnRunner, "start", start)
    return found


@variant("execution-without-history")
def _execution_without_history() -> None:
    # The execution turn starts a fresh conversation: only the execution prompt.
    execution_turns = _execution_turns()
    original = turns.TurnRunner._history

    async def history(self: turns.TurnRunner, session_id: str) -> list[dict[str, Any]]:
        turn_id = self.host.activity_of(session_id).active_turn_id
        if turn_id not in execution_turns:
            found: list[dict[str, Any]] = await original(self, session_id)
            return found
        entries = await self.host.storage.transcript(session_id)
        return [content for _seq, turn, _role, content, _at in entries if turn == turn_id]

    patch(turns.TurnRunner, "_history", history)


@variant("execution-runs-in-plan-session")
def _execution_runs_in_plan_session() -> None:
    # The execution turn is started with the session object read before the approval,
    # still in Plan mode.
    original_start = turns.TurnRunner.start

    async def start(
        self: turns.TurnRunner, session: SessionRow, kind: str, *args: Any, **kw: Any
    ) -> str:
        if kind == "execution":
            session = replace(session, mode="plan")
        return await original_start(self, session, kind, *args, **kw)

    patch(turns.TurnRunner, "start", start)


def _execution_prompt(build: Any) -> None:
    patch(approvals, "_execution_prompt", build)


@variant("execution-prompt-without-markdown")
def _execution_prompt_without_markdown() -> None:
    # The execution prompt names the artifact but leaves its content to the model to read.
    _execution_prompt(
        lambda row, content: f"Carry out the approved plan {row.artifact_path}; read it first."
    )


@variant("execution-prompt-truncated")
def _execution_prompt_truncated() -> None:
    # The execution prompt carries only a preview of the plan: its first 32 bytes.
    _execution_prompt(
        lambda row, content: (
            f"Carry out the approved plan {row.artifact_path}:\n\n"
            f"{content[:32].decode('utf-8', 'ignore')}"
        )
    )


@variant("permissions-only-in-execution")
def _permissions_only_in_execution() -> None:
    # The chosen permission mode governs the execution only; later prompts run as auto.
    execution_turns = _execution_turns()
    original = turns.TurnRunner._run_call

    async def run_call(
        self: turns.TurnRunner, session: SessionRow, turn_id: str, call: Any, unattended: bool
    ) -> turns.CallOutcome:
        if turn_id not in execution_turns:
            session = replace(session, permission_mode="auto")
        return await original(self, session, turn_id, call, unattended)

    patch(turns.TurnRunner, "_run_call", run_call)


@variant("accept-edits-as-auto")
def _accept_edits_as_auto() -> None:
    # accept-edits lets commands run without asking too.
    original = permissions.needs_permission

    def needs_permission(permission_mode: str, tool: str) -> bool:
        if permission_mode == "accept-edits":
            return False
        return original(permission_mode, tool)

    patch(turns, "needs_permission", needs_permission)


@variant("denied-reported-as-error")
def _denied_reported_as_error() -> None:
    # A call the user denied is reported with status error instead of denied.
    original = turns._failure

    def failure(error: HostError) -> turns.CallOutcome:
        outcome = original(error)
        if error.code == "PERMISSION_DENIED":
            return replace(outcome, status="error")
        return outcome

    patch(turns, "_failure", failure)


@variant("permission-answered-twice")
def _permission_answered_twice() -> None:
    # An answer to a question that is already answered (or unknown) is silently ignored.
    original = PermissionBroker.respond

    def respond(self: PermissionBroker, request_id: str, decision: str) -> None:
        try:
            original(self, request_id, decision)
        except HostError:
            return

    patch(PermissionBroker, "respond", respond)


@variant("list-hides-pending-approval")
def _list_hides_pending_approval() -> None:
    # session/list reports no pending approval; only session/get does.
    original = Host.session_list

    async def session_list(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await original(self, params)
        return {"sessions": [{**s, "pendingApprovalId": None} for s in result["sessions"]]}

    patch(Host, "session_list", session_list)


@variant("expires-at-relative")
def _expires_at_relative() -> None:
    # The approval card shows the time left (30 minutes) instead of the absolute expiry.
    _replace_wire(lambda row, wire: wire.update(expiresAt=row.expires_at - row.created_at))


@variant("deadline-shown-from-now")
def _deadline_shown_from_now() -> None:
    # A pending approval is reported as expiring 30 minutes after the moment it is read.
    host_clock: dict[str, Any] = {}
    original_init = Host.__init__

    def init(self: Host, *args: Any, **kw: Any) -> None:
        original_init(self, *args, **kw)
        host_clock["clock"] = self.clock

    def change(row: ApprovalRow, wire: dict[str, Any]) -> None:
        if row.status == "pending" and "clock" in host_clock:
            wire["expiresAt"] = deadline_for(host_clock["clock"].now_ms())

    patch(Host, "__init__", init)
    _replace_wire(change)


@variant("reject-answers-pending-approval")
def _reject_answers_pending_approval() -> None:
    # The reject response carries the approval as it was read before the decision.
    original = Approvals.reject

    async def reject(self: Approvals, session_id: str, approval_id: str) -> dict[str, Any]:
        before = await self.host.storage.get_approval(approval_id)
        await original(self, session_id, approval_id)
        assert before is not None
        return {"approval": approvals.approval_wire(before)}

    patch(Approvals, "reject", reject)


@variant("approves-beside-ending-execution")
def _approves_beside_ending_execution() -> None:
    # An execution that submitted a new plan winds down slowly, and approve checks only
    # that the plan is pending: it neither waits for the earlier execution nor refuses.
    original_finished = Approvals.execution_finished

    async def settle(self: turns.TurnRunner, session_id: str, turn_id: str | None) -> None:
        return None

    async def execution_finished(self: Approvals, approval_id: str, final: Any) -> None:
        row = await self._execution(approval_id)
        if (await self.host.require_session(row.session_id)).mode == "plan":
            await asyncio.sleep(0.5)
        await original_finished(self, approval_id, final)

    original_approve = Approvals.approve

    async def approve(
        self: Approvals, session_id: str, approval_id: str, mode: PermissionMode
    ) -> dict[str, Any]:
        self.host.set_activity(session_id, active_execution_id=None)
        return await original_approve(self, session_id, approval_id, mode)

    patch(turns.TurnRunner, "settle", settle)
    patch(Approvals, "execution_finished", execution_finished)
    patch(Approvals, "approve", approve)


@variant("cancelled-execution-left-running")
def _cancelled_execution_left_running() -> None:
    # Only a completed execution turn is recorded: one that was cancelled leaves its
    # execution running and the session busy for ever.
    original = Approvals.execution_finished

    async def execution_finished(self: Approvals, approval_id: str, final: Any) -> None:
        if final == "completed":
            await original(self, approval_id, final)

    patch(Approvals, "execution_finished", execution_finished)


# R4.7: execution/updated leaves turnId null although the execution's turn runs.
@variant("execution-update-without-turn")
def _execution_update_without_turn() -> None:
    original = Approvals._notify_execution

    def notify(self: Approvals, row: ApprovalRow, turn_id: str | None) -> None:
        original(self, row, None)

    patch(Approvals, "_notify_execution", notify)


# R4.7: execution/updated names the Plan turn that submitted the plan, not the execution's.
@variant("execution-update-names-plan-turn")
def _execution_update_names_plan_turn() -> None:
    original = Approvals._notify_execution

    def notify(self: Approvals, row: ApprovalRow, turn_id: str | None) -> None:
        original(self, row, row.turn_id if turn_id is not None else None)

    patch(Approvals, "_notify_execution", notify)


@variant("approval-session-filled-in-when-unknown")
def _approval_session_filled_in_when_unknown() -> None:
    # P34: approval ids are unique host-wide, so a request naming an approval and a
    # session the host does not have is served on the approval's own session instead of
    # being refused: a client that names no session of this host decides or reads a plan.
    def filled_in(handler: Any) -> Any:
        async def serve(self: Host, params: dict[str, Any]) -> dict[str, Any]:
            if await self.storage.get_session(params["sessionId"]) is None:
                row = await self.storage.get_approval(params["approvalId"])
                if row is not None:
                    params = {**params, "sessionId": row.session_id}
            result: dict[str, Any] = await handler(self, params)
            return result

        return serve

    for name in ("approval_get", "approval_approve", "approval_reject", "artifact_read"):
        patch(Host, name, filled_in(getattr(Host, name)))


@variant("cancel-ends-queued-execution-session-still-busy")
def _cancel_ends_queued_execution_session_still_busy() -> None:
    # R4.5 / R5.6: a cancel beside a queued execution interrupts it (the host's choice),
    # recording and announcing it interrupted, but the session's own record of the active
    # execution is left as it was: the session still reports it, and refuses changes.
    session_cancel = Host.session_cancel

    async def cancel(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await session_cancel(self, params)
        session_id = params["sessionId"]
        execution_id = self.activity_of(session_id).active_execution_id
        if result["turnId"] is None and execution_id:
            for row in await self.storage.list_approvals(session_id):
                if row.execution_id == execution_id and row.execution_state == "queued":
                    ended = replace(row, execution_state="interrupted")
                    await self.storage.update_approval(ended)
                    self.approvals._notify_execution(ended, None)
        return result

    patch(Host, "session_cancel", cancel)


CASES = [
    BrokenCase(
        "execution-update-without-turn",
        "execution",
        "queued_runs_and_completes",
        "R4.7",
        "the execution's turn is",
    ),
    BrokenCase(
        "execution-update-names-plan-turn",
        "execution",
        "queued_runs_and_completes",
        "R4.7",
        "the execution's turn is",
    ),
    BrokenCase(
        "approval-list-newest-first",
        "deadline",
        "after_expiry_a_new_plan_can_be_submitted",
        "R7.2",
        "lists an approval created at",
        label="oldest-first",
    ),
    BrokenCase(
        "cancelled-execution-left-running",
        "execution",
        "execution_whose_turn_is_cancelled",
        "R4.5",
        "no execution/updated notification matched",
        slow=True,
    ),
    BrokenCase(
        "failed-approve-is-storage-unavailable",
        "approval",
        "failure_while_approving",
        "R4.6",
        "expected INTERNAL_ERROR",
    ),
    BrokenCase(
        "no-active-execution-while-queued",
        "execution",
        "queued_runs_and_completes",
        "C4",
        "activeExecutionId",
    ),
    BrokenCase(
        "execution-running-announced-twice",
        "execution",
        "queued_runs_and_completes",
        "R4.5",
        "the execution was announced as",
    ),
    BrokenCase(
        "extends-deadline-on-read",
        "deadline",
        "opening_the_plan_again",
        "R3.12",
        "the deadline moved",
        label="on-opening",
    ),
    BrokenCase(
        "extends-deadline-on-read",
        "deadline",
        "reloaded_client_sees_the_original_deadline",
        "R3.10",
        "the deadline moved",
        label="on-reload",
    ),
    BrokenCase(
        "approves-on-timeout",
        "deadline",
        "plan_expires_when_the_time_is_up",
        "R3.11",
        "no expiry was announced",
    ),
    BrokenCase(
        "reject-grants-mode",
        "approval",
        "rejecting_keeps_the_session_in_plan",
        "R3.6",
        "permission mode changed from ask to auto",
    ),
    BrokenCase(
        "reject-reports-mode",
        "approval",
        "rejecting_keeps_the_session_in_plan",
        "R3.6",
        "the approval selects permission mode auto",
    ),
    BrokenCase(
        "defaults-missing-permission-mode",
        "approval",
        "approving_without_a_permission_mode",
        "R3.5",
        "to refuse",
    ),
    BrokenCase(
        "approves-in-two-commits",
        "approval",
        "failure_while_approving",
        "R4.6",
        "the session left Plan",
    ),
    BrokenCase(
        "double-approve",
        "approval",
        "two_approvals_sent_at_once",
        "R4.4",
        # The second approval gets past the host's checks; storage then refuses a second
        # active turn, so it fails with INTERNAL_ERROR instead of APPROVAL_NOT_PENDING.
        "the second approval failed with INTERNAL_ERROR",
    ),
    BrokenCase(
        "keeps-old-permission-mode",
        "approval",
        "approving_with_auto_switches",
        "R4.6",
        "permission mode is ask",
    ),
    # Write runs without asking, so the wait for the permission question runs out first.
    BrokenCase(
        "ignores-permission-mode",
        "execution",
        "with_ask_a_file_change_waits",
        "P7",
        "Write ran without asking for permission",
        slow=True,
    ),
    BrokenCase(
        "card-shows-title-as-question",
        "approval",
        "pending_approval_shows_its_title",
        "R3.1",
        "the question is 'Add caching'",
    ),
    BrokenCase(
        "approve-answers-pending-approval",
        "approval",
        "approving_with_ask_switches",
        "R7.2",
        "the approve response shows pending",
    ),
    BrokenCase(
        "approve-answers-plan-session",
        "approval",
        "approving_with and accept-edits",
        "C4",
        "the approve response shows the session",
    ),
    BrokenCase(
        "approve-answers-running",
        "approval",
        "approving_with_auto_switches",
        "R4.6",
        "the approve response shows the execution running, not queued",
    ),
    BrokenCase(
        "request-changes-as-reject",
        "approval",
        "no_way_to_ask_for_changes",
        "R3.3",
        "expected the host to refuse",
    ),
    BrokenCase(
        "unknown-mode-means-ask",
        "approval",
        "approving_with_an_unknown_permission_mode",
        "R3.4",
        "expected the host to refuse",
    ),
    BrokenCase(
        "idempotent-approve",
        "approval",
        "approved_plan_cannot_be_approved_again",
        "R3.8",
        "expected the host to refuse",
    ),
    BrokenCase(
        "approve-acts-on-pending",
        "approval",
        "approving_an_earlier_rejected_plan",
        "R3.8",
        "expected the host to refuse",
    ),
    BrokenCase(
        "reject-cancels-approved",
        "approval",
        "approved_plan_cannot_be_rejected",
        "R4.4",
        "expected the host to refuse",
    ),
    BrokenCase(
        "interrupted-can-be-resumed",
        "approval",
        "interrupted_by_a_restart_cannot_be_approved",
        "R4.4",
        "expected the host to refuse",
    ),
    BrokenCase(
        "rejected-can-be-approved",
        "approval",
        "rejected_plan_cannot_be_approved",
        "C6",
        "expected the host to refuse",
    ),
    BrokenCase(
        "decided-at-in-seconds",
        "approval",
        "rejecting_keeps_the_session_in_plan",
        "R4.4",
        "but the host clock read",
    ),
    # The variant of the session-boundaries module: the idle check forgets the pending
    # approval, so a second plan can be asked for.
    BrokenCase(
        "prompt-while-pending",
        "approval",
        "another_plan_cannot_be_asked_for",
        "R4.8",
        "expected the host to refuse",
        label="second-plan",
    ),
    BrokenCase(
        "list-hides-pending-approval",
        "approval",
        "reloaded_client_can_still_approve",
        "C2",
        "the session shows no pending approval",
    ),
    BrokenCase(
        "created-at-turn-start",
        "deadline",
        "deadline_is_30_minutes_after",
        "R3.9",
        "when the model submitted the plan",
    ),
    BrokenCase(
        "deadline-from-turn-start",
        "deadline",
        "deadline_is_30_minutes_after",
        "R3.9",
        "the deadline is 1380000 ms after creation",
    ),
    # No timer fires, so the wait for the expiry notification runs out first.
    BrokenCase(
        "expires-only-when-read",
        "deadline",
        "plan_expires_when_the_time_is_up",
        "R3.11",
        "the host did not expire the approval by itself",
        slow=True,
    ),
    BrokenCase(
        "expiry-without-code",
        "deadline",
        "plan_expires_when_the_time_is_up",
        "R3.11",
        "the expiry is recorded as",
    ),
    BrokenCase(
        "expired-is-not-pending",
        "deadline",
        "approving_when_the_clock_shows_exactly",
        "P14",
        "expected PLAN_APPROVAL_TIMEOUT",
        label="at-the-deadline",
    ),
    BrokenCase(
        "expired-is-not-pending",
        "deadline",
        "expired_plan_cannot_be_rejected",
        "P14",
        "expected PLAN_APPROVAL_TIMEOUT",
        label="afterwards",
    ),
    BrokenCase(
        "deadline-exclusive",
        "deadline",
        "rejecting_when_the_clock_shows_exactly",
        "P14",
        "expected the host to refuse",
    ),
    BrokenCase(
        "running-not-stored",
        "execution",
        "approved_plan_is_queued_runs_and_completes",
        "R4.5",
        "while the model works the execution is reported queued",
    ),
    BrokenCase(
        "execution-stays-active",
        "execution",
        "approved_plan_is_queued_runs_and_completes",
        "R4.5",
        "the session still runs",
    ),
    BrokenCase(
        "execution-without-history",
        "execution",
        "same_agent_carries_out_the_plan",
        "R4.7",
        "the execution turn lacks the Plan conversation",
    ),
    BrokenCase(
        "execution-runs-in-plan-session",
        "execution",
        "same_agent_carries_out_the_plan",
        "R4.7",
        "the execution turn ran in plan mode",
    ),
    BrokenCase(
        "execution-prompt-without-markdown",
        "execution",
        "execution_starts_from_the_approved_plan",
        "P15",
        "the model was not given the plan's full content",
    ),
    BrokenCase(
        "execution-prompt-truncated",
        "execution",
        "execution_starts_from_the_approved_plan",
        "P15",
        "the model was not given the plan's full content",
    ),
    BrokenCase(
        "execution-left-running-after-planning",
        "execution",
        "plan_made_during_an_execution",
        "R4.9",
        "the earlier execution is still running after its turn ended",
        slow=True,
    ),
    # The later Write runs at once, so the wait for the permission question runs out first.
    BrokenCase(
        "permissions-only-in-execution",
        "execution",
        "with_ask_a_later_file_change",
        "P7",
        "Write ran without asking for permission",
        slow=True,
    ),
    BrokenCase(
        "accept-edits-as-auto",
        "execution",
        "commands_still_ask",
        "P7",
        "Bash ran without asking for permission",
        slow=True,
    ),
    BrokenCase(
        "denied-reported-as-error",
        "execution",
        "with_ask_a_denied_file_change",
        "P7",
        "has status error, not denied",
    ),
    BrokenCase(
        "permission-answered-twice",
        "execution",
        "answered_permission_question_cannot_be_answered_again",
        "P7",
        "expected the host to refuse",
    ),
    BrokenCase(
        "expires-at-relative",
        "approval",
        "pending_approval_shows_its_title",
        "R3.1",
        "is not the absolute time 30 minutes after",
    ),
    BrokenCase(
        "deadline-shown-from-now",
        "deadline",
        "reloaded_client_sees_the_original_deadline",
        "R3.10",
        "the deadline moved",
        label="on-reload",
    ),
    BrokenCase(
        "deadline-shown-from-now",
        "deadline",
        "opening_the_plan_again",
        "R3.12",
        "the deadline moved",
        label="on-opening",
    ),
    BrokenCase(
        "reject-answers-pending-approval",
        "approval",
        "rejecting_keeps_the_session_in_plan",
        "R7.2",
        "the reject response shows pending",
    ),
    BrokenCase(
        "approves-beside-ending-execution",
        "execution",
        "plan_made_during_an_execution",
        "R4.9",
        "expected success, but the host refused",
    ),
    BrokenCase(
        "approval-session-filled-in-when-unknown",
        "isolation",
        "never_made and approve",
        "P34",
        "expected the host to refuse",
        label="approve",
    ),
    BrokenCase(
        "approval-session-filled-in-when-unknown",
        "isolation",
        "never_made and reject",
        "P34",
        "expected the host to refuse",
        label="reject",
    ),
    BrokenCase(
        "approval-session-filled-in-when-unknown",
        "isolation",
        "never_made and open",
        "P34",
        "expected the host to refuse",
        label="open",
    ),
    BrokenCase(
        "approval-session-filled-in-when-unknown",
        "isolation",
        "never_made and read",
        "P34",
        "expected the host to refuse",
        label="read",
    ),
    BrokenCase(
        "cancel-ends-queued-execution-session-still-busy",
        "execution",
        "waits_in_the_queue",
        "R4.5",
        "but the session still reports",
    ),
]
