"""Steps about approving and rejecting plans and the approval deadline (§3, §4).

Every step that changes an approval is followed, in its Then steps, by reading the
approval back over the protocol and from storage and comparing every recorded field. The
model is scripted turn by turn with no fallback: the Plan turn gets exactly its SubmitPlan
answer, an execution gets what the scenario scripted plus one closing answer, so a host
that asks the model once more than it should is caught by the after-scenario check.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from pytest_bdd import given, parsers, then, when

from conformance.blame import blame, verifies
from conformance.capabilities import require_fault_point
from conformance.explore.model import APPROVAL_TTL_MS
from conformance.mock_provider import StallReply, TextReply
from conformance.protocol_models import ApprovalApproveParams
from conformance.steps.boundaries import _started as turn_reached_model
from conformance.steps.boundaries import plan_still_pending, try_cancel, try_configure, try_prompt
from conformance.steps.common import unchecked
from conformance.steps.model import (
    default_markdown,
    script_calls,
    script_plan,
    submit_plan_call,
    tool_call,
)
from conformance.steps.plan import latest_approval, snapshot
from conformance.steps.requests import (
    ANNOUNCEMENT_GRACE_S,
    announced_alike,
    field_differences,
    granted,
    permission_mode,
    plain,
    read_stably,
    sent_together,
)
from conformance.steps.sessions import (
    _create,
    create_session_in_mode,
    read_session,
    remember_configuration,
    session_id,
    stored_session,
)
from conformance.world import ApprovalSnapshot, Outcome, SubmittedPlan, World, need

PLAN_PROMPT = "Plan the change, then submit it for approval."
CLOSING_TEXT = "The approved plan is carried out."
TIMEOUT_CODE = "PLAN_APPROVAL_TIMEOUT"
_STABLE_READS = 50

# Approval field over the wire -> column of plan_approvals (schema v10).
WIRE_COLUMNS = {
    "approvalId": "id",
    "sessionId": "session_id",
    "turnId": "turn_id",
    "title": "title",
    "question": "question",
    "createdAt": "created_at",
    "expiresAt": "expires_at",
    "status": "status",
    "statusCode": "status_code",
    "decidedAt": "decided_at",
    "permissionMode": "permission_mode",
    "executionId": "execution_id",
    "executionState": "execution_state",
}
ARTIFACT_COLUMNS = {
    "path": "artifact_path",
    "sha256": "artifact_sha256",
    "byteSize": "artifact_bytes",
}


# -- reading back -------------------------------------------------------------------------


def clock_now(world: World) -> int:
    """The host clock."""
    return granted(world.rpc.clock_get).now


def acted_on(world: World) -> dict[str, Any]:
    """The approval the scenario's steps act on."""
    return need(world.plan.approval, "approval awaiting a decision")


def read_approval(world: World, approval_id: str | None = None) -> dict[str, Any]:
    """The approval as the host reports it now (``approval/get``, as the JSON it sent)."""
    wanted = approval_id or acted_on(world)["approvalId"]
    own = session_id(world)
    return read_stably(
        world,
        "approval",
        lambda: plain(granted(world.rpc.get_approval, own, wanted).approval),
        lambda: [plain(a) for a in granted(world.rpc.list_approvals, own).approvals],
    )


def check_announced(world: World, approval: dict[str, Any]) -> None:
    """The approval as read is the one its last approval/updated announced, or one announced
    soon after: every change of status or execution state is announced with the approval
    as it then is (R7.2); judged after the steps."""
    approval_id = approval["approvalId"]
    notes = world.notifications()
    last = next(
        (
            i
            for i in range(len(notes) - 1, -1, -1)
            if notes[i]["method"] == "approval/updated"
            and notes[i]["params"]["approval"]["approvalId"] == approval_id
        ),
        None,
    )
    if last is None:
        world.disagree(f"the approval {approval_id} was never announced by approval/updated")
        return
    announced_alike(world, "approval/updated", "approval", approval, last, approval_id)


def stored_approval(world: World, approval_id: str) -> dict[str, Any]:
    """The approval's row in plan_approvals; a missing row fails the check."""
    rows = world.storage().rows("plan_approvals", "id = ?", (approval_id,))
    assert len(rows) == 1, f"plan_approvals holds {len(rows)} rows with id {approval_id!r}"
    return rows[0]


def storage_differences(approval: dict[str, Any], row: dict[str, Any]) -> list[str]:
    """Every recorded field where storage disagrees with what the protocol says."""
    found = [
        f"{field}: protocol {approval[field]!r}, storage {column} {row[column]!r}"
        for field, column in WIRE_COLUMNS.items()
        if approval[field] != row[column]
    ]
    artifact = approval["artifact"] or {}
    found += [
        f"artifact.{field}: protocol {artifact.get(field)!r}, storage {column} {row[column]!r}"
        for field, column in ARTIFACT_COLUMNS.items()
        if artifact.get(field) != row[column]
    ]
    return found


def read_back(world: World, approval_id: str | None = None) -> dict[str, Any]:
    """The approval over the protocol, checked field by field against its stored row.

    The row is read between two protocol reads. States only move forward, so when both
    reads agree nothing changed in between and the row must say the same; while an
    execution is moving on, the reads are repeated until they agree.
    """
    approval = read_approval(world, approval_id)
    for _ in range(_STABLE_READS):
        row = stored_approval(world, approval["approvalId"])
        again = read_approval(world, approval["approvalId"])
        if again == approval:
            break
        approval = again
    differences = storage_differences(approval, row)
    with blame("R4.3"):
        assert not differences, f"the stored approval disagrees with the protocol: {differences}"
    return approval


def take_snapshot(world: World) -> ApprovalSnapshot:
    """The approval and its session as they are now, with the history positions."""
    approval = read_approval(world)
    return ApprovalSnapshot(
        approval=approval,
        row=stored_approval(world, approval["approvalId"]),
        session=read_session(world),
        session_row=stored_session(world),
        notifications=world.mark(),
        provider_requests=len(world.provider.requests()),
    )


# -- the Plan turn ------------------------------------------------------------------------


