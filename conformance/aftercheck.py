"""Checks that hold for every scenario, made once it has run.

Whatever a scenario is about, its host must not break the protocol's schemas (P5), must
not store or echo the provider API key (P21), must send the model provider only the
requests the scenario scripted, each a valid Chat Completions request, must not report
one record two ways (R7.2), and must announce each command's output inside its session
and before its end, numbered from 0 (R5.9, R7.3, P20), and must name every turn's own
session wherever it names the turn (R5.9), must show a turn at work as its session's
active turn (R7.2), and must keep a v10 database's published structure (R7.5). These
checks look
at everything the scenario produced: every host message of every host process, every
provider request, and the data directory.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any, Final

from conformance.connection import HarnessError
from conformance.drivers import DUMMY_API_KEY
from conformance.storage_contract import differences, published_v10
from conformance.world import World

SCHEMA_REQUIREMENT = "P5"
KEY_REQUIREMENT = "P21"
VIEWS_REQUIREMENT = "R7.2"
DECISION_REQUIREMENT = "R4.4"
ARTIFACT_REQUIREMENT = "C1"
STORED_TURN_REQUIREMENT = "R5.1"
_KEY = DUMMY_API_KEY.encode()


@dataclass(frozen=True)
class Problem:
    """A broken whole-scenario rule: what to say and whom to blame (an empty requirement
    blames the scenario's own tags)."""

    message: str
    detail: str
    requirement: str


def _files_with_key(data_dir: Path) -> list[str]:
    found: list[str] = []
    if not data_dir.is_dir():
        return found
    for path in sorted(data_dir.rglob("*")):
        if path.is_file() and not path.is_symlink():
            try:
                if _KEY in path.read_bytes():
                    found.append(path.name)
            except OSError:
                continue
    return found


OUTPUT_REQUIREMENT = "R7.3"
SEQ_REQUIREMENT = "P20"
ISOLATION_REQUIREMENT = "R5.9"


def _command_problems(notes: list[dict[str, Any]]) -> list[Problem]:
    """Each command's output and end name the session its start named, and no output of a
    command follows its command/exited (R7.3: output streams while it runs, then it ends)."""
    found: list[Problem] = []
    owner: dict[str, Any] = {}
    exited: set[str] = set()
    numbers: dict[str, list[Any]] = {}
    of_turn: dict[Any, list[Any]] = {}
    for note in notes:
        method, params = note["method"], note.get("params", {})
        if method == "turn/ended":
            if params.get("outcome") == "interrupted":
                continue  # ended by a restart's recovery: the process that ran it is gone
            unended = [c for c in of_turn.get(params.get("turnId"), []) if c not in exited]
            if unended:
                found.append(
                    Problem(
                        f"turn {params.get('turnId')} ended before the command/exited of "
                        f"command(s) {unended} it had announced",
                        "a command announced with command/started ends with its "
                        "command/exited, before the turn/ended of its turn",
                        OUTPUT_REQUIREMENT,
                    )
                )
            continue
        if method not in ("command/started", "command/output", "command/exited"):
            continue
        command = params.get("commandId")
        if method == "command/started":
            owner[command] = params.get("sessionId")
            of_turn.setdefault(params.get("turnId"), []).append(command)
            continue
        if command in owner and params.get("sessionId") != owner[command]:
            found.append(
                Problem(
                    f"{method} of command {command} names session {params.get('sessionId')}; "
                    f"its command/started named {owner[command]}",
                    "every notification names the session of the turn it reports",
                    ISOLATION_REQUIREMENT,
                )
            )
        if method == "command/output" and command in exited:
            found.append(
                Problem(
                    f"command/output of command {command} came after its command/exited",
                    "a command's output streams while it runs; its command/exited comes last",
                    OUTPUT_REQUIREMENT,
                )
            )
        if method == "command/exited":
            exited.add(command)
            if params.get("signal") is None and params.get("exitCode") is None:
                found.append(
                    Problem(
                        f"command {command} ended with neither an exit status nor a signal: "
                        f"{params}",
                        "command/exited's signal is the signal that ended the shell, or null "
                        "when the shell exited on its own, and then exitCode is its status",
                        OUTPUT_REQUIREMENT,
                    )
                )
        if method == "command/output":
            numbers.setdefault(command, []).append(params.get("seq"))
    for command, seqs in numbers.items():
        whole = all(type(seq) is int for seq in seqs)
        if not whole or sorted(seqs) != list(range(len(seqs))):
            found.append(
                Problem(
                    f"the output of command {command} is numbered {seqs[:20]}",
                    "each command numbers its own command/output pieces 0, 1, 2, ... across "
                    "both streams, with no gap and no number twice",
                    SEQ_REQUIREMENT,
                )
            )
    return found[:1]


def _started_turns(notes: list[dict[str, Any]]) -> dict[Any, tuple[int, Any, Any]]:
    """Each turn a turn/started announced: its place, its session and its execution."""
    started: dict[Any, tuple[int, Any, Any]] = {}
    for index, note in enumerate(notes):
        if note["method"] == "turn/started":
            params = note.get("params") or {}
            started.setdefault(
                params.get("turnId"),
                (index, params.get("sessionId"), params.get("executionId")),
            )
    return started


def _turn_owner_problems(notes: list[dict[str, Any]], prompted: dict[str, str]) -> list[Problem]:
    """A turn belongs to the session that was prompted for it (``prompted``, turn id to
    session id), or else to the session its turn/started named: every notification that
    names the turn names that session too, and a session/updated shows it active only in
    that session (R5.9: every notification names the session of the turn it reports)."""
    owner: dict[Any, Any] = {
        turn: session for turn, (_, session, _) in _started_turns(notes).items()
    }
    owner.update(prompted)
    for note in notes:
        method, params = note["method"], note.get("params", {})
        if method == "session/updated":
            session = params.get("session") or {}
            turn, named = session.get("activeTurnId"), session.get("sessionId")
        else:
            turn, named = params.get("turnId"), params.get("sessionId")
        if turn is None or turn not in owner or named is None or named == owner[turn]:
            continue
        return [
            Problem(
                f"{method} names session {named} for turn {turn}, a turn of session {owner[turn]}",
                "every notification names the session of the turn it reports",
                ISOLATION_REQUIREMENT,
            )
        ]
    return []


TOOL_INPUT_REQUIREMENT = "P27"


_NEW_WORK = frozenset({"turn/toolCall", "permission/requested", "command/started"})


def _running_turn_problems(notes: list[dict[str, Any]]) -> list[Problem]:
    """While a turn is plainly still at work (it announces a new tool call, question or
    command later on), every session/updated of its session shows it as the active turn,
    and an execution's turn shows its execution as active too (R7.2: a session's
    activeTurnId names its running turn, activeExecutionId its running execution)."""
    started = _started_turns(notes)
    last_work: dict[Any, int] = {}
    for index, note in enumerate(notes):
        if note["method"] in _NEW_WORK:
            last_work[(note.get("params") or {}).get("turnId")] = index
    for index, note in enumerate(notes):
        if note["method"] != "session/updated":
            continue
        session = note.get("params", {}).get("session") or {}
        for turn, (begun, owner, execution) in started.items():
            if owner != session.get("sessionId") or not begun < index < last_work.get(turn, -1):
                continue
            shown = {
                "activeTurnId": session.get("activeTurnId"),
                "activeExecutionId": session.get("activeExecutionId"),
            }
            expected = {"activeTurnId": turn}
            if execution is not None:
                expected["activeExecutionId"] = execution
            wrong = {key: shown[key] for key, value in expected.items() if shown[key] != value}
            if wrong:
                return [
                    Problem(
                        f"a session/updated of session {owner} shows {wrong} while its turn "
                        f"{turn} was still at work (it announced more work afterwards)",
                        "a session's activeTurnId names its running turn, and an execution's "
                        "turn keeps its execution active, until the turn ends",
                        VIEWS_REQUIREMENT,
                    )
                ]
    return []


def _completed_error_problems(notes: list[dict[str, Any]]) -> list[Problem]:
    """A turn that completed, and a scheduled run that completed, carry ``error: null``
    (R7.2: every report of one record agrees, and a completed turn has no error to report)."""
    for note in notes:
        params = note.get("params") or {}
        if note["method"] == "turn/ended":
            what, record = f"turn {params.get('turnId')}", params
        elif note["method"] == "task/runFinished" and isinstance(params.get("run"), dict):
            what, record = f"scheduled run {params['run'].get('runId')}", params["run"]
        else:
            continue
        if record.get("outcome") == "completed" and record.get("error") is not None:
            return [
                Problem(
                    f"{note['method']} reports the {what} completed with the error "
                    f"{record['error']}",
                    "a turn or run that completed reports error null",
                    VIEWS_REQUIREMENT,
                )
            ]
    return []


_Wire = list[tuple[int, str, float, dict[str, Any]]]  # place, direction, connection, message


def _wire(world: World) -> _Wire:
    """Every protocol line of the scenario that is a JSON object, parsed, in order."""
    found: _Wire = []
    for place, (line, offset) in enumerate(world.transcript()):
        if line.truncated or not line.text.startswith("{"):
            continue
        try:
            message = json.loads(line.text)
        except ValueError:
            continue
        if isinstance(message, dict):
            found.append((place, line.direction, offset, message))
    return found


def _exchanges(wire: _Wire, method: str) -> list[tuple[int, int, dict[str, Any], dict[str, Any]]]:
    """Each ``method`` request the client sent, with the result the host answered: the
    request's place, the answer's place, the request and the result."""
    sent: dict[Any, tuple[int, dict[str, Any]]] = {}
    found: list[tuple[int, int, dict[str, Any], dict[str, Any]]] = []
    connection: float | None = None
    for place, direction, offset, message in wire:
        if offset != connection:
            connection, sent = offset, {}  # a new host process numbers its own requests
        if direction != "host-to-client":
            if message.get("method") == method:
                sent[message.get("id")] = (place, message)
        elif message.get("id") in sent and isinstance(message.get("result"), dict):
            asked, request = sent.pop(message.get("id"))
            found.append((asked, place, request, message["result"]))
    return found


def _configure_order_problems(wire: _Wire) -> list[Problem]:
    """A session/configure's session/updated comes before its response, which reports the
    same session (Ordering): one sent only after the answer announces the change late."""
    updates = [
        (place, (message.get("params") or {}).get("session"))
        for place, direction, _, message in wire
        if direction == "host-to-client" and message.get("method") == "session/updated"
    ]
    answers = [
        (asked, answered, result.get("session"))
        for asked, answered, _, result in _exchanges(wire, "session/configure")
    ]
    for asked, answered, session in answers:
        if not isinstance(session, dict):
            continue
        before = any(s == session for p, s in updates if asked < p < answered)
        late = any(s == session for p, s in updates if p > answered)
        if late and not before:
            return [
                Problem(
                    f"session/configure of session {session.get('sessionId')} was answered "
                    "before the session/updated that announces the change",
                    "a response comes after the notifications of the change it reports",
                    VIEWS_REQUIREMENT,
                )
            ]
    return []


_DECISION_FIELDS: Final = {
    "approval/updated": ("approval", "approvalId", ("status", "permissionMode", "executionId")),
    "session/updated": ("session", "sessionId", ("mode", "permissionMode")),
}


def _decision_order_problems(wire: _Wire) -> list[Problem]:
    """An approve's or reject's `approval/updated`, and an approve's `session/updated`, come
    before its response, which reports the changed approval and session (Ordering)."""
    notes = [
        (place, message.get("method"), message.get("params") or {})
        for place, direction, _, message in wire
        if direction == "host-to-client" and message.get("method") in _DECISION_FIELDS
    ]
    for method in ("approval/approve", "approval/reject"):
        for asked, answered, _, result in _exchanges(wire, method):
            for notice, (key, ident, fields) in _DECISION_FIELDS.items():
                record = result.get(key)
                if not isinstance(record, dict):
                    continue
                wanted = {f: record.get(f) for f in (ident, *fields)}
                said = [
                    (place, params.get(key) or {})
                    for place, told, params in notes
                    if told == notice
                    and place > asked
                    and (params.get(key) or {}).get(ident) == record.get(ident)
                ]
                within = [told for at, told in said if at < answered]
                if not said or any(_reports(told, wanted) for told in within):
                    continue
                if within:
                    shown = {f: within[-1].get(f) for f in wanted}
                    what = f"was answered with {wanted}, but its {notice} announced {shown}"
                elif any(_reports(told, wanted) for _, told in said):
                    what = f"was answered before the {notice} that announces the change"
                else:
                    what = f"was answered with {wanted}, which no {notice} of it announced"
                return [
                    Problem(
                        f"{method} of {key} {record.get(ident)} {what}",
                        "a response comes after the notifications of the change it reports, "
                        "and they report the record as the response does",
                        VIEWS_REQUIREMENT,
                    )
                ]
    return []


def _reports(record: Any, wanted: dict[str, Any]) -> bool:
    """Whether ``record`` holds every field of ``wanted`` with its value."""
    return isinstance(record, dict) and all(record.get(k) == v for k, v in wanted.items())


def _execution_turn_problems(notes: list[dict[str, Any]]) -> list[Problem]:
    """An execution's turn names that execution and its approval, as announced for the
    approval, and each execution runs one turn (R4.7: the execution turn names the approval
    and the execution; an interrupted execution is never resumed)."""
    execution_of: dict[Any, Any] = {}
    for note in notes:
        if note["method"] == "approval/updated":
            approval = (note.get("params") or {}).get("approval") or {}
            if approval.get("executionId") is not None:
                execution_of.setdefault(approval.get("approvalId"), approval["executionId"])
    turn_of: dict[Any, Any] = {}
    for note in notes:
        params = note.get("params") or {}
        if note["method"] != "turn/started" or params.get("kind") != "execution":
            continue
        approval, execution, turn = (
            params.get("approvalId"),
            params.get("executionId"),
            params.get("turnId"),
        )
        announced = execution_of.get(approval)
        if announced is not None and execution != announced:
            return [
                Problem(
                    f"execution turn {turn} names execution {execution} of approval {approval}; "
                    f"the approval's execution is {announced}",
                    "an execution's turn names the approval approved and its execution",
                    "R4.7",
                )
            ]
        if turn_of.setdefault(execution, turn) != turn:
            return [
                Problem(
                    f"turns {turn_of[execution]} and {turn} both announce themselves as the "
                    f"turn of execution {execution}",
                    "each approval has its own execution, run by one turn of its own",
                    "R4.7",
                )
            ]
    return _execution_update_turn_problems(notes, turn_of)


def _execution_update_turn_problems(
    notes: list[dict[str, Any]], turn_of: dict[Any, Any]
) -> list[Problem]:
    """An execution/updated names the execution's turn in `turnId`: always once the
    execution is running or completed, or interrupted after its turn started, and never
    another turn (R4.7)."""
    for note in notes:
        if note["method"] != "execution/updated":
            continue
        params = note.get("params") or {}
        execution, named = params.get("executionId"), params.get("turnId")
        state = params.get("executionState")
        turn = turn_of.get(execution)
        wrong = named is not None and turn is not None and named != turn
        started = state in ("running", "completed") or (state == "interrupted" and turn)
        missing = named is None and bool(started)
        if wrong or missing:
            return [
                Problem(
                    f"execution/updated reports execution {execution} {state} with turnId "
                    f"{named}; the execution's turn is {turn}",
                    "an execution's announcements name the turn that runs it",
                    "R4.7",
                )
            ]
    return []


def _cancel_answer_problems(wire: _Wire, notes: list[dict[str, Any]]) -> list[Problem]:
    """session/cancel answers the id of the turn it cancels (R5.1): a turn that session
    started, never another id (an execution's, another session's turn)."""
    owner = {turn: session for turn, (_, session, _) in _started_turns(notes).items()}
    for _, _, asked, answer in _exchanges(wire, "session/cancel"):
        turn = answer.get("turnId")
        session = (asked.get("params") or {}).get("sessionId")
        if turn is not None and owner.get(turn) != session:
            return [
                Problem(
                    f"session/cancel of session {session} answered turnId {turn}, which is "
                    "no turn that session started",
                    "a cancel answers with the id of the turn it cancels",
                    "R5.1",
                )
            ]
    return []


def _clock_problems(wire: _Wire) -> list[Problem]:
    """Under --conformance the host clock stands still and moves only through set and
    advance (P32): `clock/set` answers the time it was set to, `clock/advance` the time it
    stood at plus `ms`, and `clock/get` the time the last of them answered. Each host
    process has a clock of its own."""
    sent: dict[Any, dict[str, Any]] = {}
    connection: float | None = None
    known: int | None = None
    for _, direction, offset, message in wire:
        if offset != connection:
            connection, sent, known = offset, {}, None
        if direction != "host-to-client":
            if str(message.get("method", "")).startswith("conformance/clock/"):
                sent[message.get("id")] = message
            continue
        request = sent.pop(message.get("id"), None)
        result = message.get("result")
        if request is None or not isinstance(result, dict):
            continue
        now, params = result.get("now"), request.get("params") or {}
        if not isinstance(now, int):
            continue  # the schema check reports it
        method = request["method"]
        expected: Any = known
        if method == "conformance/clock/set":
            expected = params.get("now")
        elif method == "conformance/clock/advance" and known is not None:
            expected = known + params["ms"] if isinstance(params.get("ms"), int) else None
        if isinstance(expected, int) and now != expected:
            return [
                Problem(
                    f"{method} answered now = {now}; the clock stood at {known} and was "
                    f"to read {expected}",
                    "the host clock moves only through conformance/clock/set and advance, "
                    "to exactly the time asked for",
                    "P32",
                )
            ]
        known = now
    return []


def _tool_call_order_problems(notes: list[dict[str, Any]]) -> list[Problem]:
    """A tool call is announced before it runs (P9): its result, a question about it, and a
    command a Bash call starts, come after that turn's `turn/toolCall` of the call, while
    the call has no result yet."""
    open_calls: dict[Any, dict[Any, str]] = {}  # turn -> call id -> tool, announced, no result
    for note in notes:
        params, method = note.get("params") or {}, note["method"]
        turn = params.get("turnId")
        calls = open_calls.setdefault(turn, {})
        if method == "turn/toolCall":
            calls[params.get("toolCallId")] = str(params.get("tool"))
        elif method == "turn/toolResult":
            call = params.get("toolCallId")
            if call not in calls:
                return [
                    Problem(
                        f"turn {turn} sent turn/toolResult for call {call} ({params.get('tool')}) "
                        "with no turn/toolCall of that call awaiting its result",
                        "each tool call is announced by turn/toolCall before it runs, also a "
                        "call whose id an earlier message of the turn gave another call",
                        "P9",
                    )
                ]
            del calls[call]
        elif method in ("permission/requested", "command/started"):
            tool = params.get("tool") if method == "permission/requested" else "Bash"
            if tool not in calls.values():
                what = (
                    f"command {params.get('commandId')}"
                    if method == "command/started"
                    else f"a question about {tool}"
                )
                return [
                    Problem(
                        f"turn {turn} sent {method} ({what}) before any turn/toolCall of "
                        f"{tool} awaiting its result",
                        "each tool call is announced by turn/toolCall before it runs",
                        "P9",
                    )
                ]
    return []


def _approval_order_problems(wire: _Wire) -> list[Problem]:
    """approval/list lists a session's approvals oldest first (R7.2, the method's published
    summary): `createdAt` never decreases along the list. Approvals created at one instant
    may come in either order."""
    for _, _, asked, result in _exchanges(wire, "approval/list"):
        approvals = result.get("approvals")
        if not isinstance(approvals, list):
            continue
        created = [a.get("createdAt") for a in approvals if isinstance(a, dict)]
        times = [c for c in created if isinstance(c, int)]
        if len(times) != len(created):
            continue  # the schema check reports it
        for earlier, later in pairwise(times):
            if later < earlier:
                session = (asked.get("params") or {}).get("sessionId")
                return [
                    Problem(
                        f"approval/list of session {session} lists an approval created at "
                        f"{later} after one created at {earlier}",
                        "approval/list lists a session's approvals oldest first",
                        VIEWS_REQUIREMENT,
                    )
                ]
    return []


_STATUS_CODES: Final = {
    "pending": None,
    "approved": None,
    "rejected": None,
    "expired": "PLAN_APPROVAL_TIMEOUT",
    "interrupted": "TURN_INTERRUPTED",
}


def _approval_records(value: Any) -> list[dict[str, Any]]:
    """Every approval record inside a host message: an object with an ``approvalId``, a
    ``status`` and a ``statusCode``."""
    if isinstance(value, list):
        return [found for item in value for found in _approval_records(item)]
    if not isinstance(value, dict):
        return []
    own = [value] if {"approvalId", "status", "statusCode"} <= value.keys() else []
    return own + [found for item in value.values() for found in _approval_records(item)]


def _reported_approvals(wire: _Wire) -> list[dict[str, Any]]:
    """Every approval record the host sent, in order."""
    return [
        record
        for _, direction, _, message in wire
        if direction == "host-to-client"
        for record in _approval_records(message.get("params") or message.get("result"))
    ]


def _status_code_problems(approvals: list[dict[str, Any]]) -> list[Problem]:
    """An approval's ``statusCode`` says why it ended without a decision: null while it is
    pending and once approved or rejected, ``PLAN_APPROVAL_TIMEOUT`` once expired, and
    ``TURN_INTERRUPTED`` once a recovery interrupted it (R4.4). A legacy approval migrated
    from a v8 pending row (no turn) may carry either null or ``TURN_INTERRUPTED``."""
    for record in approvals:
        status, code = record.get("status"), record.get("statusCode")
        if status not in _STATUS_CODES or code == _STATUS_CODES[status]:
            continue
        if status == "interrupted" and record.get("turnId") is None and code is None:
            continue
        return [
            Problem(
                f"approval {record.get('approvalId')} is reported {status} with statusCode "
                f"{code!r}",
                "statusCode is null for a pending, approved or rejected approval, "
                "PLAN_APPROVAL_TIMEOUT for an expired one and TURN_INTERRUPTED for one "
                "the start-up recovery interrupted",
                DECISION_REQUIREMENT,
            )
        ]
    return []


def _artifact_problems(approvals: list[dict[str, Any]]) -> list[Problem]:
    """An approval a Plan turn submitted (it names its turn) reports its artifact's path,
    hash and size (C1); only a legacy approval migrated from v8 has none."""
    for record in approvals:
        if record.get("turnId") is not None and not isinstance(record.get("artifact"), dict):
            return [
                Problem(
                    f"approval {record.get('approvalId')} of turn {record.get('turnId')} "
                    f"is reported with the artifact {record.get('artifact')!r}",
                    "an approval a Plan turn submitted names its artifact's path, SHA-256 "
                    "and size; only a legacy approval has no artifact",
                    ARTIFACT_REQUIREMENT,
                )
            ]
    return []


_TURN_STATES: Final = frozenset({"completed", "failed", "cancelled", "interrupted"})


def _stored_turn_problems(world: World, wire: _Wire) -> list[Problem]:
    """A turn that ended is stored as it ended (R5.1, R7.2): the ``turns`` row of every
    ``turn/ended`` the last host process sent holds that outcome. Turns an earlier process
    announced are left out: a crash may come between the announcement and the commit."""
    if not wire:
        return []
    ends = [
        message.get("params") or {}
        for _, direction, offset, message in wire
        if direction == "host-to-client"
        and message.get("method") == "turn/ended"
        and offset == wire[-1][2]
    ]
    ended = {e.get("turnId"): e.get("outcome") for e in ends if e.get("outcome") in _TURN_STATES}
    if not ended:
        return []
    try:
        rows = {row["id"]: row["state"] for row in world.storage().rows("turns")}
    except (sqlite3.Error, OSError, KeyError):
        return []  # no readable turns table: the storage checks report that
    for turn, outcome in ended.items():
        if turn in rows and rows[turn] != outcome:
            return [
                Problem(
                    f"turn {turn} ended {outcome}, but its turns row reads {rows[turn]}",
                    "a turn is stored with the outcome turn/ended announced",
                    STORED_TURN_REQUIREMENT,
                )
            ]
    return []


STRUCTURE_REQUIREMENT = "R7.5"
_STORAGE_VERSION: Final = 10


def _structure_problems(world: World) -> list[Problem]:
    """A v10 database keeps the published structure for as long as the host uses it (R7.5):
    no table, column or index of the host's own added later (a counter, a log). Databases
    that are not v10 once the scenario has run (one a host refused to open, one another
    program made) are the storage scenarios' concern."""
    storage = world.storage()
    if not storage.path.is_file():
        return []
    try:
        if storage.user_version() != _STORAGE_VERSION:
            return []
        found = differences(published_v10(), storage.shape())
    except sqlite3.Error:
        return []  # not a database SQLite reads: the storage scenarios judge that
    if not found:
        return []
    return [
        Problem(
            "once the scenario had run, the database differed from schemas/storage/v10.sql: "
            + found[0],
            "; ".join(found),
            STRUCTURE_REQUIREMENT,
        )
    ]


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _as_json(value: Any) -> str:
    """``value`` as JSON text, cut short: a string shows its quotes, so text that reads like
    an object is told apart from the object."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 200 else text[:200] + "..."


def _tool_call_problems(world: World) -> list[Problem]:
    """turn/toolCall announces a call's input as the model sent it: the object it gave, or,
    when its arguments are not JSON, their raw text (TurnToolCallParams.input)."""
    scripted = {call.call_id: call.arguments for call in world.script.calls}
    for note in world.notifications("turn/toolCall"):
        params = note.get("params", {})
        arguments = scripted.get(params.get("toolCallId"))
        if arguments is None:
            continue
        if isinstance(arguments, str):
            if not arguments.strip():
                continue  # empty arguments may be read as {} (P27)
            try:
                json.loads(arguments, parse_constant=_no_constants)
                continue  # JSON text: how a host reads odd numbers is not judged here
            except ValueError:
                expected: Any = arguments
        else:
            expected = arguments
        if params.get("input") != expected:
            return [
                Problem(
                    f"turn/toolCall announced the {params.get('tool')} call's input as "
                    f"{_as_json(params.get('input'))}; the model sent {_as_json(expected)}",
                    "the input is announced as the model sent it: parsed when it is JSON, "
                    "otherwise as its raw text",
                    TOOL_INPUT_REQUIREMENT,
                )
            ]
    return []


def checked(world: World) -> tuple[list[Problem], HarnessError | None]:
    """:func:`problems`, never raising. A database the checks cannot read (none at
    ``DIR/host.db``, or not one SQLite opens) is the host's fault (R7.4); any other
    failure of a check is the harness's own, returned to be reported for this scenario
    alone, so that one host's leftovers never stop the run."""
    try:
        return problems(world), None
    except HarnessError as exc:
        return [], exc
    except (AssertionError, sqlite3.Error) as exc:
        found = Problem(
            "the host's database could not be read once the scenario had run",
            f"{type(exc).__name__}: {exc}",
            "R7.4",
        )
        return [found], None
    except Exception as exc:
        return [], HarnessError(f"a whole-scenario check failed: {type(exc).__name__}: {exc}")


def problems(world: World) -> list[Problem]:
    """Every whole-scenario rule the host broke."""
    found: list[Problem] = []
    host_violations = [v for v in world.violations() if v.direction == "host-to-client"]
    if host_violations:
        first = host_violations[0]
        found.append(
            Problem(
                f"{len(host_violations)} message(s) from the host broke the protocol v9 "
                f"contract; the first, {first.method or 'a message'} at {first.pointer or '/'}: "
                + first.reason[:200],
                "\n".join(v.describe() for v in host_violations),
                SCHEMA_REQUIREMENT,
            )
        )
    echoed = [line.text for line, _ in world.transcript() if line.direction == "host-to-client"]
    leaked = [text for text in echoed if DUMMY_API_KEY in text]
    if leaked:
        found.append(
            Problem(
                "the host sent the provider API key in a protocol message",
                leaked[0][:500],
                KEY_REQUIREMENT,
            )
        )
    unexpected = world.provider.unexpected_requests()
    if unexpected:
        malformed = [r for r in unexpected if r.malformed]
        kind = "malformed" if malformed else "unscripted"
        lines = [
            (
                f"malformed request to {r.path} ({r.problem}): "
                if r.malformed
                else f"unscripted request to {r.path}: "
            )
            + r.raw_body[:300].decode("utf-8", "replace")
            for r in unexpected
        ]
        found.append(
            Problem(
                f"the host sent the model provider {len(unexpected)} {kind} request(s) "
                "the scenario did not expect",
                "\n".join(lines),
                "",
            )
        )
    if world.disagreements:
        found.append(
            Problem(
                "two reports of one record disagreed: " + world.disagreements[0],
                "\n".join(world.disagreements),
                VIEWS_REQUIREMENT,
            )
        )
    notes = world.notifications()
    found.extend(_command_problems(notes))
    found.extend(_turn_owner_problems(notes, world.boundary.turn_owner))
    found.extend(_running_turn_problems(notes))
    found.extend(_completed_error_problems(notes))
    wire = _wire(world)
    found.extend(_configure_order_problems(wire))
    found.extend(_decision_order_problems(wire))
    found.extend(_execution_turn_problems(notes))
    found.extend(_cancel_answer_problems(wire, notes))
    found.extend(_approval_order_problems(wire))
    approvals = _reported_approvals(wire)
    found.extend(_status_code_problems(approvals))
    found.extend(_artifact_problems(approvals))
    found.extend(_stored_turn_problems(world, wire))
    found.extend(_clock_problems(wire))
    found.extend(_tool_call_order_problems(notes))
    found.extend(_tool_call_problems(world))
    found.extend(_structure_problems(world))
    stored = _files_with_key(world.data_dir)
    if stored:
        found.append(
            Problem(
                "the host stored the provider API key in its data directory",
                f"found in {', '.join(stored)}",
                KEY_REQUIREMENT,
            )
        )
    return found
