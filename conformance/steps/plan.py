"""Steps about Plan turns, plan submission and the artifacts on disk (§1, §2)."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import shutil
import stat
import sys
import unicodedata
from pathlib import Path
from typing import Any, Final

import pytest
from pytest_bdd import given, parsers, then, when

from conformance.blame import blame, verifies
from conformance.capabilities import Unverified, require_fault_point
from conformance.messages import message_text, request_answering
from conformance.mock_provider import ScriptedToolCall, TextReply, ToolCallsReply
from conformance.steps.model import default_markdown, script_calls, script_plan, tool_call
from conformance.steps.requests import granted, permission_mode, plain
from conformance.steps.sessions import MODES, _create, read_session, session_id
from conformance.world import World, need
from pi_contract import error_catalog

REUSED_CALL_ID = "call_1"

ARTIFACT_PATH = re.compile(r"^\.pi/plan/[^/]+\.md$")
PLAN_FOLDER = (".pi", "plan")


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


def plan_folder(world: World) -> Path:
    """The project's plan folder (it may not exist)."""
    return world.workspace.joinpath(*PLAN_FOLDER)


@given(parsers.parse('the project has a file "{path}" whose lines are {lines}'))
def project_file_of_lines(world: World, path: str, lines: str) -> None:
    target = world.workspace / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(f"{line.strip()}\n" for line in lines.split(",")), "utf-8")


@given(parsers.parse('the project has a file "{path}" whose last line "{text}" has no line end'))
def project_file_unterminated(world: World, path: str, text: str) -> None:
    target = world.workspace / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(f"a first line\n{text}", encoding="utf-8")


@given(
    parsers.parse(
        'the project has a file "{path}" that starts with a byte order mark before "{text}"'
    )
)
def project_file_with_bom(world: World, path: str, text: str) -> None:
    (world.workspace / path).write_bytes(b"\xef\xbb\xbf" + f"{text}\n".encode())


@given(parsers.parse('the project has a file whose name "{name}" has its accent decomposed'))
def project_file_decomposed_name(world: World, name: str) -> None:
    decomposed = unicodedata.normalize("NFD", name)
    assert decomposed != unicodedata.normalize("NFC", name), f"{name!r} has no accent"
    (world.workspace / decomposed).write_text("# Notes\n", encoding="utf-8")
    world.arranged.decomposed_name = decomposed


@given(parsers.parse('the project has a file "{path}" containing "{text}"'))
def project_file(world: World, path: str, text: str) -> None:
    target = world.workspace / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text + "\n", encoding="utf-8")


@given(
    parsers.parse(
        'the project has a file "{path}" holding a line of {count:d} "{letter}" ending with "{end}"'
    )
)
def project_long_line(world: World, path: str, count: int, letter: str, end: str) -> None:
    (world.workspace / path).write_text(letter * count + end + "\n", encoding="utf-8")


@given(
    parsers.parse(
        'the project has a file "{path}" holding one line of "{start}", {count:d} "{letter}" '
        'and "{end}"'
    )
)
def project_framed_long_line(
    world: World, path: str, start: str, count: int, letter: str, end: str
) -> None:
    (world.workspace / path).write_text(start + letter * count + end + "\n", encoding="utf-8")


@given("a folder outside the project")
def outside_folder(world: World) -> None:
    outside = world.workspace.parent / "outside"
    outside.mkdir(exist_ok=True)
    world.arranged.outside = outside


def _outside(world: World) -> Path:
    outside_folder(world)
    outside = need(world.arranged.outside, "folder outside the project")
    return outside


_OUTSIDE_NOTE: Final = "outside-any-project.txt"


@given(parsers.parse('a file outside any project holds "{text}"'))
def file_outside_any_project(world: World, text: str) -> None:
    (_outside(world) / _OUTSIDE_NOTE).write_text(text, encoding="utf-8")
    world.arranged.outside_note = text


@given(parsers.parse("the model will call {tool} on that file by its full path"))
def call_on_outside_file(world: World, tool: str) -> None:
    path = str(need(world.arranged.outside, "folder outside the project") / _OUTSIDE_NOTE)
    text = Path(path).read_text("utf-8")
    arguments: dict[str, dict[str, Any]] = {
        "Read": {"path": path},
        "Glob": {"pattern": path},
        "Write": {"path": path, "content": "written"},
        "Edit": {"path": path, "old_string": text, "new_string": "edited"},
    }
    script_calls(world, tool_call(world, tool, arguments[tool]))


