"""Allowed variations (corners where the contract is brief), written from the contract alone."""

from __future__ import annotations

import asyncio
import json
import weakref
from dataclasses import replace
from pathlib import Path
from typing import Any

from hosts.registry import (
    AllowedCase,
    patch,
    rewrite_notifications,
    rewrite_provider_messages,
    variant,
)
from reference_host import commands, server, shells, turns
from reference_host.commands import CommandCancelledError
from reference_host.errors import HostError
from reference_host.host import DEFAULT_SHELL_KEY, Host
from reference_host.jsontext import JsonTextError
from reference_host.jsontext import loads as strict_loads
from reference_host.storage import Storage, _insert_transcript
from reference_host.tasks import Tasks
from reference_host.tools import files
from reference_host.workspace import resolve_inside


async def _bash_recording_every_end(
    self: turns.TurnRunner, session: Any, turn_id: str, args: dict[str, Any]
) -> turns.CallOutcome:
    """The reference host's Bash, except that a command ended by a clean stop is audited."""
    host = self.host
    if session.workspace_root is None:
        raise HostError("WORKSPACE_REQUIRED", "Bash runs in the session's workspace")
    shell_id = session.shell_id or await host.default_shell_id()
    shell = shells.find(shell_id) if shell_id else None
    if shell is None:
        raise HostError("SHELL_NOT_FOUND", f"the shell {shell_id!r} is not on this machine")
    audit: dict[str, Any] = {
        "session_id": session.id,
        "turn_id": turn_id,
        "shell_id": shell.shell_id,
        "shell_path": shell.path,
        "command": args["command"],
        "cwd": session.workspace_root,
        "started_at": host.clock.now_ms(),
    }
    try:
        result = await turns.run_command(
            shell=shell,
            command=args["command"],
            cwd=session.workspace_root,
            session_id=session.id,
            turn_id=turn_id,
            clock=host.clock,
            notify=host.notify,
            timeout_ms=args.get("timeout_ms", host.options.command_timeout_ms),
        )
    except CommandCancelledError as cancelled:
        await self._audit(audit, cancelled.result)  # also while the host stops
        raise
    await self._audit(audit, result)
    if result.timed_out:
        error = HostError("COMMAND_TIMED_OUT", "the command exceeded its timeout")
        return replace(turns._failure(error), output=result.summary())
    return turns.CallOutcome("ok", result.summary())


# C5: "Every command is recorded in command_audit". The reference host leaves out the row
# of a command its clean stop ended; this host records that row too, with what the
# command/exited it sent reported.
@variant("audit-row-on-clean-stop")
def _audit_row_on_clean_stop() -> None:
    patch(turns.TurnRunner, "_bash", _bash_recording_every_end)


