"""Broken hosts: a held-out set (shortcuts taken under a deadline), written from the
contract alone."""

from __future__ import annotations

import weakref
from dataclasses import replace
from pathlib import Path
from typing import Any

from hosts.registry import BrokenCase, patch, variant


# R4.6 / C4 / P7 (implementing-a-host.md, "Decisions are recorded" and "Execution and
# restart"): approve is one transaction in which "the session becomes Agent with the chosen
# permission mode", and the approve result carries the session "already in Agent with the
# chosen permission mode".
# Bug: the approve handler switches the session to Agent with the UI's default mode
# (`ask`, what the approval card preselects) instead of the mode the request chose; the
# approval row still records the chosen mode.
# Observed: after approve(permissionMode=auto) the approve result's session, session/get
# and sessions.permission_mode read `ask`; the execution's Write/Bash ask for permission.
# Recipe: Plan session, SubmitPlan, approval/approve with permissionMode "auto", then
# session/get (or script a Bash in the execution turn and see permission/requested).
@variant("cut-approve-session-default-mode")
def approve_session_default_mode() -> None:
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
        facts = state.approve(approvals_module._facts(row), mode, host.new_id("exe"))
        approved = approvals_module._with(row, facts, decided_at=now)
        # shortcut: the card preselects `ask`, so that is what the session gets
        agent = replace(session, mode="agent", permission_mode="ask", updated_at=now)
        async with host.storage.transaction() as conn:
            await host.storage.write_approval(conn, approved)
            await host.storage.write_session(conn, agent)
            if host.faults.take("approvalCommit"):
                raise HostError("INTERNAL_ERROR", "injected failure before the approval commit")
        host.set_activity(
            session_id, pending_approval_id=None, active_execution_id=approved.execution_id
        )
        host.notify("approval/updated", {"approval": approval_wire(approved)})
        self._notify_execution(approved, None)
        session_wire = await host.publish_session(session_id)
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


# P10 ("The tools work", Read): "With `offset` it starts at that line, counted from 1,
# and with `limit` it gives at most that many lines".
# Bug: Read's paging was written for `offset` (continue reading from a line); when both
# are given, `limit` is dropped and the file is returned from `offset` to its end.
# (`limit` alone still works.)
# Observed: a Read with offset 2 and limit 1 of a 4-line file gives lines 2, 3 and 4 to
# the model.
# Recipe: workspace file "a\nb\nc\nd\n"; model calls Read {path, offset: 2, limit: 1};
# the tool message of the next provider request holds "c" / "d".
@variant("cut-read-limit-dropped-with-offset")
def read_limit_dropped_with_offset() -> None:
    from reference_host.tools.files import Read

    original = Read._read

    def read(root: Path, relative: str, offset: int | None, limit: int | None) -> str:
        if offset is not None:
            limit = None  # shortcut: paging from an offset reads to the end
        return original(root, relative, offset, limit)

    patch(Read, "_read", staticmethod(read))


# "Commands and shells": "The per-call timeout is the tool argument `timeout_ms`; the
# default is yours" (P20/C5: a timed-out command's `command/exited` says `timedOut: true`
# and its tool result is `error` with COMMAND_TIMED_OUT).
# Bug: the Bash tool never plumbs the `timeout_ms` argument through to the command runner:
# every command runs under the host's default timeout (120 s).
# Observed: a Bash call with timeout_ms 1000 of a command that blocks is not timed out
# when the clock is advanced past 1 s (only at 120 s).
# Recipe: Agent session (auto), model calls Bash {command: "sleep 30" or a gate wait,
# timeout_ms: 1000}; conformance/clock/advance 1000; expect command/exited timedOut true.
@variant("cut-bash-timeout-ms-ignored")
def bash_timeout_ms_ignored() -> None:
    from reference_host import turns
    from reference_host.commands import DEFAULT_TIMEOUT_MS
    from reference_host.commands import run_command as original

    async def run_command(**kwargs: Any) -> Any:
        kwargs["timeout_ms"] = DEFAULT_TIMEOUT_MS  # shortcut: the argument is never read
        return await original(**kwargs)

    patch(turns, "run_command", run_command)


