"""Tests of the JSON-RPC 2.0 dispatcher, driven directly with byte frames."""

from __future__ import annotations

import asyncio
import json
from functools import cache
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from pi_contract import error_catalog, load_json
from reference_host.errors import HostError
from reference_host.framing import OversizedFrame
from reference_host.rpc import Dispatcher, encode

CATALOG = error_catalog()
SESSION_LIST = {"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {}}


@cache
def envelope_validator(definition: str) -> Draft202012Validator:
    registry: Registry[Any] = Registry()
    for name in ("protocol-v9/envelope.schema.json", "protocol-v9/types.schema.json"):
        contents = load_json(name)
        registry = registry.with_resource(contents["$id"], Resource.from_contents(contents))
    envelope_id = load_json("protocol-v9/envelope.schema.json")["$id"]
    return Draft202012Validator({"$ref": f"{envelope_id}#/$defs/{definition}"}, registry=registry)


class Harness:
    """A dispatcher with a few small handlers, collecting what it sends."""

    def __init__(self, *, initialized: bool = True) -> None:
        self.sent: list[dict[str, Any]] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.dispatcher = Dispatcher(self.sent.append)
        self.dispatcher.initialized = initialized
        self.host_error: HostError = HostError("SESSION_NOT_FOUND", "no such session")
        self.dispatcher.register(
            {
                "initialize": self.initialize,
                "session/list": self.session_list,
                "session/get": self.session_get,
                "session/transcript": self.session_transcript,
                "session/cancel": self.session_cancel,
            }
        )

    async def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("initialize", params))
        self.dispatcher.initialized = True
        return {"protocolVersion": 9}

    async def session_list(self, params: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("session/list", params))
        return {"sessions": []}

    async def session_get(self, params: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("session/get", params))
        return {"session": {"id": params["sessionId"]}}

    async def session_transcript(self, params: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("session/transcript", params))
        raise self.host_error

    async def session_cancel(self, params: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("session/cancel", params))
        raise RuntimeError("boom")

    def feed(self, *frames: bytes | OversizedFrame | dict[str, Any]) -> list[dict[str, Any]]:
        """Handle ``frames`` in order; return what was sent meanwhile."""
        start = len(self.sent)

        async def run() -> None:
            for frame in frames:
                raw = encode(frame) if isinstance(frame, dict) else frame
                await self.dispatcher.handle(raw)

        asyncio.run(run())
        new = self.sent[start:]
        for message in new:
            check_host_message(message)
        return new


def check_host_message(message: dict[str, Any]) -> None:
    """Every message is encodable; every error carries a catalog code and fits the schema."""
    assert b"\n" not in encode(message)
    if "error" in message:
        errors = list(envelope_validator("ErrorResponse").iter_errors(message))
        assert errors == [], errors
        data_code = message["error"]["data"]["code"]
        assert data_code in CATALOG
        assert message["error"]["code"] == CATALOG[data_code]["jsonrpcCode"]
        assert message["error"]["message"] == message["error"]["data"]["message"]
    elif "result" in message:
        assert list(envelope_validator("SuccessResponse").iter_errors(message)) == []
    else:
        assert list(envelope_validator("Notification").iter_errors(message)) == []


def assert_error(message: dict[str, Any], code: str, request_id: Any) -> dict[str, Any]:
    assert set(message) == {"jsonrpc", "id", "error"}
    assert message["jsonrpc"] == "2.0"
    assert message["id"] == request_id
    assert type(message["id"]) is type(request_id)
    error = message["error"]
    assert error["data"]["code"] == code
    assert error["code"] == CATALOG[code]["jsonrpcCode"]
    assert isinstance(error["message"], str)
    assert error["message"]
    return error


def request(method: str, request_id: Any = 1, **extra: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, **extra}


# -- encode ----------------------------------------------------------------------------------


def test_encode_is_compact_utf8_without_newline() -> None:
    raw = encode({"jsonrpc": "2.0", "id": 1, "result": {"text": "héllo ✓", "n": [1, 2]}})
    assert raw == '{"jsonrpc":"2.0","id":1,"result":{"text":"héllo ✓","n":[1,2]}}'.encode()
    assert json.loads(raw) == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"text": "héllo ✓", "n": [1, 2]},
    }


def test_encode_escapes_newlines_inside_strings() -> None:
    raw = encode({"jsonrpc": "2.0", "method": "turn/text", "params": {"text": "a\nb"}})
    assert b"\n" not in raw
    assert json.loads(raw)["params"]["text"] == "a\nb"


