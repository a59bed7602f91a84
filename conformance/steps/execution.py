"""Steps about the execution of an approved plan and the permission modes (§3, §4, P7).

The execution is observed three ways at each step: its ``execution/updated`` notifications,
the approval read back over the protocol, and the stored plan_approvals row. What the
model is told is read from the provider's recorded requests, whatever role and content
form the host chose.
"""

from __future__ import annotations

import os
import shlex
import uuid
from typing import Any

from pytest_bdd import given, parsers, then, when

from conformance.blame import blame, verifies
from conformance.capabilities import require_fault_point
from conformance.messages import message_text, request_answering
from conformance.mock_provider import (
    HttpErrorReply,
    RecordedRequest,
    ScriptedToolCall,
    StallReply,
    TextReply,
    ToolCallsReply,
)
from conformance.steps.approval import (
    CLOSING_TEXT,
    acted_on,
    approve,
    check_announced,
    read_approval,
    read_back,
    stored_approval,
)
from conformance.steps.common import unchecked
from conformance.steps.model import default_markdown, script_calls, submit_plan_call, tool_call
from conformance.steps.plan import snapshot
from conformance.steps.requests import granted
from conformance.steps.restart import (
    approvals_of,
    newest_approval,
    other_session_pending,
    same_project_session_pending,
)
from conformance.steps.sessions import permission_request, read_session, session_id
from conformance.steps.tool_work import PLAN_TOOLS
from conformance.world import SubmittedPlan, World, need

_ACTIVE = ("queued", "running")
_FINISHED = ("completed", "interrupted")


def _execution_id(world: World) -> str:
    approved = need(world.plan.approved, "approved plan")
    execution_id: str = approved["approval"]["executionId"]
    return execution_id


def _states(world: World, execution_id: str) -> list[str]:
    return [
        n["params"]["executionState"]
        for n in world.notifications("execution/updated")
        if n["params"]["executionId"] == execution_id
    ]


def _execution_turn(world: World, execution_id: str) -> dict[str, Any]:
    """The turn/started of the execution; fails at once when an execution turn names the
    execution or its approval but not both as the approve answered them (R4.7)."""
    approvals = [world.plan.approval, (world.plan.approved or {}).get("approval")]
    approval_ids = {
        a["approvalId"] for a in approvals if a and a.get("executionId") == execution_id
    }
    ids = {execution_id, *approval_ids}
    started: dict[str, Any] = world.wait_for(
        "turn/started",
        lambda p: p["kind"] == "execution" and bool({p["executionId"], p["approvalId"]} & ids),
        since=world.cursors.approve,
    )
    with blame("R4.7"):
        named = (started["executionId"], started["approvalId"])
        assert started["executionId"] == execution_id and approval_ids <= {named[1]}, (
            f"the execution turn {started['turnId']} names execution {named[0]} of approval "
            f"{named[1]}, but the approve answered execution {execution_id} of approval "
            f"{', '.join(sorted(approval_ids)) or '(unknown)'}"
        )
    return started


def _first_execution_request(world: World) -> Any:
    index = world.cursors.provider_approve
    return world.provider.wait_for_requests(index + 1, world.timeout)[index]


def _wait_state(world: World, execution_id: str, states: tuple[str, ...]) -> dict[str, Any]:
    found: dict[str, Any] = world.wait_for(
        "execution/updated",
        lambda p: p["executionId"] == execution_id and p["executionState"] in states,
        since=world.cursors.approve,
    )
    return found


# -- arranging the model ------------------------------------------------------------------


@given("the model will take its time to carry out the plan")
def execution_takes_time(world: World) -> None:
    world.provider.enqueue(StallReply(suffix=CLOSING_TEXT))
    world.plan.closing_scripted = True


@given("the model provider will refuse the request that carries out the plan")
def execution_request_refused(world: World) -> None:
    world.provider.enqueue(HttpErrorReply(400, "the provider refused the request"))
    world.plan.closing_scripted = True


@given(
    parsers.parse(
        'the model will turn to planning during the execution and submit a plan titled "{title}"'
    )
)
def plan_during_execution(world: World, title: str) -> None:
    markdown = default_markdown(title)
    world.provider.enqueue(
        ToolCallsReply((tool_call(world, "EnterPlanMode", {}),)),
        ToolCallsReply((submit_plan_call(title, markdown),)),
    )
    world.plan.submitted.append(SubmittedPlan(title, markdown, "Shall I go ahead?"))
    world.plan.closing_scripted = True  # the submission ends that execution's turn


# -- actions ------------------------------------------------------------------------------


@given(
    parsers.re(
        r"while that execution runs, another session(?P<same> of the same project)? has a "
        r"plan awaiting approval"
    )
)
def other_plan_during_execution(world: World, same: str | None) -> None:
    # The execution has asked the model (and waits for its answer) before the other session
    # asks: the scripted answers are given out in the order they are asked for.
    world.provider.wait_for_requests(world.cursors.provider_approve + 1, world.timeout)
    if same:
        same_project_session_pending(world)
    else:
        other_session_pending(world)


