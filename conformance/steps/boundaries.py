"""Steps about active turns, permission questions, cancellation and isolation (§3, §5).

Which session a turn belongs to is taken from what the harness did (the session it
prompted), never from the host's own ``turn/started``. Negative checks ("the turn is still
running", "nothing reached the other session") run after a settle point: the answer to the
refused request, or the ``turn/ended`` of the turn that did finish.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel
from pytest_bdd import given, parsers, then, when

from conformance.blame import verifies
from conformance.capabilities import require_fault_point
from conformance.client import HostClient, Predicate
from conformance.messages import answer_to_call, request_text
from conformance.mock_provider import (
    HttpErrorReply,
    ScriptedToolCall,
    StallReply,
    TextReply,
    ToolCallsReply,
)
from conformance.protocol_models import SessionPromptParams
from conformance.steps.common import NEVER_MADE, held, unchecked
from conformance.steps.model import script_calls, tool_call
from conformance.steps.plan import REUSED_CALL_ID, snapshot
from conformance.steps.requests import granted, sent_together
from conformance.steps.sessions import (
    MODES,
    _create,
    configure,
    converse,
    new_setting,
    permission_request,
    prompt,
    read_session,
    remember_configuration,
    session_id,
    stored_session,
    transcript_entries,
    unchanged_configuration,
    wait_turn_end,
)
from conformance.steps.shell import speak_posix, wait_command_line
from conformance.steps.tasks import (
    RUN_SESSION,
    scheduled_task,
    task_model_stalls,
    task_waiting_for_model,
)
from conformance.world import World, need

OTHER = "other"


# -- turns --------------------------------------------------------------------------------


@given("the model takes its time to answer")
@given("the model takes its time to carry out the plan")
def model_stalls(world: World) -> None:
    world.provider.enqueue(StallReply())


def _started(world: World, alias: str, text: str) -> str:
    """Prompt ``alias`` and wait until its turn has reached the model."""
    before = len(world.provider.requests())
    turn_id = prompt(world, text, alias)
    world.provider.wait_for_requests(before + 1, timeout=world.timeout)
    return turn_id


@given("the model takes its time before its last answer")
def model_holds_last_answer(world: World) -> None:
    world.provider.enqueue(StallReply(prefix="Almost ", suffix="done."))


STARTING_PROMPT: Final = "Go."


@given("the user started a turn")
@when("the user starts a turn")
def start_turn(world: World) -> None:
    world.active_turn = _started(world, "main", STARTING_PROMPT)


def _of_session(world: World, alias: str) -> Predicate:
    """Whether a notification's params name the session ``alias``."""
    own = session_id(world, alias)
    return lambda params: bool(params["sessionId"] == own)


@given(parsers.parse("{count:d} other sessions of the project have each answered a prompt"))
def many_sessions_worked(world: World, count: int) -> None:
    # One after another, so that a host keeping per-session state in a small cache has
    # pushed the first session out of it by the end.
    for number in range(1, count + 1):
        alias = f"worker {number}"
        _create(world, alias, mode="agent").require_result()
        world.provider.enqueue(TextReply(f"Answer number {number}."))
        since = world.mark()
        ended = wait_turn_end(world, prompt(world, f"Question number {number}?", alias), since)
        assert ended["outcome"] == "completed", f"session {alias}'s turn ended {ended}"


@given("both sessions run commands without asking")
def both_run_commands(world: World) -> None:
    for alias in ("main", OTHER):
        granted(world.rpc.configure_session, session_id(world, alias), permission_mode="auto")
        speak_posix(world, alias)


# the second session's command: prints once started, again on "go", a third time on "go-again"
_SECOND_PRINTS_TWICE_WHEN_TOLD = (
    'echo "second-started $(pwd -P)"; while [ ! -f go ]; do sleep 0.05; done; '
    "echo second-late; while [ ! -f go-again ]; do sleep 0.05; done; "
    "echo second-last; sleep 3600"
)


@given("the model will run a command in each session, the first printing again when told")
def commands_in_both(world: World) -> None:
    # Each command names its working folder, then prints again once told: the two
    # commands' output interleaves, and the second prints a third time only when the
    # cancel scenario tells it (so that it is still running after the first's cancel).
    first = (
        'echo "first-started $(pwd -P)"; while [ ! -f go ]; do sleep 0.05; done; '
        "echo first-late; sleep 3600"
    )
    second = _SECOND_PRINTS_TWICE_WHEN_TOLD
    world.provider.enqueue(
        ToolCallsReply((ScriptedToolCall("Bash", {"command": first}),)),
        ToolCallsReply((ScriptedToolCall("Bash", {"command": second}),)),
    )


@given(
    "the model will run a command with a one-minute timeout in each session, "
    "the first ending when told"
)
def timed_commands_in_both(world: World) -> None:
    first = (
        'echo "first-started $(pwd -P)"; while [ ! -f go ]; do sleep 0.05; done; '
        "echo first-late; while [ ! -f end ]; do sleep 0.05; done"
    )
    second = (
        'echo "second-started $(pwd -P)"; while [ ! -f go ]; do sleep 0.05; done; '
        "echo second-late; sleep 3600"
    )
    world.provider.enqueue(
        ToolCallsReply((ScriptedToolCall("Bash", {"command": first, "timeout_ms": 60_000}),)),
        ToolCallsReply((ScriptedToolCall("Bash", {"command": second, "timeout_ms": 60_000}),)),
        TextReply("One command is done."),
        TextReply("The other command is done."),
    )


@given(
    "the model will run a command in each session, the first ending when told, and the "
    "provider will then refuse the first session's next request"
)
def commands_in_both_first_fails(world: World) -> None:
    first = (
        'echo "first-started $(pwd -P)"; while [ ! -f go ]; do sleep 0.05; done; '
        "echo first-late; while [ ! -f end ]; do sleep 0.05; done"
    )
    second = _SECOND_PRINTS_TWICE_WHEN_TOLD
    world.provider.enqueue(
        ToolCallsReply((ScriptedToolCall("Bash", {"command": first}),)),
        ToolCallsReply((ScriptedToolCall("Bash", {"command": second}),)),
        HttpErrorReply(400, "the provider refused the request"),
    )


