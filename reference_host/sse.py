"""Lines of a server-sent event stream, split as the HTML standard splits them.

A line ends at CR LF, LF or a lone CR, and nowhere else: a character such as U+2028 or
U+0085 in an event's JSON is part of its line (a text splitter such as ``str.splitlines``
would cut the event there). Lines are split on bytes, so a character whose UTF-8 bytes
arrive in two network reads is decoded whole.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator

_CR, _LF = 0x0D, 0x0A


class LineSplitter:
    """Feed the stream's bytes in pieces of any size; get back its complete lines."""

    def __init__(self) -> None:
        self._pending = bytearray()
        self._scanned = 0  # no line end before this offset of ``_pending``

    def feed(self, piece: bytes) -> list[str]:
        """The lines completed by ``piece``, without their line ends."""
        self._pending += piece
        lines: list[str] = []
        start, index = 0, self._scanned
        pending = self._pending
        while index < len(pending):
            byte = pending[index]
            if byte == _LF:
                lines.append(_text(pending[start:index]))
                start = index = index + 1
            elif byte == _CR:
                if index + 1 == len(pending):
                    break  # an LF may follow in the next piece
                lines.append(_text(pending[start:index]))
                index += 2 if pending[index + 1] == _LF else 1
                start = index
            else:
                index += 1
        del pending[:start]
        self._scanned = index - start
        return lines

    def flush(self) -> list[str]:
        """The last line, when the stream ended without a line end after it."""
        rest = bytes(self._pending)
        self._pending.clear()
        self._scanned = 0
        if rest.endswith(b"\r"):
            return [_text(rest[:-1])]
        return [_text(rest)] if rest else []


def _text(line: bytes | bytearray) -> str:
    return bytes(line).decode("utf-8", "replace")


async def sse_lines(pieces: AsyncIterable[bytes]) -> AsyncIterator[str]:
    """The lines of a stream that arrives as ``pieces``."""
    splitter = LineSplitter()
    async for piece in pieces:
        for line in splitter.feed(piece):
            yield line
    for line in splitter.flush():
        yield line
