"""Steps about creating, reading and configuring sessions, the provider key (§1, §5, P21), and
a session without a provider or with a failing one (P24, P25).

Every change is read back twice: over the protocol (``session/get``) and in storage (the
``sessions`` row), so a host that answers well but stores otherwise is caught.
"""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path
from typing import Any, Final

from pytest_bdd import given, parsers, then, when

from conformance.blame import blame, verifies
from conformance.capabilities import Unverified
from conformance.client import ABSENT, Absent, HarnessError, RpcError
from conformance.drivers import DUMMY_API_KEY
from conformance.messages import answer_to_call
from conformance.mock_provider import CutStreamReply, HttpErrorReply, RawStreamReply, TextReply
from conformance.protocol_models import Mode, PermissionMode, ProviderConfig, TranscriptEntry
from conformance.steps.common import held, unchecked
from conformance.steps.model import script_calls, tool_call
from conformance.steps.requests import (
    field_differences,
    granted,
    mock_provider,
    permission_mode,
    plain,
    read_stably,
)
from conformance.stream_framing import FRAMINGS
from conformance.world import Outcome, World, need

MODES: Final[dict[str, Mode]] = {"Agent": "agent", "Plan": "plan"}
SETTINGS: Final = ("mode", "permissionMode", "provider", "shellId")
STORED_SETTINGS: Final = ("mode", "permission_mode", "provider_base_url", "model", "shell_id")


def _create(
    world: World,
    alias: str,
    *,
    workspace_root: str | Absent | None = ABSENT,
    mode: Mode | None = None,
    permission_mode: PermissionMode | None = None,
) -> Outcome:
    """Create a session (for the project unless ``workspace_root`` is given) on the mock
    provider and keep it as ``alias``; the outcome says whether the host refused."""
    root = str(world.workspace) if isinstance(workspace_root, Absent) else workspace_root
    provider = mock_provider(world)
    outcome = world.attempt_typed(
        world.rpc.create_session,
        root,
        mode=mode,
        permission_mode=permission_mode,
        provider=provider,
    )
    if outcome.error is None:
        world.sessions[alias] = outcome.require_result()["session"]
    return outcome


def session_id(world: World, alias: str = "main") -> str:
    """The id of the session created under ``alias``."""
    assert alias in world.sessions, f"no session called {alias!r} was created"
    return str(world.sessions[alias]["sessionId"])


def read_session(world: World, alias: str = "main") -> dict[str, Any]:
    """The session as the host reports it now (as the JSON it sent), checked against its
    entry in session/list and its last announcement."""
    wanted = session_id(world, alias)
    return read_stably(
        world,
        "session",
        lambda: plain(granted(world.rpc.get_session, wanted).session),
        lambda: [plain(s) for s in granted(world.rpc.list_sessions).sessions],
    )


def stored_session(world: World, alias: str = "main") -> dict[str, Any]:
    """The session's row in storage."""
    rows = world.storage().rows("sessions", "id = ?", (session_id(world, alias),))
    assert len(rows) == 1, f"found {len(rows)} stored sessions with the id of {alias!r}"
    return rows[0]


def configuration(session: dict[str, Any]) -> dict[str, Any]:
    """The settings of a protocol ``Session``."""
    return {key: session.get(key) for key in SETTINGS}


def stored_configuration(row: dict[str, Any]) -> dict[str, Any]:
    """The settings of a stored ``sessions`` row."""
    return {key: row.get(key) for key in STORED_SETTINGS}


def remember_configuration(world: World, alias: str = "main") -> None:
    """Keep the session's settings, over the protocol and in storage, before a change that
    must be refused."""
    world.boundary.configuration_before = configuration(read_session(world, alias))
    world.boundary.stored_before = stored_configuration(stored_session(world, alias))


def prompt(world: World, text: str, alias: str = "main") -> str:
    """Prompt a session; the turn it starts belongs to that session, whatever the host's
    notifications say later."""
    world.cursors.turn = world.mark()
    world.cursors.provider_turn = len(world.provider.requests())
    world.boundary.provider_mark = world.cursors.provider_turn
    turn_id = granted(world.rpc.prompt, session_id(world, alias), text).turnId
    world.boundary.turn_owner[turn_id] = session_id(world, alias)
    world.boundary.turn_of[alias] = turn_id
    return turn_id


def transcript_entries(world: World, session: str) -> list[TranscriptEntry]:
    """``session/transcript`` of ``session``; its ``seq`` must increase from entry to entry."""
    entries = granted(world.rpc.session_transcript, session).entries
    seqs = [entry.seq for entry in entries]
    assert all(a < b for a, b in pairwise(seqs)), (
        f"session/transcript's seq does not increase from entry to entry: {seqs}"
    )
    return list(entries)


def wait_turn_end(world: World, turn_id: str, since: int = 0) -> dict[str, Any]:
    """The ``turn/ended`` of ``turn_id``."""
    ended = world.wait_for("turn/ended", lambda p: p["turnId"] == turn_id, since=since)
    world.last_turn_end = ended
    return ended


def converse(world: World, text: str, alias: str = "main") -> dict[str, Any]:
    """Prompt a session and wait until its turn completed (the replies are scripted)."""
    since = world.mark()
    turn_id = prompt(world, text, alias)
    ended = wait_turn_end(world, turn_id, since)
    assert ended["outcome"] == "completed", f"the turn ended {ended['outcome']}: {ended}"
    return ended


# -- creating sessions --------------------------------------------------------------------


@given("a session for the project")
@when("the user creates a session for the project")
def create_session(world: World) -> None:
    _create(world, "main").require_result()


