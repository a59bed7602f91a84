"""OpenAI-compatible streaming Chat Completions client of the reference host.

:func:`complete` POSTs ``{base_url}/chat/completions`` with ``"stream": true``, parses the
server-sent events incrementally, forwards text deltas as they arrive and accumulates
streamed tool calls by ``index``. Every failure surfaces as :class:`ProviderError`, except
cancellation, which propagates (closing the response).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from reference_host.sse import sse_lines

# httpx imports its command-line client (click, rich, pygments) along with itself whenever
# those happen to be installed, which doubles its import time; the host never uses that
# client, and a None entry makes httpx fall back to its stub.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

import httpx  # noqa: E402

__all__ = [
    "AssistantReply",
    "ProviderConfig",
    "ProviderError",
    "ToolCall",
    "ToolSpec",
    "complete",
]

ProviderErrorKind = Literal["http", "stream", "timeout", "protocol"]

_DONE: Final = "[DONE]"
_MAX_ERROR_BODY: Final = 64 * 1024


@dataclass(frozen=True)
class ProviderConfig:
    """Where and how to reach the model provider."""

    base_url: str
    model: str
    api_key: str | None = None


@dataclass(frozen=True)
class ToolSpec:
    """A tool offered to the model; ``parameters`` is the JSON Schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]

    def to_wire(self) -> dict[str, Any]:
        """The OpenAI ``tools[]`` entry for this tool."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


@dataclass(frozen=True)
class ToolCall:
    """A tool call requested by the model; ``arguments`` is the raw JSON text received."""

    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class AssistantReply:
    """The complete assistant turn assembled from the stream."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str | None


