"""Steps following a submitted plan through its life: the pending approval and what the
host recorded (§1, §2), how the Plan turn ends (P11), revisions (R1.11, C7), the artifact
after every ending (C9, C10), the plan folder the agent cannot write (P12) and the
integrity check at approval (P13)."""

from __future__ import annotations

import hashlib
import os
import shutil
from typing import Any, Final

from pytest_bdd import given, parsers, then, when

from conformance.blame import blame, verifies
from conformance.explore.model import APPROVAL_TTL_MS
from conformance.mock_provider import TextReply
from conformance.protocol_models import Approval
from conformance.steps.model import script_calls, tool_call
from conformance.steps.plan import (
    artifact_bytes,
    artifact_file,
    check_recorded,
    latest_approval,
    reject_plan,
    results_of_call,
    results_since_turn,
    run_prompt,
    snapshot,
)
from conformance.steps.requests import granted, permission_mode, plain
from conformance.steps.sessions import read_session, session_id
from conformance.steps.tool_work import PLAN_TOOLS
from conformance.world import World, need

QUIET_S = 1.0  # how long the user waits, after a plan ended, for a turn nobody asked for


def _approvals(world: World) -> list[Approval]:
    return granted(world.rpc.list_approvals, session_id(world)).approvals


def _row(world: World, approval_id: str) -> dict[str, Any]:
    rows = world.storage().rows("plan_approvals", "id = ?", (approval_id,))
    assert len(rows) == 1, f"plan_approvals holds {len(rows)} rows for {approval_id}"
    return rows[0]


# -- the pending approval -----------------------------------------------------------------


@then(parsers.parse('an approval is pending for the plan titled "{title}"'))
def approval_pending(world: World, title: str) -> None:
    approval = latest_approval(world)
    submitted = world.plan.submitted[-1]
    assert approval["status"] == "pending", f"the approval is {approval['status']}"
    assert approval["title"] == title == submitted.title, f"the approval is {approval['title']!r}"
    assert approval["question"] == submitted.question, f"the question is {approval['question']!r}"
    assert approval["sessionId"] == session_id(world), approval
    assert approval["turnId"] == world.active_turn, (
        f"the approval names turn {approval['turnId']}, the plan was submitted in turn "
        f"{world.active_turn}"
    )
    approval_id = approval["approvalId"]
    got = granted(world.rpc.get_approval, session_id(world), approval_id)
    fetched = plain(got.approval)
    assert fetched == approval, f"approval/get shows {fetched}, approval/list {approval}"
    session = read_session(world)
    assert session["pendingApprovalId"] == approval["approvalId"], session
    row = _row(world, approval["approvalId"])
    assert row["status"] == "pending", f"stored status {row['status']}"
    assert (row["title"], row["question"]) == (submitted.title, submitted.question), row
    assert row["session_id"] == session_id(world) and row["turn_id"] == world.active_turn, row
    with blame("R3.9"):  # each plan's own deadline, a revision's too
        deadline = approval["createdAt"] + APPROVAL_TTL_MS
        assert approval["expiresAt"] == deadline, (
            f"the plan created at {approval['createdAt']} expires at {approval['expiresAt']}, "
            f"not 30 minutes later ({deadline})"
        )
    check_recorded(world, approval, submitted.markdown)


# -- P11: the turn that submitted ---------------------------------------------------------


@then("the turn completed after the submission without asking the model again")
@verifies("P11")
def turn_ended_by_submission(world: World) -> None:
    call_id = world.script.call_id("SubmitPlan")
    results = results_of_call(world, call_id)
    assert len(results) == 1 and results[0]["status"] == "ok", f"SubmitPlan results: {results}"
    ended = need(world.last_turn_end, "finished turn")
    assert ended["outcome"] == "completed" and ended["error"] is None, (
        f"the Plan turn ended {ended['outcome']} ({ended['error']}), not completed"
    )
    answered = [r for r in world.provider.requests() if any(call_id in str(m) for m in r.messages)]
    assert not answered, (
        f"after SubmitPlan the host asked the model {len(answered)} more time(s) in that turn"
    )
    rows = world.storage().rows("turns", "id = ?", (ended["turnId"],))
    assert rows and rows[0]["state"] == "completed", f"the turn is stored as {rows}"
    pending = [a for a in _approvals(world) if a.status == "pending"]
    assert len(pending) == 1, f"the turn left {len(pending)} pending approvals"


# -- R1.7: SubmitPlan where it does not belong --------------------------------------------


