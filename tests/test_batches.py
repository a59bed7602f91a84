"""The broken-host batches judge each case as if it had run alone."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

from hosts.batches import SLOW_PER_BATCH, own_scenarios, plan_batches
from hosts.catalog import broken_cases
from hosts.runner import run_suite

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


def test_slow_cases_run_apart_a_few_at_a_time() -> None:
    for batch in plan_batches(CASES, 8):
        assert all(case.slow == batch.slow for case in batch.cases), batch.cases
        if batch.slow:
            assert len(batch.cases) <= SLOW_PER_BATCH


def test_a_scenario_of_no_case_runs_the_unpatched_host(tmp_path: Path) -> None:
    # Two scenarios in one run: the first serves a broken variant, the second none.
    broken = "approval.feature: Rejecting keeps the session in Plan with its permission mode"
    run = run_suite(
        tmp_path / "report",
        "approval",
        "Rejecting",
        extra=("--no-preflight",),
        variants={broken: "reject-grants-mode"},
    )
    statuses = {s["id"]: s["status"] for s in run.scenarios("passed", "failed")}
    assert statuses.pop(broken) == "failed", run.output
    assert statuses and set(statuses.values()) == {"passed"}, statuses
