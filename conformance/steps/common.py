"""Steps about the host process, the connection, framing and generic outcomes (§7, P1 to P6).

Requests the contract forbids are written as raw lines, so that the harness can send what
its own client would refuse to build (a lone surrogate, a number of five thousand digits,
a line padded to the frame limit). Their answers are the responses that match no request
the client registered; ``world.wire.unmatched_mark`` says where the scenario's start.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from pytest_bdd import given, parsers, then, when

from conformance.blame import blame, verifies
from conformance.failures import clip
from conformance.protocol_models import SessionCreateParams
from conformance.request_spelling import spell, spelling_for
from conformance.steps.requests import granted, listing, mock_provider, plain
from conformance.world import Outcome, World, need
from pi_contract import PROTOCOL_VERSION, error_catalog

# Request ids the raw steps use: far from the client's own counter, which starts at 1.
RAW_ID_BASE: Final = 7000
MIN_FRAME_LIMIT: Final = 65536
LATEST_TIMESTAMP: Final = 8_640_000_000_000_000
# The clock stops 30 minutes short of the last Timestamp, so that every deadline it sets is one.
LATEST_CLOCK: Final = LATEST_TIMESTAMP - 30 * 60_000


@given("a freshly started host")
def fresh_host(world: World) -> None:
    world.start_host()


@given("a connected client")
def connected_client(world: World) -> None:
    world.connect()


# -- raw lines ----------------------------------------------------------------------------


def raw_line(message: Any, spelling: int | None = None) -> bytes:
    """``message`` as one request line, ASCII-escaped so that any string can travel, in
    ``spelling`` or the one its id chooses (``conformance/request_spelling.py``)."""
    if spelling is None:
        spelling = spelling_for(message.get("id") if isinstance(message, dict) else None)
    return spell(message, spelling, ascii_only=True).encode() + b"\n"


def send_lines(world: World, data: bytes, *request_ids: Any) -> None:
    """Write ``data`` unchecked; answers to it are counted from now on."""
    world.wire.unmatched_mark = len(world.rpc.unmatched)
    world.wire.sent = list(request_ids)
    world.rpc.send_raw(data)


def raw_answers(world: World, count: int = 1) -> list[dict[str, Any]]:
    """The first ``count`` answers to the raw lines of the last :func:`send_lines`."""
    mark = world.wire.unmatched_mark
    found = world.rpc.wait_unmatched(mark + count)[mark:]
    world.wire.answers = found
    return found


def every_answer(world: World, expected: int) -> list[dict[str, Any]]:
    """Every answer to the raw lines of the last :func:`send_lines`, once ``expected`` have
    come and a later request was answered (so no answer to those lines is still on its way)."""
    raw_answers(world, expected)
    granted(world.rpc.list_sessions)  # settles: later lines were read after these
    return list(world.rpc.unmatched[world.wire.unmatched_mark :])


def exchange(
    world: World, method: str, params: dict[str, Any], spelling: int | None = None
) -> dict[str, Any]:
    """Send one request as a raw line (in ``spelling``, or the one its id chooses) and
    return its answer (also as the outcome)."""
    request_id = RAW_ID_BASE + len(world.rpc.unmatched)
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    send_lines(world, raw_line(message, spelling), request_id)
    answer = raw_answers(world)[0]
    world.outcome = Outcome.from_response(method, answer)
    if "error" in answer:
        world.wire.refusal = answer["error"]
    return answer


def unchecked(world: World, method: str, params: dict[str, Any]) -> Outcome:
    """Send a request the contract forbids through the client, and record the outcome."""
    message = {"jsonrpc": "2.0", "id": world.rpc.next_id(), "method": method, "params": params}
    response = world.rpc.call_message(message, check=False)
    world.outcome = Outcome.from_response(method, response)
    if isinstance(response.get("error"), dict):
        world.wire.refusal = response["error"]
    return world.outcome


def _request(request_id: Any, method: str = "session/list", params: Any = None) -> bytes:
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}
    return raw_line(message)


# -- the handshake ------------------------------------------------------------------------


def _initialize_params(version: int | str) -> dict[str, Any]:
    return {"protocolVersion": version, "clientInfo": {"name": "pi-conformance"}}


@when(parsers.parse("the client opens the connection asking for protocol version {version:d}"))
def open_connection(world: World, version: int) -> None:
    if world.host is None:
        world.start_host()
    # Hand-built: the version may be one the host must refuse, and the handshake's answer
    # is checked as the host sent it.
    outcome = world.attempt("initialize", _initialize_params(version))
    if outcome.error is None:
        world.handshake = outcome.require_result()


_CLIENT_INFO: Final[dict[str, dict[str, Any]]] = {
    "without saying who it is": {},
    "giving its name and version": {"clientInfo": {"name": "an editor", "version": "2.3.1"}},
}


@when(
    parsers.re(
        r"the client opens the connection (?P<how>without saying who it is|giving its name "
        r"and version)"
    )
)
def open_connection_as(world: World, how: str) -> None:
    if world.host is None:
        world.start_host()
    outcome = world.attempt(
        "initialize", {"protocolVersion": PROTOCOL_VERSION, **_CLIENT_INFO[how]}
    )
    if outcome.error is None:
        world.handshake = outcome.require_result()


@then("the host answers the client's next request")
@verifies("R7.1")
def answers_next_request(world: World) -> None:
    granted(world.rpc.list_sessions)


def _before_initialize(world: World) -> dict[str, tuple[str, dict[str, Any]]]:
    provider = {"baseUrl": world.provider.base_url, "model": "mock-model"}
    return {
        "the list of sessions": ("session/list", {}),
        "a new session": ("session/create", {"workspaceRoot": str(world.workspace)}),
        "a new scheduled task": (
            "task/create",
            {
                "name": "Early task",
                "prompt": "Do it.",
                "mode": "agent",
                "workspaceRoot": str(world.workspace),
                "provider": provider,
            },
        ),
        "the list of shells": ("shell/list", {}),
        "the time on the host clock": ("conformance/clock/get", {}),
    }


@when(parsers.parse("the client asks for {request} before opening the connection"))
def request_before_initialize(world: World, request: str) -> None:
    # Every one of these must be refused before the handshake: sent as built here.
    if request in _UNPUBLISHED:  # NOT_INITIALIZED comes before the method lookup (P6)
        unchecked(world, _UNPUBLISHED[request], {})
        return
    requests = _before_initialize(world)
    assert request in requests, f"no early request called {request!r}"
    method, params = requests[request]
    world.attempt(method, params)


@when("the client opens the connection a second time")
def initialize_twice(world: World) -> None:
    # A second handshake must be refused; its answer is checked as the host sent it.
    world.attempt("initialize", _initialize_params(PROTOCOL_VERSION))


@then(parsers.parse("the connection is established with protocol version {version:d}"))
@verifies("R7.1")
def connection_established(world: World, version: int) -> None:
    result = world.outcome.require_result()
    assert result["protocolVersion"] == version, f"host negotiated {result['protocolVersion']}"


@then(parsers.parse("the request is refused with {code}"))
def refused_with(world: World, code: str) -> None:
    # "A or B": the contract lets the host choose either code
    error = world.outcome.require_error()
    assert error.canonical in code.split(" or "), f"expected {code}, the host answered {error}"


@when(
    parsers.parse(
        'the client opens the connection asking for protocol version "{version}" written as text'
    )
)
def open_connection_text_version(world: World, version: str) -> None:
    if world.host is None:
        world.start_host()
    unchecked(world, "initialize", _initialize_params(version))  # a version of the wrong type


@when("the client opens the connection announcing capabilities of its own")
def open_connection_with_capabilities(world: World) -> None:
    if world.host is None:
        world.start_host()
    # the way other protocols negotiate; initialize's params have no such member
    params = {**_initialize_params(PROTOCOL_VERSION), "capabilities": {}, "processId": 4242}
    unchecked(world, "initialize", params)


@then("the refusal names protocol version 9 as the one the host speaks")
@verifies("R7.1")
def refusal_names_version(world: World) -> None:
    error = world.outcome.require_error()
    supported = error.data.get("details", {}).get("supported")
    assert isinstance(supported, list) and PROTOCOL_VERSION in supported, (
        f"the refusal does not list version {PROTOCOL_VERSION} in details.supported: {error.data}"
    )
    # every version but 9 is refused, so a version listed beside it is one the host refuses
    assert supported == [PROTOCOL_VERSION], (
        f"details.supported lists {supported}, but the host speaks protocol version "
        f"{PROTOCOL_VERSION} alone: every other version is refused"
    )


@then(parsers.parse("the host still accepts a connection asking for protocol version {v:d}"))
def still_accepts(world: World, v: int) -> None:
    result = world.rpc.initialize(v)  # kept raw: the handshake is checked as the host sent it
    assert result["protocolVersion"] == v
    world.handshake = result


@then("nothing was created before the connection was opened")
@verifies("P6")
def nothing_created_early(world: World) -> None:
    sessions = granted(world.rpc.list_sessions).sessions
    assert sessions == [], f"a request before the handshake created sessions: {sessions}"
    tasks = granted(world.rpc.list_tasks).tasks
    assert tasks == [], f"a request before the handshake created tasks: {tasks}"
    storage = world.storage()
    if storage.path.exists():
        for table in ("sessions", "scheduled_tasks"):
            rows = storage.rows(table)
            assert rows == [], f"a request before the handshake stored {table} rows: {rows}"


@then("the host announces the capabilities it was started with")
@verifies("P6")
def capabilities_announced(world: World) -> None:
    capabilities = world.capabilities()
    assert capabilities.get("conformance") is True, (
        f"the host was started with --conformance but announces conformance "
        f"{capabilities.get('conformance')!r}"
    )
    limit = capabilities.get("maxFrameBytes")
    assert isinstance(limit, int) and limit >= MIN_FRAME_LIMIT, (
        f"maxFrameBytes must be at least {MIN_FRAME_LIMIT}, the host announces {limit!r}"
    )
    faults = capabilities.get("faultInjection")
    assert isinstance(faults, list) and all(isinstance(f, str) for f in faults), faults


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


@given(parsers.parse('an empty data directory named "{name}"'))
def data_dir_named(world: World, name: str) -> None:
    world.data_dir = world.data_dir.parent / name
    world.data_dir.mkdir(parents=True)


@given("a data directory whose database file is empty")
def data_dir_with_empty_database(world: World) -> None:
    # version 0 and nothing in it: a new database, like a missing file (R7.4)
    world.data_dir.mkdir(parents=True, exist_ok=True)
    (world.data_dir / "host.db").write_bytes(b"")


@then("the host serves from that data directory")
@verifies("R7.4")
def serves_from_data_dir(world: World) -> None:
    refusal = world.seeded.refusal
    assert refusal is None, f"the host refused to start on the data directory: {refusal}"


@then("the database is in the data directory and nowhere else")
@verifies("R7.4")
def database_where_named(world: World) -> None:
    db = world.data_dir / "host.db"
    assert db.is_file(), f"the data directory {world.data_dir.name!r} holds no host.db"
    root = world.data_dir.parent
    elsewhere = [p.relative_to(root).as_posix() for p in root.rglob("host.db") if p != db]
    assert not elsewhere, f"the host made a database elsewhere: {elsewhere}"


@then("the database file is in write-ahead-log mode")
def database_wal(world: World) -> None:
    mode = world.storage().journal_mode()
    assert mode.lower() == "wal", f"the database is in journal mode {mode}, not WAL"


# -- what the host sends ------------------------------------------------------------------


def _refusals(world: World) -> dict[str, Callable[[], object]]:
    def not_json() -> None:
        send_lines(world, b"{not json at all\n")
        world.wire.refusal = raw_answers(world)[0].get("error")

    return {
        "a request that is not JSON": not_json,
        "a request for a method that does not exist": lambda: unchecked(
            world, "session/explode", {}
        ),
        "a request for a session that does not exist": lambda: world.attempt_typed(
            world.rpc.get_session, "no-such-session"
        ),
        "a request with a parameter that does not exist": lambda: unchecked(
            world, "session/list", {"verbose": True}
        ),
        "a second opening of the connection": lambda: unchecked(
            world, "initialize", _initialize_params(PROTOCOL_VERSION)
        ),
    }


@when(parsers.parse("the client makes {request}"))
def make_refused_request(world: World, request: str) -> None:
    refusals = _refusals(world)
    assert request in refusals, f"no refused request called {request!r}"
    world.wire.refusal = None
    refusals[request]()
    if world.wire.refusal is None and world.outcome.error is not None:
        error = world.outcome.error
        world.wire.refusal = {"code": error.code, "message": error.message, "data": error.data}


@then(parsers.parse("the refusal carries the number the catalog lists for {code}"))
@verifies("P5")
def refusal_number(world: World, code: str) -> None:
    refusal = world.wire.refusal
    assert isinstance(refusal, dict), f"the host did not refuse the request: {world.outcome}"
    data = refusal.get("data") or {}
    assert data.get("code") == code, f"expected {code}, the host answered {refusal}"
    expected = error_catalog()[code]["jsonrpcCode"]
    assert refusal.get("code") == expected, (
        f"{code} carries error.code {refusal.get('code')}, the catalog lists {expected}"
    )


@then("every message the host sent follows the published contract")
@verifies("P5")
def all_messages_conform(world: World) -> None:
    broken = [v for v in world.violations() if v.direction == "host-to-client"]
    assert not broken, "\n".join(v.describe() for v in broken)
    assert world.host_messages(), "the host sent nothing"


# -- malformed input (P1) -----------------------------------------------------------------


@when("the client sends a line that is not JSON")
def send_not_json(world: World) -> None:
    send_lines(world, b"{this is not json\n")


@when("the client sends a line that is not UTF-8")
def send_not_utf8(world: World) -> None:
    send_lines(world, b'{"jsonrpc":"2.0","id":7,"method":"session/list","params":{"\xff":1}}\n')


_NOT_REQUESTS: Final = {
    "a list of requests": (b'[{"jsonrpc":"2.0","id":7101,"method":"session/list"}]\n', 7101),
    "a plain number": (b"42\n", None),
    "an object that names no method": (b'{"jsonrpc":"2.0","id":7102}\n', 7102),
    "a request for another version of JSON-RPC": (
        b'{"jsonrpc":"1.0","id":7103,"method":"session/list","params":{}}\n',
        7103,
    ),
    # without an id, and still not a notification the host may leave unanswered (P1)
    "a line without an id that has a member of its own": (
        b'{"jsonrpc":"2.0","method":"session/list","params":{},"extra":1}\n',
        None,
    ),
    "a line without an id whose params are null": (
        b'{"jsonrpc":"2.0","method":"session/list","params":null}\n',
        None,
    ),
    "a line without an id whose params are a list": (
        b'{"jsonrpc":"2.0","method":"session/list","params":[]}\n',
        None,
    ),
}


@when(parsers.parse("the client offers {value} as a request"))
def send_not_request(world: World, value: str) -> None:
    assert value in _NOT_REQUESTS, f"no malformed request called {value!r}"
    line, request_id = _NOT_REQUESTS[value]
    send_lines(world, line, request_id)


@then(parsers.parse("the host answers it with {code}"))
def raw_answered_with(world: World, code: str) -> None:
    # "A or B": the contract lets the host choose either code
    answer = raw_answers(world)[0]
    assert "error" in answer, f"expected an error response, got {clip(repr(answer), 600)}"
    world.wire.refusal = answer["error"]
    found = (answer["error"].get("data") or {}).get("code")
    assert found in code.split(" or "), f"expected {code}, the host answered {answer['error']}"
    allowed = [None, *(i for i in world.wire.sent if i is not None)]
    assert answer.get("id") in allowed, (
        f"the refusal names request id {answer.get('id')!r}; expected one of {allowed}"
    )


@when("the client sends blank lines around two requests")
def send_blank_lines(world: World) -> None:
    data = b"\n   \n\t\n" + _request(7201) + b"\n \r\n\n" + _request(7202) + b"\n\t \n"
    send_lines(world, data, 7201, 7202)


@then("the host answers exactly the two requests")
@verifies("P1")
def answers_exactly_two(world: World) -> None:
    answers = every_answer(world, 2)
    assert len(answers) == 2, f"the host answered {len(answers)} lines instead of 2: {answers}"
    assert {a.get("id") for a in answers} == {7201, 7202}, answers
    refused = [a for a in answers if "error" in a]
    assert not refused, f"the host refused a request between blank lines: {refused}"


_IDENTIFIERS: Final[dict[str, tuple[Any, Any]]] = {
    "text": ("first request", "second-request-\u00e9"),
    "text made of digits": ("42", "007"),
    "zero and a negative number": (0, -1),
    "the largest integer every client can hold": (2**53 - 1, 2**53 - 2),
    "numbers that do not start at one": (1000, 1001),
    "text longer than any id the host makes": ("r" * 300, "\u00e9" * 1000),
    "integers one past the largest every client can hold": (2**53 + 1, -(2**53 + 1)),
    "integers of twenty digits": (12345678901234567891, -98765432109876543211),
}


@when(parsers.parse("the client sends two requests identified by {identifier}"))
def send_identified(world: World, identifier: str) -> None:
    assert identifier in _IDENTIFIERS, f"no identifiers called {identifier!r}"
    first, second = _IDENTIFIERS[identifier]
    data = _request(first) + _request(second, "shell/list")
    send_lines(world, data, first, second)


@then("each answer carries the identifier of its request")
@verifies("P1")
def answers_carry_ids(world: World) -> None:
    sent = world.wire.sent
    granted(world.rpc.list_sessions)  # the host is serving and read the lines before
    try:
        answers = raw_answers(world, len(sent))
    except TimeoutError:
        answers = list(world.rpc.unmatched[world.wire.unmatched_mark :])
        raise AssertionError(
            f"the host answered a later request but not every one identified by {sent!r}; "
            f"its answers to them: {answers}"
        ) from None
    found = [a.get("id") for a in answers]
    for request_id in sent:
        matching = [f for f in found if f == request_id and type(f) is type(request_id)]
        assert matching, f"no answer carries the identifier {request_id!r}; answers: {found}"
    refused = [a for a in answers if "error" in a]
    assert not refused, f"the host refused requests for their identifiers: {refused}"


@then("each answer carries the identifier of its request, or refuses the request without one")
@verifies("P1")
def answers_carry_ids_or_refuse(world: World) -> None:
    sent = world.wire.sent
    answers = every_answer(world, len(sent))
    assert len(answers) == len(sent), (
        f"the host answered {len(answers)} lines instead of {len(sent)}: {answers}"
    )
    served = []
    for answer in answers:
        if "error" in answer:
            code = (answer["error"].get("data") or {}).get("code")
            assert answer.get("id") is None and code in ("PARSE_ERROR", "INVALID_REQUEST"), (
                "a request whose integer id a host cannot hold is refused with PARSE_ERROR or "
                f'INVALID_REQUEST and "id": null, never answered another way: {answer}'
            )
            continue
        served.append(answer.get("id"))
    for found in served:
        assert any(found == request_id and type(found) is int for request_id in sent), (
            f"an answer carries the identifier {found!r}, but the requests carried {sent!r}: "
            "a host that cannot hold an integer id exactly refuses the request instead of "
            "answering under a rounded one"
        )
    assert len(set(served)) == len(served), f"two answers carry one identifier: {answers}"


def _read_session_as(world: World, request_id: int) -> dict[str, Any]:
    assert "main" in world.sessions, "no session was created"
    params = {"sessionId": world.sessions["main"]["sessionId"]}
    message = {"jsonrpc": "2.0", "id": request_id, "method": "session/get", "params": params}
    return world.rpc.call_message(message)


@given("the client read the session under an identifier of its choosing")
def read_under_chosen_id(world: World) -> None:
    world.wire.reused_id = world.rpc.next_id()
    answer = _read_session_as(world, world.wire.reused_id)
    assert "result" in answer, f"the session could not be read: {answer}"


@when("the client reads the session again under the same identifier")
def read_under_same_id(world: World) -> None:
    world.wire.answers = [_read_session_as(world, need(world.wire.reused_id, "identifier"))]


@then("the answer shows the session in Plan mode")
@verifies("P1")
def fresh_answer(world: World) -> None:
    (answer,) = world.wire.answers
    assert "result" in answer, f"the read was refused: {answer}"
    mode = answer["result"]["session"]["mode"]
    assert mode == "plan", (
        f"the read under an identifier used before shows mode {mode!r}: a request is served "
        "afresh, also when its identifier was used for an earlier one"
    )


@when("the client creates a session for the project twice under one identifier")
def create_twice_under_one_id(world: World) -> None:
    request_id = world.rpc.next_id()
    params = SessionCreateParams(workspaceRoot=str(world.workspace), provider=mock_provider(world))
    message = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "session/create",
        "params": params.model_dump(mode="json", exclude_unset=True),
    }
    world.wire.answers = [world.rpc.call_message(message) for _ in range(2)]


@then("each of the two requests made a session of its own")
@verifies("P1")
def each_made_its_own(world: World) -> None:
    made = []
    for answer in world.wire.answers:
        assert "result" in answer, f"creating the session was refused: {answer}"
        made.append(answer["result"]["session"]["sessionId"])
    assert made[0] != made[1], (
        f"both requests were answered with session {made[0]}: a request is served afresh, "
        "never answered from an earlier one that carried the same identifier"
    )
    listed = {s.sessionId for s in granted(world.rpc.list_sessions).sessions}
    assert set(made) <= listed, f"session/list holds {sorted(listed)}, not both of {made}"


# -- the frame limit (P2) -----------------------------------------------------------------


_FILLERS: Final = ("whitespace between its tokens", "characters of several bytes")


def _padded_request(request_id: int, size: int, filler: str) -> tuple[bytes, int | str]:
    """A valid request line of exactly ``size`` bytes (newline excluded) and its id.

    It is padded either with the whitespace JSON allows between tokens, or with a string
    id of two-byte characters, so that a limit counted in characters instead of bytes
    shows (P2 counts bytes).
    """
    assert filler in _FILLERS, f"no padding called {filler!r}"
    if filler == _FILLERS[0]:
        head = b'{"jsonrpc":"2.0","id":%d,"method":"session/list","params":{}' % request_id
        padding = size - len(head) - 1
        assert padding >= 0, f"a frame limit of {size} bytes is too small"
        return head + b" " * padding + b"}", request_id
    before, after = b'{"jsonrpc":"2.0","id":"', b'","method":"session/list","params":{}}'
    room = size - len(before) - len(after)
    assert room >= 2, f"a frame limit of {size} bytes is too small"
    identifier = "\u00e9" * (room // 2) + "a" * (room % 2)
    return before + identifier.encode() + after, identifier


def _frame_limit(world: World) -> int:
    limit = world.capabilities().get("maxFrameBytes")
    assert isinstance(limit, int), f"the host announces no maxFrameBytes: {limit!r}"
    return limit


@when(
    parsers.parse(
        "the client sends a request one byte longer than the host's frame limit, "
        "padded with {filler}"
    )
)
def send_oversized(world: World, filler: str) -> None:
    line, request_id = _padded_request(7301, _frame_limit(world) + 1, filler)
    send_lines(world, line + b"\n", request_id)


@when(
    parsers.parse(
        "the client sends a request twice as long as the host's frame limit, padded with {filler}"
    )
)
def send_far_oversized(world: World, filler: str) -> None:
    line, request_id = _padded_request(7303, 2 * _frame_limit(world), filler)
    send_lines(world, line + b"\n", request_id)


@then("the host answered that line once and nothing else")
@verifies("P2")
def answered_once(world: World) -> None:
    answers = every_answer(world, 1)
    assert len(answers) == 1, (
        f"the host answered one oversized line {len(answers)} times: "
        f"{clip(repr(answers[1:]), 600)}; the rest of a line past the limit is not a line of "
        "its own"
    )


@when(
    parsers.parse(
        "the client sends a request exactly as long as the host's frame limit, padded with {filler}"
    )
)
def send_at_limit(world: World, filler: str) -> None:
    line, request_id = _padded_request(7302, _frame_limit(world), filler)
    send_lines(world, line + b"\n", request_id)


@then("the host serves it")
@verifies("P2")
def serves_at_limit(world: World) -> None:
    answer = raw_answers(world)[0]
    assert "result" in answer, (
        f"a request of exactly maxFrameBytes ({_frame_limit(world)}) bytes was refused: "
        f"{answer.get('error')}"
    )
    assert answer.get("id") == world.wire.sent[0], (
        f"the answer does not carry the request's id: {clip(repr(answer), 600)}"
    )


# -- methods (P3) -------------------------------------------------------------------------

_UNPUBLISHED: Final = {
    "a method that was never published": "session/explode",
    "a published method spelt in other case": "Session/List",
    "a method without its group": "list",
}


_CONFORMANCE_CONTROLS: Final[dict[str, tuple[str, dict[str, Any]]]] = {
    "that reads the clock": ("conformance/clock/get", {}),
    "that sets the clock": ("conformance/clock/set", {"now": 1_900_000_000_000}),
    "that moves the clock": ("conformance/clock/advance", {"ms": 60_000}),
    "that arms a fault": ("conformance/fault/arm", {"fault": "artifactWrite"}),
}


@given("the host runs as in production, without conformance mode")
def production_host(world: World) -> None:
    world.restart(conformance=False)


@when(parsers.parse("the client uses the conformance control {control}"))
def use_conformance_control(world: World, control: str) -> None:
    assert control in _CONFORMANCE_CONTROLS, f"no conformance control {control!r}"
    unchecked(world, *_CONFORMANCE_CONTROLS[control])


@when(parsers.parse("the client calls {method}"))
def call_unpublished(world: World, method: str) -> None:
    assert method in _UNPUBLISHED, f"no unpublished method called {method!r}"
    unchecked(world, _UNPUBLISHED[method], {})


@when("the client lists sessions with an unexpected parameter")
def list_with_extra(world: World) -> None:
    unchecked(world, "session/list", {"x": 1})


@then("the host keeps serving requests")
def keeps_serving(world: World) -> None:
    try:
        granted(world.rpc.list_sessions)  # its answer must fit SessionListResult
    except TimeoutError as error:
        raise AssertionError(
            f"the host answered nothing to the next request ({error}): after a refused line "
            "it serves the lines that follow"
        ) from None


# -- params out of range (P4) -------------------------------------------------------------


def held(world: World) -> dict[str, Any]:
    """What the host holds that a refused request must not change, over the protocol and
    in storage."""
    rpc = world.rpc
    state: dict[str, Any] = {
        "sessions": listing(plain(granted(rpc.list_sessions)))["sessions"],
        "tasks": listing(plain(granted(rpc.list_tasks)))["tasks"],
        "clock": granted(rpc.clock_get).now,
        "provider requests": len(world.provider.requests()),
    }
    storage = world.storage()
    if storage.path.exists():
        for table in (
            "sessions",
            "scheduled_tasks",
            "turns",
            "transcript",
            "settings",
            "plan_approvals",
        ):
            state[f"stored {table}"] = storage.rows(table)
    return state


def _task_params(world: World, **changes: Any) -> dict[str, Any]:
    params: dict[str, Any] = {
        "name": "Nightly check",
        "prompt": "Check the build.",
        "mode": "agent",
        "workspaceRoot": str(world.workspace),
        "provider": {"baseUrl": world.provider.base_url, "model": "mock-model"},
    }
    return {**params, **changes}


def _session_ref(world: World) -> str:
    session = need(world.sessions.get("main"), "session")
    return str(session["sessionId"])


def _out_of_range(world: World) -> dict[str, tuple[str, dict[str, Any]]]:
    port_url = world.provider.base_url
    return {
        "a clock setting beyond the last representable date": (
            "conformance/clock/set",
            {"now": LATEST_TIMESTAMP + 1},
        ),
        "a scheduled time beyond the last representable date": (
            "task/create",
            _task_params(world, runAt=LATEST_TIMESTAMP + 1),
        ),
        "a provider address without a host": (
            "session/configure",
            {"sessionId": _session_ref(world), "provider": {"baseUrl": "http://", "model": "m"}},
        ),
        "a provider address that is not a web address": (
            "session/configure",
            {
                "sessionId": _session_ref(world),
                "provider": {"baseUrl": port_url.replace("http://", "file:///"), "model": "m"},
            },
        ),
        "a provider address of another scheme with a host": (
            "session/configure",
            {
                "sessionId": _session_ref(world),
                "provider": {"baseUrl": port_url.replace("http://", "ftp://"), "model": "m"},
            },
        ),
        "a provider address carrying a user name and password": (
            "session/configure",
            {
                "sessionId": _session_ref(world),
                "provider": {"baseUrl": port_url.replace("http://", "http://u:pw@"), "model": "m"},
            },
        ),
        "a model name of absurd length": (
            "session/configure",
            {
                "sessionId": _session_ref(world),
                "provider": {"baseUrl": port_url, "model": "m" * 5_000},
            },
        ),
        "a prompt holding half of a surrogate pair": (
            "session/prompt",
            {"sessionId": _session_ref(world), "text": "Look at \ud800 this."},
        ),
        "a task name holding half of a surrogate pair": (
            "task/create",
            _task_params(world, name="Nightly \udfff check"),
        ),
        "a task name holding half of a surrogate pair, escaped in capitals": (
            "task/create",
            _task_params(world, name="Nightly \ud800 check"),
        ),
        "a scheduled time with a fraction of a millisecond": (
            "task/create",
            _task_params(world, runAt=1_900_000_000_000.5),
        ),
        "a mode given as null": (
            "session/configure",
            {"sessionId": _session_ref(world), "mode": None, "permissionMode": "auto"},
        ),
        "a provider with a member of its own": (
            "session/configure",
            {
                "sessionId": _session_ref(world),
                "provider": {"baseUrl": port_url, "model": "m", "apiKey": "sk-x"},
            },
        ),
        "a change that names no setting": ("session/configure", {"sessionId": _session_ref(world)}),
        "a project path longer than the published limit": (
            "session/create",
            {"workspaceRoot": "/" + "p" * 4096},
        ),
        "a session without its project field": ("session/create", {}),
        "a session whose project field is spelt in snake case": (
            "session/create",
            {"workspace_root": str(world.workspace)},
        ),
        "a permission answer that is neither allow nor deny": (
            "permission/respond",
            {"requestId": "perm-never-asked", "decision": "Allow"},
        ),
        "a clock move past the last deadline it can set": (
            "conformance/clock/advance",
            {"ms": LATEST_TIMESTAMP},
        ),
    }


def _at_the_edge(world: World) -> dict[str, tuple[str, dict[str, Any], str, dict[str, Any]]]:
    """Requests at the very edge of what the schemas allow: (method, params, the member of
    the answer that holds what was given, "" for the answer itself, what it must read)."""
    name = "\u00e9" * 200  # 200 characters, 400 bytes: lengths count characters
    wide = "\U0001f680" * 200  # 200 characters, 400 UTF-16 code units, 800 bytes
    now = granted(world.rpc.clock_get).now
    provider = {"baseUrl": "http://127.0.0.1:0/v1", "model": "mock-model"}
    return {
        "a scheduled time at the last representable date": (
            "task/create",
            _task_params(world, runAt=LATEST_TIMESTAMP),
            "task",
            {"runAt": LATEST_TIMESTAMP},
        ),
        "a task name of the longest length in letters beyond ASCII": (
            "task/create",
            _task_params(world, name=name),
            "task",
            {"name": name},
        ),
        "a task name of the longest length in characters beyond the BMP": (
            "task/create",
            _task_params(world, name=wide),
            "task",
            {"name": wide},
        ),
        "a clock setting at the latest moment the clock may reach": (
            "conformance/clock/set",
            {"now": LATEST_CLOCK},
            "",
            {"now": LATEST_CLOCK},
        ),
        "a clock move to the latest moment the clock may reach": (
            "conformance/clock/advance",
            {"ms": LATEST_CLOCK - now},
            "",
            {"now": LATEST_CLOCK},
        ),
        "a provider address on port zero": (
            "session/create",
            {"workspaceRoot": str(world.workspace), "provider": provider},
            "session",
            {"provider": provider},
        ),
    }


@when(parsers.parse("the client sends {value}, which the schema allows"))
def submit_at_the_edge(world: World, value: str) -> None:
    requests = _at_the_edge(world)
    assert value in requests, f"no request at the edge called {value!r}"
    method, params, where, expected = requests[value]
    world.wire.held_before = {"where": where, "expected": expected}
    exchange(world, method, params)


@then("the host takes it and answers it as given")
@verifies("P4")
def taken_as_given(world: World) -> None:
    answer = world.wire.answers[0]
    assert "result" in answer, f"the host refused a request the schema allows: {answer['error']}"
    given = need(world.wire.held_before, "what the answer must read")
    where, expected = given["where"], given["expected"]
    record = answer["result"].get(where, {}) if where else answer["result"]
    shown = {key: record.get(key) for key in expected}
    assert shown == expected, (
        f"the host answered {f'the {where}' if where else 'the request'} with {shown}, not "
        f"{expected}"
    )


@when(parsers.parse("the client submits {value}"))
def submit_out_of_range(world: World, value: str) -> None:
    requests = _out_of_range(world)
    assert value in requests, f"no out-of-range request called {value!r}"
    method, params = requests[value]
    world.wire.held_before = held(world)
    exchange(world, method, params, _CAPITAL_ESCAPES if "escaped in capitals" in value else None)


_CAPITAL_ESCAPES: Final = 2  # the spelling that writes escapes in upper-case hex
NEVER_MADE: Final = "ses_never_made_by_this_host"  # a session id no host has made
_FOR_UNKNOWN_SESSION: Final = {
    "the session": ("session/get", {}),
    "the plans": ("approval/list", {}),
    "the conversation": ("session/transcript", {}),
    "a cancel": ("session/cancel", {}),
    "a change of its mode": ("session/configure", {"mode": "plan"}),
    "a prompt": ("session/prompt", {"text": "Hello?"}),
}


@when(parsers.parse("the client asks for {request} of a session the host never made"))
def ask_unknown_session(world: World, request: str) -> None:
    assert request in _FOR_UNKNOWN_SESSION, f"no request called {request!r}"
    method, params = _FOR_UNKNOWN_SESSION[request]
    world.wire.held_before = held(world)
    exchange(world, method, {"sessionId": NEVER_MADE, **params})


_NUMBERS: Final = {
    "an integer of five thousand digits": b"9" * 5000,
    "a value that is not a number": b"NaN",
    "an infinite value": b"Infinity",
    "a number beyond the range of a double": b"1e400",
    "a minute written with a decimal point": b"60000.0",
}


@when(parsers.parse("the client moves the host clock by {number}"))
def advance_by_number(world: World, number: str) -> None:
    assert number in _NUMBERS, f"no number called {number!r}"
    world.wire.held_before = held(world)
    line = (
        b'{"jsonrpc":"2.0","id":7401,"method":"conformance/clock/advance","params":{"ms":'
        + _NUMBERS[number]
        + b"}}\n"
    )
    send_lines(world, line, 7401)


@then("the host refuses it as unreadable or invalid")
@verifies("P4")
def refused_unreadable(world: World) -> None:
    answer = raw_answers(world)[0]
    assert "error" in answer, f"the host accepted a number it cannot hold: {answer}"
    code = (answer["error"].get("data") or {}).get("code")
    assert code in ("PARSE_ERROR", "INVALID_PARAMS"), (
        f"expected PARSE_ERROR or INVALID_PARAMS, the host answered {answer['error']}"
    )
    assert answer.get("id") in (None, *world.wire.sent), answer


@then("the host moved its clock by a minute or refused the request as invalid")
@verifies("P4")
def whole_number_taken_or_refused(world: World) -> None:
    answer = raw_answers(world)[0]
    before = need(world.wire.held_before, "state before the request")["clock"]
    if "error" in answer:
        code = (answer["error"].get("data") or {}).get("code")
        assert code == "INVALID_PARAMS", (
            f"60000.0 is a whole number: take it or refuse it with INVALID_PARAMS, not {code}"
        )
        now = granted(world.rpc.clock_get).now
        assert now == before, f"a refused clock move moved the clock from {before} to {now}"
        return
    assert answer["result"].get("now") == before + 60_000, (
        f"the clock stood at {before}; moving it by 60000.0 ms answered {answer['result']}"
    )


@then("nothing the host holds has changed")
@verifies("P4")
def nothing_changed(world: World) -> None:
    before = need(world.wire.held_before, "state before the refused request")
    now = held(world)
    changed = sorted(key for key in before if before[key] != now.get(key))
    with blame("P4"):
        assert not changed, f"a refused request changed {changed}: before {before}, after {now}"


# -- plans sent back for changes (R1.10) and feedback (R3.7) ------------------------------


def _approval_ref(world: World) -> dict[str, str]:
    approval = need(world.plan.approval, "approval")
    return {"sessionId": _session_ref(world), "approvalId": str(approval["approvalId"])}


def _send_back(world: World, how: str) -> tuple[str, dict[str, Any]]:
    ref = _approval_ref(world)
    ways: dict[str, tuple[str, dict[str, Any]]] = {
        "through an action of its own": (
            "approval/requestChanges",
            {**ref, "feedback": "Please split the second step."},
        ),
        "by approving with a request for changes": (
            "approval/approve",
            {**ref, "permissionMode": "ask", "action": "request_changes"},
        ),
        "by choosing changes as the permission mode": (
            "approval/approve",
            {**ref, "permissionMode": "request_changes"},
        ),
        "by rejecting with a request for changes": (
            "approval/reject",
            {**ref, "action": "request_changes"},
        ),
    }
    assert how in ways, f"no way of sending a plan back called {how!r}"
    return ways[how]


@when(parsers.parse("the user tries to send the plan back for changes {how}"))
def send_back_for_changes(world: World, how: str) -> None:
    method, params = _send_back(world, how)
    unchecked(world, method, params)


@when(parsers.parse("the user tries {decision} with a note for the model"))
def decide_with_feedback(world: World, decision: str) -> None:
    ref = _approval_ref(world)
    note = "Please use Redis instead."
    decisions: dict[str, tuple[str, dict[str, Any]]] = {
        "rejecting": ("approval/reject", {**ref, "feedback": note}),
        "rejecting with a comment": ("approval/reject", {**ref, "comment": note}),
        "approving": ("approval/approve", {**ref, "permissionMode": "ask", "feedback": note}),
    }
    assert decision in decisions, f"no decision called {decision!r}"
    unchecked(world, *decisions[decision])