@when(parsers.parse("the user approves the other session's plan with permission mode {mode}"))
def approve_other(world: World, mode: str) -> None:
    pending = [a for a in approvals_of(world, "other") if a["status"] == "pending"]
    approval = need(pending[-1] if pending else None, "the other session's pending plan")
    world.provider.enqueue(TextReply("The other plan is carried out."))
    world.attempt(
        "approval/approve",
        {
            "sessionId": approval["sessionId"],
            "approvalId": approval["approvalId"],
            "permissionMode": mode,
        },
    )


@then("the other session's plan is approved with an execution of its own")
@verifies("R4.9")
def other_approved(world: World) -> None:
    error = world.outcome.error
    assert error is None, (
        f"approving the other session's plan was refused with {error.canonical}, although "
        "only this session had an execution"
    )
    approval = world.outcome.require_result()["approval"]
    assert approval["status"] == "approved" and approval["executionId"], approval
    assert approval["executionId"] != _execution_id(world), "the two executions share an id"
    world.wait_for(
        "execution/updated",
        lambda p: p["executionId"] == approval["executionId"] and p["executionState"] in _FINISHED,
        since=world.cursors.approve,
    )


@when("the model finishes its work")
def model_finishes(world: World) -> None:
    world.provider.release_stalls()


@given("the execution has finished")
@then("the execution has finished")
def execution_finished(world: World) -> None:
    execution_id = _execution_id(world)
    turn = _execution_turn(world, execution_id)
    try:
        _wait_state(world, execution_id, _FINISHED)
    except TimeoutError as timeout:
        asked = [
            n["params"]["tool"]
            for n in world.notifications("permission/requested", world.cursors.approve)
            if n["params"]["turnId"] == turn["turnId"]
        ]
        if not asked:
            raise
        raise AssertionError(
            f"the execution did not finish: its turn asked for permission before {asked} "
            f"({timeout})"
        ) from timeout
    since = world.cursors.approve
    ended = world.wait_for("turn/ended", lambda p: p["turnId"] == turn["turnId"], since=since)
    final = _states(world, execution_id)[-1]
    expected = "completed" if ended["outcome"] == "completed" else "interrupted"
    with blame("R4.5"):
        assert final == expected, (
            f"the execution ended {final}, but its turn ended {ended['outcome']}: an execution "
            "is completed when its turn completed, whatever the user answered on the way, "
            "and interrupted when it did not"
        )


@when("the user sends a new request to the agent")
def later_prompt(world: World) -> None:
    world.provider.enqueue(TextReply("The request is handled."))
    _prompt_later(world)


def _prompt_later(world: World) -> None:
    """Send the session a later request whose model replies are already scripted."""
    world.arranged.workspace_before = snapshot(world.workspace)
    world.cursors.turn = world.mark()
    world.cursors.provider_turn = len(world.provider.requests())
    turn_id = granted(world.rpc.prompt, session_id(world), "Please tidy up the notes.").turnId
    world.plan.later_turn_id = turn_id
    world.active_turn = turn_id


@given(
    parsers.parse('the user allowed the command "{command}" in each of {count:d} later requests')
)
def allowed_in_later_requests(world: World, command: str, count: int) -> None:
    for _ in range(count):
        script_calls(world, tool_call(world, "Bash", {"command": command}))
        _prompt_later(world)
        asked_before(world, "Bash")
        request = need(world.plan.permission_request, "permission question")
        granted(world.rpc.respond_permission, request["requestId"], "allow")
        later_turn_finished(world)


@then("once the execution turned to planning, the model was offered exactly the planning tools")
@verifies("R1.4")
def execution_plan_tools(world: World) -> None:
    call_id = world.script.call_id("EnterPlanMode")
    requests = world.provider.requests()[world.cursors.provider_approve :]
    after = request_answering(requests, call_id)
    assert after is not None, "the model was never given the result of its EnterPlanMode call"
    assert sorted(after.tool_names) == PLAN_TOOLS, (
        f"after EnterPlanMode in the execution the host offered {sorted(after.tool_names)}, "
        f"expected {PLAN_TOOLS}"
    )


@then("the agent was given what the execution said")
@verifies("R1.3")
def later_turn_remembers_execution(world: World) -> None:
    turn_id = need(world.plan.later_turn_id, "the later turn")
    world.wait_for("turn/ended", lambda p: p["turnId"] == turn_id, since=world.cursors.turn)
    requests = world.provider.requests()[world.cursors.provider_turn :]
    assert requests, "the later request made no request to the model"
    text = "\n".join(message_text(m) for m in requests[0].messages)
    assert CLOSING_TEXT in text, (
        "the first request of the later turn does not carry what the model said in the "
        f"execution ({CLOSING_TEXT!r}): the same agent keeps one conversation"
    )