@when(parsers.parse("the user creates a session for the project in {mode} mode"))
@given(parsers.parse("a session for the project in {mode} mode"))
def create_session_in_mode(world: World, mode: str) -> None:
    _create(world, "main", mode=MODES[mode]).require_result()


@given(parsers.parse("a session in {mode} mode for the project given with a trailing slash"))
def create_session_with_slash(world: World, mode: str) -> None:
    _create(world, "main", workspace_root=f"{world.workspace}/", mode=MODES[mode]).require_result()


@given(parsers.parse("a session in {mode} mode for the project reached through a link"))
def create_session_through_link(world: World, mode: str) -> None:
    # The root is a symbolic link to the project folder: only links in .pi and .pi/plan
    # are refused (§2); the root itself may be reached any way the user reaches it.
    link = world.workspace.parent / "project-link"
    link.symlink_to(world.workspace, target_is_directory=True)
    _create(world, "main", workspace_root=str(link), mode=MODES[mode]).require_result()


@given("a session for the project whose provider address ends with a slash")
def create_session_slashed_provider(world: World) -> None:
    provider = ProviderConfig(baseUrl=world.provider.base_url + "/", model="mock-model")
    created = granted(world.rpc.create_session, str(world.workspace), provider=provider)
    world.sessions["main"] = plain(created.session)


@given(parsers.parse("a session for another project in {mode} mode"))
def create_earlier_session(world: World, mode: str) -> None:
    earlier = world.workspace.parent / "earlier-project"
    earlier.mkdir(exist_ok=True)
    _create(world, "earlier", workspace_root=str(earlier), mode=MODES[mode]).require_result()


@given("a session without a project in Plan mode")
def create_unbound_plan_session(world: World) -> None:
    _create(world, "main", workspace_root=None, mode="plan").require_result()


MANY: Final = "many "  # the alias prefix of the sessions of "the user creates N sessions"


@when(parsers.parse("the user creates {count:d} sessions for the project"))
def create_many_sessions(world: World, count: int) -> None:
    for n in range(1, count + 1):
        _create(world, f"{MANY}{n}").require_result()


@then("the list of sessions shows every one of them as it is reported on its own")
@verifies("R7.2")
def every_session_listed(world: World) -> None:
    created = [str(s["sessionId"]) for a, s in world.sessions.items() if a.startswith(MANY)]
    listed = [plain(s) for s in granted(world.rpc.list_sessions).sessions]
    ids = [s["sessionId"] for s in listed]
    missing = [i for i in created if i not in ids]
    assert not missing, (
        f"session/list lists {len(created) - len(missing)} of the {len(created)} sessions the "
        f"user created; missing: {missing}. session/list lists every session, however many "
        "there are"
    )
    twice = sorted({i for i in ids if ids.count(i) > 1})
    assert not twice, f"session/list lists the sessions {twice} more than once"
    by_id = {s["sessionId"]: s for s in listed}
    for wanted in created:
        alone = plain(granted(world.rpc.get_session, wanted).session)
        listed_values, got_values = field_differences(by_id[wanted], alone)
        assert not listed_values, (
            f"session/list shows the session {wanted} with {listed_values}; session/get "
            f"with {got_values}"
        )


@given("a session for the project with a shell of its own")
def create_session_with_own_shell(world: World) -> None:
    _create(world, "main").require_result()
    chosen = other_shell(world, None)
    answered = granted(world.rpc.configure_session, session_id(world), shell_id=chosen).session
    world.sessions["main"] = plain(answered)


@given("a session without a project in Agent mode")
def create_unbound_agent_session(world: World) -> None:
    # permission mode auto: a refusal can only come from the missing project
    _create(world, "main", workspace_root=None, permission_mode="auto").require_result()


@given(parsers.parse("a session for the project with permission mode {permission}"))
def create_session_with_permission(world: World, permission: str) -> None:
    _create(world, "main", permission_mode=permission_mode(permission)).require_result()


@given(
    parsers.parse(
        "a session for the project, its path given with a trailing slash, "
        "with permission mode {permission}"
    )
)
def create_session_trailing_slash(world: World, permission: str) -> None:
    root = str(world.workspace) + "/"
    world.arranged.root_as_given = root
    _create(
        world, "main", workspace_root=root, permission_mode=permission_mode(permission)
    ).require_result()


@when("the user creates a session without a project")
def create_session_without_project(world: World) -> None:
    _create(world, "main", workspace_root=None).require_result()


@when(parsers.parse('the user tries to create a session in a mode called "{mode}"'))
def create_session_unknown_mode(world: World, mode: str) -> None:
    unchecked(world, "session/create", {"workspaceRoot": str(world.workspace), "mode": mode})


_RELATIVE_ROOTS: Final = {
    "of a folder that does not exist": "relative/project",
    "of the host's own working folder": ".",  # exists wherever the host runs
    "written with a tilde for the home folder": "~",  # a shell expands it; a host does not
}


@when(parsers.parse("the user tries to create a session for the relative workspace path {path}"))
def create_relative(world: World, path: str) -> None:
    _create(world, "main", workspace_root=_RELATIVE_ROOTS[path])


@when("the user tries to create a session for a workspace that does not exist")
def create_missing(world: World) -> None:
    _create(world, "main", workspace_root=str(world.workspace / "missing"))


@when("the user tries to create a session for a workspace that is a file")
def create_file_root(world: World) -> None:
    target = world.workspace / "not-a-folder.txt"
    target.write_text("plain file\n", encoding="utf-8")
    _create(world, "main", workspace_root=str(target))


# -- configuring sessions -----------------------------------------------------------------


@when(parsers.parse("the user switches the session to {mode} mode"))
def switch_mode(world: World, mode: str) -> None:
    world.attempt_typed(world.rpc.configure_session, session_id(world), mode=MODES[mode])


