"""Broken hosts: lifecycle."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiosqlite

from hosts.registry import BrokenCase, patch, variant
from reference_host import approvals, artifacts, commands, migration, shells, turns
from reference_host import storage as storage_module
from reference_host.errors import HostError
from reference_host.provider_client import ProviderConfig, complete
from reference_host.rpc import Dispatcher
from reference_host.storage import Storage
from reference_host.tasks import Tasks


async def _unfinished_executions(storage: Storage) -> list[str]:
    """Ids of the approvals whose execution is queued or running."""
    async with storage._conn.execute(
        "SELECT id FROM plan_approvals WHERE execution_state IN ('queued', 'running')"
    ) as cursor:
        return [row[0] for row in await cursor.fetchall()]


@variant("replays-queued-execution")
def _replays_queued_execution() -> None:
    # Recovery marks the executions interrupted, as it should, and then the host starts
    # each of them again as a new execution turn before it serves. The rows stay
    # interrupted: only the replayed work itself can give the variant away.
    replay: list[str] = []
    original_recover = Storage.recover
    original_schedule = Tasks.schedule_all

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        replay.extend(await _unfinished_executions(self))
        return await original_recover(self, now)

    async def schedule_all(self: Tasks) -> None:
        await original_schedule(self)
        host = self.host
        for approval_id in replay:
            row = await host.storage.get_approval(approval_id)
            assert row is not None
            session = await host.require_session(row.session_id)
            content = artifacts.read_artifact(session.workspace_root or "", row.artifact_path or "")
            prompt = approvals._execution_prompt(row, content)
            await host.turns.start(session, "execution", prompt)

    patch(Storage, "recover", recover)
    patch(Tasks, "schedule_all", schedule_all)


@variant("answers-before-recovery")
def _answers_before_recovery() -> None:
    # Recovery is deferred until the second request arrives: the first one (initialize) is
    # answered while the previous process's approvals are still pending in storage.
    deferred: list[tuple[Storage, int]] = []
    handled = 0
    original_recover = Storage.recover
    original_handle = Dispatcher.handle

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        deferred.append((self, now))
        return 0, 0, 0

    async def handle(self: Dispatcher, frame: Any) -> None:
        nonlocal handled
        if handled >= 1:
            while deferred:
                await original_recover(*deferred.pop())
        handled += 1
        await original_handle(self, frame)

    patch(Storage, "recover", recover)
    patch(Dispatcher, "handle", handle)


@variant("interrupted-execution-back-to-plan")
def _interrupted_execution_back_to_plan() -> None:
    # Recovery puts a session whose approved execution it interrupted back into Plan.
    original = Storage.recover

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        ids = await _unfinished_executions(self)
        counts = await original(self, now)
        async with self.transaction() as conn:
            for approval_id in ids:
                await conn.execute(
                    "UPDATE sessions SET mode = 'plan' WHERE id = "
                    "(SELECT session_id FROM plan_approvals WHERE id = ?)",
                    (approval_id,),
                )
        return counts

    patch(Storage, "recover", recover)


def _open_then(action: Callable[[Storage], Any]) -> None:
    original = Storage.open.__func__

    async def open_storage(cls: type[Storage], data_dir: Path) -> Storage:
        storage: Storage = await original(cls, data_dir)
        await action(storage)
        return storage

    patch(Storage, "open", classmethod(open_storage))


@variant("stores-boot-epoch")
def _stores_boot_epoch() -> None:
    # Each process records its boot epoch in a table of its own.
    async def record(storage: Storage) -> None:
        async with storage.transaction() as conn:
            await conn.execute("CREATE TABLE IF NOT EXISTS host_boots (epoch TEXT NOT NULL)")
            await conn.execute("INSERT INTO host_boots (epoch) VALUES (?)", (uuid.uuid4().hex,))

    _open_then(record)


@variant("stores-boot-epoch-setting")
def _stores_boot_epoch_setting() -> None:
    # Each process records its boot epoch in the published settings table: the schema
    # stays exactly v10.
    async def record(storage: Storage) -> None:
        await storage.set_setting("boot_epoch", uuid.uuid4().hex)

    _open_then(record)


@variant("migrates-outside-transaction")
def _migrates_outside_transaction() -> None:
    # Each migration statement commits on its own (the connection is in autocommit mode).
    async def migrate(conn: aiosqlite.Connection, v10_statements: list[str]) -> None:
        await conn.execute("PRAGMA foreign_keys = OFF")
        try:
            for statement in migration.migration_statements(v10_statements):
                await conn.execute(statement)
        except aiosqlite.Error as exc:
            raise HostError("MIGRATION_FAILED", f"the v8 to v10 migration failed: {exc}") from exc

    storage_module.migrate_v8_to_v10 = migrate


@variant("writes-version-first")
def _writes_version_first() -> None:
    # user_version = 10 is committed before the transaction that migrates the data.
    original = storage_module.migrate_v8_to_v10

    async def migrate(conn: aiosqlite.Connection, v10_statements: list[str]) -> None:
        await conn.execute(f"PRAGMA user_version = {migration.V10}")
        await original(conn, v10_statements)

    storage_module.migrate_v8_to_v10 = migrate


def _before_plan_refusal(work: Callable[[Tasks, dict[str, Any]], Any]) -> None:
    original = Tasks.run

    async def run(self: Tasks, row: dict[str, Any]) -> dict[str, Any]:
        if row["mode"] != "agent":
            await work(self, row)
        return await original(self, row)

    patch(Tasks, "run", run)


@variant("calls-provider-before-refusing-plan-task")
def _calls_provider_before_refusing_plan_task() -> None:
    # A Plan task's prompt goes to the model first; the refusal comes afterwards.
    async def ask_model(tasks: Tasks, row: dict[str, Any]) -> None:
        config = ProviderConfig(row["provider_base_url"], row["model"], None)

        async def ignore(_text: str) -> None:
            return None

        with contextlib.suppress(Exception):
            await complete(
                tasks.host.http,
                config,
                [{"role": "user", "content": row["prompt"]}],
                turns.offered_tools("plan"),
                ignore,
            )

    _before_plan_refusal(ask_model)


@variant("writes-artifact-for-plan-task")
def _writes_artifact_for_plan_task() -> None:
    # A Plan task gets a plan artifact written before it is refused.
    async def write(tasks: Tasks, row: dict[str, Any]) -> None:
        if row["workspace_root"] is not None:
            content = artifacts.encode_markdown(f"# {row['name']}\n\n{row['prompt']}\n")
            await asyncio.to_thread(
                artifacts.write_artifact, row["workspace_root"], content, tasks.host.faults.take
            )

    _before_plan_refusal(write)


@variant("kills-only-direct-child")
def _kills_only_direct_child() -> None:
    # Timeout and cancellation end the shell process, not its process group, and the host
    # then stops listening to the command's output, as a host that waits for the shell
    # alone does. The command is reported ended; what it started in the background lives on
    # (until the harness reaps the host's leftovers).
    def kill_shell(process: asyncio.subprocess.Process) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(process.pid, signal.SIGKILL)
        transport = process._transport
        for fd in (1, 2):
            pipe = transport.get_pipe_transport(fd)
            if pipe is not None:
                pipe.close()

    commands._kill_group = kill_shell


@variant("ignores-default-shell")
def _ignores_default_shell() -> None:
    # Commands are announced with the selected shell's id but always run in sh.
    sh = shells.find("sh")
    assert sh is not None, "this variant needs sh"
    original = turns.run_command

    async def run_command(*, shell: shells.Shell, **kwargs: Any) -> commands.CommandResult:
        return await original(shell=replace(shell, path=sh.path), **kwargs)

    turns.run_command = run_command


CASES = [
    BrokenCase(
        "replays-queued-execution",
        "restart_interruption",
        "halfstreamed_answer and restarts",
        "R4.12",
        "the restarted host started turns of its own",
    ),
    # Storage is read right after initialize, the first answer: a pending approval, a
    # queued execution and an active turn must all be interrupted by then.
    BrokenCase(
        "answers-before-recovery",
        "restart_interruption",
        "pending_approval_is_interrupted and restarts",
        "R4.10",
        "storage still showed the approval pending",
        label="approval",
    ),
    BrokenCase(
        "answers-before-recovery",
        "restart_interruption",
        "still_in_the_queue and restarts",
        "R4.10",
        "storage still showed the execution queued",
        label="execution",
    ),
    BrokenCase(
        "answers-before-recovery",
        "restart_interruption",
        "plan_turn_in_progress and restarts",
        "R4.11",
        "turns were still active when the restarted host first answered",
        label="turn",
    ),
    BrokenCase(
        "interrupted-execution-back-to-plan",
        "restart_interruption",
        "still_in_the_queue and restarts",
        "R4.14",
        "the session is in plan mode",
    ),
    BrokenCase(
        "stores-boot-epoch",
        "restart_interruption",
        "stored_schema_is_the_published",
        "R4.1",
        "extra ['host_boots']",
    ),
    BrokenCase(
        "stores-boot-epoch-setting",
        "restart_interruption",
        "stored_schema_is_the_published",
        "R4.1",
        "settings hold ['boot_epoch']",
    ),
    BrokenCase(
        "migrates-outside-transaction",
        "migration",
        "conflicting_object",
        "R7.8",
        "the database file changed",
    ),
    BrokenCase(
        "writes-version-first",
        "migration",
        "conflicting_object",
        "R7.9",
        "PRAGMA user_version is 10",
    ),
    BrokenCase(
        "calls-provider-before-refusing-plan-task",
        "scheduled_plan",
        "running_a_plan_task_now",
        "R6.2",
        "the host called the model 1 time(s)",
    ),
    BrokenCase(
        "writes-artifact-for-plan-task",
        "scheduled_plan",
        "running_a_plan_task_now",
        "R6.2",
        "artifacts were written",
    ),
    BrokenCase(
        "ignores-default-shell",
        "shell",
        "command_runs_in_the_default_shell",
        "R7.6",
        "the process ran /",
    ),
    # The command is reported ended while its background process lives on; the check
    # waits for that process to end, in vain.
    BrokenCase(
        "kills-only-direct-child",
        "shell",
        "cancelling_the_turn_ends_the_command",
        "C5",
        "is still alive after",
        slow=True,
        label="on-cancel",
    ),
    BrokenCase(
        "kills-only-direct-child",
        "shell",
        "command_that_times_out",
        "C5",
        "is still alive after",
        slow=True,
        label="on-timeout",
    ),
]