@when(parsers.parse("the user sends a second answer to the same question, {decision} the call"))
def answer_again(world: World, decision: str) -> None:
    request = need(world.plan.permission_request, "permission question")
    answer = {"allowing": "allow", "denying": "deny"}[decision]
    # The question was answered already.
    _answer_unchecked(world, request["requestId"], answer)


def _answer_unchecked(world: World, request_id: str, decision: str) -> None:
    """Answer a question that the host should not take."""
    unchecked(world, "permission/respond", {"requestId": request_id, "decision": decision})


@when("the user answers the first question again, denying the call")
def answer_first_again(world: World) -> None:
    first = need(world.plan.questions_asked[0] if world.plan.questions_asked else None, "question")
    # The first question was answered, and a later one of the turn is open.
    _answer_unchecked(world, first["requestId"], "deny")


@when("the user answers the question asked before the restart, allowing the call")
def answer_before_restart(world: World) -> None:
    asked = world.plan.questions_asked
    assert len(asked) >= 2, f"expected a question before the restart and one after: {asked}"
    # That question ended with the process that asked it.
    _answer_unchecked(world, asked[0]["requestId"], "allow")


@when("the user answers a permission question that was never asked")
def answer_unknown(world: World) -> None:
    _answer_unchecked(world, "never-asked-1", "allow")


@when(
    parsers.parse(
        'the user approves the plan titled "{title}" as soon as it is submitted, '
        "with permission mode {mode}"
    )
)
def approve_follow_up(world: World, title: str, mode: str) -> None:
    first = need(world.plan.approved, "approved plan")["approval"]
    world.plan.earlier_approval = first
    note = _submitted_in_execution(world, title, first["executionId"])
    world.plan.approval = note["approval"]
    world.plan.at_creation = dict(note["approval"])
    outcome = approve(world, mode)
    if outcome.error is not None and outcome.error.canonical == "EXECUTION_ACTIVE":
        # Allowed: the earlier execution had not ended yet. Nothing changed; once it has
        # ended the same approval goes through.
        with blame("R4.9"):
            waiting = read_back(world)
            assert waiting["status"] == "pending", f"refused, yet the approval is {waiting}"
        turn = _execution_turn_of(world, first["executionId"])
        world.wait_for("turn/ended", lambda p: p["turnId"] == turn, since=0)
        approve(world, mode)


def _submitted_in_execution(world: World, title: str, execution_id: str) -> dict[str, Any]:
    """The pending ``approval/updated`` of the plan the execution submits; fails at once,
    naming the call's result, when the execution's turn ends without it."""

    def submitted_or_over(params: dict[str, Any]) -> bool:
        if "approval" in params:
            approval = params["approval"]
            return bool(approval["title"] == title and approval["status"] == "pending")
        executions = {
            n["params"]["turnId"]
            for n in world.notifications("turn/started", world.cursors.approve)
            if n["params"].get("executionId") == execution_id
        }
        return params["turnId"] in executions

    found = world.wait_for_any(
        ("approval/updated", "turn/ended"), submitted_or_over, since=world.cursors.approve
    )
    if found["method"] == "approval/updated":
        submitted: dict[str, Any] = found["params"]
        return submitted
    turn = found["params"]["turnId"]
    results = world.tool_results(turn, world.cursors.approve)
    raise AssertionError(
        f"the execution's turn {turn} ended {found['params']['outcome']} without submitting "
        f'the plan "{title}" the model made in it (a plan made while carrying out another '
        f"waits for the user: R4.9); its tool results: {results}"
    )


def _execution_turn_of(world: World, execution_id: str) -> str:
    for note in world.notifications("turn/started"):
        params = note["params"]
        if params["kind"] == "execution" and params["executionId"] == execution_id:
            return str(params["turnId"])
    raise AssertionError(f"no execution turn was announced for {execution_id}")


# -- checks: the execution ----------------------------------------------------------------


@then("the approval answers that the execution is queued")
@verifies("R4.6")
def answered_queued(world: World) -> None:
    answered = world.outcome.require_result()["approval"]
    assert answered["status"] == "approved", f"the approve response shows {answered['status']}"
    assert answered["executionId"], f"the approve response names no execution: {answered}"
    assert answered["executionState"] == "queued", (
        f"the approve response shows the execution {answered['executionState']}, not queued"
    )
    with blame("C4"):
        session = world.outcome.require_result()["session"]
        assert session["mode"] == "agent", f"the approve response shows the session {session}"
        assert session["activeExecutionId"] == answered["executionId"], (
            f"the approve response shows the session with activeExecutionId "
            f"{session['activeExecutionId']!r}, not its queued execution"
        )


