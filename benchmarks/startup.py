"""Benchmark: host spawn -> first ``initialize`` answer, side by side with the floor.

The floor is ``python -c "import asyncio, sqlite3, aiosqlite"``: an interpreter that loads
what any asyncio + SQLite host must load, and exits. Both are timed from spawn, alternating,
in one run, so machine noise hits both alike. Each host start gets a fresh, empty data dir.
Both run with bytecode caching on (as an installed wheel has it), whatever
PYTHONDONTWRITEBYTECODE says in the calling environment.

    python benchmarks/startup.py [RUNS]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLOOR = (sys.executable, "-c", "import asyncio, sqlite3, aiosqlite")
HOST = (sys.executable, "-m", "reference_host")
ENV = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
INITIALIZE = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":9}}\n'


def time_floor() -> float:
    """Seconds from spawn to exit of the floor command."""
    started = time.perf_counter()
    subprocess.run(FLOOR, check=True, env=ENV)
    return time.perf_counter() - started


def time_host(data_dir: Path) -> float:
    """Seconds from spawn to the host's first answer line."""
    started = time.perf_counter()
    process = subprocess.Popen(
        [*HOST, "--data-dir", str(data_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=ENV,
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(INITIALIZE)
    process.stdin.flush()
    answer = process.stdout.readline()
    elapsed = time.perf_counter() - started
    process.stdin.close()
    process.wait()
    if b'"result"' not in answer:
        raise RuntimeError(f"the host did not initialize: {answer!r}")
    return elapsed


def main(argv: list[str]) -> int:
    """Print median and best of each, and the ratio of the medians."""
    runs = int(argv[0]) if argv else 20
    floor: list[float] = []
    host: list[float] = []
    with tempfile.TemporaryDirectory() as scratch:
        time_floor()  # warm the page cache and the bytecode caches of both
        time_host(Path(scratch) / "warm")
        for run in range(runs):
            floor.append(time_floor())
            host.append(time_host(Path(scratch) / f"data-{run}"))
    for name, samples in (("floor", floor), ("host", host)):
        print(
            f"{name:5}  median {statistics.median(samples) * 1000:6.1f} ms  "
            f"best {min(samples) * 1000:6.1f} ms  ({runs} runs)"
        )
    print(f"ratio of medians: {statistics.median(host) / statistics.median(floor):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