@then("the file outside any project was neither changed nor shown to the model")
@verifies("P30")
def outside_file_untouched(world: World) -> None:
    outside = need(world.arranged.outside, "folder outside the project")
    assert [p.name for p in outside.iterdir()] == [_OUTSIDE_NOTE], list(outside.iterdir())
    text = (outside / _OUTSIDE_NOTE).read_text("utf-8")
    wanted = need(world.arranged.outside_note, "the note outside any project")
    assert text == wanted, f"the file outside any project now reads {text!r}, not {wanted!r}"
    # A refusal may echo the call's own input (an Edit names the text it replaces), so
    # only a result for a call that did not carry the text can have read it from the file.
    carried = {
        c.call_id for c in world.script.calls if text in json.dumps(c.arguments, ensure_ascii=False)
    }
    given = [
        message_text(m)
        for r in world.provider.requests()
        for m in r.messages
        if m.get("role") == "tool" and str(m.get("tool_call_id")) not in carried
    ]
    assert not any(text in g for g in given), (
        f"a tool result gave the model the text of a file outside any project: {given}"
    )


@given("the project's .pi folder is a symlink to a folder outside the project")
def pi_symlink(world: World) -> None:
    (world.workspace / ".pi").symlink_to(_outside(world), target_is_directory=True)


@given("the project's plan folder is a symlink to a folder outside the project")
def plan_symlink(world: World) -> None:
    (world.workspace / ".pi").mkdir()
    plan_folder(world).symlink_to(_outside(world), target_is_directory=True)


@given("the project's plan folder is a regular file")
def plan_is_file(world: World) -> None:
    (world.workspace / ".pi").mkdir()
    plan_folder(world).write_text("not a folder\n", encoding="utf-8")


@given("the project's .pi folder is a regular file")
def pi_is_file(world: World) -> None:
    (world.workspace / ".pi").write_text("not a folder\n", encoding="utf-8")


@given(parsers.parse("the project's plan folder already holds {count:d} earlier artifacts"))
def earlier_artifacts(world: World, count: int) -> None:
    folder = plan_folder(world)
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(count):
        (folder / f"earlier-{index}.md").write_text(f"# Earlier plan {index}\n", encoding="utf-8")
    world.arranged.earlier_artifacts = snapshot(folder)


@given("the project folder has been deleted")
def project_deleted(world: World) -> None:
    shutil.rmtree(world.workspace)


@given(parsers.parse("{action} the next plan file will fail"))
def arm_fault(world: World, action: str) -> None:
    fault = {"writing": "artifactWrite", "flushing": "artifactFlush"}[action]
    require_fault_point(world, fault)
    granted(world.rpc.arm_fault, fault)


_IMMUTABLE_FLAG = 0x00000010  # FS_IMMUTABLE_FL
_GET_FLAGS, _SET_FLAGS = 0x80086601, 0x40086602  # FS_IOC_GETFLAGS, FS_IOC_SETFLAGS


def _writable(folder: Path) -> bool:
    probe = folder / ".write-probe"
    try:
        probe.mkdir()
    except OSError:
        return False
    probe.rmdir()
    return True


def _set_immutable(folder: Path, on: bool) -> bool:
    """Set or clear the Linux immutable flag, which holds even for a privileged user."""
    if not sys.platform.startswith("linux"):
        return False
    import fcntl
    import struct

    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        flags = struct.unpack("i", fcntl.ioctl(fd, _GET_FLAGS, struct.pack("i", 0)))[0]
        flags = flags | _IMMUTABLE_FLAG if on else flags & ~_IMMUTABLE_FLAG
        fcntl.ioctl(fd, _SET_FLAGS, struct.pack("i", flags))
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


@given("the project folder cannot be written to")
def read_only_project(world: World, request: pytest.FixtureRequest) -> None:
    folder = world.workspace
    mode = stat.S_IMODE(folder.stat().st_mode)

    def restore() -> None:
        _set_immutable(folder, False)
        with contextlib.suppress(OSError):
            folder.chmod(mode)

    request.addfinalizer(restore)
    folder.chmod(0o555)
    if _writable(folder):  # a privileged user ignores permission bits
        _set_immutable(folder, True)
    if _writable(folder):
        raise Unverified(
            "read-only-folder",
            "the harness runs with privileges that ignore file permissions and cannot make "
            "the project folder read-only here",
        )


@given(parsers.parse('the project has a folder "{name}" that leads into its plan folder'))
def link_into_plan_folder(world: World, name: str) -> None:
    (world.workspace / name).symlink_to(plan_folder(world), target_is_directory=True)


