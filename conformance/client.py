"""A blocking protocol v9 client for synchronous step definitions.

A reader thread takes every line the host writes, checks it against the published
contract, hands responses to the waiting request and keeps notifications in arrival order.
Every wait is bounded; nothing sleeps.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from conformance.contract import ContractChecker, Violation, dumps, parse_line
from conformance.drivers import RunningHost
from pi_contract import PROTOCOL_VERSION

Predicate = Callable[[dict[str, Any]], bool]


class HarnessError(AssertionError):
    """The harness itself misbehaved (for example it built an invalid request)."""


class HostStoppedError(AssertionError):
    """The host closed its output while the harness was waiting for it."""


@dataclass(frozen=True)
class RpcError(Exception):
    """A JSON-RPC error response from the host."""

    method: str
    code: int
    message: str
    data: dict[str, Any]

    @property
    def canonical(self) -> str:
        """The canonical ``data.code``."""
        return str(self.data.get("code"))

    def __str__(self) -> str:
        return f"{self.method} failed with {self.canonical}: {self.message}"


@dataclass
class _Pending:
    method: str
    done: threading.Event
    response: dict[str, Any] | None = None


class HostClient:
    """Talks protocol v9 to one running host."""

    def __init__(self, host: RunningHost, timeout: float = 10.0) -> None:
        self.host = host
        self.timeout = timeout
        self.checker = ContractChecker()
        self.violations: list[Violation] = []
        self.unmatched: list[dict[str, Any]] = []
        self.received: list[Any] = []
        self._ids = itertools.count(1)
        self._lock = threading.Condition()
        self._pending: dict[int | str, _Pending] = {}
        self._notifications: list[dict[str, Any]] = []
        self._closed = False
        self._reader = threading.Thread(target=self._read, name="host-reader", daemon=True)
        self._reader.start()

    # -- reading ------------------------------------------------------------------------

    def _read(self) -> None:
        try:
            for raw_line in iter(self.host.from_host.readline, b""):
                self._accept(raw_line.rstrip(b"\n"))
        except (OSError, ValueError):
            pass
        with self._lock:
            self._closed = True
            self._lock.notify_all()

    def _accept(self, raw_line: bytes) -> None:
        raw = raw_line.decode("utf-8", "replace")
        parsed = parse_line(raw_line, "host-to-client")
        if parsed.violation is not None:
            with self._lock:
                self.violations.append(parsed.violation)
            return
        message = parsed.message
        with self._lock:
            self.received.append(message)
            request_id = message.get("id") if isinstance(message, dict) else None
            pending = (
                self._pending.get(request_id)
                if isinstance(request_id, int | str) and not isinstance(request_id, bool)
                else None
            )
            method = pending.method if pending else None
            violation = self.checker.check_incoming(message, method, raw)
            if violation is not None:
                self.violations.append(violation)
            if not isinstance(message, dict):
                return
            if "method" in message and "id" not in message:
                self._notifications.append(message)
            elif pending is not None:
                pending.response = message
                pending.done.set()
            else:
                self.unmatched.append(message)
            self._lock.notify_all()

    # -- requests -----------------------------------------------------------------------

    def send_raw(self, data: bytes) -> None:
        """Write bytes to the host unchecked (for deliberately malformed input)."""
        self.host.to_host.write(data)
        self.host.to_host.flush()

    def call(
        self, method: str, params: dict[str, Any] | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        """Send a request and return the whole response (result or error)."""
        request_id = next(self._ids)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        return self.call_message(message, timeout)

    def call_message(
        self, message: dict[str, Any], timeout: float | None = None, check: bool = True
    ) -> dict[str, Any]:
        """Send a prepared request; ``check=False`` sends an intentionally invalid one."""
        if check:
            violation = self.checker.check_outgoing(message)
            if violation is not None:
                raise HarnessError("the harness built an invalid request: " + violation.describe())
        pending = _Pending(str(message.get("method")), threading.Event())
        with self._lock:
            self._pending[message["id"]] = pending
        line = dumps(message) + "\n"
        try:
            self.send_raw(line.encode("utf-8"))
        except (BrokenPipeError, OSError, ValueError) as exc:
            raise HostStoppedError(f"cannot write to the host: {exc}") from exc
        with self._lock:
            return self._await_response(message["id"], pending, timeout or self.timeout)

    def _await_response(
        self, request_id: int | str, pending: _Pending, timeout: float
    ) -> dict[str, Any]:
        """Wait (holding the lock) for the response to one request."""
        if not self._lock.wait_for(lambda: pending.done.is_set() or self._closed, timeout):
            raise TimeoutError(f"no response to {pending.method} within {timeout} s")
        del self._pending[request_id]
        if pending.response is None:
            raise HostStoppedError(f"the host stopped before answering {pending.method}")
        return pending.response

    def call_together(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Write several requests in one go, then wait for each response."""
        pendings = []
        with self._lock:
            for message in messages:
                pending = _Pending(str(message.get("method")), threading.Event())
                self._pending[message["id"]] = pending
                pendings.append((message["id"], pending))
        data = b"".join((dumps(m) + "\n").encode() for m in messages)
        self.send_raw(data)
        with self._lock:
            responses = [
                self._await_response(request_id, pending, self.timeout)
                for request_id, pending in pendings
            ]
        return responses

    def next_id(self) -> int:
        """A fresh request id."""
        return next(self._ids)

    def request(
        self, method: str, params: dict[str, Any] | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        """Send a request and return its result, raising :class:`RpcError` on an error."""
        response = self.call(method, params, timeout)
        if "error" in response:
            error = response["error"]
            raise RpcError(
                method, int(error.get("code", 0)), str(error.get("message")), error.get("data", {})
            )
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
            return len(self._notifications)

    def notifications(self, method: str | None = None, since: int = 0) -> list[dict[str, Any]]:
        """Notifications received so far (optionally of one method), oldest first."""
        with self._lock:
            found = self._notifications[since:]
        return [n for n in found if method is None or n["method"] == method]

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

        def found() -> dict[str, Any] | None:
            nonlocal position
            for note in self._notifications[position:]:
                position += 1
                if note["method"] == method and predicate(note.get("params", {})):
                    return note
            return None

        with self._lock:
            match: dict[str, Any] | None = None

            def ready() -> bool:
                nonlocal match
                match = found()
                return match is not None or self._closed

            self._lock.wait_for(ready, limit)
            if match is None:
                state = "the host stopped" if self._closed else f"{limit} s passed"
                raise TimeoutError(f"no {method} notification matched before {state}")
            params: dict[str, Any] = match.get("params", {})
            return params

    def wait_unmatched(self, count: int = 1, timeout: float | None = None) -> list[dict[str, Any]]:
        """Wait for responses that answer no pending request (e.g. to malformed frames)."""
        with self._lock:
            self._lock.wait_for(
                lambda: len(self.unmatched) >= count or self._closed, timeout or self.timeout
            )
            if len(self.unmatched) < count:
                raise TimeoutError(f"expected {count} unsolicited responses, got {self.unmatched}")
            return list(self.unmatched)

    def close(self) -> None:
        """Stop reading (the host itself is stopped by its driver)."""
        self._reader.join(timeout=5)
        with contextlib.suppress(OSError):
            self.host.from_host.close()
