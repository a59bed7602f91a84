"""Benchmark: the 1 MiB plan scenario against the empty plan scenario.

Both are examples of "Markdown is stored byte for byte" (artifact_integrity.feature):
the same steps, with a 1 MiB markdown and with an empty one. Each round runs the two
scenarios through the conformance suite (bundled reference host) in this process and
times each from setup to teardown. The ratio shows what the megabyte costs on top of a
scenario; the goal is on the 1 MiB scenario's own time.

    python -m benchmarks.large_plan [--quick] [--rounds N] [--driver inprocess]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Generator
from pathlib import Path

import pytest

import conformance.suite
from benchmarks._measure import Comparison, parser

GOAL_SECONDS = 0.5
SELECTION = "byte_for_byte and (MiB or empty)"


class Timer:
    """pytest plugin: wall time of each example, setup to teardown, by example name."""

    def __init__(self) -> None:
        self.samples: dict[str, list[float]] = {"1 MiB": [], "empty": []}

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, None, None]:
        started = time.perf_counter()
        yield
        example = item.name.partition("[")[2].rstrip("]")
        self.samples[example].append(time.perf_counter() - started)


def main(argv: list[str]) -> int:
    """Print the 1 MiB scenario's time, the empty one's, and their ratio."""
    cli = parser(__doc__.splitlines()[0] if __doc__ else None)
    cli.add_argument("--driver", choices=("subprocess", "inprocess"), default="subprocess")
    args = cli.parse_args(argv)
    rounds = args.rounds or (3 if args.quick else 10)
    suite = Path(conformance.suite.__file__).parent
    timer = Timer()
    with tempfile.TemporaryDirectory() as scratch:
        for _ in range(rounds + 1):  # the first round warms up and is dropped
            status = pytest.main(
                [
                    str(suite),
                    "--rootdir",
                    str(suite),
                    "-c",
                    str(suite / "pytest.ini"),
                    "-p",
                    "no:cacheprovider",
                    "-qq",
                    "--no-header",
                    "--basetemp",
                    str(Path(scratch) / "run"),
                    "--driver",
                    args.driver,
                    "-k",
                    SELECTION,
                ],
                plugins=[timer],
            )
            if status != 0:
                print(f"the scenarios did not pass (pytest exit status {status})", file=sys.stderr)
                return 1
    large, empty = timer.samples["1 MiB"][1:], timer.samples["empty"][1:]
    comparison = Comparison(f"1 MiB plan scenario ({args.driver} driver)", large, empty)
    median = statistics.median(large)
    verdict = "met" if median <= GOAL_SECONDS else "NOT met"
    print(comparison.line("1 MiB", "empty plan"))
    print(f"  1 MiB scenario median {median:.3f} s: goal <= {GOAL_SECONDS} s {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