@when("the user cancels the turn as soon as it has started")
def cancel_as_soon_as_started(world: World) -> None:
    world.wait_for(
        "turn/started", lambda p: p["sessionId"] == session_id(world), since=world.cursors.approve
    )
    world.attempt_typed(world.rpc.cancel, session_id(world))


@given("the execution was running while the model worked")
@then("the execution is running while the model works")
@verifies("R4.5")
def running_while_working(world: World) -> None:
    execution_id = _execution_id(world)
    _wait_state(world, execution_id, ("running",))
    _first_execution_request(world)  # the model is working: its answer is held
    approval = read_back(world)
    assert approval["executionState"] == "running", (
        f"while the model works the execution is reported {approval['executionState']}"
    )
    session = read_session(world)
    assert session["activeExecutionId"] == execution_id, (
        f"while the execution runs the session shows {session['activeExecutionId']}"
    )
    assert session["activeTurnId"] is not None, f"no turn is active: {session}"


@then("the execution has completed")
@verifies("R4.5")
def execution_completed(world: World) -> None:
    _execution_ended(world, "completed")


@then("the execution was interrupted")
@verifies("R4.5")
def execution_interrupted(world: World) -> None:
    ended = _execution_ended(world, "interrupted")
    assert ended["outcome"] == "cancelled", f"the cancelled execution turn ended {ended}"


@given("the host will hold back the next approved execution")
def hold_next_execution(world: World) -> None:
    require_fault_point(world, "holdExecution")
    granted(world.rpc.arm_fault, "holdExecution")


@then(
    "the cancel named no turn, and the queued execution either still waits or was "
    "interrupted, as the session reports"
)
@verifies("R4.5", "R5.6")
def cancel_beside_queued_execution(world: World) -> None:
    answered = world.outcome.require_result()
    assert answered.get("turnId") is None, (
        f"the cancel answered {answered}: no turn was active while the execution was queued"
    )
    approved = need(world.plan.approved, "approve result")["approval"]
    granted(world.rpc.list_sessions)  # a round trip: whatever the cancel set going shows
    approval = read_back(world)
    state = approval["executionState"]
    session = read_session(world)
    if state == "queued":
        assert session["activeExecutionId"] == approved["executionId"], (
            f"the execution still waits in the queue, but the session reports {session}"
        )
        return
    assert state == "interrupted", (
        f"a cancel beside a queued execution left it {state}: it still waits, or a host that "
        "ends it with the cancel marks it interrupted"
    )
    assert session["activeExecutionId"] is None and session["activeTurnId"] is None, (
        f"the cancelled execution was interrupted, but the session still reports {session}"
    )
    announced = [
        n["params"]["executionState"]
        for n in world.notifications("execution/updated", world.cursors.approve)
        if n["params"]["executionId"] == approved["executionId"]
    ]
    assert announced and announced[-1] == "interrupted", (
        f"the execution was interrupted by the cancel but announced as {announced}"
    )


@then("the approved plan is still queued and nothing of it has started")
@verifies("C8")
def still_held(world: World) -> None:
    approved = need(world.plan.approved, "approve result")["approval"]
    granted(world.rpc.list_sessions)  # a round trip: whatever the clock move started shows
    approval = read_back(world)
    assert approval["executionState"] == "queued", (
        f"the held execution reads {approval['executionState']}: a held execution stays "
        "queued until the host stops, whatever else happens meanwhile"
    )
    own = session_id(world)
    started = [
        n["params"]
        for n in world.notifications("turn/started", world.cursors.approve)
        if n["params"]["sessionId"] == own
    ]
    assert not started, f"the held execution's turn started: {started}"
    running = [
        n["params"]
        for n in world.notifications("execution/updated", world.cursors.approve)
        if n["params"]["executionId"] == approved["executionId"]
        and n["params"]["executionState"] != "queued"
    ]
    assert not running, f"the held execution was announced {running}"


@then("the new plan was approved and carried out")
@verifies("R4.9")
def new_plan_carried_out(world: World) -> None:
    outcome = world.outcome
    answered = "ok" if outcome.error is None else outcome.error.canonical
    assert answered == "ok", (
        f"approving the session's new plan was refused with {answered}: the earlier "
        "execution was cancelled, so it is over and no longer counts as the session's one"
    )
    _execution_ended(world, "completed")


@given("the user cancelled the execution's turn")
def cancelled_execution(world: World) -> None:
    granted(world.rpc.cancel, session_id(world))
    _execution_ended(world, "interrupted")