@given(parsers.parse("a session for the project in {mode} mode with permission mode {permission}"))
def create_session_mode_permission(world: World, mode: str, permission: str) -> None:
    chosen = permission_mode(permission)
    _create(world, "main", mode=MODES[mode], permission_mode=chosen).require_result()


@given("another session is open for the same project")
def another_session(world: World) -> None:
    _create(world, "other", mode="agent").require_result()


# -- actions ------------------------------------------------------------------------------


def run_prompt(world: World, text: str) -> dict[str, Any]:
    """Prompt the session and wait for that turn to end; return its turn/ended params.

    No fallback reply is set: the scenario scripts every reply the host needs, so a host
    that asks the model once more than it should fails the scenario.
    """
    world.arranged.workspace_before = snapshot(world.workspace)
    world.arranged.neighbours = sorted(p.name for p in world.workspace.parent.iterdir())
    world.cursors.turn = world.mark()
    world.cursors.provider_turn = len(world.provider.requests())
    turn_id = granted(world.rpc.prompt, session_id(world), text).turnId
    world.active_turn = turn_id
    ended = world.wait_for("turn/ended", lambda p: p["turnId"] == turn_id, since=world.cursors.turn)
    world.last_turn_end = ended
    return ended


@given("the user asks for a plan")
@given("the user asked for a plan")
@when("the user asks for a plan")
def ask_for_plan(world: World) -> None:
    run_prompt(world, "Plan the change, then submit it for approval.")


@given("the user asked for another plan")
@when("the user asks for another plan")
def ask_again(world: World) -> None:
    run_prompt(world, "Plan it again with the feedback in mind.")


@given("the user sent a prompt")
@when("the user sends a prompt")
def send_prompt(world: World) -> None:
    run_prompt(world, "Please take a look at the project.")


@when("the user sends another prompt")
def send_another_prompt(world: World) -> None:
    run_prompt(world, "What else should we look at?")


def _converse(world: World, question: str, answer: str) -> None:
    """One completed exchange the later checks look for (or must not find)."""
    world.provider.enqueue(TextReply(answer))
    ended = run_prompt(world, question)
    assert ended["outcome"] == "completed", f"the conversation's turn ended {ended}"
    world.script.earlier_conversation += [question, answer]


@given("the user had a conversation with the agent")
def earlier_conversation(world: World) -> None:
    _converse(
        world,
        "Earlier question: where does the cache live?",
        "Earlier answer: the cache lives in memory.",
    )


@given(parsers.parse("the user had {count:d} exchanges with the agent"))
def many_exchanges(world: World, count: int) -> None:
    for number in range(1, count + 1):
        _converse(world, f"Question {number} of {count}?", f"Answer {number} of {count}.")


@given(
    parsers.parse(
        'the model read "{first}" in one exchange and "{second}" in the next, '
        "naming both reads alike"
    )
)
def reads_named_alike(world: World, first: str, second: str) -> None:
    # Some providers number a message's calls from one again in every reply, so one call id
    # comes back in a later turn; the host must still give each call its own result.
    for number, path in enumerate((first, second), start=1):
        text = (world.workspace / path).read_text("utf-8").strip()
        world.provider.enqueue(
            ToolCallsReply((ScriptedToolCall("Read", {"path": path}, REUSED_CALL_ID),)),
            TextReply(f"Read number {number} done."),
        )
        ended = run_prompt(world, f"Please read {path}.")
        assert ended["outcome"] == "completed", f"the reading turn ended {ended}"
        world.script.earlier_conversation.append(text)


@given(
    parsers.parse(
        'the model will read "{first}" and then "{second}" in one turn, naming both reads alike'
    )
)
def reads_alike_in_one_turn(world: World, first: str, second: str) -> None:
    # Two messages of one turn, each numbering its one call from one.
    world.provider.enqueue(
        ToolCallsReply((ScriptedToolCall("Read", {"path": first}, REUSED_CALL_ID),)),
        ToolCallsReply((ScriptedToolCall("Read", {"path": second}, REUSED_CALL_ID),)),
        TextReply("Both read."),
    )
    world.script.reads_named_alike = [first, second]


@given("the user had another conversation with the agent")
def another_conversation(world: World) -> None:
    _converse(
        world,
        "Later question: which store is faster?",
        "Later answer: redis answers faster than the disk cache.",
    )


