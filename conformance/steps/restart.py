"""Steps about host restarts: interruption without replay, and the boot epoch (§4)."""

from __future__ import annotations

import re
from typing import Any

from pytest_bdd import given, parsers, then, when

from conformance.capabilities import require_fault_point
from conformance.mock_provider import StallReply, TextReply
from conformance.steps.plan import run_prompt
from conformance.steps.sessions import read_session, session_id
from conformance.world import World, need

_EPOCH = re.compile(r"epoch|boot", re.IGNORECASE)


@given("the host will hold the next approved execution in the queue")
def hold_execution(world: World) -> None:
    require_fault_point(world, "holdExecution")
    world.rpc.request("conformance/fault/arm", {"fault": "holdExecution"})


@given("the model will take its time to answer during the execution")
def execution_stalls(world: World) -> None:
    world.provider.enqueue(StallReply())


@given(parsers.parse('the model will stream "{text}" and then take its time'))
def execution_streams_then_stalls(world: World, text: str) -> None:
    world.provider.enqueue(StallReply(prefix=text))


@given("the execution is waiting for the model")
@when("the execution is waiting for the model")
def execution_waiting(world: World) -> None:
    mark = world.cursors.approve
    world.wait_for("execution/updated", lambda p: p["executionState"] == "running", since=mark)
    world.provider.wait_for_requests(world.cursors.provider_approve + 1, world.timeout)


@given(parsers.parse('the execution has streamed "{text}"'))
def execution_streamed(world: World, text: str) -> None:
    world.wait_for("turn/text", lambda p: text in p["text"], since=world.cursors.approve)


@given(parsers.parse('the command has printed "{text}"'))
def command_printed(world: World, text: str) -> None:
    world.wait_for("command/output", lambda p: text in p["text"], since=world.cursors.approve)


@given("the model is in the middle of a Plan turn")
def plan_turn_in_progress(world: World) -> None:
    world.provider.enqueue(StallReply(prefix="Let me think"))
    before = len(world.provider.requests())
    world.cursors.turn = world.mark()
    turn = world.rpc.request("session/prompt", {"sessionId": session_id(world), "text": "Plan."})
    world.active_turn = turn["turnId"]
    world.provider.wait_for_requests(before + 1, world.timeout)


@when(parsers.re(r"the host (?P<how>restarts|crashes and starts again)"))
def host_stops(world: World, how: str) -> None:
    crash = {"restarts": False, "crashes and starts again": True}[how]
    world.cursors.provider_restart = len(world.provider.requests())
    world.cursors.restart = world.mark()
    world.restart(crash=crash)
    # Recovery comes before the first answer, and initialize was that answer: what storage
    # holds now, before any other request, must already be the recovered state.
    world.restart_seen.stored_at_first_answer = {
        table: world.storage().rows(table) for table in ("plan_approvals", "turns")
    }
    # The very first request after the restart must already see the recovered state.
    world.restart_seen.approvals = world.rpc.request(
        "approval/list", {"sessionId": session_id(world)}
    )["approvals"]
    world.restart_seen.session = world.rpc.request("session/get", {"sessionId": session_id(world)})[
        "session"
    ]


def _stored_at_first_answer(world: World, approval_id: str) -> dict[str, Any]:
    """The approval's row as storage held it when the restarted host first answered."""
    rows: list[dict[str, Any]] = world.restart_seen.stored_at_first_answer["plan_approvals"]
    found = [r for r in rows if r["id"] == approval_id]
    assert found, f"storage held no row for {approval_id} when the host first answered"
    return found[0]


@then(parsers.parse("the first answer after the restart shows the approval {status}"))
def first_answer_shows(world: World, status: str) -> None:
    approvals = world.restart_seen.approvals
    assert approvals, "after the restart the host lists no approval"
    stored = _stored_at_first_answer(world, approvals[-1]["approvalId"])
    assert stored["status"] == status, (
        f"when the restarted host answered its first request, storage still showed the "
        f"approval {stored['status']}: recovery did not run before the first answer"
    )
    assert approvals[-1]["status"] == status, f"the first read shows {approvals[-1]['status']}"


@then(parsers.parse("the first answer after the restart shows the execution {state}"))
def first_answer_execution(world: World, state: str) -> None:
    approvals = world.restart_seen.approvals
    assert approvals, "after the restart the host lists no approval"
    stored = _stored_at_first_answer(world, approvals[-1]["approvalId"])
    assert stored["execution_state"] == state, (
        f"when the restarted host answered its first request, storage still showed the "
        f"execution {stored['execution_state']}: recovery did not run before the first answer"
    )
    found = approvals[-1]["executionState"]
    assert found == state, f"the first read shows the execution {found}"
    rows = world.storage().rows("plan_approvals", "id = ?", (approvals[-1]["approvalId"],))
    assert rows[0]["execution_state"] == state, rows