# P29 ("A task as given"): "A `task/update` that changes `runAt` replaces the earlier
# time: the task runs at the new time only, not also at the old one."
# Bug: task/update writes the new runAt to the row and answers it, but re-arms the timer
# only when `enabled` is part of the update (the path the author tested); a runAt-only
# update leaves the old timer armed and arms no new one.
# Observed: the task runs at its old runAt (task/runFinished) and not at the new one.
# Recipe: task/create (agent, runAt = now + 60 s), task/update {runAt: now + 600 s};
# clock advance 60 s -> a run starts (should not); or update to an earlier time and
# advance to it -> nothing runs.
@variant("cut-task-update-runat-not-rearmed")
def task_update_runat_not_rearmed() -> None:
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
        if "enabled" in params:  # shortcut: only switching on/off touches the timer
            self._arm(row["id"], updated["run_at"] if updated["enabled"] else None)
        return {"task": await self.wire(updated)}

    patch(Tasks, "update", update)


# P8 / P29 (Scheduled tasks): an unattended run refuses only "a tool call that needs a
# permission answer under the task's permission mode (see P7)"; P7: `auto` never asks.
# An Agent task runs as a new session (R6, "An Agent task runs as a new session").
# Bug: the run's session is created with the session default permission mode `ask`
# instead of the task's permissionMode, so an `auto` (or `accept-edits`) task's Write or
# Bash is refused with PERMISSION_UNAVAILABLE.
# Observed: task with permissionMode auto, model calls Write -> turn/toolResult denied
# PERMISSION_UNAVAILABLE, no file; the run session's session/get shows permissionMode ask.
# Recipe: task/create {mode agent, permissionMode auto}, task/run, model calls Write.
@variant("cut-task-run-session-ask")
def task_run_session_ask() -> None:
    from reference_host import tasks as tasks_module
    from reference_host.errors import HostError
    from reference_host.storage import SessionRow
    from reference_host.tasks import Tasks

    async def run(self: Tasks, row: dict[str, Any]) -> dict[str, Any]:
        host = self.host
        run_row: dict[str, Any] = {
            "id": host.new_id("run"),
            "task_id": row["id"],
            "session_id": None,
            "started_at": host.clock.now_ms(),
            "outcome": "running",
            "error_code": None,
            "error_message": None,
        }
        if row["mode"] != "agent":
            refusal = HostError(
                tasks_module.PLAN_REFUSAL,
                "a Plan run needs an interactive session; change the task to Agent to run it "
                "unattended",
                {"taskId": row["id"]},
            )
            await self._finish(run_row, "refused", refusal)
            raise refusal
        if not row["provider_base_url"] or not row["model"]:
            failure = HostError("PROVIDER_NOT_CONFIGURED", "the task has no model provider")
            await self._finish(run_row, "failed", failure)
            raise failure
        now = host.clock.now_ms()
        session = SessionRow(
            id=host.new_id("ses"),
            workspace_root=row["workspace_root"],
            mode="agent",
            permission_mode="ask",  # shortcut: the session default, as session/create uses
            provider_base_url=row["provider_base_url"],
            model=row["model"],
            shell_id=None,
            created_at=now,
            updated_at=now,
        )
        await host.storage.insert_session(session)
        run_row["session_id"] = session.id
        await host.storage.record_task_run(run_row)

        async def finished(outcome: str, error: HostError | None) -> None:
            await self._finish(run_row, "completed" if outcome == "completed" else "failed", error)

        await host.turns.start(
            session, "scheduled", row["prompt"], unattended=True, on_end=finished
        )
        wire = tasks_module._run_wire(run_row)
        assert wire is not None
        return wire

    patch(Tasks, "run", run)


# P29: "A task keeps its time across a restart: an enabled task whose `runAt` is still
# ahead when your host starts runs when it comes due. Every enabled task whose `runAt`
# comes due runs".
# Bug: the start-up scheduler arms a single wake-up for the earliest pending task (the
# common case is one task) and forgets the others; tasks created or updated while the
# host runs are still armed as they should be.
# Observed: after a restart with two enabled tasks ahead, only the earlier one runs; the
# later one never fires when the clock reaches it.
# Recipe: task/create A (runAt T+1h) and B (runAt T+2h); restart the host; clock/set past
# both (or advance 3 h) -> only A's task/runFinished arrives.
@variant("cut-startup-arms-earliest-task-only")
def startup_arms_earliest_task_only() -> None:
    from reference_host.tasks import Tasks

    async def schedule_all(self: Tasks) -> None:
        now = self.host.clock.now_ms()
        due = [
            row
            for row in await self.host.storage.list_tasks()
            if row["enabled"] and row["run_at"] is not None and row["run_at"] > now
        ]
        if due:  # shortcut: one wake-up, for the next task
            first = min(due, key=lambda row: int(row["run_at"]))
            self._arm(first["id"], first["run_at"])

    patch(Tasks, "schedule_all", schedule_all)