@then("the cancelled plan's execution still reads interrupted")
@verifies("R4.5")
def cancelled_execution_stays(world: World) -> None:
    newest = acted_on(world)["approvalId"]
    earlier = [a for a in approvals_of(world) if a["approvalId"] != newest]
    assert len(earlier) == 1, f"expected one earlier approval beside {newest}: {earlier}"
    approval = read_approval(world, earlier[0]["approvalId"])
    stored = stored_approval(world, approval["approvalId"])
    seen = (approval["executionState"], stored["execution_state"])
    assert seen == ("interrupted", "interrupted"), (
        f"once the session's next plan was carried out, the cancelled plan's execution reads "
        f"{seen[0]} and is stored {seen[1]}: an execution's end changes its own record only"
    )


@then("the execution's turn failed and the execution was interrupted")
@verifies("R4.5")
def execution_failed(world: World) -> None:
    ended = _execution_ended(world, "interrupted")
    assert ended["outcome"] == "failed", f"the execution turn the provider refused ended {ended}"


def _execution_ended(world: World, final: str) -> dict[str, Any]:
    """The execution reached ``final`` once its turn ended: announced, reported by
    approval/get and stored alike, and the session is free; the turn's turn/ended."""
    execution_id = _execution_id(world)
    turn = _execution_turn(world, execution_id)
    _wait_state(world, execution_id, _FINISHED)  # then the states name the one reached
    since = world.cursors.approve
    ended = world.wait_for("turn/ended", lambda p: p["turnId"] == turn["turnId"], since=since)
    states = _states(world, execution_id)
    assert states in (["running", final], ["queued", "running", final]), (
        f"the execution was announced as {states}"
    )
    approval = read_back(world)
    assert approval["executionState"] == final, (
        f"after its turn ended the execution is reported {approval['executionState']}"
    )
    check_announced(world, approval)
    assert approval["status"] == "approved", f"the approval became {approval['status']}"
    row = stored_approval(world, approval["approvalId"])
    assert (row["status"], row["execution_state"]) == ("approved", final), row
    session = read_session(world)
    assert session["activeExecutionId"] is None, f"the session still runs {session}"
    assert session["activeTurnId"] is None, f"the session still has a turn: {session}"
    return ended


@then(
    parsers.parse('the plan titled "{title}" names the execution\'s turn as the one that made it')
)
@verifies("R4.8")
def plan_names_execution_turn(world: World, title: str) -> None:
    turn_id = _execution_turn(world, _execution_id(world))["turnId"]
    approvals = granted(world.rpc.list_approvals, session_id(world)).approvals
    found = [a for a in approvals if a.title == title]
    assert len(found) == 1, f"approvals titled {title!r}: {found}"
    assert found[0].turnId == turn_id, (
        f"the plan titled {title!r} names turn {found[0].turnId}; the execution turn "
        f"{turn_id} submitted it"
    )


@then("the execution runs to completion")
@verifies("R4.5")
def execution_runs_to_completion(world: World) -> None:
    world.outcome.require_result()
    execution_id = _execution_id(world)
    _wait_state(world, execution_id, _FINISHED)
    states = _states(world, execution_id)
    assert states in (["running", "completed"], ["queued", "running", "completed"]), (
        f"the execution was announced as {states}"
    )
    row = stored_approval(world, acted_on(world)["approvalId"])
    assert row["execution_state"] == "completed", f"storage shows {row['execution_state']}"


@then("the execution turn belongs to the session of the plan")
@verifies("R4.7")
def execution_turn_owner(world: World) -> None:
    execution_id = _execution_id(world)
    started = _execution_turn(world, execution_id)
    assert started["sessionId"] == session_id(world), (
        f"the execution ran in session {started['sessionId']}, not the plan's"
    )
    assert started["approvalId"] == acted_on(world)["approvalId"], started
    assert started["mode"] == "agent", f"the execution turn ran in {started['mode']} mode"
    first = _first_execution_request(world)
    assert "Write" in first.tool_names and "SubmitPlan" not in first.tool_names, (
        f"the execution was not run by the agent in Agent mode: it offered {first.tool_names}"
    )


@then("the model was given the conversation that produced the plan")
@verifies("R4.7")
def execution_has_history(world: World) -> None:
    first = _first_execution_request(world)
    prompt = need(world.plan.prompt, "the Plan turn's prompt")
    texts = [message_text(m) for m in first.messages]
    roles = [m.get("role") for m in first.messages]
    assert any(prompt in text for text in texts), (
        "the execution turn lacks the Plan conversation: its first request to the model does "
        f"not carry the user's request {prompt!r}; roles sent: {roles}"
    )


@then("once the execution started a new context, the model saw its summary instead of the planning")
@verifies("P10", "R4.7")
def execution_context_reset(world: World) -> None:
    execution_runs_to_completion(world)
    prompt = need(world.plan.prompt, "the Plan turn's prompt")
    arguments = world.script.arguments("new_context")
    summary = str(arguments["summary"]) if isinstance(arguments, dict) else str(arguments)
    requests = world.provider.requests()[world.cursors.provider_approve :]
    assert len(requests) >= 2, "the model was not asked again after its new_context call"
    after = requests[-1]  # the request that follows the call: the scenario scripts no other
    text = "\n".join(message_text(m) for m in after.messages)
    assert summary in text, f"after the new context the model was not given {summary!r}"
    assert prompt not in text, (
        f"after the execution's new context the model was still given the planning turn's "
        f"request {prompt!r}; a new context drops every earlier turn, also in an execution"
    )


