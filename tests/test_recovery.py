"""Startup recovery (ADR 0053 §4): one transaction, found through indexes."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from reference_host.storage import DB_FILE, Storage

RECOVERY_QUERIES = [
    "UPDATE plan_approvals SET status = 'interrupted' WHERE status = 'pending'",
    "UPDATE plan_approvals SET execution_state = 'interrupted' "
    "WHERE execution_state IN ('queued', 'running')",
    "UPDATE turns SET state = 'interrupted' WHERE state = 'active'",
]


def _fresh(tmp_path: Path) -> Path:
    async def create() -> None:
        storage = await Storage.open(tmp_path)
        await storage.close()

    asyncio.run(create())
    return tmp_path / DB_FILE


def test_recovery_reaches_its_rows_through_partial_indexes(tmp_path: Path) -> None:
    conn = sqlite3.connect(_fresh(tmp_path))
    for query in RECOVERY_QUERIES:
        plan = " ".join(row[-1] for row in conn.execute(f"EXPLAIN QUERY PLAN {query}"))
        assert "USING INDEX" in plan or "USING COVERING INDEX" in plan, (query, plan)
        assert "SCAN" not in plan.replace("SCAN plan_approvals USING", "").replace(
            "SCAN turns USING", ""
        ), (query, plan)


def test_recovery_interrupts_everything_active_and_nothing_else(tmp_path: Path) -> None:
    path = _fresh(tmp_path)
    conn = sqlite3.connect(path)
    conn.execute(
        "INSERT INTO sessions (id, mode, permission_mode, created_at, updated_at) "
        "VALUES ('s1', 'plan', 'ask', 1, 1), ('s2', 'agent', 'auto', 1, 1)"
    )
    approval = (
        "INSERT INTO plan_approvals (id, session_id, turn_id, title, question, artifact_path, "
        "artifact_sha256, artifact_bytes, created_at, expires_at, status, permission_mode, "
        "execution_id, execution_state) VALUES (?, ?, 't', 'T', 'Q', '.pi/plan/a.md', ?, 1, 1, "
        "2, ?, ?, ?, ?)"
    )
    digest = "0" * 64
    conn.executemany(
        approval,
        [
            ("pending", "s1", digest, "pending", None, None, None),
            ("running", "s2", digest, "approved", "auto", "e1", "running"),
            ("done", "s2", digest, "approved", "auto", "e0", "completed"),
            ("rejected", "s1", digest, "rejected", None, None, None),
        ],
    )
    conn.execute("INSERT INTO turns VALUES ('t1', 's2', 'execution', 'active', 1, NULL)")
    conn.execute("INSERT INTO turns VALUES ('t0', 's2', 'prompt', 'completed', 1, 2)")
    conn.commit()
    conn.close()

    async def recover() -> tuple[int, int, int]:
        storage = await Storage.open(tmp_path)
        try:
            return await storage.recover(99)
        finally:
            await storage.close()

    assert asyncio.run(recover()) == (1, 1, 1)
    conn = sqlite3.connect(path)
    rows = dict(
        conn.execute(
            "SELECT id, status || '/' || ifnull(execution_state, '-') FROM plan_approvals"
        ).fetchall()
    )
    assert rows == {
        "pending": "interrupted/-",
        "running": "approved/interrupted",
        "done": "approved/completed",
        "rejected": "rejected/-",
    }
    turns = dict(conn.execute("SELECT id, state FROM turns").fetchall())
    assert turns == {"t1": "interrupted", "t0": "completed"}
    modes = dict(conn.execute("SELECT id, mode FROM sessions").fetchall())
    assert modes == {"s1": "plan", "s2": "agent"}, "recovery must not touch session modes"
