"""Read-only access to a host's published storage (schema v10, ``<data-dir>/host.db``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from conformance.storage_contract import SchemaShape, StoredValues, describe, stored_values

DB_FILE = "host.db"


class StorageInspector:
    """Opens the database read-only for each query, so it never holds a lock for long."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / DB_FILE

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        """A read-only connection to the database, closed after the block."""
        with self._connect() as conn:
            yield conn

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        assert self.path.exists(), f"the host created no database at {self.path}"
        uri = f"{self.path.resolve().as_uri()}?mode=ro"
        with closing(sqlite3.connect(uri, uri=True, timeout=10)) as conn:
            conn.row_factory = sqlite3.Row
            yield conn

    def user_version(self) -> int:
        """``PRAGMA user_version``."""
        with self._connect() as conn:
            return int(conn.execute("PRAGMA user_version").fetchone()[0])

    def rows(self, table: str, where: str = "", args: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        """Every row of ``table`` (optionally filtered), as dicts, in rowid order."""
        if not table.isidentifier():
            raise ValueError(f"not a table name: {table!r}")
        query = f"SELECT * FROM {table}" + (f" WHERE {where}" if where else "")
        with self._connect() as conn:
            return [dict(row) for row in conn.execute(query, args)]

    def columns(self, table: str) -> list[str]:
        """Column names of ``table``."""
        if not table.isidentifier():
            raise ValueError(f"not a table name: {table!r}")
        with self._connect() as conn:
            return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]

    def schema_dump(self) -> list[tuple[str, str, str, str | None]]:
        """(type, name, table, sql) of every schema object, sorted."""
        with self._connect() as conn:
            rows = conn.execute(
                "SELECT type, name, tbl_name, sql FROM sqlite_schema "
                "WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name"
            ).fetchall()
        return [(r[0], r[1], r[2], r[3]) for r in rows]

    def shape(self) -> SchemaShape:
        """The structure of the database, as SQLite describes it."""
        with self._connect() as conn:
            conn.row_factory = None
            return describe(conn)

    def values(self) -> StoredValues:
        """Every stored row of every table, keyed by primary key."""
        with self._connect() as conn:
            conn.row_factory = None
            return stored_values(conn)

    def journal_mode(self) -> str:
        """The journal mode recorded in the file (``wal`` for a WAL database)."""
        with self._connect() as conn:
            return str(conn.execute("PRAGMA journal_mode").fetchone()[0])
