"""The I/O-free connection: framing, id matching, validation, cursors and the transcript.

Every test feeds bytes by hand; no thread, pipe or host is involved.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from conformance.connection import (
    Closed,
    Connection,
    HarnessError,
    NotificationReceived,
    ResponseReceived,
    RpcError,
    UnmatchedResponse,
    ViolationFound,
)
from pi_contract import error_catalog


class FakeClock:
    """Monotonic seconds that advance only when told."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def line(message: Any) -> bytes:
    return (json.dumps(message, separators=(",", ":")) + "\n").encode()


def result(request_id: Any, body: dict[str, Any]) -> bytes:
    return line({"jsonrpc": "2.0", "id": request_id, "result": body})


def error(request_id: Any, canonical: str) -> bytes:
    code = error_catalog()[canonical]["jsonrpcCode"]
    data = {"code": canonical, "message": "no"}
    return line(
        {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": "no", "data": data}}
    )


def text_note(text: str = "hi") -> bytes:
    params = {"sessionId": "s", "turnId": "t", "text": text}
    return line({"jsonrpc": "2.0", "method": "turn/text", "params": params})


def sessions(conn: Connection, request_id: Any | None = None) -> Any:
    """Send session/list and return its id."""
    message = conn.build_request("session/list", {})
    if request_id is not None:
        message["id"] = request_id
    conn.send_request(message)
    return message["id"]


def kinds(events: list[Any]) -> list[str]:
    return [type(event).__name__ for event in events]


# -- framing ----------------------------------------------------------------------------


def test_a_line_split_across_feeds_is_one_message() -> None:
    conn = Connection()
    request_id = sessions(conn)
    data = result(request_id, {"sessions": []})
    events: list[Any] = []
    for index in range(len(data)):
        events.extend(conn.receive_data(data[index : index + 1]))
    assert kinds(events) == ["ResponseReceived"]
    assert conn.violations == []


def test_several_lines_in_one_feed_come_out_in_order() -> None:
    conn = Connection()
    request_id = sessions(conn)
    events = conn.receive_data(
        text_note("a") + result(request_id, {"sessions": []}) + text_note("b")
    )
    assert kinds(events) == ["NotificationReceived", "ResponseReceived", "NotificationReceived"]
    assert [n["params"]["text"] for n in conn.notifications("turn/text")] == ["a", "b"]


def test_a_feed_ending_mid_line_keeps_the_rest_for_later() -> None:
    conn = Connection()
    data = text_note("a") + text_note("b")
    cut = len(text_note("a")) + 5
    assert kinds(conn.receive_data(data[:cut])) == ["NotificationReceived"]
    assert kinds(conn.receive_data(data[cut:])) == ["NotificationReceived"]


def test_a_last_line_without_newline_counts_at_end_of_output() -> None:
    conn = Connection()
    data = text_note("last").rstrip(b"\n")
    assert conn.receive_data(data) == []
    events = conn.receive_eof()
    assert kinds(events) == ["NotificationReceived", "Closed"]
    assert conn.closed
    assert conn.transcript()[-1].terminated is False


def test_end_of_output_with_nothing_buffered_only_closes() -> None:
    conn = Connection()
    assert conn.receive_eof() == [Closed()]
    assert conn.receive_eof() == []
    with pytest.raises(HarnessError):
        conn.receive_data(b"{}\n")


def test_a_line_ending_in_crlf_is_still_json() -> None:
    conn = Connection()
    events = conn.receive_data(text_note().replace(b"\n", b"\r\n"))
    assert kinds(events) == ["NotificationReceived"]
    assert conn.violations == []


_NOTE = b'"method":"turn/text","params":{"sessionId":"s","turnId":"t","text":"hi"}'


@pytest.mark.parametrize(
    "data",
    [
        b'{"jsonrpc": "2.0",' + _NOTE + b"}\n",
        b' {"jsonrpc":"2.0",' + _NOTE + b"}\n",
        b'{"jsonrpc":"2.0",' + _NOTE + b" }\n",
        b'{"jsonrpc":"2.0",\t' + _NOTE + b"}\n",
    ],
)
def test_whitespace_between_tokens_is_a_violation_but_the_message_counts(data: bytes) -> None:
    conn = Connection()
    events = conn.receive_data(data)
    assert kinds(events) == ["ViolationFound", "NotificationReceived"]
    assert [v.reason.split(":")[0] for v in conn.violations] == ["not compact JSON"]
    assert conn.violations[0].method == "turn/text"


@pytest.mark.parametrize(
    "text", ["two words", 'a quote \\" then space', "ends with a backslash \\\\", "\t tab"]
)
def test_whitespace_inside_strings_is_content(text: str) -> None:
    conn = Connection()
    raw = json.dumps(
        {
            "jsonrpc": "2.0",
            "method": "turn/text",
            "params": {"sessionId": "s", "turnId": "t", "text": text},
        },
        separators=(",", ":"),
    )
    events = conn.receive_data(raw.encode() + b"\n")
    assert kinds(events) == ["NotificationReceived"]
    assert conn.violations == []


# -- lines that are not JSON ------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"{this is not json\n", "not JSON"),
        (b"\n", "not JSON"),
        (b'{"jsonrpc":"2.0","method":"turn/text","params":{"\xff":1}}\n', "not UTF-8"),
        (b'{"jsonrpc":"2.0","id":1,"result":{"now":NaN}}\n', "not JSON"),
        (b'{"jsonrpc":"2.0","id":1,"result":{"now":Infinity}}\n', "not JSON"),
        (b'{"jsonrpc":"2.0","id":1,"result":{"now":-Infinity}}\n', "not JSON"),
    ],
)
def test_a_line_that_is_not_json_is_a_violation_and_nothing_else(data: bytes, reason: str) -> None:
    conn = Connection()
    request_id = sessions(conn)
    assert request_id == 1
    events = conn.receive_data(data)
    assert kinds(events) == ["ViolationFound"]
    assert conn.violations[0].reason.startswith(reason)
    assert conn.violations[0].direction == "host-to-client"
    assert conn.received == [] and conn.unmatched == []
    assert conn.is_pending(request_id), "a broken line must not answer a request"


