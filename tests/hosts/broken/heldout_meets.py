"""Broken hosts: a held-out set (features meeting each other: Plan and tasks, executions
and permission questions, shells and turns, new_context and plans, restarts), written from
the contract alone. Each feature is right on its own; their combination is not."""

from __future__ import annotations

import contextlib
import json
import logging
import weakref
from dataclasses import replace
from typing import Any

from hosts.registry import BrokenCase, patch, variant

log = logging.getLogger(__name__)


# P29 (implementing-a-host.md, Scheduled tasks): "A task runs when it comes due whatever
# the sessions of its project are doing (a plan awaiting approval, an execution under way)".
# Bug: so as not to disturb a user who is deciding on a plan, the due-timer looks at the
# sessions of the task's workspace root and drops the run when one of them has a plan
# pending or an execution queued/running (runAt is cleared as after any firing). task/run
# by hand is not affected.
# Observed: no task/runFinished, no run session, no provider request, lastRun stays null.
# Recipe: session/create (root W, plan) + prompt -> SubmitPlan (approval pending);
# task/create (agent, root W, runAt = now + 60 s); conformance/clock/advance 60 s;
# expect task/runFinished and a run session; none comes.
@variant("mt-due-task-skips-busy-project")
def due_task_skips_busy_project() -> None:
    from reference_host.errors import HostError
    from reference_host.tasks import Tasks

    async def fire(self: Tasks, task_id: str) -> None:
        self._timers.pop(task_id, None)
        row = await self.host.storage.get_task(task_id)
        if row is None or not row["enabled"]:
            return
        await self.host.storage.update_task(task_id, {"run_at": None})
        root = row["workspace_root"]
        if root is not None:
            for session in await self.host.storage.list_sessions():
                if session.workspace_root != root:
                    continue
                activity = self.host.activity_of(session.id)
                if activity.pending_approval_id or activity.active_execution_id:
                    log.info("task %s: project %s is busy with a plan; skipped", task_id, root)
                    return
        with contextlib.suppress(HostError):
            await self.run(row)

    patch(Tasks, "_fire", fire)


# R3.11 (Approval §3, "Expiry is eager"): "Each approval expires at its own deadline ...
# an earlier approval's deadline never expires a later one of the same session, nor takes
# it out of its session's pendingApprovalId."
# Bug: the expiry timer assumes "one pending approval per session" (R4.8) and so expires
# the session's *currently pending* approval when any of its approvals' timers fires; the
# deadline it checks is the one of the approval the timer was armed for.
# Observed: a revision B submitted after A was rejected (or approved and executed) reads
# `expired`/PLAN_APPROVAL_TIMEOUT, with an approval/updated, at A's deadline, long before
# its own expiresAt; the session's pendingApprovalId becomes null.
# Recipe: Plan prompt -> SubmitPlan A at t0; approval/reject A; advance 10 min; prompt ->
# SubmitPlan B; clock/advance 20 min (t0 + 30 min); approval/get B -> `expired` (expected
# `pending`, expiresAt t0 + 40 min).
@variant("mt-expiry-timer-hits-newer-plan")
def expiry_timer_hits_newer_plan() -> None:
    from reference_host.approvals import TIMEOUT_CODE, Approvals, approval_wire
    from reference_host.state import is_expired

    async def expire(self: Approvals, approval_id: str) -> None:
        host = self.host
        fired = await host.storage.get_approval(approval_id)
        if fired is None or not is_expired(fired.expires_at, host.clock.now_ms()):
            return
        pending_id = host.activity_of(fired.session_id).pending_approval_id
        if pending_id is None:
            return
        row = await host.storage.get_approval(pending_id)
        if row is None or row.status != "pending":
            return
        expired = replace(
            row, status="expired", status_code=TIMEOUT_CODE, decided_at=host.clock.now_ms()
        )
        await host.storage.update_approval(expired)
        host.set_activity(row.session_id, pending_approval_id=None)
        host.notify("approval/updated", {"approval": approval_wire(expired)})
        await host.publish_session(row.session_id)

    patch(Approvals, "expire", expire)


