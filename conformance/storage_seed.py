"""Seeding storage files from the published DDL, and reading them back for comparison.

Every seed is a database a real host could have written: it satisfies its own foreign
keys (a unit test runs ``PRAGMA foreign_key_check`` on each). Its ids are not a tidy
sequence: transcript ids have gaps and interleave sessions, approvals are inserted out of
time order, so that a migration that renumbers or reorders rows is seen.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pi_contract import schemas_dir

V8_TABLES = ("sessions", "transcript", "settings", "scheduled_tasks")
V8_STATUS_TO_V10 = {
    "pending": "interrupted",
    "approved": "approved",
    "rejected": "rejected",
    "changes_requested": "rejected",
}
LEGACY_DEADLINE_MS = 30 * 60 * 1000


@dataclass(frozen=True)
class V8Approval:
    """One row of the v8 plan_approvals table (the session is named by its index)."""

    id: str
    session: int
    proposal_json: str
    status: str
    feedback: str | None
    created_at: int
    decided_at: int | None

    @property
    def legacy_title(self) -> str:
        """The v10 title the published mapping (schemas/storage/v8.sql) gives this row."""
        try:
            proposal = json.loads(self.proposal_json)
        except ValueError:
            return ""
        if not isinstance(proposal, dict) or "title" not in proposal:
            return ""
        title = proposal["title"]
        return title if isinstance(title, str) else json.dumps(title, separators=(",", ":"))


DEFAULT_APPROVALS = (
    V8Approval(
        "old-changes", -1, json.dumps({"title": "Revised proposal"}), "changes_requested",
        "more tests", 6, 7,
    ),
    V8Approval(
        "old-pending", -1, json.dumps({"title": "Old proposal", "steps": ["a"]}), "pending",
        None, 5, None,
    ),
)  # fmt: skip
"""The approvals every default v8 seed holds, in its last session (the later one inserted
first)."""

LEGACY_APPROVALS: dict[str, V8Approval] = {
    # One row per v8 status, each with another shape of proposal_json.
    "pending": V8Approval(
        "v8-plan-17", 0,
        json.dumps({"title": "Cache the index", "steps": ["measure", "cache"]}),
        "pending", None, 1_700_000_900_000, None,
    ),
    "approved": V8Approval(
        "v8-plan-3", 0, json.dumps({"title": 42, "proposedCommands": ["make"]}),
        "approved", None, 1_700_000_100_000, 1_700_000_160_000,
    ),
    "rejected": V8Approval(
        "v8-plan-9", 0, "not json at all", "rejected", "no", 1_700_000_500_000,
        1_700_000_520_000,
    ),
    "changes_requested": V8Approval(
        "v8-plan-11", 0, json.dumps({"steps": ["only steps, no title"]}),
        "changes_requested", "add tests first", 1_700_000_300_000, 1_700_000_330_000,
    ),
    # A decided row without a decision time (v8 allows it), and a title written with JSON
    # escapes (Python's default json.dumps): a quote as \" and "é" as \u00e9.
    "rejected with no decision time": V8Approval(
        "v8-plan-23", 0, json.dumps({"title": 'Say "café" twice', "steps": ["greet"]}),
        "rejected", "not now", 1_700_000_700_000, None,
    ),
}  # fmt: skip
"""A v8 approval of each status, for the scenarios about legacy approvals."""


def transcript_ids(sessions: int, per_session: int) -> list[tuple[int, int, int]]:
    """(id, session, index in the session) of every transcript row: sessions interleaved,
    ids rising with gaps."""
    rows: list[tuple[int, int, int]] = []
    next_id = 3
    for index in range(per_session):
        for session in range(sessions):
            rows.append((next_id, session, index))
            next_id += 1 + (index + session) % 4
    return rows


def _role(index: int) -> str:
    """The role of a session's transcript row ``index``: user and assistant in turn, and
    one system row (v8 allows the role)."""
    return "system" if index == 2 else ("user", "assistant")[index % 2]


def _content(index: int) -> str | list[dict[str, str]]:
    """The content of a session's transcript row ``index``: text, and for every other
    assistant row an array of text parts, the other form Chat Completions gives it."""
    text = f"message {index} ✓"
    return [{"type": "text", "text": text}] if index % 4 == 3 else text


def seed_v8(
    path: Path,
    sessions: int,
    transcript_per_session: int,
    approvals: Sequence[V8Approval] = DEFAULT_APPROVALS,
) -> None:
    """Create a v8 database from the published DDL, with deterministic contents."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(path)) as conn:
        conn.executescript((schemas_dir() / "storage" / "v8.sql").read_text(encoding="utf-8"))
        for s in reversed(range(sessions)):  # inserted newest first
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
            "INSERT INTO transcript (id, session_id, turn_id, role, content, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [
                (
                    row_id,
                    f"v8-session-{s}",
                    f"t{s}-{i // 2}",
                    _role(i),
                    json.dumps({"role": _role(i), "content": _content(i)}),
                    1_700_000_001_000 + i,
                )
                for row_id, s, i in transcript_ids(sessions, transcript_per_session)
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
        # A second task with no column at its default: a migration that rewrites a column
        # with the v10 default (enabled, mode, permission mode) cannot pass unnoticed.
        conn.execute(
            "INSERT INTO scheduled_tasks VALUES ('weekly', 'Weekly', 'Plan the week', 'plan', "
            "'/projects/p0', 'http://127.0.0.1:1/v1', 'old-model', 'accept-edits', "
            "1700000900000, 0, 3, 4)"
        )
        if sessions:
            conn.executemany(
                "INSERT INTO plan_approvals VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        a.id,
                        f"v8-session-{a.session % sessions}",
                        a.proposal_json,
                        a.status,
                        a.feedback,
                        a.created_at,
                        a.decided_at,
                    )
                    for a in approvals
                ],
            )
        conn.commit()


def seed_other_version(path: Path, version: int) -> None:
    """A small database at schema ``version`` (one the host does not know)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY)")
        conn.execute("INSERT INTO sessions VALUES ('kept')")
        conn.execute(f"PRAGMA user_version = {int(version)}")
        conn.commit()


def seed_v10(path: Path) -> None:
    """A v10 database from the published DDL holding one session."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(path)) as conn:
        conn.executescript((schemas_dir() / "storage" / "v10.sql").read_text(encoding="utf-8"))
        conn.execute(
            "INSERT INTO sessions (id, workspace_root, created_at, updated_at) "
            "VALUES ('elsewhere', NULL, 1, 1)"
        )
        conn.commit()


def foreign_key_problems(path: Path) -> list[tuple[Any, ...]]:
    """``PRAGMA foreign_key_check`` of a seeded file (empty when every key holds)."""
    with closing(sqlite3.connect(path)) as conn:
        return [tuple(row) for row in conn.execute("PRAGMA foreign_key_check").fetchall()]


def columns_of(path: Path, table: str) -> list[str]:
    """The column names of ``table``, in their stored order."""
    with closing(sqlite3.connect(path)) as conn:
        return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]


def table_rows(
    path: Path, table: str, columns: Sequence[str] | None = None
) -> list[tuple[Any, ...]]:
    """Every row of ``table`` (``columns`` only, by name, when given) ordered by its first
    column (opened normally, so a hot journal left by a crash is rolled back first, as
    SQLite always does)."""
    selected = ", ".join(columns) if columns else "*"
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute(f"SELECT {selected} FROM {table} ORDER BY 1").fetchall()


def file_digest(path: Path) -> str:
    """SHA-256 of the database file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()
