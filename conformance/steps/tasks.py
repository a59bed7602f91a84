"""Steps about scheduled tasks and unattended runs (§6, project rule P8), and deleting a task
(project rule P26).

A run's end is announced by ``task/runFinished``; whether that comes before or after the
``task/run`` response is the host's choice, so every wait looks at what already arrived
first. The negative checks ("no work was done") run only once that announcement, the
settle point of a run, has arrived.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

from pytest_bdd import given, parsers, then, when

from conformance.blame import blame, verifies
from conformance.client import RpcError
from conformance.messages import message_text
from conformance.mock_provider import (
    HttpErrorReply,
    ScriptedToolCall,
    StallReply,
    TextReply,
    ToolCallsReply,
)
from conformance.steps.model import default_markdown, script_calls, submit_plan_call, tool_call
from conformance.steps.requests import granted, mock_provider, permission_mode, plain
from conformance.steps.sessions import FRAMED_PROMPT, MODES, change_setting, prompt, session_id
from conformance.world import Outcome, World, need

TASK_PROMPT = "Tidy up the changelog."
PLAN_REFUSAL = "PLAN_REQUIRES_INTERACTIVE_SESSION"
RUN_SESSION: Final = "run"  # the alias of the session of a scheduled task's run
DUE_IN_MS = 5 * 60_000
UNATTENDED_CALLS: dict[str, tuple[dict[str, Any], str]] = {
    # tool -> (its arguments, the file it would create)
    "Write": ({"path": "notes.txt", "content": "written unattended\n"}, "notes.txt"),
    "Bash": ({"command": "echo ran > ran.txt"}, "ran.txt"),
}


def _task_id(world: World) -> str:
    task = need(world.tasks.task, "scheduled task")
    return str(task["taskId"])


def _task_now(world: World) -> dict[str, Any]:
    tasks = granted(world.rpc.list_tasks).tasks
    found = [t for t in tasks if t.taskId == _task_id(world)]
    assert found, f"task/list no longer lists the task {_task_id(world)}"
    return plain(found[0])


# -- arranging ------------------------------------------------------------------------------


@given(parsers.parse("a scheduled task in {mode} mode for the project"))
@given(
    parsers.parse(
        "a scheduled task in {mode} mode for the project with permission mode {permission}"
    )
)
def scheduled_task(world: World, mode: str, permission: str = "auto") -> None:
    world.tasks.task = _new_task(world, "Changelog", TASK_PROMPT, mode, permission)


@given(
    "a scheduled task in Agent mode for the project, its prompt framed by blank lines and "
    "indentation"
)
def scheduled_task_framed_prompt(world: World) -> None:
    world.script.prompt = FRAMED_PROMPT
    world.tasks.task = _new_task(world, "Changelog", FRAMED_PROMPT, "Agent", "auto")


@given(parsers.parse("a scheduled task in {mode} mode without a project"))
def scheduled_task_without_project(world: World, mode: str) -> None:
    world.tasks.task = _new_task(world, "Changelog", TASK_PROMPT, mode, "auto", projectless=True)


def _new_task(
    world: World,
    name: str,
    prompt: str,
    mode: str,
    permission: str,
    run_at: int | None = None,
    root: str | None = None,
    projectless: bool = False,
) -> dict[str, Any]:
    """A task for the project (or ``root``, or no project at all) on the mock provider,
    switched on and (unless ``run_at`` is given) not due, as the host answered it."""
    result = granted(
        world.rpc.create_task,
        name,
        prompt,
        MODES[mode],
        None if projectless else root or str(world.workspace),
        mock_provider(world),
        permission_mode=permission_mode(permission),
        run_at=run_at,
        enabled=True,
    )
    return plain(result.task)


def _a_file(world: World) -> str:
    (world.workspace / "notes.txt").write_text("not a folder\n", encoding="utf-8")
    return str(world.workspace / "notes.txt")


_BAD_TASK_ROOTS: Final[dict[str, Callable[[World], str]]] = {
    "a relative path": lambda world: "relative/project",
    "a folder that does not exist": lambda world: str(world.workspace / "missing"),
    "a file": _a_file,
}


@when(parsers.parse("the user tries to create a task for {root}"))
def create_task_bad_root(world: World, root: str) -> None:
    path = _BAD_TASK_ROOTS[root](world)
    world.attempt_typed(
        world.rpc.create_task,
        "Changelog",
        TASK_PROMPT,
        MODES["Agent"],
        path,
        mock_provider(world),
        permission_mode=permission_mode("auto"),
    )


@then("no task was created")
@verifies("P29")
def no_task_created(world: World) -> None:
    tasks = granted(world.rpc.list_tasks).tasks
    assert tasks == [], f"the host created {tasks}"
    rows = world.storage().rows("scheduled_tasks")
    assert rows == [], f"the host stored tasks: {rows}"


@given("a scheduled task in Agent mode for the project given with a trailing slash")
def task_with_slashed_root(world: World) -> None:
    root = f"{world.workspace}/"
    world.tasks.task = _new_task(world, "Changelog", TASK_PROMPT, "Agent", "auto", root=root)


@then("the run's session names the project exactly as the task does")
@verifies("P29")
def run_session_root(world: World) -> None:
    run = need(world.tasks.run, "run")
    task = need(world.tasks.task, "scheduled task")
    listed = {s.sessionId: plain(s) for s in granted(world.rpc.list_sessions).sessions}
    session = listed.get(str(run.get("sessionId")))
    assert session is not None, f"the run's session {run.get('sessionId')} is not listed"
    assert session["workspaceRoot"] == task["workspaceRoot"], (
        f"the task names the project {task['workspaceRoot']!r}, its run's session "
        f"{session['workspaceRoot']!r}: a run works in the project exactly as the task gives it"
    )


@when(parsers.parse("the user creates {count:d} tasks for the project"))
def create_many_tasks(world: World, count: int) -> None:
    world.tasks.many = [
        _new_task(world, f"Task {n}", f"Do chore number {n}.", "Agent", "auto")
        for n in range(1, count + 1)
    ]


@then("the list of tasks shows every one of them as it was created")
@verifies("P29")
def every_task_listed(world: World) -> None:
    created = world.tasks.many
    listed = [plain(t) for t in granted(world.rpc.list_tasks).tasks]
    ids = [t["taskId"] for t in listed]
    missing = [t["taskId"] for t in created if t["taskId"] not in ids]
    assert not missing, (
        f"task/list lists {len(created) - len(missing)} of the {len(created)} tasks the user "
        f"created; missing: {missing}. task/list lists every task, however many there are"
    )
    twice = sorted({i for i in ids if ids.count(i) > 1})
    assert not twice, f"task/list lists the tasks {twice} more than once"
    by_id = {t["taskId"]: t for t in listed}
    wrong = {t["taskId"]: (by_id[t["taskId"]], t) for t in created if by_id[t["taskId"]] != t}
    assert not wrong, (
        f"task/list reports tasks otherwise than they were created (listed, created): {wrong}"
    )


@given("another scheduled task, which is never run")
@given("another scheduled task, which is not run yet")
def other_task(world: World) -> None:
    other = _new_task(world, "Release notes", "Draft the release notes.", "Agent", "auto")
    world.tasks.other_task_id = other["taskId"]


@given("the task was run by hand and completed")
def task_ran_by_hand(world: World) -> None:
    world.provider.enqueue(TextReply("The changelog is tidy."))
    run_task(world, "is run now")
    run = need(world.tasks.run, "finished run")
    assert run["outcome"] == "completed", f"the run ended {run['outcome']}: {run.get('error')}"


@when("the other task is run by hand a minute later")
def other_task_run_later(world: World) -> None:
    other = need(world.tasks.other_task_id, "the other task")
    world.provider.enqueue(TextReply("The release notes are drafted."))
    granted(world.rpc.clock_advance, 60_000)
    mark = world.mark()
    run_id = granted(world.rpc.run_task, other).run.runId
    world.wait_for(
        "task/runFinished",
        lambda p: p["run"]["runId"] == run_id and p["run"]["outcome"] != "running",
        since=mark,
    )


@then("the task still reports its own run as its last")
@verifies("P29")
def own_last_run_kept(world: World) -> None:
    run = need(world.tasks.run, "the task's run")
    last = _task_now(world)["lastRun"] or {}
    assert last.get("runId") == run["runId"], (
        f"after another task ran a minute later, task/list shows the task's last run as "
        f"{last or None}, not its own run {run['runId']}: a task's last run is among its own"
    )


@given("another scheduled task in Agent mode, due at the same time")
@given("another scheduled task of another name in Agent mode, due at the same time")
def other_task_same_time(world: World) -> None:
    _other_task_due(world, 0)


@given("another scheduled task of the same name in Agent mode, due at the same time")
def other_task_same_name_same_time(world: World) -> None:
    _other_task_due(world, 0, need(world.tasks.task, "scheduled task")["name"])


@given(parsers.parse("another scheduled task in Agent mode, due {minutes:d} minutes later"))
def other_task_later(world: World, minutes: int) -> None:
    _other_task_due(world, minutes * 60_000)


def _other_task_due(world: World, after_ms: int, name: str = "Release notes") -> None:
    """A second enabled task called ``name``, due ``after_ms`` after the scenario's task."""
    runs_at = need(world.tasks.task, "scheduled task")["runAt"]
    assert runs_at is not None, "the scenario's task was never due"
    due = runs_at + after_ms
    other = _new_task(world, name, "Draft the release notes.", "Agent", "auto", due)
    assert other["runAt"] == due, f"the other task is due at {other['runAt']}, not {due}"
    world.tasks.other_task_id = other["taskId"]
    world.tasks.latest_run_at = max(runs_at, due)