class ProviderError(Exception):
    """A failed provider call.

    ``kind`` is ``"http"`` (non-2xx answer, or the request could not be sent; ``status``
    is the HTTP status when there was one), ``"stream"`` (the stream broke or ended
    without ``[DONE]``), ``"timeout"`` or ``"protocol"`` (an unparseable chunk).
    """

    def __init__(self, message: str, *, kind: ProviderErrorKind, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.kind: ProviderErrorKind = kind
        self.status = status

    def __repr__(self) -> str:
        return f"ProviderError({self.message!r}, kind={self.kind!r}, status={self.status!r})"


@dataclass
class _PartialCall:
    call_id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class _Accumulator:
    on_text: Callable[[str], Awaitable[None]] | None
    text: list[str] = field(default_factory=list)
    calls: dict[int, _PartialCall] = field(default_factory=dict)
    finish_reason: str | None = None

    async def feed(self, data: str) -> None:
        try:
            chunk = json.loads(data)
        except ValueError as exc:
            raise ProviderError(
                f"provider sent an unparseable stream chunk: {data[:200]!r}", kind="protocol"
            ) from exc
        if not isinstance(chunk, dict):
            raise _protocol("stream chunk is not a JSON object", data)
        if "error" in chunk:
            raise ProviderError(
                f"provider reported an error mid-stream: {_error_message(chunk) or data[:200]}",
                kind="stream",
            )
        choices = chunk.get("choices", [])
        if not isinstance(choices, list):
            raise _protocol("'choices' is not an array", data)
        for choice in choices:
            if not isinstance(choice, dict):
                raise _protocol("a choice is not an object", data)
            if choice.get("index", 0) != 0:
                continue
            finish = choice.get("finish_reason")
            if isinstance(finish, str):
                self.finish_reason = finish
            delta = choice.get("delta") or {}
            if not isinstance(delta, dict):
                raise _protocol("'delta' is not an object", data)
            await self._feed_delta(delta, data)

    async def _feed_delta(self, delta: dict[str, Any], data: str) -> None:
        content = delta.get("content")
        if content is not None and not isinstance(content, str):
            raise _protocol("'delta.content' is not a string", data)
        if content:
            self.text.append(content)
            if self.on_text is not None:
                await self.on_text(content)
        tool_calls = delta.get("tool_calls")
        if tool_calls is None:
            return
        if not isinstance(tool_calls, list):
            raise _protocol("'delta.tool_calls' is not an array", data)
        for position, item in enumerate(tool_calls):
            if not isinstance(item, dict):
                raise _protocol("a tool call delta is not an object", data)
            index = item.get("index", position)
            function = item.get("function") or {}
            if not isinstance(index, int) or not isinstance(function, dict):
                raise _protocol("malformed tool call delta", data)
            call = self.calls.setdefault(index, _PartialCall())
            call_id, name, arguments = (
                item.get("id"),
                function.get("name"),
                function.get("arguments"),
            )
            for value in (call_id, name, arguments):
                if value is not None and not isinstance(value, str):
                    raise _protocol("tool call id/name/arguments is not a string", data)
            if call_id:
                call.call_id = call_id
            if name and name != call.name:
                call.name = name if not call.name else call.name + name
            if arguments:
                call.arguments.append(arguments)

    def reply(self) -> AssistantReply:
        calls: list[ToolCall] = []
        for index in sorted(self.calls):
            partial = self.calls[index]
            if not partial.name:
                raise ProviderError(
                    f"provider streamed tool call #{index} without a function name",
                    kind="protocol",
                )
            calls.append(
                ToolCall(
                    call_id=partial.call_id or f"call_{index}",
                    name=partial.name,
                    arguments="".join(partial.arguments),
                )
            )
        return AssistantReply("".join(self.text), tuple(calls), self.finish_reason)


def _protocol(problem: str, data: str) -> ProviderError:
    return ProviderError(
        f"provider stream chunk invalid: {problem}: {data[:200]!r}", kind="protocol"
    )


def _error_message(body: object) -> str | None:
    """Extract the provider's error message from an OpenAI-style error body."""
    if not isinstance(body, dict):
        return None
    error = body.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    if isinstance(error, str):
        return error
    message = body.get("message")
    return message if isinstance(message, str) else None


async def _http_error(response: httpx.Response) -> ProviderError:
    raw = b""
    try:
        async for piece in response.aiter_bytes():
            raw += piece
            if len(raw) >= _MAX_ERROR_BODY:
                break
    except httpx.HTTPError:
        pass  # The status alone is enough to report.
    try:
        detail = _error_message(json.loads(raw))
    except ValueError:
        detail = None
    if detail is None:
        detail = raw[:500].decode("utf-8", "replace").strip() or response.reason_phrase
    return ProviderError(
        f"provider returned HTTP {response.status_code}: {detail}",
        kind="http",
        status=response.status_code,
    )


async def _read_events(response: httpx.Response, acc: _Accumulator) -> bool:
    """Feed every SSE ``data`` payload to ``acc``; return whether ``[DONE]`` was seen."""
    data_lines: list[str] = []
    async for line in sse_lines(response.aiter_bytes()):
        if not line:
            if data_lines:
                data, data_lines = "\n".join(data_lines), []
                if data.strip() == _DONE:
                    return True
                await acc.feed(data)
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if name == "data":
            data_lines.append(value.removeprefix(" "))
    if data_lines:
        data = "\n".join(data_lines)
        if data.strip() == _DONE:
            return True
        await acc.feed(data)
    return False


async def complete(
    client: httpx.AsyncClient,
    config: ProviderConfig,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[ToolSpec],
    on_text: Callable[[str], Awaitable[None]] | None = None,
    *,
    timeout: float = 60.0,  # noqa: ASYNC109 - per-operation httpx timeout, not a deadline
) -> AssistantReply:
    """Run one streaming Chat Completions call and return the assembled reply.

    ``on_text`` is awaited with each non-empty text delta, in order, as it arrives.
    ``timeout`` bounds each network operation (connecting, and every wait for more
    data), so a stalled stream fails with a ``"timeout"`` :class:`ProviderError`.
    """
    body: dict[str, Any] = {
        "model": config.model,
        "messages": [dict(message) for message in messages],
        "stream": True,
    }
    if tools:
        body["tools"] = [tool.to_wire() for tool in tools]
    headers = {"Accept": "text/event-stream"}
    if config.api_key:
        headers["Authorization"] = f"Bearer {config.api_key}"
    url = config.base_url.rstrip("/") + "/chat/completions"
    acc = _Accumulator(on_text)
    started = False
    try:
        async with client.stream(
            "POST", url, json=body, headers=headers, timeout=httpx.Timeout(timeout)
        ) as response:
            started = True
            if not response.is_success:
                raise await _http_error(response)
            content_type = response.headers.get("content-type", "")
            if content_type.startswith("application/json"):
                raise ProviderError(
                    "provider answered with a JSON body instead of an event stream",
                    kind="protocol",
                    status=response.status_code,
                )
            if not await _read_events(response, acc):
                raise ProviderError("provider stream ended without [DONE]", kind="stream")
    except httpx.TimeoutException as exc:
        raise ProviderError(
            f"provider call timed out ({type(exc).__name__}, timeout {timeout:g}s)",
            kind="timeout",
        ) from exc
    except httpx.HTTPError as exc:
        if started:
            raise ProviderError(f"provider stream broke: {exc}", kind="stream") from exc
        raise ProviderError(f"provider request failed: {exc}", kind="http") from exc
    return acc.reply()
