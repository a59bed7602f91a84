"""Tests of newline-delimited framing with a maximum frame size."""

from __future__ import annotations

import io

from hypothesis import given
from hypothesis import strategies as st

from reference_host.framing import DEFAULT_MAX_FRAME_BYTES, OversizedFrame, read_frames

line_bytes = st.binary(max_size=40).map(lambda b: b.replace(b"\n", b""))


def frames(data: bytes, max_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> list[bytes | OversizedFrame]:
    return list(read_frames(io.BytesIO(data), max_bytes))


def test_default_limit_is_eight_mebibytes() -> None:
    assert DEFAULT_MAX_FRAME_BYTES == 8 * 1024 * 1024


def test_lines_are_split_and_newlines_removed() -> None:
    assert frames(b'{"a":1}\n{"b":2}\n') == [b'{"a":1}', b'{"b":2}']


def test_empty_input_yields_nothing() -> None:
    assert frames(b"") == []


def test_empty_lines_are_frames() -> None:
    assert frames(b"\n\nx\n") == [b"", b"", b"x"]


def test_last_line_without_newline_is_still_a_frame() -> None:
    assert frames(b"one\ntwo") == [b"one", b"two"]
    assert frames(b"only") == [b"only"]


def test_carriage_returns_and_nul_bytes_are_kept() -> None:
    assert frames(b"a\r\nb\x00c\n") == [b"a\r", b"b\x00c"]


def test_oversized_line_is_reported_and_the_next_line_read_intact() -> None:
    result = frames(b"short\n" + b"x" * 20 + b"\nafter\n", max_bytes=8)
    assert len(result) == 3
    assert result[0] == b"short"
    assert isinstance(result[1], OversizedFrame)
    assert result[1].limit == 8
    assert result[2] == b"after"


def test_oversized_line_far_beyond_the_read_chunk_is_skipped_whole() -> None:
    huge = b"y" * 200_003
    result = frames(b"a\n" + huge + b"\nb\n" + huge + b"\n" + b"c", max_bytes=16)
    assert [type(frame) for frame in result] == [
        bytes,
        OversizedFrame,
        bytes,
        OversizedFrame,
        bytes,
    ]
    assert [result[0], result[2], result[4]] == [b"a", b"b", b"c"]


def test_oversized_last_line_without_newline() -> None:
    result = frames(b"ok\n" + b"z" * 100, max_bytes=10)
    assert result[0] == b"ok"
    assert len(result) == 2
    assert isinstance(result[1], OversizedFrame)


def test_exact_limit_line_is_accepted() -> None:
    exact = b"e" * 8
    assert frames(exact + b"\n" + exact + b"\n", max_bytes=8) == [exact, exact]
    assert frames(exact, max_bytes=8) == [exact]


def test_one_byte_over_the_limit_is_oversized() -> None:
    over = b"o" * 9
    result = frames(over + b"\nnext\n", max_bytes=8)
    assert isinstance(result[0], OversizedFrame)
    assert result[1:] == [b"next"]
    end_result = frames(over, max_bytes=8)
    assert len(end_result) == 1
    assert isinstance(end_result[0], OversizedFrame)


def test_frames_are_read_lazily() -> None:
    stream = io.BytesIO(b"first\nsecond\n")
    iterator = read_frames(stream)
    assert next(iterator) == b"first"
    assert stream.tell() == len(b"first\n")
    assert next(iterator) == b"second"


@given(lines=st.lists(line_bytes, max_size=12))
def test_newline_terminated_lines_round_trip(lines: list[bytes]) -> None:
    data = b"".join(line + b"\n" for line in lines)
    assert frames(data) == lines


@given(lines=st.lists(line_bytes, min_size=1, max_size=12))
def test_newline_joined_lines_round_trip(lines: list[bytes]) -> None:
    data = b"\n".join(lines)
    # Joined without a final newline, a trailing empty line is indistinguishable from
    # end of input, so it is the one line that cannot come back.
    expected = lines[:-1] if lines[-1] == b"" else lines
    assert frames(data) == expected


@given(
    lines=st.lists(line_bytes, min_size=1, max_size=12),
    limit=st.integers(min_value=1, max_value=30),
    trailing_newline=st.booleans(),
)
def test_each_line_is_itself_or_oversized(
    lines: list[bytes], limit: int, trailing_newline: bool
) -> None:
    data = b"\n".join(lines) + (b"\n" if trailing_newline else b"")
    expected_lines = lines if trailing_newline or lines[-1] else lines[:-1]
    result = frames(data, max_bytes=limit)
    assert len(result) == len(expected_lines)
    for line, frame in zip(expected_lines, result, strict=True):
        if len(line) <= limit:
            assert frame == line
        else:
            assert isinstance(frame, OversizedFrame)
            assert frame.limit == limit