@then("the model was given the approved plan's path and full content")
@verifies("P15")
def execution_has_plan(world: World) -> None:
    first = _first_execution_request(world)
    # The conversation so far holds every plan of the session (SubmitPlan's arguments and
    # results); the approved one must be in what the host wrote for the execution.
    earlier = world.provider.requests()[: world.cursors.provider_approve]
    text = "\n".join(message_text(m) for m in _written_for_execution(first.messages, earlier[-1:]))
    approval = acted_on(world)
    markdown = world.plan.submitted[-1].markdown
    assert approval["artifact"]["path"] in text, (
        f"the model was not told the artifact path {approval['artifact']['path']} in the "
        "messages written for the execution (the conversation before it does not count: "
        "it holds every plan of the session)"
    )
    assert markdown in text, (  # the full markdown: its first and last bytes too
        "the model was not given the plan's full content, exactly as submitted (the approved "
        "plan's), in the messages written for the execution"
    )


def _written_for_execution(
    messages: list[dict[str, Any]], earlier: list[RecordedRequest]
) -> list[dict[str, Any]]:
    """The messages of an execution's first request that the conversation before it does
    not explain: neither sent in the request before nor a SubmitPlan call or its result."""
    seen = [m for request in earlier for m in request.messages]
    plan_calls = {
        call.get("id")
        for m in messages
        for call in m.get("tool_calls") or []
        if (call.get("function") or {}).get("name") == "SubmitPlan"
    }
    return [
        m
        for m in messages
        if m not in seen
        and not any(call.get("id") in plan_calls for call in m.get("tool_calls") or [])
        and not (m.get("role") == "tool" and m.get("tool_call_id") in plan_calls)
    ]


@then("the command the execution ran is recorded for audit under the execution's turn")
@verifies("C5")
def execution_command_audited(world: World) -> None:
    turn = _execution_turn(world, _execution_id(world))["turnId"]
    started = world.notifications("command/started", world.cursors.approve)
    assert len(started) == 1, f"the execution ran {len(started)} commands, not 1"
    command = started[0]["params"]["commandId"]
    world.wait_for("command/exited", lambda p: p["commandId"] == command, world.cursors.approve)
    rows = world.storage().rows("command_audit", "id = ?", (command,))
    recorded = [row["turn_id"] for row in rows]
    assert recorded == [turn], (
        f"command_audit records the execution's command under the turns {recorded}, not "
        f"the execution's turn {turn}: a command is recorded under the turn whose call ran it"
    )


@given(
    "this session's execution will run a command that waits for a word, and the other "
    "session's will wait for the model"
)
def executions_side_by_side(world: World) -> None:
    # Requests reach the scripted model in this order: this execution's first, the other
    # execution's first (held), then this execution's second, once its command has ended.
    # The pipe lies outside the project: nothing that reads the project waits on it.
    gate = world.commands.gate = world.workspace.parent / f"word-{uuid.uuid4().hex[:8]}"
    os.mkfifo(gate)
    wait = ScriptedToolCall(
        "Bash", {"command": f"read word < {shlex.quote(str(gate))}; echo $word"}
    )
    world.provider.enqueue(ToolCallsReply((wait,)), StallReply(), TextReply(CLOSING_TEXT))
    world.plan.closing_scripted = True


@given("this session's execution is running its command")
def execution_command_running(world: World) -> None:
    world.wait_for("command/started", since=world.cursors.approve)


@given("the other session's plan was approved, and its execution is waiting for the model")
def other_execution_waiting(world: World) -> None:
    other = session_id(world, "other")
    pending = newest_approval(world, "other")
    before = len(world.provider.requests())
    granted(world.rpc.clock_advance, 1000)  # approved a moment after this session's plan
    granted(world.rpc.approve, other, pending["approvalId"], "auto")
    world.provider.wait_for_requests(before + 1, world.timeout)


@when("the command of this session's execution gets its word")
def give_the_word(world: World) -> None:
    gate = need(world.commands.gate, "the pipe the command waits on")
    fd = os.open(gate, os.O_RDWR | os.O_NONBLOCK)
    world.commands.open_gates.append(fd)
    os.write(fd, b"go\n")