def run_plan_turn(
    world: World, text: str, think_ms: int = 0, allow_one_question: bool = False
) -> dict[str, Any]:
    """Prompt the session and wait until that turn ended; return its turn/ended params.

    With ``think_ms`` the model's first answer is held until the harness has moved the
    host clock by that much, so the turn spans a stretch of host time. With
    ``allow_one_question`` the user allows the one call the turn asks about.
    """
    world.arranged.workspace_before = snapshot(world.workspace)
    world.cursors.turn = world.mark()
    world.cursors.provider_turn = len(world.provider.requests())
    world.plan.clock_at_turn_start = clock_now(world)
    world.plan.prompt = text
    turn_id = granted(world.rpc.prompt, session_id(world), text).turnId
    world.plan.turn_id = turn_id
    world.active_turn = turn_id
    if think_ms:
        world.provider.wait_for_requests(world.cursors.provider_turn + 1, world.timeout)
        granted(world.rpc.clock_advance, think_ms)
        world.provider.release_stalls()
    if allow_one_question:
        asked = world.wait_for(
            "permission/requested", lambda p: p["turnId"] == turn_id, since=world.cursors.turn
        )
        granted(world.rpc.respond_permission, asked["requestId"], "allow")
    ended = world.wait_for("turn/ended", lambda p: p["turnId"] == turn_id, since=world.cursors.turn)
    world.last_turn_end = ended
    return ended


def _plan_session(world: World) -> None:
    if "main" not in world.sessions:
        create_session_in_mode(world, "Plan")
    elif world.sessions["main"]["mode"] != "plan":
        granted(world.rpc.configure_session, session_id(world), mode="plan")


def _await_plan(
    world: World, think_ms: int = 0, allow_one_question: bool = False
) -> dict[str, Any]:
    """Run the Plan turn that submits the scripted plan; the approval it created."""
    ended = run_plan_turn(world, PLAN_PROMPT, think_ms, allow_one_question)
    assert ended["outcome"] == "completed", f"the Plan turn ended {ended}"
    turn_id = world.plan.turn_id
    listed = granted(world.rpc.list_approvals, session_id(world)).approvals
    made = [plain(a) for a in listed if a.turnId == turn_id]
    assert len(made) == 1, f"the Plan turn {turn_id} made {len(made)} approvals: {made}"
    approval = made[0]
    assert approval["status"] == "pending", f"the plan is not pending: {approval}"
    world.plan.approval = approval
    world.plan.at_creation = dict(approval)
    world.plan.clock_at_creation = clock_now(world)
    world.cursors.approve = world.mark()
    world.cursors.provider_approve = len(world.provider.requests())
    return approval


@given(parsers.parse('a plan titled "{title}" is awaiting approval'))
def plan_awaiting(world: World, title: str) -> None:
    _plan_session(world)
    script_plan(world, title, default_markdown(title))
    _await_plan(world)


@given(parsers.parse('the user allowed the command "{command}" while the model planned "{title}"'))
def allowed_while_planning(world: World, command: str, title: str) -> None:
    _plan_session(world)
    script_calls(world, tool_call(world, "Bash", {"command": command}), answer=None)
    script_plan(world, title, default_markdown(title))
    _await_plan(world, allow_one_question=True)


@given(
    parsers.parse(
        'the model started a new context summarised as "{summary}" and submitted a plan '
        'titled "{title}"'
    )
)
def reset_then_planned(world: World, summary: str, title: str) -> None:
    _plan_session(world)
    script_calls(world, tool_call(world, "new_context", {"summary": summary}), answer=None)
    script_plan(world, title, default_markdown(title))
    _await_plan(world)


@given(parsers.parse('the model spent {minutes:d} minutes preparing a plan titled "{title}"'))
def plan_prepared_slowly(world: World, minutes: int, title: str) -> None:
    _plan_session(world)
    markdown = default_markdown(title)
    world.provider.enqueue(StallReply(calls=(submit_plan_call(title, markdown),)))
    world.plan.submitted.append(SubmittedPlan(title, markdown, "Shall I go ahead?"))
    _await_plan(world, think_ms=minutes * 60_000)


@given(parsers.parse('the model submitted a new plan titled "{title}"'))
@when(parsers.parse('the model submits a new plan titled "{title}"'))
def new_plan_submitted(world: World, title: str) -> None:
    script_plan(world, title, default_markdown(title))
    world.plan.before_action = None
    _await_plan(world)


@when("the user asks the agent for a new plan")
def ask_for_new_plan(world: World) -> None:
    world.plan.before_action = None
    _await_plan(world)


@when("the user tries to ask for another plan")
def try_another_plan(world: World) -> None:
    world.cursors.turn = world.mark()
    world.attempt_typed(world.rpc.prompt, session_id(world), PLAN_PROMPT)


_AS_SUBMITTED: Final[dict[str, Callable[[World], None]]] = {
    "send another prompt": try_prompt,
    "change the permission mode": lambda world: try_configure(world, "permission mode"),
    "cancel": try_cancel,
}


@when(parsers.parse("the moment the plan is submitted the user tries to {request}"))
def request_as_plan_submitted(world: World, request: str) -> None:
    """The request goes out as soon as the plan's pending ``approval/updated`` arrives,
    while the Plan turn that submitted it may still be ending: the contract lets the host
    answer that with SESSION_BUSY or APPROVAL_PENDING, and with nothing else."""
    title = "Submitted just now"
    script_plan(world, title, default_markdown(title))
    remember_configuration(world)
    world.cursors.turn = world.mark()
    world.cursors.provider_turn = len(world.provider.requests())
    turn_id = granted(world.rpc.prompt, session_id(world), PLAN_PROMPT).turnId
    world.plan.turn_id = turn_id
    submitted = world.wait_for(
        "approval/updated", lambda p: p["approval"]["turnId"] == turn_id, since=world.cursors.turn
    )
    _AS_SUBMITTED[request](world)
    world.plan.approval = submitted["approval"]


@then("once the Plan turn has ended the plan still awaits the user's decision")
def pending_once_turn_ended(world: World) -> None:
    turn_id = need(world.plan.turn_id, "the Plan turn")
    ended = world.wait_for("turn/ended", lambda p: p["turnId"] == turn_id, since=world.cursors.turn)
    assert ended["outcome"] == "completed", f"the Plan turn that submitted the plan ended {ended}"
    plan_still_pending(world)


# -- decisions ----------------------------------------------------------------------------


