"""Broken hosts: approval."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import aiosqlite

from hosts.registry import BrokenCase, patch, variant
from reference_host import approvals, turns
from reference_host import host as host_module
from reference_host.approvals import Approvals
from reference_host.host import Host
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
        setattr(Host, name, extending(getattr(Host, name)))


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

    approvals.approval_wire = approval_wire
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

    approvals.ensure_decidable = ensure_decidable
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


CASES = [
    BrokenCase(
        "extends-deadline-on-read",
        "deadline",
        "reading_the_approval_again",
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
        "approving_switches_the_session_to_agent and auto",
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
]