@when("both commands run, the first ends, and the first session's turn fails")
def first_command_ends_and_turn_fails(world: World) -> None:
    both_commands_run(world)
    first_command_ends(world)
    ended = wait_turn_end(world, world.boundary.turn_of["main"])
    assert ended["outcome"] == "failed", f"the first session's turn ended {ended}"


@when("the first session's command ends by itself")
def first_command_ends(world: World) -> None:
    (_project_of(world, "main") / "end").write_text("end\n", encoding="utf-8")
    command = world.boundary.command_of["main"]
    world.wait_for("command/exited", lambda p: p["commandId"] == command)


@when("a minute passes on the host clock")
def a_minute_passes(world: World) -> None:
    granted(world.rpc.clock_advance, 60_000)


@then("the second session's command timed out")
@verifies("R5.9", "C5")
def second_timed_out(world: World) -> None:
    command = world.boundary.command_of[OTHER]
    try:
        exited = world.wait_for("command/exited", lambda p: p["commandId"] == command)
    except TimeoutError:
        raise AssertionError(
            "the second session's command did not time out when the host clock passed its "
            "timeout, after what happened in the first session (its command ended, or its turn "
            "was cancelled): one session's work disarmed another's timeout"
        ) from None
    assert exited["timedOut"] is True, f"the second session's command ended as {exited}"
    wait_turn_end(world, world.boundary.turn_of[OTHER])


def _project_of(world: World, alias: str) -> Path:
    return world.workspace if alias == "main" else need(world.arranged.other_project, "other")


@given("both commands run and the first prints again")
@when("both commands run and the first prints again")
def both_commands_run(world: World) -> None:
    started = world.boundary.command_of
    for alias, line in (("main", "first-started"), (OTHER, "second-started")):
        started[alias] = world.wait_for("command/started", _of_session(world, alias))["commandId"]
        text = wait_command_line(world, started[alias], line, 0)["text"]
        at = text.index(line) + len(line) + 1
        world.boundary.folder_of[alias] = text[at : text.index("\n", at)]
    for alias in ("main", OTHER):
        (_project_of(world, alias) / "go").write_text("go\n", encoding="utf-8")
    wait_command_line(world, started["main"], "first-late", 0)
    wait_command_line(world, started[OTHER], "second-late", 0)


def _cancel_both(world: World) -> None:
    for alias in ("main", OTHER):
        granted(world.rpc.cancel, session_id(world, alias))
        wait_turn_end(world, world.boundary.turn_of[alias])


@then("each command's output named its own session")
@verifies("R5.9")
def outputs_name_own_session(world: World) -> None:
    owners = {
        n["params"]["commandId"]: n["params"]["sessionId"]
        for n in world.notifications("command/started")
    }
    for note in world.notifications("command/output"):
        params = note["params"]
        owner = owners.get(params["commandId"])
        assert params["sessionId"] == owner, (
            f"output of command {params['commandId']} ({params['text']!r}) names session "
            f"{params['sessionId']}; the command runs in session {owner}"
        )
    _cancel_both(world)


@then("each command ran in its own session's project")
@verifies("R5.8", "R7.3")
def commands_in_own_projects(world: World) -> None:
    for alias in ("main", OTHER):
        expected = os.path.realpath(_project_of(world, alias))
        ran_in = world.boundary.folder_of[alias]
        assert ran_in == expected, (
            f"the {alias} session's command ran in {ran_in!r}, not in its own project "
            f"{expected!r}; every session's commands run in its own workspace"
        )
    _cancel_both(world)


@when("the user cancels the first session's turn")
def cancel_first(world: World) -> None:
    granted(world.rpc.cancel, session_id(world))
    wait_turn_end(world, world.boundary.turn_of["main"])


@then("the second session's command still runs")
@verifies("R5.9")
def second_command_runs(world: World) -> None:
    command = world.boundary.command_of[OTHER]
    other = need(world.arranged.other_project, "other project")
    granted(world.rpc.list_sessions)  # a round trip: an exit already sent shows by now
    ended = [
        n["params"]
        for n in world.notifications("command/exited")
        if n["params"]["commandId"] == command
    ]
    assert not ended, (
        f"the end of the first session's turn ended the second session's command: {ended}"
    )
    (other / "go-again").write_text("go\n", encoding="utf-8")
    wait_command_line(world, command, "second-last", 0)
    granted(world.rpc.cancel, session_id(world, OTHER))
    wait_turn_end(world, world.boundary.turn_of[OTHER])


@then("the second session's question still takes the user's answer")
@verifies("R5.9")
def second_question_open(world: World) -> None:
    answer = world.rpc.call(
        "permission/respond",
        {"requestId": world.boundary.question_of[OTHER], "decision": "allow"},
    )
    assert "result" in answer, (
        "the end of the first session's turn closed the second session's question: "
        f"{answer.get('error')}"
    )
    ended = wait_turn_end(world, world.boundary.turn_of[OTHER])
    other = need(world.arranged.other_project, "other project")
    assert (other / "second.txt").is_file(), (
        f"the second session's allowed Write did not run (its turn ended {ended['outcome']})"
    )


@given("the user had a conversation with the agent in the other session")
def conversation_in_other(world: World) -> None:
    question, answer = "Other question: which port?", "Other answer: port 8080."
    world.provider.enqueue(TextReply(answer))
    mark = world.mark()
    ended = wait_turn_end(world, prompt(world, question, OTHER), mark)
    assert ended["outcome"] == "completed", f"the other session's turn ended {ended}"
    world.script.other_conversation += [question, answer]


@then("the other session's model still saw its own conversation")
@verifies("R5.9", "R1.3")
def other_kept_its_conversation(world: World) -> None:
    requests = world.provider.requests()[world.cursors.provider_turn :]
    assert requests, "the other session's turn made no request to the model"
    text = request_text(requests[0])
    for earlier in world.script.other_conversation:
        assert earlier in text, (
            f"the other session's model was no longer given {earlier!r} from its own "
            "conversation after a new context in another session: a context reset is the "
            "session's own"
        )


