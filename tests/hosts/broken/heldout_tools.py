"""Broken hosts: a third held-out set (the model-facing tools, commands, paths and
cancellation), written from the contract alone before the suite's checks were read. Six
of these twelve went uncaught until the scenarios their cases name were added."""

from __future__ import annotations

import asyncio
import os
import stat
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from hosts.registry import BrokenCase, patch, variant
from reference_host import commands, turns
from reference_host.errors import HostError
from reference_host.storage import Storage
from reference_host.tools import files
from reference_host.tools.budget import Budget
from reference_host.tools.files import Edit, Glob, Grep
from reference_host.turns import CallOutcome, TurnRunner, _failure

# -- file tools ---------------------------------------------------------------------------


@variant("grep-smart-case")
def _grep_smart_case() -> None:
    # Grep behaves like `rg --smart-case`: a pattern without an upper-case letter is
    # searched case-insensitively, so "todo" also reports a file that holds only "TODO".
    import regex

    original = files._search
    folded: dict[Any, Any] = {}

    def search(compiled: Any, line: str, budget: Budget) -> bool:
        if compiled.pattern == compiled.pattern.lower():
            if compiled not in folded:
                folded[compiled] = regex.compile(compiled.pattern, compiled.flags | regex.I)
            compiled = folded[compiled]
        return bool(original(compiled, line, budget))

    patch(files, "_search", search)


@variant("search-follows-dir-links")
def _search_follows_dir_links() -> None:
    # Glob and Grep walk the workspace with os.walk(followlinks=True) and take every
    # regular file found under the root's path: a symlinked folder that leads out of the
    # workspace is listed and searched as if it were part of it.
    def workspace_files(root: Path, budget: Budget) -> list[tuple[str, Path]]:
        found: list[tuple[str, Path]] = []
        for directory, dirnames, filenames in os.walk(root, followlinks=True):
            budget.check()
            dirnames[:] = [name for name in dirnames if name != ".git"]
            base = Path(directory)
            for name in filenames:
                budget.check()
                path = base / name
                try:
                    mode = path.stat().st_mode
                except OSError:
                    continue
                if stat.S_ISREG(mode):
                    found.append((path.relative_to(root).as_posix(), path))
        found.sort()
        return found

    patch(files, "_workspace_files", workspace_files)


@variant("edit-normalises-crlf")
def _edit_normalises_crlf() -> None:
    # Edit opens the file in text mode (universal newlines) and writes the result back:
    # a file with CRLF line endings comes back with LF everywhere, not only where the
    # replacement went.
    def edit(root: Path, relative: str, old: str, new: str, replace_all: bool) -> str:
        path = files.resolve_inside(root, relative, must_exist=True)
        files._require_regular(path, relative)
        try:
            text = path.read_text(encoding="utf-8")  # universal newlines: CRLF -> LF
        except OSError as exc:
            raise files._io_error(relative, exc) from exc
        except UnicodeDecodeError as exc:
            raise HostError(
                "INVALID_TOOL_INPUT", f"{relative} is not valid UTF-8", {"path": relative}
            ) from exc
        count = text.count(old)
        if count == 0:
            raise HostError("EDIT_NO_MATCH", f"Edit: old_string not found in {relative}")
        if count > 1 and not replace_all:
            raise HostError("INVALID_TOOL_INPUT", f"Edit: old_string occurs {count} times")
        files._write_exact(root, relative, text.replace(old, new).encode("utf-8"))
        return f"Replaced {count} occurrence(s) in {relative}"

    patch(Edit, "_edit", staticmethod(edit))


@variant("edit-missing-file-no-match")
def _edit_missing_file_no_match() -> None:
    # Edit reads a file that does not exist as empty text, so old_string is "not found":
    # EDIT_NO_MATCH instead of FILE_NOT_FOUND (Read still says FILE_NOT_FOUND).
    original = Edit._edit

    def edit(root: Path, relative: str, old: str, new: str, replace_all: bool) -> str:
        try:
            return str(original(root, relative, old, new, replace_all))
        except HostError as error:
            if error.code != "FILE_NOT_FOUND":
                raise
            raise HostError(
                "EDIT_NO_MATCH", f"Edit: old_string not found in {relative}", {"path": relative}
            ) from error

    patch(Edit, "_edit", staticmethod(edit))