# R2.4 (ADR §2 "Each submission gets a unique file"; implementing-a-host.md "Plan
# artifacts": the name "must be new for every submission, also for two identical plans
# submitted at the same host-clock instant").
# Bug: the artifact is named from a wall-clock timestamp at one-second resolution
# (plan-YYYYMMDDTHHMMSSZ.md), the random suffix left out as "unique enough"; a second
# submission within the same second finds every name taken and fails with
# ARTIFACT_WRITE_FAILED (no approval).
# Observed: two sessions (or a reject + revision) submitting plans within one second: the
# second SubmitPlan's tool result is error ARTIFACT_WRITE_FAILED.
# Recipe: two Plan sessions on one workspace root, both prompts answered with SubmitPlan
# at once -> one of them fails; or submit, reject, resubmit quickly.
@variant("cut-artifact-name-per-second")
def artifact_name_per_second() -> None:
    import time

    from reference_host import artifacts

    def unique_name() -> str:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        return f"plan-{stamp}.md"

    patch(artifacts, "_unique_name", unique_name)


# R7.3 (implementing-a-host.md, "Commands and shells"): "`shellId: null` clears the
# session's own choice: from then on the session reads `shellId: null` (in the answer, in
# `session/get` and in `sessions.shell_id`) and its commands run in the default shell."
# Bug: session/configure reads the shell with `params.get("shellId")` and treats null as
# "not given": the session keeps its shell, yet the request is answered as a success
# (the answer shows the session as stored, still with its shell).
# Observed: configure {shellId: null} answers and announces shellId "<old shell>".
# Recipe: session/create with shellId of a bash shell; session/configure {shellId: null};
# session/get -> shellId still set (should be null).
@variant("cut-configure-shell-null-ignored")
def configure_shell_null_ignored() -> None:
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
        shell_id = params.get("shellId")
        if shell_id is not None:  # shortcut: null taken for "not given"
            host_module._require_shell(shell_id)
            changes["shell_id"] = shell_id
        updated = replace(row, **changes, updated_at=self.clock.now_ms())
        await self.storage.update_session(updated)
        wire = self.session_wire(updated)
        self.notify("session/updated", {"session": wire})
        return {"session": wire}

    patch(Host, "session_configure", session_configure)


# R7.2 (implementing-a-host.md, "Sessions, turns and boundaries"): "Every change of what
# `session/get` reports (..., pending approval ...) is announced by a `session/updated`
# carrying the whole session as it now is, so the last one you sent for a session reads
# as `session/get` does". Ordering: "a reject's `approval/updated` ... come before its
# answer".
# Bug: the reject handler sends `approval/updated` but not `session/updated` (only the
# approve path, which changes the mode, was written to announce the session); the
# session's pendingApprovalId goes back to null silently.
# Observed: after approval/reject, the last session/updated still shows
# pendingApprovalId = the rejected approval, while session/get shows null.
# Recipe: Plan session, SubmitPlan, approval/reject; compare the last session/updated
# with session/get.
@variant("cut-reject-no-session-updated")
def reject_no_session_updated() -> None:
    from reference_host import approvals as approvals_module
    from reference_host import state
    from reference_host.approvals import Approvals, approval_wire

    async def reject(self: Approvals, session_id: str, approval_id: str) -> dict[str, Any]:
        host = self.host
        row = await self.require(session_id, approval_id)
        await host.turns.settle(session_id, row.turn_id)
        await self._ensure_decidable(row)
        rejected = approvals_module._with(
            row, state.reject(approvals_module._facts(row)), decided_at=host.clock.now_ms()
        )
        await host.storage.update_approval(rejected)
        host.set_activity(session_id, pending_approval_id=None)
        host.notify("approval/updated", {"approval": approval_wire(rejected)})
        return {"approval": approval_wire(rejected)}

    patch(Approvals, "reject", reject)


# P12 ("The plan folder is host-owned"): "the model's `Write` and `Edit` into
# `.pi/plan/` are refused with `TOOL_DENIED`, in any mode and any turn, for existing
# artifacts and new files alike"; C10 "Every artifact stays as written".
# Bug: the plan-folder guard is written into the Write branch only; Edit, the other way
# in, reaches the file (the reference makes artifacts read-only, but Edit rewrites through
# a new descriptor only where the mode allows, so the guard is what protects them).
# Observed: in an Agent turn (auto), Edit of .pi/plan/<artifact>.md is not TOOL_DENIED.
# Recipe: submit a plan, reject it, switch to Agent/auto, model calls Edit on the
# artifact path -> expect turn/toolResult denied TOOL_DENIED and the file unchanged.
@variant("cut-plan-folder-guard-write-only")
def plan_folder_guard_write_only() -> None:
    from reference_host import turns
    from reference_host.tools.base import ToolContext
    from reference_host.turns import CallOutcome, TurnRunner

    original = TurnRunner._dispatch

    async def dispatch(
        self: TurnRunner, session: Any, turn_id: str, name: str, args: dict[str, Any]
    ) -> CallOutcome:
        if name != "Edit" or session.workspace_root is None:
            return await original(self, session, turn_id, name, args)
        root = Path(session.workspace_root)
        # shortcut: only Write checks the plan folder
        output = await turns._FILE_TOOLS[name].run(ToolContext(session.id, turn_id, root), args)
        return CallOutcome("ok", output)

    patch(TurnRunner, "_dispatch", dispatch)


