"""SIGKILL during the v8 -> v10 storage migration (ADR 0053 §7) never leaves a half-migrated file.

One large v8 database (100 000 transcript rows) is built once. For each kill point a copy
of it is migrated by a real ``python -m reference_host`` process that is SIGKILLed a
seeded-random delay after it logs the start of the migration. The file is then opened
with plain sqlite3 in normal mode, so a hot rollback journal is rolled back exactly as any
later opener would, and must read either as the untouched v8 file or as a complete v10
one. The migration's cost must also not follow the transcript's size: it never copies it.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import selectors
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from collections import Counter
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conformance.storage_seed import V8_TABLES, file_digest, seed_v8
from pi_contract import schemas_dir

DB_FILE = "host.db"
START_LINE = "migrating storage schema v8 to v10"
DONE_LINE = "storage schema migrated to v10"
ROOTPAGES_QUERY = (
    "SELECT name, rootpage FROM sqlite_schema WHERE tbl_name = 'transcript' ORDER BY name"
)
SCHEMA_QUERY = (
    "SELECT type, name, tbl_name, sql FROM sqlite_schema "
    "WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name"
)
ALL_V8_TABLES = (*V8_TABLES, "plan_approvals")
SESSIONS = 100
LARGE_PER_SESSION = 1_000  # 100 000 transcript rows
KILL_SEED = 0xAD_0053
KILL_POINTS = 30
KILLS_AT_ZERO = 3
KILLS_LATE = 2
LATE_KILL_FACTOR = 20
WINDOW_RUNS = 5
LINE_TIMEOUT_S = 30.0
EXIT_TIMEOUT_S = 30.0
STATUS_V8_TO_V10 = {
    "pending": "interrupted",
    "changes_requested": "rejected",
    "approved": "approved",
    "rejected": "rejected",
}


@dataclass(frozen=True)
class V8Snapshot:
    """The logical contents of the pristine v8 file."""

    path: Path
    digest: str
    user_version: int
    schema: list[tuple[Any, ...]]
    transcript_rootpages: list[tuple[Any, ...]]
    columns: dict[str, list[str]]
    rows: dict[str, list[tuple[Any, ...]]]


# -- building and reading the files ---------------------------------------------------------


def build_v8(path: Path, per_session: int) -> None:
    """The deterministic seed_v8 contents plus one approval row of each remaining status."""
    seed_v8(path, SESSIONS, per_session)
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.executemany(
            "INSERT INTO plan_approvals VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                ("old-approved", "v8-session-2", json.dumps({"title": "Done"}), "approved",
                 None, 8, 9),
                ("old-rejected", "v8-session-3", "not json at all", "rejected", "no", 10, 11),
            ],
        )  # fmt: skip


def v10_schema() -> list[tuple[Any, ...]]:
    """The schema of a database created fresh from the published v10 DDL."""
    with closing(sqlite3.connect(":memory:")) as conn:
        conn.executescript((schemas_dir() / "storage" / "v10.sql").read_text(encoding="utf-8"))
        return conn.execute(SCHEMA_QUERY).fetchall()


def columns_of(conn: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]


def select(conn: sqlite3.Connection, table: str, columns: list[str]) -> list[tuple[Any, ...]]:
    return conn.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY 1").fetchall()


def snapshot(path: Path) -> V8Snapshot:
    with closing(sqlite3.connect(path)) as conn:
        columns = {table: columns_of(conn, table) for table in ALL_V8_TABLES}
        return V8Snapshot(
            path=path,
            digest=file_digest(path),
            user_version=conn.execute("PRAGMA user_version").fetchone()[0],
            schema=conn.execute(SCHEMA_QUERY).fetchall(),
            transcript_rootpages=conn.execute(ROOTPAGES_QUERY).fetchall(),
            columns=columns,
            rows={table: select(conn, table, cols) for table, cols in columns.items()},
        )


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> V8Snapshot:
    path = tmp_path_factory.mktemp("pristine") / "large-v8.db"
    build_v8(path, LARGE_PER_SESSION)
    snap = snapshot(path)
    assert snap.user_version == 8
    assert len(snap.rows["transcript"]) >= 100_000
    assert {row[3] for row in snap.rows["plan_approvals"]} == set(STATUS_V8_TO_V10)
    return snap


def copy_durably(source: Path, data_dir: Path) -> None:
    """Copy the file and flush it, so the host's own fsyncs flush only its own writes
    (otherwise the first fsync writes back the whole fresh copy and the measured window
    grows with the file's size, not with the migration's work)."""
    target = data_dir / DB_FILE
    shutil.copyfile(source, target)
    fd = os.open(target, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fresh_data_dir(source: Path, root: Path, name: str) -> Path:
    data_dir = root / name
    data_dir.mkdir()
    copy_durably(source, data_dir)
    return data_dir


# -- driving the host process ---------------------------------------------------------------


class StderrLines:
    """Reads the host's stderr line by line, each with the moment it was read."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        self._fd = proc.stderr.fileno()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._fd, selectors.EVENT_READ)
        self._buffer = b""
        self.seen: list[str] = []

    def wait_for(self, text: str, timeout: float = LINE_TIMEOUT_S) -> float:
        """perf_counter() when the first line containing ``text`` arrived (bounded)."""
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\n", 1)
                line = raw.decode("utf-8", "replace")
                self.seen.append(line)
                if text in line:
                    return time.perf_counter()
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._selector.select(remaining):
                pytest.fail(f"no stderr line with {text!r} within {timeout}s: {self.seen}")
            chunk = os.read(self._fd, 65536)
            if not chunk:
                pytest.fail(f"stderr ended before a line with {text!r}: {self.seen}")
            self._buffer += chunk

    def close(self) -> None:
        self._selector.close()


