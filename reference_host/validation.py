"""Validation of request params against the published protocol v9 schemas."""

from __future__ import annotations

from typing import Any

from pi_contract import load_json, method_index
from reference_host.schema_subset import first_problem

_TYPES = "protocol-v9/types.schema.json"
MAX_MESSAGE = 300


def params_problem(method: str, params: Any) -> str | None:
    """Describe why ``params`` do not fit ``method``'s schema, or return None when they do."""
    types = load_json(_TYPES)
    definition = method_index()[method]["params"]
    try:
        problem = first_problem(
            types["$defs"][definition], params, {types["$id"]: types}, types["$id"]
        )
    except RecursionError:
        return "params: nested too deeply"
    if problem is None:
        return None
    message = problem.message
    if len(message) > MAX_MESSAGE:
        message = message[:MAX_MESSAGE] + "…"
    return f"params{problem.pointer}: {message}"
