"""A blocking protocol v9 client for synchronous step definitions.

The protocol logic lives in :class:`conformance.connection.Connection`; this module is its
transport. A reader thread feeds the host's output to the connection and wakes whoever
waits; requests are written to the host's stdin. Every wait is bounded; nothing sleeps.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import threading
from collections.abc import Callable, Collection
from typing import Any, Final, Literal, ParamSpec, TypeVar

from pydantic import BaseModel, ValidationError

from conformance.connection import (
    Connection,
    HarnessError,
    Predicate,
    RequestId,
    RpcError,
    WireRecord,
)
from conformance.contract import ContractChecker, Violation
from conformance.drivers import ReportsExit, RunningHost
from conformance.protocol_models import (
    ApprovalApproveParams,
    ApprovalApproveResult,
    ApprovalListResult,
    ApprovalRef,
    ApprovalRejectParams,
    ApprovalResult,
    ArtifactReadResult,
    ClientInfo,
    ClockAdvanceParams,
    ClockResult,
    ClockSetParams,
    Empty,
    FaultArmParams,
    InitializeParams,
    InitializeResult,
    Mode,
    PermissionMode,
    PermissionRespondParams,
    ProviderConfig,
    SessionCancelResult,
    SessionConfigureParams,
    SessionCreateParams,
    SessionListResult,
    SessionPromptParams,
    SessionPromptResult,
    SessionRef,
    SessionResult,
    ShellListResult,
    ShellSetDefaultParams,
    ShellSetDefaultResult,
    TaskCreateParams,
    TaskListResult,
    TaskRef,
    TaskResult,
    TaskRunResult,
    TaskUpdateParams,
    Timestamp,
    TranscriptResult,
)
from pi_contract import PROTOCOL_VERSION

__all__ = [
    "ABSENT",
    "TYPED_METHODS",
    "Absent",
    "HarnessError",
    "HostClient",
    "HostStoppedError",
    "InvalidResultError",
    "Predicate",
    "RpcError",
]

ResultT = TypeVar("ResultT", bound=BaseModel)
P = ParamSpec("P")
R = TypeVar("R")

# How long to let a host that closed its output finish exiting, to report its status.
EXIT_GRACE: Final = 2.0
READ_CHUNK: Final = 64 * 1024


_CLOCK_MOVES: Final = frozenset({"conformance/clock/set", "conformance/clock/advance"})


class HostStoppedError(AssertionError):
    """The host closed its output (or input) while the harness was talking to it.

    ``exit_status`` is the host's exit status when it is known to have exited.
    """

    def __init__(self, message: str, exit_status: int | None = None) -> None:
        super().__init__(message)
        self.exit_status = exit_status


class InvalidResultError(AssertionError):
    """A typed call got a result that does not fit its published model."""


class Absent(enum.Enum):
    """Marks an optional field that is left out (as opposed to sent as null)."""

    ABSENT = "absent"


ABSENT: Final = Absent.ABSENT

# Every request method of protocol v9 and the typed HostClient method that sends it.
TYPED_METHODS: Final = {
    "initialize": "handshake",
    "session/create": "create_session",
    "session/get": "get_session",
    "session/list": "list_sessions",
    "session/configure": "configure_session",
    "session/prompt": "prompt",
    "session/cancel": "cancel",
    "session/transcript": "session_transcript",
    "approval/get": "get_approval",
    "approval/list": "list_approvals",
    "approval/approve": "approve",
    "approval/reject": "reject",
    "artifact/read": "read_artifact",
    "permission/respond": "respond_permission",
    "shell/list": "list_shells",
    "shell/setDefault": "set_default_shell",
    "task/create": "create_task",
    "task/list": "list_tasks",
    "task/update": "update_task",
    "task/delete": "delete_task",
    "task/run": "run_task",
    "conformance/clock/get": "clock_get",
    "conformance/clock/set": "clock_set",
    "conformance/clock/advance": "clock_advance",
    "conformance/fault/arm": "arm_fault",
}


def _given(**fields: Any) -> dict[str, Any]:
    """The optional fields that were given: None (or ABSENT for nullable ones) leaves one out."""
    return {name: value for name, value in fields.items() if value is not None}


def _given_nullable(**fields: Any) -> dict[str, Any]:
    return {name: value for name, value in fields.items() if value is not ABSENT}


def _harness_built(method: Callable[P, R]) -> Callable[P, R]:
    """Params that break their model are the harness's fault, not the host's."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except ValidationError as exc:
            raise HarnessError(
                f"the harness built invalid params in {method.__name__}: {exc}"
            ) from exc

    return wrapper


