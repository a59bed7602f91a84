"""Steps about approving and rejecting plans, the deadline and the execution (§3, §4)."""

from __future__ import annotations

from typing import Any

from pytest_bdd import given, parsers, then, when

from conformance.capabilities import require_fault_point
from conformance.steps.model import default_markdown, script_plan
from conformance.steps.plan import latest_approval, run_prompt
from conformance.steps.sessions import create_session_in_mode, read_session, session_id
from conformance.world import Outcome, World, need

APPROVAL_TTL_MS = 30 * 60 * 1000


def _created(world: World) -> dict[str, Any]:
    """The approval as it was when the host created it."""
    return need(world.plan.at_creation, "approval seen at creation")


def _approval_ref(world: World) -> dict[str, str]:
    approval = world.plan.approval or latest_approval(world)
    return {"sessionId": session_id(world), "approvalId": approval["approvalId"]}


def _unchecked(world: World, method: str, params: dict[str, Any]) -> Outcome:
    """Send a request the contract forbids, on purpose, and record the outcome."""
    message = {"jsonrpc": "2.0", "id": world.rpc.next_id(), "method": method, "params": params}
    world.outcome = Outcome.from_response(method, world.rpc.call_message(message, check=False))
    return world.outcome


@given(parsers.parse('a plan titled "{title}" is awaiting approval'))
def plan_awaiting(world: World, title: str) -> None:
    if "main" not in world.sessions:
        create_session_in_mode(world, "Plan")
    elif world.sessions["main"]["mode"] != "plan":
        world.rpc.request("session/configure", {"sessionId": session_id(world), "mode": "plan"})
    script_plan(world, title, default_markdown(title))
    ended = run_prompt(world, "Plan the change, then submit it for approval.")
    assert ended["outcome"] == "completed", f"the Plan turn ended {ended}"
    approval = latest_approval(world)
    assert approval["status"] == "pending", f"the plan is not pending: {approval}"
    world.plan.approval = approval
    world.plan.at_creation = dict(approval)
    world.plan.clock_at_creation = world.rpc.request("conformance/clock/get", {})["now"]


# -- decisions ----------------------------------------------------------------------------


def approve(world: World, mode: str) -> Outcome:
    """Approve the current plan with ``mode``; remember where notifications start."""
    world.cursors.approve = world.mark()
    world.cursors.provider_approve = len(world.provider.requests())
    return world.attempt("approval/approve", {**_approval_ref(world), "permissionMode": mode})


@when(parsers.parse("the user approves the plan with permission mode {mode}"))
@given(parsers.parse("the user approved the plan with permission mode {mode}"))
def approve_step(world: World, mode: str) -> None:
    approve(world, mode)


@when("the user approves the plan without choosing a permission mode")
def approve_without_mode(world: World) -> None:
    _unchecked(world, "approval/approve", _approval_ref(world))


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
    params = {**_approval_ref(world), "permissionMode": mode}
    messages = [
        {
            "jsonrpc": "2.0",
            "id": world.rpc.next_id(),
            "method": "approval/approve",
            "params": params,
        }
        for _ in range(2)
    ]
    world.cursors.approve = world.mark()
    world.plan.concurrent_responses = world.rpc.call_together(messages)


@when(parsers.parse("a stale client approves the plan with permission mode {mode}"))
def stale_approve(world: World, mode: str) -> None:
    world.attempt(
        "approval/approve",
        {**_approval_ref(world), "permissionMode": mode},
    )


@given(parsers.parse("the host will fail to commit the next approval"))
def arm_commit_fault(world: World) -> None:
    require_fault_point(world, "approvalCommit")
    world.rpc.request("conformance/fault/arm", {"fault": "approvalCommit"})


# -- time ---------------------------------------------------------------------------------


@when(parsers.parse("{minutes:d} minutes pass"))
@given(parsers.parse("{minutes:d} minutes passed"))
def minutes_pass(world: World, minutes: int) -> None:
    world.rpc.request("conformance/clock/advance", {"ms": minutes * 60_000})


@when(parsers.parse("the clock reaches {offset} the deadline"))
@given(parsers.parse("the clock reached {offset} the deadline"))
def clock_near_deadline(world: World, offset: str) -> None:
    deltas = {"one millisecond before": -1, "exactly": 0, "one millisecond after": 1}
    target = _created(world)["expiresAt"] + deltas[offset]
    world.rpc.request("conformance/clock/set", {"now": target})


