"""Generate ``docs/protocol.md``, the protocol v9 reference, from the published contract.

Everything in the page comes from ``schemas/``: the method index, the type definitions,
the envelope schema, the error catalog and the storage DDL. Python turns the JSON Schemas
into table rows with readable type names; ``templates/protocol.md.j2`` lays them out.

Run ``python -m conformance.docgen`` to rewrite the page, or add ``--check`` to fail
(exit 1) when the committed page no longer matches the schemas.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import jinja2

from pi_contract import STORAGE_SCHEMA_VERSION, schemas_dir

__all__ = [
    "DEFAULT_OUTPUT",
    "main",
    "render_protocol_reference",
    "write_or_check",
]

DEFAULT_OUTPUT: Final = Path(__file__).resolve().parent.parent / "docs" / "protocol.md"
"""Where the page lives in a source checkout."""

_TEMPLATES: Final = Path(__file__).resolve().parent / "templates"
_TEMPLATE_NAME: Final = "protocol.md.j2"
_TYPES_FILE: Final = "types.schema.json"

# Request namespaces in reading order; namespaces not listed here follow in index order.
_NAMESPACE_ORDER: Final = (
    "initialize",
    "session",
    "approval",
    "artifact",
    "permission",
    "shell",
    "task",
    "conformance",
)

_DIRECTIONS: Final = {"client-to-host": "client → host", "host-to-client": "host → client"}


@dataclass(frozen=True)
class Row:
    """One field of an object schema, ready for a Markdown table."""

    name: str
    type: str
    required: bool
    description: str


@dataclass(frozen=True)
class Shape:
    """A named object schema rendered as a field table plus notes."""

    name: str
    anchor: str | None
    rows: tuple[Row, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class MethodDoc:
    """One method or notification section."""

    name: str
    anchor: str
    kind: str
    direction: str
    summary: str
    clauses: str
    conformance_only: bool
    params: Shape
    result: Shape | None
    errors: tuple[str, ...]


@dataclass(frozen=True)
class MethodGroup:
    """The requests of one namespace."""

    namespace: str
    methods: tuple[MethodDoc, ...]


@dataclass(frozen=True)
class TypeDoc:
    """One shared type of the Types section."""

    name: str
    anchor: str
    description: str
    kind: str  # "object", "enum" or "scalar"
    shape: Shape | None = None
    values: tuple[str, ...] = ()
    base: str = ""
    constraints: str = ""


@dataclass(frozen=True)
class ErrorDoc:
    """One row of the error catalog."""

    code: str
    anchor: str
    jsonrpc_code: int
    meaning: str
    clauses: str


@dataclass
class _Page:
    protocol_version: int
    storage_version: int
    max_frame_min: int | None
    envelopes: list[Shape] = field(default_factory=list)
    groups: list[MethodGroup] = field(default_factory=list)
    notifications: list[MethodDoc] = field(default_factory=list)
    types: list[TypeDoc] = field(default_factory=list)
    errors: list[ErrorDoc] = field(default_factory=list)
    storage_ddl: str = ""


def _type_anchor(name: str) -> str:
    return f"type-{name.lower()}"


def _method_anchor(name: str) -> str:
    return "method-" + name.replace("/", "-").lower()


def _error_anchor(code: str) -> str:
    return "error-" + code.lower().replace("_", "-")


def _is_shared(name: str) -> bool:
    """Shared types are every definition that is not a method's own params or result."""
    return not name.endswith(("Params", "Result"))


def _clauses(clauses: Iterable[str]) -> str:
    return ", ".join(clauses) or "—"


def _code(text: str) -> str:
    return f"`{text}`"


def _literal(value: Any) -> str:
    return _code(json.dumps(value, ensure_ascii=False))