@variant("no-project-search-empty")
def _no_project_search_empty() -> None:
    # Without a project there are no files, so a search finds nothing: Glob and Grep answer
    # ok with "(no matches)" instead of refusing with WORKSPACE_REQUIRED (Read, Write and
    # Edit still refuse).
    for tool in (Glob, Grep):
        original = tool.run

        async def run(self: Any, ctx: Any, args: dict[str, Any], _original: Any = original) -> str:
            if ctx.workspace_root is None:
                files.validate_args(self.spec, args)
                return files.NO_MATCHES
            return str(await _original(self, ctx, args))

        patch(tool, "run", run)


# -- commands -----------------------------------------------------------------------------


@variant("utf8-split-across-reads")
def _utf8_split_across_reads() -> None:
    # Every read from the pipe is decoded on its own: a character whose bytes straddle two
    # reads is shown as replacement characters in two command/output chunks.
    patch(commands, "_utf8_boundary", lambda data: len(data))


@variant("cap-per-stream")
def _cap_per_stream() -> None:
    # The announced output cap is applied to stdout and to stderr each on its own: a
    # command may stream up to twice maxCommandOutputBytes before it is truncated.
    base = commands._Collector

    class PerStream(base):
        def __init__(self) -> None:
            super().__init__()
            self._kept: dict[int, int] = {}
            self._cut: dict[int, bool] = {}

        @staticmethod
        def _stream() -> int | None:
            try:
                task = asyncio.current_task()
            except RuntimeError:
                return None
            return id(task) if task is not None else None

        @property
        def truncated(self) -> bool:
            stream = self._stream()
            if stream is not None and stream in self._kept:
                return self._cut.get(stream, False)
            return any(self.__dict__.get("_cut", {}).values())

        @truncated.setter
        def truncated(self, value: bool) -> None:
            pass  # per stream, below

        def keep(self, data: bytes) -> bytes:
            stream = self._stream() or 0
            used = self._kept.setdefault(stream, 0)
            room = max(commands.OUTPUT_CAP_BYTES - used, 0)
            if len(data) > room:
                self._cut[stream] = True
            part = data[:room]
            self._kept[stream] = used + len(part)
            self.kept += part
            return part

    patch(commands, "_Collector", PerStream)


@variant("signal-as-exit-code")
def _signal_as_exit_code() -> None:
    # A shell ended by a signal is reported the way a shell reports it in $?: exitCode
    # 128 + n and signal null (command/exited and command_audit alike).
    original = commands.CommandResult

    def result(**fields: Any) -> Any:
        if fields.get("signal") is not None:
            fields["exit_code"] = 128 + fields["signal"]
            fields["signal"] = None
        return original(**fields)

    patch(commands, "CommandResult", result)


@variant("cancelled-command-not-audited")
def _cancelled_command_not_audited() -> None:
    # The audit row is written once the Bash call has returned its result; a call cut
    # short by a cancelled turn never returns, so its command is never recorded.
    original = TurnRunner._audit

    async def audit(self: TurnRunner, row: dict[str, Any], result: Any) -> None:
        if result.cancelled:
            return
        await original(self, row, result)

    patch(TurnRunner, "_audit", audit)


# -- context and cancellation -------------------------------------------------------------


