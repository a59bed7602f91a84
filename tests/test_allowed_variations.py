"""The suite is fair: hosts that differ only in ways the contract allows must pass.

Each case runs ``pi-conformance`` in a subprocess against one variant of
``tests/hosts/allowed/``; the run must end without a failed, errored or harness-broken
scenario. A variant that leaves out an optional capability must see the scenarios that
need it reported unverified, never failed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
from hosts.batches import scenario_count
from hosts.catalog import allowed_cases
from hosts.registry import AllowedCase
from hosts.runner import Run, run_suite

CASES = allowed_cases()
WORKERS = max(2, min(4, os.cpu_count() or 2))


@pytest.fixture(scope="module")
def runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Future[Run]]]:
    """Start the runs of every selected case up front, the largest selections first."""
    wanted = {item.name for item in request.session.items if item.module is sys.modules[__name__]}
    selected = [c for c in CASES if f"test_allowed_variation_passes[{c.id}]" in wanted]
    selected.sort(key=lambda c: -scenario_count(c.areas, c.keyword))
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        futures = {
            case.id: pool.submit(
                run_suite,
                tmp_path_factory.mktemp("allowed") / "report",
                case.areas,
                case.keyword,
                case.variant,
            )
            for case in selected
        }
        yield futures
        for future in futures.values():
            future.cancel()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_allowed_variation_passes(runs: dict[str, Future[Run]], case: AllowedCase) -> None:
    run = runs[case.id].result()
    judged = run.scenarios("failed", "errored", "harness-error")
    details = [f"{s['id']}: {s['failure']['message']}" for s in judged]
    assert run.status == 0 and not judged, f"{case.id} ({case.why}) was judged: {details}"
    assert run.scenarios("passed"), run.output


def test_a_host_without_fault_points_is_unverified_not_failed(tmp_path: Path) -> None:
    run = run_suite(tmp_path / "report", "approval", "failure_while_approving", "no-fault-points")
    unverified = run.scenarios("unverified")
    assert unverified, run.output
    assert all("approvalCommit" in (s["reason"] or "") for s in unverified), unverified
    assert run.requirement_status("R4.6") in ("passed", "unverified"), run.output
    assert run.status == 0, run.output
