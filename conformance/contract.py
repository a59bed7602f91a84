"""Validation of every protocol message, in both directions, against ``schemas/``.

A violation names the direction, the method, the message and the JSON pointer of the
failing part, so a host implementer can find the exact field at fault. JSON here is
RFC 8259 JSON: ``NaN``, ``Infinity`` and ``-Infinity``, which Python's json module
accepts by default, are refused in both directions.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

import jsonschema_rs
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from referencing import Registry, Resource

from conformance.schema_inline import inlined
from pi_contract import error_catalog, load_json, method_index

Direction = Literal["client-to-host", "host-to-client"]

# RFC 8259 puts no limit on an integer's digits, and a host may echo one it was sent (an
# id, a value in error.data). Python's default 4,300-digit cap on int <-> str would make
# such a valid line unreadable, and the harness would take it for the host going away.
sys.set_int_max_str_digits(0)

_TYPES = "protocol-v9/types.schema.json"
_ENVELOPE = "protocol-v9/envelope.schema.json"


@dataclass(frozen=True)
class Violation:
    """One message that broke the published contract."""

    direction: Direction
    method: str | None
    pointer: str
    reason: str
    message: str

    def describe(self) -> str:
        """A one-paragraph explanation for a failure report."""
        who = "host" if self.direction == "host-to-client" else "harness"
        return (
            f"[{self.direction}] {self.method or '<no method>'} at {self.pointer or '/'}: "
            f"{self.reason} (sent by the {who}): {self.message}"
        )


class NotJSONError(ValueError):
    """A text that RFC 8259 does not accept as JSON."""


def _refuse_constant(name: str) -> Any:
    raise NotJSONError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise NotJSONError(f"the number {text} is beyond the range of a double")
    return value


def loads(text: str | bytes) -> Any:
    """Parse one JSON text strictly: non-finite numbers raise :class:`NotJSONError`.

    Other syntax errors raise :class:`json.JSONDecodeError`; bytes that are not UTF-8
    raise :class:`UnicodeDecodeError`.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)


def dumps(message: Any) -> str:
    """One compact JSON line body; non-finite numbers raise :class:`ValueError`."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


# A JSON string literal, unrolled (runs of plain characters between escapes) so that a
# long string is skipped in one pass.
_STRING_LITERAL = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_JSON_WHITESPACE = re.compile(rb"[ \t\r]")
NOT_COMPACT = (
    "not compact JSON: whitespace between tokens (a message is one compact JSON object "
    "per line, with nothing but the newline after it)"
)


def is_compact(line: bytes) -> bool:
    """Whether a JSON frame (without its newline) has no whitespace outside its strings; a
    CR before the newline is tolerated."""
    line = line.removesuffix(b"\r")
    if _JSON_WHITESPACE.search(line) is None:
        return True
    return _JSON_WHITESPACE.search(_STRING_LITERAL.sub(b"", line)) is None


@dataclass(frozen=True)
class ParsedLine:
    """One frame after parsing: the message, or the violation that it is not JSON."""

    message: Any
    violation: Violation | None


def parse_line(line: bytes, direction: Direction) -> ParsedLine:
    """Parse one frame (without its newline); a frame that is not UTF-8 JSON is a violation."""
    raw = line.decode("utf-8", "replace")
    try:
        return ParsedLine(loads(line), None)
    except UnicodeDecodeError as exc:
        reason = f"not UTF-8: {exc}"
    except (NotJSONError, json.JSONDecodeError) as exc:
        reason = f"not JSON: {exc}"
    except RecursionError:
        reason = "not JSON: nested too deeply to parse"
    except ValueError as exc:  # anything else the parser cannot hold stays this line's fault
        reason = f"not readable as JSON: {exc}"
    return ParsedLine(None, Violation(direction, None, "", reason, raw))


def _non_finite_pointer(value: Any, pointer: str = "") -> str | None:
    """The JSON pointer of the first NaN or infinity inside ``value``, if any."""
    if isinstance(value, float) and not math.isfinite(value):
        return pointer
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list | tuple):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        escaped = str(key).replace("~", "~0").replace("/", "~1")
        found = _non_finite_pointer(item, f"{pointer}/{escaped}")
        if found is not None:
            return found
    return None


@cache
def _registry() -> Registry[Any]:
    registry: Registry[Any] = Registry()
    for relative in (_TYPES, _ENVELOPE):
        contents = load_json(relative)
        registry = registry.with_resource(contents["$id"], Resource.from_contents(contents))
    return registry


@cache
def _compiled_registry() -> jsonschema_rs.Registry:
    documents = (load_json(relative) for relative in (_TYPES, _ENVELOPE))
    return jsonschema_rs.Registry([(contents["$id"], contents) for contents in documents])


class _Fraction(str):
    """A number the host wrote with a fraction or an exponent, put in its place as text: the
    schema's ``integer`` refuses it where JSON Schema would take ``1.0`` for an integer."""