@given(parsers.parse('the model will try to submit a plan titled "{title}"'))
def model_tries_to_submit(world: World, title: str) -> None:
    arguments = {"title": title, "markdown": f"# {title}\n", "question": "Go?"}
    script_calls(world, tool_call(world, "SubmitPlan", arguments))


@given(
    parsers.parse(
        'the model will try to submit a plan titled "{title}", and submit it again once that failed'
    )
)
def model_submits_twice(world: World, title: str) -> None:
    # A failed call does not end the turn: the model is told and may call SubmitPlan again.
    arguments = {"title": title, "markdown": f"# {title}\n", "question": "Go?"}
    script_calls(world, tool_call(world, "SubmitPlan", arguments), answer=None)
    script_calls(world, tool_call(world, "SubmitPlan", arguments))


_REFUSED_SUBMISSIONS: Final = ("beside a Read call", "without its question")


@given(
    parsers.parse(
        'the model will submit a plan titled "{title}" {flaw}, and submit it alone and whole '
        "once that was refused"
    )
)
def model_submits_after_refusal(world: World, title: str, flaw: str) -> None:
    # A refused call does not end the turn: the model is told and may call SubmitPlan again.
    assert flaw in _REFUSED_SUBMISSIONS, f"no refused submission called {flaw!r}"
    arguments = {"title": title, "markdown": f"# {title}\n", "question": "Go?"}
    if flaw == "beside a Read call":
        read = tool_call(world, "Read", {"path": "notes.txt"})
        script_calls(world, read, tool_call(world, "SubmitPlan", arguments), answer=None)
    else:
        partial = {"title": title, "markdown": arguments["markdown"]}
        script_calls(world, tool_call(world, "SubmitPlan", partial), answer=None)
    script_calls(world, tool_call(world, "SubmitPlan", arguments))


@then(parsers.parse('the plan titled "{title}" submitted again in the same turn awaits approval'))
@verifies("R1.6", "R1.8")
def resubmitted_awaits(world: World, title: str) -> None:
    statuses = _submission_endings(world)
    assert len(statuses) == 2 and statuses[0][0] != "ok" and statuses[1] == ("ok", None), (
        f"the SubmitPlan calls ended {statuses}: a refused SubmitPlan leaves the Plan turn "
        "going, and the model's next SubmitPlan, alone and whole, submits the plan"
    )
    _only_pending(world, title)


def _submission_endings(world: World) -> list[tuple[str, str | None]]:
    """(status, error code) of each SubmitPlan call of the last turn, in order."""
    return [
        (r["status"], (r.get("error") or {}).get("code"))
        for r in results_since_turn(world, "SubmitPlan")
    ]


def _only_pending(world: World, title: str) -> None:
    """The session's one approval is ``title``, pending."""
    listed = [(a.title, a.status) for a in _approvals(world)]
    assert listed == [(title, "pending")], f"the host lists approvals {listed}"


@then(parsers.parse('the second submission of "{title}" awaits approval'))
@verifies("R2.12")
def second_submission_awaits(world: World, title: str) -> None:
    statuses = _submission_endings(world)
    assert statuses[1:] == [("ok", None)], (
        f"the SubmitPlan calls ended {statuses}: once its fault has fired, a second SubmitPlan "
        "in the same Plan turn is stored"
    )
    with blame("R1.4"):
        for number, sent in enumerate(world.provider.requests()[world.cursors.provider_turn :]):
            assert sorted(sent.tool_names) == PLAN_TOOLS, (
                f"request {number + 1} of the Plan turn offered {sorted(sent.tool_names)}, "
                f"expected {PLAN_TOOLS}: a failed SubmitPlan leaves the planning tools as they "
                "were, SubmitPlan included"
            )
    _only_pending(world, title)


@then(parsers.parse('the plan titled "{title}" submitted after the restart awaits approval'))
@verifies("R2.12")
def submitted_after_restart(world: World, title: str) -> None:
    statuses = _submission_endings(world)
    assert statuses == [("ok", None)], (
        f"the SubmitPlan after the restart ended {statuses}: a fault fires once, and one "
        "that fired before a restart does not fire again after it"
    )
    _only_pending(world, title)


@then(parsers.parse("the only approval is the one for {title}"))
@verifies("R1.7")
def only_the_first(world: World, title: str) -> None:
    approvals = _approvals(world)
    titles = [a.title for a in approvals]
    assert titles == [title.strip('"')], f"the host lists approvals for {titles}"
    rows = world.storage().rows("plan_approvals")
    assert len(rows) == 1, f"plan_approvals holds {len(rows)} rows"


# -- endings of a plan --------------------------------------------------------------------


