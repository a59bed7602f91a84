"""Benchmark: the v8 -> v10 migration's time does not follow the transcript's length.

The migration leaves the transcript table as it is (ADR 0053 §7 keeps transcript data;
this project adds that it is never copied). The tests prove it exactly: the transcript's
root pages are unchanged after a migration. This script shows the consequence in time.

    python benchmarks/migration_scaling.py [ROWS ...]
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

from conformance.storage_seed import seed_v8
from reference_host.storage import DB_FILE, Storage

RUNS = 5


def migrate_once(pristine: Path, work: Path) -> float:
    """Seconds spent in Storage.open on a fresh copy of ``pristine`` (the migration)."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir()
    shutil.copy(pristine, work / DB_FILE)

    async def run() -> float:
        started = time.perf_counter()
        storage = await Storage.open(work)
        elapsed = time.perf_counter() - started
        await storage.close()
        return elapsed

    return asyncio.run(run())


def main(argv: list[str]) -> int:
    """Print the best-of-RUNS migration time for each transcript size."""
    sizes = [int(a) for a in argv] or [10_000, 100_000, 400_000]
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        for rows in sizes:
            pristine = root / f"v8-{rows}" / DB_FILE
            seed_v8(pristine, sessions=10, transcript_per_session=rows // 10)
            best = min(migrate_once(pristine, root / "work") for _ in range(RUNS))
            print(f"{rows:>9} transcript rows: migration {best * 1000:8.2f} ms (best of {RUNS})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
