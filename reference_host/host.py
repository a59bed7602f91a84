"""The reference host-core: protocol v9 method handlers over storage, clock and state."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

from pi_contract import PROTOCOL_VERSION
from reference_host import shells
from reference_host.approvals import Approvals, approval_wire
from reference_host.clock import Clock, ManualClock
from reference_host.errors import HostError
from reference_host.ids import new_id
from reference_host.options import FAULT_POINTS, OUTPUT_CAP_BYTES, Faults, HostOptions
from reference_host.permissions import PermissionBroker
from reference_host.ports import Notify
from reference_host.rpc import Handler
from reference_host.state import APPROVAL_TTL_MS, Activity, ensure_can_cancel, ensure_idle_for
from reference_host.storage import SessionRow, Storage
from reference_host.tasks import Tasks
from reference_host.validation import MAX_TIMESTAMP
from reference_host.workspace import validate_root

if TYPE_CHECKING:
    import httpx

    from reference_host.turns import TurnRunner

log = logging.getLogger(__name__)

HOST_NAME = "pi-reference-host"
HOST_VERSION = "0.1.0"
DEFAULT_SHELL_KEY = "default_shell_id"


class Host:
    """All protocol handlers of the reference host."""

    def __init__(
        self, storage: Storage, clock: Clock, options: HostOptions, notify: Notify
    ) -> None:
        self.storage = storage
        self.clock = clock
        self.options = options
        self.notify = notify
        self.faults = Faults()
        self.activity: dict[str, Activity] = {}
        self.initialized = False
        self.on_initialized: Callable[[], None] = lambda: None
        self.permissions = PermissionBroker(self._notify_proxy)
        self.approvals = Approvals(self)
        self.tasks = Tasks(self)

    # The turn runner, its tools and the HTTP client are loaded on first use: the first
    # answer (initialize) needs none of them, and importing them is most of a start-up.

    @cached_property
    def turns(self) -> TurnRunner:
        """The turn runner."""
        from reference_host.turns import TurnRunner

        return TurnRunner(self)

    @cached_property
    def http(self) -> httpx.AsyncClient:
        """The HTTP client that reaches model providers (environment proxies ignored)."""
        import httpx

        from reference_host.provider_transport import ProviderTransport

        return httpx.AsyncClient(trust_env=False, transport=ProviderTransport())

    def _notify_proxy(self, method: str, params: dict[str, Any]) -> None:
        self.notify(method, params)

    @staticmethod
    def new_id(prefix: str) -> str:
        """A fresh opaque identifier."""
        return new_id(prefix)

    async def close(self) -> None:
        """Stop background work before the process exits."""
        if "turns" in self.__dict__:
            await self.turns.shutdown()
        if "http" in self.__dict__:
            await self.http.aclose()

    # -- activity -----------------------------------------------------------------------

    def activity_of(self, session_id: str) -> Activity:
        """What the session is busy with."""
        return self.activity.get(session_id, Activity())

    def set_activity(self, session_id: str, **changes: str | None) -> None:
        """Update what the session is busy with."""
        self.activity[session_id] = replace(self.activity_of(session_id), **changes)

    async def publish_session(self, session_id: str) -> dict[str, Any]:
        """Send ``session/updated`` with the session as it is now, and return it."""
        wire = self.session_wire(await self.require_session(session_id))
        self.notify("session/updated", {"session": wire})
        return wire

    async def enter_plan_mode(self, session: SessionRow) -> None:
        """The model's EnterPlanMode: the running turn continues as a Plan turn."""
        await self.storage.update_session(
            replace(session, mode="plan", updated_at=self.clock.now_ms())
        )
        await self.publish_session(session.id)

    def handlers(self) -> dict[str, Handler]:
        """Method name -> handler, including conformance controls only when enabled."""
        table: dict[str, Handler] = {
            "initialize": self.initialize,
            "session/create": self.session_create,
            "session/get": self.session_get,
            "session/list": self.session_list,
            "session/configure": self.session_configure,
            "session/transcript": self.session_transcript,
            "session/prompt": self.session_prompt,
            "session/cancel": self.session_cancel,
            "approval/get": self.approval_get,
            "approval/list": self.approval_list,
            "approval/approve": self.approval_approve,
            "approval/reject": self.approval_reject,
            "artifact/read": self.artifact_read,
            "permission/respond": self.permission_respond,
            "task/create": self.tasks.create,
            "task/list": self.tasks.list,
            "task/update": self.tasks.update,
            "task/delete": self.tasks.delete,
            "task/run": self.tasks.run_now,
            "shell/list": self.shell_list,
            "shell/setDefault": self.shell_set_default,
        }
        if self.options.conformance:
            table |= {
                "conformance/clock/get": self.clock_get,
                "conformance/clock/set": self.clock_set,
                "conformance/clock/advance": self.clock_advance,
                "conformance/fault/arm": self.fault_arm,
            }
        return table

    # -- handshake ----------------------------------------------------------------------

    async def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        """Negotiate protocol version 9."""
        if self.initialized:
            raise HostError("ALREADY_INITIALIZED", "the connection is already initialized")
        if params["protocolVersion"] != PROTOCOL_VERSION:
            raise HostError(
                "UNSUPPORTED_PROTOCOL_VERSION",
                f"this host speaks protocol version {PROTOCOL_VERSION} only, "
                f"not {params['protocolVersion']}",
                {"requested": params["protocolVersion"], "supported": [PROTOCOL_VERSION]},
            )
        self.initialized = True
        self.on_initialized()
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "storageSchemaVersion": await self.storage.user_version(),
            "hostInfo": {"name": HOST_NAME, "version": HOST_VERSION},
            "capabilities": {
                "conformance": self.options.conformance,
                "maxFrameBytes": self.options.max_frame_bytes,
                "maxCommandOutputBytes": OUTPUT_CAP_BYTES,
                "faultInjection": list(FAULT_POINTS) if self.options.conformance else [],
            },
        }

    # -- sessions -----------------------------------------------------------------------

    def session_wire(self, row: SessionRow) -> dict[str, Any]:
        """The protocol ``Session`` object of a stored session."""
        activity = self.activity_of(row.id)
        provider = (
            {"baseUrl": row.provider_base_url, "model": row.model}
            if row.provider_base_url is not None and row.model is not None
            else None
        )
        return {
            "sessionId": row.id,
            "workspaceRoot": row.workspace_root,
            "mode": row.mode,
            "permissionMode": row.permission_mode,
            "provider": provider,
            "shellId": row.shell_id,
            "activeTurnId": activity.active_turn_id,
            "pendingApprovalId": activity.pending_approval_id,
            "activeExecutionId": activity.active_execution_id,
            "createdAt": row.created_at,
        }

    async def require_session(self, session_id: str) -> SessionRow:
        """The stored session, or SESSION_NOT_FOUND."""
        row = await self.storage.get_session(session_id)
        if row is None:
            raise HostError("SESSION_NOT_FOUND", f"no session {session_id!r}")
        return row

    async def session_create(self, params: dict[str, Any]) -> dict[str, Any]:
        """Create a session bound to a workspace root or to none."""
        root = params["workspaceRoot"]
        if root is not None:
            validate_root(root)  # kept as given: reported and used as the same string
        shell_id = params.get("shellId")
        if shell_id is not None:
            _require_shell(shell_id)
        provider = params.get("provider")
        now = self.clock.now_ms()
        row = SessionRow(
            id=new_id("ses"),
            workspace_root=root,
            mode=params.get("mode", "agent"),
            permission_mode=params.get("permissionMode", "ask"),
            provider_base_url=provider["baseUrl"] if provider else None,
            model=provider["model"] if provider else None,
            shell_id=shell_id,
            created_at=now,
            updated_at=now,
        )
        await self.storage.insert_session(row)
        return {"session": self.session_wire(row)}

    async def session_get(self, params: dict[str, Any]) -> dict[str, Any]:
        """Read one session."""
        return {"session": self.session_wire(await self.require_session(params["sessionId"]))}

    async def session_list(self, params: dict[str, Any]) -> dict[str, Any]:
        """Read every session."""
        return {"sessions": [self.session_wire(row) for row in await self.storage.list_sessions()]}

    async def session_configure(self, params: dict[str, Any]) -> dict[str, Any]:
        """Change a session's configuration; only while idle (§5)."""
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
        wire = self.session_wire(updated)
        self.notify("session/updated", {"session": wire})
        return {"session": wire}

    async def session_prompt(self, params: dict[str, Any]) -> dict[str, Any]:
        """Start a turn with the user's prompt (§5: only while idle)."""
        row = await self.require_session(params["sessionId"])
        ensure_idle_for(self.activity_of(row.id), "a new prompt")
        if row.provider_base_url is None or row.model is None:
            raise HostError("PROVIDER_NOT_CONFIGURED", "configure a model provider first")
        turn_id = await self.turns.start(row, "prompt", params["text"])
        return {"turnId": turn_id}

    async def session_cancel(self, params: dict[str, Any]) -> dict[str, Any]:
        """Cancel the active turn, if any."""
        row = await self.require_session(params["sessionId"])
        ensure_can_cancel(self.activity_of(row.id))
        return {"turnId": await self.turns.cancel(row.id)}

    async def approval_get(self, params: dict[str, Any]) -> dict[str, Any]:
        """Read one approval; never moves its deadline (§3)."""
        row = await self.approvals.require(params["sessionId"], params["approvalId"])
        return {"approval": approval_wire(row)}

    async def approval_list(self, params: dict[str, Any]) -> dict[str, Any]:
        """A session's approvals."""
        row = await self.require_session(params["sessionId"])
        return {"approvals": [approval_wire(a) for a in await self.storage.list_approvals(row.id)]}

    async def approval_approve(self, params: dict[str, Any]) -> dict[str, Any]:
        """Approve with an explicit permission mode (§3, §4)."""
        return await self.approvals.approve(
            params["sessionId"], params["approvalId"], params["permissionMode"]
        )

    async def approval_reject(self, params: dict[str, Any]) -> dict[str, Any]:
        """Reject; terminal (§3)."""
        return await self.approvals.reject(params["sessionId"], params["approvalId"])

    async def artifact_read(self, params: dict[str, Any]) -> dict[str, Any]:
        """The artifact's exact bytes."""
        row = await self.approvals.require(params["sessionId"], params["approvalId"])
        return await self.approvals.read_artifact(row)

    async def permission_respond(self, params: dict[str, Any]) -> dict[str, Any]:
        """Answer a permission request."""
        self.permissions.respond(params["requestId"], params["decision"])
        return {}

    async def session_transcript(self, params: dict[str, Any]) -> dict[str, Any]:
        """Read a session's persisted transcript."""
        row = await self.require_session(params["sessionId"])
        entries = [
            {"seq": seq, "turnId": turn, "role": role, "content": content, "createdAt": at}
            for seq, turn, role, content, at in await self.storage.transcript(row.id)
        ]
        return {"entries": entries}

    # -- shells -------------------------------------------------------------------------

    async def default_shell_id(self) -> str | None:
        """The persisted default shell, or the fallback when none was chosen."""
        stored = await self.storage.get_setting(DEFAULT_SHELL_KEY)
        if stored is not None:
            return stored
        fallback = shells.fallback_default()
        return fallback.shell_id if fallback else None

    async def shell_list(self, params: dict[str, Any]) -> dict[str, Any]:
        """The shell catalog and the default shell."""
        return {
            "shells": [shell.to_wire() for shell in shells.catalog()],
            "defaultShellId": await self.default_shell_id(),
        }

    async def shell_set_default(self, params: dict[str, Any]) -> dict[str, Any]:
        """Persist the default shell (§7)."""
        shell = _require_shell(params["shellId"])
        await self.storage.set_setting(DEFAULT_SHELL_KEY, shell.shell_id)
        return {"defaultShellId": shell.shell_id}

    # -- conformance controls -----------------------------------------------------------

    def _manual_clock(self) -> ManualClock:
        if not isinstance(self.clock, ManualClock):
            raise HostError("METHOD_NOT_FOUND", "the clock is controllable only with --conformance")
        return self.clock

    async def clock_get(self, params: dict[str, Any]) -> dict[str, Any]:
        """Read the host clock."""
        return {"now": self.clock.now_ms()}

    async def clock_set(self, params: dict[str, Any]) -> dict[str, Any]:
        """Set the host clock and fire what became due."""
        clock = self._manual_clock()
        return {"now": await clock.set(_within_clock_range(params["now"]))}

    async def clock_advance(self, params: dict[str, Any]) -> dict[str, Any]:
        """Advance the host clock and fire what became due."""
        clock = self._manual_clock()
        return {"now": await clock.set(_within_clock_range(clock.now_ms() + params["ms"]))}

    async def fault_arm(self, params: dict[str, Any]) -> dict[str, Any]:
        """Arm a one-shot fault."""
        self.faults.armed.add(params["fault"])
        return {}


CLOCK_MAX = MAX_TIMESTAMP - APPROVAL_TTL_MS
"""The clock stops short of the last Timestamp, so that every deadline it sets is one."""


def _within_clock_range(now: int) -> int:
    if now > CLOCK_MAX:
        raise HostError(
            "INVALID_PARAMS",
            f"the clock cannot go past {CLOCK_MAX} (the last timestamp minus 30 minutes)",
            {"max": CLOCK_MAX},
        )
    return now


def _require_shell(shell_id: str) -> shells.Shell:
    shell = shells.find(shell_id)
    if shell is None:
        known = [s.shell_id for s in shells.catalog()]
        raise HostError("SHELL_NOT_FOUND", f"no shell {shell_id!r}; known: {known}")
    return shell