# -- successful requests ---------------------------------------------------------------------


def test_successful_request_gets_its_result_with_the_same_id() -> None:
    harness = Harness()
    (response,) = harness.feed(encode(SESSION_LIST))
    assert response == {"jsonrpc": "2.0", "id": 1, "result": {"sessions": []}}
    assert harness.calls == [("session/list", {})]


@pytest.mark.parametrize("request_id", [0, -7, 2**53 + 1, "abc", "1", " "])
def test_valid_ids_are_echoed_exactly(request_id: int | str) -> None:
    harness = Harness()
    (response,) = harness.feed(request("session/list", request_id, params={}))
    assert response["id"] == request_id
    assert type(response["id"]) is type(request_id)
    assert response["result"] == {"sessions": []}


def test_missing_params_are_treated_as_empty() -> None:
    harness = Harness()
    (response,) = harness.feed(request("session/list", 5))
    assert response["result"] == {"sessions": []}
    assert harness.calls == [("session/list", {})]


def test_params_are_passed_to_the_handler() -> None:
    harness = Harness()
    (response,) = harness.feed(request("session/get", "r", params={"sessionId": "s-1"}))
    assert response == {"jsonrpc": "2.0", "id": "r", "result": {"session": {"id": "s-1"}}}
    assert harness.calls == [("session/get", {"sessionId": "s-1"})]


def test_requests_are_answered_in_arrival_order() -> None:
    harness = Harness()
    responses = harness.feed(*(request("session/list", i, params={}) for i in range(5)))
    assert [r["id"] for r in responses] == [0, 1, 2, 3, 4]


def test_notify_sends_a_notification() -> None:
    harness = Harness()
    harness.dispatcher.notify("session/updated", {"sessionId": "s-1"})
    assert harness.sent == [
        {"jsonrpc": "2.0", "method": "session/updated", "params": {"sessionId": "s-1"}}
    ]


# -- frame-level errors ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "frame",
    [b"{not json", b"NaN", b'{"jsonrpc":"2.0","id":1', b"{'a': 1}", b"nul"],
)
def test_unparsable_json_is_a_parse_error_with_null_id(frame: bytes) -> None:
    harness = Harness()
    (response,) = harness.feed(frame)
    assert_error(response, "PARSE_ERROR", None)
    assert harness.calls == []


@pytest.mark.parametrize(
    "frame",
    [
        b"\xff\xfe",
        b'{"jsonrpc":"2.0","id":1,"method":"session/list\xc3"}',
        b'{"jsonrpc":"2.0","id":1,"method":"\xed\xa0\x80"}',  # encoded surrogate
        b'{"jsonrpc":"2.0","id":1,"method":"\xc0\xaf"}',  # overlong encoding
    ],
)
def test_invalid_utf8_is_a_parse_error(frame: bytes) -> None:
    harness = Harness()
    (response,) = harness.feed(frame)
    assert_error(response, "PARSE_ERROR", None)
    assert harness.calls == []


def test_oversized_frame_is_frame_too_large_with_null_id() -> None:
    harness = Harness()
    (response,) = harness.feed(OversizedFrame(1024))
    error = assert_error(response, "FRAME_TOO_LARGE", None)
    assert error["data"]["details"] == {"maxFrameBytes": 1024}


@pytest.mark.parametrize(
    "frame", [b"[]", b"1", b'"x"', b"null", b"true", b"[" + encode(SESSION_LIST) + b"]"]
)
def test_non_object_messages_are_invalid_requests(frame: bytes) -> None:
    harness = Harness()
    (response,) = harness.feed(frame)
    assert_error(response, "INVALID_REQUEST", None)
    assert harness.calls == []


@pytest.mark.parametrize(
    "raw_id", [b"null", b"1.5", b"1.0", b"1e3", b"true", b"false", b'""', b"[]", b"{}"]
)
def test_bad_id_types_are_invalid_requests_answered_with_null_id(raw_id: bytes) -> None:
    harness = Harness()
    frame = b'{"jsonrpc":"2.0","id":' + raw_id + b',"method":"session/list","params":{}}'
    (response,) = harness.feed(frame)
    error = assert_error(response, "INVALID_REQUEST", None)
    assert "id" in error["message"]
    assert harness.calls == []


