"""Protocol schemas with their ``$ref``s replaced by what they point to, for fast checks.

The harness checks every message in both directions. With the published schemas as they
are, each ``$ref`` is a registry lookup and a new validator scope, which was most of the
cost of a check. :func:`inlined` gives a definition with every reference replaced by a
copy of its target, so validation only walks keywords. It means the same thing: a
reference alone becomes its target, a reference with sibling keywords becomes an
``allOf`` of its target beside them (which is what a ``$ref`` does in JSON Schema
2020-12), and a reference back into a definition being inlined stays a reference, made
absolute so that the registry still resolves it.
"""

from __future__ import annotations

import posixpath
from functools import cache
from typing import Any

from pi_contract import load_json

_REF = "$ref"
# keywords whose value is data, not a schema: never searched for references
_DATA = frozenset({"const", "enum", "default", "examples"})
# keywords whose value maps names (any names, "const" too) to schemas
_NAMED_SCHEMAS = frozenset({"properties", "patternProperties", "dependentSchemas", "$defs"})
# each schema file parsed once; never changed (inlining copies what it rewrites)
_document = cache(load_json)


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _target(relative: str, ref: str) -> tuple[str, str]:
    """The schema file and JSON pointer that ``ref``, found in ``relative``, points to."""
    document, _, pointer = ref.partition("#")
    if document:
        relative = posixpath.normpath(posixpath.join(posixpath.dirname(relative), document))
    return relative, pointer


def _resolve(relative: str, pointer: str) -> Any:
    node = _document(relative)
    for token in filter(None, pointer.split("/")):
        node = node[int(token)] if isinstance(node, list) else node[_unescape(token)]
    return node


def _member(relative: str, key: str, value: Any, stack: tuple[tuple[str, str], ...]) -> Any:
    """One keyword's value with the references in its schemas inlined."""
    if key in _DATA:
        return value
    if key in _NAMED_SCHEMAS and isinstance(value, dict):
        return {name: _walk(relative, schema, stack) for name, schema in value.items()}
    return _walk(relative, value, stack)


def _walk(relative: str, node: Any, stack: tuple[tuple[str, str], ...]) -> Any:
    if isinstance(node, list):
        return [_walk(relative, item, stack) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get(_REF)
    siblings = {
        key: _member(relative, key, value, stack) for key, value in node.items() if key != _REF
    }
    if not isinstance(ref, str):
        return siblings
    where = _target(relative, ref)
    if where in stack:  # recursive: left to the registry, by absolute URI
        absolute = f"{_document(where[0])['$id']}#{where[1]}"
        return {_REF: absolute, **siblings}
    target = _walk(where[0], _resolve(*where), (*stack, where))
    if not siblings:
        return target
    return {"allOf": [target], **siblings}


def inlined(relative: str, definition: str) -> Any:
    """The schema of ``$defs/definition`` in ``relative``, with its references inlined."""
    pointer = f"/$defs/{definition}"
    return _walk(relative, _resolve(relative, pointer), ((relative, pointer),))
