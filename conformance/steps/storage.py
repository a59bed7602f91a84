"""Steps about the stored record: the v10 structure, one row per approval and its
execution, and the boot epoch kept out of storage and messages (§4, §7).

The checks themselves live in :mod:`conformance.storage_contract`.
"""

from __future__ import annotations

from typing import Any

from pytest_bdd import given, then, when

from conformance.blame import verifies
from conformance.client import Predicate
from conformance.mock_provider import ScriptedToolCall, TextReply, ToolCallsReply
from conformance.protocol_models import Mode
from conformance.steps.approval import approve
from conformance.steps.model import default_markdown, script_plan
from conformance.steps.requests import granted, listing, mock_provider, plain
from conformance.steps.restart import newest_approval, prompt_and_wait, stored_approval
from conformance.steps.sessions import session_id
from conformance.storage_contract import (
    EPOCH_NAME,
    changed_values,
    differences,
    epoch_names,
    published_v10,
)
from conformance.world import World

DAY_MS = 24 * 60 * 60_000


@then("the database has the structure of the published v10 schema")
@verifies("R7.5")
def published_structure(world: World) -> None:
    found = differences(published_v10(), world.storage().shape())
    assert not found, "the stored schema differs from schemas/storage/v10.sql: " + "; ".join(found)


# -- one record per approval --------------------------------------------------------------


@when("the execution has finished")
def execution_finished(world: World) -> None:
    world.outcome.require_result()
    started = world.wait_for(
        "turn/started", lambda p: p["kind"] == "execution", since=world.cursors.approve
    )
    ended = world.wait_for(
        "turn/ended", lambda p: p["turnId"] == started["turnId"], since=world.cursors.approve
    )
    assert ended["outcome"] == "completed", f"the execution turn ended {ended}"


@then("the approval's record keeps the title and the question in their own fields")
@verifies("R2.6")
def title_and_question_fields(world: World) -> None:
    submitted = world.plan.submitted[-1]
    approval = newest_approval(world)
    row = stored_approval(world, approval["approvalId"])
    assert (row["title"], row["question"]) == (submitted.title, submitted.question), (
        f"the record holds title {row['title']!r} and question {row['question']!r}, "
        f"submitted were {submitted.title!r} and {submitted.question!r}"
    )


@then("the approval's record holds its execution")
@verifies("R4.3")
def record_holds_execution(world: World) -> None:
    approval = newest_approval(world)
    execution_id = approval["executionId"]
    assert execution_id, f"the approval names no execution: {approval}"
    row = stored_approval(world, approval["approvalId"])
    stored = {k: row[k] for k in ("status", "permission_mode", "execution_id", "execution_state")}
    expected = {
        "status": approval["status"],
        "permission_mode": approval["permissionMode"],
        "execution_id": execution_id,
        "execution_state": "completed",
    }
    assert stored == expected, (
        f"the approval's row holds {stored}, while the host reports {expected}"
    )
    holders = world.storage().rows("plan_approvals", "execution_id = ?", (execution_id,))
    assert len(holders) == 1, f"{len(holders)} rows hold execution {execution_id}"


# -- the boot epoch ------------------------------------------------------------------------


def _script_command_turn(world: World) -> None:
    world.provider.enqueue(
        ToolCallsReply((ScriptedToolCall("Bash", {"command": "echo audited"}),)),
        TextReply("The command ran."),
    )


