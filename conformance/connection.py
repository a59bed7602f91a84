"""The protocol v9 client connection, without I/O (in the style of h11).

Bytes the host wrote go in through :meth:`Connection.receive_data`, events come out.
Requests go out as bytes from :meth:`Connection.send_request`, for the caller to write.
The connection frames newline-delimited JSON, allocates request ids and matches
responses to them, checks every message against the published contract, keeps
notifications in arrival order behind cursors, and records a wire transcript. It starts
no thread and touches no file, so every interleaving can be tested by feeding bytes.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from conformance.contract import (
    NOT_COMPACT,
    ContractChecker,
    Direction,
    Violation,
    is_compact,
    parse_line,
)
from conformance.request_spelling import spell, spelling_for

__all__ = [
    "Closed",
    "Connection",
    "Event",
    "HarnessError",
    "NotificationReceived",
    "Predicate",
    "RequestId",
    "ResponseReceived",
    "RpcError",
    "UnmatchedResponse",
    "ViolationFound",
    "WireRecord",
]

RequestId = int | str
Predicate = Callable[[dict[str, Any]], bool]

TRANSCRIPT_LINE_LIMIT: Final = 16 * 1024


class HarnessError(AssertionError):
    """The harness itself misbehaved (for example it built an invalid request)."""


@dataclass(eq=False)  # not frozen: raising sets __traceback__ (contextlib does, too)
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

    @classmethod
    def from_response(cls, method: str, response: dict[str, Any]) -> RpcError | None:
        """The error a response carries, or None for a success."""
        error = response.get("error")
        if error is None:
            return None
        if not isinstance(error, dict):
            return cls(method, 0, repr(error), {})
        data = error.get("data")
        code = error.get("code")
        return cls(
            method,
            code if isinstance(code, int) and not isinstance(code, bool) else 0,
            str(error.get("message")),
            data if isinstance(data, dict) else {},
        )


# -- events ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ResponseReceived:
    """The host answered a pending request.

    ``mark`` is the number of notifications that had arrived before the response.
    """

    request_id: RequestId
    method: str
    message: dict[str, Any]
    mark: int


@dataclass(frozen=True)
class NotificationReceived:
    """A notification; ``index`` is its position, comparable with :meth:`Connection.mark`."""

    index: int
    method: str
    message: dict[str, Any]


@dataclass(frozen=True)
class UnmatchedResponse:
    """A response that answers no pending request: id null, an unknown id, or a repeat."""

    message: dict[str, Any]
    reason: str


@dataclass(frozen=True)
class ViolationFound:
    """A message from the host broke the contract (it may also produce another event)."""

    violation: Violation


@dataclass(frozen=True)
class Closed:
    """The host closed its output."""


Event = ResponseReceived | NotificationReceived | UnmatchedResponse | ViolationFound | Closed


# -- transcript -----------------------------------------------------------------------


@dataclass(frozen=True)
class WireRecord:
    """One line on the wire, as sent or received.

    ``text`` is the line without its newline, decoded as UTF-8 with U+FFFD for invalid
    bytes; a line longer than the transcript limit keeps its head and tail around a note.
    ``size`` is the line's length in bytes. ``terminated`` is False for bytes that ended
    without a newline (a last line at end of output, or a raw write of a partial line).
    """

    direction: Direction
    elapsed: float
    text: str
    size: int
    truncated: bool
    terminated: bool = True

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form for reports."""
        return {
            "direction": self.direction,
            "elapsed": round(self.elapsed, 6),
            "text": self.text,
            "size": self.size,
            "truncated": self.truncated,
            "terminated": self.terminated,
        }


def _shorten(line: bytes, limit: int) -> tuple[str, bool]:
    if len(line) <= limit:
        return line.decode("utf-8", "replace"), False
    head = limit * 3 // 4
    tail = limit - head
    note = f" ... [{len(line) - head - tail} of {len(line)} bytes left out] ... "
    text = line[:head].decode("utf-8", "replace") + note + line[-tail:].decode("utf-8", "replace")
    return text, True


# -- the connection -------------------------------------------------------------------


