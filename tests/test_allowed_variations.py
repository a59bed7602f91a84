"""The suite is fair: hosts that differ only in ways the contract allows must pass.

Each case runs ``pi-conformance`` in a subprocess against one variant of
``tests/hosts/allowed/``; the run must end without a failed, errored or harness-broken
scenario. The variant is served in-process, which runs a scenario about three times
faster than a host process of its own; the scenarios only a host process can take part in
(a crash, a signal) run in a second, subprocess run. A variant that leaves out an optional
capability must see the scenarios that need it reported unverified, never failed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
from hosts.batches import scenario_count, subprocess_only_keyword
from hosts.catalog import allowed_cases
from hosts.registry import AllowedCase
from hosts.runner import Run, run_suite

CASES = allowed_cases()
WORKERS = max(2, min(4, os.cpu_count() or 2))
# These hosts never hang, so a longer wait costs nothing when they pass; it keeps a loaded
# machine (several runs at once on two cores) from reading as a host that did not react.
PATIENT = ("--timeout", "30")


@pytest.fixture(scope="module")
def runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, list[Future[Run]]]]:
    """Start the runs of every selected case up front, the largest selections first."""
    wanted = {item.name for item in request.session.items if item.module is sys.modules[__name__]}
    selected = [c for c in CASES if f"test_allowed_variation_passes[{c.id}]" in wanted]
    selected.sort(key=lambda c: -scenario_count(c.areas, c.keyword))
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        futures: dict[str, list[Future[Run]]] = {}
        for case in selected:
            report = tmp_path_factory.mktemp("allowed") / "report"
            run = pool.submit(
                run_suite,
                report,
                case.areas,
                case.keyword,
                case.variant,
                extra=PATIENT,
                in_process=True,
            )
            futures[case.id] = [run]
        for case in selected:
            crash_only = subprocess_only_keyword(case.areas, case.keyword)
            if crash_only:
                report = tmp_path_factory.mktemp("allowed-subprocess") / "report"
                futures[case.id].append(
                    pool.submit(
                        run_suite, report, case.areas, crash_only, case.variant, extra=PATIENT
                    )
                )
        yield futures
        for started in futures.values():
            for future in started:
                future.cancel()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_allowed_variation_passes(runs: dict[str, list[Future[Run]]], case: AllowedCase) -> None:
    for future in runs[case.id]:
        run = future.result()
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


def test_an_in_process_run_serves_the_variant_it_names(tmp_path: Path) -> None:
    """The in-process runs above prove something only if their host is the variant: the same
    route fails a broken one."""
    run = run_suite(
        tmp_path / "report",
        "deadline",
        "after_expiry_a_new_plan_can_be_submitted",
        "approval-list-newest-first",
        in_process=True,
    )
    failed = run.scenarios("failed")
    assert run.status == 1 and failed, run.output
    assert all("R7.2" in s["failure"]["blamed"] for s in failed), failed
    assert run.summary["run"]["driver"] == "inprocess", run.summary["run"]
