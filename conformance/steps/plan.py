"""Steps about Plan turns, plan submission and the artifacts on disk (§1, §2)."""

from __future__ import annotations

import base64
import hashlib
import re
import shutil
import stat
from pathlib import Path
from typing import Any

from pytest_bdd import given, parsers, then, when

from conformance.capabilities import require_fault_point
from conformance.mock_provider import TextReply
from conformance.steps.sessions import session_id
from conformance.world import World, need

ARTIFACT_PATH = re.compile(r"^\.pi/plan/[^/]+\.md$")


# -- the workspace before the step --------------------------------------------------------


def snapshot(root: Path) -> dict[str, str]:
    """Relative path -> SHA-256 (or link target / 'dir') of everything under ``root``."""
    found: dict[str, str] = {}
    if not root.exists():
        return found
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if path.is_symlink():
            found[relative] = "link:" + str(path.readlink())
        elif path.is_dir():
            found[relative] = "dir"
        else:
            found[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


@given(parsers.parse('the project has a file "{path}" containing "{text}"'))
def project_file(world: World, path: str, text: str) -> None:
    target = world.workspace / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text + "\n", encoding="utf-8")


@given("a folder outside the project")
def outside_folder(world: World) -> None:
    outside = world.workspace.parent / "outside"
    outside.mkdir(exist_ok=True)
    world.arranged.outside = outside


def _outside(world: World) -> Path:
    outside_folder(world)
    outside = need(world.arranged.outside, "folder outside the project")
    return outside


@given("the project's .pi folder is a symlink to a folder outside the project")
def pi_symlink(world: World) -> None:
    (world.workspace / ".pi").symlink_to(_outside(world), target_is_directory=True)


@given("the project's plan folder is a symlink to a folder outside the project")
def plan_symlink(world: World) -> None:
    (world.workspace / ".pi").mkdir()
    (world.workspace / ".pi" / "plan").symlink_to(_outside(world), target_is_directory=True)


@given("the project's plan folder is a regular file")
def plan_is_file(world: World) -> None:
    (world.workspace / ".pi").mkdir()
    (world.workspace / ".pi" / "plan").write_text("not a folder\n", encoding="utf-8")


@given("the project's .pi folder is a regular file")
def pi_is_file(world: World) -> None:
    (world.workspace / ".pi").write_text("not a folder\n", encoding="utf-8")


@given(parsers.parse("the project's plan folder already holds {count:d} earlier artifacts"))
def earlier_artifacts(world: World, count: int) -> None:
    folder = world.workspace / ".pi" / "plan"
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(count):
        (folder / f"earlier-{index}.md").write_text(f"# Earlier plan {index}\n", encoding="utf-8")
    world.arranged.earlier_artifacts = snapshot(folder)


@given("the project folder has been deleted")
def project_deleted(world: World) -> None:
    shutil.rmtree(world.workspace)


@given(parsers.parse("the host will fail to {point} the next artifact"))
def arm_fault(world: World, point: str) -> None:
    fault = {"write": "artifactWrite", "flush": "artifactFlush"}[point]
    require_fault_point(world, fault)
    world.rpc.request("conformance/fault/arm", {"fault": fault})


# -- actions ------------------------------------------------------------------------------


def run_prompt(world: World, text: str) -> dict[str, Any]:
    """Prompt the session and wait for that turn to end; return its turn/ended params."""
    world.provider.set_fallback(TextReply("Done."))  # closes the turn if the host asks again
    world.arranged.workspace_before = snapshot(world.workspace)
    world.cursors.turn = world.mark()
    world.cursors.provider_turn = len(world.provider.requests())
    turn_id = world.rpc.request("session/prompt", {"sessionId": session_id(world), "text": text})[
        "turnId"
    ]
    ended = world.wait_for("turn/ended", lambda p: p["turnId"] == turn_id, since=world.cursors.turn)
    world.last_turn_end = ended
    return ended


@given("the user asks for a plan")
@when("the user asks for a plan")
def ask_for_plan(world: World) -> None:
    run_prompt(world, "Plan the change, then submit it for approval.")


@when("the user asks for another plan")
def ask_again(world: World) -> None:
    run_prompt(world, "Plan it again with the feedback in mind.")


@when("the user sends a prompt")
@given("the user had a conversation with the agent")
def send_prompt(world: World) -> None:
    run_prompt(world, "Please take a look at the project.")


def latest_approval(world: World) -> dict[str, Any]:
    """The newest approval of the main session, as the host reports it now."""
    approvals = world.rpc.request("approval/list", {"sessionId": session_id(world)})["approvals"]
    assert approvals, "the host lists no approval for the session"
    latest: dict[str, Any] = approvals[-1]
    return latest


@given("the user rejects the plan")
@when("the user rejects the plan")
def reject_plan(world: World) -> None:
    approval = latest_approval(world)
    world.attempt(
        "approval/reject", {"sessionId": session_id(world), "approvalId": approval["approvalId"]}
    )


