"""Broken hosts: a held-out set (refused actions and values), written from the contract alone."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from hosts.registry import BrokenCase, patch, variant

Params = dict[str, Any]
ParamsCheck = Callable[[str, Any], "str | None"]


def _wrap_params_check(adjust: Callable[[str, Any, ParamsCheck], str | None]) -> None:
    """Put ``adjust(method, params, original)`` in front of the dispatcher's params check.

    ``adjust`` may change ``params`` in place: the handler receives what it leaves.
    """
    from reference_host import rpc
    from reference_host.validation import params_problem

    original: ParamsCheck = params_problem  # the function rpc calls, before the patch

    def check(method: str, params: Any) -> str | None:
        return adjust(method, params, original)

    patch(rpc, "params_problem", check)


# R1.1: a mode is `agent` or `plan`, spelt exactly so; any other spelling is INVALID_PARAMS.
# Bug: session/configure parses its mode case-insensitively (a lenient enum parser on that
# one method), so `"Plan"` or `"AGENT"` is accepted and stored in lower case.
# session/create stays strict.
@variant("ho-ra-configure-mode-any-case")
def configure_mode_any_case() -> None:
    def adjust(method: str, params: Any, original: ParamsCheck) -> str | None:
        if method == "session/configure" and isinstance(params, dict):
            mode = params.get("mode")
            if isinstance(mode, str) and mode.lower() in ("agent", "plan"):
                params["mode"] = mode.lower()
        return original(method, params)

    _wrap_params_check(adjust)


# R3.4: approve's permissionMode is `ask`, `accept-edits` or `auto`, spelt exactly so.
# Bug: the host also accepts the camelCase alias `acceptEdits` (the spelling the rest of
# the protocol's identifiers use) and approves with accept-edits.
@variant("ho-ra-approve-camelcase-accept-edits")
def approve_camelcase_accept_edits() -> None:
    def adjust(method: str, params: Any, original: ParamsCheck) -> str | None:
        if (
            method == "approval/approve"
            and isinstance(params, dict)
            and params.get("permissionMode") == "acceptEdits"
        ):
            params["permissionMode"] = "accept-edits"
        return original(method, params)

    _wrap_params_check(adjust)


# R3.5 (with P4): approve without a permission mode is refused with INVALID_PARAMS and
# starts nothing; the host never defaults the mode; null is no value the schema allows.
# Bug: an explicit `"permissionMode": null` is read like an absent optional field and
# defaulted to `ask` (the UI's default), so the plan is approved and the execution runs.
# An approve that leaves the member out is still refused.
@variant("ho-ra-approve-null-mode-defaults-ask")
def approve_null_mode_defaults_ask() -> None:
    def adjust(method: str, params: Any, original: ParamsCheck) -> str | None:
        if (
            method == "approval/approve"
            and isinstance(params, dict)
            and "permissionMode" in params
            and params["permissionMode"] is None
        ):
            params["permissionMode"] = "ask"
        return original(method, params)

    _wrap_params_check(adjust)


# R3.7: reject takes no feedback: a reject carrying `feedback` breaks its schema and gets
# INVALID_PARAMS, changing nothing. Bug: a leftover of the v8 request-changes flow drops a
# string `feedback` member before validation, so the reject is accepted (and rejects).
@variant("ho-ra-reject-ignores-feedback")
def reject_ignores_feedback() -> None:
    def adjust(method: str, params: Any, original: ParamsCheck) -> str | None:
        if (
            method == "approval/reject"
            and isinstance(params, dict)
            and isinstance(params.get("feedback"), str)
        ):
            del params["feedback"]
        return original(method, params)

    _wrap_params_check(adjust)


# R1.10 / R3.3: approve and reject are the only approval actions; there is no
# request-changes method (an unknown method is METHOD_NOT_FOUND, P3). Bug: the v8 handler
# `approval/requestChanges` is still registered; it takes the feedback and records the
# approval as rejected, as the v8-to-v10 migration maps changes_requested.
@variant("ho-ra-legacy-request-changes")
def legacy_request_changes() -> None:
    from reference_host.host import Host
    from reference_host.rpc import Handler

    legacy = "approval/requestChanges"

    def adjust(method: str, params: Any, original: ParamsCheck) -> str | None:
        if method == legacy:
            if not isinstance(params, dict) or not all(
                isinstance(params.get(k), str) for k in ("sessionId", "approvalId")
            ):
                return "params: sessionId and approvalId are required"
            return None
        return original(method, params)

    _wrap_params_check(adjust)
    original_handlers = Host.handlers

    def handlers(self: Host) -> dict[str, Handler]:
        table = original_handlers(self)

        async def request_changes(params: Params) -> Params:
            return await self.approvals.reject(params["sessionId"], params["approvalId"])

        table[legacy] = request_changes
        return table

    patch(Host, "handlers", handlers)


# R1.7: SubmitPlan is valid only in the session's active Plan turn, not in an Agent turn
# and not in the execution of an approved plan (SUBMIT_PLAN_OUTSIDE_PLAN_TURN). Bug: the
# gate treats every turn that belongs to a plan as a Plan turn: in an execution turn (still
# in Agent, no EnterPlanMode) SubmitPlan is accepted and creates a new pending approval.
@variant("ho-ra-submitplan-in-execution-turn")
def submitplan_in_execution_turn() -> None:
    from reference_host.storage import ApprovalRow, SessionRow
    from reference_host.turns import CallOutcome, TurnRunner

    kinds: dict[str, str] = {}
    original_start = TurnRunner.start
    original_call = TurnRunner._run_call

    async def start(
        self: TurnRunner,
        session: SessionRow,
        kind: str,
        user_text: str,
        approval: ApprovalRow | None = None,
        unattended: bool = False,
        on_end: Any = None,
    ) -> str:
        turn_id = await original_start(self, session, kind, user_text, approval, unattended, on_end)
        kinds[turn_id] = kind
        return turn_id

    async def run_call(
        self: TurnRunner, session: SessionRow, turn_id: str, call: Any, unattended: bool
    ) -> CallOutcome:
        if call.name == "SubmitPlan" and kinds.get(turn_id) == "execution":
            session = replace(session, mode="plan")  # "a plan's turn": passes the gate
        return await original_call(self, session, turn_id, call, unattended)

    patch(TurnRunner, "start", start)
    patch(TurnRunner, "_run_call", run_call)


# R4.4 / C6 / R4.12: an interrupted approval (pending when the host restarted) can be
# neither approved nor rejected: both get APPROVAL_NOT_PENDING and change nothing. Bug:
# reject treats an interrupted approval without an execution as still open ("it never
# started, so rejecting it is harmless") and records it as rejected. Approve stays refused.
@variant("ho-ra-reject-interrupted-approval")
def reject_interrupted_approval() -> None:
    from reference_host.approvals import Approvals, approval_wire

    original = Approvals.reject

    async def reject(self: Approvals, session_id: str, approval_id: str) -> Params:
        row = await self.require(session_id, approval_id)
        if row.status != "interrupted" or row.execution_id is not None:
            return await original(self, session_id, approval_id)
        host = self.host
        rejected = replace(row, status="rejected", status_code=None, decided_at=host.clock.now_ms())
        await host.storage.update_approval(rejected)
        host.notify("approval/updated", {"approval": approval_wire(rejected)})
        await host.publish_session(session_id)
        return {"approval": approval_wire(rejected)}

    patch(Approvals, "reject", reject)


# P14: an expired approval keeps answering both approve and reject with
# PLAN_APPROVAL_TIMEOUT (not APPROVAL_NOT_PENDING). Bug: reject checks "is it pending?"
# before "has it expired?", so a reject of an expired approval answers
# APPROVAL_NOT_PENDING. Approve answers correctly; nothing is changed either way.
@variant("ho-ra-reject-expired-not-pending")
def reject_expired_not_pending() -> None:
    from reference_host.approvals import Approvals
    from reference_host.errors import HostError

    original = Approvals.reject

    async def reject(self: Approvals, session_id: str, approval_id: str) -> Params:
        row = await self.require(session_id, approval_id)
        if row.status == "expired":
            raise HostError(
                "APPROVAL_NOT_PENDING",
                "the approval is expired; only a pending approval can be decided",
                {"status": row.status},
            )
        return await original(self, session_id, approval_id)

    patch(Approvals, "reject", reject)


# C6 / R4.4: approve of an approval that is already decided gets APPROVAL_NOT_PENDING and
# changes nothing: not the approval, not the session. Bug: the session half of the approve
# (mode -> Agent, the chosen permission mode) is written before the status check, so an
# approve of a rejected, approved or interrupted approval is refused but leaves the session
# in Agent with the mode the stale request named (announced by session/updated).
@variant("ho-ra-stale-approve-switches-session")
def stale_approve_switches_session() -> None:
    from reference_host.approvals import Approvals
    from reference_host.state import PermissionMode

    original = Approvals.approve

    async def approve(
        self: Approvals, session_id: str, approval_id: str, mode: PermissionMode
    ) -> Params:
        row = await self.require(session_id, approval_id)
        host = self.host
        activity = host.activity_of(session_id)
        if (
            row.status in ("approved", "rejected", "interrupted")
            and activity.active_turn_id is None
            and activity.active_execution_id is None
        ):
            session = await host.require_session(session_id)
            await host.storage.update_session(
                replace(session, mode="agent", permission_mode=mode, updated_at=host.clock.now_ms())
            )
            await host.publish_session(session_id)
        return await original(self, session_id, approval_id, mode)

    patch(Approvals, "approve", approve)


# C6: the approvalId names the approval acted on: acting on an earlier approval never
# touches a newer pending one. Bug: a reject naming an approval that is no longer pending
# (a stale card) falls back to the session's current pending approval and rejects that
# one instead of answering APPROVAL_NOT_PENDING.
@variant("ho-ra-stale-reject-hits-pending")
def stale_reject_hits_pending() -> None:
    from reference_host.approvals import Approvals

    original = Approvals.reject

    async def reject(self: Approvals, session_id: str, approval_id: str) -> Params:
        row = await self.require(session_id, approval_id)
        pending = self.host.activity_of(session_id).pending_approval_id
        if row.status != "pending" and pending is not None and pending != approval_id:
            return await original(self, session_id, pending)
        return await original(self, session_id, approval_id)

    patch(Approvals, "reject", reject)


# R1.11 / C7: a revision (a new SubmitPlan after a rejection or expiry) creates a new
# approval with a new artifact; the earlier approval keeps its status and its file. Bug:
# a new submission "supersedes" the session's stale cards: every earlier expired approval
# of the session is re-marked interrupted (announced with approval/updated). Rejected ones
# are left alone.
@variant("ho-ra-revision-supersedes-expired")
def revision_supersedes_expired() -> None:
    from reference_host.approvals import Approvals, approval_wire
    from reference_host.storage import ApprovalRow, SessionRow

    original = Approvals.submit

    async def submit(
        self: Approvals, session: SessionRow, turn_id: str, args: Params
    ) -> ApprovalRow:
        created = await original(self, session, turn_id, args)
        host = self.host
        for earlier in await host.storage.list_approvals(session.id):
            if earlier.id != created.id and earlier.status == "expired":
                superseded = replace(earlier, status="interrupted", status_code="TURN_INTERRUPTED")
                await host.storage.update_approval(superseded)
                host.notify("approval/updated", {"approval": approval_wire(superseded)})
        return created

    patch(Approvals, "submit", submit)


# R5.7: while a Plan approval is pending, approve and reject are the only controls: a
# cancel gets APPROVAL_PENDING. Bug: session/cancel first looks for an active turn and,
# finding none (the Plan turn has ended), answers `turnId: null` before the pending check.
@variant("ho-ra-cancel-idle-before-pending")
def cancel_idle_before_pending() -> None:
    from reference_host.host import Host

    original = Host.session_cancel

    async def session_cancel(self: Host, params: Params) -> Params:
        row = await self.require_session(params["sessionId"])
        if self.activity_of(row.id).active_turn_id is None:
            return {"turnId": None}
        return await original(self, params)

    patch(Host, "session_cancel", session_cancel)


# R5.7 / R5.4: while a Plan approval is pending, a configuration change gets
# APPROVAL_PENDING and changes nothing. Bug: a shell-only change is treated as no part of
# the planning boundary: `session/configure` naming only `shellId` is applied while an
# approval is pending (the session is otherwise idle). Every other setting is refused.
@variant("ho-ra-configure-shell-while-pending")
def configure_shell_while_pending() -> None:
    from reference_host import host as host_module
    from reference_host.host import Host

    original = Host.session_configure

    async def session_configure(self: Host, params: Params) -> Params:
        row = await self.require_session(params["sessionId"])
        activity = self.activity_of(row.id)
        if (
            set(params) == {"sessionId", "shellId"}
            and activity.pending_approval_id is not None
            and activity.active_turn_id is None
            and activity.active_execution_id is None
        ):
            if params["shellId"] is not None:
                host_module._require_shell(params["shellId"])
            updated = replace(row, shell_id=params["shellId"], updated_at=self.clock.now_ms())
            await self.storage.update_session(updated)
            wire = self.session_wire(updated)
            self.notify("session/updated", {"session": wire})
            return {"session": wire}
        return await original(self, params)

    patch(Host, "session_configure", session_configure)


# R3.6 / R3.11: reject selects and grants no permission mode; after a reject the session
# stays in Plan with its permission mode. Bug: reject "drops to least privilege": it
# resets the session's permission mode to `ask` (announced by session/updated). Seen only
# when the session's mode was accept-edits or auto.
@variant("ho-ra-reject-resets-permission-mode")
def reject_resets_permission_mode() -> None:
    from reference_host.approvals import Approvals

    original = Approvals.reject

    async def reject(self: Approvals, session_id: str, approval_id: str) -> Params:
        result = await original(self, session_id, approval_id)
        host = self.host
        session = await host.require_session(session_id)
        if session.permission_mode != "ask":
            await host.storage.update_session(
                replace(session, permission_mode="ask", updated_at=host.clock.now_ms())
            )
            await host.publish_session(session_id)
        return result

    patch(Approvals, "reject", reject)


# C6 / R4.4 / R4.12: an approved approval stays decided: a second approve gets
# APPROVAL_NOT_PENDING and starts no execution, no provider call. Bug: once the approved
# execution has completed, a second approve is handled like the first ("run the plan
# again"): a new execution id, queued, and a new execution turn. While the first
# execution is queued or running, the second approve is refused as it should be.
@variant("ho-ra-reapprove-after-completion")
def reapprove_after_completion() -> None:
    from reference_host import approvals as approvals_module
    from reference_host.approvals import Approvals
    from reference_host.state import ApprovalFacts, PermissionMode
    from reference_host.state import ensure_decidable as original_check

    original_approve = Approvals.approve
    approving: list[bool] = []

    def ensure_decidable(approval: ApprovalFacts, now_ms: int) -> None:
        if approving and approval.status == "approved" and approval.execution_state == "completed":
            return
        original_check(approval, now_ms)

    async def approve(
        self: Approvals, session_id: str, approval_id: str, mode: PermissionMode
    ) -> Params:
        approving.append(True)
        try:
            return await original_approve(self, session_id, approval_id, mode)
        finally:
            approving.pop()

    patch(approvals_module, "ensure_decidable", ensure_decidable)
    patch(Approvals, "approve", approve)


# R3.5 / R3.11: an approve refused for its params (no permission mode) starts nothing and
# changes nothing; the approval still expires eagerly at its own deadline. Bug: the host
# stops the card's countdown as soon as an approve for it arrives, before the params are
# checked; after a refused approve the deadline timer no longer expires the approval, which
# stays pending past expiresAt (an approve or reject at or after it still answers
# PLAN_APPROVAL_TIMEOUT and expires it then).
@variant("ho-ra-refused-approve-disarms-deadline")
def refused_approve_disarms_deadline() -> None:
    from reference_host.approvals import Approvals
    from reference_host.state import ensure_decidable, is_expired
    from reference_host.storage import ApprovalRow

    disarmed: set[str] = set()
    original_expire = Approvals.expire

    def adjust(method: str, params: Any, original: ParamsCheck) -> str | None:
        problem = original(method, params)
        if (
            problem is not None
            and method == "approval/approve"
            and isinstance(params, dict)
            and isinstance(params.get("approvalId"), str)
        ):
            disarmed.add(params["approvalId"])
        return problem

    async def expire(self: Approvals, approval_id: str) -> None:
        if approval_id in disarmed:
            return  # the timer's call: the countdown was stopped
        await original_expire(self, approval_id)

    async def ensure(self: Approvals, row: ApprovalRow) -> None:
        from reference_host.approvals import _facts

        now = self.host.clock.now_ms()
        if row.status == "pending" and is_expired(row.expires_at, now):
            await original_expire(self, row.id)
        ensure_decidable(_facts(row), now)

    _wrap_params_check(adjust)
    patch(Approvals, "expire", expire)
    patch(Approvals, "_ensure_decidable", ensure)


CASES = [
    BrokenCase(
        "ho-ra-configure-mode-any-case",
        "sessions",
        "switching_to_a_mode_other_than_agent and Plan",
        "R1.1",
        "expected the host to refuse, but it answered",
    ),
    BrokenCase(
        "ho-ra-approve-camelcase-accept-edits",
        "approval",
        "approving_with_an_unknown_permission_mode_is and written",
        "R3.4",
        "expected the host to refuse, but it answered",
    ),
    BrokenCase(
        "ho-ra-approve-null-mode-defaults-ask",
        "approval",
        "approving_with_an_empty_permission_mode_is",
        "R3.5",
        "expected the host to refuse, but it answered",
    ),
    BrokenCase(
        "ho-ra-reject-ignores-feedback",
        "approval",
        "rejecting_carries_no_feedback",
        "R3.7",
        "expected the host to refuse, but it answered",
    ),
    BrokenCase(
        "ho-ra-legacy-request-changes",
        "approval",
        "there_is_no_way_to_ask_for",
        "R1.10",
        "expected the host to refuse, but it answered",
    ),
    BrokenCase(
        "ho-ra-submitplan-in-execution-turn",
        "submit_plan",
        "submitplan_while_an_approved_plan_is_carried",
        "R1.7",
        "the SubmitPlan call ran, expected SUBMIT_PLAN_OUTSIDE_PLAN_TURN",
    ),
    BrokenCase(
        "ho-ra-reject-interrupted-approval",
        "restart_interruption",
        "an_interrupted_approval_can_never_be_decided",
        "R4.12",
        "expected the host to refuse, but it answered",
    ),
    BrokenCase(
        "ho-ra-reject-expired-not-pending",
        "deadline",
        "decision_when_the_clock_shows_moment_the and Rejecting",
        "P14",
        "expected PLAN_APPROVAL_TIMEOUT, the host answered approval/reject fail",
    ),
    BrokenCase(
        "ho-ra-stale-approve-switches-session",
        "approval",
        "a_rejected_plan_cannot_be_decision_afterwards and approved",
        "R4.4",
        "the session changed",
    ),
    BrokenCase(
        "ho-ra-stale-reject-hits-pending",
        "approval",
        "a_stale_rejection_of_an_earlier_plan",
        "C6",
        "expected the host to refuse, but it answered",
    ),
    BrokenCase(
        "ho-ra-revision-supersedes-expired",
        "submit_plan",
        "a_plan_is_revised_by_a_new and expired",
        "R1.11",
        "the first approval is interrupted, not expired",
    ),
    BrokenCase(
        "ho-ra-cancel-idle-before-pending",
        "turn_boundaries",
        "cancelling_while_a_plan_is_pending_is",
        "R5.7",
        "expected the host to refuse, but it answered",
    ),
    BrokenCase(
        "ho-ra-configure-shell-while-pending",
        "turn_boundaries",
        "changing_the_setting_while_a_plan_is and shell",
        "R5.7",
        "expected the host to refuse, but it answered",
    ),
    BrokenCase(
        "ho-ra-reject-resets-permission-mode",
        "submit_plan",
        "rejecting_a_plan_leaves_the_sessions_permission and accept",
        "R3.6",
        "the session's permission mode changed from accept-edits to ask",
    ),
    BrokenCase(
        "ho-ra-reapprove-after-completion",
        "approval",
        "an_approved_plan_cannot_be_decision_afterwards and approved",
        "R3.8",
        "expected the host to refuse, but it answered",
    ),
    BrokenCase(
        "ho-ra-refused-approve-disarms-deadline",
        "deadline",
        "a_plan_still_expires_on_its_own",
        "R3.11",
        "the deadline passed but no expiry was announced",
    ),
]
