"""Broken hosts: a held-out set (commands from start to end), written from the contract alone."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import math
import os
import signal
from dataclasses import replace
from pathlib import Path
from typing import Any

from hosts.registry import BrokenCase, patch, rewrite_notifications, variant
from reference_host import commands, turns
from reference_host.host import Host
from reference_host.storage import Storage
from reference_host.turns import TurnRunner
from reference_host.workspace import resolve_inside


@variant("output-seq-from-one")
def _output_seq_from_one() -> None:
    # R7.3 / P20: command/output pieces are numbered from 1 (the counter is incremented
    # before each piece is sent), not from 0; no gap and no repeat otherwise.
    def rewrite(method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "command/output":
            return {**params, "seq": params["seq"] + 1}
        return params

    rewrite_notifications(rewrite)


@variant("stderr-merged-into-stdout")
def _stderr_merged_into_stdout() -> None:
    # R7.3: stdout and stderr are not kept apart: the host reads the shell's stderr through
    # its stdout pipe (2>&1), so every piece is announced with stream "stdout".
    def rewrite(method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "command/output" and params["stream"] == "stderr":
            return {**params, "stream": "stdout"}
        return params

    rewrite_notifications(rewrite)


class _Latin1Fallback:
    """A pipe reader that hands on each read as it came when it is UTF-8 (a character
    continued in the next read included), and re-encodes a read holding invalid bytes as if
    it were Latin-1 text, so no byte is lost."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        self._decoder = codecs.getincrementaldecoder("utf-8")()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reader, name)

    async def read(self, n: int = -1) -> bytes:
        data = await self._reader.read(n)
        try:
            self._decoder.decode(data, final=False)
        except UnicodeDecodeError:
            self._decoder.reset()
            return data.decode("latin-1").encode("utf-8")
        return data


@variant("invalid-output-decoded-as-latin1")
def _invalid_output_decoded_as_latin1() -> None:
    # R7.3: output that is not valid UTF-8 is not decoded with U+FFFD in place of the invalid
    # bytes: a read holding an invalid byte is decoded as Latin-1 instead ("never lose a
    # byte"), so b"\xff" is shown as "ÿ".
    original = commands._read_pipe

    async def _read_pipe(fd: int) -> tuple[Any, asyncio.ReadTransport]:
        reader, transport = await original(fd)
        return _Latin1Fallback(reader), transport

    patch(commands, "_read_pipe", _read_pipe)


@variant("truncation-notice-keeps-the-tail")
def _truncation_notice_keeps_the_tail() -> None:
    # P20: when the output passes maxCommandOutputBytes the host's notice shows the tail of
    # what it cut (up to 2 KiB of the dropped bytes), so it streams output past the cap and a
    # notice larger than 1 KiB; the count, truncated flag and model text are as before.
    original = commands._Collector.keep

    def keep(self: Any, data: bytes) -> bytes:
        before = self.truncated
        room = max(commands.OUTPUT_CAP_BYTES - len(self.kept), 0)
        part = original(self, data)
        if self.truncated and not before:
            tail = data[room:][-2048:]
            return part + b"\n[output truncated; the last bytes were:]\n" + tail
        return part

    patch(commands._Collector, "keep", keep)