@when("the user opens the plan artifact")
def open_artifact(world: World) -> None:
    approval = latest_approval(world)
    world.attempt(
        "artifact/read", {"sessionId": session_id(world), "approvalId": approval["approvalId"]}
    )


# -- checks -------------------------------------------------------------------------------


def _tool_results(world: World, tool: str) -> list[dict[str, Any]]:
    since = world.cursors.turn
    return [
        n["params"]
        for n in world.notifications("turn/toolResult", since)
        if n["params"]["tool"] == tool
    ]


@then(parsers.parse("the tools offered to the model are exactly {names}"))
def offered_exactly(world: World, names: str) -> None:
    expected = sorted(name.strip() for name in names.replace(" and ", ", ").split(","))
    requests = world.provider.requests()[world.cursors.provider_turn :]
    assert requests, "the host made no request to the model provider"
    for request in requests:
        assert sorted(request.tool_names) == expected, (
            f"the host offered {sorted(request.tool_names)}, expected {expected}"
        )


@then(parsers.re(r"the model was not offered (?P<tool>\w+)"))
def not_offered(world: World, tool: str) -> None:
    requests = world.provider.requests()
    assert requests, "the host made no request to the model provider"
    for request in requests:
        assert tool not in request.tool_names, f"{tool} was offered: {request.tool_names}"


@then(parsers.re(r"the (?P<tool>\w+) call was (?P<verdict>denied|refused) with (?P<code>[A-Z_]+)"))
def call_denied(world: World, tool: str, verdict: str, code: str) -> None:
    results = _tool_results(world, tool)
    assert results, f"the host reported no result for the {tool} call"
    result = results[-1]
    assert result["status"] in ("denied", "error"), f"the {tool} call ran: {result}"
    found = (result.get("error") or {}).get("code")
    assert found == code, f"the {tool} call was stopped with {found}, expected {code}"


@then(parsers.parse("every call of that message was refused with {code}"))
def whole_batch_refused(world: World, code: str) -> None:
    since = world.cursors.turn
    results = [n["params"] for n in world.notifications("turn/toolResult", since)]
    assert len(results) >= 2, f"expected a result for each call of the batch, got {results}"
    asked = world.notifications("permission/requested", since)
    assert not asked, f"a call of the refused batch asked for permission: {asked}"
    first_batch = results[:2]
    for result in first_batch:
        assert result["status"] in ("denied", "error"), f"a call of the batch ran: {result}"
        assert (result.get("error") or {}).get("code") == code, result


@then("nothing in the project changed")
def project_unchanged(world: World) -> None:
    now = snapshot(world.workspace)
    assert now == world.arranged.workspace_before, _diff(world.arranged.workspace_before, now)


@then("the folder outside the project is still empty")
def outside_empty(world: World) -> None:
    outside = need(world.arranged.outside, "folder outside the project")
    assert list(outside.iterdir()) == [], f"the host wrote outside: {list(outside.iterdir())}"


def _diff(before: dict[str, str], after: dict[str, str]) -> str:
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    changed = sorted(k for k in set(before) & set(after) if before[k] != after[k])
    return f"project changed: added {added}, removed {removed}, changed {changed}"


def _approval_notifications(world: World) -> list[dict[str, Any]]:
    return [n["params"]["approval"] for n in world.notifications("approval/updated")]


@then("no approval exists")
def no_approval(world: World) -> None:
    listed = world.rpc.request("approval/list", {"sessionId": session_id(world)})["approvals"]
    assert listed == [], f"the host lists approvals: {listed}"
    rows = world.storage().rows("plan_approvals")
    assert rows == [], f"plan_approvals holds {rows}"
    claimed = _approval_notifications(world)
    assert claimed == [], f"the host announced approvals: {claimed}"
    session = world.rpc.request("session/get", {"sessionId": session_id(world)})["session"]
    assert session["pendingApprovalId"] is None and session["activeExecutionId"] is None, session


@then(parsers.parse("the turn ended with {code}"))
def turn_failed_with(world: World, code: str) -> None:
    error = need(world.last_turn_end, "finished turn").get("error") or {}
    tool_errors = [
        (r.get("error") or {}).get("code")
        for r in (n["params"] for n in world.notifications("turn/toolResult", world.cursors.turn))
    ]
    assert error.get("code") == code or code in tool_errors, (
        f"expected {code}; the turn ended with {error or 'no error'} and tool errors {tool_errors}"
    )


@then(parsers.parse('an approval is pending for the plan titled "{title}"'))
def approval_pending(world: World, title: str) -> None:
    approval = latest_approval(world)
    assert approval["status"] == "pending", f"the approval is {approval['status']}"
    assert approval["title"] == title, f"the approval is titled {approval['title']!r}"
    session = world.rpc.request("session/get", {"sessionId": session_id(world)})["session"]
    assert session["pendingApprovalId"] == approval["approvalId"], session