def _constraints(schema: Mapping[str, Any]) -> list[str]:
    """Human-readable validation keywords of one (non-$ref) schema."""
    out: list[str] = []
    for key, label in (("minLength", "min length"), ("maxLength", "max length")):
        if key in schema:
            out.append(f"{label} {schema[key]}")
    for key, label in (("minimum", "min"), ("maximum", "max")):
        if key in schema:
            out.append(f"{label} {schema[key]}")
    if "format" in schema:
        out.append(f"format {_code(schema['format'])}")
    if "pattern" in schema:
        out.append(f"pattern {_code(schema['pattern'])}")
    if "contentEncoding" in schema:
        out.append(f"{schema['contentEncoding']}-encoded")
    return out


class _TypeNamer:
    """Turns JSON Schema fragments into readable type expressions and field tables."""

    def __init__(self, types: Mapping[str, Any], local: Mapping[str, Any] | None = None) -> None:
        self._types = types
        self._local = local  # definitions that are expanded inline (the envelope's own)

    def _resolve(self, ref: str) -> tuple[str, Mapping[str, Any], bool]:
        """Return (name, schema, expand_inline) for a $ref."""
        doc, _, pointer = ref.partition("#")
        if not pointer.startswith("/$defs/"):
            raise ValueError(f"unsupported $ref {ref!r}")
        name = pointer.removeprefix("/$defs/")
        if not doc and self._local is not None:
            if name not in self._local:
                raise ValueError(f"$ref {ref!r} names no definition")
            return name, self._local[name], True
        if doc not in ("", _TYPES_FILE) or name not in self._types:
            raise ValueError(f"$ref {ref!r} names no definition in {_TYPES_FILE}")
        return name, self._types[name], False

    def name(self, schema: Mapping[str, Any]) -> str:
        """A Markdown type expression such as ``[`Session`](#type-session) | `null```."""
        if "$ref" in schema:
            name, target, inline = self._resolve(schema["$ref"])
            if inline:
                return self.name(target)
            if "enum" in target:
                return self.name(target)
            if _is_shared(name):
                return f"[{_code(name)}](#{_type_anchor(name)})"
            return _code(name)
        for key in ("oneOf", "anyOf"):
            if key in schema:
                parts: list[str] = []
                for branch in schema[key]:
                    part = self.name(branch)
                    if part not in parts:
                        parts.append(part)
                return " | ".join(parts)
        if "const" in schema:
            return _literal(schema["const"])
        if "enum" in schema:
            return " | ".join(_literal(value) for value in schema["enum"])
        kind = schema.get("type")
        if kind is None:
            return _code("any")
        if isinstance(kind, list):
            return " | ".join(_code(str(k)) for k in kind)
        if kind == "array":
            items = schema.get("items")
            if not isinstance(items, Mapping):
                return _code("array")
            inner = self.name(items)
            return f"array of ({inner})" if " | " in inner else f"array of {inner}"
        return _code(str(kind))

    def _description(self, schema: Mapping[str, Any]) -> str:
        texts: list[str] = []
        if schema.get("description"):
            texts.append(str(schema["description"]))
        notes = _constraints(schema)
        for key in ("oneOf", "anyOf"):
            for branch in schema.get(key, ()):
                if "$ref" in branch:
                    continue
                if branch.get("description"):
                    texts.append(str(branch["description"]))
                notes.extend(_constraints(branch))
        if schema.get("type") == "array" and isinstance(schema.get("items"), Mapping):
            items = schema["items"]
            if "$ref" not in items:
                notes.extend(f"each item: {note}" for note in _constraints(items))
        if notes:
            sentence = "; ".join(notes)
            texts.append(f"{sentence[0].upper()}{sentence[1:]}.")
        return " ".join(texts)

    def rows(self, schema: Mapping[str, Any], prefix: str = "") -> list[Row]:
        """Field rows of an object schema; inline nested objects become dotted rows."""
        required = set(schema.get("required", ()))
        out: list[Row] = []
        for prop, sub in schema.get("properties", {}).items():
            dotted = f"{prefix}{prop}"
            out.append(Row(dotted, self.name(sub), prop in required, self._description(sub)))
            if sub.get("type") == "object" and "properties" in sub:
                out.extend(self.rows(sub, prefix=f"{dotted}."))
        return out

    def shape(self, name: str, schema: Mapping[str, Any], *, link: bool) -> Shape:
        """Field table and notes of a named object schema."""
        notes: list[str] = []
        if schema.get("description"):
            notes.append(str(schema["description"]))
        if schema.get("additionalProperties") is False and schema.get("properties"):
            notes.append("No other fields are accepted.")
        extra = int(schema.get("minProperties", 0)) - len(schema.get("required", ()))
        if extra > 0:
            fields = "field" if extra == 1 else "fields"
            notes.append(
                f"Besides the required fields, at least {extra} more {fields} must be set."
            )
        anchor = _type_anchor(name) if link and _is_shared(name) else None
        return Shape(name, anchor, tuple(self.rows(schema)), tuple(notes))


