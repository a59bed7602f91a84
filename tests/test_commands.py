"""Tests of shell command execution with real processes: streaming, caps, timeout, cancel."""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from reference_host import shells
from reference_host.clock import ManualClock
from reference_host.commands import (
    CHUNK_CHARS,
    OUTPUT_CAP_BYTES,
    TRUNCATION_MARKER,
    CommandResult,
    run_command,
)

T0 = 1_700_000_000_000
WAIT_S = 20
SH = shells.find("sh")
assert SH is not None, "these tests need /bin/sh"


class Recorder:
    """The notify callback: collects notifications and wakes waiters on each one."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, dict[str, Any]]] = []
        self.changed = asyncio.Event()

    def __call__(self, method: str, params: dict[str, Any]) -> None:
        self.messages.append((method, params))
        self.changed.set()

    def methods(self) -> list[str]:
        return [method for method, _ in self.messages]

    def outputs(self, stream: str | None = None) -> list[dict[str, Any]]:
        return [
            params
            for method, params in self.messages
            if method == "command/output" and stream in (None, params["stream"])
        ]

    def text(self, stream: str) -> str:
        return "".join(chunk["text"] for chunk in self.outputs(stream))

    def exited(self) -> dict[str, Any]:
        method, params = self.messages[-1]
        assert method == "command/exited"
        return params

    async def wait_for(self, condition: Callable[[], bool]) -> None:
        async with asyncio.timeout(WAIT_S):
            while not condition():
                self.changed.clear()
                await self.changed.wait()


def start(
    rec: Recorder,
    clock: ManualClock,
    command: str,
    cwd: Path,
    timeout_ms: int = 600_000,
    on_start: Callable[[str], Any] | None = None,
) -> Coroutine[Any, Any, CommandResult]:
    assert SH is not None
    return run_command(
        shell=SH,
        command=command,
        cwd=str(cwd),  # the workspace root string, as the session holds it
        session_id="sess-1",
        turn_id="turn-1",
        clock=clock,
        notify=rec,
        timeout_ms=timeout_ms,
        on_start=on_start,
    )


def run(command: str, cwd: Path, **kwargs: Any) -> tuple[CommandResult, Recorder]:
    """Run ``command`` to completion; return its result and the notifications."""

    async def body() -> tuple[CommandResult, Recorder]:
        rec = Recorder()
        result = await asyncio.wait_for(start(rec, ManualClock(T0), command, cwd, **kwargs), WAIT_S)
        return result, rec

    return asyncio.run(body())


def check_stream(rec: Recorder, result: CommandResult) -> None:
    """started first, exited last, outputs numbered 0.. in order, one command id."""
    methods = rec.methods()
    assert methods[0] == "command/started"
    assert methods[-1] == "command/exited"
    assert set(methods[1:-1]) <= {"command/output"}
    ids = {params["commandId"] for _, params in rec.messages}
    assert ids == {result.command_id}
    assert {params["sessionId"] for _, params in rec.messages} == {"sess-1"}
    assert [chunk["seq"] for chunk in rec.outputs()] == list(range(len(rec.outputs())))
    for chunk in rec.outputs():
        assert chunk["stream"] in ("stdout", "stderr")
        assert 0 < len(chunk["text"]) <= CHUNK_CHARS
    exited = rec.exited()
    assert exited["exitCode"] == result.exit_code
    assert exited["signal"] == result.signal
    assert exited["timedOut"] == result.timed_out
    assert exited["cancelled"] == result.cancelled
    assert exited["truncated"] == result.truncated


def process_gone(pid: int) -> bool:
    """True when ``pid`` no longer exists or is a zombie nobody has reaped yet."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def exited_within(pidfd: int, seconds: float) -> bool:
    """Whether the process behind ``pidfd`` ends within ``seconds`` (pidfd polls readable)."""
    readable, _, _ = select.select([pidfd], [], [], seconds)
    return bool(readable)