@when("the time the later task is due comes")
def later_due_time_comes(world: World) -> None:
    _clock_past(world, need(world.tasks.latest_run_at, "the later task's time"))


def _clock_past(world: World, moment: int) -> None:
    """Move the host clock just past ``moment``; what a run does is announced from here."""
    _before_run(world)
    now = granted(world.rpc.clock_get).now
    granted(world.rpc.clock_advance, max(0, moment - now) + 1)


@given(parsers.parse('the model will answer "{text}" for each of the two tasks'))
def model_answers_both_tasks(world: World, text: str) -> None:
    world.provider.enqueue(TextReply(text), TextReply(text))


@then("both tasks ran when their time came")
@verifies("P29")
def both_tasks_ran(world: World) -> None:
    _all_ran(world, [_task_id(world), need(world.tasks.other_task_id, "the other task")])


@given(
    parsers.parse(
        "{count:d} scheduled tasks in Agent mode for the project, all due in {minutes:d} minutes"
    )
)
def many_tasks_due_together(world: World, count: int, minutes: int) -> None:
    due = granted(world.rpc.clock_get).now + minutes * 60_000
    world.tasks.many = [
        _new_task(world, f"Chore {n}", f"Do chore number {n}.", "Agent", "auto", due)
        for n in range(1, count + 1)
    ]
    world.tasks.latest_run_at = due


@given(parsers.parse('the model will answer "{text}" for each of the {count:d} tasks'))
def model_answers_every_task(world: World, text: str, count: int) -> None:
    world.provider.enqueue(*(TextReply(text) for _ in range(count)))


@when("the time the tasks are due comes")
def many_due_time_comes(world: World) -> None:
    _clock_past(world, need(world.tasks.latest_run_at, "the tasks' time"))


@then("every one of the tasks ran when their time came")
@verifies("P29")
def every_task_ran(world: World) -> None:
    _all_ran(world, [t["taskId"] for t in world.tasks.many])


def _all_ran(world: World, task_ids: list[str]) -> None:
    """Each of ``task_ids`` came due and ran to completion, each in a session of its own."""
    granted(world.rpc.list_sessions)  # a round trip: the runs the clock move started show
    started = [
        n
        for n in world.notifications("turn/started", since=world.cursors.turn)
        if n["params"]["kind"] == "scheduled"
    ]
    assert len(started) >= len(task_ids), (
        f"of {len(task_ids)} enabled tasks that came due, the host announced {len(started)} "
        "run(s) starting, neither before answering the clock move that passed their runAt "
        "(P32) nor by its next answer: every timer a clock move makes due fires in that move"
    )
    finished: dict[str, dict[str, Any]] = {}
    for task_id in task_ids:
        try:
            finished[task_id] = _finished(
                world,
                lambda p, task_id=task_id: (
                    p["run"]["taskId"] == task_id and p["run"]["outcome"] != "running"
                ),
            )
        except TimeoutError:
            if not finished and task_id == task_ids[-1]:
                raise  # nothing ran at all: the wait's own report says more
    missing = [task_id for task_id in task_ids if task_id not in finished]
    assert not missing, (
        f"of {len(task_ids)} enabled tasks that came due, {sorted(finished) or 'none'} ran and "
        f"{missing} did not (no task/runFinished): every enabled task runs when its runAt "
        "comes due, however many others are due then too, also after a restart"
    )
    ended = {task_id: run["outcome"] for task_id, run in finished.items()}
    assert set(ended.values()) == {"completed"}, f"the runs ended {ended}"
    sessions = {run["sessionId"] for run in finished.values()}
    assert len(sessions) == len(task_ids), (
        f"the {len(task_ids)} runs ran in the sessions {sessions}, not one each"
    )


@given("the task was run by hand")
def task_run_by_hand(world: World) -> None:
    run_task(world, "is run now")
    run = need(world.tasks.run, "finished run")
    assert run["outcome"] == "completed", f"the run by hand ended {run['outcome']}"


@given("the task ran when its time came")
def task_already_ran_at_its_time(world: World) -> None:
    runs_at = need(world.tasks.task, "scheduled task")["runAt"]
    assert runs_at is not None, "the scenario's task was never due"
    _clock_past(world, runs_at)
    task_ran_at_its_time(world)


@given("the task's run failed because the model provider answered with an error")
def task_run_failed(world: World) -> None:
    world.provider.enqueue(HttpErrorReply(400, "the provider refused the request"))
    run_task(world, "is run now")
    run = need(world.tasks.run, "finished run")
    assert run["outcome"] == "failed", f"the run the provider refused ended {run['outcome']}"


@then("the other task reports no last run")
@verifies("P29")
def other_task_no_last_run(world: World) -> None:
    other = need(world.tasks.other_task_id, "the other task")
    listed = [plain(t) for t in granted(world.rpc.list_tasks).tasks if t.taskId == other]
    assert len(listed) == 1, f"task/list lists the other task {len(listed)} times"
    assert listed[0]["lastRun"] is None, (
        f"the task that never ran reports the last run {listed[0]['lastRun']}"
    )


@given("the model would submit a plan if it were asked")
def model_would_plan(world: World) -> None:
    world.provider.enqueue(
        ToolCallsReply((submit_plan_call("Should never exist", default_markdown("Never")),))
    )


@given(parsers.parse('the model will answer "{text}" for the task'))
def model_answers_task(world: World, text: str) -> None:
    world.provider.enqueue(TextReply(text))


@given(parsers.parse("the model will call {tool} during the task and then finish"))
def model_calls_during_task(world: World, tool: str) -> None:
    arguments, _creates = UNATTENDED_CALLS[tool]
    world.provider.enqueue(
        ToolCallsReply((ScriptedToolCall(tool, arguments),)), TextReply("Done with the task.")
    )


@given(
    parsers.parse(
        'the model will switch to planning during the task and submit a plan titled "{title}"'
    )
)
def model_plans_during_task(world: World, title: str) -> None:
    # Whether the host lets the run plan or refuses it, the model then finishes.
    plan = {"title": title, "markdown": default_markdown(title), "question": "Go ahead?"}
    world.provider.enqueue(
        ToolCallsReply((ScriptedToolCall("EnterPlanMode", {}),)),
        ToolCallsReply((ScriptedToolCall("SubmitPlan", plan),)),
        TextReply("Done with the task."),
    )


@given("the user changed the task to Agent mode")
def task_to_agent(world: World) -> None:
    task = granted(world.rpc.update_task, _task_id(world), mode="agent").task
    assert task.mode == "agent", task
    world.tasks.task = plain(task)


NEW_TASK_MODEL = "another-model"


@given("the user changed the task to Agent mode and to another model")
def task_to_agent_and_model(world: World) -> None:
    provider = mock_provider(world, NEW_TASK_MODEL)
    task = granted(world.rpc.update_task, _task_id(world), mode="agent", provider=provider).task
    world.tasks.task = plain(task)
    assert world.tasks.task["provider"] == plain(provider), world.tasks.task