def latest_approval(world: World) -> dict[str, Any]:
    """The newest approval of the main session, as the host reports it now (as the JSON
    it sent)."""
    approvals = granted(world.rpc.list_approvals, session_id(world)).approvals
    assert approvals, "the host lists no approval for the session"
    # approval/list is oldest first, but plans created at one host-clock instant tie:
    # find the newest by what the harness knows.
    of_turn = [a for a in approvals if a.turnId is not None and a.turnId == world.active_turn]
    if len(of_turn) == 1:
        return plain(of_turn[0])
    pending = [a for a in approvals if a.status == "pending"]
    if len(pending) == 1:
        return plain(pending[0])
    newest = max(a.createdAt for a in approvals)
    latest = [a for a in approvals if a.createdAt == newest]
    assert len(latest) == 1, f"cannot tell which approval is the newest: {approvals}"
    return plain(latest[0])


@given("the user rejects the plan")
@when("the user rejects the plan")
def reject_plan(world: World) -> None:
    approval = latest_approval(world)
    world.cursors.decision = world.mark()
    world.cursors.provider_decision = len(world.provider.requests())
    approval_id = approval["approvalId"]
    world.attempt_typed(world.rpc.reject, session_id(world), approval_id)


@given(parsers.parse('a plan titled "{title}" was submitted and rejected'))
def plan_submitted_and_rejected(world: World, title: str) -> None:
    _create(world, "main", mode="plan").require_result()
    script_plan(world, title, default_markdown(title))
    ended = run_prompt(world, "Plan the change, then submit it for approval.")
    assert ended["outcome"] == "completed", f"the Plan turn ended {ended}"
    reject_plan(world)
    world.outcome.require_result()


@given(parsers.parse("the session was switched to {mode} mode with permission mode {permission}"))
def switch_mode_and_permission(world: World, mode: str, permission: str) -> None:
    chosen = permission_mode(permission)
    granted(
        world.rpc.configure_session, session_id(world), mode=MODES[mode], permission_mode=chosen
    )


@when("the user opens the plan artifact")
def open_artifact(world: World) -> None:
    approval = latest_approval(world)
    approval_id = approval["approvalId"]
    outcome = world.attempt_typed(world.rpc.read_artifact, session_id(world), approval_id)
    world.plan.read_outcome = outcome


def _approval_titled(world: World, title: str) -> dict[str, Any]:
    listed = granted(world.rpc.list_approvals, session_id(world)).approvals
    approvals = [plain(approval) for approval in listed]
    titled = [a for a in approvals if a["title"] == title]
    assert len(titled) == 1, f"{len(titled)} approvals are titled {title!r}: {approvals}"
    return titled[0]


@when(parsers.parse('the user opens the artifact of the plan titled "{title}"'))
def open_artifact_titled(world: World, title: str) -> None:
    approval = _approval_titled(world, title)
    world.plan.read_outcome = world.attempt(
        "artifact/read", {"sessionId": session_id(world), "approvalId": approval["approvalId"]}
    )


@then(parsers.parse('opening it returns the bytes the plan titled "{title}" was submitted with'))
@verifies("R3.2")
def opened_titled(world: World, title: str) -> None:
    approval = _approval_titled(world, title)
    result = world.outcome.require_result()
    content = artifact_bytes(result["contentBase64"])
    submitted = [p for p in world.plan.submitted if p.title == title][-1].markdown.encode("utf-8")
    assert content == submitted, (
        f"opening the plan {title!r} returned {content[:60]!r}, another plan's bytes; it was "
        f"submitted with {submitted[:60]!r}"
    )
    assert result["path"] == approval["artifact"]["path"], (
        f"opening the plan {title!r} returned {result['path']}, not its artifact "
        f"{approval['artifact']['path']}"
    )


# -- checks -------------------------------------------------------------------------------


def results_since_turn(
    world: World, tool: str | None = None, since: int | None = None
) -> list[Any]:
    """turn/toolResult params of the last turn (optionally of one tool), in arrival order."""
    start = world.cursors.turn if since is None else since
    return [
        n["params"]
        for n in world.notifications("turn/toolResult", start)
        if tool is None or n["params"]["tool"] == tool
    ]


def results_of_call(world: World, call_id: str) -> list[dict[str, Any]]:
    """Every turn/toolResult the host sent for one tool call."""
    return [
        n["params"]
        for n in world.notifications("turn/toolResult")
        if n["params"]["toolCallId"] == call_id
    ]


def catalog_status(code: str) -> str | None:
    """The tool-result status the error catalog fixes for ``code``."""
    entry = error_catalog().get(code)
    status = entry.get("toolResultStatus") if entry is not None else None
    return str(status) if status is not None else None