@when("the user talks to the agent in the other session")
def talk_in_other(world: World) -> None:
    world.cursors.provider_turn = len(world.provider.requests())
    world.provider.enqueue(TextReply("A fresh start."))
    mark = world.mark()
    ended = wait_turn_end(world, prompt(world, "What do you know so far?", OTHER), mark)
    assert ended["outcome"] == "completed", f"the other session's turn ended {ended}"


@then("the other session's model saw none of the first session's conversation")
@verifies("R5.9")
def conversations_apart(world: World) -> None:
    requests = world.provider.requests()[world.cursors.provider_turn :]
    assert requests, "the other session's turn made no request to the model"
    text = request_text(requests[0])
    for earlier in world.script.earlier_conversation:
        assert earlier not in text, (
            f"the other session's model was given {earlier!r} from the first session's "
            "conversation: each session has a conversation of its own, also on one project"
        )
    entries = transcript_entries(world, session_id(world, OTHER))
    kept = json.dumps([e.content for e in entries], ensure_ascii=False)
    for earlier in world.script.earlier_conversation:
        assert earlier not in kept, (
            f"the other session's transcript holds {earlier!r} from the first session's "
            "conversation"
        )


@given("the user started a turn that waits for a permission answer")
def turn_waits_for_permission(world: World) -> None:
    world.provider.enqueue(
        ToolCallsReply((ScriptedToolCall("Write", {"path": "asked.txt", "content": "1\n"}),)),
        TextReply("Written."),
    )
    mark = world.mark()
    world.active_turn = prompt(world, "Write the file.", "main")
    try:
        asked = world.wait_for(
            "permission/requested", lambda p: p["turnId"] == world.active_turn, mark
        )
    except TimeoutError:
        raise AssertionError("the Write under permission mode ask did not ask") from None
    world.boundary.question_of["main"] = asked["requestId"]


@when("the user answers the question of the cancelled turn, allowing the call")
def answer_after_cancel(world: World) -> None:
    wait_turn_end(world, need(world.active_turn, "the cancelled turn"))
    # unchecked: the question is expected to be closed
    params = {"requestId": world.boundary.question_of["main"], "decision": "allow"}
    unchecked(world, "permission/respond", params)


@when("the user sends two prompts at once")
def prompt_twice(world: World) -> None:
    own = session_id(world)
    params = [
        SessionPromptParams(sessionId=own, text=text)
        for text in ("First of two.", "Second of two.")
    ]
    world.cursors.turn = world.mark()
    before = world.boundary.provider_mark = len(world.provider.requests())
    world.boundary.concurrent_responses = sent_together(world, "session/prompt", params)
    if any("result" in response for response in world.boundary.concurrent_responses):
        world.provider.wait_for_requests(before + 1, timeout=world.timeout)


@then("exactly one of the two prompts started a turn and the other was refused with SESSION_BUSY")
@verifies("R5.1")
def one_prompt_of_two(world: World) -> None:
    responses = world.boundary.concurrent_responses
    started = [r["result"]["turnId"] for r in responses if "result" in r]
    refused = [r["error"]["data"]["code"] for r in responses if "error" in r]
    assert len(started) == 1, f"{len(started)} of the two prompts started a turn: {responses}"
    assert refused == ["SESSION_BUSY"], f"the other prompt was answered {responses}"
    world.active_turn = started[0]
    world.boundary.turn_owner[started[0]] = session_id(world)


@when("the user tries to send another prompt")
def try_prompt(world: World) -> None:
    world.attempt_typed(world.rpc.prompt, session_id(world), "One more thing.")


@when("the user tries to send the same prompt again")
def try_same_prompt(world: World) -> None:
    world.attempt_typed(world.rpc.prompt, session_id(world), STARTING_PROMPT)


@when(parsers.parse("the user tries to switch the session to {mode} mode"))
def try_switch(world: World, mode: str) -> None:
    remember_configuration(world)
    world.attempt_typed(world.rpc.configure_session, session_id(world), mode=MODES[mode])


@when("the user tries to plan again")
def try_plan_again(world: World) -> None:
    remember_configuration(world)
    world.attempt_typed(world.rpc.configure_session, session_id(world), mode="plan")


@given(parsers.parse("the user tried to change the {setting}"))
@when(parsers.parse("the user tries to change the {setting}"))
def try_configure(world: World, setting: str) -> None:
    changes = new_setting(world, setting)
    remember_configuration(world)
    configure(world, changes)


@given("a turn of another session of the project is under way")
def other_session_of_project_busy(world: World) -> None:
    _create(world, OTHER).require_result()
    world.provider.enqueue(StallReply())
    _started(world, OTHER, "Take your time with the project.")


@then("a turn of another session of the project is still under way")
def other_session_of_project_still_busy(world: World) -> None:
    _still_running(world, OTHER, world.boundary.turn_of[OTHER])


@given("a scheduled task's run is under way")
def scheduled_run_under_way(world: World) -> None:
    scheduled_task(world, "Agent")
    task_model_stalls(world)
    task_waiting_for_model(world)
    own = str(need(world.tasks.run, "run under way")["sessionId"])
    started = world.wait_for("turn/started", lambda p: p["sessionId"] == own)
    world.sessions[RUN_SESSION] = {"sessionId": own}
    world.boundary.turn_of[RUN_SESSION] = str(started["turnId"])


@then("a scheduled task's run is still under way")
def scheduled_run_still_under_way(world: World) -> None:
    _still_running(world, RUN_SESSION, world.boundary.turn_of[RUN_SESSION])


@when(parsers.parse("the user tries to give the run's session another {setting}"))
def try_configure_run_session(world: World, setting: str) -> None:
    changes = new_setting(world, setting, RUN_SESSION)
    remember_configuration(world, RUN_SESSION)
    configure(world, changes, RUN_SESSION)


@then("the configuration of the run's session is unchanged")
def run_session_unchanged(world: World) -> None:
    unchanged_configuration(world, RUN_SESSION)


@when("the user cancels the turn")
@given("the user cancelled the turn")
def cancel_turn(world: World) -> None:
    world.attempt_typed(world.rpc.cancel, session_id(world))


