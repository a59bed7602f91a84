"""Broken hosts: a held-out set (what the host announces against what it does), written
from the contract alone."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any, BinaryIO
from weakref import WeakKeyDictionary

from hosts.registry import BrokenCase, patch, variant


# P2 (docs "Framing", Frame limit): `capabilities.maxFrameBytes` is the longest request line
# accepted, newline excluded; "a line of exactly that length is served; a longer one gets
# FRAME_TOO_LARGE".
# Bug: the reader's line buffer is sized to the announced limit and holds the newline too,
# so the longest line actually served is one byte shorter than announced.
# Observed: a valid request line of exactly maxFrameBytes bytes (padded inside a string
# param) is answered with FRAME_TOO_LARGE (id null) instead of its result; a line one byte
# shorter is served.
# Recipe: initialize; read maxFrameBytes; send a valid request whose line is exactly that
# many bytes; expect its result.
@variant("dd-frame-newline-counted")
def frame_newline_counted() -> None:
    from reference_host import server
    from reference_host.framing import DEFAULT_MAX_FRAME_BYTES, Frame, OversizedFrame

    def read_frames(stream: BinaryIO, max_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> Iterator[Frame]:
        while True:
            line = stream.readline(max_bytes)  # the buffer holds the line and its newline
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


# P20 / R7.3 (docs "Commands and shells", Output; protocol InitializeResult
# `capabilities.maxCommandOutputBytes`: "The total output, stdout and stderr together"):
# at most maxCommandOutputBytes bytes of a command's stdout and stderr together are
# streamed; past it nothing more is streamed and `truncated: true` is reported.
# Bug: each stream is capped on its own (a buffer per pipe), so a command that writes to
# both streams may stream up to twice the announced cap and report `truncated: false`.
# Recipe: Agent session (auto), the model calls Bash with a command that writes
# 3/4 of maxCommandOutputBytes to stdout and 3/4 to stderr; sum the bytes of the
# `command/output` texts: more than the cap, and `command/exited.truncated` is false.
@variant("dd-output-cap-per-stream")
def output_cap_per_stream() -> None:
    from reference_host import commands
    from reference_host.options import OUTPUT_CAP_BYTES

    class PerStreamCollector(commands._Collector):
        def __init__(self) -> None:
            super().__init__()
            self.per_stream: dict[object, int] = {}

        def keep(self, data: bytes) -> bytes:
            stream = asyncio.current_task()  # each pipe is pumped by a task of its own
            used = self.per_stream.get(stream, 0)
            room = max(OUTPUT_CAP_BYTES - used, 0)
            if len(data) > room:
                self.truncated = True
            part = data[:room]
            self.per_stream[stream] = used + len(part)
            self.kept += part
            return part

    patch(commands, "_Collector", PerStreamCollector)


# R7.3 / docs "Commands and shells": shell/list gives each shell's `path`, "the path must
# be the program that runs"; "Bash runs through the session's shell, or the persisted
# default ... command/started names the shell".
# Bug: commands are started through the system shell (`/bin/sh -c`, as shell=True does),
# whatever shell the session selected; command/started and command_audit still name the
# selected shell and its listed path.
# Recipe: shell/list; pick the shell of kind `bash`; session/create with that shellId (or
# shell/setDefault to it); the model calls Bash with `echo "${BASH_VERSION:-none}"` or a
# command that reports its process's executable: the output says `none` / dash, while
# command/started names the bash shell.
@variant("dd-spawn-system-sh")
def spawn_system_sh() -> None:
    from reference_host import commands
    from reference_host.shells import Shell

    original = commands._spawn

    async def _spawn(
        shell: Shell, command: str, cwd: str, command_id: str
    ) -> tuple[asyncio.subprocess.Process, list[int]]:
        return await original(replace(shell, path="/bin/sh"), command, cwd, command_id)

    patch(commands, "_spawn", _spawn, wraps=True)


# C5 (docs "Commands and shells"): every command is recorded in command_audit with "the
# shell's id and its path exactly as shell/list shows it (not a path a link resolves to)".
# Bug: shell/list shows each shell where it was found on PATH (/usr/bin/sh, a symlink to
# dash), but the audit records the program the link resolves to (/usr/bin/dash), thinking
# that more precise.
# Recipe: shell/list (note the default shell's path, a symlink on Debian-like systems);
# an Agent turn (auto) runs Bash in the default shell; read command_audit.shell_path: it
# differs from the path shell/list showed for command/started's shellId.
@variant("dd-audit-path-resolved")
def audit_path_resolved() -> None:
    from reference_host import shells
    from reference_host.commands import CommandResult
    from reference_host.turns import TurnRunner

    @cache
    def catalog() -> tuple[shells.Shell, ...]:
        found: list[shells.Shell] = []
        for name in shells._KNOWN:
            location = shutil.which(name)
            if location is not None:
                found.append(shells.Shell(name, name, location))
        return tuple(found)

    original = TurnRunner._audit

    async def _audit(self: TurnRunner, audit: dict[str, Any], result: CommandResult) -> None:
        resolved = str(Path(audit["shell_path"]).resolve())
        await original(self, {**audit, "shell_path": resolved}, result)

    patch(shells, "catalog", catalog)
    patch(TurnRunner, "_audit", _audit, wraps=True)


# Fault points (docs "Conformance mode" > Fault points; protocol InitializeResult
# `capabilities.faultInjection`: "Fault points conformance/fault/arm accepts"):
# `artifactFlush` armed means "flushing the artifact (fsync) fails" (R2.10, R2.12): the
# SubmitPlan fails with ARTIFACT_WRITE_FAILED and no approval is created.
# Bug: the host announces (and accepts arming) artifactFlush, but the flush step was never
# wired to the fault hook: the fault never fires and the submission succeeds.
# Recipe: initialize (faultInjection lists artifactFlush); conformance/fault/arm
# {"fault":"artifactFlush"} -> {}; a Plan turn calls SubmitPlan: its toolResult is ok, an
# approval is pending (expected: error ARTIFACT_WRITE_FAILED, no approval, turn goes on).
@variant("dd-flush-fault-unwired")
def flush_fault_unwired() -> None:
    from reference_host import approvals
    from reference_host.artifacts import Artifact, FaultCheck

    original: Callable[[str, bytes, FaultCheck], Artifact] = vars(approvals)["write_artifact"]

    def write_artifact(root: str, content: bytes, fault: FaultCheck) -> Artifact:
        def wired(point: str) -> bool:
            return point != "artifactFlush" and fault(point)

        return original(root, content, wired)

    patch(approvals, "write_artifact", write_artifact, wraps=True)


# P5 (docs "Framing": "Every error response carries error.data.code from
# schemas/error-codes.json and the numeric error.code the catalog lists for it"): the
# catalog gives PLAN_APPROVAL_TIMEOUT -32023 and APPROVAL_NOT_PENDING -32022.
# Bug: the host's table of JSON-RPC numbers groups the "this approval cannot be decided"
# refusals under one number, so PLAN_APPROVAL_TIMEOUT goes out as -32022.
# Recipe: a Plan turn submits a plan; conformance/clock/advance 1800000; approval/approve
# (or reject): error.data.code PLAN_APPROVAL_TIMEOUT with error.code -32022, not -32023.
@variant("dd-timeout-code-shared-number")
def timeout_code_shared_number() -> None:
    from pi_contract import error_catalog
    from reference_host.errors import HostError

    def jsonrpc_code(self: HostError) -> int:
        code = "APPROVAL_NOT_PENDING" if self.code == "PLAN_APPROVAL_TIMEOUT" else self.code
        return int(error_catalog()[code]["jsonrpcCode"])

    patch(HostError, "jsonrpc_code", property(jsonrpc_code))


# P9 (docs "Errors and tool results"): a refusal's `status` is the catalog's
# `toolResultStatus` for its code: `denied` for PATH_OUTSIDE_WORKSPACE (refused by policy
# before running anything).
# Bug: the host classifies a path outside the workspace as bad tool input and reports it
# with status `error` (code PATH_OUTSIDE_WORKSPACE unchanged).
# Recipe: Agent session (auto); the model calls Read {"path": "/etc/hostname"} or
# {"path": "../x"}: turn/toolResult has error.code PATH_OUTSIDE_WORKSPACE and status
# "error" (expected "denied").
@variant("dd-path-outside-status-error")
def path_outside_status_error() -> None:
    from reference_host import turns

    original: Callable[[str], str | None] = vars(turns)["tool_result_status"]

    def tool_result_status(code: str) -> str | None:
        return "error" if code == "PATH_OUTSIDE_WORKSPACE" else original(code)

    patch(turns, "tool_result_status", tool_result_status, wraps=True)


# R1.4 (docs "Planning": "What you offer follows the session's mode as it is when you send
# the request"; "EnterPlanMode in an Agent turn turns the running turn into a Plan turn:
# the next provider request offers exactly the Plan tools").
# Bug: the tool definitions are chosen once, from the mode the session had at the turn's
# first provider request, and reused for the rest of the turn. The host still gates calls
# by the current mode (SubmitPlan works after EnterPlanMode), but the model is offered the
# Agent tools (Write, Edit; no SubmitPlan) in the requests after EnterPlanMode.
# Recipe: Agent session; prompt; the model calls EnterPlanMode; inspect the next provider
# request's `tools`: Agent set (expected exactly the Plan set).
@variant("dd-tools-fixed-per-turn")
def tools_fixed_per_turn() -> None:
    from reference_host.provider_client import AssistantReply
    from reference_host.state import Mode
    from reference_host.storage import SessionRow
    from reference_host.turns import TurnRunner

    first_mode: WeakKeyDictionary[TurnRunner, dict[str, Mode]] = WeakKeyDictionary()
    original = TurnRunner._ask_model

    async def _ask_model(
        self: TurnRunner, session: SessionRow, turn_id: str, messages: list[dict[str, Any]]
    ) -> AssistantReply:
        mode = first_mode.setdefault(self, {}).setdefault(turn_id, session.mode)
        return await original(self, replace(session, mode=mode), turn_id, messages)

    patch(TurnRunner, "_ask_model", _ask_model, wraps=True)


# R4.7 (docs "Execution and restart": execution/updated's "turnId names the execution's
# turn (the turn/started of kind execution that names the execution): always once that
# turn has started (running, completed, and interrupted ...), and never another turn").
# Bug: when the execution ends, the host reads the approval row's `turn_id` (the Plan turn
# that submitted the plan) instead of its `execution_turn_id`, so execution/updated
# `completed` / `interrupted` names the Plan turn.
# Recipe: Plan turn submits; approve (auto); the execution turn (turn/started kind
# execution, turnId T) completes; execution/updated with executionState completed has
# turnId = the Plan turn's id, not T.
@variant("dd-execution-names-plan-turn")
def execution_names_plan_turn() -> None:
    from reference_host import state
    from reference_host.approvals import Approvals, approval_wire
    from reference_host.state import ExecutionState

    async def execution_finished(self: Approvals, approval_id: str, final: ExecutionState) -> None:
        row = await self._execution(approval_id)
        assert row.execution_state is not None
        done = replace(row, execution_state=state.advance_execution(row.execution_state, final))
        await self.host.storage.update_approval(done)
        self.host.set_activity(row.session_id, active_execution_id=None)
        self._notify_execution(done, row.turn_id)
        self.host.notify("approval/updated", {"approval": approval_wire(done)})

    patch(Approvals, "execution_finished", execution_finished)


# R5.1 / R4.5 (docs "Execution and restart": "Only the execution reads interrupted: its
# turn keeps its own outcome, so a cancelled execution turn ends cancelled in turn/ended
# and in turns.state"; the suite compares stored state with turn/ended).
# Bug: the host conflates the execution's state with its turn's: a cancelled execution
# turn is stored as `interrupted` in `turns.state`, while turn/ended says `cancelled`.
# Recipe: Plan turn submits; approve (ask); the execution turn calls Bash and waits on the
# permission question (or a gated command); session/cancel; turn/ended outcome cancelled,
# but the turns row of that turn reads `interrupted`.
@variant("dd-cancelled-execution-stored-interrupted")
def cancelled_execution_stored_interrupted() -> None:
    from reference_host.errors import HostError
    from reference_host.ports import TurnEnded
    from reference_host.state import ExecutionState
    from reference_host.storage import ApprovalRow
    from reference_host.turns import TurnRunner

    async def _end(
        self: TurnRunner,
        session_id: str,
        turn_id: str,
        approval: ApprovalRow | None,
        on_end: TurnEnded | None,
        outcome: str,
        error: HostError | None,
    ) -> None:
        host = self.host
        stored = "interrupted" if approval is not None and outcome == "cancelled" else outcome
        await host.storage.end_turn(turn_id, stored, host.clock.now_ms())
        if approval is not None:
            final: ExecutionState = "completed" if outcome == "completed" else "interrupted"
            await host.approvals.execution_finished(approval.id, final)
        if on_end is not None:
            await on_end(outcome, error)
        host.set_activity(session_id, active_turn_id=None)
        host.notify(
            "turn/ended",
            {
                "sessionId": session_id,
                "turnId": turn_id,
                "outcome": outcome,
                "error": error.to_data() if error else None,
            },
        )
        await host.publish_session(session_id)

    patch(TurnRunner, "_end", _end)


# R7.3 / P19 (docs "Commands and shells": command/exited's "signal is the number of the
# signal that ended the shell ... A command that timed out was ended by your signal, so
# its signal is never null"; exitCode may be null or 128 plus the signal).
# Bug: the host reports a signal death the way a shell reports `$?`: exitCode 128+N and
# signal null (in command/exited and in command_audit alike).
# Recipe: Agent session (auto); Bash {"command": "sleep 60", "timeout_ms": 1000};
# conformance/clock/advance 1000; command/exited has timedOut true, exitCode 137 and
# signal null (expected a signal number). Also `kill -9 $$` gives signal null.
@variant("dd-signal-as-exit-code")
def signal_as_exit_code() -> None:
    from reference_host import turns
    from reference_host.commands import CommandCancelledError, CommandResult, Notify

    original: Callable[..., Awaitable[CommandResult]] = vars(turns)["run_command"]

    def shell_status(result: CommandResult) -> CommandResult:
        if result.signal is None:
            return result
        return replace(result, exit_code=128 + result.signal, signal=None)

    async def run_command(*, notify: Notify, **kwargs: Any) -> CommandResult:
        def relay(method: str, params: dict[str, Any]) -> None:
            if method == "command/exited" and params["signal"] is not None:
                params = {**params, "exitCode": 128 + params["signal"], "signal": None}
            notify(method, params)

        try:
            result = await original(notify=relay, **kwargs)
        except CommandCancelledError as cancelled:
            cancelled.result = shell_status(cancelled.result)
            raise
        return shell_status(result)

    patch(turns, "run_command", run_command, wraps=True)


# R7.1 (error catalog, UNSUPPORTED_PROTOCOL_VERSION: "details.supported lists what the host
# speaks"; docs "The initialize handshake": "Any other value gets
# UNSUPPORTED_PROTOCOL_VERSION, with details.supported listing what you speak").
# Bug: the host's list of supported versions still carries the 0.4.14 baseline's protocol
# 8, which the handshake refuses: the refusal says supported [8, 9].
# Recipe: initialize {"protocolVersion": 7}: error details.supported == [8, 9]; then
# initialize {"protocolVersion": 8}: refused again with UNSUPPORTED_PROTOCOL_VERSION.
@variant("dd-supported-lists-v8")
def supported_lists_v8() -> None:
    from pi_contract import PROTOCOL_VERSION
    from reference_host.errors import HostError
    from reference_host.host import Host

    original = Host.initialize

    async def initialize(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        try:
            return await original(self, params)
        except HostError as error:
            if error.code != "UNSUPPORTED_PROTOCOL_VERSION":
                raise
            details = {**(error.details or {}), "supported": [8, PROTOCOL_VERSION]}
            raise HostError(error.code, error.message, details) from None

    patch(Host, "initialize", initialize, wraps=True)


# R7.3 (docs "Commands and shells": "shellId: null clears the session's own choice: from
# then on the session reads shellId: null (in the answer, in session/get and in
# sessions.shell_id) and its commands run in the default shell").
# Bug: the host resolves "null = the default" when it saves: sessions.shell_id gets the
# default shell's id of that moment, while the answer and session/updated say null. The
# session then reads that shell in session/get and keeps it after a shell/setDefault.
# Recipe: session/create with shellId "bash"; session/configure {"shellId": null}: answer
# shellId null; session/get shellId "sh" (the default), sessions.shell_id "sh"; then
# shell/setDefault bash and run Bash: command/started names sh, not the new default.
@variant("dd-null-shell-materialized")
def null_shell_materialized() -> None:
    from reference_host.host import Host, _require_shell
    from reference_host.state import ensure_idle_for

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        ensure_idle_for(self.activity_of(row.id), "configuration change")
        changes: dict[str, Any] = {}
        if "mode" in params:
            changes["mode"] = params["mode"]
        if "permissionMode" in params:
            changes["permission_mode"] = params["permissionMode"]
        if "provider" in params:
            changes["provider_base_url"] = params["provider"]["baseUrl"]
            changes["model"] = params["provider"]["model"]
        if "shellId" in params:
            if params["shellId"] is not None:
                _require_shell(params["shellId"])
            changes["shell_id"] = params["shellId"]
        updated = replace(row, **changes, updated_at=self.clock.now_ms())
        stored = updated
        if "shellId" in params and params["shellId"] is None:
            stored = replace(updated, shell_id=await self.default_shell_id())
        await self.storage.update_session(stored)
        wire = self.session_wire(updated)
        self.notify("session/updated", {"session": wire})
        return {"session": wire}

    patch(Host, "session_configure", session_configure)


# R7.4 / R7.8 (protocol InitializeResult: `storageSchemaVersion` is the "PRAGMA user_version
# of the host's database (10 for this contract)"; docs "The initialize handshake": "the
# result reports ... storageSchemaVersion (the database's user_version)").
# Bug: the host reads user_version once, when it opens the file (before migrating), and
# reports that: after migrating a v8 database to v10 the handshake says 8. (A new database
# it knows it creates at 10.)
# Recipe: seed DIR/host.db at user_version 8 (schemas/storage/v8.sql); start; initialize:
# storageSchemaVersion 8, while PRAGMA user_version reads 10.
@variant("dd-schema-version-as-found")
def schema_version_as_found() -> None:
    from pi_contract import STORAGE_SCHEMA_VERSION
    from reference_host.host import Host
    from reference_host.storage import Storage

    found: WeakKeyDictionary[Storage, int] = WeakKeyDictionary()
    original_check = Storage._check_version
    original_initialize = Host.initialize

    async def _check_version(self: Storage) -> None:
        found[self] = await self.user_version() or STORAGE_SCHEMA_VERSION
        await original_check(self)

    async def initialize(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await original_initialize(self, params)
        result["storageSchemaVersion"] = found.get(self.storage, result["storageSchemaVersion"])
        return result

    patch(Storage, "_check_version", _check_version, wraps=True)
    patch(Host, "initialize", initialize, wraps=True)


# P3 (docs "The command line": "--conformance switches on the test controls ... Without it
# your host must behave as in production and must not serve them"; docs "Conformance
# mode": "otherwise a call to them gets METHOD_NOT_FOUND"). capabilities.conformance is
# false and faultInjection empty without the flag.
# Bug: the conformance handlers are registered unconditionally; only the clock moves check
# that the clock is the manual one. Without --conformance the host announces
# conformance false yet answers conformance/clock/get and accepts conformance/fault/arm.
# Recipe: start the host without --conformance; initialize (conformance false);
# conformance/clock/get -> {"now": ...} and conformance/fault/arm
# {"fault":"artifactWrite"} -> {} (expected METHOD_NOT_FOUND for both).
@variant("dd-conformance-methods-always")
def conformance_methods_always() -> None:
    from reference_host.host import Host
    from reference_host.rpc import Handler

    original = Host.handlers

    def handlers(self: Host) -> dict[str, Handler]:
        return original(self) | {
            "conformance/clock/get": self.clock_get,
            "conformance/clock/set": self.clock_set,
            "conformance/clock/advance": self.clock_advance,
            "conformance/fault/arm": self.fault_arm,
        }

    patch(Host, "handlers", handlers, wraps=True)


CASES = [
    BrokenCase(
        "dd-frame-newline-counted",
        "protocol_errors",
        "exactly_at_the_frame_limit",
        "P2",
        "a request of exactly maxFrameBytes",
    ),
    BrokenCase(
        "dd-output-cap-per-stream",
        "shell",
        "both_streams_count_towards_one_cap",
        "P20",
        "the output was not marked truncated",
    ),
    BrokenCase(
        "dd-spawn-system-sh",
        "shell",
        "default_shell_when_that_is_the_bash_shell",
        "R7.3",
        "the catalog says bash is",
    ),
    BrokenCase(
        "dd-audit-path-resolved",
        "shell",
        "a_command_that_exits_is_recorded",
        "C5",
        "the audit row differs from the command",
    ),
    BrokenCase(
        "dd-flush-fault-unwired",
        "artifact_integrity",
        "a_failed_flush_creates_no_approval",
        "R2.10",
        "the SubmitPlan call ran, expected ARTIFACT_WRITE_FAILED",
    ),
    BrokenCase(
        "dd-timeout-code-shared-number",
        "deadline",
        "approving_when_the_clock_shows_exactly_the_deadline",
        "P5",
        "broke the protocol v9 contract",
    ),
    BrokenCase(
        "dd-path-outside-status-error",
        "isolation",
        "by_a_path_climbing_out_of_the_project",
        "P5",
        "broke the protocol v9 contract",
    ),
    BrokenCase(
        "dd-tools-fixed-per-turn",
        "plan_tools",
        "entering_plan_mode_during_an_agent_turn_turns_it",
        "P10",
        "after EnterPlanMode offered",
    ),
    BrokenCase(
        "dd-execution-names-plan-turn",
        "approval",
        "approving_with_auto_switches",
        "R4.7",
        "execution/updated reports execution",
    ),
    BrokenCase(
        "dd-cancelled-execution-stored-interrupted",
        "execution",
        "an_execution_whose_turn_is_cancelled_is_interrupted",
        "R5.1",
        "but its turns row reads interrupted",
    ),
    BrokenCase(
        "dd-signal-as-exit-code",
        "shell",
        "a_shell_ended_by_a_signal_reports",
        "R7.3",
        "was reported with signal None",
    ),
    BrokenCase(
        "dd-supported-lists-v8",
        "handshake",
        "speaking_the_previous_version",
        "R7.1",
        "details.supported lists [8, 9]",
    ),
    BrokenCase(
        "dd-null-shell-materialized",
        "shell",
        "shell_of_its_own_is_cleared",
        "R7.3",
        "the session still names",
    ),
    BrokenCase(
        "dd-schema-version-as-found",
        "migration",
        "a_v8_database_is_upgraded",
        "R7.4",
        "the host reports storage schema version 8",
    ),
    BrokenCase(
        "dd-conformance-methods-always",
        "protocol_errors",
        "outside_conformance_mode_the_conformance_controls",
        "P3",
        "expected the host to refuse",
    ),
]
