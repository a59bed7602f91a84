"""Allowed variations (sessions, approvals, executions, tasks, shells), written from the
contract alone."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Awaitable
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

from hosts.registry import AllowedCase, Send, patch, relay_notifications, variant
from reference_host import commands, shells, turns
from reference_host.errors import HostError
from reference_host.host import DEFAULT_SHELL_KEY, Host
from reference_host.options import DEFAULT_COMMAND_TIMEOUT_MS
from reference_host.permissions import PermissionBroker
from reference_host.storage import Storage
from reference_host.tasks import Tasks
from reference_host.turns import TurnRunner

Held = dict[str, list[tuple[str, dict[str, Any]]]]


def _session_of(method: str, params: dict[str, Any]) -> str | None:
    """The session a notification is about."""
    if method == "session/updated":
        return str(params["session"]["sessionId"])
    if method == "approval/updated":
        return str(params["approval"]["sessionId"])
    if method == "task/runFinished":
        return None
    session = params.get("sessionId")
    return str(session) if session is not None else None


def _flush(send: Send, held: Held, session_id: str | None) -> None:
    for method, params in held.pop(session_id or "", []):
        send(method, params)


@variant("execution-running-before-turn-started")
def _execution_running_before_turn_started() -> None:
    # Ordering names no order between an execution's `execution/updated` (running) and the
    # `turn/started` of its turn ("the order of notifications and responses where Ordering
    # names none" is the host's). This host marks the execution running first, then
    # announces its turn: `execution/updated` (running) comes before `turn/started`.
    held: Held = {}

    def relay(send: Send, method: str, params: dict[str, Any]) -> None:
        session_id = _session_of(method, params)
        if method == "turn/started" and params["kind"] == "execution":
            held[str(session_id)] = [(method, params)]
            return
        if session_id in held:
            if method == "session/updated":
                held[session_id].append((method, params))
                return
            if method == "execution/updated" and params["executionState"] == "running":
                send(method, params)
                _flush(send, held, session_id)
                return
            _flush(send, held, session_id)
        send(method, params)

    relay_notifications(relay)


@variant("session-announced-before-decision")
def _session_announced_before_decision() -> None:
    # An approve, a reject and an expiry change both the approval and the session; the
    # contract asks that each change be announced ("every change of an approval's status
    # ... is announced by an approval/updated", "every change of what session/get reports
    # ... by a session/updated") and that a response come after them, but names no order
    # between the two notifications. This host announces the session first, then the
    # approval (and the queued execution).
    held: Held = {}

    def relay(send: Send, method: str, params: dict[str, Any]) -> None:
        session_id = _session_of(method, params)
        if method == "approval/updated":
            approval = params["approval"]
            decided = approval["status"] in ("approved", "rejected", "expired")
            if decided and approval["executionState"] in (None, "queued"):
                held.setdefault(str(session_id), []).append((method, params))
                return
        if session_id in held:
            if method == "execution/updated" and params["executionState"] == "queued":
                held[session_id].append((method, params))
                return
            if method == "session/updated":
                send(method, params)
                _flush(send, held, session_id)
                return
            _flush(send, held, session_id)
        send(method, params)

    relay_notifications(relay)


@variant("execution-ends-after-turn-ended")
def _execution_ends_after_turn_ended() -> None:
    # R4.5 fixes what the final execution state is ("completed when the turn completed,
    # interrupted when it did not") but Ordering names no order between `turn/ended` and
    # the `execution/updated` / `approval/updated` of that final state. This host ends the
    # turn first and records the execution's end after it.
    held: Held = {}

    def final(method: str, params: dict[str, Any]) -> bool:
        if method == "execution/updated":
            return params["executionState"] in ("completed", "interrupted")
        if method == "approval/updated":
            return params["approval"]["executionState"] in ("completed", "interrupted")
        return False

    def relay(send: Send, method: str, params: dict[str, Any]) -> None:
        session_id = _session_of(method, params)
        if final(method, params):
            held.setdefault(str(session_id), []).append((method, params))
            return
        if session_id in held:
            if method == "turn/ended":
                send(method, params)
                _flush(send, held, session_id)
                return
            _flush(send, held, session_id)
        send(method, params)

    relay_notifications(relay)


@variant("task-keeps-run-at-after-firing")
def _task_keeps_run_at_after_firing() -> None:
    # P29: "Once a task has run at its runAt, whether it still reads that time or null is
    # yours." This host leaves `runAt` as it was when the task fires (the reference host
    # clears it), and never runs a task twice for the same time.
    fired: set[tuple[str, int]] = set()
    arm = Tasks._arm

    def arm_once(self: Tasks, task_id: str, run_at: int | None) -> None:
        if run_at is not None and (task_id, run_at) in fired:
            run_at = None
        arm(self, task_id, run_at)

    async def fire_keeping_run_at(self: Tasks, task_id: str) -> None:
        self._timers.pop(task_id, None)
        row = await self.host.storage.get_task(task_id)
        if row is None or not row["enabled"]:
            return
        if row["run_at"] is not None:
            fired.add((task_id, row["run_at"]))
        with contextlib.suppress(HostError):  # already recorded and announced as refused
            await self.run(row)

    patch(Tasks, "_arm", arm_once)
    patch(Tasks, "_fire", fire_keeping_run_at)


@variant("transcript-seq-by-position")
def _transcript_seq_by_position() -> None:
    # "session/transcript reports each row, in id order, with that text parsed as content
    # and turnId, role and createdAt from the row": `seq` is not among the fields taken from
    # the row, and TranscriptEntry.seq is only "integer, min 0". This host numbers a
    # session's entries 0, 1, 2, ... in id order instead of echoing the row id.
    session_transcript = Host.session_transcript

    async def numbered(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await session_transcript(self, params)
        entries = [{**entry, "seq": n} for n, entry in enumerate(result["entries"])]
        return {**result, "entries": entries}

    patch(Host, "session_transcript", numbered)


@variant("command-durations-on-host-clock")
def _command_durations_on_host_clock() -> None:
    # `durationMs` is "integer, min 0" and is not a timestamp; the contract says timeouts
    # "run on the host clock" and fixes no clock for a duration. This host measures a
    # command's duration on its host clock (under --conformance it stands still, so most
    # durations are 0), in command/exited and command_audit alike.
    run_command = turns.run_command

    async def timed_on_host_clock(**kw: Any) -> commands.CommandResult:
        clock, notify = kw["clock"], kw["notify"]
        start = clock.now_ms()
        measured: list[int] = []

        def relay(method: str, params: dict[str, Any]) -> None:
            if method == "command/exited":
                measured.append(max(0, clock.now_ms() - start))
                params = {**params, "durationMs": measured[-1]}
            notify(method, params)

        try:
            result = await run_command(**{**kw, "notify": relay})
        except commands.CommandCancelledError as cancelled:
            duration = measured[-1] if measured else 0
            raise commands.CommandCancelledError(
                replace(cancelled.result, duration_ms=duration)
            ) from cancelled
        duration = measured[-1] if measured else 0
        return replace(result, duration_ms=duration)

    patch(turns, "run_command", timed_on_host_clock)


@variant("empty-chunk-at-end-of-stream")
def _empty_chunk_at_end_of_stream() -> None:
    # R7.3/P20 number `command/output` by seq "from 0 across both streams ... with no gap
    # and no number used twice", and each chunk is "at most 16384 characters"; nothing
    # forbids an empty one. This host flushes its UTF-8 decoder at the end of each stream
    # and sends what it gives, an empty chunk on stdout and on stderr, before
    # `command/exited` (not after truncation: then it streams nothing more).
    next_seq: dict[str, int] = {}

    def relay(send: Send, method: str, params: dict[str, Any]) -> None:
        if method == "command/output":
            next_seq[params["commandId"]] = params["seq"] + 1
        elif method == "command/exited":
            seq = next_seq.pop(params["commandId"], 0)
            if not params["truncated"]:
                for offset, stream in enumerate(("stdout", "stderr")):
                    send(
                        "command/output",
                        {
                            "sessionId": params["sessionId"],
                            "commandId": params["commandId"],
                            "seq": seq + offset,
                            "stream": stream,
                            "text": "",
                        },
                    )
        send(method, params)

    relay_notifications(relay)


@variant("announces-new-sessions")
def _announces_new_sessions() -> None:
    # `session/updated` carries "the whole session as it now is", and "announcing a session
    # ... again when nothing changed" is the host's choice. This host also announces every
    # session it creates (session/create and a task run's session), before it answers or
    # starts the run's turn.
    init = Host.__init__

    def announcing(self: Host, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        insert = self.storage.insert_session

        async def insert_and_announce(session: Any) -> None:
            await insert(session)
            self.notify("session/updated", {"session": self.session_wire(session)})

        patch(self.storage, "insert_session", insert_and_announce)

    patch(Host, "__init__", announcing, wraps=True)


@variant("interrupted-approvals-undated")
def _interrupted_approvals_undated() -> None:
    # "the decidedAt of an approval your start-up recovery interrupted (it is not compared
    # with createdAt)" is listed among the host's choices, and Approval.decidedAt is
    # "Timestamp | null". Nobody decided such an approval, so this host leaves its
    # `decidedAt` null.

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self.transaction() as conn:
            approvals = await conn.execute(
                "UPDATE plan_approvals SET status = 'interrupted', "
                "status_code = 'TURN_INTERRUPTED', decided_at = NULL WHERE status = 'pending'"
            )
            executions = await conn.execute(
                "UPDATE plan_approvals SET execution_state = 'interrupted' "
                "WHERE execution_state IN ('queued', 'running')"
            )
            ended = await conn.execute(
                "UPDATE turns SET state = 'interrupted', ended_at = ? WHERE state = 'active'",
                (now,),
            )
            await conn.execute(
                "UPDATE scheduled_task_runs SET outcome = 'failed', "
                "error_code = 'TURN_INTERRUPTED', "
                "error_message = 'the host stopped before the run finished' "
                "WHERE outcome = 'running'"
            )
        return approvals.rowcount, executions.rowcount, ended.rowcount

    patch(Storage, "recover", recover)


@variant("permission-input-with-defaults")
def _permission_input_with_defaults() -> None:
    # permission/requested's `input` is `any` with no description, and no sentence says it
    # repeats turn/toolCall's input (that rule, P27, is turn/toolCall's alone). This host
    # shows the user the call as it will run: the arguments with the host's defaults filled
    # in (Bash's `timeout_ms`, Edit's `replace_all`).
    ask = PermissionBroker.ask

    async def ask_with_defaults(
        self: PermissionBroker, session_id: str, turn_id: str, tool: str, tool_input: Any
    ) -> bool:
        shown = dict(tool_input)
        if tool == "Bash":
            shown.setdefault("timeout_ms", DEFAULT_COMMAND_TIMEOUT_MS)
        if tool == "Edit":
            shown.setdefault("replace_all", False)
        return await ask(self, session_id, turn_id, tool, shown)

    patch(PermissionBroker, "ask", ask_with_defaults)


@variant("one-shell-per-executable")
def _one_shell_per_executable() -> None:
    # "which shells you offer" is the host's, and `shell/list` names "a stable shellId
    # (yours to choose)". On this machine `sh` and `dash` are one program; this host lists
    # each executable once, under the name of the program itself (so `dash`, not `sh`),
    # and its default before any shell/setDefault is then the first shell it lists.
    found = shells.catalog()

    @cache
    def deduplicated() -> tuple[shells.Shell, ...]:
        kept: dict[str, shells.Shell] = {}
        for shell in found:
            if shell.path not in kept or Path(shell.path).name == shell.name:
                kept[shell.path] = shell
        return tuple(kept.values())

    patch(shells, "catalog", deduplicated)


@variant("default-shell-stored-at-start")
def _default_shell_stored_at_start() -> None:
    # R7.6: "shell/list always names a defaultShellId among its shells: before any
    # shell/setDefault it is a shell of your choosing", and `settings` may hold it under
    # `default_shell_id`. This host writes its choice there once, at the first initialize
    # of a data directory that has none, instead of computing it at every read.
    initialize = Host.initialize

    async def storing_default(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await initialize(self, params)
        if await self.storage.get_setting(DEFAULT_SHELL_KEY) is None:
            fallback = shells.fallback_default()
            if fallback is not None:
                await self.storage.set_setting(DEFAULT_SHELL_KEY, fallback.shell_id)
        return result

    patch(Host, "initialize", storing_default)


_RUNNER: contextvars.ContextVar[TurnRunner] = contextvars.ContextVar("runner")


def record_commands_at_start() -> None:
    """Write each command's command_audit row when it starts; its end completes the row."""
    bash = TurnRunner._bash
    run_command = turns.run_command

    async def bash_in_context(self: TurnRunner, *args: Any, **kwargs: Any) -> Any:
        _RUNNER.set(self)
        return await bash(self, *args, **kwargs)

    async def recorded(*args: Any, **kwargs: Any) -> Any:
        runner = _RUNNER.get()
        started_at = kwargs["clock"].now_ms()

        def on_start(command_id: str) -> Awaitable[None]:
            row = {
                "id": command_id,
                "session_id": kwargs["session_id"],
                "turn_id": kwargs["turn_id"],
                "shell_id": kwargs["shell"].shell_id,
                "shell_path": kwargs["shell"].path,
                "command": kwargs["command"],
                "cwd": kwargs["cwd"],
                "started_at": started_at,
            }
            # written before the command's output is streamed; an upsert of the start's
            # columns only, so the end's row completes it
            return runner.host.storage.record_command(row)

        return await run_command(*args, **kwargs, on_start=on_start)

    patch(TurnRunner, "_bash", bash_in_context)
    patch(turns, "run_command", recorded)