def artifact_bytes(content_base64: str) -> bytes:
    """The bytes an ``artifact/read`` answer carries: standard base64 (RFC 4648), padded,
    without line breaks or any other character outside its alphabet."""
    try:
        return base64.b64decode(content_base64, validate=True)
    except ValueError as error:
        raise AssertionError(
            f"contentBase64 is not standard base64 ({error}): {content_base64[:120]!r}"
        ) from None


def check_one_result(world: World, call_id: str, tool: str) -> dict[str, Any]:
    """The single result of a call (P9: exactly one per call)."""
    found = results_of_call(world, call_id)
    with blame("P9"):
        assert found, f"the host reported no result for the {tool} call {call_id}"
        assert len(found) == 1, f"the host reported {len(found)} results for one {tool} call"
    return found[0]


@then("the Read call got an error result with a code from the catalog, and the turn went on")
@verifies("P9")
def read_without_project_folder(world: World) -> None:
    call_id = need(world.script.last_call_id("Read"), "the Read call")
    result = check_one_result(world, call_id, "Read")
    code = (result.get("error") or {}).get("code")
    assert result["status"] != "ok", f"the Read call in a project folder that is gone ran: {result}"
    # which code is the host's choice; that it is one of the catalog's is not
    assert code in error_catalog(), (
        f"the Read call in a project folder that is gone was stopped with {code!r}, which is "
        "no code of the catalog"
    )
    check_refusal(result, "Read", code)
    ended = need(world.last_turn_end, "finished turn")
    assert ended["outcome"] == "completed", (
        f"the turn ended {ended['outcome']}: a tool that cannot do its work is the call's "
        "failure, and the turn goes on"
    )


def check_refusal(result: dict[str, Any], tool: str, code: str, *others: str) -> None:
    """A refused or failed call: the code, ``code`` or one of ``others`` where the contract
    lets the host choose (blamed on the scenario), and the catalog's status for the code
    it chose (P9)."""
    allowed = " or ".join((code, *others))
    found = (result.get("error") or {}).get("code")
    assert result["status"] != "ok", f"the {tool} call ran, expected {allowed}: {result}"
    assert found in (code, *others), f"the {tool} call was stopped with {found}, expected {allowed}"
    code = str(found)
    expected = catalog_status(code)
    with blame("P9"):
        assert result["status"] == expected, (
            f"the {tool} call refused with {code} has status {result['status']!r}; the "
            f"catalog's toolResultStatus for {code} is {expected!r}"
        )


@then(parsers.parse("the tools offered to the model are exactly {names}"))
@verifies("R1.4")
def offered_exactly(world: World, names: str) -> None:
    expected = sorted(name.strip() for name in names.replace(" and ", ", ").split(","))
    requests = world.provider.requests()[world.cursors.provider_turn :]
    assert requests, "the host made no request to the model provider"
    for number, sent in enumerate(requests, start=1):
        assert sorted(sent.tool_names) == expected, (
            f"the host offered {sorted(sent.tool_names)} in request {number} of the turn, "
            f"expected {expected}"
        )


@then(parsers.re(r"the model was not offered (?P<tool>\w+)"))
@verifies("R1.9")
def not_offered(world: World, tool: str) -> None:
    requests = world.provider.requests()
    assert requests, "the host made no request to the model provider"
    for sent in requests:
        assert tool not in sent.tool_names, f"{tool} was offered: {sent.tool_names}"


@then(parsers.re(r"the (?P<tool>\w+) call was refused with (?P<code>[A-Z_]+)"))
def call_refused(world: World, tool: str, code: str) -> None:
    _refused(world, tool, code)


@then(
    parsers.re(r"the (?P<tool>\w+) call was refused with (?P<code>[A-Z_]+) or (?P<other>[A-Z_]+)")
)
def call_refused_either(world: World, tool: str, code: str, other: str) -> None:
    """Where the contract leaves the order of two checks to the host (the mode gate and the
    input check inside a Plan turn), either code passes."""
    _refused(world, tool, code, other)


def _refused(world: World, tool: str, code: str, *others: str) -> None:
    call_id = world.script.last_call_id(tool)
    if call_id is None:  # scripted without an id the harness chose: the turn's last such call
        results = results_since_turn(world, tool)
        assert results, f"the host reported no result for the {tool} call"
        call_id = str(results[-1]["toolCallId"])
    result = check_one_result(world, call_id, tool)
    check_refusal(result, tool, code, *others)
    check_turn_went_on(world, result)