def _mark_action(world: World) -> None:
    world.cursors.approve = world.cursors.decision = world.mark()
    world.cursors.provider_approve = world.cursors.provider_decision = len(
        world.provider.requests()
    )
    world.arranged.workspace_before = snapshot(world.workspace)
    world.plan.clock_at_decision = clock_now(world)


def _approval_ref(world: World) -> dict[str, str]:
    """The approval acted on, for params a step builds by hand on purpose."""
    return {"sessionId": session_id(world), "approvalId": acted_on(world)["approvalId"]}


def _unchecked(world: World, method: str, params: dict[str, Any]) -> Outcome:
    """Send a request the contract forbids, on purpose, and record the outcome."""
    _mark_action(world)
    return unchecked(world, method, params)


def _close_execution(world: World) -> None:
    """Script the model's last answer of the execution, unless a step already did."""
    if world.plan.closing_scripted or world.provider.pending_replies():
        # a step already scripted what the model says in the execution
        world.plan.closing_scripted = False
        return
    world.provider.enqueue(TextReply(CLOSING_TEXT))


def approve(world: World, mode: str) -> Outcome:
    """Approve the current plan with ``mode``; remember where notifications start."""
    _close_execution(world)
    _mark_action(world)
    approval_id, chosen = acted_on(world)["approvalId"], permission_mode(mode)
    outcome = world.attempt_typed(world.rpc.approve, session_id(world), approval_id, chosen)
    if outcome.error is None:
        world.plan.approved = outcome.result
    return outcome


@when(parsers.parse("the user approves the plan with permission mode {mode}"))
def approve_step(world: World, mode: str) -> None:
    approve(world, mode)


@given(parsers.parse("the user approved the plan with permission mode {mode}"))
def approved_step(world: World, mode: str) -> None:
    approve(world, mode).require_result()  # a refusal is the host's failure, not the harness's


@given(parsers.parse('the revised plan titled "{title}" is the one awaiting approval'))
def revision_awaits(world: World, title: str) -> None:
    latest = latest_approval(world)
    assert (latest["title"], latest["status"]) == (title, "pending"), (
        f"the newest approval is {latest['title']!r}, {latest['status']}"
    )
    world.plan.approval = latest


@given("the user rejected the plan")
def rejected(world: World) -> None:
    if world.plan.approval is None or read_approval(world)["status"] != "pending":
        # a plan the planning steps asked for, after any the scenario decided already
        world.plan.approval = latest_approval(world)
    _mark_action(world)
    approval_id = acted_on(world)["approvalId"]
    world.attempt_typed(world.rpc.reject, session_id(world), approval_id).require_result()


@when("the user approves the plan without choosing a permission mode")
def approve_without_mode(world: World) -> None:
    _unchecked(world, "approval/approve", _approval_ref(world))


@when("the user approves the plan with an empty permission mode")
def approve_with_null_mode(world: World) -> None:
    _unchecked(world, "approval/approve", {**_approval_ref(world), "permissionMode": None})


@given("the user tried to approve the plan without choosing a permission mode")
def tried_approve_without_mode(world: World) -> None:
    outcome = _unchecked(world, "approval/approve", _approval_ref(world))
    assert outcome.error is not None, f"the host approved a plan without a mode: {outcome}"


@when(parsers.parse('the user approves the plan with the permission mode "{mode}"'))
def approve_unknown_mode(world: World, mode: str) -> None:
    _unchecked(world, "approval/approve", {**_approval_ref(world), "permissionMode": mode})


@when(parsers.parse('the user rejects the plan with the feedback "{feedback}"'))
def reject_with_feedback(world: World, feedback: str) -> None:
    _unchecked(world, "approval/reject", {**_approval_ref(world), "feedback": feedback})


@when(parsers.parse("the user rejects the plan choosing permission mode {mode}"))
def reject_with_mode(world: World, mode: str) -> None:
    _unchecked(world, "approval/reject", {**_approval_ref(world), "permissionMode": mode})


@when("the user asks for changes to the plan")
def request_changes(world: World) -> None:
    _unchecked(world, "approval/requestChanges", {**_approval_ref(world), "feedback": "More."})


@when(parsers.parse("the user approves the plan twice at once with permission mode {mode}"))
def approve_twice(world: World, mode: str) -> None:
    params = ApprovalApproveParams(
        sessionId=session_id(world),
        approvalId=acted_on(world)["approvalId"],
        permissionMode=permission_mode(mode),
    )
    _close_execution(world)
    _mark_action(world)
    world.plan.concurrent_responses = sent_together(world, "approval/approve", [params] * 2)


@when(
    parsers.re(
        r"a stale client (?P<request>approves|rejects) the (?P<which>plan|first plan)"
        r"(?: with permission mode (?P<mode>ask|accept-edits|auto))?$"
    )
)
def stale_action(world: World, request: str, which: str, mode: str | None) -> None:
    if which == "first plan":  # by title: the list's order among equal createdAt is open
        title = world.plan.submitted[0].title
        listed = granted(world.rpc.list_approvals, session_id(world)).approvals
        first = [a for a in listed if a.title == title]
        assert len(first) == 1, f"expected one approval titled {title!r}: {listed}"
        world.plan.approval = plain(first[0])
    world.plan.before_action = take_snapshot(world)
    _mark_action(world)
    approval_id = acted_on(world)["approvalId"]
    if request == "approves":
        chosen = permission_mode(mode or "ask")
        world.attempt_typed(world.rpc.approve, session_id(world), approval_id, chosen)
    else:
        world.attempt_typed(world.rpc.reject, session_id(world), approval_id)


@given("the host will fail to commit the next approval")
def arm_commit_fault(world: World) -> None:
    require_fault_point(world, "approvalCommit")
    granted(world.rpc.arm_fault, "approvalCommit")


@given("the host was told a second time to fail the next approval")
def arm_commit_fault_again(world: World) -> None:
    granted(world.rpc.arm_fault, "approvalCommit")


@given(parsers.parse("approving the plan with permission mode {mode} failed"))
def approve_failed(world: World, mode: str) -> None:
    outcome = approve(world, mode)
    answered = "ok" if outcome.error is None else outcome.error.canonical
    with blame("R4.6"):
        assert answered == "INTERNAL_ERROR", (
            f"the approve with the commit failure armed was answered {answered}, not "
            "INTERNAL_ERROR: faults at different points are armed apart, and arming another "
            "leaves this one armed"
        )


