"""Permission requests: which tool calls ask the user, and waiting for the answer (§3)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from reference_host.errors import HostError
from reference_host.ids import new_id
from reference_host.tools.names import EDIT_TOOLS

Notify = Callable[[str, dict[str, Any]], None]


def needs_permission(permission_mode: str, tool: str) -> bool:
    """ask: Write, Edit and Bash ask; accept-edits: only Bash asks; auto: nothing asks."""
    if permission_mode == "auto":
        return False
    if permission_mode == "accept-edits":
        return tool == "Bash"
    return tool in EDIT_TOOLS or tool == "Bash"


@dataclass
class _Request:
    session_id: str
    answer: asyncio.Future[bool]


class PermissionBroker:
    """Sends ``permission/requested`` and resolves it on ``permission/respond``."""

    def __init__(self, notify: Notify) -> None:
        self._notify = notify
        self._open: dict[str, _Request] = {}

    async def ask(self, session_id: str, turn_id: str, tool: str, tool_input: Any) -> bool:
        """Wait for the user's decision; True means allow."""
        request_id = new_id("perm")
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._open[request_id] = _Request(session_id, answer)
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

    def respond(self, request_id: str, decision: str) -> None:
        """Resolve an open request."""
        request = self._open.get(request_id)
        if request is None or request.answer.done():
            raise HostError(
                "PERMISSION_REQUEST_NOT_FOUND", f"no open permission request {request_id!r}"
            )
        request.answer.set_result(decision == "allow")