def check_turn_went_on(world: World, result: dict[str, Any]) -> None:
    """A refused or failed call does not end its turn: the model gets the result and the
    turn completes (P9), as reported and as stored."""
    ended = world.last_turn_end
    if ended is None or ended["turnId"] != result["turnId"]:
        return
    rows = world.storage().rows("turns", "id = ?", (ended["turnId"],))
    with blame("P9"):
        assert ended["outcome"] == "completed", (
            f"the turn ended {ended['outcome']} ({ended['error']}) after a refused call"
        )
        assert rows and rows[0]["state"] == "completed", f"the turn is stored as {rows}"
        requests = world.provider.requests()[world.cursors.provider_turn :]
        assert request_answering(requests, str(result["toolCallId"])) is not None, (
            f"the model was never given the result of its refused {result['tool']} call: no "
            "later request of the turn carries the call with a tool message answering it"
        )


@then(parsers.parse("every call of that message was refused with {code}"))
def whole_batch_refused(world: World, code: str) -> None:
    since = world.cursors.turn
    batch = world.script.last_batch
    assert len(batch) >= 2, "the scenario scripted no batch of several calls"
    asked = world.notifications("permission/requested", since)
    assert not asked, f"a call of the refused batch asked for permission: {asked}"
    for call in batch:
        result = check_one_result(world, call.call_id, call.tool)
        check_refusal(result, call.tool, code)
        check_turn_went_on(world, result)


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
    listed = granted(world.rpc.list_approvals, session_id(world)).approvals
    assert listed == [], f"the host lists approvals: {listed}"
    rows = world.storage().rows("plan_approvals")
    assert rows == [], f"plan_approvals holds {rows}"
    claimed = _approval_notifications(world)
    assert claimed == [], f"the host announced approvals: {claimed}"
    session = read_session(world)
    assert session["pendingApprovalId"] is None and session["activeExecutionId"] is None, session
    assert not world.notifications("execution/updated"), "the host announced an execution"


@then(parsers.parse("the turn ended with {code}"))
def turn_failed_with(world: World, code: str) -> None:
    error = need(world.last_turn_end, "finished turn").get("error") or {}
    tool_errors = [(r.get("error") or {}).get("code") for r in results_since_turn(world)]
    assert error.get("code") == code or code in tool_errors, (
        f"expected {code}; the turn ended with {error or 'no error'} and tool errors {tool_errors}"
    )


def artifact_file(world: World, approval: dict[str, Any] | None = None) -> Path:
    """The artifact of ``approval`` (default: the latest) on disk."""
    record = approval or latest_approval(world)
    artifact = record.get("artifact")
    with blame("C1"):
        assert isinstance(artifact, dict), (
            f"approval {record.get('approvalId')} reports the artifact {artifact!r}: an approval "
            "a Plan turn submitted names its artifact's path, hash and size"
        )
    relative = str(artifact["path"])
    with blame("R2.2"):
        assert ARTIFACT_PATH.match(relative), (
            f"artifact path {relative!r} is not .pi/plan/<name>.md"
        )
    return world.workspace / relative


def check_recorded(world: World, approval: dict[str, Any], markdown: str) -> None:
    """The approval's artifact fields describe the file holding ``markdown``: over the
    protocol (C1: a client can verify the bytes) and in storage (R2.11)."""
    path = artifact_file(world, approval)
    content = path.read_bytes()
    digest = hashlib.sha256(content).hexdigest()
    artifact = approval["artifact"]
    rows = world.storage().rows("plan_approvals", "id = ?", (approval["approvalId"],))
    with blame("R2.11"):
        assert len(rows) == 1, "the approval is not stored in plan_approvals"
        row = rows[0]
        assert row["artifact_path"] == artifact["path"], (
            f"stored path {row['artifact_path']!r}, reported {artifact['path']!r}"
        )
        assert row["artifact_sha256"] == digest, (
            f"stored SHA-256 {row['artifact_sha256']}, the file hashes to {digest}"
        )
        assert row["artifact_bytes"] == len(content), (
            f"stored size {row['artifact_bytes']}, the file has {len(content)}"
        )
    with blame("C1"):
        assert artifact["sha256"] == digest, (
            f"the host reports SHA-256 {artifact['sha256']}, the file hashes to {digest}"
        )
        assert artifact["byteSize"] == len(content), (
            f"the host reports {artifact['byteSize']} bytes, the file has {len(content)}"
        )
        announced = [
            a for a in _approval_notifications(world) if a["approvalId"] == approval["approvalId"]
        ]
        if announced:
            assert announced[-1]["artifact"] == artifact, (
                f"the host announced the artifact as {announced[-1]['artifact']}, "
                f"it lists it as {artifact}"
            )
    submitted = markdown.encode("utf-8")
    if content != submitted:
        _blame_content(content, submitted)