# P19: "a cancelled one says cancelled: true"; a command that the host's own clean stop
# ended was not cancelled by anyone (its turn is interrupted, R4.11, not cancelled). The
# contract names no flag for it beyond "signal is the number of the signal that ended the
# shell". This host reports such a command with cancelled: false and its signal.
@variant("stop-is-not-a-cancel")
def _stop_is_not_a_cancel() -> None:
    original = Host.__init__

    def init(self: Host, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        send = self.notify

        def notify(method: str, params: dict[str, Any]) -> None:
            runner = self.__dict__.get("turns")
            if method == "command/exited" and runner is not None and runner.stopping:
                params = {**params, "cancelled": False}
            send(method, params)

        self.notify = notify

    patch(Host, "__init__", init, wraps=True)


def _shell_style(exit_code: Any, signal: Any) -> Any:
    return 128 + signal if exit_code is None and signal is not None else exit_code


# P20: "signal is the number of the signal that ended the shell"; exitCode is fixed only
# for a shell that "exited on its own", and for a timed-out one "may be null or 128 plus
# the signal". CommandExitedParams.exitCode is "integer | null" with no constraint. This
# host reports 128 + signal as the exit code whenever a signal ended the shell, as a
# POSIX shell's $? does, in command/exited and in the audit row alike.
@variant("exit-code-128-plus-signal")
def _exit_code_128_plus_signal() -> None:
    def rewrite(method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method != "command/exited":
            return params
        return {**params, "exitCode": _shell_style(params["exitCode"], params["signal"])}

    rewrite_notifications(rewrite)
    audit_row = turns._audit_row

    def shell_style_row(audit: dict[str, Any], result: Any, ended_at: int) -> dict[str, Any]:
        row = audit_row(audit, result, ended_at)
        return {**row, "exit_code": _shell_style(row["exit_code"], row["signal"])}

    patch(turns, "_audit_row", shell_style_row)


# P20: past the cap "you stream nothing more of it (a notice of your own of at most 1 KiB
# is allowed)". What the notice says is the host's; this one is several lines, holds
# non-ASCII text and is close to the 1 KiB it may take.
_LONG_NOTICE = (
    "\n\n──── output truncated ────\n"
    "The command wrote more than this host keeps for one command (stdout and stderr "
    "together); everything after this point was read and dropped, not shown.\n"
    "The command itself went on running until it ended by itself; its exit status and "
    "signal are reported as usual.\n"
    "Hint: redirect the output to a file in the workspace (… > out.txt) and read the part "
    "you need, or narrow the command (head, tail, grep) so that it prints less.\n"
    + "·" * 120
    + "\n"
)


@variant("long-truncation-notice")
def _long_truncation_notice() -> None:
    assert len(_LONG_NOTICE.encode()) <= 1024, len(_LONG_NOTICE.encode())
    patch(commands, "TRUNCATION_MARKER", _LONG_NOTICE)


# TranscriptEntry.turnId is "Id | null" and the contract says only that session/transcript
# reports "turnId ... from the row"; which turn, if any, a row the host writes itself
# belongs to is not stated. This host stores the execution prompt it composes (P15) as a
# row of no turn.
@variant("execution-prompt-row-without-turn")
def _execution_prompt_row_without_turn() -> None:
    original = Storage.start_turn

    async def start_turn(
        self: Storage,
        turn_id: str,
        session_id: str,
        kind: str,
        at: int,
        user_message: dict[str, Any] | None = None,
    ) -> None:
        if kind != "execution" or user_message is None:
            await original(self, turn_id, session_id, kind, at, user_message)
            return
        async with self.transaction() as conn:
            await conn.execute(
                "INSERT INTO turns (id, session_id, kind, state, started_at) "
                "VALUES (?, ?, ?, 'active', ?)",
                (turn_id, session_id, kind, at),
            )
            await _insert_transcript(conn, session_id, None, "user", user_message, at)

    patch(Storage, "start_turn", start_turn)


# Same freedom (TranscriptEntry.turnId "Id | null", no rule which turn a row names): the
# summary a new_context call leaves is kept as a row of no turn, since it stands for the
# whole conversation before it rather than for the turn that wrote it.
@variant("summary-row-without-turn")
def _summary_row_without_turn() -> None:
    original = Storage.append_transcript

    async def append_transcript(
        self: Storage,
        session_id: str,
        turn_id: str | None,
        role: str,
        content: dict[str, Any],
        at: int,
    ) -> None:
        if content.get("contextReset"):
            turn_id = None
        await original(self, session_id, turn_id, role, content, at)

    patch(Storage, "append_transcript", append_transcript)


# "An assistant message you send back to the provider keeps the ids the model gave its
# tool_calls" and carries only id, type and function: the contract fixes the ids, not the
# text of `function.arguments`. This host sends back arguments that are JSON re-serialised
# from the parsed value (sorted keys, spaces after separators); arguments that are not
# JSON go back as the raw text.
@variant("tool-arguments-re-serialised")
def _tool_arguments_re_serialised() -> None:
    def reserialise(text: str) -> str:
        try:
            value = strict_loads(text)
        except (JsonTextError, RecursionError):
            return text
        return json.dumps(value, sort_keys=True, separators=(", ", ": "))

    def rewrite(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for message in messages:
            calls = message.get("tool_calls")
            if calls:
                message = {
                    **message,
                    "tool_calls": [
                        {
                            **call,
                            "function": {
                                **call["function"],
                                "arguments": reserialise(call["function"]["arguments"]),
                            },
                        }
                        for call in calls
                    ],
                }
            out.append(message)
        return out

    rewrite_provider_messages(rewrite)


# P29 states only that "an enabled task whose runAt is still ahead when your host starts
# runs when it comes due", and "a task runs when [the clock] reaches runAt". A task whose
# runAt passed while no host ran did come due; whether it is caught up or skipped is not
# stated (decisions.md records skipping as the reference host's choice). This host catches
# it up once, right after the handshake, as a new run (runAt cleared as when it fires).
_MISSED: weakref.WeakKeyDictionary[Tasks, list[str]] = weakref.WeakKeyDictionary()


@variant("missed-tasks-run-at-start")
def _missed_tasks_run_at_start() -> None:
    schedule_all = Tasks.schedule_all
    initialize = Host.initialize

    async def schedule_with_catch_up(self: Tasks) -> None:
        await schedule_all(self)
        now = self.host.clock.now_ms()
        _MISSED[self] = [
            row["id"]
            for row in await self.host.storage.list_tasks()
            if row["enabled"] and row["run_at"] is not None and row["run_at"] <= now
        ]

    async def initialize_then_catch_up(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await initialize(self, params)
        for task_id in _MISSED.pop(self.tasks, []):
            asyncio.get_running_loop().create_task(self.tasks._fire(task_id))
        return result

    patch(Tasks, "schedule_all", schedule_with_catch_up)
    patch(Host, "initialize", initialize_then_catch_up)


# "A timer is due once the clock is at or past its time ... a task runs when it reaches
# runAt." A task created or moved to a runAt the clock has already reached is due at once;
# the contract does not say it must wait for the next clock move (the reference host's
# conformance clock fires it only then). This host starts its run at once.
@variant("past-run-at-runs-at-once")
def _past_run_at_runs_at_once() -> None:
    arm = Tasks._arm

    def arm_or_run(self: Tasks, task_id: str, run_at: int | None) -> None:
        arm(self, task_id, run_at)
        if run_at is not None and run_at <= self.host.clock.now_ms():
            timer = self._timers.pop(task_id, None)
            if timer is not None:
                timer.cancel()
            asyncio.get_running_loop().create_task(self._fire(task_id))

    patch(Tasks, "_arm", arm_or_run)


def _nested_roots(root: Path, roots: list[str | None]) -> list[str]:
    """Workspace-relative POSIX paths of the other roots strictly inside ``root``."""
    real_root = root.resolve()
    found = set()
    for other in roots:
        if other is None:
            continue
        try:
            real = Path(other).resolve()
        except (OSError, RuntimeError):
            continue
        if real != real_root and real.is_relative_to(real_root):
            found.add(real.relative_to(real_root).as_posix())
    return sorted(found)


# R5.8: "a tool never reads or writes another session's workspace, whatever the path ...
# Refuse such a path with PATH_OUTSIDE_WORKSPACE or INVALID_TOOL_INPUT". When another
# session's root lies inside this session's root, that folder is both this session's and
# another session's workspace; the contract does not say which wins. This host keeps
# sessions apart: its file tools refuse paths into a nested root of another session
# (PATH_OUTSIDE_WORKSPACE) and Glob and Grep leave its files out.
@variant("nested-workspaces-kept-apart")
def _nested_workspaces_kept_apart() -> None:
    dispatch = turns.TurnRunner._dispatch

    async def dispatch_apart(
        self: turns.TurnRunner, session: Any, turn_id: str, name: str, args: dict[str, Any]
    ) -> turns.CallOutcome:
        if name not in ("Read", "Write", "Edit", "Glob", "Grep") or not session.workspace_root:
            return await dispatch(self, session, turn_id, name, args)
        root = Path(session.workspace_root)
        sessions = await self.host.storage.list_sessions()
        nested = _nested_roots(root, [s.workspace_root for s in sessions])
        if not nested:
            return await dispatch(self, session, turn_id, name, args)
        real_root = root.resolve()
        if name in ("Read", "Write", "Edit"):
            target = resolve_inside(real_root, str(args.get("path", "")), must_exist=False)
            for inner in nested:
                if target.is_relative_to(real_root / inner):
                    raise HostError(
                        "PATH_OUTSIDE_WORKSPACE",
                        f"{args.get('path')!r} is in another session's workspace",
                        {"path": args.get("path")},
                    )
            return await dispatch(self, session, turn_id, name, args)
        outcome = await dispatch(self, session, turn_id, name, args)
        lines = outcome.output.split("\n")
        kept = [
            line
            for line in lines
            if not any(line == inner or line.startswith(inner + "/") for inner in nested)
        ]
        if len(kept) == len(lines):
            return outcome
        return turns.CallOutcome(outcome.status, "\n".join(kept) or files.NO_MATCHES)

    patch(turns.TurnRunner, "_dispatch", dispatch_apart)


# P10: Glob gives "the workspace-relative paths of the files that match", but Grep only
# "each matching file's path with the matching line": which spelling of the path is not
# stated. This host's Grep names each file by its absolute path inside the root.
@variant("grep-paths-absolute")
def _grep_paths_absolute() -> None:
    grep = files.Grep._grep

    def absolute(root: Path, compiled: Any, parts: list[str] | None, budget: Any) -> str:
        relatives = {rel for rel, _real in files._workspace_files(root, budget)}
        text = grep(root, compiled, parts, budget)
        if text == files.NO_MATCHES:
            return text
        out = []
        for line in text.split("\n"):
            # The path is what precedes ":<number>:"; take the longest listed path that
            # the line starts with, followed by a colon.
            match = max(
                (rel for rel in relatives if line.startswith(rel + ":")), key=len, default=None
            )
            out.append(line if match is None else f"{root / match}{line[len(match) :]}")
        return "\n".join(out)

    patch(files.Grep, "_grep", staticmethod(absolute))


# R7.6: "shell/list always names a defaultShellId among its shells". A default stored under
# default_shell_id whose shell is no longer installed is not among them; the contract does
# not say what then. This host then reports and uses its fallback default, leaving the
# stored setting as it is (a restart with nothing to recover changes no stored value).
@variant("missing-default-shell-falls-back")
def _missing_default_shell_falls_back() -> None:
    async def default_shell_id(self: Host) -> str | None:
        stored = await self.storage.get_setting(DEFAULT_SHELL_KEY)
        if stored is not None and shells.find(stored) is not None:
            return stored
        fallback = shells.fallback_default()
        return fallback.shell_id if fallback else None

    patch(Host, "default_shell_id", default_shell_id)


# P18: a host that cannot serve must "exit with a non-zero status"; which status is not
# fixed (decisions.md: "3 for the reference host"). This host exits with 1.
@variant("startup-refusal-exit-1")
def _startup_refusal_exit_1() -> None:
    patch(server, "EXIT_STORAGE", 1)


# P9: a refused or failed call's "model is given the result"; the code travels in
# turn/toolResult's error, and the text given to the model is the host's to lay out. This
# host gives the model the ErrorData as a JSON object.
@variant("refusal-results-as-json")
def _refusal_results_as_json() -> None:
    def as_json(error: HostError) -> str:
        return json.dumps({"error": error.to_data()}, ensure_ascii=False)

    patch(turns, "_error_text", as_json)


# Kept without a case, as no scenario reaches their corner (the contract leaves each open,
# docs/decisions.md): missed-tasks-run-at-start, past-run-at-runs-at-once,
# nested-workspaces-kept-apart, missing-default-shell-falls-back.
CASES = [
    AllowedCase(
        "audit-row-on-clean-stop",
        "restart_interruption,shell",
        "command_that_was_running or message_whose_calls or left_behind",
        why="whether a command a clean stop ended has a command_audit row is not stated (C5)",
    ),
    AllowedCase(
        "stop-is-not-a-cancel",
        "restart_interruption,shell",
        "command_that_was_running or message_whose_calls or left_behind",
        why="only a cancel must read cancelled: true; a clean stop's end is the host's (P19)",
    ),
    AllowedCase(
        "exit-code-128-plus-signal",
        "shell,turn_boundaries,isolation",
        why="exitCode is fixed only for a shell that exited on its own (R7.3)",
    ),
    AllowedCase(
        "long-truncation-notice",
        "shell",
        "output",
        why="a truncation notice of the host's own of up to 1 KiB is allowed (P20)",
    ),
    AllowedCase(
        "execution-prompt-row-without-turn",
        "execution,sessions",
        why="no rule names the turn of the execution prompt's transcript row (R7.7)",
    ),
    AllowedCase(
        "summary-row-without-turn",
        "plan_tools,sessions",
        "new_context",
        why="no rule names the turn of a new_context summary's transcript row (R7.7)",
    ),
    AllowedCase(
        "tool-arguments-re-serialised",
        "sessions,plan_tools",
        why="only the call ids sent back are fixed, not the arguments' text",
    ),
    AllowedCase(
        "grep-paths-absolute",
        "plan_tools,isolation",
        why="Glob names workspace-relative paths; Grep only each matching file's path (P10)",
    ),
    AllowedCase(
        "startup-refusal-exit-1",
        "handshake,migration,restart_interruption",
        why="a host that refuses to start exits with a non-zero status of its choice (P18)",
    ),
    AllowedCase(
        "refusal-results-as-json",
        "plan_tools,execution,shell",
        why="the text the model gets for a refused call is laid out as the host likes",
    ),
]
