"""Broken hosts: a held-out set (what commands print and how they end), written from the
contract alone (ADR 0053 §7, docs/implementing-a-host.md "Commands and shells")."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from hosts.registry import BrokenCase, patch, variant

_StreamCollector = Any  # a commands._Collector with keep(data, name)


def _supervise_copy(
    *,
    make_collector: Callable[[Any, str | None], _StreamCollector] | None = None,
    seq_per_stream: bool = False,
    swap_streams: bool = False,
    exited_after_cancel: bool = False,
    rewrite_text: Callable[[str], str] | None = None,
) -> Callable[..., Awaitable[Any]]:
    """A copy of ``reference_host.commands._supervise`` with one mistake switched on.

    Every flag off, it behaves as the reference (the collector's ``keep`` is given the
    stream's name as well, which the reference collector ignores)."""
    from reference_host import commands

    # tasks that finish a cancelled command in the background (exited_after_cancel), held
    # only while they run so that the loop does not lose them; nothing outlives a host
    background: set[asyncio.Future[None]] = set()

    async def supervise(
        process: asyncio.subprocess.Process,
        read_ends: list[int],
        *,
        command_id: str,
        started: float,
        shell: Any,
        command: str,
        cwd: str,
        session_id: str,
        turn_id: str | None,
        clock: Any,
        notify: Callable[[str, dict[str, Any]], None],
        timeout_ms: int,
        on_start: Callable[[str], Awaitable[None] | None] | None,
    ) -> Any:
        pipes: list[tuple[asyncio.StreamReader, asyncio.ReadTransport]] = []
        try:
            for fd in read_ends:
                pipes.append(await commands._read_pipe(fd))
        except BaseException:
            for _reader, transport in pipes:
                transport.close()
            for fd in read_ends[len(pipes) :]:
                with contextlib.suppress(OSError):
                    os.close(fd)
            raise
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
            if starting is not None:
                try:
                    await starting
                except BaseException:
                    for _reader, transport in pipes:
                        transport.close()
                    raise
        if make_collector is None:
            collector: Any = _NamedCollector()
        else:
            collector = make_collector(clock, turn_id)
        seqs: dict[str, int] = {"stdout": 0, "stderr": 0}
        timed_out = asyncio.Event()
        expire = commands._expire(timed_out, process)
        timer = clock.call_at(deadline_ms, expire)
        if clock.now_ms() >= deadline_ms:
            timer.cancel()
            await expire()

        async def pump(stream: asyncio.StreamReader, name: str) -> None:
            decoder_pending = b""
            while data := await stream.read(commands.CHUNK_BYTES):
                was_truncated = collector.truncated
                kept = collector.keep(data, name)
                if was_truncated:
                    continue
                data = decoder_pending + kept
                cut = commands._utf8_boundary(data) if not collector.truncated else len(data)
                decoder_pending = data[cut:]
                emit(data[:cut], name)
                if collector.truncated:
                    emit(commands.TRUNCATION_MARKER.encode(), name)
            if decoder_pending:
                emit(decoder_pending, name)

        def emit(data: bytes, name: str) -> None:
            if not data:
                return
            text = data.decode("utf-8", "replace")
            if rewrite_text is not None:
                text = rewrite_text(text)
            for start in range(0, len(text), commands.CHUNK_CHARS):
                seq = seqs[name] if seq_per_stream else collector.seq
                notify(
                    "command/output",
                    {
                        "sessionId": session_id,
                        "commandId": command_id,
                        "seq": seq,
                        "stream": name,
                        "text": text[start : start + commands.CHUNK_CHARS],
                    },
                )
                seqs[name] += 1
                collector.seq += 1

        def exited(result: Any) -> None:
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

        def outcome(code: int, cancelled: bool) -> Any:
            return commands.CommandResult(
                command_id=command_id,
                exit_code=code if code >= 0 else None,
                signal=-code if code < 0 else None,
                timed_out=timed_out.is_set(),
                cancelled=cancelled,
                truncated=collector.truncated,
                duration_ms=int((time.monotonic() - started) * 1000),
                output=collector.text(),
            )

        cancelled = False
        (out, out_pipe), (err, err_pipe) = pipes
        names = ("stderr", "stdout") if swap_streams else ("stdout", "stderr")
        reader = asyncio.ensure_future(asyncio.gather(pump(out, names[0]), pump(err, names[1])))

        async def drain() -> None:
            await asyncio.wait({reader}, timeout=commands.OUTPUT_GRACE_S)
            if not reader.done():
                out_pipe.close()
                err_pipe.close()
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reader

        try:
            await process.wait()
        except asyncio.CancelledError:
            cancelled = True
            if exited_after_cancel:
                # the turn is not kept waiting for the cancelled command: the group is
                # ended now, its pipes drained and its exit announced in the background
                timer.cancel()
                commands._kill_group(process)

                async def finish() -> None:
                    # the drain takes a moment (a bounded 0.2 s here), as pipes a slow
                    # child holds do: the race with the turn's end is then certain
                    await asyncio.sleep(0.2)
                    await drain()
                    out_pipe.close()
                    err_pipe.close()
                    if process.returncode is None:
                        await process.wait()
                    code = process.returncode
                    exited(outcome(code if code is not None else -signal.SIGKILL, True))

                finishing = asyncio.ensure_future(finish())
                background.add(finishing)
                finishing.add_done_callback(background.discard)
                raise commands.CommandCancelledError(outcome(-signal.SIGKILL, True)) from None
        finally:
            if not (cancelled and exited_after_cancel):
                timer.cancel()
                commands._kill_group(process)
                await drain()
        out_pipe.close()
        err_pipe.close()
        if process.returncode is None:
            await process.wait()
        code = process.returncode if process.returncode is not None else -signal.SIGKILL
        result = outcome(code, cancelled)
        exited(result)
        if cancelled:
            raise commands.CommandCancelledError(result)
        return result

    return supervise


def _collector_base() -> type[Any]:
    from reference_host import commands

    return commands._Collector


class _NamedCollector:
    """The reference collector, its ``keep`` also given the stream (which it ignores)."""

    def __init__(self) -> None:
        self._inner = _collector_base()()

    @property
    def truncated(self) -> bool:
        return bool(self._inner.truncated)

    @truncated.setter
    def truncated(self, value: bool) -> None:
        self._inner.truncated = value

    @property
    def seq(self) -> int:
        return int(self._inner.seq)

    @seq.setter
    def seq(self, value: int) -> None:
        self._inner.seq = value

    @property
    def kept(self) -> bytearray:
        kept: bytearray = self._inner.kept
        return kept

    def keep(self, data: bytes, name: str) -> bytes:
        del name
        part: bytes = self._inner.keep(data)
        return part

    def text(self) -> str:
        text: str = self._inner.text()
        return text


def _cap() -> int:
    from reference_host.options import OUTPUT_CAP_BYTES

    return OUTPUT_CAP_BYTES


# P20 / R7.3 ("a character whose bytes arrive in separate reads is valid and is shown
# whole, never cut in two").
# Bug: the "do not cut a character" check looks only at the last byte of a read: it holds
# back a trailing lead byte, but not a lead byte followed by some (not all) of its
# continuation bytes. A 3- or 4-byte character split after its second byte is decoded
# in two halves, each shown as U+FFFD.
# Observe: the command/output texts joined are "\ufffd\ufffd" where "€" was printed (the
# tool result given to the model, decoded from the kept bytes, is right).
# Trigger: Bash `printf '\342\202'; sleep 0.3; printf '\254\n'` (the bytes of "€" in two
# writes), then join the command/output texts of the stdout stream.
@variant("out-utf8-split-after-two-bytes")
def utf8_split_after_two_bytes() -> None:
    from reference_host import commands

    def boundary(data: bytes) -> int:
        if data and data[-1] >= 0xC0:  # a lead byte whose character has not begun
            return len(data) - 1
        return len(data)

    patch(commands, "_utf8_boundary", boundary)


# P20 ("output of exactly that size streams whole and is not truncated").
# Bug: the cap check is `kept + len(data) >= cap` (>= where > is meant): output of exactly
# maxCommandOutputBytes bytes is reported truncated and is followed by the host's notice.
# Observe: command/exited.truncated true (also command_audit.truncated 1) for a command
# that printed exactly capabilities.maxCommandOutputBytes bytes.
# Trigger: Bash `head -c <maxCommandOutputBytes> /dev/zero | tr '\0' a`.
@variant("out-cap-exact-size-truncated")
def cap_exact_size_truncated() -> None:
    from reference_host import commands

    class Collector(commands._Collector):
        def keep(self, data: bytes) -> bytes:
            room = max(_cap() - len(self.kept), 0)
            if len(self.kept) + len(data) >= _cap():
                self.truncated = True
            part = data[:room]
            self.kept += part
            return part

    patch(commands, "_Collector", Collector)


# P20 ("At most maxCommandOutputBytes bytes of each command's own output ..., stdout and
# stderr together, are streamed").
# Bug: the cap is counted per stream: stdout and stderr each get the whole budget, so a
# command can stream up to twice the cap, and one whose streams together pass the cap
# (each below it) reports truncated false.
# Observe: the command/output texts of both streams total more than maxCommandOutputBytes
# bytes, and command/exited.truncated is false.
# Trigger: Bash `head -c 200000 /dev/zero | tr '\0' a; head -c 200000 /dev/zero | tr '\0' b
# >&2` with a cap of 262144.
@variant("out-cap-per-stream")
def cap_per_stream() -> None:
    from reference_host import commands

    class PerStream(_NamedCollector):
        def __init__(self) -> None:
            super().__init__()
            self.per_stream: dict[str, int] = {"stdout": 0, "stderr": 0}

        def keep(self, data: bytes, name: str) -> bytes:
            room = max(_cap() - self.per_stream[name], 0)
            if len(data) > room:
                self.truncated = True
            part = data[:room]
            self.per_stream[name] += len(part)
            self.kept.extend(part)
            return part

    def make(clock: Any, turn_id: str | None) -> PerStream:
        del clock, turn_id
        return PerStream()

    patch(commands, "_supervise", _supervise_copy(make_collector=make))


# P20 ("each command's own output (another command of the same turn or message counts its
# own)").
# Bug: the output budget is kept per turn (it was meant to bound what the model is given in
# one turn), so the commands of one turn share one cap: a second command is truncated
# as soon as the first one's output and its own pass the cap together.
# Observe: the second command of a turn, printing less than the cap, streams only part of
# its output and reports truncated: true (command/exited and command_audit).
# Trigger: one assistant message (or two in one turn) with Bash `head -c 200000 /dev/zero |
# tr '\0' a` and Bash `head -c 100000 /dev/zero | tr '\0' b`, cap 262144.
@variant("out-cap-shared-by-turn")
def cap_shared_by_turn() -> None:
    from reference_host import commands

    # per host: host clock -> turn id -> bytes that turn's commands kept so far
    spent: weakref.WeakKeyDictionary[Any, dict[str | None, int]] = weakref.WeakKeyDictionary()

    class PerTurn(_NamedCollector):
        def __init__(self, budget: dict[str | None, int], turn_id: str | None) -> None:
            super().__init__()
            self.budget = budget
            self.turn_id = turn_id

        def keep(self, data: bytes, name: str) -> bytes:
            del name
            used = self.budget.get(self.turn_id, 0)
            room = max(_cap() - used, 0)
            if len(data) > room:
                self.truncated = True
            part = data[:room]
            self.budget[self.turn_id] = used + len(part)
            self.kept.extend(part)
            return part

    def make(clock: Any, turn_id: str | None) -> PerTurn:
        return PerTurn(spent.setdefault(clock, {}), turn_id)

    patch(commands, "_supervise", _supervise_copy(make_collector=make))


# R7.3 ("Output is streamed, and given to the model, as the command wrote it: line ends
# are not translated (a CR LF and a lone CR stay as they are)").
# Bug: the tool result for the model is "normalised": CR LF and lone CR become LF (the
# streamed command/output is untouched).
# Observe: the tool message of the next provider request holds "a\nb\nc" where the command
# printed "a\r\nb\rc".
# Trigger: Bash `printf 'a\r\nb\rc'`; read the provider request that follows.
@variant("out-model-line-ends-translated")
def model_line_ends_translated() -> None:
    from reference_host import commands

    class Collector(commands._Collector):
        def text(self) -> str:
            text: str = super().text()
            return text.replace("\r\n", "\n").replace("\r", "\n")

    patch(commands, "_Collector", Collector)


# R7.3 / P20 ("stdout and stderr apart").
# Bug: the pipes are unpacked in the wrong order when the two pumps are named, so what the
# command wrote to stdout is announced as stderr and the other way round.
# Observe: `echo out; echo err >&2` gives command/output {stream: "stderr", text: "out\n"}
# and {stream: "stdout", text: "err\n"}.
# Trigger: Bash `echo out; echo err >&2`.
@variant("out-streams-swapped")
def streams_swapped() -> None:
    from reference_host import commands

    patch(commands, "_supervise", _supervise_copy(swap_streams=True))


# R7.3 / P20 ("numbered by seq from 0 across both streams ... with no gap and no number
# used twice").
# Bug: each stream keeps its own counter, so stdout and stderr pieces are both numbered
# from 0: a command that writes to both streams uses seq 0 twice.
# Observe: two command/output notifications of one command with the same seq (one
# stdout, one stderr).
# Trigger: Bash `echo out; echo err >&2`.
@variant("out-seq-per-stream")
def seq_per_stream() -> None:
    from reference_host import commands

    patch(commands, "_supervise", _supervise_copy(seq_per_stream=True))


# P19 ("Every command you announce with command/started ends with its command/exited, and
# for one turn every command/exited comes before its turn/ended"; Ordering: "command/exited
# for every command, before that turn's turn/ended").
# Bug: on session/cancel the host ends the command's process group at once but, so as not
# to keep the cancelled turn waiting, drains its pipes and announces its command/exited
# from a background task: the turn ends (turn/toolResult TURN_CANCELLED, turn/ended
# cancelled) before the command's command/exited arrives.
# Observe: turn/ended {outcome: cancelled} precedes command/exited {cancelled: true} of a
# command of that turn.
# Trigger: Bash `sleep 30` (wait for command/started), session/cancel, and compare the
# order of command/exited and turn/ended.
@variant("out-exited-after-turn-ended")
def exited_after_turn_ended() -> None:
    from reference_host import commands

    patch(commands, "_supervise", _supervise_copy(exited_after_cancel=True))


# R7.3 / P20 (command/output text is the output "decoded as UTF-8 with invalid bytes
# replaced by U+FFFD"; "Output is streamed, and given to the model, as the command wrote
# it"): NUL is valid UTF-8 and is streamed as written.
# Bug: NUL characters are stripped from the streamed command/output text (a guard for
# C-string consumers); the model's tool result still has them.
# Observe: `printf 'a\0b'` streams "ab" instead of "a\u0000b".
# Trigger: Bash `printf 'a\000b'`.
@variant("out-nul-stripped-from-stream")
def nul_stripped_from_stream() -> None:
    from reference_host import commands

    patch(commands, "_supervise", _supervise_copy(rewrite_text=lambda text: text.replace("\0", "")))


# R7.3 ("signal is the number of the signal that ended the shell, or null when it exited
# on its own").
# Bug: a shell ended by a signal (not one the host sent for a timeout or a cancel) is
# reported the way a shell reports `$?`: exitCode 128 + n, signal null.
# Observe: Bash `kill -9 $$` gives command/exited {exitCode: 137, signal: null} (and the
# same in command_audit) instead of signal 9.
# Trigger: Bash `kill -TERM $$` or `kill -9 $$`.
@variant("out-signal-as-shell-status")
def signal_as_shell_status() -> None:
    from reference_host import commands

    real = commands.CommandResult

    def result(**fields: Any) -> Any:
        if fields["signal"] is not None and not fields["timed_out"] and not fields["cancelled"]:
            fields["exit_code"] = 128 + fields["signal"]
            fields["signal"] = None
        return real(**fields)

    patch(commands, "CommandResult", result)


# R7.3 ("then exitCode is its status, also above 128: `exit 130` is exitCode: 130,
# signal: null").
# Bug: the host decodes a status above 128 as "killed by signal status-128", as shells
# print it: `exit 130` is reported as signal 2, exitCode null.
# Observe: command/exited {exitCode: null, signal: 2} (and command_audit) for `exit 130`.
# Trigger: Bash `exit 130`.
@variant("out-high-status-as-signal")
def high_status_as_signal() -> None:
    from reference_host import commands

    real = commands.CommandResult

    def result(**fields: Any) -> Any:
        code = fields["exit_code"]
        if code is not None and 128 < code < 128 + 65:
            fields["exit_code"] = None
            fields["signal"] = code - 128
        return real(**fields)

    patch(commands, "CommandResult", result)


# R7.3 ("signal is the number of the signal that ended the shell"): a cancelled command's
# shell is ended by the host's signal, so its signal is that signal, never null.
# Bug: a cancelled command is reported as "no exit status": exitCode null and signal null
# (cancelled: true is right).
# Observe: after session/cancel during `sleep 30`, command/exited {cancelled: true,
# signal: null, exitCode: null}; command_audit.signal NULL.
# Trigger: Bash `sleep 30` (wait for command/started), then session/cancel.
@variant("out-cancelled-signal-null")
def cancelled_signal_null() -> None:
    from reference_host import commands

    real = commands.CommandResult

    def result(**fields: Any) -> Any:
        if fields["cancelled"]:
            fields["exit_code"] = None
            fields["signal"] = None
        return real(**fields)

    patch(commands, "CommandResult", result)


# C5 ("a command times out when it reaches the command's start plus timeout_ms").
# Bug: the timeout is converted to whole seconds (`timeout_ms // 1000`) for the host's
# timer, so a timeout under a second fires at once and 1500 ms fires after 1000 ms.
# Observe: Bash {command: "sleep 5", timeout_ms: 1500}; after conformance/clock/advance
# 1200 the command is already timedOut: true; with timeout_ms 500 it times out before
# any clock move.
# Trigger: Bash `sleep 30` with timeout_ms 1500, advance the clock by 1200 ms, and see
# that no command/exited has come yet (the reference times out only at 1500).
@variant("out-timeout-whole-seconds")
def timeout_whole_seconds() -> None:
    from reference_host import turns

    original = vars(turns)["run_command"]

    async def run_command(*, timeout_ms: int, **kwargs: Any) -> Any:
        return await original(timeout_ms=(timeout_ms // 1000) * 1000, **kwargs)

    patch(turns, "run_command", run_command, wraps=True)


# P27 (tools.schema.json: Bash.timeout_ms has "maximum": 3600000, inclusive; only a
# timeout_ms "above one hour" is INVALID_TOOL_INPUT).
# Bug: the host's own range check is `1 <= timeout_ms < 3_600_000`, so exactly one hour is
# refused.
# Observe: Bash {command: "echo hi", timeout_ms: 3600000} gets turn/toolResult error
# INVALID_TOOL_INPUT and no command runs.
# Trigger: that call.
@variant("out-timeout-hour-refused")
def timeout_hour_refused() -> None:
    from reference_host import turns
    from reference_host.errors import HostError

    original = vars(turns)["validate_args"]

    def validate_args(spec: Any, args: Any) -> dict[str, Any]:
        checked: dict[str, Any] = original(spec, args)
        if spec.name == "Bash" and checked.get("timeout_ms", 0) >= 3_600_000:
            raise HostError(
                "INVALID_TOOL_INPUT",
                "Bash: timeout_ms must be below one hour",
                {"tool": "Bash", "field": "timeout_ms"},
            )
        return checked

    patch(turns, "validate_args", validate_args, wraps=True)


# C5 ("the row ... holds ... what command/exited reported (exit code, signal, timed_out,
# cancelled, truncated, duration_ms)").
# Bug: the audit row leaves out truncated (the column's default 0 is written), while
# command/exited reports truncated: true.
# Observe: command_audit.truncated = 0 for a command whose command/exited said truncated.
# Trigger: Bash printing more than maxCommandOutputBytes bytes, then read command_audit.
@variant("out-audit-drops-truncated")
def audit_drops_truncated() -> None:
    from reference_host import turns

    original = turns._audit_row

    def audit_row(audit: dict[str, Any], result: Any, ended_at: int) -> dict[str, Any]:
        row: dict[str, Any] = original(audit, result, ended_at)
        row.pop("truncated")
        return row

    patch(turns, "_audit_row", audit_row, wraps=True)


CASES = [
    BrokenCase(
        "out-utf8-split-after-two-bytes",
        "shell",
        "bytes_arrive_apart_is_shown_whole and three",
        "P20",
        "was not kept whole",
    ),
    BrokenCase(
        "out-cap-exact-size-truncated",
        "shell",
        "output_exactly_at_the_announced_cap_is_streamed_whole",
        "P20",
        "output of exactly the cap was marked truncated",
    ),
    BrokenCase(
        "out-cap-per-stream",
        "shell",
        "crosses_the_cap_inside_one_piece_is_cut",
        "P20",
        "output past the cap was not marked truncated",
    ),
    BrokenCase(
        "out-cap-shared-by-turn",
        "shell",
        "cap_counts_each_commands_own_output",
        "P20",
        "the cap counts each command's own outp",
    ),
    BrokenCase(
        "out-model-line-ends-translated",
        "shell",
        "carriage_returns_in_the_output_arrive",
        "P10",
        "gives the model the command's output as it was printed",
    ),
    BrokenCase(
        "out-streams-swapped",
        "shell",
        "standard_output_and_standard_error_stream_apart",
        "P20",
        "err 1",
    ),
    BrokenCase(
        "out-seq-per-stream",
        "shell",
        "a_command_run_in_a_plan_turn_is_recorded_for_audit",
        "P20",
        # how the two streams' pieces interleave varies: [0, 0], [0, 0, 1], [0, 1, 0] ...
        "numbers its own command/output pieces",
    ),
    BrokenCase(
        "out-exited-after-turn-ended",
        "isolation",
        "cancelling_one_sessions_turn_leaves_another_sessions_command_running",
        "R7.3",
        "ended before the command/exited",
    ),
    BrokenCase(
        "out-nul-stripped-from-stream",
        "shell",
        "a_nul_character_in_the_output_arrives",
        "P20",
        "output is streamed as the command wrote it",
    ),
    BrokenCase(
        "out-signal-as-shell-status",
        "shell",
        "a_shell_ended_by_a_signal_reports_that_signal",
        "R7.3",
        "was reported with signal None",
    ),
    BrokenCase(
        "out-high-status-as-signal",
        "shell",
        "exits_with_status_130_reports_that_status",
        "R7.3",
        "signal is for a shell a signal ended",
    ),
    BrokenCase(
        "out-cancelled-signal-null",
        "isolation",
        "cancelling_one_sessions_turn_leaves_another_sessions_command_running",
        "R7.3",
        "with neither an exit status nor a signal",
    ),
    BrokenCase(
        "out-timeout-whole-seconds",
        "shell",
        "timeout_counts_from_the_commands_own_start",
        "C5",
        "the command ended before its own timeout had run out",
    ),
    BrokenCase(
        "out-timeout-hour-refused",
        "plan_tools",
        "at_the_edge_of_the_tools_published_input_runs",
        "P27",
        "timeout_ms must be below one hour",
    ),
    BrokenCase(
        "out-audit-drops-truncated",
        "shell",
        "output_past_the_announced_cap_is_cut_there and eight",
        "P20",
        "the audit does not record the truncation",
    ),
]
