"""JSON text exactly as RFC 8259 defines it, in both directions.

Python's json module also reads and writes ``NaN``, ``Infinity`` and ``-Infinity``, which
are not JSON, turns ``1e400`` into infinity, and reads integers as long as the process
allows. Here all of those, and integers longer than ``MAX_INTEGER_DIGITS``, are a
:class:`JsonTextError` when read and a ValueError when written, so nothing the host
writes is ever unreadable JSON.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["MAX_INTEGER_DIGITS", "JsonTextError", "dumps", "integral", "is_finite", "loads"]


class JsonTextError(ValueError):
    """The text is not JSON, or holds a number the host cannot represent."""


def _refuse_constant(name: str) -> Any:
    raise JsonTextError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JsonTextError(f"the number {text[:40]} is too large")
    return value


MAX_INTEGER_DIGITS = 4300
"""The longest integer the host reads. Set here rather than left to Python's process-wide
``sys.get_int_max_str_digits()``, so that the host answers the same wherever it runs (the
harness lifts that limit in its own process, which an in-process host shares)."""


def _bounded_int(text: str) -> int:
    digits = len(text) - text.startswith("-")
    if digits > MAX_INTEGER_DIGITS:
        raise JsonTextError(f"an integer of {digits} digits is longer than the host reads")
    return int(text)


def loads(text: str) -> Any:
    """Parse ``text`` strictly; JsonTextError when it is not JSON or out of range."""
    try:
        return json.loads(
            text,
            parse_constant=_refuse_constant,
            parse_float=_finite_float,
            parse_int=_bounded_int,
        )
    except JsonTextError:
        raise
    except ValueError as exc:  # JSONDecodeError, or an integer with too many digits
        raise JsonTextError(str(exc)) from exc


def dumps(value: Any, *, ascii_only: bool = False) -> str:
    """Compact JSON text; ValueError for NaN or an infinity anywhere in ``value``."""
    return json.dumps(value, ensure_ascii=ascii_only, separators=(",", ":"), allow_nan=False)


def is_finite(value: Any) -> bool:
    """Whether ``value`` holds no NaN or infinity (so that :func:`dumps` can write it)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(is_finite(item) for item in value.values())
    if isinstance(value, list | tuple):
        return all(is_finite(item) for item in value)
    return True


def integral(value: Any) -> Any:
    """``value`` with every integral float (``5.0``, ``1e3``) replaced by that integer.

    JSON has one number type and JSON Schema counts ``5.0`` as an integer; the host keeps
    such params as Python integers so that it stores and echoes integers.
    """
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: integral(item) for key, item in value.items()}
    if isinstance(value, list):
        return [integral(item) for item in value]
    return value