@then("the run asked the provider for the model the task was changed to")
@verifies("R6.3")
def run_used_new_model(world: World) -> None:
    requests = world.provider.requests()[world.cursors.provider_turn :]
    assert requests, "the run never asked the model"
    asked = sorted({str(r.model) for r in requests})
    assert asked == [NEW_TASK_MODEL], (
        f"the run asked the provider for {asked}, not {NEW_TASK_MODEL!r} the task was changed to"
    )


# -- starting a run ---------------------------------------------------------------------------


def _before_run(world: World) -> None:
    world.cursors.provider_turn = len(world.provider.requests())
    world.cursors.turn = world.mark()


def _finished(world: World, predicate: Any) -> dict[str, Any]:
    run: dict[str, Any] = world.wait_for("task/runFinished", predicate, since=world.cursors.turn)[
        "run"
    ]
    return run


@when(parsers.re(r"the task (?P<how>is run now|comes due)"))
def run_task(world: World, how: str) -> None:
    _before_run(world)
    task_id = _task_id(world)
    due_at: int | None = None
    if how == "is run now":
        outcome = world.attempt_typed(world.rpc.run_task, task_id)
        run_id = outcome.result["run"]["runId"] if outcome.result else None
    else:
        world.outcome = Outcome()  # no response carries this run
        now = granted(world.rpc.clock_get).now
        granted(world.rpc.update_task, task_id, run_at=now + DUE_IN_MS)
        _before_run(world)
        due_at = now + DUE_IN_MS
        granted(world.rpc.clock_advance, DUE_IN_MS)
        run_id = None
    # The settle point: the run's end, announced before or after the response.
    world.tasks.run = run = _finished(
        world,
        lambda p: (
            p["run"]["taskId"] == task_id
            and p["run"]["outcome"] != "running"
            and (run_id is None or p["run"]["runId"] == run_id)
        ),
    )
    _check_run_announcements(world, task_id, run, due_at)


def _check_run_announcements(
    world: World, task_id: str, run: dict[str, Any], due_at: int | None
) -> None:
    """A run's turn is announced as a scheduled one (R6.3), and a run that came due on a
    clock move was under way before that move was answered (P32)."""
    notes = world.notifications(since=world.cursors.turn)
    started = [
        (i, n["params"])
        for i, n in enumerate(notes)
        if n["method"] == "turn/started" and n["params"]["sessionId"] == run.get("sessionId")
    ]
    if started:
        with blame("R6.3"):
            assert started[0][1]["kind"] == "scheduled", (
                f"the run's turn was announced as a {started[0][1]['kind']!r} turn, not "
                "a 'scheduled' one"
            )
    session = run.get("sessionId")
    if session is not None:
        with blame("R7.2"):
            listed = {s.sessionId: s for s in granted(world.rpc.list_sessions).sessions}
            assert session in listed, (
                f"the run's session {session} is not in session/list; a run's session is a "
                "session like any other"
            )
        if due_at is not None:
            with blame("P32"):
                created = listed[session].createdAt
                assert created >= due_at and run["startedAt"] >= due_at, (
                    f"the run came due at {due_at} on the host clock, but its session reads "
                    f"createdAt {created} and the run startedAt {run['startedAt']}: a run and "
                    "its new session begin when the run starts, on the host clock"
                )
        assert session not in world.tasks.run_sessions, (
            f"the run was given session {session}, which an earlier run had: every run is a "
            "new session"
        )
        world.tasks.run_sessions.append(session)
    if due_at is None:
        return
    answered = world.clock_reached(due_at)
    if answered is None:
        return
    first = next(
        (
            i
            for i, n in enumerate(notes)
            if (n["method"] == "turn/started" and n["params"]["kind"] == "scheduled")
            or (n["method"] == "task/runFinished" and n["params"]["run"]["taskId"] == task_id)
        ),
        None,
    )
    with blame("P32"):
        assert first is not None and world.cursors.turn + first < answered, (
            "the task came due on a clock move, but its run was announced only after that "
            "move was answered; a timer's notifications come before the clock's answer"
        )


# -- checks: Plan tasks are refused -----------------------------------------------------------


@then(parsers.parse("the run is refused with {code}"))
@verifies("R6.1")
def run_refused(world: World, code: str) -> None:
    run = need(world.tasks.run, "finished run")
    assert run["outcome"] == "refused", f"the run ended {run['outcome']}: {run['error']}"
    assert (run["error"] or {}).get("code") == code, f"the run was refused with {run['error']}"
    if world.outcome.error is not None or world.outcome.result is not None:
        error = world.outcome.require_error()
        assert error.canonical == code, f"task/run failed with {error.canonical}, not {code}"
    last = _task_now(world)["lastRun"]
    assert last and last["runId"] == run["runId"] and last["outcome"] == "refused", (
        f"the task's last run reads {last}"
    )


@then("the host did no work for the refused run")
@verifies("R6.2")
def no_work(world: World) -> None:
    need(world.tasks.run, "finished run")  # the settle point has passed
    calls = len(world.provider.requests()) - world.cursors.provider_turn
    assert calls == 0, f"the host called the model {calls} time(s)"
    folder = world.workspace / ".pi" / "plan"
    written = sorted(p.name for p in folder.iterdir()) if folder.exists() else []
    assert not written, f"artifacts were written: {written}"
    approvals = world.storage().rows("plan_approvals")
    assert not approvals, f"plan_approvals holds {approvals}"
    turns = world.storage().rows("turns")
    assert not turns, f"turns were recorded: {turns}"
    since = world.cursors.turn
    for method in ("turn/started", "approval/updated", "execution/updated"):
        sent = world.notifications(method, since)
        assert not sent, f"the host sent {method} for the refused run: {sent}"


@then("the task is still in Plan mode")
@verifies("R6.3")
def task_still_plan(world: World) -> None:
    task = _task_now(world)
    assert task["mode"] == "plan", f"the host changed the task to {task['mode']}"
    stored = world.storage().rows("scheduled_tasks", "id = ?", (_task_id(world),))
    assert stored and stored[0]["mode"] == "plan", f"storage holds the task as {stored}"


@then("running it again is refused the same way")
@verifies("R6.3")
def refused_again(world: World) -> None:
    first = need(world.tasks.run, "finished run")
    run_task(world, "is run now")
    again = need(world.tasks.run, "finished run")
    assert again["runId"] != first["runId"], "the second run reused the first run's id"
    assert again["outcome"] == "refused", f"the second run ended {again['outcome']}"
    assert (again["error"] or {}).get("code") == PLAN_REFUSAL, again
    last = _task_now(world)["lastRun"]
    assert last and last["runId"] == again["runId"], (
        f"after a second run the task's last run is {last and last['runId']}, not the second "
        f"run {again['runId']}"
    )


# -- checks: Agent tasks run unattended -------------------------------------------------------


@then("the run completes unattended")
@verifies("R6.3")
def run_completed(world: World) -> None:
    run = need(world.tasks.run, "finished run")
    assert run["outcome"] == "completed", f"the run ended {run['outcome']}: {run['error']}"
    requests = world.provider.requests()[world.cursors.provider_turn :]
    assert requests, "the run never asked the model"
    users = [message_text(m) for m in requests[0].messages if m.get("role") == "user"]
    assert users and users[-1] == TASK_PROMPT, f"the run asked the model {users[-1:]}"
    started = world.notifications("turn/started", world.cursors.turn)
    kinds = [(n["params"]["sessionId"], n["params"]["mode"]) for n in started]
    assert kinds == [(run["sessionId"], "agent")], f"the run started turns {kinds}"
    last = _task_now(world)["lastRun"]
    assert last and last["runId"] == run["runId"] and last["outcome"] == "completed", last


