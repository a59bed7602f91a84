"""The compiled validator in front of jsonschema changes no verdict the contract decides.

``contract.SchemaCheck`` asks ``jsonschema-rs`` first and ``jsonschema`` only about what
the compiled validator refuses. These tests prove the two agree on values near every
definition of the protocol (so the fast path is taken for valid messages, and never
passes an invalid one), and pin the corners where the engines differ.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_schema_inline import DEFINITIONS
from test_schema_subset import near

from conformance import contract
from conformance.contract import ContractChecker
from conformance.schema_inline import inlined

TYPES = "protocol-v9/types.schema.json"


# Where Python's ``re`` and ECMA-262 (JSON Schema's dialect) read a pattern differently:
# Python's ``$`` also matches before a final newline, its ``\\s`` also matches these.
PYTHON_ONLY_SPACES = frozenset("\x1c\x1d\x1e\x1f\x85")
ECMA_ONLY_SPACES = frozenset("\ufeff")


def _strings(value: Any) -> list[str]:
    """Every string in a JSON value, member names included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for key, item in value.items() for s in (key, *_strings(item))]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


@pytest.mark.parametrize(("relative", "definition"), DEFINITIONS)
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_both_validators_agree_on_values_near_each_definition(
    relative: str, definition: str, data: st.DataObject
) -> None:
    """They differ only where a string holds a corner of the two regex dialects."""
    check = contract._validator(relative, definition)
    value = data.draw(near(inlined(relative, definition)))
    compiled, reference = check.compiled.is_valid(value), check.reference.is_valid(value)
    strings = _strings(value)
    if compiled and not reference:
        assert any(PYTHON_ONLY_SPACES & set(s) for s in strings), value
    elif reference and not compiled:
        assert any(s.endswith("\n") or ECMA_ONLY_SPACES & set(s) for s in strings), value


def test_the_compiled_validator_answers_for_a_valid_message() -> None:
    """A valid message is passed without jsonschema: the fast path is real."""
    check = contract._validator(TYPES, "SessionCreateParams")
    value = {"workspaceRoot": "/w"}
    assert check.reference.is_valid(value)
    assert check.compiled.is_valid(value)
    assert check.first_error(value) is None


def test_a_refused_message_gets_jsonschemas_first_error() -> None:
    check = contract._validator(TYPES, "SessionCreateParams")
    value = {"workspaceRoot": "/", "mode": "sideways"}
    assert not check.compiled.is_valid(value)
    error = check.first_error(value)
    assert error is not None
    assert contract._pointer(error, "") == "/mode"
    assert "'sideways'" in error.message


@pytest.mark.parametrize(
    ("definition", "value"),
    [
        pytest.param("ErrorCode", "A\ud800", id="code"),
        pytest.param("SessionCreateParams", {"\ud800": 1, "workspaceRoot": "/"}, id="name"),
        pytest.param(
            "ArtifactRef",
            {"path": ".pi/plan/\ud800.md", "sha256": "a" * 64, "byteSize": 1},
            id="path",
        ),
    ],
)
def test_a_string_without_a_utf8_form_is_judged_by_jsonschema(definition: str, value: Any) -> None:
    """A lone surrogate (JSON's ``"\\ud800"``) has no UTF-8 form, which the compiled
    validator needs; the check then takes jsonschema's verdict instead of failing."""
    check = contract._validator(TYPES, definition)
    with pytest.raises(UnicodeEncodeError):
        check.compiled.is_valid(value)
    assert (check.first_error(value) is None) == check.reference.is_valid(value)


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        pytest.param(0, True, id="zero"),
        pytest.param(1.0, True, id="integral-float"),
        pytest.param(8640000000000000, True, id="at-the-maximum"),
        pytest.param(8640000000000001, False, id="past-the-maximum"),
        pytest.param(2**70, False, id="beyond-64-bits"),
        pytest.param(-(2**70), False, id="negative-beyond-64-bits"),
        pytest.param(1.5, False, id="fraction"),
        pytest.param(True, False, id="boolean"),
    ],
)
def test_numbers_are_judged_alike(value: Any, valid: bool) -> None:
    """Integers that JSON allows but 64 bits do not hold, integral floats, the bounds. Both
    engines take ``1.0`` for an integer, as JSON Schema does; the check does not, since the
    contract's integers are written as digits."""
    check = contract._validator(TYPES, "ClockAdvanceParams")
    params = {"ms": value}
    assert check.compiled.is_valid(params) == check.reference.is_valid(params) == valid
    assert (check.first_error(params) is None) == (valid and not isinstance(value, float))


def test_a_message_either_engine_accepts_is_valid() -> None:
    """Where the regular-expression dialects differ, the more lenient verdict stands.

    Python's ``$`` also matches before a final newline; ECMA-262's (JSON Schema's) does
    not. A hash with a trailing newline was valid to the harness before the compiled
    validator came, and stays so.
    """
    check = contract._validator(TYPES, "ArtifactRef")
    ref = {"path": ".pi/plan/p.md", "sha256": "a" * 64 + "\n", "byteSize": 1}
    assert not check.compiled.is_valid(ref)
    assert check.reference.is_valid(ref)
    assert check.first_error(ref) is None


def test_a_message_both_refuse_is_reported_with_its_pointer() -> None:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "conformance/clock/advance",
        "params": {"ms": -1},
    }
    violation = ContractChecker().check_outgoing(message)
    assert violation is not None
    assert (violation.pointer, violation.reason) == (
        "/params/ms",
        "-1 is less than the minimum of 0",
    )
