"""Broken hosts: a held-out set (permission modes and cancellation), written from the
contract alone."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from dataclasses import replace
from pathlib import Path
from typing import Any

from hosts.registry import BrokenCase, patch, variant
from reference_host import turns
from reference_host.approvals import Approvals
from reference_host.errors import HostError
from reference_host.host import Host
from reference_host.state import ensure_can_cancel
from reference_host.tools.base import validate_args
from reference_host.turns import TurnRunner
from reference_host.workspace import resolve_inside


@variant("asks-before-unknown-tools")
def _asks_before_unknown_tools() -> None:
    # P7 / R1.5 / P9: in ask and accept-edits the host treats a tool it cannot classify
    # (an unknown tool, a plugin tool no plugin provides) as possibly dangerous and asks
    # the user first (permission/requested); only after an allow does it refuse the call
    # with UNKNOWN_TOOL. The contract asks only before Write, Edit and Bash.
    original = TurnRunner._run_call

    async def _run_call(
        self: TurnRunner, session: Any, turn_id: str, call: Any, unattended: bool
    ) -> Any:
        unknown = call.name not in turns._KNOWN or call.name.startswith(turns.PLUGIN_PREFIXES)
        if unknown and session.mode == "agent" and session.permission_mode != "auto":
            try:
                await self._require_permission(
                    session, turn_id, call, turns._parse_arguments(call), unattended
                )
            except HostError as error:
                return turns._failure(error)
        return await original(self, session, turn_id, call, unattended)

    patch(TurnRunner, "_run_call", _run_call)


@variant("accept-edits-asks-to-create-files")
def _accept_edits_asks_to_create_files() -> None:
    # P7: accept-edits is read as "accept edits of existing files": a Write that would
    # create a new file asks first. The contract: accept-edits asks only before Bash.
    original = TurnRunner._run_call

    async def _run_call(
        self: TurnRunner, session: Any, turn_id: str, call: Any, unattended: bool
    ) -> Any:
        if (
            call.name == "Write"
            and session.mode == "agent"
            and session.permission_mode == "accept-edits"
            and session.workspace_root is not None
        ):
            try:
                args = validate_args(turns._SPECS["Write"], turns._arguments(call))
                target = resolve_inside(
                    Path(session.workspace_root), str(args["path"]), must_exist=False
                )
                if not target.exists():
                    await self._require_permission(session, turn_id, call, args, unattended)
            except HostError as error:
                if error.code in ("PERMISSION_DENIED", "PERMISSION_UNAVAILABLE"):
                    return turns._failure(error)
                # anything else: the ordinary path reports it
        return await original(self, session, turn_id, call, unattended)

    patch(TurnRunner, "_run_call", _run_call)


@variant("deny-stops-the-turn")
def _deny_stops_the_turn() -> None:
    # P7 / P9: a denied permission request ends the turn (completed) right after the
    # denied call's result, as an "interrupt"; the model is never asked again. The
    # contract: a refused call does not end the turn, the model is given the result.
    original = TurnRunner._run_call

    async def _run_call(
        self: TurnRunner, session: Any, turn_id: str, call: Any, unattended: bool
    ) -> Any:
        outcome = await original(self, session, turn_id, call, unattended)
        if outcome.error is not None and outcome.error.code == "PERMISSION_DENIED":
            return replace(outcome, ends_turn=True)
        return outcome

    patch(TurnRunner, "_run_call", _run_call)


@variant("one-question-per-batch")
def _one_question_per_batch() -> None:
    # P7: when one model message holds several calls that need permission (a Write and a
    # Bash), the host asks once, for the first of them, and applies that answer to every
    # call of the batch. The contract: each call that needs permission is asked about.
    answers: contextvars.ContextVar[dict[str, bool] | None] = contextvars.ContextVar(
        "batch_answer", default=None
    )
    run_batch = TurnRunner._run_batch
    require = TurnRunner._require_permission

    async def _run_batch(
        self: TurnRunner, session: Any, turn_id: str, calls: Any, unattended: bool
    ) -> Any:
        token = answers.set({})
        try:
            return await run_batch(self, session, turn_id, calls, unattended)
        finally:
            answers.reset(token)

    async def _require_permission(
        self: TurnRunner,
        session: Any,
        turn_id: str,
        call: Any,
        args: dict[str, Any],
        unattended: bool,
    ) -> None:
        batch = answers.get()
        if batch is not None and "answer" in batch and not unattended:
            if not batch["answer"]:
                raise HostError("PERMISSION_DENIED", f"the user denied {call.name}")
            return
        try:
            await require(self, session, turn_id, call, args, unattended)
        except HostError as error:
            if batch is not None and error.code == "PERMISSION_DENIED":
                batch["answer"] = False
            raise
        if batch is not None:
            batch["answer"] = True

    patch(TurnRunner, "_run_batch", _run_batch)
    patch(TurnRunner, "_require_permission", _require_permission)


@variant("approved-mode-reverts-after-execution")
def _approved_mode_reverts_after_execution() -> None:
    # P7 / R7.2: the permission mode chosen at approve is treated as a grant for the
    # execution only: when the execution ends the session goes back to the permission
    # mode it had before the approve (stored and announced), so later prompts run under
    # the old mode. The contract: the mode applies to the execution and later prompts.
    before: dict[str, str] = {}
    approve = Approvals.approve
    finished = Approvals.execution_finished

    async def _approve(self: Approvals, session_id: str, approval_id: str, mode: Any) -> Any:
        session = await self.host.storage.get_session(session_id)
        previous = session.permission_mode if session is not None else None
        result = await approve(self, session_id, approval_id, mode)
        if previous is not None:
            before[approval_id] = previous
        return result

    async def _execution_finished(self: Approvals, approval_id: str, final: Any) -> None:
        await finished(self, approval_id, final)
        previous = before.pop(approval_id, None)
        row = await self.host.storage.get_approval(approval_id)
        if previous is None or row is None:
            return
        session = await self.host.storage.get_session(row.session_id)
        if session is None or session.permission_mode == previous:
            return
        await self.host.storage.update_session(
            replace(session, permission_mode=previous, updated_at=self.host.clock.now_ms())
        )
        await self.host.publish_session(session.id)

    patch(Approvals, "approve", _approve)
    patch(Approvals, "execution_finished", _execution_finished)


@variant("execution-runs-in-the-previous-mode")
def _execution_runs_in_the_previous_mode() -> None:
    # P7 / R3.4: the execution turn checks permissions against the session as it was
    # read before the approve (its old permission mode), although the approve switched
    # the session (reported and stored) to the chosen mode; later prompts use the new one.
    before: dict[str, str] = {}
    execution_turns: dict[str, str] = {}
    approve = Approvals.approve
    start = TurnRunner.start
    run_call = TurnRunner._run_call

    async def _approve(self: Approvals, session_id: str, approval_id: str, mode: Any) -> Any:
        session = await self.host.storage.get_session(session_id)
        if session is not None:
            before[session_id] = session.permission_mode
        return await approve(self, session_id, approval_id, mode)

    async def _start(
        self: TurnRunner, session: Any, kind: str, user_text: str, *args: Any, **kw: Any
    ) -> str:
        turn_id = await start(self, session, kind, user_text, *args, **kw)
        if kind == "execution" and session.id in before:
            execution_turns[turn_id] = before.pop(session.id)
        return turn_id

    async def _run_call(
        self: TurnRunner, session: Any, turn_id: str, call: Any, unattended: bool
    ) -> Any:
        if turn_id in execution_turns:
            session = replace(session, permission_mode=execution_turns[turn_id])
        return await run_call(self, session, turn_id, call, unattended)

    patch(Approvals, "approve", _approve)
    patch(TurnRunner, "start", _start)
    patch(TurnRunner, "_run_call", _run_call)


@variant("cancel-waits-for-the-model")
def _cancel_waits_for_the_model() -> None:
    # R5.1: a cancel that arrives while the provider request is open is honoured only
    # once the model's reply has arrived (the request is shielded so that the connection
    # is not torn down); until then the turn keeps streaming and stays active. A model
    # that takes its time keeps the turn from ending cancelled.
    ask = TurnRunner._ask_model

    async def _ask_model(self: TurnRunner, session: Any, turn_id: str, messages: Any) -> Any:
        request = asyncio.ensure_future(ask(self, session, turn_id, messages))
        try:
            return await asyncio.shield(request)
        except asyncio.CancelledError:
            if self.stopping:
                request.cancel()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await request
            raise

    patch(TurnRunner, "_ask_model", _ask_model)


@variant("cancel-waits-for-the-command")
def _cancel_waits_for_the_command() -> None:
    # P19 / R5.1: a cancel that arrives while Bash runs lets the command run to its own
    # end (a "graceful" cancel) and ends the turn cancelled afterwards; the command is
    # not ended with the turn and its command/exited does not say cancelled.
    bash = TurnRunner._bash

    async def _bash(self: TurnRunner, session: Any, turn_id: str, args: Any) -> Any:
        command = asyncio.ensure_future(bash(self, session, turn_id, args))
        try:
            return await asyncio.shield(command)
        except asyncio.CancelledError:
            if self.stopping:
                command.cancel()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await command
            raise

    patch(TurnRunner, "_bash", _bash)


@variant("cancelled-execution-not-announced")
def _cancelled_execution_not_announced() -> None:
    # R4.5: when session/cancel ends an execution turn, the execution is recorded
    # interrupted and approval/updated says so, but no execution/updated announces the
    # change (the cancel path finishes the execution without it). A failed or completed
    # execution is announced as usual.
    cancelling: set[str] = set()
    cancel = TurnRunner.cancel
    notify_execution = Approvals._notify_execution

    async def _cancel(self: TurnRunner, session_id: str) -> str | None:
        cancelling.add(session_id)
        try:
            return await cancel(self, session_id)
        finally:
            cancelling.discard(session_id)

    def _notify(self: Approvals, row: Any, turn_id: str | None) -> None:
        if row.execution_state == "interrupted" and row.session_id in cancelling:
            return
        notify_execution(self, row, turn_id)

    patch(TurnRunner, "cancel", _cancel)
    patch(Approvals, "_notify_execution", _notify)


@variant("cancel-refused-for-any-pending-plan")
def _cancel_refused_for_any_pending_plan() -> None:
    # R5.7 / R5.1 / R5.9: the APPROVAL_PENDING check of session/cancel looks at every
    # session, not the one named: while another session has a plan pending, cancelling
    # this session's running turn is refused with APPROVAL_PENDING and the turn goes on.

    async def session_cancel(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        ensure_can_cancel(self.activity_of(row.id))
        for activity in list(self.activity.values()):
            ensure_can_cancel(activity)
        return {"turnId": await self.turns.cancel(row.id)}

    patch(Host, "session_cancel", session_cancel)


@variant("auto-asks-for-multiline-commands")
def _auto_asks_for_multiline_commands() -> None:
    # P7: auto never asks, except that the host, as a safety net, asks before a Bash
    # command of several lines (a script rather than a command). The contract: auto
    # never asks, whatever the command.
    original = TurnRunner._run_call

    async def _run_call(
        self: TurnRunner, session: Any, turn_id: str, call: Any, unattended: bool
    ) -> Any:
        if call.name == "Bash" and session.mode == "agent" and session.permission_mode == "auto":
            try:
                args = validate_args(turns._SPECS["Bash"], turns._arguments(call))
                if "\n" in str(args["command"]).strip("\n"):
                    await self._require_permission(session, turn_id, call, args, unattended)
            except HostError as error:
                if error.code in ("PERMISSION_DENIED", "PERMISSION_UNAVAILABLE"):
                    return turns._failure(error)
        return await original(self, session, turn_id, call, unattended)

    patch(TurnRunner, "_run_call", _run_call)


# cancel-waits-for-the-model and cancel-waits-for-the-command are rejected too, as errored
# (the host answers no session/cancel within the step timeout: a hang, not a failed check),
# which a BrokenCase does not accept; their verdicts are in docs/reliability.md.
CASES = [
    BrokenCase(
        "accept-edits-asks-to-create-files",
        "execution",
        "file_changes_run_without_asking",
        "P7",
        "the execution did not finish",
        slow=True,
    ),
    BrokenCase(
        "approved-mode-reverts-after-execution",
        "execution",
        "an_approved_plan_is_queued_runs_and_completes",
        "R4.6",
        "permission mode is ask",
    ),
    BrokenCase(
        "asks-before-unknown-tools",
        "plan_tools",
        "a_call_to_exitplanmode_is_refused_as_an",
        "R1.9",
        "no turn/ended notification matched",
        slow=True,
    ),
    BrokenCase(
        "auto-asks-for-multiline-commands",
        "execution",
        "with_auto_a_script_of_several_lines_runs",
        "P7",
        "the execution did not finish",
        slow=True,
    ),
    BrokenCase(
        "cancel-refused-for-any-pending-plan",
        "turn_boundaries",
        "a_turn_is_cancelled_while_another_sessions_plan",
        "R5.1",
        "the cancel of a running turn was refused",
    ),
    BrokenCase(
        "cancelled-execution-not-announced",
        "execution",
        "an_execution_whose_turn_is_cancelled_is_interrupted",
        "R4.5",
        "no execution/updated notification matched",
        slow=True,
    ),
    BrokenCase(
        "deny-stops-the-turn",
        "execution",
        "with_ask_every_file_change_asks_also_after",
        "P7",
        "no permission/requested or turn/toolResult notification matched",
        slow=True,
    ),
    BrokenCase(
        "execution-runs-in-the-previous-mode",
        "execution",
        "with_auto_nothing_asks",
        "P7",
        "the execution did not finish",
        slow=True,
    ),
    BrokenCase(
        "one-question-per-batch",
        "execution",
        "with_ask_each_file_change_of_one_message",
        "P7",
        "the turn ended after one question about two Write calls",
    ),
]
