"""The host's SQLite database (storage schema v10), through aiosqlite.

One file, ``<data-dir>/host.db``, in WAL mode with ``synchronous = FULL``. An empty data
directory gets the published v10 DDL; a v10 file is opened as it is; anything else is
refused before the host serves a request.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiosqlite

from pi_contract import STORAGE_SCHEMA_VERSION, schemas_dir
from reference_host.datadir import DB_FILE
from reference_host.errors import HostError
from reference_host.jsontext import dumps
from reference_host.migration import V8, migrate_v8_to_v10
from reference_host.state import ApprovalStatus, ExecutionState, Mode, PermissionMode


@dataclass(frozen=True)
class SessionRow:
    """A persisted session."""

    id: str
    workspace_root: str | None
    mode: Mode
    permission_mode: PermissionMode
    provider_base_url: str | None
    model: str | None
    shell_id: str | None
    created_at: int
    updated_at: int


_SESSION_COLUMNS = (
    "id, workspace_root, mode, permission_mode, provider_base_url, model, shell_id, "
    "created_at, updated_at"
)


@dataclass(frozen=True)
class ApprovalRow:
    """A plan_approvals row (§4: approval status and execution fields in one row)."""

    id: str
    session_id: str
    turn_id: str | None
    title: str
    question: str
    artifact_path: str | None
    artifact_sha256: str | None
    artifact_bytes: int | None
    created_at: int
    expires_at: int
    status: ApprovalStatus
    status_code: str | None
    decided_at: int | None
    permission_mode: PermissionMode | None
    execution_id: str | None
    execution_state: ExecutionState | None
    execution_turn_id: str | None


APPROVAL_COLUMNS = (
    "id, session_id, turn_id, title, question, artifact_path, artifact_sha256, artifact_bytes, "
    "created_at, expires_at, status, status_code, decided_at, permission_mode, execution_id, "
    "execution_state, execution_turn_id"
)


def _session(row: aiosqlite.Row) -> SessionRow:
    return SessionRow(*row)


def v10_ddl() -> str:
    """The published storage v10 DDL."""
    return (schemas_dir() / "storage" / "v10.sql").read_text(encoding="utf-8")


class Storage:
    """Typed access to the host database. Every write is its own transaction."""

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self._conn = conn
        # One connection serves every session: two turns that write at the same moment
        # take turns, instead of the second BEGIN failing inside the first transaction.
        self._writing = asyncio.Lock()

    @classmethod
    async def open(cls, data_dir: Path) -> Storage:
        """Open (creating if needed) the database in ``data_dir``.

        STORAGE_UNAVAILABLE when SQLite cannot use the file (not a database, a symlink, a
        read-only file or folder); the refused file is left as it was.
        """
        data_dir.mkdir(parents=True, exist_ok=True)
        try:
            return await cls._open(data_dir)
        except sqlite3.Error as exc:
            raise HostError(
                "STORAGE_UNAVAILABLE",
                f"{data_dir / DB_FILE} cannot be used as the host database: {exc}",
                {"dataDir": str(data_dir)},
            ) from exc

    @classmethod
    async def _open(cls, data_dir: Path) -> Storage:
        # nofollow: a symlinked host.db is refused, never followed.
        conn = await aiosqlite.connect(
            _file_uri(data_dir / DB_FILE), uri=True, isolation_level=None
        )
        try:
            await conn.execute("PRAGMA busy_timeout = 5000")
            storage = cls(conn)
            # Decide before changing anything: a refused file must stay byte-identical,
            # and a failed migration must leave the v8 file as it was, journal mode included.
            await storage._check_version()
            await conn.execute("PRAGMA synchronous = FULL")
            await storage._prepare_schema()
            await conn.execute("PRAGMA journal_mode = WAL")
            await conn.execute("PRAGMA foreign_keys = ON")
        except BaseException:
            await conn.close()
            raise
        return storage

    async def close(self) -> None:
        """Close the connection."""
        await self._conn.close()

    async def _is_empty(self) -> bool:
        async with self._conn.execute("SELECT count(*) FROM sqlite_schema") as cursor:
            row = await cursor.fetchone()
        return row is not None and row[0] == 0

    async def _check_version(self) -> None:
        version = await self.user_version()
        if version in (STORAGE_SCHEMA_VERSION, V8) or (version == 0 and await self._is_empty()):
            return
        raise HostError(
            "STORAGE_SCHEMA_UNSUPPORTED",
            f"database schema version {version} cannot be opened by this host "
            f"(it opens {STORAGE_SCHEMA_VERSION} and creates it in an empty data directory)",
            {"userVersion": version},
        )

    async def _prepare_schema(self) -> None:
        version = await self.user_version()
        if version == STORAGE_SCHEMA_VERSION:
            return
        if version == V8:
            await migrate_v8_to_v10(self._conn, _statements(v10_ddl()))
            return
        # A new database: WAL first, so that creating the schema is one WAL commit; and the
        # whole schema in one script, one trip to the database thread.
        statements = ["PRAGMA journal_mode = WAL", "BEGIN IMMEDIATE", *_statements(v10_ddl())]
        script = ";\n".join([*statements, "COMMIT"])
        try:
            await self._conn.executescript(script)
        except BaseException:
            with contextlib.suppress(aiosqlite.Error):
                await self._conn.execute("ROLLBACK")
            raise

    async def user_version(self) -> int:
        """``PRAGMA user_version`` of the database."""
        async with self._conn.execute("PRAGMA user_version") as cursor:
            row = await cursor.fetchone()
        return int(row[0]) if row is not None else 0

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """BEGIN IMMEDIATE ... COMMIT, rolled back on any exception; one at a time."""
        async with self._writing:
            try:
                await self._conn.execute("BEGIN IMMEDIATE")
            except asyncio.CancelledError:
                # A cancelled turn: the BEGIN still runs on the connection's thread, and a
                # transaction left open there would fail every later write.
                with contextlib.suppress(sqlite3.OperationalError):
                    await self._conn.execute("ROLLBACK")
                raise
            try:
                yield self._conn
            except BaseException:
                await self._conn.execute("ROLLBACK")
                raise
            await self._conn.execute("COMMIT")

    # -- sessions -----------------------------------------------------------------------

    async def insert_session(self, session: SessionRow) -> None:
        """Persist a new session."""
        async with self.transaction() as conn:
            await conn.execute(
                f"INSERT INTO sessions ({_SESSION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    session.id,
                    session.workspace_root,
                    session.mode,
                    session.permission_mode,
                    session.provider_base_url,
                    session.model,
                    session.shell_id,
                    session.created_at,
                    session.updated_at,
                ),
            )

    async def get_session(self, session_id: str) -> SessionRow | None:
        """One session, or None."""
        async with self._conn.execute(
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,)
        ) as cursor:
            row = await cursor.fetchone()
        return _session(row) if row is not None else None

    async def list_sessions(self) -> list[SessionRow]:
        """All sessions, oldest first."""
        async with self._conn.execute(
            f"SELECT {_SESSION_COLUMNS} FROM sessions ORDER BY created_at, id"
        ) as cursor:
            rows = await cursor.fetchall()
        return [_session(row) for row in rows]

    async def update_session(self, session: SessionRow) -> None:
        """Write back a session's configurable fields."""
        async with self.transaction() as conn:
            await self.write_session(conn, session)

    @staticmethod
    async def write_session(conn: aiosqlite.Connection, session: SessionRow) -> None:
        """Update a session inside a transaction the caller owns."""
        await conn.execute(
            "UPDATE sessions SET mode = ?, permission_mode = ?, provider_base_url = ?, "
            "model = ?, shell_id = ?, updated_at = ? WHERE id = ?",
            (
                session.mode,
                session.permission_mode,
                session.provider_base_url,
                session.model,
                session.shell_id,
                session.updated_at,
                session.id,
            ),
        )

    # -- settings -----------------------------------------------------------------------

    async def get_setting(self, key: str) -> str | None:
        """A persisted setting, or None."""
        async with self._conn.execute("SELECT value FROM settings WHERE key = ?", (key,)) as cur:
            row = await cur.fetchone()
        return str(row[0]) if row is not None else None

    async def set_setting(self, key: str, value: str) -> None:
        """Persist a setting."""
        async with self.transaction() as conn:
            await conn.execute(
                "INSERT INTO settings (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    # -- transcript ---------------------------------------------------------------------

    async def append_transcript(
        self, session_id: str, turn_id: str | None, role: str, content: dict[str, Any], at: int
    ) -> None:
        """Append one provider-format message to a session's transcript."""
        async with self.transaction() as conn:
            await _insert_transcript(conn, session_id, turn_id, role, content, at)

    async def transcript(self, session_id: str) -> list[tuple[int, str | None, str, Any, int]]:
        """(seq, turn id, role, content, created_at) of each entry, in order."""
        async with self._conn.execute(
            "SELECT id, turn_id, role, content, created_at FROM transcript "
            "WHERE session_id = ? ORDER BY id",
            (session_id,),
        ) as cursor:
            rows = await cursor.fetchall()
        return [(r[0], r[1], r[2], json.loads(r[3]), r[4]) for r in rows]

    # -- turns --------------------------------------------------------------------------

    async def start_turn(
        self,
        turn_id: str,
        session_id: str,
        kind: str,
        at: int,
        user_message: dict[str, Any] | None = None,
    ) -> None:
        """Record a new active turn and, in the same transaction, the message it starts with.

        Both are durable before the prompt is answered: a crash right after the answer
        still finds the accepted prompt in the transcript (R1.3).
        """
        async with self.transaction() as conn:
            await conn.execute(
                "INSERT INTO turns (id, session_id, kind, state, started_at) "
                "VALUES (?, ?, ?, 'active', ?)",
                (turn_id, session_id, kind, at),
            )
            if user_message is not None:
                await _insert_transcript(conn, session_id, turn_id, "user", user_message, at)

    async def end_turn(self, turn_id: str, state: str, at: int) -> None:
        """Record how a turn ended."""
        async with self.transaction() as conn:
            await conn.execute(
                "UPDATE turns SET state = ?, ended_at = ? WHERE id = ? AND state = 'active'",
                (state, at, turn_id),
            )

    # -- plan approvals -----------------------------------------------------------------

    async def insert_approval(self, row: ApprovalRow) -> None:
        """Commit a new pending approval (only after its artifact is on disk, §2)."""
        async with self._writing:  # one statement in autocommit: one durable round trip
            await self._conn.execute(
                f"INSERT INTO plan_approvals ({APPROVAL_COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                tuple(row.__dict__.values()),
            )

    async def get_approval(self, approval_id: str) -> ApprovalRow | None:
        """One approval, or None."""
        async with self._conn.execute(
            f"SELECT {APPROVAL_COLUMNS} FROM plan_approvals WHERE id = ?", (approval_id,)
        ) as cursor:
            row = await cursor.fetchone()
        return ApprovalRow(*row) if row is not None else None

    async def list_approvals(self, session_id: str) -> list[ApprovalRow]:
        """A session's approvals, oldest first."""
        async with self._conn.execute(
            f"SELECT {APPROVAL_COLUMNS} FROM plan_approvals WHERE session_id = ? "
            "ORDER BY created_at, rowid",
            (session_id,),
        ) as cursor:
            rows = await cursor.fetchall()
        return [ApprovalRow(*row) for row in rows]

    @staticmethod
    async def write_approval(conn: aiosqlite.Connection, row: ApprovalRow) -> None:
        """Write back an approval's mutable fields inside the caller's transaction."""
        await conn.execute(
            "UPDATE plan_approvals SET status = ?, status_code = ?, decided_at = ?, "
            "permission_mode = ?, execution_id = ?, execution_state = ?, execution_turn_id = ? "
            "WHERE id = ?",
            (
                row.status,
                row.status_code,
                row.decided_at,
                row.permission_mode,
                row.execution_id,
                row.execution_state,
                row.execution_turn_id,
                row.id,
            ),
        )

    async def update_approval(self, row: ApprovalRow) -> None:
        """Write back an approval in its own transaction."""
        async with self.transaction() as conn:
            await self.write_approval(conn, row)

    # -- command audit ------------------------------------------------------------------

    async def _upsert(self, table: str, values: dict[str, Any]) -> None:
        """Insert a row keyed by ``id``, or update the existing one, in one transaction."""
        columns = ", ".join(values)
        placeholders = ", ".join("?" for _ in values)
        updates = ", ".join(f"{c} = excluded.{c}" for c in values if c != "id")
        async with self.transaction() as conn:
            await conn.execute(
                f"INSERT INTO {table} ({columns}) VALUES ({placeholders}) "
                f"ON CONFLICT (id) DO UPDATE SET {updates}",
                tuple(values.values()),
            )

    async def record_command(self, values: dict[str, Any]) -> None:
        """Insert or complete a command_audit row (keyed by ``id``)."""
        await self._upsert("command_audit", values)

    # -- startup recovery (§4) ----------------------------------------------------------

    async def recover(self, now: int) -> tuple[int, int, int]:
        """One transaction, before any request is served: interrupt what a previous
        process left pending, queued, running or active, and fail the scheduled runs it
        left running. Nothing is resumed.

        Returns the numbers of approvals, executions and turns interrupted. Those UPDATEs
        reach their rows through partial indexes, so their cost follows the active rows.
        """
        async with self.transaction() as conn:
            approvals = await conn.execute(
                "UPDATE plan_approvals SET status = 'interrupted', "
                "status_code = 'TURN_INTERRUPTED', decided_at = ? WHERE status = 'pending'",
                (now,),
            )
            executions = await conn.execute(
                "UPDATE plan_approvals SET execution_state = 'interrupted' "
                "WHERE execution_state IN ('queued', 'running')"
            )
            turns = await conn.execute(
                "UPDATE turns SET state = 'interrupted', ended_at = ? WHERE state = 'active'",
                (now,),
            )
            # A scheduled run's turn was just interrupted: the run failed. (The published
            # schema has no index for this; the run history is small.)
            await conn.execute(
                "UPDATE scheduled_task_runs SET outcome = 'failed', "
                "error_code = 'TURN_INTERRUPTED', "
                "error_message = 'the host stopped before the run finished' "
                "WHERE outcome = 'running'"
            )
        return approvals.rowcount, executions.rowcount, turns.rowcount

    # -- scheduled tasks ----------------------------------------------------------------

    async def insert_task(self, task: dict[str, Any]) -> None:
        """Persist a new scheduled task (keys are scheduled_tasks columns)."""
        columns = ", ".join(task)
        async with self.transaction() as conn:
            await conn.execute(
                f"INSERT INTO scheduled_tasks ({columns}) VALUES ({', '.join('?' * len(task))})",
                tuple(task.values()),
            )

    async def _dicts(self, query: str, args: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        """Rows of ``query`` as column -> value mappings."""
        async with self._conn.execute(query, args) as cursor:
            names = [column[0] for column in cursor.description]
            rows = await cursor.fetchall()
        return [dict(zip(names, row, strict=True)) for row in rows]

    async def get_task(self, task_id: str) -> dict[str, Any] | None:
        """One scheduled task as a column -> value mapping, or None."""
        rows = await self._dicts("SELECT * FROM scheduled_tasks WHERE id = ?", (task_id,))
        return rows[0] if rows else None

    async def list_tasks(self) -> list[dict[str, Any]]:
        """Every scheduled task, oldest first."""
        return await self._dicts("SELECT * FROM scheduled_tasks ORDER BY created_at, id")

    async def update_task(self, task_id: str, changes: dict[str, Any]) -> None:
        """Change some columns of a task."""
        assignments = ", ".join(f"{column} = ?" for column in changes)
        async with self.transaction() as conn:
            await conn.execute(
                f"UPDATE scheduled_tasks SET {assignments} WHERE id = ?",
                (*changes.values(), task_id),
            )

    async def delete_task(self, task_id: str) -> None:
        """Remove a task (its run history stays for audit)."""
        async with self.transaction() as conn:
            await conn.execute("DELETE FROM scheduled_tasks WHERE id = ?", (task_id,))

    async def record_task_run(self, run: dict[str, Any]) -> None:
        """Insert or update a scheduled_task_runs row (keyed by ``id``)."""
        await self._upsert("scheduled_task_runs", run)

    async def last_task_run(self, task_id: str) -> dict[str, Any] | None:
        """The newest run of a task."""
        rows = await self._dicts(
            "SELECT * FROM scheduled_task_runs WHERE task_id = ? "
            "ORDER BY started_at DESC, rowid DESC LIMIT 1",
            (task_id,),
        )
        return rows[0] if rows else None


def _file_uri(path: Path) -> str:
    """An SQLite URI for ``path`` that refuses symbolic links."""
    quoted = str(path).replace("%", "%25").replace("?", "%3f").replace("#", "%23")
    return f"file:{quoted}?nofollow=1"


async def _insert_transcript(
    conn: aiosqlite.Connection,
    session_id: str,
    turn_id: str | None,
    role: str,
    content: dict[str, Any],
    at: int,
) -> None:
    """One transcript row, inside the caller's transaction."""
    await conn.execute(
        "INSERT INTO transcript (session_id, turn_id, role, content, created_at) "
        "VALUES (?, ?, ?, ?, ?)",
        (session_id, turn_id, role, _json_column(content), at),
    )


def _json_column(value: Any) -> str:
    """JSON text for a TEXT column: UTF-8 when it can be, else with ASCII escapes (a lone
    surrogate from a model's reply cannot be stored as UTF-8)."""
    text = dumps(value)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return dumps(value, ascii_only=True)
    return text


def _statements(script: str) -> list[str]:
    """Split a DDL script into statements (the published DDL has no ';' inside literals)."""
    lines = [line for line in script.splitlines() if not line.lstrip().startswith("--")]
    return [part.strip() for part in "\n".join(lines).split(";") if part.strip()]
