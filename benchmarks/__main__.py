"""Run every benchmark in turn: ``python -m benchmarks [--quick]``."""

from __future__ import annotations

import sys

from benchmarks import (
    harness_overhead,
    large_plan,
    migration,
    recovery,
    startup,
    submit_plan,
)

BENCHMARKS = (submit_plan, recovery, migration, startup, harness_overhead, large_plan)


def main(argv: list[str]) -> int:
    """Run each benchmark with the same options; non-zero if any of them failed."""
    status = 0
    for benchmark in BENCHMARKS:
        print(f"== {benchmark.__name__.removeprefix('benchmarks.')}", flush=True)
        status |= benchmark.main(argv)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
