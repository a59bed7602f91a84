"""Broken hosts: lifecycle."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import heapq
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiosqlite

from hosts.registry import BrokenCase, patch, rewrite_notifications, variant
from reference_host import (
    approvals,
    artifacts,
    commands,
    datadir,
    migration,
    reaper,
    server,
    shells,
    turns,
)
from reference_host import clock as clock_module
from reference_host import host as host_module
from reference_host import storage as storage_module
from reference_host import tasks as tasks_module
from reference_host.errors import HostError
from reference_host.host import Host
from reference_host.provider_client import AssistantReply, ProviderConfig, complete
from reference_host.rpc import Dispatcher
from reference_host.storage import ApprovalRow, SessionRow, Storage
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


@variant("recovery-ends-turns-as-failed")
def _recovery_ends_turns_as_failed() -> None:
    # Startup recovery ends the turns a previous process left active as failed, not
    # interrupted.
    original_recover = Storage.recover

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self.transaction() as conn:
            await conn.execute(
                "UPDATE turns SET state = 'failed', ended_at = ? WHERE state = 'active'", (now,)
            )
        return await original_recover(self, now)

    patch(Storage, "recover", recover)


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


async def _recover_with(
    storage: Storage,
    now: int,
    approvals_where: str,
    executions_where: str,
    turns: bool = True,
    status_code: str | None = "TURN_INTERRUPTED",
) -> tuple[int, int, int]:
    """The startup recovery with other row selections (the reference's, mistaken)."""
    async with storage.transaction() as conn:
        a = await conn.execute(
            "UPDATE plan_approvals SET status = 'interrupted', status_code = ?, decided_at = ? "
            f"WHERE {approvals_where}",
            (status_code, now),
        )
        e = await conn.execute(
            f"UPDATE plan_approvals SET execution_state = 'interrupted' WHERE {executions_where}"
        )
        t_count = 0
        if turns:
            t = await conn.execute(
                "UPDATE turns SET state = 'interrupted', ended_at = ? WHERE state = 'active'",
                (now,),
            )
            t_count = t.rowcount
    return a.rowcount, e.rowcount, t_count


def _recovery(**choices: Any) -> None:
    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        settings = {
            "approvals_where": "status = 'pending'",
            "executions_where": "execution_state IN ('queued', 'running')",
            **choices,
        }
        return await _recover_with(self, now, **settings)

    patch(Storage, "recover", recover)


@variant("recovery-skips-queued")
def _recovery_skips_queued() -> None:
    # Only running executions are interrupted: one still in the queue is left queued.
    _recovery(executions_where="execution_state = 'running'")


@variant("recovery-interrupts-completed")
def _recovery_interrupts_completed() -> None:
    # Every execution that is not already interrupted is interrupted, finished ones too.
    _recovery(executions_where="execution_state IS NOT NULL AND execution_state <> 'interrupted'")


@variant("recovery-interrupts-decided")
def _recovery_interrupts_decided() -> None:
    # Every approval that was not approved is interrupted: rejected and expired ones too.
    _recovery(approvals_where="status <> 'approved' AND status <> 'interrupted'")


@variant("recovery-without-status-code")
def _recovery_without_status_code() -> None:
    # Interrupted approvals get no status code.
    _recovery(status_code=None)


@variant("recovery-leaves-turns-active")
def _recovery_leaves_turns_active() -> None:
    # Approvals and executions are interrupted, the turns of the old process are not.
    _recovery(turns=False)


@variant("recovery-reinterrupts")
def _recovery_reinterrupts() -> None:
    # Approvals interrupted by an earlier restart are interrupted again, with a new time.
    _recovery(approvals_where="status IN ('pending', 'interrupted')")


@variant("recovery-skips-running")
def _recovery_skips_running() -> None:
    # Only executions still in the queue are interrupted: a running one is left running.
    _recovery(executions_where="execution_state = 'queued'")


@variant("interrupted-approval-still-blocks")
def _interrupted_approval_still_blocks() -> None:
    # After a restart the host rebuilds what each session is busy with from storage, and
    # takes an interrupted approval for one still pending: the session refuses new work.
    original = Tasks.schedule_all

    async def schedule_all(self: Tasks) -> None:
        await original(self)
        async with self.host.storage._conn.execute(
            "SELECT session_id, id FROM plan_approvals WHERE status = 'interrupted' "
            "AND legacy_proposal_json IS NULL"
        ) as cursor:
            for session_id, approval_id in await cursor.fetchall():
                self.host.set_activity(session_id, pending_approval_id=approval_id)

    patch(Tasks, "schedule_all", schedule_all)


@variant("interrupted-plan-session-to-agent")
def _interrupted_plan_session_to_agent() -> None:
    # Recovery puts a session whose pending plan it interrupted into Agent mode.
    original = Storage.recover

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self._conn.execute(
            "SELECT DISTINCT session_id FROM plan_approvals WHERE status = 'pending'"
        ) as cursor:
            sessions = [row[0] for row in await cursor.fetchall()]
        counts = await original(self, now)
        async with self.transaction() as conn:
            for session in sessions:
                await conn.execute("UPDATE sessions SET mode = 'agent' WHERE id = ?", (session,))
        return counts

    patch(Storage, "recover", recover)


@variant("interrupted-execution-keeps-session-busy")
def _interrupted_execution_keeps_session_busy() -> None:
    # After a restart the host rebuilds what each session is busy with from storage, and
    # counts an interrupted execution as still active: the session refuses new prompts.
    original = Tasks.schedule_all

    async def schedule_all(self: Tasks) -> None:
        await original(self)
        async with self.host.storage._conn.execute(
            "SELECT session_id, execution_id FROM plan_approvals "
            "WHERE execution_state = 'interrupted'"
        ) as cursor:
            for session_id, execution_id in await cursor.fetchall():
                self.host.set_activity(session_id, active_execution_id=execution_id)

    patch(Tasks, "schedule_all", schedule_all)


@variant("interrupted-approval-decidable")
def _interrupted_approval_decidable() -> None:
    # An approval interrupted by a restart can still be approved or rejected afterwards.
    original = approvals.ensure_decidable

    def ensure(approval: Any, now_ms: int) -> None:
        if approval.status != "interrupted":
            original(approval, now_ms)

    patch(approvals, "ensure_decidable", ensure)


@variant("resumes-interrupted-commands")
def _resumes_interrupted_commands() -> None:
    # At startup the host runs again the Bash calls that the previous process's turns
    # left without a result (quietly, before it serves).
    original = Storage.recover

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self._conn.execute(
            "SELECT t.content, s.workspace_root FROM transcript t "
            "JOIN turns u ON u.id = t.turn_id JOIN sessions s ON s.id = t.session_id "
            "WHERE u.state = 'active' AND t.role = 'assistant' ORDER BY t.id"
        ) as cursor:
            rows = await cursor.fetchall()
        for content, root in rows:
            for call in json.loads(content).get("tool_calls") or []:
                if call["function"]["name"] == "Bash" and root:
                    command = json.loads(call["function"]["arguments"])["command"]
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        subprocess.run(  # noqa: ASYNC221 - before serving, on purpose
                            ["sh", "-c", command],
                            cwd=root,
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                            timeout=0.5,
                            check=False,
                        )
        return await original(self, now)

    patch(Storage, "recover", recover)


@variant("stores-instance-id")
def _stores_instance_id() -> None:
    # Each process records an instance id of its own in the published settings table.
    async def record(storage: Storage) -> None:
        await storage.set_setting("instance", uuid.uuid4().hex)

    _open_then(record)


@variant("host-version-carries-boot")
def _host_version_carries_boot() -> None:
    # The process's boot id is appended to the version the host announces.
    patch(host_module, "HOST_VERSION", f"{host_module.HOST_VERSION}+boot.{uuid.uuid4().hex[:8]}")


@variant("question-stored-as-title")
def _question_stored_as_title() -> None:
    # The approval row's question column receives the title.
    original = Storage.insert_approval

    async def insert(self: Storage, row: ApprovalRow) -> None:
        await original(self, replace(row, question=row.title))

    patch(Storage, "insert_approval", insert)


@variant("execution-state-kept-apart")
def _execution_state_kept_apart() -> None:
    # The end of an execution is kept in memory only: the row still says running.
    original = Storage.write_approval

    async def write(conn: aiosqlite.Connection, row: ApprovalRow) -> None:
        if row.execution_state == "completed":
            row = replace(row, execution_state="running")
        await original(conn, row)

    patch(Storage, "write_approval", staticmethod(write))


@variant("schema-without-turn-index")
def _schema_without_turn_index() -> None:
    # The new database lacks the partial unique index of one active turn per session.
    published = storage_module.v10_ddl
    patch(
        storage_module,
        "v10_ddl",
        lambda: published().replace(
            "CREATE UNIQUE INDEX turns_one_active ON turns (session_id) WHERE state = 'active';",
            "",
        ),
    )


class _NoLock:
    """fcntl as a host that never locks its data directory sees it."""

    LOCK_EX = fcntl.LOCK_EX
    LOCK_NB = fcntl.LOCK_NB

    @staticmethod
    def flock(_fd: int, _operation: int) -> None:
        return None


@variant("no-data-dir-lock")
def _no_data_dir_lock() -> None:
    # Nothing stops a second host on the same data directory.
    patch(datadir, "fcntl", _NoLock)


@variant("recovers-before-locking")
def _recovers_before_locking() -> None:
    # The startup recovery runs before the host claims the data directory: a second host
    # interrupts the first one's work and only then notices the directory is in use.
    original = server.claim

    def claim(data_dir: Path) -> datadir.DataDirLock:
        db = data_dir / datadir.DB_FILE
        if db.is_file():
            with contextlib.closing(sqlite3.connect(db)) as conn, conn:
                conn.execute(
                    "UPDATE plan_approvals SET status = 'interrupted', "
                    "status_code = 'TURN_INTERRUPTED' WHERE status = 'pending'"
                )
        return original(data_dir)

    patch(server, "claim", claim)


@variant("in-use-reported-as-unavailable")
def _in_use_reported_as_unavailable() -> None:
    # A data directory held by another host is reported as unusable storage.
    original = server.claim

    def claim(data_dir: Path) -> datadir.DataDirLock:
        try:
            return original(data_dir)
        except HostError as error:
            if error.code != "DATA_DIR_IN_USE":
                raise
            raise HostError("STORAGE_UNAVAILABLE", "the data directory cannot be used") from error

    patch(server, "claim", claim)


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

    patch(storage_module, "migrate_v8_to_v10", migrate)


@variant("writes-version-first")
def _writes_version_first() -> None:
    # user_version = 10 is committed before the transaction that migrates the data.
    original = storage_module.migrate_v8_to_v10

    async def migrate(conn: aiosqlite.Connection, v10_statements: list[str]) -> None:
        await conn.execute(f"PRAGMA user_version = {migration.V10}")
        await original(conn, v10_statements)

    patch(storage_module, "migrate_v8_to_v10", migrate)


def _extra_migration_steps(*steps: str, drop: str | None = None) -> None:
    """The migration with ``steps`` added before its last statement (and ``drop``ped)."""
    original = migration.migration_statements

    def statements(v10_statements: list[str]) -> list[str]:
        found = [s for s in original(v10_statements) if drop is None or drop not in s]
        return [*found[:-1], *steps, found[-1]]

    patch(migration, "migration_statements", statements)


@variant("migration-renumbers-transcript")
def _migration_renumbers_transcript() -> None:
    # The transcript is copied into the new database in session order, and SQLite numbers
    # the copied rows afresh.
    _extra_migration_steps(
        "CREATE TEMP TABLE transcript_copy AS SELECT session_id, turn_id, role, content, "
        "created_at FROM transcript ORDER BY session_id, id",
        "DELETE FROM transcript",
        "INSERT INTO transcript (session_id, turn_id, role, content, created_at) "
        "SELECT * FROM transcript_copy",
        "DROP TABLE transcript_copy",
    )


@variant("migration-resets-settings")
def _migration_resets_settings() -> None:
    # Settings of the old version are dropped on upgrade.
    _extra_migration_steps("DELETE FROM settings")


@variant("migration-forgets-an-index")
def _migration_forgets_an_index() -> None:
    # The migration does not create the index of task runs that a new database has.
    _extra_migration_steps(drop="scheduled_task_runs_by_task")


@variant("migrates-any-older-version")
def _migrates_any_older_version() -> None:
    # Every version below 10 is taken for v8 and migrated.
    original = Storage._check_version
    original_prepare = Storage._prepare_schema

    async def check(self: Storage) -> None:
        if 0 < await self.user_version() < migration.V10:
            return
        await original(self)

    async def prepare(self: Storage) -> None:
        version = await self.user_version()
        if 0 < version < migration.V10 and version != migration.V8:
            await self._conn.execute(f"PRAGMA user_version = {migration.V8}")
        await original_prepare(self)

    patch(Storage, "_check_version", check)
    patch(Storage, "_prepare_schema", prepare)


@variant("adopts-a-database-without-version")
def _adopts_a_database_without_version() -> None:
    # Version 0 is taken for a new database even when the file already has tables: another
    # program's database gets the missing v10 tables added beside its own.
    original = Storage._check_version
    original_prepare = Storage._prepare_schema

    async def check(self: Storage) -> None:
        if await self.user_version() == 0:
            return
        await original(self)

    async def prepare(self: Storage) -> None:
        if await self.user_version() == 0 and not await self._is_empty():
            ddl = storage_module.v10_ddl()
            ddl = ddl.replace("CREATE TABLE ", "CREATE TABLE IF NOT EXISTS ")
            ddl = ddl.replace("CREATE INDEX ", "CREATE INDEX IF NOT EXISTS ")
            ddl = ddl.replace("CREATE UNIQUE INDEX ", "CREATE UNIQUE INDEX IF NOT EXISTS ")
            await self._conn.executescript(ddl)
            return
        await original_prepare(self)

    patch(Storage, "_check_version", check)
    patch(Storage, "_prepare_schema", prepare)


@variant("data-dir-path-unescaped-in-uri")
def _data_dir_path_unescaped_in_uri() -> None:
    # The database is opened by a URI built from the raw path: "%41" in a folder's name
    # reads as "A", so the database lands in (or fails to open in) another folder.
    def file_uri(path: Path) -> str:
        quoted = str(path).replace("?", "%3f").replace("#", "%23")
        return f"file:{quoted}?nofollow=1"

    patch(storage_module, "_file_uri", file_uri)


@variant("opens-newer-schema")
def _opens_newer_schema() -> None:
    # A database of a newer version is opened as if it were v10.
    original = Storage._check_version
    original_prepare = Storage._prepare_schema

    async def check(self: Storage) -> None:
        if await self.user_version() > migration.V10:
            return
        await original(self)

    async def prepare(self: Storage) -> None:
        if await self.user_version() > migration.V10:
            return
        await original_prepare(self)

    patch(Storage, "_check_version", check)
    patch(Storage, "_prepare_schema", prepare)


@variant("legacy-pending-rejected")
def _legacy_pending_rejected() -> None:
    # A v8 approval still pending is taken for rejected (it was never approved).
    patch(
        migration,
        "_COPY_LEGACY_APPROVALS",
        migration._COPY_LEGACY_APPROVALS.replace(
            "WHEN 'pending' THEN 'interrupted'", "WHEN 'pending' THEN 'rejected'"
        ),
    )


@variant("legacy-title-not-read")
def _legacy_title_not_read() -> None:
    # The v8 proposal is kept, but its title is not read: every legacy title is empty.
    text = migration._COPY_LEGACY_APPROVALS
    title = (
        "CASE WHEN json_valid(proposal_json)\n"
        "       THEN coalesce(CAST(json_extract(proposal_json, '$.title') AS TEXT), '') "
        "ELSE '' END"
    )
    assert title in text, "the migration reads the title differently now"
    patch(migration, "_COPY_LEGACY_APPROVALS", text.replace(title, "''"))


@variant("legacy-listed-with-placeholders")
def _legacy_listed_with_placeholders() -> None:
    # A legacy approval is listed with an empty turn id and an empty artifact.
    original = approvals.approval_wire

    def wire(row: ApprovalRow) -> dict[str, Any]:
        shown = original(row)
        if row.turn_id is None:
            shown["turnId"] = ""
            shown["artifact"] = {"path": "", "sha256": "", "byteSize": 0}
        return shown

    patch(approvals, "approval_wire", wire)
    patch(host_module, "approval_wire", wire)


@variant("follows-database-link")
def _follows_database_link() -> None:
    # A symlinked host.db is followed: the host opens the database it points to.
    original = datadir._check_files

    def check(data_dir: Path, dir_fd: int) -> None:
        db = data_dir / datadir.DB_FILE
        if db.is_symlink():
            return
        original(data_dir, dir_fd)

    patch(datadir, "_check_files", check)
    patch(storage_module, "_file_uri", lambda path: f"file:{path}")


@variant("refuses-on-stderr-only")
def _refuses_on_stderr_only() -> None:
    # A start-up failure is logged on stderr; stdout stays silent.
    def refuse(error: HostError, stdout: Any) -> int:
        print(f"not serving: {error.code}: {error.message}", file=sys.stderr)
        return server.EXIT_STORAGE

    patch(server, "_refuse", refuse)


@variant("refuses-with-status-zero")
def _refuses_with_status_zero() -> None:
    # The refusal line is written, but the host exits with status 0.
    original = server._refuse

    def refuse(error: HostError, stdout: Any) -> int:
        original(error, stdout)
        return 0

    patch(server, "_refuse", refuse)


@variant("leaves-a-lock-file")
def _leaves_a_lock_file() -> None:
    # The host drops a lock file into the data directory before it checks anything, and
    # leaves it there when it refuses to start.
    original = server.claim

    def claim(data_dir: Path) -> datadir.DataDirLock:
        if data_dir.is_dir():
            (data_dir / "host.lock").write_text(f"{os.getpid()}\n", encoding="utf-8")
        return original(data_dir)

    patch(server, "claim", claim)


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


@variant("task-mode-change-ignored")
def _task_mode_change_ignored() -> None:
    # task/update answers with the new mode but keeps the mode the task was created with.
    original = Storage.update_task

    async def update(self: Storage, task_id: str, changes: dict[str, Any]) -> None:
        await original(self, task_id, {k: v for k, v in changes.items() if k != "mode"})

    patch(Storage, "update_task", update)


@variant("plan-task-refused-as-permission-unavailable")
def _plan_task_refused_as_permission_unavailable() -> None:
    # A Plan task is refused with the code of an unattended permission question.
    patch(tasks_module, "PLAN_REFUSAL", "PERMISSION_UNAVAILABLE")


@variant("due-plan-task-runs")
def _due_plan_task_runs() -> None:
    # A task whose time comes runs unattended whatever its mode: only task/run checks it.
    original = Tasks.run

    async def run(self: Tasks, row: dict[str, Any]) -> dict[str, Any]:
        return await original(self, {**row, "mode": "agent"})

    async def fire(self: Tasks, task_id: str) -> None:
        self._timers.pop(task_id, None)
        row = await self.host.storage.get_task(task_id)
        if row is None or not row["enabled"]:
            return
        await self.host.storage.update_task(task_id, {"run_at": None})
        with contextlib.suppress(HostError):
            await run(self, row)

    patch(Tasks, "_fire", fire)


@variant("records-turn-before-refusing")
def _records_turn_before_refusing() -> None:
    # A Plan task's run is recorded as a turn that fails, then refused.
    async def record(tasks: Tasks, row: dict[str, Any]) -> None:
        storage, now = tasks.host.storage, tasks.host.clock.now_ms()
        session = SessionRow(
            tasks.host.new_id("ses"), row["workspace_root"], "plan", row["permission_mode"],
            row["provider_base_url"], row["model"], None, now, now,
        )  # fmt: skip
        await storage.insert_session(session)
        turn_id = tasks.host.new_id("turn")
        await storage.start_turn(turn_id, session.id, "scheduled", now)
        await storage.end_turn(turn_id, "failed", now)

    _before_plan_refusal(record)


@variant("refused-task-switched-to-agent")
def _refused_task_switched_to_agent() -> None:
    # After refusing a Plan task the host switches it to Agent, "so that it can run".
    original = Tasks.run

    async def run(self: Tasks, row: dict[str, Any]) -> dict[str, Any]:
        try:
            return await original(self, row)
        except HostError as error:
            if error.code == tasks_module.PLAN_REFUSAL:
                await self.host.storage.update_task(row["id"], {"mode": "agent"})
            raise

    patch(Tasks, "run", run)


def _unattended_refusal(code: str | None) -> None:
    original = turns.TurnRunner._require_permission

    async def require(
        self: turns.TurnRunner, session: Any, turn_id: str, call: Any, args: Any, unattended: bool
    ) -> None:
        if unattended:
            if code is None:
                return  # nobody can answer: allowed
            raise HostError(code, f"{call.name} needs a permission answer")
        await original(self, session, turn_id, call, args, unattended)

    patch(turns.TurnRunner, "_require_permission", require)


@variant("unattended-refused-as-denied")
def _unattended_refused_as_denied() -> None:
    # An unattended call that needs permission is reported as denied by the user.
    _unattended_refusal("PERMISSION_DENIED")


@variant("unattended-allows-everything")
def _unattended_allows_everything() -> None:
    # With nobody to ask, the unattended run allows the call.
    _unattended_refusal(None)


@variant("unattended-refusal-ends-run")
def _unattended_refusal_ends_run() -> None:
    # An unattended run stops at its first call refused for want of a permission answer:
    # the refusal is reported, the model is not asked again.
    original = turns.TurnRunner._run_batch

    async def run_batch(
        self: turns.TurnRunner, session: Any, turn_id: str, calls: Any, unattended: bool
    ) -> list[turns.CallOutcome]:
        outcomes = await original(self, session, turn_id, calls, unattended)
        if any(o.error is not None and o.error.code == "PERMISSION_UNAVAILABLE" for o in outcomes):
            return [replace(o, ends_turn=True) for o in outcomes]
        return outcomes

    patch(turns.TurnRunner, "_run_batch", run_batch)


# -- a run cut short by a restart (P28) ------------------------------------------------------

_RESET_RUNS = (
    "UPDATE scheduled_task_runs SET outcome = 'running', error_code = NULL, "
    "error_message = NULL WHERE error_code = 'TURN_INTERRUPTED'"
)


@variant("scheduled-run-left-running")
def _scheduled_run_left_running() -> None:
    # Start-up recovery ends the turns but forgets the runs they belonged to: a run cut
    # short stays "running" for ever.
    original = Storage.recover

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        counts = await original(self, now)
        async with self.transaction() as conn:
            await conn.execute(_RESET_RUNS)
        return counts

    patch(Storage, "recover", recover)


@variant("scheduled-run-resumed-after-restart")
def _scheduled_run_resumed_after_restart() -> None:
    # The host picks up where it left off: every run cut short by the restart is run
    # again as soon as the host is back.
    original_recover = Storage.recover
    original_schedule = Tasks.schedule_all
    cut_short: list[str] = []

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self._conn.execute(
            "SELECT task_id FROM scheduled_task_runs WHERE outcome = 'running'"
        ) as cursor:
            cut_short.extend(row[0] for row in await cursor.fetchall())
        return await original_recover(self, now)

    async def schedule_all(self: Tasks) -> None:
        await original_schedule(self)
        for task_id in cut_short:
            row = await self.host.storage.get_task(task_id)
            if row is not None:
                with contextlib.suppress(HostError):
                    await self.run(row)
        cut_short.clear()

    patch(Storage, "recover", recover)
    patch(Tasks, "schedule_all", schedule_all)


# -- a task reported and kept as given (P29) ---------------------------------------------


@variant("task-needs-a-project")
def _task_needs_a_project() -> None:
    # Every scheduled task must name a project, although the schema lets workspaceRoot be null.
    original = Tasks.create

    async def create(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("workspaceRoot") is None:
            raise HostError("WORKSPACE_REQUIRED", "a scheduled task needs a project")
        return await original(self, params)

    patch(Tasks, "create", create)


@variant("task-provider-not-reported")
def _task_provider_not_reported() -> None:
    # The task keeps its provider, but every answer about it shows none.
    original = Tasks.wire

    async def wire(self: Tasks, row: dict[str, Any]) -> dict[str, Any]:
        return {**await original(self, row), "provider": None}

    patch(Tasks, "wire", wire)


@variant("task-update-forgets-enabled")
def _task_update_forgets_enabled() -> None:
    # task/update answers with the new enabled flag but never stores it (nor disarms).
    original = Tasks.update

    async def update(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        if "enabled" not in params:
            return await original(self, params)
        answer = await original(self, {k: v for k, v in params.items() if k != "enabled"})
        return {"task": {**answer["task"], "enabled": params["enabled"]}}

    patch(Tasks, "update", update)


@variant("switched-off-task-still-runs")
def _switched_off_task_still_runs() -> None:
    # A task switched off keeps the timer it had, and a timer runs its task without
    # looking whether it is still switched on.
    original = Tasks._arm

    def arm(self: Tasks, task_id: str, run_at: int | None) -> None:
        if run_at is None and task_id in self._timers:
            return  # "switching off" leaves the armed timer alone
        original(self, task_id, run_at)

    async def fire(self: Tasks, task_id: str) -> None:
        self._timers.pop(task_id, None)
        row = await self.host.storage.get_task(task_id)
        if row is None:
            return
        await self.host.storage.update_task(task_id, {"run_at": None})
        with contextlib.suppress(HostError):
            await self.run(row)

    patch(Tasks, "_arm", arm)
    patch(Tasks, "_fire", fire)


# -- a scheduled task without its id (P5) -------------------------------------------------


@variant("task-answers-without-its-id")
def _task_answers_without_its_id() -> None:
    # Every ScheduledTask the host answers spells its id key in capitals: the steps that
    # need the id cannot go on, and the report must still blame the host, not the harness.
    original = Tasks.wire

    async def wire(self: Tasks, row: dict[str, Any]) -> dict[str, Any]:
        task = await original(self, row)
        task["TASKID"] = task.pop("taskId")
        return task

    patch(Tasks, "wire", wire)


# -- deleting a task (P26) ------------------------------------------------------------------


@variant("task-delete-only-disables")
def _task_delete_only_disables() -> None:
    # task/delete switches the task off and keeps it: it is still listed.
    async def delete(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require(params["taskId"])
        await self.update({"taskId": row["id"], "enabled": False})
        return {}

    patch(Tasks, "delete", delete)


@variant("task-delete-keeps-the-timer")
def _task_delete_keeps_the_timer() -> None:
    # task/delete hides the task from the protocol but leaves its row and its timer.
    deleted: set[str] = set()
    original_require = Tasks.require
    original_list = Tasks.list

    async def delete(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require(params["taskId"])
        deleted.add(row["id"])
        return {}

    async def require(self: Tasks, task_id: str) -> dict[str, Any]:
        if task_id in deleted:
            raise HostError("TASK_NOT_FOUND", f"no scheduled task {task_id!r}")
        return await original_require(self, task_id)

    async def list_tasks(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        listed = await original_list(self, params)
        return {"tasks": [t for t in listed["tasks"] if t["taskId"] not in deleted]}

    patch(Tasks, "delete", delete)
    patch(Tasks, "require", require)
    patch(Tasks, "list", list_tasks)


@variant("unknown-task-is-invalid-params")
def _unknown_task_is_invalid_params() -> None:
    # A task id that names no task is treated as a malformed parameter.
    original = Tasks.require

    async def require(self: Tasks, task_id: str) -> dict[str, Any]:
        try:
            return await original(self, task_id)
        except HostError as error:
            raise HostError("INVALID_PARAMS", error.message) from error

    patch(Tasks, "require", require)


# -- no provider, a failing provider (P24, P25) ---------------------------------------------


@variant("no-provider-is-invalid-params")
def _no_provider_is_invalid_params() -> None:
    # A prompt to a session without a provider is refused as a bad request.
    original = Host.session_prompt

    async def session_prompt(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        try:
            return await original(self, params)
        except HostError as error:
            if error.code != "PROVIDER_NOT_CONFIGURED":
                raise
            raise HostError("INVALID_PARAMS", error.message) from error

    patch(Host, "session_prompt", session_prompt)


@variant("no-provider-leaves-the-session-busy")
def _no_provider_leaves_the_session_busy() -> None:
    # The refused prompt has already claimed the session, and nothing releases it.
    original = Host.session_prompt

    async def session_prompt(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        try:
            return await original(self, params)
        except HostError as error:
            if error.code == "PROVIDER_NOT_CONFIGURED":
                self.set_activity(params["sessionId"], active_turn_id="turn-without-provider")
            raise

    patch(Host, "session_prompt", session_prompt)


@variant("provider-error-reported-as-internal")
def _provider_error_reported_as_internal() -> None:
    # A provider failure escapes as the host's own failure.
    original = turns.TurnRunner._ask_model

    async def ask_model(
        self: turns.TurnRunner, session: Any, turn_id: str, messages: list[Any]
    ) -> Any:
        try:
            return await original(self, session, turn_id, messages)
        except HostError as error:
            if error.code != "PROVIDER_ERROR":
                raise
            raise HostError("INTERNAL_ERROR", "the turn failed in the host") from error

    patch(turns.TurnRunner, "_ask_model", ask_model)


@variant("provider-error-ends-turn-completed")
def _provider_error_ends_turn_completed() -> None:
    # A provider failure is taken as an empty answer: the turn completes.
    original = turns.TurnRunner._ask_model

    async def ask_model(
        self: turns.TurnRunner, session: Any, turn_id: str, messages: list[Any]
    ) -> Any:
        try:
            return await original(self, session, turn_id, messages)
        except HostError as error:
            if error.code != "PROVIDER_ERROR":
                raise
            return AssistantReply("", (), "stop")

    patch(turns.TurnRunner, "_ask_model", ask_model)


@variant("provider-error-keeps-the-session-busy")
def _provider_error_keeps_the_session_busy() -> None:
    # The turn a provider failure ended is announced as failed, but the session goes on
    # naming it as its active turn.
    failed: set[str] = set()
    original_loop = turns.TurnRunner._loop
    original_set = Host.set_activity

    async def loop(self: turns.TurnRunner, session_id: str, turn_id: str, *args: Any) -> None:
        try:
            await original_loop(self, session_id, turn_id, *args)
        except HostError as error:
            if error.code == "PROVIDER_ERROR":
                failed.add(turn_id)
            raise

    def set_activity(self: Host, session_id: str, **changes: str | None) -> None:
        releasing = "active_turn_id" in changes and changes["active_turn_id"] is None
        if releasing and self.activity_of(session_id).active_turn_id in failed:
            changes.pop("active_turn_id")
        original_set(self, session_id, **changes)

    patch(turns.TurnRunner, "_loop", loop)
    patch(Host, "set_activity", set_activity)


@variant("kills-only-direct-child")
def _kills_only_direct_child() -> None:
    # Timeout and cancellation end the shell process, not its process group nor what it
    # started: what runs in the background lives on.
    def kill_shell(process: asyncio.subprocess.Process) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(process.pid, signal.SIGKILL)

    patch(commands, "_kill_group", kill_shell)


@variant("leaves-processes-after-exit")
def _leaves_processes_after_exit() -> None:
    # Only a command that is still running is ended with everything it started: when its
    # shell exits by itself, what it left behind lives on.
    original = commands._kill_group

    def kill_group(process: asyncio.subprocess.Process) -> None:
        if process.returncode is None:
            original(process)

    patch(commands, "_kill_group", kill_group)


class _Polite:
    """The signal module as a host that only ever asks processes to stop sees it."""

    SIGKILL = signal.SIGTERM
    SIGTERM = signal.SIGTERM


@variant("stops-with-sigterm")
def _stops_with_sigterm() -> None:
    # Commands and what they started are ended with SIGTERM, which a process may ignore.
    patch(reaper, "signal", _Polite)
    patch(commands, "signal", _Polite)


def _wrap_command_notify(wrap: Callable[[Any], Any]) -> None:
    """Run commands with their notifications passed through ``wrap(notify)``."""
    original = turns.run_command

    async def run_command(*, notify: Any, **kwargs: Any) -> commands.CommandResult:
        return await original(notify=wrap(notify), **kwargs)

    patch(turns, "run_command", run_command)


@variant("exited-after-turn-ended")
def _exited_after_turn_ended() -> None:
    # The end of a command is announced from a background task, a moment later: after the
    # turn has ended.
    def wrap(notify: Any) -> Any:
        def send(method: str, params: dict[str, Any]) -> None:
            if method == "command/exited":
                asyncio.get_running_loop().call_later(0.3, notify, method, params)
            else:
                notify(method, params)

        return send

    _wrap_command_notify(wrap)


@variant("buffers-output-until-exit")
def _buffers_output_until_exit() -> None:
    # Output is collected and sent when the command has finished.
    def wrap(notify: Any) -> Any:
        held: list[tuple[str, dict[str, Any]]] = []

        def send(method: str, params: dict[str, Any]) -> None:
            if method == "command/output":
                held.append((method, params))
                return
            if method == "command/exited":
                for note in held:
                    notify(*note)
                held.clear()
            notify(method, params)

        return send

    _wrap_command_notify(wrap)


@variant("numbers-output-per-stream")
def _numbers_output_per_stream() -> None:
    # stdout and stderr chunks are numbered each from 0.
    def wrap(notify: Any) -> Any:
        counters: dict[str, int] = {}

        def send(method: str, params: dict[str, Any]) -> None:
            if method == "command/output":
                stream = params["stream"]
                params = {**params, "seq": counters.get(stream, 0)}
                counters[stream] = params["seq"] + 1
            notify(method, params)

        return send

    _wrap_command_notify(wrap)


@variant("drops-undecodable-bytes")
def _drops_undecodable_bytes() -> None:
    # Bytes that are not UTF-8 are dropped from the streamed text.
    def wrap(notify: Any) -> Any:
        def send(method: str, params: dict[str, Any]) -> None:
            if method == "command/output":
                params = {**params, "text": params["text"].replace("\ufffd", "")}
            notify(method, params)

        return send

    _wrap_command_notify(wrap)


@variant("chunks-too-large")
def _chunks_too_large() -> None:
    # Output is gathered into chunks of up to 64 Ki characters before it is streamed.
    def wrap(notify: Any) -> Any:
        pending: list[dict[str, Any]] = []
        seq = 0

        def flush() -> None:
            nonlocal seq
            if pending:
                text = "".join(p["text"] for p in pending)
                notify("command/output", {**pending[0], "seq": seq, "text": text})
                seq += 1
                pending.clear()

        def send(method: str, params: dict[str, Any]) -> None:
            if method == "command/output":
                if pending and pending[0]["stream"] != params["stream"]:
                    flush()
                pending.append(params)
                if sum(len(p["text"]) for p in pending) >= 65536:
                    flush()
                return
            flush()
            notify(method, params)

        return send

    _wrap_command_notify(wrap)


@variant("enforces-another-cap")
def _enforces_another_cap() -> None:
    # The cap the host enforces is four times the one it announces.
    patch(commands, "OUTPUT_CAP_BYTES", commands.OUTPUT_CAP_BYTES * 4)


@variant("cap-off-by-one")
def _cap_off_by_one() -> None:
    # Output that reaches the cap exactly is marked truncated.
    original = commands._Collector.keep

    def keep(self: Any, data: bytes) -> bytes:
        part: bytes = original(self, data)
        if len(self.kept) >= commands.OUTPUT_CAP_BYTES:
            self.truncated = True
        return part

    patch(commands._Collector, "keep", keep)


@variant("timeout-reported-ok")
def _timeout_reported_ok() -> None:
    # A command that timed out is reported to the model like any finished command.
    original = turns.TurnRunner._bash

    async def bash(self: Any, session: Any, turn_id: str, args: dict[str, Any]) -> Any:
        outcome = await original(self, session, turn_id, args)
        if outcome.error is not None and outcome.error.code == "COMMAND_TIMED_OUT":
            return turns.CallOutcome("ok", outcome.output)
        return outcome

    patch(turns.TurnRunner, "_bash", bash)


@variant("cancel-not-flagged")
def _cancel_not_flagged() -> None:
    # A command ended by a cancelled turn is reported as if it had been killed.
    def wrap(notify: Any) -> Any:
        def send(method: str, params: dict[str, Any]) -> None:
            if method == "command/exited":
                params = {**params, "cancelled": False}
            notify(method, params)

        return send

    _wrap_command_notify(wrap)


@variant("audit-without-exit-code")
def _audit_without_exit_code() -> None:
    # The audit records every command as having exited with code 0.
    original = turns._audit_row

    def audit_row(audit: dict[str, Any], result: Any, ended_at: int) -> dict[str, Any]:
        return {**original(audit, result, ended_at), "exit_code": 0}

    patch(turns, "_audit_row", audit_row)


@variant("audit-without-flags")
def _audit_without_flags() -> None:
    # The audit does not record whether a command timed out or was cancelled.
    original = turns._audit_row

    def audit_row(audit: dict[str, Any], result: Any, ended_at: int) -> dict[str, Any]:
        return {**original(audit, result, ended_at), "timed_out": 0, "cancelled": 0}

    patch(turns, "_audit_row", audit_row)


@variant("ignores-default-shell")
def _ignores_default_shell() -> None:
    # Commands are announced with the selected shell's id but always run in sh.
    sh = shells.find("sh")
    assert sh is not None, "this variant needs sh"
    original = turns.run_command

    async def run_command(*, shell: shells.Shell, **kwargs: Any) -> commands.CommandResult:
        return await original(shell=replace(shell, path=sh.path), **kwargs)

    patch(turns, "run_command", run_command)


@variant("ignores-session-shell")
def _ignores_session_shell() -> None:
    # Commands run in the default shell whatever the session chose.
    original = turns.TurnRunner._bash

    async def bash(self: Any, session: SessionRow, turn_id: str, args: dict[str, Any]) -> Any:
        return await original(self, replace(session, shell_id=None), turn_id, args)

    patch(turns.TurnRunner, "_bash", bash)


@variant("default-shell-in-memory")
def _default_shell_in_memory() -> None:
    # The default shell is kept in memory only, so a restart forgets it.
    chosen: dict[str, str] = {}

    async def set_default(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        shell = host_module._require_shell(params["shellId"])
        chosen["id"] = shell.shell_id
        return {"defaultShellId": shell.shell_id}

    async def default_shell_id(self: Host) -> str | None:
        fallback = shells.fallback_default()
        return chosen.get("id") or (fallback.shell_id if fallback else None)

    patch(Host, "shell_set_default", set_default)
    patch(Host, "default_shell_id", default_shell_id)


@variant("accepts-unknown-default-shell")
def _accepts_unknown_default_shell() -> None:
    # Any id is accepted as the default shell; commands fall back to sh.
    async def set_default(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        await self.storage.set_setting(host_module.DEFAULT_SHELL_KEY, params["shellId"])
        return {"defaultShellId": params["shellId"]}

    patch(Host, "shell_set_default", set_default)


@variant("shell-change-while-busy")
def _shell_change_while_busy() -> None:
    # A change of the session's shell alone is applied even while a turn runs.
    original = Host.session_configure

    async def configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        if set(params) == {"sessionId", "shellId"}:
            row = await self.require_session(params["sessionId"])
            updated = replace(row, shell_id=params["shellId"], updated_at=self.clock.now_ms())
            await self.storage.update_session(updated)
            return {"session": self.session_wire(updated)}
        return await original(self, params)

    patch(Host, "session_configure", configure)


@variant("no-default-shell-until-chosen")
def _no_default_shell_until_chosen() -> None:
    # shell/list names no default shell until the user has chosen one.
    async def shell_list(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "shells": [shell.to_wire() for shell in shells.catalog()],
            "defaultShellId": await self.storage.get_setting(host_module.DEFAULT_SHELL_KEY),
        }

    patch(Host, "shell_list", shell_list)


@variant("workspace-root-with-trailing-slash")
def _workspace_root_with_trailing_slash() -> None:
    # Sessions report their workspace root with a slash appended.
    original = Host.session_wire

    def session_wire(self: Host, row: Any) -> dict[str, Any]:
        wire = original(self, row)
        if wire["workspaceRoot"] is not None:
            wire["workspaceRoot"] = wire["workspaceRoot"].rstrip("/") + "/"
        return wire

    patch(Host, "session_wire", session_wire)


@variant("migration-tolerates-existing-tables")
def _migration_tolerates_existing_tables() -> None:
    # The migration creates each new v10 object only if it is not there yet, so a v8 file
    # that already holds one is migrated instead of refused.
    original = migration.migration_statements

    def statements(v10_statements: list[str]) -> list[str]:
        return [
            re.sub(
                r"^CREATE (UNIQUE )?(TABLE|INDEX) ",
                r"CREATE \1\2 IF NOT EXISTS ",
                statement,
                flags=re.IGNORECASE,
            )
            for statement in original(v10_statements)
        ]

    patch(migration, "migration_statements", statements)


@variant("no-turn-text")
def _no_turn_text() -> None:
    # The assistant's text is never announced in turn/text.
    rewrite_notifications(lambda method, params: None if method == "turn/text" else params)


@variant("settings-table-without-rowid")
def _settings_table_without_rowid() -> None:
    # A new database's settings table is a WITHOUT ROWID table; everything else as v10.sql.
    published = storage_module.v10_ddl

    def ddl() -> str:
        plain = "CREATE TABLE settings (\n  key TEXT PRIMARY KEY,\n  value TEXT NOT NULL\n);"
        assert plain in published(), "v10.sql no longer spells the settings table this way"
        return published().replace(plain, plain[:-1] + " WITHOUT ROWID;")

    patch(storage_module, "v10_ddl", ddl)


@variant("timers-fire-only-past-their-time")
def _timers_fire_only_past_their_time() -> None:
    # A timer fires only once the clock is past its time, not when it reaches it.
    async def fire_due(self: clock_module.Clock) -> None:
        while self._timers and self._timers[0].due_ms < self.now_ms():
            timer = heapq.heappop(self._timers)
            if not timer.cancelled:
                await timer.callback()
        self._schedule_wakeup()

    patch(clock_module.Clock, "fire_due", fire_due)


@variant("transcript-newest-first")
def _transcript_newest_first() -> None:
    # session/transcript lists a session's entries newest first instead of in id order.
    original = Host.session_transcript

    async def session_transcript(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        answer = await original(self, params)
        return {"entries": list(reversed(answer["entries"]))}

    patch(Host, "session_transcript", session_transcript)


@variant("lock-file-left-on-refusal")
def _lock_file_left_on_refusal() -> None:
    # Besides its lock on the directory, the host writes a lock file and never removes it,
    # so a start it refuses leaves the file behind.
    original_claim = server.claim

    def claim(data_dir: Path) -> Any:
        lock = original_claim(data_dir)
        (data_dir / "host.lock").write_text(str(os.getpid()), encoding="utf-8")
        return lock

    patch(server, "claim", claim)


@variant("signal-zero-on-normal-exit")
def _signal_zero_on_normal_exit() -> None:
    # command/exited reports signal 0, not null, for a command that exited on its own.
    def zero(method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "command/exited" and params["signal"] is None:
            return {**params, "signal": 0}
        return params

    rewrite_notifications(zero)


@variant("keeps-shell-when-cleared")
def _keeps_shell_when_cleared() -> None:
    # session/configure with shellId null is answered but leaves the session's own shell.
    original = Host.session_configure

    async def configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("shellId", "") is None:
            params = {k: v for k, v in params.items() if k != "shellId"}
            if set(params) == {"sessionId"}:
                row = await self.require_session(params["sessionId"])
                return {"session": self.session_wire(row)}
        return await original(self, params)

    patch(Host, "session_configure", configure)


@variant("cleared-shell-still-runs-commands")
def _cleared_shell_still_runs_commands() -> None:
    # The configure answer shows shellId null, but the session keeps its old shell: read
    # back, and for its commands.
    original = Host.session_configure

    async def configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("shellId", "") is None:
            row = await self.require_session(params["sessionId"])
            answer = await original(self, {**params, "shellId": row.shell_id})
            return {"session": {**answer["session"], "shellId": None}}
        return await original(self, params)

    patch(Host, "session_configure", configure)


@variant("prompt-stored-when-the-turn-ends")
def _prompt_stored_when_the_turn_ends() -> None:
    # The prompt is answered at once but written to the transcript only when its turn
    # ends: a stop while the model is still answering loses a prompt the host accepted.
    # Until then the host keeps it in memory and gives it to the model as usual, so the
    # only thing wrong is what a stop leaves in storage.
    pending: dict[str, tuple[str, dict[str, Any], int]] = {}
    original_start, original_end = Storage.start_turn, Storage.end_turn
    original_transcript = Storage.transcript

    async def start_turn(
        self: Storage, turn_id: str, session_id: str, kind: str, at: int, *rest: Any
    ) -> None:
        if rest and rest[0] is not None:
            pending[turn_id] = (session_id, rest[0], at)
        await original_start(self, turn_id, session_id, kind, at)

    async def end_turn(self: Storage, turn_id: str, state: str, at: int) -> None:
        if turn_id in pending:
            session_id, message, started = pending.pop(turn_id)
            await self.append_transcript(session_id, turn_id, "user", message, started)
        await original_end(self, turn_id, state, at)

    async def transcript(
        self: Storage, session_id: str
    ) -> list[tuple[int, str | None, str, Any, int]]:
        entries = await original_transcript(self, session_id)
        for turn_id, (owner, message, started) in pending.items():
            if owner != session_id:
                continue
            # the prompt goes before the turn's own stored messages, as it would be stored
            at = next((i for i, e in enumerate(entries) if e[1] == turn_id), len(entries))
            entries.insert(at, (-1, turn_id, "user", message, started))
        return entries

    patch(Storage, "start_turn", start_turn)
    patch(Storage, "end_turn", end_turn)
    patch(Storage, "transcript", transcript)


# P33: the host uses its standing conformance clock also in production, so no timer fires.
@variant("clock-stands-still-in-production")
def _clock_stands_still_in_production() -> None:
    patch(server, "SystemClock", lambda: clock_module.ManualClock(clock_module.wall_time_ms()))


# P3: the conformance controls answer also without --conformance.
@variant("conformance-controls-always-on")
def _conformance_controls_always_on() -> None:
    original = Host.handlers

    def handlers(self: Host) -> dict[str, Any]:
        table = original(self)
        table["conformance/clock/get"] = self.clock_get
        table["conformance/fault/arm"] = self.fault_arm
        return table

    patch(Host, "handlers", handlers)


@variant("completed-turn-keeps-last-error")
def _completed_turn_keeps_last_error() -> None:
    # R7.2: the host keeps a turn's error in a per-session field that only a failure sets,
    # so the turn after a failed one ends completed still carrying the failure's error.
    last_error: dict[str, Any] = {}

    def rewrite(method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method != "turn/ended":
            return params
        session = params["sessionId"]
        if params["error"] is not None:
            last_error[session] = params["error"]
        return {**params, "error": last_error.get(session)}

    rewrite_notifications(rewrite)


def _fire_keeping_the_time() -> None:
    """A task's timer fires and runs it, leaving its runAt as it was (which the contract
    allows) and nothing else to say that it ran at that time."""

    async def fire(self: Tasks, task_id: str) -> None:
        self._timers.pop(task_id, None)
        row = await self.host.storage.get_task(task_id)
        if row is None or not row["enabled"]:
            return
        with contextlib.suppress(HostError):
            await self.run(row)

    patch(Tasks, "_fire", fire)


@variant("task-that-ran-rearmed-at-start")
def _task_that_ran_rearmed_at_start() -> None:
    # P29: a task runs once for its runAt. This host keeps a fired task's runAt and, at
    # start, arms every enabled task whose runAt is still ahead of the (fresh) clock: a
    # task that already ran at that time runs again when the time comes after a restart.
    _fire_keeping_the_time()


@variant("tasks-rearmed-when-the-clock-is-set")
def _tasks_rearmed_when_the_clock_is_set() -> None:
    # P29, P32: a task runs once for its runAt, however the clock moves. This host keeps a
    # fired task's runAt and re-arms every task's timer when the clock is set, so a task
    # that ran runs again once a clock set back reaches its time again.
    _fire_keeping_the_time()
    clock_set = Host.clock_set

    async def rearming(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        answer = await clock_set(self, params)
        await self.tasks.schedule_all()
        return answer

    patch(Host, "clock_set", rearming)


CASES = [
    BrokenCase(
        "task-that-ran-rearmed-at-start",
        "scheduled_plan",
        "comes_again and restarted",
        "P29",
        "the task ran again when the time it had already run at came again",
    ),
    BrokenCase(
        "tasks-rearmed-when-the-clock-is-set",
        "scheduled_plan",
        "comes_again and set_back",
        "P29",
        "the task ran again when the time it had already run at came again",
    ),
    BrokenCase(
        "completed-turn-keeps-last-error",
        "sessions",
        "session_takes_a_new_prompt_after_a_provider_error",
        "R7.2",
        "completed with the error",
    ),
    BrokenCase(
        "clock-stands-still-in-production",
        "scheduled_plan",
        "on_its_own_when_its_time_comes",
        "P33",
        "had not run",
        slow=True,
    ),
    BrokenCase(
        "conformance-controls-always-on",
        "protocol_errors",
        "conformance_controls_do_not_exist",
        "P3",
        "expected the host to refuse",
    ),
    # -- restart: an accepted prompt survives -----------------------------------------------
    BrokenCase(
        "prompt-stored-when-the-turn-ends",
        "restart_interruption",
        "prompt_accepted_just_before_the_host",
        "R1.3",
        "lost the accepted prompt",
    ),
    # -- restart: unfinished work is interrupted before the first answer -----------------
    BrokenCase(
        "answers-before-recovery",
        "restart_interruption",
        "pending_approval_is_interrupted_when_the_host_restarts",
        "R4.10",
        "storage still showed the approval pending",
        label="approval",
        process="it races its own start-up, which only a new process replays",
    ),
    BrokenCase(
        "answers-before-recovery",
        "restart_interruption",
        "still_waiting_in_the_queue_is_interrupted_when_the_host_restarts",
        "R4.10",
        "storage showed the execution queued, not interrupted",
        label="execution",
        process="it races its own start-up, which only a new process replays",
    ),
    BrokenCase(
        "answers-before-recovery",
        "restart_interruption",
        "plan_turn_in_progress_is_interrupted_not_resumed_when_the_host_restarts",
        "R4.11",
        "turns were still active when the restarted host first answered",
        label="turn",
        process="it races its own start-up, which only a new process replays",
    ),
    BrokenCase(
        "recovery-skips-queued",
        "restart_interruption",
        "still_waiting_in_the_queue_is_interrupted_when_the_host_restarts",
        "C8",
        "storage showed the execution queued, not interrupted",
    ),
    BrokenCase(
        "recovery-skips-running",
        "restart_interruption",
        "running_execution_is_interrupted_when_the_host_restarts",
        "C8",
        "storage showed the execution running, not interrupted",
    ),
    BrokenCase(
        "recovery-without-status-code",
        "restart_interruption",
        "pending_approval_is_interrupted_when_the_host_restarts",
        "R4.10",
        "the interrupted approval has statusCode None",
    ),
    BrokenCase(
        "recovery-leaves-turns-active",
        "restart_interruption",
        "running_execution_is_interrupted_when_the_host_restarts",
        "R4.11",
        "turns were still active when the restarted host first answered",
    ),
    # -- restart: finished work stays as it was -------------------------------------------
    BrokenCase(
        "recovery-interrupts-completed",
        "restart_interruption",
        "approved_and_carried_out_is_left",
        "R4.10",
        "recovery changed a finished plan",
    ),
    BrokenCase(
        "recovery-interrupts-decided",
        "restart_interruption",
        "rejected_is_left or left_to_expire_is_left",
        "R4.10",
        "recovery changed a finished plan",
    ),
    BrokenCase(
        "recovery-reinterrupts",
        "restart_interruption",
        "interrupted_by_an_earlier_restart_is_left",
        "R4.10",
        "recovery changed a finished plan",
    ),
    # -- restart: the sessions afterwards ---------------------------------------------------
    BrokenCase(
        "interrupted-plan-session-to-agent",
        "restart_interruption",
        "pending_approval_is_interrupted_when_the_host_restarts",
        "R4.13",
        "after the restart the session is in agent",
    ),
    BrokenCase(
        "interrupted-approval-still-blocks",
        "restart_interruption",
        "user_can_ask_for_a_new_plan",
        "R4.13",
        "APPROVAL_PENDING",
    ),
    BrokenCase(
        "interrupted-execution-back-to-plan",
        "restart_interruption",
        "still_waiting_in_the_queue_is_interrupted_when_the_host_restarts",
        "R4.14",
        "after the restart the session is in plan",
    ),
    BrokenCase(
        "interrupted-execution-keeps-session-busy",
        "restart_interruption",
        "still_waiting_in_the_queue_is_interrupted_when_the_host_restarts",
        "R4.14",
        "SESSION_BUSY",
    ),
    # -- restart: nothing is replayed -------------------------------------------------------
    BrokenCase(
        "replays-queued-execution",
        "restart_interruption",
        "answer_the_model_was_still_giving and restarts",
        "R4.12",
        "the restarted host started turns",
        # when the replayed turn is still running as the scenario prompts, the prompt is
        # refused as busy before the check that counts turns is reached
        or_reason="session/prompt failed with SESSION_BUSY",
    ),
    BrokenCase(
        "interrupted-approval-decidable",
        "restart_interruption",
        "interrupted_approval_can_never_be_decided",
        "R4.12",
        "expected the host to refuse",
    ),
    BrokenCase(
        "resumes-interrupted-commands",
        "restart_interruption",
        "command_that_was_running_is_not_run_again_when_the_host_restarts",
        "C3",
        "the command ran again",
    ),
    # -- storage: the boot epoch and the record ----------------------------------------------
    BrokenCase(
        "stores-boot-epoch",
        "restart_interruption",
        "nothing_stored",
        "R4.1",
        "the database has names for a boot epoch: ['host_boots', 'host_boots.epoch']",
    ),
    BrokenCase(
        "stores-boot-epoch-setting",
        "restart_interruption",
        "nothing_stored",
        "R4.1",
        "settings hold ['boot_epoch']",
    ),
    BrokenCase(
        "stores-instance-id",
        "restart_interruption",
        "nothing_stored",
        "R4.1",
        "settings[key='instance'].value changed",
    ),
    BrokenCase(
        "host-version-carries-boot",
        "restart_interruption",
        "changes_no_answer",
        "R4.2",
        "the host answers differently",
        process="what it gets wrong lives in the host process, which an in-process restart keeps",
    ),
    BrokenCase(
        "stores-boot-epoch",
        "restart_interruption",
        "new_database_has_the_published",
        "R7.5",
        "extra table host_boots",
        label="schema",
    ),
    BrokenCase(
        "schema-without-turn-index",
        "restart_interruption",
        "new_database_has_the_published",
        "R7.5",
        "missing UNIQUE INDEX ON turns (session_id) WHERE state = 'active'",
    ),
    BrokenCase(
        "question-stored-as-title",
        "restart_interruption",
        "one_stored_record",
        "R2.6",
        "the record holds title 'Stored' and question 'Stored'",
    ),
    BrokenCase(
        "execution-state-kept-apart",
        "restart_interruption",
        "one_stored_record",
        "R4.3",
        "the approval's row holds",
    ),
    # -- one host per data dir --------------------------------------------------------------
    BrokenCase(
        "no-data-dir-lock",
        "restart_interruption",
        "second_host",
        "P17",
        "the second host served requests",
    ),
    BrokenCase(
        "recovers-before-locking",
        "restart_interruption",
        "second_host",
        "P17",
        "the refused host changed the data directory",
    ),
    BrokenCase(
        "in-use-reported-as-unavailable",
        "restart_interruption",
        "second_host",
        "P17",
        "the second host reported ['STORAGE_UNAVAILABLE']",
    ),
    # -- migration ---------------------------------------------------------------------------
    BrokenCase(
        "migrates-outside-transaction",
        "migration",
        "migration_that_fails",
        "R7.8",
        "the host changed the data directory: ['host.db']",
    ),
    BrokenCase(
        "writes-version-first",
        "migration",
        "migration_that_fails",
        "R7.9",
        "PRAGMA user_version is 10",
    ),
    BrokenCase(
        "migration-renumbers-transcript",
        "migration",
        "upgraded_and_its_data_survives",
        "R7.7",
        "transcript changed in the migration",
    ),
    BrokenCase(
        "migration-resets-settings",
        "migration",
        "upgraded_and_its_data_survives",
        "R7.7",
        "settings changed in the migration",
    ),
    BrokenCase(
        "migration-forgets-an-index",
        "migration",
        "migrated_database_has_the_published",
        "R7.5",
        "missing INDEX ON scheduled_task_runs (task_id, started_at)",
    ),
    BrokenCase(
        "migrates-any-older-version",
        "migration",
        "between_v8_and_v10",
        "R7.4",
        "not STORAGE_SCHEMA_UNSUPPORTED",
    ),
    BrokenCase(
        "adopts-a-database-without-version",
        "migration",
        "left_by_another_program",
        "R7.4",
        "the host served requests",
    ),
    BrokenCase(
        "data-dir-path-unescaped-in-uri",
        "handshake",
        "means_something",
        "R7.4",
        "the host refused to start on the data directory",
    ),
    BrokenCase(
        "opens-newer-schema",
        "migration",
        "newer_than_v10",
        "R7.4",
        "not STORAGE_SCHEMA_UNSUPPORTED",
    ),
    BrokenCase(
        "legacy-pending-rejected",
        "migration",
        "was_pending_is_listed",
        "P16",
        "the v8 approval that was pending is listed as rejected",
    ),
    BrokenCase(
        "legacy-title-not-read",
        "migration",
        "was_pending_is_listed",
        "P16",
        "the legacy approval reads title ''",
    ),
    BrokenCase(
        "legacy-listed-with-placeholders",
        "migration",
        "was_approved_is_listed",
        "P16",
        "approvals.0.turnId",
    ),
    BrokenCase(
        "follows-database-link",
        "migration",
        "link_to_a_database_elsewhere",
        "P18",
        "the host served requests",
    ),
    BrokenCase(
        "refuses-on-stderr-only",
        "migration",
        "a_text_file_is_refused",
        "P18",
        "the host reported nothing on stdout",
    ),
    BrokenCase(
        "refuses-with-status-zero",
        "migration",
        "a_folder_is_refused",
        "P18",
        "the refusing host exited with status 0",
    ),
    BrokenCase(
        "leaves-a-lock-file",
        "migration",
        "newer_than_v10",
        "P18",
        "the host changed the data directory: ['host.lock']",
    ),
    # -- scheduled tasks ------------------------------------------------------------------
    BrokenCase(
        "calls-provider-before-refusing-plan-task",
        "scheduled_plan",
        "plan_task_that_is_run_now_is_refused",
        "R6.2",
        "the host called the model 1 time(s)",
    ),
    BrokenCase(
        "writes-artifact-for-plan-task",
        "scheduled_plan",
        "plan_task_that_is_run_now_is_refused",
        "R6.2",
        "artifacts were written",
    ),
    BrokenCase(
        "records-turn-before-refusing",
        "scheduled_plan",
        "plan_task_that_comes_due_is_refused",
        "R6.2",
        "turns were recorded",
    ),
    BrokenCase(
        "plan-task-refused-as-permission-unavailable",
        "scheduled_plan",
        "plan_task_that_is_run_now_is_refused",
        "R6.1",
        "the run was refused with",
    ),
    BrokenCase(
        "due-plan-task-runs",
        "scheduled_plan",
        "plan_task_that_comes_due_is_refused",
        "R6.1",
        "the run ended",
    ),
    BrokenCase(
        "refused-task-switched-to-agent",
        "scheduled_plan",
        "never_switches_a_refused_task_to_agent_when_it_is_run_now",
        "R6.3",
        "the host changed the task to agent",
    ),
    BrokenCase(
        "task-mode-change-ignored",
        "scheduled_plan",
        "task_changed_to_agent_runs_unattended",
        "R6.3",
        "the run ended refused",
    ),
    BrokenCase(
        "unattended-refused-as-denied",
        "scheduled_plan",
        "write_call_that_needs_permission",
        "P8",
        "the unattended Write call ended denied with PERMISSION_DENIED",
    ),
    BrokenCase(
        "unattended-allows-everything",
        "scheduled_plan",
        "bash_call_that_needs_permission_in_a_run_asking_acceptedits",
        "P8",
        "the unattended Bash call ended ok",
    ),
    BrokenCase(
        "unattended-refusal-ends-run",
        "scheduled_plan",
        "write_call_that_needs_permission",
        "P8",
        "the run asked the model 1 times, not twice",
    ),
    BrokenCase(
        "scheduled-run-left-running",
        "scheduled_plan",
        "under_way and restarts",
        "P28",
        "the run cut short reads running",
    ),
    BrokenCase(
        "scheduled-run-resumed-after-restart",
        "scheduled_plan",
        "under_way and restarts",
        "P28",
        "after the restart task/list shows the last run",
    ),
    BrokenCase(
        "task-needs-a-project",
        "scheduled_plan",
        "task_without_a_project_is_reported",
        "P29",
        "WORKSPACE_REQUIRED",
    ),
    BrokenCase(
        "task-provider-not-reported",
        "scheduled_plan",
        "reported_as_it_was_created",
        "P29",
        "the host's answer reports other values",
    ),
    BrokenCase(
        "task-update-forgets-enabled",
        "scheduled_plan",
        "every_change_to_a_task",
        "P29",
        "task/list reports other values",
    ),
    BrokenCase(
        "switched-off-task-still-runs",
        "scheduled_plan",
        "switchedoff_task",
        "P29",
        "for the switched-off task",
    ),
    BrokenCase(
        "task-answers-without-its-id",
        "scheduled_plan",
        "deleted_task_is_no_longer_listed or changed_to_agent",
        "P5",
        "task.taskId\n  Field required",
    ),
    # -- deleting a task (P26) ----------------------------------------------------------------
    BrokenCase(
        "task-delete-only-disables",
        "scheduled_plan",
        "deleted_task_is_no_longer_listed",
        "P26",
        "task/list still lists the deleted task",
    ),
    BrokenCase(
        "task-delete-keeps-the-timer",
        "scheduled_plan",
        "never_runs_when_its_time_comes",
        "P26",
        "for the deleted task",
    ),
    BrokenCase(
        "unknown-task-is-invalid-params",
        "scheduled_plan",
        "acting_on_a_deleted_task",
        "P26",
        "expected TASK_NOT_FOUND",
    ),
    # -- no provider, a failing provider (P24, P25) -------------------------------------------
    BrokenCase(
        "no-provider-is-invalid-params",
        "sessions",
        "without_a_model_provider_is_refused",
        "P24",
        "the prompt was refused with INVALID_PARAMS, not PROVIDER_NOT_CONFIGURED",
    ),
    BrokenCase(
        "no-provider-leaves-the-session-busy",
        "sessions",
        "without_a_model_provider_is_refused",
        "P24",
        "the session is busy",
    ),
    BrokenCase(
        "provider-error-reported-as-internal",
        "sessions",
        "provider_error_ends_the_turn",
        "P25",
        "the turn ended failed with INTERNAL_ERROR, expected failed with PROVIDER_ERROR",
    ),
    BrokenCase(
        "provider-error-ends-turn-completed",
        "sessions",
        "provider_error_ends_the_turn",
        "P25",
        "the turn ended completed with None",
    ),
    BrokenCase(
        "provider-error-keeps-the-session-busy",
        "sessions",
        "provider_error_ends_the_turn",
        "P25",
        "the session is busy",
    ),
    # -- shells and commands ----------------------------------------------------------------
    BrokenCase(
        "ignores-default-shell",
        "shell",
        "default_shell_when_that_is_the_bash",
        "R7.6",
        "the process ran",
    ),
    BrokenCase(
        "ignores-session-shell",
        "shell",
        "sessions_shell_wins",
        "R7.3",
        "was announced in",
    ),
    BrokenCase(
        "recovery-ends-turns-as-failed",
        "restart_interruption",
        "running_execution_is_interrupted_when_the_host_restarts",
        "R4.11",
        "no turn was recorded as interrupted",
    ),
    BrokenCase(
        "no-default-shell-until-chosen",
        "shell",
        "catalog_lists_the_machines_shells",
        "R7.6",
        "the default None is unknown",
    ),
    BrokenCase(
        "workspace-root-with-trailing-slash",
        "sessions",
        "new_session_starts_in_agent_mode",
        "R1.2",
        "workspace root is",
    ),
    BrokenCase(
        "migration-tolerates-existing-tables",
        "migration",
        "migration_that_fails_is_rolled_back",
        "P18",
        "the host served requests",
    ),
    BrokenCase(
        "no-turn-text",
        "isolation",
        "each_hear_only_their_own_turn",
        "R5.9",
        "did not hear its answer",
    ),
    BrokenCase(
        "settings-table-without-rowid",
        "restart_interruption",
        "new_database_has_the_published_v10_structure",
        "R7.5",
        "WITHOUT ROWID is True",
    ),
    BrokenCase(
        "timers-fire-only-past-their-time",
        "shell",
        "command_that_times_out_is_recorded",
        "C5",
        "no command/exited notification matched",
        slow=True,  # the timeout the check waits for never fires
    ),
    BrokenCase(
        "transcript-newest-first",
        "migration",
        "v8_database_is_upgraded_and_its_data_survives",
        "R7.7",
        "seq does not increase from entry to entry",
    ),
    BrokenCase(
        "lock-file-left-on-refusal",
        "migration",
        "migration_that_fails_is_rolled_back",
        "P18",
        "the host changed the data directory",
    ),
    BrokenCase(
        "signal-zero-on-normal-exit",
        "shell",
        "stream_apart_in_order",
        "R7.3",
        "(exit code, signal)",
    ),
    BrokenCase(
        "keeps-shell-when-cleared",
        "shell",
        "shell_of_its_own_is_cleared",
        "R7.3",
        "the session still names",
    ),
    BrokenCase(
        "cleared-shell-still-runs-commands",
        "shell",
        "shell_of_its_own_is_cleared",
        "R7.3",
        "when read back",
    ),
    BrokenCase(
        "default-shell-in-memory",
        "shell",
        "default_shell_survives_a_restart",
        "R7.6",
        "after the restart the default shell is",
        process="what it gets wrong lives in the host process, which an in-process restart keeps",
    ),
    BrokenCase(
        "accepts-unknown-default-shell",
        "shell",
        "unknown_default_shell",
        "R7.6",
        "expected the host to refuse",
    ),
    BrokenCase(
        "shell-change-while-busy",
        "shell",
        "another_shell_while_a_turn_runs",
        "R5.4",
        "expected the host to refuse",
    ),
    BrokenCase(
        "buffers-output-until-exit",
        "shell",
        "output_arrives_while_the_command",
        "R7.3",
        "arrived only after the command had ended",
        slow=True,  # the check waits its timeout for output that never comes in time
    ),
    BrokenCase(
        "numbers-output-per-stream",
        "shell",
        "stream_apart_in_order",
        "P20",
        "output sequence numbers",
    ),
    BrokenCase(
        "drops-undecodable-bytes",
        "shell",
        "not_utf8",
        "P20",
        "'ok\\n'",
    ),
    BrokenCase(
        "chunks-too-large",
        "shell",
        "longer_than_64_kib",
        "P20",
        "chunks of 65536 characters",
    ),
    BrokenCase(
        "enforces-another-cap",
        "shell",
        "past_the_announced_cap",
        "P20",
        "output past the cap was not marked truncated",
    ),
    BrokenCase(
        "cap-off-by-one",
        "shell",
        "exactly_at_the_announced_cap",
        "P20",
        "output of exactly the cap was marked truncated",
    ),
    BrokenCase(
        "enforces-another-cap",
        "shell",
        "both_streams_count",
        "P20",
        "the output was not marked truncated",
        label="both-streams",
    ),
    # What a command started outlives it: the check waits for those processes, in vain.
    BrokenCase(
        "kills-only-direct-child",
        "shell",
        "behind_a_double_fork_ends_when_the_turn_is_cancelled",
        "P19",
        "are still alive after it ended",
        label="on-cancel",
    ),
    BrokenCase(
        "kills-only-direct-child",
        "shell",
        "in_a_session_of_its_own_ends_when_its_command_times_out",
        "P19",
        "are still alive after it ended",
        label="on-timeout",
    ),
    BrokenCase(
        "leaves-processes-after-exit",
        "shell",
        "in_the_background_ends_when_its_command_exits",
        "P19",
        "are still alive after it ended",
    ),
    BrokenCase(
        "stops-with-sigterm",
        "shell",
        "ignoring_requests_to_stop_ends_when_its_command_exits",
        "P19",
        "are still alive after it ended",
    ),
    BrokenCase(
        "exited-after-turn-ended",
        "shell",
        "in_the_background_ends_when_its_command_exits",
        "P19",
        "announced in the order ['turn/ended', 'command/exited']",
    ),
    BrokenCase(
        "timeout-reported-ok",
        "shell",
        "in_the_background_ends_when_its_command_times_out",
        "P19",
        "the timed-out command's tool result is ok",
    ),
    BrokenCase(
        "cancel-not-flagged",
        "shell",
        "cancelled_is_recorded_for_audit",
        "C5",
        "the end of the cancelled command reads {'cancelled': False",
    ),
    BrokenCase(
        "audit-without-exit-code",
        "shell",
        "command_that_exits_is_recorded_for_audit",
        "C5",
        "'exit_code': (0, 3)",
    ),
    BrokenCase(
        "audit-without-flags",
        "shell",
        "command_that_times_out_is_recorded_for_audit",
        "C5",
        "'timed_out': (0, 1)",
    ),
]
