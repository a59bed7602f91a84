"""The spellings of one request the harness writes: a host reads the JSON value, never its
text, so the harness varies how it writes what it sends.

JSON lets a client put whitespace between tokens, order an object's members as it likes,
and write any character as itself or as an escape in upper- or lower-case hex
(docs/implementing-a-host.md, "Framing"). A host that looked for ``"jsonrpc":"2.0"`` in the
raw text, read ``params`` by position, or matched escapes in one case only would pass a
harness that always wrote one spelling. The spelling follows the request's id, so a
scenario writes the same bytes in every run.
"""

from __future__ import annotations

import json
import re
import zlib
from typing import Any, Final

__all__ = ["SPELLINGS", "spell", "spelling_for"]

SPELLINGS: Final = (
    "compact, characters as themselves",
    "spaced, characters as themselves",
    "compact, members in reverse order, characters beyond ASCII as upper-case escapes",
)
_ESCAPE: Final = re.compile(r"\\u([0-9a-f]{4})")


def spelling_for(request_id: object) -> int:
    """The index in :data:`SPELLINGS` of the request with ``request_id``."""
    number = request_id if isinstance(request_id, int) else zlib.crc32(str(request_id).encode())
    return number % len(SPELLINGS)


def spell(message: Any, spelling: int, *, ascii_only: bool = False) -> str:
    """``message`` as the text of one line, in ``spelling``; ``ascii_only`` escapes every
    character beyond ASCII whatever the spelling (lone surrogates can travel no other way)."""
    if spelling == 2:
        text = json.dumps(
            _reversed(message), ensure_ascii=True, separators=(",", ":"), allow_nan=False
        )
        return _ESCAPE.sub(lambda match: "\\u" + match.group(1).upper(), text)
    separators = (", ", ": ") if spelling == 1 else (",", ":")
    return json.dumps(message, ensure_ascii=ascii_only, separators=separators, allow_nan=False)


def _reversed(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _reversed(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [_reversed(item) for item in value]
    return value
