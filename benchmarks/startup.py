"""Benchmark: host start-up, from spawning the process to the first ``initialize`` answer.

The floor is the interpreter starting and importing what any asyncio + SQLite host needs:
``python -c "import asyncio, sqlite3, aiosqlite"``, spawned and waited for. The host is
started as the harness starts it (``python -m reference_host --data-dir DIR
--conformance``, DIR a fresh empty folder), sent ``initialize``, and timed until its
answer arrives; it is then stopped outside the timing.

    python -m benchmarks.startup [--quick] [--rounds N]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._measure import Comparison, alternate, parser

GOAL = 1.5
# Both run with bytecode caching on, as an installed wheel has it, whatever the calling
# environment (tox sets PYTHONDONTWRITEBYTECODE) says.
ENV = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
FLOOR = (sys.executable, "-c", "import asyncio, sqlite3, aiosqlite")
HOST = (sys.executable, "-m", "reference_host")
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": 9, "clientInfo": {"name": "benchmark"}},
}


def floor_once() -> float:
    """Seconds to spawn the floor command and see it exit."""
    started = time.perf_counter()
    subprocess.run(FLOOR, check=True, env=ENV)
    return time.perf_counter() - started


def host_once(data_dir: Path) -> float:
    """Seconds from spawning the host on an empty ``data_dir`` to its initialize answer."""
    started = time.perf_counter()
    process = subprocess.Popen(
        [*HOST, "--data-dir", str(data_dir), "--conformance"],
        env=ENV,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
    process.stdin.flush()
    answer = process.stdout.readline()
    elapsed = time.perf_counter() - started
    process.stdin.close()
    process.wait(10)
    process.stdout.close()
    if json.loads(answer).get("id") != 1 or "result" not in json.loads(answer):
        raise AssertionError(f"unexpected first answer: {answer[:200]!r}")
    return elapsed


def compare(rounds: int) -> Comparison:
    """Host start-up against the floor, in alternation, each host on a fresh data dir."""
    with tempfile.TemporaryDirectory() as scratch:
        count = iter(range(1_000_000))

        def host() -> float:
            return host_once(Path(scratch) / f"data-{next(count)}")

        host()  # warm-up: byte-code caches and the page cache
        floor_once()
        return alternate("host start-up to the first answer", host, floor_once, rounds)


def main(argv: list[str]) -> int:
    """Print the ratio of host start-up to the floor."""
    args = parser(__doc__.splitlines()[0] if __doc__ else None).parse_args(argv)
    rounds = args.rounds or (6 if args.quick else 20)
    print(compare(rounds).line("host", "floor", GOAL))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
