"""Broken hosts: a held-out set (copy-paste bugs: one handler written well, then copied for
the next with a name, field, code, constant or notification of the original left in),
written from the contract alone."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from hosts.registry import BrokenCase, patch, variant


# R3.6 / R3.7 / R4.3 (implementing-a-host.md, "Approval (§3)": "Reject takes no permission
# mode"; "every field of an approval ... always equals its plan_approvals row"; ADR §3
# "Reject never selects or grants an execution mode").
# Bug: approval/reject was written by copying approve, whose answer and approval/updated
# show the approval with the permission mode in force; the copy fills `permissionMode`
# from the session's current permission mode. The stored row keeps permission_mode NULL.
# Observe: the reject answer and its approval/updated carry `permissionMode: "ask"` (or
# whatever the session has) while approval/get and the row say null.
# Recipe: session/create (plan, provider) -> prompt -> model calls SubmitPlan ->
# approval/reject -> compare the answer's approval.permissionMode with approval/get.
@variant("cp-reject-reports-session-mode")
def reject_reports_session_mode() -> None:
    from reference_host import state
    from reference_host.approvals import Approvals, _facts, _with, approval_wire

    async def reject(self: Approvals, session_id: str, approval_id: str) -> dict[str, Any]:
        host = self.host
        row = await self.require(session_id, approval_id)
        await host.turns.settle(session_id, row.turn_id)
        await self._ensure_decidable(row)
        session = await host.require_session(session_id)
        rejected = _with(row, state.reject(_facts(row)), decided_at=host.clock.now_ms())
        await host.storage.update_approval(rejected)
        host.set_activity(session_id, pending_approval_id=None)
        wire = {**approval_wire(rejected), "permissionMode": session.permission_mode}
        host.notify("approval/updated", {"approval": wire})
        await host.publish_session(session_id)
        return {"approval": wire}

    patch(Approvals, "reject", reject)


# P29 ("fields a task/update leaves out keep their values"; task/update answers, lists and
# stores the task "with every field as the user gave it").
# Bug: task/update builds its permission-mode column the way task/create does, with
# create's default: `params.get("permissionMode", "ask")`, so an update that leaves the
# permission mode out resets it to `ask`.
# Observe: task/create with permissionMode "auto", then task/update {taskId, name: "x"}:
# the answer, task/list and scheduled_tasks.permission_mode read "ask".
@variant("cp-task-update-create-default")
def task_update_create_default() -> None:
    from reference_host.tasks import Tasks

    original = Tasks.update

    async def update(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        return await original(
            self, {**params, "permissionMode": params.get("permissionMode", "ask")}
        )

    patch(Tasks, "update", update, wraps=True)


# P4 / methods.json task/update (every field but taskId optional; "at least 1 more field
# must be set") and P29 ("fields a task/update leaves out keep their values").
# Bug: task/update's handler was copied from task/create's, including create's check that a
# provider is given, so an update that does not name a provider is refused with
# INVALID_PARAMS and changes nothing.
# Observe: task/create (plan task) -> task/update {taskId, mode: "agent"} -> INVALID_PARAMS
# "params: provider is required"; the task stays in Plan.
@variant("cp-task-update-requires-provider")
def task_update_requires_provider() -> None:
    from reference_host.errors import HostError
    from reference_host.tasks import Tasks

    original = Tasks.update

    async def update(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        if "provider" not in params:
            raise HostError("INVALID_PARAMS", "params: provider is required")
        return await original(self, params)

    patch(Tasks, "update", update, wraps=True)


# R4.7 / implementing-a-host.md "Execution and restart": execution/updated's "turnId names
# the execution's turn (the turn/started of kind execution that names the execution):
# always once that turn has started (running, ...), and never another turn".
# Bug: the `running` notification was copied from the approval's own fields and passes the
# approval's turn_id (the Plan turn that submitted the plan) instead of the execution's
# turn; `completed`/`interrupted` still name the execution turn.
# Observe: approve -> execution/updated {executionState: "running", turnId: <Plan turn>}
# while turn/started (kind execution) names another turn id.
@variant("cp-running-names-plan-turn")
def running_names_plan_turn() -> None:
    from reference_host import state
    from reference_host.approvals import Approvals, approval_wire

    async def execution_running(self: Approvals, approval_id: str, turn_id: str) -> None:
        row = await self._execution(approval_id)
        assert row.execution_state is not None
        running = replace(
            row,
            execution_state=state.advance_execution(row.execution_state, "running"),
            execution_turn_id=turn_id,
        )
        await self.host.storage.update_approval(running)
        self._notify_execution(running, running.turn_id)
        self.host.notify("approval/updated", {"approval": approval_wire(running)})

    patch(Approvals, "execution_running", execution_running)


# R7.3 / P20 ("Output ... streams while the command runs, as command/output notifications
# ... stdout and stderr apart"); CommandStream is "stdout" | "stderr".
# Bug: the stderr reader was copied from the stdout reader and keeps its stream name, so
# every piece a command writes to stderr is announced with `stream: "stdout"` (numbering
# and the text stay right).
# Observe: Bash `echo out; echo err >&2` -> the command/output piece with text "err\n"
# says stream "stdout".
@variant("cp-stderr-announced-as-stdout")
def stderr_announced_as_stdout() -> None:
    from reference_host import turns

    original = vars(turns)["run_command"]

    async def run_command(**kwargs: Any) -> Any:
        notify = kwargs["notify"]

        def copied(method: str, params: dict[str, Any]) -> None:
            if method == "command/output" and params.get("stream") == "stderr":
                params = {**params, "stream": "stdout"}
            notify(method, params)

        return await original(**{**kwargs, "notify": copied})

    patch(turns, "run_command", run_command, wraps=True)


# P10 ("Glob gives the workspace-relative paths of the files that match, and only those").
# Bug: Glob's walk was copied from Grep's, which skips binary files (a NUL byte in the
# first 8 KiB), so Glob leaves out every matching binary file (an image, an archive).
# Observe: workspace with logo.png (holds NUL bytes) and a.md -> Glob `*` lists a.md only;
# Glob `*.png` gives "(no matches)".
@variant("cp-glob-skips-binary-files")
def glob_skips_binary_files() -> None:
    from reference_host.tools import files
    from reference_host.tools.base import ToolContext, validate_args
    from reference_host.tools.budget import Budget, run_within
    from reference_host.workspace import require_root

    async def run(self: files.Glob, ctx: ToolContext, args: dict[str, Any]) -> str:
        args = validate_args(self.spec, args)
        root = require_root(ctx.workspace_root)
        parts = files._glob_parts(args["pattern"])

        def glob(budget: Budget) -> list[str]:
            matches = []
            for relative, real in files._workspace_files(root, budget):
                budget.check()
                if not files._glob_match(parts, relative.split("/")):
                    continue
                try:
                    with real.open("rb") as handle:
                        head = handle.read(files._BINARY_PROBE)
                except OSError:
                    continue
                if b"\0" in head:
                    continue
                matches.append(relative)
            return matches

        matches = await run_within(Budget("Glob", files.GLOB_BUDGET_S), glob)
        return "\n".join(matches) if matches else files.NO_MATCHES

    patch(files.Glob, "run", run)


# P29 ("Every enabled task whose runAt comes due runs, however many are due at the same
# moment"; "deleting one task leaves every other task's time as it was").
# Bug: the task scheduler keeps one timer handle, copied from the clock's single wake-up
# handle: arming any task cancels the timer of the task armed before it (the handle is
# kept on the Tasks instance, so it is per host process).
# Observe: task/create A (runAt now+1 min), task/create B (runAt now+2 min), clock/advance
# 3 min -> only B runs (one task/runFinished); A never runs and its lastRun stays null.
@variant("cp-task-timer-one-handle")
def task_timer_one_handle() -> None:
    from reference_host.tasks import Tasks

    def _arm(self: Tasks, task_id: str, run_at: int | None) -> None:
        previous = self._timers.pop("next", None)
        if previous is not None:
            previous.cancel()
        if run_at is not None:
            self._timers["next"] = self.host.clock.call_at(run_at, lambda: self._fire(task_id))

    patch(Tasks, "_arm", _arm)


# R7.2 (approval/list "lists a session's approvals oldest first: createdAt never decreases
# along the list").
# Bug: the approval list query was copied from the "newest run first" query of a task's
# last run and keeps its `DESC`: approvals come newest first.
# Observe: submit plan 1, reject, clock/advance 1 s, submit plan 2 -> approval/list gives
# [plan 2, plan 1].
@variant("cp-approval-list-newest-first")
def approval_list_newest_first() -> None:
    from reference_host import storage as storage_module
    from reference_host.storage import APPROVAL_COLUMNS, ApprovalRow, Storage

    async def list_approvals(self: Storage, session_id: str) -> list[ApprovalRow]:
        async with self._conn.execute(
            f"SELECT {APPROVAL_COLUMNS} FROM plan_approvals WHERE session_id = ? "
            "ORDER BY created_at DESC, rowid DESC",
            (session_id,),
        ) as cursor:
            rows = await cursor.fetchall()
        return [storage_module.ApprovalRow(*row) for row in rows]

    patch(Storage, "list_approvals", list_approvals)


# R5.9 / P34 ("an approval is found, listed and decided only through its own session
# (APPROVAL_NOT_FOUND otherwise)"; only an unknown session may be answered
# SESSION_NOT_FOUND instead).
# Bug: the approval lookup's "wrong session" branch was copied from require_session and
# raises its code: an approval id of another (existing) session is answered with
# SESSION_NOT_FOUND, though the session named exists.
# Observe: sessions A and B; plan pending in A; approval/get {sessionId: B, approvalId:
# A's} -> SESSION_NOT_FOUND (session/get B still works).
@variant("cp-foreign-approval-session-not-found")
def foreign_approval_session_not_found() -> None:
    from reference_host.approvals import Approvals
    from reference_host.errors import HostError
    from reference_host.storage import ApprovalRow

    async def require(self: Approvals, session_id: str, approval_id: str) -> ApprovalRow:
        await self.host.require_session(session_id)
        row = await self.host.storage.get_approval(approval_id)
        if row is None:
            raise HostError(
                "APPROVAL_NOT_FOUND", f"session {session_id!r} has no approval {approval_id!r}"
            )
        if row.session_id != session_id:
            raise HostError("SESSION_NOT_FOUND", f"no session {session_id!r} for this approval")
        return row

    patch(Approvals, "require", require)


# P29 ("Whatever updates a task had, ... its createdAt stays the time it was created";
# task/list and the scheduled_tasks row hold the same values).
# Bug: the task UPDATE was copied from the INSERT path, which sets created_at and
# updated_at from the same clock reading: every update also moves created_at to now (the
# update's own answer still shows the old createdAt, task/list the new one).
# Observe: task/create at T -> clock/advance 60 s -> task/update {name} -> task/list
# createdAt = T + 60 s; scheduled_tasks.created_at likewise.
@variant("cp-task-update-moves-created-at")
def task_update_moves_created_at() -> None:
    from reference_host.storage import Storage

    original = Storage.update_task

    async def update_task(self: Storage, task_id: str, changes: dict[str, Any]) -> None:
        if "updated_at" in changes:
            changes = {**changes, "created_at": changes["updated_at"]}
        await original(self, task_id, changes)

    patch(Storage, "update_task", update_task, wraps=True)


# R3.11 / R4.4 ("the row becomes expired with statusCode = PLAN_APPROVAL_TIMEOUT";
# "statusCode ... PLAN_APPROVAL_TIMEOUT once it expired"; ADR §3 "Expiry is recorded with
# the canonical error PLAN_APPROVAL_TIMEOUT").
# Bug: the expiry was copied from reject, which sets no status code: an expired approval
# reads status "expired" with statusCode null, on the wire and in the row.
# Observe: submit a plan -> clock/advance 30 min -> approval/updated and approval/get show
# status "expired", statusCode null.
@variant("cp-expiry-without-status-code")
def expiry_without_status_code() -> None:
    from reference_host.approvals import Approvals, approval_wire
    from reference_host.state import is_expired

    async def expire(self: Approvals, approval_id: str) -> None:
        host = self.host
        row = await host.storage.get_approval(approval_id)
        if row is None or row.status != "pending":
            return
        if not is_expired(row.expires_at, host.clock.now_ms()):
            return
        expired = replace(row, status="expired", decided_at=host.clock.now_ms())
        await host.storage.update_approval(expired)
        host.set_activity(row.session_id, pending_approval_id=None)
        host.notify("approval/updated", {"approval": approval_wire(expired)})
        await host.publish_session(row.session_id)

    patch(Approvals, "expire", expire)


# R7.2 ("session/list lists every session exactly as session/get reports it,
# pendingApprovalId, activeTurnId and activeExecutionId included").
# Bug: session/list was copied from task/list, which builds each item from its stored row
# alone; the in-memory activity is never consulted, so every session is listed idle.
# Observe: a plan pending -> session/get says pendingApprovalId = a1, session/list says null
# (the reload path of C2 loses the pending approval).
@variant("cp-session-list-stored-only")
def session_list_stored_only() -> None:
    from reference_host.host import Host

    async def session_list(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        sessions = []
        for row in await self.storage.list_sessions():
            wire = self.session_wire(row)
            wire |= {"activeTurnId": None, "pendingApprovalId": None, "activeExecutionId": None}
            sessions.append(wire)
        return {"sessions": sessions}

    patch(Host, "session_list", session_list)


# P7 ("A requestId names one question among all the host's sessions: two questions never
# share one, even when their models gave the calls the same id"; a second answer to the
# same question gets PERMISSION_REQUEST_NOT_FOUND).
# Bug: permission/requested was written by copying turn/toolCall's params, and its
# requestId is the model's toolCallId: two questions for calls of the same id (one per
# message, or in two sessions) share a requestId, and a stale answer to the first answers
# the second.
# Observe: ask mode; model calls Bash id "c1" -> permission/requested requestId "c1";
# respond allow; next message calls Bash id "c1" again -> requestId "c1" again; a repeat
# of the first answer is accepted instead of PERMISSION_REQUEST_NOT_FOUND.
@variant("cp-permission-id-is-call-id")
def permission_id_is_call_id() -> None:
    from reference_host.errors import HostError
    from reference_host.permissions import _Request
    from reference_host.provider_client import ToolCall
    from reference_host.storage import SessionRow
    from reference_host.turns import TurnRunner

    async def _require_permission(
        self: TurnRunner,
        session: SessionRow,
        turn_id: str,
        call: ToolCall,
        args: dict[str, Any],
        unattended: bool,
    ) -> None:
        if unattended:
            raise HostError(
                "PERMISSION_UNAVAILABLE",
                f"{call.name} needs a permission answer and this run is unattended",
            )
        broker = self.host.permissions
        request_id = call.call_id
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        broker._open[request_id] = _Request(session.id, answer)
        broker._notify(
            "permission/requested",
            {
                "sessionId": session.id,
                "turnId": turn_id,
                "requestId": request_id,
                "tool": call.name,
                "input": args,
            },
        )
        try:
            allowed = await answer
        finally:
            broker._open.pop(request_id, None)
        if not allowed:
            raise HostError("PERMISSION_DENIED", f"the user denied {call.name}")

    patch(TurnRunner, "_require_permission", _require_permission)


# R3.2 / C9 ("artifact/read returns the approval's artifact path ... and the file's
# bytes"; "Artifacts are never deleted: they stay after rejection, expiry, completion");
# artifact/read's errors are only INVALID_PARAMS, NOT_INITIALIZED, SESSION_NOT_FOUND,
# APPROVAL_NOT_FOUND, ARTIFACT_UNREADABLE, ARTIFACT_MODIFIED.
# Bug: artifact/read was copied from approve and kept its "is it still decidable" check:
# reading the plan of a rejected or approved approval answers APPROVAL_NOT_PENDING (an
# expired one PLAN_APPROVAL_TIMEOUT).
# Observe: submit -> approval/reject -> artifact/read -> APPROVAL_NOT_PENDING instead of
# the bytes.
@variant("cp-artifact-read-needs-pending")
def artifact_read_needs_pending() -> None:
    from reference_host.host import Host

    async def artifact_read(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.approvals.require(params["sessionId"], params["approvalId"])
        await self.approvals._ensure_decidable(row)
        return await self.approvals.read_artifact(row)

    patch(Host, "artifact_read", artifact_read)


CASES = [
    BrokenCase(
        "cp-reject-reports-session-mode",
        "submit_plan",
        "rejecting_a_plan_leaves_the_sessions_permission_mode_auto",
        "R7.2",
        "the last approval/updated of approval",
    ),
    BrokenCase(
        "cp-task-update-create-default",
        "scheduled_plan",
        "runs_once_when_the_clock_goes_back_and_then_past_its_time",
        "P29",
        "the fields an update leaves out keep their values",
    ),
    BrokenCase(
        "cp-task-update-requires-provider",
        "scheduled_plan",
        "given_a_new_time_after_it_ran_runs_again",
        "P29",
        "provider is required",
    ),
    BrokenCase(
        "cp-running-names-plan-turn",
        "artifact_integrity",
        "stays_as_written_after_the_plan_is_approved_and_carried_out",
        "R4.7",
        "the execution's turn is",
    ),
    BrokenCase(
        "cp-stderr-announced-as-stdout",
        "shell",
        "both_streams_count_towards_one_cap",
        "P20",
        "of output were streamed",
    ),
    BrokenCase(
        "cp-glob-skips-binary-files",
        "plan_tools",
        "finds_exactly_the_files_it_names and not_text",
        "P10",
        "after its Glob call the model was not given",
    ),
    BrokenCase(
        "cp-task-timer-one-handle",
        "scheduled_plan",
        "six_tasks_due_at_the_same_time",
        "P29",
        "of 6 enabled tasks that came due",
    ),
    BrokenCase(
        "cp-approval-list-newest-first",
        "deadline",
        "after_expiry_a_new_plan_can_be_submitted",
        "R7.2",
        "lists an approval created at",
    ),
    BrokenCase(
        "cp-foreign-approval-session-not-found",
        "isolation",
        "still_cannot_be_opened_through_another_session",
        "R5.9",
        "expected APPROVAL_NOT_FOUND",
    ),
    BrokenCase(
        "cp-task-update-moves-created-at",
        "scheduled_plan",
        "keeps_the_time_it_was_created",
        "P29",
        "createdAt",
    ),
    BrokenCase(
        "cp-expiry-without-status-code",
        "deadline",
        "an_expired_plan_stays_expired_when_the_clock_is_set_back",
        "R4.4",
        "reported expired with statusCode None",
    ),
    BrokenCase(
        "cp-session-list-stored-only",
        "protocol_errors",
        "refused_as_such_while_the_session_is_busy and a_prompt",
        "R7.2",
        "session/list shows the session with",
    ),
    BrokenCase(
        "cp-permission-id-is-call-id",
        "isolation",
        "each_get_their_own_question_when_the_models_name_their_calls_alike",
        "P7",
        "an answer could not tell them apart",
    ),
    BrokenCase(
        "cp-artifact-read-needs-pending",
        "artifact_integrity",
        "stays_as_written_after_the_plans_time_runs_out",
        "C9",
        "artifact/read failed with PLAN_APPROVAL_TIMEOUT",
    ),
]