def start_host(data_dir: Path) -> subprocess.Popen[bytes]:
    # stdin stays open (a pipe we never write), so the host does not stop on EOF.
    return subprocess.Popen(
        [sys.executable, "-m", "reference_host", "--data-dir", str(data_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def finish(proc: subprocess.Popen[bytes], lines: StderrLines) -> int:
    lines.close()
    for stream in (proc.stdin, proc.stderr):
        if stream is not None:
            stream.close()
    try:
        return proc.wait(timeout=EXIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=EXIT_TIMEOUT_S)
        raise


def migration_window(source: Path, root: Path, name: str) -> float:
    """Seconds between the host's 'migrating' and 'migrated' log lines, as seen here."""
    data_dir = fresh_data_dir(source, root, name)
    proc = start_host(data_dir)
    lines = StderrLines(proc)
    try:
        started = lines.wait_for(START_LINE)
        done = lines.wait_for(DONE_LINE)
        lines.wait_for("serving protocol v9")
    finally:
        assert proc.stdin is not None
        proc.stdin.close()  # EOF: the host stops cleanly
        status = finish(proc, lines)
    assert status == 0, lines.seen
    with closing(sqlite3.connect(data_dir / DB_FILE)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 10
    return done - started


def kill_during_migration(source: Path, data_dir: Path, delay: float) -> None:
    copy_durably(source, data_dir)
    proc = start_host(data_dir)
    lines = StderrLines(proc)
    try:
        started = lines.wait_for(START_LINE)
        # The deliberate crash point: the seeded delay after the line arrived. Waiting for
        # the process's exit until then (it must not exit by itself) keeps this core free
        # for the host; Popen.wait's timeout ends at the deadline to within about 0.1 ms.
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=max(0.0, started + delay - time.perf_counter()))
        proc.send_signal(signal.SIGKILL)
    finally:
        status = finish(proc, lines)
    assert status == -signal.SIGKILL, f"the host exited with {status} before the kill: {lines.seen}"


# -- judging a file after a crash -----------------------------------------------------------


def outcome(path: Path, pristine: V8Snapshot, v10: list[tuple[Any, ...]]) -> str:
    """'v8' or 'v10' after asserting the file is exactly one of the two."""
    with closing(sqlite3.connect(path)) as conn:  # normal mode: rolls back a hot journal
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        schema = conn.execute(SCHEMA_QUERY).fetchall()
        if version == 8:
            assert schema == pristine.schema, "a v8 file whose schema changed"
            for table, columns in pristine.columns.items():
                assert columns_of(conn, table) == columns
                assert select(conn, table, columns) == pristine.rows[table], table
            return "v8"
        assert version == 10, f"user_version {version} is neither 8 nor 10"
        assert schema == v10, "a v10 file whose schema is not the published v10 schema"
        # The transcript and its index are the very b-trees of the v8 file: never rebuilt.
        assert conn.execute(ROOTPAGES_QUERY).fetchall() == pristine.transcript_rootpages
        for table in V8_TABLES:
            columns = pristine.columns[table]
            assert select(conn, table, columns) == pristine.rows[table], table
        assert (
            conn.execute("SELECT count(*) FROM sessions WHERE shell_id IS NOT NULL").fetchone()[0]
            == 0
        )
        migrated = {
            row[0]: row[1:]
            for row in conn.execute(
                "SELECT id, session_id, status, legacy_proposal_json FROM plan_approvals"
            )
        }
        old = pristine.rows["plan_approvals"]
        assert set(migrated) == {row[0] for row in old}
        for approval_id, session_id, proposal, status, feedback, *_ in old:
            new_session, new_status, legacy = migrated[approval_id]
            assert new_session == session_id
            assert new_status == STATUS_V8_TO_V10[status]
            assert json.loads(legacy) == {"proposal": proposal, "feedback": feedback}
        return "v10"


# -- the tests ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def large_windows(pristine: V8Snapshot, tmp_path_factory: pytest.TempPathFactory) -> list[float]:
    root = tmp_path_factory.mktemp("window-large")
    return [migration_window(pristine.path, root, f"run-{i}") for i in range(WINDOW_RUNS)]


def test_sigkill_during_migration_leaves_v8_or_complete_v10(
    pristine: V8Snapshot, large_windows: list[float], tmp_path: Path
) -> None:
    # The slowest of the measured runs, so that the kill range still covers the window
    # when this machine is busier during the kills than during the measurement.
    window = max(large_windows)
    rng = random.Random(KILL_SEED)
    # A few kills land surely before and surely after the transaction, so both outcomes
    # occur however busy the machine is; the seeded ones sample the window in between.
    delays = (
        [0.0] * KILLS_AT_ZERO
        + [LATE_KILL_FACTOR * window] * KILLS_LATE
        + [rng.uniform(0.0, 1.5 * window) for _ in range(KILL_POINTS - KILLS_AT_ZERO)]
    )
    v10 = v10_schema()
    results: list[tuple[float, str]] = []
    for i, delay in enumerate(delays):
        data_dir = tmp_path / f"kill-{i}"
        data_dir.mkdir()
        kill_during_migration(pristine.path, data_dir, delay)
        journal = data_dir / f"{DB_FILE}-journal"
        hot = journal.exists() and journal.stat().st_size > 0  # rolled back by the next open
        results.append((delay, outcome(data_dir / DB_FILE, pristine, v10) + "*" * hot))

    counts = Counter(result.rstrip("*") for _, result in results)
    runs = ", ".join(f"{w * 1000:.2f}" for w in large_windows)
    print(  # shown with -s: the measured window and where the kills landed
        f"\nmigration window {window * 1000:.2f} ms "
        f"(median {statistics.median(large_windows) * 1000:.2f} ms; runs: {runs} ms); "
        f"outcomes {dict(counts)} (* = a non-empty rollback journal was left); "
        + ", ".join(f"{d * 1000:.2f}ms->{r}" for d, r in sorted(results))
    )
    assert file_digest(pristine.path) == pristine.digest, "the pristine copy was modified"
    assert counts["v8"] >= 1 and counts["v10"] >= 1, (
        f"the kills did not cover the migration window ({window * 1000:.2f} ms): {results}"
    )