@then("the plan can be approved at the next attempt")
@verifies("R4.6")
def approved_at_next_attempt(world: World) -> None:
    outcome = approve(world, "ask")
    assert outcome.error is None, (
        f"the approve after the failed one was refused with {outcome.error.canonical}: a fault "
        "armed twice fires once, as one armed once does"
    )
    _approved_and_done(world, "ask")


# -- time ---------------------------------------------------------------------------------


@when(parsers.parse("{minutes:d} minutes pass"))
@given(parsers.parse("{minutes:d} minutes passed"))
def minutes_pass(world: World, minutes: int) -> None:
    granted(world.rpc.clock_advance, minutes * 60_000)


# 2001-09-09T01:46:40Z: the moment the count of milliseconds since 1970 gains its 13th digit
_ROUND_SECOND_MS = 1_000_000_000_000


@given("the host clock was set ten thousand years ahead")
def clock_far_ahead(world: World) -> None:
    # past the year 9999, where many date libraries stop; the contract's clock goes on
    now = granted(world.rpc.clock_get).now
    granted(world.rpc.clock_set, now + 10_000 * 365 * 86_400_000)


@given("the host clock was set to 9 September 2001, a minute before 01:46:40 UTC")
def clock_before_round_second(world: World) -> None:
    granted(world.rpc.clock_set, _ROUND_SECOND_MS - 60_000)


_OFFSETS = {"one millisecond before": -1, "exactly": 0, "one millisecond after": 1}


@when(parsers.parse("the clock reaches {offset} the deadline"))
@given(parsers.parse("the clock reached {offset} the deadline"))
def clock_near_deadline(world: World, offset: str) -> None:
    target = _created(world)["expiresAt"] + _OFFSETS[offset]
    granted(world.rpc.clock_set, target)


@given("another session's turn is under way")
def other_session_busy(world: World) -> None:
    _create(world, "other", mode="agent").require_result()
    world.provider.enqueue(StallReply())
    turn_reached_model(world, "other", "Keep working on the other part.")


@given("the client reloads and reads the approval again")
@when("the client reloads and reads the approval again")
def reload(world: World) -> None:
    world.plan.reloaded = None
    sessions = granted(world.rpc.list_sessions).sessions
    with blame("C2"):
        listed = [s for s in sessions if s.sessionId == session_id(world)]
        assert listed, "after the reload the host does not list the session"
        pending = listed[0].pendingApprovalId
        assert pending, "after the reload the session shows no pending approval"
        reloaded = granted(world.rpc.get_approval, session_id(world), pending).approval
        world.plan.reloaded = plain(reloaded)
        assert world.plan.reloaded["approvalId"] == acted_on(world)["approvalId"], (
            f"after the reload the session shows another approval: {world.plan.reloaded}"
        )


def _created(world: World) -> dict[str, Any]:
    """The approval as it was when the host created it."""
    return need(world.plan.at_creation, "approval seen at creation")


# -- checks: the approval -----------------------------------------------------------------


_STATUS = r"(?P<status>pending|approved|rejected|expired|interrupted)"


@then(parsers.re(rf"the approval is {_STATUS}$"))
@verifies("R4.4")
def approval_status(world: World, status: str) -> None:
    approval = read_back(world)
    assert approval["status"] == status, f"the approval is {approval['status']}, not {status}"


@then("the approval shows its title, question, artifact, absolute expiry and status")
@verifies("R3.1")
def approval_card(world: World) -> None:
    submitted = world.plan.submitted[-1]
    approval = read_approval(world)
    approvals = granted(world.rpc.list_approvals, session_id(world)).approvals
    listed = [plain(a) for a in approvals if a.approvalId == approval["approvalId"]]
    assert listed == [approval], f"approval/list and approval/get disagree: {listed} {approval}"
    assert approval["title"] == submitted.title, f"the title is {approval['title']!r}"
    assert approval["question"] == submitted.question, f"the question is {approval['question']!r}"
    assert approval["artifact"]["path"].startswith(".pi/plan/"), approval["artifact"]
    assert approval["status"] == "pending", f"the approval is {approval['status']}"
    created = need(world.plan.clock_at_creation, "clock at creation")
    assert approval["expiresAt"] == created + APPROVAL_TTL_MS, (
        f"expiresAt {approval['expiresAt']} is not the absolute time 30 minutes after the "
        f"host created the approval ({created + APPROVAL_TTL_MS})"
    )
    assert approval["turnId"] == world.plan.turn_id, (
        f"the approval names turn {approval['turnId']}, not the Plan turn {world.plan.turn_id}"
    )
    undecided = {
        k: approval[k]
        for k in ("statusCode", "decidedAt", "permissionMode", "executionId", "executionState")
    }
    assert not any(v is not None for v in undecided.values()), f"a pending approval has {undecided}"
    session = read_session(world)
    assert session["pendingApprovalId"] == approval["approvalId"], session
    with blame("R7.2"):
        # the contract gives the announcement no order with turn/ended or other answers
        try:
            world.wait_for(
                "approval/updated", lambda p: p["approval"]["approvalId"] == approval["approvalId"]
            )
        except TimeoutError:
            raise AssertionError("the new approval was never announced to the client") from None
        announced = [
            n["params"]["approval"]
            for n in world.notifications("approval/updated")
            if n["params"]["approval"]["approvalId"] == approval["approvalId"]
        ]
        assert announced[-1] == approval, (
            f"the announced approval differs from the one read back: {announced[-1]} {approval}"
        )


@then("the approval is recorded the same way in storage")
@verifies("R3.1")
def recorded_in_storage(world: World) -> None:
    read_back(world)


@then("the approval and the session are unchanged")
@verifies("R4.6")
def nothing_changed(world: World) -> None:
    approval = read_back(world)
    created = _created(world)
    changed = {k: (created[k], approval[k]) for k in created if approval[k] != created[k]}
    assert not changed, f"the approval changed: {changed}"
    session = read_session(world)
    assert session["mode"] == "plan", f"the session left Plan: {session['mode']}"
    before = world.sessions["main"]["permissionMode"]
    assert session["permissionMode"] == before, f"permission mode changed to {session}"
    assert session["pendingApprovalId"] == approval["approvalId"], session
    assert session["activeExecutionId"] is None, session
    row = stored_session(world)
    assert row["mode"] == "plan", f"storage shows the session in {row['mode']}"
    assert row["permission_mode"] == before, f"storage shows the session with {row}"