def _load(root: Path, relative: str) -> Any:
    return json.loads((root / relative).read_text(encoding="utf-8"))


def _namespace(method: str) -> str:
    return method.split("/", 1)[0]


def _method_doc(
    name: str,
    entry: Mapping[str, Any],
    types: Mapping[str, Any],
    namer: _TypeNamer,
    catalog: Mapping[str, Any],
) -> MethodDoc:
    def shape_of(def_name: str) -> Shape:
        if def_name not in types:
            raise ValueError(f"{name}: {def_name!r} is not defined in {_TYPES_FILE}")
        return namer.shape(def_name, types[def_name], link=True)

    errors: list[str] = list(entry.get("errors", ()))
    unknown = [code for code in errors if code not in catalog]
    if unknown:
        raise ValueError(f"{name}: error codes missing from the catalog: {', '.join(unknown)}")
    result = entry.get("result")
    return MethodDoc(
        name=name,
        anchor=_method_anchor(name),
        kind=str(entry["kind"]),
        direction=_DIRECTIONS.get(entry["direction"], str(entry["direction"])),
        summary=str(entry["summary"]),
        clauses=_clauses(entry.get("clauses", ())),
        conformance_only=bool(entry.get("conformanceOnly", False)),
        params=shape_of(str(entry["params"])),
        result=shape_of(str(result)) if result is not None else None,
        errors=tuple(errors),
    )


def _type_doc(name: str, schema: Mapping[str, Any], namer: _TypeNamer) -> TypeDoc:
    description = str(schema.get("description", ""))
    anchor = _type_anchor(name)
    if "enum" in schema:
        values = tuple(_literal(value) for value in schema["enum"])
        return TypeDoc(name, anchor, description, "enum", values=values)
    if schema.get("type") == "object":
        shape = namer.shape(name, {**schema, "description": ""}, link=False)
        return TypeDoc(name, anchor, description, "object", shape=shape)
    constraints = "; ".join(_constraints(schema)) or "—"
    return TypeDoc(
        name, anchor, description, "scalar", base=namer.name(schema), constraints=constraints
    )