@given("the plan's time ran out")
@when("the plan's time runs out")
def time_runs_out(world: World) -> None:
    approval = latest_approval(world)
    world.cursors.decision = world.mark()
    world.cursors.provider_decision = len(world.provider.requests())
    now = granted(world.rpc.clock_get).now
    granted(world.rpc.clock_advance, approval["expiresAt"] - now)
    world.wait_for(
        "approval/updated",
        lambda p: (
            p["approval"]["approvalId"] == approval["approvalId"]
            and p["approval"]["status"] == "expired"
        ),
        since=world.cursors.decision,
    )


@when("the plan is approved and carried out")
def approved_and_carried_out(world: World) -> None:
    approval = latest_approval(world)
    world.provider.enqueue(TextReply("The plan is carried out."))
    world.cursors.approve = world.mark()
    world.cursors.provider_approve = len(world.provider.requests())
    granted(world.rpc.approve, session_id(world), approval["approvalId"], "auto")
    world.wait_for(
        "execution/updated",
        lambda p: p["approvalId"] == approval["approvalId"] and p["executionState"] == "completed",
        since=world.cursors.approve,
    )


@when("the approved plan has been carried out")
def carried_out(world: World) -> None:
    world.wait_for(
        "execution/updated",
        lambda p: p["executionState"] in ("completed", "interrupted"),
        since=world.cursors.approve,
    )


@when("the host is restarted while the plan awaits approval")
def restarted_while_pending(world: World) -> None:
    world.restart()


@when(
    parsers.re(
        r"(?P<ending>the user rejects the plan|the plan's time runs out), and the host is "
        r"restarted"
    )
)
def ended_then_restarted(world: World, ending: str) -> None:
    if ending == "the user rejects the plan":
        reject_plan(world)
        world.outcome.require_result()
    else:
        time_runs_out(world)
    world.restart()


@then(parsers.parse("the first plan is still {status} with its artifact unchanged"))
@verifies("R1.11")
def first_plan_kept(world: World, status: str) -> None:
    approvals = [plain(a) for a in _approvals(world)]
    assert len(approvals) == 2, f"expected the first and the revised approval: {approvals}"
    submitted, revision = world.plan.submitted[0], world.plan.submitted[-1]
    # Told apart by title: both are often created at the same host-clock instant, and the
    # list's order among equal createdAt values is the host's.
    by_title = {a["title"]: a for a in approvals}
    first = by_title.get(submitted.title)
    assert first is not None and revision.title in by_title, (
        f"expected approvals titled {submitted.title!r} and {revision.title!r}: {sorted(by_title)}"
    )
    assert first["status"] == status, f"the first approval is {first['status']}, not {status}"
    assert _row(world, first["approvalId"])["status"] == status, "its stored status changed"
    with blame("C7"):
        revised = by_title[revision.title]["artifact"]["path"]
        assert revised != first["artifact"]["path"], (
            f"the revision was written into the earlier plan's file {revised}"
        )
    with blame("R2.5"):
        content = artifact_file(world, first).read_bytes()
        assert content == submitted.markdown.encode("utf-8"), "the first artifact was changed"


@then("no turn starts on its own while the user waits a moment")
@verifies("C7")
def no_turn_while_waiting(world: World) -> None:
    # A negative needs a settle point: a host that starts a turn shortly after the plan
    # ended, rather than at once, must not slip past the user's own next prompt.
    since = world.cursors.decision
    try:
        started = world.wait_for("turn/started", since=since, timeout=QUIET_S)
    except TimeoutError:
        started = None
    assert started is None, f"the host started a turn nobody asked for: {started}"
    requests = world.provider.requests()[world.cursors.provider_decision :]
    assert not requests, f"the model was asked {len(requests)} time(s) after the plan ended"


@then("no turn started on its own after the plan ended")
@verifies("C7")
def no_turn_of_its_own(world: World) -> None:
    since = world.cursors.decision
    started = [n["params"] for n in world.notifications("turn/started", since)]
    own = [s for s in started if s["turnId"] != world.active_turn]
    assert not own, f"the host started turns nobody asked for: {own}"
    requests = world.provider.requests()[world.cursors.provider_decision :]
    assert len(requests) == 1, (
        f"the model was asked {len(requests)} times for the user's one prompt after the plan ended"
    )
    assert [a.status for a in _approvals(world) if a.status == "pending"] == [], (
        "a new plan appeared without a new submission"
    )


