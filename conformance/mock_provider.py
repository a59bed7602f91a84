"""A scripted OpenAI-compatible Chat Completions server for the conformance harness.

The harness plays the model provider: it runs :class:`MockProvider` on 127.0.0.1, scripts
one reply per expected request and inspects every request the host made. The server runs
its own asyncio event loop in a daemon thread; the public API is synchronous and
thread-safe so that blocking pytest steps can drive it.

Wire format follows the OpenAI Chat Completions API: ``"stream": true`` requests get a
``text/event-stream`` of ``chat.completion.chunk`` objects terminated by ``data: [DONE]``;
other requests get a single ``chat.completion`` object.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import itertools
import json
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final, TypeAlias

from aiohttp import web
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from conformance.stream_framing import Framing, framing_for

__all__ = [
    "MAX_PIECES",
    "CutStreamReply",
    "HttpErrorReply",
    "MockProvider",
    "RawStreamReply",
    "RecordedRequest",
    "ScriptedReply",
    "ScriptedToolCall",
    "StallReply",
    "TextReply",
    "ToolCallsReply",
]

_HOST: Final = "127.0.0.1"
_DEFAULT_MODEL: Final = "mock-model"
_THREAD_TIMEOUT: Final = 10.0
_SHUTDOWN_GRACE: Final = 1.0
MAX_PIECES: Final = 64
"""A streamed text or argument string is split into at most this many chunks: small
strings still arrive in ``chunk_size`` pieces, a large one in larger pieces, so that the
cost of a reply follows its size and not a count of tiny chunks."""


@dataclass(frozen=True)
class TextReply:
    """A plain assistant text answer, streamed in pieces of ``chunk_size`` characters."""

    text: str
    chunk_size: int = 8


@dataclass(frozen=True)
class ScriptedToolCall:
    """One tool call of a :class:`ToolCallsReply`.

    A ``str`` ``arguments`` is sent verbatim (it may be malformed JSON); a ``dict`` is
    JSON-encoded. ``call_id`` defaults to a unique ``call_<n>``.
    """

    name: str
    arguments: dict[str, Any] | str
    call_id: str | None = None


@dataclass(frozen=True)
class ToolCallsReply:
    """An assistant answer requesting tool calls (``finish_reason`` ``"tool_calls"``).

    When streaming, ``text`` (if any) comes first, then each call's arguments split into
    pieces of ``chunk_size`` characters across several chunks, then ``text_after`` (if
    any): text the model writes once it has begun its calls.
    """

    calls: tuple[ScriptedToolCall, ...]
    text: str = ""
    chunk_size: int = 8
    text_after: str = ""


@dataclass(frozen=True)
class HttpErrorReply:
    """An HTTP error answer (e.g. 429, 500) with an OpenAI-style error JSON body."""

    status: int
    message: str = "scripted provider error"


@dataclass(frozen=True)
class CutStreamReply:
    """Streams ``text`` then aborts the connection without a final chunk or ``[DONE]``.

    For a non-streaming request, half of the JSON body is sent before aborting.
    """

    text: str
    chunk_size: int = 8


@dataclass(frozen=True)
class StallReply:
    """Sends the headers (and, streaming, ``prefix``) then holds the response open.

    The stall ends when :meth:`MockProvider.release_stalls` is called (the reply then
    completes normally with ``prefix + suffix`` as its text, followed by ``calls`` when
    there are any), when the client disconnects, or when the server stops (the connection
    is then aborted). With ``calls`` the model "thinks" until released and then asks for
    those tool calls, which lets a scenario act while a turn waits for the model.
    """

    prefix: str = ""
    suffix: str = ""
    calls: tuple[ScriptedToolCall, ...] = ()
    chunk_size: int = 8


@dataclass(frozen=True)
class RawStreamReply:
    """Writes each of ``chunks`` verbatim as a ``text/event-stream`` body, then ends it.

    Nothing is added (no ``[DONE]``), so tests can send comments, CRLF line endings,
    unparseable chunks or a stream that ends cleanly without ``[DONE]``.
    """

    chunks: tuple[str, ...]


ScriptedReply: TypeAlias = (
    TextReply | ToolCallsReply | HttpErrorReply | CutStreamReply | StallReply | RawStreamReply
)


@dataclass(frozen=True)
class RecordedRequest:
    """One request received by the mock provider.

    ``body`` is the parsed JSON body (``{}`` when it was not a JSON object, see
    ``raw_body``). ``malformed`` marks a request rejected with HTTP 400 (``problem`` says
    why); ``unscripted`` one that found neither a scripted reply nor a fallback and got
    HTTP 500.
    """

    body: dict[str, Any]
    model: str | None
    messages: list[dict[str, Any]]
    tool_names: tuple[str, ...]
    stream: bool
    unscripted: bool
    malformed: bool
    authorization: str | None
    path: str
    raw_body: bytes
    problem: str | None = None


class MockProvider:
    """Scripted OpenAI-compatible Chat Completions server on an ephemeral loopback port."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._script: collections.deque[ScriptedReply] = collections.deque()
        self._fallback: ScriptedReply | None = None
        self._records: list[RecordedRequest] = []
        self._in_flight = 0
        self._counter = 0
        # Part of the base URL, moved on by reset(): a request that a host of an earlier
        # scenario sends late (a host that was slow to stop) is told apart and never
        # counted as this scenario's.
        self._epoch = 0
        self._scenario = ""
        self._framing: Framing | None = None
        self.stray_requests = 0
        # Connections open when a killed host was replaced (loop-side state): a request the
        # dead process had already written may still be read from one of them.
        self._stale_connections: set[object] = set()
        self._runner: web.AppRunner | None = None
        self._lifecycle = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._done: asyncio.Event | None = None
        self._port: int | None = None
        # Loop-side state, only touched from the server thread.
        self._stalls: set[asyncio.Future[bool]] = set()
        self._stopping = False

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start serving on 127.0.0.1 on an ephemeral port; returns once it listens."""
        with self._lifecycle:
            if self._thread is not None:
                raise RuntimeError("MockProvider is already running")
            ready = threading.Event()
            failure: list[BaseException] = []
            thread = threading.Thread(
                target=asyncio.run, args=(self._serve(ready, failure),), name="mock-provider"
            )
            thread.daemon = True
            thread.start()
            if not ready.wait(_THREAD_TIMEOUT):
                raise TimeoutError("MockProvider did not start listening in time")
            if failure:
                thread.join(_THREAD_TIMEOUT)
                raise RuntimeError("MockProvider failed to start") from failure[0]
            self._thread = thread

    def stop(self) -> None:
        """Stop the server, aborting stalled responses; idempotent."""
        with self._lifecycle:
            thread, loop, done = self._thread, self._loop, self._done
            if thread is None or loop is None or done is None:
                return
            loop.call_soon_threadsafe(done.set)
            thread.join(_THREAD_TIMEOUT)
            self._thread = self._loop = self._done = self._port = None
            self._runner = None

    def __enter__(self) -> MockProvider:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """The OpenAI base URL of the current scenario, e.g. ``http://127.0.0.1:PORT/s/3/v1``
        (``http://127.0.0.1:PORT/v1`` before the first :meth:`new_scenario`)."""
        if self._port is None:
            raise RuntimeError("MockProvider is not running")
        with self._cond:
            scenario = f"/s/{self._epoch}" if self._epoch else ""
            return f"http://{_HOST}:{self._port}{scenario}/v1"

    # ------------------------------------------------------------------ scripting

    def enqueue(self, *replies: ScriptedReply) -> None:
        """Append replies to the script; each request consumes one, in FIFO order."""
        with self._cond:
            self._script.extend(replies)

    def set_fallback(self, reply: ScriptedReply | None) -> None:
        """Answer with ``reply`` once the script is empty; None restores HTTP 500."""
        with self._cond:
            self._fallback = reply

    def pending_replies(self) -> int:
        """Number of scripted replies not yet consumed."""
        with self._cond:
            return len(self._script)

    def discard_script(self) -> None:
        """Drop the scripted replies not yet consumed (the recorded requests stay)."""
        with self._cond:
            self._script.clear()

    def release_stalls(self) -> None:
        """Let every currently held :class:`StallReply` complete normally."""
        loop = self._loop
        if loop is not None:
            loop.call_soon_threadsafe(self._resolve_stalls, True)

    def new_scenario(self, name: str = "") -> None:
        """:meth:`reset`, and a base URL of the next scenario's own: requests to an earlier
        scenario's address are turned away (410) and never recorded. ``name`` chooses how
        the scenario's streamed answers are framed (:func:`framing_for`)."""
        with self._cond:
            self._epoch += 1
            self._scenario = name
            self._clear()

    def reset(self) -> None:
        """Clear the script, the fallback and the recorded requests (the address stays)."""
        with self._cond:
            self._clear()

    def frame_streams(self, framing: Framing | None) -> None:
        """Frame this scenario's streamed answers as ``framing`` (None: vary them)."""
        with self._cond:
            self._framing = framing

    def _clear(self) -> None:
        self._framing = None
        self._script.clear()
        self._fallback = None
        self._records.clear()
        self._cond.notify_all()

    # ------------------------------------------------------------------ inspection

    def requests(self) -> list[RecordedRequest]:
        """A snapshot of the requests received so far, oldest first."""
        with self._cond:
            return list(self._records)

    def unexpected_requests(self) -> list[RecordedRequest]:
        """The requests that were malformed or found nothing scripted, oldest first."""
        with self._cond:
            return [r for r in self._records if r.malformed or r.unscripted]

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> list[RecordedRequest]:
        """Block until at least ``count`` requests were received; return a snapshot.

        Raises :class:`TimeoutError` if that does not happen within ``timeout`` seconds.
        """
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._records) >= count, timeout):
                raise TimeoutError(
                    f"mock provider expected at least {count} request(s) within "
                    f"{timeout:g}s but received {len(self._records)}"
                )
            return list(self._records)

    def turn_away_open_connections(self, timeout: float = 5.0) -> None:
        """Answer every request still to come on a connection open now with 410, unrecorded.

        For a host that was killed and is about to be replaced: bytes it wrote just before
        it died can reach a handler later, and must not count as the new host's.
        """
        loop, runner = self._loop, self._runner
        if loop is None or runner is None or runner.server is None:
            return
        server = runner.server

        async def snapshot() -> None:
            self._stale_connections = set(server.connections)

        asyncio.run_coroutine_threadsafe(snapshot(), loop).result(timeout)

    def wait_until_idle(self, timeout: float = 5.0) -> None:
        """Block until no request handler is running; raise :class:`TimeoutError` if not."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._in_flight == 0, timeout):
                raise TimeoutError(
                    f"mock provider still had {self._in_flight} request(s) in flight "
                    f"after {timeout:g}s"
                )

    # ------------------------------------------------------------------ server thread

    async def _serve(self, ready: threading.Event, failure: list[BaseException]) -> None:
        """The server thread: listen, signal ``ready``, serve until :meth:`stop`."""
        self._stopping = False
        self._stalls = set()
        done = asyncio.Event()
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        app.router.add_post("/chat/completions", self._handle)
        app.router.add_post(r"/s/{epoch:\d+}/v1/chat/completions", self._handle)
        app.router.add_post(r"/s/{epoch:\d+}/chat/completions", self._handle)
        runner = web.AppRunner(
            app,
            handle_signals=False,
            access_log=None,
            handler_cancellation=True,  # a disconnect ends a held stall
            shutdown_timeout=_SHUTDOWN_GRACE,
        )
        try:
            await runner.setup()
            await web.TCPSite(runner, _HOST, 0).start()
        except BaseException as exc:
            failure.append(exc)
            ready.set()
            await runner.cleanup()
            return
        self._port = int(runner.addresses[0][1])
        self._runner = runner
        self._loop, self._done = asyncio.get_running_loop(), done
        ready.set()
        await done.wait()
        self._stopping = True
        self._resolve_stalls(False)
        await runner.cleanup()

    def _resolve_stalls(self, released: bool) -> None:
        stalls, self._stalls = self._stalls, set()
        for stall in stalls:
            if not stall.done():
                stall.set_result(released)

    def _hold(self) -> asyncio.Future[bool]:
        """A stall that :meth:`release_stalls` resolves True and the server's stop False.

        Created before the handler first awaits, so a release right after the request
        was recorded is never missed.
        """
        stall = asyncio.get_running_loop().create_future()
        if self._stopping:
            stall.set_result(False)
        else:
            self._stalls.add(stall)
        return stall

    # ------------------------------------------------------------------ request handling

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        with self._cond:
            self._in_flight += 1
        try:
            return await self._handle_request(request)
        finally:
            with self._cond:
                self._in_flight -= 1
                self._cond.notify_all()

    async def _handle_request(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        epoch = int(request.match_info.get("epoch", 0))  # no /s/<n>: before any new scenario
        body, problem = _parse_body(raw)
        # One critical section decides whether the request belongs to the current scenario
        # and records it there, so a scenario that begins in between never inherits it.
        with self._cond:
            stray = epoch != self._epoch or request.protocol in self._stale_connections
            self.stray_requests += stray
            if stray:
                return _error_response(410, "mock provider: that scenario is over", code="gone")
            reply = None if problem is not None or not self._script else self._script.popleft()
            if reply is None and problem is None:
                reply = self._fallback
            unscripted = problem is None and reply is None
            self._records.append(
                _record(request, raw, body, unscripted=unscripted, problem=problem)
            )
            number = len(self._records)
            self._counter += 1
            completion = _Completion(f"chatcmpl-mock{self._counter}", body.get("model"))
            framing = self._framing or framing_for(self._scenario, number)
            self._cond.notify_all()
        if problem is not None:
            return _error_response(400, problem, code="invalid_request")
        if reply is None:
            message = f"mock provider: no reply was scripted for request #{number}"
            return _error_response(500, message, code="no_scripted_reply")
        stall = self._hold() if isinstance(reply, StallReply) else None
        try:
            return await self._answer(request, body, reply, completion, stall, framing)
        finally:
            if stall is not None:
                self._stalls.discard(stall)

    async def _answer(
        self,
        request: web.Request,
        body: dict[str, Any],
        reply: ScriptedReply,
        completion: _Completion,
        stall: asyncio.Future[bool] | None,
        framing: Framing,
    ) -> web.StreamResponse:
        if isinstance(reply, HttpErrorReply):
            return _error_response(reply.status, reply.message)
        streaming = body.get("stream") is True or isinstance(reply, RawStreamReply)
        headers = {"Content-Type": "application/json"}
        if streaming:
            headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        resp = web.StreamResponse(headers=headers)
        if isinstance(reply, RawStreamReply):
            await resp.prepare(request)
            for piece in reply.chunks:
                await resp.write(piece.encode())
            await resp.write_eof()
            return resp
        calls = self._resolve_calls(reply)
        text = reply.prefix + reply.suffix if isinstance(reply, StallReply) else reply.text
        if isinstance(reply, ToolCallsReply):
            text += reply.text_after
        if not streaming:
            payload = json.dumps(completion.whole(text, calls, parts=framing.text_parts)).encode()
            if isinstance(reply, CutStreamReply):
                resp.content_length = len(payload)
                await resp.prepare(request)
                await resp.write(payload[: len(payload) // 2])
                _abort(request)
            elif stall is None or await stall:
                resp.content_length = len(payload)
                await resp.prepare(request)
                await resp.write(payload)
            else:
                _abort(request)
            return resp
        # A client that goes away, before the headers or mid-stream, ends the reply; nothing
        # more to do (a host killed while it waits for its answer does so).
        with contextlib.suppress(ConnectionError):
            await resp.prepare(request)
            await self._stream(request, resp, body, reply, completion, calls, stall, framing)
        return resp

    async def _stream(
        self,
        request: web.Request,
        resp: web.StreamResponse,
        body: dict[str, Any],
        reply: TextReply | ToolCallsReply | CutStreamReply | StallReply,
        completion: _Completion,
        calls: list[tuple[str, str, str]],
        stall: asyncio.Future[bool] | None,
        framing: Framing,
    ) -> None:
        """Send ``reply`` as server-sent events in ``framing``, one write per uninterrupted
        batch (unless the framing splits them)."""
        opening = True
        if isinstance(reply, StallReply):
            # The prefix goes out before the rest is known: it is framed on its own.
            prefix = list(completion.text_chunks(reply.prefix, len(reply.prefix)))
            for piece in framing.writes(framing.reshape(prefix, closing=False), done=False):
                await resp.write(piece)
            if stall is None or not await stall:
                _abort(request)
                return
            opening = False
            events = list(completion.text_chunks(reply.suffix, len(reply.suffix), first=False))
        else:
            events = list(completion.text_chunks(reply.text, reply.chunk_size))
            if isinstance(reply, CutStreamReply):
                for piece in framing.writes(framing.reshape(events, closing=False), done=False):
                    await resp.write(piece)
                _abort(request)
                return
        # Several calls stream interleaved, one piece of each in turn: each piece names its
        # call by index, which is how the stream format tells them apart.
        pieces = [
            list(completion.call_chunks(index, *call, size=reply.chunk_size))
            for index, call in enumerate(calls)
        ]
        events.extend(
            piece for round_ in itertools.zip_longest(*pieces) for piece in round_ if piece
        )
        if isinstance(reply, ToolCallsReply) and reply.text_after:
            events.extend(completion.text_chunks(reply.text_after, reply.chunk_size, first=False))
        events.append(completion.chunk({}, "tool_calls" if calls else "stop"))
        options = body.get("stream_options")
        if isinstance(options, dict) and options.get("include_usage") is True:
            events.append(completion.usage_chunk())
        for piece in framing.writes(framing.reshape(events, opening=opening), done=True):
            await resp.write(piece)
        await resp.write_eof()

    def _resolve_calls(
        self, reply: TextReply | ToolCallsReply | CutStreamReply | StallReply
    ) -> list[tuple[str, str, str]]:
        """``(call_id, name, arguments)`` of each call, with default ids filled in."""
        resolved: list[tuple[str, str, str]] = []
        if not isinstance(reply, ToolCallsReply | StallReply):
            return resolved
        with self._cond:
            for call in reply.calls:
                call_id = call.call_id
                if call_id is None:
                    self._counter += 1
                    call_id = f"call_{self._counter}"
                arguments = call.arguments
                if not isinstance(arguments, str):
                    arguments = json.dumps(arguments, separators=(",", ":"))
                resolved.append((call_id, call.name, arguments))
        return resolved


# ---------------------------------------------------------------------- wire helpers


def _parse_body(raw: bytes) -> tuple[dict[str, Any], str | None]:
    """Parse a request body; return ``(body, problem)`` where ``problem`` explains a 400."""
    try:
        parsed = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        return {}, f"request body is not valid JSON: {exc}"
    if not isinstance(parsed, dict):
        return {}, "request body must be a JSON object"
    messages = parsed.get("messages")
    if not isinstance(messages, list) or not messages:
        return parsed, "'messages' is required and must be a non-empty array"
    tools = parsed.get("tools")
    if tools is not None:
        problem = _tools_problem(json.dumps(tools, sort_keys=True))
        if problem is not None:
            return parsed, problem
    return parsed, _conversation_problem(messages)


_FUNCTION_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")


@functools.lru_cache(maxsize=64)
def _tools_problem(tools_json: str) -> str | None:
    """Why ``tools`` is not what Chat Completions takes: an array of
    ``{"type": "function", "function": {...}}`` whose names are 1 to 64 letters, digits,
    ``_`` or ``-``, and whose ``parameters``, when given, are a JSON Schema. The real API
    refuses anything else with HTTP 400. (Cached: a host offers the same tools each time.)
    """
    tools = json.loads(tools_json)
    if not isinstance(tools, list):
        return "'tools' must be an array"
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function":
            return f"tools[{index}] is not of type 'function'"
        if not isinstance(function, dict):
            return f"tools[{index}].function must be an object"
        name = function.get("name")
        if not isinstance(name, str) or not _FUNCTION_NAME.fullmatch(name):
            return f"tools[{index}].function.name {name!r} is not 1-64 of [A-Za-z0-9_-]"
        parameters = function.get("parameters")
        if parameters is None:
            continue
        if not isinstance(parameters, dict):
            return f"tools[{index}] ({name}) parameters must be a JSON Schema object"
        try:
            Draft202012Validator.check_schema(parameters)
        except SchemaError as error:
            where = "/".join(str(part) for part in error.absolute_path)
            return (
                f"tools[{index}] ({name}) parameters are not a valid JSON Schema at "
                f"/{where}: {error.message}"
            )
    return None


# The properties Chat Completions defines for a message of each role; the real API refuses
# a message with any other property (or another role) with HTTP 400.
_MESSAGE_PROPERTIES: dict[str, frozenset[str]] = {
    "system": frozenset({"role", "content", "name"}),
    "developer": frozenset({"role", "content", "name"}),
    "user": frozenset({"role", "content", "name"}),
    "assistant": frozenset(
        {"role", "content", "name", "tool_calls", "refusal", "audio", "function_call"}
    ),
    "tool": frozenset({"role", "content", "tool_call_id"}),
    "function": frozenset({"role", "content", "name"}),
}


def _message_problem(index: int, message: dict[str, Any]) -> str | None:
    """Why one message is not a Chat Completions message: its role or a property."""
    role = message.get("role")
    allowed = _MESSAGE_PROPERTIES.get(role) if isinstance(role, str) else None
    if allowed is None:
        return f"messages[{index}] has the role {role!r}, which Chat Completions does not define"
    unknown = sorted(set(message) - allowed)
    if unknown:
        return (
            f"messages[{index}] ({role}) has properties Chat Completions does not define: {unknown}"
        )
    calls = message.get("tool_calls") if role == "assistant" else None
    for number, call in enumerate(calls if isinstance(calls, list) else []):
        function = call.get("function") if isinstance(call, dict) else None
        extra = sorted(set(call) - _CALL_PROPERTIES) if isinstance(call, dict) else ["?"]
        if not isinstance(function, dict) or extra or call.get("type") != "function":
            return (
                f"messages[{index}].tool_calls[{number}] is not a Chat Completions tool call "
                f"(id, type 'function', function): {str(call)[:200]}"
            )
        if set(function) - {"name", "arguments"}:
            return (
                f"messages[{index}].tool_calls[{number}].function has properties Chat "
                f"Completions does not define: {sorted(set(function) - {'name', 'arguments'})}"
            )
    return None


_CALL_PROPERTIES: Final = frozenset({"id", "type", "function"})


def _conversation_problem(messages: list[Any]) -> str | None:
    """Why the messages are not a valid Chat Completions conversation: a message of a role
    or with a property the API does not define, or tool calls and tool messages that do
    not pair up.

    An assistant message with ``tool_calls`` must be followed directly by one tool message
    answering each of its calls (by ``tool_call_id``), and a tool message must answer a
    call of the assistant message before it. The real API rejects a request that breaks
    either rule with HTTP 400.
    """
    waiting: set[str] = set()  # calls of the last assistant message not answered yet
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            return f"messages[{index}] is not an object"
        shape = _message_problem(index, message)
        if shape is not None:
            return shape
        role = message.get("role")
        if role == "tool":
            call_id = str(message.get("tool_call_id"))
            if call_id not in waiting:
                return (
                    f"messages[{index}] is a tool message for {call_id!r}, which is not a "
                    "call of the assistant message before it (or was answered already)"
                )
            waiting.discard(call_id)
            continue
        if waiting:
            return (
                f"messages[{index}] ({role}) comes before tool messages answering the "
                f"calls {sorted(waiting)} of the assistant message before it"
            )
        if role == "assistant":
            calls = message.get("tool_calls") or ()
            waiting = {str(c.get("id")) for c in calls if isinstance(c, dict)}
    if waiting:
        return f"the calls {sorted(waiting)} of the last assistant message have no tool message"
    return None


def _record(
    request: web.Request, raw: bytes, body: dict[str, Any], *, unscripted: bool, problem: str | None
) -> RecordedRequest:
    model, messages, tools = body.get("model"), body.get("messages"), body.get("tools")
    tool_names: list[str] = []
    for tool in tools if isinstance(tools, list) else []:
        function = tool.get("function") if isinstance(tool, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if isinstance(name, str):
            tool_names.append(name)
    return RecordedRequest(
        body=body,
        model=model if isinstance(model, str) else None,
        messages=[m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else [],
        tool_names=tuple(tool_names),
        stream=body.get("stream") is True,
        unscripted=unscripted,
        malformed=problem is not None,
        authorization=request.headers.get("Authorization"),
        path=request.path,
        raw_body=raw,
        problem=problem,
    )


def _error_response(status: int, message: str, *, code: str | None = None) -> web.Response:
    if status == 400:
        kind = "invalid_request_error"
    elif status == 429:
        kind = "rate_limit_error"
    else:
        kind = "server_error" if status >= 500 else "api_error"
    error = {"message": message, "type": kind, "param": None, "code": code}
    return web.json_response({"error": error}, status=status)


def _abort(request: web.Request) -> None:
    """Close the connection after flushing what was written, without ending the body."""
    if request.transport is not None:
        request.transport.close()


def _pieces(text: str, size: int) -> Iterator[str]:
    """``text`` in pieces of ``size`` characters, or larger to stay within MAX_PIECES."""
    step = max(1, size, -(-len(text) // MAX_PIECES))
    for start in range(0, len(text), step):
        yield text[start : start + step]


@dataclass(frozen=True)
class _Completion:
    """Builds the chunks and the whole object of one completion."""

    completion_id: str
    requested_model: object
    created: int = field(default_factory=lambda: int(time.time()))

    @property
    def model(self) -> str:
        return self.requested_model if isinstance(self.requested_model, str) else _DEFAULT_MODEL

    def _envelope(self, kind: str) -> dict[str, Any]:
        return {
            "id": self.completion_id,
            "object": kind,
            "created": self.created,
            "model": self.model,
        }

    def chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return {**self._envelope("chat.completion.chunk"), "choices": [choice]}

    def usage_chunk(self) -> dict[str, Any]:
        return {**self._envelope("chat.completion.chunk"), "choices": [], "usage": _usage()}

    def text_chunks(self, text: str, size: int, *, first: bool = True) -> Iterator[dict[str, Any]]:
        """The opening role chunk (when ``first``), then ``text`` in pieces."""
        if first:
            yield self.chunk({"role": "assistant", "content": ""})
        for piece in _pieces(text, size):
            yield self.chunk({"content": piece})

    def call_chunks(
        self, index: int, call_id: str, name: str, arguments: str, *, size: int
    ) -> Iterator[dict[str, Any]]:
        """The call's id and name, then its arguments in pieces."""
        head = {"id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
        yield self.chunk({"tool_calls": [{"index": index, **head}]})
        for piece in _pieces(arguments, size):
            yield self.chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})

    def whole(
        self, text: str, calls: list[tuple[str, str, str]], *, parts: bool = False
    ) -> dict[str, Any]:
        """The non-streaming ``chat.completion`` object; with ``parts`` its text comes as an
        array of two text parts (Chat Completions allows either)."""
        content: Any = text if text or not calls else None
        if parts and text:
            half = len(text) // 2
            content = [{"type": "text", "text": piece} for piece in (text[:half], text[half:])]
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
                for call_id, name, args in calls
            ]
        choice = {
            "index": 0,
            "message": message,
            "logprobs": None,
            "finish_reason": "tool_calls" if calls else "stop",
        }
        return {**self._envelope("chat.completion"), "choices": [choice], "usage": _usage()}


def _usage() -> dict[str, int]:
    return {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