@then("the run is recorded as failed, as its turn ended")
@verifies("P25")
def run_failed_with_its_turn(world: World) -> None:
    run = need(world.tasks.run, "finished run")
    session = run["sessionId"]
    assert session is not None, f"the Agent task's run names no session: {run}"
    # the order of the turn's end and the run's end is the host's: wait for the later one
    world.wait_for("turn/ended", lambda p: p["sessionId"] == session, since=world.cursors.turn)
    ended = [
        n["params"]
        for n in world.notifications("turn/ended", world.cursors.turn)
        if n["params"]["sessionId"] == session
    ]
    turns = [(e["outcome"], (e.get("error") or {}).get("code")) for e in ended]
    assert turns == [("failed", "PROVIDER_ERROR")], (
        f"the run's turn, whose model provider answered with an HTTP error, ended {turns}, "
        "not failed with PROVIDER_ERROR"
    )
    assert run["outcome"] == "failed", (
        f"task/runFinished reports the run {run['outcome']} (error {run['error']}), but its "
        "turn ended failed: a run whose turn failed is a failed run, not a completed one"
    )
    last = _task_now(world)["lastRun"]
    assert last and last["runId"] == run["runId"] and last["outcome"] == "failed", (
        f"task/list reports the last run {last}, not the failed run {run['runId']}"
    )
    rows = world.storage().rows("scheduled_task_runs", "id = ?", (run["runId"],))
    stored = (rows[0]["outcome"], rows[0]["error_code"]) if rows else "no row"
    reported = {
        "task/runFinished": (run["outcome"], (run.get("error") or {}).get("code")),
        "task/list's lastRun": (last["outcome"], (last.get("error") or {}).get("code")),
        "scheduled_task_runs": stored,
    }
    wrong = {where: got for where, got in reported.items() if got != ("failed", "PROVIDER_ERROR")}
    assert not wrong, (
        f"the failed run reads {wrong}, not failed with PROVIDER_ERROR: a run whose turn "
        "failed is recorded with its turn's error, in task/runFinished, lastRun and "
        "scheduled_task_runs alike"
    )


@then("no plan artifact was written")
@verifies("R6.3")
def no_artifact(world: World) -> None:
    folder = world.workspace / ".pi" / "plan"
    found = sorted(p.name for p in folder.iterdir()) if folder.exists() else []
    assert not found, f"artifacts were written: {found}"
    assert not world.storage().rows("plan_approvals"), "an approval was recorded"


# -- checks: permission in unattended runs (P8) ---------------------------------------------------


def _result_of(world: World, tool: str) -> dict[str, Any]:
    results = [
        n["params"]
        for n in world.notifications("turn/toolResult", world.cursors.turn)
        if n["params"]["tool"] == tool
    ]
    assert len(results) == 1, f"the {tool} call got {len(results)} results"
    result: dict[str, Any] = results[0]
    return result


@then(parsers.parse("the {tool} call was refused with PERMISSION_UNAVAILABLE"))
@verifies("P8")
def refused_unattended(world: World, tool: str) -> None:
    result = _result_of(world, tool)
    code = (result.get("error") or {}).get("code")
    assert (result["status"], code) == ("denied", "PERMISSION_UNAVAILABLE"), (
        f"the unattended {tool} call ended {result['status']} with {code}"
    )
    asked = world.notifications("permission/requested", world.cursors.turn)
    assert not asked, f"the unattended run asked for permission: {asked}"


@then(parsers.parse("the {tool} call did nothing"))
@verifies("P8")
def call_did_nothing(world: World, tool: str) -> None:
    _arguments, creates = UNATTENDED_CALLS[tool]
    assert not (world.workspace / creates).exists(), f"the refused {tool} call created {creates}"
    commands = world.notifications("command/started", world.cursors.turn)
    assert not commands, f"the refused call ran a command: {commands}"


@then(parsers.parse("the {tool} call ran"))
@verifies("P8")
def call_ran(world: World, tool: str) -> None:
    result = _result_of(world, tool)
    assert result["status"] == "ok", f"the {tool} call ended {result['status']}: {result['error']}"
    _arguments, creates = UNATTENDED_CALLS[tool]
    assert (world.workspace / creates).exists(), f"the {tool} call did not create {creates}"


@then("the run went on to completion")
@verifies("P8")
def went_on(world: World) -> None:
    run = need(world.tasks.run, "finished run")
    assert run["outcome"] == "completed", f"the run ended {run['outcome']}: {run['error']}"
    requests = world.provider.requests()[world.cursors.provider_turn :]
    assert len(requests) == 2, f"the run asked the model {len(requests)} times, not twice"
    tool_messages = [m for m in requests[1].messages if m.get("role") == "tool"]
    assert tool_messages, "the model was not given the call's result"


@then("the run approved no plan and carried nothing out")
@verifies("R3.8")
def run_approved_nothing(world: World) -> None:
    run = need(world.tasks.run, "finished run")
    notes = world.notifications(since=world.cursors.turn)
    executions = [n["params"] for n in notes if n["method"] == "execution/updated"]
    assert not executions, (
        f"the run's plan was set going without the user: {executions[0]}; nobody attends a "
        "scheduled run, and a plan is never approved by one"
    )
    session = run.get("sessionId")
    approvals = granted(world.rpc.list_approvals, session).approvals if session else []
    approved = [(a.title, a.status) for a in approvals if a.status == "approved"]
    assert not approved, f"the run's session lists approved plans {approved}"
    stored = [
        (row["title"], row["status"], row["execution_id"])
        for row in world.storage().rows("plan_approvals")
        if row["status"] == "approved" or row["execution_id"] is not None
    ]
    assert not stored, f"plan_approvals holds an approval with an execution: {stored}"


# -- deleting a task (P26) ------------------------------------------------------------------


@given(parsers.parse("the task is due in {minutes:d} minutes"))
def task_due_later(world: World, minutes: int) -> None:
    before = need(world.tasks.task, "scheduled task")
    now = granted(world.rpc.clock_get).now
    task = granted(world.rpc.update_task, _task_id(world), run_at=now + minutes * 60_000)
    assert task.task.runAt == now + minutes * 60_000, f"the task is due at {task.task.runAt}"
    world.tasks.task = plain(task.task)
    with blame("P29"):
        moved = {
            key: (world.tasks.task[key], value)
            for key, value in before.items()
            if key not in ("runAt", "lastRun") and world.tasks.task[key] != value
        }
        assert not moved, (
            f"a task/update that gave only runAt also changed (now, before): {moved}; the "
            "fields an update leaves out keep their values"
        )
    with blame("R7.2"):
        listed = _task_now(world)["lastRun"]
        assert world.tasks.task["lastRun"] == listed, (
            f"task/update answered the task with lastRun {world.tasks.task['lastRun']}, while "
            f"task/list reports {listed}: an answer reports the task as it now is"
        )


@given(parsers.parse("the task is due in {days:d} days"))
def task_due_in_days(world: World, days: int) -> None:
    task_due_later(world, days * 24 * 60)


@when("the host clock moves on a minute")
def clock_moves_a_minute(world: World) -> None:
    _before_run(world)
    granted(world.rpc.clock_advance, 60_000)


@given(parsers.parse("the user moved the task {minutes:d} minutes later"))
def task_moved_later(world: World, minutes: int, enabled: bool | None = None) -> None:
    earlier = need(world.tasks.task, "scheduled task")["runAt"]
    assert earlier is not None, "the scenario's task was never due"
    world.tasks.earlier_run_at = earlier
    later = earlier + minutes * 60_000
    task = granted(world.rpc.update_task, _task_id(world), run_at=later, enabled=enabled)
    assert task.task.runAt == later, f"the moved task is due at {task.task.runAt}"
    world.tasks.task = plain(task.task)


@given(parsers.parse("the user moved the task {minutes:d} minutes later, switching it on again"))
def task_moved_and_enabled(world: World, minutes: int) -> None:
    task_moved_later(world, minutes, enabled=True)


@given(parsers.parse('the model would answer "{text}" if it were asked'))
def model_would_answer(world: World, text: str) -> None:
    world.provider.enqueue(TextReply(text))


@given("the user deleted the task")
@when("the user deletes the task")
def delete_task(world: World) -> None:
    granted(world.rpc.delete_task, _task_id(world))


@when(parsers.parse("the time the task was due comes"))
def due_time_comes(world: World) -> None:
    runs_at = need(world.tasks.task, "scheduled task")["runAt"]
    assert runs_at is not None, "the scenario's task was never due"
    _clock_past(world, runs_at)


@when("the time the task was first due comes")
def first_due_time_comes(world: World) -> None:
    _clock_past(world, need(world.tasks.earlier_run_at, "the time the task was first due"))


@when(parsers.re(r"the user tries to (?P<action>run|change|delete) the deleted task"))
def act_on_deleted(world: World, action: str) -> None:
    _before_run(world)
    task_id = _task_id(world)
    try:
        if action == "run":
            world.rpc.run_task(task_id)
        elif action == "change":
            world.rpc.update_task(task_id, name="Renamed changelog")
        else:
            world.rpc.delete_task(task_id)
    except RpcError as error:
        world.outcome = Outcome(error=error)
    else:
        world.outcome = Outcome(result={})