@then(
    "once this session's execution has ended, the other session's execution is still "
    "running, and it completes once the model answers"
)
@verifies("R4.5")
def other_execution_goes_on(world: World) -> None:
    mine = _execution_id(world)
    turn = _execution_turn(world, mine)["turnId"]
    world.wait_for("turn/ended", lambda p: p["turnId"] == turn, since=world.cursors.approve)
    while world.commands.open_gates:
        os.close(world.commands.open_gates.pop())
    other = session_id(world, "other")
    approval = newest_approval(world, "other")
    session = granted(world.rpc.get_session, other).session
    seen = (approval["executionState"], session.activeExecutionId)
    assert seen == ("running", approval["executionId"]), (
        f"this session's execution turn ended, and the other session's execution reads "
        f"{approval['executionState']} with activeExecutionId {session.activeExecutionId}: an "
        "execution turn that ends finishes its own execution, never another session's"
    )
    own = acted_on(world)["approvalId"]
    state = granted(world.rpc.get_approval, session_id(world), own).approval.executionState
    assert state == "completed", f"this session's execution reads {state} once its turn ended"
    world.provider.release_stalls()
    execution = approval["executionId"]
    world.wait_for(
        "execution/updated",
        lambda p: p["executionId"] == execution and p["executionState"] == "completed",
    )


@then("the follow-up plan is carried out after the earlier execution has ended")
@verifies("R4.9")
def follow_up_after_first(world: World) -> None:
    first = need(world.plan.earlier_approval, "the earlier approved plan")
    turn = _execution_turn_of(world, first["executionId"])
    world.wait_for("turn/ended", lambda p: p["turnId"] == turn)
    earlier = stored_approval(world, first["approvalId"])
    assert earlier["execution_state"] in _FINISHED, (
        f"the earlier execution is still {earlier['execution_state']} after its turn ended"
    )
    result = world.outcome.require_result()["approval"]
    second = result["executionId"]
    assert second and second != first["executionId"], result
    _wait_state(world, second, ("completed",))
    active: set[str] = set()
    for note in world.notifications("execution/updated"):
        params = note["params"]
        if params["executionState"] in _ACTIVE:
            active.add(params["executionId"])
        else:
            active.discard(params["executionId"])
        assert len(active) <= 1, f"two executions were queued or running at once: {active}"
    rows = world.storage().rows("plan_approvals", "execution_state IN ('queued', 'running')")
    assert not rows, f"storage still holds active executions {rows}"


# -- checks: permission questions ---------------------------------------------------------


def _current_turn(world: World) -> str:
    if world.plan.later_turn_id is not None:
        return world.plan.later_turn_id
    return str(_execution_turn(world, _execution_id(world))["turnId"])


def _since(world: World) -> int:
    return max(world.cursors.approve, world.cursors.turn)


@then(parsers.parse("the user is asked for permission before {tool}"))
@verifies("P7")
def asked_before(world: World, tool: str) -> None:
    since = _since(world)
    request = permission_request(world, tool, since)
    assert request["sessionId"] == session_id(world), (
        f"the permission question names session {request['sessionId']}, not the user's"
    )
    turn = _current_turn(world)
    assert request["turnId"] == turn, f"the question names turn {request['turnId']}, not {turn}"
    world.plan.permission_request = request
    world.plan.questions_asked.append(request)


@then(parsers.parse('the user is asked again before the Write on "{path}"'))
@verifies("P7")
def asked_again(world: World, path: str) -> None:
    first = need(world.plan.permission_request, "permission question")
    since = _since(world)
    calls = [
        c
        for c in world.script.calls
        if c.tool == "Write" and isinstance(c.arguments, dict) and c.arguments.get("path") == path
    ]
    call_id = need(calls[-1] if calls else None, f"scripted Write on {path}").call_id

    def asking_or_ran(params: dict[str, Any]) -> bool:
        asking = params.get("tool") == "Write" and params.get("requestId") not in (
            None,
            first["requestId"],
        )
        return asking or params.get("toolCallId") == call_id

    # Whichever comes first: the question before the Write, or the Write's result.
    live = max(0, since - len(world.retired_notifications))
    message = world.wait_for_any(
        ("permission/requested", "turn/toolResult"), asking_or_ran, since=live
    )
    assert message["method"] == "permission/requested", (
        f"the Write on {path} ran without asking, after an earlier call of the turn was "
        f"answered: {message['params']['status']}"
    )
    asked = [message["params"]]
    request = asked[0]
    assert request["sessionId"] == session_id(world), request
    world.plan.permission_request = request


@then("the user is asked again, about the other Write")
@verifies("P7")
def asked_about_the_other(world: World) -> None:
    first = need(world.plan.permission_request, "permission question")
    live = max(0, _since(world) - len(world.retired_notifications))
    message = world.wait_for_any(
        ("permission/requested", "turn/ended"),
        lambda p: "requestId" not in p or p["requestId"] != first["requestId"],
        since=live,
    )
    assert message["method"] == "permission/requested", (
        "the turn ended after one question about two Write calls of one message: each call "
        "that needs permission asks on its own"
    )
    world.plan.permission_request = message["params"]