@when("the user tries to cancel")
def try_cancel(world: World) -> None:
    world.attempt_typed(world.rpc.cancel, session_id(world))


def _stored_turn(world: World, turn_id: str) -> dict[str, Any]:
    rows = world.storage().rows("turns", "id = ?", (turn_id,))
    assert len(rows) == 1, f"found {len(rows)} stored turns with the id {turn_id}"
    return rows[0]


def _ended_as(world: World, turn_id: str, outcome: str) -> None:
    ended = wait_turn_end(world, turn_id)
    assert ended["outcome"] == outcome, f"the turn ended {ended['outcome']}, not {outcome}"
    stored = _stored_turn(world, turn_id)
    assert stored["state"] == outcome, f"the turn is stored as {stored['state']}, not {outcome}"


@then("the turn ended as cancelled")
@given("the turn ended as cancelled")
def turn_cancelled(world: World) -> None:
    refused = world.outcome.error
    assert refused is None or refused.method != "session/cancel", (
        f"the cancel of a running turn was refused: {refused}"
    )
    _ended_as(world, need(world.active_turn, "started turn"), "cancelled")


@then("the cancel names the turn under way, which ended as cancelled")
@verifies("R5.1")
def cancel_names_this_turn(world: World) -> None:
    turn = need(world.active_turn, "started turn")
    answered = world.outcome.require_result().get("turnId")
    assert answered == turn, (
        f"session/cancel answered turn {answered}, but the turn under way was {turn}: a "
        "cancel answers the id of the turn it cancels, also the session's second one"
    )
    _ended_as(world, turn, "cancelled")


@when("the model's last answer arrives and the user cancels the turn at once")
def cancel_as_answer_arrives(world: World) -> None:
    turn, since = need(world.active_turn, "started turn"), world.mark()
    world.provider.release_stalls()
    # The provider has written the whole answer and the host has announced all of its
    # text: the turn's work is done, or all but done.
    world.provider.wait_until_idle(world.timeout)

    def whole_answer_shown(params: dict[str, Any]) -> bool:
        pieces = world.notifications("turn/text")  # the held answer's start came before
        shown = "".join(n["params"]["text"] for n in pieces if n["params"]["turnId"] == turn)
        return params["turnId"] == turn and shown.endswith("Almost done.")

    world.wait_for("turn/text", whole_answer_shown, since)
    world.attempt_typed(world.rpc.cancel, session_id(world))


@then("the cancel's answer agrees with how the turn ended")
@verifies("R5.1")
def late_cancel_agrees(world: World) -> None:
    turn = need(world.active_turn, "started turn")
    answered = world.outcome.require_result().get("turnId")
    ended = wait_turn_end(world, turn)["outcome"]
    stored = _stored_turn(world, turn)["state"]
    if answered == turn:
        assert ended == stored == "cancelled", (
            f"the cancel answered that it cancelled the turn {turn}, yet the turn ended "
            f"{ended} and is stored {stored}: a cancel that names a turn ends it cancelled"
        )
    else:
        assert answered is None, (
            f"session/cancel answered turn {answered}, but the only turn was {turn}"
        )
        assert ended == stored == "completed", (
            f"the cancel answered null (too late: the turn had finished its work), yet the "
            f"turn ended {ended} and is stored {stored}: a cancel that comes too late leaves "
            "the turn to end as it finished"
        )


@then("the turn ends")
def turn_ends(world: World) -> None:
    wait_turn_end(world, need(world.active_turn, "started turn"))


@when("the model answers and the turn ends")
def model_answers(world: World) -> None:
    world.provider.release_stalls()
    _ended_as(world, need(world.active_turn, "started turn"), "completed")


def _still_running(world: World, alias: str, turn_id: str) -> None:
    session = read_session(world, alias)
    assert session["activeTurnId"] == turn_id, (
        f"the turn {turn_id} is no longer the session's active turn: {session}"
    )
    stored = _stored_turn(world, turn_id)
    assert stored["state"] == "active", f"the running turn is stored as {stored['state']}"
    ended = [n for n in world.notifications("turn/ended") if n["params"]["turnId"] == turn_id]
    assert not ended, f"the turn ended: {ended[0]['params']}"


@then("the turn is still running")
def still_running(world: World) -> None:
    _still_running(world, "main", need(world.active_turn, "started turn"))


@then("once the model answers, the turn completes as the only turn of the session")
def only_turn(world: World) -> None:
    turn_id = need(world.active_turn, "started turn")
    mark = world.boundary.provider_mark
    world.provider.release_stalls()
    _ended_as(world, turn_id, "completed")
    turns = world.storage().rows("turns", "session_id = ?", (session_id(world),))
    assert [t["id"] for t in turns] == [turn_id], f"the session has the turns {turns}"
    asked = world.provider.requests()[mark:]
    assert len(asked) == 1, f"the model was asked {len(asked)} times during the one turn"


@given(parsers.parse('the user sent the prompt "{text}" and the model answered it'))
def prompt_answered(world: World, text: str) -> None:
    world.provider.enqueue(TextReply("First answer."))
    since = world.mark()
    turn_id = prompt(world, text)
    ended = wait_turn_end(world, turn_id, since)
    assert ended["outcome"] == "completed", f"the first turn ended {ended}"
    world.boundary.earlier_turn = turn_id


@when(parsers.parse('the user sends the prompt "{text}" once more'))
def same_prompt_again(world: World, text: str) -> None:
    world.provider.enqueue(TextReply("Second answer."))
    world.active_turn = prompt(world, text)


@then("the second prompt started a turn of its own, which the model answered")
@verifies("R5.1")
def second_prompt_own_turn(world: World) -> None:
    earlier = need(world.boundary.earlier_turn, "the first prompt's turn")
    turn_id = need(world.active_turn, "the second prompt's turn")
    assert turn_id != earlier, (
        f"the second prompt was answered with the first one's turn {earlier}: an idle "
        "session starts a turn for every prompt, the same text at the same instant included"
    )
    ended = wait_turn_end(world, turn_id, world.cursors.turn)
    assert ended["outcome"] == "completed", f"the second prompt's turn ended {ended}"
    asked = world.provider.requests()[world.boundary.provider_mark :]
    assert len(asked) == 1, f"the model was asked {len(asked)} times for the second prompt"


