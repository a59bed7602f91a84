"""Broken hosts: a held-out set (the same effect reached by another path), written from the
contract alone.

Six of these twelve were caught at first; all are caught now. What was missed happened on
a path the common scenarios do not take: a task without a project coming due, a cancelled
scheduled run, a prompt to a session a run created, the announcements of a run's session,
a command in a Plan turn, Grep meeting a link to a file outside the project, and a
scheduled run's command naming its turn.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import stat
from dataclasses import replace
from pathlib import Path
from typing import Any

from hosts.registry import BrokenCase, patch, variant
from reference_host import approvals, state, turns
from reference_host.approvals import Approvals, approval_wire
from reference_host.errors import HostError
from reference_host.host import Host
from reference_host.storage import SessionRow, Storage
from reference_host.tasks import Tasks, _run_wire
from reference_host.tools import files
from reference_host.tools.budget import Budget
from reference_host.turns import TurnRunner
from reference_host.workspace import validate_root


# R7.2 / R4.3: EnterPlanMode switches the session to Plan in the host's memory and announces
# it, but never writes the `sessions` row (only session/configure and approve write sessions;
# the next such write carries the mode along). The row reads `agent` while session/get reads
# `plan`, and a restart brings the session back in Agent.
@variant("enter-plan-mode-kept-in-memory")
def _enter_plan_mode_kept_in_memory() -> None:
    entered: set[str] = set()
    get_session = Storage.get_session
    list_sessions = Storage.list_sessions
    write_session = Storage.write_session

    def _overlay(row: SessionRow) -> SessionRow:
        return replace(row, mode="plan") if row.id in entered else row

    async def _get_session(self: Storage, session_id: str) -> SessionRow | None:
        row = await get_session(self, session_id)
        return _overlay(row) if row is not None else None

    async def _list_sessions(self: Storage) -> list[SessionRow]:
        return [_overlay(row) for row in await list_sessions(self)]

    async def _write_session(conn: Any, session: SessionRow) -> None:
        entered.discard(session.id)
        await write_session(conn, session)

    async def enter_plan_mode(self: Host, session: SessionRow) -> None:
        entered.add(session.id)
        await self.publish_session(session.id)

    patch(Storage, "get_session", _get_session)
    patch(Storage, "list_sessions", _list_sessions)
    patch(Storage, "write_session", staticmethod(_write_session))
    patch(Host, "enter_plan_mode", enter_plan_mode)


# R7.2 (R3.6): a reject clears the session's pendingApprovalId but sends no session/updated
# (the reject result carries only the approval, so the host announces only the approval;
# approve, whose result carries the session, still announces it). The last session/updated
# still names the rejected approval as pending.
@variant("reject-session-not-announced")
def _reject_session_not_announced() -> None:
    async def reject(self: Approvals, session_id: str, approval_id: str) -> dict[str, Any]:
        host = self.host
        row = await self.require(session_id, approval_id)
        await host.turns.settle(session_id, row.turn_id)
        await self._ensure_decidable(row)
        decided = state.reject(approvals._facts(row))
        rejected = approvals._with(row, decided, decided_at=host.clock.now_ms())
        await host.storage.update_approval(rejected)
        host.set_activity(session_id, pending_approval_id=None)
        host.notify("approval/updated", {"approval": approval_wire(rejected)})
        return {"approval": approval_wire(rejected)}

    patch(Approvals, "reject", reject)


_BY_REQUEST: contextvars.ContextVar[bool] = contextvars.ContextVar("by_request", default=False)


# R6.1 / R6.2: a Plan task run by `task/run` is refused with the error response and recorded
# as a refused run, but no task/runFinished is sent for it (the host takes the error answer
# as the announcement); a Plan task that comes due is still announced as refused.
@variant("task-run-refusal-not-announced")
def _task_run_refusal_not_announced() -> None:
    run_now = Tasks.run_now

    async def _run_now(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        token = _BY_REQUEST.set(True)
        try:
            return await run_now(self, params)
        finally:
            _BY_REQUEST.reset(token)

    async def _finish(
        self: Tasks, run: dict[str, Any], outcome: str, error: HostError | None
    ) -> None:
        run.update(
            outcome=outcome,
            error_code=error.code if error else None,
            error_message=error.message if error else None,
        )
        await self.host.storage.record_task_run(run)
        if outcome == "refused" and _BY_REQUEST.get():
            return
        self.host.notify("task/runFinished", {"run": _run_wire(run)})

    patch(Tasks, "run_now", _run_now)
    patch(Tasks, "_finish", _finish)


# §6 / P29: when an Agent task comes due, the timer re-checks the task's workspace root
# (the folder may have gone since the task was created) as session/create checks one, and a
# task without a project (`workspaceRoot: null`) fails that check: the due run ends `failed`
# with WORKSPACE_INVALID, without a session or a turn. `task/run` of the same task runs.
@variant("due-projectless-task-fails")
def _due_projectless_task_fails() -> None:
    async def _fire(self: Tasks, task_id: str) -> None:
        self._timers.pop(task_id, None)
        row = await self.host.storage.get_task(task_id)
        if row is None or not row["enabled"]:
            return
        await self.host.storage.update_task(task_id, {"run_at": None})
        if row["mode"] == "agent":
            try:
                validate_root(row["workspace_root"] or "")
            except HostError as error:
                run = {
                    "id": self.host.new_id("run"),
                    "task_id": row["id"],
                    "session_id": None,
                    "started_at": self.host.clock.now_ms(),
                    "outcome": "running",
                    "error_code": None,
                    "error_message": None,
                }
                await self._finish(run, "failed", error)
                return
        with contextlib.suppress(HostError):
            await self.run(row)

    patch(Tasks, "_fire", _fire)


def _scheduled_turns() -> set[str]:
    """Record the turns started for scheduled runs (kind `scheduled`), by id."""
    scheduled: set[str] = set()
    start = TurnRunner.start

    async def _start(
        self: TurnRunner, session: SessionRow, kind: str, *args: Any, **kw: Any
    ) -> str:
        turn_id = await start(self, session, kind, *args, **kw)
        if kind == "scheduled":
            scheduled.add(turn_id)
        return turn_id

    patch(TurnRunner, "start", _start)
    return scheduled


# R5.9 / C5: a command run by a scheduled run is announced with `turnId: null` in
# command/started (the schema allows null; the host reads a run as having no interactive
# turn) and its command_audit row has no turn_id. Commands of prompt, Plan and execution
# turns name their turn.
@variant("scheduled-commands-name-no-turn")
def _scheduled_commands_name_no_turn() -> None:
    scheduled = _scheduled_turns()
    bash = TurnRunner._bash

    async def _bash(self: TurnRunner, session: SessionRow, turn_id: str, args: Any) -> Any:
        named: Any = None if turn_id in scheduled else turn_id  # the bug: no turn
        return await bash(self, session, named, args)

    patch(TurnRunner, "_bash", _bash)


_SKIP_AUDIT: contextvars.ContextVar[bool] = contextvars.ContextVar("skip_audit", default=False)


# C5: the Bash commands of a Plan turn (investigation, "read-only" by intent) run and stream
# as usual but are not written to command_audit; Agent, execution and scheduled commands are.
@variant("plan-commands-not-audited")
def _plan_commands_not_audited() -> None:
    bash = TurnRunner._bash
    audit = TurnRunner._audit

    async def _bash(self: TurnRunner, session: SessionRow, turn_id: str, args: Any) -> Any:
        token = _SKIP_AUDIT.set(session.mode == "plan")
        try:
            return await bash(self, session, turn_id, args)
        finally:
            _SKIP_AUDIT.reset(token)

    async def _audit(self: TurnRunner, values: dict[str, Any], result: Any) -> None:
        if not _SKIP_AUDIT.get():
            await audit(self, values, result)

    patch(TurnRunner, "_bash", _bash)
    patch(TurnRunner, "_audit", _audit)


# R5.8 / P10: Grep walks the workspace with its own walker, which reads a symlinked file
# wherever its target lies: a link inside the project to a file of another workspace (or
# anywhere) is searched and its matching lines reach the model. Read refuses such a link
# and Glob lists only the link's own name, as before.
@variant("grep-follows-file-links-out")
def _grep_follows_file_links_out() -> None:
    def walk(root: Path, budget: Budget) -> list[tuple[str, Path]]:
        found: list[tuple[str, Path]] = []
        for directory, dirnames, filenames in os.walk(root):
            budget.check()
            dirnames[:] = [name for name in dirnames if name != ".git"]
            base = Path(directory)
            for name in filenames:
                budget.check()
                path = base / name
                try:
                    real = path.resolve(strict=True)
                    mode = real.stat().st_mode
                except (OSError, RuntimeError):
                    continue
                if stat.S_ISREG(mode):
                    found.append((path.relative_to(root).as_posix(), real))
        found.sort()
        return found

    def _grep(root: Path, compiled: Any, parts: list[str] | None, budget: Budget) -> str:
        out: list[str] = []
        for relative, real in walk(root, budget):
            if parts is not None and not files._glob_match(parts, relative.split("/")):
                continue
            try:
                data = real.read_bytes()
            except OSError:
                continue
            if b"\0" in data[: files._BINARY_PROBE]:
                continue
            text = data.decode("utf-8", errors="replace")
            for number, line in enumerate(text.split("\n"), start=1):
                line = line.removesuffix("\r")
                if not files._search(compiled, line, budget):
                    continue
                if len(out) == files.GREP_MAX_MATCHES:
                    out.append(f"[results capped at {files.GREP_MAX_MATCHES} matches]")
                    return "\n".join(out)
                out.append(f"{relative}:{number}:{line}")
        return "\n".join(out) if out else files.NO_MATCHES

    patch(files.Grep, "_grep", staticmethod(_grep))


_PERMISSION_MODE: contextvars.ContextVar[str] = contextvars.ContextVar("mode", default="ask")


# P12 / C10: the plan-folder guard sits in the permission path: a Write or Edit into
# `.pi/plan/` is refused with TOOL_DENIED when the session is in `ask` (the host looks at
# the path when it would ask), but under `accept-edits` and `auto`, where nothing asks, the
# write goes through and creates or changes files in the plan folder.
@variant("plan-guard-only-when-asking")
def _plan_guard_only_when_asking() -> None:
    dispatch = TurnRunner._dispatch
    refuse = turns._refuse_plan_folder

    async def _dispatch(
        self: TurnRunner, session: SessionRow, turn_id: str, name: str, args: Any
    ) -> Any:
        token = _PERMISSION_MODE.set(session.permission_mode)
        try:
            return await dispatch(self, session, turn_id, name, args)
        finally:
            _PERMISSION_MODE.reset(token)

    def _refuse_plan_folder(root: Path, path: str) -> None:
        if _PERMISSION_MODE.get() == "ask":
            refuse(root, path)

    patch(TurnRunner, "_dispatch", _dispatch)
    patch(turns, "_refuse_plan_folder", _refuse_plan_folder)


def _task_sessions() -> set[str]:
    """Record the sessions created for scheduled runs, by id, as their first turn starts."""
    created: set[str] = set()
    start = TurnRunner.start

    async def _start(
        self: TurnRunner, session: SessionRow, kind: str, *args: Any, **kw: Any
    ) -> str:
        if kind == "scheduled":
            created.add(session.id)
        return await start(self, session, kind, *args, **kw)

    patch(TurnRunner, "start", _start)
    return created


# R7.2: a session created by a scheduled run never gets a session/updated (the host
# announces runs through task/runFinished and treats their sessions as internal): its
# active turn starting and ending, and any later change, go unannounced, while sessions
# from session/create are announced as usual. session/get and session/list still show it.
@variant("task-sessions-not-announced")
def _task_sessions_not_announced() -> None:
    created = _task_sessions()
    publish = Host.publish_session

    async def publish_session(self: Host, session_id: str) -> dict[str, Any]:
        if session_id in created:
            return self.session_wire(await self.require_session(session_id))
        return await publish(self, session_id)

    patch(Host, "publish_session", publish_session)


# §6 (R7.2): a scheduled run whose turn is cancelled by session/cancel is never finished:
# the host finishes a run only when its turn completes or fails, so the cancelled run
# stays `running` in scheduled_task_runs and in task/list's lastRun, and no
# task/runFinished is sent. Runs that complete or fail are finished as usual.
@variant("cancelled-scheduled-run-left-running")
def _cancelled_scheduled_run_left_running() -> None:
    end = TurnRunner._end

    async def _end(
        self: TurnRunner,
        session_id: str,
        turn_id: str,
        approval: Any,
        on_end: Any,
        outcome: str,
        error: HostError | None,
    ) -> None:
        hook = None if outcome == "cancelled" else on_end
        await end(self, session_id, turn_id, approval, hook, outcome, error)

    patch(TurnRunner, "_end", _end)


# P7 / P8: the host marks a session created for a scheduled run as unattended for good, not
# only its run's turn: a later session/prompt in that session (an interactive turn, with a
# client to answer) refuses every call that needs permission with PERMISSION_UNAVAILABLE
# instead of sending permission/requested.
@variant("task-session-stays-unattended")
def _task_session_stays_unattended() -> None:
    created = _task_sessions()
    start = TurnRunner.start

    async def _start(
        self: TurnRunner,
        session: SessionRow,
        kind: str,
        user_text: str,
        approval: Any = None,
        unattended: bool = False,
        on_end: Any = None,
    ) -> str:
        unattended = unattended or session.id in created
        return await start(self, session, kind, user_text, approval, unattended, on_end)

    patch(TurnRunner, "start", _start)


_QUIET: contextvars.ContextVar[bool] = contextvars.ContextVar("quiet", default=False)


# R4.5 / R7.2: an execution whose turn fails (a provider error) is recorded `interrupted`
# and the session's activeExecutionId cleared, but neither execution/updated nor
# approval/updated announces it (the host's error path records the end and skips the
# announcements it makes when the turn completes or is cancelled).
@variant("failed-execution-not-announced")
def _failed_execution_not_announced() -> None:
    end = TurnRunner._end
    finished = Approvals.execution_finished

    async def _end(
        self: TurnRunner,
        session_id: str,
        turn_id: str,
        approval: Any,
        on_end: Any,
        outcome: str,
        error: HostError | None,
    ) -> None:
        token = _QUIET.set(approval is not None and outcome == "failed")
        try:
            await end(self, session_id, turn_id, approval, on_end, outcome, error)
        finally:
            _QUIET.reset(token)

    async def execution_finished(self: Approvals, approval_id: str, final: Any) -> None:
        if not _QUIET.get():
            await finished(self, approval_id, final)
            return
        row = await self._execution(approval_id)
        assert row.execution_state is not None
        done = replace(row, execution_state=state.advance_execution(row.execution_state, final))
        await self.host.storage.update_approval(done)
        self.host.set_activity(row.session_id, active_execution_id=None)

    patch(TurnRunner, "_end", _end)
    patch(Approvals, "execution_finished", execution_finished)


CASES = [
    BrokenCase(
        "enter-plan-mode-kept-in-memory",
        "plan_tools",
        "entered_plan_mode_and_then_failed",
        "P10",
        "the sessions row holds",
    ),
    BrokenCase(
        "reject-session-not-announced",
        "approval",
        "rejecting_keeps_the_session_in_plan",
        "R7.2",
        "two reports of one record disagreed",
    ),
    BrokenCase(
        "task-run-refusal-not-announced",
        "scheduled_plan",
        "plan_task_that_starts_is_refused_before_any_work",
        "R6.1",
        "no task/runFinished notification matched",
        slow=True,  # caught once the wait for the run's end runs out
    ),
    BrokenCase(
        "due-projectless-task-fails",
        "scheduled_plan",
        "without_a_project_runs_when_its_time",
        "P29",
        "WORKSPACE_INVALID",
    ),
    BrokenCase(
        "scheduled-commands-name-no-turn",
        "scheduled_plan",
        "scheduled_run_times_out_on_the_host_clock",
        "R5.9",
        "a command belongs to the turn whose call ran it, in a scheduled run",
    ),
    BrokenCase(
        "plan-commands-not-audited",
        "shell",
        "run_in_a_plan_turn_is_recorded",
        "C5",
        "command_audit holds 0 rows",
    ),
    BrokenCase(
        "grep-follows-file-links-out",
        "isolation",
        "through_a_file_linked_into_another",
        "R5.8",
        "the model was shown the other project's file",
    ),
    BrokenCase(
        "plan-guard-only-when-asking",
        "artifact_integrity",
        "cannot_write_into_the_plan_folder and auto",
        "P12",
        "expected TOOL_DENIED",
    ),
    BrokenCase(
        "task-sessions-not-announced",
        "scheduled_plan",
        "announced_as_it_reads_once_the_run",
        "R7.2",
        "a run's session is a session like any other",
        slow=True,  # caught once the wait for the announcement runs out
    ),
    BrokenCase(
        "cancelled-scheduled-run-left-running",
        "scheduled_plan",
        "whose_turn_is_cancelled_ends_failed",
        "P35",
        "never finished (no task/runFinished)",
        slow=True,  # caught once the wait for the run's end runs out
    ),
    BrokenCase(
        "task-session-stays-unattended",
        "scheduled_plan",
        "asks_its_user_like_any_session",
        "P8",
        "without asking the user",
    ),
    BrokenCase(
        "failed-execution-not-announced",
        "execution",
        "execution_whose_turn_fails_is_interrupted",
        "R4.5",
        "no execution/updated notification matched",
        slow=True,  # caught once the wait for the announcement runs out
    ),
]
