"""Benchmark: what the harness itself costs per scenario, next to host start-up.

Runs the conformance suite (subprocess driver, bundled reference host) inside this
process with a small pytest plugin that measures each scenario from setup to teardown:

- wall time;
- harness CPU: this process, every thread (pytest-bdd, the client and its schema
  validation, the mock provider, the storage inspector, the reports);
- host CPU: the host processes the scenario started, counted once they are reaped.

After each scenario, outside its timing, the plugin spawns the host once more and times
spawn -> first ``initialize`` answer, so host start-up is sampled side by side with the
scenarios. The ratio reported is harness CPU per scenario over host start-up.

    python -m benchmarks.harness_overhead [--quick] [--areas A,B]
"""

from __future__ import annotations

import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path

import pytest

import conformance.suite
from benchmarks._measure import Comparison, parser
from benchmarks.startup import host_once
from conformance.commands.common import UsageProblem, checked_areas

QUICK_AREAS = "artifact_integrity,handshake"


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


@dataclass(frozen=True)
class Scenario:
    """The measurements of one scenario."""

    nodeid: str
    wall: float
    harness_cpu: float
    host_cpu: float


class Recorder:
    """pytest plugin: measures every scenario, then samples host start-up once."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self.scenarios: list[Scenario] = []
        self.startups: list[float] = []
        self.session_started = time.perf_counter()
        self.first_scenario: float | None = None

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, None, None]:
        if self.first_scenario is None:
            self.first_scenario = time.perf_counter()
        wall = time.perf_counter()
        harness = _cpu(resource.RUSAGE_SELF)
        host = _cpu(resource.RUSAGE_CHILDREN)
        yield
        self.scenarios.append(
            Scenario(
                item.nodeid,
                time.perf_counter() - wall,
                _cpu(resource.RUSAGE_SELF) - harness,
                _cpu(resource.RUSAGE_CHILDREN) - host,
            )
        )
        self.startups.append(host_once(self.scratch / f"startup-{len(self.startups)}"))


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.0f} ms"


def main(argv: list[str]) -> int:
    """Run the suite once and print the per-scenario figures and ratios."""
    cli = parser(__doc__.splitlines()[0] if __doc__ else None)
    cli.add_argument("--areas", help="feature areas to run (default: all; --quick: a few)")
    args = cli.parse_args(argv)
    try:
        checked_areas(args.areas)
    except UsageProblem as problem:
        cli.error(str(problem))
    areas = args.areas or (QUICK_AREAS if args.quick else None)
    suite = Path(conformance.suite.__file__).parent
    with tempfile.TemporaryDirectory() as scratch:
        recorder = Recorder(Path(scratch))
        pytest_args = [
            str(suite),
            "--rootdir",
            str(suite),
            "-c",
            str(suite / "pytest.ini"),
            "-p",
            "no:cacheprovider",
            "-q",
            "--no-header",
            "--driver",
            "subprocess",
            "--conformance-report",
            str(Path(scratch) / "report"),
        ]
        if areas:
            pytest_args += ["--conformance-areas", areas]
        status = pytest.main(pytest_args, plugins=[recorder])
        total = time.perf_counter() - recorder.session_started
    scenarios = recorder.scenarios
    if status != 0 or not scenarios:
        print(f"the suite did not pass (pytest exit status {status})", file=sys.stderr)
        return 1
    before_first = (recorder.first_scenario or recorder.session_started) - recorder.session_started
    walls = [s.wall for s in scenarios]
    harness = [s.harness_cpu for s in scenarios]
    hosts = [s.host_cpu for s in scenarios]
    print(
        f"{len(scenarios)} scenarios; per scenario (median): wall {_ms(walls)}, "
        f"harness CPU {_ms(harness)}, host CPU {_ms(hosts)}; "
        f"host start-up {_ms(recorder.startups)}"
    )
    print(
        f"fixed cost before the first scenario (pytest start, collection) {before_first:.2f} s; "
        f"whole run {total:.1f} s including the start-up samples"
    )
    for label, values in (("harness CPU", harness), ("scenario wall", walls)):
        comparison = Comparison(f"{label} per scenario vs host start-up", values, recorder.startups)
        print(comparison.line(label, "host start-up"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