def test_an_integer_of_any_length_is_read() -> None:
    # RFC 8259 sets no limit on digits; a host may echo a huge number it was sent in
    # error.data. Python's default cap (4,300 digits) must not turn it into end of output.
    conn = Connection()
    huge = "9" * 50_000
    body = (
        '{"jsonrpc":"2.0","id":99,"error":{"code":-32602,"message":"no",'
        f'"data":{{"code":"INVALID_PARAMS","message":"no","details":{{"ms":{huge}}}}}}}}}\n'
    )
    events = conn.receive_data(body.encode())
    assert kinds(events) == ["UnmatchedResponse"]
    assert conn.unmatched[0]["error"]["data"]["details"]["ms"] == int(huge)
    assert conn.violations == []


def test_a_json_value_that_is_not_an_object_is_a_violation() -> None:
    conn = Connection()
    events = conn.receive_data(b"[1,2,3]\n")
    assert kinds(events) == ["ViolationFound"]
    assert conn.violations[0].reason == "not a JSON object"
    assert conn.received == [[1, 2, 3]]


def test_the_connection_goes_on_after_a_broken_line() -> None:
    conn = Connection()
    request_id = sessions(conn)
    events = conn.receive_data(b"garbage\n" + result(request_id, {"sessions": []}))
    assert kinds(events) == ["ViolationFound", "ResponseReceived"]


# -- ids --------------------------------------------------------------------------------


def test_ids_are_allocated_in_sequence_and_skip_ids_in_flight() -> None:
    conn = Connection(first_id=5)
    first = conn.build_request("session/list", {})
    conn.send_request(first)
    conn.send_request({**conn.build_request("session/list", {}), "id": 7})
    assert first["id"] == 5
    assert conn.next_id() == 8, "id 6 was taken by build_request, 7 is in flight"


def test_id_zero_is_an_ordinary_id() -> None:
    conn = Connection(first_id=0)
    request_id = sessions(conn)
    assert request_id == 0
    events = conn.receive_data(result(0, {"sessions": []}))
    assert kinds(events) == ["ResponseReceived"]
    response = conn.take_response(0)
    assert response is not None and response.method == "session/list"
    assert conn.unmatched == []


def test_string_ids_match_only_the_same_string() -> None:
    conn = Connection()
    sessions(conn, "1")
    sessions(conn, 1)
    conn.receive_data(result(1, {"sessions": []}))
    assert conn.has_response(1) and not conn.has_response("1")
    conn.receive_data(result("1", {"sessions": []}))
    assert conn.has_response("1")


def test_a_boolean_id_answers_nothing() -> None:
    conn = Connection()
    sessions(conn)
    events = conn.receive_data(result(True, {"sessions": []}))
    assert kinds(events) == ["ViolationFound", "UnmatchedResponse"]
    assert conn.is_pending(1)


