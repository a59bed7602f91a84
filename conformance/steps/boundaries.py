"""Steps about active turns, permission questions, cancellation and isolation (§3, §5)."""

from __future__ import annotations

from typing import Any

from pytest_bdd import given, parsers, then, when

from conformance.mock_provider import StallReply, TextReply
from conformance.steps.sessions import MODES, _create, session_id
from conformance.world import World, need


@given("the model takes its time to answer")
def model_stalls(world: World) -> None:
    world.provider.enqueue(StallReply())


@given("the user started a turn")
@when("the user starts a turn")
def start_turn(world: World) -> None:
    world.provider.set_fallback(TextReply("Done."))
    before = len(world.provider.requests())
    world.cursors.turn = world.mark()
    turn = world.rpc.request("session/prompt", {"sessionId": session_id(world), "text": "Go."})
    world.active_turn = turn["turnId"]
    world.provider.wait_for_requests(before + 1, timeout=world.timeout)


@when("the user tries to send another prompt")
def try_prompt(world: World) -> None:
    world.attempt("session/prompt", {"sessionId": session_id(world), "text": "One more thing."})


@when(parsers.parse("the user tries to switch the session to {mode} mode"))
def try_switch(world: World, mode: str) -> None:
    world.attempt("session/configure", {"sessionId": session_id(world), "mode": MODES[mode]})


@when(parsers.parse("the user tries to change the {setting}"))
def try_configure(world: World, setting: str) -> None:
    options: dict[str, dict[str, Any]] = {
        "permission mode": {"permissionMode": "auto"},
        "model": {"provider": {"baseUrl": world.provider.base_url, "model": "another-model"}},
        "provider": {"provider": {"baseUrl": "http://127.0.0.1:9/v1", "model": "mock-model"}},
        "shell": {"shellId": "sh"},
    }
    changes = options[setting]
    world.attempt("session/configure", {"sessionId": session_id(world), **changes})


@when("the user cancels the turn")
def cancel_turn(world: World) -> None:
    world.attempt("session/cancel", {"sessionId": session_id(world)})


@when("the user tries to cancel")
def try_cancel(world: World) -> None:
    world.attempt("session/cancel", {"sessionId": session_id(world)})


@then("the turn ended as cancelled")
def turn_cancelled(world: World) -> None:
    turn_id = world.active_turn
    ended = world.wait_for("turn/ended", lambda p: p["turnId"] == turn_id)
    assert ended["outcome"] == "cancelled", f"the turn ended {ended['outcome']}"
    rows = world.storage().rows("turns", "id = ?", (turn_id,))
    assert rows and rows[0]["state"] == "cancelled", f"stored turn: {rows}"


@then("the turn ends")
def turn_ends(world: World) -> None:
    turn_id = world.active_turn
    world.wait_for("turn/ended", lambda p: p["turnId"] == turn_id)


@then("the turn is still running")
def still_running(world: World) -> None:
    session = world.rpc.request("session/get", {"sessionId": session_id(world)})["session"]
    assert session["activeTurnId"] == world.active_turn, session


# -- permission questions -----------------------------------------------------------------


@given(parsers.re(r"the host asked permission before (?P<tool>\w+)"))
@then(parsers.re(r"the host asks permission before (?P<tool>\w+)"))
def asks_permission(world: World, tool: str) -> None:
    since = max(world.cursors.approve, world.cursors.turn)
    try:
        request = world.wait_for("permission/requested", lambda p: p["tool"] == tool, since=since)
    except TimeoutError:
        ran = [
            n["params"]
            for n in world.notifications("turn/toolResult", since)
            if n["params"]["tool"] == tool
        ]
        assert not ran, f"{tool} ran without asking for permission: {ran[0]}"
        raise
    world.plan.permission_request = request


@when(parsers.parse("the user {decision} it"))
def answer_permission(world: World, decision: str) -> None:
    request = need(world.plan.permission_request, "permission question")
    answer = {"allows": "allow", "denies": "deny"}[decision]
    world.rpc.request("permission/respond", {"requestId": request["requestId"], "decision": answer})


@then("the execution ends")
def execution_ends(world: World) -> None:
    since = world.cursors.approve
    world.wait_for(
        "execution/updated",
        lambda p: p["executionState"] in ("completed", "interrupted"),
        since=since,
    )


@then("no permission was given without the user")
def nothing_ran_without_permission(world: World) -> None:
    assert not (world.workspace / "notes.txt").exists(), "the Write ran without an answer"
    session = world.rpc.request("session/get", {"sessionId": session_id(world)})["session"]
    assert session["activeTurnId"] is not None, "the execution stopped waiting for the user"


@then("no permission was asked")
def no_permission(world: World) -> None:
    since = world.cursors.approve
    asked = world.notifications("permission/requested", since)
    assert not asked, f"the host asked: {[a['params']['tool'] for a in asked]}"


@then(parsers.parse('the project file "{path}" contains "{text}"'))
def file_contains(world: World, path: str, text: str) -> None:
    target = world.workspace / path
    assert target.exists(), f"{path} does not exist"
    content = target.read_text(encoding="utf-8")
    assert text in content, f"{path} holds {content!r}"


@then(parsers.parse('the project has no file "{path}"'))
def no_file(world: World, path: str) -> None:
    assert not (world.workspace / path).exists(), f"{path} exists"


# -- isolation ----------------------------------------------------------------------------


@given(parsers.parse('a second session for another project with a file "{name}"'))
def second_session(world: World, name: str) -> None:
    other = world.workspace.parent / "other-project"
    other.mkdir(exist_ok=True)
    (other / name).write_text("secret of the other project\n", encoding="utf-8")
    world.arranged.other_project = other
    _create(world, "other", workspaceRoot=str(other)).require_result()


@given(parsers.parse('the model will read "{path}" from the other project'))
def read_other(world: World, path: str) -> None:
    from conformance.mock_provider import ScriptedToolCall, ToolCallsReply

    other = need(world.arranged.other_project, "second project")
    world.provider.enqueue(ToolCallsReply((ScriptedToolCall("Read", {"path": str(other / path)}),)))


@when("the user approves the plan through the second session")
def approve_through_other(world: World) -> None:
    approval = need(world.plan.approval, "approval")
    world.attempt(
        "approval/approve",
        {
            "sessionId": session_id(world, "other"),
            "approvalId": approval["approvalId"],
            "permissionMode": "ask",
        },
    )


@then("every notification about a turn names the session that owns it")
def scoped_notifications(world: World) -> None:
    owners = {
        n["params"]["turnId"]: n["params"]["sessionId"] for n in world.notifications("turn/started")
    }
    assert owners, "no turn was started"
    for note in world.notifications():
        params = note.get("params", {})
        turn_id = params.get("turnId")
        if turn_id in owners:
            assert params.get("sessionId") == owners[turn_id], (
                f"{note['method']} for turn {turn_id} names session {params.get('sessionId')}"
            )
