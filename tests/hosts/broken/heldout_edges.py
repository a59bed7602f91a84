"""Broken hosts: a held-out set (exactly at the edge: boundary values, off-by-one and
inclusive/exclusive mistakes at the limits and instants the contract names), written from
the contract alone."""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from hosts.registry import BrokenCase, patch, variant


# R3.11 (docs/implementing-a-host.md, Approval (§3), "Expiry is eager": "when the clock
# reaches `expiresAt`, your host expires the approval by itself") and P14 ("an approve or
# reject of a pending approval that arrives at or after `expiresAt` gets
# PLAN_APPROVAL_TIMEOUT"); Ordering: "a timer is due once the clock is at or past its time".
# Bug: the expiry test is `now > expiresAt` instead of `now >= expiresAt`. The timer fires
# at expiresAt, finds the approval "not yet expired" and does nothing, so the approval stays
# pending at its deadline and an approve sent exactly then succeeds.
# Observed: after clock/set to exactly expiresAt, no approval/updated `expired`, the row
# stays `pending`; approval/approve at that instant answers with the approval `approved`.
# Recipe: Plan session, SubmitPlan, clock/set now = expiresAt, approval/get (expect
# `expired`, PLAN_APPROVAL_TIMEOUT), or approval/approve (expect PLAN_APPROVAL_TIMEOUT).
@variant("edge-expiry-strictly-after-deadline")
def expiry_strictly_after_deadline() -> None:
    from reference_host import approvals, state

    def is_expired(expires_at_ms: int, now_ms: int) -> bool:
        return now_ms > expires_at_ms

    patch(state, "is_expired", is_expired)
    patch(approvals, "is_expired", is_expired)


# R3.9 ("The deadline is `createdAt + 30 minutes` on the host clock"; protocol Approval
# .expiresAt: "createdAt + 30 minutes, fixed at creation").
# Bug: the deadline is computed from the creation time in whole seconds (the implementer's
# date helper works in seconds and the result is multiplied back by 1000), so expiresAt is
# createdAt + 30 min minus createdAt's milliseconds (0 to 999 ms early); createdAt itself is
# reported to the millisecond.
# Observed: expiresAt - createdAt = 1_800_000 - (createdAt % 1000); the approval expires
# (and refuses an approve) up to 999 ms before createdAt + 30 min.
# Recipe: clock/set to a time whose millisecond part is not 0 (e.g. ...123), SubmitPlan,
# compare expiresAt with createdAt + 1_800_000 (wire and row); or approve at
# createdAt + 30 min - 1 ms (must succeed).
@variant("edge-deadline-from-whole-seconds")
def deadline_from_whole_seconds() -> None:
    from reference_host import approvals
    from reference_host.state import APPROVAL_TTL_MS

    def deadline_for(created_at_ms: int) -> int:
        return created_at_ms // 1000 * 1000 + APPROVAL_TTL_MS

    patch(approvals, "deadline_for", deadline_for)


# P33/R7.3 (Conformance mode: "a command times out when it reaches the command's start plus
# `timeout_ms`"; Ordering: "a timer is due once the clock is at or past its time").
# Bug: the command's timer is armed for the first millisecond past its deadline (the check
# is `now > started + timeout_ms`), so moving the clock by exactly timeout_ms leaves the
# command running; one more millisecond ends it.
# Observed: after clock/advance by exactly timeout_ms no `command/exited` with
# timedOut: true, the command goes on (until it ends by itself or the clock moves again).
# Recipe: Agent session in auto, Bash {"command": "<wait on a gate>", "timeout_ms": 5000},
# wait for command/started, clock/advance 5000, expect command/exited timedOut: true and
# the tool result COMMAND_TIMED_OUT before the advance's answer.
@variant("edge-command-timeout-one-ms-late")
def command_timeout_one_ms_late() -> None:
    from reference_host import turns
    from reference_host.commands import DEFAULT_TIMEOUT_MS, CommandResult

    original: Callable[..., Awaitable[CommandResult]] = vars(turns)["run_command"]

    async def run_command(*, timeout_ms: int = DEFAULT_TIMEOUT_MS, **kwargs: Any) -> CommandResult:
        return await original(timeout_ms=timeout_ms + 1, **kwargs)

    patch(turns, "run_command", run_command, wraps=True)


