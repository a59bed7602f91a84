"""Tests of the scripted mock model provider, driven by a plain synchronous httpx client."""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from conformance.mock_provider import (
    MAX_PIECES,
    CutStreamReply,
    HttpErrorReply,
    MockProvider,
    RawStreamReply,
    ScriptedToolCall,
    StallReply,
    TextReply,
    ToolCallsReply,
)

USER = [{"role": "user", "content": "hi"}]
ASSISTANT_CALL = {
    "role": "assistant",
    "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "Read", "arguments": "{}"}}
    ],
}


@pytest.fixture
def provider() -> Iterator[MockProvider]:
    with MockProvider() as mock:
        yield mock


@pytest.fixture
def client(provider: MockProvider) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=provider.base_url, timeout=5.0) as http:
        yield http


def chat(client: httpx.Client, *, stream: bool, **extra: Any) -> httpx.Response:
    body = {"model": "test-model", "messages": USER, "stream": stream, **extra}
    return client.post("/chat/completions", json=body)


def sse_events(text: str) -> list[str]:
    """The ``data:`` payloads of an SSE body, in order."""
    events = []
    for block in text.split("\n\n"):
        if block.strip():
            assert block.startswith("data: "), block
            events.append(block.removeprefix("data: "))
    return events


def chunks_of(events: list[str]) -> list[dict[str, Any]]:
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    for chunk in chunks:
        assert chunk["object"] == "chat.completion.chunk"
        assert chunk["model"] == "test-model"
    return chunks


def test_base_url_is_loopback_v1(provider: MockProvider) -> None:
    assert provider.base_url.startswith("http://127.0.0.1:")
    assert provider.base_url.endswith("/v1")


def test_streaming_text_reply_format(provider: MockProvider, client: httpx.Client) -> None:
    provider.enqueue(TextReply("Hello, streaming world!", chunk_size=5))
    response = chat(client, stream=True)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    chunks = chunks_of(sse_events(response.text))
    deltas = [chunk["choices"][0]["delta"] for chunk in chunks]
    assert deltas[0]["role"] == "assistant"
    pieces = [d["content"] for d in deltas[1:-1]]
    assert "".join(pieces) == "Hello, streaming world!"
    assert len(pieces) == 5 and all(len(p) <= 5 for p in pieces)
    assert [c["choices"][0]["finish_reason"] for c in chunks[:-1]] == [None] * (len(chunks) - 1)
    assert chunks[-1]["choices"][0] == {
        "index": 0,
        "delta": {},
        "logprobs": None,
        "finish_reason": "stop",
    }
    assert len({chunk["id"] for chunk in chunks}) == 1


