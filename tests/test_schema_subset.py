"""The host's small schema validator agrees with jsonschema on the published contract."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from pi_contract import load_json, method_index
from reference_host.schema_subset import (
    ANNOTATIONS,
    ASSERTIONS,
    UnsupportedSchemaError,
    first_problem,
)
from reference_host.tools.agent_tools import BASH, ENTER_PLAN_MODE, NEW_CONTEXT, SUBMIT_PLAN
from reference_host.tools.registry import FILE_TOOLS

TYPES = load_json("protocol-v9/types.schema.json")
TYPES_ID = TYPES["$id"]
PARAMS = sorted(
    {
        entry["params"]
        for entry in method_index().values()
        if entry.get("params") and entry["direction"] == "client-to-host"
    }
)
"""What the host validates: the params of the requests a client sends."""
TOOL_SCHEMAS = {
    spec.name: spec.parameters
    for spec in [BASH, ENTER_PLAN_MODE, NEW_CONTEXT, SUBMIT_PLAN, *(t.spec for t in FILE_TOOLS)]
}
_MAP_KEYWORDS = {"properties", "$defs"}


def keywords(schema: Any) -> set[str]:
    """Every keyword used anywhere in ``schema`` (names inside ``properties`` excluded)."""
    found: set[str] = set()
    if isinstance(schema, dict):
        for key, value in schema.items():
            found.add(key)
            children = value.values() if key in _MAP_KEYWORDS else [value]
            for child in children:
                found |= keywords(child)
    elif isinstance(schema, list):
        for item in schema:
            found |= keywords(item)
    return found


@cache
def _reference(schema_json: str) -> Draft202012Validator:
    registry: Registry[Any] = Registry().with_resource(TYPES_ID, Resource.from_contents(TYPES))
    return Draft202012Validator(json.loads(schema_json), registry=registry)


def reference_verdict(schema: Any, value: Any) -> bool:
    return _reference(json.dumps(schema, sort_keys=True)).is_valid(value)


def subset_verdict(schema: Any, value: Any) -> bool:
    return first_problem(schema, value, {TYPES_ID: TYPES}, TYPES_ID) is None


def test_the_contract_uses_only_the_supported_keywords() -> None:
    used = keywords(TYPES) | keywords(list(TOOL_SCHEMAS.values()))
    assert used <= ASSERTIONS | ANNOTATIONS, used - ASSERTIONS - ANNOTATIONS


def test_an_unsupported_keyword_is_refused_not_ignored() -> None:
    with pytest.raises(UnsupportedSchemaError):
        first_problem({"type": "string", "maxItems": 3}, "x")


@pytest.mark.parametrize(
    ("schema", "value", "fits"),
    [
        ({"type": "integer"}, 5.0, True),
        ({"type": "integer"}, 5.5, False),
        ({"type": "integer"}, True, False),
        ({"type": "number"}, False, False),
        ({"enum": [1]}, True, False),
        ({"const": True}, 1, False),
        ({"const": 1}, 1.0, True),
        ({"pattern": "b"}, "abc", True),
        ({"minLength": 2}, "\U0001f600", False),
        ({"maxLength": 3}, 7, True),
        ({"oneOf": [{"type": "integer"}, {"type": "number"}]}, 3, False),
    ],
)
def test_json_schema_semantics(schema: dict[str, Any], value: Any, fits: bool) -> None:
    assert subset_verdict(schema, value) is fits
    assert reference_verdict(schema, value) is fits


def test_the_problem_names_the_offending_field() -> None:
    schema = {"$ref": f"{TYPES_ID}#/$defs/SessionCreateParams"}
    problem = first_problem(schema, {"workspaceRoot": None, "mode": "review"}, {TYPES_ID: TYPES})
    assert problem is not None
    assert problem.pointer == "/mode"
    problem = first_problem(schema, {"workspaceRoot": None, "bogus": 1}, {TYPES_ID: TYPES})
    assert problem is not None and "bogus" in problem.message


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**64), 2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, 1, -1, 1.0, 5.0, 1e30, 8640000000000000, 8640000000000001]),
    st.text(max_size=12),
)
ANY_JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=6,
)


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = TYPES["$defs"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def near(schema: Any, depth: int = 0) -> st.SearchStrategy[Any]:
    """Values that mostly fit ``schema``, often with one thing wrong."""
    if not isinstance(schema, dict):
        return ANY_JSON
    schema = _resolve(schema)
    options: list[st.SearchStrategy[Any]] = [ANY_JSON]
    if "const" in schema:
        options.append(st.just(schema["const"]))
    if "enum" in schema:
        options.append(st.sampled_from(schema["enum"]))
    if "oneOf" in schema and depth < 4:
        options += [near(option, depth + 1) for option in schema["oneOf"]]
    kind = schema.get("type")
    if kind == "object" and depth < 4:
        properties = {
            name: near(sub, depth + 1) for name, sub in schema.get("properties", {}).items()
        }
        options.append(st.fixed_dictionaries({}, optional={**properties, "unexpected": ANY_JSON}))
        required = schema.get("required", [])
        options.append(
            st.fixed_dictionaries(
                {name: properties[name] for name in required if name in properties},
                optional={k: v for k, v in properties.items() if k not in required},
            )
        )
    if kind == "string":
        low = schema.get("minLength", 0)
        high = schema.get("maxLength", low + 10)
        options.append(st.text(min_size=max(0, low - 1), max_size=min(high + 1, low + 20)))
        if "pattern" in schema:
            options.append(st.from_regex(schema["pattern"]))
    if kind == "integer":
        low = schema.get("minimum", -(2**53))
        high = schema.get("maximum", 2**53)
        options.append(st.integers(low - 2, min(high + 2, low + 2**62)))
        options.append(st.sampled_from([low, low - 1, high, high + 1, float(low), 1e300]))
    if kind == "array" and depth < 4:
        options.append(st.lists(near(schema.get("items", True), depth + 1), max_size=3))
    return st.one_of(options)


@pytest.mark.parametrize("definition", PARAMS)
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_params_verdicts_agree_with_jsonschema(definition: str, data: st.DataObject) -> None:
    schema = {"$ref": f"{TYPES_ID}#/$defs/{definition}"}
    value = data.draw(near(schema))
    assert subset_verdict(schema, value) == reference_verdict(schema, value), value


@pytest.mark.parametrize("tool", sorted(TOOL_SCHEMAS))
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_tool_argument_verdicts_agree_with_jsonschema(tool: str, data: st.DataObject) -> None:
    schema = TOOL_SCHEMAS[tool]
    value = data.draw(near(schema))
    assert subset_verdict(schema, value) == reference_verdict(schema, value), value
