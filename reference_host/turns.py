"""The agent loop: one turn at a time per session, prompt -> provider -> tools -> ...

Plan gating (§1) happens here: the tools offered to the model depend on the session's
mode, and every call is checked again by the host before it runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from reference_host import shells
from reference_host.commands import CommandCancelledError, CommandResult, run_command
from reference_host.errors import HostError, tool_result_status
from reference_host.jsontext import JsonTextError, integral, loads
from reference_host.permissions import needs_permission
from reference_host.ports import HostCore, TurnEnded
from reference_host.provider_client import (
    AssistantReply,
    ProviderConfig,
    ProviderError,
    ToolCall,
    ToolSpec,
    complete,
)
from reference_host.state import ExecutionState
from reference_host.storage import ApprovalRow, SessionRow
from reference_host.tools.agent_tools import (
    AGENT_TOOL_NAMES,
    BASH,
    EDIT_TOOLS,
    ENTER_PLAN_MODE,
    NEW_CONTEXT,
    PLAN_TOOL_NAMES,
    PLUGIN_PREFIXES,
    SUBMIT_PLAN,
)
from reference_host.tools.base import ToolContext, validate_args
from reference_host.tools.registry import by_name
from reference_host.workspace import resolve_inside

log = logging.getLogger(__name__)

MAX_STEPS = 64
API_KEY_ENV = "OPENAI_API_KEY"
_FILE_TOOLS = by_name()
_SPECS: dict[str, ToolSpec] = {
    **{name: tool.spec for name, tool in _FILE_TOOLS.items()},
    "SubmitPlan": SUBMIT_PLAN,
    "EnterPlanMode": ENTER_PLAN_MODE,
    "new_context": NEW_CONTEXT,
    "Bash": BASH,
}
_KNOWN = frozenset(_SPECS)


@dataclass(frozen=True)
class CallOutcome:
    """What one tool call produced."""

    status: str  # ok | error | denied
    output: str
    error: HostError | None = None
    ends_turn: bool = False


def offered_tools(mode: str) -> list[ToolSpec]:
    """The tool specs offered to the model in ``mode`` (§1 for Plan)."""
    names = PLAN_TOOL_NAMES if mode == "plan" else AGENT_TOOL_NAMES
    return [_SPECS[name] for name in names]


def _gate(mode: str, name: str) -> HostError | None:
    """The host's own refusal of a call, independent of what was offered (§1)."""
    if name.startswith(PLUGIN_PREFIXES):
        if mode == "plan":
            return HostError("TOOL_DENIED", f"{name} is a plugin tool; Plan denies plugin tools")
        return HostError("UNKNOWN_TOOL", f"no plugin provides {name}")
    if name not in _KNOWN:
        return HostError("UNKNOWN_TOOL", f"the host has no tool named {name!r}")
    if mode == "plan" and name not in PLAN_TOOL_NAMES:
        return HostError("TOOL_DENIED", f"{name} is not available while planning")
    if name == "SubmitPlan" and mode != "plan":
        return HostError("SUBMIT_PLAN_OUTSIDE_PLAN_TURN", "SubmitPlan is valid only in Plan")
    return None


def _arguments(call: ToolCall) -> Any:
    """The call's arguments parsed as strict JSON, or INVALID_TOOL_INPUT."""
    try:
        return integral(loads(call.arguments)) if call.arguments.strip() else {}
    except (JsonTextError, RecursionError) as exc:
        reason = str(exc) if isinstance(exc, JsonTextError) else "nested too deeply"
        raise HostError(
            "INVALID_TOOL_INPUT", f"{call.name}: the arguments are not JSON: {reason}"
        ) from exc


def _parse_arguments(call: ToolCall) -> Any:
    """The call's arguments as announced: parsed when they are JSON, else the raw text."""
    try:
        return _arguments(call)
    except HostError:
        return call.arguments


def _error_text(error: HostError) -> str:
    return f"error {error.code}: {error.message}"


def _failure(error: HostError) -> CallOutcome:
    """The outcome of a call that failed with ``error``; its status is the catalog's. A code
    that has no tool-result status is reported as TOOL_FAILED, naming the original code."""
    status = tool_result_status(error.code)
    if status is None:
        details = {**(error.details or {}), "cause": error.code}
        error = HostError("TOOL_FAILED", error.message, details)
        status = "error"
    return CallOutcome(status, _error_text(error), error)


