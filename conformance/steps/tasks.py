"""Steps about scheduled tasks and unattended runs (§6)."""

from __future__ import annotations

from pytest_bdd import given, parsers, then, when

from conformance.mock_provider import TextReply
from conformance.steps.sessions import MODES
from conformance.world import World, need

TASK_PROMPT = "Tidy up the changelog."


def _task_id(world: World) -> str:
    task = need(world.tasks.task, "scheduled task")
    return str(task["taskId"])


@given(parsers.parse("a scheduled task in {mode} mode for the project"))
@given(
    parsers.parse(
        "a scheduled task in {mode} mode for the project with permission mode {permission}"
    )
)
def scheduled_task(world: World, mode: str, permission: str = "auto") -> None:
    world.provider.set_fallback(TextReply("Task done."))
    result = world.rpc.request(
        "task/create",
        {
            "name": "Changelog",
            "prompt": TASK_PROMPT,
            "mode": MODES[mode],
            "workspaceRoot": str(world.workspace),
            "provider": {"baseUrl": world.provider.base_url, "model": "mock-model"},
            "permissionMode": permission,
            "runAt": None,
        },
    )
    world.tasks.task = result["task"]


@given(parsers.parse("the task is due in {minutes:d} minutes"))
def task_due(world: World, minutes: int) -> None:
    now = world.rpc.request("conformance/clock/get", {})["now"]
    world.tasks.task = world.rpc.request(
        "task/update", {"taskId": _task_id(world), "runAt": now + minutes * 60_000}
    )["task"]


@given("the user changed the task to Agent mode")
@when("the user changes the task to Agent mode")
def task_to_agent(world: World) -> None:
    world.tasks.task = world.rpc.request(
        "task/update", {"taskId": _task_id(world), "mode": "agent"}
    )["task"]


def _before_run(world: World) -> None:
    world.cursors.provider_turn = len(world.provider.requests())
    world.cursors.turn = world.mark()


@when("the task is run now")
def run_now(world: World) -> None:
    _before_run(world)
    outcome = world.attempt("task/run", {"taskId": _task_id(world)})
    if outcome.error is None:
        run_id = outcome.require_result()["run"]["runId"]
        world.tasks.run = world.wait_for(
            "task/runFinished",
            lambda p: p["run"]["runId"] == run_id,
            since=world.cursors.turn,
        )["run"]
    else:
        world.tasks.run = None


@when(parsers.parse("{minutes:d} minutes pass on the host clock"))
def time_passes(world: World, minutes: int) -> None:
    _before_run(world)
    world.rpc.request("conformance/clock/advance", {"ms": minutes * 60_000})
    task_id = _task_id(world)
    world.tasks.run = world.wait_for(
        "task/runFinished",
        lambda p: p["run"]["taskId"] == task_id and p["run"]["outcome"] != "running",
        since=world.cursors.turn,
    )["run"]


@then(parsers.parse("the run is refused with {code}"))
def run_refused(world: World, code: str) -> None:
    if world.tasks.run is None:
        error = world.outcome.require_error()
        assert error.canonical == code, f"task/run failed with {error.canonical}"
    finished = [
        n["params"]["run"] for n in world.notifications("task/runFinished", world.cursors.turn)
    ]
    assert finished, "the host announced no task run"
    run = finished[-1]
    assert run["outcome"] == "refused", f"the run ended {run['outcome']}"
    assert (run["error"] or {}).get("code") == code, run


@then("the model received no request")
def no_model_request(world: World) -> None:
    after = len(world.provider.requests())
    before = world.cursors.provider_turn
    assert after == before, f"the host called the model {after - before} time(s)"


@then("no plan artifact was written")
def no_artifact(world: World) -> None:
    folder = world.workspace / ".pi" / "plan"
    found = sorted(p.name for p in folder.iterdir()) if folder.exists() else []
    assert not found, f"artifacts were written: {found}"


@then("no approval, execution or turn was recorded")
def nothing_recorded(world: World) -> None:
    approvals = world.storage().rows("plan_approvals")
    assert not approvals, f"plan_approvals holds {approvals}"
    turns = world.storage().rows("turns")
    assert not turns, f"turns were recorded: {turns}"
    started = world.notifications("turn/started", world.cursors.turn)
    assert not started, f"turns were started: {started}"


@then("the run completes unattended")
def run_completed(world: World) -> None:
    run = world.tasks.run
    assert run is not None, f"the run was refused: {world.outcome.error}"
    assert run["outcome"] == "completed", f"the run ended {run['outcome']}: {run['error']}"
    requests = world.provider.requests()[world.cursors.provider_turn :]
    assert requests, "the run never asked the model"
    first_user = [m for m in requests[0].messages if m.get("role") == "user"]
    assert first_user and first_user[-1].get("content") == TASK_PROMPT, first_user


@then("the task is still in Plan mode")
def task_still_plan(world: World) -> None:
    tasks = world.rpc.request("task/list", {})["tasks"]
    task = next(t for t in tasks if t["taskId"] == _task_id(world))
    assert task["mode"] == "plan", f"the host changed the task to {task['mode']}"


@then(parsers.parse("the task's last run is recorded as {outcome}"))
def last_run(world: World, outcome: str) -> None:
    tasks = world.rpc.request("task/list", {})["tasks"]
    task = next(t for t in tasks if t["taskId"] == _task_id(world))
    assert task["lastRun"] and task["lastRun"]["outcome"] == outcome, task
