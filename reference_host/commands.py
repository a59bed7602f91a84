"""Shell commands: run through the selected shell, stream output, end all they started.

Each command starts in its own process group (``start_new_session``) and marks its
processes (see :mod:`reference_host.reaper`). When the command ends, because its shell
exited, it timed out or it was cancelled, the host ends the group and every process the
command started, also those that left the group, before ``command/exited``. Output is
streamed as ordered ``command/output`` notifications in chunks of at most ``CHUNK_CHARS``
characters, stdout and stderr apart.
The total output, streamed and kept for the model alike, is capped at
``OUTPUT_CAP_BYTES``: past it the host streams one visible marker and drains the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from reference_host.clock import Clock
from reference_host.ids import new_id
from reference_host.options import OUTPUT_CAP_BYTES
from reference_host.reaper import COMMAND_ENV, adopt_orphans, end_command, reap_orphans
from reference_host.shells import Shell

CHUNK_BYTES = 4096
CHUNK_CHARS = 16384
DEFAULT_TIMEOUT_MS = 120_000
TRUNCATION_MARKER = "\n[output truncated by the host]\n"
OUTPUT_GRACE_S = 1.0

Notify = Callable[[str, dict[str, Any]], None]
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CommandResult:
    """How a command ended and what it printed (capped)."""

    command_id: str
    exit_code: int | None
    signal: int | None
    timed_out: bool
    cancelled: bool
    truncated: bool
    duration_ms: int
    output: str

    def summary(self) -> str:
        """The tool result text given back to the model."""
        if self.timed_out:
            status = "timed out; the command and its children were ended"
        elif self.cancelled:
            status = "cancelled"
        elif self.signal is not None:
            status = f"killed by signal {self.signal}"
        else:
            status = f"exit code {self.exit_code}"
        return f"{self.output}\n[{status}]"


class CommandCancelledError(asyncio.CancelledError):
    """The command was cancelled with its turn; carries how it ended, for the audit."""

    def __init__(self, result: CommandResult) -> None:
        super().__init__("command cancelled")
        self.result = result


_COMMANDS: dict[int, str] = {}
"""Shell pid -> command id, for every shell not yet reaped."""
_spawning = 0
"""Shells being started; orphans are not reaped meanwhile (a new shell is not registered yet)."""


def _kill_group(process: asyncio.subprocess.Process) -> None:
    """End the command: its process group and everything it started, also what left it."""
    command_id = _COMMANDS.get(process.pid)
    if command_id is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        return
    end_command(process.pid, command_id, shell_alive=process.returncode is None)


async def _read_pipe(fd: int) -> tuple[asyncio.StreamReader, asyncio.ReadTransport]:
    """A stream reader over the read end ``fd`` of a pipe, and its transport (to close it)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=CHUNK_BYTES * 4)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0)
    )
    return reader, transport


async def _spawn(
    shell: Shell, command: str, cwd: str, command_id: str
) -> tuple[asyncio.subprocess.Process, list[int]]:
    """Start ``shell -c command`` in its own group, marked with ``command_id``; return the
    process and the read ends of its stdout and stderr pipes.

    The pipes are the host's own, not asyncio's: waiting for the shell then waits for the
    shell alone, and the host can stop listening to a pipe a straggler still holds.
    """
    global _spawning
    adopt_orphans()
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    _spawning += 1
    try:
        process = await asyncio.create_subprocess_exec(
            shell.path,
            "-c",
            command,
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out_write,
            stderr=err_write,
            start_new_session=True,
            env={**os.environ, COMMAND_ENV: command_id},
        )
        _COMMANDS[process.pid] = command_id
    except BaseException:
        os.close(out_read)
        os.close(err_read)
        raise
    finally:
        _spawning -= 1
        os.close(out_write)
        os.close(err_write)
    return process, [out_read, err_read]


class _Collector:
    """Keeps output up to the cap and numbers the streamed chunks."""

    def __init__(self) -> None:
        self.kept = bytearray()
        self.truncated = False
        self.seq = 0

    def keep(self, data: bytes) -> bytes:
        """Keep what fits under the cap (both streams together); return that part."""
        room = max(OUTPUT_CAP_BYTES - len(self.kept), 0)
        if len(data) > room:
            self.truncated = True
        part = data[:room]
        self.kept += part
        return part

    def text(self) -> str:
        body = self.kept.decode("utf-8", "replace")
        return body + TRUNCATION_MARKER if self.truncated else body


async def run_command(
    *,
    shell: Shell,
    command: str,
    cwd: str,
    session_id: str,
    turn_id: str | None,
    clock: Clock,
    notify: Notify,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    on_start: Callable[[str], Awaitable[None] | None] | None = None,
) -> CommandResult:
    """Run ``command`` with ``shell -c`` in ``cwd``; cancellation ends the whole group."""
    command_id = new_id("cmd")
    started = time.monotonic()
    process, read_ends = await _spawn(shell, command, cwd, command_id)
    try:
        return await _supervise(
            process,
            read_ends,
            command_id=command_id,
            started=started,
            shell=shell,
            command=command,
            cwd=cwd,
            session_id=session_id,
            turn_id=turn_id,
            clock=clock,
            notify=notify,
            timeout_ms=timeout_ms,
            on_start=on_start,
        )
    finally:
        if process.returncode is None:  # cancelled before it was supervised
            _kill_group(process)
        _COMMANDS.pop(process.pid, None)
        if _spawning == 0:
            reap_orphans(keep=set(_COMMANDS))


