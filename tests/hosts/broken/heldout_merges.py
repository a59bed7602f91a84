"""Broken hosts: a held-out set (partial changes and merges: fields absent, null or given,
defaults, clearing a value, answers against stored rows, stored rows against live state,
changes that half-apply), written from the contract alone."""

from __future__ import annotations

import weakref
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from hosts.registry import BrokenCase, patch, variant

if TYPE_CHECKING:
    import aiosqlite

    from reference_host.host import Host
    from reference_host.storage import SessionRow


async def _store_configured(host: Host, row: SessionRow, changes: dict[str, Any]) -> dict[str, Any]:
    """The rest of the reference session/configure: store, announce, answer."""
    updated = replace(row, **changes, updated_at=host.clock.now_ms())
    await host.storage.update_session(updated)
    wire = host.session_wire(updated)
    host.notify("session/updated", {"session": wire})
    return {"session": wire}


# R7.3 (implementing-a-host.md, Commands and shells): "`shellId: null` clears the session's
# own choice"; session/configure changes what it names (protocol.md: it "changes mode,
# permission mode, provider, model or shell"), so a configure that does not name shellId
# leaves the session's shell as it is.
# Bug: the handler reads absent like null ("no shell given: follow the default"), so every
# configure that does not repeat shellId clears the session's own shell.
# Observed: the answer, session/updated, session/get and sessions.shell_id read
# shellId null, and the next Bash runs in the default shell.
# Recipe: session/create {shellId: <a shell that is not the default>}; session/configure
# {permissionMode: "auto"} -> answer.session.shellId is null (expected: the shell given).
@variant("mrg-configure-absent-shell-clears")
def configure_absent_shell_clears() -> None:
    from reference_host import host as host_module
    from reference_host.host import Host
    from reference_host.state import ensure_idle_for

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        ensure_idle_for(self.activity_of(row.id), "configuration change")
        changes: dict[str, Any] = {}
        if "mode" in params:
            changes["mode"] = params["mode"]
        if "permissionMode" in params:
            changes["permission_mode"] = params["permissionMode"]
        if "provider" in params:
            changes["provider_base_url"] = params["provider"]["baseUrl"]
            changes["model"] = params["provider"]["model"]
        shell_id = params.get("shellId")  # null or not given: the session follows the default
        if shell_id is not None:
            host_module._require_shell(shell_id)
        changes["shell_id"] = shell_id
        return await _store_configured(self, row, changes)

    patch(Host, "session_configure", session_configure)


# R7.3: "`shellId: null` clears the session's own choice: from then on the session reads
# `shellId: null` (in the answer, in `session/get` and in `sessions.shell_id`) and its
# commands run in the default shell."
# Bug: the handler copies only the fields that have a value (`params.get(...) is not None`),
# so an explicit null is read as "not given" and clears nothing.
# Observed: session/configure {shellId: null} answers the old shellId; session/get and the
# row keep it; Bash still runs in the session's old shell.
# Recipe: session/create {shellId: <a shell that is not the default>};
# session/configure {shellId: null} -> answer.session.shellId is still that shell.
@variant("mrg-configure-null-shell-ignored")
def configure_null_shell_ignored() -> None:
    from reference_host import host as host_module
    from reference_host.host import Host
    from reference_host.state import ensure_idle_for

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        ensure_idle_for(self.activity_of(row.id), "configuration change")
        changes: dict[str, Any] = {}
        if params.get("mode") is not None:
            changes["mode"] = params["mode"]
        if params.get("permissionMode") is not None:
            changes["permission_mode"] = params["permissionMode"]
        if params.get("provider") is not None:
            changes["provider_base_url"] = params["provider"]["baseUrl"]
            changes["model"] = params["provider"]["model"]
        if params.get("shellId") is not None:
            host_module._require_shell(params["shellId"])
            changes["shell_id"] = params["shellId"]
        return await _store_configured(self, row, changes)

    patch(Host, "session_configure", session_configure)