@then("the task is no longer listed")
@verifies("P26")
def task_not_listed(world: World) -> None:
    listed = [task.taskId for task in granted(world.rpc.list_tasks).tasks]
    assert _task_id(world) not in listed, f"task/list still lists the deleted task: {listed}"


@then("the deleted task did not run")
@verifies("P26")
def deleted_task_idle(world: World) -> None:
    _did_not_run(world, "the deleted task")


@then("the switched-off task did not run")
@verifies("P29")
def switched_off_task_idle(world: World) -> None:
    _did_not_run(world, "the switched-off task")


@then("the task due weeks ahead did not run")
@verifies("P29")
def far_task_idle(world: World) -> None:
    runs_at = need(world.tasks.task, "scheduled task")["runAt"]
    _did_not_run(world, f"the task due weeks ahead (runAt {runs_at}), a minute into its wait")


@then("the moved task did not run")
@verifies("P29")
def moved_task_idle(world: World) -> None:
    _did_not_run(world, "the task at the time it was moved from")


@then("the task taken off the schedule did not run")
@verifies("P29")
def unscheduled_task_idle(world: World) -> None:
    _did_not_run(world, "the task taken off the schedule, at the time it was due before")


def _ran_when_due(world: World, task_id: str, which: str) -> dict[str, Any]:
    """The completed run of ``task_id`` that the last clock move started."""
    granted(world.rpc.list_sessions)  # a round trip: a run the clock move started shows
    started = [
        n
        for n in world.notifications(since=world.cursors.turn)
        if (n["method"] == "turn/started" and n["params"]["kind"] == "scheduled")
        or (n["method"] == "task/runFinished" and n["params"]["run"]["taskId"] == task_id)
    ]
    assert started, (
        f"the host clock passed the runAt of {which}, and the host announced no run of it, "
        "neither before answering that clock move (P32) nor by its next answer: the task did "
        "not run when its time came"
    )
    run = _finished(
        world, lambda p: p["run"]["taskId"] == task_id and p["run"]["outcome"] != "running"
    )
    assert run["outcome"] == "completed", f"the run ended {run['outcome']}: {run['error']}"
    _check_run_announcements(world, task_id, run, None)
    return run


@then("the task ran when its time came")
@verifies("P29")
def task_ran_at_its_time(world: World) -> None:
    world.tasks.run = _ran_when_due(world, _task_id(world), "the task")


@then("the other task ran when its time came")
@verifies("P29")
def other_task_ran(world: World) -> None:
    other = need(world.tasks.other_task_id, "the other task")
    _ran_when_due(world, other, "the other task, whose time one clock move also passed")


@when("the host clock jumps a week ahead")
def clock_jumps_a_week(world: World) -> None:
    _before_run(world)
    granted(world.rpc.clock_advance, 7 * 24 * 3_600_000)


@then("the task ran once when its time came")
@verifies("P29")
def task_ran_once(world: World) -> None:
    task_id = _task_id(world)
    _finished(world, lambda p: p["run"]["taskId"] == task_id and p["run"]["outcome"] != "running")
    granted(world.rpc.list_sessions)  # a round trip: whatever the clock move started shows
    finished = {
        n["params"]["run"]["runId"]
        for n in world.notifications("task/runFinished", world.cursors.turn)
        if n["params"]["run"]["taskId"] == task_id
    }
    stored = [
        r["id"] for r in world.storage().rows("scheduled_task_runs", "task_id = ?", (task_id,))
    ]
    calls = len(world.provider.requests()) - world.cursors.provider_turn
    assert (len(finished), len(stored), calls) == (1, 1, 1), (
        f"the task ran more than once when its time came: {len(finished)} run(s) announced, "
        f"{len(stored)} stored, {calls} model request(s)"
    )
    task_ran_at_its_time(world)


@then("the task that already ran did not run again")
@verifies("P29")
def ran_only_once(world: World) -> None:
    task_id = _task_id(world)
    granted(world.rpc.list_sessions)  # a round trip: whatever the clock move started shows
    finished = [
        n["params"]["run"]
        for n in world.notifications("task/runFinished")
        if n["params"]["run"]["taskId"] == task_id
    ]
    stored = world.storage().rows("scheduled_task_runs", "task_id = ?", (task_id,))
    calls = len(world.provider.requests())
    assert (len(finished), len(stored), calls) == (1, 1, 1), (
        f"the task ran again when the time it had already run at came again: {len(finished)} "
        f"run(s) announced, {len(stored)} stored, {calls} model request(s) in all (a task "
        "runs once for a runAt)"
    )


def _did_not_run(world: World, which: str) -> None:
    """No trace of a run since the scenario's mark (the clock move that would have started
    it answered only after the host fired what was due)."""
    since = world.cursors.turn
    for method in ("task/runFinished", "turn/started"):
        sent = world.notifications(method, since)
        assert not sent, f"the host sent {method} for {which}: {sent}"
    calls = len(world.provider.requests()) - world.cursors.provider_turn
    assert calls == 0, f"the host called the model {calls} time(s) for {which}"
    sessions = granted(world.rpc.list_sessions).sessions
    assert not sessions, f"the host started sessions for {which}: {sessions}"
    runs = world.storage().rows("scheduled_task_runs")
    assert not runs, f"scheduled_task_runs records runs of {which}: {runs}"


# -- the edge of a task's time (P32) --------------------------------------------------------


@given("the task is due at a time that is not a whole second")
def task_due_off_the_second(world: World) -> None:
    now = granted(world.rpc.clock_get).now
    run_at = now // 1000 * 1000 + 5 * 60_000 + 1_500
    world.tasks.task = plain(granted(world.rpc.update_task, _task_id(world), run_at=run_at).task)


def _run_at(world: World) -> int:
    run_at = need(world.tasks.task, "scheduled task")["runAt"]
    assert isinstance(run_at, int), f"the task is not due: runAt {run_at}"
    return run_at


@when("the host clock reaches a millisecond before the task's time")
def clock_just_before_task(world: World) -> None:
    _before_run(world)
    now = granted(world.rpc.clock_get).now
    granted(world.rpc.clock_advance, _run_at(world) - 1 - now)


@when("the host clock reaches the task's time")
def clock_at_task_time(world: World) -> None:
    granted(world.rpc.clock_advance, 1)


@then("the task has not run yet")
@verifies("P32")
def task_not_run_yet(world: World) -> None:
    _did_not_run(world, f"a millisecond before its runAt {_run_at(world)}")


@then("the task ran at its time, not before")
@verifies("P32")
def task_ran_at_time(world: World) -> None:
    task_id, run_at = _task_id(world), _run_at(world)
    run = _finished(
        world, lambda p: p["run"]["taskId"] == task_id and p["run"]["outcome"] != "running"
    )
    assert run["outcome"] == "completed", f"the run ended {run['outcome']}: {run['error']}"
    assert run["startedAt"] >= run_at, (
        f"the run reads startedAt {run['startedAt']}, before the task's runAt {run_at}"
    )


# -- the system clock outside conformance mode (P33) ----------------------------------------

SYSTEM_DUE_MS: Final = 1000  # soon enough not to slow the suite, late enough to stay ahead


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


@given("a scheduled task in Agent mode for the project, due in a moment by the system clock")
def task_due_by_system_clock(world: World) -> None:
    _before_run(world)
    due = _wall_ms() + SYSTEM_DUE_MS
    world.tasks.task = _new_task(world, "Changelog", TASK_PROMPT, "Agent", "auto", run_at=due)


@then("the task ran on its own when the system clock reached its time")
@verifies("P33")
def ran_by_system_clock(world: World) -> None:
    task = need(world.tasks.task, "scheduled task")
    due = int(task["runAt"])
    try:
        run = _finished(
            world,
            lambda p: p["run"]["taskId"] == task["taskId"] and p["run"]["outcome"] != "running",
        )
    except TimeoutError:
        raise AssertionError(
            f"the task was due at {due} by the system clock and had not run "
            f"{(_wall_ms() - due) / 1000:.1f} s later; outside conformance mode the host's "
            "clock is the system clock and its timers fire on their own"
        ) from None
    assert run["outcome"] == "completed", f"the run ended {run['outcome']}: {run['error']}"
    now = _wall_ms()
    assert due <= run["startedAt"] <= now, (
        f"the run reads startedAt {run['startedAt']}; it came due at {due} by the system "
        f"clock and was seen finished at {now}"
    )