@then("the approval is unchanged")
@verifies("R4.4")
def approval_unchanged(world: World) -> None:
    before = need(world.plan.before_action, "approval read before the action")
    approval = read_back(world)
    changed = {
        k: (before.approval[k], approval[k]) for k in approval if approval[k] != before.approval[k]
    }
    assert not changed, f"the approval changed (before, after): {changed}"
    row = stored_approval(world, approval["approvalId"])
    assert row == before.row, f"the stored approval changed from {before.row} to {row}"


@then("the session is unchanged")
@verifies("R4.4")
def session_unchanged(world: World) -> None:
    before = need(world.plan.before_action, "session read before the action")
    session = read_session(world)
    fields = ("mode", "permissionMode", "pendingApprovalId", "activeExecutionId")
    changed = {
        k: (before.session[k], session[k]) for k in fields if session[k] != before.session[k]
    }
    assert not changed, f"the session changed (before, after): {changed}"
    row = stored_session(world)
    for column in ("mode", "permission_mode"):
        assert row[column] == before.session_row[column], f"the stored session changed: {row}"


@then("the plan was rejected all the same")
@verifies("R4.6")
def rejected_despite_fault(world: World) -> None:
    # approvalCommit fails the next approve's transaction; "a reject is not affected"
    if world.outcome.error is not None:
        raise AssertionError(
            f"with a failure armed for the next approval, the rejection failed: "
            f"{world.outcome.error}"
        )
    approval = read_approval(world)
    assert approval["status"] == "rejected", f"the plan is {approval['status']}"


@then("the approval selects no permission mode and no execution")
@verifies("R3.6")
def approval_without_mode(world: World) -> None:
    approval = read_approval(world)
    mode = approval["permissionMode"]
    assert mode is None, f"the approval selects permission mode {mode}: {approval}"
    assert approval["executionId"] is None and approval["executionState"] is None, approval
    read_back(world)


@then(parsers.parse("the approval records permission mode {mode} and an execution"))
@verifies("R4.6", "P14", "R3.8")
def approval_records_execution(world: World, mode: str) -> None:
    refused = world.outcome.error
    approval = read_back(world)
    assert refused is None, (
        f"the approve was refused with {refused.canonical} ({refused}); the approval is "
        f"{approval['status']}"
    )
    assert approval["status"] == "approved", f"the approval is {approval['status']}"
    assert approval["permissionMode"] == mode, f"the approval records {approval['permissionMode']}"
    assert approval["executionId"], f"the approval records no execution: {approval}"
    state = approval["executionState"]
    assert state in ("queued", "running", "completed"), f"the execution is {state}"
    session = read_session(world)
    if session["activeExecutionId"] != approval["executionId"]:
        # The execution may have ended since: then it must say so.
        ended = read_back(world)["executionState"]
        assert ended in ("completed", "interrupted"), (
            f"the execution is {ended}, yet the session shows active execution "
            f"{session['activeExecutionId']}"
        )


@then("the approval was decided at the moment of the decision")
@verifies("R4.4")
def decided_now(world: World) -> None:
    approval = read_back(world)
    # The host clock moves only when the harness moves it: when the decision was sent by a
    # step that did not note the time, the clock still reads what it read then.
    expected = world.plan.clock_at_decision or clock_now(world)
    assert approval["decidedAt"] == expected, (
        f"decidedAt is {approval['decidedAt']}, but the host clock read {expected} when the "
        "user decided"
    )
    assert approval["decidedAt"] != approval["createdAt"], "decidedAt repeats createdAt"


@then("the approval answers with the approved plan and the session")
@verifies("R7.2")
def approve_answer(world: World) -> None:
    result = world.outcome.require_result()
    answered = result["approval"]
    assert answered["status"] == "approved", f"the approve response shows {answered['status']}"
    assert answered["executionId"], f"the approve response shows no execution: {answered}"
    with blame("R4.6"):
        assert answered["executionState"] == "queued", (
            f"the approve response shows the execution {answered['executionState']}, not queued"
        )
    approval = read_back(world)
    for field in ("approvalId", "executionId", "permissionMode", "decidedAt", "createdAt"):
        assert answered[field] == approval[field], (
            f"the approve response shows {field} {answered[field]!r}, the host then reports "
            f"{approval[field]!r}"
        )
    with blame("C4"):
        session = result["session"]
        assert session["mode"] == "agent", f"the approve response shows the session {session}"
        assert session["permissionMode"] == answered["permissionMode"], (
            f"the approve response shows the session with permission mode "
            f"{session['permissionMode']}"
        )
        # the approval switched the session atomically: no announcement of it after the
        # approve can show the session as it was before
        announced = world.wait_for(
            "session/updated",
            lambda p: p["session"]["sessionId"] == session_id(world),
            since=world.cursors.approve,
        )["session"]
        shown = (announced["mode"], announced["permissionMode"])
        assert shown == ("agent", answered["permissionMode"]), (
            f"after the approve the session was first announced in mode {shown[0]} with "
            f"permission mode {shown[1]}, not as the approve left it"
        )


@then("the rejection answers with the rejected plan")
@verifies("R7.2")
def reject_answer(world: World) -> None:
    answered = world.outcome.require_result()["approval"]
    assert answered["status"] == "rejected", f"the reject response shows {answered['status']}"
    approval = read_back(world)
    assert answered == approval, f"the reject response {answered} differs from {approval}"
    announced = world.wait_for(
        "approval/updated",
        lambda p: (
            p["approval"]["approvalId"] == approval["approvalId"]
            and p["approval"]["status"] == "rejected"
        ),
    )["approval"]
    shown, held = field_differences(announced, approval)
    assert not shown, (
        f"the rejection was announced with {shown}; approval/get and storage hold {held}"
    )


# -- checks: the deadline -----------------------------------------------------------------


