"""Plan approvals: submission, the absolute deadline, approve, reject, execution state."""

from __future__ import annotations

import asyncio
import base64
import sqlite3
from dataclasses import replace
from typing import Any

from reference_host import state
from reference_host.artifacts import (
    discard_artifact,
    encode_markdown,
    read_verified,
    write_artifact,
)
from reference_host.errors import HostError
from reference_host.ports import HostCore
from reference_host.state import (
    ApprovalFacts,
    ExecutionState,
    PermissionMode,
    deadline_for,
    ensure_decidable,
    is_expired,
)
from reference_host.storage import ApprovalRow, SessionRow

TIMEOUT_CODE = "PLAN_APPROVAL_TIMEOUT"


def approval_wire(row: ApprovalRow) -> dict[str, Any]:
    """The protocol ``Approval`` object."""
    return {
        "approvalId": row.id,
        "sessionId": row.session_id,
        "turnId": row.turn_id,  # None only for an approval migrated from v8
        "title": row.title,
        "question": row.question,
        "artifact": _artifact_wire(row),
        "createdAt": row.created_at,
        "expiresAt": row.expires_at,
        "status": row.status,
        "statusCode": row.status_code,
        "decidedAt": row.decided_at,
        "permissionMode": row.permission_mode,
        "executionId": row.execution_id,
        "executionState": row.execution_state,
    }


def _artifact_wire(row: ApprovalRow) -> dict[str, Any] | None:
    if row.artifact_path is None or row.artifact_sha256 is None or row.artifact_bytes is None:
        return None  # a v8 approval had no artifact
    return {
        "path": row.artifact_path,
        "sha256": row.artifact_sha256,
        "byteSize": row.artifact_bytes,
    }


def _facts(row: ApprovalRow) -> ApprovalFacts:
    return ApprovalFacts(
        status=row.status,
        expires_at=row.expires_at,
        permission_mode=row.permission_mode,
        execution_id=row.execution_id,
        execution_state=row.execution_state,
    )


def _with(row: ApprovalRow, facts: ApprovalFacts, **extra: Any) -> ApprovalRow:
    """``row`` carrying the state machine's decision ``facts``."""
    return replace(
        row,
        status=facts.status,
        permission_mode=facts.permission_mode,
        execution_id=facts.execution_id,
        execution_state=facts.execution_state,
        **extra,
    )


def _require_text(args: dict[str, Any], field: str) -> str:
    value = args[field]
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise HostError("INVALID_TOOL_INPUT", f"{field} is not valid Unicode") from exc
    return str(value)


