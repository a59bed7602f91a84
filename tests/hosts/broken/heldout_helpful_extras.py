"""Broken hosts: a held-out set (helpful extras), written from the contract alone.

Each host is the reference host plus one convenience its author added beyond the contract,
where the contract states the behaviour the convenience changes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any
from weakref import WeakKeyDictionary

from hosts.registry import BrokenCase, patch, variant

# -- defaults filled in for the client ------------------------------------------------------


# R3.5 (ADR §3 "Approve requires an explicit execution permission mode"; implementing-a-host
# "Approval (§3)": without one it is refused with INVALID_PARAMS and starts nothing).
# Bug: the author read "the UI selects ask by default" as a host default: an approve
# without permissionMode is accepted as an approve with "ask".
# Client observes: approval/approve {sessionId, approvalId} (no permissionMode) answers a
# result, the approval is approved with permissionMode "ask" and the execution starts.
# Recipe: Plan session, prompt, model calls SubmitPlan; approval/approve without
# permissionMode -> expect INVALID_PARAMS, approval still pending.
@variant("xtra-approve-default-ask")
def approve_default_ask() -> None:
    from reference_host import rpc
    from reference_host.host import Host

    original_problem: Callable[[str, Any], str | None] = vars(rpc)["params_problem"]

    def params_problem(method: str, params: Any) -> str | None:
        if (
            method == "approval/approve"
            and isinstance(params, dict)
            and "permissionMode" not in params
        ):
            return original_problem(method, {**params, "permissionMode": "ask"})
        return original_problem(method, params)

    async def approval_approve(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        return await self.approvals.approve(
            params["sessionId"], params["approvalId"], params.get("permissionMode", "ask")
        )

    patch(rpc, "params_problem", params_problem, wraps=True)
    patch(Host, "approval_approve", approval_approve)


# P7 (implementing-a-host "Approval (§3)", permission modes: "A `decision` other than
# `allow` or `deny` is `INVALID_PARAMS`, and the question stays open").
# Bug: permission/respond normalises the decision (trims it, ignores letter case), so a
# client sending "Allow" or " deny " gets its call run or denied instead of INVALID_PARAMS.
# Client observes: permission/respond {decision: "ALLOW"} answers {} and the tool runs.
# Recipe: Agent session in ask mode, model calls Write; on permission/requested answer
# decision "Allow" -> expect INVALID_PARAMS and the question still open (a later "allow"
# is accepted).
@variant("xtra-decision-any-case")
def decision_any_case() -> None:
    from reference_host import rpc
    from reference_host.host import Host

    original_problem: Callable[[str, Any], str | None] = vars(rpc)["params_problem"]

    def params_problem(method: str, params: Any) -> str | None:
        if (
            method == "permission/respond"
            and isinstance(params, dict)
            and isinstance(params.get("decision"), str)
        ):
            params = {**params, "decision": params["decision"].strip().lower()}
        return original_problem(method, params)

    async def permission_respond(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        self.permissions.respond(params["requestId"], str(params["decision"]).strip().lower())
        return {}

    patch(rpc, "params_problem", params_problem, wraps=True)
    patch(Host, "permission_respond", permission_respond)


# -- friendlier handling of the user's text and requests -----------------------------------


# P31 (implementing-a-host "Sessions, turns and boundaries": a prompt reaches the provider
# "exactly as given ... no whitespace trimmed", and "A prompt of blank space only is a
# prompt like any other").
# Bug: session/prompt tidies the user's text (strip()) and refuses a prompt that is blank
# once tidied, to save a model call.
# Client observes: the provider's last user message lacks the prompt's leading/trailing
# blanks and newlines; a prompt of "   " is refused with INVALID_PARAMS.
# Recipe: session/prompt text "  hello\n" -> the first provider request's last user message
# must be "  hello\n"; session/prompt text " \n" -> a turn starts.
@variant("xtra-trim-prompt")
def trim_prompt() -> None:
    from reference_host.errors import HostError
    from reference_host.host import Host
    from reference_host.state import ensure_idle_for

    async def session_prompt(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        text = str(params["text"]).strip()
        if not text:
            raise HostError("INVALID_PARAMS", "the prompt is empty")
        ensure_idle_for(self.activity_of(row.id), "a new prompt")
        if row.provider_base_url is None or row.model is None:
            raise HostError("PROVIDER_NOT_CONFIGURED", "configure a model provider first")
        turn_id = await self.turns.start(row, "prompt", text)
        return {"turnId": turn_id}

    patch(Host, "session_prompt", session_prompt)


# R5.1 (ADR §5 "A second prompt ... is rejected while that turn ... is active";
# implementing-a-host: a second prompt while a turn is active is refused with SESSION_BUSY
# and changes nothing).
# Bug: instead of refusing, the host queues the second prompt: it answers a fresh turnId at
# once and starts that turn as soon as the running turn has ended (a pending approval or an
# execution is still refused as before).
# Client observes: the second session/prompt answers {turnId} instead of SESSION_BUSY, and
# after the first turn/ended a second turn/started and provider request follow.
# Recipe: prompt (model holds its answer, or a Bash waiting on a permission answer); second
# session/prompt -> expect SESSION_BUSY, and no second turn after the first one ends.
@variant("xtra-queue-busy-prompt")
def queue_busy_prompt() -> None:
    from reference_host.host import Host
    from reference_host.ports import TurnEnded
    from reference_host.storage import ApprovalRow, SessionRow
    from reference_host.turns import TurnRunner

    original_prompt = Host.session_prompt
    reserved: WeakKeyDictionary[TurnRunner, dict[str, str]] = WeakKeyDictionary()
    queued: WeakKeyDictionary[Host, set[asyncio.Task[None]]] = WeakKeyDictionary()

    async def start(
        self: TurnRunner,
        session: SessionRow,
        kind: str,
        user_text: str,
        approval: ApprovalRow | None = None,
        unattended: bool = False,
        on_end: TurnEnded | None = None,
    ) -> str:
        host = self.host
        turn_id = reserved.get(self, {}).pop(session.id, None) or host.new_id("turn")
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

    async def session_prompt(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        activity = self.activity_of(row.id)
        running = self.turns.tasks.get(row.id)
        if (
            activity.active_turn_id is None
            or activity.pending_approval_id is not None
            or activity.active_execution_id is not None
            or row.provider_base_url is None
            or running is None
            or running.done()
        ):
            return await original_prompt(self, params)
        turn_id = self.new_id("turn")
        text = str(params["text"])

        async def later() -> None:
            with contextlib.suppress(BaseException):
                await asyncio.shield(running)
            if self.turns.stopping or not self.activity_of(row.id).idle:
                return  # the session went on to something else: the queued prompt is dropped
            session = await self.require_session(row.id)
            reserved.setdefault(self.turns, {})[row.id] = turn_id
            await self.turns.start(session, "prompt", text)

        task = asyncio.create_task(later())
        pending = queued.setdefault(self, set())
        pending.add(task)
        task.add_done_callback(pending.discard)
        return {"turnId": turn_id}

    patch(TurnRunner, "start", start)
    patch(Host, "session_prompt", session_prompt, wraps=True)


# -- extra notifications and fields ---------------------------------------------------------


# R4.7 / R7.2 (implementing-a-host "Execution and restart": `execution/updated` reports
# every change of the execution state "once per change (never twice for the same state)";
# freedoms: "an `execution/updated` is sent once per state").
# Bug: as a progress heartbeat, the host sends `execution/updated` (state running, the
# execution's turn) again after every tool batch the execution turn finishes.
# Client observes: two or more execution/updated with executionState "running" for one
# execution.
# Recipe: approve a plan; the execution turn's model makes one tool call (Read) and then
# answers text -> count execution/updated per state: exactly one "running".
@variant("xtra-execution-heartbeat")
def execution_heartbeat() -> None:
    from reference_host.ports import TurnEnded
    from reference_host.provider_client import ToolCall
    from reference_host.storage import ApprovalRow, SessionRow
    from reference_host.turns import CallOutcome, TurnRunner

    original_start = TurnRunner.start
    original_announce = TurnRunner._announce_results
    executions: WeakKeyDictionary[TurnRunner, dict[str, ApprovalRow]] = WeakKeyDictionary()

    async def start(
        self: TurnRunner,
        session: SessionRow,
        kind: str,
        user_text: str,
        approval: ApprovalRow | None = None,
        unattended: bool = False,
        on_end: TurnEnded | None = None,
    ) -> str:
        turn_id = await original_start(self, session, kind, user_text, approval, unattended, on_end)
        if approval is not None:
            executions.setdefault(self, {})[turn_id] = approval
        return turn_id

    def announce(
        self: TurnRunner,
        session_id: str,
        turn_id: str,
        calls: tuple[ToolCall, ...],
        outcomes: list[CallOutcome],
    ) -> None:
        original_announce(self, session_id, turn_id, calls, outcomes)
        approval = executions.get(self, {}).get(turn_id)
        if approval is not None and self.host.activity_of(session_id).active_turn_id == turn_id:
            self.host.notify(
                "execution/updated",
                {
                    "sessionId": session_id,
                    "approvalId": approval.id,
                    "executionId": approval.execution_id,
                    "executionState": "running",
                    "turnId": turn_id,
                },
            )

    patch(TurnRunner, "start", start, wraps=True)
    patch(TurnRunner, "_announce_results", announce, wraps=True)


# P31 (implementing-a-host "The model provider": the turn reports the assistant's text in
# `turn/text` notifications "whose texts, joined in order, are the model's full answer").
# Bug: after streaming the deltas, the host sends the whole reply once more as a final
# `turn/text` ("the complete message, for clients that missed part of the stream").
# Client observes: the turn/text pieces joined read the answer twice.
# Recipe: prompt; the model answers "Hello world" in two streamed pieces -> the joined
# turn/text must be "Hello world", not "Hello worldHello world".
@variant("xtra-turn-text-summary")
def turn_text_summary() -> None:
    from reference_host.provider_client import AssistantReply
    from reference_host.storage import SessionRow
    from reference_host.turns import TurnRunner

    original = TurnRunner._ask_model

    async def ask_model(
        self: TurnRunner, session: SessionRow, turn_id: str, messages: list[dict[str, Any]]
    ) -> AssistantReply:
        reply = await original(self, session, turn_id, messages)
        if reply.text:
            self.host.notify(
                "turn/text", {"sessionId": session.id, "turnId": turn_id, "text": reply.text}
            )
        return reply

    patch(TurnRunner, "_ask_model", ask_model, wraps=True)


# P5 / R3.2 (protocol.md "Closed objects": where a table says "No other fields are
# accepted" ... "an extra field from the host breaks the contract"; ArtifactReadResult is
# closed).
# Bug: artifact/read also returns `absolutePath`, the artifact's full path on disk, so that
# a renderer's "open" button needs no path joining.
# Client observes: the artifact/read result has a member `absolutePath` the schema does not
# define.
# Recipe: submit a plan; artifact/read {sessionId, approvalId} -> the result validates
# against ArtifactReadResult (no extra member).
@variant("xtra-artifact-read-abspath")
def artifact_read_abspath() -> None:
    from reference_host.approvals import Approvals
    from reference_host.storage import ApprovalRow

    original = Approvals.read_artifact

    async def read_artifact(self: Approvals, row: ApprovalRow) -> dict[str, Any]:
        result = await original(self, row)
        session = await self.host.require_session(row.session_id)
        if session.workspace_root is not None and row.artifact_path is not None:
            result["absolutePath"] = str(Path(session.workspace_root) / row.artifact_path)
        return result

    patch(Approvals, "read_artifact", read_artifact, wraps=True)


# -- extra tools ----------------------------------------------------------------------------


# R1.4 / R1.9 (ADR §1 "There is no ExitPlanMode"; implementing-a-host "Planning (§1)": the
# tools offered in Plan are exactly Read, Glob, Grep, BrowserPreview, Bash, EnterPlanMode,
# SubmitPlan and new_context; ExitPlanMode "is never offered and a call to it gets
# UNKNOWN_TOOL").
# Bug: as the mirror of EnterPlanMode, the host offers ExitPlanMode in Plan turns; a call
# to it switches the session back to Agent and the turn goes on.
# Client observes: a Plan turn's provider request lists a ninth tool, ExitPlanMode; a call
# to it in Plan gets status ok (not UNKNOWN_TOOL) and session/updated shows mode agent.
# Recipe: Plan session, prompt -> the provider request's tools are exactly the eight; the
# model calls ExitPlanMode -> turn/toolResult denied UNKNOWN_TOOL, the session stays Plan.
@variant("xtra-offer-exitplanmode")
def offer_exit_plan_mode() -> None:
    from reference_host import turns
    from reference_host.provider_client import ToolCall, ToolSpec
    from reference_host.storage import SessionRow
    from reference_host.turns import CallOutcome, TurnRunner

    exit_plan = ToolSpec(
        name="ExitPlanMode",
        description="Leave Plan mode and continue as the Agent.",
        parameters={"type": "object", "properties": {}, "additionalProperties": False},
    )
    original_offered = turns.offered_tools
    original_call = TurnRunner._run_call

    def offered_tools(mode: str) -> list[ToolSpec]:
        tools = original_offered(mode)
        return [*tools, exit_plan] if mode == "plan" else tools

    async def run_call(
        self: TurnRunner, session: SessionRow, turn_id: str, call: ToolCall, unattended: bool
    ) -> CallOutcome:
        if call.name == "ExitPlanMode" and session.mode == "plan":
            host = self.host
            await host.storage.update_session(
                replace(session, mode="agent", updated_at=host.clock.now_ms())
            )
            await host.publish_session(session.id)
            return CallOutcome("ok", "The session is in Agent mode.")
        return await original_call(self, session, turn_id, call, unattended)

    patch(turns, "offered_tools", offered_tools, wraps=True)
    patch(TurnRunner, "_run_call", run_call, wraps=True)


# -- automatic decisions and retries --------------------------------------------------------


# R3.8 (ADR §3 "There is no ... implicit approval from a timeout, reload, scheduled task or
# stale renderer"; implementing-a-host "Approval (§3)": "Nothing is approved implicitly").
# Bug: a session whose permission mode is already `auto` gets its plan approved by the host
# itself, with mode auto, as soon as the Plan turn has ended ("auto means no questions").
# Client observes: after SubmitPlan in a Plan session created with permissionMode auto,
# approval/updated shows status approved without any approval/approve, and an execution
# turn starts (an unscripted provider request).
# Recipe: session/create mode plan, permissionMode auto; prompt; model calls SubmitPlan ->
# the approval stays pending (session/get pendingApprovalId set) until the client decides.
@variant("xtra-auto-mode-approves-plan")
def auto_mode_approves_plan() -> None:
    from reference_host.approvals import Approvals
    from reference_host.errors import HostError
    from reference_host.storage import ApprovalRow, SessionRow

    original = Approvals.submit
    deciding: WeakKeyDictionary[Approvals, set[asyncio.Task[None]]] = WeakKeyDictionary()

    async def submit(
        self: Approvals, session: SessionRow, turn_id: str, args: dict[str, Any]
    ) -> ApprovalRow:
        row = await original(self, session, turn_id, args)
        if session.permission_mode == "auto":

            async def approve() -> None:
                with contextlib.suppress(HostError):
                    await self.approve(session.id, row.id, "auto")

            task = asyncio.create_task(approve())
            tasks = deciding.setdefault(self, set())
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        return row

    patch(Approvals, "submit", submit, wraps=True)


# P25 (implementing-a-host "The model provider": the turn ends failed with PROVIDER_ERROR;
# "The suite answers with `400 Bad Request`, which no retry of the same request can cure
# ... a host that sends the request again is caught as an unscripted request").
# Bug: the provider client retries every failed HTTP request once before giving up.
# Client observes: after a provider 400 the provider receives the same request a second
# time; the turn still ends failed with PROVIDER_ERROR.
# Recipe: prompt; the provider answers the first request with 400 -> exactly one provider
# request, turn/ended failed PROVIDER_ERROR.
@variant("xtra-retry-provider-error")
def retry_provider_error() -> None:
    from reference_host import turns
    from reference_host.provider_client import ProviderError

    original: Any = vars(turns)["complete"]

    async def complete(*args: Any, **kwargs: Any) -> Any:
        try:
            return await original(*args, **kwargs)
        except ProviderError as error:
            if error.kind != "http":
                raise
            return await original(*args, **kwargs)

    patch(turns, "complete", complete, wraps=True)


# -- deadlines, restarts and cleanup ---------------------------------------------------------


# R3.10 / R3.12 (ADR §3 "the deadline never extends when the card is reopened";
# implementing-a-host "Approval (§3)": re-reads (`approval/get`, `approval/list`,
# `artifact/read`, `session/list`) never move it, over the wire or in storage).
# Bug: reading the artifact counts as the user looking at the plan, so artifact/read of a
# pending approval gives the user a fresh 30 minutes: expiresAt becomes now + 30 min (and
# is announced with approval/updated).
# Client observes: after artifact/read, approval/get shows a later expiresAt than at
# creation; advancing the clock to the original expiresAt does not expire the approval.
# Recipe: submit a plan; advance the clock 10 min; artifact/read; approval/get -> expiresAt
# unchanged (createdAt + 30 min); advance to it -> approval/updated expired.
@variant("xtra-read-extends-deadline")
def read_extends_deadline() -> None:
    from reference_host.approvals import Approvals, approval_wire
    from reference_host.state import deadline_for
    from reference_host.storage import ApprovalRow

    original = Approvals.read_artifact

    async def read_artifact(self: Approvals, row: ApprovalRow) -> dict[str, Any]:
        result = await original(self, row)
        host = self.host
        current = await host.storage.get_approval(row.id)
        if current is not None and current.status == "pending":
            extended = replace(current, expires_at=deadline_for(host.clock.now_ms()))
            if extended.expires_at > current.expires_at:
                async with host.storage.transaction() as conn:
                    await conn.execute(
                        "UPDATE plan_approvals SET expires_at = ? WHERE id = ?",
                        (extended.expires_at, extended.id),
                    )
                host.clock.call_at(extended.expires_at, lambda: self.expire(row.id))
                host.notify("approval/updated", {"approval": approval_wire(extended)})
        return result

    patch(Approvals, "read_artifact", read_artifact, wraps=True)


# R4.12 / C3 (ADR §4 "No approval, queue entry, provider call, or tool execution is
# replayed", "Replay a durable queue after host restart" is a rejected alternative;
# implementing-a-host "Startup recovery": every earlier queued or running execution is
# marked interrupted and nothing is replayed, "no turn you start on your own").
# Bug: the start-up recovery interrupts running executions but keeps queued ones, which
# never started any work, and resumes them once the client has initialized: their
# execution turn starts in the new process.
# Client observes: after a restart, an approval whose execution was queued reads queued,
# then an execution turn/started, execution/updated running and a provider request follow.
# Recipe: arm holdExecution; approve a plan (execution stays queued); restart the host;
# initialize -> approval/get shows executionState interrupted; no turn starts, no provider
# request.
@variant("xtra-resume-queued-execution")
def resume_queued_execution() -> None:
    from reference_host import approvals as approvals_module
    from reference_host.host import Host
    from reference_host.storage import Storage

    original_initialize = Host.initialize
    queued: WeakKeyDictionary[Storage, list[str]] = WeakKeyDictionary()
    resuming: WeakKeyDictionary[Host, set[asyncio.Task[None]]] = WeakKeyDictionary()

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self.transaction() as conn:
            cursor = await conn.execute(
                "SELECT id FROM plan_approvals WHERE execution_state = 'queued' "
                "ORDER BY created_at, rowid"
            )
            queued[self] = [str(row[0]) for row in await cursor.fetchall()]
            approvals = await conn.execute(
                "UPDATE plan_approvals SET status = 'interrupted', "
                "status_code = 'TURN_INTERRUPTED', decided_at = ? WHERE status = 'pending'",
                (now,),
            )
            executions = await conn.execute(
                "UPDATE plan_approvals SET execution_state = 'interrupted' "
                "WHERE execution_state = 'running'"
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

    async def resume(host: Host, approval_ids: list[str]) -> None:
        for approval_id in approval_ids:
            with contextlib.suppress(Exception):
                row = await host.storage.get_approval(approval_id)
                if row is None or row.execution_state != "queued":
                    continue
                session = await host.require_session(row.session_id)
                if not host.activity_of(session.id).idle:
                    continue
                content = await host.approvals.verified_content(session, row)
                host.set_activity(session.id, active_execution_id=row.execution_id)
                prompt = approvals_module._execution_prompt(row, content)
                await host.turns.start(session, "execution", prompt, row)

    async def initialize(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await original_initialize(self, params)
        approval_ids = queued.pop(self.storage, [])
        if approval_ids:
            task = asyncio.create_task(resume(self, approval_ids))
            tasks = resuming.setdefault(self, set())
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        return result

    patch(Storage, "recover", recover)
    patch(Host, "initialize", initialize, wraps=True)


# R2.8 (ADR §2 "Host-core validates the session root"; implementing-a-host "Plan
# artifacts (§2)": "a root that no longer exists is `WORKSPACE_INVALID`, never recreated").
# Bug: before writing a plan artifact, the host makes sure the project folder exists and
# creates it when it is missing (as `mkdir -p` would), so a deleted project gets its plan.
# Client observes: SubmitPlan in a session whose workspace root was deleted gets status ok,
# an approval is created and the root folder exists again with .pi/plan/<name>.md in it.
# Recipe: session/create on a folder; delete the folder; Plan prompt; model calls
# SubmitPlan -> turn/toolResult error WORKSPACE_INVALID, no approval, the folder still gone.
@variant("xtra-recreate-missing-root")
def recreate_missing_root() -> None:
    from reference_host import approvals as approvals_module
    from reference_host.artifacts import Artifact, FaultCheck

    original: Callable[[str, bytes, FaultCheck], Artifact] = vars(approvals_module)[
        "write_artifact"
    ]

    def write_artifact(root: str, content: bytes, fault: FaultCheck) -> Artifact:
        folder = Path(root)
        if folder.is_absolute() and not folder.exists() and not folder.is_symlink():
            with contextlib.suppress(OSError):
                folder.mkdir(parents=True)
        return original(root, content, fault)

    patch(approvals_module, "write_artifact", write_artifact, wraps=True)


# C9 (ADR Consequences "Plan artifacts accumulate under .pi/plan/; they are immutable";
# implementing-a-host "Plan artifacts (§2)": "Artifacts are never deleted (C9): they stay
# after rejection, expiry, completion and interruption by a restart").
# Bug: a rejected plan can never be approved again, so the host tidies up: reject removes
# the approval's artifact file from .pi/plan/.
# Client observes: after approval/reject, the artifact file is gone; artifact/read of the
# rejected approval gets ARTIFACT_UNREADABLE instead of its bytes.
# Recipe: submit a plan; approval/reject -> the file at the artifact path still holds the
# recorded bytes (artifact/read returns them).
@variant("xtra-reject-deletes-artifact")
def reject_deletes_artifact() -> None:
    from reference_host.approvals import Approvals
    from reference_host.artifacts import discard_artifact

    original = Approvals.reject

    async def reject(self: Approvals, session_id: str, approval_id: str) -> dict[str, Any]:
        result = await original(self, session_id, approval_id)
        session = await self.host.storage.get_session(session_id)
        row = await self.host.storage.get_approval(approval_id)
        if (
            session is not None
            and session.workspace_root is not None
            and row is not None
            and row.artifact_path is not None
        ):
            await asyncio.to_thread(discard_artifact, session.workspace_root, row.artifact_path)
        return result

    patch(Approvals, "reject", reject, wraps=True)


CASES = [
    BrokenCase(
        "xtra-approve-default-ask",
        "approval",
        "approving_without_a_permission_mode_is_refused",
        "R3.5",
        "expected the host to refuse",
    ),
    BrokenCase(
        "xtra-decision-any-case",
        "protocol_errors",
        "value_out_of_the_published_range_is_refused and neither_allow_nor_deny",
        "P4",
        "expected INVALID_PARAMS",
    ),
    BrokenCase(
        "xtra-trim-prompt",
        "sessions",
        "prompt_in_plan_mode_reaches_the_model_as_the_last_thing_the_user_said",
        "P31",
        "the model was given the prompt",
    ),
    BrokenCase(
        "xtra-queue-busy-prompt",
        "turn_boundaries",
        "second_prompt_during_a_turn_is_refused",
        "R5.1",
        "expected the host to refuse",
    ),
    BrokenCase(
        "xtra-execution-heartbeat",
        "execution",
        "new_context_during_the_execution_replaces_the_planning_conversation",
        "R4.7",
        "the execution was announced as",
    ),
    BrokenCase(
        "xtra-turn-text-summary",
        "sessions",
        "answer_beyond_ascii_reaches_the_user_whole and plain_events",
        "P31",
        "the turn/text notifications, joined, read",
    ),
    BrokenCase(
        "xtra-artifact-read-abspath",
        "artifact_integrity",
        "opening_the_artifact_returns_the_files_exact_bytes",
        "P5",
        "does not fit the published ArtifactReadResult",
    ),
    BrokenCase(
        "xtra-offer-exitplanmode",
        "plan_tools",
        "offered_exactly_the_planning_tools_also_after_a_tool_call",
        "R1.4",
        "the host offered",
    ),
    BrokenCase(
        "xtra-auto-mode-approves-plan",
        "submit_plan",
        # the host's own approve races the scenario's decision or expiry: one loses it
        "rejecting_a_plan_leaves_the_sessions_permission_mode_auto or "
        "ran_out_of_time_leaves_the_sessions_permission_mode_auto",
        "R3.11",
        "approved",
    ),
    BrokenCase(
        "xtra-retry-provider-error",
        "sessions",
        "after_a_provider_error_the_session_takes_a_change_of_its_configuration",
        "P25",
        "unscripted request",
    ),
    BrokenCase(
        "xtra-read-extends-deadline",
        "deadline",
        "opening_the_plan_again_does_not_move_the_deadline",
        "R3.12",
        "the deadline moved",
    ),
    BrokenCase(
        "xtra-resume-queued-execution",
        "restart_interruption",
        "execution_still_waiting_in_the_queue_is_interrupted_when_the_host_restarts",
        "R4.10",
        "storage showed the execution queued",
    ),
    BrokenCase(
        "xtra-recreate-missing-root",
        "artifact_integrity",
        "project_folder_that_disappeared_is_refused",
        "R2.8",
        "expected WORKSPACE_INVALID",
    ),
    BrokenCase(
        "xtra-reject-deletes-artifact",
        "artifact_integrity",
        "artifact_stays_as_written_after_the_user_rejects_the_plan",
        "C9",
        "is gone",
    ),
]