# -- a run cut short by a restart (P28) -------------------------------------------------------

INTERRUPTED = "TURN_INTERRUPTED"


@given("the model will take its time to answer the task")
def task_model_stalls(world: World) -> None:
    world.provider.enqueue(StallReply())


@given("the task was run and is waiting for the model")
def task_waiting_for_model(world: World) -> None:
    _before_run(world)
    world.tasks.run = run = world.rpc.request("task/run", {"taskId": _task_id(world)})["run"]
    _has_session(run)
    # The settle point: the run's request reached the model, so its turn is under way.
    world.provider.wait_for_requests(world.cursors.provider_turn + 1, world.timeout)


@given("the task's time came and its run is waiting for the model")
def due_run_waiting_for_model(world: World) -> None:
    runs_at = need(world.tasks.task, "scheduled task")["runAt"]
    assert runs_at is not None, "the scenario's task was never due"
    _clock_past(world, runs_at)
    world.provider.wait_for_requests(world.cursors.provider_turn + 1, world.timeout)


@then("the task whose run the restart cut short did not run again")
@verifies("P29")
def cut_short_not_run_again(world: World) -> None:
    task_id = _task_id(world)
    granted(world.rpc.list_sessions)  # a round trip: whatever the clock move started shows
    started = [
        n["params"]
        for n in world.notifications("turn/started", world.cursors.turn)
        if n["params"]["kind"] == "scheduled"
    ]
    stored = world.storage().rows("scheduled_task_runs", "task_id = ?", (task_id,))
    calls = len(world.provider.requests()) - world.cursors.provider_turn
    assert (len(started), len(stored), calls) == (0, 1, 0), (
        f"the task whose run a restart cut short ran again when the restarted host's clock "
        f"reached its time: {len(started)} run(s) started, {len(stored)} stored in all, "
        f"{calls} model request(s) since (a task runs once for a runAt, also when that run "
        "was interrupted)"
    )


@given("the task was run again and is waiting for the model")
def task_run_again_waiting(world: World) -> None:
    world.tasks.first_run = need(world.tasks.run, "run under way")
    task_waiting_for_model(world)


@given("the user read the task list while the run was under way")
def listed_while_running(world: World) -> None:
    _task_now(world)


@when("the model answers the run")
def model_answers_run(world: World) -> None:
    run = need(world.tasks.run, "run under way")
    world.provider.release_stalls()
    world.tasks.run = _finished(
        world, lambda p: p["run"]["runId"] == run["runId"] and p["run"]["outcome"] != "running"
    )


@then("the task list shows the run completed")
@verifies("P29")
def list_shows_completed(world: World) -> None:
    run = need(world.tasks.run, "finished run")
    assert run["outcome"] == "completed", f"the run ended {run['outcome']}: {run.get('error')}"
    last = _task_now(world)["lastRun"] or {}
    shown = (last.get("runId"), last.get("outcome"))
    assert shown == (run["runId"], "completed"), (
        f"task/list shows the last run as {shown} after task/runFinished announced "
        f"{(run['runId'], 'completed')}: a list read while the run was under way must not "
        "hold back its end"
    )


@when("the user cancels the first run's turn")
def cancel_first_run(world: World) -> None:
    first = need(world.tasks.first_run, "first run")
    granted(world.rpc.cancel, first["sessionId"])


@then("the other run goes on, and completes once the model answers")
@verifies("P35")
def other_run_goes_on(world: World) -> None:
    first, second = need(world.tasks.first_run, "first run"), need(world.tasks.run, "second run")
    _finished(
        world, lambda p: p["run"]["runId"] == first["runId"] and p["run"]["outcome"] != "running"
    )
    ended = [
        n["params"]
        for n in world.notifications("turn/ended", world.cursors.turn)
        if n["params"]["sessionId"] == second["sessionId"]
    ]
    assert not ended, (
        f"cancelling one run's turn ended the other run's turn too: {ended[0]}; a cancel "
        "names one session, and each run of a task is a run of its own"
    )
    world.provider.release_stalls()
    finished = _finished(
        world, lambda p: p["run"]["runId"] == second["runId"] and p["run"]["outcome"] != "running"
    )
    assert finished["outcome"] == "completed", (
        f"the run left alone ended {finished['outcome']} ({finished['error']}) once its model "
        "answered; only the cancelled run's turn was cancelled"
    )


@when("the task is run again by hand")
def run_again_by_hand(world: World) -> None:
    world.tasks.first_run = need(world.tasks.run, "run under way")
    _before_run(world)
    world.tasks.run = plain(granted(world.rpc.run_task, _task_id(world)).run)
    _has_session(world.tasks.run)


def _has_session(run: dict[str, Any]) -> None:
    """An Agent run that started runs in a session of its own, named in task/run's answer,
    and carries no error yet."""
    if run.get("outcome") == "running":
        with blame("R7.2"):
            assert run.get("error") is None, (
                f"task/run answered the new run {run.get('runId')} with the error "
                f"{run.get('error')}: an error is never carried over from an earlier run"
            )
    with blame("P35"):
        assert run.get("sessionId"), (
            f"task/run answered the run {run.get('runId')} with sessionId "
            f"{run.get('sessionId')!r}: an Agent task's run runs as a new session, and its "
            "answer names it"
        )


@then("the second run is a run of its own, in a session of its own, and it completes")
@verifies("P35")
def second_run_of_its_own(world: World) -> None:
    first, second = need(world.tasks.first_run, "first run"), need(world.tasks.run, "second run")
    assert second["runId"] != first["runId"], (
        f"task/run answered the earlier run {first['runId']} ({first['outcome']}) instead of "
        "starting one: every task/run runs the task now, as a run of its own"
    )
    assert second["sessionId"] != first["sessionId"], (
        f"the second run was given the first run's session {first['sessionId']}: every run is "
        "a new session"
    )
    finished = _finished(
        world, lambda p: p["run"]["runId"] == second["runId"] and p["run"]["outcome"] != "running"
    )
    assert finished["outcome"] == "completed", f"the second run ended {finished}"
    listed = {s.sessionId for s in granted(world.rpc.list_sessions).sessions}
    assert {first["sessionId"], second["sessionId"]} <= listed, (
        f"session/list does not list both runs' sessions: {sorted(listed)}"
    )


@given(
    "the model will run a waiting command with a one-minute timeout during the task and then finish"
)
def task_runs_waiting_command(world: World) -> None:
    call = ScriptedToolCall("Bash", {"command": "echo waiting; sleep 3600", "timeout_ms": 60_000})
    world.provider.enqueue(ToolCallsReply((call,)), TextReply("The command was stopped."))


@given("the task was run and its command has started")
def task_command_started(world: World) -> None:
    _before_run(world)
    world.tasks.run = plain(granted(world.rpc.run_task, _task_id(world)).run)
    world.wait_for("command/started", since=world.cursors.turn)


@then("the run's command timed out and the run completed")
@verifies("C5")
def run_command_timed_out(world: World) -> None:
    run = need(world.tasks.run, "the run")
    started = world.wait_for("command/started", since=world.cursors.turn)
    command = started["commandId"]
    run_turn = world.wait_for(
        "turn/started", lambda p: p["sessionId"] == run["sessionId"], since=world.cursors.turn
    )["turnId"]
    with blame("R5.9"):
        assert started["turnId"] == run_turn, (
            f"command/started names the turn {started['turnId']}, but the command was run in "
            f"the scheduled run's turn {run_turn}: a command belongs to the turn whose call ran "
            "it, in a scheduled run as in any turn"
        )
    try:
        exited = world.wait_for("command/exited", lambda p: p["commandId"] == command)
    except TimeoutError:
        raise AssertionError(
            "the scheduled run's command did not time out when the host clock passed its "
            "one-minute timeout: a command's timeout runs on the host clock in a scheduled run "
            "as in any turn"
        ) from None
    assert exited["timedOut"] is True, f"the run's command ended {exited}"
    finished = _finished(
        world, lambda p: p["run"]["runId"] == run["runId"] and p["run"]["outcome"] != "running"
    )
    assert finished["outcome"] == "completed", f"the run ended {finished}"
    # The clock moved while the run ran: every report of the run keeps the moment it began.
    last = _task_now(world)["lastRun"] or {}
    rows = world.storage().rows("scheduled_task_runs", "id = ?", (run["runId"],))
    starts = {
        "task/run": run["startedAt"],
        "task/runFinished": finished["startedAt"],
        "task/list's lastRun": last.get("startedAt"),
        "scheduled_task_runs": rows[0]["started_at"] if rows else None,
    }
    with blame("R7.2"):
        assert len(set(starts.values())) == 1, (
            f"the run's startedAt reads {starts}: a run has one start, whenever it is reported"
        )


