"""The harness's own message checks: they name direction, method and JSON pointer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conformance.client import HarnessError, HostClient
from conformance.contract import ContractChecker
from conformance.drivers import InProcessDriver


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
