"""Validation of every protocol message, in both directions, against ``schemas/``.

A violation names the direction, the method, the message and the JSON pointer of the
failing part, so a host implementer can find the exact field at fault.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from referencing import Registry, Resource

from pi_contract import error_catalog, load_json, method_index

Direction = Literal["client-to-host", "host-to-client"]

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


@cache
def _registry() -> Registry[Any]:
    registry: Registry[Any] = Registry()
    for relative in (_TYPES, _ENVELOPE):
        contents = load_json(relative)
        registry = registry.with_resource(contents["$id"], Resource.from_contents(contents))
    return registry


@cache
def _validator(relative: str, definition: str) -> Draft202012Validator:
    schema_id = load_json(relative)["$id"]
    return Draft202012Validator({"$ref": f"{schema_id}#/$defs/{definition}"}, registry=_registry())


def _pointer(error: ValidationError, prefix: str) -> str:
    return prefix + "".join(f"/{part}" for part in error.absolute_path)


def _first_error(validator: Draft202012Validator, instance: Any) -> ValidationError | None:
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    return errors[0] if errors else None


class ContractChecker:
    """Checks messages; remembers each request's method to check its response."""

    def __init__(self) -> None:
        self._methods = method_index()
        self._catalog = error_catalog()

    def method_of_request(self, message: dict[str, Any]) -> str | None:
        """The method of a well-formed request, else None."""
        method = message.get("method")
        return method if isinstance(method, str) else None

    def check_outgoing(self, message: dict[str, Any]) -> Violation | None:
        """Check a request the harness is about to send."""
        return self._check_body(
            "client-to-host", message, "ClientMessage", "request", "params", "params"
        )

    def check_incoming(
        self, message: Any, request_method: str | None, raw: str
    ) -> Violation | None:
        """Check a message from the host; ``request_method`` names what a response answers."""
        if not isinstance(message, dict):
            return Violation("host-to-client", None, "", "not a JSON object", raw)
        envelope = _first_error(_validator(_ENVELOPE, "HostMessage"), message)
        if envelope is not None:
            return Violation(
                "host-to-client",
                message.get("method") or request_method,
                _pointer(envelope, ""),
                envelope.message,
                raw,
            )
        if "method" in message:
            return self._check_body(
                "host-to-client", message, None, "notification", "params", "params", raw
            )
        if "error" in message:
            code = message["error"]["data"]["code"]
            if code not in self._catalog:
                return Violation(
                    "host-to-client",
                    request_method,
                    "/error/data/code",
                    f"{code!r} is not a canonical error code",
                    raw,
                )
            return None
        if request_method is None or request_method not in self._methods:
            return None
        definition = self._methods[request_method]["result"]
        error = _first_error(_validator(_TYPES, definition), message["result"])
        if error is None:
            return None
        return Violation(
            "host-to-client", request_method, _pointer(error, "/result"), error.message, raw
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
            envelope = _first_error(_validator(_ENVELOPE, envelope_def), message)
            if envelope is not None:
                return Violation(direction, method, _pointer(envelope, ""), envelope.message, text)
        entry = self._methods.get(method) if isinstance(method, str) else None
        if entry is None or entry["kind"] != kind:
            return Violation(direction, method, "/method", f"no published {kind} {method!r}", text)
        error = _first_error(_validator(_TYPES, entry[schema_key]), message.get(member, {}))
        if error is None:
            return None
        return Violation(direction, method, _pointer(error, f"/{member}"), error.message, text)