@when(parsers.parse('the user tries to switch the session to a mode called "{mode}"'))
def switch_to_unknown_mode(world: World, mode: str) -> None:
    remember_configuration(world)
    unchecked(world, "session/configure", {"sessionId": session_id(world), "mode": mode})


@when(parsers.parse("the user requests one change of {change}"))
def one_invalid_change(world: World, change: str) -> None:
    provider = {"baseUrl": world.provider.base_url, "model": "another-model"}
    changes: dict[str, dict[str, Any]] = {
        "the mode together with an unknown permission mode": {
            "mode": "plan",
            "permissionMode": "everything",
        },
        "the model together with an unknown mode": {"provider": provider, "mode": "review"},
        "the permission mode together with a malformed shell": {
            "permissionMode": "auto",
            "shellId": 42,
        },
        "the mode together with a provider on a port that cannot be": {
            "mode": "plan",
            "provider": {"baseUrl": "http://127.0.0.1:65536/v1", "model": "mock-model"},
        },
    }
    assert change in changes, f"no change called {change!r}"
    remember_configuration(world)
    unchecked(world, "session/configure", {"sessionId": session_id(world), **changes[change]})


# A request of each kind whose params break the schema; P4 puts that check before the
# state of the session they name.
_BROKEN_PARAMS: Final[dict[str, tuple[str, dict[str, Any]]]] = {
    "a change of configuration": ("session/configure", {"permissionMode": "yolo"}),
    "a prompt": ("session/prompt", {"text": 42}),
}


@when(parsers.parse("the client sends {request} whose params break the schema"))
def broken_params(world: World, request: str) -> None:
    assert request in _BROKEN_PARAMS, f"no request called {request!r}"
    method, params = _BROKEN_PARAMS[request]
    unchecked(world, method, {"sessionId": session_id(world), **params})


@when(
    parsers.parse(
        "the client sends {request} for a session that does not exist, "
        "with params that break the schema"
    )
)
def broken_params_unknown_session(world: World, request: str) -> None:
    assert request in _BROKEN_PARAMS, f"no request called {request!r}"
    method, params = _BROKEN_PARAMS[request]
    unchecked(world, method, {"sessionId": "ses_never_created", **params})


@when(parsers.parse("the user sets the session's permission mode to {mode}"))
def set_permission_mode(world: World, mode: str) -> None:
    chosen = permission_mode(mode)
    world.attempt_typed(world.rpc.configure_session, session_id(world), permission_mode=chosen)


@given(parsers.parse("the user set the session's permission mode to {mode}"))
def permission_mode_was_set(world: World, mode: str) -> None:
    set_permission_mode(world, mode)
    world.outcome.require_result()


@when(parsers.parse('the user selects the model "{model}" for the session'))
def select_model(world: World, model: str) -> None:
    provider = mock_provider(world, model)
    world.attempt_typed(world.rpc.configure_session, session_id(world), provider=provider)


@when(parsers.parse('the user selects a shell called "{shell}" for the session'))
def select_shell(world: World, shell: str) -> None:
    remember_configuration(world)
    world.attempt_typed(world.rpc.configure_session, session_id(world), shell_id=shell)


def other_shell(world: World, current: str | None) -> str:
    """A shell of the host's catalog other than ``current``; unverified when there is none."""
    shells = [s.shellId for s in granted(world.rpc.list_shells).shells]
    others = [s for s in shells if s != current]
    if not others:
        raise Unverified("shell:any", "the host's shell catalog offers no shell to select")
    return str(others[0])


def new_setting(world: World, setting: str, alias: str = "main") -> dict[str, Any]:
    """Params that change ``setting`` of the session to a value it does not have yet (or,
    for "... to the same one", name the value it has: a change like any other)."""
    current = read_session(world, alias)
    if setting == "mode to the same one":
        return {"mode": current["mode"]}
    if setting == "permission mode to the same one":
        return {"permissionMode": current["permissionMode"]}
    provider = current.get("provider") or {}
    base_url = world.provider.base_url
    if setting == "mode":
        return {"mode": "plan" if current["mode"] == "agent" else "agent"}
    if setting == "permission mode":
        return {"permissionMode": "auto" if current["permissionMode"] != "auto" else "ask"}
    if setting == "model":
        model = "another-model" if provider.get("model") != "another-model" else "mock-model"
        return {"provider": {"baseUrl": provider.get("baseUrl") or base_url, "model": model}}
    if setting == "provider":
        # another spelling of the same server, with a trailing slash: reported as given
        moved = base_url.replace("127.0.0.1", "localhost") + "/"
        url = moved if provider.get("baseUrl") != moved else base_url
        return {"provider": {"baseUrl": url, "model": provider.get("model") or "mock-model"}}
    if setting == "shell":
        return {"shellId": other_shell(world, current.get("shellId"))}
    raise AssertionError(f"no setting called {setting!r}")


@when(parsers.parse("the user changes the {setting} of the session"))
def change_setting(world: World, setting: str, alias: str = "main") -> None:
    _change(world, new_setting(world, setting, alias), alias)


@when(
    parsers.parse(
        'the user changes the {setting} and selects a shell called "{name}" in one request'
    )
)
def change_with_unknown_shell(world: World, setting: str, name: str) -> None:
    changes = {**new_setting(world, setting), "shellId": name}
    world.wire.held_before = held(world)
    unchecked(world, "session/configure", {"sessionId": session_id(world), **changes})


@when(parsers.parse("the user changes the {first} and the {second} of the session in one request"))
def change_two_settings(world: World, first: str, second: str) -> None:
    _change(world, {**new_setting(world, first), **new_setting(world, second)})