# P20 (Commands and shells, Output: "At most `maxCommandOutputBytes` bytes of each
# command's own output ... are streamed ...: output of exactly that size streams whole and is
# not truncated; past it you stream nothing more of it ... and report `truncated: true`").
# Bug: the cap check is `len(chunk) >= room` instead of `>`: a chunk that exactly fills the
# room marks the output truncated, so output of exactly the cap is reported truncated (and
# a truncation notice is streamed after it).
# Observed: a command printing exactly maxCommandOutputBytes bytes ends with
# command/exited truncated: true (command_audit.truncated = 1) and a notice after its bytes.
# Recipe: Bash `head -c <maxCommandOutputBytes> /dev/zero | tr '\0' a`, expect every byte
# streamed, truncated: false.
@variant("edge-output-cap-met-counts-as-passed")
def output_cap_met_counts_as_passed() -> None:
    from reference_host.commands import _Collector
    from reference_host.options import OUTPUT_CAP_BYTES

    def keep(self: _Collector, data: bytes) -> bytes:
        room = max(OUTPUT_CAP_BYTES - len(self.kept), 0)
        if len(data) >= room:
            self.truncated = True
        part = data[:room]
        self.kept += part
        return part

    patch(_Collector, "keep", keep)


# P20/R7.3 (Output: "as `command/output` notifications numbered by `seq` from 0 across both
# streams ... with no gap and no number used twice").
# Bug: each command numbers its pieces from 1 (the first piece is "piece 1").
# Observed: the first command/output of every command has seq 1; no piece has seq 0.
# Recipe: Bash `echo hi`, collect the command's command/output pieces, expect seqs 0..n-1.
@variant("edge-output-seq-from-one")
def output_seq_from_one() -> None:
    from reference_host.commands import _Collector

    original = _Collector.__init__

    def init(self: _Collector) -> None:
        original(self)
        self.seq = 1

    patch(_Collector, "__init__", init, wraps=True)


# P2 (Framing, "Frame limit": "announce the longest request line you accept in
# `capabilities.maxFrameBytes` ... A line of exactly that length is served; a longer one gets
# FRAME_TOO_LARGE").
# Bug: the reader reads at most maxFrameBytes bytes *including* the newline, so a request
# line of exactly maxFrameBytes bytes (newline excluded) is answered FRAME_TOO_LARGE. One
# byte shorter is served; the rest of the over-long line is still skipped correctly.
# Observed: a request padded to exactly maxFrameBytes gets FRAME_TOO_LARGE, id null.
# Recipe: read maxFrameBytes from initialize, send a session/list (or any request) padded
# with whitespace inside a string param / blank space to exactly that length, expect its
# result; then a line of maxFrameBytes + 1, expect FRAME_TOO_LARGE.
@variant("edge-frame-limit-counts-newline")
def frame_limit_counts_newline() -> None:
    from reference_host import server
    from reference_host.framing import Frame, OversizedFrame

    def read_frames(stream: BinaryIO, max_bytes: int = 8 * 1024 * 1024) -> Iterator[Frame]:
        while True:
            line = stream.readline(max_bytes)
            if not line:
                return
            if line.endswith(b"\n"):
                yield line[:-1]
            elif len(line) < max_bytes:
                yield line  # last line without a newline before end of input
            else:
                while True:
                    rest = stream.readline(65536)
                    if not rest or rest.endswith(b"\n"):
                        break
                yield OversizedFrame(max_bytes)

    patch(server, "read_frames", read_frames)