@then("the host answers that no turn was running")
@verifies("R5.1")
def nothing_cancelled(world: World) -> None:
    result = world.outcome.require_result()
    assert result.get("turnId") is None, f"the host says it cancelled the turn {result}"


@then("the session takes a new prompt")
def takes_new_prompt(world: World) -> None:
    world.provider.enqueue(TextReply("Ready again."))
    since = world.mark()
    turn_id = prompt(world, "Start over.")
    ended = wait_turn_end(world, turn_id, since)
    assert ended["outcome"] == "completed", f"the new turn ended {ended}"


@then("no plan awaits approval")
def no_plan(world: World) -> None:
    approvals = granted(world.rpc.list_approvals, session_id(world)).approvals
    assert approvals == [], f"the host lists approvals: {approvals}"
    rows = world.storage().rows("plan_approvals", "session_id = ?", (session_id(world),))
    assert rows == [], f"plan_approvals holds {rows}"
    folder = world.workspace / ".pi" / "plan"
    artifacts = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    assert artifacts == [], f"the plan folder holds {artifacts}"


@then("the plan still awaits the user's decision")
def plan_still_pending(world: World) -> None:
    approval = need(world.plan.approval, "approval")
    approval_id = approval["approvalId"]
    found = granted(world.rpc.get_approval, session_id(world), approval_id).approval
    assert found.status == "pending", f"the approval is {found.status}"
    session = read_session(world)
    assert session["pendingApprovalId"] == approval_id, session
    assert session["activeTurnId"] is None and session["activeExecutionId"] is None, session
    assert session["mode"] == "plan", f"the session is in {session['mode']} mode"
    rows = world.storage().rows("plan_approvals", "id = ?", (approval_id,))
    assert len(rows) == 1, f"found {len(rows)} stored approvals with the id {approval_id}"
    row = rows[0]
    assert row["status"] == "pending", f"the approval is stored as {row['status']}"
    assert row["permission_mode"] is None and row["execution_id"] is None, row


# -- executions ---------------------------------------------------------------------------


@given("the plan was approved and waits to start")
def approved_and_waiting(world: World) -> None:
    require_fault_point(world, "holdExecution")
    granted(world.rpc.arm_fault, "holdExecution")
    approval = need(world.plan.approval, "approval")
    world.cursors.approve = world.mark()
    world.cursors.provider_approve = len(world.provider.requests())
    granted(world.rpc.approve, session_id(world), approval["approvalId"], "ask")


@then("the approved plan is still being carried out")
def execution_goes_on(world: World) -> None:
    world.provider.wait_for_requests(world.cursors.provider_approve + 1, timeout=world.timeout)
    session = read_session(world)
    execution = session["activeExecutionId"]
    assert execution is not None, f"the session has no active execution: {session}"
    approval = need(world.plan.approval, "approval")
    found = granted(world.rpc.get_approval, session_id(world), approval["approvalId"]).approval
    assert found.executionState in ("queued", "running"), found
    row = world.storage().rows("plan_approvals", "id = ?", (approval["approvalId"],))[0]
    assert row["execution_state"] in ("queued", "running"), row


# -- permission questions -----------------------------------------------------------------


@given(parsers.re(r"the host asked permission before (?P<tool>\w+)"))
@then(parsers.re(r"the host asks permission before (?P<tool>\w+)"))
def asks_permission(world: World, tool: str) -> None:
    since = max(world.cursors.approve, world.cursors.turn)
    request = permission_request(world, tool, since)
    world.plan.permission_request = request
    world.plan.questions_asked.append(request)


@when(parsers.parse("the user {decision} it"))
def answer_permission(world: World, decision: str) -> None:
    request = need(world.plan.permission_request, "permission question")
    answers: dict[str, Literal["allow", "deny"]] = {"allows": "allow", "denies": "deny"}
    granted(world.rpc.respond_permission, request["requestId"], answers[decision])


@given("the user allowed it")
def allowed_it(world: World) -> None:
    answer_permission(world, "allows")


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
    session = granted(world.rpc.get_session, session_id(world)).session
    assert session.activeTurnId is not None, "the execution stopped waiting for the user"


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
@then(parsers.parse('the project has no folder "{path}"'))
def no_file(world: World, path: str) -> None:
    assert not (world.workspace / path).exists(), f"{path} exists"


# -- isolation: two projects ----------------------------------------------------------------


@given("a second session for another project that keeps a secret")
def second_session(world: World) -> None:
    # A sibling whose name extends the project's: a containment check that compares path
    # prefixes as text would take it for part of the project.
    other = world.workspace.parent / f"{world.workspace.name}-other"
    other.mkdir(exist_ok=True)
    secret = f"secret-{uuid.uuid4().hex}"
    (other / "secret.txt").write_text(f"The other project's secret is {secret}.\n", "utf-8")
    world.arranged.other_project = other
    world.arranged.other_secret = secret
    world.arranged.other_project_before = snapshot(other)
    _create(world, OTHER, workspace_root=str(other)).require_result()


