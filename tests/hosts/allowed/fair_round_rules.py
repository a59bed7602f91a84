"""Allowed variations around the rules this round added to the contract (request ids a
host cannot hold, a configure naming the values a session has, Read/Glob/Grep layout, a
command's output and exit, a late cancel, an expired approval's decidedAt, a tool path
holding NUL), written from the contract alone."""

from __future__ import annotations

import asyncio
import contextlib
import unicodedata
import weakref
from dataclasses import replace
from pathlib import Path
from typing import Any

from hosts.registry import (
    AllowedCase,
    Send,
    patch,
    relay_notifications,
    rewrite_notifications,
    variant,
)
from reference_host import commands, turns
from reference_host import host as host_module
from reference_host.approvals import Approvals, approval_wire
from reference_host.errors import HostError
from reference_host.jsontext import JsonTextError, loads
from reference_host.provider_client import AssistantReply, ToolCall
from reference_host.rpc import Dispatcher
from reference_host.state import Activity, is_expired
from reference_host.storage import SessionRow
from reference_host.tools import files
from reference_host.tools.base import ToolContext, validate_args
from reference_host.tools.budget import Budget, run_within
from reference_host.turns import TurnRunner
from reference_host.workspace import require_root

DOUBLE_EXACT = 2**53 - 1
INT64 = (-(2**63), 2**63 - 1)

# -- request ids a host cannot hold -------------------------------------------------------


def _refuse_ids_outside(low: int, high: int, code: str) -> None:
    """A host whose integer ids hold only ``low..high``: any other integer id is refused
    with ``code`` and ``"id": null``, never answered under a rounded id."""
    handle = Dispatcher.handle

    async def handling(self: Dispatcher, frame: Any) -> None:
        if isinstance(frame, bytes) and frame.strip():
            message: Any = None
            with contextlib.suppress(UnicodeDecodeError, JsonTextError, RecursionError):
                message = loads(frame.decode("utf-8"))
            if isinstance(message, dict):
                request_id = message.get("id")
                if (
                    isinstance(request_id, int)
                    and not isinstance(request_id, bool)
                    and not low <= request_id <= high
                ):
                    error = HostError(code, "this host cannot hold that integer id exactly")
                    self._send(
                        {
                            "jsonrpc": "2.0",
                            "id": None,
                            "error": {
                                "code": error.jsonrpc_code,
                                "message": error.message,
                                "data": error.to_data(),
                            },
                        }
                    )
                    return
        await handle(self, frame)

    patch(Dispatcher, "handle", handling, wraps=True)


@variant("fr-ids-as-doubles-parse-error")
def _ids_as_doubles_parse_error() -> None:
    # Framing, Request ids: "An integer id you cannot hold exactly (one past 2^53 - 1 when
    # you read JSON numbers as doubles, ...) you refuse with `PARSE_ERROR` or
    # `INVALID_REQUEST` and `"id": null`". This host reads numbers as doubles: every
    # integer id beyond +-(2^53 - 1) gets PARSE_ERROR with id null.
    _refuse_ids_outside(-DOUBLE_EXACT, DOUBLE_EXACT, "PARSE_ERROR")


@variant("fr-ids-as-doubles-invalid-request")
def _ids_as_doubles_invalid_request() -> None:
    # The same sentence, the other code it allows: ids past +-(2^53 - 1) get INVALID_REQUEST.
    _refuse_ids_outside(-DOUBLE_EXACT, DOUBLE_EXACT, "INVALID_REQUEST")


@variant("fr-ids-int64-invalid-request")
def _ids_int64_invalid_request() -> None:
    # The same sentence: a host holding ids as 64-bit integers answers 2^53 + 1 under
    # exactly that id, and refuses an id past 64 bits (20 digits and more above 2^63 - 1)
    # with INVALID_REQUEST and id null ("never left unanswered").
    _refuse_ids_outside(*INT64, "INVALID_REQUEST")


# -- a configure naming the values a session has; busy and pending -----------------------


