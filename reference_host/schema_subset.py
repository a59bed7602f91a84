"""A small validator for the subset of JSON Schema 2020-12 that the published contract uses.

Loading a general validator costs more than the rest of the host's start-up, and the
contract needs only the keywords in ``ASSERTIONS``. A schema using any other assertion is
refused when it is first checked, so a contract change can never be silently ignored.
The semantics are JSON Schema's: an integral float is an integer, booleans are not numbers,
``enum`` and ``const`` tell ``true`` from ``1``, patterns are searched (not anchored),
lengths count code points, and ``format`` is an annotation, not an assertion.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

__all__ = ["ASSERTIONS", "Problem", "UnsupportedSchemaError", "first_problem"]

ASSERTIONS: Final = frozenset(
    {
        "type",
        "$ref",
        "properties",
        "additionalProperties",
        "required",
        "minProperties",
        "oneOf",
        "enum",
        "const",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
        "items",
    }
)
ANNOTATIONS: Final = frozenset(
    {"$schema", "$id", "$defs", "title", "description", "format", "contentEncoding", "default"}
)
_SHOWN = 80


class UnsupportedSchemaError(ValueError):
    """The schema uses a keyword this validator does not implement."""


@dataclass(frozen=True)
class Problem:
    """Why an instance does not fit: where (JSON pointer parts) and what."""

    path: tuple[str | int, ...]
    message: str
    wrong_type: bool = False

    @property
    def pointer(self) -> str:
        """The JSON pointer of the offending value ("" for the whole instance)."""
        return "".join(f"/{part}" for part in self.path)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "…"


def _is_type(value: Any, name: str) -> bool:
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "string":
        return isinstance(value, str)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    if isinstance(value, bool):
        return False
    if name == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if name == "number":
        return isinstance(value, int | float)
    raise UnsupportedSchemaError(f"unknown type {name!r}")


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


@cache
def _pattern(source: str) -> re.Pattern[str]:
    return re.compile(source)


class _Checker:
    def __init__(self, documents: Mapping[str, Any], base: str) -> None:
        self._documents = documents
        self._base = base

    def _resolve(self, ref: str) -> tuple[Any, str]:
        uri, _, fragment = ref.partition("#")
        base = uri or self._base
        node = self._documents[base]
        for part in fragment.split("/")[1:] if fragment else ():
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node, base

    def check(self, schema: Any, value: Any, path: tuple[str | int, ...]) -> Problem | None:
        if schema is True:
            return None
        if schema is False:
            return Problem(path, "no value is allowed here")
        unknown = set(schema) - ASSERTIONS - ANNOTATIONS
        if unknown:
            raise UnsupportedSchemaError(f"unsupported keywords {sorted(unknown)}")
        if "$ref" in schema:
            target, base = self._resolve(schema["$ref"])
            saved, self._base = self._base, base
            try:
                problem = self.check(target, value, path)
            finally:
                self._base = saved
            if problem is not None:
                return problem
        if "type" in schema:
            names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
            if not any(_is_type(value, name) for name in names):
                message = f"{_shown(value)} is not of type {' or '.join(names)}"
                return Problem(path, message, wrong_type=True)
        if "const" in schema and not _equal(value, schema["const"]):
            return Problem(path, f"{_shown(schema['const'])} was expected")
        if "enum" in schema and not any(_equal(value, option) for option in schema["enum"]):
            return Problem(path, f"{_shown(value)} is not one of {schema['enum']}")
        if "oneOf" in schema:
            problem = self._one_of(schema["oneOf"], value, path)
            if problem is not None:
                return problem
        if isinstance(value, str):
            return self._string(schema, value, path)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return self._number(schema, value, path)
        if isinstance(value, dict):
            return self._object(schema, value, path)
        if isinstance(value, list) and "items" in schema:
            for index, item in enumerate(value):
                problem = self.check(schema["items"], item, (*path, index))
                if problem is not None:
                    return problem
        return None

    def _one_of(
        self, options: list[Any], value: Any, path: tuple[str | int, ...]
    ) -> Problem | None:
        problems = [self.check(option, value, path) for option in options]
        matched = sum(problem is None for problem in problems)
        if matched == 1:
            return None
        if matched > 1:
            return Problem(path, f"{_shown(value)} fits more than one of the allowed forms")
        # Report a form whose type fits the value, so the message is about its content.
        fitting = [p for p in problems if p is not None and not p.wrong_type]
        if fitting:
            return max(fitting, key=lambda problem: len(problem.path))
        return Problem(path, f"{_shown(value)} fits none of the allowed forms", wrong_type=True)

    @staticmethod
    def _string(
        schema: Mapping[str, Any], value: str, path: tuple[str | int, ...]
    ) -> Problem | None:
        if "minLength" in schema and len(value) < schema["minLength"]:
            return Problem(path, f"{_shown(value)} is shorter than {schema['minLength']}")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            return Problem(path, f"{_shown(value)} is longer than {schema['maxLength']}")
        if "pattern" in schema and _pattern(schema["pattern"]).search(value) is None:
            return Problem(path, f"{_shown(value)} does not match {schema['pattern']!r}")
        return None

    @staticmethod
    def _number(
        schema: Mapping[str, Any], value: float, path: tuple[str | int, ...]
    ) -> Problem | None:
        if "minimum" in schema and value < schema["minimum"]:
            return Problem(path, f"{_shown(value)} is less than the minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            return Problem(path, f"{_shown(value)} is more than the maximum {schema['maximum']}")
        return None

    def _object(
        self, schema: Mapping[str, Any], value: dict[str, Any], path: tuple[str | int, ...]
    ) -> Problem | None:
        for name in schema.get("required", ()):
            if name not in value:
                return Problem(path, f"{name!r} is a required property")
        if "minProperties" in schema and len(value) < schema["minProperties"]:
            return Problem(path, f"at least {schema['minProperties']} properties are needed")
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            if name in properties:
                problem = self.check(properties[name], item, (*path, name))
            elif extra is False:
                problem = Problem(path, f"unexpected property {_shown(name)}")
            else:
                problem = self.check(extra, item, (*path, name))
            if problem is not None:
                return problem
        return None


def first_problem(
    schema: Any, value: Any, documents: Mapping[str, Any] | None = None, base: str = ""
) -> Problem | None:
    """The first reason ``value`` does not fit ``schema``, or None when it fits.

    ``documents`` maps ``$id`` to schema document, for ``$ref``s; ``base`` is the ``$id``
    that a ref without a document part (``#/$defs/...``) is resolved against.
    """
    docs = dict(documents or {})
    docs.setdefault(base, schema)
    return _Checker(docs, base).check(schema, value, ())