@then("the approval was created when the model submitted the plan")
@verifies("R3.9")
def created_at_submission(world: World) -> None:
    approval = _created(world)
    started = need(world.plan.clock_at_turn_start, "clock at the start of the Plan turn")
    submitted = need(world.plan.clock_at_creation, "clock at creation")
    assert approval["createdAt"] == submitted, (
        f"createdAt is {approval['createdAt']}, but the host clock read {submitted} when the "
        f"model submitted the plan (the Plan turn started at {started})"
    )
    row = stored_approval(world, approval["approvalId"])
    assert row["created_at"] == submitted, f"stored created_at is {row['created_at']}"


@then("the approval expires 30 minutes after the host created it")
@verifies("R3.9")
def expires_in_30(world: World) -> None:
    approval = _created(world)
    clock = world.plan.clock_at_creation
    assert approval["createdAt"] == clock, (
        f"createdAt {approval['createdAt']} is not the host clock {clock}"
    )
    delta = approval["expiresAt"] - approval["createdAt"]
    assert delta == APPROVAL_TTL_MS, f"the deadline is {delta} ms after creation"
    row = stored_approval(world, approval["approvalId"])
    assert row["expires_at"] == approval["expiresAt"], f"stored expires_at {row['expires_at']}"
    assert row["created_at"] == approval["createdAt"], f"stored created_at {row['created_at']}"


@then("the deadline is unchanged")
@verifies("R3.10", "R3.12")
def deadline_unchanged(world: World) -> None:
    first = _created(world)["expiresAt"]
    seen = world.plan.reloaded or read_approval(world)
    assert seen["expiresAt"] == first, f"the deadline moved from {first} to {seen['expiresAt']}"
    row = stored_approval(world, _created(world)["approvalId"])
    assert row["expires_at"] == first, f"the stored deadline moved to {row['expires_at']}"


def _announced_expiry(world: World, approval_id: str) -> dict[str, Any] | None:
    for note in world.notifications("approval/updated"):
        approval: dict[str, Any] = note["params"]["approval"]
        if approval["approvalId"] == approval_id and approval["status"] == "expired":
            return approval
    return None


def _await_expiry(world: World) -> dict[str, Any]:
    """The approval/updated that announced the expiry, waiting for it if need be; no read
    of the approval is made, so only a host that expires it by itself passes."""
    created = _created(world)
    approval_id = created["approvalId"]
    found = _announced_expiry(world, approval_id)
    # A clock move answered at or past the deadline has fired it by then (P32): no wait.
    moves = world.client.clock_moves if world.client is not None else []
    passed = bool(moves) and moves[-1][0] >= created["expiresAt"]
    if found is None and passed:  # one round trip shows an expiry announced after the answer
        granted(world.rpc.clock_get)
        found = _announced_expiry(world, approval_id)
    if found is None and not passed:
        try:
            found = world.wait_for(
                "approval/updated",
                lambda p: (
                    p["approval"]["approvalId"] == approval_id
                    and p["approval"]["status"] == "expired"
                ),
            )["approval"]
        except TimeoutError:
            found = None
    row = stored_approval(world, approval_id)
    if found is None and passed and row["status"] == "expired":
        with blame("P32"):
            raise AssertionError(
                "the expiry was announced after the answer to the clock move that made it "
                "due, or not at all: storage shows the approval expired, and no "
                "approval/updated announced it by the next answer"
            )
    assert found is not None, (
        "the deadline passed but no expiry was announced: the host did not expire the "
        f"approval by itself (storage shows it {row['status']})"
    )
    assert row["status"] == "expired", (
        f"the expiry was announced but storage still shows the approval {row['status']}"
    )
    return found


def _announced_before_clock_answer(world: World, announced: dict[str, Any]) -> None:
    """A clock move that makes the deadline due answers after the expiry's notification."""
    answered = world.clock_reached(announced["expiresAt"])
    if answered is None:
        return
    index = next(
        i
        for i, note in enumerate(world.notifications())
        if note["method"] == "approval/updated"
        and note["params"]["approval"]["approvalId"] == announced["approvalId"]
        and note["params"]["approval"]["status"] == "expired"
    )
    assert index < answered, (
        "the expiry was announced after the answer to the clock move that made it due; "
        "a timer's notifications come before that answer"
    )
    # The session/updated that shows the session freed of the expired plan is a timer's
    # notification too. One never sent is judged elsewhere (the session's reads against its
    # announcements, R7.2; a session still holding the plan, R3.11): here, only its order.
    pending_from = _first_announced_pending(world.notifications(), announced["approvalId"])

    def freed(params: dict[str, Any]) -> bool:
        session = params["session"]
        return bool(
            session["sessionId"] == announced["sessionId"]
            and session["pendingApprovalId"] != announced["approvalId"]
        )

    try:
        world.wait_for(
            "session/updated", freed, since=pending_from + 1, timeout=ANNOUNCEMENT_GRACE_S
        )
    except TimeoutError:
        return
    first_freed = next(
        i
        for i, note in enumerate(world.notifications())
        if i > pending_from and note["method"] == "session/updated" and freed(note["params"])
    )
    assert first_freed < answered, (
        "the session whose plan expired was announced without its pending approval only "
        "after the answer to the clock move that made the deadline due; a timer's "
        "notifications, the session/updated of the change it makes included, come before "
        "that answer (R7.2)"
    )


def _first_announced_pending(notes: list[dict[str, Any]], approval_id: str) -> int:
    return next(
        (
            i
            for i, note in enumerate(notes)
            if note["method"] == "session/updated"
            and note["params"]["session"]["pendingApprovalId"] == approval_id
        ),
        -1,
    )


@then("the host announced the expiry on its own")
@verifies("R3.11")
def expiry_announced(world: World) -> None:
    announced = _await_expiry(world)
    assert announced["statusCode"] == TIMEOUT_CODE, f"the expiry was announced with {announced}"
    with blame("P32"):
        _announced_before_clock_answer(world, announced)
    # the announcement carries the record as it now is, every field (judged at the end)
    shown, held = field_differences(announced, read_back(world, announced["approvalId"]))
    if shown:
        world.disagree(
            f"the expiry was announced with {shown}; approval/get and storage hold {held}"
        )


@then("the plan of the other session expired on its own")
@verifies("R3.11")
def other_plan_expired(world: World) -> None:
    cause = "deciding this session's plan of the same moment kept the other from expiring"
    _plan_expired_on_its_own(world, "other", "the other session", cause)


