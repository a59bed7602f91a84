"""Broken hosts: a thirteenth held-out set (many sessions and tasks at once), written from
the contract alone.

Eleven of these fourteen went uncaught at first, and two more were caught only by
accident. All fourteen are caught now: a cancel that ends another session's command or
closes another session's question, a task run's session missing from session/list, not
shown busy or reused by the task's next run, a transcript read per workspace,
approval/list per workspace and (a round later) the five that needed two sessions busy at
once: one output counter for all commands, a shell's working folder or choice shared
between sessions, a question named after the newest turn, and a run's session stamped
with the task's creation time.
"""

from __future__ import annotations

import contextvars
from dataclasses import replace
from typing import Any

from hosts.registry import BrokenCase, patch, rewrite_notifications, variant
from reference_host import commands
from reference_host.errors import HostError
from reference_host.host import Host
from reference_host.storage import SessionRow, Storage
from reference_host.tasks import Tasks, _run_wire
from reference_host.turns import TurnRunner


# R4.8 / R5.9: "at most one pending approval" is kept host-wide: while any session waits on
# a plan approval, a prompt in every other session is refused with APPROVAL_PENDING.
@variant("pending-approval-blocks-other-sessions")
def _pending_approval_blocks_other_sessions() -> None:
    original = Host.session_prompt

    async def session_prompt(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        for session_id, activity in self.activity.items():
            if session_id != params["sessionId"] and activity.pending_approval_id is not None:
                raise HostError(
                    "APPROVAL_PENDING",
                    "a new prompt refused: a plan approval is pending",
                    {"approvalId": activity.pending_approval_id},
                )
        return await original(self, params)

    patch(Host, "session_prompt", session_prompt)


# R5.9 / P7 (§3): session/cancel closes every open permission question of the host (as
# denied), not only those of the cancelled session's turn: another session's waiting call
# reports PERMISSION_DENIED without any answer, and answering it later gets
# PERMISSION_REQUEST_NOT_FOUND.
@variant("cancel-denies-every-question")
def _cancel_denies_every_question() -> None:
    original = TurnRunner.cancel

    async def cancel(self: TurnRunner, session_id: str) -> str | None:
        task = self.tasks.get(session_id)
        if task is not None and not task.done():
            for request in list(self.host.permissions._open.values()):
                if request.session_id != session_id and not request.answer.done():
                    request.answer.set_result(False)
        return await original(self, session_id)

    patch(TurnRunner, "cancel", cancel)


# R7.2 (Sessions): session/list leaves out the sessions that task runs created (treated as
# the host's internal sessions); session/get still finds them.
@variant("list-omits-task-sessions")
def _list_omits_task_sessions() -> None:
    async def session_list(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        async with self.storage._conn.execute(
            "SELECT session_id FROM scheduled_task_runs WHERE session_id IS NOT NULL"
        ) as cursor:
            internal = {row[0] for row in await cursor.fetchall()}
        rows = await self.storage.list_sessions()
        return {"sessions": [self.session_wire(r) for r in rows if r.id not in internal]}

    patch(Host, "session_list", session_list)


# §6: "An Agent task runs as a new session": a later run of a task continues the session
# of the task's previous run when that session is idle (one session per task), so the
# second run's sessionId repeats and its provider request carries the first run's messages.
@variant("task-run-reuses-its-session")
def _task_run_reuses_its_session() -> None:
    original = Tasks.run

    async def run(self: Tasks, row: dict[str, Any]) -> dict[str, Any]:
        host = self.host
        last = await host.storage.last_task_run(row["id"])
        if row["mode"] != "agent" or not row["provider_base_url"] or not row["model"]:
            return await original(self, row)
        if last is None or last["session_id"] is None:
            return await original(self, row)
        session = await host.storage.get_session(last["session_id"])
        if session is None or not host.activity_of(session.id).idle:
            return await original(self, row)
        # The reference body, with the task's earlier session in place of a new one.
        record = {
            "id": host.new_id("run"),
            "task_id": row["id"],
            "session_id": session.id,
            "started_at": host.clock.now_ms(),
            "outcome": "running",
            "error_code": None,
            "error_message": None,
        }
        await host.storage.record_task_run(record)

        async def finished(outcome: str, error: HostError | None) -> None:
            await self._finish(record, "completed" if outcome == "completed" else "failed", error)

        await host.turns.start(
            session, "scheduled", row["prompt"], unattended=True, on_end=finished
        )
        return _run_wire(record)

    patch(Tasks, "run", run)


# R7.3 / P20 (Commands): command/output is numbered by one counter that every command
# resets when it starts: two commands running at once in two sessions share the numbers,
# so neither command's seq runs 0, 1, 2, ... on its own.
@variant("commands-share-one-seq")
def _commands_share_one_seq() -> None:
    shared = [0]

    class SharedCollector(commands._Collector):
        @property
        def seq(self) -> int:
            return shared[0]

        @seq.setter
        def seq(self, value: int) -> None:
            shared[0] = value

    patch(commands, "_Collector", SharedCollector)


# R5.8 / Commands ("with the workspace as its working directory"): the host keeps one
# working directory per shell, set by the first command run through that shell; a later
# session's Bash in the same shell runs in the first session's workspace (command/started
# still names the right cwd).
@variant("shell-keeps-first-session-cwd")
def _shell_keeps_first_session_cwd() -> None:
    current: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
        "shell_cwds", default=None
    )
    bash = TurnRunner._bash
    spawn = commands._spawn

    async def _bash(self: TurnRunner, session: Any, turn_id: str, args: Any) -> Any:
        cwds = self.__dict__.setdefault("_shell_cwds", {})
        token = current.set(cwds)
        try:
            return await bash(self, session, turn_id, args)
        finally:
            current.reset(token)

    async def _spawn(shell: Any, command: str, cwd: str, command_id: str) -> Any:
        cwds = current.get()
        if cwds is not None:
            cwd = cwds.setdefault(shell.shell_id, cwd)
        return await spawn(shell, command, cwd, command_id)

    patch(TurnRunner, "_bash", _bash)
    patch(commands, "_spawn", _spawn)


# R5.9 / R1.3: session/transcript returns the entries of every session bound to the same
# workspace root (the host keeps the conversation per project folder when it is read back;
# the provider still gets the session's own history).
@variant("transcript-read-per-workspace")
def _transcript_read_per_workspace() -> None:
    async def session_transcript(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        ids = [row.id]
        if row.workspace_root is not None:
            ids = [
                s.id
                for s in await self.storage.list_sessions()
                if s.workspace_root == row.workspace_root
            ]
        entries = []
        for session_id in ids:
            entries += await self.storage.transcript(session_id)
        entries.sort(key=lambda e: e[0])
        return {
            "entries": [
                {"seq": seq, "turnId": turn, "role": role, "content": content, "createdAt": at}
                for seq, turn, role, content, at in entries
            ]
        }

    patch(Host, "session_transcript", session_transcript)


# R5.9 (§3): approval/list of a session lists the approvals of every session bound to the
# same workspace root (found through the project's plan folder), not only its own.
@variant("approval-list-per-workspace")
def _approval_list_per_workspace() -> None:
    from reference_host.approvals import approval_wire

    async def approval_list(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        ids = [row.id]
        if row.workspace_root is not None:
            ids = [
                s.id
                for s in await self.storage.list_sessions()
                if s.workspace_root == row.workspace_root
            ]
        found = []
        for session_id in ids:
            found += await self.storage.list_approvals(session_id)
        found.sort(key=lambda a: a.created_at)
        return {"approvals": [approval_wire(a) for a in found]}

    patch(Host, "approval_list", approval_list)


# P7 / R5.9: permission/requested names the session and turn of the turn started last on
# the host (a host-wide "current turn"), not those of the call that asks.
@variant("permission-names-latest-turn")
def _permission_names_latest_turn() -> None:
    latest: dict[str, str] = {}
    start = TurnRunner.start

    async def started(self: TurnRunner, session: SessionRow, *args: Any, **kw: Any) -> str:
        turn_id = await start(self, session, *args, **kw)
        latest.update(sessionId=session.id, turnId=turn_id)
        return turn_id

    def rewrite(method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "permission/requested" and latest:
            return {**params, **latest}
        return params

    patch(TurnRunner, "start", started)
    rewrite_notifications(rewrite)


# §6 ("Every enabled task whose runAt comes due runs"): the host runs one unattended run at
# a time; a task that comes due while another run is still under way is skipped (taken
# off the schedule, no run, no session, no task/runFinished).
@variant("due-task-skipped-while-another-runs")
def _due_task_skipped_while_another_runs() -> None:
    run = Tasks.run
    finish = Tasks._finish
    fire = Tasks._fire

    def busy(self: Tasks) -> set[str]:
        return self.__dict__.setdefault("_running", set())

    async def run_(self: Tasks, row: dict[str, Any]) -> dict[str, Any]:
        wire = await run(self, row)
        if wire["outcome"] == "running":
            busy(self).add(wire["runId"])
        return wire

    async def finish_(self: Tasks, record: dict[str, Any], outcome: str, error: Any) -> None:
        busy(self).discard(record["id"])
        await finish(self, record, outcome, error)

    async def fire_(self: Tasks, task_id: str) -> None:
        if busy(self):
            self._timers.pop(task_id, None)
            await self.host.storage.update_task(task_id, {"run_at": None})
            return
        await fire(self, task_id)

    patch(Tasks, "run", run_)
    patch(Tasks, "_finish", finish_)
    patch(Tasks, "_fire", fire_)


# R7.3 (Commands: "Bash runs through the session's shell, or the persisted default"): a
# session without a shell of its own runs its commands in the shell another session of the
# same workspace chose (the shell choice is kept per project), not in the default shell.
@variant("shell-choice-per-workspace")
def _shell_choice_per_workspace() -> None:
    bash = TurnRunner._bash

    async def _bash(self: TurnRunner, session: SessionRow, turn_id: str, args: Any) -> Any:
        if session.shell_id is None and session.workspace_root is not None:
            for other in await self.host.storage.list_sessions():
                if other.workspace_root == session.workspace_root and other.shell_id:
                    session = replace(session, shell_id=other.shell_id)
                    break
        return await bash(self, session, turn_id, args)

    patch(TurnRunner, "_bash", _bash)


# R7.2 (Sessions: "activeTurnId names its running turn (prompt, execution or scheduled
# run)"): a session running a scheduled run reads activeTurnId null in session/get,
# session/list and session/updated; only interactive turns are shown as active.
@variant("scheduled-run-not-shown-active")
def _scheduled_run_not_shown_active() -> None:
    scheduled: set[str] = set()
    start = TurnRunner.start
    wire = Host.session_wire

    async def started(
        self: TurnRunner, session: SessionRow, kind: str, *args: Any, **kw: Any
    ) -> str:
        turn_id = await start(self, session, kind, *args, **kw)
        if kind == "scheduled":
            scheduled.add(turn_id)
        return turn_id

    def session_wire(self: Host, row: SessionRow) -> dict[str, Any]:
        shown = wire(self, row)
        if shown["activeTurnId"] in scheduled:
            shown["activeTurnId"] = None
        return shown

    patch(TurnRunner, "start", started)
    patch(Host, "session_wire", session_wire)


# §6 / R7.2 (the sessions row holds the "creation time"): the session a task run creates
# copies the task's createdAt instead of the clock at the run.
@variant("task-session-created-at-task-time")
def _task_session_created_at_task_time() -> None:
    task_created: contextvars.ContextVar[int | None] = contextvars.ContextVar(
        "task_created", default=None
    )
    run = Tasks.run
    insert = Storage.insert_session

    async def run_(self: Tasks, row: dict[str, Any]) -> dict[str, Any]:
        token = task_created.set(row["created_at"])
        try:
            return await run(self, row)
        finally:
            task_created.reset(token)

    async def insert_session(self: Storage, session: SessionRow) -> None:
        stamp = task_created.get()
        if stamp is not None:
            session = replace(session, created_at=stamp)
        await insert(self, session)

    patch(Storage, "insert_session", insert_session)
    patch(Tasks, "run", run_)


# R5.9 / Commands (P19): session/cancel ends every command running on the host (all
# shells are killed), not only the cancelled turn's: another session's command ends by a
# signal while its turn goes on.
@variant("cancel-kills-every-command")
def _cancel_kills_every_command() -> None:
    import os
    import signal

    owner: contextvars.ContextVar[tuple[str, list[int]] | None] = contextvars.ContextVar(
        "owner", default=None
    )
    running: dict[int, str] = {}
    run_command = commands.run_command
    spawn = commands._spawn
    cancel = TurnRunner.cancel

    async def run_command_(**kw: Any) -> Any:
        mine: list[int] = []
        token = owner.set((kw["session_id"], mine))
        try:
            return await run_command(**kw)
        finally:
            owner.reset(token)
            for pid in mine:  # ended: never signal a process group that may be reused
                running.pop(pid, None)

    async def _spawn(shell: Any, command: str, cwd: str, command_id: str) -> Any:
        process, ends = await spawn(shell, command, cwd, command_id)
        held = owner.get()
        if held is not None:
            running[process.pid] = held[0]
            held[1].append(process.pid)
        return process, ends

    async def cancel_(self: TurnRunner, session_id: str) -> str | None:
        task = self.tasks.get(session_id)
        if task is not None and not task.done():
            for pid, session in list(running.items()):
                if session == session_id:
                    continue
                try:
                    os.killpg(pid, signal.SIGTERM)
                except OSError:
                    running.pop(pid, None)
        return await cancel(self, session_id)

    import reference_host.turns as turns_module

    patch(turns_module, "run_command", run_command_)
    patch(commands, "_spawn", _spawn)
    patch(TurnRunner, "cancel", cancel_)


CASES = [
    BrokenCase(
        "pending-approval-blocks-other-sessions",
        "artifact_integrity",
        "two_sessions_of_one_project",
        "R2.4",
        "APPROVAL_PENDING",
    ),
    BrokenCase(
        "approval-list-per-workspace",
        "artifact_integrity",
        "two_sessions_of_one_project",
        "R5.9",
        "lists other sessions",
    ),
    BrokenCase(
        "cancel-kills-every-command",
        "isolation",
        "another_sessions_command",
        "R5.9",
        "ended the second session",
        slow=True,
    ),
    BrokenCase(
        "list-omits-task-sessions",
        "scheduled_plan",
        "changed_to_agent_runs_unattended",
        "R7.2",
        "is not in session/list",
    ),
    BrokenCase(
        "transcript-read-per-workspace",
        "isolation",
        "keep_their_conversations_apart",
        "R5.9",
        "transcript holds",
    ),
    BrokenCase(
        "due-task-skipped-while-another-runs",
        "scheduled_plan",
        "two_tasks_due_at_the_same_time",
        "P29",
        "enabled tasks that came due",
    ),
    BrokenCase(
        "cancel-denies-every-question",
        "isolation",
        "leaves_another_sessions_question_open",
        "R5.9",
        "closed the second session",
    ),
    BrokenCase(
        "scheduled-run-not-shown-active",
        "scheduled_plan",
        "interactive_session_still_asks",
        "R7.2",
        "reads activeTurnId None",
    ),
    BrokenCase(
        "task-run-reuses-its-session",
        "scheduled_plan",
        "run_by_hand_still_runs",
        "P29",
        "every run is a new session",
    ),
    BrokenCase(
        "commands-share-one-seq",
        "isolation",
        "each_hear_only_their_own_output",
        "P20",
        "is numbered",
    ),
    BrokenCase(
        "shell-keeps-first-session-cwd",
        "isolation",
        "each_run_them_in_their_own_project",
        "R7.3",
        "not in its own project",
    ),
    BrokenCase(
        "shell-choice-per-workspace",
        "shell",
        "whatever_another_session",
        "R7.3",
        "the command was announced in",
    ),
    BrokenCase(
        "permission-names-latest-turn",
        "isolation",
        "asking_for_permission_at_once",
        "R5.9",
        "no question named the main session",
        slow=True,
    ),
    BrokenCase(
        "task-session-created-at-task-time",
        "scheduled_plan",
        "runs_when_its_time_comes",
        "P32",
        "its session reads createdAt",
    ),
]
