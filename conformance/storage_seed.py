"""Seeding storage files from the published DDL, and reading them back for comparison."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from pi_contract import schemas_dir

V8_TABLES = ("sessions", "transcript", "settings", "scheduled_tasks")


def seed_v8(path: Path, sessions: int, transcript_per_session: int) -> None:
    """Create a v8 database from the published DDL, with deterministic contents."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(path)) as conn:
        conn.executescript((schemas_dir() / "storage" / "v8.sql").read_text(encoding="utf-8"))
        for s in range(sessions):
            conn.execute(
                "INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    f"v8-session-{s}",
                    f"/projects/p{s}",
                    ("agent", "plan")[s % 2],
                    ("ask", "accept-edits", "auto")[s % 3],
                    "http://127.0.0.1:1/v1",
                    "old-model",
                    1_700_000_000_000 + s,
                    1_700_000_000_500 + s,
                ),
            )
            conn.executemany(
                "INSERT INTO transcript (session_id, turn_id, role, content, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                [
                    (
                        f"v8-session-{s}",
                        f"t{s}-{i // 2}",
                        ("user", "assistant")[i % 2],
                        json.dumps(
                            {"role": ("user", "assistant")[i % 2], "content": f"message {i} ✓"}
                        ),
                        1_700_000_001_000 + i,
                    )
                    for i in range(transcript_per_session)
                ],
            )
        conn.executemany(
            "INSERT INTO settings VALUES (?, ?)",
            [("theme", "dark"), ("telemetry", "off"), ("default_model", "old-model")],
        )
        conn.execute(
            "INSERT INTO scheduled_tasks (id, name, prompt, mode, created_at, updated_at) "
            "VALUES ('nightly', 'Nightly', 'Summarise the day', 'agent', 1, 2)"
        )
        conn.execute(
            "INSERT INTO plan_approvals VALUES ('old-pending', 'v8-session-1', ?, 'pending', "
            "NULL, 5, NULL)",
            (json.dumps({"title": "Old proposal", "steps": ["a"]}),),
        )
        conn.execute(
            "INSERT INTO plan_approvals VALUES ('old-changes', 'v8-session-1', ?, "
            "'changes_requested', 'more tests', 6, 7)",
            (json.dumps({"title": "Revised proposal"}),),
        )
        conn.commit()


def table_rows(path: Path, table: str) -> list[tuple[Any, ...]]:
    """Every row of ``table`` ordered by its first column (opened normally, so a hot
    journal left by a crash is rolled back first, as SQLite always does)."""
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()


def file_digest(path: Path) -> str:
    """SHA-256 of the database file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()