@then("the plan artifact is still there, byte for byte as submitted")
def artifact_kept(world: World) -> None:
    submitted = world.plan.submitted[-1].markdown.encode("utf-8")
    approval = latest_approval(world)
    path = artifact_file(world, approval)
    with blame("C9"):
        assert path.is_file(), f"the artifact {approval['artifact']['path']} is gone"
    with blame("C10"):
        content = path.read_bytes()
        assert content == submitted, f"the artifact now holds {content[:80]!r}"
        assert hashlib.sha256(content).hexdigest() == approval["artifact"]["sha256"]
    opened = granted(world.rpc.read_artifact, session_id(world), approval["approvalId"])
    with blame("R3.2"):
        assert artifact_bytes(opened.contentBase64) == submitted, "opening it differs"


# -- P12: the plan folder is the host's ---------------------------------------------------


_ATTEMPTS: dict[str, tuple[str, str]] = {
    # attempt -> (tool, where)
    "overwrite the plan artifact": ("Write", "artifact"),
    "edit the plan artifact": ("Edit", "artifact"),
    "write a new file into the plan folder": ("Write", ".pi/plan/notes.md"),
    "write into the plan folder by a roundabout path": ("Write", "src/../.pi/plan/extra.md"),
    "write into the plan folder through a linked folder": ("Write", "docs/extra.md"),
}


@given(parsers.re(rf"the model will (?P<attempt>{'|'.join(_ATTEMPTS)}) and then answer"))
def model_attempts(world: World, attempt: str) -> None:
    tool, where = _ATTEMPTS[attempt]
    approval = latest_approval(world)
    path = approval["artifact"]["path"] if where == "artifact" else where
    if path.startswith("src/"):  # the roundabout path leads through a folder that exists
        (world.workspace / "src").mkdir(exist_ok=True)
    if tool == "Edit":
        first_line = (world.workspace / path).read_text(encoding="utf-8").splitlines()[0]
        arguments = {"path": path, "old_string": first_line, "new_string": "# Tampered"}
    else:
        arguments = {"path": path, "content": "# Written by the model\n"}
    script_calls(world, tool_call(world, tool, arguments))


@then("the plan folder holds only the artifact, unchanged")
@verifies("P12")
def plan_folder_untouched(world: World) -> None:
    before = {k: v for k, v in world.arranged.workspace_before.items() if k.startswith(".pi/")}
    now = {k: v for k, v in snapshot(world.workspace).items() if k.startswith(".pi/")}
    assert now == before, f"the plan folder changed: before {before}, now {now}"
    content = artifact_file(world).read_bytes()
    assert content == world.plan.submitted[-1].markdown.encode("utf-8"), "the artifact changed"


# -- P13: integrity at approval -----------------------------------------------------------


def _change(data: bytes, change: str) -> bytes | None:
    first, last = data[:1] or b"#", data[-1:] or b"#"
    changes = {
        "changed": (b"%" if first != b"%" else b"#") + data[1:],
        "changed keeping its size and modification time": (b"%" if first != b"%" else b"#")
        + data[1:],
        "changed in its last byte": data[:-1] + (b"%" if last != b"%" else b"#"),
        "extended": data + b"\n3. One more step nobody approved.\n",
        "replaced by bytes that are not UTF-8": b"\xff" + data[1:],
    }
    return changes.get(change)


@given(parsers.parse("the plan file is {change} on disk after submission"))
@when(parsers.parse("the plan file is {change} on disk after submission"))
def change_plan_file(world: World, change: str) -> None:
    path = artifact_file(world)
    original = path.read_bytes()
    world.arranged.artifact_bytes = original
    path.chmod(0o644)
    if change == "deleted":
        path.unlink()
        return
    if change == "replaced by a folder":
        path.unlink()
        path.mkdir()
        return
    if change == "replaced by a link to a copy of itself":
        # The bytes read through the link are the recorded ones: only a host that refuses
        # to follow a link in the plan folder tells this apart from the real file.
        copy = world.workspace / f"copy-of-{path.name}"
        copy.write_bytes(original)
        path.unlink()
        path.symlink_to(copy)
        return
    changed = _change(original, change)
    assert changed is not None, f"no change called {change!r}"
    assert len(changed) == len(original) or change == "extended", change
    before = path.stat()
    path.write_bytes(changed)  # in place: the same file, only its bytes differ
    if "modification time" in change:  # as `cp -p` or `rsync -t` leave a file
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


@when("the plan file is put back as it was")
def restore_plan_file(world: World) -> None:
    path = artifact_file(world)
    original = need(world.arranged.artifact_bytes, "the artifact's original bytes")
    if path.is_dir():
        shutil.rmtree(path)
    path.write_bytes(original)


