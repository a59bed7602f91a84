"""Broken hosts: an eleventh held-out set (storage rows and recovery), written from the
contract alone.

Two of these thirteen went uncaught at first; both are caught now (a session's createdAt
restamped by a change, an empty database file refused). stale-lock-after-crash is caught
only as errored scenarios, which blame no requirement, so it has no case.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiosqlite

from hosts.registry import BrokenCase, patch, variant
from reference_host import datadir, migration, server, storage, turns
from reference_host import host as server_host
from reference_host.approvals import TIMEOUT_CODE, Approvals, approval_wire
from reference_host.clock import wall_time_ms
from reference_host.commands import CommandResult
from reference_host.datadir import DB_FILE, DataDirLock
from reference_host.errors import HostError
from reference_host.host import DEFAULT_SHELL_KEY, Host
from reference_host.jsontext import dumps
from reference_host.state import is_expired
from reference_host.storage import SessionRow, Storage
from reference_host.tasks import Tasks

SQLITE_HEADER = b"SQLite format 3\x00"


def _recover_with(pending_sql: str, runs_sql: str, *, bind_now_twice: bool = False) -> None:
    """Replace the start-up recovery by the reference's, with two of its UPDATEs rewritten."""

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self.transaction() as conn:
            approvals = await conn.execute(pending_sql, (now, now) if bind_now_twice else (now,))
            executions = await conn.execute(
                "UPDATE plan_approvals SET execution_state = 'interrupted' "
                "WHERE execution_state IN ('queued', 'running')"
            )
            ended = await conn.execute(
                "UPDATE turns SET state = 'interrupted', ended_at = ? WHERE state = 'active'",
                (now,),
            )
            await conn.execute(runs_sql)
        return approvals.rowcount, executions.rowcount, ended.rowcount

    patch(Storage, "recover", recover)


_PENDING_SQL = (
    "UPDATE plan_approvals SET status = 'interrupted', "
    "status_code = 'TURN_INTERRUPTED', decided_at = ? WHERE status = 'pending'"
)
_RUNS_SQL = (
    "UPDATE scheduled_task_runs SET outcome = 'failed', error_code = 'TURN_INTERRUPTED', "
    "error_message = 'the host stopped before the run finished' WHERE outcome = 'running'"
)


# P16 / R4.10 (Migrating from v8): the migration copies v8 plan_approvals statuses as they
# are except changes_requested, counting on the start-up recovery to interrupt the pending
# ones. A legacy pending row so ends interrupted with statusCode TURN_INTERRUPTED and a
# decidedAt of the first start (the contract: none for a pending row), and a v8 file with
# two pending approvals in one session fails the migration (the one-pending index).
@variant("migration-leaves-pending-to-recovery")
def _migration_leaves_pending_to_recovery() -> None:
    original = migration._COPY_LEGACY_APPROVALS
    changed = original.replace("WHEN 'pending' THEN 'interrupted'", "WHEN 'pending' THEN 'pending'")
    assert changed != original
    patch(migration, "_COPY_LEGACY_APPROVALS", changed)


# R7.7 (Migrating from v8): "the v8 columns keep their values". The migration normalises
# the legacy transcript into the host's own JSON form (parsed and written back compact,
# non-ASCII unescaped), so a v8 row whose content was JSON with spaces or \u escapes
# reads differently in transcript.content, although session/transcript parses the same.
@variant("migration-recompacts-transcript-json")
def _migration_recompacts_transcript_json() -> None:
    statements = migration.migration_statements
    migrate = storage.migrate_v8_to_v10

    def migration_statements(v10_statements: list[str]) -> list[str]:
        steps = statements(v10_statements)
        rewrite = "UPDATE transcript SET content = host_json(content) WHERE json_valid(content)"
        return [*steps[:-1], rewrite, steps[-1]]

    async def migrate_v8_to_v10(conn: aiosqlite.Connection, v10_statements: list[str]) -> None:
        await conn.create_function("host_json", 1, lambda text: dumps(json.loads(text)))
        await migrate(conn, v10_statements)

    patch(migration, "migration_statements", migration_statements)
    patch(storage, "migrate_v8_to_v10", migrate_v8_to_v10)


