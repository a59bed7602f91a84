"""What the host's components (approvals, turns, tasks) need of the host and of each other.

Components depend on these protocols, never on ``Host`` itself, so that the import graph
runs one way: ``host`` imports the components, the components import this module.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import httpx

    from reference_host.clock import Clock
    from reference_host.errors import HostError
    from reference_host.options import Faults, HostOptions
    from reference_host.permissions import PermissionBroker
    from reference_host.state import Activity, ExecutionState
    from reference_host.storage import ApprovalRow, SessionRow, Storage

Notify = Callable[[str, dict[str, Any]], None]
"""Sends a notification: method name and params."""

TurnEnded = Callable[[str, "HostError | None"], Awaitable[None]]
"""Called with the outcome and error once a turn has ended and been recorded."""


class TurnControl(Protocol):
    """Starting turns and waiting for one to settle (used by approvals and tasks)."""

    async def start(
        self,
        session: SessionRow,
        kind: str,
        user_text: str,
        approval: ApprovalRow | None = None,
        unattended: bool = False,
        on_end: TurnEnded | None = None,
    ) -> str:
        """Record a new active turn, run it in the background, return its id."""
        ...

    async def settle(self, session_id: str, turn_id: str | None) -> None:
        """Wait for the session's active turn ``turn_id`` to finish."""
        ...


class PlanControl(Protocol):
    """Plan submission and execution bookkeeping (used by the turn runner)."""

    async def submit(self, session: SessionRow, turn_id: str, args: dict[str, Any]) -> ApprovalRow:
        """Write the artifact and commit a pending approval."""
        ...

    async def execution_running(self, approval_id: str, turn_id: str) -> None:
        """queued -> running."""
        ...

    async def execution_finished(self, approval_id: str, final: ExecutionState) -> None:
        """running -> completed | interrupted."""
        ...


class HostCore(Protocol):
    """The shared state and services of one host process."""

    storage: Storage
    clock: Clock
    options: HostOptions
    faults: Faults
    notify: Notify
    permissions: PermissionBroker

    @property
    def approvals(self) -> PlanControl:
        """Plan submission and execution state."""
        ...

    @property
    def turns(self) -> TurnControl:
        """The turn runner."""
        ...

    @property
    def http(self) -> httpx.AsyncClient:
        """The HTTP client used to reach model providers."""
        ...

    def new_id(self, prefix: str) -> str:
        """A fresh opaque identifier."""
        ...

    def activity_of(self, session_id: str) -> Activity:
        """What the session is busy with."""
        ...

    def set_activity(self, session_id: str, **changes: str | None) -> None:
        """Update what the session is busy with."""
        ...

    async def require_session(self, session_id: str) -> SessionRow:
        """The stored session, or SESSION_NOT_FOUND."""
        ...

    async def publish_session(self, session_id: str) -> dict[str, Any]:
        """Send ``session/updated`` and return the session's wire form."""
        ...

    async def enter_plan_mode(self, session: SessionRow) -> None:
        """Switch the running turn's session to Plan."""
        ...

    async def default_shell_id(self) -> str | None:
        """The persisted default shell, or the fallback."""
        ...
