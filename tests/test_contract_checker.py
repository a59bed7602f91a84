"""The harness's own message checks: they name direction, method and JSON pointer."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from conformance.client import HarnessError, HostClient
from conformance.contract import ContractChecker, dumps, parse_line
from conformance.drivers import InProcessDriver
from pi_contract import error_catalog


def check_host(message: dict[str, Any], method: str | None = None) -> Any:
    return ContractChecker().check_incoming(message, method, json.dumps(message))


def test_a_valid_notification_passes() -> None:
    note = {
        "jsonrpc": "2.0",
        "method": "turn/text",
        "params": {"sessionId": "s", "turnId": "t", "text": "hi"},
    }
    assert check_host(note) is None


def test_an_extra_field_is_named_by_its_pointer() -> None:
    note = {
        "jsonrpc": "2.0",
        "method": "turn/text",
        "params": {"sessionId": "s", "turnId": "t", "text": "hi", "bootEpoch": 3},
    }
    violation = check_host(note)
    assert violation is not None
    assert violation.direction == "host-to-client"
    assert violation.method == "turn/text"
    assert violation.pointer == "/params"
    assert "bootEpoch" in violation.reason
    assert "host-to-client" in violation.describe() and "sent by the host" in violation.describe()


@pytest.mark.parametrize("now", ["1796668827433.0", "1.796668827433e12"])
def test_an_integer_written_with_a_fraction_or_exponent_is_a_violation(now: str) -> None:
    line = '{"jsonrpc":"2.0","id":1,"result":{"now":' + now + "}}"
    violation = ContractChecker().check_incoming(json.loads(line), "conformance/clock/get", line)
    assert violation is not None
    assert violation.pointer == "/result/now"
    assert "written with a fraction or an exponent" in violation.reason


def test_the_same_integer_written_as_digits_passes() -> None:
    assert (
        check_host(
            {"jsonrpc": "2.0", "id": 1, "result": {"now": 1796668827433}}, "conformance/clock/get"
        )
        is None
    )


def test_a_fraction_the_model_wrote_in_its_tool_input_passes() -> None:
    note = {
        "jsonrpc": "2.0",
        "method": "turn/toolCall",
        "params": {
            "sessionId": "s",
            "turnId": "t",
            "toolCallId": "c",
            "tool": "Bash",
            "input": {"command": "true", "timeout_ms": 1.5},
        },
    }
    assert check_host(note) is None


def test_a_result_is_checked_against_the_request_method() -> None:
    response = {"jsonrpc": "2.0", "id": 1, "result": {"now": "noon"}}
    violation = check_host(response, "conformance/clock/get")
    assert violation is not None
    assert violation.pointer == "/result/now"


def test_an_unknown_error_code_is_a_violation() -> None:
    response = {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": -32000, "message": "x", "data": {"code": "OOPS", "message": "x"}},
    }
    violation = check_host(response, "session/get")
    assert violation is not None and violation.pointer == "/error/data/code"


def test_an_unpublished_notification_is_a_violation() -> None:
    violation = check_host({"jsonrpc": "2.0", "method": "host/boot", "params": {}})
    assert violation is not None and violation.pointer == "/method"


def test_the_harness_blames_itself_for_an_invalid_request() -> None:
    checker = ContractChecker()
    bad = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "approval/reject",
        "params": {"sessionId": "s", "approvalId": "a", "feedback": "no"},
    }
    violation = checker.check_outgoing(bad)
    assert violation is not None
    assert violation.direction == "client-to-host"
    assert "sent by the harness" in violation.describe()


def test_the_client_refuses_to_send_an_invalid_request(tmp_path: Path) -> None:
    host = InProcessDriver.load("reference").start(tmp_path / "data")
    client = HostClient(host, timeout=10)
    try:
        client.initialize()
        with pytest.raises(HarnessError, match="harness built an invalid request"):
            client.call("session/get", {"sessionId": 7})
        assert client.violations == [], "the host was blamed for the harness's mistake"
        assert client.request("session/list", {})["sessions"] == []
    finally:
        host.stop()
        client.close()


# -- RFC 8259 numbers -------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","method":"turn/text","params":{"n":NaN}}',
        b'{"jsonrpc":"2.0","id":1,"result":{"now":Infinity}}',
        b'{"jsonrpc":"2.0","id":1,"result":{"now":-Infinity}}',
        b'{"jsonrpc":"2.0","id":1,"result":{"now":1e400}}',
        b'{"jsonrpc":"2.0","id":01,"result":{}}',
        b'{"jsonrpc":"2.0","id":1,"result":{"now":.5}}',
    ],
)
def test_non_json_numbers_from_the_host_are_violations(line: bytes) -> None:
    parsed = parse_line(line, "host-to-client")
    assert parsed.message is None
    assert parsed.violation is not None
    assert parsed.violation.reason.startswith("not JSON")
    assert parsed.violation.direction == "host-to-client"
    assert parsed.violation.message == line.decode()


def test_invalid_utf8_from_the_host_is_a_violation() -> None:
    parsed = parse_line(
        b'{"jsonrpc":"2.0","method":"turn/text","params":{"\xff":1}}', "host-to-client"
    )
    assert parsed.violation is not None and parsed.violation.reason.startswith("not UTF-8")
    assert "\ufffd" in parsed.violation.message


def test_strict_json_still_reads_ordinary_numbers() -> None:
    parsed = parse_line(b'{"a":1.5e3,"b":-0,"c":12345678901234567890}', "host-to-client")
    assert parsed.violation is None
    assert parsed.message == {"a": 1500.0, "b": 0, "c": 12345678901234567890}


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_the_harness_may_not_send_non_finite_numbers(value: float) -> None:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "conformance/clock/advance",
        "params": {"ms": value},
    }
    violation = ContractChecker().check_outgoing(message)
    assert violation is not None
    assert violation.direction == "client-to-host"
    assert violation.pointer == "/params/ms"
    assert violation.reason.startswith("not JSON")
    with pytest.raises(ValueError):
        dumps(message)


# -- error codes ------------------------------------------------------------------------


def _error(code: int, canonical: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": code, "message": "x", "data": {"code": canonical, "message": "x"}},
    }


def test_the_numeric_error_code_must_match_the_catalog() -> None:
    expected = error_catalog()["SESSION_NOT_FOUND"]["jsonrpcCode"]
    assert check_host(_error(expected, "SESSION_NOT_FOUND"), "session/get") is None
    violation = check_host(_error(-32603, "SESSION_NOT_FOUND"), "session/get")
    assert violation is not None
    assert violation.pointer == "/error/code"
    assert str(expected) in violation.reason and "SESSION_NOT_FOUND" in violation.reason


def test_a_startup_error_with_a_null_id_is_checked_too() -> None:
    response = {**_error(-32000, "PARSE_ERROR"), "id": None}
    violation = check_host(response)
    assert violation is not None and violation.pointer == "/error/code"


# -- tool result status -----------------------------------------------------------------

SMALL_CATALOG: dict[str, dict[str, Any]] = {
    "TOOL_DENIED": {"code": "TOOL_DENIED", "jsonrpcCode": -32040, "toolResultStatus": "denied"},
    "TOOL_FAILED": {"code": "TOOL_FAILED", "jsonrpcCode": -32049, "toolResultStatus": "error"},
    "PROVIDER_ERROR": {"code": "PROVIDER_ERROR", "jsonrpcCode": -32051},
}


def _tool_result(status: str, code: str | None) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "turn/toolResult",
        "params": {
            "sessionId": "s",
            "turnId": "t",
            "toolCallId": "c",
            "tool": "Write",
            "status": status,
            "output": "",
            "error": None if code is None else {"code": code, "message": "m"},
        },
    }


@pytest.mark.parametrize(
    ("status", "code"),
    [
        ("denied", "TOOL_DENIED"),
        ("error", "TOOL_FAILED"),
        ("error", "PROVIDER_ERROR"),  # no toolResultStatus: not checked
        ("denied", "PROVIDER_ERROR"),
        ("ok", None),
        ("error", "NOT_IN_THIS_CATALOG"),
    ],
)
def test_a_tool_result_status_that_agrees_with_the_catalog_passes(
    status: str, code: str | None
) -> None:
    note = _tool_result(status, code)
    assert ContractChecker(SMALL_CATALOG).check_incoming(note, None, json.dumps(note)) is None


@pytest.mark.parametrize(
    ("status", "code", "expected"),
    [("error", "TOOL_DENIED", "denied"), ("denied", "TOOL_FAILED", "error")],
)
def test_a_tool_result_status_that_contradicts_the_catalog_is_a_violation(
    status: str, code: str, expected: str
) -> None:
    note = _tool_result(status, code)
    violation = ContractChecker(SMALL_CATALOG).check_incoming(note, None, json.dumps(note))
    assert violation is not None
    assert violation.method == "turn/toolResult"
    assert violation.pointer == "/params/status"
    assert repr(expected) in violation.reason and code in violation.reason


def test_the_error_code_check_uses_the_given_catalog() -> None:
    checker = ContractChecker(SMALL_CATALOG)
    response = _error(-32040, "TOOL_DENIED")
    assert checker.check_incoming(response, "session/get", json.dumps(response)) is None
    response = _error(-32602, "INVALID_PARAMS")
    violation = checker.check_incoming(response, "session/get", json.dumps(response))
    assert violation is not None and violation.pointer == "/error/data/code"