@variant("fr-busy-before-pending")
def _busy_before_pending() -> None:
    # What the suite does not require: "which rule answers a request that breaks two the
    # contract does not order: ... a prompt or change while the Plan turn that submitted a
    # plan has not yet ended (`SESSION_BUSY` or `APPROVAL_PENDING`)". This host answers
    # SESSION_BUSY while a turn is active, also when that turn has a plan pending.
    ensure_idle_for = vars(host_module)["ensure_idle_for"]

    def busy_first(activity: Activity, what: str) -> None:
        if activity.active_turn_id is not None and activity.pending_approval_id is not None:
            raise HostError(
                "SESSION_BUSY",
                f"{what} refused: the session has an active turn",
                {"turnId": activity.active_turn_id, "executionId": activity.active_execution_id},
            )
        ensure_idle_for(activity, what)

    patch(host_module, "ensure_idle_for", busy_first, wraps=True)


PLAN_TURN_END_DELAY_S = 0.05


def plan_turn_ends_slowly() -> None:
    """The Plan turn that submitted a plan records its end 50 ms later: the session stays
    busy with that turn, its plan already pending, for long enough that a client's next
    request surely arrives in between."""
    end = turns.TurnRunner._end

    async def slowly(
        self: turns.TurnRunner,
        session_id: str,
        turn_id: str,
        approval: Any,
        on_end: Any,
        outcome: str,
        error: HostError | None,
    ) -> None:
        activity = self.host.activity_of(session_id)
        if activity.pending_approval_id is not None and activity.active_turn_id == turn_id:
            await asyncio.sleep(PLAN_TURN_END_DELAY_S)
        await end(self, session_id, turn_id, approval, on_end, outcome, error)

    patch(turns.TurnRunner, "_end", slowly, wraps=True)


@variant("fr-busy-first-while-the-plan-turn-ends-slowly")
def _busy_first_while_the_plan_turn_ends_slowly() -> None:
    # The same freedom as fr-busy-before-pending, reached every time: the submitting Plan
    # turn takes 50 ms to end (how long a turn takes to end is the host's), and a prompt or
    # change in that time gets SESSION_BUSY.
    _busy_before_pending()
    plan_turn_ends_slowly()