@then("the session is idle after the restart")
def idle_after_restart(world: World) -> None:
    session = need(world.restart_seen.session, "session read after the restart")
    busy = {k: session[k] for k in ("activeTurnId", "pendingApprovalId", "activeExecutionId")}
    assert not any(busy.values()), f"the restarted host shows the session busy: {busy}"


@then("every turn of the previous process is recorded as ended")
def no_active_turns(world: World) -> None:
    stored = world.restart_seen.stored_at_first_answer["turns"]
    left = [t for t in stored if t["state"] == "active"]
    assert not left, f"turns were still active when the restarted host first answered: {left}"
    active = world.storage().rows("turns", "state = 'active'")
    assert not active, f"turns still active after the restart: {active}"
    interrupted = world.storage().rows("turns", "state = 'interrupted'")
    assert interrupted, "no turn was recorded as interrupted"


@then("nothing from before the restart is replayed")
def nothing_replayed(world: World) -> None:
    started = [n["params"] for n in world.notifications("turn/started", world.cursors.restart)]
    assert not started, f"the restarted host started turns of its own: {started}"
    before = world.cursors.provider_restart
    world.provider.set_fallback(TextReply("Fresh answer."))
    marker = "A fresh request after the restart."
    ended = run_prompt(world, marker)
    assert ended["outcome"] == "completed", ended
    after = world.provider.requests()[before:]
    assert len(after) == 1, (
        f"after the restart the model received {len(after)} requests for one new prompt"
    )
    last_user = [m for m in after[0].messages if m.get("role") == "user"][-1]
    assert last_user.get("content") == marker, f"the request was not the new one: {last_user}"
    kinds = [
        n["params"]["kind"] for n in world.notifications("turn/started", world.cursors.restart)
    ]
    assert kinds == ["prompt"], f"the restarted host started turns {kinds}"


@then(parsers.parse('the project file "{path}" has exactly {count:d} line'))
@then(parsers.parse('the project file "{path}" has exactly {count:d} lines'))
def file_lines(world: World, path: str, count: int) -> None:
    lines = (world.workspace / path).read_text(encoding="utf-8").splitlines()
    assert len(lines) == count, f"{path} has {len(lines)} lines: {lines}"


@then("the interrupted approval cannot be approved")
def cannot_approve(world: World) -> None:
    approval = world.restart_seen.approvals[-1]
    outcome = world.attempt(
        "approval/approve",
        {
            "sessionId": session_id(world),
            "approvalId": approval["approvalId"],
            "permissionMode": "auto",
        },
    )
    error = outcome.require_error()
    assert error.canonical == "APPROVAL_NOT_PENDING", error


@then("the user can start a new turn in Agent mode")
def new_agent_turn(world: World) -> None:
    world.provider.set_fallback(TextReply("Back to work."))
    mark = world.mark()
    ended = run_prompt(world, "Continue, please.")
    assert ended["outcome"] == "completed", ended
    started = world.notifications("turn/started", mark)
    assert started and started[0]["params"]["mode"] == "agent", started
    assert read_session(world)["mode"] == "agent", "the session was put back into Plan"


@then("the database schema is exactly the published v10 schema")
def published_schema(world: World) -> None:
    import sqlite3

    from pi_contract import schemas_dir

    fresh = sqlite3.connect(":memory:")
    fresh.executescript((schemas_dir() / "storage" / "v10.sql").read_text(encoding="utf-8"))
    expected = fresh.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_schema "
        "WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name"
    ).fetchall()
    found = world.storage().schema_dump()
    assert found == expected, _schema_diff(expected, found)


def _schema_diff(expected: list[Any], found: list[Any]) -> str:
    missing = [row[1] for row in expected if row not in found]
    extra = [row[1] for row in found if row not in expected]
    return (
        f"schema differs from schemas/storage/v10.sql: missing or changed {missing}, extra {extra}"
    )


@then("no stored column names a boot epoch")
def no_epoch_column(world: World) -> None:
    for kind, name, _table, _sql in world.storage().schema_dump():
        if kind == "table":
            columns = world.storage().columns(name)
            named = [c for c in columns if _EPOCH.search(c)]
            assert not named, f"table {name} has epoch columns {named}"


@then("no stored setting names a boot epoch")
def no_epoch_setting(world: World) -> None:
    keys = [row["key"] for row in world.storage().rows("settings")]
    named = [key for key in keys if _EPOCH.search(key)]
    assert not named, f"settings hold {named}"


@then("no message from the host carries a boot epoch")
def no_epoch_field(world: World) -> None:
    def keys(value: Any) -> list[str]:
        if isinstance(value, dict):
            return [*value.keys(), *(k for v in value.values() for k in keys(v))]
        if isinstance(value, list):
            return [k for v in value for k in keys(v)]
        return []

    messages = world.host_messages()
    assert messages, "the host sent nothing"
    named = sorted({k for m in messages for k in keys(m) if _EPOCH.search(k)})
    assert not named, f"host messages carry {named}"
