"""The broken-host batches judge each case as if it had run alone."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import pytest
from hosts.batches import SLOW_PER_BATCH, own_scenarios, plan_batches
from hosts.catalog import broken_cases
from hosts.runner import run_suite

from conformance.scenarios import all_scenarios

CASES = broken_cases()


def test_every_case_is_in_one_batch_whose_cases_share_no_scenario() -> None:
    batches = plan_batches(CASES, 8)
    placed = [case.id for batch in batches for case in batch.cases]
    assert sorted(placed) == sorted(c.id for c in CASES)
    own = own_scenarios(CASES)
    for batch in batches:
        for first, second in combinations(batch.cases, 2):
            assert not own[first.id] & own[second.id], (first.id, second.id)
        assert batch.variants == {s: c.variant for c in batch.cases for s in own[c.id]}


def test_only_cases_that_need_no_host_process_are_served_in_process() -> None:
    crash_only = {s.id for s in all_scenarios() if s.subprocess_only}
    own = own_scenarios(CASES)
    batches = plan_batches(CASES, 8)
    assert any(batch.in_process for batch in batches)
    for batch in batches:
        for case in batch.cases:
            needs_process = case.slow or bool(case.process) or bool(own[case.id] & crash_only)
            assert batch.in_process != needs_process, case


def test_slow_cases_run_apart_a_few_at_a_time() -> None:
    for batch in plan_batches(CASES, 8):
        assert all(case.slow == batch.slow for case in batch.cases), batch.cases
        if batch.slow:
            assert len(batch.cases) <= SLOW_PER_BATCH


@pytest.mark.parametrize("in_process", [False, True], ids=["host-processes", "in-process"])
def test_a_scenario_of_no_case_runs_the_unpatched_host(tmp_path: Path, in_process: bool) -> None:
    # Scenarios in one run: one serves a broken variant, the others none; in-process, the
    # next scenario's host undoes the variant before it starts.
    broken = "approval.feature: Rejecting keeps the session in Plan with its permission mode"
    run = run_suite(
        tmp_path / "report",
        "approval",
        "Rejecting",
        extra=("--no-preflight",),
        variants={broken: "reject-grants-mode"},
        in_process=in_process,
    )
    statuses = {s["id"]: s["status"] for s in run.scenarios("passed", "failed")}
    assert statuses.pop(broken) == "failed", run.output
    assert statuses and set(statuses.values()) == {"passed"}, statuses


@pytest.mark.parametrize("variant", ["assigns-behind-patch", "assigns-constant-behind-patch"])
def test_an_in_process_variant_that_changes_the_host_behind_patch_is_refused(
    tmp_path: Path, variant: str
) -> None:
    """A variant that assigns a function or a constant of the reference host itself cannot
    be undone: the next scenario's host refuses to start instead of serving it unseen."""
    first, second = "approval.feature: Rejecting", "approval.feature: Approving"
    chosen = [s.id for s in all_scenarios() if s.id.startswith((first, second))]
    assert len(chosen) >= 2
    run = run_suite(
        tmp_path / "report",
        "approval",
        "Rejecting or Approving",
        extra=("--no-preflight",),
        variants={chosen[0]: variant},
        in_process=True,
    )
    errored = run.scenarios("errored")
    assert errored, run.output
    assert all("outside registry.patch" in s["failure"]["stderr_tail"] for s in errored), errored
