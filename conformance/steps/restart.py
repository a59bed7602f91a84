"""Steps about host restarts: interruption without replay, and one host per data dir (§4).

A restart is staged by stopping the host (cleanly, or with SIGKILL for a crash) and
starting a new process on the same data dir. What the host showed and stored before the
restart is kept, so that the checks can compare: unfinished work must come back
interrupted, finished work exactly as it was, and nothing may run again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pytest_bdd import given, parsers, then, when

from conformance.blame import blame, verifies
from conformance.capabilities import require_fault_point
from conformance.client import HostClient, HostStoppedError
from conformance.drivers import ReportsExit
from conformance.explore.model import APPROVAL_TTL_MS
from conformance.messages import message_text
from conformance.mock_provider import (
    ScriptedToolCall,
    StallReply,
    TextReply,
    ToolCallsReply,
)
from conformance.steps.approval import approve, plan_awaiting
from conformance.steps.model import default_markdown, script_calls, script_plan, tool_call
from conformance.steps.plan import snapshot
from conformance.steps.requests import granted, mock_provider, plain
from conformance.steps.sessions import MODES, read_session, session_id, transcript_entries
from conformance.steps.shell import wait_command_line
from conformance.storage_contract import changed_values
from conformance.world import SecondHost, World, need

INTERRUPTED_CODE = "TURN_INTERRUPTED"
LOG_COMMAND = "echo once >> log.txt; echo started; sleep 1000"


# -- helpers other lifecycle steps share ------------------------------------------------------


def prompt_and_wait(world: World, text: str, alias: str = "main") -> dict[str, Any]:
    """Prompt a session and wait for its turn to end; the model's replies must already be
    scripted (nothing answers a request the scenario did not expect)."""
    world.cursors.turn = world.mark()
    world.cursors.provider_turn = len(world.provider.requests())
    turn_id = granted(world.rpc.prompt, session_id(world, alias), text).turnId
    ended = world.wait_for("turn/ended", lambda p: p["turnId"] == turn_id, since=world.cursors.turn)
    world.last_turn_end = ended
    return ended


def approvals_of(world: World, alias: str = "main") -> list[dict[str, Any]]:
    """The approvals of a session, as the host lists them now (as the JSON it sent)."""
    return [plain(a) for a in granted(world.rpc.list_approvals, session_id(world, alias)).approvals]


def newest_approval(world: World, alias: str = "main") -> dict[str, Any]:
    """The last approval ``approval/list`` gives for a session, which must have one."""
    made = approvals_of(world, alias)
    assert made, "the host lists no approval for the session: its Plan turn submitted none"
    return made[-1]


def stored_approval(world: World, approval_id: str) -> dict[str, Any]:
    """The plan_approvals row of an approval (it must exist)."""
    rows = world.storage().rows("plan_approvals", "id = ?", (approval_id,))
    assert len(rows) == 1, f"plan_approvals holds {len(rows)} rows with id {approval_id}"
    return rows[0]


def _execution_turn_ended(world: World) -> dict[str, Any]:
    started = world.wait_for(
        "turn/started", lambda p: p["kind"] == "execution", since=world.cursors.approve
    )
    return world.wait_for(
        "turn/ended", lambda p: p["turnId"] == started["turnId"], since=world.cursors.approve
    )


# -- arranging unfinished work --------------------------------------------------------------


@given(
    parsers.parse(
        "the user approved the plan with permission mode {mode}, and its execution is still queued"
    )
)
def approved_still_queued(world: World, mode: str) -> None:
    require_fault_point(world, "holdExecution")
    granted(world.rpc.arm_fault, "holdExecution")
    result = approve(world, mode).require_result()
    state = result["approval"]["executionState"]
    assert state == "queued", f"the approved execution is {state}, not waiting in the queue"


@given("the model will take its time to answer during the execution")
def execution_stalls(world: World) -> None:
    world.provider.enqueue(StallReply())


@given("the model will begin its answer during the execution and then take its time")
def execution_begins_then_stalls(world: World) -> None:
    world.provider.enqueue(StallReply(prefix="Working on step one"))


@given("the model will switch to planning during the execution and then take its time")
def execution_plans_then_stalls(world: World) -> None:
    world.provider.enqueue(ToolCallsReply((ScriptedToolCall("EnterPlanMode", {}),)), StallReply())


@given("the execution, now planning, is waiting for the model")
def execution_planning_waits(world: World) -> None:
    # Its second request (after EnterPlanMode's result) reaching the provider is the settle
    # point: the session has been switched to Plan by then.
    world.provider.wait_for_requests(world.cursors.provider_approve + 2, world.timeout)


@given("the execution is waiting for the model")
def execution_waiting(world: World) -> None:
    # The request reaching the provider is the settle point: streaming or not, the
    # execution turn is then running and waiting for its answer.
    world.provider.wait_for_requests(world.cursors.provider_approve + 1, world.timeout)


@given("the model will run a command during the execution that appends to a log and keeps running")
def execution_runs_command(world: World) -> None:
    world.provider.enqueue(ToolCallsReply((ScriptedToolCall("Bash", {"command": LOG_COMMAND}),)))


@given(
    parsers.parse(
        'the model will read "{path}" and, in the same message, run a command during the '
        "execution that appends to a log and keeps running"
    )
)
def execution_reads_and_runs_command(world: World, path: str) -> None:
    calls = (
        ScriptedToolCall("Read", {"path": path}),
        ScriptedToolCall("Bash", {"command": LOG_COMMAND}),
    )
    world.provider.enqueue(ToolCallsReply(calls))


@given("the command has written to the log")
def command_wrote(world: World) -> None:
    since = world.cursors.approve
    command_id = world.wait_for("command/started", since=since)["commandId"]
    wait_command_line(world, command_id, "started", since)


@given("the model is in the middle of a Plan turn")
def plan_turn_in_progress(world: World) -> None:
    world.provider.enqueue(StallReply(prefix="Let me think"))
    before = len(world.provider.requests())
    world.cursors.turn = world.mark()
    world.active_turn = granted(world.rpc.prompt, session_id(world), "Plan.").turnId
    world.provider.wait_for_requests(before + 1, world.timeout)


@given(parsers.parse('the user\'s prompt "{text}" was accepted while the model takes its time'))
def prompt_accepted(world: World, text: str) -> None:
    # No wait for the model's request: the stop may come before the host asks the model.
    world.provider.enqueue(StallReply(prefix="Let me look"))
    world.cursors.turn = world.mark()
    world.active_turn = granted(world.rpc.prompt, session_id(world), text).turnId


# -- arranging finished work ----------------------------------------------------------------


@given(parsers.parse('a plan titled "{title}" that was {outcome}'))
def finished_plan(world: World, title: str, outcome: str) -> None:
    if outcome == "approved and carried out":
        plan_awaiting(world, title)
        world.provider.enqueue(TextReply("The plan is carried out."))
        approve(world, "auto").require_result()
        ended = _execution_turn_ended(world)
        assert ended["outcome"] == "completed", f"the execution turn ended {ended}"
    elif outcome == "rejected":
        plan_awaiting(world, title)
        approval = need(world.plan.approval, "pending approval")
        granted(world.rpc.reject, session_id(world), approval["approvalId"])
    elif outcome == "left to expire":
        plan_awaiting(world, title)
        mark = world.mark()
        granted(world.rpc.clock_advance, 31 * 60_000)
        world.wait_for("approval/updated", lambda p: p["approval"]["status"] == "expired", mark)
    elif outcome == "interrupted by an earlier restart":
        plan_awaiting(world, title)
        world.restart()
    else:
        raise AssertionError(f"no finished plan is arranged as {outcome!r}")
    world.provider.set_fallback(None)


@given(
    parsers.parse('a plan titled "{title}" is awaiting approval and the model will carry it out')
)
def plan_to_carry_out(world: World, title: str) -> None:
    plan_awaiting(world, title)
    world.provider.set_fallback(None)  # only the one scripted answer
    world.provider.enqueue(TextReply("The plan is carried out."))


@given("another session has a plan awaiting approval")
def other_session_pending(world: World) -> None:
    other = world.workspace.parent / "other-project"
    other.mkdir(exist_ok=True)
    _other_pending_in(world, str(other.resolve()))


@given("another session of the same project has a plan awaiting approval")
def same_project_session_pending(world: World) -> None:
    _other_pending_in(world, str(read_session(world)["workspaceRoot"]))


def _other_pending_in(world: World, root: str) -> None:
    """A Plan session ``other`` for ``root`` whose plan awaits approval."""
    created = granted(world.rpc.create_session, root, mode="plan", provider=mock_provider(world))
    world.sessions["other"] = plain(created.session)
    script_plan(world, "Other work", default_markdown("Other work"))
    ended = prompt_and_wait(world, "Plan the other work.", "other")
    assert ended["outcome"] == "completed", f"the other session's Plan turn ended {ended}"
    listed = approvals_of(world, "other")
    assert listed and listed[-1]["status"] == "pending", listed


@then("the other session's plan still awaits approval")
@verifies("R5.9")
def other_still_pending(world: World) -> None:
    listed = approvals_of(world, "other")
    assert listed and listed[-1]["status"] == "pending", (
        f"the other session's plan no longer waits: {listed[-1] if listed else 'not listed'}"
    )


# -- the restart ----------------------------------------------------------------------------


def _capture_before(world: World) -> None:
    seen = world.restart_seen
    seen.approvals_before = {alias: approvals_of(world, alias) for alias in world.sessions}
    seen.stored_before = {
        table: {r["id"]: tuple(r.items()) for r in world.storage().rows(table)}
        for table in ("plan_approvals", "turns")
    }
    seen.workspace_before = snapshot(world.workspace)


@when(parsers.re(r"the host (?P<how>restarts|crashes and starts again)"))
def host_stops(world: World, how: str) -> None:
    crash = {"restarts": False, "crashes and starts again": True}[how]
    _capture_before(world)
    world.provider.set_fallback(None)  # a request after the restart must be one scripted
    world.cursors.provider_restart = len(world.provider.requests())
    world.cursors.restart = world.mark()
    world.restart(crash=crash)
    # Recovery comes before the first answer, and initialize was that answer: what storage
    # holds now, before any other request, must already be the recovered state.
    world.restart_seen.stored_at_first_answer = {
        table: world.storage().rows(table) for table in ("plan_approvals", "turns")
    }
    world.restart_seen.approvals_after = {
        alias: approvals_of(world, alias) for alias in world.sessions
    }
    world.restart_seen.approvals = world.restart_seen.approvals_after.get("main", [])
    world.restart_seen.session = read_session(world) if "main" in world.sessions else None


@given("the host restarted")
def host_restarted(world: World) -> None:
    world.restart()


@given("the host restarted while the question was open")
@given("the host restarted while the command ran")
def restarted_while_asking(world: World) -> None:
    world.restart()
    # The interrupted turn's remaining answers are never asked for.
    world.provider.discard_script()


@given(parsers.parse("the user switched the session to {mode} mode"))
def switched_mode(world: World, mode: str) -> None:
    session = granted(world.rpc.configure_session, session_id(world), mode=MODES[mode]).session
    assert session.mode == MODES[mode], f"the session is in {session.mode} after the switch"


@when("the host crashes and starts again while the command it ran lives on")
def crash_leaving_command(world: World) -> None:
    world.provider.set_fallback(None)
    world.restart_seen.commands_before = world.storage().values().get("command_audit", {})
    world.stop_host(crash=True, leave_commands=True)
    world.provider.release_stalls()
    world.start_host()
    try:
        world.handshake = world.rpc.initialize()
    except HostStoppedError:
        world.restart_seen.refused = [m for m in world.rpc.received if isinstance(m, dict)]
    finally:
        world.end_leftovers()


@then("the restarted host serves the data directory")
@verifies("P17")
def restarted_host_serves(world: World) -> None:
    refused = world.restart_seen.refused
    assert refused is None, (
        f"the restarted host did not serve; it wrote {refused}: a crashed host's lock must "
        "not survive it, also while a command the crashed host started still runs"
    )
    assert read_session(world)["sessionId"] == session_id(world)


@then("the record of the command the crash cut short is as it was")
@verifies("R4.10")
def crashed_command_record_kept(world: World) -> None:
    before = world.restart_seen.commands_before
    assert before is not None, "command_audit was not read before the crash"
    after = world.storage().values().get("command_audit", {})
    changes = changed_values({"command_audit": before}, {"command_audit": after})
    assert not changes, (
        "the restart changed the record of a command the crash cut short; the startup "
        "recovery changes approvals, executions and turns only: " + "; ".join(changes[:10])
    )


def _stored_at_first_answer(world: World, approval_id: str) -> dict[str, Any]:
    """The approval's row as storage held it when the restarted host first answered."""
    rows: list[dict[str, Any]] = world.restart_seen.stored_at_first_answer["plan_approvals"]
    found = [r for r in rows if r["id"] == approval_id]
    assert found, f"storage held no row for {approval_id} when the host first answered"
    return found[0]


