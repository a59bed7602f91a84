"""Steps about the host process, the connection and generic outcomes."""

from __future__ import annotations

import json

from pytest_bdd import given, parsers, then, when

from conformance.world import Outcome, World


@given("a freshly started host")
def fresh_host(world: World) -> None:
    world.start_host()


@given("a connected client")
def connected_client(world: World) -> None:
    world.connect()


@when(parsers.parse("the client opens the connection asking for protocol version {version:d}"))
def open_connection(world: World, version: int) -> None:
    if world.host is None:
        world.start_host()
    world.attempt("initialize", {"protocolVersion": version, "clientInfo": {"name": "harness"}})


@when("the client sends a request before opening the connection")
def request_before_initialize(world: World) -> None:
    world.attempt("session/list", {})


@when("the client opens the connection a second time")
def initialize_twice(world: World) -> None:
    world.attempt("initialize", {"protocolVersion": 9})


@then(parsers.parse("the connection is established with protocol version {version:d}"))
def connection_established(world: World, version: int) -> None:
    result = world.outcome.require_result()
    assert result["protocolVersion"] == version, f"host negotiated {result['protocolVersion']}"


@then(parsers.parse("the request is refused with {code}"))
def refused_with(world: World, code: str) -> None:
    error = world.outcome.require_error()
    assert error.canonical == code, f"expected {code}, the host answered {error}"


@then(parsers.parse("the host still accepts a connection asking for protocol version {v:d}"))
def still_accepts(world: World, v: int) -> None:
    result = world.rpc.initialize(v)
    assert result["protocolVersion"] == v


@then(parsers.parse("the host reports storage schema version {version:d}"))
def reports_storage_version(world: World, version: int) -> None:
    result = world.outcome.require_result()
    assert result["storageSchemaVersion"] == version, (
        f"host reported storage schema {result['storageSchemaVersion']}"
    )


@then(parsers.parse("the database file records schema version {version:d}"))
def database_version(world: World, version: int) -> None:
    found = world.storage().user_version()
    assert found == version, f"PRAGMA user_version is {found}"


@then("the database file is in write-ahead-log mode")
def database_wal(world: World) -> None:
    mode = world.storage().journal_mode()
    assert mode.lower() == "wal", f"journal mode is {mode}"


# -- malformed input --------------------------------------------------------------------


@when("the client sends a line that is not JSON")
def send_not_json(world: World) -> None:
    world.rpc.send_raw(b"{this is not json\n")
    world.raw_frames_sent += 1


@when("the client sends a line that is not UTF-8")
def send_not_utf8(world: World) -> None:
    world.rpc.send_raw(b'{"jsonrpc":"2.0","id":7,"method":"session/list","params":{"\xff":1}}\n')
    world.raw_frames_sent += 1


@when("the client sends a JSON value that is not a request object")
def send_not_object(world: World) -> None:
    world.rpc.send_raw(b"[1,2,3]\n")
    world.raw_frames_sent += 1


@when("the client sends a line larger than the host's frame limit")
def send_oversized(world: World) -> None:
    limit = world.capabilities()["maxFrameBytes"]
    padding = "x" * (limit + 1024)
    line = json.dumps(
        {"jsonrpc": "2.0", "id": 99, "method": "session/list", "params": {"pad": padding}}
    )
    world.rpc.send_raw(line.encode() + b"\n")
    world.raw_frames_sent += 1


@then(parsers.parse("the host answers it with {code}"))
def raw_answered_with(world: World, code: str) -> None:
    responses = world.rpc.wait_unmatched(world.raw_frames_sent or 1)
    last = responses[-1]
    assert "error" in last, f"expected an error response, got {last}"
    found = last["error"].get("data", {}).get("code")
    assert found == code, f"expected {code}, the host answered {last['error']}"


@when(parsers.parse("the client calls the unknown method {method}"))
def call_unknown(world: World, method: str) -> None:
    response = world.rpc.call_message(
        {"jsonrpc": "2.0", "id": "unknown-1", "method": method, "params": {}}, check=False
    )
    world.outcome = Outcome.from_response(method, response)


@when("the client lists sessions with an unexpected parameter")
def list_with_extra(world: World) -> None:
    response = world.rpc.call_message(
        {"jsonrpc": "2.0", "id": "bad-params-1", "method": "session/list", "params": {"x": 1}},
        check=False,
    )
    world.outcome = Outcome.from_response("session/list", response)


@then("the host keeps serving requests")
def keeps_serving(world: World) -> None:
    result = world.rpc.request("session/list", {})
    assert isinstance(result.get("sessions"), list)