@variant("commands-recorded-at-start")
def _commands_recorded_at_start() -> None:
    # C5: command_audit holds each command and "what command/exited reported"; when the row
    # is first written is not stated. This host writes it when the command starts (ended_at
    # empty) and completes it at the end, so a crash leaves an open row, which the startup
    # recovery, whose changes the contract lists, leaves as it is.
    record_commands_at_start()


CASES = [
    AllowedCase(
        "execution-running-before-turn-started",
        "execution,approval",
        why="Ordering names no order between an execution's running and its turn/started",
    ),
    AllowedCase(
        "session-announced-before-decision",
        "approval,deadline,execution",
        why="only the response must follow the notifications of the change it reports",
    ),
    AllowedCase(
        "execution-ends-after-turn-ended",
        "execution,restart_interruption",
        why="no order is stated between turn/ended and the execution's last updates",
    ),
    AllowedCase(
        "task-keeps-run-at-after-firing",
        "scheduled_plan",
        why="once a task has run at its runAt, whether it still reads that time is the host's",
    ),
    AllowedCase(
        "transcript-seq-by-position",
        "sessions,migration",
        why="session/transcript's seq is only an increasing integer; it need not be the row id",
    ),
    AllowedCase(
        "command-durations-on-host-clock",
        "shell",
        why="durationMs is not a timestamp, and no clock is named for it",
    ),
    AllowedCase(
        "empty-chunk-at-end-of-stream",
        "shell",
        why="output pieces are numbered without a gap; nothing forbids an empty one (P20)",
    ),
    AllowedCase(
        "announces-new-sessions",
        "sessions,scheduled_plan",
        why="announcing a session when nothing changed is the host's",
    ),
    AllowedCase(
        "interrupted-approvals-undated",
        "restart_interruption,approval",
        why="the decidedAt of an approval start-up recovery interrupted is the host's",
    ),
    AllowedCase(
        "permission-input-with-defaults",
        "execution,isolation",
        why="no rule fixes how a permission question shows the call's input",
    ),
    AllowedCase(
        "one-shell-per-executable",
        "shell",
        why="which shells a host offers and their ids are the host's (R7.6)",
    ),
    AllowedCase(
        "commands-recorded-at-start",
        "shell,restart_interruption,isolation",
        why="when a command's command_audit row is first written is the host's (C5)",
    ),
    AllowedCase(
        "default-shell-stored-at-start",
        "shell,migration,restart_interruption",
        why="before any shell/setDefault the default is a shell of the host's choosing",
    ),
]