def _latest_after_restart(world: World) -> dict[str, Any]:
    approvals = world.restart_seen.approvals
    assert approvals, "after the restart the host lists no approval for the session"
    # oldest first, but approvals created at one host-clock instant may come in any order
    known = world.plan.approval
    if known is not None:
        for approval in approvals:
            if approval["approvalId"] == known["approvalId"]:
                return approval
    return approvals[-1]


# -- checks: unfinished work is interrupted -------------------------------------------------


@given("the host clock was set back an hour")
def clock_set_back(world: World) -> None:
    now = granted(world.rpc.clock_get).now
    granted(world.rpc.clock_set, now - 3_600_000)


@given("the host clock was moved two hours ahead")
def clock_moved_ahead(world: World) -> None:
    granted(world.rpc.clock_advance, 2 * 3_600_000)


@then("the restarted host's clock reads the present")
@verifies("P32")
def restarted_clock_present(world: World) -> None:
    now = granted(world.rpc.clock_get).now
    wall = time.time_ns() // 1_000_000
    # the host started during this scenario: a minute covers any start-up, far from 2 h
    assert abs(now - wall) < 60_000, (
        f"the restarted host's clock reads {now}, {(now - wall) / 60_000:+.1f} minutes from "
        "the system time: it must start at the system time of its own start"
    )


