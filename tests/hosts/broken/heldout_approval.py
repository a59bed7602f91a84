"""Broken hosts: an eighth held-out set (approval and execution), written from the contract
alone.

Nine of these fourteen went uncaught at first; all nine are caught now (a clock set back
before and after an expiry, the execution that made a plan read completed and named as the
plan's turn, Edit asking under ask, a permission mode changed after the execution, the
session announced after an approve, two sessions' permission questions at once, and a
decision in one session leaving another's plan of the same moment to expire).
execution-started-without-execution-id is caught only when a wait runs out, and
approval-list-stale-execution-state only by the restart's comparison, so neither has a
case.
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
from dataclasses import replace
from typing import Any

from hosts.registry import BrokenCase, patch, rewrite_notifications, variant
from reference_host import approvals, turns
from reference_host.approvals import TIMEOUT_CODE, Approvals, approval_wire
from reference_host.clock import Clock, ManualClock, TimerHandle, _Timer
from reference_host.errors import HostError
from reference_host.host import Host
from reference_host.permissions import PermissionBroker, _Request
from reference_host.state import ApprovalFacts
from reference_host.turns import TurnRunner


# P7 / R5.9: a permission question asked during an execution names the Plan turn that
# submitted the approval (the approval's turnId) instead of the execution turn the call
# runs in; outside an execution it names the right turn.
@variant("permission-names-plan-turn")
def _permission_names_plan_turn() -> None:
    plan_turn_of: dict[str, str] = {}
    start = TurnRunner.start

    async def _start(
        self: TurnRunner,
        session: Any,
        kind: str,
        user_text: str,
        approval: Any = None,
        unattended: bool = False,
        on_end: Any = None,
    ) -> str:
        turn_id = await start(self, session, kind, user_text, approval, unattended, on_end)
        if approval is not None and approval.turn_id is not None:
            plan_turn_of[turn_id] = approval.turn_id
        return turn_id

    ask = PermissionBroker.ask

    async def _ask(
        self: PermissionBroker, session_id: str, turn_id: str, tool: str, tool_input: Any
    ) -> bool:
        return await ask(self, session_id, plan_turn_of.get(turn_id, turn_id), tool, tool_input)

    patch(TurnRunner, "start", _start)
    patch(PermissionBroker, "ask", _ask)


# P14: "past the deadline" is judged by the clock alone: an approval that expired keeps
# answering PLAN_APPROVAL_TIMEOUT only while the clock is still at or past its expiresAt;
# once the clock is set back before the deadline, approve and reject of the expired
# approval get APPROVAL_NOT_PENDING.
@variant("expired-answers-by-clock")
def _expired_answers_by_clock() -> None:
    def ensure_decidable(approval: ApprovalFacts, now_ms: int) -> None:
        if approval.status in ("pending", "expired") and now_ms >= approval.expires_at:
            raise HostError("PLAN_APPROVAL_TIMEOUT", "the approval's deadline has passed")
        if approval.status != "pending":
            raise HostError(
                "APPROVAL_NOT_PENDING",
                f"the approval is {approval.status}; only a pending approval can be decided",
                {"status": approval.status},
            )

    patch(approvals, "ensure_decidable", ensure_decidable)


# R3.11 / P32: timers are countdowns fed by the clock's forward moves; a clock/set that
# moves the clock back is ignored by them. After the clock went back, an approval expires
# (eagerly, with its notification) before the clock reaches its expiresAt.
@variant("timers-ignore-clock-going-back")
def _timers_ignore_clock_going_back() -> None:
    def _lost(clock: ManualClock) -> int:  # the backward movement so far, never counted
        return int(clock.__dict__.get("lost_ms", 0))

    def call_at(self: ManualClock, due_ms: int, callback: Any) -> TimerHandle:
        # the countdown starts now: it is due after (due - now) of forward movement
        timer = _Timer(due_ms + _lost(self), next(self._seq), callback)
        heapq.heappush(self._timers, timer)
        return TimerHandle(timer)

    async def fire_due(self: ManualClock) -> None:
        while self._timers and self._timers[0].due_ms <= self.now_ms() + _lost(self):
            timer = heapq.heappop(self._timers)
            if not timer.cancelled:
                await timer.callback()

    async def set_(self: ManualClock, now_ms: int) -> int:
        if now_ms < self._now:
            self.__dict__["lost_ms"] = _lost(self) + (self._now - now_ms)
        self._now = now_ms
        await self.fire_due()
        return self._now

    async def expire(self: Approvals, approval_id: str) -> None:
        # the timer is trusted: it fired, so the approval is overdue
        host = self.host
        row = await host.storage.get_approval(approval_id)
        if row is None or row.status != "pending":
            return
        expired = replace(
            row, status="expired", status_code=TIMEOUT_CODE, decided_at=host.clock.now_ms()
        )
        await host.storage.update_approval(expired)
        host.set_activity(row.session_id, pending_approval_id=None)
        host.notify("approval/updated", {"approval": approval_wire(expired)})
        await host.publish_session(row.session_id)

    patch(ManualClock, "call_at", call_at)
    patch(ManualClock, "fire_due", fire_due)
    patch(ManualClock, "set", set_)
    patch(Approvals, "expire", expire)


# R4.5 / R4.9: an execution whose turn entered Plan and submitted a new plan is taken as
# superseded: it ends `interrupted` although its turn ended `completed`.
@variant("superseded-execution-interrupted")
def _superseded_execution_interrupted() -> None:
    finished = Approvals.execution_finished

    async def execution_finished(self: Approvals, approval_id: str, final: Any) -> None:
        row = await self.host.storage.get_approval(approval_id)
        if (
            final == "completed"
            and row is not None
            and self.host.activity_of(row.session_id).pending_approval_id is not None
        ):
            final = "interrupted"
        await finished(self, approval_id, final)

    patch(Approvals, "execution_finished", execution_finished)


# R7.2 / C4: the session/updated that approve sends is built from the session row read
# before the approve (still Plan, the earlier permission mode), with the new activity;
# the approve result and session/get report Agent with the chosen mode.
@variant("approve-announces-the-plan-session")
def _approve_announces_the_plan_session() -> None:
    stale: dict[str, Any] = {}
    approve = Approvals.approve

    async def _approve(self: Approvals, session_id: str, approval_id: str, mode: Any) -> Any:
        row = await self.host.storage.get_session(session_id)
        if row is not None:
            stale[session_id] = row
        try:
            return await approve(self, session_id, approval_id, mode)
        finally:
            stale.pop(session_id, None)

    publish = Host.publish_session

    async def publish_session(self: Host, session_id: str) -> dict[str, Any]:
        before = stale.pop(session_id, None)
        if before is None:
            return await publish(self, session_id)
        self.notify("session/updated", {"session": self.session_wire(before)})
        return self.session_wire(await self.require_session(session_id))

    patch(Approvals, "approve", _approve)
    patch(Host, "publish_session", publish_session)


# P7: `ask` asks before Write and Bash but lets Edit run without a question.
@variant("ask-skips-edit")
def _ask_skips_edit() -> None:
    def needs_permission(permission_mode: str, tool: str) -> bool:
        if permission_mode == "auto":
            return False
        if permission_mode == "accept-edits":
            return tool == "Bash"
        return tool in ("Write", "Bash")

    patch(turns, "needs_permission", needs_permission)


# R4.7: the execution turn's turn/started names the approval but not the execution
# (executionId null); execution/updated and the approval name it.
@variant("execution-started-without-execution-id")
def _execution_started_without_execution_id() -> None:
    def rewrite(method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "turn/started" and params.get("kind") == "execution":
            return {**params, "executionId": None}
        return params

    rewrite_notifications(rewrite)


# R3.11: when an approval expires the host takes the planning as abandoned and puts the
# session back in Agent (its permission mode kept).
@variant("expiry-returns-to-agent")
def _expiry_returns_to_agent() -> None:
    async def expire(self: Approvals, approval_id: str) -> None:
        host = self.host
        row = await host.storage.get_approval(approval_id)
        if row is None or row.status != "pending":
            return
        if not approvals.is_expired(row.expires_at, host.clock.now_ms()):
            return
        now = host.clock.now_ms()
        expired = replace(row, status="expired", status_code=TIMEOUT_CODE, decided_at=now)
        await host.storage.update_approval(expired)
        session = await host.storage.get_session(row.session_id)
        if session is not None:
            await host.storage.update_session(replace(session, mode="agent", updated_at=now))
        host.set_activity(row.session_id, pending_approval_id=None)
        host.notify("approval/updated", {"approval": approval_wire(expired)})
        await host.publish_session(row.session_id)

    patch(Approvals, "expire", expire)


# P14: only approve knows about expiry; reject of an approval that already expired gets
# APPROVAL_NOT_PENDING instead of PLAN_APPROVAL_TIMEOUT (nothing changes).
@variant("reject-expired-not-pending")
def _reject_expired_not_pending() -> None:
    reject = Approvals.reject

    async def _reject(self: Approvals, session_id: str, approval_id: str) -> dict[str, Any]:
        row = await self.require(session_id, approval_id)
        if row.status == "expired":
            raise HostError(
                "APPROVAL_NOT_PENDING",
                "the approval is expired; only a pending approval can be rejected",
                {"status": row.status},
            )
        return await reject(self, session_id, approval_id)

    patch(Approvals, "reject", _reject)


# P7 / R5.9: permission request ids count per session (perm_1, perm_2, ...): when two
# sessions wait on a question at once they share an id, the later question replaces the
# earlier in the table of open questions, and an answer reaches the later one only.
@variant("permission-ids-per-session")
def _permission_ids_per_session() -> None:
    async def ask(
        self: PermissionBroker, session_id: str, turn_id: str, tool: str, tool_input: Any
    ) -> bool:
        counters: dict[str, int] = self.__dict__.setdefault("asked", {})
        counters[session_id] = counters.get(session_id, 0) + 1
        request_id = f"perm_{counters[session_id]}"
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._open[request_id] = _Request(session_id, answer)
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
        try:
            return await answer
        finally:
            if self._open.get(request_id) is not None and self._open[request_id].answer is answer:
                del self._open[request_id]

    patch(PermissionBroker, "ask", ask)


# R7.2 / R4.3: approval/list is served from a cache filled when an approval is decided;
# the execution's later states (running, completed, interrupted) reach approval/get, the
# notifications and storage, but approval/list keeps reporting `queued` (until a restart).
@variant("approval-list-stale-execution-state")
def _approval_list_stale_execution_state() -> None:
    approve = Approvals.approve

    async def _approve(self: Approvals, session_id: str, approval_id: str, mode: Any) -> Any:
        result = await approve(self, session_id, approval_id, mode)
        decided = self.host.__dict__.setdefault("decided_approvals", {})
        decided[result["approval"]["approvalId"]] = dict(result["approval"])
        return result

    async def approval_list(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        listed = [approval_wire(a) for a in await self.storage.list_approvals(row.id)]
        decided = self.__dict__.get("decided_approvals", {})
        return {"approvals": [decided.get(a["approvalId"], a) for a in listed]}

    patch(Approvals, "approve", _approve)
    patch(Host, "approval_list", approval_list)


# P7: a session that has an approved plan takes its permission mode from its latest
# approval, not from the session: after the execution, a session/configure of
# permissionMode is reported and stored but the later prompts still ask (or do not ask)
# as the approval's mode says.
@variant("permission-from-last-approval")
def _permission_from_last_approval() -> None:
    run_call = TurnRunner._run_call

    async def _run_call(
        self: TurnRunner, session: Any, turn_id: str, call: Any, unattended: bool
    ) -> Any:
        listed = await self.host.storage.list_approvals(session.id)
        granted = [a.permission_mode for a in listed if a.permission_mode is not None]
        if granted:
            session = replace(session, permission_mode=granted[-1])
        return await run_call(self, session, turn_id, call, unattended)

    patch(TurnRunner, "_run_call", _run_call)


# R3.1 / R7.2: the approval's turnId is the session's last turn that started in Plan, not
# the turn that submitted the plan: a plan submitted by a turn that entered Plan on its own
# (an Agent prompt or an execution calling EnterPlanMode) names an earlier Plan turn.
@variant("approval-turn-is-last-plan-turn")
def _approval_turn_is_last_plan_turn() -> None:
    start = TurnRunner.start

    async def _start(
        self: TurnRunner,
        session: Any,
        kind: str,
        user_text: str,
        approval: Any = None,
        unattended: bool = False,
        on_end: Any = None,
    ) -> str:
        turn_id = await start(self, session, kind, user_text, approval, unattended, on_end)
        if session.mode == "plan":
            self.host.__dict__.setdefault("plan_turns", {})[session.id] = turn_id
        return turn_id

    submit = Approvals.submit

    async def _submit(self: Approvals, session: Any, turn_id: str, args: Any) -> Any:
        plan_turn = self.host.__dict__.get("plan_turns", {}).get(session.id, turn_id)
        return await submit(self, session, plan_turn, args)

    patch(TurnRunner, "start", _start)
    patch(Approvals, "submit", _submit)


_ARMING: contextvars.ContextVar[bool] = contextvars.ContextVar("arming_expiry", default=False)


# R3.11: the host keeps its expiry timers in a table keyed by the deadline and cancels the
# timer of an approval once it is decided; two approvals created at the same host-clock
# instant (two sessions) share the key, so deciding one cancels the other's timer and that
# one is never expired eagerly (only when an approve or reject arrives after the deadline).
@variant("decision-cancels-timer-by-deadline")
def _decision_cancels_timer_by_deadline() -> None:
    call_at = Clock.call_at

    def _call_at(self: Clock, due_ms: int, callback: Any) -> TimerHandle:
        handle = call_at(self, due_ms, callback)
        if _ARMING.get():
            self.__dict__.setdefault("expiry_timers", {})[due_ms] = handle
        return handle

    submit = Approvals.submit

    async def _submit(self: Approvals, session: Any, turn_id: str, args: Any) -> Any:
        token = _ARMING.set(True)
        try:
            return await submit(self, session, turn_id, args)
        finally:
            _ARMING.reset(token)

    def _cancel(host: Any, expires_at: int) -> None:
        handle = host.clock.__dict__.get("expiry_timers", {}).pop(expires_at, None)
        if handle is not None:
            handle.cancel()

    approve = Approvals.approve
    reject = Approvals.reject

    async def _approve(self: Approvals, session_id: str, approval_id: str, mode: Any) -> Any:
        result = await approve(self, session_id, approval_id, mode)
        _cancel(self.host, result["approval"]["expiresAt"])
        return result

    async def _reject(self: Approvals, session_id: str, approval_id: str) -> dict[str, Any]:
        result = await reject(self, session_id, approval_id)
        _cancel(self.host, result["approval"]["expiresAt"])
        return result

    patch(Clock, "call_at", _call_at)
    patch(Approvals, "submit", _submit)
    patch(Approvals, "approve", _approve)
    patch(Approvals, "reject", _reject)


CASES = [
    BrokenCase(
        "permission-names-plan-turn",
        "execution",
        "file_change_waits",
        "P7",
        "the question names turn",
    ),
    BrokenCase(
        "expired-answers-by-clock",
        "deadline",
        "stays_expired_when_the_clock_is_set_back",
        "P14",
        "expected PLAN_APPROVAL_TIMEOUT",
    ),
    BrokenCase(
        "timers-ignore-clock-going-back",
        "deadline",
        "set_back_does_not_bring",
        "R3.8",
        "is expired",
    ),
    BrokenCase(
        "superseded-execution-interrupted",
        "execution",
        "still_waits_for_the_user_once",
        "R4.5",
        "an execution is completed when its turn completed",
    ),
    BrokenCase(
        "approval-turn-is-last-plan-turn",
        "execution",
        "still_waits_for_the_user_once",
        "R4.8",
        "names turn",
    ),
    BrokenCase(
        "ask-skips-edit",
        "execution",
        "an_edit_waits",
        "P7",
        "Edit ran without asking for permission",
        slow=True,
    ),
    BrokenCase(
        "permission-from-last-approval",
        "execution",
        "chosen_after_the_execution",
        "P7",
        "Write ran without asking for permission",
        slow=True,
    ),
    BrokenCase(
        "expiry-returns-to-agent",
        "deadline",
        "expires_when_the_time_is_up",
        "R3.8",
        "the session is in agent mode",
    ),
    BrokenCase(
        "reject-expired-not-pending",
        "deadline",
        "Rejecting and exactly",
        "P14",
        "expected PLAN_APPROVAL_TIMEOUT",
    ),
    BrokenCase(
        "approve-announces-the-plan-session",
        "approval",
        "switches_the_session_to_agent",
        "C4",
        "after the approve the session was first announced in mode plan",
    ),
    BrokenCase(
        "decision-cancels-timer-by-deadline",
        "deadline",
        "deciding_one_plan_leaves",
        "R3.11",
        "kept the other from expiring",
    ),
    BrokenCase(
        "permission-ids-per-session",
        "isolation",
        "asking_for_permission_at_once",
        "R5.9",
        "an answer could not tell them apart",
    ),
]