def _blame_content(content: bytes, submitted: bytes) -> None:
    """A wrong artifact: a changed line ending or an added wrapper is R2.7, any other
    difference R2.1."""
    message = (
        f"artifact bytes differ from the submitted markdown: {len(content)} bytes on disk, "
        f"{len(submitted)} submitted; first bytes {content[:60]!r} vs {submitted[:60]!r}"
    )

    def lf(data: bytes) -> bytes:
        return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")

    wrapped = submitted in content or lf(content) == lf(submitted)
    with blame("R2.7" if wrapped else "R2.1"):
        raise AssertionError(message)


@then("the plan artifact holds exactly the submitted markdown")
def artifact_exact(world: World) -> None:
    submitted = world.plan.submitted[-1].markdown.encode("utf-8")
    content = artifact_file(world).read_bytes()
    if content != submitted:
        _blame_content(content, submitted)


@then("the artifact lives in the project's plan folder with a markdown name")
@verifies("R2.2")
def artifact_location(world: World) -> None:
    path = artifact_file(world)
    assert path.is_file() and not path.is_symlink(), f"{path} is not a regular file"
    assert path.parent == plan_folder(world), path
    added = sorted(set(snapshot(world.workspace)) - set(world.arranged.workspace_before))
    expected = {".pi", ".pi/plan", path.relative_to(world.workspace).as_posix()}
    stray = [name for name in added if name not in expected]
    assert not stray, f"the submission created more than the artifact: {stray}"


@then("nothing was written outside the project's plan folder")
@verifies("R2.3")
def nothing_outside_plan_folder(world: World) -> None:
    before = world.arranged.workspace_before
    after = snapshot(world.workspace)
    outside = [
        name
        for name in sorted(set(after) - set(before))
        if name not in (".pi", ".pi/plan") and not name.startswith(".pi/plan/")
    ]
    assert not outside, f"the submission wrote {outside}"
    neighbours = sorted(p.name for p in world.workspace.parent.iterdir())
    assert neighbours == world.arranged.neighbours, (
        f"the submission wrote next to the project: {neighbours}"
    )
    path = artifact_file(world)
    assert path.parent == plan_folder(world), f"the artifact is at {path}"


@then("the approval records the artifact's path, SHA-256 and size")
def approval_records_artifact(world: World) -> None:
    check_recorded(world, latest_approval(world), world.plan.submitted[-1].markdown)


@then("the title and question are stored as fields of the approval record")
def title_question_stored(world: World) -> None:
    submitted = world.plan.submitted[-1]
    approval = latest_approval(world)
    rows = world.storage().rows("plan_approvals", "id = ?", (approval["approvalId"],))
    assert rows, f"no plan_approvals row for {approval['approvalId']}"
    for where, title, question in [
        ("the plan_approvals row", rows[0]["title"], rows[0]["question"]),
        ("approval/list", approval["title"], approval["question"]),
    ]:
        assert (title, question) == (submitted.title, submitted.question), (
            f"{where} holds title {title!r} and question {question!r}; "
            f"submitted were {submitted.title!r} and {submitted.question!r}"
        )


@then("the artifact carries neither the title nor the question")
@verifies("R2.7")
def no_wrapper(world: World) -> None:
    submitted = world.plan.submitted[-1]
    content = artifact_file(world).read_bytes()
    markdown = submitted.markdown.encode("utf-8")
    added = content.replace(markdown, b"", 1) if markdown in content else content
    assert submitted.title.encode() not in added, "the title was added to the file"
    assert submitted.question.encode() not in added, "the question was added to the file"
    assert content == markdown, "the host changed the markdown"


@then("the earlier artifacts are unchanged")
@verifies("R2.5", "R2.9")
def earlier_unchanged(world: World) -> None:
    now = snapshot(plan_folder(world))
    for name, digest in world.arranged.earlier_artifacts.items():
        assert name in now, f"earlier artifact {name} disappeared"
        assert now[name] == digest, f"earlier artifact {name} was overwritten"