# P28 / R4.10 (Execution and restart, Scheduled tasks): the start-up recovery fails every
# run that is "not finished", written as outcome NOT IN ('completed', 'failed'): a Plan
# task's refused run also reads failed with TURN_INTERRUPTED after any restart (finished
# work must stay exactly as it was; a restart with nothing to recover changes nothing).
@variant("recovery-fails-refused-runs")
def _recovery_fails_refused_runs() -> None:
    runs = _RUNS_SQL.replace(
        "WHERE outcome = 'running'", "WHERE outcome NOT IN ('completed', 'failed')"
    )
    _recover_with(_PENDING_SQL, runs)


# R4.10 (Execution and restart §4): "every earlier pending approval" is read as "created
# before the new process's clock": the recovery interrupts only approvals whose createdAt
# is before now. When the previous process's clock had been advanced past the restarted
# host's clock (which starts afresh at the system time), the pending approval stays
# pending across the restart.
@variant("recovery-only-before-now")
def _recovery_only_before_now() -> None:
    pending = _PENDING_SQL + " AND created_at < ?"
    _recover_with(pending, _RUNS_SQL, bind_now_twice=True)


# R4.1 / P29 (Storage "No boot epoch", Scheduled tasks): at start the scheduler drops the
# schedules whose time has passed (UPDATE ... SET run_at = NULL WHERE run_at <= now), so a
# restart that has nothing to recover still changes stored rows and task/list: a disabled
# task, or one whose runAt passed while no host ran, reads runAt null afterwards.
@variant("restart-clears-missed-run-at")
def _restart_clears_missed_run_at() -> None:
    schedule_all = Tasks.schedule_all

    async def _schedule_all(self: Tasks) -> None:
        now = self.host.clock.now_ms()
        async with self.host.storage.transaction() as conn:
            await conn.execute(
                "UPDATE scheduled_tasks SET run_at = NULL WHERE run_at IS NOT NULL AND run_at <= ?",
                (now,),
            )
        await schedule_all(self)

    patch(Tasks, "schedule_all", _schedule_all)


# P17 (Storage "One owner"): the host also claims DIR with a lock file created with
# O_EXCL and removed when it stops. A SIGKILLed host leaves it behind: the restarted host
# finds it and refuses with DATA_DIR_IN_USE ("a crashed host's lock must not survive it").
@variant("stale-lock-after-crash")
def _stale_lock_after_crash() -> None:
    claim = datadir.claim

    def _claim(data_dir: Path) -> DataDirLock:
        lock = claim(data_dir)
        path = data_dir / "host.lock"
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError as exc:
            lock.release()
            raise HostError(
                "DATA_DIR_IN_USE",
                f"another host holds {str(path)!r}",
                {"dataDir": str(data_dir)},
            ) from exc
        except OSError as exc:
            lock.release()
            raise HostError(
                "STORAGE_UNAVAILABLE", f"cannot lock: {exc}", {"dataDir": str(data_dir)}
            ) from exc
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        release = lock.release

        def release_and_remove() -> None:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            release()

        lock.release = release_and_remove
        return lock

    patch(server, "claim", _claim)


# P18 (Storage "Refusing to start"): a host.db that is not a SQLite database is treated as
# corrupt: it is moved aside (host.db.unreadable-<ms>) and a new database is created,
# instead of refusing with STORAGE_UNAVAILABLE and leaving every file as it was.
@variant("replaces-unreadable-database")
def _replaces_unreadable_database() -> None:
    open_ = Storage.open.__func__

    async def _open(cls: type[Storage], data_dir: Path) -> Storage:
        try:
            return await open_(cls, data_dir)
        except HostError as error:
            cause = error.__cause__
            if not (isinstance(cause, sqlite3.DatabaseError) and "not a database" in str(cause)):
                raise
        (data_dir / DB_FILE).rename(data_dir / f"{DB_FILE}.unreadable-{wall_time_ms()}")
        return await open_(cls, data_dir)

    patch(Storage, "open", classmethod(_open))