# P4 (Framing, Params: "a clock move past 8.64e15 ms less 30 minutes, that moment itself
# allowed"; protocol ClockSetParams: "At most 8640000000000000 minus 30 minutes").
# Bug: the range check is `now >= CLOCK_MAX`, so setting (or advancing) the clock to exactly
# 8.64e15 - 30 min is refused; the clock stays where it was.
# Observed: conformance/clock/set {"now": 8639999998200000} gets INVALID_PARAMS.
# Recipe: clock/set 8639999998200000, expect {"now": 8639999998200000}; clock/set one more,
# expect INVALID_PARAMS.
@variant("edge-clock-max-refused")
def clock_max_refused() -> None:
    from reference_host import host
    from reference_host.errors import HostError

    def within_clock_range(now: int) -> int:
        if now >= host.CLOCK_MAX:
            raise HostError(
                "INVALID_PARAMS",
                f"the clock cannot go past {host.CLOCK_MAX} (the last timestamp minus 30 minutes)",
                {"max": host.CLOCK_MAX},
            )
        return now

    patch(host, "_within_clock_range", within_clock_range)


# P4 (Framing, Params: "string lengths, counted in characters, not bytes"; protocol Id
# max length 200, task name max length 200, model max length 200, ...).
# Bug: the params validator measures strings in UTF-8 bytes, as a byte-string language's
# len() does, so a string of at most the maximum length in characters but longer in bytes is
# refused.
# Observed: task/create with a name of 200 "é" (400 bytes) gets INVALID_PARAMS; a 200-ASCII
# name is accepted. The same for a model name or shellId of non-ASCII letters.
# Recipe: task/create {"name": "é" * 200, ...}, expect the task with that name.
@variant("edge-string-length-in-bytes")
def string_length_in_bytes() -> None:
    from reference_host.schema_subset import Problem, _Checker, _pattern, _shown

    def string(schema: dict[str, Any], value: str, path: tuple[str | int, ...]) -> Problem | None:
        size = len(value.encode("utf-8", "surrogatepass"))
        if "minLength" in schema and size < schema["minLength"]:
            return Problem(path, f"{_shown(value)} is shorter than {schema['minLength']}")
        if "maxLength" in schema and size > schema["maxLength"]:
            return Problem(path, f"{_shown(value)} is longer than {schema['maxLength']}")
        if "pattern" in schema and _pattern(schema["pattern"]).search(value) is None:
            return Problem(path, f"{_shown(value)} does not match {schema['pattern']!r}")
        return None

    patch(_Checker, "_string", staticmethod(string))


# P10 ("The tools work"; `schemas/tools.schema.json` publishes every tool's input: Read
# `offset` is "First line, 1-based", `limit` "Lines to return").
# Bug: Read takes `offset` as a 0-based index into the file's lines, so offset 1 starts at
# the second line (and offset N returns lines N+1...).
# Observed: Read {"path": "f.txt", "offset": 1, "limit": 1} of "one\ntwo\n" gives "two\n";
# the model never sees the first line through an offset.
# Recipe: workspace file "one\ntwo\nthree\n", Read offset 2 limit 1, expect the tool message
# to carry "two" and not "three".
@variant("edge-read-offset-zero-based")
def read_offset_zero_based() -> None:
    from reference_host.tools import files
    from reference_host.workspace import resolve_inside

    def read(root: Path, relative: str, offset: int | None, limit: int | None) -> str:
        path = resolve_inside(root, relative, must_exist=True)
        files._require_regular(path, relative)
        try:
            text = path.read_bytes().decode("utf-8", errors="replace")
        except OSError as exc:
            raise files._io_error(relative, exc) from exc
        if offset is None and limit is None:
            return text
        start = offset or 0
        lines = files._split_lines(text)
        end = len(lines) if limit is None else start + limit
        return "".join(lines[start:end])

    patch(files.Read, "_read", staticmethod(read))


