"""Out-of-range or malformed params are INVALID_PARAMS (or WORKSPACE_INVALID), never
INTERNAL_ERROR and never silently accepted; the published schemas state the ranges."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hostkit import InProcessHost
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from pi_contract import load_json

MAX_TIMESTAMP = 8_640_000_000_000_000
TYPES = load_json("protocol-v9/types.schema.json")
GOOD_URL = "http://127.0.0.1:9/v1"


def contract_accepts(definition: str, value: Any) -> bool:
    registry: Registry[Any] = Registry().with_resource(TYPES["$id"], Resource.from_contents(TYPES))
    schema = {"$ref": f"{TYPES['$id']}#/$defs/{definition}"}
    return Draft202012Validator(schema, registry=registry).is_valid(value)


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessHost]:
    running = InProcessHost(tmp_path_factory.mktemp("data"), "--conformance")
    running.initialize()
    yield running
    assert running.stop() == 0


def raw_request(host: InProcessHost, method: str, params_json: str) -> dict[str, Any]:
    """Send params written as raw JSON text (for escapes and numbers Python would not write)."""
    request_id = 10_000 + len(host.messages)
    line = f'{{"jsonrpc":"2.0","id":{request_id},"method":"{method}","params":{params_json}}}'
    host.send_line(line.encode())
    return host.answer(request_id)


def code_of(response: dict[str, Any]) -> str:
    assert "error" in response, response
    code: str = response["error"]["data"]["code"]
    return code


def test_the_contract_states_the_ranges() -> None:
    assert TYPES["$defs"]["Timestamp"]["maximum"] == MAX_TIMESTAMP
    assert contract_accepts("Timestamp", MAX_TIMESTAMP)
    assert not contract_accepts("Timestamp", MAX_TIMESTAMP + 1)
    assert not contract_accepts("ClockAdvanceParams", {"ms": 10**20})
    assert not contract_accepts("SessionCreateParams", {"workspaceRoot": "/" + "x" * 5000})
    for url in ("http://", "https://", "http:///v1", "http://:80/v1", "ftp://host/", "host/v1"):
        assert not contract_accepts("ProviderConfig", {"baseUrl": url, "model": "m"}), url
    for url in (GOOD_URL, "https://api.example.com/v1", "http://[::1]:8080/v1", "http://h"):
        assert contract_accepts("ProviderConfig", {"baseUrl": url, "model": "m"}), url


LONE = '"\\ud800"'
REFUSED = {
    "lone surrogate session id": ("session/get", f'{{"sessionId":{LONE}}}'),
    "lone surrogate approval id": (
        "approval/get",
        '{"sessionId":"ses_x","approvalId":"a\\udfffb"}',
    ),
    "lone surrogate root": ("session/create", '{"workspaceRoot":"/tmp/\\ud800"}'),
    "lone surrogate model": (
        "session/create",
        f'{{"workspaceRoot":null,"provider":{{"baseUrl":"{GOOD_URL}","model":{LONE}}}}}',
    ),
    "lone surrogate shell": ("shell/setDefault", f'{{"shellId":{LONE}}}'),
    "lone surrogate task name": (
        "task/create",
        f'{{"name":{LONE},"prompt":"p","mode":"agent","workspaceRoot":null,'
        f'"provider":{{"baseUrl":"{GOOD_URL}","model":"m"}}}}',
    ),
    "5000-character root": ("session/create", json.dumps({"workspaceRoot": "/" + "r" * 5000})),
    "runAt 1e30": (
        "task/create",
        f'{{"name":"n","prompt":"p","mode":"agent","workspaceRoot":null,'
        f'"provider":{{"baseUrl":"{GOOD_URL}","model":"m"}},"runAt":1e30}}',
    ),
    "runAt 10^30": (
        "task/create",
        f'{{"name":"n","prompt":"p","mode":"agent","workspaceRoot":null,'
        f'"provider":{{"baseUrl":"{GOOD_URL}","model":"m"}},"runAt":{10**30}}}',
    ),
    "clock 1e20": ("conformance/clock/set", '{"now":1e20}'),
    "clock 1e300": ("conformance/clock/set", '{"now":1e300}'),
    "clock 10^20": ("conformance/clock/set", f'{{"now":{10**20}}}'),
    "advance 1e20": ("conformance/clock/advance", '{"ms":1e20}'),
    "advance past the end of time": ("conformance/clock/advance", f'{{"ms":{MAX_TIMESTAMP}}}'),
    "baseUrl http://": (
        "session/create",
        '{"workspaceRoot":null,"provider":{"baseUrl":"http://","model":"m"}}',
    ),
    "baseUrl without a host": (
        "session/create",
        '{"workspaceRoot":null,"provider":{"baseUrl":"http://:8080/v1","model":"m"}}',
    ),
    "baseUrl with a bad port": (
        "session/create",
        '{"workspaceRoot":null,"provider":{"baseUrl":"http://h:99999/v1","model":"m"}}',
    ),
}


@pytest.mark.parametrize("case", REFUSED, ids=list(REFUSED))
def test_refused_with_invalid_params_and_nothing_stored(host: InProcessHost, case: str) -> None:
    method, params = REFUSED[case]
    sessions = host.request("session/list")
    tasks = host.request("task/list")
    now = host.request("conformance/clock/get")
    assert code_of(raw_request(host, method, params)) == "INVALID_PARAMS"
    assert host.request("session/list") == sessions
    assert host.request("task/list") == tasks
    assert host.request("conformance/clock/get") == now
    assert host.bad_lines == []


def test_a_root_with_an_overlong_name_is_workspace_invalid(host: InProcessHost) -> None:
    response = raw_request(host, "session/create", json.dumps({"workspaceRoot": "/" + "n" * 300}))
    assert code_of(response) == "WORKSPACE_INVALID"


def test_the_latest_timestamps_are_still_accepted(host: InProcessHost, tmp_path: Path) -> None:
    task = host.request(
        "task/create",
        {
            "name": "far future",
            "prompt": "p",
            "mode": "agent",
            "workspaceRoot": None,
            "provider": {"baseUrl": "http://[::1]:9/v1", "model": "m"},
            "runAt": MAX_TIMESTAMP,
            "enabled": False,
        },
    )["task"]
    assert task["runAt"] == MAX_TIMESTAMP
    host.request("task/delete", {"taskId": task["taskId"]})
