"""Broken hosts: a held-out set (busy sessions and unknown names), written from the contract
alone."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from hosts.registry import BrokenCase, patch, variant


# R4.9 / R5.1: while an approved execution is queued or running the session is busy, and a
# prompt is refused with SESSION_BUSY. Bug: the idle check looks at the active turn only
# when there is one; an execution still queued (no turn yet, e.g. held back by the
# `holdExecution` fault, or between the approve and its turn) is not counted as busy, so a
# prompt (or a configuration change) is accepted beside it.
@variant("bu-queued-execution-not-busy")
def queued_execution_not_busy() -> None:
    from reference_host import host as host_module
    from reference_host.state import Activity
    from reference_host.state import ensure_idle_for as original

    def ensure_idle_for(activity: Activity, what: str) -> None:
        if activity.active_turn_id is None and activity.active_execution_id is not None:
            activity = replace(activity, active_execution_id=None)  # "nothing runs yet"
        original(activity, what)

    patch(host_module, "ensure_idle_for", ensure_idle_for)


# R5.4: `session/configure` of a session's shell while a turn runs is refused with
# SESSION_BUSY and the session keeps its shell. Bug: the implementer treats the shell as a
# host setting (like `shell/setDefault`, which has no SESSION_BUSY) and skips the idle check
# when the request changes only `shellId`.
@variant("bu-shell-change-while-busy")
def shell_change_while_busy() -> None:
    from reference_host import host as host_module
    from reference_host.host import Host
    from reference_host.state import Activity

    original = Host.session_configure
    from reference_host.state import ensure_idle_for as real_check

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        only_shell = set(params) == {"sessionId", "shellId"}
        if not only_shell:
            return await original(self, params)

        def lenient(activity: Activity, what: str) -> None:
            if activity.pending_approval_id is not None:
                real_check(activity, what)

        patch(host_module, "ensure_idle_for", lenient)
        try:
            return await original(self, params)
        finally:
            patch(host_module, "ensure_idle_for", real_check)

    patch(Host, "session_configure", session_configure)


# R5.3: a mode / provider / model / permission-mode change while a turn is active is refused
# with SESSION_BUSY "and changes nothing". Bug: the check is done in the wrong order: the
# new configuration is written to the `sessions` row first, then the idle check raises, so
# the answer is SESSION_BUSY (and no `session/updated` is sent) but the stored session (and
# `session/get`) already shows the change.
@variant("bu-configure-written-before-busy-check")
def configure_written_before_busy_check() -> None:
    from reference_host.errors import HostError
    from reference_host.host import Host

    original = Host.session_configure

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        try:
            return await original(self, params)
        except HostError as error:
            if error.code != "SESSION_BUSY":
                raise
            row = await self.require_session(params["sessionId"])
            changes: dict[str, Any] = {}
            if "mode" in params:
                changes["mode"] = params["mode"]
            if "permissionMode" in params:
                changes["permission_mode"] = params["permissionMode"]
            if "provider" in params:
                changes["provider_base_url"] = params["provider"]["baseUrl"]
                changes["model"] = params["provider"]["model"]
            if changes:
                await self.storage.update_session(replace(row, **changes))
            raise

    patch(Host, "session_configure", session_configure)


# R5.6: "a refused change is gone, never applied later on its own". Bug: the host keeps a
# configuration refused with SESSION_BUSY as a deferred change and applies it (with its
# `session/updated`) as soon as the turn that made the session busy has ended.
@variant("bu-refused-configure-applied-later")
def refused_configure_applied_later() -> None:
    from reference_host.errors import HostError
    from reference_host.host import Host
    from reference_host.turns import TurnRunner

    deferred: dict[str, dict[str, Any]] = {}
    original_configure = Host.session_configure
    original_end = TurnRunner._end

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        try:
            return await original_configure(self, params)
        except HostError as error:
            if error.code == "SESSION_BUSY":
                deferred[params["sessionId"]] = dict(params)
            raise

    async def end(self: TurnRunner, session_id: str, *args: Any) -> None:
        await original_end(self, session_id, *args)
        params = deferred.pop(session_id, None)
        if params is not None and self.host.activity_of(session_id).idle:
            with contextlib.suppress(HostError):
                await original_configure(cast(Host, self.host), params)

    patch(Host, "session_configure", session_configure)
    patch(TurnRunner, "_end", end)


# R5.3 (with P7): a turn waiting for a permission answer is active, so a permission-mode
# change is refused with SESSION_BUSY. Bug: while the session's turn waits on an open
# permission question, the host lets a change of `permissionMode` alone through (the
# implementer reasoned that the user may want to switch to `auto` instead of answering).
@variant("bu-permission-mode-change-during-question")
def permission_mode_change_during_question() -> None:
    from reference_host import host as host_module
    from reference_host.host import Host
    from reference_host.state import Activity

    original = Host.session_configure
    from reference_host.state import ensure_idle_for as real_check

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        open_requests = getattr(self.permissions, "_open", {})
        asking = any(r.session_id == params["sessionId"] for r in open_requests.values())
        if not (asking and set(params) == {"sessionId", "permissionMode"}):
            return await original(self, params)

        def lenient(activity: Activity, what: str) -> None:
            if activity.pending_approval_id is not None:
                real_check(activity, what)

        patch(host_module, "ensure_idle_for", lenient)
        try:
            return await original(self, params)
        finally:
            patch(host_module, "ensure_idle_for", real_check)

    patch(Host, "session_configure", session_configure)


# R5.5: a new Plan run while the session's turn is active is refused with SESSION_BUSY.
# Bug: a Plan turn only reads, so the implementer lets a prompt into a session in Plan mode
# check only for a pending approval; a second prompt while a Plan turn runs gets past the
# idle check and then fails on the storage's one-active-turn index: it is answered with
# INTERNAL_ERROR (a code session/prompt does not list) instead of SESSION_BUSY.
@variant("bu-plan-turn-second-prompt")
def plan_turn_second_prompt() -> None:
    from reference_host.errors import HostError
    from reference_host.host import Host
    from reference_host.state import ensure_idle_for

    async def session_prompt(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        activity = self.activity_of(row.id)
        if row.mode == "plan" and activity.active_execution_id is None:
            if activity.pending_approval_id is not None:
                ensure_idle_for(activity, "a new prompt")
        else:
            ensure_idle_for(activity, "a new prompt")
        if row.provider_base_url is None or row.model is None:
            raise HostError("PROVIDER_NOT_CONFIGURED", "configure a model provider first")
        turn_id = await self.turns.start(row, "prompt", params["text"])
        return {"turnId": turn_id}

    patch(Host, "session_prompt", session_prompt)


# R5.6: "Busy is each session's own ... no turn of another session (of the same workspace
# root or a scheduled run's) keeps an idle session from taking a change." Bug: the idle
# check for a configuration change asks whether the *workspace* is busy: any session of the
# same workspace root with an active turn makes `session/configure` answer SESSION_BUSY.
@variant("bu-busy-by-workspace-root")
def busy_by_workspace_root() -> None:
    from reference_host.errors import HostError
    from reference_host.host import Host

    original = Host.session_configure

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        if row.workspace_root is not None:
            for other in await self.storage.list_sessions():
                if other.id == row.id or other.workspace_root != row.workspace_root:
                    continue
                turn = self.activity_of(other.id).active_turn_id
                if turn is not None:
                    raise HostError(
                        "SESSION_BUSY",
                        "configuration change refused: the workspace has an active turn",
                        {"turnId": turn},
                    )
        return await original(self, params)

    patch(Host, "session_configure", session_configure)


# R5.6 / P25: after a turn failed (provider error) the session is idle and configuration is
# accepted again. Bug: the configure path decides "busy" from the runner's table of turn
# tasks, and the entry of a turn that *failed* is not removed (only completed and cancelled
# turns clean up), so `session/configure` answers SESSION_BUSY after a failed turn until the
# next prompt starts a new turn. Prompts (checked on the activity record) are unaffected.
@variant("bu-failed-turn-leaves-configure-busy")
def failed_turn_leaves_configure_busy() -> None:
    from reference_host.errors import HostError
    from reference_host.host import Host
    from reference_host.turns import TurnRunner

    stale: set[str] = set()
    original_end = TurnRunner._end
    original_start = TurnRunner.start
    original_configure = Host.session_configure

    async def end(
        self: TurnRunner, session_id: str, turn_id: str, approval: Any, on_end: Any, *rest: Any
    ) -> None:
        await original_end(self, session_id, turn_id, approval, on_end, *rest)
        if rest and rest[0] == "failed":
            stale.add(session_id)

    async def start(self: TurnRunner, session: Any, *args: Any, **kwargs: Any) -> str:
        stale.discard(session.id)
        return await original_start(self, session, *args, **kwargs)

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        if row.id in stale and self.activity_of(row.id).pending_approval_id is None:
            raise HostError(
                "SESSION_BUSY", "configuration change refused: the session has an active turn"
            )
        return await original_configure(self, params)

    patch(TurnRunner, "_end", end)
    patch(TurnRunner, "start", start)
    patch(Host, "session_configure", session_configure)


# P34: a request that names a session the host does not have gets SESSION_NOT_FOUND.
# Bug: `session/cancel` treats an unknown session like a session with no active turn and
# answers `turnId: null`.
@variant("bu-cancel-unknown-session-null")
def cancel_unknown_session_null() -> None:
    from reference_host.host import Host
    from reference_host.state import ensure_can_cancel

    async def session_cancel(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        session_id = params["sessionId"]
        ensure_can_cancel(self.activity_of(session_id))
        return {"turnId": await self.turns.cancel(session_id)}

    patch(Host, "session_cancel", session_cancel)


# P34: reads too: `session/transcript` of a session the host does not have is
# SESSION_NOT_FOUND. Bug: the transcript is a plain SELECT by session id, so an unknown
# session reads as an empty transcript.
@variant("bu-transcript-unknown-session-empty")
def transcript_unknown_session_empty() -> None:
    from reference_host.host import Host

    async def session_transcript(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        entries = [
            {"seq": seq, "turnId": turn, "role": role, "content": content, "createdAt": at}
            for seq, turn, role, content, at in await self.storage.transcript(params["sessionId"])
        ]
        return {"entries": entries}

    patch(Host, "session_transcript", session_transcript)


# R5.9 / P34: an approval is found, listed and decided only through its own session
# (APPROVAL_NOT_FOUND otherwise). Bug: `artifact/read` checks that the named session exists
# and then reads the approval by its id alone, so another session's id opens this
# session's artifact.
@variant("bu-artifact-read-any-session")
def artifact_read_any_session() -> None:
    from reference_host.errors import HostError
    from reference_host.host import Host

    async def artifact_read(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        await self.require_session(params["sessionId"])
        row = await self.storage.get_approval(params["approvalId"])
        if row is None:
            raise HostError("APPROVAL_NOT_FOUND", f"no approval {params['approvalId']!r}")
        return await self.approvals.read_artifact(row)

    patch(Host, "artifact_read", artifact_read)


# R5.9 / P34: a decision names the approval through its own session; an unknown session is
# SESSION_NOT_FOUND, another session's approval APPROVAL_NOT_FOUND, and nothing changes.
# Bug: reject (which "only closes" an approval) looks the approval up by its id alone and
# acts on the approval's own session, whatever session the request named.
@variant("bu-reject-by-approval-id-alone")
def reject_by_approval_id_alone() -> None:
    from reference_host.approvals import Approvals
    from reference_host.errors import HostError

    original = Approvals.reject

    async def reject(self: Approvals, session_id: str, approval_id: str) -> dict[str, Any]:
        row = await self.host.storage.get_approval(approval_id)
        if row is None:
            await self.host.require_session(session_id)
            raise HostError("APPROVAL_NOT_FOUND", f"no approval {approval_id!r}")
        return await original(self, row.session_id, approval_id)

    patch(Approvals, "reject", reject)


# P26: a `task/update` naming a deleted task gets TASK_NOT_FOUND and changes nothing. Bug:
# when the stored row is not found, `task/update` falls back to a cache of the rows the
# host has answered (filled by create, list and update, meant for a row still being
# written) that `task/delete` does not invalidate; updating a deleted task answers it,
# updated, though nothing is stored (and nothing runs).
@variant("bu-task-update-after-delete-cached")
def task_update_after_delete_cached() -> None:
    from reference_host.tasks import Tasks

    cache: dict[str, dict[str, Any]] = {}
    original_wire = Tasks.wire
    original_require = Tasks.require
    original_update = Tasks.update

    async def wire(self: Tasks, row: dict[str, Any]) -> dict[str, Any]:
        cache[row["id"]] = dict(row)
        return await original_wire(self, row)

    async def update(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        async def cached_require(task_id: str) -> dict[str, Any]:
            stored = await self.host.storage.get_task(task_id)
            if stored is None and task_id in cache:
                return dict(cache[task_id])  # "a row still being written"
            return await original_require(self, task_id)

        patch(self, "require", cached_require)
        try:
            return await original_update(self, params)
        finally:
            delattr(self, "require")

    patch(Tasks, "wire", wire)
    patch(Tasks, "update", update)


# P30: in a session without a project the file tools are refused with WORKSPACE_REQUIRED
# and read nothing. Bug: Read accepts an absolute path without a root ("an absolute path
# needs no workspace to resolve against") and returns that file's text; a relative path is
# still refused.
@variant("bu-no-project-read-absolute-path")
def no_project_read_absolute_path() -> None:
    from reference_host.tools import files
    from reference_host.tools.base import ToolContext, validate_args

    original = files.Read.run

    async def run(self: files.Read, ctx: ToolContext, args: dict[str, Any]) -> str:
        if ctx.workspace_root is None and isinstance(args.get("path"), str):
            checked = validate_args(self.spec, args)
            path = Path(checked["path"])
            if path.is_absolute():
                data = await asyncio.to_thread(path.read_bytes)
                return data.decode("utf-8", errors="replace")
        return await original(self, ctx, args)

    patch(files.Read, "run", run)


# P30 / R2.8 / P9: SubmitPlan in a session without a project is refused with
# WORKSPACE_REQUIRED, and "the model is given the refusal and the turn goes on". Bug: the
# host treats every SubmitPlan as the end of its turn, refused or not, when the refusal is
# WORKSPACE_REQUIRED: the turn ends `completed` without asking the model again.
@variant("bu-no-project-submitplan-ends-turn")
def no_project_submitplan_ends_turn() -> None:
    from reference_host.turns import CallOutcome, TurnRunner

    original = TurnRunner._run_call

    async def run_call(
        self: TurnRunner, session: Any, turn_id: str, call: Any, unattended: bool
    ) -> CallOutcome:
        outcome = await original(self, session, turn_id, call, unattended)
        if (
            call.name == "SubmitPlan"
            and outcome.error is not None
            and outcome.error.code == "WORKSPACE_REQUIRED"
        ):
            return replace(outcome, ends_turn=True)
        return outcome

    patch(TurnRunner, "_run_call", run_call)


# P7: an answer to the question of a turn that has ended (a cancelled one included) gets
# PERMISSION_REQUEST_NOT_FOUND and changes nothing. Bug: the broker forgets a question only
# when it is answered; the question of a cancelled turn stays listed, and a late answer to
# it is accepted (`{}`) and silently dropped.
@variant("bu-permission-respond-cancelled-turn")
def permission_respond_cancelled_turn() -> None:
    from reference_host.ids import new_id
    from reference_host.permissions import PermissionBroker, _Request

    original_respond = PermissionBroker.respond

    async def ask(
        self: PermissionBroker, session_id: str, turn_id: str, tool: str, tool_input: Any
    ) -> bool:
        request_id = new_id("perm")
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
        allowed = await answer  # a cancelled wait leaves the request listed
        self._open.pop(request_id, None)
        return allowed

    def respond(self: PermissionBroker, request_id: str, decision: str) -> None:
        request = self._open.get(request_id)
        if request is not None and request.answer.cancelled():
            return  # "already over": accepted, nothing left to resolve
        original_respond(self, request_id, decision)

    patch(PermissionBroker, "ask", ask)
    patch(PermissionBroker, "respond", respond)


# R5.1 / R5.6: "a scheduled run's turn holds its run's session like any turn": a prompt
# into a run's session while the run's turn is under way is refused with SESSION_BUSY.
# Bug: the host keeps unattended runs apart from interactive turns and the prompt's idle
# check ignores an active turn that is a scheduled run's; the user's prompt then fails on
# the storage's one-active-turn index and is answered INTERNAL_ERROR, not SESSION_BUSY
# (configuration changes are still refused).
@variant("bu-prompt-beside-scheduled-run")
def prompt_beside_scheduled_run() -> None:
    from reference_host.errors import HostError
    from reference_host.host import Host
    from reference_host.state import ensure_idle_for
    from reference_host.turns import TurnRunner

    kinds: dict[str, str] = {}
    original_start = TurnRunner.start

    async def start(self: TurnRunner, session: Any, kind: str, *args: Any, **kwargs: Any) -> str:
        turn_id = await original_start(self, session, kind, *args, **kwargs)
        kinds[turn_id] = kind
        return turn_id

    async def session_prompt(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        activity = self.activity_of(row.id)
        if kinds.get(activity.active_turn_id or "") == "scheduled":
            activity = replace(activity, active_turn_id=None)  # "runs are the scheduler's"
        ensure_idle_for(activity, "a new prompt")
        if row.provider_base_url is None or row.model is None:
            raise HostError("PROVIDER_NOT_CONFIGURED", "configure a model provider first")
        return {"turnId": await self.turns.start(row, "prompt", params["text"])}

    patch(TurnRunner, "start", start)
    patch(Host, "session_prompt", session_prompt)


# P30: in a session without a project, Glob (like every file tool) is refused with
# WORKSPACE_REQUIRED, status `error`. Bug: Glob without a root reasons "nothing to list"
# and answers `ok` with no matches; nothing is read, but the model is told the search ran.
@variant("bu-no-project-glob-empty")
def no_project_glob_empty() -> None:
    from reference_host.tools import files
    from reference_host.tools.base import ToolContext, validate_args

    original = files.Glob.run

    async def run(self: files.Glob, ctx: ToolContext, args: dict[str, Any]) -> str:
        if ctx.workspace_root is None:
            validate_args(self.spec, args)
            return files.NO_MATCHES
        return await original(self, ctx, args)

    patch(files.Glob, "run", run)


CASES = [
    BrokenCase(
        "bu-queued-execution-not-busy",
        "turn_boundaries",
        "a_prompt_while_an_approved_plan_waits",
        "R4.9",
        "expected the host to refuse, but it answered",
    ),
    BrokenCase(
        "bu-shell-change-while-busy",
        "shell",
        "choosing_another_shell_while_a_turn_runs",
        "R5.4",
        "expected the host to refuse, but it answered",
    ),
    BrokenCase(
        "bu-configure-written-before-busy-check",
        "turn_boundaries",
        "a_setting_change_while_a_turn_waits and mode",
        "R5.3",
        "the refused change took effect: before",
    ),
    BrokenCase(
        "bu-refused-configure-applied-later",
        "turn_boundaries",
        "a_setting_change_refused_during_a_turn and mode",
        "R5.6",
        "the refused change took effect: before",
    ),
    BrokenCase(
        "bu-permission-mode-change-during-question",
        "turn_boundaries",
        "a_setting_change_while_a_turn_waits and permission",
        "R5.3",
        "expected the host to refuse, but it answered",
    ),
    BrokenCase(
        "bu-plan-turn-second-prompt",
        "turn_boundaries",
        "asking_for_another_plan_while_the_planning",
        "R5.2",
        "expected SESSION_BUSY, the host answered session/prompt failed with IN",
    ),
    BrokenCase(
        "bu-busy-by-workspace-root",
        "turn_boundaries",
        "an_idle_session_takes_a_change_while and scheduled",
        "R5.6",
        "expected success, but the host refused: session/configure failed with",
    ),
    BrokenCase(
        "bu-failed-turn-leaves-configure-busy",
        "sessions",
        "after_a_provider_error_the_session_takes",
        "P25",
        "the session is in agent mode",
    ),
    BrokenCase(
        "bu-cancel-unknown-session-null",
        "sessions",
        "a_request_for_a_session_the_host and cancel",
        "P34",
        "expected the host to refuse, but it answered",
    ),
    BrokenCase(
        "bu-transcript-unknown-session-empty",
        "sessions",
        "a_request_for_a_session_the_host and conversation",
        "P34",
        "expected the host to refuse, but it answered",
    ),
    BrokenCase(
        "bu-artifact-read-any-session",
        "isolation",
        "a_plan_cannot_be_done_through_another and open",
        "R5.9",
        "expected the host to refuse, but it answered",
    ),
    BrokenCase(
        "bu-reject-by-approval-id-alone",
        "isolation",
        "a_plan_cannot_be_done_through_another and reject",
        "R5.9",
        "expected the host to refuse, but it answered",
    ),
    BrokenCase(
        "bu-task-update-after-delete-cached",
        "scheduled_plan",
        "acting_on_a_deleted_task_is_refused and change",
        "P26",
        "expected the host to refuse, but it answered",
    ),
    BrokenCase(
        "bu-no-project-read-absolute-path",
        "plan_tools",
        "a_file_tool_in_a_session_without and Read",
        "P30",
        "the Read call ran, expected WORKSPACE_REQUIRED",
    ),
    BrokenCase(
        "bu-no-project-submitplan-ends-turn",
        "submit_plan",
        "a_plan_in_a_session_without_a",
        "P9",
        "the model was never given the result of its refused SubmitPlan call: n",
    ),
    BrokenCase(
        "bu-permission-respond-cancelled-turn",
        "turn_boundaries",
        "a_question_of_a_cancelled_turn_can",
        "P7",
        "expected the host to refuse, but it answered",
    ),
    BrokenCase(
        "bu-prompt-beside-scheduled-run",
        "scheduled_plan",
        "a_prompt_to_the_session_of_a",
        "R5.1",
        "expected SESSION_BUSY, the host answered session/prompt failed with IN",
    ),
    BrokenCase(
        "bu-no-project-glob-empty",
        "plan_tools",
        "a_file_tool_in_a_session_without and Glob",
        "P30",
        "the Glob call ran, expected WORKSPACE_REQUIRED",
    ),
]
