"""The reference host's startup recovery fails a scheduled run the previous process left
running, so ``task/list`` does not show it running forever; nothing is resumed. (The
contract leaves how such a run reads to the host.)"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from hostkit import InProcessHost

from reference_host.storage import DB_FILE, Storage


def _database_with_runs(data_dir: Path) -> Path:
    async def create() -> None:
        storage = await Storage.open(data_dir)
        await storage.close()

    asyncio.run(create())
    path = data_dir / DB_FILE
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO scheduled_tasks (id, name, prompt, mode, created_at, updated_at) "
            "VALUES ('task', 'Nightly', 'Append a line', 'agent', 1, 1)"
        )
        conn.executemany(
            "INSERT INTO scheduled_task_runs (id, task_id, session_id, started_at, outcome) "
            "VALUES (?, 'task', NULL, ?, ?)",
            [("done", 1, "completed"), ("cut", 2, "running")],
        )
    return path


def test_recovery_fails_the_runs_left_running(tmp_path: Path) -> None:
    path = _database_with_runs(tmp_path)

    async def recover() -> None:
        storage = await Storage.open(tmp_path)
        try:
            await storage.recover(99)
        finally:
            await storage.close()

    asyncio.run(recover())
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT id, outcome, error_code FROM scheduled_task_runs ORDER BY id"
        ).fetchall()
    assert rows == [("cut", "failed", "TURN_INTERRUPTED"), ("done", "completed", None)]


def test_the_first_answer_after_a_restart_shows_the_run_failed(tmp_path: Path) -> None:
    _database_with_runs(tmp_path)
    host = InProcessHost(tmp_path, "--conformance")
    try:
        host.initialize()
        (task,) = host.request("task/list")["tasks"]
    finally:
        host.stop()
    assert task["lastRun"]["runId"] == "cut"
    assert task["lastRun"]["outcome"] == "failed"
    assert task["lastRun"]["error"]["code"] == "TURN_INTERRUPTED"
