"""What the published contract allows as the answer to a hostile frame.

Schema-valid params: a result, or a canonical error the method index lists for the
method. Schema-invalid params: INVALID_PARAMS. Numbers JSON cannot carry or the host
cannot represent (NaN, 1e400, a 5000-digit integer) and absurd nesting: PARSE_ERROR or
INVALID_PARAMS. A line longer than the announced limit: FRAME_TOO_LARGE. A line that is not
a request: PARSE_ERROR or INVALID_REQUEST. INTERNAL_ERROR is never a good answer to input.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Final

from conformance.contract import loads
from conformance.fuzz.frames import BIG_INTEGER, DEEP_NESTING, NON_FINITE, raw_kinds, stand_in
from conformance.fuzz.schemas import listed_errors, params_valid
from conformance.fuzz.strategies import VALID, Case

GARBAGE_CODES: Final = frozenset(
    {"PARSE_ERROR", "INVALID_REQUEST", "FRAME_TOO_LARGE", "INVALID_PARAMS", "METHOD_NOT_FOUND"}
)
UNREADABLE_NUMBER_CODES: Final = frozenset({"PARSE_ERROR", "INVALID_PARAMS"})
_ENVELOPE: Final = frozenset({"jsonrpc", "id", "method", "params"})
_BOM: Final = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class Expected:
    """The answers the contract allows for one case."""

    category: str  # "valid", "hostile-valid" (schema-valid but hostile) or "invalid"
    codes: frozenset[str]
    success: bool

    def describe(self) -> str:
        """A phrase for a finding's report."""
        codes = " or ".join(sorted(self.codes))
        return f"a result or {codes}" if self.success else codes


def expected(case: Case, frame_bytes: int, max_frame_bytes: int) -> Expected:
    """What may come back for ``case``, whose frame is ``frame_bytes`` long."""
    kinds = raw_kinds(case.params)
    too_large = frozenset({"FRAME_TOO_LARGE"}) if frame_bytes > max_frame_bytes else frozenset()
    # On a connection already initialized, whether initialize's params or the repeat is
    # refused first is the host's choice (implementing-a-host.md, Params).
    repeat = frozenset({"ALREADY_INITIALIZED"}) if case.method == "initialize" else frozenset()
    if kinds & {NON_FINITE, DEEP_NESTING}:
        return Expected("invalid", UNREADABLE_NUMBER_CODES | too_large | repeat, False)
    valid = isinstance(case.params, dict) and params_valid(case.method, stand_in(case.params))
    # JSON Schema sees a lone surrogate as a string like any other; the contract refuses it
    # (P4: no UTF-8 text can carry it).
    valid = valid and not _holds_lone_surrogate(case.params)
    if BIG_INTEGER in kinds:
        codes = UNREADABLE_NUMBER_CODES | too_large
        if valid:
            return Expected("hostile-valid", codes | listed_errors(case.method), True)
        return Expected("invalid", codes | repeat, False)
    # A host with 64-bit integers cannot represent a larger one: PARSE_ERROR is allowed.
    unrepresentable = frozenset({"PARSE_ERROR"}) if _beyond_64_bits(case.params) else frozenset()
    if valid:
        category = "valid" if case.kind == VALID else "hostile-valid"
        return Expected(category, listed_errors(case.method) | too_large | unrepresentable, True)
    codes = frozenset({"INVALID_PARAMS"}) | too_large | repeat | unrepresentable
    if not isinstance(case.params, dict):
        codes |= {"INVALID_REQUEST"}  # params that are not an object break the envelope
    return Expected("invalid", codes, False)


def _holds_lone_surrogate(value: Any) -> bool:
    """Whether a string or a key anywhere in ``value`` holds an unpaired surrogate."""
    if isinstance(value, str):
        return any(0xD800 <= ord(char) <= 0xDFFF for char in value)
    if isinstance(value, dict):
        return any(_holds_lone_surrogate(k) or _holds_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_holds_lone_surrogate(item) for item in value)
    return False


def _beyond_64_bits(value: Any) -> bool:
    """Whether ``value`` holds an integer outside the signed 64-bit range."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return not -(2**63) <= value < 2**63
    if isinstance(value, dict):
        return any(_beyond_64_bits(item) for item in value.values())
    if isinstance(value, list | tuple):
        return any(_beyond_64_bits(item) for item in value)
    return False


def answer_code(response: dict[str, Any]) -> str | None:
    """The canonical code of an error response, or None for a result."""
    error = response.get("error")
    if not isinstance(error, dict):
        return None
    data = error.get("data")
    return str(data.get("code")) if isinstance(data, dict) else "<no data.code>"


def line_needs_answer(line: bytes) -> str:
    """How a garbage line must be answered: "none" (blank), "notification" (no answer),
    "request" (a response with its id), "error" (one framing error) or "optional" (other
    whitespace only, such as a form feed: ignored, or one framing error)."""
    if not line.strip(b" \t\r"):
        return "none"
    with contextlib.suppress(UnicodeDecodeError):
        if not line.decode("utf-8").replace("\ufeff", "").strip():
            return "optional"
    if line.startswith(_BOM) and line_needs_answer(line[len(_BOM) :]) == "request":
        return "request"  # reading past a byte order mark is the host's choice
    try:
        message = loads(line)
    except (ValueError, RecursionError):
        return "error"
    if not isinstance(message, dict) or set(message) - _ENVELOPE:
        return "error"
    method, params = message.get("method"), message.get("params", {})
    if message.get("jsonrpc") != "2.0" or not isinstance(method, str) or not method:
        return "error"
    if not isinstance(params, dict):
        return "error"
    if "id" not in message:
        return "notification"
    request_id = message["id"]
    ok_id = (isinstance(request_id, int) and not isinstance(request_id, bool)) or (
        isinstance(request_id, str) and request_id != ""
    )
    return "request" if ok_id else "error"