# The model provider section: "a model changed by `session/configure` counts from the next
# request on, also when the base URL stays"; R7.2: the `sessions` row holds what
# session/get reports, and the last session/updated "reads as `session/get` does".
# Bug: the storage layer writes the provider columns only "when the provider changed",
# and decides that by comparing the base URL alone. The handler answers from the row it
# built in memory, so the answer (and session/updated) echo the new model while the
# stored row keeps the old one.
# Observed: after a configure that changes only the model, the answer and session/updated
# show the new model; session/get, session/list and sessions.model show the old one, and
# the next turn's provider request carries the old model.
# Recipe: session/create {provider: {baseUrl: U, model: "m1"}}; session/configure
# {provider: {baseUrl: U, model: "m2"}} -> answer model m2; session/get -> model m1;
# session/prompt -> the request's "model" is m1.
@variant("mrg-configure-model-same-url-dropped")
def configure_model_same_url_dropped() -> None:
    from reference_host.storage import Storage

    async def write_session(conn: aiosqlite.Connection, session: SessionRow) -> None:
        await conn.execute(
            "UPDATE sessions SET mode = ?, permission_mode = ?, shell_id = ?, updated_at = ? "
            "WHERE id = ?",
            (
                session.mode,
                session.permission_mode,
                session.shell_id,
                session.updated_at,
                session.id,
            ),
        )
        # the provider columns only when the provider changed
        await conn.execute(
            "UPDATE sessions SET provider_base_url = ?, model = ? "
            "WHERE id = ? AND provider_base_url IS NOT ?",
            (session.provider_base_url, session.model, session.id, session.provider_base_url),
        )

    patch(Storage, "write_session", staticmethod(write_session))


# The model provider section: "Each session's requests carry its own provider as it now
# stands: a model changed by `session/configure` counts from the next request on".
# Bug: the turn runner keeps one provider configuration per session, built on the
# session's first provider request and never rebuilt; session/configure changes the
# stored row (and every read of it) but not that live configuration.
# Observed: session/get and the answer show the new provider or model, but every later
# provider request of the session goes to the first base URL with the first model.
# Recipe: session/create {provider: {baseUrl: U, model: "m1"}}; session/prompt (turn 1
# ends); session/configure {provider: {baseUrl: U, model: "m2"}}; session/prompt -> the
# second turn's request carries model m1 (expected m2).
@variant("mrg-provider-cached-per-session")
def provider_cached_per_session() -> None:
    import os

    from reference_host import turns as turns_module
    from reference_host.errors import HostError
    from reference_host.provider_client import AssistantReply, ProviderConfig, ProviderError
    from reference_host.turns import API_KEY_ENV, TurnRunner, offered_tools

    configs: weakref.WeakKeyDictionary[TurnRunner, dict[str, ProviderConfig]] = (
        weakref.WeakKeyDictionary()
    )

    async def ask_model(
        self: TurnRunner, session: SessionRow, turn_id: str, messages: list[dict[str, Any]]
    ) -> AssistantReply:
        if session.provider_base_url is None or session.model is None:
            raise HostError("PROVIDER_NOT_CONFIGURED", "the session has no model provider")
        known = configs.setdefault(self, {})
        config = known.get(session.id)
        if config is None:
            config = ProviderConfig(
                session.provider_base_url, session.model, os.environ.get(API_KEY_ENV) or None
            )
            known[session.id] = config

        async def on_text(text: str) -> None:
            self.host.notify(
                "turn/text", {"sessionId": session.id, "turnId": turn_id, "text": text}
            )

        try:
            return await turns_module.complete(  # type: ignore[attr-defined]
                self.host.http, config, messages, offered_tools(session.mode), on_text
            )
        except ProviderError as error:
            raise HostError(
                "PROVIDER_ERROR", str(error), {"kind": error.kind, "status": error.status}
            ) from error

    patch(TurnRunner, "_ask_model", ask_model)


