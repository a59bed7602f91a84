"""Broken hosts: a held-out set (every action in every session and approval state), written
from the contract alone. Each host mishandles one pair of (state, action) and behaves as the
reference host everywhere else."""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, cast

from hosts.registry import BrokenCase, patch, variant

if TYPE_CHECKING:
    from reference_host.host import Host


# R5.4 (ADR §5: "mode/provider/model/permission/shell configuration change ... is rejected
# while that turn ... is active"): a shell change while a turn runs is refused with
# SESSION_BUSY and the session keeps its shell.
# Bug: the implementer reasoned that the shell is read afresh for each command, so a
# `session/configure` that names only `shellId` skips the busy check (it still honours a
# pending approval). The change is accepted mid-turn, stored and announced.
# Client sees: `{"session": {..., "shellId": <new>}}` instead of SESSION_BUSY; a Bash call
# later in the same turn runs in the new shell.
# Recipe: session/create; session/prompt (the model holds the turn open: a slow provider
# answer or a Bash call waiting on a gate); session/configure {shellId: <another shell>}
# -> expect SESSION_BUSY and session/get still shows the old shellId.
@variant("mx-shell-change-mid-turn")
def shell_change_mid_turn() -> None:
    from reference_host import host as host_module
    from reference_host.host import Host
    from reference_host.state import ensure_idle_for

    original = Host.session_configure

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        if set(params) - {"sessionId"} != {"shellId"}:
            return await original(self, params)
        row = await self.require_session(params["sessionId"])
        # the shell is read per command: only a pending approval holds a shell change back
        activity = replace(self.activity_of(row.id), active_turn_id=None, active_execution_id=None)
        ensure_idle_for(activity, "shell change")
        if params["shellId"] is not None:
            host_module._require_shell(params["shellId"])
        updated = replace(row, shell_id=params["shellId"], updated_at=self.clock.now_ms())
        await self.storage.update_session(updated)
        wire = self.session_wire(updated)
        self.notify("session/updated", {"session": wire})
        return {"session": wire}

    patch(Host, "session_configure", session_configure)