@then("the restarted host's clock is past the plan's deadline")
@verifies("P32")
def restarted_clock_past_deadline(world: World) -> None:
    # The restarted host's clock starts at the system time (P32), half an hour or more after
    # the deadline of a plan submitted an hour before it.
    approval = _latest_after_restart(world)
    now = granted(world.rpc.clock_get).now
    assert now >= approval["expiresAt"], (
        f"the restarted host's clock reads {now}, before the plan's deadline "
        f"{approval['expiresAt']}: under --conformance the clock must start at the system time"
    )


@then("the first answer after the restart shows the approval interrupted")
@verifies("R4.10")
def first_answer_interrupted(world: World) -> None:
    approval = _latest_after_restart(world)
    stored = _stored_at_first_answer(world, approval["approvalId"])
    why = (
        "still showed the approval pending: recovery did not run before the first answer"
        if stored["status"] == "pending"
        else f"showed the approval {stored['status']}: recovery marks a pending approval "
        "interrupted, whatever its deadline"
    )
    assert stored["status"] == "interrupted", (
        f"when the restarted host answered its first request, storage {why}"
    )
    assert approval["status"] == "interrupted", f"the host lists the approval {approval['status']}"


@then("the interruption is recorded with TURN_INTERRUPTED")
@verifies("R4.10")
def interruption_code(world: World) -> None:
    approval = _latest_after_restart(world)
    assert approval["statusCode"] == INTERRUPTED_CODE, (
        f"the interrupted approval has statusCode {approval['statusCode']}"
    )
    stored = stored_approval(world, approval["approvalId"])
    assert stored["status_code"] == INTERRUPTED_CODE, f"stored status_code {stored['status_code']}"
    assert stored["execution_id"] is None and stored["permission_mode"] is None, stored


