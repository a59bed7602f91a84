"""Tests of the reference host's provider client against the mock provider over loopback."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

import httpx
import pytest

from conformance.mock_provider import (
    CutStreamReply,
    HttpErrorReply,
    MockProvider,
    RawStreamReply,
    ScriptedToolCall,
    StallReply,
    TextReply,
    ToolCallsReply,
)
from reference_host.provider_client import (
    AssistantReply,
    ProviderConfig,
    ProviderError,
    ToolCall,
    ToolSpec,
    complete,
)

MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Say hello."},
]
READ_FILE = ToolSpec(
    name="read_file",
    description="Read a workspace file.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)


@pytest.fixture
def provider() -> Iterator[MockProvider]:
    with MockProvider() as mock:
        yield mock


def config_for(provider: MockProvider, api_key: str | None = None) -> ProviderConfig:
    return ProviderConfig(base_url=provider.base_url, model="gpt-test", api_key=api_key)


def run_complete(
    config: ProviderConfig,
    *,
    tools: Sequence[ToolSpec] = (),
    on_text: Callable[[str], Awaitable[None]] | None = None,
    timeout: float = 5.0,
) -> AssistantReply:
    async def main() -> AssistantReply:
        async with httpx.AsyncClient() as client:
            return await complete(client, config, MESSAGES, tools, on_text, timeout=timeout)

    return asyncio.run(main())


def expect_error(config: ProviderConfig, **kwargs: Any) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        run_complete(config, **kwargs)
    return info.value


def test_text_stream_delivers_deltas_in_order(provider: MockProvider) -> None:
    provider.enqueue(TextReply("The quick brown fox jumps.", chunk_size=6))
    deltas: list[str] = []

    async def on_text(delta: str) -> None:
        deltas.append(delta)

    reply = run_complete(config_for(provider), on_text=on_text)
    assert reply == AssistantReply("The quick brown fox jumps.", (), "stop")
    assert deltas == ["The qu", "ick br", "own fo", "x jump", "s."]
    (record,) = provider.requests()
    assert record.stream is True
    assert record.model == "gpt-test"
    assert record.messages == MESSAGES
    assert record.path == "/v1/chat/completions"


def test_text_deltas_are_delivered_before_the_stream_ends(provider: MockProvider) -> None:
    # The stream stalls after "Hel"; only an incremental parser sees it before the release.
    provider.enqueue(StallReply(prefix="Hel", suffix="lo"))
    deltas: list[str] = []

    async def on_text(delta: str) -> None:
        deltas.append(delta)
        if delta == "Hel":
            provider.release_stalls()

    reply = run_complete(config_for(provider), on_text=on_text)
    assert deltas == ["Hel", "lo"]
    assert reply.text == "Hello"


def test_several_tool_calls_in_one_batch(provider: MockProvider) -> None:
    provider.enqueue(
        ToolCallsReply(
            (
                ScriptedToolCall("read_file", {"path": "src/main.py"}, call_id="call_a"),
                ScriptedToolCall("read_file", {"path": "README.md"}),
                ScriptedToolCall("grep", {"pattern": "TODO", "glob": "**/*.py"}),
            ),
            text="Reading.",
            chunk_size=3,
        )
    )
    grep = ToolSpec("grep", "Search files.", {"type": "object"})
    reply = run_complete(config_for(provider), tools=[READ_FILE, grep])
    assert reply.finish_reason == "tool_calls"
    assert reply.text == "Reading."
    assert [call.name for call in reply.tool_calls] == ["read_file", "read_file", "grep"]
    assert reply.tool_calls[0].call_id == "call_a"
    assert len({call.call_id for call in reply.tool_calls}) == 3
    assert [json.loads(call.arguments) for call in reply.tool_calls] == [
        {"path": "src/main.py"},
        {"path": "README.md"},
        {"pattern": "TODO", "glob": "**/*.py"},
    ]
    (record,) = provider.requests()
    assert record.tool_names == ("read_file", "grep")
    assert record.body["tools"][0] == {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a workspace file.",
            "parameters": READ_FILE.parameters,
        },
    }


def test_malformed_tool_arguments_are_passed_through_raw(provider: MockProvider) -> None:
    provider.enqueue(ToolCallsReply((ScriptedToolCall("read_file", '{"path": "a', "c1"),)))
    reply = run_complete(config_for(provider), tools=[READ_FILE])
    assert reply.tool_calls == (ToolCall("c1", "read_file", '{"path": "a'),)


@pytest.mark.parametrize("status", [429, 500])
def test_http_error_statuses(provider: MockProvider, status: int) -> None:
    provider.enqueue(HttpErrorReply(status, "quota exhausted for test"))
    error = expect_error(config_for(provider))
    assert error.kind == "http"
    assert error.status == status
    assert "quota exhausted for test" in str(error)
    assert str(status) in str(error)


def test_unscripted_request_surfaces_provider_message(provider: MockProvider) -> None:
    error = expect_error(config_for(provider))
    assert (error.kind, error.status) == ("http", 500)
    assert "no reply was scripted" in str(error)


def test_cut_stream_is_a_stream_error(provider: MockProvider) -> None:
    provider.enqueue(CutStreamReply("half an answ", chunk_size=4))
    deltas: list[str] = []

    async def on_text(delta: str) -> None:
        deltas.append(delta)

    error = expect_error(config_for(provider), on_text=on_text)
    assert error.kind == "stream"
    assert error.status is None
    assert "".join(deltas) == "half an answ"


def test_stream_ending_cleanly_without_done_is_a_stream_error(provider: MockProvider) -> None:
    chunk = {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}
    provider.enqueue(RawStreamReply((f"data: {json.dumps(chunk)}\n\n",)))
    error = expect_error(config_for(provider))
    assert error.kind == "stream"
    assert "[DONE]" in str(error)


def test_sse_comments_crlf_and_multiline_data_are_parsed(provider: MockProvider) -> None:
    provider.enqueue(
        RawStreamReply(
            (
                ": keep-alive\r\n\r\n",
                'event: message\r\ndata: {"choices": [{"index": 0,\r\n',
                'data: "delta": {"content": "ok"}}]}\r\n\r\n',
                'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n',
                "data: [DONE]\n\n",
                "data: this is never read\n\n",
            )
        )
    )
    reply = run_complete(config_for(provider))
    assert reply == AssistantReply("ok", (), "stop")


@pytest.mark.parametrize(
    "payload",
    ["{not json", "[1, 2, 3]", '{"choices": {"index": 0}}', '{"choices": [{"delta": 5}]}'],
)
def test_unparseable_chunk_is_a_protocol_error(provider: MockProvider, payload: str) -> None:
    provider.enqueue(RawStreamReply((f"data: {payload}\n\n", "data: [DONE]\n\n")))
    error = expect_error(config_for(provider))
    assert error.kind == "protocol"


def test_stall_with_short_timeout_is_a_timeout_error(provider: MockProvider) -> None:
    provider.enqueue(StallReply(prefix="thinking"))
    started = time.monotonic()
    error = expect_error(config_for(provider), timeout=0.2)
    assert error.kind == "timeout"
    assert time.monotonic() - started < 2.0


def test_cancelling_a_stalled_call_ends_promptly_and_closes_the_response(
    provider: MockProvider,
) -> None:
    provider.enqueue(StallReply(prefix="partial"))
    deltas: list[str] = []

    async def on_text(delta: str) -> None:
        deltas.append(delta)

    async def main() -> float:
        async with httpx.AsyncClient() as client:
            task = asyncio.create_task(
                complete(client, config_for(provider), MESSAGES, (), on_text, timeout=30.0)
            )
            await asyncio.to_thread(provider.wait_for_requests, 1)
            started = time.monotonic()
            task.cancel()
            async with asyncio.timeout(2.0):
                with pytest.raises(asyncio.CancelledError):
                    await task
            return time.monotonic() - started

    elapsed = asyncio.run(main())
    assert elapsed < 1.0
    # The server sees the disconnect: the held stall handler finishes.
    provider.wait_until_idle(timeout=2.0)


def test_authorization_header_only_with_a_key(provider: MockProvider) -> None:
    provider.enqueue(TextReply("a"), TextReply("b"), TextReply("c"))
    run_complete(config_for(provider, api_key="sk-test-123"))
    run_complete(config_for(provider))
    run_complete(config_for(provider, api_key=""))
    assert [r.authorization for r in provider.requests()] == ["Bearer sk-test-123", None, None]


def test_tools_omitted_when_empty(provider: MockProvider) -> None:
    provider.enqueue(TextReply("a"), TextReply("b"))
    run_complete(config_for(provider), tools=())
    run_complete(config_for(provider), tools=[READ_FILE])
    without, with_tools = provider.requests()
    assert "tools" not in without.body
    assert without.tool_names == ()
    assert with_tools.tool_names == ("read_file",)


def test_base_url_with_trailing_slash(provider: MockProvider) -> None:
    provider.enqueue(TextReply("slash"))
    config = ProviderConfig(base_url=provider.base_url + "/", model="m")
    assert run_complete(config).text == "slash"
    assert provider.requests()[0].path == "/v1/chat/completions"


def test_connection_refused_is_an_http_error_without_status() -> None:
    provider = MockProvider()
    provider.start()
    config = config_for(provider)
    provider.stop()
    error = expect_error(config)
    assert error.kind == "http"
    assert error.status is None