@when("the user cancels the run's turn")
def cancel_run_turn(world: World) -> None:
    run = need(world.tasks.run, "run under way")
    granted(world.rpc.cancel, run["sessionId"])


@then("the run is recorded as failed, as its cancelled turn ended")
@verifies("P35")
def cancelled_run_failed(world: World) -> None:
    run = need(world.tasks.run, "the run")
    try:
        finished = _finished(
            world, lambda p: p["run"]["runId"] == run["runId"] and p["run"]["outcome"] != "running"
        )
    except TimeoutError:
        raise AssertionError(
            "the run whose turn was cancelled never finished (no task/runFinished): every run "
            "ends, failed when its turn did not complete"
        ) from None
    last = _task_now(world)["lastRun"]
    rows = world.storage().rows("scheduled_task_runs", "id = ?", (run["runId"],))
    reported = {
        "task/runFinished": finished["outcome"],
        "task/list's lastRun": last["outcome"] if last else None,
        "scheduled_task_runs": rows[0]["outcome"] if rows else None,
    }
    assert set(reported.values()) == {"failed"}, (
        f"the run whose turn was cancelled reads {reported}: a run ends completed only when its "
        "turn completed, and failed otherwise, everywhere alike"
    )


@then("the run's session was announced as it reads once the run has ended")
@verifies("R7.2")
def run_session_announced(world: World) -> None:
    run = need(world.tasks.run, "finished run")
    session = run["sessionId"]
    world.wait_for("turn/ended", lambda p: p["sessionId"] == session, since=world.cursors.turn)
    now = plain(granted(world.rpc.get_session, session).session)
    try:
        world.wait_for(
            "session/updated",
            lambda p: p["session"]["sessionId"] == session and p["session"] == now,
            since=world.cursors.turn,
        )
    except TimeoutError:
        shown = [
            n["params"]["session"]
            for n in world.notifications("session/updated", world.cursors.turn)
            if n["params"]["session"]["sessionId"] == session
        ]
        raise AssertionError(
            f"the run's session reads {now}, but the host announced it {shown or 'never'}: a "
            "run's session is a session like any other, and every change of what session/get "
            "reports (its turn starting and ending) is announced"
        ) from None


@when("the user prompts the run's session, whose model asks to run a command")
def prompt_run_session(world: World) -> None:
    run = need(world.tasks.run, "finished run")
    call = ScriptedToolCall("Bash", {"command": "echo asked"})
    world.provider.enqueue(ToolCallsReply((call,)), TextReply("Asked first."))
    world.cursors.turn = world.mark()
    world.cursors.provider_turn = len(world.provider.requests())
    world.active_turn = granted(world.rpc.prompt, run["sessionId"], "Run one more thing.").turnId


@when("the user prompts the run's session while the run is under way")
def prompt_busy_run_session(world: World) -> None:
    run = need(world.tasks.run, "run under way")
    world.attempt_typed(world.rpc.prompt, run["sessionId"], "Is the changelog tidy yet?")


@when(parsers.parse("the user changes the {setting} of the run's session"))
def change_run_session(world: World, setting: str) -> None:
    run = need(world.tasks.run, "finished run")
    world.sessions[RUN_SESSION] = {"sessionId": run["sessionId"]}
    change_setting(world, setting, RUN_SESSION)


@then("the run's session asks the user for permission, as any session does")
@verifies("P8")
def run_session_asks(world: World) -> None:
    run = need(world.tasks.run, "finished run")
    turn_id = need(world.active_turn, "the prompted turn")
    found = world.wait_for_any(
        ("permission/requested", "turn/toolResult"),
        lambda p: p.get("sessionId") == run["sessionId"] and p.get("tool") == "Bash",
        since=world.cursors.turn,
    )
    assert found["method"] == "permission/requested", (
        "the Bash call of a prompt to the session a run created ran or was refused without "
        f"asking the user: {found['params']}; once the run has ended its session is attended "
        "like any other, and its permission mode (ask) asks before Bash"
    )
    world.rpc.call(
        "permission/respond", {"requestId": found["params"]["requestId"], "decision": "deny"}
    )
    world.wait_for("turn/ended", lambda p: p["turnId"] == turn_id, since=world.cursors.turn)


@then("the run's session shows its turn under way")
@verifies("R7.2")
def run_session_busy(world: World) -> None:
    run = need(world.tasks.run, "run under way")
    session = granted(world.rpc.get_session, run["sessionId"]).session
    started = world.wait_for("turn/started", lambda p: p["sessionId"] == run["sessionId"])
    assert session.activeTurnId == started["turnId"], (
        f"while its run is under way the run's session reads activeTurnId "
        f"{session.activeTurnId}, not the run's turn {started['turnId']}"
    )


@then("the task's last run is recorded as failed with TURN_INTERRUPTED")
@verifies("P28")
def interrupted_run_failed(world: World) -> None:
    run = need(world.tasks.run, "run started before the restart")
    last = _task_now(world)["lastRun"]
    assert last is not None and last["runId"] == run["runId"], (
        f"after the restart task/list shows the last run {last}, not {run['runId']}"
    )
    code = (last.get("error") or {}).get("code")
    assert (last["outcome"], code) == ("failed", INTERRUPTED), (
        f"after the restart the run cut short reads {last['outcome']} ({code}), "
        f"expected failed ({INTERRUPTED})"
    )
    rows = world.storage().rows("scheduled_task_runs", "id = ?", (run["runId"],))
    assert len(rows) == 1, f"scheduled_task_runs holds {len(rows)} rows for {run['runId']}"
    stored = (rows[0]["outcome"], rows[0]["error_code"])
    assert stored == ("failed", INTERRUPTED), f"the run is stored as {stored}"


@then("the task runs again only when it is asked to, as a new run")
@verifies("P28")
def only_a_new_run(world: World) -> None:
    run = need(world.tasks.run, "run started before the restart")
    since = world.cursors.restart
    # The settle point: a new run, scripted with exactly one answer, runs to its end;
    # whatever the restarted host resumed on its own shows up by then.
    world.provider.enqueue(TextReply("The changelog is tidy now."))
    fresh = world.rpc.request("task/run", {"taskId": _task_id(world)})["run"]
    assert fresh["runId"] != run["runId"], f"the new run reuses the id {run['runId']}"
    finished = world.wait_for(
        "task/runFinished",
        lambda p: p["run"]["runId"] == fresh["runId"] and p["run"]["outcome"] != "running",
        since=since,
    )["run"]
    assert finished["outcome"] == "completed", f"the new run ended {finished}"
    started = world.notifications("turn/started", since)
    assert len(started) == 1, f"after the restart {len(started)} turns started for one new run"
    after = world.provider.requests()[world.cursors.provider_restart :]
    assert len(after) == 1, f"after the restart the model received {len(after)} requests"
    old = [
        n["params"]["run"]
        for n in world.notifications("task/runFinished", since)
        if n["params"]["run"]["runId"] == run["runId"] and n["params"]["run"]["outcome"] != "failed"
    ]
    assert not old, f"the run cut short was carried on after the restart: {old}"
    last = _task_now(world)["lastRun"]
    assert last and last["runId"] == fresh["runId"], f"task/list shows the last run {last}"


# -- a task is reported and kept as given (P29) -----------------------------------------------

_STORED = {  # ScheduledTask field -> scheduled_tasks column
    "name": "name",
    "prompt": "prompt",
    "mode": "mode",
    "workspaceRoot": "workspace_root",
    "permissionMode": "permission_mode",
    "runAt": "run_at",
    "enabled": "enabled",
}


@when("the user creates a task with every field given")
def create_full_task(world: World) -> None:
    _create_full_task(world, str(world.workspace))


@when("the user creates a task without a project, with every other field given")
def create_full_task_without_project(world: World) -> None:
    _create_full_task(world, None)