@given("the client reloads and reads the approval again")
@when("the client reloads and reads the approval again")
def reload(world: World) -> None:
    world.plan.approval = None
    sessions = world.rpc.request("session/list", {})["sessions"]
    assert sessions, "after the reload the host lists no session"
    pending = [s for s in sessions if s["pendingApprovalId"]]
    assert pending, "after the reload no session shows a pending approval"
    world.plan.reloaded = world.rpc.request(
        "approval/get",
        {"sessionId": pending[0]["sessionId"], "approvalId": pending[0]["pendingApprovalId"]},
    )["approval"]


# -- checks -------------------------------------------------------------------------------


@then(parsers.parse("the approval is {status}"))
def approval_status(world: World, status: str) -> None:
    approval = latest_approval(world)
    assert approval["status"] == status, f"the approval is {approval['status']}, not {status}"
    rows = world.storage().rows("plan_approvals", "id = ?", (approval["approvalId"],))
    assert rows and rows[0]["status"] == status, f"stored status: {rows}"


@then("the approval shows its title, question, artifact, absolute expiry and status")
def approval_card(world: World) -> None:
    approval = latest_approval(world)
    submitted = world.plan.submitted[-1]
    assert approval["title"] == submitted.title and approval["question"] == submitted.question
    assert approval["artifact"]["path"].startswith(".pi/plan/")
    assert approval["expiresAt"] > 1_000_000_000_000, "expiresAt is not an absolute timestamp"
    assert approval["status"] == "pending"


@then("the approval expires 30 minutes after the host created it")
def expires_in_30(world: World) -> None:
    approval = _created(world)
    clock = world.plan.clock_at_creation
    assert approval["createdAt"] == clock, (
        f"createdAt {approval['createdAt']} is not the host clock {clock}"
    )
    delta = approval["expiresAt"] - approval["createdAt"]
    assert delta == APPROVAL_TTL_MS, f"the deadline is {delta} ms after creation"
    rows = world.storage().rows("plan_approvals", "id = ?", (approval["approvalId"],))
    assert rows[0]["expires_at"] == approval["expiresAt"], rows


@then("the deadline is unchanged")
def deadline_unchanged(world: World) -> None:
    first = _created(world)["expiresAt"]
    now = (world.plan.reloaded or latest_approval(world))["expiresAt"]
    assert now == first, f"the deadline moved from {first} to {now}"
    row = world.storage().rows(
        "plan_approvals",
        "id = ?",
        (_created(world)["approvalId"],),
    )
    assert row[0]["expires_at"] == first, f"the stored deadline moved to {row[0]['expires_at']}"


@then("the approval expired with PLAN_APPROVAL_TIMEOUT")
def expired_with_timeout(world: World) -> None:
    approval_id = _created(world)["approvalId"]
    notes = [
        n["params"]["approval"]
        for n in world.notifications("approval/updated")
        if n["params"]["approval"]["approvalId"] == approval_id
    ]
    assert notes and notes[-1]["status"] == "expired", f"no expiry was announced: {notes}"
    assert notes[-1]["statusCode"] == "PLAN_APPROVAL_TIMEOUT", notes[-1]
    row = world.storage().rows("plan_approvals", "id = ?", (approval_id,))[0]
    assert row["status"] == "expired" and row["status_code"] == "PLAN_APPROVAL_TIMEOUT", row
    assert row["permission_mode"] is None and row["execution_id"] is None, row


@then("no execution was started")
def no_execution(world: World) -> None:
    for row in world.storage().rows("plan_approvals"):
        assert row["execution_id"] is None and row["execution_state"] is None, row
    assert not world.notifications("execution/updated"), "an execution was announced"
    kinds = [n["params"]["kind"] for n in world.notifications("turn/started")]
    assert "execution" not in kinds, kinds


@then(parsers.parse("the session is in {mode} mode with permission mode {permission}"))
def session_mode_and_permission(world: World, mode: str, permission: str) -> None:
    session = read_session(world)
    expected = {"Agent": "agent", "Plan": "plan"}[mode]
    assert session["mode"] == expected, f"the session is in {session['mode']} mode"
    assert session["permissionMode"] == permission, (
        f"permission mode is {session['permissionMode']}"
    )
    row = world.storage().rows("sessions", "id = ?", (session_id(world),))[0]
    assert row["mode"] == expected and row["permission_mode"] == permission, row