@variant("fr-configure-announced-twice")
def _configure_announced_twice() -> None:
    # A configure "is announced with `session/updated` before its answer"; what the suite
    # does not require: "announcing a session or an approval again when nothing changed
    # (`session/updated` ... carry the record as it now is, so a repeat says nothing new)".
    # This host sends the configured session's `session/updated` twice, both before the
    # answer, for every accepted configure (the one naming values it has included).
    configure = host_module.Host.session_configure

    async def configure_twice(self: host_module.Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await configure(self, params)
        self.notify("session/updated", {"session": result["session"]})
        return result

    patch(host_module.Host, "session_configure", configure_twice, wraps=True)


# -- a plan reached through another session ---------------------------------------------


@variant("fr-approval-looked-up-first")
def _approval_looked_up_first() -> None:
    # Errors: "a request that names an approval as well (`approval/get`, `approval/approve`,
    # `approval/reject`, `artifact/read`) may answer `APPROVAL_NOT_FOUND` instead, since no
    # approval belongs to a session you do not have". This host looks the approval up
    # first: one that is not the named session's is APPROVAL_NOT_FOUND, also when that
    # session does not exist.
    async def require(self: Approvals, session_id: str, approval_id: str) -> Any:
        row = await self.host.storage.get_approval(approval_id)
        if row is None or row.session_id != session_id:
            raise HostError(
                "APPROVAL_NOT_FOUND", f"session {session_id!r} has no approval {approval_id!r}"
            )
        await self.host.require_session(session_id)
        return row

    patch(Approvals, "require", require)


# -- an expired approval's decidedAt --------------------------------------------------------


def _expire_dated(decided_at: Any) -> None:
    """Approvals.expire recording ``decided_at(row, now)`` as the expired approval's time."""

    async def expire(self: Approvals, approval_id: str) -> None:
        host = self.host
        row = await host.storage.get_approval(approval_id)
        if row is None or row.status != "pending":
            return
        now = host.clock.now_ms()
        if not is_expired(row.expires_at, now):
            return
        expired = replace(
            row,
            status="expired",
            status_code="PLAN_APPROVAL_TIMEOUT",
            decided_at=decided_at(row.expires_at, now),
        )
        await host.storage.update_approval(expired)
        host.set_activity(row.session_id, pending_approval_id=None)
        host.notify("approval/updated", {"approval": approval_wire(expired)})
        await host.publish_session(row.session_id)

    patch(Approvals, "expire", expire)


@variant("fr-expired-undated")
def _expired_undated() -> None:
    # What the suite does not require: "the `decidedAt` of an expired approval: null (an
    # expiry is no decision), or a time at or after its `expiresAt`". This host records
    # none: an expired approval reads `decidedAt: null`, on the wire and in storage.
    _expire_dated(lambda _due, _now: None)


@variant("fr-expired-dated-at-deadline")
def _expired_dated_at_deadline() -> None:
    # The same sentence ("its own time or the clock the move that fired it ended on") and
    # Ordering ("A timer the move jumped past may record its own time"): this host dates
    # an expiry at its `expiresAt`, also when the clock jumped past it.
    _expire_dated(lambda due, _now: due)


# -- a cancel as the model's last answer arrives -------------------------------------------

_FINISHING: weakref.WeakKeyDictionary[TurnRunner, set[asyncio.Task[Any]]] = (
    weakref.WeakKeyDictionary()
)


@variant("fr-cancel-too-late-once-answered")
def _cancel_too_late_once_answered() -> None:
    # What the suite does not require: "whether a cancel that arrives once the turn's work
    # is done but before its `turn/ended` still cancels it (answer its id; it ends
    # `cancelled`) or comes too late (answer `null` once the turn has ended as it
    # finished)". This host counts a turn's work done as soon as the model's last answer
    # (one without tool calls) has arrived: a cancel from then on waits for the turn to end
    # `completed` and answers `turnId: null`.
    ask_model = TurnRunner._ask_model
    cancel = TurnRunner.cancel

    async def asking(
        self: TurnRunner, session: SessionRow, turn_id: str, messages: list[dict[str, Any]]
    ) -> AssistantReply:
        reply = await ask_model(self, session, turn_id, messages)
        this = asyncio.current_task()
        if not reply.tool_calls and this is not None:
            finishing = _FINISHING.setdefault(self, set())
            finishing.add(this)
            this.add_done_callback(finishing.discard)
        return reply

    async def cancelling(self: TurnRunner, session_id: str) -> str | None:
        task = self.tasks.get(session_id)
        if task is not None and not task.done() and task in _FINISHING.get(self, set()):
            with contextlib.suppress(BaseException):
                await asyncio.shield(task)
            return None
        return await cancel(self, session_id)

    patch(TurnRunner, "_ask_model", asking, wraps=True)
    patch(TurnRunner, "cancel", cancelling, wraps=True)


# -- an execution turn's ids and the notifications around it -------------------------------


@variant("fr-no-queued-notification")
def _no_queued_notification() -> None:
    # Execution: "a notification for `queued` is optional, since the approve result
    # already says `queued`"; the list of freedoms: "a `queued` notification for an
    # execution". This host sends no `execution/updated` for `queued`.
    def rewrite(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        if method == "execution/updated" and params["executionState"] == "queued":
            return None
        return params

    rewrite_notifications(rewrite)


@variant("fr-session-updated-before-turn-started")
def _session_updated_before_turn_started() -> None:
    # Ordering names no order between a turn's `turn/started` and the `session/updated`
    # that shows the turn active ("the order of notifications and responses where
    # Ordering names none" is the host's). This host announces the session first.
    # A turn/started waits at most for the rest of the event loop's pass that sent it, so
    # none is held across a restart or past a notification another host variant holds.
    held: dict[str, tuple[str, dict[str, Any]]] = {}

    def relay(send: Send, method: str, params: dict[str, Any]) -> None:
        if method == "turn/started":
            session = str(params["sessionId"])
            held[session] = (method, params)

            def flush() -> None:
                waiting = held.pop(session, None)
                if waiting is not None:
                    send(*waiting)

            asyncio.get_running_loop().call_soon(flush)
            return
        session_id = (
            str(params["session"]["sessionId"])
            if method == "session/updated"
            else str(params.get("sessionId"))
        )
        waiting = held.pop(session_id, None)
        send(method, params)
        if waiting is not None:
            send(*waiting)

    relay_notifications(relay)


# -- a tool path holding NUL -----------------------------------------------------------


@variant("fr-input-checked-before-gate")
def _input_checked_before_gate() -> None:
    # P27: "a path holding a NUL character, which no file name can hold) gets
    # `INVALID_TOOL_INPUT`"; what the suite does not require: "inside a tool call, the mode
    # gate, the input check and the permission question (a Write in Plan with bad
    # arguments, an unattended Bash with bad input)". This host checks a Read, Write or
    # Edit call's input (its schema, and a NUL in its path) before the mode gate and the
    # permission question: a Write in Plan with a NUL path is INVALID_TOOL_INPUT, not
    # TOOL_DENIED, and no question is asked for it. (In a session without a project the
    # reference order stays: WORKSPACE_REQUIRED "whatever path they are given".)
    run_call = TurnRunner._run_call

    async def checked(
        self: TurnRunner, session: SessionRow, turn_id: str, call: ToolCall, unattended: bool
    ) -> Any:
        if call.name in ("Read", "Write", "Edit") and session.workspace_root is not None:
            try:
                args = validate_args(turns._SPECS[call.name], turns._arguments(call))
                if "\0" in str(args["path"]):
                    raise HostError(
                        "INVALID_TOOL_INPUT", "path contains a NUL character", {"tool": call.name}
                    )
            except HostError as error:
                return turns._failure(error)
        return await run_call(self, session, turn_id, call, unattended)

    patch(TurnRunner, "_run_call", checked, wraps=True)


# -- Read layout ----------------------------------------------------------------------


@variant("fr-read-numbered-lines")
def _read_numbered_lines() -> None:
    # Tools work (P10): Read gives "the file's text as stored ... (a line number or other
    # layout of your own around each line is fine)". This host puts a right-aligned line
    # number and a tab before every line (`cat -n`), numbered from the first line given
    # (`offset`, or 1); each line keeps its own line end, the BOM stays after the number of
    # line 1, and a last line without a line end gets none.
    read = files.Read.run

    async def numbered(self: files.Read, ctx: ToolContext, args: dict[str, Any]) -> str:
        text = await read(self, ctx, args)
        first = args.get("offset") or 1
        lines = files._split_lines(text)
        return "".join(f"{first + n:>6}\t{line}" for n, line in enumerate(lines))

    patch(files.Read, "run", numbered, wraps=True)


# -- Glob layout and order ----------------------------------------------------------------


def _glob_matches(ctx: ToolContext, args: dict[str, Any]) -> Any:
    """The workspace-relative paths Glob matches (as the reference finds them)."""
    args = validate_args(files.Glob.spec, args)
    root = require_root(ctx.workspace_root)
    parts = files._glob_parts(args["pattern"])

    def glob(budget: Budget) -> list[str]:
        matches = []
        for relative, _ in files._workspace_files(root, budget):
            budget.check()
            if files._glob_match(parts, relative.split("/")):
                matches.append(relative)
        return matches

    return run_within(Budget("Glob", files.GLOB_BUDGET_S), glob)


@variant("fr-glob-folded-order")
def _glob_folded_order() -> None:
    # P10: Glob "gives the workspace-relative paths of the files that match, and only
    # those, each named as it is on disk"; no order is published. This host lists them
    # by a human sort key (NFC-normalised and case-folded), last first, each name still
    # exactly as on disk (a decomposed accent stays decomposed).
    async def glob(self: files.Glob, ctx: ToolContext, args: dict[str, Any]) -> str:
        matches: list[str] = await _glob_matches(ctx, args)

        def key(path: str) -> tuple[str, str]:
            return unicodedata.normalize("NFC", path).casefold(), path

        matches.sort(key=key, reverse=True)
        return "\n".join(matches) if matches else files.NO_MATCHES

    patch(files.Glob, "run", glob)


@variant("fr-glob-counted-listing")
def _glob_counted_listing() -> None:
    # P10 fixes which paths Glob gives, not how its result is laid out. This host heads
    # the list with a count line and says "No files found." when nothing matches; each
    # path stands on a line of its own, as on disk.
    async def glob(self: files.Glob, ctx: ToolContext, args: dict[str, Any]) -> str:
        matches: list[str] = await _glob_matches(ctx, args)
        if not matches:
            return "No files found."
        noun = "file" if len(matches) == 1 else "files"
        return f"{len(matches)} matching {noun}:\n" + "\n".join(matches)

    patch(files.Glob, "run", glob)


# -- Grep layout, path form and order ---------------------------------------------------


def _grep_groups(
    root: Path, compiled: Any, parts: list[str] | None, budget: Budget
) -> tuple[list[tuple[str, list[tuple[int, str]]]], bool]:
    """(relative path, [(line number, line)]) per matching file, as the reference
    searches (same cap), and whether the cap was reached."""
    groups: list[tuple[str, list[tuple[int, str]]]] = []
    count = 0
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
        found: list[tuple[int, str]] = []
        for number, line in enumerate(text.split("\n"), start=1):
            line = line.removesuffix("\r")
            if not files._search(compiled, line, budget):
                continue
            if count == files.GREP_MAX_MATCHES:
                if found:
                    groups.append((relative, found))
                return groups, True
            found.append((number, line))
            count += 1
        if found:
            groups.append((relative, found))
    return groups, False


_CAPPED = "[results capped; narrow the pattern or glob]"


@variant("fr-grep-heading-absolute")
def _grep_heading_absolute() -> None:
    # P10: Grep "gives each matching file's path with the matching line"; what the suite
    # does not require: "the path form Grep reports for a matching file". This host gives
    # each file's absolute path as a heading, then its matching lines as `number: line`,
    # a blank line between files (ripgrep's --heading layout).
    def grep(root: Path, compiled: Any, parts: list[str] | None, budget: Budget) -> str:
        groups, capped = _grep_groups(root, compiled, parts, budget)
        if not groups:
            return "No matches found."
        blocks = [
            "\n".join([str(root / relative), *(f"{n}: {line}" for n, line in found)])
            for relative, found in groups
        ]
        return "\n\n".join(blocks) + (f"\n\n{_CAPPED}" if capped else "")

    patch(files.Grep, "_grep", staticmethod(grep))


@variant("fr-grep-dotted-unnumbered-reversed")
def _grep_dotted_unnumbered_reversed() -> None:
    # P10 as above: the path form is the host's ("./" before the workspace-relative
    # path), no line number is asked for ("path with the matching line"), and no order of
    # files is published. This host gives `./path: line`, the files last first.
    def grep(root: Path, compiled: Any, parts: list[str] | None, budget: Budget) -> str:
        groups, capped = _grep_groups(root, compiled, parts, budget)
        if not groups:
            return "No matches found."
        lines = [
            f"./{relative}: {line}" for relative, found in reversed(groups) for _, line in found
        ]
        return "\n".join(lines) + (f"\n{_CAPPED}" if capped else "")

    patch(files.Grep, "_grep", staticmethod(grep))


# -- a command's output and exit ----------------------------------------------------------


@variant("fr-bash-status-first")
def _bash_status_first() -> None:
    # Commands: output is "given to the model, as the command wrote it"; the text the
    # host puts beside it is not fixed. This host's Bash result starts with a status line
    # (`exit status: 0`, `killed by signal 9`, ...), then the output between two marker
    # lines.
    def summary(self: commands.CommandResult) -> str:
        if self.timed_out:
            status = "timed out (the command and its children were ended)"
        elif self.cancelled:
            status = "cancelled"
        elif self.signal is not None:
            status = f"killed by signal {self.signal}"
        else:
            status = f"exit status: {self.exit_code}"
        return f"{status}\n--- output ---\n{self.output}\n--- end of output ---"

    patch(commands.CommandResult, "summary", summary)


@variant("fr-signal-exit-code-128")
def _signal_exit_code_128() -> None:
    # What the suite does not require: "`exitCode` of a command a signal ended (null or
    # 128 plus the signal), wherever the contract does not fix it above"; Commands: a
    # timed-out command's "`exitCode` may be null or 128 plus the signal". This host
    # reports 128 plus the signal (in `command/exited` and `command_audit` alike); a shell
    # that exited on its own keeps its status and `signal: null`.
    # A subclass, not a function in the class's place: other variants of a composite
    # still find the class's methods (its summary) where they look for them.
    class Ended(commands.CommandResult):
        def __init__(self, **fields: Any) -> None:
            if fields.get("signal") is not None and fields.get("exit_code") is None:
                fields["exit_code"] = 128 + int(fields["signal"])
            super().__init__(**fields)

    patch(commands, "CommandResult", Ended, wraps=True)


@variant("fr-output-pieces-per-line")
def _output_pieces_per_line() -> None:
    # What the suite does not require: "where its output is cut into `command/output`
    # pieces". This host cuts each piece after every line end and every NUL character
    # (never inside a character), numbering the pieces by `seq` from 0 without a gap.
    run_command = vars(turns)["run_command"]

    async def per_line(**kw: Any) -> commands.CommandResult:
        notify = kw["notify"]
        seq = 0

        def relay(method: str, params: dict[str, Any]) -> None:
            nonlocal seq
            if method != "command/output":
                notify(method, params)
                return
            text: str = params["text"]
            pieces: list[str] = []
            start = 0
            for index, char in enumerate(text):
                if char in "\n\0":
                    pieces.append(text[start : index + 1])
                    start = index + 1
            if start < len(text):
                pieces.append(text[start:])
            for piece in pieces:
                notify(method, {**params, "seq": seq, "text": piece})
                seq += 1

        result: commands.CommandResult = await run_command(**{**kw, "notify": relay})
        return result

    patch(turns, "run_command", per_line, wraps=True)


CASES = [
    AllowedCase(
        "fr-ids-as-doubles-parse-error",
        "protocol_errors,handshake",
        why="an integer id past 2^53 - 1 refused with PARSE_ERROR and id null",
    ),
    AllowedCase(
        "fr-ids-as-doubles-invalid-request",
        "protocol_errors,handshake",
        why="an integer id past 2^53 - 1 refused with INVALID_REQUEST and id null",
    ),
    AllowedCase(
        "fr-ids-int64-invalid-request",
        "protocol_errors,handshake",
        why="ids held as 64-bit integers; one past 64 bits refused with INVALID_REQUEST",
    ),
    AllowedCase(
        "fr-busy-before-pending",
        "sessions,turn_boundaries,submit_plan,approval",
        why="SESSION_BUSY rather than APPROVAL_PENDING while the submitting turn runs",
    ),
    AllowedCase(
        "fr-busy-first-while-the-plan-turn-ends-slowly",
        "turn_boundaries,submit_plan,approval",
        why="SESSION_BUSY while the submitting Plan turn, slow to end, is still ending",
    ),
    AllowedCase(
        "fr-configure-announced-twice",
        "sessions,turn_boundaries",
        why="a configure's session/updated repeated before its answer",
    ),
    AllowedCase(
        "fr-approval-looked-up-first",
        "isolation,approval,artifact_integrity",
        why="APPROVAL_NOT_FOUND for another session's approval, the session unknown too",
    ),
    AllowedCase(
        "fr-expired-undated",
        "deadline,approval,restart_interruption",
        why="an expired approval's decidedAt is null",
    ),
    AllowedCase(
        "fr-expired-dated-at-deadline",
        "deadline,approval",
        why="an expired approval's decidedAt is its expiresAt",
    ),
    AllowedCase(
        "fr-cancel-too-late-once-answered",
        "turn_boundaries,sessions,execution",
        why="a cancel after the model's last answer comes too late (null; turn completes)",
    ),
    AllowedCase(
        "fr-no-queued-notification",
        "execution,approval",
        why="no execution/updated for queued",
    ),
    AllowedCase(
        "fr-session-updated-before-turn-started",
        "sessions,execution,turn_boundaries",
        why="session/updated showing the new turn comes before its turn/started",
    ),
    AllowedCase(
        "fr-input-checked-before-gate",
        "plan_tools,isolation",
        why="a Read/Write/Edit input (NUL path) checked before the mode gate and question",
    ),
    AllowedCase(
        "fr-read-numbered-lines",
        "plan_tools,isolation",
        why="Read puts a line number and a tab before each line",
    ),
    AllowedCase(
        "fr-glob-folded-order",
        "plan_tools,isolation",
        why="Glob's paths in a folded, descending order, names as on disk",
    ),
    AllowedCase(
        "fr-glob-counted-listing",
        "plan_tools,isolation",
        why="Glob's list headed by a count line; its own no-match text",
    ),
    AllowedCase(
        "fr-grep-heading-absolute",
        "plan_tools,isolation",
        why="Grep gives absolute paths as headings, then `n: line`",
    ),
    AllowedCase(
        "fr-grep-dotted-unnumbered-reversed",
        "plan_tools,isolation",
        why="Grep gives `./path: line`, no line numbers, files last first",
    ),
    AllowedCase(
        "fr-bash-status-first",
        "shell,plan_tools",
        why="Bash result: a status line first, the output between marker lines",
    ),
    AllowedCase(
        "fr-signal-exit-code-128",
        "shell,turn_boundaries",
        why="exitCode 128 plus the signal for a command a signal ended",
    ),
    AllowedCase(
        "fr-output-pieces-per-line",
        "shell",
        why="command/output pieces cut after every line end and NUL",
    ),
]