@when("the user creates a switched-off task due at the earliest time the schedule allows")
def create_task_due_at_zero(world: World) -> None:
    # runAt 0, the first valid Timestamp; switched off, as it is long past due
    _create_full_task(world, str(world.workspace), run_at=0, enabled=False)


@when("the user creates a switched-off task due 1000000 ms after the epoch began")
def create_task_due_early(world: World) -> None:
    # a time a host reading small numbers as seconds would multiply by 1000
    _create_full_task(world, str(world.workspace), run_at=1_000_000, enabled=False)


# Text as the user typed it, surrounding blanks included: a task keeps it as given.
FULL_TASK_NAME: Final = "  Weekly report\t"
FULL_TASK_PROMPT: Final = "Summarise what changed this week.\n"


def _create_full_task(
    world: World, root: str | None, *, run_at: int | None = None, enabled: bool = True
) -> None:
    if run_at is None:
        run_at = world.rpc.clock_get().now + 2 * 3_600_000
    provider = mock_provider(world, "report-model")
    result = granted(
        world.rpc.create_task,
        FULL_TASK_NAME,
        FULL_TASK_PROMPT,
        "agent",
        root,
        provider,
        permission_mode="accept-edits",
        run_at=run_at,
        enabled=enabled,
    )
    world.tasks.expected = {
        "name": FULL_TASK_NAME,
        "prompt": FULL_TASK_PROMPT,
        "mode": "agent",
        "workspaceRoot": root,
        "provider": plain(provider),
        "permissionMode": "accept-edits",
        "runAt": run_at,
        "enabled": enabled,
    }
    world.tasks.task = plain(result.task)


@when("the user changes every field of the task")
def change_full_task(world: World) -> None:
    now = world.rpc.clock_get().now
    provider = mock_provider(world, "other-model")
    before = need(world.tasks.task, "scheduled task")
    result = granted(
        world.rpc.update_task,
        _task_id(world),
        name="Renamed changelog",
        prompt="Tidy up the changelog and the release notes.",
        provider=provider,
        permission_mode="ask",
        run_at=now + 3 * 3_600_000,
        enabled=False,
    )
    world.tasks.expected = {
        **{key: before[key] for key in ("mode", "workspaceRoot")},
        "name": "Renamed changelog",
        "prompt": "Tidy up the changelog and the release notes.",
        "provider": plain(provider),
        "permissionMode": "ask",
        "runAt": now + 3 * 3_600_000,
        "enabled": False,
    }
    world.tasks.task = plain(result.task)


@given("the user switched the task off")
def switch_task_off(world: World) -> None:
    world.tasks.task = plain(granted(world.rpc.update_task, _task_id(world), enabled=False).task)


@given("the user renamed the task")
def rename_task(world: World) -> None:
    before = need(world.tasks.task, "scheduled task")
    task = plain(granted(world.rpc.update_task, _task_id(world), name="Tidy the changelog").task)
    assert task["runAt"] == before["runAt"], (
        f"renamed alone, the task is due at {task['runAt']}, not {before['runAt']}: a "
        "task/update keeps the fields it leaves out"
    )
    world.tasks.task = task


@given("the user switched the task on again")
def switch_task_on(world: World) -> None:
    runs_at = need(world.tasks.task, "scheduled task")["runAt"]
    task = plain(granted(world.rpc.update_task, _task_id(world), enabled=True).task)
    assert (task["enabled"], task["runAt"]) == (True, runs_at), (
        f"switched on again with enabled alone, the task reads enabled {task['enabled']}, due "
        f"at {task['runAt']} (it was due at {runs_at}): a task/update keeps the fields it leaves "
        "out"
    )
    world.tasks.task = task


@when("the user takes the task off the schedule")
@given("the user took the task off the schedule")
def take_task_off_schedule(world: World) -> None:
    before = need(world.tasks.task, "scheduled task")
    assert before["runAt"] is not None, "the scenario's task was never due"
    world.tasks.earlier_run_at = before["runAt"]
    result = granted(world.rpc.update_task, _task_id(world), run_at=None)
    world.tasks.expected = {
        **{key: before[key] for key in _STORED if key != "runAt"},
        "provider": before["provider"],
        "runAt": None,
    }
    world.tasks.task = plain(result.task)


@then("the task is still switched on")
@verifies("P29")
def task_still_switched_on(world: World) -> None:
    need(world.tasks.run, "finished run")  # the settle point has passed
    listed = _task_now(world)["enabled"]
    assert listed is True, (
        f"after its refused run task/list reports the task enabled: {listed}; the user left "
        "it switched on, and only the user switches a task off (a refused Plan task stays "
        "as it was and is refused again each time it runs)"
    )
    rows = world.storage().rows("scheduled_tasks", "id = ?", (_task_id(world),))
    stored = rows[0]["enabled"] if rows else "no row"
    assert stored == 1, f"after its refused run scheduled_tasks holds enabled = {stored}"


@given("the user read the list of tasks")
def read_task_list(world: World) -> None:
    listed = [t for t in granted(world.rpc.list_tasks).tasks if t.taskId == _task_id(world)]
    assert len(listed) == 1, f"task/list shows the task {len(listed)} times"
    world.tasks.created_at = listed[0].createdAt


@given("an hour passed on the host clock")
def an_hour_passed(world: World) -> None:
    granted(world.rpc.clock_advance, 3_600_000)


def _with_creation_time(world: World, created: str | None) -> None:
    """Expect the task's ``createdAt`` too, as the task was created."""
    if created:
        expected = need(world.tasks.expected, "the fields the user gave")
        created_at = need(world.tasks.created_at, "the task as first listed")
        world.tasks.expected = {**expected, "createdAt": created_at}


@then(
    parsers.re(
        r"the host reports the task as (it was created|changed)(?P<created>, created when it was)?$"
    )
)
@verifies("P29")
def task_answer_as_given(world: World, created: str | None) -> None:
    _with_creation_time(world, created)
    _compare_task(need(world.tasks.task, "the host's answer"), "the host's answer", world)


@then(
    parsers.re(
        r"the task is listed and stored as (it was created|changed)"
        r"(?P<created>, created when it was)?$"
    )
)
@verifies("P29")
def task_listed_and_stored_as_given(world: World, created: str | None) -> None:
    _with_creation_time(world, created)
    _compare_task(_task_now(world), "task/list", world)
    expected = need(world.tasks.expected, "the fields the user gave")
    rows = world.storage().rows("scheduled_tasks", "id = ?", (_task_id(world),))
    assert len(rows) == 1, f"scheduled_tasks holds {len(rows)} rows for the task"
    row = rows[0]
    stored = {field: row[column] for field, column in _STORED.items()}
    stored["createdAt"] = row["created_at"]
    stored["enabled"] = bool(stored["enabled"])
    stored["provider"] = {"baseUrl": row["provider_base_url"], "model": row["model"]}
    wrong = {k: (stored[k], v) for k, v in expected.items() if stored[k] != v}
    assert not wrong, f"scheduled_tasks holds other values (stored, given): {wrong}"


def _compare_task(task: dict[str, Any], where: str, world: World) -> None:
    expected = need(world.tasks.expected, "the fields the user gave")
    wrong = {k: (task.get(k), v) for k, v in expected.items() if task.get(k) != v}
    assert not wrong, f"{where} reports other values (reported, given): {wrong}"
    assert task["taskId"] == _task_id(world), f"{where} names the task {task['taskId']}"


# -- an unattended run beside an interactive session (P8, R5.9) ------------------------------


@when("the model calls Write in the user's session while the run is under way")
def write_beside_run(world: World) -> None:
    # The run's request already holds the stalled answer; the session's turn gets these.
    script_calls(world, tool_call(world, "Write", {"path": "notes.txt", "content": "mine"}))
    prompt(world, "Please write the notes.")


@then("the user of that session is asked before the Write runs")
@verifies("P8")
def asked_beside_run(world: World) -> None:
    own = session_id(world)
    found = world.wait_for_any(
        ("permission/requested", "turn/toolResult"),
        lambda p: p.get("sessionId") == own and p.get("tool") == "Write",
        since=world.cursors.turn,
    )
    assert found["method"] == "permission/requested", (
        "while another session's unattended run was under way, the Write in this ask "
        f"session ran or was refused without asking its user: {found['params']}"
    )