def _id_key(value: Any) -> RequestId | None:
    """The request id a response names, or None when it names none (null, bool, object)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | str):
        return value
    # JSON has one number type: 1.0 names request 1 as much as 1 does.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


class Connection:
    """One client connection to a host, as a state machine over bytes.

    ``clock`` gives monotonic seconds (the transcript's time base); ``first_id`` is the
    first id :meth:`next_id` allocates.
    """

    def __init__(
        self,
        checker: ContractChecker | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        first_id: int = 1,
        transcript_line_limit: int = TRANSCRIPT_LINE_LIMIT,
    ) -> None:
        self.checker = checker or ContractChecker()
        self._clock = clock
        self._start = clock()
        self._ids: Iterator[int] = itertools.count(first_id)
        self._line_limit = transcript_line_limit
        self._buffer = bytearray()
        self._scanned = 0
        self._pending: dict[RequestId, str] = {}
        self._responses: dict[RequestId, ResponseReceived] = {}
        self._answered: dict[RequestId, str] = {}
        self._notifications: list[dict[str, Any]] = []
        self._transcript: list[WireRecord] = []
        self.violations: list[Violation] = []
        self.unmatched: list[dict[str, Any]] = []
        self.received: list[Any] = []
        self.closed = False

    # -- sending --------------------------------------------------------------------

    def next_id(self) -> int:
        """A fresh integer request id, not currently in flight."""
        while True:
            candidate = next(self._ids)
            if candidate not in self._pending and candidate not in self._responses:
                return candidate

    def build_request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """A request message with a fresh id."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id(), "method": method}
        if params is not None:
            message["params"] = params
        return message

    def send_request(
        self, message: dict[str, Any], *, check: bool = True, ascii_only: bool = False
    ) -> bytes:
        """Register a request as pending and return its line to write.

        ``check=False`` lets through a message that breaks the schema (deliberately
        invalid input); it must still carry a usable id and be JSON. ``ascii_only`` writes
        every character beyond ASCII as a JSON escape (one beyond the BMP as a surrogate
        pair), as many JSON encoders do by default.
        """
        if check:
            violation = self.checker.check_outgoing(message)
            if violation is not None:
                raise HarnessError("the harness built an invalid request: " + violation.describe())
        key = _id_key(message.get("id"))
        if key is None:
            raise HarnessError(f"a request needs an integer or string id: {message!r}")
        if key in self._pending:
            raise HarnessError(f"request id {key!r} is already waiting for its response")
        try:
            text = spell(message, spelling_for(message.get("id")), ascii_only=ascii_only)
            data = (text + "\n").encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise HarnessError(f"the harness built a message that is not JSON: {exc}") from exc
        self._pending[key] = str(message.get("method"))
        # The id is asked again: a repeat answer from now on is for this new request.
        self._answered.pop(key, None)
        self.record_sent(data)
        return data

    def record_sent(self, data: bytes) -> None:
        """Add bytes written to the host (by :meth:`send_request` or raw) to the transcript."""
        lines = data.split(b"\n")
        for line in lines[:-1]:
            self._record("client-to-host", line, terminated=True)
        if lines[-1]:
            self._record("client-to-host", lines[-1], terminated=False)

    # -- receiving ------------------------------------------------------------------

    def receive_data(self, data: bytes) -> list[Event]:
        """Feed bytes the host wrote; returns the events of every line they complete."""
        if self.closed:
            raise HarnessError("bytes received after the end of the host's output")
        self._buffer += data
        events: list[Event] = []
        while True:
            newline = self._buffer.find(b"\n", self._scanned)
            if newline == -1:
                self._scanned = len(self._buffer)
                return events
            line = bytes(self._buffer[:newline])
            del self._buffer[: newline + 1]
            self._scanned = 0
            events.extend(self._accept(line, terminated=True))

    def receive_eof(self) -> list[Event]:
        """The host closed its output; a last line without a newline still counts."""
        if self.closed:
            return []
        events: list[Event] = []
        if self._buffer:
            line = bytes(self._buffer)
            self._buffer.clear()
            events.extend(self._accept(line, terminated=False))
        self.closed = True
        events.append(Closed())
        return events

    def _accept(self, line: bytes, terminated: bool) -> list[Event]:
        self._record("host-to-client", line, terminated=terminated)
        parsed = parse_line(line, "host-to-client")
        if parsed.violation is not None:
            self.violations.append(parsed.violation)
            return [ViolationFound(parsed.violation)]
        message = parsed.message
        self.received.append(message)
        raw = line.decode("utf-8", "replace")
        events: list[Event] = []
        key = _id_key(message.get("id")) if isinstance(message, dict) else None
        pending_method = self._pending.get(key) if key is not None else None
        answered_method = self._answered.get(key) if key is not None else None
        if key is not None and key in self._responses:
            answered_method = self._responses[key].method
        request_method = pending_method or answered_method
        violation = self.checker.check_incoming(message, request_method, raw)
        if violation is None and not is_compact(line):
            method = message.get("method") if isinstance(message, dict) else None
            violation = Violation("host-to-client", method or request_method, "", NOT_COMPACT, raw)
        if violation is not None:
            self.violations.append(violation)
            events.append(ViolationFound(violation))
        if not isinstance(message, dict):
            return events
        if "method" in message and "id" not in message:
            index = len(self._notifications)
            self._notifications.append(message)
            events.append(NotificationReceived(index, str(message["method"]), message))
            return events
        if key is not None and answered_method is not None:
            repeat = Violation(
                "host-to-client",
                answered_method,
                "/id",
                f"a second response to request {key!r}",
                raw,
            )
            self.violations.append(repeat)
            events.append(ViolationFound(repeat))
            return [*events, self._unmatched(message, "repeated id")]
        if key is not None and pending_method is not None and "method" not in message:
            del self._pending[key]
            response = ResponseReceived(key, pending_method, message, len(self._notifications))
            self._responses[key] = response
            events.append(response)
            return events
        if "id" not in message:
            reason = "no id"
        elif message["id"] is None:
            reason = "null id"
        else:
            reason = "unknown id"
        return [*events, self._unmatched(message, reason)]

    def _unmatched(self, message: dict[str, Any], reason: str) -> UnmatchedResponse:
        self.unmatched.append(message)
        return UnmatchedResponse(message, reason)

    # -- responses ------------------------------------------------------------------

    def is_pending(self, request_id: RequestId) -> bool:
        """Whether a request waits for its response."""
        return request_id in self._pending

    def has_response(self, request_id: RequestId) -> bool:
        """Whether the response to ``request_id`` arrived and was not taken yet."""
        return request_id in self._responses

    def take_response(self, request_id: RequestId) -> ResponseReceived | None:
        """The response to ``request_id``, once; None while it has not arrived."""
        response = self._responses.pop(request_id, None)
        if response is not None:
            self._answered[request_id] = response.method
        return response

    def method_of(self, request_id: RequestId) -> str | None:
        """The method of a pending or answered request."""
        if request_id in self._pending:
            return self._pending[request_id]
        if request_id in self._responses:
            return self._responses[request_id].method
        return self._answered.get(request_id)

    # -- notifications --------------------------------------------------------------

    def mark(self) -> int:
        """A cursor: notifications received from now on have an index >= this value."""
        return len(self._notifications)

    def notifications(self, method: str | None = None, since: int = 0) -> list[dict[str, Any]]:
        """Notifications received so far (optionally of one method), oldest first."""
        return [n for n in self._notifications[since:] if method is None or n["method"] == method]

    def scan(
        self, method: str, predicate: Predicate, start: int
    ) -> tuple[dict[str, Any] | None, int]:
        """The first notification from ``start`` on of ``method`` whose params satisfy
        ``predicate``, and where to go on scanning (each is tested once)."""
        position = start
        for note in self._notifications[start:]:
            position += 1
            if note["method"] == method and predicate(note.get("params", {})):
                return note, position
        return None, position

    # -- transcript -----------------------------------------------------------------

    def _record(self, direction: Direction, line: bytes, terminated: bool) -> None:
        text, truncated = _shorten(line, self._line_limit)
        elapsed = self._clock() - self._start
        self._transcript.append(
            WireRecord(direction, elapsed, text, len(line), truncated, terminated)
        )

    def transcript(self) -> list[WireRecord]:
        """Every line sent and received so far, in order."""
        return list(self._transcript)
