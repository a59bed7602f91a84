"""The fuzzer's frames, strategies and oracle, without a host."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings

from conformance.fuzz.frames import (
    BIG_INTEGER,
    DEEP_NESTING,
    NON_FINITE,
    Raw,
    describe,
    encode,
    raw_kinds,
    request_line,
    stand_in,
)
from conformance.fuzz.oracle import expected, line_needs_answer
from conformance.fuzz.schemas import listed_errors, params_valid, request_methods
from conformance.fuzz.strategies import MUTATIONS, Case, Places, cases, garbage, valid_params

FAST = settings(
    max_examples=15, database=None, deadline=None, suppress_health_check=list(HealthCheck)
)
PLACES = Places(
    roots=["/nonexistent/workspace", "relative/path"],
    base_url="http://127.0.0.1:9/v1",
    pools={"sessions": ["s1"], "approvals": ["a1"]},
)


def test_raw_parts_are_written_verbatim_and_strings_escaped() -> None:
    value = {"id": Raw("9" * 30, BIG_INTEGER, 10**30), "x": [Raw("NaN", NON_FINITE, 0.5)]}
    assert encode(value) == '{"id":' + "9" * 30 + ',"x":[NaN]}'
    assert encode("\ud800") == '"\\ud800"'  # a lone surrogate goes out as its escape
    assert encode("é") == '"é"'
    assert raw_kinds(value) == {BIG_INTEGER, NON_FINITE}
    assert stand_in(value) == {"id": 10**30, "x": [0.5]}
    line = request_line("r1", "session/get", {"sessionId": "\ud800"})
    assert json.loads(line) == {
        "jsonrpc": "2.0",
        "id": "r1",
        "method": "session/get",
        "params": {"sessionId": "\ud800"},
    }
    assert (
        request_line("r2", "session/list") == b'{"jsonrpc":"2.0","id":"r2","method":"session/list"}'
    )


def test_long_runs_are_described_briefly() -> None:
    frame = b'{"id":' + b"9" * 4301 + b"}"
    assert describe(frame) == "{\"id\":⟨'9' * 4301⟩}"
    assert len(describe(b"ab" * 1000)) < 400


@pytest.mark.parametrize("method", request_methods())
def test_valid_params_fit_each_published_schema(method: str) -> None:
    @FAST
    @given(valid_params(method))
    def check(params: object) -> None:
        assert params_valid(method, params), params

    check()


@FAST
@given(cases(tuple(request_methods()), PLACES))
def test_every_case_is_judged_and_grounded(case: Case) -> None:
    allowed = expected(case, 100, 65536)
    assert allowed.codes, case
    if case.kind == "valid":
        assert allowed.success and allowed.codes == listed_errors(case.method)
    if isinstance(case.params, dict) and isinstance(case.params.get("workspaceRoot"), str):
        assert case.params["workspaceRoot"] in PLACES.roots or case.kind != "valid"
    assert case.line("r1").endswith(b"}")


def test_mutations_make_params_invalid_or_hostile() -> None:
    assert "missing-field" in MUTATIONS and "lone-surrogate" in MUTATIONS
    missing = Case("session/get", "missing-field", {})
    assert expected(missing, 10, 65536).codes == {"INVALID_PARAMS"}
    extra = Case("approval/reject", "extra-field", {"sessionId": "s", "approvalId": "a", "x": 1})
    assert not expected(extra, 10, 65536).success
    surrogate = Case("session/prompt", "lone-surrogate", {"sessionId": "s", "text": "\ud800"})
    judged = expected(surrogate, 10, 65536)  # P4: no UTF-8 text carries a lone surrogate
    assert (judged.category, judged.codes, judged.success) == (
        "invalid",
        {"INVALID_PARAMS"},
        False,
    )
    paired = Case("session/prompt", "valid", {"sessionId": "s", "text": "plan \U0001f600"})
    assert expected(paired, 10, 65536).success
    nan = Case("conformance/clock/advance", "non-finite", {"ms": Raw("NaN", NON_FINITE, 0.5)})
    assert expected(nan, 10, 65536).codes == {"PARSE_ERROR", "INVALID_PARAMS"}
    big = Case(
        "conformance/clock/advance", "big-integer", {"ms": Raw("9" * 5000, BIG_INTEGER, 10**30)}
    )
    beyond = expected(big, 10, 65536)  # past the schema's largest clock step
    assert not beyond.success and {"PARSE_ERROR", "INVALID_PARAMS"} <= beyond.codes
    deep = Case("session/list", "deep-nesting", {"x": Raw("[[]]", DEEP_NESTING, [])})
    assert expected(deep, 70_000, 65536).codes == {
        "PARSE_ERROR",
        "INVALID_PARAMS",
        "FRAME_TOO_LARGE",
    }
    array = Case("session/list", "not-an-object", [])
    assert "INVALID_REQUEST" in expected(array, 10, 65536).codes
    again = Case("initialize", "missing-field", {})
    assert "ALREADY_INITIALIZED" in expected(again, 10, 65536).codes


@pytest.mark.parametrize("kind", [NON_FINITE, DEEP_NESTING, BIG_INTEGER])
def test_a_repeated_initialize_may_be_refused_as_such_whatever_its_params(kind: str) -> None:
    params = {"protocolVersion": Raw("1e400", kind, 0.5), "clientInfo": {"name": "x"}}
    allowed = expected(Case("initialize", "hostile", params), 10, 65536)
    assert "ALREADY_INITIALIZED" in allowed.codes
    other = expected(Case("session/list", "hostile", {"x": Raw("1e400", kind, 0.5)}), 10, 65536)
    assert "ALREADY_INITIALIZED" not in other.codes


@pytest.mark.parametrize("number", [2**63, 2**64, -(2**63) - 1, 10**20])
def test_an_integer_beyond_64_bits_may_be_a_parse_error(number: int) -> None:
    assert (
        "PARSE_ERROR"
        in expected(Case("conformance/clock/set", "x", {"now": number}), 10, 65536).codes
    )


@pytest.mark.parametrize("number", [2**63 - 1, -(2**63), 8_640_000_000_000_001])
def test_an_integer_within_64_bits_is_no_parse_error(number: int) -> None:
    assert (
        "PARSE_ERROR"
        not in expected(Case("conformance/clock/set", "x", {"now": number}), 10, 65536).codes
    )


@pytest.mark.parametrize(
    ("line", "needs"),
    [
        (b"", "none"),
        (b" \t\r", "none"),
        (b"\x0c", "optional"),
        (b"\x0b \x0c", "optional"),
        ("\u00a0\u3000".encode(), "optional"),
        (b"\xef\xbb\xbf", "optional"),
        (b"{not json", "error"),
        (b"\xff\xfe", "error"),
        (b"[]", "error"),
        (b'{"jsonrpc":"2.0","id":1,"method":"x","extra":1}', "error"),
        (b'{"jsonrpc":"2.0","id":{},"method":"x"}', "error"),
        (b'{"jsonrpc":"2.0","method":"x"}', "notification"),
        (b'{"jsonrpc":"2.0","id":"a","method":"x"}\r', "request"),
        (b'\xef\xbb\xbf{"jsonrpc":"2.0","id":"a","method":"x"}', "request"),
        (b'{"jsonrpc":"2.0","id":NaN,"method":"x"}', "error"),
        # Any answer will do: under that exact id, or an error with id null (the contract).
        (b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"x"}', "request"),
    ],
)
def test_garbage_lines_are_classified(line: bytes, needs: str) -> None:
    assert line_needs_answer(line) == needs


@FAST
@given(garbage(70_000))
def test_garbage_lines_hold_no_newline(item: tuple[str, bytes]) -> None:
    kind, line = item
    assert b"\n" not in line and kind