@then("the interrupted plan still reads the deadline it was given")
@verifies("R3.10")
def deadline_kept_by_recovery(world: World) -> None:
    approval = _latest_after_restart(world)
    stored = stored_approval(world, approval["approvalId"])
    deadlines = {
        "createdAt + 30 min": approval["createdAt"] + APPROVAL_TTL_MS,
        "approval/list": approval["expiresAt"],
        "approval/get": granted(
            world.rpc.get_approval, session_id(world), approval["approvalId"]
        ).approval.expiresAt,
        "plan_approvals": stored["expires_at"],
    }
    assert len(set(deadlines.values())) == 1, (
        f"after the restart the interrupted plan's deadline reads {deadlines}: recovery "
        "changes its status, never its deadline"
    )


@then("the approval is still interrupted with TURN_INTERRUPTED")
@verifies("R4.12")
def still_interrupted(world: World) -> None:
    approval_id = need(world.plan.approval, "approval")["approvalId"]
    now = granted(world.rpc.get_approval, session_id(world), approval_id).approval
    assert (now.status, now.statusCode) == ("interrupted", INTERRUPTED_CODE), (
        f"the interrupted approval now reads {now.status} with {now.statusCode}: its deadline "
        "timer outlived the restart that interrupted it"
    )
    stored = stored_approval(world, approval_id)
    assert (stored["status"], stored["status_code"]) == ("interrupted", INTERRUPTED_CODE), stored