@pytest.mark.parametrize(
    ("message", "fragment"),
    [
        ({"id": 3, "method": "session/list"}, "jsonrpc"),
        ({"jsonrpc": "1.0", "id": 3, "method": "session/list"}, "jsonrpc"),
        ({"jsonrpc": 2.0, "id": 3, "method": "session/list"}, "jsonrpc"),
        ({"jsonrpc": "2.0", "id": 3}, "method"),
        ({"jsonrpc": "2.0", "id": 3, "method": ""}, "method"),
        ({"jsonrpc": "2.0", "id": 3, "method": 7}, "method"),
        ({"jsonrpc": "2.0", "id": 3, "method": "session/list", "params": []}, "params"),
        ({"jsonrpc": "2.0", "id": 3, "method": "session/list", "params": None}, "params"),
        ({"jsonrpc": "2.0", "id": 3, "method": "session/list", "extra": 1}, "extra"),
    ],
)
def test_malformed_envelopes_with_a_valid_id_echo_it(
    message: dict[str, Any], fragment: str
) -> None:
    harness = Harness()
    (response,) = harness.feed(message)
    error = assert_error(response, "INVALID_REQUEST", 3)
    assert fragment in error["message"]
    assert harness.calls == []


# -- method dispatch -------------------------------------------------------------------------


def test_unknown_method_is_method_not_found() -> None:
    harness = Harness()
    (response,) = harness.feed(request("no/such", 9, params={}))
    error = assert_error(response, "METHOD_NOT_FOUND", 9)
    assert "no/such" in error["message"]


def test_published_method_without_a_handler_is_method_not_found() -> None:
    harness = Harness()
    (response,) = harness.feed(request("task/list", 2, params={}))
    assert_error(response, "METHOD_NOT_FOUND", 2)


def test_request_before_initialize_is_refused_and_not_handled() -> None:
    harness = Harness(initialized=False)
    (response,) = harness.feed(request("session/list", 4, params={}))
    assert_error(response, "NOT_INITIALIZED", 4)
    assert harness.calls == []


def test_initialize_then_requests_are_served() -> None:
    harness = Harness(initialized=False)
    first, second, third = harness.feed(
        request("session/list", 1, params={}),
        request("initialize", 2, params={"protocolVersion": 9}),
        request("session/list", 3, params={}),
    )
    assert_error(first, "NOT_INITIALIZED", 1)
    assert second == {"jsonrpc": "2.0", "id": 2, "result": {"protocolVersion": 9}}
    assert third == {"jsonrpc": "2.0", "id": 3, "result": {"sessions": []}}
    assert harness.calls == [("initialize", {"protocolVersion": 9}), ("session/list", {})]


def test_initialize_params_are_validated_before_initialization() -> None:
    harness = Harness(initialized=False)
    (response,) = harness.feed(request("initialize", 1, params={"protocolVersion": "9"}))
    error = assert_error(response, "INVALID_PARAMS", 1)
    assert "protocolVersion" in error["message"]
    assert harness.calls == []
    assert not harness.dispatcher.initialized


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        ("session/get", {}, "sessionId"),
        ("session/get", {"sessionId": 5}, "sessionId"),
        ("session/get", {"sessionId": ""}, "sessionId"),
        ("session/get", {"sessionId": "s", "bogus": True}, "bogus"),
        ("session/list", {"unexpected": 1}, "unexpected"),
        ("initialize", {"protocolVersion": 9, "clientInfo": {}}, "name"),
        ("initialize", {"protocolVersion": 9, "clientInfo": {"name": 1}}, "clientInfo/name"),
    ],
)
def test_invalid_params_name_the_field(method: str, params: dict[str, Any], field: str) -> None:
    harness = Harness()
    (response,) = harness.feed(request(method, 8, params=params))
    error = assert_error(response, "INVALID_PARAMS", 8)
    assert field in error["message"]
    assert error["message"].startswith("params")
    assert harness.calls == []


@pytest.mark.parametrize("code", sorted(CATALOG))
def test_host_error_maps_to_its_catalog_code(code: str) -> None:
    harness = Harness()
    harness.host_error = HostError(code, f"failure {code}", {"k": "v"})
    (response,) = harness.feed(request("session/transcript", "t", params={"sessionId": "s"}))
    error = assert_error(response, code, "t")
    assert error["code"] == CATALOG[code]["jsonrpcCode"]
    assert error["message"] == f"failure {code}"
    assert error["data"] == {"code": code, "message": f"failure {code}", "details": {"k": "v"}}