def _build_page(root: Path) -> _Page:
    index = _load(root, "protocol-v9/methods.json")
    types: dict[str, Any] = _load(root, f"protocol-v9/{index['typesSchema']}")["$defs"]
    envelope: dict[str, Any] = _load(root, "protocol-v9/envelope.schema.json")["$defs"]
    catalog = {entry["code"]: entry for entry in _load(root, "error-codes.json")["codes"]}

    namer = _TypeNamer(types)
    capabilities = types["InitializeResult"]["properties"]["capabilities"]["properties"]
    page = _Page(
        protocol_version=int(index["protocolVersion"]),
        storage_version=STORAGE_SCHEMA_VERSION,
        max_frame_min=capabilities.get("maxFrameBytes", {}).get("minimum"),
    )

    envelope_namer = _TypeNamer(types, local=envelope)
    for name in ("Request", "Notification", "SuccessResponse", "ErrorResponse"):
        page.envelopes.append(envelope_namer.shape(name, envelope[name], link=False))

    methods: dict[str, Any] = index["methods"]
    grouped: dict[str, list[MethodDoc]] = {ns: [] for ns in _NAMESPACE_ORDER}
    for name, entry in methods.items():
        doc = _method_doc(name, entry, types, namer, catalog)
        if doc.kind == "request":
            grouped.setdefault(_namespace(name), []).append(doc)
        else:
            page.notifications.append(doc)
    page.groups = [MethodGroup(ns, tuple(docs)) for ns, docs in grouped.items() if docs]

    page.types = [
        _type_doc(name, schema, namer) for name, schema in types.items() if _is_shared(name)
    ]
    page.errors = [
        ErrorDoc(
            code=code,
            anchor=_error_anchor(code),
            jsonrpc_code=int(entry["jsonrpcCode"]),
            meaning=str(entry["meaning"]),
            clauses=_clauses(entry.get("clauses", ())),
        )
        for code, entry in catalog.items()
    ]
    ddl = (root / "storage" / f"v{STORAGE_SCHEMA_VERSION}.sql").read_text(encoding="utf-8")
    page.storage_ddl = ddl.rstrip("\n")
    return page


def _cell(text: str) -> str:
    """Make text safe for one Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def _tidy(text: str) -> str:
    """Drop trailing spaces and repeated blank lines outside fenced code blocks."""
    out: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if not fenced:
            line = line.rstrip()
            if not line and (not out or not out[-1]):
                continue
        out.append(line)
    return "\n".join(out).strip("\n") + "\n"


def template_environment() -> jinja2.Environment:
    """The Jinja2 environment for the generated Markdown pages."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(_TEMPLATES),
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )


def _environment() -> jinja2.Environment:
    env = template_environment()
    env.filters["cell"] = _cell
    env.filters["method_anchor"] = _method_anchor
    env.filters["error_anchor"] = _error_anchor
    env.filters["type_anchor"] = _type_anchor
    return env


def render_protocol_reference(schemas: Path | None = None) -> str:
    """Render the protocol reference Markdown from ``schemas`` (default: the installed contract)."""
    page = _build_page(schemas if schemas is not None else schemas_dir())
    return _tidy(_environment().get_template(_TEMPLATE_NAME).render(page=page))


def _short_diff(expected: str, actual: str, path: Path, limit: int = 40) -> str:
    lines = list(
        difflib.unified_diff(
            actual.splitlines(keepends=True),
            expected.splitlines(keepends=True),
            fromfile=f"{path} (committed)",
            tofile=f"{path} (rendered from schemas/)",
        )
    )
    if len(lines) > limit:
        lines = [*lines[:limit], f"... {len(lines) - limit} more diff lines\n"]
    return "".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Write the protocol reference, or with ``--check`` verify it is current."""
    parser = argparse.ArgumentParser(
        prog="python -m conformance.docgen",
        description="Render the protocol v9 reference from schemas/.",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="exit 1 if the file differs from a fresh render; write nothing",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=DEFAULT_OUTPUT,
        help=f"Markdown file to write or check (default: {DEFAULT_OUTPUT})",
    )
    args = parser.parse_args(argv)
    return write_or_check(
        args.output,
        render_protocol_reference(),
        "schemas/",
        "python -m conformance.docgen",
        args.check,
    )


def write_or_check(output: Path, rendered: str, source: str, command: str, check: bool) -> int:
    """Write a generated page, or with ``check`` verify the committed one is current."""
    if check:
        if not output.is_file():
            print(f"{output} is missing; run `{command}` to generate it.", file=sys.stderr)
            return 1
        current = output.read_bytes().decode("utf-8")
        if current != rendered:
            print(
                f"{output} is out of date with {source}; run `{command}` to regenerate it.",
                file=sys.stderr,
            )
            print(_short_diff(rendered, current, output), file=sys.stderr, end="")
            return 1
        print(f"{output} is up to date.")
        return 0
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_bytes(rendered.encode("utf-8"))
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