# P10 (Grep: "gives each matching file's path with the matching line, and no file without a
# match"; "Only LF ends a line").
# Bug: Grep splits the file on "\n" and drops the last piece, taking it for the empty
# string after the final newline; in a file that does not end with a newline that piece is
# the last line, which is then never searched.
# Observed: a match only on the last line of a file without a trailing newline is not
# reported (the file is missing from the result, or "(no matches)").
# Recipe: workspace file "alpha\nomega" (no final LF), Grep {"pattern": "omega"}, expect the
# file and the line "omega" in the tool message.
@variant("edge-grep-skips-unterminated-last-line")
def grep_skips_unterminated_last_line() -> None:
    from reference_host.tools import files
    from reference_host.tools.budget import Budget

    def grep(root: Path, compiled: Any, parts: list[str] | None, budget: Budget) -> str:
        out: list[str] = []
        for relative, real in files._workspace_files(root, budget):
            if parts is not None and not files._glob_match(parts, relative.split("/")):
                continue
            try:
                data = real.read_bytes()
            except OSError:
                continue
            if b"\0" in data[: files._BINARY_PROBE]:
                continue
            text = data.decode("utf-8", errors="replace")
            lines = text.split("\n")[:-1]  # "the empty piece after the last newline"
            for number, line in enumerate(lines, start=1):
                line = line.removesuffix("\r")
                if not files._search(compiled, line, budget):
                    continue
                if len(out) == files.GREP_MAX_MATCHES:
                    out.append(
                        f"[results capped at {files.GREP_MAX_MATCHES} matches; "
                        "narrow the pattern or glob]"
                    )
                    return "\n".join(out)
                out.append(f"{relative}:{number}:{line}")
        return "\n".join(out) if out else files.NO_MATCHES

    patch(files.Grep, "_grep", staticmethod(grep))


# P13 (Plan artifacts, "Integrity": "`approve` and `artifact/read` check the file's bytes
# against its recorded SHA-256 and size, on every call ... Any change to the bytes ... is
# ARTIFACT_MODIFIED"; C1, R3.2).
# Bug: the integrity check reads exactly the recorded number of bytes (a bounded read, so a
# huge file cannot be pulled into memory) and hashes those; bytes appended after the
# recorded end are never looked at, so a grown file passes as unmodified.
# Observed: after appending to the artifact, artifact/read returns the original bytes and
# approval/approve approves and runs the plan, instead of ARTIFACT_MODIFIED.
# Recipe: SubmitPlan, make the artifact writable and append "x" to it, approval/approve ->
# expect ARTIFACT_MODIFIED, the approval still pending (and artifact/read ARTIFACT_MODIFIED).
@variant("edge-artifact-check-reads-recorded-size")
def artifact_check_reads_recorded_size() -> None:
    from reference_host import approvals, artifacts
    from reference_host.errors import HostError

    def read_verified(root: str, relative_path: str, sha256: str, byte_size: int) -> bytes:
        content = artifacts.read_artifact(root, relative_path, limit=byte_size)
        if len(content) != byte_size or hashlib.sha256(content).hexdigest() != sha256:
            raise HostError(
                "ARTIFACT_MODIFIED",
                f"{relative_path} changed after it was submitted: its size or SHA-256 is not "
                "the recorded one",
                {"path": relative_path, "recordedSha256": sha256, "recordedByteSize": byte_size},
            )
        return content

    patch(approvals, "read_verified", read_verified)


