"""Validation of request params against the published protocol v9 schemas."""

from __future__ import annotations

from functools import cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from referencing import Registry, Resource

from pi_contract import load_json, method_index

_TYPES = "protocol-v9/types.schema.json"
MAX_MESSAGE = 300


@cache
def _registry() -> Registry[Any]:
    types = load_json(_TYPES)
    registry: Registry[Any] = Registry().with_resource(types["$id"], Resource.from_contents(types))
    return registry


@cache
def _validator(definition: str) -> Draft202012Validator:
    types_id = load_json(_TYPES)["$id"]
    schema = {"$ref": f"{types_id}#/$defs/{definition}"}
    return Draft202012Validator(schema, registry=_registry())


def params_problem(method: str, params: Any) -> str | None:
    """Describe why ``params`` do not fit ``method``'s schema, or return None when they do."""
    try:
        error = best_match(_validator(method_index()[method]["params"]).iter_errors(params))
        if error is None:
            return None
        pointer = "".join(f"/{part}" for part in error.absolute_path)
        message = error.message
    except RecursionError:
        return "params: nested too deeply"
    if len(message) > MAX_MESSAGE:
        message = message[:MAX_MESSAGE] + "…"
    return f"params{pointer}: {message}"