def _change(world: World, changes: dict[str, Any], alias: str = "main") -> None:
    world.boundary.changed_to = changes
    world.boundary.changed_alias = alias
    world.boundary.session_before_change = read_session(world, alias)
    # time passes between creating and changing: what the change leaves alone (createdAt
    # included) must not move with the clock
    granted(world.rpc.clock_advance, 60_000)
    world.boundary.changed_mark = world.mark()
    configure(world, changes, alias)


@then("the session's announcement shows every change")
@verifies("R7.2")
def change_announced_whole(world: World) -> None:
    changes, alias = world.boundary.changed_to, world.boundary.changed_alias
    own = session_id(world, alias)
    notes = [
        n["params"]["session"]
        for n in world.notifications("session/updated", world.boundary.changed_mark)
        if n["params"]["session"].get("sessionId") == own
    ]
    assert notes, "no session/updated announced the change"
    shown = {k: notes[-1].get(k) for k in changes}
    assert shown == changes, (
        f"the last session/updated after the change shows {shown}; the request changed "
        f"{changes}: an announcement carries the session as it now is"
    )


def configure(world: World, changes: dict[str, Any], alias: str = "main") -> Outcome:
    """Configure the session with ``changes`` named as on the wire (as :func:`new_setting`
    gives them) and record the outcome."""
    unknown = set(changes) - set(SETTINGS)
    if unknown:
        raise HarnessError(f"session/configure has no settings {sorted(unknown)}")
    provider = changes.get("provider")
    return world.attempt_typed(
        world.rpc.configure_session,
        session_id(world, alias),
        mode=changes.get("mode"),
        permission_mode=changes.get("permissionMode"),
        provider=None if provider is None else ProviderConfig(**provider),
        shell_id=changes.get("shellId", ABSENT),
    )


_STORED_AS: Final = {"mode": "mode", "permissionMode": "permission_mode", "shellId": "shell_id"}


@then("the provider was asked for the model the session was changed to")
@verifies("R5.6")
def asked_for_new_model(world: World) -> None:
    world.outcome.require_result()
    model = world.boundary.changed_to["provider"]["model"]
    requests = world.provider.requests()
    assert requests, "the host made no request to the model provider"
    asked = requests[-1].model
    assert asked == model, (
        f"the turn asked the provider for the model {asked!r}, not {model!r} the session was "
        "changed to"
    )


@then(parsers.parse("the session has the new {setting}"))
def has_new_setting(world: World, setting: str) -> None:
    world.outcome.require_result()
    changes, alias = world.boundary.changed_to, world.boundary.changed_alias
    now = read_session(world, alias)
    row = stored_session(world, alias)
    before = need(world.boundary.session_before_change, "the session before the change")
    kept = {k: v for k, v in before.items() if k not in changes}
    moved = {k: now.get(k) for k, v in kept.items() if now.get(k) != v}
    assert not moved, f"the change of {setting} also changed {moved}; before: {kept}"
    assert row["created_at"] == before["createdAt"], (
        f"the stored created_at became {row['created_at']}; the session was created at "
        f"{before['createdAt']}"
    )
    stored_kept = {
        column: row[column]
        for key, column in _STORED_AS.items()
        if key in kept and row[column] != kept[key]
    }
    assert not stored_kept, f"the change of {setting} also changed the stored {stored_kept}"
    for key, value in changes.items():
        assert now.get(key) == value, f"the host reports {key} {now.get(key)!r}, not {value!r}"
        if key == "provider":
            stored = {"baseUrl": row["provider_base_url"], "model": row["model"]}
            assert stored == value, f"the stored provider is {stored}, not {value}"
        else:
            column = _STORED_AS[key]
            assert row[column] == value, f"the stored {column} is {row[column]!r}, not {value!r}"


@when("the user configures the session with the settings it already has")
def configure_same_settings(world: World) -> None:
    remember_configuration(world)
    world.boundary.changed_mark = world.mark()
    configure(world, need(world.boundary.configuration_before, "the session's settings"))


@then("the session keeps the settings it had")
@verifies("R5.6")
def same_settings_kept(world: World) -> None:
    answered = world.outcome.require_result()["session"]
    before = need(world.boundary.configuration_before, "configuration before the change")
    found = configuration(answered)
    assert found == before, (
        f"a configure naming the settings the session had answered with {found}, not {before}"
    )
    unchanged_configuration(world)
    own = session_id(world)
    announced = [
        n
        for n in world.notifications("session/updated", world.boundary.changed_mark)
        if n["params"]["session"].get("sessionId") == own
    ]
    with blame("R7.2"):
        assert announced, (
            "a configure naming the settings the session already had was answered without a "
            "session/updated: it is a change like any other, announced before its answer"
        )


@when("the user asks for a session that does not exist")
def get_missing_session(world: World) -> None:
    world.attempt_typed(world.rpc.get_session, "no-such-session")


# -- reading sessions back ----------------------------------------------------------------


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
    sessions = granted(world.rpc.list_sessions).sessions
    assert session_id(world) in {s.sessionId for s in sessions}, sessions


@then("the session is stored in the database")
def stored(world: World) -> None:
    stored_session(world)


@then("the session is stored in the database as it was reported")
def stored_as_reported(world: World) -> None:
    session = read_session(world)
    row = stored_session(world)
    provider = session.get("provider") or {}
    expected = {
        "mode": session["mode"],
        "permission_mode": session["permissionMode"],
        "workspace_root": session["workspaceRoot"],
        "provider_base_url": provider.get("baseUrl"),
        "model": provider.get("model"),
        "shell_id": session["shellId"],
        "created_at": session["createdAt"],
    }
    found = {key: row.get(key) for key in expected}
    assert found == expected, f"stored {found}, the host reports {expected}"