@given("the host holds finished work of every kind")
def finished_work(world: World) -> None:
    """A conversation with a command, a rejected, an expired and a carried-out plan, a
    chosen default shell, and scheduled tasks with a completed and a refused run."""
    rpc = world.rpc
    provider = mock_provider(world)
    created = granted(
        rpc.create_session, str(world.workspace), permission_mode="auto", provider=provider
    )
    world.sessions["main"] = plain(created.session)
    _script_command_turn(world)
    assert prompt_and_wait(world, "Run a command.")["outcome"] == "completed"
    granted(rpc.configure_session, session_id(world), mode="plan")
    for title in ("Rejected", "Expired", "Carried out"):
        script_plan(world, title, default_markdown(title))
        assert prompt_and_wait(world, f"Plan {title}.")["outcome"] == "completed"
        approval = newest_approval(world)
        if title == "Rejected":
            granted(rpc.reject, session_id(world), approval["approvalId"])
        elif title == "Expired":
            mark = world.mark()
            granted(rpc.clock_advance, 31 * 60_000)
            world.wait_for("approval/updated", lambda p: p["approval"]["status"] == "expired", mark)
        else:
            world.provider.enqueue(TextReply("Carried out."))
            world.plan.approval = approval
            approve(world, "auto").require_result()
            execution_finished(world)
    shells = granted(rpc.list_shells)
    default = shells.defaultShellId or shells.shells[0].shellId
    granted(rpc.set_default_shell, default)
    now = granted(rpc.clock_get).now
    modes: tuple[Mode, ...] = ("agent", "plan")
    for mode in modes:
        task = granted(
            rpc.create_task,
            f"{mode} task",
            "Tidy up.",
            mode,
            str(world.workspace),
            provider,
            permission_mode="auto",
            run_at=now + DAY_MS,
        ).task
        if mode == "agent":
            world.provider.enqueue(TextReply("Tidied."))
        mark = world.mark()
        world.attempt_typed(rpc.run_task, task.taskId)  # the plan task's run is refused
        world.wait_for("task/runFinished", _run_of(task.taskId), mark)


def _run_of(task_id: str) -> Predicate:
    """Matches the finished run of a task."""
    return lambda p: bool(p["run"]["taskId"] == task_id and p["run"]["outcome"] != "running")


def _reads(world: World) -> dict[str, Any]:
    """The answers to every read the protocol offers, in a fixed order.

    The answers stay as the host sent them, but for the order of list items, which the
    contract leaves open: they are compared whole, field by field, before and after a
    restart (an unpublished field is what such a check looks for).
    """
    rpc = world.rpc
    sessions = listing(rpc.request("session/list", {}))["sessions"]
    answers: dict[str, Any] = {
        "initialize": world.handshake,
        "session/list": sessions,
        "shell/list": listing(rpc.request("shell/list", {})),
        "task/list": listing(rpc.request("task/list", {})),
    }
    for session in sessions:
        ref = {"sessionId": session["sessionId"]}
        answers[f"approval/list {session['sessionId']}"] = listing(
            rpc.request("approval/list", ref)
        )
        answers[f"session/transcript {session['sessionId']}"] = rpc.request(
            "session/transcript", ref
        )
    return answers


@when("the host restarts with nothing left to recover")
def idle_restart(world: World) -> None:
    seen = world.restart_seen
    seen.answers_before = _reads(world)
    seen.stored_before = world.storage().values()
    world.cursors.restart = world.mark()
    world.restart()


@then("no stored name speaks of a boot epoch")
@verifies("R4.1")
def no_epoch_names(world: World) -> None:
    named = epoch_names(world.storage().shape())
    assert not named, f"the database has names for a boot epoch: {named}"
    keys = [row["key"] for row in world.storage().rows("settings")]
    settings = [key for key in keys if EPOCH_NAME.search(key)]
    assert not settings, f"settings hold {settings}"


@then("every stored value is as it was before the restart")
@verifies("R4.1")
def stored_values_unchanged(world: World) -> None:
    before = world.restart_seen.stored_before
    assert before, "nothing was read from storage before the restart"
    changes = changed_values(before, world.storage().values())
    assert not changes, (
        "a restart with nothing to recover changed stored values, which it may not do "
        "(not even to note the start): " + "; ".join(changes[:10])
    )


@then("the host answers every read as it did before the restart")
@verifies("R4.2")
def answers_unchanged(world: World) -> None:
    before = world.restart_seen.answers_before
    after = _reads(world)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    details = [f"{k}: {before.get(k)} -> {after.get(k)}" for k in changed[:3]]
    assert not changed, (
        "after a restart with nothing to recover the host answers differently "
        f"(a boot epoch in its messages): {changed}; " + "; ".join(details)
    )


@then("no message from the host names a boot epoch")
@verifies("R4.2")
def no_epoch_field(world: World) -> None:
    def keys(value: Any) -> list[str]:
        if isinstance(value, dict):
            return [*value.keys(), *(k for v in value.values() for k in keys(v))]
        if isinstance(value, list):
            return [k for v in value for k in keys(v)]
        return []

    messages = world.host_messages()
    assert messages, "the host sent nothing"
    named = sorted({k for m in messages for k in keys(m) if EPOCH_NAME.search(k)})
    assert not named, f"host messages carry {named}"
