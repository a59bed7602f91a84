"""Broken hosts: wire."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hosts.registry import BrokenCase, patch, variant
from reference_host import host as host_module
from reference_host.host import Host
from reference_host.state import ensure_idle_for


@variant("accepts-protocol-8")
def _accepts_protocol_8() -> None:
    original = Host.initialize

    async def initialize(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        return await original(self, {**params, "protocolVersion": 9})

    patch(Host, "initialize", initialize)


@variant("schema-invalid-session")
def _schema_invalid_session() -> None:
    original = Host.session_wire

    def session_wire(self: Host, row: Any) -> dict[str, Any]:
        wire = original(self, row)
        wire["createdAt"] = "2026-01-01T00:00:00Z"  # the contract says epoch milliseconds
        return wire

    patch(Host, "session_wire", session_wire)


@variant("prompt-while-pending")
def _prompt_while_pending() -> None:
    # The idle check forgets the pending approval, so a prompt starts a new turn.
    async def session_prompt(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        activity = replace(self.activity_of(row.id), pending_approval_id=None)
        ensure_idle_for(activity, "a new prompt")
        return {"turnId": await self.turns.start(row, "prompt", params["text"])}

    patch(Host, "session_prompt", session_prompt)


@variant("shell-change-during-turn")
def _shell_change_during_turn() -> None:
    # A configuration change that only selects a shell skips the idle check.
    original = Host.session_configure

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        if set(params) != {"sessionId", "shellId"}:
            result: dict[str, Any] = await original(self, params)
            return result
        row = await self.require_session(params["sessionId"])
        if params["shellId"] is not None:
            host_module._require_shell(params["shellId"])
        updated = replace(row, shell_id=params["shellId"], updated_at=self.clock.now_ms())
        await self.storage.update_session(updated)
        return {"session": await self.publish_session(row.id)}

    patch(Host, "session_configure", session_configure)


CASES = [
    BrokenCase("accepts-protocol-8", "handshake", "previous_version", "R7.1", "to refuse"),
    BrokenCase(
        "schema-invalid-session",
        "sessions",
        "starts_in_agent_mode",
        "P5",
        "broke the protocol v9 contract",
    ),
    BrokenCase(
        "prompt-while-pending",
        "turn_boundaries",
        "prompt_while_a_plan_is_pending",
        "R5.7",
        "to refuse",
    ),
    BrokenCase(
        "shell-change-during-turn",
        "turn_boundaries",
        "changing_the_shell_during_a_turn",
        "R5.4",
        "to refuse",
    ),
]