@then("no session was created")
def none_created(world: World) -> None:
    sessions = granted(world.rpc.list_sessions).sessions
    assert sessions == [], f"the host created {sessions}"
    rows = world.storage().rows("sessions")
    assert rows == [], f"the host stored sessions: {rows}"


@then("the session's configuration is unchanged")
def configuration_unchanged(world: World) -> None:
    unchanged_configuration(world)


def unchanged_configuration(world: World, alias: str = "main") -> None:
    """The session's settings, over the protocol and in storage, are those kept by
    :func:`remember_configuration` before a change that had to be refused."""
    before = need(world.boundary.configuration_before, "configuration before the change")
    stored_before = need(world.boundary.stored_before, "stored configuration before the change")
    now = configuration(read_session(world, alias))
    assert now == before, f"the refused change took effect: before {before}, now {now}"
    stored_now = stored_configuration(stored_session(world, alias))
    assert stored_now == stored_before, (
        f"the refused change was stored: before {stored_before}, now {stored_now}"
    )


# -- one agent (R1.3) ---------------------------------------------------------------------

FIRST_QUESTION: Final = "Which modules does the project have?"
FIRST_ANSWER: Final = "The project has a parser module and a printer module."


@given("the user had a first exchange with the agent")
def first_exchange(world: World) -> None:
    world.provider.enqueue(TextReply(FIRST_ANSWER))
    converse(world, FIRST_QUESTION)
    world.boundary.first_exchange = (FIRST_QUESTION, FIRST_ANSWER)


@when("the user continues the conversation")
def continue_conversation(world: World) -> None:
    world.provider.enqueue(TextReply("Then the printer module changes first."))
    converse(world, "Which one should change first?")