# R5.7 (ADR §5: "Approval actions are the only controls enabled for a pending Plan
# request"): while a plan approval is pending, a cancel gets APPROVAL_PENDING.
# Bug: session/cancel was written as "cancel the active turn if there is one, else answer
# null"; with a plan pending there is no turn, so the cancel is answered
# `{"turnId": null}` instead of being refused.
# Recipe: Plan session, prompt, model calls SubmitPlan (turn ends, approval pending);
# session/cancel -> expect APPROVAL_PENDING, observe {"turnId": null}.
@variant("mx-cancel-ignores-pending")
def cancel_ignores_pending() -> None:
    from reference_host.host import Host

    async def session_cancel(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        return {"turnId": await self.turns.cancel(row.id)}

    patch(Host, "session_cancel", session_cancel)


# P14 / R4.4: "An approval approved, rejected or interrupted before its deadline keeps
# answering APPROVAL_NOT_PENDING after it too"; PLAN_APPROVAL_TIMEOUT is for an approval
# still pending at its deadline, or expired.
# Bug: the decision guard checks the deadline before the status, so any approval acted on
# at or after its expiresAt gets PLAN_APPROVAL_TIMEOUT, also one decided long before.
# Recipe: submit a plan; approval/reject it; conformance/clock/advance 30 min;
# approval/reject (or approve) it again -> expect APPROVAL_NOT_PENDING, observe
# PLAN_APPROVAL_TIMEOUT. (Same after a restart interrupted it and the deadline passed.)
@variant("mx-deadline-before-status")
def deadline_before_status() -> None:
    from reference_host import approvals
    from reference_host.errors import HostError
    from reference_host.state import ApprovalFacts, is_expired

    def ensure_decidable(approval: ApprovalFacts, now_ms: int) -> None:
        if approval.status == "expired" or is_expired(approval.expires_at, now_ms):
            raise HostError("PLAN_APPROVAL_TIMEOUT", "the approval's deadline has passed")
        if approval.status != "pending":
            raise HostError(
                "APPROVAL_NOT_PENDING",
                f"the approval is {approval.status}; only a pending approval can be decided",
                {"status": approval.status},
            )

    patch(approvals, "ensure_decidable", ensure_decidable)


# R3.11: "an earlier approval's deadline never expires a later one of the same session,
# nor takes it out of its session's pendingApprovalId"; R5.7 / R4.8: while an approval is
# pending a prompt gets APPROVAL_PENDING.
# Bug: the expiry timer always clears the session's waiting pointer when it fires, also
# when its own approval was decided long ago; only the row update is guarded by the
# pending status. A newer pending approval drops out of pendingApprovalId and the
# session takes prompts again.
# Recipe: Plan session; plan A submitted at t0; reject A; prompt, plan B submitted at
# t0+10 min; clock to t0+30 min (A's deadline) -> session/get shows pendingApprovalId
# null (B still pending in approval/get), and session/prompt is accepted instead of
# APPROVAL_PENDING.
@variant("mx-stale-expiry-clears-pending")
def stale_expiry_clears_pending() -> None:
    from reference_host.approvals import TIMEOUT_CODE, Approvals, approval_wire
    from reference_host.state import is_expired

    async def expire(self: Approvals, approval_id: str) -> None:
        host = self.host
        row = await host.storage.get_approval(approval_id)
        if row is None:
            return
        if row.status == "pending" and is_expired(row.expires_at, host.clock.now_ms()):
            expired = replace(
                row, status="expired", status_code=TIMEOUT_CODE, decided_at=host.clock.now_ms()
            )
            await host.storage.update_approval(expired)
            host.notify("approval/updated", {"approval": approval_wire(expired)})
        # the deadline has come: the session no longer waits on an approval
        host.set_activity(row.session_id, pending_approval_id=None)
        await host.publish_session(row.session_id)

    patch(Approvals, "expire", expire)


# R5.1 / R4.9 (ADR §4: "only one execution may be queued or running for a session"; §5):
# "While a turn, a Plan run or an approved execution (queued or running) is active ... a
# second prompt is refused with SESSION_BUSY"; "an execution still queued has no turn yet".
# Bug: session/prompt checks for a running turn and a pending approval only; an approved
# execution still queued (its turn not started) does not make the session busy for
# prompts, so a prompt turn starts beside the queued execution.
# Recipe: arm holdExecution; submit and approve a plan (execution stays queued);
# session/prompt -> expect SESSION_BUSY, observe a turnId and a turn/started of kind prompt.
@variant("mx-queued-execution-takes-prompt")
def queued_execution_takes_prompt() -> None:
    from reference_host.errors import HostError
    from reference_host.host import Host
    from reference_host.state import ensure_idle_for

    async def session_prompt(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        # an execution shows as its turn once it runs: the turn is what makes a prompt wait
        ensure_idle_for(replace(self.activity_of(row.id), active_execution_id=None), "a prompt")
        if row.provider_base_url is None or row.model is None:
            raise HostError("PROVIDER_NOT_CONFIGURED", "configure a model provider first")
        turn_id = await self.turns.start(row, "prompt", params["text"])
        return {"turnId": turn_id}

    patch(Host, "session_prompt", session_prompt)


# R4.13 (ADR §4: "A pending interruption leaves the session in Plan"; the user may then ask
# for a new plan) and R7.2 (session/get reports pendingApprovalId as it is).
# Bug: at start-up the host loads which sessions wait on an approval before the recovery
# transaction runs, and seeds its in-memory session state from that stale read. After a
# restart, a session whose pending approval was just interrupted still names it in
# pendingApprovalId, and refuses prompts and changes with APPROVAL_PENDING, while approve
# and reject of it get APPROVAL_NOT_PENDING: the session is stuck.
# Recipe: submit a plan (pending); restart the host; session/get -> pendingApprovalId
# should be null; session/prompt -> should start a turn, observe APPROVAL_PENDING.
# The stale read is kept per Storage instance, so each restarted process reads afresh.
_PENDING_AT_OPEN: weakref.WeakKeyDictionary[Any, dict[str, str]] = weakref.WeakKeyDictionary()


@variant("mx-restart-revives-pending")
def restart_revives_pending() -> None:
    from reference_host.host import Host
    from reference_host.storage import Storage

    original_recover = Storage.recover
    original_init = Host.__init__

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self._conn.execute(
            "SELECT session_id, id FROM plan_approvals WHERE status = 'pending'"
        ) as cursor:
            rows = await cursor.fetchall()
        _PENDING_AT_OPEN[self] = {str(session): str(approval) for session, approval in rows}
        return await original_recover(self, now)

    def init(self: Host, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        for session_id, approval_id in _PENDING_AT_OPEN.get(self.storage, {}).items():
            self.set_activity(session_id, pending_approval_id=approval_id)

    patch(Storage, "recover", recover, wraps=True)
    patch(Host, "__init__", init, wraps=True)


# R4.5 / R5.1: "Only the execution reads interrupted: its turn keeps its own outcome, so a
# cancelled execution turn ends cancelled in turn/ended and in turns.state".
# Bug: when an execution turn is cancelled, the turn's outcome is taken from the
# execution's final state: turn/ended says outcome "interrupted" and turns.state reads
# interrupted (the execution correctly reads interrupted).
# Recipe: approve a plan; while the execution turn runs (a Bash call waiting on a gate, or
# a slow provider answer) session/cancel -> turn/ended outcome should be "cancelled",
# observe "interrupted".
@variant("mx-cancelled-execution-turn-interrupted")
def cancelled_execution_turn_interrupted() -> None:
    from reference_host.errors import HostError
    from reference_host.storage import ApprovalRow
    from reference_host.turns import TurnRunner

    original = TurnRunner._end

    async def end(
        self: TurnRunner,
        session_id: str,
        turn_id: str,
        approval: ApprovalRow | None,
        on_end: Any,
        outcome: str,
        error: HostError | None,
    ) -> None:
        if approval is not None and outcome == "cancelled":
            outcome = "interrupted"  # a cancelled execution is an interrupted one
        await original(self, session_id, turn_id, approval, on_end, outcome, error)

    patch(TurnRunner, "_end", end, wraps=True)


# R7.6: shell/setDefault "is no session's configuration: it is accepted also while
# sessions that follow the default have a turn under way (it has no SESSION_BUSY)".
# Bug: the implementer applied ADR §5's "shell configuration change is rejected while that
# turn is active" to the default as well: while any session that follows the default
# (shellId null) has an active turn, shell/setDefault is refused with SESSION_BUSY and
# the default stays.
# Recipe: session/create without shellId; session/prompt holding the turn open;
# shell/setDefault {shellId: <another shell>} -> expect {"defaultShellId": ...}, observe
# SESSION_BUSY; shell/list still shows the old default.
@variant("mx-setdefault-busy")
def setdefault_busy() -> None:
    from reference_host.errors import HostError
    from reference_host.host import Host

    original = Host.shell_set_default

    async def shell_set_default(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        for session_id, activity in list(self.activity.items()):
            if activity.active_turn_id is None:
                continue
            row = await self.storage.get_session(session_id)
            if row is not None and row.shell_id is None:
                raise HostError(
                    "SESSION_BUSY",
                    "a session that follows the default shell has a turn under way",
                    {"sessionId": session_id, "turnId": activity.active_turn_id},
                )
        return await original(self, params)

    patch(Host, "shell_set_default", shell_set_default, wraps=True)


# P35: "Every task/run runs the task at once, as a run of its own with its own runId and
# session, also while an earlier run of the same task is still under way: it never
# answers with the earlier run".
# Bug: task/run de-duplicates: while the task's latest run is still running it answers
# with that run (same runId and sessionId) and starts nothing.
# Recipe: Agent task; task/run (provider holds the answer); task/run again -> expect a new
# runId and sessionId and a second provider request, observe the first run again.
@variant("mx-task-run-joins-running")
def task_run_joins_running() -> None:
    from reference_host.tasks import Tasks, _run_wire

    original = Tasks.run_now

    async def run_now(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require(params["taskId"])
        last = await self.host.storage.last_task_run(row["id"])
        if row["mode"] == "agent" and last is not None and last["outcome"] == "running":
            return {"run": _run_wire(last)}  # already under way
        return await original(self, params)

    patch(Tasks, "run_now", run_now, wraps=True)


# R6.3 (ADR §6: "A scheduled task must be explicitly changed to Agent before it can run
# unattended"): "A refused run changes nothing else of the task either: it stays enabled."
# Bug: a refused Plan run switches the task off (enabled false) so that it stops failing,
# in task/list and in scheduled_tasks.enabled; a runAt it is given later never fires.
# Recipe: task/create mode plan; task/run -> PLAN_REQUIRES_INTERACTIVE_SESSION (right);
# task/list -> expect enabled true, observe enabled false (and a runAt set afterwards by
# task/update {runAt} does not run the task when the clock reaches it).
@variant("mx-refused-plan-task-disabled")
def refused_plan_task_disabled() -> None:
    from reference_host.errors import HostError
    from reference_host.tasks import Tasks

    original = Tasks._finish

    async def finish(
        self: Tasks, run: dict[str, Any], outcome: str, error: HostError | None
    ) -> None:
        if outcome == "refused":
            # it cannot run unattended until the user changes it: stop scheduling it
            changes = {"enabled": 0, "updated_at": self.host.clock.now_ms()}
            await self.host.storage.update_task(run["task_id"], changes)
            self._arm(run["task_id"], None)
        await original(self, run, outcome, error)

    patch(Tasks, "_finish", finish, wraps=True)


# P7: "A second answer to the same question, an answer to an id never asked, or one to the
# question of a turn that has ended (a cancelled one included) gets
# PERMISSION_REQUEST_NOT_FOUND and changes nothing."
# Bug: the broker forgets a question only once it has been answered; a question whose turn
# was cancelled while it waited stays on the books unanswered, so a later
# permission/respond to it is accepted with {} (nothing runs: the turn is gone).
# Recipe: session with permissionMode ask; the model calls Bash -> permission/requested;
# session/cancel (turn ends cancelled); permission/respond {requestId, allow} -> expect
# PERMISSION_REQUEST_NOT_FOUND, observe {}.
@dataclass
class _Question:
    session_id: str
    answered: asyncio.Event
    allowed: bool | None = None


_QUESTIONS: weakref.WeakKeyDictionary[Any, dict[str, _Question]] = weakref.WeakKeyDictionary()


@variant("mx-permission-answer-after-cancel")
def permission_answer_after_cancel() -> None:
    from reference_host.errors import HostError
    from reference_host.ids import new_id
    from reference_host.permissions import PermissionBroker

    async def ask(
        self: PermissionBroker, session_id: str, turn_id: str, tool: str, tool_input: Any
    ) -> bool:
        questions = _QUESTIONS.setdefault(self, {})
        request_id = new_id("perm")
        question = _Question(session_id, asyncio.Event())
        questions[request_id] = question
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
        await question.answered.wait()
        del questions[request_id]  # answered: forget it
        return bool(question.allowed)

    def respond(self: PermissionBroker, request_id: str, decision: str) -> None:
        question = _QUESTIONS.get(self, {}).get(request_id)
        if question is None or question.allowed is not None:
            raise HostError(
                "PERMISSION_REQUEST_NOT_FOUND", f"no open permission request {request_id!r}"
            )
        question.allowed = decision == "allow"
        question.answered.set()

    patch(PermissionBroker, "ask", ask)
    patch(PermissionBroker, "respond", respond)


# "A move back in time fires nothing and disarms nothing" (Ordering; P32), R3.11: expiry is
# eager, the approval expires by itself when the clock reaches expiresAt.
# Bug: conformance/clock/set to an earlier time rebuilds the timer heap (ordered for a
# clock that only moves forward) from the stored schedule, i.e. the scheduled tasks; the
# approval deadlines and command timeouts armed in memory are dropped. A pending approval
# then no longer expires by itself (no approval/updated, the row stays pending) when the
# clock later passes its deadline; only an approve/reject still gets the timeout.
# Recipe: submit a plan at t0; clock/set t0-60000; clock/set t0+30 min -> expect an
# approval/updated with status expired before the answer, and the row expired; observe
# the row still pending and pendingApprovalId still set.
@variant("mx-clock-back-drops-timers")
def clock_back_drops_timers() -> None:
    from reference_host.host import Host, _within_clock_range

    original = Host.clock_set

    async def clock_set(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        clock = self._manual_clock()
        target = _within_clock_range(params["now"])
        if target >= clock.now_ms():
            return await original(self, params)
        clock.close()  # the heap assumes time only moves on: rebuild it from the schedule
        now = await clock.set(target)
        await self.tasks.schedule_all()
        return {"now": now}

    patch(Host, "clock_set", clock_set, wraps=True)


# ADR §4: "only one execution may be queued or running for a session"; R4.9 and R5 "Busy
# is each session's own": EXECUTION_ACTIVE is "Another execution is already queued or
# running in this session".
# Bug: the approve guard looks for an active execution in any session (one execution slot
# per host), so approving a plan in session B while session A's execution is queued or
# running is refused with EXECUTION_ACTIVE; B's approval stays pending.
# Recipe: sessions A and B each submit a plan; approve A (hold its execution with
# holdExecution, or keep its turn open); approve B -> expect approved with executionState
# queued, observe EXECUTION_ACTIVE.
@variant("mx-execution-active-host-wide")
def execution_active_host_wide() -> None:
    from reference_host.approvals import Approvals
    from reference_host.errors import HostError
    from reference_host.state import PermissionMode

    original = Approvals.approve

    async def approve(
        self: Approvals, session_id: str, approval_id: str, mode: PermissionMode
    ) -> dict[str, Any]:
        host = cast("Host", self.host)
        row = await self.require(session_id, approval_id)
        await host.turns.settle(session_id, row.turn_id)
        await self._ensure_decidable(row)
        for other, activity in host.activity.items():
            if activity.active_execution_id is not None:
                raise HostError(
                    "EXECUTION_ACTIVE",
                    "another execution is queued or running",
                    {"sessionId": other, "executionId": activity.active_execution_id},
                )
        return await original(self, session_id, approval_id, mode)

    patch(Approvals, "approve", approve, wraps=True)


CASES = [
    BrokenCase(
        "mx-shell-change-mid-turn",
        "shell",
        "choosing_another_shell_while_a_turn_runs",
        "R5.4",
        "expected the host to refuse",
    ),
    BrokenCase(
        "mx-cancel-ignores-pending",
        "turn_boundaries",
        "cancelling_while_a_plan_is_pending",
        "R5.7",
        "expected the host to refuse",
    ),
    BrokenCase(
        "mx-deadline-before-status",
        "approval",
        "rejected_before_its_deadline_stays_rejected",
        "R4.4",
        "expected APPROVAL_NOT_PENDING",
    ),
    BrokenCase(
        "mx-stale-expiry-clears-pending",
        "deadline",
        "after_a_rejected_one_still_waits",
        "R3.8",
        "the session names the pending approval None",
    ),
    BrokenCase(
        "mx-queued-execution-takes-prompt",
        "turn_boundaries",
        "a_prompt_while_an_approved_plan_waits_to_run",
        "R5.1",
        "expected the host to refuse",
    ),
    BrokenCase(
        "mx-restart-revives-pending",
        "restart_interruption",
        "can_ask_for_a_new_plan",
        "R4.13",
        "session/prompt failed with APPROVAL_PENDING",
    ),
    BrokenCase(
        "mx-cancelled-execution-turn-interrupted",
        "execution",
        "an_execution_whose_turn_is_cancelled_is_interrupted",
        "R4.5",
        "the cancelled execution turn ended",
    ),
    BrokenCase(
        "mx-setdefault-busy",
        "shell",
        "follows_it_is_busy",
        "R7.6",
        "shell/setDefault failed with SESSION_BUSY",
    ),
    BrokenCase(
        "mx-task-run-joins-running",
        "scheduled_plan",
        "run_again_while_its_first_run",
        "P35",
        "task/run answered the earlier run",
    ),
    BrokenCase(
        "mx-refused-plan-task-disabled",
        "scheduled_plan",
        "stays_switched_on_when_it_comes_due",
        "P29",
        "reports the task enabled: False",
    ),
    BrokenCase(
        "mx-permission-answer-after-cancel",
        "turn_boundaries",
        "a_question_of_a_cancelled_turn",
        "P7",
        "expected the host to refuse",
    ),
    BrokenCase(
        "mx-clock-back-drops-timers",
        "deadline",
        "after_the_clock_was_set_back",
        "R3.11",
        "no expiry was announced",
    ),
    BrokenCase(
        "mx-execution-active-host-wide",
        "execution",
        "while_this_sessions_execution_runs",
        "R4.9",
        "was refused with EXECUTION_ACTIVE",
    ),
]
