"""Every framing the mock provider streams in carries the same answer, read as the HTML
standard reads server-sent events; scenarios meet every framing, the same way each run."""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Any

import httpx
import pytest

from conformance.mock_provider import (
    CutStreamReply,
    MockProvider,
    ScriptedToolCall,
    StallReply,
    ToolCallsReply,
)
from conformance.stream_framing import FRAMINGS, PLAIN, Framing, framing_for
from reference_host.sse import LineSplitter

TEXT = "Caf\u00e9 \U0001f680 a\u2028b, then the calls"
CALLS = (
    ScriptedToolCall("Read", {"path": "caf\u00e9.txt"}, "call_1"),
    ScriptedToolCall("Grep", {"pattern": "na\u00efve"}, "call_2"),
)


def _events(body: bytes) -> list[str]:
    """The data of each event, by the standard's rules (comments, optional space, several
    data lines, events without data dropped)."""
    splitter = LineSplitter()
    lines = [*splitter.feed(body), *splitter.flush(), ""]
    events: list[str] = []
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                events.append("\n".join(data))
            data = []
        elif not line.startswith(":"):
            field, _, value = line.partition(":")
            if field == "data":
                data.append(value.removeprefix(" "))
    return events


def _answer(body: bytes) -> tuple[str, dict[int, tuple[str, str, str]], list[str]]:
    """The text, the calls (by index: id, name, arguments) and the finish reasons."""
    events = _events(body)
    assert events[-1] == "[DONE]", events[-3:]
    text, finishes = "", []
    calls: dict[int, tuple[str, str, str]] = {}
    for event in events[:-1]:
        chunk = json.loads(event)
        for choice in chunk["choices"]:
            delta = choice["delta"]
            text += delta.get("content") or ""
            for piece in delta.get("tool_calls") or []:
                call_id, name, arguments = calls.get(piece["index"], ("", "", ""))
                function = piece.get("function") or {}
                calls[piece["index"]] = (
                    piece.get("id") or call_id,
                    function.get("name") or name,
                    arguments + (function.get("arguments") or ""),
                )
            if choice["finish_reason"]:
                finishes.append(choice["finish_reason"])
    return text, calls, finishes


def _stream(provider: MockProvider, framing: Framing) -> bytes:
    provider.reset()
    provider.frame_streams(framing)
    provider.enqueue(ToolCallsReply(CALLS, text=TEXT, chunk_size=3))
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    return httpx.post(f"{provider.base_url}/chat/completions", json=body, timeout=5.0).content


def test_every_framing_carries_the_same_answer() -> None:
    with MockProvider() as provider:
        answers = {framing.name: _answer(_stream(provider, framing)) for framing in FRAMINGS}
    plain = answers[PLAIN.name]
    assert plain[0] == TEXT and len(plain[1]) == 2 and plain[2] == ["tool_calls"]
    assert all(answer[:2] == plain[:2] for answer in answers.values()), answers
    finishes = {framing.name: answers[framing.name][2] for framing in FRAMINGS}
    for framing in FRAMINGS:  # some providers end an answer with calls in "stop"
        assert finishes[framing.name] == (["stop"] if framing.calls_end_in_stop else ["tool_calls"])


def test_the_framings_differ_where_they_claim_to() -> None:
    with MockProvider() as provider:
        bodies = {framing: _stream(provider, framing) for framing in FRAMINGS}
    plain, crlf, lone_cr = (bodies[framing] for framing in FRAMINGS)
    assert b"\r" not in plain and b"\\u00e9" in plain and b": " not in plain.split(b"data: ")[0]
    assert b"\r\n" in crlf and b": keep-alive" in crlf and "\u00e9".encode() in crlf
    assert b"\n" not in lone_cr and b"data:{" in lone_cr and b'"choices":[]' in lone_cr
    # the merged framings put a text piece beside a call's first piece
    merged = [json.loads(e) for e in _events(crlf)[:-1] if e.strip()]
    deltas = [c["choices"][0]["delta"] for c in merged if c["choices"]]
    assert any("content" in d and "tool_calls" in d for d in deltas), deltas


def test_a_split_write_cuts_inside_a_character() -> None:
    writes = FRAMINGS[1].writes([{"content": "caf\u00e9"}], done=False)
    assert len(writes) == 4  # the keep-alive comment in two, the event in two
    with pytest.raises(UnicodeDecodeError):
        writes[-2].decode("utf-8")


def test_scenarios_meet_every_framing_in_the_same_order_each_run() -> None:
    names = [f"feature.feature: scenario {n}" for n in range(30)]
    first = [framing_for(name, 1) for name in names]
    assert first == [framing_for(name, 1) for name in names]
    assert set(Counter(first)) == set(FRAMINGS)
    one = names[0]
    assert {framing_for(one, n) for n in range(1, 4)} == set(FRAMINGS)
    assert framing_for("", 7) is PLAIN


def test_an_answer_with_a_usage_chunk_asked_for_keeps_one() -> None:
    events: list[dict[str, Any]] = [
        {"id": "x", "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]},
        {"id": "x", "choices": [], "usage": {"total_tokens": 0}},
    ]
    shaped = FRAMINGS[2].reshape(events)
    assert sum("usage" in event for event in shaped) == 1


@pytest.mark.parametrize("framing", FRAMINGS, ids=lambda framing: framing.name)
def test_a_held_answer_is_framed_in_both_its_parts(framing: Framing) -> None:
    """The part written before the hold and the rest after it are each in the framing,
    and together carry the whole answer."""
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    received: list[bytes] = []
    with MockProvider() as provider:
        provider.frame_streams(framing)
        provider.enqueue(StallReply(prefix="Caf\u00e9 ", suffix="\U0001f680 done", calls=CALLS))

        def read() -> None:
            url = f"{provider.base_url}/chat/completions"
            received.append(httpx.post(url, json=body, timeout=5.0).content)

        reader = threading.Thread(target=read)
        reader.start()
        provider.wait_for_requests(1)
        provider.release_stalls()
        reader.join(5.0)
    text, calls, finishes = _answer(received[0])
    assert text == "Caf\u00e9 \U0001f680 done" and len(calls) == 2
    assert finishes == (["stop"] if framing.calls_end_in_stop else ["tool_calls"])
    if framing.line_end != "\n":
        assert b"\n" not in received[0].replace(b"\r\n", b"")
    assert received[0].count(b'"choices":[]') == (
        framing.empty_choices_first + framing.usage_last
    ), "a chunk without choices opens and closes the stream once each, not once a part"


@pytest.mark.parametrize("framing", FRAMINGS, ids=lambda framing: framing.name)
def test_a_cut_off_answer_is_framed_up_to_the_cut(framing: Framing) -> None:
    with MockProvider() as provider:
        provider.frame_streams(framing)
        provider.enqueue(CutStreamReply("Caf\u00e9, then nothing", chunk_size=4))
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
        url = f"{provider.base_url}/chat/completions"
        pieces: list[bytes] = []
        with (
            pytest.raises(httpx.RemoteProtocolError),
            httpx.stream("POST", url, json=body, timeout=5.0) as response,
        ):
            pieces.extend(response.iter_raw())
    events = _events(b"".join(pieces))
    assert "[DONE]" not in events and events, events
    chunks = [json.loads(event) for event in events]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "Caf\u00e9, then nothing"
    if framing.line_end != "\n":
        assert b"\n" not in b"".join(pieces).replace(b"\r\n", b"")