class Approvals:
    """Owns every change to plan_approvals rows."""

    def __init__(self, host: HostCore) -> None:
        self.host = host

    # -- submission (§1, §2) ------------------------------------------------------------

    async def submit(self, session: SessionRow, turn_id: str, args: dict[str, Any]) -> ApprovalRow:
        """Write the artifact, then commit the pending approval row, then announce it."""
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
        except sqlite3.Error as exc:  # e.g. the disk filled up between file and row
            await asyncio.to_thread(
                discard_artifact, session.workspace_root, artifact.relative_path
            )
            raise HostError("TOOL_FAILED", f"the approval could not be recorded: {exc}") from exc
        host.set_activity(session.id, pending_approval_id=row.id)
        host.clock.call_at(row.expires_at, lambda: self.expire(row.id))
        host.notify("approval/updated", {"approval": approval_wire(row)})
        # session/get shows the pending approval from now on, while the turn still ends
        await host.publish_session(session.id)
        return row

    # -- reading ------------------------------------------------------------------------

    async def require(self, session_id: str, approval_id: str) -> ApprovalRow:
        """The approval if it belongs to the session, else APPROVAL_NOT_FOUND."""
        await self.host.require_session(session_id)
        row = await self.host.storage.get_approval(approval_id)
        if row is None or row.session_id != session_id:
            raise HostError(
                "APPROVAL_NOT_FOUND", f"session {session_id!r} has no approval {approval_id!r}"
            )
        return row

    async def verified_content(self, session: SessionRow, row: ApprovalRow) -> bytes:
        """The artifact's bytes, re-read and checked against the recorded size and SHA-256
        (ARTIFACT_MODIFIED, ARTIFACT_UNREADABLE otherwise)."""
        if (
            session.workspace_root is None
            or row.artifact_path is None
            or row.artifact_sha256 is None
            or row.artifact_bytes is None
        ):
            raise HostError("ARTIFACT_UNREADABLE", "this approval has no artifact")
        return await asyncio.to_thread(
            read_verified,
            session.workspace_root,
            row.artifact_path,
            row.artifact_sha256,
            row.artifact_bytes,
        )

    async def read_artifact(self, row: ApprovalRow) -> dict[str, Any]:
        """The artifact's exact bytes, only when they still match the record."""
        session = await self.host.require_session(row.session_id)
        content = await self.verified_content(session, row)
        return {
            "approvalId": row.id,
            "path": row.artifact_path,
            "contentBase64": base64.b64encode(content).decode("ascii"),
            "sha256": row.artifact_sha256,
            "byteSize": row.artifact_bytes,
        }

    # -- the deadline (§3) --------------------------------------------------------------

    async def expire(self, approval_id: str) -> None:
        """Record expiry with PLAN_APPROVAL_TIMEOUT if the approval is still pending."""
        host = self.host
        row = await host.storage.get_approval(approval_id)
        if row is None or row.status != "pending":
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

    async def _ensure_decidable(self, row: ApprovalRow) -> None:
        now = self.host.clock.now_ms()
        if row.status == "pending" and is_expired(row.expires_at, now):
            await self.expire(row.id)  # the timer may not have fired yet
        ensure_decidable(_facts(row), now)

    # -- decisions (§3, §4) -------------------------------------------------------------

    async def approve(
        self, session_id: str, approval_id: str, mode: PermissionMode
    ) -> dict[str, Any]:
        """One transaction: session -> Agent with ``mode``, execution queued; then run it."""
        host = self.host
        row = await self.require(session_id, approval_id)
        await host.turns.settle(session_id, row.turn_id)
        await self._ensure_decidable(row)
        activity = host.activity_of(session_id)
        if activity.active_execution_id is not None:
            raise HostError("EXECUTION_ACTIVE", "another execution is queued or running")
        session = await host.require_session(session_id)
        # Checked before anything commits: a changed or unreadable artifact leaves the
        # approval pending and the session as it is. The checked bytes are what runs.
        content = await self.verified_content(session, row)
        now = host.clock.now_ms()
        approved = _with(row, state.approve(_facts(row), mode, host.new_id("exe")), decided_at=now)
        agent = replace(session, mode="agent", permission_mode=mode, updated_at=now)
        async with host.storage.transaction() as conn:
            await host.storage.write_approval(conn, approved)
            await host.storage.write_session(conn, agent)
            if host.faults.take("approvalCommit"):
                raise HostError("INTERNAL_ERROR", "injected failure before the approval commit")
        host.set_activity(
            session_id, pending_approval_id=None, active_execution_id=approved.execution_id
        )
        host.notify("approval/updated", {"approval": approval_wire(approved)})
        self._notify_execution(approved, None)
        session_wire = await host.publish_session(session_id)
        if not host.faults.take("holdExecution"):
            prompt = _execution_prompt(approved, content)
            try:
                await host.turns.start(agent, "execution", prompt, approved)
            except BaseException:
                # The execution never started: it is interrupted, never left queued with
                # the session busy for good.
                try:
                    await self.execution_finished(approved.id, "interrupted")
                finally:
                    host.set_activity(session_id, active_execution_id=None)
                raise
        return {"approval": approval_wire(approved), "session": session_wire}

    async def reject(self, session_id: str, approval_id: str) -> dict[str, Any]:
        """Terminal; no mode is selected or granted (§3)."""
        host = self.host
        row = await self.require(session_id, approval_id)
        await host.turns.settle(session_id, row.turn_id)
        await self._ensure_decidable(row)
        rejected = _with(row, state.reject(_facts(row)), decided_at=host.clock.now_ms())
        await host.storage.update_approval(rejected)
        host.set_activity(session_id, pending_approval_id=None)
        host.notify("approval/updated", {"approval": approval_wire(rejected)})
        await host.publish_session(session_id)
        return {"approval": approval_wire(rejected)}

    # -- execution state (§4) -----------------------------------------------------------

    async def execution_running(self, approval_id: str, turn_id: str) -> None:
        """queued -> running, when the execution turn starts."""
        row = await self._execution(approval_id)
        assert row.execution_state is not None
        running = replace(
            row,
            execution_state=state.advance_execution(row.execution_state, "running"),
            execution_turn_id=turn_id,
        )
        await self.host.storage.update_approval(running)
        self._notify_execution(running, turn_id)
        self.host.notify("approval/updated", {"approval": approval_wire(running)})

    async def execution_finished(self, approval_id: str, final: ExecutionState) -> None:
        """running -> completed | interrupted, when the execution turn ends."""
        row = await self._execution(approval_id)
        assert row.execution_state is not None
        done = replace(row, execution_state=state.advance_execution(row.execution_state, final))
        await self.host.storage.update_approval(done)
        self.host.set_activity(row.session_id, active_execution_id=None)
        self._notify_execution(done, row.execution_turn_id)
        self.host.notify("approval/updated", {"approval": approval_wire(done)})

    async def _execution(self, approval_id: str) -> ApprovalRow:
        row = await self.host.storage.get_approval(approval_id)
        assert row is not None and row.execution_id is not None
        return row

    def _notify_execution(self, row: ApprovalRow, turn_id: str | None) -> None:
        self.host.notify(
            "execution/updated",
            {
                "sessionId": row.session_id,
                "approvalId": row.id,
                "executionId": row.execution_id,
                "executionState": row.execution_state,
                "turnId": turn_id,
            },
        )


def _execution_prompt(row: ApprovalRow, content: bytes) -> str:
    plan = content.decode("utf-8")
    return (
        f'The user approved the plan "{row.title}" ({row.artifact_path}) with permission '
        f"mode {row.permission_mode}. Carry it out now.\n\n{plan}"
    )