@variant("new-context-forgotten-next-turn")
def _new_context_forgotten_next_turn() -> None:
    # new_context swaps the running turn's in-memory conversation for the summary; nothing
    # about the reset is stored, so the next turn is built from the whole transcript again
    # (every earlier message, and no summary).
    original_dispatch = TurnRunner._dispatch

    async def dispatch(
        self: TurnRunner, session: Any, turn_id: str, name: str, args: dict[str, Any]
    ) -> CallOutcome:
        if name == "new_context":
            return CallOutcome("ok", "A new context starts from the summary.")
        return await original_dispatch(self, session, turn_id, name, args)

    async def loop(self: TurnRunner, session_id: str, turn_id: str, unattended: bool) -> None:
        host = self.host
        messages = await self._history(session_id)
        for _ in range(turns.MAX_STEPS):
            session = await host.require_session(session_id)
            reply = await self._ask_model(session, turn_id, messages)
            assistant = turns._assistant_message(reply)
            await host.storage.append_transcript(
                session_id, turn_id, "assistant", assistant, host.clock.now_ms()
            )
            messages.append(assistant)
            if not reply.tool_calls:
                return
            outcomes = await self._run_batch(session, turn_id, reply.tool_calls, unattended)
            for call, result in zip(reply.tool_calls, outcomes, strict=True):
                message = {"role": "tool", "tool_call_id": call.call_id, "content": result.output}
                await host.storage.append_transcript(
                    session_id, turn_id, "tool", message, host.clock.now_ms()
                )
                messages.append(message)
            if any(result.ends_turn for result in outcomes):
                return
            for call, result in zip(reply.tool_calls, outcomes, strict=True):
                if call.name == "new_context" and result.status == "ok":
                    summary = turns._arguments(call)["summary"]
                    messages = [{"role": "system", "content": summary}]
        raise HostError("PROVIDER_ERROR", "the model did not finish")

    patch(TurnRunner, "_dispatch", dispatch)
    patch(TurnRunner, "_loop", loop)


@variant("cancel-drops-unstarted-results")
def _cancel_drops_unstarted_results() -> None:
    # When a turn is cancelled in the middle of a batch, the call in flight gets its
    # TURN_CANCELLED result, but the calls of the batch that had not started yet get none.
    async def run_batch(
        self: TurnRunner, session: Any, turn_id: str, calls: tuple[Any, ...], unattended: bool
    ) -> list[CallOutcome]:
        for call in calls:
            self.host.notify(
                "turn/toolCall",
                {
                    "sessionId": session.id,
                    "turnId": turn_id,
                    "toolCallId": call.call_id,
                    "tool": call.name,
                    "input": turns._parse_arguments(call),
                },
            )
        outcomes: list[CallOutcome] = []
        try:
            if any(call.name == "SubmitPlan" for call in calls) and len(calls) > 1:
                refusal = HostError("SUBMIT_PLAN_NOT_ALONE", "SubmitPlan must be alone")
                outcomes = [_failure(refusal) for _ in calls]
            else:
                for call in calls:
                    outcomes.append(await self._run_call(session, turn_id, call, unattended))
                    session = await self.host.require_session(session.id)
        except asyncio.CancelledError:
            outcomes.append(_failure(HostError("TURN_CANCELLED", "the turn was cancelled")))
            done = len(outcomes)
            self._announce_results(session.id, turn_id, calls[:done], outcomes)
            raise
        self._announce_results(session.id, turn_id, calls, outcomes)
        return outcomes

    patch(TurnRunner, "_run_batch", run_batch)


@variant("cancel-rolls-back-turn")
def _cancel_rolls_back_turn() -> None:
    # A cancelled turn is undone: its prompt and whatever the model said in it are removed
    # from the transcript when the turn is recorded as cancelled, so the next turn (and
    # session/transcript) no longer shows them.
    original = Storage.end_turn

    async def end_turn(self: Storage, turn_id: str, state: str, at: int) -> None:
        await original(self, turn_id, state, at)
        if state == "cancelled":
            async with self.transaction() as conn:
                await conn.execute("DELETE FROM transcript WHERE turn_id = ?", (turn_id,))

    patch(Storage, "end_turn", end_turn)


