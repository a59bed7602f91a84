"""Broken hosts: a held-out set (execution and permission modes), written from the contract
alone.

Three of these twelve were caught at first; all are caught now. What was missed: the state
an execution ends in after the user denied a call, two sessions' executions ending in turn,
the plan's line ends in the execution prompt, the order and content of the approve's
announcements, a session whose execution had entered Plan when the host stopped, the
permission mode after a cancelled execution, a permission mode with a line break, and the
folders a denied Write would have made.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from pathlib import Path
from typing import Any

from hosts.registry import BrokenCase, Send, patch, relay_notifications, variant
from reference_host import approvals, rpc
from reference_host.approvals import Approvals
from reference_host.jsontext import loads
from reference_host.state import ExecutionState
from reference_host.storage import ApprovalRow, SessionRow, Storage
from reference_host.tools.names import EDIT_TOOLS
from reference_host.turns import CallOutcome, TurnRunner
from reference_host.workspace import resolve_inside


def _command_of(call: Any) -> str | None:
    """The ``command`` of a Bash call's arguments, when they are a JSON object."""
    try:
        args = loads(call.arguments) if call.arguments.strip() else {}
    except Exception:
        return None
    command = args.get("command") if isinstance(args, dict) else None
    return command if isinstance(command, str) else None


# P7: permission modes apply to the execution as to every Agent turn. The host counts the
# approved plan as the user's consent to its edits: during the execution turn `ask` does
# not ask before Write and Edit (only before Bash), as if it were accept-edits. Later
# prompt turns ask as they should.
@variant("execution-ask-as-accept-edits")
def _execution_ask_as_accept_edits() -> None:
    executing: set[str] = set()
    run = TurnRunner._run
    run_call = TurnRunner._run_call

    async def _run(
        self: TurnRunner,
        session_id: str,
        turn_id: str,
        approval: ApprovalRow | None,
        unattended: bool,
        on_end: Any,
    ) -> None:
        if approval is not None:
            executing.add(turn_id)
        try:
            await run(self, session_id, turn_id, approval, unattended, on_end)
        finally:
            executing.discard(turn_id)

    async def _run_call(
        self: TurnRunner, session: SessionRow, turn_id: str, call: Any, unattended: bool
    ) -> CallOutcome:
        if turn_id in executing and session.permission_mode == "ask" and call.name in EDIT_TOOLS:
            session = replace(session, permission_mode="accept-edits")
        return await run_call(self, session, turn_id, call, unattended)

    patch(TurnRunner, "_run", _run)
    patch(TurnRunner, "_run_call", _run_call)


# P7: `ask` and `accept-edits` ask before every Bash call. The host keeps an allow-list of
# "read-only" commands (ls, cat, echo, pwd, ...) judged by the command's first word, and
# runs those without asking.
@variant("read-only-commands-never-ask")
def _read_only_commands_never_ask() -> None:
    read_only = frozenset(
        {"ls", "pwd", "cat", "head", "tail", "wc", "echo", "printf", "date", "whoami", "which"}
    )
    run_call = TurnRunner._run_call

    async def _run_call(
        self: TurnRunner, session: SessionRow, turn_id: str, call: Any, unattended: bool
    ) -> CallOutcome:
        if call.name == "Bash" and session.permission_mode in ("ask", "accept-edits"):
            command = _command_of(call)
            words = command.split() if command else []
            if words and words[0] in read_only:
                session = replace(session, permission_mode="auto")
        return await run_call(self, session, turn_id, call, unattended)

    patch(TurnRunner, "_run_call", _run_call)