# R3.10 / R3.12 (Approval §3, "The deadline"): reloads and re-reads never move the
# deadline, "and nor does the start-up recovery: an approval it interrupts keeps its
# expiresAt".
# Bug: a restart between a submission and its decision: the recovery, which ends the
# approval's chance of a decision, also closes its deadline at the moment of the
# interruption (expires_at = the recovery's clock when that is earlier).
# Observed: after the restart, approval/get and plan_approvals show expiresAt equal to
# decidedAt (the restart time) instead of createdAt + 30 minutes.
# Recipe: Plan prompt -> SubmitPlan (note expiresAt); restart the host; approval/get ->
# status interrupted, TURN_INTERRUPTED, expiresAt unchanged.
@variant("mt-recovery-closes-deadline")
def recovery_closes_deadline() -> None:
    from reference_host.storage import Storage

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self.transaction() as conn:
            approvals = await conn.execute(
                "UPDATE plan_approvals SET status = 'interrupted', "
                "status_code = 'TURN_INTERRUPTED', decided_at = ?, "
                "expires_at = MIN(expires_at, ?) WHERE status = 'pending'",
                (now, now),
            )
            executions = await conn.execute(
                "UPDATE plan_approvals SET execution_state = 'interrupted' "
                "WHERE execution_state IN ('queued', 'running')"
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


# P28 (Scheduled tasks, "A run cut short"): a run under way when the host stopped "After
# the restart its record reads failed with TURN_INTERRUPTED, in task/list's lastRun and in
# scheduled_task_runs", and its turn is ended like any other (R4.11).
# Bug: the start-up recovery was written for approvals, executions and turns; the
# scheduled run whose turn it interrupts is forgotten and stays `running` for good.
# Observed: after the restart the turn reads `interrupted` but task/list's lastRun (and
# scheduled_task_runs.outcome) still read `running`, error null.
# Recipe: task/create (agent) + task/run whose provider request is held open (or whose
# Bash waits on a gate); restart the host while the run is under way;
# task/list -> lastRun.outcome `failed`, error.code TURN_INTERRUPTED.
@variant("mt-recovery-leaves-runs-running")
def recovery_leaves_runs_running() -> None:
    from reference_host.storage import Storage

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
            turns = await conn.execute(
                "UPDATE turns SET state = 'interrupted', ended_at = ? WHERE state = 'active'",
                (now,),
            )
        return approvals.rowcount, executions.rowcount, turns.rowcount

    patch(Storage, "recover", recover)


# R4.9 / R1.7 / P10 EnterPlanMode: "an execution turn may enter Plan (EnterPlanMode) and
# submit a new plan"; EnterPlanMode makes "SubmitPlan ... valid for the rest of the turn".
# Bug: R1.7's "not in the execution of an approved plan" is read as "not while an
# execution is active": SubmitPlan is refused with SUBMIT_PLAN_OUTSIDE_PLAN_TURN whenever
# the session has a queued or running execution, also once its turn entered Plan.
# Observed: in an execution turn, EnterPlanMode -> ok, session in plan; SubmitPlan ->
# turn/toolResult denied SUBMIT_PLAN_OUTSIDE_PLAN_TURN, no approval, no artifact, and the
# model is asked again.
# Recipe: Plan prompt -> SubmitPlan; approve (auto); execution's model: EnterPlanMode,
# then SubmitPlan alone -> expect ok, a new pending approval.
@variant("mt-submitplan-refused-in-execution")
def submitplan_refused_in_execution() -> None:
    from reference_host.errors import HostError
    from reference_host.storage import SessionRow
    from reference_host.turns import CallOutcome, TurnRunner

    original = TurnRunner._dispatch

    async def dispatch(
        self: TurnRunner, session: SessionRow, turn_id: str, name: str, args: dict[str, Any]
    ) -> CallOutcome:
        if name == "SubmitPlan" and self.host.activity_of(session.id).active_execution_id:
            raise HostError(
                "SUBMIT_PLAN_OUTSIDE_PLAN_TURN",
                "SubmitPlan is not valid in the execution of an approved plan",
            )
        return await original(self, session, turn_id, name, args)

    patch(TurnRunner, "_dispatch", dispatch, wraps=True)


# R7.6 (Commands and shells): shell/setDefault "is no session's configuration: it is
# accepted also while sessions that follow the default have a turn under way (it has no
# SESSION_BUSY)".
# Bug: §5's "shell configuration change ... is rejected while that turn is active" is
# applied to the default too: setDefault is refused with SESSION_BUSY while any session
# that follows the default (shellId null) has an active turn or execution.
# Observed: shell/setDefault answers SESSION_BUSY (not among its listed errors) and the
# default stays as it was.
# Recipe: session (shellId null, ask) prompt -> model calls Bash -> permission/requested
# (the turn waits); shell/setDefault {bash} -> expect {defaultShellId: bash}.
@variant("mt-setdefault-busy-while-turn")
def setdefault_busy_while_turn() -> None:
    from reference_host.errors import HostError
    from reference_host.host import Host

    original = Host.shell_set_default

    async def shell_set_default(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        for session in await self.storage.list_sessions():
            if session.shell_id is not None:
                continue
            activity = self.activity_of(session.id)
            if activity.active_turn_id is not None or activity.active_execution_id is not None:
                raise HostError(
                    "SESSION_BUSY",
                    "the default shell cannot change while a session that uses it is busy",
                    {"sessionId": session.id},
                )
        return await original(self, params)

    patch(Host, "shell_set_default", shell_set_default, wraps=True)


# R7.3 / R7.6 (Commands and shells): "Bash runs through the session's shell, or the
# persisted default"; after `shellId: null` "its commands run in the default shell";
# shell/setDefault persists the default.
# Bug: a session that follows the default resolves it on its first command and keeps that
# shell in a per-session cache (so one turn's commands stay in one shell); a later
# shell/setDefault never reaches a session that has already run a command.
# Observed: after shell/setDefault, shell/list shows the new default but the session's
# next command/started (and command_audit) names the old shell and runs its program.
# Recipe: session (shellId null) prompt -> Bash `echo $0` (default sh); shell/setDefault
# bash; prompt -> Bash -> expect command/started shellId = bash.
@variant("mt-session-pins-default-shell")
def session_pins_default_shell() -> None:
    from reference_host.storage import SessionRow
    from reference_host.turns import CallOutcome, TurnRunner

    pinned: weakref.WeakKeyDictionary[TurnRunner, dict[str, str]] = weakref.WeakKeyDictionary()
    original = TurnRunner._bash

    async def bash(
        self: TurnRunner, session: SessionRow, turn_id: str, args: dict[str, Any]
    ) -> CallOutcome:
        if session.shell_id is None:
            cache = pinned.setdefault(self, {})
            shell_id = cache.get(session.id)
            if shell_id is None:
                shell_id = await self.host.default_shell_id()
                if shell_id is not None:
                    cache[session.id] = shell_id
            session = replace(session, shell_id=shell_id)
        return await original(self, session, turn_id, args)

    patch(TurnRunner, "_bash", bash, wraps=True)


# R5.1 / R4.5 (Execution and restart §4): "Only the execution reads interrupted: its turn
# keeps its own outcome, so a cancelled execution turn ends cancelled in turn/ended and in
# turns.state (R5.1), and a failed one failed."
# Bug: when an execution turn ends without completing, the value written to turns.state
# is the execution's final state (`interrupted`), not the turn's outcome; turn/ended still
# reports the outcome.
# Observed: turns.state `interrupted` where turn/ended said `cancelled` (or `failed`).
# Recipe: Plan prompt -> SubmitPlan; approve (ask); execution's model calls Bash ->
# permission/requested; session/cancel -> turn/ended cancelled; read turns row -> expect
# state `cancelled`.
@variant("mt-exec-turn-stored-interrupted")
def exec_turn_stored_interrupted() -> None:
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
        final: ExecutionState = "completed" if outcome == "completed" else "interrupted"
        stored = final if approval is not None else outcome
        await host.storage.end_turn(turn_id, stored, host.clock.now_ms())
        if approval is not None:
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


# R5.9 (Sessions, turns and boundaries): "every notification names the session of the
# turn it reports, and the turn it names is that session's own (a permission question
# names the turn whose call it asks about)"; P7: a question "names the session and the
# turn of the call".
# Bug: during an execution the question is attributed to the approval the execution
# carries out, and takes that approval's turnId: the Plan turn that submitted the plan,
# which has long ended.
# Observed: permission/requested in an execution turn names turnId = the approval's
# turnId instead of the execution turn of turn/started (kind execution).
# Recipe: Plan prompt -> SubmitPlan; approve (ask); execution's model calls Bash ->
# permission/requested.turnId must equal the execution's turnId.
@variant("mt-exec-question-names-plan-turn")
def exec_question_names_plan_turn() -> None:
    from reference_host.provider_client import ToolCall
    from reference_host.storage import SessionRow
    from reference_host.turns import TurnRunner

    original = TurnRunner._require_permission

    async def require_permission(
        self: TurnRunner,
        session: SessionRow,
        turn_id: str,
        call: ToolCall,
        args: dict[str, Any],
        unattended: bool,
    ) -> None:
        execution_id = self.host.activity_of(session.id).active_execution_id
        if execution_id is not None:
            for approval in await self.host.storage.list_approvals(session.id):
                if approval.execution_id == execution_id and approval.turn_id is not None:
                    turn_id = approval.turn_id
        await original(self, session, turn_id, call, args, unattended)

    patch(TurnRunner, "_require_permission", require_permission, wraps=True)


# new_context (Planning §1, P10) with R4.7: after a new_context "the next request of the
# turn, and the first request of later turns, carry the summary and none of the messages
# of earlier turns" (R1.3).
# Bug: R4.7 ("the execution continues the session's conversation: its first provider
# request carries the earlier messages of the session") is implemented by giving an
# execution turn the whole conversation; only a reset made inside the execution itself
# is honoured, so a new_context called while planning is ignored by the execution.
# Observed: the execution's first provider request carries messages from before the
# Plan turn's new_context (an earlier prompt's text, the Plan turn's prompt).
# Recipe: prompt "ALPHA" -> answer; configure plan; prompt -> model calls
# new_context{summary}, then SubmitPlan; approve; the execution's first request must not
# contain "ALPHA".
@variant("mt-exec-history-ignores-reset")
def exec_history_ignores_reset() -> None:
    from reference_host.turns import TurnRunner, answered_only

    original = TurnRunner._history

    async def history(self: TurnRunner, session_id: str) -> list[dict[str, Any]]:
        activity = self.host.activity_of(session_id)
        if activity.active_execution_id is None:
            return await original(self, session_id)
        entries = await self.host.storage.transcript(session_id)
        start = max(
            (
                i
                for i, (_seq, turn, _role, content, _at) in enumerate(entries)
                if content.get("contextReset") and turn == activity.active_turn_id
            ),
            default=0,
        )
        kept = [
            {k: v for k, v in content.items() if k != "contextReset"}
            for _seq, _turn, _role, content, _at in entries[start:]
        ]
        return answered_only(kept)

    patch(TurnRunner, "_history", history, wraps=True)


# P8 / P7 (Scheduled tasks): "Once the run has ended, the user may prompt that session,
# and its turns are attended: its permission mode asks as in any session (P7); only the
# run's own turn is unattended (P8)."
# Bug: "unattended" is remembered per session (the run's session is marked when its run
# starts) rather than per turn, so every later turn of a run's session is unattended too.
# Observed: a user prompt in a finished run's session (permission mode ask) whose model
# calls Bash gets turn/toolResult denied PERMISSION_UNAVAILABLE, and no
# permission/requested is sent.
# Recipe: task/create (agent, ask) + task/run -> task/runFinished completed; session/prompt
# in run.sessionId -> model calls Bash -> expect permission/requested.
@variant("mt-run-session-stays-unattended")
def run_session_stays_unattended() -> None:
    from reference_host.ports import TurnEnded
    from reference_host.storage import ApprovalRow, SessionRow
    from reference_host.turns import TurnRunner

    marked: weakref.WeakKeyDictionary[TurnRunner, set[str]] = weakref.WeakKeyDictionary()
    original = TurnRunner.start

    async def start(
        self: TurnRunner,
        session: SessionRow,
        kind: str,
        user_text: str,
        approval: ApprovalRow | None = None,
        unattended: bool = False,
        on_end: TurnEnded | None = None,
    ) -> str:
        unattended_sessions = marked.setdefault(self, set())
        if unattended:
            unattended_sessions.add(session.id)
        unattended = session.id in unattended_sessions
        return await original(self, session, kind, user_text, approval, unattended, on_end)

    patch(TurnRunner, "start", start, wraps=True)


# P7 (Approval §3, Permission modes): "An answer covers its one call: a later call asks
# again, in the same turn or another, also when it runs the very command or writes the
# very file allowed before."
# Bug: a shortcut for the plan cycle: a call the user allowed while planning (a Bash in a
# Plan turn under ask) is remembered for the session, and the same call (same tool, same
# input) in the execution of a plan is treated as already allowed.
# Observed: the execution's Bash of a command allowed during planning runs (status ok)
# without a permission/requested.
# Recipe: session (plan, ask) prompt -> Bash "echo probe" -> permission/requested -> allow;
# then SubmitPlan; approve (ask); execution's model calls Bash "echo probe" -> expect a
# new permission/requested.
@variant("mt-plan-allow-carries-to-execution")
def plan_allow_carries_to_execution() -> None:
    from reference_host.provider_client import ToolCall
    from reference_host.storage import SessionRow
    from reference_host.turns import TurnRunner

    allowed: weakref.WeakKeyDictionary[TurnRunner, set[tuple[str, str, str]]] = (
        weakref.WeakKeyDictionary()
    )
    original = TurnRunner._require_permission

    async def require_permission(
        self: TurnRunner,
        session: SessionRow,
        turn_id: str,
        call: ToolCall,
        args: dict[str, Any],
        unattended: bool,
    ) -> None:
        remembered = allowed.setdefault(self, set())
        key = (session.id, call.name, json.dumps(args, sort_keys=True))
        executing = self.host.activity_of(session.id).active_execution_id is not None
        if executing and key in remembered:
            return
        await original(self, session, turn_id, call, args, unattended)  # raises when denied
        if session.mode == "plan" and not executing:
            remembered.add(key)

    patch(TurnRunner, "_require_permission", require_permission, wraps=True)


# R4.9 / §5 (Execution and restart; Sessions): "only one execution may be queued or
# running for a session"; "Busy is each session's own ... no turn of another session (of
# the same workspace root ...) keeps an idle session from" acting; the EXECUTION_ACTIVE
# freedom covers only "the session's earlier execution".
# Bug: the one-execution rule is enforced per project (workspace root), the shared
# resource two executions would both edit: an approve is refused with EXECUTION_ACTIVE
# while another session of the same root has an execution queued or running.
# Observed: approval/approve in session B answers EXECUTION_ACTIVE; B's approval stays
# pending, B stays in Plan.
# Recipe: two sessions on root W; A: Plan prompt -> SubmitPlan, fault/arm holdExecution,
# approve (A's execution stays queued); B: Plan prompt -> SubmitPlan, approve -> expect
# approved with executionState queued.
@variant("mt-exec-active-per-project")
def exec_active_per_project() -> None:
    from reference_host.approvals import Approvals
    from reference_host.errors import HostError
    from reference_host.state import PermissionMode, is_expired

    original = Approvals.approve

    async def approve(
        self: Approvals, session_id: str, approval_id: str, mode: PermissionMode
    ) -> dict[str, Any]:
        host = self.host
        row = await self.require(session_id, approval_id)
        session = await host.require_session(session_id)
        pending = row.status == "pending" and not is_expired(row.expires_at, host.clock.now_ms())
        if pending and session.workspace_root is not None:
            for other in await host.storage.list_sessions():
                if other.id == session_id or other.workspace_root != session.workspace_root:
                    continue
                execution_id = host.activity_of(other.id).active_execution_id
                if execution_id is not None:
                    raise HostError(
                        "EXECUTION_ACTIVE",
                        "another execution is queued or running in this project",
                        {"executionId": execution_id},
                    )
        return await original(self, session_id, approval_id, mode)

    patch(Approvals, "approve", approve, wraps=True)


CASES = [
    BrokenCase(
        "mt-due-task-skips-busy-project",
        "scheduled_plan",
        "while_a_plan_of_its_project_awaits_approval",
        "P29",
        "the host announced no run of it",
    ),
    BrokenCase(
        "mt-expiry-timer-hits-newer-plan",
        "deadline",
        "after_a_rejected_one_still_waits",
        "R3.9",
        "the revised plan reads expired at the first plan's deadline",
    ),
    BrokenCase(
        "mt-recovery-closes-deadline",
        "restart_interruption",
        "between_two_restarts",
        "R3.10",
        "the interrupted plan's deadline reads",
    ),
    BrokenCase(
        "mt-recovery-leaves-runs-running",
        "scheduled_plan",
        "under_way_when_the_host",
        "P28",
        "the run cut short reads running",
    ),
    BrokenCase(
        "mt-submitplan-refused-in-execution",
        "execution",
        "still_waits_for_the_user_once_that_execution_ended",
        "R4.8",
        "expected the host to refuse",
    ),
    BrokenCase(
        "mt-setdefault-busy-while-turn",
        "shell",
        "follows_it_is_busy",
        "R7.6",
        "shell/setDefault failed with SESSION_BUSY",
    ),
    BrokenCase(
        "mt-session-pins-default-shell",
        "shell",
        "follows_a_change_of_the_default",
        "R7.6",
        "the command was announced in",
    ),
    BrokenCase(
        "mt-exec-turn-stored-interrupted",
        "execution",
        "an_execution_whose_turn_is_cancelled_is_interrupted",
        "R5.1",
        "but its turns row reads interrupted",
    ),
    BrokenCase(
        "mt-exec-question-names-plan-turn",
        "execution",
        "with_ask_a_file_change_waits",
        "P7",
        "the question names turn",
    ),
    BrokenCase(
        "mt-exec-history-ignores-reset",
        "plan_tools",
        "execution_after_a_new_context",
        "P10",
        "in the execution's first request the model was still given",
    ),
    BrokenCase(
        "mt-run-session-stays-unattended",
        "scheduled_plan",
        "once_its_run_has_ended",
        "P8",
        "without asking the user",
    ),
    BrokenCase(
        "mt-plan-allow-carries-to-execution",
        "plan_tools",
        "allowed_while_planning",
        "P7",
        "Bash ran without asking for permission",
    ),
    BrokenCase(
        "mt-exec-active-per-project",
        "execution",
        "while_this_sessions_execution_runs",
        "R4.9",
        "was refused with EXECUTION_ACTIVE",
    ),
]