@when("the plan file is saved again as a new file holding the same bytes")
def resave_plan_file(world: World) -> None:
    # As an editor saves: a new file written beside it, then renamed over it (a new inode,
    # a new modification time, the file mode of a new file), the bytes as recorded.
    path = artifact_file(world)
    original = path.read_bytes()
    fresh = path.with_name(f".{path.name}.saving")
    fresh.write_bytes(original)
    fresh.replace(path)


@given(parsers.parse("the user tried to approve the plan with permission mode {mode}"))
@when(parsers.parse("the user tries to approve the plan with permission mode {mode}"))
def try_approve(world: World, mode: str) -> None:
    approval = latest_approval(world)
    world.cursors.approve = world.mark()
    world.cursors.provider_approve = len(world.provider.requests())
    approval_id, chosen = approval["approvalId"], permission_mode(mode)
    world.attempt_typed(world.rpc.approve, session_id(world), approval_id, chosen)


@then(parsers.parse("approving is refused with {code}"))
@verifies("P13")
def approve_refused(world: World, code: str) -> None:
    error = world.outcome.require_error()
    assert error.canonical == code, f"approving was answered with {error.canonical}, not {code}"


@then("the plan still awaits approval and the session is unchanged")
@verifies("P13")
def still_pending(world: World) -> None:
    approval = latest_approval(world)
    assert approval["status"] == "pending", f"the approval is {approval['status']}"
    assert approval["executionId"] is None and approval["permissionMode"] is None, approval
    row = _row(world, approval["approvalId"])
    assert row["status"] == "pending" and row["execution_id"] is None, f"stored: {row}"
    assert row["permission_mode"] is None and row["decided_at"] is None, f"stored: {row}"
    created = world.sessions["main"]
    session = read_session(world)
    assert session["mode"] == "plan", f"the session moved to {session['mode']}"
    assert session["permissionMode"] == created["permissionMode"], session
    assert session["pendingApprovalId"] == approval["approvalId"], session
    assert session["activeExecutionId"] is None and session["activeTurnId"] is None, (
        f"the session still shows an active turn or execution: {session}"
    )
    stored = world.storage().rows("sessions", "id = ?", (session_id(world),))[0]
    assert stored["mode"] == "plan", f"the stored session is in {stored['mode']} mode"
    assert stored["permission_mode"] == created["permissionMode"], stored
    since = world.cursors.approve
    assert not world.notifications("execution/updated", since), "an execution was announced"
    assert not world.notifications("turn/started", since), "a turn was started"


@given("the user opened the plan artifact")
def opened_artifact(world: World) -> None:
    approval = latest_approval(world)
    granted(world.rpc.read_artifact, session_id(world), approval["approvalId"])


@then(parsers.parse("opening the plan is refused with {code}"))
@verifies("P13")
def open_refused(world: World, code: str) -> None:
    approval = latest_approval(world)
    approval_id = approval["approvalId"]
    outcome = world.attempt_typed(world.rpc.read_artifact, session_id(world), approval_id)
    world.plan.read_outcome = outcome
    if outcome.error is None:
        content = artifact_bytes(outcome.require_result()["contentBase64"])
        record = approval["artifact"]
        if hashlib.sha256(content).hexdigest() == record["sha256"]:
            raise AssertionError(
                f"opening the plan returned the {len(content)} bytes of the record, which the "
                "file no longer holds: each read checks the file as it is now"
            )
        raise AssertionError(
            f"opening the plan returned {len(content)} bytes that disagree with the record "
            f"({record['byteSize']} bytes, SHA-256 {record['sha256']})"
        )
    assert outcome.error.canonical == code, (
        f"opening the plan was answered with {outcome.error.canonical}, not {code}"
    )


@then("after rejecting the plan the user can start a new turn")
@verifies("P13")
def reject_then_prompt(world: World) -> None:
    reject_plan(world)
    rejected = world.outcome.require_result()["approval"]
    assert rejected["status"] == "rejected", rejected
    world.provider.enqueue(TextReply("Ready for the next request."))
    try:
        ended = run_prompt(world, "Let us start over.")
    except Exception as refused:
        raise AssertionError(f"the session did not accept a new prompt: {refused}") from refused
    assert ended["outcome"] == "completed", f"the new turn ended {ended}"


@then("the approval goes ahead and the plan is carried out")
@verifies("P13")
def approval_goes_ahead(world: World) -> None:
    result = world.outcome.require_result()
    approval = result["approval"]
    assert approval["status"] == "approved", approval
    world.wait_for(
        "execution/updated",
        lambda p: p["approvalId"] == approval["approvalId"] and p["executionState"] == "completed",
        since=world.cursors.approve,
    )
