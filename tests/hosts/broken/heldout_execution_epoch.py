"""Broken hosts: a held-out set (the execution epoch), written from the contract alone.

Three of these eleven went uncaught at first and one more was caught only by accident; all
are caught now: a cancel answered with the execution's id, a prompt accepted while an
approved plan waits in the queue, a second execution's turn naming the first approval, and
an execution cut short at the plan's old deadline.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from hosts.registry import BrokenCase, patch, rewrite_notifications, variant
from reference_host import ids
from reference_host.approvals import Approvals, approval_wire
from reference_host.errors import HostError
from reference_host.host import Host
from reference_host.state import ExecutionState, advance_execution, ensure_idle_for, is_expired
from reference_host.storage import Storage
from reference_host.turns import TurnRunner


# R4.6 / schemas/storage/v10.sql (execution_id UNIQUE): the host names an execution after
# the host clock ("exe-<ms>"), so two approvals at one host-clock instant (two sessions, or
# one session whose clock has not moved) get the same executionId; the second approve's
# transaction breaks the unique column and is answered INTERNAL_ERROR.
@variant("execution-id-from-clock")
def _execution_id_from_clock() -> None:
    def new_id(self: Host, prefix: str) -> str:
        if prefix == "exe":
            return f"exe-{self.clock.now_ms()}"
        return ids.new_id(prefix)

    patch(Host, "new_id", new_id)


# R4.5 / C4 / R5.9: the host keeps one "current execution" pointer; when an execution ends
# it clears activeExecutionId of the session approved last, not of the execution's own
# session. With one session this is the same; with two executions running at once the
# first to end leaves its own session busy and frees the other one.
@variant("execution-end-clears-latest-session")
def _execution_end_clears_latest_session() -> None:
    latest: dict[str, str] = {}
    approve = Approvals.approve

    async def _approve(self: Approvals, session_id: str, approval_id: str, mode: Any) -> Any:
        latest["session"] = session_id
        return await approve(self, session_id, approval_id, mode)

    async def execution_finished(self: Approvals, approval_id: str, final: ExecutionState) -> None:
        row = await self._execution(approval_id)
        assert row.execution_state is not None
        done = replace(row, execution_state=advance_execution(row.execution_state, final))
        await self.host.storage.update_approval(done)
        self.host.set_activity(latest.get("session", row.session_id), active_execution_id=None)
        self._notify_execution(done, row.execution_turn_id)
        self.host.notify("approval/updated", {"approval": approval_wire(done)})

    patch(Approvals, "approve", _approve)
    patch(Approvals, "execution_finished", execution_finished)


# R5.1: session/cancel answers with the id of the turn it cancels; during an execution the
# host answers with the executionId (it thinks of "the execution" as what is cancelled).
@variant("cancel-answers-execution-id")
def _cancel_answers_execution_id() -> None:
    cancel = Host.session_cancel

    async def session_cancel(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        execution = self.activity_of(params["sessionId"]).active_execution_id
        result = await cancel(self, params)
        if execution is not None and result.get("turnId") is not None:
            result = {**result, "turnId": execution}
        return result

    patch(Host, "session_cancel", session_cancel)


# §3 / R7.2 / R4.3: every change of execution state is announced by an approval/updated
# carrying the approval as it now is. On the interrupted branch (a cancelled or failed
# execution turn) the host announces the row as it read it, still "running"; the
# execution/updated, approval/get and the row say "interrupted".
@variant("interrupted-notice-shows-running")
def _interrupted_notice_shows_running() -> None:
    async def execution_finished(self: Approvals, approval_id: str, final: ExecutionState) -> None:
        row = await self._execution(approval_id)
        assert row.execution_state is not None
        done = replace(row, execution_state=advance_execution(row.execution_state, final))
        await self.host.storage.update_approval(done)
        self.host.set_activity(row.session_id, active_execution_id=None)
        self._notify_execution(done, row.execution_turn_id)
        announced = done if final == "completed" else row
        self.host.notify("approval/updated", {"approval": approval_wire(announced)})

    patch(Approvals, "execution_finished", execution_finished)


# R3.11 / R4.4 / R4.5: expiry applies to a pending approval only; an approved plan stays
# approved and its execution runs to its end. The host's deadline timer, never cancelled
# on approve, cuts the execution off when the clock reaches expiresAt while it still runs
# (the turn ends cancelled, the execution interrupted).
@variant("deadline-interrupts-running-execution")
def _deadline_interrupts_running_execution() -> None:
    expire = Approvals.expire

    async def _expire(self: Approvals, approval_id: str) -> None:
        host = self.host
        row = await host.storage.get_approval(approval_id)
        if (
            row is not None
            and row.status == "approved"
            and row.execution_state == "running"
            and is_expired(row.expires_at, host.clock.now_ms())
            and host.activity_of(row.session_id).active_turn_id == row.execution_turn_id
        ):
            await host.turns.cancel(row.session_id)
            return
        await expire(self, approval_id)

    patch(Approvals, "expire", _expire)


# R7.2 / R4.5: the last session/updated for a session reads as session/get does. At the end
# of an execution turn the host publishes the session before its execution bookkeeping
# runs, so the last session/updated still names the finished execution in
# activeExecutionId while session/get reads null.
@variant("execution-cleared-after-session-notice")
def _execution_cleared_after_session_notice() -> None:
    async def _run(
        self: TurnRunner,
        session_id: str,
        turn_id: str,
        approval: Any,
        unattended: bool,
        on_end: Any,
    ) -> None:
        host = self.host
        outcome, error = "completed", None
        try:
            if approval is not None:
                await host.approvals.execution_running(approval.id, turn_id)
            await self._loop(session_id, turn_id, unattended)
        except asyncio.CancelledError:
            outcome, error = "cancelled", HostError("TURN_CANCELLED", "the turn was cancelled")
        except HostError as failure:
            outcome, error = "failed", failure
        except Exception:
            outcome, error = "failed", HostError("INTERNAL_ERROR", "the turn failed in the host")
        if self.stopping:
            return
        await host.storage.end_turn(turn_id, outcome, host.clock.now_ms())
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
        if approval is not None:
            final: ExecutionState = "completed" if outcome == "completed" else "interrupted"
            await host.approvals.execution_finished(approval.id, final)
        if self.tasks.get(session_id) is asyncio.current_task():
            del self.tasks[session_id]

    patch(TurnRunner, "_run", _run)


# R7.2: session/list lists every session exactly as session/get reports it. The host's
# session/list works out activeExecutionId from the stored approvals ("the last approved
# plan whose execution has not completed"), so an interrupted execution (a cancelled
# execution turn, or one a restart cut off) is still listed as active; session/get is right.
@variant("list-counts-interrupted-execution-active")
def _list_counts_interrupted_execution_active() -> None:
    async def session_list(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        sessions = []
        for row in await self.storage.list_sessions():
            wire = self.session_wire(row)
            if wire["activeExecutionId"] is None:
                executed = [
                    a
                    for a in await self.storage.list_approvals(row.id)
                    if a.status == "approved" and a.execution_state != "completed"
                ]
                if executed:
                    wire = {**wire, "activeExecutionId": executed[-1].execution_id}
            sessions.append(wire)
        return {"sessions": sessions}

    patch(Host, "session_list", session_list)


# R5.1 / R4.9: while an approved execution is active, queued included (no turn yet), a
# prompt is refused with SESSION_BUSY. The host's busy check for a prompt looks at the
# active turn and the pending approval only, so a prompt sent while the execution is still
# queued starts a prompt turn beside it.
@variant("prompt-while-queued")
def _prompt_while_queued() -> None:
    async def session_prompt(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        activity = self.activity_of(row.id)
        if activity.active_turn_id is None:
            activity = replace(activity, active_execution_id=None)
        ensure_idle_for(activity, "a new prompt")
        if row.provider_base_url is None or row.model is None:
            raise HostError("PROVIDER_NOT_CONFIGURED", "configure a model provider first")
        turn_id = await self.turns.start(row, "prompt", params["text"])
        return {"turnId": turn_id}

    patch(Host, "session_prompt", session_prompt)


# R4.7: the execution turn's turn/started names the approval and the execution it runs.
# The host looks the approval up by session and takes the first approved one, so the
# execution of a second approved plan in a session (a revision, or a plan submitted by an
# execution turn) is announced with the first plan's approvalId and executionId.
@variant("execution-turn-names-first-approval")
def _execution_turn_names_first_approval() -> None:
    first: dict[str, tuple[str, str | None]] = {}
    start = TurnRunner.start

    async def _start(
        self: TurnRunner, session: Any, kind: str, user_text: str, approval: Any = None, **kw: Any
    ) -> str:
        if approval is not None:
            first.setdefault(session.id, (approval.id, approval.execution_id))
        return await start(self, session, kind, user_text, approval, **kw)

    def rewrite(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        if method == "turn/started" and params.get("kind") == "execution":
            named = first.get(params["sessionId"])
            if named is not None:
                return {**params, "approvalId": named[0], "executionId": named[1]}
        return params

    patch(TurnRunner, "start", _start)
    rewrite_notifications(rewrite)


# R5.1 (cancel) / R4.5: a cancelled turn ends with outcome "cancelled", also in storage;
# the execution it ran becomes "interrupted". The host reports a cancelled execution turn
# itself as "interrupted" (turn/ended and turns.state), confusing the turn's outcome with
# the execution's state. Prompt turns are cancelled correctly.
@variant("cancelled-execution-turn-interrupted")
def _cancelled_execution_turn_interrupted() -> None:
    execution_turns: set[str] = set()
    end_turn = Storage.end_turn

    async def _end_turn(self: Storage, turn_id: str, state: str, at: int) -> None:
        if state == "cancelled" and turn_id in execution_turns:
            state = "interrupted"
        await end_turn(self, turn_id, state, at)

    def rewrite(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        if method == "turn/started" and params.get("kind") == "execution":
            execution_turns.add(params["turnId"])
        if (
            method == "turn/ended"
            and params.get("outcome") == "cancelled"
            and params.get("turnId") in execution_turns
        ):
            return {**params, "outcome": "interrupted"}
        return params

    patch(Storage, "end_turn", _end_turn)
    rewrite_notifications(rewrite)


# R4.11 / R4.10: startup recovery ends every turn the previous process left active as
# "interrupted". The host's recovery records an execution turn it cuts off as "cancelled"
# (it treats the interrupted execution as cancelled by the restart); prompt and scheduled
# turns read "interrupted" as they should.
@variant("recovery-execution-turn-cancelled")
def _recovery_execution_turn_cancelled() -> None:
    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self.transaction() as conn:
            approvals = await conn.execute(
                "UPDATE plan_approvals SET status = 'interrupted', "
                "status_code = 'TURN_INTERRUPTED', decided_at = ? WHERE status = 'pending'",
                (now,),
            )
            executions = await conn.execute(
                "UPDATE plan_approvals SET execution_state = 'interrupted' "
                "WHERE execution_state IN ('queued', 'running')"
            )
            await conn.execute(
                "UPDATE turns SET state = 'cancelled', ended_at = ? "
                "WHERE state = 'active' AND kind = 'execution'",
                (now,),
            )
            turns = await conn.execute(
                "UPDATE turns SET state = 'interrupted', ended_at = ? WHERE state = 'active'",
                (now,),
            )
            await conn.execute(
                "UPDATE scheduled_task_runs SET outcome = 'failed', "
                "error_code = 'TURN_INTERRUPTED', "
                "error_message = 'the host stopped before the run finished' "
                "WHERE outcome = 'running'"
            )
        return approvals.rowcount, executions.rowcount, turns.rowcount

    patch(Storage, "recover", recover)


CASES = [
    BrokenCase(
        "execution-id-from-clock",
        "execution",
        "another_sessions_plan_can_be_approved",
        "R4.9",
        "INTERNAL_ERROR",
    ),
    BrokenCase(
        "execution-end-clears-latest-session",
        "execution",
        "another_sessions_plan_can_be_approved",
        "R4.5",
        "the session still runs",
    ),
    BrokenCase(
        "cancel-answers-execution-id",
        "execution",
        "execution_whose_turn_is_cancelled",
        "R5.1",
        "which is no turn that session started",
    ),
    BrokenCase(
        "interrupted-notice-shows-running",
        "execution",
        "execution_whose_turn_is_cancelled",
        "R7.2",
        "the last approval/updated",
    ),
    BrokenCase(
        "deadline-interrupts-running-execution",
        "deadline",
        "carried_out_past_it",
        "R4.5",
        "the execution was announced as",
    ),
    BrokenCase(
        "execution-cleared-after-session-notice",
        "execution",
        "approved_plan_is_queued_runs_and_completes",
        "R7.2",
        "the last session/updated",
    ),
    BrokenCase(
        "list-counts-interrupted-execution-active",
        "execution",
        "execution_whose_turn_is_cancelled",
        "R7.2",
        "session/list shows the session",
    ),
    BrokenCase(
        "prompt-while-queued",
        "turn_boundaries",
        "prompt_while_an_approved_plan_waits",
        "R5.1",
        "expected the host to refuse",
    ),
    BrokenCase(
        "execution-turn-names-first-approval",
        "execution",
        "made_during_an_execution_is_carried_out",
        "R4.7",
        "both announce themselves as the turn of execution",
    ),
    BrokenCase(
        "cancelled-execution-turn-interrupted",
        "execution",
        "execution_whose_turn_is_cancelled",
        "R4.5",
        "the cancelled execution turn ended",
    ),
    BrokenCase(
        "recovery-execution-turn-cancelled",
        "restart_interruption",
        "running_execution_is_interrupted_when_the_host and restarts",
        "R4.11",
        "no turn was recorded as interrupted",
    ),
]