class HostClient:
    """Talks protocol v9 to one running host.

    ``exit_status`` reports the host's exit status (waiting up to the given seconds), so
    that a stopped host is reported as exited; by default the driver's host provides it.
    """

    def __init__(
        self,
        host: RunningHost,
        timeout: float = 10.0,
        *,
        exit_status: Callable[[float], int | None] | None = None,
        checker: ContractChecker | None = None,
    ) -> None:
        self.host = host
        self.timeout = timeout
        self.connection = Connection(checker)
        if exit_status is None and isinstance(host, ReportsExit):
            exit_status = host.exit_status
        self._exit_status = exit_status
        self._lock = threading.Condition()
        self._write_lock = threading.Lock()
        # (clock reading, notifications received before the answer) of every clock move
        self.clock_moves: list[tuple[int, int]] = []
        self.unanswered = False  # a request of this connection went unanswered in time
        self._reader = threading.Thread(target=self._read, name="host-reader", daemon=True)
        self._reader.start()

    @property
    def checker(self) -> ContractChecker:
        """The contract checker every message goes through."""
        return self.connection.checker

    @property
    def violations(self) -> list[Violation]:
        """Every message from the host that broke the contract, in arrival order."""
        return self.connection.violations

    @property
    def unmatched(self) -> list[dict[str, Any]]:
        """Responses that answered no pending request (id null, unknown or repeated ids)."""
        return self.connection.unmatched

    @property
    def received(self) -> list[Any]:
        """Every JSON value the host sent, in order."""
        return self.connection.received

    # -- reading ------------------------------------------------------------------------

    def _read(self) -> None:
        stream = self.host.from_host
        read = getattr(stream, "read1", stream.read)
        try:
            while True:
                chunk = read(READ_CHUNK)
                if not chunk:
                    break
                with self._lock:
                    self.connection.receive_data(chunk)
                    self._lock.notify_all()
        except (OSError, ValueError):
            pass
        with self._lock:
            self.connection.receive_eof()
            self._lock.notify_all()

    # -- host state ---------------------------------------------------------------------

    def _exited(self) -> int | None:
        return self._exit_status(EXIT_GRACE) if self._exit_status is not None else None

    def _stopped(self, what: str) -> HostStoppedError:
        """The error for a host that went away; says whether and how it exited."""
        status = self._exited()
        if status is not None:
            return HostStoppedError(f"the host exited with status {status} {what}", status)
        return HostStoppedError(f"the host closed its output {what}")

    def _write(self, data: bytes, method: str) -> None:
        with self._write_lock:
            try:
                self.host.to_host.write(data)
                self.host.to_host.flush()
            except (OSError, ValueError) as exc:
                failure = exc
            else:
                return
        # Let the reader take in what the host said before it went (a startup error).
        with self._lock:
            self._lock.wait_for(lambda: self.connection.closed, EXIT_GRACE)
        raise self._stopped(f"before it could receive {method} ({failure})") from failure

    # -- requests -----------------------------------------------------------------------

    def send_raw(self, data: bytes) -> None:
        """Write bytes to the host unchecked (for deliberately malformed input)."""
        with self._lock:
            self.connection.record_sent(data)
        self._write(data, "raw bytes")

    def next_id(self) -> int:
        """A fresh request id."""
        with self._lock:
            return self.connection.next_id()

    def call(
        self, method: str, params: dict[str, Any] | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        """Send a request and return the whole response (result or error)."""
        with self._lock:
            message = self.connection.build_request(method, params)
        return self.call_message(message, timeout)

    def call_ascii(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a request written in ASCII alone, every other character as a JSON escape,
        and return the whole response."""
        with self._lock:
            message = self.connection.build_request(method, params)
            data = self.connection.send_request(message, ascii_only=True)
        self._write(data, method)
        return self._await_response(message["id"], self.timeout)

    def call_message(
        self, message: dict[str, Any], timeout: float | None = None, check: bool = True
    ) -> dict[str, Any]:
        """Send a prepared request; ``check=False`` sends an intentionally invalid one."""
        request_id = self._register(message, check)
        return self._await_response(request_id, timeout or self.timeout)

    def call_together(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Write several requests in one go, then wait for each response."""
        with self._lock:
            lines = [self.connection.send_request(message) for message in messages]
        method = ", ".join(str(message.get("method")) for message in messages)
        self._write(b"".join(lines), method)
        return [self._await_response(message["id"], self.timeout) for message in messages]

    def _register(self, message: dict[str, Any], check: bool) -> RequestId:
        with self._lock:
            data = self.connection.send_request(message, check=check)
        self._write(data, str(message.get("method")))
        request_id: RequestId = message["id"]
        return request_id

    def _await_response(self, request_id: RequestId, timeout: float) -> dict[str, Any]:
        with self._lock:
            arrived = self._lock.wait_for(
                lambda: self.connection.has_response(request_id) or self.connection.closed,
                timeout,
            )
            method = self.connection.method_of(request_id) or "the request"
            response = self.connection.take_response(request_id)
        if response is not None:
            if response.method in _CLOCK_MOVES:
                now = (response.message.get("result") or {}).get("now")
                if isinstance(now, int):
                    self.clock_moves.append((now, response.mark))
            return response.message
        if not arrived:
            self.unanswered = True
            raise TimeoutError(f"no response to {method} within {timeout} s")
        raise self._stopped(f"before answering {method}")

    def request(
        self, method: str, params: dict[str, Any] | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        """Send a request and return its result, raising :class:`RpcError` on an error."""
        response = self.call(method, params, timeout)
        error = RpcError.from_response(method, response)
        if error is not None:
            raise error
        result: dict[str, Any] = response.get("result", {})
        return result

    def initialize(self, version: int = PROTOCOL_VERSION) -> dict[str, Any]:
        """The protocol v9 handshake."""
        return self.request(
            "initialize",
            {"protocolVersion": version, "clientInfo": {"name": "pi-conformance"}},
        )

    # -- notifications ------------------------------------------------------------------

    def mark(self) -> int:
        """A cursor: notifications received from now on have an index >= this value."""
        with self._lock:
            return self.connection.mark()

    def notifications(self, method: str | None = None, since: int = 0) -> list[dict[str, Any]]:
        """Notifications received so far (optionally of one method), oldest first."""
        with self._lock:
            return self.connection.notifications(method, since)

    def wait_for(
        self,
        method: str,
        predicate: Predicate = lambda _params: True,
        since: int = 0,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Wait for a notification of ``method`` whose params satisfy ``predicate``."""
        limit = timeout or self.timeout
        position = since
        match: dict[str, Any] | None = None

        def ready() -> bool:
            nonlocal match, position
            match, position = self.connection.scan(method, predicate, position)
            return match is not None or self.connection.closed

        with self._lock:
            self._lock.wait_for(ready, limit)
            closed = self.connection.closed
        if match is None:
            if not closed:
                raise TimeoutError(f"no {method} notification matched before {limit} s passed")
            status = self._exited()
            stop = "the host stopped" if status is None else f"the host exited with status {status}"
            raise TimeoutError(f"no {method} notification matched before {stop}")
        params: dict[str, Any] = match.get("params", {})
        return params

    def wait_for_any(
        self,
        methods: Collection[str],
        predicate: Predicate = lambda _params: True,
        since: int = 0,
        timeout: float | None = None,
    ) -> tuple[int, dict[str, Any]]:
        """Wait for the first notification from ``since`` on whose method is one of
        ``methods`` and whose params satisfy ``predicate``; return its index and message."""
        limit = timeout or self.timeout
        wanted = frozenset(methods)
        found: tuple[int, dict[str, Any]] | None = None
        position = since

        def ready() -> bool:
            nonlocal found, position
            for note in self.connection.notifications(None, position):
                position += 1
                if note["method"] in wanted and predicate(note.get("params", {})):
                    found = (position - 1, note)
                    return True
            return self.connection.closed

        with self._lock:
            self._lock.wait_for(ready, limit)
        if found is not None:
            return found
        names = " or ".join(sorted(wanted))
        if not self.connection.closed:
            raise TimeoutError(f"no {names} notification matched before {limit} s passed")
        status = self._exited()
        stop = "the host stopped" if status is None else f"the host exited with status {status}"
        raise TimeoutError(f"no {names} notification matched before {stop}")

    def wait_unmatched(self, count: int = 1, timeout: float | None = None) -> list[dict[str, Any]]:
        """Wait for responses that answer no pending request (e.g. to malformed frames)."""
        with self._lock:
            self._lock.wait_for(
                lambda: len(self.unmatched) >= count or self.connection.closed,
                timeout or self.timeout,
            )
            found = list(self.unmatched)
        if len(found) < count:
            raise TimeoutError(f"expected {count} unsolicited responses, got {found}")
        return found

    # -- the wire -----------------------------------------------------------------------

    def transcript(self) -> list[WireRecord]:
        """Every line sent to and received from this host, in order, with timings."""
        with self._lock:
            return self.connection.transcript()

    def close(self) -> None:
        """Stop reading (the host itself is stopped by its driver)."""
        self._reader.join(timeout=5)
        with contextlib.suppress(OSError):
            self.host.from_host.close()

    # -- typed requests -----------------------------------------------------------------

    def call_typed(self, method: str, params: BaseModel, result_type: type[ResultT]) -> ResultT:
        """Send a request built from a params model; return its result as a model.

        Raises :class:`RpcError` for an error response and :class:`InvalidResultError`
        for a result that does not fit ``result_type``.
        """
        result = self.request(method, params.model_dump(mode="json", exclude_unset=True))
        try:
            return result_type.model_validate(result)
        except ValidationError as exc:
            raise InvalidResultError(
                f"the host's {method} result does not fit the published "
                f"{result_type.__name__}: {exc}"
            ) from exc

    @_harness_built
    def handshake(
        self,
        version: int = PROTOCOL_VERSION,
        client_name: str = "pi-conformance",
        client_version: str | None = None,
    ) -> InitializeResult:
        """``initialize``, typed."""
        info = ClientInfo(name=client_name, **_given(version=client_version))
        params = InitializeParams(protocolVersion=version, clientInfo=info)
        return self.call_typed("initialize", params, InitializeResult)

    @_harness_built
    def create_session(
        self,
        workspace_root: str | None,
        *,
        mode: Mode | None = None,
        permission_mode: PermissionMode | None = None,
        provider: ProviderConfig | None = None,
        shell_id: str | None = None,
    ) -> SessionResult:
        """``session/create``."""
        params = SessionCreateParams(
            workspaceRoot=workspace_root,
            **_given(
                mode=mode, permissionMode=permission_mode, provider=provider, shellId=shell_id
            ),
        )
        return self.call_typed("session/create", params, SessionResult)

    @_harness_built
    def get_session(self, session_id: str) -> SessionResult:
        """``session/get``."""
        return self.call_typed("session/get", SessionRef(sessionId=session_id), SessionResult)

    @_harness_built
    def list_sessions(self) -> SessionListResult:
        """``session/list``."""
        return self.call_typed("session/list", Empty(), SessionListResult)

    @_harness_built
    def configure_session(
        self,
        session_id: str,
        *,
        mode: Mode | None = None,
        permission_mode: PermissionMode | None = None,
        provider: ProviderConfig | None = None,
        shell_id: str | Absent | None = ABSENT,
    ) -> SessionResult:
        """``session/configure``; ``shell_id=None`` clears the session's shell."""
        params = SessionConfigureParams(
            sessionId=session_id,
            **_given(mode=mode, permissionMode=permission_mode, provider=provider),
            **_given_nullable(shellId=shell_id),
        )
        return self.call_typed("session/configure", params, SessionResult)

    @_harness_built
    def prompt(self, session_id: str, text: str) -> SessionPromptResult:
        """``session/prompt``."""
        params = SessionPromptParams(sessionId=session_id, text=text)
        return self.call_typed("session/prompt", params, SessionPromptResult)

    @_harness_built
    def cancel(self, session_id: str) -> SessionCancelResult:
        """``session/cancel``."""
        params = SessionRef(sessionId=session_id)
        return self.call_typed("session/cancel", params, SessionCancelResult)

    @_harness_built
    def session_transcript(self, session_id: str) -> TranscriptResult:
        """``session/transcript`` (the host's stored transcript, not the wire's)."""
        params = SessionRef(sessionId=session_id)
        return self.call_typed("session/transcript", params, TranscriptResult)

    @_harness_built
    def get_approval(self, session_id: str, approval_id: str) -> ApprovalResult:
        """``approval/get``."""
        params = ApprovalRef(sessionId=session_id, approvalId=approval_id)
        return self.call_typed("approval/get", params, ApprovalResult)

    @_harness_built
    def list_approvals(self, session_id: str) -> ApprovalListResult:
        """``approval/list``."""
        params = SessionRef(sessionId=session_id)
        return self.call_typed("approval/list", params, ApprovalListResult)

    @_harness_built
    def approve(
        self, session_id: str, approval_id: str, permission_mode: PermissionMode
    ) -> ApprovalApproveResult:
        """``approval/approve`` with an explicit permission mode."""
        params = ApprovalApproveParams(
            sessionId=session_id, approvalId=approval_id, permissionMode=permission_mode
        )
        return self.call_typed("approval/approve", params, ApprovalApproveResult)

    @_harness_built
    def reject(self, session_id: str, approval_id: str) -> ApprovalResult:
        """``approval/reject``."""
        params = ApprovalRejectParams(sessionId=session_id, approvalId=approval_id)
        return self.call_typed("approval/reject", params, ApprovalResult)

    @_harness_built
    def read_artifact(self, session_id: str, approval_id: str) -> ArtifactReadResult:
        """``artifact/read``."""
        params = ApprovalRef(sessionId=session_id, approvalId=approval_id)
        return self.call_typed("artifact/read", params, ArtifactReadResult)

    @_harness_built
    def respond_permission(self, request_id: str, decision: Literal["allow", "deny"]) -> Empty:
        """``permission/respond`` with ``"allow"`` or ``"deny"``."""
        params = PermissionRespondParams(requestId=request_id, decision=decision)
        return self.call_typed("permission/respond", params, Empty)

    @_harness_built
    def list_shells(self) -> ShellListResult:
        """``shell/list``."""
        return self.call_typed("shell/list", Empty(), ShellListResult)

    @_harness_built
    def set_default_shell(self, shell_id: str) -> ShellSetDefaultResult:
        """``shell/setDefault``."""
        params = ShellSetDefaultParams(shellId=shell_id)
        return self.call_typed("shell/setDefault", params, ShellSetDefaultResult)

    @_harness_built
    def create_task(
        self,
        name: str,
        prompt: str,
        mode: Mode,
        workspace_root: str | None,
        provider: ProviderConfig,
        *,
        permission_mode: PermissionMode | None = None,
        run_at: Timestamp | Absent | None = ABSENT,
        enabled: bool | None = None,
    ) -> TaskResult:
        """``task/create``."""
        params = TaskCreateParams(
            name=name,
            prompt=prompt,
            mode=mode,
            workspaceRoot=workspace_root,
            provider=provider,
            **_given(permissionMode=permission_mode, enabled=enabled),
            **_given_nullable(runAt=run_at),
        )
        return self.call_typed("task/create", params, TaskResult)

    @_harness_built
    def list_tasks(self) -> TaskListResult:
        """``task/list``."""
        return self.call_typed("task/list", Empty(), TaskListResult)

    @_harness_built
    def update_task(
        self,
        task_id: str,
        *,
        name: str | None = None,
        prompt: str | None = None,
        mode: Mode | None = None,
        provider: ProviderConfig | None = None,
        permission_mode: PermissionMode | None = None,
        run_at: Timestamp | Absent | None = ABSENT,
        enabled: bool | None = None,
    ) -> TaskResult:
        """``task/update``; only the given fields change (``run_at=None`` clears it)."""
        params = TaskUpdateParams(
            taskId=task_id,
            **_given(
                name=name,
                prompt=prompt,
                mode=mode,
                provider=provider,
                permissionMode=permission_mode,
                enabled=enabled,
            ),
            **_given_nullable(runAt=run_at),
        )
        return self.call_typed("task/update", params, TaskResult)

    @_harness_built
    def delete_task(self, task_id: str) -> Empty:
        """``task/delete``."""
        return self.call_typed("task/delete", TaskRef(taskId=task_id), Empty)

    @_harness_built
    def run_task(self, task_id: str) -> TaskRunResult:
        """``task/run``."""
        return self.call_typed("task/run", TaskRef(taskId=task_id), TaskRunResult)

    @_harness_built
    def clock_get(self) -> ClockResult:
        """``conformance/clock/get``."""
        return self.call_typed("conformance/clock/get", Empty(), ClockResult)

    @_harness_built
    def clock_set(self, now: int) -> ClockResult:
        """``conformance/clock/set`` to ``now`` (epoch milliseconds)."""
        return self.call_typed("conformance/clock/set", ClockSetParams(now=now), ClockResult)

    @_harness_built
    def clock_advance(self, ms: int) -> ClockResult:
        """``conformance/clock/advance`` by ``ms`` milliseconds."""
        params = ClockAdvanceParams(ms=ms)
        return self.call_typed("conformance/clock/advance", params, ClockResult)

    @_harness_built
    def arm_fault(self, fault: str) -> Empty:
        """``conformance/fault/arm`` at a fault point the host announced."""
        # Fault points are announced by the host; the schema, not the signature, judges one.
        params = FaultArmParams.model_validate({"fault": fault})
        return self.call_typed("conformance/fault/arm", params, Empty)
