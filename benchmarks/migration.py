"""Benchmark: the v8 -> v10 migration's time does not follow the transcript's length.

The migration leaves the transcript table as it is (ADR 0053 §7 keeps transcript data;
this project adds that it is never copied). The tests prove it exactly: the transcript's
root pages are unchanged after a migration. This benchmark shows the consequence in time:
each round migrates a fresh copy of a v8 database with a long transcript and one with a
short transcript, in turns, timing ``Storage.open`` (which runs the migration).

    python -m benchmarks.migration [--quick] [--rounds N] [--rows N]
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._measure import alternate, parser, positive_int
from conformance.storage_seed import seed_v8
from reference_host.datadir import DB_FILE
from reference_host.storage import Storage

GOAL = 1.2
SMALL = 1_000
SESSIONS = 10


def migrate_once(pristine: Path, work: Path) -> float:
    """Seconds spent in ``Storage.open`` on a fresh copy of ``pristine`` (the migration)."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir()
    copy = work / DB_FILE
    shutil.copy(pristine, copy)
    # Flush the copy first, or the migration's own fsync would write the whole file back.
    with copy.open("rb+") as handle:
        os.fsync(handle.fileno())

    async def run() -> float:
        started = time.perf_counter()
        storage = await Storage.open(work)
        elapsed = time.perf_counter() - started
        if await storage.user_version() != 10:
            raise AssertionError("the database was not migrated to v10")
        await storage.close()
        return elapsed

    return asyncio.run(run())


def main(argv: list[str]) -> int:
    """Print the ratio of migrating a long transcript to migrating a short one."""
    cli = parser(__doc__.splitlines()[0] if __doc__ else None)
    cli.add_argument("--rows", type=positive_int, help="transcript rows of the large database")
    args = cli.parse_args(argv)
    rows = args.rows or (100_000 if args.quick else 1_000_000)
    rounds = args.rounds or (6 if args.quick else 20)
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        large, small = root / "v8-large" / DB_FILE, root / "v8-small" / DB_FILE
        seed_v8(large, sessions=SESSIONS, transcript_per_session=rows // SESSIONS)
        seed_v8(small, sessions=SESSIONS, transcript_per_session=SMALL // SESSIONS)
        size_mb = large.stat().st_size / 1e6
        print(f"v8 databases: {rows:,} transcript rows ({size_mb:.0f} MB) and {SMALL:,} rows")
        comparison = alternate(
            f"migration v8 -> v10, {rows:,} vs {SMALL:,} transcript rows",
            lambda: migrate_once(large, root / "work"),
            lambda: migrate_once(small, root / "work"),
            rounds,
        )
        print(comparison.line("large", "small", GOAL))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
