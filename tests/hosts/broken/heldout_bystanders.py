"""Broken hosts: a held-out set (bystanders and lookalikes), written from the contract alone.

Four of these ten were caught at first; all are caught now. What was missed needed two
things alike: a revision under the plan's own title, the same command allowed before, two
projects' files alike in name, size and time, two identical plans, two calls of one tool in
one message, and two runs of one task.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path
from typing import Any

from hosts.registry import BrokenCase, patch, variant
from reference_host import approvals, artifacts, state
from reference_host.approvals import Approvals, approval_wire
from reference_host.errors import HostError
from reference_host.host import Host
from reference_host.storage import ApprovalRow, Storage
from reference_host.tasks import Tasks
from reference_host.tools.base import validate_args
from reference_host.tools.files import Read
from reference_host.turns import TurnRunner
from reference_host.workspace import require_root, resolve_inside, validate_root


# P15: the execution prompt carries the plan the host remembered for the session under the
# plan's title, kept from the first submission of that title: a revision submitted under
# the same title (after a reject or an expiry) runs with the earlier plan's path and text.
@variant("execution-plan-by-title")
def _execution_plan_by_title() -> None:
    plans: dict[tuple[str, str], tuple[str | None, str]] = {}
    submit = Approvals.submit
    prompt = approvals._execution_prompt

    async def _submit(self: Approvals, session: Any, turn_id: str, args: dict[str, Any]) -> Any:
        row = await submit(self, session, turn_id, args)
        plans.setdefault((row.session_id, row.title), (row.artifact_path, args["markdown"]))
        return row

    def _execution_prompt(row: ApprovalRow, content: bytes) -> str:
        remembered = plans.get((row.session_id, row.title))
        if remembered is None:
            return prompt(row, content)
        path, markdown = remembered
        return prompt(replace(row, artifact_path=path), markdown.encode("utf-8"))

    patch(Approvals, "submit", _submit)
    patch(approvals, "_execution_prompt", _execution_prompt)


# P7: a Bash command the user allowed once is remembered host-wide by its text: the same
# command later runs without a question, in another turn or another session (attended
# turns only; an unattended run is still refused).
@variant("allowed-command-remembered-by-text")
def _allowed_command_remembered_by_text() -> None:
    allowed: set[str] = set()
    original = TurnRunner._require_permission

    async def _require_permission(
        self: TurnRunner,
        session: Any,
        turn_id: str,
        call: Any,
        args: dict[str, Any],
        unattended: bool,
    ) -> None:
        command = args.get("command") if call.name == "Bash" else None
        if not unattended and command is not None and command in allowed:
            return
        await original(self, session, turn_id, call, args, unattended)
        if command is not None:
            allowed.add(command)

    patch(TurnRunner, "_require_permission", _require_permission)


# P26 / P29: task timers are kept in buckets by due instant; moving, switching off or
# deleting one task cancels the whole bucket of its old instant, so every other task due
# at that same moment silently loses its run ("deleting one task leaves every other
# task's time as it was").
@variant("task-timers-bucketed-by-instant")
def _task_timers_bucketed_by_instant() -> None:
    def _arm(self: Tasks, task_id: str, run_at: int | None) -> None:
        buckets: dict[int, list[Any]] = self.__dict__.setdefault("_by_instant", {})
        instant_of: dict[str, int] = self.__dict__.setdefault("_instant_of", {})
        self._timers.pop(task_id, None)
        old = instant_of.pop(task_id, None)
        if old is not None:
            for handle in buckets.pop(old, []):
                handle.cancel()
        if run_at is not None:
            handle = self.host.clock.call_at(run_at, lambda: self._fire(task_id))
            self._timers[task_id] = handle
            buckets.setdefault(run_at, []).append(handle)
            instant_of[task_id] = run_at

    patch(Tasks, "_arm", _arm)


# P29: task ids are derived from the name and the creation instant, and task/create is an
# upsert on that id (so that a retried create is idempotent): a second task of the same
# name created at the same host-clock instant replaces the first ("two tasks of one name
# are two tasks").
@variant("task-id-from-name-and-time")
def _task_id_from_name_and_time() -> None:
    async def create(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        root = params["workspaceRoot"]
        if root is not None:
            validate_root(root)
        now = self.host.clock.now_ms()
        digest = hashlib.sha256(f"{params['name']}\0{now}".encode()).hexdigest()[:32]
        row = {
            "id": f"task_{digest}",
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
        columns = ", ".join(row)
        marks = ", ".join("?" * len(row))
        async with self.host.storage.transaction() as conn:
            await conn.execute(
                f"INSERT OR REPLACE INTO scheduled_tasks ({columns}) VALUES ({marks})",
                tuple(row.values()),
            )
        self._arm(row["id"], row["run_at"] if row["enabled"] else None)
        return {"task": await self.wire(row)}

    patch(Tasks, "create", create)


# R5.8 / R5.9: Read results are cached by the path the model gave, the file's size and its
# mtime in whole seconds, without the workspace root: another project's file at the same
# relative path with the same size, written in the same second, is served from the cache.
@variant("read-cache-without-root")
def _read_cache_without_root() -> None:
    cache: dict[tuple[Any, ...], str] = {}
    original = Read.run

    async def run(self: Read, ctx: Any, args: dict[str, Any]) -> str:
        args = validate_args(self.spec, args)
        root = require_root(ctx.workspace_root)
        path = resolve_inside(root, args["path"], must_exist=True)
        info = path.stat()
        key: tuple[Any, ...] = (args["path"], args.get("offset"), args.get("limit"))
        key += (info.st_size, int(info.st_mtime))
        if key not in cache:
            cache[key] = await original(self, ctx, args)
        return cache[key]

    patch(Read, "run", run)


# P13: when the artifact's own file no longer matches its record (changed, missing or
# replaced), the host looks the plan up by content in the plan folder and accepts any
# regular file with the recorded SHA-256 and size: another, identical plan's artifact
# (a resubmission of the same markdown) vouches for the changed one.
@variant("integrity-accepts-a-twin-artifact")
def _integrity_accepts_a_twin_artifact() -> None:
    def read_verified(root: str, relative_path: str, sha256: str, byte_size: int) -> bytes:
        try:
            return artifacts.read_verified(root, relative_path, sha256, byte_size)
        except HostError as error:
            if error.code not in ("ARTIFACT_MODIFIED", "ARTIFACT_UNREADABLE"):
                raise
            folder = Path(root, *artifacts.PLAN_DIR)
            try:
                entries = sorted(folder.iterdir())
            except OSError:
                raise error from None
            for entry in entries:
                if entry.is_symlink() or not entry.is_file():
                    continue
                if entry.stat().st_size != byte_size:
                    continue
                data = entry.read_bytes()
                if hashlib.sha256(data).hexdigest() == sha256:
                    return data
            raise

    patch(approvals, "read_verified", read_verified)


# P9 / P10: the results of a batch are gathered for the model in a mapping by tool name: when
# one message calls the same tool twice (two Reads), both tool messages carry the last
# call's result. turn/toolResult is still announced per call as it ran.
@variant("batch-results-keyed-by-tool-name")
def _batch_results_keyed_by_tool_name() -> None:
    original = TurnRunner._run_batch

    async def _run_batch(
        self: TurnRunner, session: Any, turn_id: str, calls: Any, unattended: bool
    ) -> Any:
        outcomes = await original(self, session, turn_id, calls, unattended)
        by_tool = {call.name: outcome for call, outcome in zip(calls, outcomes, strict=True)}
        return [by_tool[call.name] for call in calls]

    patch(TurnRunner, "_run_batch", _run_batch)


# R7.2 / R1.11: approval/list orders a session's approvals through a map keyed by
# createdAt; two approvals created at one host-clock instant (a plan rejected and its
# revision submitted before the clock moved) collapse into the later one.
@variant("approval-list-one-per-instant")
def _approval_list_one_per_instant() -> None:
    original = Storage.list_approvals

    async def list_approvals(self: Storage, session_id: str) -> list[ApprovalRow]:
        timeline: dict[int, ApprovalRow] = {}
        for row in await original(self, session_id):
            timeline[row.created_at] = row
        return [timeline[at] for at in sorted(timeline)]

    patch(Storage, "list_approvals", list_approvals)


# R7.2 / R4.5: when an execution turn ends, the host records the end on the right row but
# announces "the session's approval" as it now reads, its newest one: when the execution
# entered Plan and submitted a new plan, the approval/updated carries that new pending
# approval, and the executed approval's move to completed is never announced.
@variant("execution-end-announces-newest-approval")
def _execution_end_announces_newest_approval() -> None:
    async def execution_finished(self: Approvals, approval_id: str, final: Any) -> None:
        host = self.host
        row = await self._execution(approval_id)
        assert row.execution_state is not None
        done = replace(row, execution_state=state.advance_execution(row.execution_state, final))
        await host.storage.update_approval(done)
        host.set_activity(row.session_id, active_execution_id=None)
        self._notify_execution(done, row.execution_turn_id)
        newest = (await host.storage.list_approvals(row.session_id))[-1]
        host.notify("approval/updated", {"approval": approval_wire(newest)})

    patch(Approvals, "execution_finished", execution_finished)


# R5.9 / P35: session/cancel on a scheduled run's session is taken as "cancel the task":
# it also cancels the turns of the task's other runs still under way, which end failed.
@variant("cancel-ends-every-run-of-the-task")
def _cancel_ends_every_run_of_the_task() -> None:
    run_of: dict[str, str] = {}
    run = Tasks.run
    cancel = Host.session_cancel

    async def task_run(self: Tasks, row: dict[str, Any]) -> dict[str, Any]:
        wire = await run(self, row)
        if wire.get("sessionId"):
            run_of[wire["sessionId"]] = row["id"]
        return wire

    async def session_cancel(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        answer = await cancel(self, params)
        task_id = run_of.get(params["sessionId"])
        if task_id is not None:
            for session_id, owner in list(run_of.items()):
                if owner == task_id and session_id != params["sessionId"]:
                    await self.turns.cancel(session_id)
        return answer

    patch(Tasks, "run", task_run)
    patch(Host, "session_cancel", session_cancel)


CASES = [
    BrokenCase(
        "execution-plan-by-title",
        "execution",
        "starts_from_the_revision and same",
        "P15",
        "the model was not told the artifact path",
    ),
    BrokenCase(
        "allowed-command-remembered-by-text",
        "execution",
        "allowed_once_asks",
        "P7",
        "Bash ran without asking for permission",
    ),
    BrokenCase(
        "task-timers-bucketed-by-instant",
        "scheduled_plan",
        "deleting_a_task_leaves",
        "P29",
        "the host clock passed the runAt of the other task",
    ),
    BrokenCase(
        "task-id-from-name-and-time",
        "scheduled_plan",
        "two_tasks_of_one_name",
        "P29",
        "enabled tasks that came due",
    ),
    BrokenCase(
        "read-cache-without-root",
        "isolation",
        "alike_in_name",
        "R5.8",
        "alike in name, size and time",
    ),
    BrokenCase(
        "integrity-accepts-a-twin-artifact",
        "artifact_integrity",
        "strength_of",
        "P13",
        "expected the host to refuse",
    ),
    BrokenCase(
        "batch-results-keyed-by-tool-name",
        "plan_tools",
        "their_own_call",
        "P10",
        "and no other call's",
    ),
    BrokenCase(
        "approval-list-one-per-instant",
        "artifact_integrity",
        "identical_submissions_at_the_same_moment",
        "R2.4",
        "2 plans were submitted, the host lists 1",
    ),
    BrokenCase(
        "execution-end-announces-newest-approval",
        "execution",
        "still_waits_for_the_user_once",
        "R7.2",
        "two reports of one record disagreed",
    ),
    BrokenCase(
        "cancel-ends-every-run-of-the-task",
        "scheduled_plan",
        "two_runs_of",
        "P35",
        "ended the other run's turn too",
    ),
]
