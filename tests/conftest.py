"""Real runs of ``pi-conformance`` that the report tests read.

A few small runs (three scenarios of the approval area, against the reference host and
against a host that breaks one rule) feed the browser test, ``compare``, the Cucumber JSON
and shard tests. Only the runs the selected tests ask for are made; they start together,
once per session, and each test waits for its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import pytest
from hosts.runner import Run, run_suite

AREAS = "approval"
KEYWORD = "Rejecting"  # three scenarios; the broken host fails one of them
BROKEN = "reject-grants-mode"
BROKEN_SCENARIO = "approval.feature: Rejecting keeps the session in Plan with its permission mode"
BROKEN_REQUIREMENT = "R3.6"
SHARDS = 2


@dataclass(frozen=True)
class RunSpec:
    """One run: the host variant and further options."""

    variant: str | None
    workers: int = 2  # under pytest-xdist, as users run it
    extra: tuple[str, ...] = ()


RUNS: dict[str, RunSpec] = {
    "reference_run": RunSpec(None),
    "broken_run": RunSpec(BROKEN),
    **{
        f"shard_run_{i}": RunSpec(BROKEN, workers=1, extra=("--shard", f"{i}/{SHARDS}"))
        for i in range(1, SHARDS + 1)
    },
}
USERS = {"reference_run": {"reference_run"}, "broken_run": {"broken_run"}}
USERS["shard_runs"] = {f"shard_run_{i}" for i in range(1, SHARDS + 1)}


@pytest.fixture(scope="session")
def _real_runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Future[Run]]]:
    wanted: set[str] = set()
    for item in request.session.items:
        for fixture, runs in USERS.items():
            if fixture in getattr(item, "fixturenames", ()):
                wanted |= runs
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {
            name: pool.submit(
                run_suite,
                tmp_path_factory.mktemp(name),
                AREAS,
                KEYWORD,
                spec.variant,
                spec.workers,
                spec.extra,
            )
            for name, spec in RUNS.items()
            if name in wanted
        }
        yield futures
        for future in futures.values():
            future.cancel()


@pytest.fixture(scope="session")
def reference_run(_real_runs: dict[str, Future[Run]]) -> Run:
    """The selection against the reference host: everything passes."""
    return _real_runs["reference_run"].result()


@pytest.fixture(scope="session")
def broken_run(_real_runs: dict[str, Future[Run]]) -> Run:
    """The selection against a host whose Reject grants a permission mode."""
    return _real_runs["broken_run"].result()


@pytest.fixture(scope="session")
def shard_runs(_real_runs: dict[str, Future[Run]]) -> list[Run]:
    """The broken host's selection, run as separate shards."""
    return [_real_runs[f"shard_run_{i}"].result() for i in range(1, SHARDS + 1)]