def kill_leftover(pid: int) -> None:
    """Clean up a process this test started if the host failed to end it."""
    if not process_gone(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


# -- streaming -------------------------------------------------------------------------------


def test_stdout_and_stderr_stream_in_order_and_exit_code_is_reported(tmp_path: Path) -> None:
    command = "printf 'out1\\n'; printf 'err1\\n' >&2; printf 'out2\\n'; printf 'err2\\n' >&2"
    result, rec = run(command, tmp_path)
    check_stream(rec, result)
    assert rec.text("stdout") == "out1\nout2\n"
    assert rec.text("stderr") == "err1\nerr2\n"
    assert result.exit_code == 0
    assert result.signal is None
    assert not (result.timed_out or result.cancelled or result.truncated)
    assert sorted(result.output.splitlines()) == ["err1", "err2", "out1", "out2"]
    started = rec.messages[0][1]
    assert started["turnId"] == "turn-1"
    assert started["shellId"] == "sh"
    assert started["command"] == command
    assert started["cwd"] == str(tmp_path)
    assert result.summary().endswith("[exit code 0]")


def test_many_chunks_of_both_streams_keep_their_order(tmp_path: Path) -> None:
    command = 'i=0; while [ $i -lt 3000 ]; do echo "o$i"; echo "e$i" >&2; i=$((i+1)); done'
    result, rec = run(command, tmp_path)
    check_stream(rec, result)
    assert rec.text("stdout") == "".join(f"o{i}\n" for i in range(3000))
    assert rec.text("stderr") == "".join(f"e{i}\n" for i in range(3000))
    assert len(rec.outputs()) > 2


@pytest.mark.parametrize("code", [1, 3, 255])
def test_non_zero_exit_code_is_reported(tmp_path: Path, code: int) -> None:
    result, rec = run(f"echo failing >&2; exit {code}", tmp_path)
    check_stream(rec, result)
    assert result.exit_code == code
    assert result.signal is None
    assert rec.exited()["exitCode"] == code
    assert rec.text("stderr") == "failing\n"
    assert result.summary().endswith(f"[exit code {code}]")


def test_command_killed_by_a_signal_reports_the_signal(tmp_path: Path) -> None:
    result, rec = run("kill -TERM $$", tmp_path)
    check_stream(rec, result)
    assert result.exit_code is None
    assert result.signal == signal.SIGTERM
    assert not result.timed_out
    assert result.summary().endswith(f"[killed by signal {int(signal.SIGTERM)}]")


def test_command_runs_in_cwd_with_empty_stdin(tmp_path: Path) -> None:
    # Give this process an open, silent stdin: a command that inherited it would hang.
    saved = os.dup(0)
    read_end, write_end = os.pipe()
    os.dup2(read_end, 0)
    try:
        result, rec = run("pwd -P; cat; echo done", tmp_path)
    finally:
        os.dup2(saved, 0)
        for fd in (saved, read_end, write_end):
            os.close(fd)
    assert rec.text("stdout") == f"{tmp_path.resolve()}\ndone\n"
    assert result.exit_code == 0


def test_on_start_gets_the_command_id_after_the_started_notification(tmp_path: Path) -> None:
    seen: list[tuple[str, list[str]]] = []
    holder: list[Recorder] = []

    async def body() -> CommandResult:
        rec = Recorder()
        holder.append(rec)

        def on_start(command_id: str) -> None:
            seen.append((command_id, rec.methods()))

        return await asyncio.wait_for(
            start(rec, ManualClock(T0), "echo hi", tmp_path, on_start=on_start), WAIT_S
        )

    result = asyncio.run(body())
    assert seen == [(result.command_id, ["command/started"])]
    check_stream(holder[0], result)


def test_an_awaitable_from_on_start_is_finished_before_any_output_is_streamed(
    tmp_path: Path,
) -> None:
    # A hook that records the command's start (a row written when the command starts)
    # finishes before the first command/output, so whoever saw output also sees the record.
    seen: list[list[str]] = []
    holder: list[Recorder] = []

    async def body() -> CommandResult:
        rec = Recorder()
        holder.append(rec)

        async def record(command_id: str) -> None:
            await asyncio.sleep(0)  # gives the loop away, as a database write does
            seen.append(rec.methods())

        return await asyncio.wait_for(
            start(rec, ManualClock(T0), "echo hi", tmp_path, on_start=record), WAIT_S
        )

    result = asyncio.run(body())
    assert seen == [["command/started"]]
    assert "command/output" in holder[0].methods()
    check_stream(holder[0], result)


# -- output cap and decoding -----------------------------------------------------------------


def test_output_over_the_cap_is_truncated_with_a_marker(tmp_path: Path) -> None:
    total = OUTPUT_CAP_BYTES + 50_000
    result, rec = run(f"head -c {total} /dev/zero | tr '\\000' x", tmp_path)
    check_stream(rec, result)
    assert result.truncated is True
    assert rec.exited()["truncated"] is True
    assert result.output == "x" * OUTPUT_CAP_BYTES + TRUNCATION_MARKER
    assert result.exit_code == 0
    assert TRUNCATION_MARKER in result.summary()


def test_output_exactly_at_the_cap_is_not_truncated(tmp_path: Path) -> None:
    result, rec = run(f"head -c {OUTPUT_CAP_BYTES} /dev/zero | tr '\\000' x", tmp_path)
    assert result.truncated is False
    assert rec.exited()["truncated"] is False
    assert result.output == "x" * OUTPUT_CAP_BYTES
    assert TRUNCATION_MARKER not in result.output


def test_cap_counts_both_streams_together(tmp_path: Path) -> None:
    half = OUTPUT_CAP_BYTES // 2 + 1
    command = (
        f"head -c {half} /dev/zero | tr '\\000' o; head -c {half} /dev/zero | tr '\\000' e >&2"
    )
    result, rec = run(command, tmp_path)
    assert result.truncated is True
    assert rec.exited()["truncated"] is True
    kept = result.output.removesuffix(TRUNCATION_MARKER)
    assert kept != result.output
    assert len(kept) == OUTPUT_CAP_BYTES
    assert kept.count("o") == half
    assert kept.count("e") == OUTPUT_CAP_BYTES - half


def test_invalid_utf8_is_replaced_not_fatal(tmp_path: Path) -> None:
    result, rec = run("printf 'a\\377b\\n'; printf 'c\\300\\n' >&2; printf 'end\\303'", tmp_path)
    check_stream(rec, result)
    assert result.exit_code == 0
    assert rec.text("stdout") == "a\ufffdb\nend\ufffd"
    assert rec.text("stderr") == "c\ufffd\n"
    assert "a\ufffdb" in result.output


def test_runs_of_stray_continuation_bytes_are_replaced(tmp_path: Path) -> None:
    result, rec = run("printf 'x\\200\\200\\200\\200\\200'", tmp_path)
    check_stream(rec, result)
    assert rec.text("stdout") == "x" + "\ufffd" * 5
    assert result.output == rec.text("stdout")


def test_multibyte_characters_are_never_split_between_chunks(tmp_path: Path) -> None:
    text = "a" + "é✓😀" * 20_000 + "\n"  # 180 KB: several chunks, under the output cap
    (tmp_path / "chars.txt").write_text(text, encoding="utf-8")
    result, rec = run("cat chars.txt", tmp_path)
    check_stream(rec, result)
    chunks = rec.outputs("stdout")
    assert len(chunks) > 1
    assert all("\ufffd" not in chunk["text"] for chunk in chunks)
    assert rec.text("stdout") == text


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_a_line_longer_than_64_kib_arrives_complete(tmp_path: Path, stream: str) -> None:
    line = "".join(chr(ord("a") + i % 26) for i in range(200_000)) + "\n"
    (tmp_path / "line.txt").write_text(line, encoding="ascii")
    redirect = " >&2" if stream == "stderr" else ""
    result, rec = run(f"cat line.txt{redirect}", tmp_path)
    check_stream(rec, result)
    chunks = rec.outputs(stream)
    assert len(chunks) > 1
    assert all(len(chunk["text"]) <= CHUNK_CHARS for chunk in chunks)
    assert rec.text(stream) == line
    assert result.output == line


# -- timeout and cancellation ----------------------------------------------------------------


def test_timeout_ends_the_whole_process_group(tmp_path: Path) -> None:
    async def body() -> None:
        rec = Recorder()
        clock = ManualClock(T0)
        command = "sleep 1000 & echo $!; echo started; wait"
        task = asyncio.create_task(start(rec, clock, command, tmp_path, timeout_ms=1000))
        await rec.wait_for(lambda: "started\n" in rec.text("stdout"))
        pid = int(rec.text("stdout").split()[0])
        pidfd = os.pidfd_open(pid)
        try:
            await clock.advance(999)
            assert not exited_within(pidfd, 0)
            assert not task.done()
            await clock.advance(1)
            result = await asyncio.wait_for(task, WAIT_S)
            assert result.timed_out is True
            assert result.cancelled is False
            assert result.exit_code is None
            assert result.signal == signal.SIGKILL
            assert "timed out" in result.summary()
            check_stream(rec, result)
            assert rec.exited()["timedOut"] is True
            assert exited_within(pidfd, WAIT_S)
            assert process_gone(pid)
        finally:
            os.close(pidfd)
            kill_leftover(pid)

    asyncio.run(body())


@pytest.mark.parametrize("moved_ms", [999, 1000, 61_000])
def test_the_timeout_counts_from_the_announced_start_while_on_start_awaits(
    tmp_path: Path, moved_ms: int
) -> None:
    # A client that saw command/started moves the clock while the start is still being
    # recorded: the deadline is the announced start plus the timeout, not a later reading.
    async def body() -> CommandResult:
        rec = Recorder()
        clock = ManualClock(T0)

        async def record(_command_id: str) -> None:
            await clock.advance(moved_ms)  # as a client's clock/advance between two awaits

        command = "echo started; sleep 1000"
        task = asyncio.create_task(
            start(rec, clock, command, tmp_path, timeout_ms=1000, on_start=record)
        )
        if moved_ms < 1000:  # otherwise the command may be ended before it prints anything
            await rec.wait_for(lambda: "started\n" in rec.text("stdout"))
            assert not task.done()
            await clock.advance(1000 - moved_ms)
        return await asyncio.wait_for(task, WAIT_S)

    result = asyncio.run(body())
    assert result.timed_out is True


def test_cancellation_propagates_and_ends_the_whole_process_group(tmp_path: Path) -> None:
    async def body() -> None:
        rec = Recorder()
        command = "sleep 1000 & echo $!; echo $$; wait"
        task = asyncio.create_task(start(rec, ManualClock(T0), command, tmp_path))
        await rec.wait_for(lambda: len(rec.text("stdout").split()) == 2)
        pid, shell_pid = (int(word) for word in rec.text("stdout").split())
        pidfd = os.pidfd_open(pid)
        shell_fd = os.pidfd_open(shell_pid)
        try:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(task, WAIT_S)
            assert task.cancelled()
            exited = rec.exited()
            assert exited["cancelled"] is True
            assert exited["timedOut"] is False
            assert exited["exitCode"] is None
            assert exited["signal"] == signal.SIGKILL
            assert exited_within(shell_fd, 0)
            assert exited_within(pidfd, WAIT_S)
            assert process_gone(pid)
            assert process_gone(shell_pid)
        finally:
            os.close(pidfd)
            os.close(shell_fd)
            kill_leftover(pid)

    asyncio.run(body())


def test_streamed_output_stops_at_the_cap_with_one_marker(tmp_path: Path) -> None:
    result, rec = run(f"head -c {OUTPUT_CAP_BYTES * 3} /dev/zero | tr '\\0' x", tmp_path)
    streamed = rec.text("stdout")
    assert streamed == "x" * OUTPUT_CAP_BYTES + TRUNCATION_MARKER
    assert streamed.count(TRUNCATION_MARKER) == 1
    assert result.truncated is True