# R4.5: an execution is `completed` when its turn completed. The host records it
# `interrupted` when the user denied any of its tool calls ("the plan was not carried out
# in full"), although the turn went on and ended `completed`.
@variant("denied-call-interrupts-execution")
def _denied_call_interrupts_execution() -> None:
    denied_turns: set[str] = set()
    run_call = TurnRunner._run_call
    finished = Approvals.execution_finished

    async def _run_call(
        self: TurnRunner, session: SessionRow, turn_id: str, call: Any, unattended: bool
    ) -> CallOutcome:
        outcome = await run_call(self, session, turn_id, call, unattended)
        if outcome.error is not None and outcome.error.code == "PERMISSION_DENIED":
            denied_turns.add(turn_id)
        return outcome

    async def execution_finished(self: Approvals, approval_id: str, final: ExecutionState) -> None:
        row = await self.host.storage.get_approval(approval_id)
        if final == "completed" and row is not None and row.execution_turn_id in denied_turns:
            final = "interrupted"
        await finished(self, approval_id, final)

    patch(TurnRunner, "_run_call", _run_call)
    patch(Approvals, "execution_finished", execution_finished)


# R4.5 / R4.3: while the execution's turn runs, the approval reports `running`. The host
# moves the execution to `running` only once the model has first answered, so while the
# turn's first provider request is open it still reads `queued` (and an execution whose
# first request fails or is cancelled goes queued -> interrupted with its turn started).
@variant("execution-running-after-first-reply")
def _execution_running_after_first_reply() -> None:
    waiting: dict[str, str] = {}  # turn id -> approval id, until the model first answers
    running = Approvals.execution_running
    ask = TurnRunner._ask_model

    async def execution_running(self: Approvals, approval_id: str, turn_id: str) -> None:
        waiting[turn_id] = approval_id

    async def _ask_model(self: TurnRunner, session: SessionRow, turn_id: str, messages: Any) -> Any:
        reply = await ask(self, session, turn_id, messages)
        approval_id = waiting.pop(turn_id, None)
        if approval_id is not None:
            await running(self.host.approvals, approval_id, turn_id)
        return reply

    patch(Approvals, "execution_running", execution_running)
    patch(TurnRunner, "_ask_model", _ask_model)


# R4.5 / R5.9: when an execution turn ends, its own execution moves to completed or
# interrupted. The host finishes "the running execution" it finds by the newest decision
# (it reads R4.9's one-execution rule as host-wide): with two sessions executing at once,
# the first turn to end finishes the other session's execution and clears that session's
# activeExecutionId, while its own stays `running`.
@variant("execution-end-finishes-newest-execution")
def _execution_end_finishes_newest_execution() -> None:
    end = TurnRunner._end

    async def _end(
        self: TurnRunner,
        session_id: str,
        turn_id: str,
        approval: ApprovalRow | None,
        on_end: Any,
        outcome: str,
        error: Any,
    ) -> None:
        if approval is not None:
            storage = self.host.storage
            async with storage._conn.execute(
                "SELECT id FROM plan_approvals WHERE execution_state = 'running' "
                "ORDER BY decided_at DESC, rowid DESC LIMIT 1"
            ) as cursor:
                newest = await cursor.fetchone()
            if newest is not None:
                approval = await storage.get_approval(newest[0]) or approval
        await end(self, session_id, turn_id, approval, on_end, outcome, error)

    patch(TurnRunner, "_end", _end)


# P15: the execution prompt carries the plan's full markdown. The host reads the artifact
# in text mode for the prompt, so its line ends are translated (CR LF and a lone CR become
# LF): a plan written with CR LF reaches the model changed.
@variant("execution-prompt-newlines-translated")
def _execution_prompt_newlines_translated() -> None:
    prompt = approvals._execution_prompt

    def _execution_prompt(row: ApprovalRow, content: bytes) -> str:
        text = content.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        return prompt(row, text)

    patch(approvals, "_execution_prompt", _execution_prompt)