def test_host_error_without_details_has_no_details_member() -> None:
    harness = Harness()
    harness.host_error = HostError("SESSION_NOT_FOUND", "gone")
    (response,) = harness.feed(request("session/transcript", 1, params={"sessionId": "s"}))
    error = assert_error(response, "SESSION_NOT_FOUND", 1)
    assert error["data"] == {"code": "SESSION_NOT_FOUND", "message": "gone"}


def test_unexpected_exception_is_internal_error_and_serving_continues() -> None:
    harness = Harness()
    first, second, third = harness.feed(
        request("session/cancel", 1, params={"sessionId": "s"}),
        request("session/list", 2, params={}),
        request("session/cancel", 3, params={"sessionId": "s"}),
    )
    error = assert_error(first, "INTERNAL_ERROR", 1)
    assert "boom" not in error["message"]  # internals stay in the log
    assert "session/cancel" in error["message"]
    assert second == {"jsonrpc": "2.0", "id": 2, "result": {"sessions": []}}
    assert_error(third, "INTERNAL_ERROR", 3)


def test_later_frames_are_served_after_every_kind_of_error() -> None:
    harness = Harness()
    responses = harness.feed(
        b"{bad",
        b"\xff",
        OversizedFrame(10),
        b"[]",
        request("nope", 1),
        request("session/get", 2, params={}),
        request("session/cancel", 3, params={"sessionId": "s"}),
        request("session/list", 4, params={}),
    )
    assert [r["error"]["data"]["code"] for r in responses[:-1]] == [
        "PARSE_ERROR",
        "PARSE_ERROR",
        "FRAME_TOO_LARGE",
        "INVALID_REQUEST",
        "METHOD_NOT_FOUND",
        "INVALID_PARAMS",
        "INTERNAL_ERROR",
    ]
    assert responses[-1] == {"jsonrpc": "2.0", "id": 4, "result": {"sessions": []}}


# -- client notifications --------------------------------------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "method": "session/list", "params": {}},
        {"jsonrpc": "2.0", "method": "session/list"},
        {"jsonrpc": "2.0", "method": "no/such/method", "params": {}},
        {"jsonrpc": "2.0", "method": "session/get", "params": {"wrong": 1}},
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}},
    ],
)
def test_client_notifications_get_no_response(message: dict[str, Any]) -> None:
    harness = Harness()
    assert harness.feed(message) == []
    assert harness.calls == []


def test_notification_before_initialize_gets_no_response() -> None:
    harness = Harness(initialized=False)
    assert harness.feed({"jsonrpc": "2.0", "method": "session/list"}) == []
    assert harness.feed(request("session/list", 1))[0]["error"]["data"]["code"] == (
        "NOT_INITIALIZED"
    )


# -- properties ------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=8,
)
envelopes = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2]),
        "id": st.one_of(st.integers(), st.text(max_size=4), st.none(), st.booleans()),
        "method": st.sampled_from(["initialize", "session/list", "session/get", "x", ""]),
        "params": st.one_of(st.just({}), json_values),
        "extra": json_values,
    },
)
valid_unicode = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60)


def strict_json(frame: bytes) -> Any:
    """Parse as RFC 8259 does: NaN, Infinity and numbers beyond a double are not JSON."""

    def refuse(text: str) -> Any:
        raise ValueError(f"{text} is not a JSON number")

    def finite(text: str) -> float:
        value = float(text)
        if value in (float("inf"), float("-inf")):
            raise ValueError(f"{text} is out of range")
        return value

    return json.loads(frame.decode("utf-8"), parse_constant=refuse, parse_float=finite)


@settings(max_examples=150, deadline=None)
@given(
    frame=st.one_of(
        st.binary(max_size=60),
        valid_unicode.map(str.encode),
        envelopes.map(lambda m: json.dumps(m).encode()),
    ),
    initialized=st.booleans(),
)
def test_any_frame_gets_at_most_one_well_formed_answer(frame: bytes, initialized: bool) -> None:
    harness = Harness(initialized=initialized)
    responses = harness.feed(frame)  # check_host_message validates each one
    assert len(responses) <= 1
    if not frame.strip():
        assert responses == []  # blank lines between frames are ignored
        return
    try:
        message = strict_json(frame)
    except (UnicodeDecodeError, ValueError):
        (response,) = responses
        assert_error(response, "PARSE_ERROR", None)
        return
    if isinstance(message, dict) and "id" not in message:
        if responses:  # only a malformed notification is answered, with a null id
            assert_error(responses[0], "INVALID_REQUEST", None)
    else:
        assert len(responses) == 1
