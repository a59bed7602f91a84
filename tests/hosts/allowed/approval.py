"""Allowed variations: what the host chooses about approvals and executions."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from hosts.registry import AllowedCase, patch, rewrite_provider_messages, variant
from reference_host import turns
from reference_host.approvals import Approvals
from reference_host.storage import ApprovalRow

_EXECUTION_PROMPT = 'The user approved the plan "'


def _as_parts(message: Mapping[str, Any], role: str) -> dict[str, Any]:
    content = message["content"]
    return {"role": role, "content": [{"type": "text", "text": content}]}


@variant("system-context-first")
def _system_context_first() -> None:
    # Every provider request starts with a system message of the host's own; the prompt
    # is still the last user message, as given.
    context = {"role": "system", "content": "You work in the user's project."}
    rewrite_provider_messages(lambda messages: [context, *messages])


@variant("plan-in-system-message")
def _plan_in_system_message() -> None:
    # The execution prompt (artifact path and markdown) reaches the model as a system
    # message, and user and system messages carry array-of-parts content: any role and
    # either content form are allowed (P15).
    def resent(message: dict[str, Any]) -> dict[str, Any]:
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, str):
            role = "system" if content.startswith(_EXECUTION_PROMPT) else "user"
            return _as_parts(message, role)
        if message.get("role") == "system" and isinstance(content, str):
            return _as_parts(message, "system")
        return message

    rewrite_provider_messages(lambda messages: [resent(m) for m in messages])


@variant("no-queued-notification")
def _no_queued_notification() -> None:
    # The approve response already says queued; execution/updated starts at running.
    original = Approvals._notify_execution

    def notify(self: Approvals, row: ApprovalRow, turn_id: str | None) -> None:
        if row.execution_state != "queued":
            original(self, row, turn_id)

    patch(Approvals, "_notify_execution", notify)


@variant("expired-decided-at-null")
def _expired_decided_at_null() -> None:
    # An expiry is no decision: an expired approval keeps decidedAt null (the contract
    # leaves it null or a time at or after expiresAt). Written as a misreading for a
    # held-out set, then found allowed; the contract now says so.
    from dataclasses import replace

    from reference_host.approvals import TIMEOUT_CODE, approval_wire
    from reference_host.state import is_expired

    async def expire(self: Approvals, approval_id: str) -> None:
        host = self.host
        row = await host.storage.get_approval(approval_id)
        if row is None or row.status != "pending":
            return
        if not is_expired(row.expires_at, host.clock.now_ms()):
            return
        expired = replace(row, status="expired", status_code=TIMEOUT_CODE, decided_at=None)
        await host.storage.update_approval(expired)
        host.set_activity(row.session_id, pending_approval_id=None)
        host.notify("approval/updated", {"approval": approval_wire(expired)})
        await host.publish_session(row.session_id)

    patch(Approvals, "expire", expire)


@variant("refuses-approve-while-execution-ends")
def _refuses_approve_while_execution_ends() -> None:
    # An execution that submitted a new plan takes a moment to wind down; an approve of
    # that plan meanwhile is refused with EXECUTION_ACTIVE instead of waiting (R4.9).
    original_settle = turns.TurnRunner.settle
    original_finished = Approvals.execution_finished

    async def settle(self: turns.TurnRunner, session_id: str, turn_id: str | None) -> None:
        if self.host.activity_of(session_id).active_execution_id is None:
            await original_settle(self, session_id, turn_id)

    async def execution_finished(self: Approvals, approval_id: str, final: Any) -> None:
        row = await self._execution(approval_id)
        if (await self.host.require_session(row.session_id)).mode == "plan":
            await asyncio.sleep(0.5)
        await original_finished(self, approval_id, final)

    patch(turns.TurnRunner, "settle", settle)
    patch(Approvals, "execution_finished", execution_finished)


CASES = [
    AllowedCase(
        "plan-in-system-message",
        "approval,deadline,execution",
        why="the execution prompt may use any role and array-of-parts content",
    ),
    AllowedCase(
        "system-context-first",
        "scheduled_plan,restart_interruption,sessions,execution",
        why="context of the host's own may go in messages other than the prompt's",
    ),
    AllowedCase(
        "no-queued-notification",
        "approval,execution",
        why="an execution/updated for queued is optional",
    ),
    AllowedCase(
        "expired-decided-at-null",
        "deadline,approval,restart_interruption,artifact_integrity",
        why="an expired approval's decidedAt may be null, or a time at or after expiresAt",
    ),
    AllowedCase(
        "refuses-approve-while-execution-ends",
        "execution",
        "plan_made_during_an_execution",
        why="an approve while the earlier execution is ending may wait or get EXECUTION_ACTIVE",
    ),
]