# R3.2 ("`artifact/read` returns ... the file's bytes"), R2.1/R2.7 (the submitted markdown
# written byte for byte), P13 ("a missing file or one that is not a regular file is
# ARTIFACT_UNREADABLE"; an unchanged file can be approved); protocol ArtifactRef.byteSize and
# ArtifactReadResult.byteSize "Min 0".
# Bug: the artifact reader takes a read of zero bytes for a file that is gone, so the
# artifact of a plan whose markdown is "" can never be read or approved.
# Observed: SubmitPlan with "markdown": "" succeeds (byteSize 0), but artifact/read and
# approval/approve answer ARTIFACT_UNREADABLE and the plan stays pending.
# Recipe: SubmitPlan {"title": "t", "markdown": "", "question": "q"}, artifact/read ->
# expect contentBase64 "" and byteSize 0; approve -> expect approved.
@variant("edge-empty-artifact-unreadable")
def empty_artifact_unreadable() -> None:
    from reference_host import artifacts
    from reference_host.errors import HostError

    original = artifacts.read_artifact

    def read_artifact(root: str, relative_path: str, limit: int | None = None) -> bytes:
        content = original(root, relative_path, limit)
        if not content:
            raise HostError("ARTIFACT_UNREADABLE", f"cannot read {relative_path}: no content")
        return content

    patch(artifacts, "read_artifact", read_artifact, wraps=True)


# P29 ("Every enabled task whose `runAt` comes due runs, however many are due at the same
# moment"), R3.11 ("Each approval expires at its own deadline"), Ordering ("One move can
# make many timers due ...: each of them fires in that move").
# Bug: the host keeps its timers keyed by their due time (a map from instant to callback),
# so a timer armed for an instant that already has one replaces it: of two tasks with the
# same runAt only the one armed last runs; of two approvals created at the same host-clock
# instant (in two sessions) only the later one expires on its own.
# Observed: two tasks with one runAt, clock moved past it: one task/runFinished, the other
# task never runs (no lastRun); or two sessions' plans submitted at one instant: after the
# deadline only one approval/updated `expired`, the other row stays `pending`.
# Recipe: task/create A and B (Agent, same runAt), clock/set runAt, expect two runs.
@variant("edge-timers-keyed-by-instant")
def timers_keyed_by_instant() -> None:
    from reference_host.clock import Clock, TimerCallback, TimerHandle

    original = Clock.call_at
    # each clock's timers by due time; weakly keyed by the clock, so a restarted host
    # (a new clock) starts with none
    by_clock: weakref.WeakKeyDictionary[Clock, dict[int, TimerHandle]] = weakref.WeakKeyDictionary()

    def call_at(self: Clock, due_ms: int, callback: TimerCallback) -> TimerHandle:
        slots = by_clock.setdefault(self, {})
        replaced = slots.get(due_ms)
        if replaced is not None:
            replaced.cancel()
        handle = original(self, due_ms, callback)
        slots[due_ms] = handle
        return handle

    patch(Clock, "call_at", call_at, wraps=True)


# P1 (Framing, "Request ids": "answer every request under exactly the id it carried: a
# string, or any integer, zero and negative ones included").
# Bug: the response's id is written as `request.id || null`, so a request with id 0 is
# answered (result or error) with "id": null; every other id is echoed.
# Observed: {"jsonrpc":"2.0","id":0,"method":"session/list","params":{}} is answered with
# {"jsonrpc":"2.0","id":null,"result":{...}}.
# Recipe: after initialize, send session/list with id 0, expect the answer under id 0.
@variant("edge-request-id-zero-answered-null")
def request_id_zero_answered_null() -> None:
    from reference_host.framing import Frame
    from reference_host.rpc import Dispatcher

    original = Dispatcher.handle

    async def handle(self: Dispatcher, frame: Frame) -> None:
        send = self._send

        def reply(message: dict[str, Any]) -> None:
            if "id" in message:
                message = {**message, "id": message["id"] or None}
            send(message)

        self._send = reply
        try:
            await original(self, frame)
        finally:
            self._send = send

    patch(Dispatcher, "handle", handle, wraps=True)