@variant("timeout-reported-as-exit-124")
def _timeout_reported_as_exit_124() -> None:
    # R7.3 / P19: a timed-out command is reported the way GNU timeout does, exitCode 124
    # and signal null, although its shell was ended by a signal (SIGKILL); command/exited
    # and the command_audit row agree with each other. Other commands are as before.
    def rewrite(method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "command/exited" and params["timedOut"]:
            return {**params, "exitCode": 124, "signal": None}
        return params

    rewrite_notifications(rewrite)
    audit_row = turns._audit_row

    def _audit_row(audit: dict[str, Any], result: Any, ended_at: int) -> dict[str, Any]:
        if result.timed_out:
            result = replace(result, exit_code=124, signal=None)
        return audit_row(audit, result, ended_at)

    patch(turns, "_audit_row", _audit_row)


@variant("timeout-spares-processes-that-left-the-group")
def _timeout_spares_processes_that_left_the_group() -> None:
    # P19: on a timeout the host only kills the command's process group (killpg SIGKILL);
    # the sweep for processes that left the group (setsid) is done only when the shell
    # exits on its own or the turn is cancelled, so such a process outlives a timed-out
    # command.
    timed_out: set[int] = set()
    kill_group = commands._kill_group

    def _expire(flag: asyncio.Event, process: Any) -> Any:
        async def expire() -> None:
            flag.set()
            timed_out.add(process.pid)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)

        return expire

    def _kill_group(process: Any) -> None:
        if process.pid in timed_out:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            if process.returncode is not None:
                timed_out.discard(process.pid)
            return
        kill_group(process)

    patch(commands, "_expire", _expire)
    patch(commands, "_kill_group", _kill_group)


class _RealTimeTimers:
    """The host clock, except that timers run on the event loop's real time."""

    def __init__(self, clock: Any) -> None:
        self._clock = clock

    def now_ms(self) -> int:
        return self._clock.now_ms()

    def call_at(self, due_ms: int, callback: Any) -> asyncio.TimerHandle:
        loop = asyncio.get_running_loop()
        delay = max(0.0, (due_ms - self._clock.now_ms()) / 1000)
        return loop.call_later(delay, lambda: loop.create_task(callback()))


@variant("command-timeout-on-real-time")
def _command_timeout_on_real_time() -> None:
    # C5 / P32: a command's timeout_ms runs on real time (a loop timer), not on the host
    # clock: advancing the conformance clock past the command's start plus timeout_ms does
    # not end it; it ends only once that much real time has passed.
    original = turns.run_command

    async def run_command(**kwargs: Any) -> Any:
        kwargs["clock"] = _RealTimeTimers(kwargs["clock"])
        return await original(**kwargs)

    patch(turns, "run_command", run_command)


@variant("timeout-rounded-up-to-seconds")
def _timeout_rounded_up_to_seconds() -> None:
    # C5: the host keeps command timeouts in whole seconds and rounds timeout_ms up, so a
    # command with timeout_ms 1500 times out only when the clock reaches its start plus
    # 2000 ms, not at its start plus 1500 ms.
    original = turns.run_command

    async def run_command(**kwargs: Any) -> Any:
        kwargs["timeout_ms"] = math.ceil(kwargs["timeout_ms"] / 1000) * 1000
        return await original(**kwargs)

    patch(turns, "run_command", run_command)


@variant("default-shell-cached-per-session")
def _default_shell_cached_per_session() -> None:
    # R7.3 / R7.6: a session without a shell of its own resolves the default shell at its
    # first command and keeps it: a later shell/setDefault does not reach the commands of a
    # session that has already run one (session/get still reads shellId null).
    resolved: dict[str, str] = {}
    original = TurnRunner._bash

    async def _bash(self: TurnRunner, session: Any, turn_id: str, args: dict[str, Any]) -> Any:
        if session.shell_id is None and session.workspace_root is not None:
            shell_id = resolved.get(session.id) or await self.host.default_shell_id()
            if shell_id is not None:
                resolved[session.id] = shell_id
                session = replace(session, shell_id=shell_id)
        return await original(self, session, turn_id, args)

    patch(TurnRunner, "_bash", _bash)