@given(
    parsers.parse(
        'a second session for another project whose "{path}" is alike in name, size and time'
    )
)
def second_session_lookalike(world: World, path: str) -> None:
    # A cache keyed by a file's relative path, size and modification time, without the
    # project, would serve one project's text to the other.
    ours = world.workspace / path
    text = ours.read_text("utf-8")
    other = world.workspace.parent / f"{world.workspace.name}-other"
    other.mkdir(exist_ok=True)
    theirs = other / path
    flipped = text.swapcase() if text.swapcase() != text else text[::-1]
    theirs.write_text(flipped, "utf-8")
    stat = ours.stat()
    os.utime(theirs, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    world.arranged.other_project = other
    _create(world, OTHER, workspace_root=str(other)).require_result()


@when(parsers.parse('the model of the other session reads "{path}"'))
def other_session_reads(world: World, path: str) -> None:
    script_calls(world, tool_call(world, "Read", {"path": path}))
    world.cursors.provider_turn = len(world.provider.requests())
    mark = world.mark()
    ended = wait_turn_end(world, prompt(world, "Read the notes, please.", OTHER), mark)
    assert ended["outcome"] == "completed", f"the other session's turn ended {ended}"


@then(parsers.parse("the other session's model was given its own project's \"{path}\""))
@verifies("R5.8")
def other_read_its_own(world: World, path: str) -> None:
    other = need(world.arranged.other_project, "other project")
    theirs, ours = (other / path).read_text("utf-8"), (world.workspace / path).read_text("utf-8")
    call_id = [c for c in world.script.calls if c.tool == "Read"][-1].call_id
    answer = answer_to_call(world.provider.requests()[world.cursors.provider_turn :], call_id)
    assert answer is not None, "the other session's model was never given its Read's result"
    assert theirs.strip() in answer and ours.strip() not in answer, (
        f"the other session's Read of {path} gave {answer!r}; its project's file says "
        f"{theirs!r}, and the first project's file, alike in name, size and time, {ours!r}"
    )


@given("the second session is busy with a turn of its own")
def other_busy(world: World) -> None:
    world.provider.enqueue(StallReply())
    _started(world, OTHER, "Take your time with the other project.")


def _path_into_other(world: World, how: str, name: str) -> str:
    other = need(world.arranged.other_project, "other project")
    if how == "by its absolute path":
        return str(other / name)
    if how == "by a path climbing out of the project":
        return f"../{other.name}/{name}"
    if how == "through a link inside the project":
        link = world.workspace / "shortcut"
        if not link.is_symlink():
            link.symlink_to(other, target_is_directory=True)
        return f"shortcut/{name}"
    raise AssertionError(f"no way into the other project called {how!r}")


@given(parsers.parse("the model will read the other project's secret {how}"))
def model_reads_other(world: World, how: str) -> None:
    path = _path_into_other(world, how, "secret.txt")
    world.provider.enqueue(
        ToolCallsReply((ScriptedToolCall("Read", {"path": path}),)),
        TextReply("I could not read that file."),
    )


@given("the project has a folder linked to the other project")
def link_to_other(world: World) -> None:
    _path_into_other(world, "through a link inside the project", "secret.txt")
    # the secret is also the name of a file there, so that a listing would give it away
    secret = need(world.arranged.other_secret, "other project's secret")
    other = need(world.arranged.other_project, "other project")
    (other / f"{secret}.txt").write_text("named after the secret\n", "utf-8")
    world.arranged.other_project_before = snapshot(other)


@given("the project has a file linked to the other project's secret")
def file_link_to_other(world: World) -> None:
    other = need(world.arranged.other_project, "other project")
    (world.workspace / "notes-link.txt").symlink_to(other / "secret.txt")
    world.arranged.other_project_before = snapshot(other)


@given(
    parsers.parse("the model will search the project with {tool} for the other project's secret")
)
def model_searches_through_link(world: World, tool: str) -> None:
    arguments = {"Grep": {"pattern": "secret is"}, "Glob": {"pattern": "**/*.txt"}}
    assert tool in arguments, f"no search tool called {tool!r}"
    world.provider.enqueue(
        ToolCallsReply((ScriptedToolCall(tool, arguments[tool]),)),
        TextReply("That is all I found."),
    )


@given("the session acts without asking first")
def acts_without_asking(world: World) -> None:
    granted(world.rpc.configure_session, session_id(world), permission_mode="auto")


@given(parsers.parse("the model will write a file into the other project {how}"))
def model_writes_other(world: World, how: str) -> None:
    path = _path_into_other(world, how, "injected.txt")
    world.provider.enqueue(
        ToolCallsReply(
            (ScriptedToolCall("Write", {"path": path, "content": "from the first session\n"}),)
        ),
        TextReply("I could not write there."),
    )


def _results_of(world: World, tool: str) -> list[dict[str, Any]]:
    turn_id = world.boundary.turn_of.get("main")
    return [
        n["params"]
        for n in world.notifications("turn/toolResult")
        if n["params"]["tool"] == tool and n["params"]["turnId"] == turn_id
    ]


def _did_not_succeed(world: World, tool: str) -> None:
    results = _results_of(world, tool)
    assert len(results) == 1, f"expected one result of the {tool} call, got {results}"
    assert results[0]["status"] != "ok", f"the {tool} into the other project ran: {results[0]}"


@then("the read did not succeed")
@verifies("R5.8")
def read_refused(world: World) -> None:
    _did_not_succeed(world, "Read")


@then("the write did not succeed")
@verifies("R5.8")
def write_refused(world: World) -> None:
    _did_not_succeed(world, "Write")


@then("the other project's secret reached neither the model nor any message from the host")
@verifies("R5.8")
def secret_kept(world: World) -> None:
    secret = need(world.arranged.other_secret, "other project's secret")
    told = [r for r in world.provider.requests() if secret.encode() in r.raw_body]
    assert not told, f"the model was shown the other project's file: {told[0].raw_body[:300]!r}"
    sent = [
        line.text
        for line, _ in world.transcript()
        if line.direction == "host-to-client" and secret in line.text
    ]
    assert not sent, f"the host sent the other project's file: {sent[0][:300]}"


@then("nothing in the other project changed")
@verifies("R5.8")
def other_unchanged(world: World) -> None:
    other = need(world.arranged.other_project, "other project")
    now = snapshot(other)
    before = world.arranged.other_project_before
    assert now == before, f"the other project changed: before {sorted(before)}, now {sorted(now)}"


@then("the second session's turn is still running")
def other_still_running(world: World) -> None:
    _still_running(world, OTHER, world.boundary.turn_of[OTHER])


# -- isolation: events and actions ----------------------------------------------------------

ANSWERS = {"main": "The first project's answer.", OTHER: "The second project's answer."}


@given("the model will answer each session in its own words, slowly")
def answers_per_session(world: World) -> None:
    world.provider.enqueue(StallReply(suffix=ANSWERS["main"]), StallReply(suffix=ANSWERS[OTHER]))


@given("the second session is busy with a turn whose answer takes its time")
def other_busy_answering(world: World) -> None:
    world.provider.enqueue(StallReply(prefix="The second ", suffix="project's answer."))
    _started(world, OTHER, "Describe the second project.")


@then("once its model answers, the second session's turn completes with that answer")
@verifies("R5.9")
def other_completes_after_failure(world: World) -> None:
    turn_id = world.boundary.turn_of[OTHER]
    world.provider.release_stalls()
    ended = wait_turn_end(world, turn_id)
    assert ended["outcome"] == "completed", (
        f"the second session's turn, whose model was still answering when the first "
        f"session's answer broke off, ended {ended['outcome']}: {ended}"
    )
    heard = "".join(
        n["params"]["text"]
        for n in world.notifications("turn/text")
        if n["params"]["turnId"] == turn_id
    )
    assert heard == ANSWERS[OTHER], f"the second session heard {heard!r}, not {ANSWERS[OTHER]!r}"


@given("both sessions are busy with a turn")
def both_busy(world: World) -> None:
    world.provider.enqueue(StallReply(), StallReply())
    prompt_both(world)


@given("the user prompts both sessions")
@when("the user prompts both sessions")
def prompt_both(world: World) -> None:
    world.active_turn = _started(world, "main", "Describe the first project.")
    _started(world, OTHER, "Describe the second project.")


def _writes_in_both(world: World, call_id: str | None) -> None:
    # The model thinks until both sessions have asked it, so both turns are under way
    # before either question is put.
    first = ScriptedToolCall("Write", {"path": "first.txt", "content": "1\n"}, call_id)
    second = ScriptedToolCall("Write", {"path": "second.txt", "content": "2\n"}, call_id)
    world.provider.enqueue(
        StallReply(calls=(first,)),
        StallReply(calls=(second,)),
        TextReply("The first file is written."),
        TextReply("The second file was not written."),
    )


@given(
    "the model will ask to write a file in each session, and the provider will then refuse "
    "the first session's next request"
)
def writes_in_both_first_fails(world: World) -> None:
    first = ScriptedToolCall("Write", {"path": "first.txt", "content": "1\n"})
    second = ScriptedToolCall("Write", {"path": "second.txt", "content": "2\n"})
    world.provider.enqueue(
        StallReply(calls=(first,)),
        StallReply(calls=(second,)),
        HttpErrorReply(400, "the provider refused the request"),
        TextReply("The second file is written."),
    )


@when("the user allows the first session's write, and its turn then fails")
def allow_first_then_fails(world: World) -> None:
    allow_first(world)
    ended = wait_turn_end(world, world.boundary.turn_of["main"])
    assert ended["outcome"] == "failed", f"the first session's turn ended {ended}"


@given("the model will ask to write a file in each session")
def writes_in_both(world: World) -> None:
    _writes_in_both(world, None)


@given("the model will ask to write a file in each session, naming both calls alike")
def writes_in_both_named_alike(world: World) -> None:
    # Some providers number each message's calls from one, so two sessions' models can
    # give their calls one id at the same time.
    _writes_in_both(world, REUSED_CALL_ID)


@given("both sessions ask for permission")
@when("both sessions ask for permission")
def both_ask(world: World) -> None:
    world.provider.release_stalls()
    for alias in ("main", OTHER):
        try:
            asked = world.wait_for("permission/requested", _of_session(world, alias))
        except TimeoutError:
            put = [n["params"] for n in world.notifications("permission/requested")]
            raise AssertionError(
                f"no question named the {alias} session; the questions put: {put}"
            ) from None
        own_turn = world.boundary.turn_of[alias]
        assert asked["turnId"] == own_turn, (
            f"the {alias} session's question names turn {asked['turnId']}, not its running "
            f"turn {own_turn}"
        )
        world.boundary.question_of[alias] = asked["requestId"]
    ids = world.boundary.question_of
    assert ids["main"] != ids[OTHER], (
        f"both sessions' permission questions carry the id {ids['main']!r}: an answer could "
        "not tell them apart"
    )


@when("the user allows the question of the first session")
def allow_first(world: World) -> None:
    granted_answer = world.rpc.call(
        "permission/respond",
        {"requestId": world.boundary.question_of["main"], "decision": "allow"},
    )
    assert "result" in granted_answer, f"the answer was refused: {granted_answer}"


@then("the first session's write ran and the second session's question still waits")
@verifies("R5.9")
def only_first_answered(world: World) -> None:
    ended = wait_turn_end(world, world.boundary.turn_of["main"])
    assert (world.workspace / "first.txt").is_file(), (
        f"the first session's allowed Write did not run (its turn ended {ended['outcome']})"
    )
    other_turn = world.boundary.turn_of[OTHER]
    other_results = world.tool_results(other_turn)
    assert not other_results, (
        f"the answer to the first session's question also decided the second's: {other_results}"
    )
    other = need(world.arranged.other_project, "other project")
    assert not (other / "second.txt").exists(), "the second session's Write ran unanswered"
    denied = world.rpc.call(
        "permission/respond",
        {"requestId": world.boundary.question_of[OTHER], "decision": "deny"},
    )
    assert "result" in denied, (
        f"the second session's question was no longer open after the first was answered: {denied}"
    )
    wait_turn_end(world, other_turn)


@when("the model finishes both answers")
def finish_both(world: World) -> None:
    world.provider.release_stalls()
    for alias in ("main", OTHER):
        wait_turn_end(world, world.boundary.turn_of[alias])


def _claims(params: dict[str, Any], commands: dict[str, str]) -> tuple[Any, Any]:
    """The session and turn a notification's params name."""
    for nested in ("session", "approval"):
        inner = params.get(nested)
        if isinstance(inner, dict):
            return inner.get("sessionId"), inner.get("turnId")
    turn = params.get("turnId")
    if turn is None and "commandId" in params:
        turn = commands.get(params["commandId"])
    return params.get("sessionId"), turn


@then("every notification names the session the user prompted for its turn")
@verifies("R5.9")
def notifications_name_owner(world: World) -> None:
    owners = world.boundary.turn_owner
    notes = world.notifications()
    commands = {
        n["params"]["commandId"]: n["params"]["turnId"]
        for n in notes
        if n["method"] == "command/started"
    }
    for turn_id in owners:
        ended = [n for n in notes if n["method"] == "turn/ended"]
        assert any(n["params"]["turnId"] == turn_id for n in ended), (
            f"no turn/ended for the turn {turn_id} the user started"
        )
    for note in notes:
        session, turn = _claims(note.get("params", {}), commands)
        if turn in owners:
            assert session == owners[turn], (
                f"{note['method']} for the turn {turn} of session {owners[turn]} names "
                f"session {session}"
            )


@then("each session's answer reached only that session")
@verifies("R5.9")
def answers_reach_owner(world: World) -> None:
    heard: dict[str, str] = {}
    for note in world.notifications("turn/text"):
        params = note["params"]
        heard[params["sessionId"]] = heard.get(params["sessionId"], "") + params["text"]
    for alias, answer in ANSWERS.items():
        own = heard.get(session_id(world, alias), "")
        assert answer in own, f"session {alias} did not hear its answer; it heard {own!r}"
        for other_alias, other_answer in ANSWERS.items():
            if other_alias != alias:
                assert other_answer not in own, (
                    f"session {alias} heard the answer meant for {other_alias}: {own!r}"
                )


@given("the other session was changed to another model")
def other_session_other_model(world: World) -> None:
    configure(world, new_setting(world, "model", OTHER), OTHER).require_result()


@given("the other session talked to the agent on its model")
def other_session_talked(world: World) -> None:
    world.provider.enqueue(TextReply("The other session's model answers."))
    converse(world, "Please take a look at the project.", OTHER)
    asked = world.provider.requests()[-1].model
    other = read_session(world, OTHER)["provider"]["model"]
    assert asked == other, f"the other session asked for the model {asked!r}, not {other!r}"


@then("the provider was asked for the first session's own model")
@verifies("R5.9")
def asked_for_own_model(world: World) -> None:
    own = read_session(world)["provider"]["model"]
    other = read_session(world, OTHER)["provider"]["model"]
    assert own != other, f"both sessions use the model {own!r}"
    requests = world.provider.requests()
    assert requests, "the host made no request to the model provider"
    asked = requests[-1].model
    assert asked == own, (
        f"the first session's turn asked the provider for the model {asked!r}, not its own "
        f"{own!r}: another session of the project was changed to {other!r}"
    )


@when("the user asks to cancel the first session's turn")
def ask_cancel_first(world: World) -> None:
    world.attempt_typed(world.rpc.cancel, session_id(world))


@then("the first session's turn ended as cancelled")
def first_cancelled(world: World) -> None:
    _ended_as(world, world.boundary.turn_of["main"], "cancelled")


@when("the user cancels the second session's turn")
def cancel_other(world: World) -> None:
    world.attempt_typed(world.rpc.cancel, session_id(world, OTHER))


@then("the second session's turn ended as cancelled")
def other_cancelled(world: World) -> None:
    _ended_as(world, world.boundary.turn_of[OTHER], "cancelled")


@then("the first session's turn is still running")
@verifies("R5.9")
def first_still_running(world: World) -> None:
    _still_running(world, "main", world.boundary.turn_of["main"])


@then("once the model answers, the first session's turn completes")
@verifies("R5.9")
def first_completes(world: World) -> None:
    world.provider.release_stalls()
    _ended_as(world, world.boundary.turn_of["main"], "completed")


def _through_other(rpc: HostClient) -> dict[str, Callable[[str, str], BaseModel]]:
    """What the user may try on a plan, given the session and the approval."""
    return {
        "approve": lambda session, approval: rpc.approve(session, approval, "ask"),
        "reject": rpc.reject,
        "open": rpc.read_artifact,
        "read": rpc.get_approval,
    }


@given("the user read and opened the plan through its own session")
def read_through_own(world: World) -> None:
    approval_id = need(world.plan.approval, "approval")["approvalId"]
    granted(world.rpc.get_approval, session_id(world), approval_id)
    granted(world.rpc.read_artifact, session_id(world), approval_id)


@when(parsers.parse("the user tries to {action} the plan through the second session"))
def act_through_other(world: World, action: str) -> None:
    actions = _through_other(world.rpc)
    assert action in actions, f"no action called {action!r}"
    approval = need(world.plan.approval, "approval")
    remember_configuration(world, OTHER)
    world.attempt_typed(actions[action], session_id(world, OTHER), approval["approvalId"])


@when(parsers.parse("the user tries to {action} the plan through a session the host never made"))
def act_through_unknown(world: World, action: str) -> None:
    actions = _through_other(world.rpc)
    assert action in actions, f"no action called {action!r}"
    approval = need(world.plan.approval, "approval")
    world.wire.held_before = held(world)
    world.attempt_typed(actions[action], NEVER_MADE, approval["approvalId"])


@then("the second session is unchanged")
def other_unchanged_session(world: World) -> None:
    created = world.sessions[OTHER]
    now = read_session(world, OTHER)
    for key in ("mode", "permissionMode", "provider", "shellId", "workspaceRoot"):
        assert now[key] == created[key], f"the second session's {key} became {now[key]!r}"
    busy = {k: now[k] for k in ("activeTurnId", "pendingApprovalId", "activeExecutionId")}
    assert not any(busy.values()), f"the second session became busy: {busy}"
    row = stored_session(world, OTHER)
    assert row["mode"] == created["mode"], row
    assert row["permission_mode"] == created["permissionMode"], row
    listed = granted(world.rpc.list_approvals, session_id(world, OTHER)).approvals
    assert listed == [], f"the second session lists {listed}"


@when("the user lists the plans of the second session")
@when("the user lists the plans of the other session")
def list_other_plans(world: World) -> None:
    world.attempt_typed(world.rpc.list_approvals, session_id(world, OTHER))


@then("the second session lists no plan")
@then("the other session lists no plan")
@verifies("R5.9")
def other_lists_nothing(world: World) -> None:
    approvals = world.outcome.require_result()["approvals"]
    assert approvals == [], f"the second session lists another session's plans: {approvals}"
