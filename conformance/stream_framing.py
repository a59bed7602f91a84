"""The shapes a streamed Chat Completions answer may take, varied by the mock provider.

Providers differ in how they frame the same answer: the server-sent events standard lets
a line end in CR LF, LF or CR, an event carry several ``data`` lines and comments, the
space after ``data:`` is optional, and bytes arrive in pieces of any size; providers add
chunks without choices (content filter results, usage) and put a last piece in the chunk
that carries the finish reason, or text beside a tool call's first piece. A host that
reads only one shape fails on a real provider, so each request of a scenario gets one of
:data:`FRAMINGS` (docs/implementing-a-host.md, "The model provider").
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["FRAMINGS", "PLAIN", "Framing", "framing_for"]


@dataclass(frozen=True)
class Framing:
    """How one streamed answer is shaped and written."""

    name: str
    line_end: str = "\n"
    data_prefix: str = "data: "
    comments: bool = False  # a keep-alive comment event first, a comment line in each event
    raw_utf8: bool = False  # characters beyond ASCII as UTF-8, not as JSON escapes
    split_writes: bool = False  # each event in two writes, cut inside a character if any
    two_data_lines: bool = False  # each chunk's JSON spread over two data lines
    empty_choices_first: bool = False  # a chunk without choices opens the stream
    usage_last: bool = False  # a usage chunk without choices closes it, asked for or not
    merge_pieces: bool = False  # text beside a call's first piece; a last piece in the finish
    calls_end_in_stop: bool = False  # an answer with calls ends "stop", not "tool_calls"
    text_parts: bool = False  # a whole (not streamed) answer's text as an array of parts

    def reshape(
        self, events: list[dict[str, Any]], *, opening: bool = True, closing: bool = True
    ) -> list[dict[str, Any]]:
        """``events`` (chat.completion.chunk objects) in this framing's arrangement; an
        answer sent in parts (held, or cut off) reshapes its first part with ``closing``
        false and the rest with ``opening`` false."""
        shaped = _merged(events) if self.merge_pieces else list(events)
        if self.calls_end_in_stop:
            shaped = [_stopped(event) for event in shaped]
        if not shaped:
            return shaped
        envelope = {key: value for key, value in shaped[0].items() if key != "choices"}
        if self.empty_choices_first and opening:
            shaped.insert(0, {**envelope, "choices": [], "prompt_filter_results": []})
        if self.usage_last and closing and not any("usage" in event for event in shaped):
            usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
            shaped.append({**envelope, "choices": [], "usage": usage})
        return shaped

    def writes(self, events: Iterable[dict[str, Any]], *, done: bool) -> list[bytes]:
        """The bytes of ``events`` (and of ``[DONE]``), as the writes that send them."""
        end = self.line_end
        blocks = [f": keep-alive{end}{end}"] if self.comments else []
        for event in events:
            payload = json.dumps(event, separators=(",", ":"), ensure_ascii=not self.raw_utf8)
            lines = payload.split(",", 1) if self.two_data_lines else [payload]
            if len(lines) == 2:
                lines[0] += ","
            comment = f": ping{end}" if self.comments else ""
            blocks.append(comment + "".join(f"{self.data_prefix}{line}{end}" for line in lines))
            blocks[-1] += end
        if done:
            blocks.append(f"{self.data_prefix}[DONE]{end}{end}")
        encoded = [block.encode() for block in blocks]
        if not self.split_writes:
            return [b"".join(encoded)]
        return [piece for block in encoded for piece in _cut(block)]


PLAIN: Final = Framing("plain")
FRAMINGS: Final = (
    PLAIN,
    Framing(
        "CR LF, comments, UTF-8 in split writes, merged pieces",
        line_end="\r\n",
        comments=True,
        raw_utf8=True,
        split_writes=True,
        empty_choices_first=True,
        merge_pieces=True,
        text_parts=True,
    ),
    Framing(
        "CR, data lines without a space, spread over two lines, a usage chunk, calls end in stop",
        line_end="\r",
        data_prefix="data:",
        raw_utf8=True,
        two_data_lines=True,
        usage_last=True,
        merge_pieces=True,
        calls_end_in_stop=True,
        text_parts=True,
    ),
)


def framing_for(scenario: str, request_number: int) -> Framing:
    """The framing of a scenario's ``request_number``-th request (from 1); every scenario
    starts somewhere else in :data:`FRAMINGS`, the same place in every run. No scenario
    (the harness's own tests of the mock provider): always :data:`PLAIN`."""
    if not scenario:
        return PLAIN
    return FRAMINGS[(zlib.crc32(scenario.encode()) + request_number) % len(FRAMINGS)]


def _cut(block: bytes) -> list[bytes]:
    """``block`` in two writes: inside its first character beyond ASCII, or halfway."""
    wide = next((i for i, byte in enumerate(block) if byte >= 0x80), None)
    at = wide + 1 if wide is not None else len(block) // 2
    return [block[:at], block[at:]] if 0 < at < len(block) else [block]


def _delta(event: dict[str, Any]) -> dict[str, Any] | None:
    choices = event.get("choices")
    if isinstance(choices, list) and len(choices) == 1 and isinstance(choices[0], dict):
        delta = choices[0].get("delta")
        return delta if isinstance(delta, dict) else None
    return None


def _with_delta(event: dict[str, Any], delta: dict[str, Any]) -> dict[str, Any]:
    return {**event, "choices": [{**event["choices"][0], "delta": delta}]}


def _stopped(event: dict[str, Any]) -> dict[str, Any]:
    choices = event.get("choices")
    if not choices or choices[0].get("finish_reason") != "tool_calls":
        return event
    return {**event, "choices": [{**choices[0], "finish_reason": "stop"}]}


def _merged(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A text piece joins the call head after it; the last piece joins the finish chunk."""
    merged: list[dict[str, Any]] = []
    for event in events:
        delta, before = _delta(event), _delta(merged[-1]) if merged else None
        if delta is None or before is None or merged[-1]["choices"][0]["finish_reason"]:
            merged.append(event)
            continue
        text_only = set(before) == {"content"}
        calls_only = set(before) == {"tool_calls"}
        heads = delta.get("tool_calls") or []
        if text_only and not delta.get("content") and heads and "id" in heads[0]:
            merged[-1] = _with_delta(event, {**delta, "content": before["content"]})
        elif event["choices"][0]["finish_reason"] and not delta and (text_only or calls_only):
            merged[-1] = _with_delta(event, before)
        else:
            merged.append(event)
    return merged