def _texts(content: Any) -> str:
    """The text of a Chat Completions message content: a string or an array of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


@then("the model was shown the first exchange")
@verifies("R1.3")
def shown_first_exchange(world: World) -> None:
    question, answer = need(world.boundary.first_exchange, "first exchange")
    requests = world.provider.requests()[world.boundary.provider_mark :]
    assert requests, "the host made no request to the model provider"
    # The contract fixes the role of the current prompt only: the earlier exchange may
    # reach the model in messages of any role and shape.
    texts = [_texts(m.get("content")) for m in requests[0].messages]
    assert any(question in text for text in texts), (
        f"the model was not shown the earlier question; its messages: {texts}"
    )
    assert any(answer in text for text in texts), (
        f"the model was not shown its earlier answer; its messages: {texts}"
    )


@then("the session is still the only session, with the same identity")
@verifies("R1.3")
def same_identity(world: World) -> None:
    sessions = granted(world.rpc.list_sessions).sessions
    ids = [s.sessionId for s in sessions]
    assert ids == [session_id(world)], f"sessions after the switch: {ids}"
    rows = world.storage().rows("sessions")
    assert [r["id"] for r in rows] == [session_id(world)], f"stored sessions: {rows}"


@then("the stored conversation of the session holds both exchanges")
@verifies("R1.3")
def both_exchanges_stored(world: World) -> None:
    question, answer = need(world.boundary.first_exchange, "first exchange")
    entries = transcript_entries(world, session_id(world))
    told = " ".join(str(entry.content) for entry in entries)
    for text in (question, answer, "Which one should change first?"):
        assert text in told, f"the session's transcript lost {text!r}: {entries}"
    rows = world.storage().rows("transcript", "session_id = ?", (session_id(world),))
    stored = " ".join(str(row["content"]) for row in rows)
    for text in (question, answer, "Which one should change first?"):
        assert text in stored, f"the stored transcript lost {text!r}"


# -- the provider key (P21) ---------------------------------------------------------------


@when("the user talks to the agent")
def talk(world: World) -> None:
    converse(world, "Please take a look at the project.")


@then("every request to the model provider carried the key as a bearer token")
@verifies("P21")
def key_as_bearer(world: World) -> None:
    requests = world.provider.requests()
    assert requests, "the host made no request to the model provider"
    expected = f"Bearer {DUMMY_API_KEY}"
    for request in requests:
        assert request.authorization == expected, (
            f"a provider request carried Authorization {request.authorization!r}, "
            "not the key of OPENAI_API_KEY as a bearer token"
        )


@then("the key appears in no message from the host")
@verifies("P21")
def key_not_sent(world: World) -> None:
    echoed = [
        line.text
        for line, _ in world.transcript()
        if line.direction == "host-to-client" and DUMMY_API_KEY in line.text
    ]
    assert not echoed, f"the host sent the provider key in a protocol message: {echoed[0][:300]}"


@then("the key is stored nowhere in the host's data")
@verifies("P21")
def key_not_stored(world: World) -> None:
    found = [p.name for p in _files(world.data_dir) if DUMMY_API_KEY.encode() in p.read_bytes()]
    assert not found, f"the host stored the provider key in {found}"


def _files(root: Path) -> list[Path]:
    return [p for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()]


def permission_request(world: World, tool: str, since: int) -> dict[str, Any]:
    """The host's permission request for ``tool`` since ``since``; a failed check when the
    tool ran without one."""

    def asked_or_ran(params: dict[str, Any]) -> bool:
        # a call of the tool that ran (status ok) without a question tells at once
        return params.get("tool") == tool and (
            "requestId" in params or params.get("status") == "ok"
        )

    try:
        found = world.wait_for_any(
            ("permission/requested", "turn/toolResult"), asked_or_ran, since=since
        )
        request: dict[str, Any] = found["params"]
        assert found["method"] == "permission/requested", (
            f"{tool} ran without asking for permission: {request}"
        )
    except TimeoutError:
        ran = [
            n["params"]
            for n in world.notifications("turn/toolResult", since)
            if n["params"]["tool"] == tool
        ]
        assert not ran, f"{tool} ran without asking for permission: {ran[0]}"
        raise
    return request


# -- no provider, a failing provider (P24, P25) ---------------------------------------------

PROMPT_TEXT = "Please take a look at the project."


@given("a session for the project without a model provider")
def session_without_provider(world: World) -> None:
    session = granted(world.rpc.create_session, str(world.workspace)).session
    assert session.provider is None, f"the session was given the provider {session.provider}"
    world.sessions["main"] = session.model_dump(mode="json")


@given("the user tried to talk to the agent")
@when("the user tries to talk to the agent")
def try_to_talk(world: World) -> None:
    """Prompt the session; the host may refuse the prompt or start a turn that fails."""
    world.cursors.turn = world.mark()
    world.cursors.provider_turn = len(world.provider.requests())
    world.last_turn_end = None
    try:
        turn_id = world.rpc.prompt(session_id(world), PROMPT_TEXT).turnId
    except RpcError as error:
        world.outcome = Outcome(error=error)
        return
    world.outcome = Outcome(result={"turnId": turn_id})
    wait_turn_end(world, turn_id, world.cursors.turn)
    world.script.earlier_conversation.append(PROMPT_TEXT)  # a failed turn's prompt stays


@given("the user configured a model provider for the session")
def configure_provider(world: World) -> None:
    provider = mock_provider(world)
    granted(world.rpc.configure_session, session_id(world), provider=provider)
    found = granted(world.rpc.get_session, session_id(world)).session.provider
    assert found == provider, f"the session's provider reads {found} after it was configured"


def _stream_event(delta: dict[str, Any], finish: str | None = None) -> str:
    chunk = {
        "id": "chatcmpl-broken",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "scripted",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(chunk)}\n\n"


_HALF_ANSWER: Final = _stream_event({"role": "assistant", "content": "Half an ans"})
_BROKEN_ANSWERS: Final[dict[str, CutStreamReply | RawStreamReply]] = {
    "stop short, its connection cut": CutStreamReply("Half an ans"),
    "end early, without its last piece": RawStreamReply((_HALF_ANSWER,)),
    "carry an error in the middle": RawStreamReply(
        (
            _HALF_ANSWER,
            'data: {"error": {"message": "overloaded", "type": "server_error"}}\n\n',
            "data: [DONE]\n\n",  # the error, not the end of the stream, decides
        )
    ),
    # A piece that cannot be read spoils the answer, even when the stream then ends well.
    "carry a piece that is not JSON": RawStreamReply(
        (_HALF_ANSWER, "data: {not json\n\n", "data: [DONE]\n\n")
    ),
    "carry a piece that is not an object": RawStreamReply(
        (_HALF_ANSWER, 'data: ["swer."]\n\n', "data: [DONE]\n\n")
    ),
    "end before its first piece": RawStreamReply(()),
    # The finish reason says the model is done; only [DONE] says the stream is whole.
    "end after its finish reason, without its last piece": RawStreamReply(
        (_HALF_ANSWER, _stream_event({}, finish="stop"))
    ),
}


@given(parsers.parse("the model's answer will {how}"))
def broken_answer(world: World, how: str) -> None:
    assert how in _BROKEN_ANSWERS, f"no broken answer called {how!r}"
    world.provider.enqueue(_BROKEN_ANSWERS[how])


@given("the model provider will refuse the next request")
def provider_refuses(world: World) -> None:
    world.provider.enqueue(HttpErrorReply(400, "the provider refused the request"))


@then(parsers.parse("the prompt was refused with {code}"))
@verifies("P24")
def prompt_refused(world: World, code: str) -> None:
    if world.outcome.error is not None:
        assert world.outcome.error.canonical == code, (
            f"the prompt was refused with {world.outcome.error.canonical}, not {code}"
        )
        started = world.notifications("turn/started", world.cursors.turn)
        assert not started, f"the refused prompt started a turn: {started}"
    else:
        ended = need(world.last_turn_end, "finished turn")
        found = (ended.get("error") or {}).get("code")
        assert (ended["outcome"], found) == ("failed", code), (
            f"the prompt's turn ended {ended['outcome']} with {found}, expected failed with {code}"
        )
    asked = len(world.provider.requests()) - world.cursors.provider_turn
    assert asked == 0, f"the host asked a model provider {asked} time(s)"


@given(
    parsers.parse(
        'the model will read "{path}", and the model provider will then refuse the request'
    )
)
def read_then_refused(world: World, path: str) -> None:
    script_calls(world, tool_call(world, "Read", {"path": path}), answer=None)
    world.provider.enqueue(HttpErrorReply(400, "the provider refused the request"))


@given("the model will switch to planning, and the model provider will then refuse the request")
def plan_mode_then_refused(world: World) -> None:
    script_calls(world, tool_call(world, "EnterPlanMode", {}), answer=None)
    world.provider.enqueue(HttpErrorReply(400, "the provider refused the request"))


@then("the session is still in Plan mode, where the failed turn put it")
@verifies("P10")
def still_in_plan_after_failure(world: World) -> None:
    ended = need(world.last_turn_end, "finished turn")
    assert ended["outcome"] == "failed", f"the turn the provider refused ended {ended}"
    session = read_session(world)
    assert session["mode"] == "plan", (
        f"the session is in {session['mode']} mode: EnterPlanMode switched it to Plan, and a "
        "turn that fails afterwards is not undone"
    )
    stored = world.storage().rows("sessions", "id = ?", (session_id(world),))
    assert [row["mode"] for row in stored] == ["plan"], f"the sessions row holds {stored}"


@then("the turn, whose tool call had failed, ended failed with the provider's error")
@verifies("P25")
def failed_with_provider_error(world: World) -> None:
    assert world.outcome.error is None, f"the prompt was refused: {world.outcome.error}"
    ended = need(world.last_turn_end, "finished turn")
    found = (ended.get("error") or {}).get("code")
    assert (ended["outcome"], found) == ("failed", "PROVIDER_ERROR"), (
        f"the turn ended {ended['outcome']} with {found}: a turn the provider's error ended "
        "reports that error (PROVIDER_ERROR), whatever tool call failed before it"
    )


@then("the session's transcript keeps the failed turn's tool call and its result")
@verifies("R1.3")
def failed_turn_keeps_its_work(world: World) -> None:
    ended = need(world.last_turn_end, "finished turn")
    call_id = need(world.script.last_call_id("Read"), "the Read call")
    entries = [
        e for e in transcript_entries(world, session_id(world)) if e.turnId == ended["turnId"]
    ]
    calls = [
        e
        for e in entries
        if e.role == "assistant"
        and any(c.get("id") == call_id for c in e.content.get("tool_calls") or [])
    ]
    results = [e for e in entries if e.role == "tool" and e.content.get("tool_call_id") == call_id]
    shown = [(e.role, e.content) for e in entries]
    assert calls and results, (
        f"the failed turn's transcript entries are {shown}: a turn that failed is not undone; "
        f"the model's call {call_id} and its result stay in the transcript"
    )


def _earlier_read_shown(world: World, which: str, why: str) -> None:
    # Earlier turns may reach the model in messages of any role and shape (R1.3): what must
    # be there is the earlier turn's result, as the model was given it in that turn.
    call_id = need(world.script.last_call_id("Read"), "the Read call")
    requests = world.provider.requests()
    result = need(answer_to_call(requests[:-1], call_id), f"the {which}'s Read result")
    shown = json.dumps(requests[-1].messages, ensure_ascii=False)
    assert json.dumps(result, ensure_ascii=False)[1:-1] in shown, (
        f"the next turn's request does not carry the result {result!r} the {which}'s "
        f"call {call_id} was given: {why}, and the next turn shows the model its calls and "
        "their results"
    )


@then("the model was shown the failed turn's tool call and its result")
@verifies("R1.3")
def failed_turn_shown(world: World) -> None:
    _earlier_read_shown(world, "failed turn", "a turn that failed is not undone")


@then("the model was shown that turn's read and its result")
@verifies("R1.3")
def later_turn_shown(world: World) -> None:
    _earlier_read_shown(
        world, "earlier turn", "a call a restart cut short before it does not hide later ones"
    )


@then(parsers.parse("the turn ended failed with {code}"))
@verifies("P25")
def turn_ended_failed(world: World, code: str) -> None:
    assert world.outcome.error is None, f"the prompt was refused: {world.outcome.error}"
    ended = need(world.last_turn_end, "finished turn")
    found = (ended.get("error") or {}).get("code")
    assert (ended["outcome"], found) == ("failed", code), (
        f"the turn ended {ended['outcome']} with {found}, expected failed with {code}"
    )
    rows = world.storage().rows("turns", "id = ?", (ended["turnId"],))
    states = [row["state"] for row in rows]
    assert states == ["failed"], f"the turn is stored as {states}"
    asked = len(world.provider.requests()) - world.cursors.provider_turn
    assert asked == 1, f"the host asked the provider {asked} times, expected once"


@then(parsers.parse('the agent answered "{text}"'))
def agent_answered(world: World, text: str) -> None:
    entries = transcript_entries(world, session_id(world))
    answers = [_texts(e.content.get("content")) for e in entries if e.role == "assistant"]
    assert answers and answers[-1] == text, f"the agent's last answer reads {answers[-1:]}"


# -- words passed through unchanged (P31) -------------------------------------------------

# Whitespace at both ends and inside, which a host must not tidy away.
FRAMED_PROMPT: Final = "\n\n  Please look at the project.\n\tAnd at its tests.  \n\n"
# The mock provider streams a short answer in pieces of eight characters: this one has
# pieces that are only line breaks, only spaces and only tabs.
SPACED_ANSWER: Final = (
    "Step one\r\n\r\n" + "\n" * 8 + " " * 8 + "    done" + "\t" * 8 + " \x1b[1mend\x1b[0m\x07  \r\n"
)  # blank space, CR LF (two in a row, so one falls inside a streamed piece) and control
# characters (an escape sequence, a bell) are the answer too


# prompts the schema accepts that a host might "tidy" (P31 keeps them as typed)
_UNTIDY_PROMPTS: Final = {
    "framed by blank lines and indentation": FRAMED_PROMPT,
    "of nothing but blank space": "  \r\n\t \n",
}


@when(parsers.re(r"the user sends a prompt (?P<kind>framed by .+|of nothing but .+)$"))
def untidy_prompt(world: World, kind: str) -> None:
    assert kind in _UNTIDY_PROMPTS, f"no prompt called {kind!r}"
    world.script.prompt = _UNTIDY_PROMPTS[kind]
    mark = world.mark()
    turn_id = granted(world.rpc.prompt, session_id(world), world.script.prompt).turnId
    ended = wait_turn_end(world, turn_id, since=mark)
    assert ended["outcome"] == "completed", f"the turn ended {ended}"


ESCAPED_PROMPT: Final = "Look at this \U0001f600 caf\u00e9 \u2028 line."


@when(
    "the user sends a prompt with an emoji from a client that escapes every character beyond ASCII"
)
def escaped_prompt(world: World) -> None:
    world.script.prompt = ESCAPED_PROMPT
    mark = world.mark()
    answer = world.rpc.call_ascii(
        "session/prompt", {"sessionId": session_id(world), "text": ESCAPED_PROMPT}
    )
    assert "result" in answer, f"the prompt was refused: {answer}"
    ended = wait_turn_end(world, answer["result"]["turnId"], since=mark)
    assert ended["outcome"] == "completed", f"the turn ended {ended}"


@then("the model was given the prompt exactly as typed")
@verifies("P31")
def prompt_given_exactly(world: World) -> None:
    requests = world.provider.requests()
    assert requests, "the host made no request to the model provider"
    users = [m for m in requests[0].messages if m.get("role") == "user"]
    assert users, "the turn's first request carries no user message"
    given = _texts(users[-1].get("content"))
    typed = need(world.script.prompt, "the prompt the user typed")
    assert given == typed, f"the model was given the prompt {given!r}; the user typed {typed!r}"


@given("the model will answer with blank lines, indentation and trailing spaces")
def model_answers_spaced(world: World) -> None:
    world.provider.enqueue(TextReply(SPACED_ANSWER))


# Characters beyond ASCII, some of several bytes (split between writes where the stream
# is), and three that text splitters take for line breaks though a stream's lines end only
# at CR and LF: NEXT LINE, LINE SEPARATOR, PARAGRAPH SEPARATOR.
WIDE_ANSWER: Final = "Caf\u00e9 \u2192 na\u00efve \U0001f680 a\u0085b\u2028c\u2029d done"


@given("the model will answer with no text at all")
def model_answers_nothing(world: World) -> None:
    world.script.answer = ""
    world.provider.enqueue(TextReply(""))


@given("the user talked to the agent and the model answered with no text at all")
def talked_to_a_silent_model(world: World) -> None:
    model_answers_nothing(world)
    text = "Is there anything left to do?"
    converse(world, text)
    world.script.earlier_conversation.append(text)


@given("the model will answer with characters beyond ASCII and ones taken for line breaks")
def model_answers_wide(world: World) -> None:
    world.script.answer = WIDE_ANSWER
    world.provider.enqueue(TextReply(WIDE_ANSWER))


@given(parsers.parse("the model provider streams its answers {style}"))
def provider_streams(world: World, style: str) -> None:
    assert style in STREAM_STYLES, f"no stream style called {style!r}"
    world.provider.frame_streams(STREAM_STYLES[style])


STREAM_STYLES: Final = {
    "as plain events": FRAMINGS[0],
    "with CR LF line ends, comments and characters split between writes": FRAMINGS[1],
    "with CR line ends and events spread over two data lines": FRAMINGS[2],
}


@given("the user talked to the agent")
def talked(world: World) -> None:
    converse(world, "Please take a look at the project.")


@then("the model was given its earlier answer exactly as it gave it")
@verifies("R1.3")
def earlier_answer_exact(world: World) -> None:
    requests = world.provider.requests()[world.cursors.provider_turn :]
    assert requests, "the later turn never reached the model"
    # The earlier conversation may reach the model in messages of any role and shape
    # (R1.3); its words must be there as the model gave them.
    given = "\n".join(_content_text(m) for m in requests[0].messages)
    escaped = json.dumps(SPACED_ANSWER, ensure_ascii=False)[1:-1]
    assert SPACED_ANSWER in given or escaped in given, (
        f"the later turn did not give the model its earlier answer as it gave it, "
        f"{SPACED_ANSWER!r}: it was given {given[-600:]!r}; the conversation holds the "
        "model's own words"
    )


def _content_text(message: dict[str, Any]) -> str:
    """A message's text: its string content, or its text parts joined as they are."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = [p.get("text", "") for p in content or [] if isinstance(p, dict)]
    return "".join(str(part) for part in parts)


