"""Newline-delimited frames on a blocking byte stream, with a maximum frame size."""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO, Final

DEFAULT_MAX_FRAME_BYTES: Final = 8 * 1024 * 1024


class OversizedFrame:
    """Stands in for a line longer than the limit; its bytes were discarded unread."""

    def __init__(self, limit: int) -> None:
        self.limit = limit


Frame = bytes | OversizedFrame


def read_frames(stream: BinaryIO, max_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> Iterator[Frame]:
    """Yield each line of ``stream`` without its newline until end of input.

    A line longer than ``max_bytes`` is skipped up to its newline and reported as an
    :class:`OversizedFrame`, so one bad frame never desynchronises the ones after it.
    """
    while True:
        line = stream.readline(max_bytes + 1)
        if not line:
            return
        if line.endswith(b"\n"):
            yield line[:-1]
        elif len(line) <= max_bytes:
            yield line  # last line without a newline before end of input
        else:
            while True:
                rest = stream.readline(65536)
                if not rest or rest.endswith(b"\n"):
                    break
            yield OversizedFrame(max_bytes)