# P27 (Planning, "Tool inputs": "a `timeout_ms` above one hour" gets INVALID_TOOL_INPUT;
# tools.schema.json Bash.timeout_ms "maximum": 3600000), so a timeout of exactly one hour is
# a valid input.
# Bug: the Bash input check requires the timeout to be under an hour (`timeout_ms <
# 3_600_000`), so a call with timeout_ms 3600000 is refused with INVALID_TOOL_INPUT and the
# command never runs.
# Observed: Bash {"command": "echo hi", "timeout_ms": 3600000} gets turn/toolResult `error`
# INVALID_TOOL_INPUT and no command/started.
# Recipe: Agent session in auto, Bash with timeout_ms 3600000, expect `ok` and the output.
@variant("edge-bash-timeout-hour-refused")
def bash_timeout_hour_refused() -> None:
    from reference_host import turns
    from reference_host.provider_client import ToolSpec

    bash = turns._SPECS["Bash"]
    properties = dict(bash.parameters["properties"])
    properties["timeout_ms"] = {**properties["timeout_ms"], "maximum": 3_600_000 - 1}
    spec = ToolSpec(bash.name, bash.description, {**bash.parameters, "properties": properties})
    patch(turns, "_SPECS", {**turns._SPECS, "Bash": spec})


CASES = [
    BrokenCase(
        "edge-expiry-strictly-after-deadline",
        "deadline",
        "approving_when_the_clock_shows_exactly_the_deadline",
        "P14",
        "expected the host to refuse",
    ),
    BrokenCase(
        "edge-deadline-from-whole-seconds",
        "deadline",
        "the_deadline_is_30_minutes_after",
        "R3.9",
        "ms after creation",
    ),
    BrokenCase(
        "edge-command-timeout-one-ms-late",
        "shell",
        "timeout_counts_from_the_commands_own_start",
        "C5",
        "no command/exited notification matched",
        slow=True,
    ),
    BrokenCase(
        "edge-output-cap-met-counts-as-passed",
        "shell",
        "exactly_at_the_announced_cap",
        "P20",
        "output of exactly the cap was marked truncated",
    ),
    BrokenCase(
        "edge-output-seq-from-one",
        "shell",
        "numbers_its_output_from_0",
        "P20",
        "each command numbers its own output from 0",
    ),
    BrokenCase(
        "edge-frame-limit-counts-newline",
        "protocol_errors",
        "exactly_at_the_frame_limit",
        "P2",
        "a request of exactly maxFrameBytes",
    ),
    BrokenCase(
        "edge-clock-max-refused",
        "protocol_errors",
        "edge_of_the_published_range and clock",
        "P4",
        "the host refused a request the schema allows",
    ),
    BrokenCase(
        "edge-string-length-in-bytes",
        "protocol_errors",
        "longest_length",
        "P4",
        "the host refused a request the schema allows",
    ),
    BrokenCase(
        "edge-read-offset-zero-based",
        "plan_tools",
        "reading_part_of_a_file",
        "P10",
        "after its Read call the model was not given",
    ),
    BrokenCase(
        "edge-grep-skips-unterminated-last-line",
        "plan_tools",
        "last_line_without_a_line_end",
        "P10",
        "after its Grep call the model was not given",
    ),
    BrokenCase(
        "edge-artifact-check-reads-recorded-size",
        "artifact_integrity",
        "extended_on_disk",
        "P13",
        "expected the host to refuse",
    ),
    BrokenCase(
        "edge-empty-artifact-unreadable",
        "artifact_integrity",
        "exact_bytes",
        "R3.2",
        "ARTIFACT_UNREADABLE",
    ),
    BrokenCase(
        "edge-timers-keyed-by-instant",
        "scheduled_plan",
        "due_at_the_same_time",
        "P29",
        "enabled tasks that came due, the host announced 1 run(s)",
    ),
    BrokenCase(
        "edge-request-id-zero-answered-null",
        "protocol_errors",
        "identifier_the_client_chose",
        "P1",
        "no answer carries the identifier 0",
    ),
    BrokenCase(
        "edge-bash-timeout-hour-refused",
        "plan_tools",
        "edge_of_the_tools_published",
        "P27",
        "INVALID_TOOL_INPUT",
    ),
]
