"""Broken hosts: a held-out set (exception handling done in the usual wrong ways), written
from the contract alone."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from hosts.registry import BrokenCase, patch, variant

log = logging.getLogger("reference_host.heldout")


# R4.6 (docs "Execution and restart"): approve is one transaction; "A failed approval (the
# `approvalCommit` fault makes its transaction fail) is answered with INTERNAL_ERROR, leaves
# the approval pending and the session as it was, and the plan can then be approved again."
# Bug: the approve records the decision on the approval row first (its own write) and only
# then switches the session inside the transaction; the fault rolls back the session
# change, but the approval row already reads `approved` with an execution id and `queued`.
# Observed: after the INTERNAL_ERROR, plan_approvals / approval/get show the approval
# approved (status, decidedAt, permissionMode, executionId); a second approve gets
# APPROVAL_NOT_PENDING. Recipe: Plan turn submits a plan; conformance/fault/arm
# approvalCommit; approval/approve -> INTERNAL_ERROR; approval/get (or read the row).
@variant("exc-approve-row-before-commit")
def approve_row_before_commit() -> None:
    from reference_host import approvals as approvals_module
    from reference_host import state
    from reference_host.approvals import Approvals, approval_wire
    from reference_host.errors import HostError
    from reference_host.state import PermissionMode

    async def approve(
        self: Approvals, session_id: str, approval_id: str, mode: PermissionMode
    ) -> dict[str, Any]:
        host = self.host
        row = await self.require(session_id, approval_id)
        await host.turns.settle(session_id, row.turn_id)
        await self._ensure_decidable(row)
        activity = host.activity_of(session_id)
        if activity.active_execution_id is not None:
            raise HostError("EXECUTION_ACTIVE", "another execution is queued or running")
        session = await host.require_session(session_id)
        content = await self.verified_content(session, row)
        now = host.clock.now_ms()
        approved = approvals_module._with(
            row,
            state.approve(approvals_module._facts(row), mode, host.new_id("exe")),
            decided_at=now,
        )
        agent = replace(session, mode="agent", permission_mode=mode, updated_at=now)
        # the decision is recorded as soon as it is made ...
        await host.storage.update_approval(approved)
        # ... and the session switch is the transaction
        async with host.storage.transaction() as conn:
            await host.storage.write_session(conn, agent)
            if host.faults.take("approvalCommit"):
                raise HostError("INTERNAL_ERROR", "injected failure before the approval commit")
        host.set_activity(
            session_id, pending_approval_id=None, active_execution_id=approved.execution_id
        )
        host.notify("approval/updated", {"approval": approval_wire(approved)})
        self._notify_execution(approved, None)
        session_wire = await host.publish_session(session_id)
        if not host.faults.take("holdExecution"):
            prompt = approvals_module._execution_prompt(approved, content)
            try:
                await host.turns.start(agent, "execution", prompt, approved)
            except BaseException:
                try:
                    await self.execution_finished(approved.id, "interrupted")
                finally:
                    host.set_activity(session_id, active_execution_id=None)
                raise
        return {"approval": approval_wire(approved), "session": session_wire}

    patch(Approvals, "approve", approve)


# P13 (docs "Plan artifacts", Integrity): "Any change to the bytes ... is ARTIFACT_MODIFIED;
# a missing file or one that is not a regular file is ARTIFACT_UNREADABLE."
# Bug: the integrity check is wrapped in one `except HostError` that reports every failure
# of "reading the artifact back" as ARTIFACT_UNREADABLE, so a changed file (a subclass of
# the failure, in the author's mind) gets the parent's code.
# Observed: approve / artifact/read of an artifact whose bytes were changed answer
# ARTIFACT_UNREADABLE (-32034) instead of ARTIFACT_MODIFIED (-32035).
# Recipe: submit a plan; append a byte to the artifact file; approval/approve (or
# artifact/read) -> expect ARTIFACT_MODIFIED.
@variant("exc-modified-reported-unreadable")
def modified_reported_unreadable() -> None:
    from reference_host import approvals as approvals_module
    from reference_host.artifacts import read_verified
    from reference_host.errors import HostError

    def checked(root: str, relative_path: str, sha256: str, byte_size: int) -> bytes:
        try:
            return read_verified(root, relative_path, sha256, byte_size)
        except HostError as exc:
            raise HostError(
                "ARTIFACT_UNREADABLE", f"the artifact {relative_path} cannot be used: {exc}"
            ) from exc

    patch(approvals_module, "read_verified", checked)


# R2.10, R2.12 (docs "Plan artifacts"): flush the bytes before the approval row commits; "a
# write or flush that fails, for whatever reason ... is ARTIFACT_WRITE_FAILED. Either way no
# approval and no execution is created."
# Bug: the fsync of the artifact is treated as best effort: its OSError is caught and
# logged ("the data is written, the flush is only for power loss"), so the submission
# goes on and creates the approval.
# Observed: with the artifactFlush fault armed, SubmitPlan's tool result is `ok`, an
# approval/updated announces a pending approval and the turn ends with the plan pending.
# Recipe: conformance/fault/arm artifactFlush; a Plan turn calls SubmitPlan -> expect
# turn/toolResult error ARTIFACT_WRITE_FAILED and no plan_approvals row.
@variant("exc-flush-error-logged")
def flush_error_logged() -> None:
    from reference_host import artifacts
    from reference_host.errors import HostError

    def write_all(fd: int, content: bytes, fault: artifacts.FaultCheck) -> None:
        try:
            if fault("artifactWrite"):
                raise OSError(errno.EIO, "injected artifact write failure")
            view = memoryview(content)
            while view:
                written = os.write(fd, view)
                view = view[written:]
        except OSError as exc:
            raise HostError("ARTIFACT_WRITE_FAILED", f"writing the artifact failed: {exc}") from exc
        try:
            if fault("artifactFlush"):
                raise OSError(errno.EIO, "injected artifact flush failure")
            os.fsync(fd)
        except OSError:
            log.warning("flushing the artifact failed; its bytes are written", exc_info=True)

    patch(artifacts, "_write_all", write_all)


# P25 (docs "The model provider"): a streamed answer "with a `data` piece that is not JSON
# or not a JSON object (also when `[DONE]` follows), ends the turn `failed` with
# PROVIDER_ERROR, as an HTTP error does".
# Bug: the provider call maps only transport failures (http, stream, timeout) to
# PROVIDER_ERROR and lets a "protocol" ProviderError (a chunk it could not parse) through,
# reasoning that it is the host's own parsing problem; the turn's generic `except
# Exception` then ends the turn `failed` with INTERNAL_ERROR.
# Observed: turn/ended {outcome: failed, error.code: INTERNAL_ERROR}.
# Recipe: prompt; the provider streams `data: not json` (or `data: [1]`) -> expect
# turn/ended failed with PROVIDER_ERROR.
@variant("exc-bad-chunk-internal-error")
def bad_chunk_internal_error() -> None:
    from reference_host import turns
    from reference_host.errors import HostError
    from reference_host.provider_client import (
        AssistantReply,
        ProviderConfig,
        ProviderError,
        complete,
    )
    from reference_host.storage import SessionRow
    from reference_host.turns import TurnRunner

    async def ask_model(
        self: TurnRunner, session: SessionRow, turn_id: str, messages: list[dict[str, Any]]
    ) -> AssistantReply:
        if session.provider_base_url is None or session.model is None:
            raise HostError("PROVIDER_NOT_CONFIGURED", "the session has no model provider")
        config = ProviderConfig(
            session.provider_base_url, session.model, os.environ.get(turns.API_KEY_ENV) or None
        )

        async def on_text(text: str) -> None:
            self.host.notify(
                "turn/text", {"sessionId": session.id, "turnId": turn_id, "text": text}
            )

        try:
            return await complete(
                self.host.http, config, messages, turns.offered_tools(session.mode), on_text
            )
        except ProviderError as error:
            if error.kind == "protocol":
                raise  # our parser's problem, not the provider's
            raise HostError(
                "PROVIDER_ERROR", str(error), {"kind": error.kind, "status": error.status}
            ) from error

    patch(TurnRunner, "_ask_model", ask_model)


# R6.1/R6.2 with docs "Ordering": "One move can make many timers due ... each of them fires
# in that move ... and one that is refused (a Plan task) does not keep the others from
# firing"; conformance/clock/set and advance answer {"now"} (their error list has no
# PLAN_REQUIRES_INTERACTIVE_SESSION).
# Bug: the timer callback of a scheduled task no longer swallows the refusal that
# `run` has already recorded and announced; it propagates out of the clock's timer loop,
# so the clock call itself is answered with PLAN_REQUIRES_INTERACTIVE_SESSION and the
# timers due after it in the same move do not fire (until some later move).
# Recipe: task/create a Plan task and an Agent task (or a pending approval) both due
# within one move; conformance/clock/advance past both -> expect a {"now"} answer, a
# `refused` task/runFinished and the other timer's effect before the answer.
@variant("exc-plan-refusal-escapes-timer")
def plan_refusal_escapes_timer() -> None:
    from reference_host.tasks import Tasks

    async def fire(self: Tasks, task_id: str) -> None:
        self._timers.pop(task_id, None)
        row = await self.host.storage.get_task(task_id)
        if row is None or not row["enabled"]:
            return
        await self.host.storage.update_task(task_id, {"run_at": None})
        await self.run(row)

    patch(Tasks, "_fire", fire)


# R4.5 (docs "Execution and restart"): when the execution turn ends its execution is
# "`completed` when the turn completed ..., `interrupted` when it did not (cancelled,
# failed, or cut off by a restart)".
# Bug: the turn's end maps only a cancellation to `interrupted`; every other ending,
# including a turn that failed with PROVIDER_ERROR (or INTERNAL_ERROR), records and
# announces the execution `completed`.
# Observed: an execution whose turn ended `failed` reads executionState `completed` in
# execution/updated, approval/updated, approval/get and plan_approvals.
# Recipe: submit and approve a plan; the execution turn's provider request gets HTTP 400;
# turn/ended failed PROVIDER_ERROR -> expect executionState `interrupted`.
@variant("exc-failed-execution-completed")
def failed_execution_completed() -> None:
    from reference_host.errors import HostError
    from reference_host.ports import TurnEnded
    from reference_host.state import ExecutionState
    from reference_host.storage import ApprovalRow
    from reference_host.turns import TurnRunner

    async def end(
        self: TurnRunner,
        session_id: str,
        turn_id: str,
        approval: ApprovalRow | None,
        on_end: TurnEnded | None,
        outcome: str,
        error: HostError | None,
    ) -> None:
        host = self.host
        await host.storage.end_turn(turn_id, outcome, host.clock.now_ms())
        if approval is not None:
            final: ExecutionState = "interrupted" if outcome == "cancelled" else "completed"
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

    patch(TurnRunner, "_end", end)


# Docs "Errors and tool results": "A request answered with an error changes nothing,
# whatever else it named: a session/configure refused for one setting (an unknown shell,
# say) applies none of the others."
# Bug: session/configure applies the settings one after the other, each stored as it is
# validated; an unknown shellId, checked last, is refused with SHELL_NOT_FOUND after the
# mode / permission mode / provider were already written.
# Observed: SHELL_NOT_FOUND answered, but session/get and the sessions row show the new
# mode (no session/updated announced it).
# Recipe: session/configure {mode: plan, shellId: "no-such-shell"} on an idle Agent
# session -> SHELL_NOT_FOUND; session/get -> expect mode still agent.
@variant("exc-configure-partial-apply")
def configure_partial_apply() -> None:
    from reference_host import host as host_module
    from reference_host.host import Host
    from reference_host.state import ensure_idle_for

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        ensure_idle_for(self.activity_of(row.id), "configuration change")
        if "mode" in params:
            row = replace(row, mode=params["mode"])
        if "permissionMode" in params:
            row = replace(row, permission_mode=params["permissionMode"])
        if "provider" in params:
            row = replace(
                row,
                provider_base_url=params["provider"]["baseUrl"],
                model=params["provider"]["model"],
            )
        row = replace(row, updated_at=self.clock.now_ms())
        await self.storage.update_session(row)
        if "shellId" in params:
            if params["shellId"] is not None:
                host_module._require_shell(params["shellId"])
            row = replace(row, shell_id=params["shellId"])
            await self.storage.update_session(row)
        wire = self.session_wire(row)
        self.notify("session/updated", {"session": wire})
        return {"session": wire}

    patch(Host, "session_configure", session_configure)


# P29 (docs "Scheduled tasks"): "a root that session/create would refuse, relative,
# missing or not a folder, is refused with WORKSPACE_INVALID and creates no task".
# Bug: task/create writes the row first and validates the root afterwards ("the row is
# harmless until it runs"); the refusal is answered but nothing takes the row back.
# Observed: task/create -> WORKSPACE_INVALID, yet task/list lists the task and
# scheduled_tasks holds its row.
# Recipe: task/create with workspaceRoot "/no/such/folder" -> WORKSPACE_INVALID;
# task/list -> expect no task.
@variant("exc-task-row-before-root-check")
def task_row_before_root_check() -> None:
    from reference_host.tasks import Tasks
    from reference_host.workspace import validate_root

    async def create(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        root = params["workspaceRoot"]
        now = self.host.clock.now_ms()
        row = {
            "id": self.host.new_id("task"),
            "name": params["name"],
            "prompt": params["prompt"],
            "mode": params["mode"],
            "workspace_root": root,
            "provider_base_url": params["provider"]["baseUrl"],
            "model": params["provider"]["model"],
            "permission_mode": params.get("permissionMode", "ask"),
            "run_at": params.get("runAt"),
            "enabled": int(params.get("enabled", True)),
            "created_at": now,
            "updated_at": now,
        }
        await self.host.storage.insert_task(row)
        if root is not None:
            validate_root(root)
        if row["enabled"]:
            self._arm(row["id"], row["run_at"])
        return {"task": await self.wire(row)}

    patch(Tasks, "create", create)


# R7.1 (docs "The initialize handshake"): "Any other value gets
# UNSUPPORTED_PROTOCOL_VERSION, with `details.supported` listing what you speak: exactly
# `[9]`". The catalog: "details.supported lists what the host speaks."
# Bug: the refusal is raised like every other error, code and message only; error.data
# has no details.
# Observed: initialize {protocolVersion: 8} -> error.data = {code, message}, no details.
# Recipe: initialize with protocolVersion 8 -> expect error.data.details.supported == [9].
@variant("exc-version-refusal-no-details")
def version_refusal_no_details() -> None:
    from pi_contract import PROTOCOL_VERSION
    from reference_host.errors import HostError
    from reference_host.host import Host

    original = Host.initialize

    async def initialize(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        if not self.initialized and params["protocolVersion"] != PROTOCOL_VERSION:
            raise HostError(
                "UNSUPPORTED_PROTOCOL_VERSION",
                f"this host speaks protocol version {PROTOCOL_VERSION} only",
            )
        return await original(self, params)

    patch(Host, "initialize", initialize, wraps=True)


# P7 (docs "Approval", permission modes): "A second answer to the same question, an answer
# to an id never asked, or one to the question of a turn that has ended (a cancelled one
# included) gets PERMISSION_REQUEST_NOT_FOUND and changes nothing."
# Bug: the broker forgets a question only once it was answered (the cleanup is after the
# await, not in a `finally`), and permission/respond checks only that the id is known; an
# answer to the question of a cancelled turn sets the result of a cancelled future, whose
# InvalidStateError the dispatcher reports as INTERNAL_ERROR.
# Recipe: permissionMode ask; the model calls Bash; permission/requested arrives;
# session/cancel; permission/respond {requestId, decision: allow} -> expect
# PERMISSION_REQUEST_NOT_FOUND (observed: INTERNAL_ERROR).
@variant("exc-respond-after-cancel-internal")
def respond_after_cancel_internal() -> None:
    from reference_host import permissions
    from reference_host.errors import HostError
    from reference_host.ids import new_id
    from reference_host.permissions import PermissionBroker

    async def ask(
        self: PermissionBroker, session_id: str, turn_id: str, tool: str, tool_input: Any
    ) -> bool:
        request_id = new_id("perm")
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._open[request_id] = permissions._Request(session_id, answer)
        self._notify(
            "permission/requested",
            {
                "sessionId": session_id,
                "turnId": turn_id,
                "requestId": request_id,
                "tool": tool,
                "input": tool_input,
            },
        )
        allowed = await answer
        self._open.pop(request_id, None)
        return allowed

    def respond(self: PermissionBroker, request_id: str, decision: str) -> None:
        request = self._open.get(request_id)
        if request is None:
            raise HostError(
                "PERMISSION_REQUEST_NOT_FOUND", f"no open permission request {request_id!r}"
            )
        request.answer.set_result(decision == "allow")

    patch(PermissionBroker, "ask", ask)
    patch(PermissionBroker, "respond", respond)


# P9 / docs "Errors and tool results": "a Read or Edit of a missing file is
# FILE_NOT_FOUND, an Edit whose `old_string` is absent is EDIT_NO_MATCH".
# Bug: Edit catches the lookup failure of its file together with the failed search
# ("nothing to replace in it") and reports both as EDIT_NO_MATCH.
# Observed: Edit of a path that does not exist -> turn/toolResult status error,
# error.code EDIT_NO_MATCH.
# Recipe: Agent turn, permissionMode auto; the model calls Edit {path: "missing.txt",
# old_string: "a", new_string: "b"} -> expect FILE_NOT_FOUND.
@variant("exc-edit-missing-file-no-match")
def edit_missing_file_no_match() -> None:
    from reference_host.errors import HostError
    from reference_host.tools.files import Edit

    original = Edit._edit

    def edit(root: Path, relative: str, old: str, new: str, replace_all: bool) -> str:
        try:
            return original(root, relative, old, new, replace_all)
        except HostError as exc:
            if exc.code in ("FILE_NOT_FOUND", "EDIT_NO_MATCH"):
                raise HostError(
                    "EDIT_NO_MATCH", f"Edit: nothing to replace in {relative}", {"path": relative}
                ) from exc
            raise

    patch(Edit, "_edit", staticmethod(edit))


# P23 (docs "Planning", BrowserPreview): "A redirect names a new URL under the same rule:
# one that leaves loopback is refused the same way [BROWSER_PREVIEW_REFUSED, status
# denied], without contacting it."
# Bug: the fetch loop is wrapped in a broad `except Exception` meant for network
# failures; the refusal raised for a redirect hop inside that loop is caught by it and
# reported as TOOL_FAILED (status error). The first URL, checked before the loop, is still
# refused correctly, and nothing off loopback is contacted.
# Recipe: the model calls BrowserPreview on a loopback page that answers 302 to
# http://<non-loopback address>/ -> expect status denied, BROWSER_PREVIEW_REFUSED.
@variant("exc-redirect-refusal-tool-failed")
def redirect_refusal_tool_failed() -> None:
    import httpx

    from reference_host.errors import HostError
    from reference_host.tools import browser
    from reference_host.tools.base import ToolContext, validate_args
    from reference_host.tools.browser import BrowserPreview

    async def run(self: BrowserPreview, ctx: ToolContext, args: dict[str, Any]) -> str:
        args = validate_args(self.spec, args)
        url = browser._checked_url(args["url"])
        try:
            async with (
                asyncio.timeout(browser.TIMEOUT_SECONDS),
                httpx.AsyncClient(
                    timeout=browser.TIMEOUT_SECONDS, follow_redirects=False, trust_env=False
                ) as client,
            ):
                for _ in range(browser.MAX_REDIRECTS + 1):
                    async with client.stream("GET", url) as response:
                        if response.has_redirect_location:
                            url = browser._checked_url(str(url.join(response.headers["location"])))
                            continue
                        text = await browser._capped_text(response)
                        return f"status: {response.status_code}\n\n{text}"
        except Exception as exc:
            reason = str(exc) or type(exc).__name__
            raise HostError(
                "TOOL_FAILED",
                f"BrowserPreview: fetching {url} failed: {reason}",
                {"url": str(url)},
            ) from exc
        raise HostError(
            "TOOL_FAILED",
            f"BrowserPreview: more than {browser.MAX_REDIRECTS} redirects starting at "
            f"{args['url']}",
            {"url": args["url"]},
        )

    patch(BrowserPreview, "run", run)


# C5 (docs "Commands and shells"): "Every command is recorded in command_audit ... and
# what `command/exited` reported (exit code, signal, `timed_out`, `cancelled`, ...)"; only
# a command ended by the host's clean stop may lack its row.
# Bug: Bash handles a cancellation with an `except asyncio.CancelledError: raise` placed
# before the handler of the command's own CommandCancelledError (a subclass of it), so the
# audit-writing handler is never reached and a cancelled command leaves no row.
# Observed: command/exited {cancelled: true} is sent, but command_audit has no row for
# that commandId.
# Recipe: Agent turn, permissionMode auto; Bash "sleep 30"; after command/started,
# session/cancel; turn/ended cancelled -> expect a command_audit row with cancelled = 1.
@variant("exc-cancel-skips-audit")
def cancel_skips_audit() -> None:
    from reference_host import shells, turns
    from reference_host.commands import CommandCancelledError, run_command
    from reference_host.errors import HostError
    from reference_host.storage import SessionRow
    from reference_host.turns import CallOutcome, TurnRunner

    async def bash(
        self: TurnRunner, session: SessionRow, turn_id: str, args: dict[str, Any]
    ) -> CallOutcome:
        host = self.host
        if session.workspace_root is None:
            raise HostError("WORKSPACE_REQUIRED", "Bash runs in the session's workspace")
        shell_id = session.shell_id or await host.default_shell_id()
        shell = shells.find(shell_id) if shell_id else None
        if shell is None:
            raise HostError("SHELL_NOT_FOUND", f"the shell {shell_id!r} is not on this machine")
        audit: dict[str, Any] = {
            "session_id": session.id,
            "turn_id": turn_id,
            "shell_id": shell.shell_id,
            "shell_path": shell.path,
            "command": args["command"],
            "cwd": session.workspace_root,
            "started_at": host.clock.now_ms(),
        }
        try:
            result = await run_command(
                shell=shell,
                command=args["command"],
                cwd=session.workspace_root,
                session_id=session.id,
                turn_id=turn_id,
                clock=host.clock,
                notify=host.notify,
                timeout_ms=args.get("timeout_ms", host.options.command_timeout_ms),
            )
        except asyncio.CancelledError:
            raise  # the turn is being cancelled: get out of the way
        except CommandCancelledError as cancelled:  # never reached: a CancelledError
            if not self.stopping:
                await self._audit(audit, cancelled.result)
            raise
        await self._audit(audit, result)
        if result.timed_out:
            error = HostError("COMMAND_TIMED_OUT", "the command exceeded its timeout")
            return replace(turns._failure(error), output=result.summary())
        return CallOutcome("ok", result.summary())

    patch(TurnRunner, "_bash", bash)


# R5.8/R5.9 (docs "Sessions, turns and boundaries": "Work and events stay in their
# session ..., also while other sessions are busy") and P25 (a provider error ends *that*
# turn `failed`; the session is idle and takes the next prompt).
# Bug: on a broken provider stream the turn's error handler "recovers" the HTTP client by
# closing the host's shared connection pool and building a new one for later requests;
# closing it also breaks every other session's provider request open at that moment, so
# another session's turn ends `failed` with PROVIDER_ERROR too.
# Recipe: two sessions with prompts in flight at once; session A's provider stream
# breaks off (no [DONE]) while session B's request is still open (B's answer held back);
# then let B's answer go -> expect B's turn to complete (observed: failed, PROVIDER_ERROR).
@variant("exc-stream-error-resets-shared-client")
def stream_error_resets_shared_client() -> None:
    from reference_host.errors import HostError
    from reference_host.provider_client import AssistantReply
    from reference_host.storage import SessionRow
    from reference_host.turns import TurnRunner

    original = TurnRunner._ask_model

    async def ask_model(
        self: TurnRunner, session: SessionRow, turn_id: str, messages: list[dict[str, Any]]
    ) -> AssistantReply:
        try:
            return await original(self, session, turn_id, messages)
        except HostError as error:
            details = error.details or {}
            if error.code == "PROVIDER_ERROR" and details.get("kind") == "stream":
                client = self.host.__dict__.pop("http", None)
                if client is not None:
                    with contextlib.suppress(Exception):
                        await client.aclose()
            raise

    patch(TurnRunner, "_ask_model", ask_model, wraps=True)


CASES = [
    BrokenCase(
        "exc-approve-row-before-commit",
        "approval",
        "failure_while_approving_changes_nothing",
        "R4.6",
        "the approval changed",
    ),
    BrokenCase(
        "exc-modified-reported-unreadable",
        "artifact_integrity",
        "plan_file_changed_on_disk_after_submission_is_not_approved",
        "P13",
        "ARTIFACT_UNREADABLE, not ARTIFACT_MODIFIED",
    ),
    BrokenCase(
        "exc-flush-error-logged",
        "artifact_integrity",
        "failed_flush_creates_no_approval",
        "R2.10",
        "expected ARTIFACT_WRITE_FAILED",
    ),
    BrokenCase(
        "exc-bad-chunk-internal-error",
        "sessions",
        "model_answer_that_breaks_off_ends_the_turn_as_failed and JSON",
        "P25",
        "INTERNAL_ERROR, expected failed with PROVIDER_ERROR",
    ),
    BrokenCase(
        "exc-plan-refusal-escapes-timer",
        "scheduled_plan",
        "plan_task_that_comes_due_is_refused_before_any_work",
        "R6.1",
        "clock/advance failed with PLAN_REQUIRES_INTERACTIVE_SESSION",
    ),
    BrokenCase(
        "exc-failed-execution-completed",
        "execution",
        "execution_whose_turn_fails_is_interrupted",
        "R4.5",
        "the execution was announced as",
    ),
    BrokenCase(
        "exc-configure-partial-apply",
        "sessions",
        "change_that_names_an_unknown_shell_beside_the_mode_changes_nothing",
        "P4",
        "a refused request changed",
    ),
    BrokenCase(
        "exc-task-row-before-root-check",
        "scheduled_plan",
        "task_for_a_project_that_is_not_a_folder_is_refused and exist",
        "P29",
        "the host created",
    ),
    BrokenCase(
        "exc-version-refusal-no-details",
        "handshake",
        "speaking_the_previous_version_is_refused",
        "R7.1",
        "details.supported",
    ),
    BrokenCase(
        "exc-respond-after-cancel-internal",
        "turn_boundaries",
        "question_of_a_cancelled_turn_can_no_longer_be_answered",
        "P7",
        "expected PERMISSION_REQUEST_NOT_FOUND",
    ),
    BrokenCase(
        "exc-edit-missing-file-no-match",
        "plan_tools",
        "ordinary_tool_failure_is_reported_with_its_code and edited",
        "P9",
        "EDIT_NO_MATCH, expected FILE_NOT_FOUND",
    ),
    BrokenCase(
        "exc-redirect-refusal-tool-failed",
        "plan_tools",
        "local_page_that_sends_the_preview_elsewhere",
        "P23",
        "TOOL_FAILED, expected BROWSER_PREVIEW_REFUSED",
    ),
    BrokenCase(
        "exc-cancel-skips-audit",
        "shell",
        "command_whose_turn_is_cancelled_is_recorded_for_audit",
        "C5",
        "command_audit holds 0 rows",
    ),
    BrokenCase(
        "exc-stream-error-resets-shared-client",
        "isolation",
        "breaks_off_in_one_session_leaves_another",
        "R5.9",
        "ended failed",
    ),
]