@then("the first session's plan expired on its own")
@verifies("R3.11")
def first_plan_expired(world: World) -> None:
    cause = "the plan another session of the project submitted at that moment kept it waiting"
    _plan_expired_on_its_own(world, "main", "the first session", cause)


def _plan_expired_on_its_own(world: World, alias: str, whose: str, cause: str) -> None:
    # The clock move that reached the deadline made the expiry due, and a timer's work comes
    # before the clock's answer (P32): no wait is needed.
    session = world.sessions[alias]["sessionId"]
    listed = world.rpc.request("approval/list", {"sessionId": session})["approvals"]
    assert listed, f"the host lists no approval for {whose}"
    shown = listed[-1]
    assert (shown["status"], shown["statusCode"]) == ("expired", TIMEOUT_CODE), (
        f"at its deadline {whose}'s plan reads {shown['status']} with "
        f"{shown['statusCode']}: {cause}"
    )
    announced = [
        n
        for n in world.notifications("approval/updated")
        if n["params"]["approval"]["approvalId"] == shown["approvalId"]
        and n["params"]["approval"]["status"] == "expired"
    ]
    assert announced, f"{whose}'s plan expired without an announcement"


@then("the plan of the other session, submitted later, still waits for approval")
@verifies("R3.11")
def other_plan_waits(world: World) -> None:
    other = world.sessions["other"]["sessionId"]
    listed = world.rpc.request("approval/list", {"sessionId": other})["approvals"]
    assert listed, "the host lists no approval for the other session"
    approval = listed[-1]
    assert approval["status"] == "pending", (
        f"the other session's plan is {approval['status']} before its own deadline"
    )
    session = world.rpc.request("session/get", {"sessionId": other})["session"]
    assert session["pendingApprovalId"] == approval["approvalId"], (
        f"the other session no longer names its waiting plan as pending: {session}"
    )


@then("the approval expired with PLAN_APPROVAL_TIMEOUT")
@verifies("R3.11")
def expired_with_timeout(world: World) -> None:
    announced = _await_expiry(world)
    approval = read_back(world)
    assert approval["status"] == "expired", f"the approval is {approval['status']}"
    assert approval["statusCode"] == TIMEOUT_CODE, f"the expiry is recorded as {approval}"
    assert announced["statusCode"] == TIMEOUT_CODE, f"the expiry was announced as {announced}"
    with blame("R3.8"):
        assert approval["permissionMode"] is None and approval["executionId"] is None, approval
    session = read_session(world)
    assert session["pendingApprovalId"] is None, f"the session still waits: {session}"


@then("the plan still expires at its original deadline")
@verifies("R3.10", "R3.12")
def still_expires(world: World) -> None:
    deadline = _created(world)["expiresAt"]
    world.cursors.approve = world.mark()
    granted(world.rpc.clock_set, deadline)
    approval_id = _created(world)["approvalId"]
    row = stored_approval(world, approval_id)
    announced = _announced_expiry(world, approval_id)
    if announced is None:
        try:
            world.wait_for(
                "approval/updated",
                lambda p: (
                    p["approval"]["approvalId"] == approval_id
                    and p["approval"]["status"] == "expired"
                ),
                since=world.cursors.approve,
            )
        except TimeoutError:
            row = stored_approval(world, approval_id)
            raise AssertionError(
                f"at the original deadline {deadline} the plan did not expire: it was extended "
                f"(storage shows it {row['status']}, expiring at {row['expires_at']})"
            ) from None
        row = stored_approval(world, approval_id)
    assert row["status"] == "expired", f"at the original deadline storage shows {row}"


# -- checks: executions and the provider --------------------------------------------------


def _settle(world: World) -> None:
    """A round trip: the host has handled everything sent before (the decision's answer
    came back already; this orders a read after any work it started synchronously)."""
    granted(world.rpc.get_session, session_id(world))


@then("no execution was started")
@verifies("R3.8")
def no_execution(world: World) -> None:
    _settle(world)
    before = world.plan.before_action
    since = before.notifications if before else world.cursors.approve
    requests = before.provider_requests if before else world.cursors.provider_approve
    known = {before.row["execution_id"]} - {None} if before else set()
    stored = {
        r["execution_id"] for r in world.storage().rows("plan_approvals") if r["execution_id"]
    }
    assert stored <= known, f"storage records executions {sorted(stored - known)}"
    announced = world.notifications("execution/updated", since)
    assert not announced, f"an execution was announced: {announced}"
    kinds = [n["params"]["kind"] for n in world.notifications("turn/started", since)]
    assert "execution" not in kinds, f"turns were started: {kinds}"
    made = len(world.provider.requests()) - requests
    assert made == 0, f"the model was asked {made} time(s) although nothing was approved"
    session = read_session(world)
    assert session["activeExecutionId"] in known | {None}, session


@then(parsers.parse("the session switched to Agent mode with permission mode {permission}"))
@verifies("R4.6")
def session_switched(world: World, permission: str) -> None:
    session_mode_and_permission(world, "Agent", permission)


@then(parsers.parse("the session is in {mode} mode with permission mode {permission}"))
def session_mode_and_permission(world: World, mode: str, permission: str) -> None:
    session = read_session(world)
    expected = {"Agent": "agent", "Plan": "plan"}[mode]
    assert session["mode"] == expected, f"the session is in {session['mode']} mode"
    assert session["permissionMode"] == permission, (
        f"permission mode is {session['permissionMode']}"
    )
    row = stored_session(world)
    assert row["mode"] == expected and row["permission_mode"] == permission, (
        f"storage shows the session in {row['mode']} with permission mode {row['permission_mode']}"
    )


@then("the session's permission mode is unchanged")
@verifies("R3.6")
def permission_unchanged(world: World) -> None:
    before = world.sessions["main"]["permissionMode"]
    found = read_session(world)["permissionMode"]
    assert found == before, f"the session's permission mode changed from {before} to {found}"
    row = stored_session(world)
    assert row["permission_mode"] == before, f"storage shows the session with {row}"


