"""Scheduled tasks and their unattended runs (§6).

A run is unattended: nobody can answer a permission question, and no Plan approval can
happen. So a Plan task is refused with PLAN_REQUIRES_INTERACTIVE_SESSION before anything
else happens (no session, no provider call, no artifact, no approval, no queue entry), and
an Agent task's tool call that would need a permission answer is refused with
PERMISSION_UNAVAILABLE while the run goes on. Tasks are one-shot: ``runAt`` is cleared when
the task fires. A run whose time passed while no host was running is skipped, never caught
up after a restart.
"""

from __future__ import annotations

import contextlib
from typing import Any

from reference_host.errors import HostError
from reference_host.ports import HostCore
from reference_host.storage import SessionRow
from reference_host.workspace import validate_root

PLAN_REFUSAL = "PLAN_REQUIRES_INTERACTIVE_SESSION"


def _run_wire(run: dict[str, Any] | None) -> dict[str, Any] | None:
    if run is None:
        return None
    error = (
        {"code": run["error_code"], "message": run["error_message"] or ""}
        if run["error_code"]
        else None
    )
    return {
        "runId": run["id"],
        "taskId": run["task_id"],
        "sessionId": run["session_id"],
        "startedAt": run["started_at"],
        "outcome": run["outcome"],
        "error": error,
    }


class Tasks:
    """Scheduled task handlers and the unattended runner."""

    def __init__(self, host: HostCore) -> None:
        self.host = host
        self._timers: dict[str, Any] = {}

    async def wire(self, row: dict[str, Any]) -> dict[str, Any]:
        """The protocol ``ScheduledTask``."""
        provider = (
            {"baseUrl": row["provider_base_url"], "model": row["model"]}
            if row["provider_base_url"] and row["model"]
            else None
        )
        return {
            "taskId": row["id"],
            "name": row["name"],
            "prompt": row["prompt"],
            "mode": row["mode"],
            "workspaceRoot": row["workspace_root"],
            "provider": provider,
            "permissionMode": row["permission_mode"],
            "runAt": row["run_at"],
            "enabled": bool(row["enabled"]),
            "lastRun": _run_wire(await self.host.storage.last_task_run(row["id"])),
            "createdAt": row["created_at"],
        }

    async def require(self, task_id: str) -> dict[str, Any]:
        """The task, or TASK_NOT_FOUND."""
        row = await self.host.storage.get_task(task_id)
        if row is None:
            raise HostError("TASK_NOT_FOUND", f"no scheduled task {task_id!r}")
        return row

    async def schedule_all(self) -> None:
        """Arm timers for enabled tasks due in the future (missed runs are skipped)."""
        now = self.host.clock.now_ms()
        for row in await self.host.storage.list_tasks():
            if row["enabled"] and row["run_at"] is not None and row["run_at"] > now:
                self._arm(row["id"], row["run_at"])

    def _arm(self, task_id: str, run_at: int | None) -> None:
        previous = self._timers.pop(task_id, None)
        if previous is not None:
            previous.cancel()
        if run_at is not None:
            self._timers[task_id] = self.host.clock.call_at(run_at, lambda: self._fire(task_id))

    async def _fire(self, task_id: str) -> None:
        self._timers.pop(task_id, None)
        row = await self.host.storage.get_task(task_id)
        if row is None or not row["enabled"]:
            return
        await self.host.storage.update_task(task_id, {"run_at": None})
        with contextlib.suppress(HostError):  # already recorded and announced as refused
            await self.run(row)

    # -- handlers -----------------------------------------------------------------------

    async def create(self, params: dict[str, Any]) -> dict[str, Any]:
        """task/create."""

        root = params["workspaceRoot"]
        if root is not None:
            validate_root(root)  # kept as given: reported and used as the same string
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

    async def list(self, params: dict[str, Any]) -> dict[str, Any]:
        """task/list."""
        return {"tasks": [await self.wire(row) for row in await self.host.storage.list_tasks()]}

    async def update(self, params: dict[str, Any]) -> dict[str, Any]:
        """task/update: e.g. the explicit change from Plan to Agent (§6)."""
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
        self._arm(row["id"], updated["run_at"] if updated["enabled"] else None)
        return {"task": await self.wire(updated)}

    async def delete(self, params: dict[str, Any]) -> dict[str, Any]:
        """task/delete."""
        row = await self.require(params["taskId"])
        self._arm(row["id"], None)
        await self.host.storage.delete_task(row["id"])
        return {}

    async def run_now(self, params: dict[str, Any]) -> dict[str, Any]:
        """task/run: run unattended now."""
        return {"run": await self.run(await self.require(params["taskId"]))}

    # -- the unattended run -------------------------------------------------------------

    async def run(self, row: dict[str, Any]) -> dict[str, Any]:
        """Refuse a Plan task before any work (§6); otherwise start an unattended turn."""
        host = self.host
        run = {
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
                PLAN_REFUSAL,
                "a Plan run needs an interactive session; change the task to Agent to run it "
                "unattended",
                {"taskId": row["id"]},
            )
            await self._finish(run, "refused", refusal)
            raise refusal
        if not row["provider_base_url"] or not row["model"]:
            failure = HostError("PROVIDER_NOT_CONFIGURED", "the task has no model provider")
            await self._finish(run, "failed", failure)
            raise failure
        now = host.clock.now_ms()
        session = SessionRow(
            id=host.new_id("ses"),
            workspace_root=row["workspace_root"],
            mode="agent",
            permission_mode=row["permission_mode"],
            provider_base_url=row["provider_base_url"],
            model=row["model"],
            shell_id=None,
            created_at=now,
            updated_at=now,
        )
        await host.storage.insert_session(session)
        run["session_id"] = session.id
        await host.storage.record_task_run(run)

        async def finished(outcome: str, error: HostError | None) -> None:
            await self._finish(run, "completed" if outcome == "completed" else "failed", error)

        await host.turns.start(
            session, "scheduled", row["prompt"], unattended=True, on_end=finished
        )
        wire = _run_wire(run)
        assert wire is not None
        return wire

    async def _finish(self, run: dict[str, Any], outcome: str, error: HostError | None) -> None:
        run.update(
            outcome=outcome,
            error_code=error.code if error else None,
            error_message=error.message if error else None,
        )
        await self.host.storage.record_task_run(run)
        self.host.notify("task/runFinished", {"run": _run_wire(run)})
