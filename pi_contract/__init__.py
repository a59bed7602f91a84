"""The language-neutral ADR 0053 contract: JSON Schemas, error catalog, storage DDL, features.

The files live in ``schemas/`` and ``features/`` at the top of the source tree; an installed
wheel carries them inside this package. Both the harness and the reference host read them
through this module, so neither depends on the other.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

__all__ = [
    "PROTOCOL_VERSION",
    "STORAGE_SCHEMA_VERSION",
    "error_catalog",
    "features_dir",
    "load_json",
    "method_index",
    "schemas_dir",
]

PROTOCOL_VERSION = 9
STORAGE_SCHEMA_VERSION = 10

_HERE = Path(__file__).resolve().parent


def _locate(name: str) -> Path:
    for candidate in (_HERE / name, _HERE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"contract folder {name!r} is missing from the installation")


def schemas_dir() -> Path:
    """The folder holding the JSON Schemas, the error catalog and the storage DDL."""
    return _locate("schemas")


def features_dir() -> Path:
    """The folder holding the Gherkin features and the requirement catalog."""
    return _locate("features")


@cache
def load_json(relative: str) -> Any:
    """Parse a JSON file below :func:`schemas_dir`."""
    return json.loads((schemas_dir() / relative).read_text(encoding="utf-8"))


def method_index() -> dict[str, Any]:
    """The protocol v9 method and notification index, keyed by method name."""
    methods: dict[str, Any] = load_json("protocol-v9/methods.json")["methods"]
    return methods


def error_catalog() -> dict[str, Any]:
    """The canonical error codes, keyed by code."""
    return {entry["code"]: entry for entry in load_json("error-codes.json")["codes"]}