# Ordering / R7.2 / C4: a response comes after the notifications of every change it
# reports; the approve result reports the approval approved and the session in Agent, so
# their approval/updated and session/updated come before the answer. The host queues the
# notices an approve produces for its session and sends them, in their order, only once it
# has answered.
@variant("approve-notices-after-answer")
def _approve_notices_after_answer() -> None:
    holding: dict[str, list[tuple[Send, str, dict[str, Any]]]] = {}
    approve = Approvals.approve

    def _session_of(params: dict[str, Any]) -> str:
        for key in ("session", "approval"):
            inner = params.get(key)
            if isinstance(inner, dict):
                return str(inner.get("sessionId"))
        return str(params.get("sessionId"))

    def relay(send: Send, method: str, params: dict[str, Any]) -> None:
        held = holding.get(_session_of(params))
        if held is not None:
            held.append((send, method, params))
            return
        send(method, params)

    async def approve_later(
        self: Approvals, session_id: str, approval_id: str, mode: Any
    ) -> dict[str, Any]:
        held = holding.setdefault(session_id, [])
        try:
            return await approve(self, session_id, approval_id, mode)
        finally:
            del holding[session_id]

            def flush() -> None:
                for send, method, params in held:
                    send(method, params)

            asyncio.get_running_loop().call_soon(flush)

    relay_notifications(relay)
    patch(Approvals, "approve", approve_later)


# R4.10 / R4.11: the start-up recovery changes nothing but approvals, executions and
# turns. The host also puts every session whose execution it interrupts back in Agent
# (reading R4.14's "stays in Agent" as something to enforce), so a session whose
# execution turn had entered Plan with EnterPlanMode wakes up in Agent.
@variant("recovery-puts-execution-sessions-in-agent")
def _recovery_puts_execution_sessions_in_agent() -> None:
    recover = Storage.recover

    async def recover_to_agent(self: Storage, now: int) -> tuple[int, int, int]:
        async with self._conn.execute(
            "SELECT DISTINCT session_id FROM plan_approvals "
            "WHERE execution_state IN ('queued', 'running')"
        ) as cursor:
            sessions = [row[0] for row in await cursor.fetchall()]
        counts = await recover(self, now)
        if sessions:
            async with self.transaction() as conn:
                for session_id in sessions:
                    await conn.execute(
                        "UPDATE sessions SET mode = 'agent' WHERE id = ?", (session_id,)
                    )
        return counts

    patch(Storage, "recover", recover_to_agent)


# P7: the permission mode chosen at approval applies to the execution and to later prompts
# alike. When an execution ends `interrupted` (cancelled, or its turn failed) the host
# revokes the grant and puts the session back to `ask` (announced and stored), so the next
# prompt asks where the approved mode would not.
@variant("interrupted-execution-drops-permission-mode")
def _interrupted_execution_drops_permission_mode() -> None:
    finished = Approvals.execution_finished

    async def execution_finished(self: Approvals, approval_id: str, final: ExecutionState) -> None:
        await finished(self, approval_id, final)
        if final != "interrupted":
            return
        host = self.host
        row = await host.storage.get_approval(approval_id)
        session = await host.storage.get_session(row.session_id) if row else None
        if session is not None and session.permission_mode != "ask":
            await host.storage.update_session(
                replace(session, permission_mode="ask", updated_at=host.clock.now_ms())
            )

    patch(Approvals, "execution_finished", execution_finished)


# P4 / R3.4: approve needs permissionMode exactly `ask`, `accept-edits` or `auto`; any
# other string is INVALID_PARAMS and starts nothing. The host trims the value before it
# checks it, so " auto" or "ask\n" approves the plan.
@variant("approve-mode-trimmed")
def _approve_mode_trimmed() -> None:
    problem = rpc.params_problem

    def params_problem(method: str, params: Any) -> str | None:
        if method == "approval/approve" and isinstance(params, dict):
            mode = params.get("permissionMode")
            if isinstance(mode, str):
                params["permissionMode"] = mode.strip()
        return problem(method, params)

    patch(rpc, "params_problem", params_problem)


