"""Frames the fuzzer sends: JSON-like values with parts no JSON library would write.

A :class:`Raw` part is written verbatim: a 5000-digit integer, ``NaN``, ``1e400`` or an
array nested 100,000 deep. Strings are escaped as JSON, lone surrogates included.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final

BIG_INTEGER: Final = "big-integer"
NON_FINITE: Final = "non-finite"
DEEP_NESTING: Final = "deep-nesting"
DISPLAY_LIMIT: Final = 400
_RUN = re.compile(r"(.)\1{15,}", re.DOTALL)


@dataclass(frozen=True)
class Raw:
    """JSON text written as is; ``kind`` says what makes it hostile, ``stand_in`` is an
    ordinary value with the same schema verdict (for a big integer, another integer)."""

    text: str
    kind: str
    stand_in: Any = None


def encode(value: Any) -> str:
    """The compact JSON text of ``value``, :class:`Raw` parts verbatim."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, dict):
        members = (f"{_string(str(key))}:{encode(item)}" for key, item in value.items())
        return "{" + ",".join(members) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(encode(item) for item in value) + "]"
    if isinstance(value, str):
        return _string(value)
    return json.dumps(value, allow_nan=False)


def _string(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: only its \u escape is JSON
        return json.dumps(text, ensure_ascii=True)
    return json.dumps(text, ensure_ascii=False)


_ABSENT: Final = object()


def request_line(request_id: str, method: str, params: Any = _ABSENT) -> bytes:
    """One request frame, newline excluded."""
    body = f'{{"jsonrpc":"2.0","id":{_string(request_id)},"method":{_string(method)}'
    if params is not _ABSENT:
        body += f',"params":{encode(params)}'
    return (body + "}").encode("utf-8")


def raw_kinds(value: Any) -> frozenset[str]:
    """The kinds of every :class:`Raw` part of ``value``."""
    if isinstance(value, Raw):
        return frozenset({value.kind})
    if isinstance(value, dict):
        return frozenset().union(*(raw_kinds(v) for v in value.values()))
    if isinstance(value, list | tuple):
        return frozenset().union(*(raw_kinds(v) for v in value))
    return frozenset()


def stand_in(value: Any) -> Any:
    """``value`` with every :class:`Raw` part replaced by its ordinary stand-in."""
    if isinstance(value, Raw):
        return value.stand_in
    if isinstance(value, dict):
        return {key: stand_in(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [stand_in(item) for item in value]
    return value


def describe(frame: bytes, limit: int = DISPLAY_LIMIT) -> str:
    """A readable, bounded rendering: long runs are written as ``⟨'9' * 4301⟩``."""
    text = frame.decode("utf-8", "backslashreplace")
    text = _RUN.sub(lambda m: f"⟨{m.group(1)!r} * {len(m.group(0))}⟩", text)
    if len(text) > limit:
        text = text[: limit - 20] + f"… ({len(frame)} bytes)"
    return text