@then("the session's permission mode is unchanged")
def permission_unchanged(world: World) -> None:
    before = world.sessions["main"]["permissionMode"]
    found = read_session(world)["permissionMode"]
    assert found == before, f"the session's permission mode changed from {before} to {found}"
    row = world.storage().rows("sessions", "id = ?", (session_id(world),))[0]
    assert row["permission_mode"] == before, f"storage shows the session with {row}"


@then("the approval selects no permission mode and no execution")
def approval_without_mode(world: World) -> None:
    approval = latest_approval(world)
    mode = approval["permissionMode"]
    assert mode is None, f"the approval selects permission mode {mode}: {approval}"
    assert approval["executionId"] is None and approval["executionState"] is None, approval
    row = world.storage().rows("plan_approvals", "id = ?", (approval["approvalId"],))[0]
    assert row["permission_mode"] is None, f"the stored approval selects a mode: {row}"
    assert row["execution_id"] is None and row["execution_state"] is None, row


@then(parsers.parse("the approval records permission mode {mode} and an execution"))
def approval_records_execution(world: World, mode: str) -> None:
    approval = latest_approval(world)
    assert approval["status"] == "approved" and approval["permissionMode"] == mode, approval
    assert approval["executionId"], approval
    row = world.storage().rows("plan_approvals", "id = ?", (approval["approvalId"],))[0]
    assert row["status"] == "approved" and row["permission_mode"] == mode, row
    assert row["execution_id"] == approval["executionId"], row
    assert row["execution_state"] in ("queued", "running", "completed"), row


@then("the execution runs to completion")
def execution_completes(world: World) -> None:
    world.outcome.require_result()
    mark = world.cursors.approve
    done = world.wait_for(
        "execution/updated", lambda p: p["executionState"] == "completed", since=mark
    )
    states = [
        n["params"]["executionState"]
        for n in world.notifications("execution/updated", mark)
        if n["params"]["executionId"] == done["executionId"]
    ]
    assert states == ["queued", "running", "completed"], f"execution went through {states}"
    row = world.storage().rows("plan_approvals", "execution_id = ?", (done["executionId"],))[0]
    assert row["execution_state"] == "completed", row


@then("the same agent runs the approved plan")
def same_agent_runs_plan(world: World) -> None:
    mark = world.cursors.approve
    started = world.wait_for("turn/started", lambda p: p["kind"] == "execution", since=mark)
    assert started["sessionId"] == session_id(world), started
    assert started["approvalId"] == _approval_ref(world)["approvalId"], started
    requests = world.provider.wait_for_requests(world.cursors.provider_approve + 1)
    first = requests[world.cursors.provider_approve]
    approval = latest_approval(world)
    text = "\n".join(str(m.get("content")) for m in first.messages if m.get("role") == "user")
    markdown = world.plan.submitted[-1].markdown
    assert approval["artifact"]["path"] in text, "the model was not told the artifact path"
    assert markdown.strip() in text, "the model was not given the plan's content"


@then("exactly one of the two approvals succeeded")
def one_of_two(world: World) -> None:
    responses = world.plan.concurrent_responses
    succeeded = [r for r in responses if "result" in r]
    failed = [r for r in responses if "error" in r]
    assert len(succeeded) == 1, f"{len(succeeded)} approvals succeeded: {responses}"
    code = failed[0]["error"]["data"]["code"]
    assert code == "APPROVAL_NOT_PENDING", f"the second approval failed with {code}"
    executions = {
        r["execution_id"] for r in world.storage().rows("plan_approvals") if r["execution_id"]
    }
    assert len(executions) == 1, f"executions stored: {executions}"


@then("the approval and the session are unchanged")
def nothing_changed(world: World) -> None:
    approval = latest_approval(world)
    assert approval["status"] == "pending", approval
    assert approval["executionId"] is None and approval["permissionMode"] is None, approval
    session = read_session(world)
    assert session["mode"] == "plan", f"the session left Plan: {session['mode']}"
    assert session["permissionMode"] == world.sessions["main"]["permissionMode"], session
    row = world.storage().rows("sessions", "id = ?", (session_id(world),))[0]
    assert row["mode"] == "plan", f"storage shows the session in {row['mode']}"


@then(parsers.parse("the model received no new request"))
def no_new_request(world: World) -> None:
    before = max(world.cursors.provider_approve, world.cursors.provider_turn)
    after = world.provider.requests()
    assert len(after) == before, f"the model was called {len(after) - before} more time(s)"