# P7: a denied call does nothing. Before asking about a Write, the host prepares it by
# creating the target's missing parent folders, so a Write the user denies still leaves
# its (empty) folders behind in the workspace.
@variant("denied-write-leaves-folders")
def _denied_write_leaves_folders() -> None:
    require = TurnRunner._require_permission

    async def _require_permission(
        self: TurnRunner,
        session: SessionRow,
        turn_id: str,
        call: Any,
        args: dict[str, Any],
        unattended: bool,
    ) -> None:
        path = args.get("path")
        if call.name == "Write" and session.workspace_root and isinstance(path, str):
            root = Path(session.workspace_root)
            with contextlib.suppress(Exception):
                target = resolve_inside(root, path, must_exist=False)
                if ".pi" not in target.relative_to(root.resolve()).parts:
                    target.parent.mkdir(parents=True, exist_ok=True)
        await require(self, session, turn_id, call, args, unattended)

    patch(TurnRunner, "_require_permission", _require_permission)


# R7.2 / R4.3: the approval/updated that announces the approve carries the approval as it
# now is. The host fills its permissionMode from the session as it was before the approve
# (the mode the client last showed), not the mode chosen; approve's result, approval/get
# and the row have the chosen one. The later running/completed notices are right.
@variant("approve-notice-shows-previous-permission-mode")
def _approve_notice_shows_previous_permission_mode() -> None:
    previous: dict[str, str] = {}  # approval id -> the session's permission mode before
    approve = Approvals.approve

    def relay(send: Send, method: str, params: dict[str, Any]) -> None:
        approval = params.get("approval") if method == "approval/updated" else None
        if isinstance(approval, dict) and approval.get("executionState") == "queued":
            mode = previous.get(str(approval.get("approvalId")))
            if mode is not None:
                params = {**params, "approval": {**approval, "permissionMode": mode}}
        send(method, params)

    async def approve_noting(
        self: Approvals, session_id: str, approval_id: str, mode: Any
    ) -> dict[str, Any]:
        session = await self.host.storage.get_session(session_id)
        if session is not None:
            previous[approval_id] = session.permission_mode
        try:
            return await approve(self, session_id, approval_id, mode)
        finally:
            previous.pop(approval_id, None)

    relay_notifications(relay)
    patch(Approvals, "approve", approve_noting)


CASES = [
    BrokenCase(
        "execution-ask-as-accept-edits",
        "execution",
        "file_change_waits",
        "P7",
        "Write ran without asking for permission",
    ),
    BrokenCase(
        "read-only-commands-never-ask",
        "execution",
        "commands_still_ask",
        "P7",
        "Bash ran without asking for permission",
    ),
    BrokenCase(
        "execution-running-after-first-reply",
        "execution",
        "execution_whose_turn_fails",
        "R4.5",
        "the execution was announced as",
    ),
    BrokenCase(
        "denied-call-interrupts-execution",
        "execution",
        "leaves_no_folder",
        "R4.5",
        "an execution is completed when its turn completed",
    ),
    BrokenCase(
        "execution-end-finishes-newest-execution",
        "isolation",
        "each_end_their_own",
        "R4.5",
        "never another session's",
    ),
    BrokenCase(
        "execution-prompt-newlines-translated",
        "execution",
        "exactly_as_submitted and CRLF",
        "P15",
        "the plan's full content, exactly as submitted",
    ),
    BrokenCase(
        "approve-notices-after-answer",
        "approval",
        "approving_with and auto",
        "R7.2",
        "was answered before the approval/updated",
    ),
    BrokenCase(
        "recovery-puts-execution-sessions-in-agent",
        "restart_interruption",
        "turned_to_planning_leaves and restarts",
        "R4.14",
        "after the restart the session is in agent",
    ),
    BrokenCase(
        "interrupted-execution-drops-permission-mode",
        "execution",
        "later_requests_keep",
        "P7",
        "the host asked before the Bash call",
    ),
    BrokenCase(
        "approve-mode-trimmed",
        "approval",
        "unknown_permission_mode and line_break",
        "R3.4",
        "expected the host to refuse",
    ),
    BrokenCase(
        "denied-write-leaves-folders",
        "execution",
        "leaves_no_folder",
        "P7",
        "drafts exists",
    ),
    BrokenCase(
        "approve-notice-shows-previous-permission-mode",
        "approval",
        "approving_with and auto",
        "R7.2",
        "but its approval/updated announced",
    ),
]
