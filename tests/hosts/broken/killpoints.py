"""Broken hosts for the kill-point campaign: each loses, leaves or replays work across a
crash in a way only a kill at the right moment shows. ``tests/test_kill_points.py`` runs
the campaign against them; they have no suite cases."""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import replace
from typing import Any

from hosts.registry import patch, variant
from reference_host.approvals import Approvals, approval_wire
from reference_host.state import PermissionMode
from reference_host.storage import SessionRow, Storage
from reference_host.turns import TurnRunner

COMMIT_LATER_S = 2.0
NOTED_COMMAND = "noted_command"


@variant("recovery-skips-executions")
def _recovery_skips_executions() -> None:
    # Recovery interrupts pending approvals and active turns, but puts the queued and
    # running executions back as they were.
    original = Storage.recover

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self._conn.execute(
            "SELECT id, execution_state FROM plan_approvals "
            "WHERE execution_state IN ('queued', 'running')"
        ) as cursor:
            left = [(row[1], row[0]) for row in await cursor.fetchall()]
        counts = await original(self, now)
        async with self.transaction() as conn:
            await conn.executemany(
                "UPDATE plan_approvals SET execution_state = ? WHERE id = ?", left
            )
        return counts[0], 0, counts[2]

    patch(Storage, "recover", recover)


@variant("approve-answers-before-commit")
def _approve_answers_before_commit() -> None:
    # Approve answers at once (approved, queued, the session in Agent) and does the work,
    # the approval's commit included, a moment later.
    original = Approvals.approve
    pending: set[asyncio.Task[Any]] = set()

    async def approve(
        self: Approvals, session_id: str, approval_id: str, mode: PermissionMode
    ) -> dict[str, Any]:
        row = await self.require(session_id, approval_id)
        session: SessionRow = await self.host.require_session(session_id)
        now = self.host.clock.now_ms()
        answered = replace(
            row,
            status="approved",
            permission_mode=mode,
            decided_at=now,
            execution_id=self.host.new_id("exe"),
            execution_state="queued",
        )
        agent = replace(session, mode="agent", permission_mode=mode)

        async def later() -> None:
            await asyncio.sleep(COMMIT_LATER_S)
            await original(self, session_id, approval_id, mode)

        task = asyncio.get_running_loop().create_task(later())
        pending.add(task)
        task.add_done_callback(pending.discard)
        host: Any = self.host
        return {"approval": approval_wire(answered), "session": host.session_wire(agent)}

    patch(Approvals, "approve", approve)


@variant("reruns-interrupted-command")
def _reruns_interrupted_command() -> None:
    # Each command is noted in the settings while it runs; at start-up the host runs the
    # command a killed process left noted again, "to finish it".
    original_bash = TurnRunner._bash
    original_recover = Storage.recover
    reruns: list[asyncio.subprocess.Process] = []

    async def bash(
        self: TurnRunner, session: SessionRow, turn_id: str, args: dict[str, Any]
    ) -> Any:
        note = json.dumps({"command": args["command"], "cwd": session.workspace_root})
        await self.host.storage.set_setting(NOTED_COMMAND, note)
        result = await original_bash(self, session, turn_id, args)
        await self.host.storage.set_setting(NOTED_COMMAND, "")
        return result

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        counts = await original_recover(self, now)
        noted = await self.get_setting(NOTED_COMMAND)
        if noted:
            command = json.loads(noted)
            with contextlib.suppress(OSError):
                rerun = await asyncio.create_subprocess_exec(
                    "/bin/sh", "-c", command["command"], cwd=command["cwd"]
                )
                reruns.append(rerun)
            await self.set_setting(NOTED_COMMAND, "")
        return counts

    patch(TurnRunner, "_bash", bash)
    patch(Storage, "recover", recover)