def test_responses_out_of_order_reach_their_requests() -> None:
    conn = Connection()
    first, second = sessions(conn), sessions(conn)
    events = conn.receive_data(result(second, {"sessions": []}) + error(first, "NOT_INITIALIZED"))
    assert [(e.request_id, e.method) for e in events if isinstance(e, ResponseReceived)] == [
        (second, "session/list"),
        (first, "session/list"),
    ]
    taken = conn.take_response(first)
    assert taken is not None
    failure = RpcError.from_response(taken.method, taken.message)
    assert failure is not None and failure.canonical == "NOT_INITIALIZED"
    assert conn.violations == []


def test_a_response_to_an_unknown_id_is_unmatched_but_no_violation() -> None:
    conn = Connection()
    events = conn.receive_data(error(99, "FRAME_TOO_LARGE"))
    assert events == [UnmatchedResponse(json.loads(error(99, "FRAME_TOO_LARGE")), "unknown id")]
    assert conn.violations == []


def test_a_startup_error_with_id_null_is_unmatched() -> None:
    conn = Connection()
    sessions(conn)
    events = conn.receive_data(error(None, "STORAGE_SCHEMA_UNSUPPORTED"))
    assert kinds(events) == ["UnmatchedResponse"]
    assert isinstance(events[0], UnmatchedResponse) and events[0].reason == "null id"
    assert conn.unmatched[0]["error"]["data"]["code"] == "STORAGE_SCHEMA_UNSUPPORTED"
    assert conn.violations == []
    assert conn.is_pending(1)


def test_a_second_response_to_one_request_is_a_violation() -> None:
    conn = Connection()
    request_id = sessions(conn)
    conn.receive_data(result(request_id, {"sessions": []}))
    events = conn.receive_data(result(request_id, {"sessions": []}))
    assert kinds(events) == ["ViolationFound", "UnmatchedResponse"]
    violation = conn.violations[0]
    assert violation.pointer == "/id" and violation.method == "session/list"
    # still a repeat once the first response was taken
    assert conn.take_response(request_id) is not None
    assert kinds(conn.receive_data(result(request_id, {"sessions": []}))) == [
        "ViolationFound",
        "UnmatchedResponse",
    ]
    assert len(conn.unmatched) == 2


def test_an_id_asked_again_may_be_answered_again() -> None:
    conn = Connection()
    sessions(conn, "again")
    conn.receive_data(result("again", {"sessions": []}))
    assert conn.take_response("again") is not None
    sessions(conn, "again")
    assert kinds(conn.receive_data(result("again", {"sessions": []}))) == ["ResponseReceived"]
    assert conn.violations == []


def test_a_response_is_taken_once() -> None:
    conn = Connection()
    request_id = sessions(conn)
    assert conn.take_response(request_id) is None
    conn.receive_data(result(request_id, {"sessions": []}))
    assert conn.take_response(request_id) is not None
    assert conn.take_response(request_id) is None
    assert conn.method_of(request_id) == "session/list"


# -- validation -------------------------------------------------------------------------


def test_a_result_is_checked_against_its_request_method() -> None:
    conn = Connection()
    message = conn.build_request("conformance/clock/get", {})
    conn.send_request(message)
    events = conn.receive_data(result(message["id"], {"now": "noon"}))
    assert kinds(events) == ["ViolationFound", "ResponseReceived"]
    assert conn.violations[0].pointer == "/result/now"
    assert conn.violations[0].method == "conformance/clock/get"


def test_an_invalid_notification_is_kept_and_reported() -> None:
    conn = Connection()
    note = {"jsonrpc": "2.0", "method": "turn/text", "params": {"sessionId": "s"}}
    events = conn.receive_data(line(note))
    assert kinds(events) == ["ViolationFound", "NotificationReceived"]
    assert conn.notifications() == [note]


def test_the_harness_may_not_send_an_invalid_request() -> None:
    conn = Connection()
    bad = {"jsonrpc": "2.0", "id": 1, "method": "session/get", "params": {"sessionId": 7}}
    with pytest.raises(HarnessError, match="invalid request"):
        conn.send_request(bad)
    assert not conn.is_pending(1) and conn.transcript() == []
    assert conn.send_request(bad, check=False).endswith(b"\n")
    assert conn.is_pending(1)
    assert conn.violations == [], "the host is not blamed for the harness's request"


def test_the_harness_may_not_send_nan_even_unchecked() -> None:
    conn = Connection()
    message = {"jsonrpc": "2.0", "id": 1, "method": "conformance/clock/advance"}
    with pytest.raises(HarnessError, match="not JSON"):
        conn.send_request({**message, "params": {"ms": float("nan")}})
    with pytest.raises(HarnessError, match="not JSON"):
        conn.send_request({**message, "params": {"ms": float("inf")}}, check=False)