# P29 ("A task as given"): "a root that `session/create` would refuse, relative, missing
# or not a folder, is refused with `WORKSPACE_INVALID` and creates no task".
# Bug: task/create checks only that the root is an absolute path (the check of
# session/create, which also stats the folder, was not reused); a missing folder or a
# file is accepted and a task is created.
# Observed: task/create with workspaceRoot "/nonexistent/x" answers a task (should be
# WORKSPACE_INVALID), task/list lists it.
# Recipe: task/create {workspaceRoot: <missing absolute path>} -> expect WORKSPACE_INVALID.
@variant("cut-task-root-absolute-only")
def task_root_absolute_only() -> None:
    from reference_host.errors import HostError
    from reference_host.tasks import Tasks

    async def create(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        root = params["workspaceRoot"]
        if root is not None and not Path(root).is_absolute():  # shortcut: no stat
            raise HostError("WORKSPACE_INVALID", f"workspace root {root!r} is not absolute")
        now = self.host.clock.now_ms()
        row = {
            "id": self.host.new_id("task"),
            "name": params["name"],
            "prompt": params["prompt"],
            "mode": params["mode"],
            "workspace_root": root,
            "provider_base_url": params["provider"]["baseUrl"],
            "model": params["provider"]["model"],
            "permission_mode": params.get("permissionMode", "ask"),
            "run_at": params.get("runAt"),
            "enabled": int(params.get("enabled", True)),
            "created_at": now,
            "updated_at": now,
        }
        await self.host.storage.insert_task(row)
        if row["enabled"]:
            self._arm(row["id"], row["run_at"])
        return {"task": await self.wire(row)}

    patch(Tasks, "create", create)


# P10 ("The tools work", Grep): "Hidden folders and `.git` are as for Glob, and `glob`
# narrows the files as Glob's pattern does".
# Bug: Grep accepts the optional `glob` argument (it validates) but never applies it:
# every file of the workspace is searched.
# Observed: Grep {pattern: "needle", glob: "*.md"} over a.md and b.txt, both holding
# "needle", gives both files to the model.
# Recipe: two files of different extension with the same line; Grep with glob; the tool
# message lists the file the glob excludes.
@variant("cut-grep-glob-ignored")
def grep_glob_ignored() -> None:
    from reference_host.tools.base import ToolContext
    from reference_host.tools.files import Grep

    original = Grep.run

    async def run(self: Grep, ctx: ToolContext, args: dict[str, Any]) -> str:
        # the call's arguments were validated before dispatch; the glob goes no further
        args = {key: value for key, value in args.items() if key != "glob"}
        return await original(self, ctx, args)

    patch(Grep, "run", run)


# R7.6 (implementing-a-host.md, "Commands and shells"): "`shell/setDefault` persists the
# default in `settings` under the key `default_shell_id`; it survives a restart".
# Bug: shell/setDefault answers the new default and keeps it on the running host only
# (an in-memory setting, the write to `settings` left for later); shell/list and Bash use
# it until the host stops, then the default falls back to the host's own choice.
# (The choice lives on the Host instance, so a restart forgets it: that is the bug.)
# Observed: no settings row default_shell_id; after a restart shell/list's defaultShellId
# is the fallback again.
# Recipe: shell/setDefault to the non-default shell; read settings (or restart, then
# shell/list) -> expect the chosen shell.
@variant("cut-set-default-shell-in-memory")
def set_default_shell_in_memory() -> None:
    from reference_host import host as host_module
    from reference_host.host import Host

    chosen: weakref.WeakKeyDictionary[Host, str] = weakref.WeakKeyDictionary()
    original_default = Host.default_shell_id

    async def default_shell_id(self: Host) -> str | None:
        if self in chosen:
            return chosen[self]
        return await original_default(self)

    async def shell_set_default(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        shell = host_module._require_shell(params["shellId"])
        chosen[self] = shell.shell_id  # the shortcut: kept in memory, never written to settings
        return {"defaultShellId": shell.shell_id}

    patch(Host, "default_shell_id", default_shell_id)
    patch(Host, "shell_set_default", shell_set_default)


# implementing-a-host.md, "The model provider": "Each session's requests carry its own
# provider as it now stands: a model changed by `session/configure` counts from the next
# request on, also when the base URL stays, and what another session uses (of the same
# project or the same base URL) never does."
# Bug: the provider client is cached per base URL (one client per endpoint), and the model
# name is taken from the cached entry, i.e. from the first session that used that URL.
# Observed: a session configured with model "m2" on the same baseUrl as an earlier
# session's "m1" sends requests with model "m1"; so does a session whose model was
# changed by session/configure.
# Recipe: session A (baseUrl U, model m1) prompt; session B (baseUrl U, model m2) prompt;
# B's provider request names model m1.
@variant("cut-provider-model-cached-per-url")
def provider_model_cached_per_url() -> None:
    from reference_host import turns
    from reference_host.provider_client import ProviderConfig
    from reference_host.provider_client import complete as original

    cache: weakref.WeakKeyDictionary[Any, dict[str, str]] = weakref.WeakKeyDictionary()

    async def complete(client: Any, config: ProviderConfig, *args: Any, **kwargs: Any) -> Any:
        models = cache.setdefault(client, {})  # client: one per Host
        model = models.setdefault(config.base_url, config.model)
        return await original(client, replace(config, model=model), *args, **kwargs)

    patch(turns, "complete", complete)


CASES = [
    BrokenCase(
        "cut-approve-session-default-mode",
        "approval",
        "approving_with_auto_switches_the_session_to_agent",
        "R4.6",
        "permission mode is ask",
    ),
    BrokenCase(
        "cut-read-limit-dropped-with-offset",
        "plan_tools",
        "reading_part_of_a_file and from_the_first_line",
        "P10",
        "after its Read call the model was given",
    ),
    BrokenCase(
        "cut-bash-timeout-ms-ignored",
        "shell",
        "command_times_out_when_the_clock_is_set_past_its_timeout",
        "C5",
        "no command/exited notification matched",
        slow=True,
    ),
    BrokenCase(
        "cut-task-update-runat-not-rearmed",
        "scheduled_plan",
        "given_a_new_time_after_it_ran_runs_again",
        "P29",
        "the task did not",
    ),
    BrokenCase(
        "cut-task-run-session-ask",
        "scheduled_plan",
        "needs_no_permission_runs_in_an_unattended_run",
        "P8",
        "PERMISSION_UNAVAILABLE",
    ),
    BrokenCase(
        "cut-startup-arms-earliest-task-only",
        "scheduled_plan",
        "due_at_different_times_all_run_after_a_restart",
        "P29",
        "of 2 enabled tasks that came due",
    ),
    BrokenCase(
        "cut-artifact-name-per-second",
        "artifact_integrity",
        # names by the wall-clock second: two submissions that straddle a second's turn
        # get two names, so the case takes two scenarios that submit twice at once
        "two_identical_submissions_at_the_same_moment or two_sessions_of_one_project_submitting",
        "R2.4",
        "2 plans were submitted, the host lists 1",
        or_reason="submission made no approval",
    ),
    BrokenCase(
        "cut-configure-shell-null-ignored",
        "shell",
        "shell_of_its_own_is_cleared",
        "R7.3",
        "the session still names",
    ),
    BrokenCase(
        "cut-reject-no-session-updated",
        "submit_plan",
        "rejecting_a_plan_leaves_the_sessions_permission_mode",
        "R7.2",
        "two reports of one record disagreed",
    ),
    BrokenCase(
        "cut-plan-folder-guard-write-only",
        "artifact_integrity",
        "cannot_write_into_the_plan_folder and edit_the_plan_artifact",
        "P12",
        "the Edit call ran, expected TOOL_DENIED",
    ),
    BrokenCase(
        "cut-task-root-absolute-only",
        "scheduled_plan",
        "task_for_a_project_that_is_not_a_folder_is_refused",
        "R2.8",
        "expected the host to refuse",
    ),
    BrokenCase(
        "cut-grep-glob-ignored",
        "plan_tools",
        "searching_only_the_files_a_pattern_names",
        "P10",
        "after its Grep call the model was given",
    ),
    BrokenCase(
        "cut-set-default-shell-in-memory",
        "shell",
        "default_shell_can_be_changed_while_a_session",
        "R7.6",
        "settings hold default_shell_id = None",
    ),
    BrokenCase(
        "cut-provider-model-cached-per-url",
        "isolation",
        "own_model_after_another_session_of_its_project_talked",
        "R5.9",
        "not its own",
    ),
]
