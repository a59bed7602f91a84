"""Broken hosts: planning (plan tools, plan submission, plan artifacts and their integrity).

Each variant is a bug a host team could plausibly write; its case names the requirement
the suite must blame and a piece of the failed check's message.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import os
import re
import stat
import sys
import unicodedata
import weakref
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx

from hosts.registry import (
    BrokenCase,
    patch,
    rewrite_notifications,
    rewrite_provider_messages,
    variant,
)
from reference_host import approvals, artifacts, turns
from reference_host import host as host_module
from reference_host.approvals import Approvals
from reference_host.errors import HostError
from reference_host.provider_client import ToolSpec
from reference_host.storage import ApprovalRow, SessionRow, Storage
from reference_host.tools import browser, files
from reference_host.tools.browser import BrowserPreview
from reference_host.tools.files import Edit, Grep, Read

PLUGIN_PREFIXES = ("mcp__", "plugin__")

# -- plan tools: what is offered and refused (R1.4, R1.5, R1.9) ---------------------------


@variant("offers-write-in-plan")
def _offers_write_in_plan() -> None:
    original = turns.offered_tools

    def offered_tools(mode: str) -> list[Any]:
        offered = original(mode)
        if mode == "plan":
            offered.append(turns._SPECS["Write"])
        return offered

    patch(turns, "offered_tools", offered_tools)


@variant("offers-agent-tools-after-a-tool-call")
def _offers_agent_tools_after_a_tool_call() -> None:
    # The Plan tool set is chosen for the turn's first request only; the follow-up requests
    # fall back to the default (Agent) set.
    original = turns.TurnRunner._ask_model
    asked: set[str] = set()

    async def ask_model(
        self: turns.TurnRunner, session: SessionRow, turn_id: str, messages: list[Any]
    ) -> Any:
        if turn_id in asked:
            session = replace(session, mode="agent")
        asked.add(turn_id)
        return await original(self, session, turn_id, messages)

    patch(turns.TurnRunner, "_ask_model", ask_model)


@variant("plugin-tools-unknown-in-plan")
def _plugin_tools_unknown_in_plan() -> None:
    # Names are looked up before the Plan gate, so a plugin tool the host lacks is
    # reported unknown instead of denied.
    original = turns._gate

    def gate(mode: str, name: str) -> HostError | None:
        if name.startswith(PLUGIN_PREFIXES):
            return HostError("UNKNOWN_TOOL", f"no plugin provides {name}")
        return original(mode, name)

    patch(turns, "_gate", gate)


@variant("edit-allowed-in-plan")
def _edit_allowed_in_plan() -> None:
    original = turns._gate

    def gate(mode: str, name: str) -> HostError | None:
        return None if name == "Edit" else original(mode, name)

    patch(turns, "_gate", gate)


EXIT_PLAN_MODE = ToolSpec(
    "ExitPlanMode",
    "Leave Plan mode.",
    {"type": "object", "properties": {}, "additionalProperties": False},
)


@variant("offers-exit-plan-mode")
def _offers_exit_plan_mode() -> None:
    original = turns.offered_tools
    patch(turns, "offered_tools", lambda mode: [*original(mode), EXIT_PLAN_MODE])


@variant("exit-plan-mode-switches-to-agent")
def _exit_plan_mode_switches_to_agent() -> None:
    original = turns.TurnRunner._run_call

    async def run_call(
        self: turns.TurnRunner, session: SessionRow, turn_id: str, call: Any, unattended: bool
    ) -> turns.CallOutcome:
        if call.name != "ExitPlanMode":
            return await original(self, session, turn_id, call, unattended)
        await self.host.storage.update_session(replace(session, mode="agent"))
        return turns.CallOutcome("ok", "Left Plan mode.")

    patch(turns.TurnRunner, "_run_call", run_call)


# -- one result per call (P9) -------------------------------------------------------------


def _recode(mapping: dict[str, str]) -> None:
    original = turns._failure

    def failure(error: HostError) -> turns.CallOutcome:
        if error.code in mapping:
            error = HostError(mapping[error.code], error.message, error.details)
        return original(error)

    patch(turns, "_failure", failure)


@variant("missing-file-is-tool-failed")
def _missing_file_is_tool_failed() -> None:
    _recode({"FILE_NOT_FOUND": "TOOL_FAILED"})


@variant("edit-no-match-is-invalid-input")
def _edit_no_match_is_invalid_input() -> None:
    _recode({"EDIT_NO_MATCH": "INVALID_TOOL_INPUT"})


@variant("refusals-reported-as-errors")
def _refusals_reported_as_errors() -> None:
    # Every failed call gets status "error", policy refusals included.
    original = turns._failure
    patch(turns, "_failure", lambda error: replace(original(error), status="error"))


@variant("renames-tool-calls-in-history")
def _renames_tool_calls_in_history() -> None:
    # The conversation sent back to the provider names the model's tool calls by ids of
    # the host's own (consistently, so the request is still valid).
    def renamed(message: dict[str, Any]) -> dict[str, Any]:
        if message.get("role") == "tool":
            return {**message, "tool_call_id": f"h-{message['tool_call_id']}"}
        calls = message.get("tool_calls")
        if message.get("role") == "assistant" and calls:
            return {**message, "tool_calls": [{**c, "id": f"h-{c['id']}"} for c in calls]}
        return message

    rewrite_provider_messages(lambda messages: [renamed(m) for m in messages])


@variant("wraps-the-prompt")
def _wraps_the_prompt() -> None:
    # The user's prompt reaches the model inside a wrapper of the host's.
    original = turns.TurnRunner.start

    async def start(
        self: turns.TurnRunner, session: SessionRow, kind: str, text: str, *args: Any, **kw: Any
    ) -> str:
        return await original(self, session, kind, f"The user asks: {text}", *args, **kw)

    patch(turns.TurnRunner, "start", start)


@variant("announces-results-twice")
def _announces_results_twice() -> None:
    original = turns.TurnRunner._announce_results

    def announce(self: turns.TurnRunner, *args: Any) -> None:
        original(self, *args)
        original(self, *args)

    patch(turns.TurnRunner, "_announce_results", announce)


@variant("host-chosen-tool-call-ids")
def _host_chosen_tool_call_ids() -> None:
    # turn/toolCall and turn/toolResult name each call by an id of the host's own making,
    # not by the id the model gave it.
    def rename(method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method in ("turn/toolCall", "turn/toolResult"):
            return {**params, "toolCallId": f"host-{params['toolCallId']}"}
        return params

    rewrite_notifications(rename)


@variant("no-result-for-unknown-tools")
def _no_result_for_unknown_tools() -> None:
    original = turns.TurnRunner._announce_results

    def announce(
        self: turns.TurnRunner,
        session_id: str,
        turn_id: str,
        calls: tuple[Any, ...],
        outcomes: list[turns.CallOutcome],
    ) -> None:
        kept = [
            (c, o)
            for c, o in zip(calls, outcomes, strict=True)
            if o.error is None or o.error.code != "UNKNOWN_TOOL"
        ]
        original(self, session_id, turn_id, tuple(c for c, _ in kept), [o for _, o in kept])

    patch(turns.TurnRunner, "_announce_results", announce)


@variant("a-refusal-ends-the-turn")
def _a_refusal_ends_the_turn() -> None:
    original = turns.TurnRunner._run_batch

    async def run_batch(self: turns.TurnRunner, *args: Any) -> list[turns.CallOutcome]:
        outcomes = await original(self, *args)
        for outcome in outcomes:
            if outcome.status == "denied" and outcome.error is not None:
                raise outcome.error
        return outcomes

    patch(turns.TurnRunner, "_run_batch", run_batch)


# -- the plan tools at work (P10) ---------------------------------------------------------


@variant("edit-reports-ok-without-writing")
def _edit_reports_ok_without_writing() -> None:
    # The edit is computed and reported, but the file is never written back.
    def edit(root: Path, relative: str, old: str, new: str, replace_all: bool) -> str:
        return f"Replaced 1 occurrence in {relative}"

    patch(Edit, "_edit", staticmethod(edit))


# -- tool inputs (P27) -----------------------------------------------------------------------


@variant("tools-check-only-submit-plan")
def _tools_check_only_submit_plan() -> None:
    # Only SubmitPlan's input is checked against its schema; every other tool takes whatever
    # object it is given and makes the best of it.
    strict = turns.validate_args

    def lenient(spec: ToolSpec, args: Any) -> dict[str, Any]:
        if spec.name == "SubmitPlan" or not isinstance(args, dict):
            return strict(spec, args)
        return args

    for module in (turns, files, browser):
        patch(module, "validate_args", lenient)


@variant("bash-timeout-without-limit")
def _bash_timeout_without_limit() -> None:
    # Bash's schema has no upper bound on timeout_ms: a command may run for days.
    bash = turns._SPECS["Bash"]
    parameters = dict(bash.parameters)
    properties = dict(parameters["properties"])
    properties["timeout_ms"] = {"type": "integer", "minimum": 1}
    parameters["properties"] = properties
    patch(turns, "_SPECS", {**turns._SPECS, "Bash": replace(bash, parameters=parameters)})


# -- BrowserPreview stays on loopback (P23) --------------------------------------------------


@variant("browser-preview-fetches-any-host")
def _browser_preview_fetches_any_host() -> None:
    # Every http(s) URL counts as local.
    patch(browser, "is_loopback", lambda host: True)


@variant("browser-preview-refuses-after-fetching")
def _browser_preview_refuses_after_fetching() -> None:
    # The page is fetched first (to "look at it") and only then refused.
    original = browser._checked_url

    def checked_url(text: str) -> httpx.URL:
        try:
            return original(text)
        except HostError as refusal:
            if refusal.code == "BROWSER_PREVIEW_REFUSED":
                with contextlib.suppress(httpx.HTTPError):
                    httpx.get(text, timeout=2.0, trust_env=False)
            raise

    patch(browser, "_checked_url", checked_url)


@variant("read-returns-a-summary")
def _read_returns_a_summary() -> None:
    original = Read._read

    def read(root: Path, relative: str, offset: int | None, limit: int | None) -> str:
        text = original(root, relative, offset, limit)
        return f"{relative}: {len(text)} characters"

    patch(Read, "_read", staticmethod(read))


@variant("glob-top-folder-only")
def _glob_top_folder_only() -> None:
    original = files._workspace_files

    def workspace_files(root: Path, budget: Any) -> list[tuple[str, Path]]:
        return [(rel, real) for rel, real in original(root, budget) if "/" not in rel]

    patch(files, "_workspace_files", workspace_files)


@variant("grep-lists-files-only")
def _grep_lists_files_only() -> None:
    original = Grep._grep

    def grep(root: Path, compiled: Any, parts: Any, budget: Any) -> str:
        found = original(root, compiled, parts, budget)
        if found == files.NO_MATCHES:
            return found
        return "\n".join(dict.fromkeys(line.split(":", 1)[0] for line in found.splitlines()))

    patch(Grep, "_grep", staticmethod(grep))


@variant("browser-preview-without-fetching")
def _browser_preview_without_fetching() -> None:
    async def run(self: BrowserPreview, ctx: Any, args: dict[str, Any]) -> str:
        return "status: 200\n\n(the preview opens in the user's browser)"

    patch(BrowserPreview, "run", run)


@variant("bash-simulated-in-plan")
def _bash_simulated_in_plan() -> None:
    original = turns.TurnRunner._bash

    async def bash(
        self: turns.TurnRunner, session: SessionRow, turn_id: str, args: dict[str, Any]
    ) -> turns.CallOutcome:
        if session.mode == "plan":
            return turns.CallOutcome("ok", "(commands are not run while planning)")
        return await original(self, session, turn_id, args)

    patch(turns.TurnRunner, "_bash", bash)


@variant("enter-plan-mode-does-nothing")
def _enter_plan_mode_does_nothing() -> None:
    async def enter_plan_mode(self: Any, session: SessionRow) -> None:
        return None

    patch(host_module.Host, "enter_plan_mode", enter_plan_mode)


@variant("new-context-keeps-the-history")
def _new_context_keeps_the_history() -> None:
    async def history(self: turns.TurnRunner, session_id: str) -> list[dict[str, Any]]:
        entries = await self.host.storage.transcript(session_id)
        contents = [{k: v for k, v in c.items() if k != "contextReset"} for *_, c, _at in entries]
        return turns.answered_only(contents)

    patch(turns.TurnRunner, "_history", history)


@variant("new-context-drops-the-summary")
def _new_context_drops_the_summary() -> None:
    original = turns.TurnRunner._history

    async def history(self: turns.TurnRunner, session_id: str) -> list[dict[str, Any]]:
        entries = await self.host.storage.transcript(session_id)
        kept = await original(self, session_id)
        if any(c.get("contextReset") for *_, c, _at in entries):
            return kept[1:] or [{"role": "user", "content": "Go on."}]
        return kept

    patch(turns.TurnRunner, "_history", history)


# -- a runaway search (P22) ---------------------------------------------------------------


@variant("grep-without-budget")
def _grep_without_budget() -> None:
    # The standard library's regex engine, which backtracks without end and holds the
    # interpreter while it does.
    def search(compiled: Any, line: str, budget: Any) -> bool:
        return re.compile(compiled.pattern).search(line) is not None

    patch(files, "_search", search)


@variant("grep-budget-reported-as-no-matches")
def _grep_budget_reported_as_no_matches() -> None:
    original = Grep.run

    async def run(self: Grep, ctx: Any, args: dict[str, Any]) -> str:
        try:
            return await original(self, ctx, args)
        except HostError as failure:
            if failure.code == "TOOL_FAILED":
                return files.NO_MATCHES
            raise

    patch(Grep, "run", run)


@variant("grep-on-the-event-loop")
def _grep_on_the_event_loop() -> None:
    # The search keeps its budget but runs on the event loop, which serves nobody else
    # meanwhile.
    async def run_within(budget: Any, work: Callable[[Any], Any]) -> Any:
        return work(budget)

    patch(files, "run_within", run_within)


# -- SubmitPlan alone, in the Plan turn, with exactly its input (R1.6, R1.7, R1.8) ---------


@variant("accepts-submit-plan-beside-another-call")
def _accepts_submit_plan_beside_another_call() -> None:
    # Running each call as a batch of its own never meets the SubmitPlan-alone check.
    original = turns.TurnRunner._run_batch

    async def run_batch(
        self: turns.TurnRunner, session: Any, turn_id: str, calls: tuple[Any, ...], unattended: bool
    ) -> list[turns.CallOutcome]:
        outcomes: list[turns.CallOutcome] = []
        for call in calls:
            session = await self.host.require_session(session.id)
            outcomes += await original(self, session, turn_id, (call,), unattended)
        return outcomes

    patch(turns.TurnRunner, "_run_batch", run_batch)


@variant("refuses-only-the-submit-plan-of-a-batch")
def _refuses_only_the_submit_plan_of_a_batch() -> None:
    # The SubmitPlan of a mixed batch is refused, but the other calls still run.
    original = turns.TurnRunner._run_batch

    async def run_batch(
        self: turns.TurnRunner, session: Any, turn_id: str, calls: tuple[Any, ...], unattended: bool
    ) -> list[turns.CallOutcome]:
        if len(calls) == 1 or not any(c.name == "SubmitPlan" for c in calls):
            return await original(self, session, turn_id, calls, unattended)
        outcomes: list[turns.CallOutcome] = []
        for call in calls:
            if call.name == "SubmitPlan":
                refusal = HostError("SUBMIT_PLAN_NOT_ALONE", "SubmitPlan must stand alone")
                self.host.notify(
                    "turn/toolCall",
                    {
                        "sessionId": session.id,
                        "turnId": turn_id,
                        "toolCallId": call.call_id,
                        "tool": call.name,
                        "input": None,
                    },
                )
                self._announce_results(session.id, turn_id, (call,), [turns._failure(refusal)])
                outcomes.append(turns._failure(refusal))
            else:
                outcomes += await original(self, session, turn_id, (call,), unattended)
        return outcomes

    patch(turns.TurnRunner, "_run_batch", run_batch)


@variant("accepts-the-first-of-two-plans")
def _accepts_the_first_of_two_plans() -> None:
    original = turns.TurnRunner._run_batch

    async def run_batch(
        self: turns.TurnRunner, session: Any, turn_id: str, calls: tuple[Any, ...], unattended: bool
    ) -> list[turns.CallOutcome]:
        if len(calls) > 1 and all(c.name == "SubmitPlan" for c in calls):
            first = await original(self, session, turn_id, calls[:1], unattended)
            return first + await original(self, session, turn_id, calls[1:], unattended)
        return await original(self, session, turn_id, calls, unattended)

    patch(turns.TurnRunner, "_run_batch", run_batch)


@variant("submit-plan-accepted-outside-plan")
def _submit_plan_accepted_outside_plan() -> None:
    # SubmitPlan is not offered in Agent, so the host never expects it there and lets it
    # through.
    original = turns._gate

    def gate(mode: str, name: str) -> HostError | None:
        return None if name == "SubmitPlan" else original(mode, name)

    patch(turns, "_gate", gate)


@variant("submit-plan-extra-fields-accepted")
def _submit_plan_extra_fields_accepted() -> None:
    loose = turns._SPECS["SubmitPlan"]
    parameters = {**loose.parameters, "additionalProperties": True}
    turns._SPECS["SubmitPlan"] = replace(loose, parameters=parameters)


@variant("submit-plan-fields-coerced")
def _submit_plan_fields_coerced() -> None:
    original = turns.validate_args

    def validate_args(spec: ToolSpec, args: Any) -> dict[str, Any]:
        if spec.name == "SubmitPlan" and isinstance(args, dict):
            args = {k: v if isinstance(v, str) or v is None else str(v) for k, v in args.items()}
        return original(spec, args)

    patch(turns, "validate_args", validate_args)


# -- revisions (R1.11, C7) ----------------------------------------------------------------


async def _earlier(self: Approvals, session_id: str) -> ApprovalRow | None:
    rows = await self.host.storage.list_approvals(session_id)
    return rows[-1] if rows else None


@variant("revision-replaces-the-ended-record")
def _revision_replaces_the_ended_record() -> None:
    # A revision is stored over the approval it revises, under the same id: one record
    # per session.
    original = Approvals.submit
    original_insert = Storage.insert_approval

    async def submit(
        self: Approvals, session: Any, turn_id: str, args: dict[str, Any]
    ) -> ApprovalRow:
        earlier = await _earlier(self, session.id)
        if earlier is None:
            return await original(self, session, turn_id, args)
        new_id = self.host.new_id
        self.host.new_id = lambda prefix: earlier.id if prefix == "apr" else new_id(prefix)  # type: ignore[method-assign]
        try:
            return await original(self, session, turn_id, args)
        finally:
            del self.host.new_id

    async def insert_approval(self: Storage, row: ApprovalRow) -> None:
        async with self.transaction() as conn:
            await conn.execute("DELETE FROM plan_approvals WHERE id = ?", (row.id,))
        await original_insert(self, row)

    patch(Approvals, "submit", submit)
    patch(Storage, "insert_approval", insert_approval)


@variant("revision-overwrites-the-earlier-artifact")
def _revision_overwrites_the_earlier_artifact() -> None:
    # A revision is written into the file of the plan it revises.
    original = approvals.write_artifact
    target: dict[str, str] = {}

    def write_artifact(root: str, content: bytes, fault: artifacts.FaultCheck) -> Any:
        relative = target.pop("path", None)
        if relative is None:
            return original(root, content, fault)
        path = Path(root, relative)
        path.chmod(0o644)
        path.write_bytes(content)
        return artifacts.Artifact(relative, hashlib.sha256(content).hexdigest(), len(content))

    original_submit = Approvals.submit

    async def submit(
        self: Approvals, session: Any, turn_id: str, args: dict[str, Any]
    ) -> ApprovalRow:
        earlier = await _earlier(self, session.id)
        if earlier is not None and earlier.artifact_path:
            target["path"] = earlier.artifact_path
        return await original_submit(self, session, turn_id, args)

    patch(approvals, "write_artifact", write_artifact)
    patch(Approvals, "submit", submit)


@variant("pending-kept-after-reject")
def _pending_kept_after_reject() -> None:
    original = Approvals.reject

    async def reject(self: Approvals, session_id: str, approval_id: str) -> dict[str, Any]:
        result = await original(self, session_id, approval_id)
        self.host.set_activity(session_id, pending_approval_id=approval_id)
        return result

    patch(Approvals, "reject", reject)


# -- the Plan turn ends at SubmitPlan (P11) -----------------------------------------------


@variant("asks-the-model-again-after-submit-plan")
def _asks_the_model_again_after_submit_plan() -> None:
    original = turns.TurnRunner._dispatch

    async def dispatch(self: turns.TurnRunner, *args: Any) -> turns.CallOutcome:
        outcome = await original(self, *args)
        return replace(outcome, ends_turn=False)

    patch(turns.TurnRunner, "_dispatch", dispatch)


@variant("plan-turn-ends-cancelled")
def _plan_turn_ends_cancelled() -> None:
    # The turn is stopped for the approval card, and reported as cancelled.
    original = turns.TurnRunner._loop

    async def loop(self: turns.TurnRunner, session_id: str, *args: Any) -> None:
        await original(self, session_id, *args)
        if self.host.activity_of(session_id).pending_approval_id is not None:
            raise asyncio.CancelledError

    patch(turns.TurnRunner, "_loop", loop)


# -- the artifact's bytes (R2.1, R2.7) ----------------------------------------------------


@variant("normalises-line-endings")
def _normalises_line_endings() -> None:
    # Hash and size are computed by write_artifact on these bytes, so they stay consistent
    # with the file: only a comparison with the submitted bytes can notice.
    original = approvals.encode_markdown

    def encode_markdown(markdown: str) -> bytes:
        return original(markdown.replace("\r\n", "\n").replace("\r", "\n"))

    patch(approvals, "encode_markdown", encode_markdown)


@variant("truncates-large-plans")
def _truncates_large_plans() -> None:
    original = approvals.encode_markdown
    patch(approvals, "encode_markdown", lambda markdown: original(markdown)[:65536])


@variant("normalises-unicode")
def _normalises_unicode() -> None:
    original = approvals.encode_markdown
    patch(
        approvals,
        "encode_markdown",
        lambda markdown: original(unicodedata.normalize("NFC", markdown)),
    )


def _rewrites_markdown(wrap: Callable[[dict[str, Any]], str]) -> None:
    original = Approvals.submit

    async def submit(
        self: Approvals, session: Any, turn_id: str, args: dict[str, Any]
    ) -> ApprovalRow:
        return await original(self, session, turn_id, {**args, "markdown": wrap(args)})

    patch(Approvals, "submit", submit)


@variant("prepends-title")
def _prepends_title() -> None:
    _rewrites_markdown(lambda args: f"# {args['title']}\n\n{args['markdown']}")


@variant("appends-question")
def _appends_question() -> None:
    _rewrites_markdown(lambda args: f"{args['markdown']}\n\n**Question:** {args['question']}\n")


# -- where the artifact goes (R2.2, R2.3, R2.8) -------------------------------------------


@variant("artifact-in-a-plans-folder")
def _artifact_in_a_plans_folder() -> None:
    patch(artifacts, "PLAN_DIR", (".pi", "plans"))


@variant("artifact-named-txt")
def _artifact_named_txt() -> None:
    original = artifacts._unique_name
    patch(artifacts, "_unique_name", lambda: original().removesuffix(".md") + ".txt")


@variant("artifact-named-after-the-title")
def _artifact_named_after_the_title() -> None:
    # The file name is the submitted title, opened relative to the plan folder as it is.
    title: dict[str, str] = {}
    original = Approvals.submit

    async def submit(
        self: Approvals, session: Any, turn_id: str, args: dict[str, Any]
    ) -> ApprovalRow:
        title["name"] = f"{args['title']}.md"
        return await original(self, session, turn_id, args)

    patch(Approvals, "submit", submit)
    patch(artifacts, "_unique_name", lambda: title.get("name", "plan.md"))


@variant("recreates-a-missing-project-folder")
def _recreates_a_missing_project_folder() -> None:
    original = artifacts.validate_root

    def validate_root(root: str) -> Path:
        if Path(root).is_absolute():
            Path(root).mkdir(parents=True, exist_ok=True)
        return original(root)

    patch(artifacts, "validate_root", validate_root)


# -- one new file per submission (R2.4, R2.5, R2.9) ---------------------------------------


@variant("reuses-file-name")
def _reuses_file_name() -> None:
    def create_truncating(plan_fd: int) -> tuple[str, int]:
        name = "plan.md"
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        # The earlier artifact is read-only: make it writable so that it is overwritten.
        with contextlib.suppress(FileNotFoundError):
            os.chmod(name, 0o644, dir_fd=plan_fd)
        return name, os.open(name, flags, artifacts.READ_ONLY, dir_fd=plan_fd)

    assert hasattr(artifacts, "_create_exclusive"), "nothing to patch"
    patch(artifacts, "_create_exclusive", create_truncating)


@variant("content-addressed-names")
def _content_addressed_names() -> None:
    # The name is the content's hash: two identical plans want the same file.
    digest: dict[str, str] = {}
    original = approvals.write_artifact

    def write_artifact(root: str, content: bytes, fault: artifacts.FaultCheck) -> Any:
        digest["name"] = f"plan-{hashlib.sha256(content).hexdigest()[:16]}.md"
        return original(root, content, fault)

    patch(approvals, "write_artifact", write_artifact)
    patch(artifacts, "_unique_name", lambda: digest.get("name", "plan.md"))


@variant("marks-earlier-plans-superseded")
def _marks_earlier_plans_superseded() -> None:
    original = approvals.write_artifact

    def write_artifact(root: str, content: bytes, fault: artifacts.FaultCheck) -> Any:
        written = original(root, content, fault)
        folder = Path(root, *artifacts.PLAN_DIR)
        for earlier in folder.glob("*.md"):
            if earlier.name != Path(written.relative_path).name:
                earlier.chmod(0o644)
                with earlier.open("ab") as handle:
                    handle.write(f"\n> Superseded by {written.relative_path}\n".encode())
        return written

    patch(approvals, "write_artifact", write_artifact)


# -- flushing and failures (R2.10, R2.12) -------------------------------------------------


@variant("follows-symlinked-pi")
def _follows_symlinked_pi() -> None:
    assert hasattr(artifacts, "_DIR_FLAGS"), "nothing to patch"
    patch(artifacts, "_DIR_FLAGS", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # no O_NOFOLLOW


@variant("commits-row-before-flush")
def _commits_row_before_flush() -> None:
    # The flush (and its injected failure) happens only after the row is committed, so a
    # failed flush is reported but leaves the committed approval row behind.
    unflushed: dict[str, Path] = {}
    original_write = approvals.write_artifact
    original_insert = Storage.insert_approval

    def write_artifact(root: str, content: bytes, fault: artifacts.FaultCheck) -> Any:
        flush_fails = fault("artifactFlush")
        artifact = original_write(root, content, fault)
        if flush_fails:
            unflushed[artifact.relative_path] = Path(root, artifact.relative_path)
        return artifact

    async def insert_approval(self: Storage, row: ApprovalRow) -> None:
        await original_insert(self, row)
        path = unflushed.pop(row.artifact_path or "", None)
        if path is not None:
            path.unlink()
            raise HostError("ARTIFACT_WRITE_FAILED", "injected artifact flush failure")

    patch(approvals, "write_artifact", write_artifact)
    patch(Storage, "insert_approval", insert_approval)


@variant("never-flushes")
def _never_flushes() -> None:
    # Writes the bytes and trusts the operating system to keep them: no flush of the file
    # or its folders before the approval commits.
    def write_all(fd: int, content: bytes, fault: artifacts.FaultCheck) -> None:
        if fault("artifactWrite"):
            raise HostError("ARTIFACT_WRITE_FAILED", "injected artifact write failure")
        os.write(fd, content)

    patch(artifacts, "_write_all", write_all)
    patch(artifacts, "_flush_directory", lambda fd: None)


# -- what the approval records (R2.11, C1) ------------------------------------------------


def _store_altered(alter: Callable[[ApprovalRow], ApprovalRow]) -> None:
    original = Storage.insert_approval

    async def insert_approval(self: Storage, row: ApprovalRow) -> None:
        await original(self, alter(row))

    patch(Storage, "insert_approval", insert_approval)


WRONG_SHA256 = hashlib.sha256(b"not the artifact").hexdigest()


@variant("records-wrong-hash")
def _records_wrong_hash() -> None:
    _store_altered(lambda row: replace(row, artifact_sha256=WRONG_SHA256))


@variant("records-wrong-size")
def _records_wrong_size() -> None:
    _store_altered(lambda row: replace(row, artifact_bytes=(row.artifact_bytes or 0) + 1))


@variant("reports-size-in-characters")
def _reports_size_in_characters() -> None:
    # The stored size is right; the size sent to clients counts the markdown's characters.
    characters: dict[str, int] = {}
    original_submit = Approvals.submit
    original_wire = approvals.approval_wire

    async def submit(
        self: Approvals, session: Any, turn_id: str, args: dict[str, Any]
    ) -> ApprovalRow:
        row = await original_submit(self, session, turn_id, args)
        characters[row.id] = len(args["markdown"])
        return row

    def approval_wire(row: ApprovalRow) -> dict[str, Any]:
        wire = original_wire(row)
        if row.id in characters:
            wire["artifact"] = {**wire["artifact"], "byteSize": characters[row.id]}
        return wire

    patch(Approvals, "submit", submit)
    patch(approvals, "approval_wire", approval_wire)
    patch(host_module, "approval_wire", approval_wire)


# -- opening and keeping the artifact (R3.2, C9, C10) -------------------------------------


@variant("opens-the-artifact-as-text")
def _opens_the_artifact_as_text() -> None:
    original = Approvals.read_artifact

    async def read_artifact(self: Approvals, row: ApprovalRow) -> dict[str, Any]:
        result = await original(self, row)
        content = base64.b64decode(result["contentBase64"]).replace(b"\r\n", b"\n")
        return {**result, "contentBase64": base64.b64encode(content).decode("ascii")}

    patch(Approvals, "read_artifact", read_artifact)


def _unlink_artifact(root: str | None, row: ApprovalRow | None) -> None:
    if root and row is not None and row.artifact_path:
        with contextlib.suppress(OSError):
            Path(root, row.artifact_path).unlink()


@variant("deletes-the-artifact-on-reject")
def _deletes_the_artifact_on_reject() -> None:
    original = Approvals.reject

    async def reject(self: Approvals, session_id: str, approval_id: str) -> dict[str, Any]:
        result = await original(self, session_id, approval_id)
        session = await self.host.require_session(session_id)
        _unlink_artifact(session.workspace_root, await self.host.storage.get_approval(approval_id))
        return result

    patch(Approvals, "reject", reject)


@variant("deletes-the-artifact-on-expiry")
def _deletes_the_artifact_on_expiry() -> None:
    original = Approvals.expire

    async def expire(self: Approvals, approval_id: str) -> None:
        await original(self, approval_id)
        row = await self.host.storage.get_approval(approval_id)
        if row is not None and row.status == "expired":
            session = await self.host.require_session(row.session_id)
            _unlink_artifact(session.workspace_root, row)

    patch(Approvals, "expire", expire)


def _append(path: Path, data: bytes) -> None:
    path.chmod(0o644)
    with path.open("ab") as handle:
        handle.write(data)


@variant("stamps-the-artifact-on-approval")
def _stamps_the_artifact_on_approval() -> None:
    original = Approvals.approve

    async def approve(self: Approvals, session_id: str, approval_id: str, mode: Any) -> Any:
        result = await original(self, session_id, approval_id, mode)
        session = await self.host.require_session(session_id)
        row = await self.host.storage.get_approval(approval_id)
        if session.workspace_root and row is not None and row.artifact_path:
            path = Path(session.workspace_root, row.artifact_path)
            stamp = f"\n<!-- approved with {mode} -->\n".encode()
            await asyncio.to_thread(_append, path, stamp)
        return result

    patch(Approvals, "approve", approve)


# -- the plan folder is the host's (C10, P12) ---------------------------------------------


@variant("no-plan-folder-guard")
def _no_plan_folder_guard() -> None:
    # Write and Edit are denied in Plan anyway, so the plan folder is left unguarded.
    patch(turns, "_refuse_plan_folder", lambda root, path: None)


@variant("guards-existing-artifacts-only")
def _guards_existing_artifacts_only() -> None:
    original = turns._refuse_plan_folder

    def refuse(root: Path, path: str) -> None:
        if (root / path).is_file():
            original(root, path)

    patch(turns, "_refuse_plan_folder", refuse)


@variant("guards-the-path-text")
def _guards_the_path_text() -> None:
    def refuse(root: Path, path: str) -> None:
        if path.removeprefix("./").startswith(".pi/plan"):
            raise HostError("TOOL_DENIED", "plan artifacts are immutable")

    patch(turns, "_refuse_plan_folder", refuse)


# -- integrity at approval (P13) ----------------------------------------------------------


async def _unverified(self: Approvals, session: SessionRow, row: ApprovalRow) -> bytes:
    assert session.workspace_root and row.artifact_path
    return await asyncio.to_thread(
        artifacts.read_artifact, session.workspace_root, row.artifact_path
    )


def _unchecked_in(method_name: str) -> None:
    """``method_name`` reads the artifact without checking it against the record."""
    method = getattr(Approvals, method_name)
    checked = Approvals.verified_content

    async def unchecked_method(self: Approvals, *args: Any) -> Any:
        self._unchecked = True  # type: ignore[attr-defined]
        try:
            return await method(self, *args)
        finally:
            self._unchecked = False  # type: ignore[attr-defined]

    async def verified_content(self: Approvals, session: SessionRow, row: ApprovalRow) -> bytes:
        if getattr(self, "_unchecked", False):
            return await _unverified(self, session, row)
        return await checked(self, session, row)

    patch(Approvals, method_name, unchecked_method)
    patch(Approvals, "verified_content", verified_content)


@variant("approves-a-changed-artifact")
def _approves_a_changed_artifact() -> None:
    _unchecked_in("approve")


@variant("opens-a-changed-artifact")
def _opens_a_changed_artifact() -> None:
    _unchecked_in("read_artifact")


@variant("checks-the-size-only")
def _checks_the_size_only() -> None:
    def read_verified(root: str, relative: str, sha256: str, byte_size: int) -> bytes:
        content = artifacts.read_artifact(root, relative, limit=byte_size + 1)
        if len(content) != byte_size:
            raise HostError("ARTIFACT_MODIFIED", f"{relative} changed size")
        return content

    patch(approvals, "read_verified", read_verified)


@variant("reads-the-artifact-through-a-link")
def _reads_the_artifact_through_a_link() -> None:
    # The artifact is opened the ordinary way, so a link put in its place is followed.
    def read_artifact(root: str, relative_path: str, limit: int | None = None) -> bytes:
        path = Path(root) / relative_path
        try:
            if not path.is_file():
                raise HostError("ARTIFACT_UNREADABLE", f"{relative_path} is not a file")
            with path.open("rb") as handle:
                return handle.read() if limit is None else handle.read(limit)
        except OSError as exc:
            raise HostError("ARTIFACT_UNREADABLE", f"cannot read {relative_path}") from exc

    patch(artifacts, "read_artifact", read_artifact)


@variant("missing-artifact-reported-as-modified")
def _missing_artifact_reported_as_modified() -> None:
    original = approvals.read_verified

    def read_verified(*args: Any) -> bytes:
        try:
            return original(*args)
        except HostError as failure:
            if failure.code == "ARTIFACT_UNREADABLE":
                raise HostError("ARTIFACT_MODIFIED", failure.message) from failure
            raise

    patch(approvals, "read_verified", read_verified)


@variant("busy-after-a-refused-approval")
def _busy_after_a_refused_approval() -> None:
    # The execution slot is taken before the artifact is checked and not given back when
    # the check fails.
    original = Approvals.verified_content

    async def verified_content(self: Approvals, session: SessionRow, row: ApprovalRow) -> bytes:
        self.host.set_activity(session.id, active_execution_id="checking")
        content = await original(self, session, row)
        self.host.set_activity(session.id, active_execution_id=None)
        return content

    patch(Approvals, "verified_content", verified_content)


# -- cases ---------------------------------------------------------------------------------

PT, SP, AI = "plan_tools", "submit_plan", "artifact_integrity"


@variant("no-project-tools-use-a-folder-of-their-own")
def _no_project_tools_use_a_folder_of_their_own() -> None:
    # Without a project the file tools work in a folder the host picks (one in its data
    # directory here; a real host might take its own working folder) instead of refusing.
    original = files.require_root
    args = sys.argv
    data_dir = Path(args[args.index("--data-dir") + 1]) if "--data-dir" in args else Path.cwd()

    def require_root(ctx_root: Path | None) -> Path:
        if ctx_root is None:
            own = data_dir / "no-project"
            own.mkdir(exist_ok=True)
            return own
        return original(ctx_root)

    patch(files, "require_root", require_root)


@variant("empty-arguments-tool-failed")
def _empty_arguments_tool_failed() -> None:
    # P27: empty arguments are parsed as JSON text and the parse error is reported as a
    # tool failure (TOOL_FAILED) instead of being read as {} or refused as invalid input.
    original = turns._arguments

    def _arguments(call: Any) -> Any:
        if not call.arguments.strip():
            raise HostError("TOOL_FAILED", f"{call.name}: Expecting value: line 1 column 1")
        return original(call)

    patch(turns, "_arguments", _arguments)


# P27 / The model provider: a tool is offered with parameters that are no JSON Schema (a
# type spelt in capitals, as a mutant of the reference host's Grep did).
@variant("tool-parameters-not-a-schema")
def _tool_parameters_not_a_schema() -> None:
    original = ToolSpec.to_wire

    def to_wire(self: ToolSpec) -> dict[str, Any]:
        entry = original(self)
        if self.name == "Grep":
            parameters = dict(entry["function"]["parameters"])
            properties = dict(parameters["properties"])
            properties["glob"] = {**properties["glob"], "type": "STRING"}
            entry["function"] = {
                **entry["function"],
                "parameters": {**parameters, "properties": properties},
            }
        return entry

    patch(ToolSpec, "to_wire", to_wire)


# P27: text holding a lone surrogate is written with the surrogate replaced, not refused.
@variant("lone-surrogate-written-replaced")
def _lone_surrogate_written_replaced() -> None:
    def encode(tool: str, field: str, text: str) -> bytes:
        return text.encode("utf-8", "replace")

    patch(files, "_encode", encode)


@variant("plan-refusal-reads-unchecked-input")
def _plan_refusal_reads_unchecked_input() -> None:
    # R1.5, P27, P9: the Plan refusal of a Write or Edit names the file it refused, read
    # from the call's input before any try: an input outside the tool's shape raises out of
    # the call instead of failing it, so the whole turn fails and no result is reported.
    run_call = turns.TurnRunner._run_call

    async def naming_the_path(
        self: turns.TurnRunner, session: SessionRow, turn_id: str, call: Any, unattended: bool
    ) -> Any:
        if session.mode == "plan" and call.name in ("Write", "Edit"):
            args = turns.validate_args(turns._SPECS[call.name], turns._arguments(call))
            return turns._failure(
                HostError("TOOL_DENIED", f"{call.name} of {args['path']} is not available in Plan")
            )
        return await run_call(self, session, turn_id, call, unattended)

    patch(turns.TurnRunner, "_run_call", naming_the_path)


_INODES: weakref.WeakKeyDictionary[object, dict[str, int]] = weakref.WeakKeyDictionary()


@variant("artifact-identity-by-inode")
def _artifact_identity_by_inode() -> None:
    # P13: the bytes at the artifact's path decide; a new file there holding the recorded
    # bytes (an editor's save through a rename) can be approved. This host reads "the
    # approval's own file" as the file it wrote: it records the artifact's inode at
    # submission and refuses any other file in its place as modified, bytes unread.
    submit = Approvals.submit
    verified_content = Approvals.verified_content

    async def remember_inode(
        self: Approvals, session: SessionRow, turn_id: str, args: dict[str, Any]
    ) -> ApprovalRow:
        row = await submit(self, session, turn_id, args)
        if session.workspace_root and row.artifact_path:
            path = Path(session.workspace_root) / row.artifact_path
            _INODES.setdefault(self.host, {})[row.id] = path.stat().st_ino
        return row

    async def same_inode(self: Approvals, session: SessionRow, row: ApprovalRow) -> bytes:
        recorded = _INODES.setdefault(self.host, {}).get(row.id)
        if recorded is not None and session.workspace_root and row.artifact_path:
            path = Path(session.workspace_root) / row.artifact_path
            with contextlib.suppress(OSError):
                found = path.lstat()
                if stat.S_ISREG(found.st_mode) and found.st_ino != recorded:
                    raise HostError("ARTIFACT_MODIFIED", f"{row.artifact_path} is another file")
        return await verified_content(self, session, row)

    patch(Approvals, "submit", remember_inode)
    patch(Approvals, "verified_content", same_inode)


CASES = [
    BrokenCase(
        "artifact-identity-by-inode",
        "artifact_integrity",
        "saved_again_as_a_new_file",
        "P13",
        "ARTIFACT_MODIFIED",
    ),
    BrokenCase(
        "plan-refusal-reads-unchecked-input",
        "plan_tools",
        "planning_with_unreadable_input and without_content",
        "P9",
        "the host reported no result for the Write call",
    ),
    BrokenCase(
        "lone-surrogate-written-replaced",
        "plan_tools",
        "half_a_surrogate_pair",
        "P27",
        "expected INVALID_TOOL_INPUT",
    ),
    BrokenCase(
        "tool-parameters-not-a-schema",
        "plan_tools",
        "the_model_is_offered_exactly_the_planning_tools_also_after",
        "R1.4",
        "are not a valid JSON Schema",
    ),
    # P30
    BrokenCase(
        "no-project-tools-use-a-folder-of-their-own",
        PT,
        "file_tool_in_a_session_without_a_project",
        "P30",
        "expected WORKSPACE_REQUIRED",
    ),
    # R1.4
    BrokenCase(
        "offers-write-in-plan", PT, "exactly_the_planning_tools", "R1.4", "the host offered"
    ),
    BrokenCase(
        "offers-agent-tools-after-a-tool-call",
        PT,
        "exactly_the_planning_tools",
        "R1.4",
        "in request 2 of the turn",
    ),
    # R1.5
    BrokenCase(
        "plugin-tools-unknown-in-plan",
        PT,
        "while_planning_is_refused and mcp__",
        "R1.5",
        "stopped with UNKNOWN_TOOL, expected TOOL_DENIED",
    ),
    BrokenCase(
        "edit-allowed-in-plan",
        PT,
        "while_planning_is_refused and Edit",
        "R1.5",
        "the Edit call ran",
    ),
    # R1.9
    BrokenCase("offers-exit-plan-mode", PT, "no_tool_to_leave", "R1.9", "ExitPlanMode was offered"),
    BrokenCase(
        "exit-plan-mode-switches-to-agent",
        PT,
        "refused_as_an_unknown_tool and Plan",
        "R1.9",
        "the ExitPlanMode call ran",
    ),
    # P9
    BrokenCase(
        "missing-file-is-tool-failed",
        PT,
        "ordinary_tool_failure",
        "P9",
        "stopped with TOOL_FAILED, expected FILE_NOT_FOUND",
    ),
    BrokenCase(
        "edit-no-match-is-invalid-input",
        PT,
        "ordinary_tool_failure",
        "P9",
        "expected EDIT_NO_MATCH",
    ),
    BrokenCase(
        "refusals-reported-as-errors",
        PT,
        "refused_as_an_unknown_tool",
        "P9",
        "the catalog's toolResultStatus",
    ),
    BrokenCase(
        "a-refusal-ends-the-turn",
        PT,
        "while_planning_is_refused and Write",
        "P9",
        "after a refused call",
    ),
    BrokenCase("announces-results-twice", PT, "gets_exactly_one_result", "P9", "results for one"),
    BrokenCase(
        "renames-tool-calls-in-history",
        PT,
        "reading_a_file_gives_the_model_its_text",
        "P10",
        "was never given the result of its Read call",
    ),
    BrokenCase(
        "wraps-the-prompt",
        "scheduled_plan",
        "task_changed_to_agent_runs_unattended",
        "R6.3",
        "the run asked the model",
    ),
    BrokenCase(
        "host-chosen-tool-call-ids",
        PT,
        "gets_exactly_one_result",
        "P9",
        "call was announced 0 times",
    ),
    BrokenCase(
        "no-result-for-unknown-tools",
        PT,
        "gets_exactly_one_result",
        "P9",
        "reported no result",
    ),
    # P10
    BrokenCase("read-returns-a-summary", PT, "reading_a_file", "P10", "was not given"),
    BrokenCase(
        "glob-top-folder-only", PT, "files_by_pattern", "P10", "was not given 'src/cache.py'"
    ),
    BrokenCase(
        "grep-lists-files-only", PT, "searching_the_project", "P10", "was not given 'evict_oldest'"
    ),
    BrokenCase(
        "browser-preview-without-fetching",
        PT,
        "previewing_a_local_page",
        "P10",
        "did not fetch the local page",
    ),
    BrokenCase(
        "bash-simulated-in-plan",
        PT,
        "runs_while_planning",
        "P10",
        "was not given 'planning-probe-42'",
    ),
    BrokenCase(
        "enter-plan-mode-does-nothing",
        PT,
        "entering_plan_mode",
        "P10",
        "after EnterPlanMode offered",
    ),
    BrokenCase(
        "new-context-keeps-the-history", PT, "new_context", "P10", "the model was still given"
    ),
    BrokenCase(
        "new-context-drops-the-summary",
        PT,
        "new_context",
        "P10",
        "the model was not given the summary",
    ),
    BrokenCase(
        "edit-reports-ok-without-writing",
        PT,
        "editing_a_file",
        "P10",
        "notes.txt holds b'the cache lives in memory",
    ),
    # P27
    BrokenCase(
        "tools-check-only-submit-plan",
        PT,
        "published_input",
        "P27",
        "expected INVALID_TOOL_INPUT",
    ),
    BrokenCase(
        "bash-timeout-without-limit",
        PT,
        "published_input and hour",
        "P27",
        "the Bash call ran, expected INVALID_TOOL_INPUT",
    ),
    # P23
    BrokenCase(
        "browser-preview-fetches-any-host",
        PT,
        "not_on_the_loopback",
        "P23",
        "the BrowserPreview call ran, expected BROWSER_PREVIEW_REFUSED",
    ),
    BrokenCase(
        "browser-preview-refuses-after-fetching",
        PT,
        "not_on_the_loopback",
        "P23",
        "BrowserPreview fetched",
    ),
    # P22
    BrokenCase(
        "grep-without-budget",
        PT,
        "runaway_search and nested",
        "P22",
        "was not served while the search ran",
        slow=True,
        # the engine holds the interpreter once the match has begun; a request served
        # just before then leaves the search that never ends to be reported
        or_reason="the search did not end within",
    ),
    BrokenCase(
        "grep-budget-reported-as-no-matches",
        PT,
        "runaway_search and overlapping",
        "P22",
        "without the matching file",
    ),
    BrokenCase(
        "grep-on-the-event-loop",
        PT,
        "runaway_search and overlapping",
        "P22",
        "the other session was",
    ),
    # R1.6
    BrokenCase(
        "accepts-submit-plan-beside-another-call",
        SP,
        "beside_another_call and Read",
        "R1.6",
        "the Read call ran",
    ),
    BrokenCase(
        "refuses-only-the-submit-plan-of-a-batch",
        SP,
        "beside_another_call and Glob",
        "R1.6",
        "the Glob call ran",
    ),
    BrokenCase(
        "accepts-the-first-of-two-plans",
        SP,
        "two_plans_in_one_message",
        "R1.6",
        "the SubmitPlan call ran",
    ),
    # R1.7
    BrokenCase(
        "submit-plan-accepted-outside-plan",
        SP,
        "submitplan_in_agent_mode",
        "R1.7",
        "the SubmitPlan call ran",
    ),
    BrokenCase(
        "submit-plan-accepted-outside-plan",
        SP,
        "approved_plan_is_carried_out",
        "R1.7",
        "the SubmitPlan call ran",
        label="execution",
    ),
    # R1.8
    BrokenCase(
        "submit-plan-extra-fields-accepted",
        SP,
        "malformed_submission and steps",
        "R1.8",
        "the SubmitPlan call ran",
    ),
    BrokenCase(
        "submit-plan-fields-coerced",
        SP,
        "malformed_submission and number",
        "R1.8",
        "the SubmitPlan call ran",
    ),
    # R1.11, C7
    BrokenCase(
        "revision-replaces-the-ended-record",
        SP,
        "revised_by_a_new_turn",
        "R1.11",
        "expected the first and the revised approval",
    ),
    BrokenCase(
        "pending-kept-after-reject",
        SP,
        "revised_by_a_new_turn and rejected",
        "R1.11",
        "APPROVAL_PENDING",
        label="pending",
    ),
    BrokenCase(
        "revision-overwrites-the-earlier-artifact",
        SP,
        "revised_by_a_new_turn",
        "C7",
        "the revision was written into the earlier plan's file",
    ),
    # P11
    BrokenCase(
        "asks-the-model-again-after-submit-plan",
        SP,
        "submitting_a_plan_ends_the_turn",
        "P11",
        "not completed",
    ),
    BrokenCase("plan-turn-ends-cancelled", SP, "after_looking_around", "P11", "not completed"),
    # R2.1, R2.7
    BrokenCase(
        "truncates-large-plans", AI, "byte_for_byte and MiB", "R2.1", "artifact bytes differ"
    ),
    BrokenCase(
        "normalises-unicode", AI, "byte_for_byte and decomposed", "R2.1", "artifact bytes differ"
    ),
    BrokenCase(
        "normalises-line-endings",
        AI,
        "byte_for_byte and CRLF",
        "R2.7",
        "artifact bytes differ from the submitted markdown",
    ),
    BrokenCase("prepends-title", AI, "title_and_question_stay_out", "R2.7", "the title was added"),
    BrokenCase(
        "appends-question", AI, "title_and_question_stay_out", "R2.7", "the question was added"
    ),
    # R2.2, R2.3, R2.8
    BrokenCase(
        "artifact-in-a-plans-folder",
        AI,
        "new_markdown_file_in_the_plan_folder",
        "R2.2",
        "artifact.path\n  String should match pattern",
    ),
    BrokenCase(
        "artifact-named-txt",
        AI,
        "new_markdown_file_in_the_plan_folder",
        "R2.2",
        "artifact.path\n  String should match pattern",
    ),
    BrokenCase(
        "artifact-named-after-the-title",
        AI,
        "looks_like_a_path and escape",
        "R2.3",
        "the submission wrote",
    ),
    BrokenCase(
        "recreates-a-missing-project-folder",
        AI,
        "disappeared",
        "R2.8",
        "the SubmitPlan call ran",
    ),
    # R2.4, R2.5, R2.9
    BrokenCase(
        "reuses-file-name",
        AI,
        "two_identical_submissions",
        "R2.4",
        "submissions share artifact paths",
    ),
    BrokenCase(
        "content-addressed-names",
        AI,
        "two_identical_submissions",
        "R2.4",
        "2 plans were submitted, the host lists 1",
    ),
    BrokenCase(
        "marks-earlier-plans-superseded",
        AI,
        "already_in_the_plan_folder",
        "R2.5",
        "was overwritten",
    ),
    BrokenCase(
        "marks-earlier-plans-superseded",
        AI,
        "already_in_the_plan_folder",
        "R2.9",
        "was overwritten",
        label="exclusive",
    ),
    # R2.10, R2.12
    BrokenCase("commits-row-before-flush", AI, "failed_flush", "R2.10", "the host lists approvals"),
    BrokenCase("never-flushes", AI, "failed_flush", "R2.10", "the SubmitPlan call ran"),
    BrokenCase("follows-symlinked-pi", AI, "symlink", "R2.12", "the SubmitPlan call ran"),
    # R2.11, C1
    BrokenCase("records-wrong-hash", AI, "recorded_hash_and_size", "R2.11", "file hashes to"),
    BrokenCase("records-wrong-size", AI, "recorded_hash_and_size", "R2.11", "the file has"),
    BrokenCase(
        "reports-size-in-characters",
        AI,
        "byte_for_byte and BMP",
        "C1",
        "the host reports",
    ),
    # R3.2
    BrokenCase(
        "opens-the-artifact-as-text",
        AI,
        "exact_bytes and CRLF",
        "R3.2",
        "opening the plan returned",
    ),
    # C9, C10
    BrokenCase(
        "deletes-the-artifact-on-reject", AI, "stays_as_written and rejects", "C9", "is gone"
    ),
    BrokenCase("deletes-the-artifact-on-expiry", AI, "stays_as_written and time", "C9", "is gone"),
    BrokenCase(
        "stamps-the-artifact-on-approval",
        AI,
        "stays_as_written and carried",
        "C10",
        "the artifact now holds",
    ),
    BrokenCase(
        "no-plan-folder-guard",
        AI,
        "while_executing_the_plan and write",
        "C10",
        "expected TOOL_DENIED",
    ),
    # P12
    BrokenCase(
        "no-plan-folder-guard",
        AI,
        "cannot_write_into_the_plan_folder and overwrite",
        "P12",
        "expected TOOL_DENIED",
        label="agent",
    ),
    BrokenCase(
        "guards-existing-artifacts-only",
        AI,
        "cannot_write_into_the_plan_folder and new",
        "P12",
        "expected TOOL_DENIED",
    ),
    BrokenCase(
        "guards-the-path-text",
        AI,
        "cannot_write_into_the_plan_folder and (roundabout or linked)",
        "P12",
        "expected TOOL_DENIED",
    ),
    # P13
    BrokenCase(
        "approves-a-changed-artifact",
        AI,
        "not_approved and extended",
        "P13",
        "expected the host to refuse",
    ),
    BrokenCase(
        "checks-the-size-only",
        AI,
        "not_approved and changed",
        "P13",
        "expected the host to refuse",
    ),
    BrokenCase(
        "opens-a-changed-artifact",
        AI,
        "not_approved and extended",
        "P13",
        "opening the plan returned",
    ),
    BrokenCase(
        "reads-the-artifact-through-a-link",
        AI,
        "not_approved and link",
        "P13",
        "expected the host to refuse",
    ),
    BrokenCase(
        "missing-artifact-reported-as-modified",
        AI,
        "not_approved and deleted",
        "P13",
        "not ARTIFACT_UNREADABLE",
    ),
    BrokenCase(
        "busy-after-a-refused-approval",
        AI,
        "not_approved and extended",
        "P13",
        "the session still shows an active turn or execution",
    ),
    BrokenCase(
        "empty-arguments-tool-failed",
        "plan_tools",
        "empty_arguments",
        "P27",
        "was stopped with TOOL_FAILED, expected INVALID_TOOL_INPUT",
    ),
]