@then("the interrupted approval can be neither approved nor rejected")
@verifies("R4.12")
def cannot_decide(world: World) -> None:
    approval = _latest_after_restart(world)
    mark = world.mark()
    session, approval_id = session_id(world), approval["approvalId"]
    decisions: tuple[tuple[str, Callable[[], BaseModel]], ...] = (
        ("approval/approve", lambda: world.rpc.approve(session, approval_id, "auto")),
        ("approval/reject", lambda: world.rpc.reject(session, approval_id)),
    )
    for method, decide in decisions:
        error = world.attempt_typed(decide).require_error()
        assert error.canonical == "APPROVAL_NOT_PENDING", (
            f"{method} of the interrupted approval got {error.canonical}"
        )
    now = granted(world.rpc.get_approval, session, approval_id).approval
    assert now.status == "interrupted" and now.executionId is None, now
    stored = stored_approval(world, approval["approvalId"])
    assert stored["status"] == "interrupted" and stored["execution_id"] is None, stored
    assert not world.notifications("execution/updated", mark), "an execution was started"


@then("the first answer after the restart shows the execution interrupted")
@verifies("R4.10", "C8")
def first_answer_execution(world: World) -> None:
    approval = _latest_after_restart(world)
    stored = _stored_at_first_answer(world, approval["approvalId"])
    assert stored["execution_state"] == "interrupted", (
        f"when the restarted host answered its first request, storage showed the execution "
        f"{stored['execution_state']}, not interrupted: recovery marks the execution the stop "
        "cut short interrupted before the first answer"
    )
    assert approval["executionState"] == "interrupted", (
        f"the host lists the execution {approval['executionState']}"
    )
    before = {a["approvalId"]: a for a in world.restart_seen.approvals_before.get("main", [])}
    earlier = before.get(approval["approvalId"])
    assert earlier is not None, "the approval was not listed before the restart"
    kept = {k: v for k, v in approval.items() if k != "executionState"}
    assert kept == {k: v for k, v in earlier.items() if k != "executionState"}, (
        f"recovery changed more than the execution state: before {earlier}, after {approval}"
    )
    row = stored_approval(world, approval["approvalId"])
    assert row["status"] == "approved" and row["execution_state"] == "interrupted", row