@variant("workspace-root-normalised")
def _workspace_root_normalised() -> None:
    # The session keeps its workspace root as a normalised path (a trailing slash dropped),
    # so commands report and audit a cwd other than the string the user gave.
    from reference_host.host import Host

    original = Host.session_create

    async def create(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        root = params.get("workspaceRoot")
        if isinstance(root, str):
            params = {**params, "workspaceRoot": os.path.normpath(root)}
        return await original(self, params)

    patch(Host, "session_create", create)


# P10 (a Glob pattern is /-separated segments from the workspace root, each matching one
# folder or file name): the matcher lets a pattern's leading segments match no name at all,
# so docs/*.md also names the top level's README.md. (A mutant of the campaign's seventh
# sample, kept as a broken host.)
@variant("glob-skips-leading-folders")
def _glob_skips_leading_folders() -> None:
    def glob_match(pattern: list[str], path: list[str]) -> bool:
        reachable = [True] + [False] * len(path)
        for segment in pattern:
            if segment == "**":
                for j in range(1, len(path) + 1):
                    reachable[j] = reachable[j] or reachable[j - 1]
            else:
                reachable = [True] + [
                    reachable[j - 1] and fnmatchcase(path[j - 1], segment)
                    for j in range(1, len(path) + 1)
                ]
        return reachable[-1]

    patch(files, "_glob_match", glob_match)


CASES = [
    BrokenCase(
        "glob-skips-leading-folders",
        "plan_tools",
        "finds_exactly_the_files_it_names",
        "P10",
        "README.md",
    ),
    BrokenCase(
        "grep-smart-case",
        "plan_tools",
        "finds_the_matching_lines",
        "P10",
        "the model was given 'src/legacy.py'",
    ),
    BrokenCase(
        "search-follows-dir-links",
        "isolation",
        "link_into_another_project",
        "R5.8",
        "the model was shown the other project's file",
    ),
    BrokenCase(
        "edit-normalises-crlf",
        "plan_tools",
        "every_byte_the_edit_did_not_touch",
        "P10",
        "only 'two' was to change",
    ),
    BrokenCase(
        "edit-missing-file-no-match",
        "plan_tools",
        "ordinary_tool_failure and edited",
        "P9",
        "the Edit call was stopped with EDIT_NO_MATCH, expected FILE_NOT_FOUND",
    ),
    BrokenCase(
        "no-project-search-empty",
        "plan_tools",
        "without_a_project_is_refused and Glob",
        "P30",
        "the Glob call ran, expected WORKSPACE_REQUIRED",
    ),
    BrokenCase(
        "utf8-split-across-reads",
        "shell",
        "bytes_arrive_apart",
        "P20",
        "a character split between two reads was not kept whole",
    ),
    BrokenCase(
        "cap-per-stream",
        "shell",
        "both_streams_count",
        "P20",
        "the output was not marked truncated",
    ),
    BrokenCase(
        "signal-as-exit-code",
        "shell",
        "ended_by_a_signal",
        "R7.3",
        "was reported with signal None and exit code 137",
    ),
    BrokenCase(
        "cancelled-command-not-audited",
        "shell",
        "turn_is_cancelled_is_recorded_for_audit",
        "C5",
        "command_audit holds 0 rows",
    ),
    BrokenCase(
        "new-context-forgotten-next-turn",
        "plan_tools",
        "later_turns_carry_the_summary",
        "P10",
        "in the later turn the model was not given the summary",
    ),
    BrokenCase(
        "cancel-drops-unstarted-results",
        "plan_tools",
        "cancelled_message",
        "P9",
        "the Read call of the cancelled message got 0 results",
    ),
    BrokenCase(
        "cancel-rolls-back-turn",
        "turn_boundaries",
        "cancelled_turns_prompt",
        "R1.3",
        "the host's transcript lost the accepted prompt",
    ),
    BrokenCase(
        "workspace-root-normalised",
        "shell",
        "exactly_as_the_session_was_given_it",
        "C5",
        "the audit row differs from the command",
    ),
]
