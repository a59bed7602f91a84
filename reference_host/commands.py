"""Shell commands: run through the selected shell, stream output, end the whole group.

Each command starts in its own process group (``start_new_session``), so timeout and
cancellation end grandchildren too. Output is streamed as ordered ``command/output``
notifications in chunks of at most ``CHUNK_CHARS`` characters, stdout and stderr apart.
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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reference_host.clock import Clock
from reference_host.ids import new_id
from reference_host.shells import Shell

CHUNK_BYTES = 4096
CHUNK_CHARS = 16384
OUTPUT_CAP_BYTES = 256 * 1024
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


def _kill_group(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


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
    cwd: Path,
    session_id: str,
    turn_id: str | None,
    clock: Clock,
    notify: Notify,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    on_start: Callable[[str], Any] | None = None,
) -> CommandResult:
    """Run ``command`` with ``shell -c`` in ``cwd``; cancellation ends the whole group."""
    command_id = new_id("cmd")
    started = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        shell.path,
        "-c",
        command,
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    notify(
        "command/started",
        {
            "sessionId": session_id,
            "turnId": turn_id,
            "commandId": command_id,
            "shellId": shell.shell_id,
            "command": command,
            "cwd": str(cwd),
        },
    )
    if on_start is not None:
        on_start(command_id)
    collector = _Collector()
    timed_out = asyncio.Event()
    timer = clock.call_at(clock.now_ms() + timeout_ms, _expire(timed_out, process))

    async def pump(stream: asyncio.StreamReader | None, name: str) -> None:
        assert stream is not None
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
    reader = asyncio.ensure_future(
        asyncio.gather(pump(process.stdout, "stdout"), pump(process.stderr, "stderr"))
    )
    try:
        await _shell_exit(process)
        # The shell has ended. Its output is drained unless something that left the
        # process group still holds the pipes open: then stop reading after a short grace.
        try:
            await asyncio.wait_for(asyncio.shield(reader), OUTPUT_GRACE_S)
        except TimeoutError:
            log.warning("command %s: output still open after the shell ended", command_id)
    except asyncio.CancelledError:
        cancelled = True
    finally:
        timer.cancel()
        _kill_group(process)  # nothing the command started outlives it
        if not reader.done():
            # The group is gone, so the pipes normally reach end of file at once.
            await asyncio.wait({reader}, timeout=OUTPUT_GRACE_S)
        if not reader.done():
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
            _close_pipes(process)
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


async def _shell_exit(process: asyncio.subprocess.Process) -> None:
    """Wait for the shell process itself to end.

    ``Process.wait()`` also waits until every holder of the output pipes has closed them,
    which a process that left the group may never do; a pidfd reports the exit alone.
    """
    try:
        handle = os.pidfd_open(process.pid)
    except (AttributeError, OSError):
        await process.wait()
        return
    loop = asyncio.get_running_loop()
    ended: asyncio.Future[None] = loop.create_future()

    def on_readable() -> None:
        if not ended.done():
            ended.set_result(None)

    loop.add_reader(handle, on_readable)
    try:
        await ended
    finally:
        loop.remove_reader(handle)
        os.close(handle)


def _close_pipes(process: asyncio.subprocess.Process) -> None:
    """Stop listening to the output pipes a straggler keeps open, so that the shell can be
    reaped. Only the pipe transports are closed: closing the whole transport would poll
    (and so reap) the process behind the child watcher's back."""
    transport = getattr(process, "_transport", None)  # asyncio keeps it private
    if transport is None:
        return
    for fd in (1, 2):
        pipe = transport.get_pipe_transport(fd)
        if pipe is not None:
            pipe.close()


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