def test_streaming_usage_chunk_when_requested(provider: MockProvider, client: httpx.Client) -> None:
    provider.enqueue(TextReply("ok"))
    response = chat(client, stream=True, stream_options={"include_usage": True})
    chunks = chunks_of(sse_events(response.text))
    assert chunks[-1]["choices"] == []
    assert set(chunks[-1]["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}


def test_non_streaming_text_reply_format(provider: MockProvider, client: httpx.Client) -> None:
    provider.enqueue(TextReply("plain answer"))
    response = chat(client, stream=False)
    assert response.status_code == 200
    completion = response.json()
    assert completion["object"] == "chat.completion"
    assert completion["model"] == "test-model"
    choice = completion["choices"][0]
    assert choice["message"]["role"] == "assistant"
    assert choice["message"]["content"] == "plain answer"
    assert "tool_calls" not in choice["message"]
    assert choice["finish_reason"] == "stop"


def test_streaming_tool_calls_split_across_chunks(
    provider: MockProvider, client: httpx.Client
) -> None:
    provider.enqueue(
        ToolCallsReply(
            (
                ScriptedToolCall("read_file", {"path": "docs/plan.md", "limit": 200}),
                ScriptedToolCall("search", '{"query": "unterminated', call_id="fixed-id"),
                ScriptedToolCall("list", {}),
            ),
            text="Let me look.",
            chunk_size=4,
        )
    )
    chunks = chunks_of(sse_events(chat(client, stream=True).text))
    text = ""
    calls: dict[int, dict[str, Any]] = {}
    argument_pieces: dict[int, int] = {}
    for chunk in chunks:
        delta = chunk["choices"][0]["delta"]
        text += delta.get("content") or ""
        for item in delta.get("tool_calls", []):
            call = calls.setdefault(item["index"], {"arguments": ""})
            if "id" in item:
                assert item["type"] == "function"
                call["id"] = item["id"]
                call["name"] = item["function"]["name"]
            if item["function"].get("arguments"):
                argument_pieces[item["index"]] = argument_pieces.get(item["index"], 0) + 1
            call["arguments"] += item["function"]["arguments"]
    assert text == "Let me look."
    assert sorted(calls) == [0, 1, 2]
    assert calls[0]["name"] == "read_file"
    assert json.loads(calls[0]["arguments"]) == {"path": "docs/plan.md", "limit": 200}
    assert argument_pieces[0] > 1
    assert calls[1]["id"] == "fixed-id"
    assert calls[1]["arguments"] == '{"query": "unterminated'
    assert calls[2]["arguments"] == "{}"
    assert calls[0]["id"] != calls[2]["id"]
    assert calls[0]["id"].startswith("call_")
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_large_strings_stream_in_at_most_max_pieces(
    provider: MockProvider, client: httpx.Client
) -> None:
    text = "0123456789abcdef" * 4096 + "tail"
    arguments = {"markdown": "\U0001f680 plan\r\n" * 20_000}
    provider.enqueue(ToolCallsReply((ScriptedToolCall("SubmitPlan", arguments),), text=text))
    chunks = chunks_of(sse_events(chat(client, stream=True).text))
    deltas = [chunk["choices"][0]["delta"] for chunk in chunks]
    text_pieces = [d["content"] for d in deltas[1:] if d.get("content")]
    argument_pieces = [
        d["tool_calls"][0]["function"]["arguments"]
        for d in deltas
        if d.get("tool_calls") and "id" not in d["tool_calls"][0]
    ]
    assert "".join(text_pieces) == text
    assert json.loads("".join(argument_pieces)) == arguments
    assert 1 < len(text_pieces) <= MAX_PIECES
    assert 1 < len(argument_pieces) <= MAX_PIECES


def test_default_call_ids_are_unique_across_replies(
    provider: MockProvider, client: httpx.Client
) -> None:
    provider.enqueue(
        ToolCallsReply((ScriptedToolCall("a", {}),)), ToolCallsReply((ScriptedToolCall("a", {}),))
    )
    ids = [chat(client, stream=False).json()["choices"][0]["message"]["tool_calls"][0]["id"]]
    ids.append(chat(client, stream=False).json()["choices"][0]["message"]["tool_calls"][0]["id"])
    assert ids[0] != ids[1]


def test_non_streaming_tool_calls_format(provider: MockProvider, client: httpx.Client) -> None:
    provider.enqueue(ToolCallsReply((ScriptedToolCall("edit", {"x": 1}, call_id="c1"),)))
    choice = chat(client, stream=False).json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    assert choice["message"]["tool_calls"] == [
        {"id": "c1", "type": "function", "function": {"name": "edit", "arguments": '{"x":1}'}}
    ]


def test_replies_are_consumed_in_fifo_order_and_requests_recorded(
    provider: MockProvider, client: httpx.Client
) -> None:
    provider.enqueue(TextReply("first"), TextReply("second"))
    provider.enqueue(TextReply("third"))
    assert provider.pending_replies() == 3
    tools = [{"type": "function", "function": {"name": "grep", "parameters": {}}}]
    answers = [
        chat(client, stream=False).json(),
        client.post(
            "/chat/completions",
            json={"model": "other", "messages": USER, "tools": tools},
            headers={"Authorization": "Bearer sk-1"},
        ).json(),
        httpx.post(
            provider.base_url.removesuffix("/v1") + "/chat/completions",
            json={"messages": USER, "stream": False},
        ).json(),
    ]
    texts = [answer["choices"][0]["message"]["content"] for answer in answers]
    assert texts == ["first", "second", "third"]
    assert provider.pending_replies() == 0
    records = provider.requests()
    assert [r.model for r in records] == ["test-model", "other", None]
    assert [r.tool_names for r in records] == [(), ("grep",), ()]
    assert [r.authorization for r in records] == [None, "Bearer sk-1", None]
    assert [r.path for r in records] == ["/v1/chat/completions"] * 2 + ["/chat/completions"]
    assert all(r.messages == USER and not r.unscripted and not r.stream for r in records)
    assert records[1].body["tools"] == tools


def test_requests_returns_a_snapshot(provider: MockProvider, client: httpx.Client) -> None:
    provider.enqueue(TextReply("a"), TextReply("b"))
    chat(client, stream=True)
    snapshot = provider.requests()
    chat(client, stream=True)
    assert len(snapshot) == 1
    assert snapshot[0].stream is True
    assert len(provider.requests()) == 2


@pytest.mark.parametrize("status", [429, 500, 503])
def test_http_error_reply(provider: MockProvider, client: httpx.Client, status: int) -> None:
    provider.enqueue(HttpErrorReply(status, "slow down please"), TextReply("after"))
    response = chat(client, stream=True)
    assert response.status_code == status
    error = response.json()["error"]
    assert error["message"] == "slow down please"
    assert isinstance(error["type"], str)
    assert chat(client, stream=False).json()["choices"][0]["message"]["content"] == "after"


def test_unscripted_request_gets_500_and_is_recorded(
    provider: MockProvider, client: httpx.Client
) -> None:
    response = chat(client, stream=True)
    assert response.status_code == 500
    assert "no reply was scripted" in response.json()["error"]["message"]
    (record,) = provider.requests()
    assert record.unscripted is True
    assert record.messages == USER


def test_fallback_answers_once_the_script_is_empty(
    provider: MockProvider, client: httpx.Client
) -> None:
    provider.enqueue(TextReply("scripted"))
    provider.set_fallback(TextReply("fallback"))
    texts = [chat(client, stream=False).json()["choices"][0]["message"]["content"] for _ in "ab"]
    assert texts == ["scripted", "fallback"]
    provider.set_fallback(None)
    assert chat(client, stream=False).status_code == 500
    assert [r.unscripted for r in provider.requests()] == [False, False, True]


def test_unexpected_requests_lists_malformed_and_unscripted(
    provider: MockProvider, client: httpx.Client
) -> None:
    provider.enqueue(TextReply("fine"))
    chat(client, stream=True)
    assert provider.unexpected_requests() == []
    client.post("/chat/completions", content=b"{", headers={"Content-Type": "application/json"})
    chat(client, stream=True)
    unexpected = provider.unexpected_requests()
    assert [(r.malformed, r.unscripted) for r in unexpected] == [(True, False), (False, True)]
    assert unexpected[0].raw_body == b"{"


@pytest.mark.parametrize(
    "content",
    [b"not json at all", b"[1, 2]", b'{"model": "m"}', b'{"model": "m", "messages": "hi"}'],
)
def test_malformed_request_gets_400_and_is_recorded(
    provider: MockProvider, client: httpx.Client, content: bytes
) -> None:
    provider.enqueue(TextReply("kept"))
    response = client.post(
        "/chat/completions", content=content, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert response.json()["error"]["message"]
    (record,) = provider.requests()
    assert record.malformed is True
    assert record.unscripted is False
    assert record.raw_body == content
    assert provider.pending_replies() == 1


@pytest.mark.parametrize(
    ("message", "named"),
    [
        ({"role": "user", "content": "hi", "tool_calls": []}, "tool_calls"),
        ({"role": "user", "content": "hi", "XXtool_callsXX": []}, "XXtool_callsXX"),
        ({"role": "tool", "content": "ok", "tool_call_id": "c1", "name": "Read"}, "name"),
        ({"role": "narrator", "content": "hi"}, "narrator"),
    ],
    ids=["user-with-tool-calls", "unknown-property", "tool-with-name", "unknown-role"],
)
def test_a_message_chat_completions_does_not_define_gets_400(
    provider: MockProvider, client: httpx.Client, message: dict[str, object], named: str
) -> None:
    before = [*USER, ASSISTANT_CALL] if message["role"] == "tool" else USER
    body = {"model": "test-model", "messages": [*before, message]}
    response = client.post("/chat/completions", json=body)
    assert response.status_code == 400
    assert named in response.json()["error"]["message"]
    (record,) = provider.requests()
    assert record.malformed is True


def test_every_property_chat_completions_defines_is_accepted(
    provider: MockProvider, client: httpx.Client
) -> None:
    provider.enqueue(TextReply("fine"))
    messages = [
        {"role": "system", "content": "s", "name": "sys"},
        {"role": "developer", "content": "d"},
        {"role": "user", "content": [{"type": "text", "text": "u"}], "name": "me"},
        {**ASSISTANT_CALL, "content": None, "refusal": None, "name": "agent"},
        {"role": "tool", "content": "r", "tool_call_id": "c1"},
    ]
    response = client.post("/chat/completions", json={"model": "m", "messages": messages})
    assert response.status_code == 200, response.text


def test_cut_stream_aborts_without_done(provider: MockProvider, client: httpx.Client) -> None:
    provider.enqueue(CutStreamReply("partial answer", chunk_size=4))
    received: list[str] = []
    body = {"model": "test-model", "messages": USER, "stream": True}
    with (
        pytest.raises(httpx.RemoteProtocolError),
        client.stream("POST", "/chat/completions", json=body) as response,
    ):
        received.extend(line for line in response.iter_lines() if line)
    assert received, "some chunks should arrive before the cut"
    assert "data: [DONE]" not in received
    text = "".join(
        json.loads(line.removeprefix("data: "))["choices"][0]["delta"].get("content", "")
        for line in received
    )
    assert text == "partial answer"


def test_cut_non_streaming_response_is_truncated(
    provider: MockProvider, client: httpx.Client
) -> None:
    provider.enqueue(CutStreamReply("partial"))
    with pytest.raises(httpx.RemoteProtocolError):
        chat(client, stream=False)


def test_raw_stream_reply_is_sent_verbatim(provider: MockProvider, client: httpx.Client) -> None:
    provider.enqueue(RawStreamReply((": comment\r\n\r\n", "data: {broken\n\n")))
    response = chat(client, stream=True)
    assert response.status_code == 200
    assert response.text == ": comment\r\n\r\ndata: {broken\n\n"


def test_wait_for_requests(provider: MockProvider, client: httpx.Client) -> None:
    with pytest.raises(TimeoutError, match="expected at least 1 request"):
        provider.wait_for_requests(1, timeout=0.05)
    provider.enqueue(TextReply("x"))
    worker = threading.Thread(target=chat, args=(client,), kwargs={"stream": True})
    worker.start()
    records = provider.wait_for_requests(1, timeout=5.0)
    worker.join(5.0)
    assert len(records) == 1
    with pytest.raises(TimeoutError, match="received 1"):
        provider.wait_for_requests(2, timeout=0.05)


def read_stream_in_thread(
    client: httpx.Client, lines: queue.Queue[str | BaseException]
) -> threading.Thread:
    """Stream a completion on a worker thread, forwarding each non-empty line."""

    def run() -> None:
        body = {"model": "test-model", "messages": USER, "stream": True}
        try:
            with client.stream("POST", "/chat/completions", json=body) as response:
                for line in response.iter_lines():
                    if line:
                        lines.put(line)
        except BaseException as exc:
            lines.put(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    return worker


def test_stall_holds_until_released(provider: MockProvider, client: httpx.Client) -> None:
    provider.enqueue(StallReply(prefix="wait", suffix="ed"))
    lines: queue.Queue[str | BaseException] = queue.Queue()
    worker = read_stream_in_thread(client, lines)
    provider.wait_for_requests(1)
    first = lines.get(timeout=5.0)
    assert isinstance(first, str) and '"role":"assistant"' in first
    second = lines.get(timeout=5.0)
    assert isinstance(second, str) and '"content":"wait"' in second
    with pytest.raises(queue.Empty):
        lines.get(timeout=0.1)  # held open: nothing more arrives before the release
    with pytest.raises(TimeoutError, match="1 request"):
        provider.wait_until_idle(timeout=0.05)  # the stalled handler is still running
    provider.release_stalls()
    rest: list[str | BaseException] = []
    while not rest or rest[-1] != "data: [DONE]":
        rest.append(lines.get(timeout=5.0))
    worker.join(5.0)
    assert '"content":"ed"' in str(rest[0])
    assert '"finish_reason":"stop"' in str(rest[-2])
    provider.wait_until_idle(timeout=5.0)


def test_stall_non_streaming_completes_after_release(
    provider: MockProvider, client: httpx.Client
) -> None:
    provider.enqueue(StallReply(prefix="a", suffix="b"))
    results: queue.Queue[httpx.Response] = queue.Queue()
    worker = threading.Thread(target=lambda: results.put(chat(client, stream=False)))
    worker.start()
    provider.wait_for_requests(1)
    with pytest.raises(queue.Empty):
        results.get(timeout=0.1)
    provider.release_stalls()
    response = results.get(timeout=5.0)
    worker.join(5.0)
    assert response.json()["choices"][0]["message"]["content"] == "ab"


def test_stall_with_calls_asks_for_them_after_release(
    provider: MockProvider, client: httpx.Client
) -> None:
    call = ScriptedToolCall("SubmitPlan", {"title": "t"}, call_id="call_held")
    provider.enqueue(StallReply(calls=(call,)))
    lines: queue.Queue[str | BaseException] = queue.Queue()
    worker = read_stream_in_thread(client, lines)
    provider.wait_for_requests(1)
    first = lines.get(timeout=5.0)
    assert isinstance(first, str) and '"role":"assistant"' in first
    with pytest.raises(queue.Empty):
        lines.get(timeout=0.1)  # held: the calls come only after the release
    provider.release_stalls()
    rest: list[str | BaseException] = []
    while not rest or rest[-1] != "data: [DONE]":
        rest.append(lines.get(timeout=5.0))
    worker.join(5.0)
    text = "".join(str(line) for line in rest)
    assert '"id":"call_held"' in text and '"name":"SubmitPlan"' in text
    assert '"finish_reason":"tool_calls"' in text


def test_stall_with_calls_non_streaming(provider: MockProvider, client: httpx.Client) -> None:
    provider.enqueue(StallReply(calls=(ScriptedToolCall("Read", {"path": "a"}),)))
    results: queue.Queue[httpx.Response] = queue.Queue()
    worker = threading.Thread(target=lambda: results.put(chat(client, stream=False)))
    worker.start()
    provider.wait_for_requests(1)
    provider.release_stalls()
    response = results.get(timeout=5.0)
    worker.join(5.0)
    choice = response.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["tool_calls"][0]["function"]["name"] == "Read"


def test_stall_ends_when_client_disconnects(provider: MockProvider, client: httpx.Client) -> None:
    provider.enqueue(StallReply())
    body = {"model": "test-model", "messages": USER, "stream": True}
    with client.stream("POST", "/chat/completions", json=body) as response:
        assert response.status_code == 200
        provider.wait_for_requests(1)
    provider.wait_until_idle(timeout=5.0)


def test_stall_does_not_block_stop() -> None:
    provider = MockProvider()
    provider.start()
    provider.enqueue(StallReply(prefix="x"))
    lines: queue.Queue[str | BaseException] = queue.Queue()
    with httpx.Client(base_url=provider.base_url, timeout=5.0) as own_client:
        worker = read_stream_in_thread(own_client, lines)
        provider.wait_for_requests(1)
        started = time.monotonic()
        provider.stop()
        elapsed = time.monotonic() - started
        worker.join(5.0)
    assert elapsed < 0.9
    assert not worker.is_alive()
    seen = []
    while not lines.empty():
        seen.append(lines.get_nowait())
    assert "data: [DONE]" not in seen
    assert isinstance(seen[-1], httpx.RemoteProtocolError)


def test_reset_clears_script_and_records(provider: MockProvider, client: httpx.Client) -> None:
    provider.enqueue(TextReply("a"), TextReply("b"))
    chat(client, stream=False)
    address = provider.base_url
    provider.reset()
    assert provider.requests() == []
    assert provider.pending_replies() == 0
    assert provider.base_url == address  # a reset keeps the address (a restart within a run)
    assert chat(client, stream=False).status_code == 500


def test_a_request_of_an_earlier_scenario_is_turned_away_unrecorded(
    provider: MockProvider, client: httpx.Client
) -> None:
    earlier = provider.base_url
    provider.new_scenario()
    provider.enqueue(TextReply("for the new scenario"))
    assert provider.base_url != earlier
    late = chat(client, stream=False)  # a host of the earlier scenario, slow to stop
    assert late.status_code == 410
    assert provider.requests() == [] and provider.pending_replies() == 1
    assert provider.stray_requests == 1
    with httpx.Client(base_url=provider.base_url, timeout=5.0) as current:
        answer = chat(current, stream=False).json()
    assert answer["choices"][0]["message"]["content"] == "for the new scenario"


def test_restart_serves_again() -> None:
    provider = MockProvider()
    with pytest.raises(RuntimeError):
        _ = provider.base_url
    for _ in range(2):
        provider.start()
        provider.enqueue(TextReply("up"))
        response = httpx.post(f"{provider.base_url}/chat/completions", json={"messages": USER})
        assert response.json()["choices"][0]["message"]["content"] == "up"
        provider.stop()
    provider.stop()  # idempotent
    assert len(provider.requests()) == 2


def test_requests_on_a_replaced_hosts_connections_are_turned_away(
    provider: MockProvider, client: httpx.Client
) -> None:
    provider.enqueue(TextReply("for the killed host"), TextReply("for the new host"))
    assert chat(client, stream=False).status_code == 200  # opens a kept-alive connection
    provider.turn_away_open_connections()
    provider.reset()
    provider.enqueue(TextReply("for the new host"))
    late = chat(client, stream=False)  # the same connection: bytes of the killed host
    assert late.status_code == 410
    assert provider.requests() == [] and provider.pending_replies() == 1
    with httpx.Client(base_url=provider.base_url, timeout=5.0) as new_host:
        answer = chat(new_host, stream=False).json()
    assert answer["choices"][0]["message"]["content"] == "for the new host"
    assert len(provider.requests()) == 1
