"""Wire rules: strict JSON numbers both ways, blank lines, and nothing before initialize."""

from __future__ import annotations

import asyncio
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hostkit import InProcessHost, SubprocessHost, strict_loads

from conformance.mock_provider import MockProvider, ScriptedToolCall, TextReply, ToolCallsReply
from reference_host.jsontext import MAX_INTEGER_DIGITS
from reference_host.rpc import Dispatcher, encode

SESSION_LIST = b'{"jsonrpc":"2.0","id":7,"method":"session/list","params":{}}'
HUGE = "9" * 5000


def feed(*frames: bytes, initialized: bool = True) -> list[dict[str, Any]]:
    """What a dispatcher with one session/list handler sends for ``frames``."""
    sent: list[dict[str, Any]] = []
    dispatcher = Dispatcher(sent.append)
    dispatcher.initialized = initialized

    async def session_list(params: dict[str, Any]) -> dict[str, Any]:
        return {"sessions": []}

    async def weird(params: dict[str, Any]) -> dict[str, Any]:
        return {"value": math.nan}

    dispatcher.register({"session/list": session_list, "shell/list": weird})

    async def run() -> None:
        for frame in frames:
            await dispatcher.handle(frame)

    asyncio.run(run())
    return [strict_loads(encode(message)) for message in sent]


@pytest.mark.parametrize("process_limit", [0, 4300])
def test_the_longest_integer_read_does_not_depend_on_the_process(process_limit: int) -> None:
    # The harness lifts Python's digit limit in its process, which an in-process host
    # shares; the host must answer the same either way.
    before = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(process_limit)
    try:
        longest = "9" * MAX_INTEGER_DIGITS
        served, refused = feed(
            b'{"jsonrpc":"2.0","id":' + longest.encode() + b',"method":"session/list"}',
            b'{"jsonrpc":"2.0","id":' + longest.encode() + b'9,"method":"session/list"}',
        )
    finally:
        sys.set_int_max_str_digits(before)
    assert "result" in served, served
    assert refused["error"]["data"]["code"] == "PARSE_ERROR" and refused["id"] is None, refused


@pytest.mark.parametrize(
    "frame",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"session/list","params":{"n":' + HUGE.encode() + b"}}",
        b'{"jsonrpc":"2.0","id":' + HUGE.encode() + b',"method":"session/list"}',
        b'{"jsonrpc":"2.0","id":1,"method":"session/list","params":{"n":NaN}}',
        b'{"jsonrpc":"2.0","id":1,"method":"session/list","params":{"n":Infinity}}',
        b'{"jsonrpc":"2.0","id":1,"method":"session/list","params":{"n":-Infinity}}',
        b'{"jsonrpc":"2.0","id":1,"method":"session/list","params":{"n":1e400}}',
        b'{"jsonrpc":"2.0","id":1,"method":"session/list","params":{"n":-1e400}}',
    ],
)
def test_numbers_beyond_json_are_refused_and_serving_continues(frame: bytes) -> None:
    refusal, after = feed(frame, SESSION_LIST)
    assert refusal["error"]["data"]["code"] in ("PARSE_ERROR", "INVALID_PARAMS"), refusal
    if refusal["error"]["data"]["code"] == "PARSE_ERROR":
        assert refusal["id"] is None
    assert after == {"jsonrpc": "2.0", "id": 7, "result": {"sessions": []}}


def test_a_result_holding_nan_becomes_an_internal_error_not_invalid_json() -> None:
    (response,) = feed(b'{"jsonrpc":"2.0","id":3,"method":"shell/list","params":{}}')
    assert response["id"] == 3
    assert response["error"]["data"]["code"] == "INTERNAL_ERROR"


def test_encode_never_writes_non_finite_numbers() -> None:
    for value in (math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError):
            encode({"jsonrpc": "2.0", "method": "turn/text", "params": {"x": value}})


@pytest.mark.parametrize("blank", [b"", b" ", b"\t", b"  \t \r"])
def test_blank_lines_between_frames_are_ignored(blank: bytes) -> None:
    assert feed(blank, SESSION_LIST, blank) == [
        {"jsonrpc": "2.0", "id": 7, "result": {"sessions": []}}
    ]


@pytest.mark.parametrize("method", ["no/such/method", "session/list", "conformance/clock/get"])
def test_any_request_before_initialize_is_not_initialized(method: str) -> None:
    frame = json.dumps({"jsonrpc": "2.0", "id": 5, "method": method, "params": {}}).encode()
    (response,) = feed(frame, initialized=False)
    assert response["error"]["data"]["code"] == "NOT_INITIALIZED"
    assert response["id"] == 5


def test_the_host_process_survives_a_huge_integer(tmp_path: Path) -> None:
    host = SubprocessHost(tmp_path / "data")
    try:
        host.initialize()
        host.send_line(
            b'{"jsonrpc":"2.0","id":2,"method":"session/list","params":{"n":'
            + HUGE.encode()
            + b"}}"
        )
        assert host.request("session/list") == {"sessions": []}
        assert host.bad_lines == []
    finally:
        assert host.stop() == 0


@pytest.fixture
def provider() -> Iterator[MockProvider]:
    with MockProvider() as running:
        yield running


def run_read(tmp_path: Path, provider: MockProvider, arguments: str) -> InProcessHost:
    """A host whose model calls Read with ``arguments`` once; the turn has ended."""
    workspace = tmp_path / "project"
    workspace.mkdir()
    (workspace / "a.txt").write_text("one\ntwo\nthree\n")
    provider.enqueue(ToolCallsReply((ScriptedToolCall("Read", arguments),)), TextReply("done"))
    host = InProcessHost(tmp_path / "data")
    host.initialize()
    session = host.request(
        "session/create",
        {"workspaceRoot": str(workspace), "provider": {"baseUrl": provider.base_url, "model": "m"}},
    )["session"]
    host.request("session/prompt", {"sessionId": session["sessionId"], "text": "read"})
    host.notified("turn/ended")
    return host


def test_an_integral_float_argument_is_that_integer(tmp_path: Path, provider: MockProvider) -> None:
    host = run_read(tmp_path, provider, '{"path": "a.txt", "offset": 2.0, "limit": 1e0}')
    try:
        (result,) = host.notifications("turn/toolResult")
        assert result["status"] == "ok", result
        assert result["output"] == "two\n"
    finally:
        host.stop()


@pytest.mark.parametrize(
    "arguments",
    [
        '{"path": NaN}',
        '{"path": "a.txt", "offset": 1e400}',
        '{"path": Infinity}',
        '{"path": "a", "limit": ' + HUGE + "}",
    ],
)
def test_tool_arguments_beyond_json_are_invalid_tool_input(
    tmp_path: Path, provider: MockProvider, arguments: str
) -> None:
    host = run_read(tmp_path, provider, arguments)
    try:
        (call,) = host.notifications("turn/toolCall")
        (result,) = host.notifications("turn/toolResult")
        assert call["input"] == arguments
        assert result["status"] == "error"
        assert result["error"]["code"] == "INVALID_TOOL_INPUT"
        assert host.bad_lines == []
    finally:
        host.stop()