@given(
    parsers.parse(
        'another session for the same project has a plan titled "{title}" awaiting approval'
    )
)
def same_project_plan_pending(world: World, title: str) -> None:
    _create(world, "other", mode="plan").require_result()
    script_plan(world, title, default_markdown(title))
    other = world.sessions["other"]["sessionId"]
    mark = world.mark()
    turn_id = granted(world.rpc.prompt, other, "Plan the change, then submit it.").turnId
    ended = world.wait_for("turn/ended", lambda p: p["turnId"] == turn_id, since=mark)
    assert ended["outcome"] == "completed", f"the other session's Plan turn ended {ended}"


@then("the two sessions' plans have artifacts of their own")
@verifies("R2.4")
def sessions_own_artifacts(world: World) -> None:
    found: dict[str, dict[str, Any]] = {}
    for alias in ("other", "main"):
        listed = granted(world.rpc.list_approvals, session_id(world, alias)).approvals
        assert listed, (
            f"the {alias} session's submission made no approval: two sessions of one project "
            "that submit at one moment each get an artifact of their own"
        )
        own = session_id(world, alias)
        strangers = [a.approvalId for a in listed if a.sessionId != own]
        with blame("R5.9"):
            assert not strangers, f"the {alias} session lists other sessions' plans: {strangers}"
        found[alias] = plain(listed[-1])
    paths = [a["artifact"]["path"] for a in found.values()]
    assert paths[0] != paths[1], f"both sessions' plans were given the artifact {paths[0]}"
    for approval, submitted in zip(found.values(), world.plan.submitted, strict=True):
        content = artifact_file(world, approval).read_bytes()
        with blame("R2.5", "R2.9"):
            assert content == submitted.markdown.encode("utf-8"), (
                f"{approval['artifact']['path']} does not hold what was submitted"
            )
        check_recorded(world, approval, submitted.markdown)


@then("each submission has its own artifact")
def own_artifacts(world: World) -> None:
    listed = granted(world.rpc.list_approvals, session_id(world)).approvals
    approvals = [plain(a) for a in listed]
    paths = [a["artifact"]["path"] for a in approvals]
    with blame("R2.4"):
        assert len(approvals) == len(world.plan.submitted), (
            f"{len(world.plan.submitted)} plans were submitted, the host lists {len(approvals)}"
        )
        assert len(set(paths)) == len(paths), f"submissions share artifact paths: {paths}"
    titles = [s.title for s in world.plan.submitted]
    if len(set(titles)) == len(titles):
        # paired by title: approvals created at one host-clock instant are listed in an
        # order of the host's choosing
        by_title = {a["title"]: a for a in approvals}
        missing = [t for t in titles if t not in by_title]
        assert not missing, f"no approval is titled {missing}: {sorted(by_title)}"
        approvals = [by_title[t] for t in titles]
    for approval, submitted in zip(approvals, world.plan.submitted, strict=True):
        content = artifact_file(world, approval).read_bytes()
        with blame("R2.5", "R2.9"):
            assert content == submitted.markdown.encode("utf-8"), (
                f"{approval['artifact']['path']} was overwritten"
            )
        check_recorded(world, approval, submitted.markdown)


@then("opening the artifact returns its exact bytes")
@verifies("R3.2")
def opened_exact(world: World) -> None:
    approval = latest_approval(world)
    result = world.outcome.require_result()
    content = artifact_bytes(result["contentBase64"])
    submitted = world.plan.submitted[-1].markdown.encode("utf-8")
    assert content == submitted, (
        f"opening the plan returned {len(content)} bytes ({content[:60]!r}), the plan has "
        f"{len(submitted)} ({submitted[:60]!r})"
    )
    assert content == artifact_file(world, approval).read_bytes(), "it differs from the file"
    assert result["path"] == approval["artifact"]["path"], result["path"]
    with blame("C1"):
        assert result["sha256"] == approval["artifact"]["sha256"] == _sha(content), result
        assert result["byteSize"] == approval["artifact"]["byteSize"] == len(content), result


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@then(parsers.parse("the session has {count:d} artifacts in its plan folder"))
def artifact_count(world: World, count: int) -> None:
    folder = plan_folder(world)
    found = sorted(p.name for p in folder.iterdir()) if folder.exists() else []
    assert len(found) == count, f"found {found}"


@then("the model saw the earlier conversation")
@verifies("R1.3")
def model_saw_history(world: World) -> None:
    last = world.provider.requests()[-1]
    texts = "\n".join(message_text(m) for m in last.messages)
    for earlier in world.script.earlier_conversation:
        assert earlier in texts, f"the last request did not carry {earlier!r}"