# R7.4 (Migrating from v8: "version 0 is a new database only while the file is missing or
# holds nothing"): before opening host.db the host sniffs the SQLite header and refuses
# any file without it with STORAGE_UNAVAILABLE, also an empty (0-byte) host.db, which is
# a new database to be created.
@variant("refuses-empty-database-file")
def _refuses_empty_database_file() -> None:
    claim = datadir.claim

    def _claim(data_dir: Path) -> DataDirLock:
        lock = claim(data_dir)
        try:
            with (data_dir / DB_FILE).open("rb") as file:
                head = file.read(len(SQLITE_HEADER))
        except OSError:
            return lock  # missing: a new database; anything else SQLite will judge
        if head != SQLITE_HEADER:
            lock.release()
            raise HostError(
                "STORAGE_UNAVAILABLE",
                f"{data_dir / DB_FILE} is not a SQLite database",
                {"dataDir": str(data_dir)},
            )
        return lock

    patch(server, "claim", _claim)


# P18 / R7.8 (Refusing to start, Migrating from v8): the connection is put in WAL mode
# right after it opens, before the schema version is read. A refused file (version 99,
# version 0 with tables) or a v8 file whose migration fails is no longer byte-identical:
# its header now says WAL.
@variant("wal-before-version-check")
def _wal_before_version_check() -> None:
    async def _open(cls: type[Storage], data_dir: Path) -> Storage:
        conn = await aiosqlite.connect(
            storage._file_uri(data_dir / DB_FILE), uri=True, isolation_level=None
        )
        try:
            await conn.execute("PRAGMA busy_timeout = 5000")
            await conn.execute("PRAGMA journal_mode = WAL")
            opened = cls(conn)
            await opened._check_version()
            await conn.execute("PRAGMA synchronous = FULL")
            await opened._prepare_schema()
            await conn.execute("PRAGMA journal_mode = WAL")
            await conn.execute("PRAGMA foreign_keys = ON")
        except BaseException:
            await conn.close()
            raise
        return opened

    patch(Storage, "_open", classmethod(_open))


# R4.3 / R7.2 (Approval §3, Storage): on expiry the row is written with decided_at =
# expires_at ("it expired at its deadline") while the approval/updated notification is
# built from the in-memory record stamped with the clock. When the clock jumps past the
# deadline, the notification's decidedAt disagrees with the row and with approval/get.
@variant("expiry-row-decided-at-deadline")
def _expiry_row_decided_at_deadline() -> None:
    async def expire(self: Approvals, approval_id: str) -> None:
        host = self.host
        row = await host.storage.get_approval(approval_id)
        if row is None or row.status != "pending":
            return
        now = host.clock.now_ms()
        if not is_expired(row.expires_at, now):
            return
        stored = replace(row, status="expired", status_code=TIMEOUT_CODE, decided_at=row.expires_at)
        await host.storage.update_approval(stored)
        host.set_activity(row.session_id, pending_approval_id=None)
        announced = replace(stored, decided_at=now)
        host.notify("approval/updated", {"approval": approval_wire(announced)})
        await host.publish_session(row.session_id)

    patch(Approvals, "expire", expire)


# Sessions, turns and boundaries (R7.2, "The sessions row holds what session/get reports:
# ... creation time"): the UPDATE that writes a session back sets created_at and
# updated_at from the same value, so every configure, EnterPlanMode or approve moves the
# session's createdAt (the configure answer and session/updated still carry the old one).
@variant("configure-restamps-created-at")
def _configure_restamps_created_at() -> None:
    async def write_session(conn: aiosqlite.Connection, session: SessionRow) -> None:
        await conn.execute(
            "UPDATE sessions SET mode = ?, permission_mode = ?, provider_base_url = ?, "
            "model = ?, shell_id = ?, created_at = ?, updated_at = ? WHERE id = ?",
            (
                session.mode,
                session.permission_mode,
                session.provider_base_url,
                session.model,
                session.shell_id,
                session.updated_at,
                session.updated_at,
                session.id,
            ),
        )

    patch(Storage, "write_session", staticmethod(write_session))