@then("every turn of the previous process is recorded as ended")
@verifies("R4.11")
def no_active_turns(world: World) -> None:
    stored = world.restart_seen.stored_at_first_answer["turns"]
    left = [t for t in stored if t["state"] == "active"]
    assert not left, f"turns were still active when the restarted host first answered: {left}"
    active = world.storage().rows("turns", "state = 'active'")
    assert not active, f"turns still active after the restart: {active}"
    interrupted = world.storage().rows("turns", "state = 'interrupted'")
    assert interrupted, "no turn was recorded as interrupted"


@then("the session is idle after the restart")
@verifies("R4.10", "R4.11", "R4.13", "R4.14")
def idle_after_restart(world: World) -> None:
    session = need(world.restart_seen.session, "session read after the restart")
    busy = {k: session[k] for k in ("activeTurnId", "pendingApprovalId", "activeExecutionId")}
    assert not any(busy.values()), f"the restarted host shows the session busy: {busy}"


@then(parsers.parse("the session stayed in {mode} mode"))
@verifies("R4.13", "R4.14")
def stayed_in_mode(world: World, mode: str) -> None:
    expected = {"Agent": "agent", "Plan": "plan"}[mode]
    session = need(world.restart_seen.session, "session read after the restart")
    assert session["mode"] == expected, f"after the restart the session is in {session['mode']}"
    row = world.storage().rows("sessions", "id = ?", (session_id(world),))[0]
    assert row["mode"] == expected, f"storage shows the session in {row['mode']}"


@then(parsers.parse("the session stayed in Agent mode with permission mode {permission}"))
@verifies("R4.14")
def stayed_in_agent(world: World, permission: str) -> None:
    stayed_in_mode(world, "Agent")
    session = need(world.restart_seen.session, "session read after the restart")
    assert session["permissionMode"] == permission, (
        f"after the restart the permission mode is {session['permissionMode']}"
    )


@then("the user can start a new turn in Agent mode")
@verifies("R4.14")
def new_agent_turn(world: World) -> None:
    world.provider.enqueue(TextReply("Back to work."))
    mark = world.mark()
    ended = prompt_and_wait(world, "Continue, please.")
    assert ended["outcome"] == "completed", f"the new turn ended {ended}"
    started = world.notifications("turn/started", mark)
    assert started and started[0]["params"]["mode"] == "agent", started
    assert read_session(world)["mode"] == "agent", "the session was put back into Plan"


@then("the user can ask for a new plan")
@verifies("R4.13")
def new_plan_turn(world: World) -> None:
    script_plan(world, "Second attempt", default_markdown("Second attempt"))
    ended = prompt_and_wait(world, "Plan it again, please.")
    assert ended["outcome"] == "completed", f"the new Plan turn ended {ended}"
    listed = approvals_of(world)
    assert listed and listed[-1]["status"] == "pending", f"no new plan is pending: {listed}"
    assert listed[-1]["title"] == "Second attempt", listed[-1]


# -- checks: nothing is replayed --------------------------------------------------------------


@then("nothing from before the restart is replayed")
@verifies("R4.12")
def nothing_replayed(world: World) -> None:
    # The settle point: a new prompt, scripted with exactly one answer, runs to its end.
    # Whatever the restarted host started on its own before that shows up by then.
    world.provider.enqueue(TextReply("Fresh answer."))
    marker = "A fresh request after the restart."
    ended = prompt_and_wait(world, marker)
    assert ended["outcome"] == "completed", f"the new turn ended {ended}"
    since = world.cursors.restart
    kinds = [n["params"]["kind"] for n in world.notifications("turn/started", since)]
    assert kinds == ["prompt"], f"the restarted host started turns {kinds}, not just the new one"
    commands = world.notifications("command/started", since)
    assert not commands, f"the restarted host ran commands: {commands}"
    # Announcing what the recovery did (an execution now interrupted) is the host's choice.
    executions = [
        n
        for n in world.notifications("execution/updated", since)
        if n["params"]["executionState"] != "interrupted"
    ]
    assert not executions, f"the restarted host set executions going: {executions}"
    after = world.provider.requests()[world.cursors.provider_restart :]
    assert len(after) == 1, (
        f"after the restart the model received {len(after)} requests for one new prompt"
    )
    users = [message_text(m) for m in after[0].messages if m.get("role") == "user"]
    assert users and users[-1] == marker, f"the request was not the new one: {users[-1:]}"


