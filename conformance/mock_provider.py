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
import copy
import json
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final, TypeAlias

from aiohttp import web

__all__ = [
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
_ERROR_TYPES: Final[Mapping[int, str]] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}


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

    When streaming, ``text`` (if any) is streamed first, then each call's arguments are
    split into pieces of ``chunk_size`` characters across several chunks.
    """

    calls: tuple[ScriptedToolCall, ...]
    text: str = ""
    chunk_size: int = 8


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
    """Sends the headers (and, streaming, a first chunk) then holds the response open.

    The stall ends when :meth:`MockProvider.release_stalls` is called (the reply then
    completes normally with ``prefix + suffix`` as its text), when the client
    disconnects, or when the server stops (the connection is then aborted).
    """

    prefix: str = ""
    suffix: str = ""


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
    ``raw_body``). ``unscripted`` marks a request that found no scripted reply;
    ``malformed`` marks one rejected with HTTP 400.
    """

    body: dict[str, Any]
    model: str | None
    messages: list[dict[str, Any]]
    tool_names: tuple[str, ...]
    stream: bool
    unscripted: bool
    authorization: str | None
    path: str
    raw_body: bytes
    malformed: bool


class MockProvider:
    """Scripted OpenAI-compatible Chat Completions server on an ephemeral loopback port."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._script: collections.deque[ScriptedReply] = collections.deque()
        self._fallback: ScriptedReply | None = None
        self._records: list[RecordedRequest] = []
        self._in_flight = 0
        self._call_counter = 0
        self._completion_counter = 0
        self._lifecycle = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        # Loop-side state, only touched from the server thread.
        self._stall_waiters: set[asyncio.Future[bool]] = set()
        self._stopping = False

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start serving on 127.0.0.1 on an ephemeral port; returns once it listens."""
        with self._lifecycle:
            if self._thread is not None:
                raise RuntimeError("MockProvider is already running")
            ready = threading.Event()
            failure: list[BaseException] = []
            loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=self._run_loop,
                args=(loop, ready, failure),
                name="mock-provider",
                daemon=True,
            )
            thread.start()
            if not ready.wait(_THREAD_TIMEOUT):
                raise TimeoutError("MockProvider did not start listening in time")
            if failure:
                thread.join(_THREAD_TIMEOUT)
                raise RuntimeError("MockProvider failed to start") from failure[0]
            self._thread = thread
            self._loop = loop

    def stop(self) -> None:
        """Stop the server, aborting stalled responses; idempotent."""
        with self._lifecycle:
            thread, loop = self._thread, self._loop
            if thread is None or loop is None:
                return
            try:
                asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(_THREAD_TIMEOUT)
            finally:
                loop.call_soon_threadsafe(loop.stop)
                thread.join(_THREAD_TIMEOUT)
                self._thread = None
                self._loop = None
                self._port = None

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
        """The OpenAI base URL, e.g. ``http://127.0.0.1:PORT/v1``."""
        port = self._port
        if port is None:
            raise RuntimeError("MockProvider is not running")
        return f"http://{_HOST}:{port}/v1"

    # ------------------------------------------------------------------ scripting

    def enqueue(self, *replies: ScriptedReply) -> None:
        """Append replies to the script; each request consumes one, in FIFO order."""
        with self._cond:
            self._script.extend(replies)

    def set_fallback(self, reply: ScriptedReply | None) -> None:
        """Answer with ``reply`` when the script is empty (the request is still recorded
        as unscripted); None restores the HTTP 500 answer."""
        with self._cond:
            self._fallback = reply

    def pending_replies(self) -> int:
        """Number of scripted replies not yet consumed."""
        with self._cond:
            return len(self._script)

    def release_stalls(self) -> None:
        """Let every currently held :class:`StallReply` complete normally."""
        loop = self._loop
        if loop is not None:
            loop.call_soon_threadsafe(self._resolve_stalls, True)

    def reset(self) -> None:
        """Clear the script, the fallback and the recorded requests."""
        with self._cond:
            self._script.clear()
            self._fallback = None
            self._records.clear()
            self._cond.notify_all()

    # ------------------------------------------------------------------ inspection

    def requests(self) -> list[RecordedRequest]:
        """A snapshot of the requests received so far, oldest first."""
        with self._cond:
            return list(self._records)

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

    def in_flight(self) -> int:
        """Number of requests whose handler is still running (e.g. held stalls)."""
        with self._cond:
            return self._in_flight

    def wait_until_idle(self, timeout: float = 5.0) -> None:
        """Block until no request handler is running; raise :class:`TimeoutError` if not."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._in_flight == 0, timeout):
                raise TimeoutError(
                    f"mock provider still had {self._in_flight} request(s) in flight "
                    f"after {timeout:g}s"
                )

    # ------------------------------------------------------------------ server thread

    def _run_loop(
        self,
        loop: asyncio.AbstractEventLoop,
        ready: threading.Event,
        failure: list[BaseException],
    ) -> None:
        asyncio.set_event_loop(loop)
        try:
            try:
                loop.run_until_complete(self._setup())
            except BaseException as exc:
                failure.append(exc)
                return
            finally:
                ready.set()
            loop.run_forever()
        finally:
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _setup(self) -> None:
        self._stopping = False
        self._stall_waiters = set()
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        app.router.add_post("/chat/completions", self._handle)
        runner = web.AppRunner(
            app,
            handle_signals=False,
            access_log=None,
            handler_cancellation=True,
            shutdown_timeout=_SHUTDOWN_GRACE,
        )
        await runner.setup()
        site = web.TCPSite(runner, _HOST, 0)
        await site.start()
        self._runner = runner
        self._port = int(runner.addresses[0][1])

    async def _shutdown(self) -> None:
        self._stopping = True
        self._resolve_stalls(False)
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    def _resolve_stalls(self, released: bool) -> None:
        waiters, self._stall_waiters = self._stall_waiters, set()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(released)

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
        body, problem = _parse_body(raw)
        stall: asyncio.Future[bool] | None = None
        with self._cond:
            reply = None if problem is not None or not self._script else self._script.popleft()
            self._records.append(
                _record(
                    request,
                    raw,
                    body,
                    unscripted=problem is None and reply is None,
                    malformed=problem is not None,
                )
            )
            number = len(self._records)
            self._cond.notify_all()
        if problem is not None:
            return _error_response(400, problem, code="invalid_request")
        if reply is None and self._fallback is not None:
            reply = self._fallback
        if reply is None:
            return _error_response(
                500,
                f"mock provider: no reply was scripted for request #{number}",
                code="no_scripted_reply",
            )
        if isinstance(reply, StallReply):
            stall = asyncio.get_running_loop().create_future()
            if self._stopping:
                stall.set_result(False)
            else:
                self._stall_waiters.add(stall)
        try:
            return await self._answer(request, body, reply, stall)
        finally:
            if stall is not None:
                self._stall_waiters.discard(stall)

    async def _answer(
        self,
        request: web.Request,
        body: dict[str, Any],
        reply: ScriptedReply,
        stall: asyncio.Future[bool] | None,
    ) -> web.StreamResponse:
        if isinstance(reply, HttpErrorReply):
            return _error_response(reply.status, reply.message)
        if isinstance(reply, RawStreamReply):
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            for piece in reply.chunks:
                await resp.write(piece.encode())
            await resp.write_eof()
            return resp
        model = body.get("model")
        chunks = _ChunkFactory(
            completion_id=self._next_completion_id(),
            model=model if isinstance(model, str) else _DEFAULT_MODEL,
        )
        if body.get("stream") is True:
            return await self._answer_stream(request, body, reply, chunks, stall)
        return await self._answer_json(request, reply, chunks, stall)

    async def _answer_json(
        self,
        request: web.Request,
        reply: ScriptedReply,
        chunks: _ChunkFactory,
        stall: asyncio.Future[bool] | None,
    ) -> web.StreamResponse:
        if isinstance(reply, TextReply):
            return web.json_response(chunks.completion(reply.text, ()))
        if isinstance(reply, ToolCallsReply):
            return web.json_response(chunks.completion(reply.text, self._resolve_calls(reply)))
        if isinstance(reply, CutStreamReply):
            payload = json.dumps(chunks.completion(reply.text, ())).encode()
            resp = web.StreamResponse(headers={"Content-Type": "application/json"})
            resp.content_length = len(payload)
            await resp.prepare(request)
            await resp.write(payload[: len(payload) // 2])
            _abort(request)
            return resp
        assert isinstance(reply, StallReply) and stall is not None
        if not await stall:
            _abort(request)
            return web.StreamResponse()
        return web.json_response(chunks.completion(reply.prefix + reply.suffix, ()))

    async def _answer_stream(
        self,
        request: web.Request,
        body: dict[str, Any],
        reply: ScriptedReply,
        chunks: _ChunkFactory,
        stall: asyncio.Future[bool] | None,
    ) -> web.StreamResponse:
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await resp.prepare(request)
        try:
            if isinstance(reply, TextReply):
                await _send_text(resp, chunks, reply.text, reply.chunk_size, first=True)
                await _send_end(resp, chunks, "stop", body)
            elif isinstance(reply, ToolCallsReply):
                calls = self._resolve_calls(reply)
                await _send_text(resp, chunks, reply.text, reply.chunk_size, first=True)
                for index, (call_id, name, arguments) in enumerate(calls):
                    await _send_tool_call(
                        resp, chunks, index, call_id, name, arguments, reply.chunk_size
                    )
                await _send_end(resp, chunks, "tool_calls", body)
            elif isinstance(reply, CutStreamReply):
                await _send_text(resp, chunks, reply.text, reply.chunk_size, first=True)
                _abort(request)
            else:
                assert isinstance(reply, StallReply) and stall is not None
                await _send_text(resp, chunks, reply.prefix, len(reply.prefix), first=True)
                if not await stall:
                    _abort(request)
                    return resp
                await _send_text(resp, chunks, reply.suffix, len(reply.suffix), first=False)
                await _send_end(resp, chunks, "stop", body)
        except ConnectionError:
            # The client went away mid-stream; nothing more to do.
            pass
        return resp

    def _resolve_calls(self, reply: ToolCallsReply) -> list[tuple[str, str, str]]:
        resolved: list[tuple[str, str, str]] = []
        with self._cond:
            for call in reply.calls:
                call_id = call.call_id
                if call_id is None:
                    self._call_counter += 1
                    call_id = f"call_{self._call_counter}"
                arguments = (
                    call.arguments
                    if isinstance(call.arguments, str)
                    else json.dumps(call.arguments, separators=(",", ":"))
                )
                resolved.append((call_id, call.name, arguments))
        return resolved

    def _next_completion_id(self) -> str:
        with self._cond:
            self._completion_counter += 1
            return f"chatcmpl-mock{self._completion_counter}"


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
    return parsed, None


def _record(
    request: web.Request,
    raw: bytes,
    body: dict[str, Any],
    *,
    unscripted: bool,
    malformed: bool,
) -> RecordedRequest:
    body = copy.deepcopy(body)
    model = body.get("model")
    messages = body.get("messages")
    tool_names: list[str] = []
    tools = body.get("tools")
    if isinstance(tools, list):
        for tool in tools:
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
        authorization=request.headers.get("Authorization"),
        path=request.path,
        raw_body=raw,
        malformed=malformed,
    )


def _error_response(status: int, message: str, *, code: str | None = None) -> web.Response:
    error_type = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "api_error")
    return web.json_response(
        {"error": {"message": message, "type": error_type, "param": None, "code": code}},
        status=status,
    )


def _abort(request: web.Request) -> None:
    """Close the connection after flushing what was written, without ending the body."""
    transport = request.transport
    if transport is not None:
        transport.close()


def _pieces(text: str, size: int) -> Iterator[str]:
    step = max(1, size)
    for start in range(0, len(text), step):
        yield text[start : start + step]


@dataclass(frozen=True)
class _ChunkFactory:
    completion_id: str
    model: str
    created: int = field(default_factory=lambda: int(time.time()))

    def chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            "id": self.completion_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
            "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            ],
        }

    def usage_chunk(self) -> dict[str, Any]:
        return {
            "id": self.completion_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
            "choices": [],
            "usage": _usage(),
        }

    def completion(
        self, text: str, calls: list[tuple[str, str, str]] | tuple[()]
    ) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": text if text or not calls else None,
            "refusal": None,
        }
        if calls:
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
                for call_id, name, arguments in calls
            ]
        return {
            "id": self.completion_id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": "tool_calls" if calls else "stop",
                }
            ],
            "usage": _usage(),
        }


def _usage() -> dict[str, int]:
    return {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


async def _send_event(resp: web.StreamResponse, data: dict[str, Any] | str) -> None:
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    await resp.write(f"data: {text}\n\n".encode())


async def _send_text(
    resp: web.StreamResponse, chunks: _ChunkFactory, text: str, size: int, *, first: bool
) -> None:
    if first:
        await _send_event(resp, chunks.chunk({"role": "assistant", "content": "", "refusal": None}))
    for piece in _pieces(text, size):
        await _send_event(resp, chunks.chunk({"content": piece}))


async def _send_tool_call(
    resp: web.StreamResponse,
    chunks: _ChunkFactory,
    index: int,
    call_id: str,
    name: str,
    arguments: str,
    size: int,
) -> None:
    head = {
        "index": index,
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": ""},
    }
    await _send_event(resp, chunks.chunk({"tool_calls": [head]}))
    for piece in _pieces(arguments, size):
        delta = {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}
        await _send_event(resp, chunks.chunk(delta))


async def _send_end(
    resp: web.StreamResponse, chunks: _ChunkFactory, finish_reason: str, body: dict[str, Any]
) -> None:
    await _send_event(resp, chunks.chunk({}, finish_reason))
    options = body.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage") is True:
        await _send_event(resp, chunks.usage_chunk())
    await _send_event(resp, "[DONE]")
    await resp.write_eof()