# C5 (Commands and shells: the audit row holds "what command/exited reported"): the
# command_audit row stores the process's raw return code, so a command ended by a signal
# is recorded with exit_code -9 (or -15) where command/exited said exitCode null.
@variant("audit-stores-raw-returncode")
def _audit_stores_raw_returncode() -> None:
    audit_row = turns._audit_row

    def _audit_row(audit: dict[str, Any], result: CommandResult, ended_at: int) -> dict[str, Any]:
        row = audit_row(audit, result, ended_at)
        if result.signal is not None:
            row["exit_code"] = -result.signal
        return row

    patch(turns, "_audit_row", _audit_row)


# Shutdown and crashes / R7.6 ("after a SIGKILL at any moment the restarted host shows
# every ... setting as last reported"): shell/setDefault answers from memory and writes
# the settings row when the host stops. A clean restart keeps the default; a crash loses it.
@variant("default-shell-saved-at-exit")
def _default_shell_saved_at_exit() -> None:
    unsaved: dict[int, str] = {}
    default_shell_id = Host.default_shell_id
    close = Host.close

    async def shell_set_default(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        shell = server_host._require_shell(params["shellId"])
        unsaved[id(self)] = shell.shell_id
        return {"defaultShellId": shell.shell_id}

    async def _default_shell_id(self: Host) -> str | None:
        if id(self) in unsaved:
            return unsaved[id(self)]
        return await default_shell_id(self)

    async def _close(self: Host) -> None:
        chosen = unsaved.pop(id(self), None)
        if chosen is not None:
            await self.storage.set_setting(DEFAULT_SHELL_KEY, chosen)
        await close(self)

    patch(Host, "shell_set_default", shell_set_default)
    patch(Host, "default_shell_id", _default_shell_id)
    patch(Host, "close", _close)


CASES = [
    BrokenCase(
        "migration-leaves-pending-to-recovery",
        "migration",
        "v8_approval_that_was and pending",
        "P16",
        "the legacy approval reads",
    ),
    BrokenCase(
        "migration-recompacts-transcript-json",
        "migration",
        "upgraded_and_its_data_survives",
        "R7.7",
        "transcript changed in the migration",
    ),
    BrokenCase(
        "recovery-fails-refused-runs",
        "restart_interruption",
        "nothing_to_recover_changes_nothing_stored",
        "R4.1",
        "changed from 'refused'",
    ),
    BrokenCase(
        "recovery-only-before-now",
        "restart_interruption",
        "left_to_expire_is_left_as_it_was",
        "R4.10",
        "pending after the restart",
    ),
    BrokenCase(
        "restart-clears-missed-run-at",
        "migration",
        "upgraded_and_its_data_survives",
        "R7.7",
        "scheduled_tasks changed in the migration",
    ),
    BrokenCase(
        "replaces-unreadable-database",
        "migration",
        "database_that_is and text",
        "P18",
        "the host served requests",
    ),
    BrokenCase(
        "wal-before-version-check",
        "migration",
        "newer_than_v10",
        "P18",
        "the host changed the data directory",
    ),
    BrokenCase(
        "expiry-row-decided-at-deadline",
        "deadline",
        "expires_at_its_own_deadline",
        "R7.2",
        "the expiry was announced with",
    ),
    BrokenCase(
        "audit-stores-raw-returncode",
        "shell",
        "times_out_is_recorded_for_audit",
        "C5",
        "the audit row differs",
    ),
    BrokenCase(
        "default-shell-saved-at-exit",
        "restart_interruption",
        "nothing_to_recover_changes_nothing_stored",
        "R4.1",
        "a row appeared",
    ),
    BrokenCase(
        "configure-restamps-created-at",
        "sessions",
        "idle_session_takes_a_new",
        "R5.6",
        "also changed",
    ),
    BrokenCase(
        "refuses-empty-database-file",
        "handshake",
        "empty_database_file",
        "R7.4",
        "refused to start",
    ),
]
