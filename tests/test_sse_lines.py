"""The reference host splits a provider's event stream into lines as the HTML standard
does, whatever the pieces the bytes arrive in."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator

from hypothesis import given
from hypothesis import strategies as st

from reference_host.sse import LineSplitter, sse_lines

STREAM = (
    ": keep-alive\r\n"
    'data: {"content":"caf\u00e9 \u2028 line\u0085 sep"}\r\n'
    "\r\n"
    'data:{"a":1}\r'
    "\r"
    "data: [DONE]\n"
    "\n"
    "last line without an end"
).encode()

LINES = [
    ": keep-alive",
    'data: {"content":"caf\u00e9 \u2028 line\u0085 sep"}',
    "",
    'data:{"a":1}',
    "",
    "data: [DONE]",
    "",
    "last line without an end",
]


def _split(pieces: list[bytes]) -> list[str]:
    splitter = LineSplitter()
    lines = [line for piece in pieces for line in splitter.feed(piece)]
    return lines + splitter.flush()


def test_lines_end_only_at_cr_lf_lf_or_cr() -> None:
    assert _split([STREAM]) == LINES


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
def test_the_pieces_the_bytes_arrive_in_change_nothing(cuts: list[int]) -> None:
    bounds = [0, *sorted(cuts), len(STREAM)]
    pieces = [STREAM[a:b] for a, b in itertools.pairwise(bounds)]
    assert _split(pieces) == LINES


def test_a_cr_at_the_end_of_a_piece_waits_for_a_possible_lf() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b"data: x\r") == []
    assert splitter.feed(b"\ndata: y\r") == ["data: x"]
    assert splitter.feed(b"data: z") == ["data: y"]
    assert splitter.flush() == ["data: z"]


def test_a_stream_ending_in_a_lone_cr_ends_its_last_line() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b"data: x\r") == []
    assert splitter.flush() == ["data: x"]


def test_lines_arrive_from_an_async_stream() -> None:
    async def pieces() -> AsyncIterator[bytes]:
        for index in range(0, len(STREAM), 3):
            yield STREAM[index : index + 3]

    async def collect() -> list[str]:
        return [line async for line in sse_lines(pieces())]

    assert asyncio.run(collect()) == LINES