class TurnRunner:
    """Runs turns as background tasks and reports them through notifications."""

    def __init__(self, host: HostCore) -> None:
        self.host = host
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.closing: set[asyncio.Task[None]] = set()  # turns whose work is done, being ended
        self.stopping = False

    # -- lifecycle ----------------------------------------------------------------------

    async def start(
        self,
        session: SessionRow,
        kind: str,
        user_text: str,
        approval: ApprovalRow | None = None,
        unattended: bool = False,
        on_end: TurnEnded | None = None,
    ) -> str:
        """Record a new active turn and run it in the background."""
        host = self.host
        turn_id = host.new_id("turn")
        user = {"role": "user", "content": user_text}
        await host.storage.start_turn(turn_id, session.id, kind, host.clock.now_ms(), user)
        host.set_activity(session.id, active_turn_id=turn_id)
        host.notify(
            "turn/started",
            {
                "sessionId": session.id,
                "turnId": turn_id,
                "kind": kind,
                "mode": session.mode,
                "approvalId": approval.id if approval else None,
                "executionId": approval.execution_id if approval else None,
            },
        )
        await host.publish_session(session.id)
        task = asyncio.create_task(self._run(session.id, turn_id, approval, unattended, on_end))
        self.tasks[session.id] = task
        return turn_id

    async def cancel(self, session_id: str) -> str | None:
        """Cancel the session's active turn and wait until it has ended."""
        task = self.tasks.get(session_id)
        turn_id = self.host.activity_of(session_id).active_turn_id
        if task is None or task.done():
            return None
        if task in self.closing:
            # Its work is done and its end is being recorded: too late to cancel, and
            # cancelling now would cut that record short. Once it has ended, nothing is active.
            await asyncio.shield(task)
            return None
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return turn_id

    async def shutdown(self) -> None:
        """Abandon running turns; the next start's recovery marks them interrupted (§4)."""
        self.stopping = True
        for task in self.tasks.values():
            task.cancel()
        for task in list(self.tasks.values()):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # -- one turn -----------------------------------------------------------------------

    async def _run(
        self,
        session_id: str,
        turn_id: str,
        approval: ApprovalRow | None,
        unattended: bool,
        on_end: TurnEnded | None,
    ) -> None:
        outcome, error = "completed", None
        try:
            if approval is not None:
                await self._execution_running(approval.id, turn_id)
            await self._loop(session_id, turn_id, unattended)
        except asyncio.CancelledError:
            outcome, error = "cancelled", HostError("TURN_CANCELLED", "the turn was cancelled")
        except HostError as failure:
            outcome, error = "failed", failure
        except Exception:
            log.exception("turn %s failed", turn_id)
            outcome, error = "failed", HostError("INTERNAL_ERROR", "the turn failed in the host")
        if self.stopping:
            return
        this = asyncio.current_task()
        assert this is not None
        self.closing.add(this)
        try:
            await self._end(session_id, turn_id, approval, on_end, outcome, error)
        finally:
            self.closing.discard(this)
        if self.tasks.get(session_id) is this:
            del self.tasks[session_id]

    async def _execution_running(self, approval_id: str, turn_id: str) -> None:
        """Record the execution running; a cancel that arrives meanwhile waits for it, as
        the turn was announced with its execution (queued -> running -> interrupted)."""
        running = asyncio.ensure_future(self.host.approvals.execution_running(approval_id, turn_id))
        try:
            await asyncio.shield(running)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await running
            raise

    async def _end(
        self,
        session_id: str,
        turn_id: str,
        approval: ApprovalRow | None,
        on_end: TurnEnded | None,
        outcome: str,
        error: HostError | None,
    ) -> None:
        """Record the turn's end, finish its execution, and announce both."""
        host = self.host
        await host.storage.end_turn(turn_id, outcome, host.clock.now_ms())
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

    async def settle(self, session_id: str, turn_id: str | None) -> None:
        """Wait for the turn ``turn_id`` to finish, if it is the session's active turn.

        Used for the Plan turn that submitted a plan: it has decided to end and makes no
        further provider call, so the wait is short. Any other active turn is not waited
        for (it could be waiting for a permission answer the client has yet to send).
        """
        task = self.tasks.get(session_id)
        if turn_id is None or self.host.activity_of(session_id).active_turn_id != turn_id:
            return
        if task is not None and task is not asyncio.current_task():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(task)

    async def _loop(self, session_id: str, turn_id: str, unattended: bool) -> None:
        host = self.host
        messages = await self._history(session_id)  # ends with this turn's user message
        for _ in range(MAX_STEPS):
            session = await host.require_session(session_id)
            reply = await self._ask_model(session, turn_id, messages)
            assistant = _assistant_message(reply)
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
            if any(call.name == "new_context" for call in reply.tool_calls):
                messages = await self._history(session_id)
        raise HostError("PROVIDER_ERROR", f"the model did not finish within {MAX_STEPS} steps")

    async def _ask_model(
        self, session: SessionRow, turn_id: str, messages: list[dict[str, Any]]
    ) -> AssistantReply:
        if session.provider_base_url is None or session.model is None:
            raise HostError("PROVIDER_NOT_CONFIGURED", "the session has no model provider")
        config = ProviderConfig(
            session.provider_base_url, session.model, os.environ.get(API_KEY_ENV) or None
        )

        async def on_text(text: str) -> None:
            self.host.notify(
                "turn/text", {"sessionId": session.id, "turnId": turn_id, "text": text}
            )

        try:
            return await complete(
                self.host.http, config, messages, offered_tools(session.mode), on_text
            )
        except ProviderError as error:
            raise HostError(
                "PROVIDER_ERROR", str(error), {"kind": error.kind, "status": error.status}
            ) from error

    async def _history(self, session_id: str) -> list[dict[str, Any]]:
        """Provider messages of earlier turns, from the last context reset on."""
        entries = await self.host.storage.transcript(session_id)
        contents = [content for _seq, _turn, _role, content, _at in entries]
        start = max((i for i, c in enumerate(contents) if c.get("contextReset")), default=0)
        kept = [{k: v for k, v in c.items() if k != "contextReset"} for c in contents[start:]]
        return answered_only(kept)

    # -- tool calls ---------------------------------------------------------------------

    async def _run_batch(
        self, session: SessionRow, turn_id: str, calls: tuple[ToolCall, ...], unattended: bool
    ) -> list[CallOutcome]:
        for call in calls:
            self.host.notify(
                "turn/toolCall",
                {
                    "sessionId": session.id,
                    "turnId": turn_id,
                    "toolCallId": call.call_id,
                    "tool": call.name,
                    "input": _parse_arguments(call),
                },
            )
        outcomes: list[CallOutcome] = []
        try:
            if any(call.name == "SubmitPlan" for call in calls) and len(calls) > 1:
                refusal = HostError(
                    "SUBMIT_PLAN_NOT_ALONE",
                    "SubmitPlan must be the only tool call of its message; no call of it ran",
                )
                outcomes = [_failure(refusal) for _ in calls]
            else:
                for call in calls:
                    outcomes.append(await self._run_call(session, turn_id, call, unattended))
                    session = await self.host.require_session(session.id)
        except asyncio.CancelledError:
            # Every announced call still gets its one result: the one in flight and those
            # that never ran were cut short by the cancellation.
            cut = _failure(HostError("TURN_CANCELLED", "the turn was cancelled before it ran"))
            outcomes += [cut] * (len(calls) - len(outcomes))
            self._announce_results(session.id, turn_id, calls, outcomes)
            raise
        self._announce_results(session.id, turn_id, calls, outcomes)
        return outcomes

    def _announce_results(
        self,
        session_id: str,
        turn_id: str,
        calls: tuple[ToolCall, ...],
        outcomes: list[CallOutcome],
    ) -> None:
        for call, result in zip(calls, outcomes, strict=True):
            self.host.notify(
                "turn/toolResult",
                {
                    "sessionId": session_id,
                    "turnId": turn_id,
                    "toolCallId": call.call_id,
                    "tool": call.name,
                    "status": result.status,
                    "output": result.output,
                    "error": result.error.to_data() if result.error else None,
                },
            )

    async def _run_call(
        self, session: SessionRow, turn_id: str, call: ToolCall, unattended: bool
    ) -> CallOutcome:
        refusal = _gate(session.mode, call.name)
        if refusal is not None:
            return _failure(refusal)
        try:
            args = validate_args(_SPECS[call.name], _arguments(call))
            if needs_permission(session.permission_mode, call.name):
                await self._require_permission(session, turn_id, call, args, unattended)
            return await self._dispatch(session, turn_id, call.name, args)
        except HostError as error:
            return _failure(error)
        except Exception as exc:  # a bug or an OS error: this call failed, the turn goes on
            log.exception("tool call %s (%s) failed", call.call_id, call.name)
            return _failure(HostError("TOOL_FAILED", f"{call.name} failed: {exc}"))

    async def _require_permission(
        self,
        session: SessionRow,
        turn_id: str,
        call: ToolCall,
        args: dict[str, Any],
        unattended: bool,
    ) -> None:
        if unattended:
            raise HostError(
                "PERMISSION_UNAVAILABLE",
                f"{call.name} needs a permission answer and this run is unattended",
            )
        if not await self.host.permissions.ask(session.id, turn_id, call.name, args):
            raise HostError("PERMISSION_DENIED", f"the user denied {call.name}")

    async def _dispatch(
        self, session: SessionRow, turn_id: str, name: str, args: dict[str, Any]
    ) -> CallOutcome:
        host = self.host
        if name == "SubmitPlan":
            approval = await host.approvals.submit(session, turn_id, args)
            return CallOutcome(
                "ok", f"Plan submitted for approval as {approval.artifact_path}.", ends_turn=True
            )
        if name == "EnterPlanMode":
            if session.mode != "plan":
                await host.enter_plan_mode(session)
            return CallOutcome("ok", "The session is in Plan mode.")
        if name == "new_context":
            reset = {"role": "system", "content": args["summary"], "contextReset": True}
            await host.storage.append_transcript(
                session.id, turn_id, "system", reset, host.clock.now_ms()
            )
            return CallOutcome("ok", "A new context starts from the summary.")
        if name == "Bash":
            return await self._bash(session, turn_id, args)
        root = Path(session.workspace_root) if session.workspace_root else None
        if name in EDIT_TOOLS and root is not None:
            _refuse_plan_folder(root, str(args.get("path", "")))
        output = await _FILE_TOOLS[name].run(ToolContext(session.id, turn_id, root), args)
        return CallOutcome("ok", output)

    async def _audit(self, audit: dict[str, Any], result: CommandResult) -> None:
        await self.host.storage.record_command(_audit_row(audit, result, self.host.clock.now_ms()))

    async def _bash(self, session: SessionRow, turn_id: str, args: dict[str, Any]) -> CallOutcome:
        host = self.host
        if session.workspace_root is None:
            raise HostError("WORKSPACE_REQUIRED", "Bash runs in the session's workspace")
        shell_id = session.shell_id or await host.default_shell_id()
        shell = shells.find(shell_id) if shell_id else None
        if shell is None:
            raise HostError("SHELL_NOT_FOUND", f"the shell {shell_id!r} is not on this machine")
        started_at = host.clock.now_ms()
        audit: dict[str, Any] = {
            "session_id": session.id,
            "turn_id": turn_id,
            "shell_id": shell.shell_id,
            "shell_path": shell.path,
            "command": args["command"],
            "cwd": session.workspace_root,
            "started_at": started_at,
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
        except CommandCancelledError as cancelled:
            if not self.stopping:
                await self._audit(audit, cancelled.result)
            raise
        await self._audit(audit, result)
        if result.timed_out:
            error = HostError("COMMAND_TIMED_OUT", "the command exceeded its timeout")
            return replace(_failure(error), output=result.summary())
        return CallOutcome("ok", result.summary())


def _audit_row(audit: dict[str, Any], result: CommandResult, ended_at: int) -> dict[str, Any]:
    return {
        "id": result.command_id,
        **audit,
        "ended_at": ended_at,
        "exit_code": result.exit_code,
        "signal": result.signal,
        "timed_out": int(result.timed_out),
        "cancelled": int(result.cancelled),
        "truncated": int(result.truncated),
        "duration_ms": result.duration_ms,
    }


def _refuse_plan_folder(root: Path, path: str) -> None:
    """Plan artifacts are host-owned and immutable (§2, Consequences): no tool edits them."""
    target = resolve_inside(root, path, must_exist=False)
    plan_folder = root.resolve() / ".pi" / "plan"
    if target == plan_folder or target.is_relative_to(plan_folder):
        raise HostError("TOOL_DENIED", "plan artifacts are immutable; write somewhere else")


def answered_only(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with every tool call paired with its result, as Chat Completions
    requires. A tool result whose call is not among them is dropped (a context reset drops
    the assistant message that called new_context), and so is a call that no result
    answers (a turn ended by a restart while the call ran); an assistant message left with
    neither text nor calls goes too."""
    answered = {str(m.get("tool_call_id")) for m in messages if m.get("role") == "tool"}
    made: set[str] = set()
    kept: list[dict[str, Any]] = []
    for message in messages:
        calls = message.get("tool_calls") or []
        paired = [call for call in calls if str(call.get("id")) in answered]
        made.update(str(call.get("id")) for call in paired)
        if len(paired) != len(calls):
            message = {k: v for k, v in message.items() if k != "tool_calls"}
            if paired:
                message["tool_calls"] = paired
            elif not message.get("content"):
                continue
        if message.get("role") == "tool" and str(message.get("tool_call_id")) not in made:
            continue
        kept.append(message)
    return kept


def _assistant_message(reply: AssistantReply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in reply.tool_calls
        ]
    return message
