"""The in-process driver's pipe reader: whole lines in large reads, and a close that never waits."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator

import pytest

from conformance.drivers import _PipeReader


@pytest.fixture
def pipe() -> Iterator[tuple[_PipeReader, int]]:
    read_fd, write_fd = os.pipe()
    reader = _PipeReader(read_fd)
    yield reader, write_fd
    reader.close()
    with contextlib.suppress(OSError):
        os.close(write_fd)


def test_lines_split_across_writes_and_a_last_line_without_newline(
    pipe: tuple[_PipeReader, int],
) -> None:
    reader, write_fd = pipe
    for piece in (b"first\nsec", b"ond\n", b"\nthi", b"rd"):
        os.write(write_fd, piece)
    os.close(write_fd)
    assert list(iter(reader.readline, b"")) == [b"first\n", b"second\n", b"\n", b"third"]


def test_a_one_mebibyte_line_takes_few_reads(pipe: tuple[_PipeReader, int]) -> None:
    reader, write_fd = pipe
    line = b"x" * (1 << 20) + b"\n"
    writer = threading.Thread(target=lambda: (os.write(write_fd, line), os.close(write_fd)))
    writer.start()
    started = time.perf_counter()
    assert reader.readline() == line
    assert time.perf_counter() - started < 1.0  # one byte per read took seconds
    writer.join(5)
    assert reader.readline() == b""


def test_readline_honours_a_size_and_read_drains_the_buffer(
    pipe: tuple[_PipeReader, int],
) -> None:
    reader, write_fd = pipe
    os.write(write_fd, b"abcdef\nrest")
    os.close(write_fd)
    assert reader.readline(3) == b"abc"
    assert reader.readline() == b"def\n"
    assert reader.read() == b"rest"


def test_close_does_not_wait_for_a_blocked_reader(pipe: tuple[_PipeReader, int]) -> None:
    reader, _write_fd = pipe
    blocked = threading.Thread(target=reader.readline, daemon=True)
    blocked.start()
    blocked.join(0.05)
    assert blocked.is_alive()  # nothing was written: the reader waits
    started = time.perf_counter()
    reader.close()
    assert time.perf_counter() - started < 1.0
    assert reader.closed
    with pytest.raises(ValueError, match="closed"):
        reader.readline()
