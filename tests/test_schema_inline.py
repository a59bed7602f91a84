"""Inlined schemas judge every message as the published schemas with their $refs do."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from test_schema_subset import near

from conformance import contract, schema_inline
from conformance.schema_inline import inlined
from pi_contract import load_json

FILES = ("protocol-v9/types.schema.json", "protocol-v9/envelope.schema.json")
DEFINITIONS = [(f, d) for f in FILES for d in load_json(f)["$defs"]]


def _by_reference(relative: str, definition: str) -> Draft202012Validator:
    """The definition as published: one $ref into the registry of the schema files."""
    schema_id = load_json(relative)["$id"]
    return Draft202012Validator(
        {"$ref": f"{schema_id}#/$defs/{definition}"}, registry=contract._registry()
    )


def _verdict(
    validator: Draft202012Validator | contract.SchemaCheck, instance: Any
) -> tuple[str, str] | None:
    if isinstance(validator, contract.SchemaCheck):
        error = validator.first_error(instance)
    else:
        error = contract.contract_error(validator, instance)
    return None if error is None else (contract._pointer(error, ""), error.message)


def test_no_reference_is_left_in_any_definition() -> None:
    """The published schemas hold no recursive definition, so nothing is left to look up."""
    left = [d for f, d in DEFINITIONS if '"$ref"' in json.dumps(inlined(f, d))]
    assert left == []


@pytest.mark.parametrize(("relative", "definition"), DEFINITIONS)
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_an_inlined_definition_judges_like_the_published_one(
    relative: str, definition: str, data: st.DataObject
) -> None:
    """Same verdict, same first error (pointer and message), on values near the schema."""
    published = _by_reference(relative, definition)
    fast = contract._validator(relative, definition)
    value = data.draw(near(inlined(relative, definition)))
    assert _verdict(fast, value) == _verdict(published, value), value


def test_valid_and_invalid_values_are_both_drawn() -> None:
    """The comparison above is not vacuous: it meets values either way for a params type."""
    published = _by_reference(FILES[0], "SessionCreateParams")
    seen: set[bool] = set()

    @settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def draw(data: st.DataObject) -> None:
        value = data.draw(near(inlined(FILES[0], "SessionCreateParams")))
        seen.add(published.is_valid(value))

    draw()
    assert seen == {True, False}


def test_a_reference_with_siblings_keeps_them_beside_its_target() -> None:
    approval = load_json(FILES[0])["$defs"]["Approval"]["properties"]["expiresAt"]
    expires = inlined(FILES[0], "Approval")["properties"]["expiresAt"]
    assert set(expires) == {"allOf", "description"}
    assert expires["description"] == approval["description"]
    assert expires["allOf"] == [inlined(FILES[0], approval["$ref"].rpartition("/")[2])]


def test_a_reference_into_another_file_is_followed() -> None:
    error_data = inlined(FILES[1], "ErrorResponse")
    assert "types.schema.json" not in json.dumps(error_data)
    assert json.dumps(inlined(FILES[0], "ErrorData")) in json.dumps(error_data)


def test_a_recursive_reference_stays_a_reference_the_registry_resolves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A definition that refers to itself keeps its $ref, absolute, and still validates."""
    tree = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://adr0053.invalid/schemas/tree.json",
        "$defs": {
            "Tree": {
                "type": "object",
                "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}},
                "additionalProperties": False,
            }
        },
    }
    monkeypatch.setattr(schema_inline, "_document", lambda relative: tree)
    schema = inlined("tree.json", "Tree")
    items = schema["properties"]["children"]["items"]
    assert items == {"$ref": "https://adr0053.invalid/schemas/tree.json#/$defs/Tree"}
    registry: Any = Registry().with_resource(tree["$id"], Resource.from_contents(tree))
    validator = Draft202012Validator(schema, registry=registry)
    assert validator.is_valid({"children": [{"children": []}]})
    assert not validator.is_valid({"children": [{"leaf": 1}]})


def test_data_that_looks_like_a_reference_is_left_as_it_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Values of const, enum, default and examples are data; a property may be named so."""
    document = {
        "$id": "https://adr0053.invalid/schemas/data.json",
        "$defs": {
            "Marker": {"const": {"$ref": "#/$defs/Other"}, "examples": [{"$ref": "x"}]},
            "Named": {"properties": {"const": {"$ref": "#/$defs/Other"}}},
            "Other": {"type": "string"},
        },
    }
    monkeypatch.setattr(schema_inline, "_document", lambda relative: document)
    assert inlined("data.json", "Marker") == document["$defs"]["Marker"]
    assert inlined("data.json", "Named") == {"properties": {"const": {"type": "string"}}}