@then("exactly one of the two approvals succeeded")
@verifies("R4.4")
def one_of_two(world: World) -> None:
    responses = world.plan.concurrent_responses
    succeeded = [r for r in responses if "result" in r]
    failed = [r for r in responses if "error" in r]
    assert len(succeeded) == 1, f"{len(succeeded)} approvals succeeded: {responses}"
    code = failed[0]["error"]["data"]["code"]
    assert code == "APPROVAL_NOT_PENDING", f"the second approval failed with {code}"
    world.outcome = Outcome(result=succeeded[0]["result"])
    world.plan.approved = succeeded[0]["result"]


@then("exactly one execution ran")
@verifies("R4.9")
def one_execution(world: World) -> None:
    approval = need(world.plan.approved, "approve result")["approval"]
    execution_id = approval["executionId"]
    world.wait_for(
        "execution/updated",
        lambda p: p["executionId"] == execution_id and p["executionState"] == "completed",
        since=world.cursors.approve,
    )
    _settle(world)
    announced = {
        n["params"]["executionId"]
        for n in world.notifications("execution/updated", world.cursors.approve)
    }
    assert announced == {execution_id}, f"executions announced: {sorted(announced)}"
    turns = [
        n["params"]
        for n in world.notifications("turn/started", world.cursors.approve)
        if n["params"]["kind"] == "execution"
    ]
    assert len(turns) == 1, f"{len(turns)} execution turns started: {turns}"
    stored = [r for r in world.storage().rows("plan_approvals") if r["execution_id"]]
    assert [r["execution_id"] for r in stored] == [execution_id], f"storage records {stored}"
    runs = world.storage().rows("turns", "kind = 'execution'")
    assert len(runs) == 1, f"storage records {len(runs)} execution turns"


@then(parsers.parse('only the plan titled "{title}" is awaiting approval'))
@verifies("R4.8")
def only_one_pending(world: World, title: str) -> None:
    _settle(world)
    approvals = granted(world.rpc.list_approvals, session_id(world)).approvals
    pending = [a for a in approvals if a.status == "pending"]
    assert [a.title for a in pending] == [title], f"pending approvals: {pending}"
    rows = world.storage().rows("plan_approvals", "status = 'pending'")
    assert [r["title"] for r in rows] == [title], f"storage holds pending approvals {rows}"
    session = read_session(world)
    assert session["pendingApprovalId"] == pending[0].approvalId, session


@then(parsers.parse("the session's plans are listed oldest first: {titles}"))
@verifies("R7.2")
def listed_oldest_first(world: World, titles: str) -> None:
    expected = [title.strip().strip('"') for title in titles.split(",")]
    listed = granted(world.rpc.list_approvals, session_id(world)).approvals
    shown = [(a.title, a.createdAt) for a in listed]
    assert [a.title for a in listed] == expected, (
        f"approval/list lists (title, createdAt) {shown}; oldest first, the titles are {expected}"
    )


@then(
    parsers.parse(
        'the revised plan titled "{title}" still awaits approval at the first plan\'s deadline'
    )
)
@verifies("R3.9")
def revision_outlives_first_deadline(world: World, title: str) -> None:
    granted(world.rpc.list_sessions)  # a round trip: what the clock move did shows by now
    approvals = granted(world.rpc.list_approvals, session_id(world)).approvals
    found = [a for a in approvals if a.title == title]
    assert len(found) == 1, f"approvals titled {title!r}: {found}"
    revision = found[0]
    assert revision.status == "pending", (
        f"the revised plan reads {revision.status} at the first plan's deadline, though its own "
        f"deadline is {revision.expiresAt}: each plan expires at its own deadline"
    )


@then(parsers.parse('the plan titled "{title}" is still awaiting approval'))
@verifies("R3.8")
def still_pending(world: World, title: str) -> None:
    approvals = granted(world.rpc.list_approvals, session_id(world)).approvals
    found = [a for a in approvals if a.title == title]
    assert len(found) == 1, f"approvals titled {title!r}: {found}"
    approval = read_back(world, found[0].approvalId)
    assert approval["status"] == "pending", f"the plan titled {title!r} is {approval['status']}"
    assert approval["executionId"] is None and approval["permissionMode"] is None, approval
    session = read_session(world)
    assert session["mode"] == "plan", f"the session is in {session['mode']} mode"
    assert session["pendingApprovalId"] == approval["approvalId"], (
        f"the session names the pending approval {session['pendingApprovalId']}, though the "
        f"plan titled {title!r} ({approval['approvalId']}) still waits: a reloaded client "
        "finds the waiting plan through its session"
    )


@then(parsers.parse("the plan can still be approved with permission mode {mode}"))
@verifies("R4.6")
def can_still_approve(world: World, mode: str) -> None:
    outcome = approve(world, mode)
    outcome.require_result()
    _approved_and_done(world, mode)


def _approved_and_done(world: World, mode: str) -> None:
    """The plan reads approved with ``mode``, and its execution has ended."""
    approval = read_back(world)
    assert approval["status"] == "approved" and approval["permissionMode"] == mode, approval
    world.wait_for(
        "execution/updated",
        lambda p: (
            p["executionId"] == approval["executionId"]
            and p["executionState"] in ("completed", "interrupted")
        ),
        since=world.cursors.approve,
    )


@then(parsers.parse("the model received no new request"))
@verifies("R3.8")
def no_new_request(world: World) -> None:
    _settle(world)
    before = need(world.plan.before_action, "read back before the action").provider_requests
    made = len(world.provider.requests()) - before
    assert made == 0, f"the model was called {made} more time(s)"


@then("the title and question are reported exactly as submitted")
@verifies("R2.6")
def title_and_question_reported(world: World) -> None:
    submitted = world.plan.submitted[-1]
    approval = read_back(world, latest_approval(world)["approvalId"])  # checked against its row
    world.wait_for(  # announced in no fixed order with the turn's end
        "approval/updated", lambda p: p["approval"]["approvalId"] == approval["approvalId"]
    )
    announced = [
        n["params"]["approval"]
        for n in world.notifications("approval/updated")
        if n["params"]["approval"]["approvalId"] == approval["approvalId"]
    ]
    for where, seen in [("approval/get", approval), *(("approval/updated", a) for a in announced)]:
        assert (seen["title"], seen["question"]) == (submitted.title, submitted.question), (
            f"{where} reports title {seen['title']!r} and question {seen['question']!r}; "
            f"submitted were {submitted.title!r} and {submitted.question!r}"
        )