def artifact_file(world: World, approval: dict[str, Any] | None = None) -> Path:
    """The artifact of ``approval`` (default: the latest) on disk."""
    record = approval or latest_approval(world)
    relative = str(record["artifact"]["path"])
    assert ARTIFACT_PATH.match(relative), f"artifact path {relative!r} is not .pi/plan/<name>.md"
    return world.workspace / relative


@then("the plan artifact holds exactly the submitted markdown")
def artifact_exact(world: World) -> None:
    submitted = world.plan.submitted[-1].markdown.encode("utf-8")
    content = artifact_file(world).read_bytes()
    assert content == submitted, (
        f"artifact bytes differ from the submitted markdown: {len(content)} bytes on disk, "
        f"{len(submitted)} submitted; first bytes {content[:60]!r} vs {submitted[:60]!r}"
    )


@then("the artifact lives in the project's plan folder with a markdown name")
def artifact_location(world: World) -> None:
    path = artifact_file(world)
    assert path.is_file() and not path.is_symlink(), f"{path} is not a regular file"
    assert path.parent == world.workspace / ".pi" / "plan", path


@then("the approval records the artifact's path, SHA-256 and size")
def approval_records_artifact(world: World) -> None:
    approval = latest_approval(world)
    content = artifact_file(world, approval).read_bytes()
    digest = hashlib.sha256(content).hexdigest()
    artifact = approval["artifact"]
    assert artifact["sha256"] == digest, f"recorded {artifact['sha256']}, file hashes to {digest}"
    assert artifact["byteSize"] == len(content), (
        f"recorded {artifact['byteSize']}, file has {len(content)}"
    )
    rows = world.storage().rows("plan_approvals", "id = ?", (approval["approvalId"],))
    assert len(rows) == 1, "the approval is not stored in plan_approvals"
    row = rows[0]
    assert row["artifact_path"] == artifact["path"], row
    assert row["artifact_sha256"] == digest, f"stored hash {row['artifact_sha256']} != {digest}"
    assert row["artifact_bytes"] == len(content), f"stored size {row['artifact_bytes']}"


@then("the title and question are stored as fields of the approval record")
def title_question_stored(world: World) -> None:
    submitted = world.plan.submitted[-1]
    approval = latest_approval(world)
    rows = world.storage().rows("plan_approvals", "id = ?", (approval["approvalId"],))
    assert rows and rows[0]["title"] == submitted.title, rows
    assert rows[0]["question"] == submitted.question, rows
    assert approval["title"] == submitted.title and approval["question"] == submitted.question


@then("the artifact carries neither the title nor the question")
def no_wrapper(world: World) -> None:
    submitted = world.plan.submitted[-1]
    content = artifact_file(world).read_bytes()
    assert content == submitted.markdown.encode("utf-8"), "the host changed the markdown"
    assert submitted.question.encode() not in content, "the question was added to the file"


@then("the artifact file is read-only")
def read_only(world: World) -> None:
    mode = artifact_file(world).stat().st_mode
    writable = mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    assert not writable, f"the artifact has write permission bits: {stat.filemode(mode)}"


@then("the earlier artifacts are unchanged")
def earlier_unchanged(world: World) -> None:
    now = snapshot(world.workspace / ".pi" / "plan")
    for name, digest in world.arranged.earlier_artifacts.items():
        assert now.get(name) == digest, f"earlier artifact {name} changed or disappeared"


@then("each submission has its own artifact")
def own_artifacts(world: World) -> None:
    approvals = world.rpc.request("approval/list", {"sessionId": session_id(world)})["approvals"]
    paths = [a["artifact"]["path"] for a in approvals]
    assert len(approvals) >= 2, f"expected two approvals, found {len(approvals)}"
    assert len(set(paths)) == len(paths), f"submissions share artifact paths: {paths}"
    for approval, submitted in zip(approvals, world.plan.submitted, strict=False):
        content = artifact_file(world, approval).read_bytes()
        assert content == submitted.markdown.encode("utf-8"), (
            f"{approval['artifact']['path']} was overwritten"
        )


@then("opening the artifact returns its exact bytes")
def opened_exact(world: World) -> None:
    result = world.outcome.require_result()
    content = base64.b64decode(result["contentBase64"])
    assert content == artifact_file(world).read_bytes(), "artifact/read differs from the file"
    assert result["sha256"] == hashlib.sha256(content).hexdigest()
    assert result["byteSize"] == len(content)


@then(parsers.parse("the session has {count:d} artifacts in its plan folder"))
def artifact_count(world: World, count: int) -> None:
    folder = world.workspace / ".pi" / "plan"
    found = sorted(p.name for p in folder.iterdir()) if folder.exists() else []
    assert len(found) == count, f"found {found}"


@then("the model saw the earlier conversation")
def model_saw_history(world: World) -> None:
    last = world.provider.requests()[-1]
    user_texts = [m.get("content") for m in last.messages if m.get("role") == "user"]
    assert len(user_texts) >= 2, f"the last request carried only {user_texts}"