@then(parsers.parse('the session\'s conversation still holds the prompt "{text}"'))
@verifies("R1.3")
def prompt_kept(world: World, text: str) -> None:
    entries = transcript_entries(world, session_id(world))
    told = [message_text(e.content) for e in entries]
    assert any(text in said for said in told), (
        f"the host's transcript lost the accepted prompt {text!r}: {entries}"
    )
    rows = world.storage().rows("transcript", "session_id = ?", (session_id(world),))
    assert any(text in str(row["content"]) for row in rows), (
        f"the stored transcript lost the accepted prompt {text!r}"
    )


@then("the project's log holds the one line the command wrote")
@verifies("C3")
def log_once(world: World) -> None:
    log = world.workspace / "log.txt"
    assert log.is_file(), "the project has no log.txt: the command did not run in the project"
    lines = log.read_text(encoding="utf-8").splitlines()
    assert lines == ["once"], f"log.txt holds {lines}: the command ran again"
    now = snapshot(world.workspace)
    before = world.restart_seen.workspace_before
    changed = sorted(k for k in set(now) | set(before) if now.get(k) != before.get(k))
    assert not changed, f"the project changed after the restart: {changed}"


# -- checks: finished work stays as it was --------------------------------------------------


@then("the plan is exactly as it was before the restart")
@verifies("R4.10")
def finished_unchanged(world: World) -> None:
    before = world.restart_seen.approvals_before.get("main", [])
    assert before, "no approval was listed before the restart"
    earlier = before[-1]
    after = {a["approvalId"]: a for a in world.restart_seen.approvals_after.get("main", [])}
    now = after.get(earlier["approvalId"])
    assert now == earlier, f"recovery changed a finished plan: before {earlier}, after {now}"
    stored_before = world.restart_seen.stored_before["plan_approvals"][earlier["approvalId"]]
    stored_now = tuple(stored_approval(world, earlier["approvalId"]).items())
    changed = [
        f"{name}: {was!r} -> {dict(stored_now).get(name)!r}"
        for name, was in stored_before
        if dict(stored_now).get(name) != was
    ]
    assert not changed, f"recovery changed the stored record of a finished plan: {changed}"


@given(parsers.parse('the user had the model read "{path}" in a new turn'))
def read_in_new_turn(world: World, path: str) -> None:
    script_calls(world, tool_call(world, "Read", {"path": path}))
    ended = prompt_and_wait(world, f"Read {path} again, please.")
    assert ended["outcome"] == "completed", f"the reading turn ended {ended}"


@then("the session's earlier turn is stored as it ended")
@verifies("R4.11")
def earlier_turn_kept(world: World) -> None:
    turn_id = need(world.boundary.earlier_turn, "earlier turn")
    before = dict(world.restart_seen.stored_before["turns"][turn_id])
    rows = world.storage().rows("turns", "id = ?", (turn_id,))
    assert len(rows) == 1, f"turns holds {len(rows)} rows with id {turn_id}"
    changed = {k: (was, rows[0].get(k)) for k, was in before.items() if rows[0].get(k) != was}
    assert not changed, (
        f"the restart's recovery changed the session's earlier turn, which had ended "
        f"(before, after): {changed}; recovery interrupts only what was under way"
    )