async def _supervise(
    process: asyncio.subprocess.Process,
    read_ends: list[int],
    *,
    command_id: str,
    started: float,
    shell: Shell,
    command: str,
    cwd: str,
    session_id: str,
    turn_id: str | None,
    clock: Clock,
    notify: Notify,
    timeout_ms: int,
    on_start: Callable[[str], Awaitable[None] | None] | None,
) -> CommandResult:
    """Stream the command's output until it ends, then end everything it started."""
    pipes: list[tuple[asyncio.StreamReader, asyncio.ReadTransport]] = []
    try:
        for fd in read_ends:
            pipes.append(await _read_pipe(fd))
    except BaseException:
        for _reader, transport in pipes:
            transport.close()
        for fd in read_ends[len(pipes) :]:
            with contextlib.suppress(OSError):
                os.close(fd)
        raise
    # The timeout counts from the start the notification below announces, even when a
    # recording hook awaits in between and the host clock moves meanwhile.
    deadline_ms = clock.now_ms() + timeout_ms
    notify(
        "command/started",
        {
            "sessionId": session_id,
            "turnId": turn_id,
            "commandId": command_id,
            "shellId": shell.shell_id,
            "command": command,
            "cwd": cwd,
        },
    )
    if on_start is not None:
        starting = on_start(command_id)
        if starting is not None:  # a hook that records the start finishes it first
            try:
                await starting
            except BaseException:
                for _reader, transport in pipes:
                    transport.close()
                raise
    collector = _Collector()
    timed_out = asyncio.Event()
    expire = _expire(timed_out, process)
    timer = clock.call_at(deadline_ms, expire)
    if clock.now_ms() >= deadline_ms:  # the clock passed the deadline while the start was kept
        timer.cancel()
        await expire()

    async def pump(stream: asyncio.StreamReader, name: str) -> None:
        decoder_pending = b""
        while data := await stream.read(CHUNK_BYTES):
            was_truncated = collector.truncated
            kept = collector.keep(data)
            if was_truncated:
                continue  # past the cap: drain the pipe, stream nothing more
            # Split only at UTF-8 boundaries so a chunk never cuts a character in two.
            data = decoder_pending + kept
            cut = _utf8_boundary(data) if not collector.truncated else len(data)
            decoder_pending = data[cut:]
            _emit(data[:cut], name)
            if collector.truncated:
                _emit(TRUNCATION_MARKER.encode(), name)
        if decoder_pending:
            _emit(decoder_pending, name)

    def _emit(data: bytes, name: str) -> None:
        if not data:
            return
        text = data.decode("utf-8", "replace")
        for start in range(0, len(text), CHUNK_CHARS):
            notify(
                "command/output",
                {
                    "sessionId": session_id,
                    "commandId": command_id,
                    "seq": collector.seq,
                    "stream": name,
                    "text": text[start : start + CHUNK_CHARS],
                },
            )
            collector.seq += 1

    cancelled = False
    (out, out_pipe), (err, err_pipe) = pipes
    reader = asyncio.ensure_future(asyncio.gather(pump(out, "stdout"), pump(err, "stderr")))
    try:
        await process.wait()  # the shell alone: the pipes are not asyncio's
    except asyncio.CancelledError:
        cancelled = True
    finally:
        timer.cancel()
        # Whether the shell exited, timed out or was cancelled, the command has ended:
        # so has everything it started. Then its pipes reach end of file.
        _kill_group(process)
        await asyncio.wait({reader}, timeout=OUTPUT_GRACE_S)
        if not reader.done():
            # Something that could not be found (its environment wiped) holds a pipe.
            log.warning("command %s: output still open after the command ended", command_id)
            out_pipe.close()
            err_pipe.close()
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
    out_pipe.close()
    err_pipe.close()
    if process.returncode is None:
        await process.wait()
    code = process.returncode if process.returncode is not None else -signal.SIGKILL
    result = CommandResult(
        command_id=command_id,
        exit_code=code if code >= 0 else None,
        signal=-code if code < 0 else None,
        timed_out=timed_out.is_set(),
        cancelled=cancelled,
        truncated=collector.truncated,
        duration_ms=int((time.monotonic() - started) * 1000),
        output=collector.text(),
    )
    notify(
        "command/exited",
        {
            "sessionId": session_id,
            "commandId": command_id,
            "exitCode": result.exit_code,
            "signal": result.signal,
            "timedOut": result.timed_out,
            "cancelled": result.cancelled,
            "truncated": result.truncated,
            "durationMs": result.duration_ms,
        },
    )
    if cancelled:
        raise CommandCancelledError(result)
    return result


def _expire(flag: asyncio.Event, process: asyncio.subprocess.Process) -> Callable[[], Any]:
    async def expire() -> None:
        flag.set()
        _kill_group(process)

    return expire


def _utf8_boundary(data: bytes) -> int:
    """Length of the longest prefix of ``data`` that does not end inside a character."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # a lead byte or ASCII
            needed = 1 if byte < 0x80 else 2 if byte >> 5 == 6 else 3 if byte >> 4 == 14 else 4
            return len(data) if needed <= back else len(data) - back
    return len(data)
