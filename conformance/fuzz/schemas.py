"""The published request methods and their params schemas, read from ``schemas/``."""

from __future__ import annotations

from functools import cache
from typing import Any

from jsonschema import Draft202012Validator

from pi_contract import load_json, method_index

_TYPES = "protocol-v9/types.schema.json"


@cache
def definitions() -> dict[str, Any]:
    """Every ``$defs`` entry of the protocol v9 types schema."""
    defs: dict[str, Any] = load_json(_TYPES)["$defs"]
    return defs


def request_methods() -> list[str]:
    """Every request method of protocol v9, in the index's order."""
    return [name for name, entry in method_index().items() if entry["kind"] == "request"]


def params_schema(method: str) -> dict[str, Any]:
    """The self-contained params schema of ``method`` (local ``$ref``s resolve in it)."""
    name = method_index()[method]["params"]
    return {"$defs": definitions(), **definitions()[name]}


@cache
def params_validator(method: str) -> Draft202012Validator:
    """A validator of ``method``'s params."""
    return Draft202012Validator(params_schema(method))


def params_valid(method: str, params: Any) -> bool:
    """Whether ``params`` fit the published schema of ``method``."""
    try:
        return bool(params_validator(method).is_valid(params))
    except RecursionError:
        return False


def listed_errors(method: str) -> frozenset[str]:
    """The canonical codes the method index lists for ``method``."""
    return frozenset(method_index()[method].get("errors", []))
