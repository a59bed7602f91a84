"""Steps about creating, reading and configuring sessions."""

from __future__ import annotations

from typing import Any

from pytest_bdd import given, parsers, then, when

from conformance.world import Outcome, World

MODES = {"Agent": "agent", "Plan": "plan"}


def _create(world: World, alias: str, **params: Any) -> Outcome:
    params.setdefault("workspaceRoot", str(world.workspace))
    params.setdefault("provider", {"baseUrl": world.provider.base_url, "model": "mock-model"})
    outcome = world.attempt("session/create", params)
    if outcome.error is None:
        world.sessions[alias] = outcome.require_result()["session"]
    return outcome


def session_id(world: World, alias: str = "main") -> str:
    """The id of the session created under ``alias``."""
    assert alias in world.sessions, f"no session called {alias!r} was created"
    return str(world.sessions[alias]["sessionId"])


def read_session(world: World, alias: str = "main") -> dict[str, Any]:
    """The session as the host reports it now."""
    result = world.rpc.request("session/get", {"sessionId": session_id(world, alias)})
    session: dict[str, Any] = result["session"]
    return session


@given("a session for the project")
@when("the user creates a session for the project")
def create_session(world: World) -> None:
    _create(world, "main").require_result()


@when(parsers.parse("the user creates a session for the project in {mode} mode"))
@given(parsers.parse("a session for the project in {mode} mode"))
def create_session_in_mode(world: World, mode: str) -> None:
    _create(world, "main", mode=MODES[mode]).require_result()


@given("a session without a project in Plan mode")
def create_unbound_plan_session(world: World) -> None:
    _create(world, "main", workspaceRoot=None, mode="plan").require_result()


@given(parsers.parse("a session for the project with permission mode {permission}"))
def create_session_with_permission(world: World, permission: str) -> None:
    _create(world, "main", permissionMode=permission).require_result()


@when("the user creates a session without a project")
def create_session_without_project(world: World) -> None:
    _create(world, "main", workspaceRoot=None).require_result()


@when(parsers.parse('the user tries to create a session in a mode called "{mode}"'))
def create_session_unknown_mode(world: World, mode: str) -> None:
    message = {
        "jsonrpc": "2.0",
        "id": "unknown-mode",
        "method": "session/create",
        "params": {"workspaceRoot": str(world.workspace), "mode": mode},
    }
    world.outcome = Outcome.from_response(
        "session/create", world.rpc.call_message(message, check=False)
    )


@when("the user tries to create a session for a relative workspace path")
def create_relative(world: World) -> None:
    _create(world, "main", workspaceRoot="relative/project")


@when("the user tries to create a session for a workspace that does not exist")
def create_missing(world: World) -> None:
    _create(world, "main", workspaceRoot=str(world.workspace / "missing"))


@when("the user tries to create a session for a workspace that is a file")
def create_file_root(world: World) -> None:
    target = world.workspace / "not-a-folder.txt"
    target.write_text("plain file\n", encoding="utf-8")
    _create(world, "main", workspaceRoot=str(target))


@when(parsers.parse("the user switches the session to {mode} mode"))
def switch_mode(world: World, mode: str) -> None:
    world.attempt("session/configure", {"sessionId": session_id(world), "mode": MODES[mode]})


@when(parsers.parse("the user sets the session's permission mode to {mode}"))
def set_permission_mode(world: World, mode: str) -> None:
    world.attempt("session/configure", {"sessionId": session_id(world), "permissionMode": mode})


@when(parsers.parse('the user selects the model "{model}" for the session'))
def select_model(world: World, model: str) -> None:
    world.attempt(
        "session/configure",
        {
            "sessionId": session_id(world),
            "provider": {"baseUrl": world.provider.base_url, "model": model},
        },
    )


@when(parsers.parse('the user selects a shell called "{shell}" for the session'))
def select_shell(world: World, shell: str) -> None:
    world.attempt("session/configure", {"sessionId": session_id(world), "shellId": shell})


@when("the user asks for a session that does not exist")
def get_missing_session(world: World) -> None:
    world.attempt("session/get", {"sessionId": "no-such-session"})


@then(parsers.parse("the session is in {mode} mode"))
def session_in_mode(world: World, mode: str) -> None:
    found = read_session(world)["mode"]
    assert found == MODES[mode], f"the session is in {found} mode"


@then(parsers.parse("the session's permission mode is {mode}"))
def session_permission_mode(world: World, mode: str) -> None:
    found = read_session(world)["permissionMode"]
    assert found == mode, f"the session's permission mode is {found}"


@then(parsers.parse('the session uses the model "{model}"'))
def session_model(world: World, model: str) -> None:
    provider = read_session(world)["provider"]
    assert provider is not None and provider["model"] == model, f"provider is {provider}"


@then("the session is bound to the project")
def session_bound(world: World) -> None:
    found = read_session(world)["workspaceRoot"]
    assert found == str(world.workspace), f"workspace root is {found}"


@then("the session has no project")
def session_unbound(world: World) -> None:
    found = read_session(world)["workspaceRoot"]
    assert found is None, f"workspace root is {found}"


@then("the session is idle")
def session_idle(world: World) -> None:
    session = read_session(world)
    busy = {k: session[k] for k in ("activeTurnId", "pendingApprovalId", "activeExecutionId")}
    assert not any(busy.values()), f"the session is busy: {busy}"


@then("the session list contains the session")
def listed(world: World) -> None:
    sessions = world.rpc.request("session/list", {})["sessions"]
    assert session_id(world) in {s["sessionId"] for s in sessions}, sessions


@then("the session is stored in the database")
def stored(world: World) -> None:
    rows = world.storage().rows("sessions", "id = ?", (session_id(world),))
    assert len(rows) == 1, f"found {len(rows)} stored sessions with that id"


@then("no session was created")
def none_created(world: World) -> None:
    sessions = world.rpc.request("session/list", {})["sessions"]
    assert sessions == [], f"the host created {sessions}"