# P29: "`task/create` and `task/update` answer the task with every field as the user gave
# it (...; fields a `task/update` leaves out keep their values ...)", and task/list and the
# scheduled_tasks row report the same.
# Bug: task/update reuses task/create's reading of permissionMode, default included, so an
# update that does not name permissionMode puts the task back to "ask".
# Observed: the answer, task/list and scheduled_tasks.permission_mode read "ask"; the
# task's next run asks (an unattended Bash is refused with PERMISSION_UNAVAILABLE).
# Recipe: task/create {permissionMode: "auto", ...}; task/update {name: "renamed"} ->
# answer.task.permissionMode is "ask" (expected "auto").
@variant("mrg-task-update-default-permission")
def task_update_default_permission() -> None:
    from reference_host.tasks import Tasks

    async def update(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require(params["taskId"])
        columns = {
            "name": "name",
            "prompt": "prompt",
            "mode": "mode",
            "runAt": "run_at",
            "enabled": "enabled",
        }
        changes = {column: params[key] for key, column in columns.items() if key in params}
        changes["permission_mode"] = params.get("permissionMode", "ask")
        if "provider" in params:
            changes["provider_base_url"] = params["provider"]["baseUrl"]
            changes["model"] = params["provider"]["model"]
        if "enabled" in changes:
            changes["enabled"] = int(changes["enabled"])
        changes["updated_at"] = self.host.clock.now_ms()
        await self.host.storage.update_task(row["id"], changes)
        updated = {**row, **changes}
        self._arm(row["id"], updated["run_at"] if updated["enabled"] else None)
        return {"task": await self.wire(updated)}

    patch(Tasks, "update", update)


# P29: "`runAt: null` in a `task/update` takes the task off the schedule (answered, listed
# and stored as `null`)"; "A `task/update` that changes `runAt` replaces the earlier time".
# Bug: task/update re-arms the task's timer only when there is a time to arm ("enabled and
# runAt set"); clearing runAt clears the stored row but leaves the old timer armed.
# Observed: the answer, task/list and scheduled_tasks.run_at read null, yet when the clock
# reaches the old runAt the task runs (task/runFinished, a new session, a provider call).
# Recipe: task/create {mode: "agent", runAt: now + 60000, enabled: true}; task/update
# {runAt: null}; conformance/clock/advance {ms: 60000} -> a run starts (expected none).
@variant("mrg-task-null-runat-keeps-timer")
def task_null_runat_keeps_timer() -> None:
    from reference_host.tasks import Tasks

    async def update(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require(params["taskId"])
        columns = {
            "name": "name",
            "prompt": "prompt",
            "mode": "mode",
            "permissionMode": "permission_mode",
            "runAt": "run_at",
            "enabled": "enabled",
        }
        changes = {column: params[key] for key, column in columns.items() if key in params}
        if "provider" in params:
            changes["provider_base_url"] = params["provider"]["baseUrl"]
            changes["model"] = params["provider"]["model"]
        if "enabled" in changes:
            changes["enabled"] = int(changes["enabled"])
        changes["updated_at"] = self.host.clock.now_ms()
        await self.host.storage.update_task(row["id"], changes)
        updated = {**row, **changes}
        if updated["enabled"] and updated["run_at"] is not None:
            self._arm(row["id"], updated["run_at"])
        return {"task": await self.wire(updated)}

    patch(Tasks, "update", update)


# P29: "a task switched off and on again (`enabled` alone) keeps its `runAt` and runs when
# it comes due".
# Bug: task/update re-arms the timer when the request touches the schedule (runAt or
# enabled), but takes the time from the request instead of the merged task: an update of
# `enabled: true` alone arms nothing, although the stored task keeps its runAt.
# Observed: the answer, task/list and the row show enabled true and the old runAt, but
# the task never runs at that time.
# Recipe: task/create {mode: "agent", runAt: now + 60000}; task/update {enabled: false};
# task/update {enabled: true}; conformance/clock/advance {ms: 60000} -> no run
# (expected: task/runFinished of a run started at runAt).
@variant("mrg-task-reenable-not-armed")
def task_reenable_not_armed() -> None:
    from reference_host.tasks import Tasks

    async def update(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require(params["taskId"])
        columns = {
            "name": "name",
            "prompt": "prompt",
            "mode": "mode",
            "permissionMode": "permission_mode",
            "runAt": "run_at",
            "enabled": "enabled",
        }
        changes = {column: params[key] for key, column in columns.items() if key in params}
        if "provider" in params:
            changes["provider_base_url"] = params["provider"]["baseUrl"]
            changes["model"] = params["provider"]["model"]
        if "enabled" in changes:
            changes["enabled"] = int(changes["enabled"])
        changes["updated_at"] = self.host.clock.now_ms()
        await self.host.storage.update_task(row["id"], changes)
        updated = {**row, **changes}
        if "runAt" in params or "enabled" in params:  # the schedule changed
            self._arm(row["id"], params.get("runAt") if updated["enabled"] else None)
        return {"task": await self.wire(updated)}

    patch(Tasks, "update", update)


# R6.3: "Only `task/update` with `mode: "agent"` changes it"; P29: task/update answers the
# task as given, "`task/list` reports the same, and the `scheduled_tasks` row holds the
# same values".
# Bug: the storage layer updates only the columns on its list of updatable task columns,
# written when a task's mode could not be changed; `mode` is not on it. The handler
# answers from the merged task, so the answer echoes the request.
# Observed: task/update {mode: "agent"} answers mode "agent"; task/list and
# scheduled_tasks.mode still read "plan", and task/run is still refused with
# PLAN_REQUIRES_INTERACTIVE_SESSION.
# Recipe: task/create {mode: "plan", ...}; task/update {mode: "agent"}; task/list -> mode
# "plan"; task/run -> PLAN_REQUIRES_INTERACTIVE_SESSION (expected a running run).
@variant("mrg-task-mode-not-stored")
def task_mode_not_stored() -> None:
    from reference_host.storage import Storage

    updatable = (
        "name",
        "prompt",
        "permission_mode",
        "provider_base_url",
        "model",
        "run_at",
        "enabled",
        "updated_at",
    )

    async def update_task(self: Storage, task_id: str, changes: dict[str, Any]) -> None:
        kept = {column: value for column, value in changes.items() if column in updatable}
        assignments = ", ".join(f"{column} = ?" for column in kept)
        async with self.transaction() as conn:
            await conn.execute(
                f"UPDATE scheduled_tasks SET {assignments} WHERE id = ?",
                (*kept.values(), task_id),
            )

    patch(Storage, "update_task", update_task)


# P29: task/create answers "every field as the user gave it" (`enabled` included), and "A
# task with `enabled: false` does not run when its `runAt` comes due".
# Bug: the default for `enabled` is applied with `or` (`params.get("enabled") or True`),
# so an explicit `false` is replaced by the default on create.
# Observed: task/create {enabled: false} answers enabled true, stores enabled = 1, and the
# task runs when its runAt comes due.
# Recipe: task/create {mode: "agent", runAt: now + 60000, enabled: false} ->
# answer.task.enabled is true; conformance/clock/advance {ms: 60000} -> a run starts.
@variant("mrg-task-create-enabled-false-ignored")
def task_create_enabled_false_ignored() -> None:
    from reference_host.tasks import Tasks
    from reference_host.workspace import validate_root

    async def create(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        root = params["workspaceRoot"]
        if root is not None:
            validate_root(root)
        now = self.host.clock.now_ms()
        row = {
            "id": self.host.new_id("task"),
            "name": params["name"],
            "prompt": params["prompt"],
            "mode": params["mode"],
            "workspace_root": root,
            "provider_base_url": params["provider"]["baseUrl"],
            "model": params["provider"]["model"],
            "permission_mode": params.get("permissionMode") or "ask",
            "run_at": params.get("runAt"),
            "enabled": int(params.get("enabled") or True),
            "created_at": now,
            "updated_at": now,
        }
        await self.host.storage.insert_task(row)
        if row["enabled"]:
            self._arm(row["id"], row["run_at"])
        return {"task": await self.wire(row)}

    patch(Tasks, "create", create)


# Approval (§3), R3.6/R3.11: "After a reject, and after an expiry (R3.11), the session
# stays in Plan with its permission mode." (ADR §3: "Reject never selects or grants an
# execution mode" -- it does not take one away either.)
# Bug: reject, reading "never grants an execution mode" as "drop the one the session
# has", writes the session back with the default permission mode "ask" in the same
# transaction as the rejected approval.
# Observed: after approval/reject the session (session/updated, session/get, the row)
# reads permissionMode "ask"; mode stays "plan".
# Recipe: session/create {mode: "plan", permissionMode: "auto", workspaceRoot, provider};
# session/prompt -> the model calls SubmitPlan; approval/reject -> session/get
# permissionMode is "ask" (expected "auto").
@variant("mrg-reject-resets-permission")
def reject_resets_permission() -> None:
    from reference_host import approvals as approvals_module
    from reference_host import state
    from reference_host.approvals import Approvals, approval_wire

    async def reject(self: Approvals, session_id: str, approval_id: str) -> dict[str, Any]:
        host = self.host
        row = await self.require(session_id, approval_id)
        await host.turns.settle(session_id, row.turn_id)
        await self._ensure_decidable(row)
        now = host.clock.now_ms()
        rejected = approvals_module._with(
            row, state.reject(approvals_module._facts(row)), decided_at=now
        )
        session = await host.require_session(session_id)
        async with host.storage.transaction() as conn:
            await host.storage.write_approval(conn, rejected)
            # a rejected plan grants nothing: no execution mode is left selected
            await host.storage.write_session(
                conn, replace(session, permission_mode="ask", updated_at=now)
            )
        host.set_activity(session_id, pending_approval_id=None)
        host.notify("approval/updated", {"approval": approval_wire(rejected)})
        await host.publish_session(session_id)
        return {"approval": approval_wire(rejected)}

    patch(Approvals, "reject", reject)


def _approve_variant(*, session_apart: bool, answer_from_read: bool) -> None:
    """The reference approve, with the session written in a transaction of its own before
    the approval's (``session_apart``), or the answer's session taken from the row read
    before the approval (``answer_from_read``)."""
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
        if session_apart:
            await host.storage.update_session(agent)
        async with host.storage.transaction() as conn:
            await host.storage.write_approval(conn, approved)
            if not session_apart:
                await host.storage.write_session(conn, agent)
            if host.faults.take("approvalCommit"):
                raise HostError("INTERNAL_ERROR", "injected failure before the approval commit")
        host.set_activity(
            session_id, pending_approval_id=None, active_execution_id=approved.execution_id
        )
        host.notify("approval/updated", {"approval": approval_wire(approved)})
        self._notify_execution(approved, None)
        session_wire = await host.publish_session(session_id)
        if answer_from_read:
            session_wire = cast("Host", host).session_wire(session)
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


# R4.6: "Approve is one transaction: the session becomes Agent with the chosen permission
# mode, the row gets an `executionId` and `executionState = queued`, all or nothing. A
# failed approval (the `approvalCommit` fault makes its transaction fail) ... leaves the
# approval pending and the session as it was".
# Bug: approve writes the session (Agent, chosen mode) through the ordinary session update,
# which commits on its own, and then writes the approval in a second transaction; when
# that one fails, the session change stays.
# Observed: after an approve answered INTERNAL_ERROR, the approval is still pending but
# session/get and the sessions row read mode "agent" with the chosen permission mode
# (while pendingApprovalId still names the approval); no session/updated announced it.
# Recipe: Plan session (permissionMode "ask") with a pending approval;
# conformance/fault/arm {fault: "approvalCommit"}; approval/approve {permissionMode:
# "auto"} -> INTERNAL_ERROR; session/get -> mode "agent", permissionMode "auto"
# (expected "plan", "ask").
@variant("mrg-approve-session-own-transaction")
def approve_session_own_transaction() -> None:
    _approve_variant(session_apart=True, answer_from_read=False)


# R7.2, C4: "The approve result carries the approval (...) and the session, already in
# Agent with the chosen permission mode; a `session/updated` reports the same session".
# Bug: the answer's session is built from the session row read before the approval
# transaction (the live activity is current, the stored fields are not), while
# session/updated reads the stored row again.
# Observed: the approve result's session reads mode "plan" and the permission mode it had
# before (activeExecutionId set), while session/updated and session/get read "agent" and
# the chosen mode.
# Recipe: Plan session (permissionMode "ask") with a pending approval; approval/approve
# {permissionMode: "auto"} -> result.session.mode "plan", permissionMode "ask".
@variant("mrg-approve-answer-stale-session")
def approve_answer_stale_session() -> None:
    _approve_variant(session_apart=False, answer_from_read=True)


# Planning (§1), P10/R1.4: "`EnterPlanMode` in an Agent turn turns the running turn into a
# Plan turn: the next provider request offers exactly the Plan tools, `SubmitPlan` is
# valid for the rest of the turn"; "What you offer follows the session's mode as it is
# when you send the request".
# Bug: the turn loop reads the session once, when the turn starts, and keeps that copy
# for every step; EnterPlanMode changes the stored session (and session/updated says
# plan), but the running turn goes on with its Agent copy.
# Observed: after EnterPlanMode the session reads "plan", yet the turn's next provider
# request offers the Agent tools (Write, Edit, no SubmitPlan), and a SubmitPlan in a
# later message of that turn is refused with SUBMIT_PLAN_OUTSIDE_PLAN_TURN (a Write is
# not denied).
# Recipe: Agent session; session/prompt; the model calls EnterPlanMode; in its next
# message SubmitPlan -> turn/toolResult error SUBMIT_PLAN_OUTSIDE_PLAN_TURN, no approval
# (expected: an approval pending).
@variant("mrg-turn-session-read-once")
def turn_session_read_once() -> None:
    from reference_host.errors import HostError
    from reference_host.turns import MAX_STEPS, TurnRunner, _assistant_message

    async def loop(self: TurnRunner, session_id: str, turn_id: str, unattended: bool) -> None:
        host = self.host
        messages = await self._history(session_id)
        session = await host.require_session(session_id)  # the turn's session
        for _ in range(MAX_STEPS):
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

    patch(TurnRunner, "_loop", loop)


CASES = [
    BrokenCase(
        "mrg-configure-absent-shell-clears",
        "sessions",
        "shell_of_its_own_keeps_it",
        "R7.3",
        "also changed {'shellId': None}",
    ),
    BrokenCase(
        "mrg-configure-null-shell-ignored",
        "shell",
        "shell_of_its_own_is_cleared",
        "R7.3",
        "the session still names",
    ),
    BrokenCase(
        "mrg-configure-model-same-url-dropped",
        "sessions",
        "an_idle_session_takes_a_new",
        "R5.6",
        "the host reports provider",
    ),
    BrokenCase(
        "mrg-provider-cached-per-session",
        "sessions",
        "asks_for_the_model_the_session_was_changed_to",
        "R5.6",
        "the turn asked the provider for the model 'mock-model'",
    ),
    BrokenCase(
        "mrg-task-update-default-permission",
        "scheduled_plan",
        "moved_to_a_later_time",
        "P29",
        "a task/update that gave only runAt also changed",
    ),
    BrokenCase(
        "mrg-task-null-runat-keeps-timer",
        "scheduled_plan",
        "taken_off_the_schedule_does_not_run",
        "P29",
        "the host sent turn/started for the task taken off the schedule",
    ),
    BrokenCase(
        "mrg-task-reenable-not-armed",
        "scheduled_plan",
        "switched_off_and_on_again",
        "P29",
        "the host announced no run of it",
    ),
    BrokenCase(
        "mrg-task-mode-not-stored",
        "scheduled_plan",
        "a_task_changed_to_agent_runs_unattended",
        "R6.3",
        "the run ended refused",
    ),
    BrokenCase(
        "mrg-task-create-enabled-false-ignored",
        "scheduled_plan",
        "earliest_time_the_schedule_allows",
        "P29",
        "{'enabled': (True, False)}",
    ),
    BrokenCase(
        "mrg-reject-resets-permission",
        "submit_plan",
        "rejecting_a_plan_leaves_the_sessions_permission_mode",
        "R3.6",
        "the session's permission mode changed from",
    ),
    BrokenCase(
        "mrg-approve-session-own-transaction",
        "approval",
        "a_failure_while_approving_changes_nothing",
        "R4.6",
        "the session left Plan",
    ),
    BrokenCase(
        "mrg-approve-answer-stale-session",
        "approval",
        "switches_the_session_to_agent_with_that_mode",
        "C4",
        "the approve response shows the session",
    ),
    BrokenCase(
        "mrg-turn-session-read-once",
        "plan_tools",
        "entering_plan_mode_during_an_agent_turn_turns_it",
        "P10",
        "after EnterPlanMode offered",
    ),
]
