"""Validation of request params: the published protocol v9 schemas, and the few rules a
schema cannot state (valid Unicode everywhere, a provider URL with a usable host and port).
"""

from __future__ import annotations

from typing import Any, Final
from urllib.parse import urlsplit

from pi_contract import load_json, method_index
from reference_host.schema_subset import first_problem

_TYPES = "protocol-v9/types.schema.json"
MAX_MESSAGE = 300
MAX_TIMESTAMP: Final = 8_640_000_000_000_000
"""The latest Timestamp the contract allows (types.schema.json, Timestamp.maximum)."""


def params_problem(method: str, params: Any) -> str | None:
    """Describe why ``params`` do not fit ``method``, or return None when they do."""
    types = load_json(_TYPES)
    definition = method_index()[method]["params"]
    try:
        problem = first_problem(
            types["$defs"][definition], params, {types["$id"]: types}, types["$id"]
        )
        if problem is not None:
            message = problem.message
            if len(message) > MAX_MESSAGE:
                message = message[:MAX_MESSAGE] + "…"
            return f"params{problem.pointer}: {message}"
        return _lone_surrogate(params, "params") or _provider_problem(params)
    except RecursionError:
        return "params: nested too deeply"


def _lone_surrogate(value: Any, where: str) -> str | None:
    """Where a string (or a key) holds a lone surrogate, which no UTF-8 text can carry."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"{where}: not valid Unicode (a lone surrogate at index {exc.start})"
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            problem = _lone_surrogate(key, f"{where} (a key)") or _lone_surrogate(
                item, f"{where}/{key}"
            )
            if problem is not None:
                return problem
    if isinstance(value, list):
        for index, item in enumerate(value):
            problem = _lone_surrogate(item, f"{where}/{index}")
            if problem is not None:
                return problem
    return None


def _provider_problem(params: Any) -> str | None:
    """A provider base URL needs a host and a port in range (the schema's pattern checks
    the rest)."""
    provider = params.get("provider") if isinstance(params, dict) else None
    if not isinstance(provider, dict) or not isinstance(provider.get("baseUrl"), str):
        return None
    try:
        parts = urlsplit(provider["baseUrl"])
        port = parts.port
    except ValueError as exc:
        return f"params/provider/baseUrl: {exc}"
    if not parts.hostname:
        return "params/provider/baseUrl: the URL has no host"
    if port is not None and not 0 <= port <= 65535:
        return "params/provider/baseUrl: the port is out of range"
    return None