def test_a_request_needs_a_usable_id_not_already_in_flight() -> None:
    conn = Connection()
    with pytest.raises(HarnessError, match="needs an integer or string id"):
        conn.send_request({"jsonrpc": "2.0", "method": "session/list"}, check=False)
    sessions(conn, "x")
    with pytest.raises(HarnessError, match="already waiting"):
        sessions(conn, "x")


# -- notifications and cursors ----------------------------------------------------------


def test_marks_separate_notifications_before_and_after() -> None:
    conn = Connection()
    conn.receive_data(text_note("before"))
    mark = conn.mark()
    conn.receive_data(text_note("after"))
    assert [n["params"]["text"] for n in conn.notifications(since=mark)] == ["after"]
    assert [n["params"]["text"] for n in conn.notifications("turn/text")] == ["before", "after"]
    assert conn.notifications("turn/ended") == []


def test_a_response_remembers_how_many_notifications_preceded_it() -> None:
    conn = Connection()
    first, second = sessions(conn), sessions(conn)
    conn.receive_data(text_note("a") + result(first, {"sessions": []}))
    conn.receive_data(text_note("b") + text_note("c") + result(second, {"sessions": []}))
    one, two = conn.take_response(first), conn.take_response(second)
    assert one is not None and two is not None
    assert (one.mark, two.mark) == (1, 3)


def test_scan_tests_each_notification_once_and_resumes() -> None:
    conn = Connection()
    seen: list[str] = []

    def wanted(params: dict[str, Any]) -> bool:
        seen.append(params["text"])
        return bool(params["text"] == "b")

    conn.receive_data(text_note("a"))
    match, position = conn.scan("turn/text", wanted, 0)
    assert match is None and position == 1
    conn.receive_data(text_note("b") + text_note("c"))
    match, position = conn.scan("turn/text", wanted, position)
    assert match is not None and match["params"]["text"] == "b" and position == 2
    assert seen == ["a", "b"]


def test_notification_events_carry_their_index() -> None:
    conn = Connection()
    events = conn.receive_data(text_note("a") + text_note("b"))
    assert [e.index for e in events if isinstance(e, NotificationReceived)] == [0, 1]


# -- transcript -------------------------------------------------------------------------


def test_the_transcript_records_both_directions_with_elapsed_time() -> None:
    clock = FakeClock()
    conn = Connection(clock=clock)
    clock.now += 0.5
    request_id = sessions(conn)
    clock.now += 0.25
    conn.receive_data(result(request_id, {"sessions": []}))
    sent, received = conn.transcript()
    assert sent.direction == "client-to-host" and sent.elapsed == 0.5
    assert json.loads(sent.text) == {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "session/list",
        "params": {},
    }
    assert received.direction == "host-to-client" and received.elapsed == 0.75
    assert received.size == len(result(request_id, {"sessions": []})) - 1
    assert received.to_json()["text"] == received.text


def test_broken_lines_are_in_the_transcript_too() -> None:
    conn = Connection()
    conn.receive_data(b'{"\xff"\n')
    (record,) = conn.transcript()
    assert record.text == '{"\ufffd"' and record.size == 4


def test_long_lines_keep_head_and_tail_in_the_transcript_only() -> None:
    conn = Connection(transcript_line_limit=100)
    long_text = "x" * 5000
    conn.receive_data(text_note(long_text))
    (record,) = conn.transcript()
    assert record.truncated
    assert record.size == len(text_note(long_text)) - 1
    assert record.text.startswith('{"jsonrpc":"2.0","method":"turn/text"')
    assert record.text.endswith('xxx"}}')
    assert f"of {record.size} bytes left out" in record.text
    assert len(record.text) < 200
    assert conn.notifications()[0]["params"]["text"] == long_text


def test_raw_writes_are_recorded_line_by_line() -> None:
    conn = Connection()
    conn.record_sent(b"{this is not json\n[1,2,3]\n{partial")
    records = conn.transcript()
    assert [(r.text, r.terminated) for r in records] == [
        ("{this is not json", True),
        ("[1,2,3]", True),
        ("{partial", False),
    ]
    assert {r.direction for r in records} == {"client-to-host"}


def test_violation_events_name_the_violation() -> None:
    conn = Connection()
    (event,) = conn.receive_data(b"nope\n")
    assert isinstance(event, ViolationFound)
    assert event.violation is conn.violations[0]