def _fractions_marked(value: Any) -> Any:
    if isinstance(value, float):
        return _Fraction(repr(value))
    if isinstance(value, dict):
        return {key: _fractions_marked(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_fractions_marked(item) for item in value]
    return value


def _holds_float(value: Any) -> bool:
    """Whether a parsed message holds a number written with a fraction or an exponent."""
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(_holds_float(item) for item in value.values())
    if isinstance(value, list):
        return any(_holds_float(item) for item in value)
    return False


def _first_error(validator: Draft202012Validator, instance: Any) -> ValidationError | None:
    """``jsonschema``'s error at the first path in document order, or None."""
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    return errors[0] if errors else None


def contract_error(validator: Draft202012Validator, instance: Any) -> ValidationError | None:
    """The first error in document order under the contract's reading of the schema: every
    number of the protocol is an integer written as one (digits only), where JSON Schema
    takes ``1.0`` for an integer."""
    error = _first_error(validator, instance)
    if error is not None or not _holds_float(instance):
        return error
    error = _first_error(validator, _fractions_marked(instance))
    if error is not None and isinstance(error.instance, _Fraction):
        error.message = (
            f"{error.instance} is written with a fraction or an exponent: every number of "
            "the protocol is an integer, written as digits only"
        )
    return error


@dataclass(frozen=True)
class SchemaCheck:
    """One definition's two validators.

    The compiled one (``jsonschema-rs``) only says whether a message is valid, at a
    fraction of the cost; ``jsonschema`` judges every message the compiled one refuses,
    and gives the reason and pointer a report shows. A message is valid when either
    accepts it: they differ only in a few regular-expression corners (``jsonschema``
    uses Python's ``re``, where ``$`` also matches before a final newline and ``\\s``
    also matches U+001C-U+001F and U+0085; JSON Schema's dialect is ECMA-262's).
    """

    reference: Draft202012Validator
    compiled: jsonschema_rs.Validator

    def first_error(self, instance: Any) -> ValidationError | None:
        """The first error in document order, or None when ``instance`` is valid."""
        try:
            if self.compiled.is_valid(instance) and not _holds_float(instance):
                return None
        except (ValueError, TypeError, OverflowError):
            pass  # e.g. a lone surrogate, which has no UTF-8 form: jsonschema decides
        return contract_error(self.reference, instance)


@cache
def _validator(relative: str, definition: str) -> SchemaCheck:
    # references inlined: the same schema, checked without a registry lookup per $ref
    schema = inlined(relative, definition)
    return SchemaCheck(
        Draft202012Validator(schema, registry=_registry()),
        jsonschema_rs.Draft202012Validator(schema, registry=_compiled_registry()),
    )


def _pointer(error: ValidationError, prefix: str) -> str:
    return prefix + "".join(f"/{part}" for part in error.absolute_path)


class ContractChecker:
    """Checks messages against the method index, the schemas and the error catalog.

    ``catalog`` replaces the published error catalog (keyed by code), for tests.
    """

    def __init__(self, catalog: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self._methods = method_index()
        self._catalog: Mapping[str, Mapping[str, Any]] = (
            error_catalog() if catalog is None else catalog
        )

    def method_of_request(self, message: dict[str, Any]) -> str | None:
        """The method of a well-formed request, else None."""
        method = message.get("method")
        return method if isinstance(method, str) else None

    def check_outgoing(self, message: dict[str, Any]) -> Violation | None:
        """Check a request the harness is about to send."""
        pointer = _non_finite_pointer(message)
        if pointer is not None:
            return Violation(
                "client-to-host",
                self.method_of_request(message),
                pointer,
                "not JSON: NaN and infinities are not JSON numbers",
                repr(message),
            )
        return self._check_body(
            "client-to-host", message, "ClientMessage", "request", "params", "params"
        )

    def check_incoming(
        self, message: Any, request_method: str | None, raw: str
    ) -> Violation | None:
        """Check a message from the host; ``request_method`` names what a response answers."""
        if not isinstance(message, dict):
            return Violation("host-to-client", None, "", "not a JSON object", raw)
        envelope = _validator(_ENVELOPE, "HostMessage").first_error(message)
        if envelope is not None:
            return Violation(
                "host-to-client",
                message.get("method") or request_method,
                _pointer(envelope, ""),
                envelope.message,
                raw,
            )
        if "method" in message:
            violation = self._check_body(
                "host-to-client", message, None, "notification", "params", "params", raw
            )
            if violation is None and message["method"] == "turn/toolResult":
                return self._check_tool_result_status(message["params"], raw)
            return violation
        if "error" in message:
            return self._check_error(message["error"], request_method, raw)
        if request_method is None or request_method not in self._methods:
            return None
        definition = self._methods[request_method]["result"]
        error = _validator(_TYPES, definition).first_error(message["result"])
        if error is None:
            return None
        return Violation(
            "host-to-client", request_method, _pointer(error, "/result"), error.message, raw
        )

    def _check_error(
        self, error: dict[str, Any], request_method: str | None, raw: str
    ) -> Violation | None:
        code = error["data"]["code"]
        entry = self._catalog.get(code)
        if entry is None:
            return Violation(
                "host-to-client",
                request_method,
                "/error/data/code",
                f"{code!r} is not a canonical error code",
                raw,
            )
        expected = entry.get("jsonrpcCode")
        if isinstance(expected, int) and error["code"] != expected:
            return Violation(
                "host-to-client",
                request_method,
                "/error/code",
                f"error code {error['code']} is not {expected}, "
                f"the catalog's jsonrpcCode for {code}",
                raw,
            )
        return None

    def _check_tool_result_status(self, params: dict[str, Any], raw: str) -> Violation | None:
        """A tool result's status is the one the catalog fixes for its error code."""
        error = params.get("error")
        if not isinstance(error, dict):
            return None
        code = error.get("code")
        entry = self._catalog.get(code) if isinstance(code, str) else None
        expected = entry.get("toolResultStatus") if entry is not None else None
        if expected is None or params.get("status") == expected:
            return None
        return Violation(
            "host-to-client",
            "turn/toolResult",
            "/params/status",
            f"status {params.get('status')!r} is not {expected!r}, the catalog's "
            f"toolResultStatus for {code}",
            raw,
        )

    def _check_body(
        self,
        direction: Direction,
        message: dict[str, Any],
        envelope_def: str | None,
        kind: str,
        member: str,
        schema_key: str,
        raw: str | None = None,
    ) -> Violation | None:
        text = raw if raw is not None else json.dumps(message, ensure_ascii=False)
        method = message.get("method")
        if envelope_def is not None:
            envelope = _validator(_ENVELOPE, envelope_def).first_error(message)
            if envelope is not None:
                return Violation(direction, method, _pointer(envelope, ""), envelope.message, text)
        entry = self._methods.get(method) if isinstance(method, str) else None
        if entry is None or entry["kind"] != kind:
            return Violation(direction, method, "/method", f"no published {kind} {method!r}", text)
        error = _validator(_TYPES, entry[schema_key]).first_error(message.get(member, {}))
        if error is None:
            return None
        return Violation(direction, method, _pointer(error, f"/{member}"), error.message, text)