@then("the other session's plan is interrupted")
@verifies("R4.10")
def other_interrupted(world: World) -> None:
    listed = world.restart_seen.approvals_after.get("other", [])
    assert listed, "after the restart the host lists no approval for the other session"
    approval = listed[-1]
    assert approval["status"] == "interrupted", (
        f"the other session's pending plan is {approval['status']} after the restart: "
        "recovery interrupts every pending approval, in every session"
    )
    assert approval["statusCode"] == INTERRUPTED_CODE, approval
    stored = _stored_at_first_answer(world, approval["approvalId"])
    assert stored["status"] == "interrupted", (
        f"when the restarted host first answered, storage showed the other session's pending "
        f"plan {stored['status']}: recovery interrupts every pending approval, in every session"
    )


@then("the pending plans of both sessions are interrupted")
@verifies("R4.10")
def both_interrupted(world: World) -> None:
    for alias, which in (("main", "the first session"), ("other", "the other session")):
        listed = world.restart_seen.approvals_after.get(alias, [])
        assert listed, f"after the restart the host lists no approval for {which}"
        approval = listed[-1]
        stored = _stored_at_first_answer(world, approval["approvalId"])
        found = (approval["status"], approval["statusCode"])
        kept = (stored["status"], stored["status_code"])
        interrupted = ("interrupted", INTERRUPTED_CODE)
        assert found == interrupted and kept == interrupted, (
            f"after the restart the pending plan of {which} reads {found}, and storage held "
            f"{kept} when the restarted host first answered: recovery interrupts every "
            "pending approval, in every session, not only one"
        )


# -- one host per data dir (P17) --------------------------------------------------------------


def _data_dir_files(data_dir: Path) -> dict[str, str]:
    # The shared-memory index changes whenever anyone reads; it holds no data of its own.
    files = snapshot(data_dir)
    return {name: digest for name, digest in files.items() if not name.endswith("-shm")}


@when("a second host starts on the same data directory")
def second_host(world: World) -> None:
    world.provider.set_fallback(None)  # a request from either host must be one scripted
    second = SecondHost(files_before=_data_dir_files(world.data_dir))
    host = world.driver.start(world.data_dir)
    client = HostClient(host, world.timeout)
    try:
        client.initialize()
        second.served = True
    except HostStoppedError:
        second.served = False
    finally:
        status = host.stop(timeout=world.timeout)
        client.close()
    second.lines = list(client.received)
    second.exit_status = status
    if isinstance(host, ReportsExit) and status is None:
        second.exit_status = host.exit_status(0.0)
    second.stderr = host.stderr_text()
    world.second_host = second


@then(parsers.parse("the second host refuses to start with {code}"))
@verifies("P17")
def second_refused(world: World, code: str) -> None:
    second = need(world.second_host, "second host")
    assert not second.served, "the second host served requests on a data directory in use"
    errors = [m for m in second.lines if isinstance(m, dict) and "error" in m]
    codes = [(m["error"].get("data") or {}).get("code") for m in errors]
    assert codes == [code], f"the second host reported {codes or 'nothing'} on stdout"
    assert errors[0].get("id", "absent") is None, f"the refusal carries id {errors[0].get('id')}"
    assert second.exit_status not in (0, None), f"the second host exited {second.exit_status}"


@then("the second host changed nothing in the data directory")
@verifies("P17")
def second_changed_nothing(world: World) -> None:
    second = need(world.second_host, "second host")
    now = _data_dir_files(world.data_dir)
    before = second.files_before
    changed = sorted(k for k in set(now) | set(before) if now.get(k) != before.get(k))
    assert not changed, f"the refused host changed the data directory: {changed}"


@then("the first host still serves, with the plan still awaiting approval")
@verifies("P17")
def first_undisturbed(world: World) -> None:
    listed = approvals_of(world)
    assert listed and listed[-1]["status"] == "pending", (
        f"the first host's plan is {listed[-1]['status'] if listed else 'gone'}: "
        "the second host interrupted it"
    )
    with blame("P17"):
        assert stored_approval(world, listed[-1]["approvalId"])["status"] == "pending"
    created = granted(world.rpc.create_session, str(world.workspace), provider=mock_provider(world))
    stored = world.storage().rows("sessions", "id = ?", (created.session.sessionId,))
    assert stored, "the first host could no longer write its database"