@then("the answer shown to the user is exactly the model's answer")
@verifies("P31")
def answer_shown_exactly(world: World) -> None:
    own = session_id(world)
    shown = "".join(
        n["params"]["text"]
        for n in world.notifications("turn/text")
        if n["params"]["sessionId"] == own
    )
    answer = SPACED_ANSWER if world.script.answer is None else world.script.answer
    assert shown == answer, (
        f"the turn/text notifications, joined, read {shown!r}; the model answered {answer!r}"
    )


@then("every entry of the session's transcript reads the host clock")
@verifies("P32")
def transcript_on_host_clock(world: World) -> None:
    now = granted(world.rpc.clock_get).now  # the clock stood still since it was moved
    entries = transcript_entries(world, session_id(world))
    assert entries, "the conversation left no transcript entry"
    off = [(e.role, e.createdAt) for e in entries if e.createdAt != now]
    assert not off, (
        f"the host clock read {now} throughout the conversation, but transcript entries read "
        f"{off[:4]}: every reported time is read from the host clock"
    )
    rows = world.storage().rows("transcript", "session_id = ?", (session_id(world),))
    stored = sorted({row["created_at"] for row in rows})
    assert stored == [now], f"the transcript rows store the times {stored}, not {now}"


@then("the session's transcript lists its entries in the order they were made")
@verifies("R1.3")
def transcript_in_order(world: World) -> None:
    entries = transcript_entries(world, session_id(world))
    rows = sorted(
        world.storage().rows("transcript", "session_id = ?", (session_id(world),)),
        key=lambda row: row["id"],
    )
    shown = [(e.role, e.createdAt) for e in entries]
    stored = [(row["role"], row["created_at"]) for row in rows]
    assert shown == stored, (
        f"session/transcript lists (role, createdAt) {shown}; the rows in id order are "
        f"{stored}: entries come in the order they were made, whatever the clock read"
    )
