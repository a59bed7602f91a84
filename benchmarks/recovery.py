"""Benchmark: startup recovery follows the active work, not the history.

Two v10 databases are seeded directly with SQLite: one with a long history (finished
approvals and finished turns) and one with 10 history rows. Both hold the same active
work: a pending approval, a queued and a running execution, three active turns. Each
round re-arms that active work, then times what the reference host does before it serves
its first request: ``Storage.open`` and the recovery transaction (``Storage.recover``).

    python -m benchmarks.recovery [--quick] [--rounds N] [--rows N]
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

from benchmarks._measure import alternate, parser, positive_int
from reference_host.datadir import DB_FILE
from reference_host.storage import Storage, v10_ddl

GOAL = 1.2
SMALL = 10
ACTIVE_SESSIONS = ("s-pending", "s-queued", "s-running")
_SHA = "0" * 64


def _history(rows: int) -> Iterator[tuple[object, ...]]:
    statuses = ("approved", "rejected", "expired", "interrupted")
    for n in range(rows):
        status = statuses[n % 4]
        executed = status == "approved"
        yield (
            f"apr-{n}",
            f"s-history-{n % 100}",
            f"turn-{n}",
            "Finished plan",
            "Go ahead?",
            f".pi/plan/plan-{n}.md",
            _SHA,
            100,
            n,
            n + 1_800_000,
            status,
            "auto" if executed else None,
            f"exe-{n}" if executed else None,
            ("completed", "interrupted")[n % 2] if executed else None,
        )


def seed(path: Path, history: int) -> None:
    """A v10 database with ``history`` finished approvals and as many finished turns."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.executescript(v10_ddl())
        conn.execute("BEGIN")
        sessions = [f"s-history-{n}" for n in range(100)] + list(ACTIVE_SESSIONS)
        conn.executemany(
            "INSERT INTO sessions (id, workspace_root, mode, created_at, updated_at) "
            "VALUES (?, '/project', 'plan', 1, 1)",
            [(s,) for s in sessions],
        )
        conn.executemany(
            "INSERT INTO plan_approvals (id, session_id, turn_id, title, question, "
            "artifact_path, artifact_sha256, artifact_bytes, created_at, expires_at, status, "
            "permission_mode, execution_id, execution_state) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            _history(history),
        )
        conn.executemany(
            "INSERT INTO turns (id, session_id, kind, state, started_at, ended_at) "
            "VALUES (?, ?, 'prompt', 'completed', ?, ?)",
            ((f"turn-{n}", f"s-history-{n % 100}", n, n + 1) for n in range(history)),
        )
        for n, session in enumerate(ACTIVE_SESSIONS):
            conn.execute(
                "INSERT INTO plan_approvals (id, session_id, turn_id, title, question, "
                "artifact_path, artifact_sha256, artifact_bytes, created_at, expires_at, "
                "status) VALUES (?, ?, 'turn', 'Active plan', 'Go?', '.pi/plan/a.md', ?, 1, "
                "1, 1800001, 'rejected')",
                (f"apr-{session}", session, _SHA),
            )
            conn.execute(
                "INSERT INTO turns (id, session_id, kind, state, started_at) "
                "VALUES (?, ?, 'prompt', 'completed', ?)",
                (f"turn-{session}", session, n),
            )
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def rearm(path: Path) -> None:
    """Put the active work back as a crashed host would have left it."""
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("BEGIN")
        conn.execute(
            "UPDATE plan_approvals SET status = 'pending', status_code = NULL, "
            "decided_at = NULL, permission_mode = NULL, execution_id = NULL, "
            "execution_state = NULL WHERE id = 'apr-s-pending'"
        )
        for session, state in (("s-queued", "queued"), ("s-running", "running")):
            conn.execute(
                "UPDATE plan_approvals SET status = 'approved', permission_mode = 'auto', "
                "execution_id = ?, execution_state = ? WHERE id = ?",
                (f"exe-{session}", state, f"apr-{session}"),
            )
        conn.execute("UPDATE turns SET state = 'active', ended_at = NULL WHERE id LIKE 'turn-s-%'")
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def recover_once(data_dir: Path) -> float:
    """Seconds from opening the database to the end of the recovery transaction."""
    rearm(data_dir / DB_FILE)

    async def run() -> float:
        started = time.perf_counter()
        storage = await Storage.open(data_dir)
        interrupted = await storage.recover(2_000_000)
        elapsed = time.perf_counter() - started
        await storage.close()
        if interrupted != (1, 2, 3):
            raise AssertionError(f"recovery interrupted {interrupted}, expected (1, 2, 3)")
        return elapsed

    return asyncio.run(run())


def main(argv: list[str]) -> int:
    """Print the ratio of recovery with a long history to recovery with a short one."""
    cli = parser(__doc__.splitlines()[0] if __doc__ else None)
    cli.add_argument("--rows", type=positive_int, help="history rows of the large database")
    args = cli.parse_args(argv)
    rows = args.rows or (100_000 if args.quick else 1_000_000)
    rounds = args.rounds or (10 if args.quick else 30)
    with tempfile.TemporaryDirectory() as scratch:
        large, small = Path(scratch) / "large", Path(scratch) / "small"
        started = time.perf_counter()
        seed(large / DB_FILE, rows)
        seed(small / DB_FILE, SMALL)
        print(f"seeded {rows:,} and {SMALL} history rows in {time.perf_counter() - started:.1f} s")
        recover_once(large)  # warm-up: both files in the page cache
        recover_once(small)
        comparison = alternate(
            f"startup recovery, history of {rows:,} vs {SMALL} approvals and turns each",
            lambda: recover_once(large),
            lambda: recover_once(small),
            rounds,
        )
        print(comparison.line("large", "small", GOAL))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