@then("the user is asked again, under a question of its own")
@verifies("P7")
def asked_under_own_question(world: World) -> None:
    first = need(world.plan.permission_request, "permission question")
    notes = world.notifications()
    asked_at = next(
        i
        for i, n in enumerate(notes)
        if n["method"] == "permission/requested" and n["params"] == first
    )
    own = session_id(world)
    message = world.wait_for_any(
        ("permission/requested", "turn/ended"),
        lambda p: p.get("sessionId") == own,
        since=asked_at + 1,
    )
    assert message["method"] == "permission/requested", (
        "the turn ended without asking about its second Write, whose call had the id of an "
        "answered one"
    )
    request = message["params"]
    assert request["requestId"] != first["requestId"], (
        f"the second question has the id {request['requestId']} of the question answered "
        "before it: two questions never share one, even when the model gave their calls "
        "one id"
    )
    world.plan.permission_request = request


@then("the Write allowed ran and the Write denied changed nothing")
@verifies("P7")
def allowed_ran_denied_did_not(world: World) -> None:
    writes = [
        (c.call_id, str(c.arguments["path"]))
        for c in world.script.calls
        if c.tool == "Write" and isinstance(c.arguments, dict)
    ]
    results = {
        n["params"]["toolCallId"]: n["params"]
        for n in world.notifications("turn/toolResult", _since(world))
    }
    outcomes: dict[str, str] = {}
    for call_id, path in writes[-2:]:
        outcomes[path] = need(results.get(call_id), f"result of the Write on {path}")["status"]
    assert sorted(outcomes.values()) == ["denied", "ok"], (
        f"one Write was allowed and one denied, but they ended {outcomes}"
    )
    for path, status in outcomes.items():
        written = (world.workspace / path).exists()
        assert written == (status == "ok"), (
            f"the Write on {path} reported {status}, but the file "
            f"{'exists' if written else 'does not exist'}"
        )


@then("the open question still takes the user's answer, denying the call")
@verifies("P7")
def open_question_answered(world: World) -> None:
    request = need(world.plan.permission_request, "permission question")
    response = world.rpc.call(
        "permission/respond", {"requestId": request["requestId"], "decision": "deny"}
    )
    error = response.get("error")
    assert error is None, (
        "the open question no longer takes an answer after a refused answer to another "
        f"question: {error}"
    )


@then(parsers.parse("the {tool} call ran without the user being asked"))
@verifies("P7")
def ran_unasked(world: World, tool: str) -> None:
    found = world.wait_for_any(
        ("permission/requested", "turn/toolResult"),
        lambda p: p.get("tool") == tool,
        since=_since(world),
    )
    assert found["method"] == "turn/toolResult", (
        f"the host asked before the {tool} call: {found['params']}; the session's permission "
        "mode lets it run"
    )
    assert found["params"]["status"] == "ok", f"the {tool} call did not run: {found['params']}"


@then("the user was not asked for permission")
@verifies("P7")
def not_asked(world: World) -> None:
    asked = world.notifications("permission/requested", _since(world))
    assert not asked, f"the host asked before: {[a['params']['tool'] for a in asked]}"


def _result_of(world: World, tool: str) -> dict[str, Any]:
    results: list[dict[str, Any]] = [
        n["params"]
        for n in world.notifications("turn/toolResult", _since(world))
        if n["params"]["tool"] == tool
    ]
    assert len(results) == 1, f"the host reported {len(results)} results for the {tool} call"
    return results[0]


@then(parsers.parse("the {tool} call succeeded"))
@verifies("P7")
def call_succeeded(world: World, tool: str) -> None:
    result = _result_of(world, tool)
    assert result["status"] == "ok" and result["error"] is None, f"the {tool} call: {result}"


@then(parsers.parse("the {tool} call reports that permission was denied"))
@verifies("P7")
def call_permission_denied(world: World, tool: str) -> None:
    result = _result_of(world, tool)
    code = (result.get("error") or {}).get("code")
    assert code == "PERMISSION_DENIED", f"the denied {tool} call reported {code}: {result}"
    assert result["status"] == "denied", (
        f"the denied {tool} call has status {result['status']}, not denied"
    )


@then("the agent has finished the request")
def later_turn_finished(world: World) -> None:
    turn_id = need(world.plan.later_turn_id, "later request")
    ended = world.wait_for("turn/ended", lambda p: p["turnId"] == turn_id, since=world.cursors.turn)
    assert ended["outcome"] == "completed", f"the request ended {ended}"


@then("the project is as it was before")
@verifies("P7")
def project_as_before(world: World) -> None:
    now = snapshot(world.workspace)
    before = world.arranged.workspace_before
    changed = sorted(k for k in set(now) | set(before) if now.get(k) != before.get(k))
    assert not changed, f"the project changed: {changed}"