@variant("default-shell-insert-or-ignore")
def _default_shell_insert_or_ignore() -> None:
    # R7.6: the host keeps the default shell in memory and writes it with INSERT OR IGNORE,
    # so only the first shell/setDefault reaches the settings row; shell/list and commands
    # follow the latest choice until a restart brings back the first one.
    async def set_setting(self: Storage, key: str, value: str) -> None:
        async with self.transaction() as conn:
            await conn.execute(
                "INSERT OR IGNORE INTO settings (key, value) VALUES (?, ?)", (key, value)
            )

    default_shell_id = Host.default_shell_id
    shell_set_default = Host.shell_set_default

    async def chosen_default(self: Host) -> str | None:
        return self.__dict__.get("_chosen_shell") or await default_shell_id(self)

    async def set_default(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        answer = await shell_set_default(self, params)
        self.__dict__["_chosen_shell"] = answer["defaultShellId"]
        return answer

    patch(Storage, "set_setting", set_setting)
    patch(Host, "default_shell_id", chosen_default)
    patch(Host, "shell_set_default", set_default)


@variant("bash-accepts-cwd-argument")
def _bash_accepts_cwd_argument() -> None:
    # P27: Bash takes a `cwd` argument that tools.schema.json does not define (no
    # INVALID_TOOL_INPUT): a workspace-relative folder the command runs in, kept inside
    # the workspace. Calls without it are as before.
    spec = turns._SPECS["Bash"]
    parameters = {
        **spec.parameters,
        "properties": {**spec.parameters["properties"], "cwd": {"type": "string"}},
    }
    patch(turns, "_SPECS", {**turns._SPECS, "Bash": replace(spec, parameters=parameters)})
    original = TurnRunner._bash

    async def _bash(self: TurnRunner, session: Any, turn_id: str, args: dict[str, Any]) -> Any:
        if "cwd" in args and session.workspace_root is not None:
            args = dict(args)
            folder = resolve_inside(Path(session.workspace_root), args.pop("cwd"), must_exist=True)
            session = replace(session, workspace_root=str(folder))
        return await original(self, session, turn_id, args)

    patch(TurnRunner, "_bash", _bash)


@variant("audit-command-on-one-line")
def _audit_command_on_one_line() -> None:
    # C5: the command_audit row keeps the command on one line for the log: CR and LF become
    # spaces. The command runs, and command/started reports it, as the model gave it.
    record = Storage.record_command

    async def record_command(self: Storage, values: dict[str, Any]) -> None:
        command = values["command"].replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
        await record(self, {**values, "command": command})

    patch(Storage, "record_command", record_command)


@variant("shutdown-kills-only-the-shells")
def _shutdown_kills_only_the_shells() -> None:
    # P19 / Shutdown: when the host stops (end of stdin, SIGTERM) it ends each running
    # command by killing its shell process alone, not the group and what the command
    # started, so those processes outlive the host. Commands ended by exit, timeout or
    # cancel are ended as before.
    stopping: list[bool] = []
    shutdown = TurnRunner.shutdown
    kill_group = commands._kill_group

    async def _shutdown(self: TurnRunner) -> None:
        stopping.append(True)
        try:
            await shutdown(self)
        finally:
            stopping.clear()  # the in-process driver serves the next host in this process

    def _kill_group(process: Any) -> None:
        if stopping:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            return
        kill_group(process)

    patch(TurnRunner, "shutdown", _shutdown)
    patch(commands, "_kill_group", _kill_group)


class _EofReader:
    """A pipe reader that records when its pipe has reached end of file."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        self.eof = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reader, name)

    async def read(self, n: int = -1) -> bytes:
        data = await self._reader.read(n)
        if not data:
            self.eof.set()
        return data


class _WaitsForOutput:
    """A shell process whose ``wait`` returns only once its pipes have reached end of file,
    as ``communicate()`` does."""

    def __init__(self, process: Any, read_ends: list[int], readers: dict[int, _EofReader]):
        self._process = process
        self._read_ends = read_ends
        self._readers = readers

    def __getattr__(self, name: str) -> Any:
        return getattr(self._process, name)

    async def wait(self) -> int:
        code = await self._process.wait()
        pipes = [self._readers[fd] for fd in self._read_ends if fd in self._readers]
        await asyncio.gather(*(pipe.eof.wait() for pipe in pipes))
        return code


@variant("exit-waits-for-output-eof")
def _exit_waits_for_output_eof() -> None:
    # P19 / R7.3: the host takes a command as ended only when its output pipes reach end of
    # file, not when its shell exits: a process the command left behind holding stdout
    # keeps the command running (no command/exited, nothing ended) until it exits itself
    # or the timeout or a cancel ends it.
    readers: dict[int, _EofReader] = {}
    read_pipe = commands._read_pipe
    spawn = commands._spawn

    async def _read_pipe(fd: int) -> tuple[Any, asyncio.ReadTransport]:
        reader, transport = await read_pipe(fd)
        readers[fd] = _EofReader(reader)
        return readers[fd], transport

    async def _spawn(shell: Any, command: str, cwd: str, command_id: str) -> Any:
        process, read_ends = await spawn(shell, command, cwd, command_id)
        return _WaitsForOutput(process, read_ends, readers), read_ends

    patch(commands, "_read_pipe", _read_pipe)
    patch(commands, "_spawn", _spawn)


CASES = [
    BrokenCase(
        "shutdown-kills-only-the-shells",
        "shell",
        "ends_when_the_host_stops",
        "P19",
        "still alive after the host stopped",
    ),
    BrokenCase(
        "audit-command-on-one-line",
        "shell",
        "a_command_that_times_out_is_recorded_for",
        "C5",
        "the audit row differs from the command",
    ),
    BrokenCase(
        "bash-accepts-cwd-argument",
        "plan_tools",
        "a_tool_call_outside_the_tools_published_input",
        "P27",
        "expected INVALID_TOOL_INPUT",
    ),
    BrokenCase(
        "command-timeout-on-real-time",
        "shell",
        "a_commands_timeout_counts_from_the_commands_own",
        "C5",
        "no command/exited notification matched",
        slow=True,
    ),
    BrokenCase(
        "default-shell-cached-per-session",
        "shell",
        "a_session_without_a_shell_of_its_own_follows",
        "R7.3",
        "the command was announced in",
    ),
    BrokenCase(
        "default-shell-insert-or-ignore",
        "shell",
        "the_latest_of_two_choices_of_the_default",
        "R7.6",
        "after the restart the default shell is",
    ),
    BrokenCase(
        "exit-waits-for-output-eof",
        "shell",
        "ends_when_its_command_exits",
        "P19",
        "no turn/ended notification matched",
        slow=True,
    ),
    BrokenCase(
        "invalid-output-decoded-as-latin1",
        "shell",
        "output_that_is_not_utf8_is_shown_with",
        "P20",
        "\u00ffok",
    ),
    BrokenCase(
        "output-seq-from-one",
        "isolation",
        "two_sessions_running_commands_at_once_each_hear",
        "P20",
        "is numbered",
    ),
    BrokenCase(
        "stderr-merged-into-stdout",
        "shell",
        "standard_output_and_standard_error_stream_apart_in",
        "P20",
        # the stdout the check shows holds stderr's line, before or after "out 2" as the
        # two pipes happened to be read
        "err 1",
    ),
    BrokenCase(
        "timeout-reported-as-exit-124",
        "shell",
        "ends_when_its_command_times_out",
        "C5",
        "the timed-out command's end reads exitCode 124",
    ),
    BrokenCase(
        "timeout-rounded-up-to-seconds",
        "shell",
        "a_commands_timeout_counts_from_the_commands_own",
        "C5",
        "no command/exited notification matched",
        slow=True,
    ),
    BrokenCase(
        "timeout-spares-processes-that-left-the-group",
        "shell",
        "ends_when_its_command_times_out",
        "P19",
        "processes the command started are still alive after it ended",
    ),
    BrokenCase(
        "truncation-notice-keeps-the-tail",
        "shell",
        "output_past_the_announced_cap_is_cut_there",
        "P20",
        "was streamed after it",
    ),
]
