"""From scenario results to a run's verdicts: requirement statuses, regressions, merges."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from conformance import verdicts
from conformance.commands.merge import merge_summaries
from conformance.expectations import Expectations
from conformance.requirements import active_catalog, tagged_ids
from conformance.scenarios import all_scenarios
from conformance.summary_model import FailureKind, FailureRecord, RunInfo, ScenarioResult, Summary
from conformance.verdicts import DESELECTED_REASON, build_summary, complete

R1, R2 = "R4.10", "R4.11"
FAILING = {"failed", "errored", "harness-error"}
KIND_OF: dict[str, FailureKind] = {
    "failed": "check",
    "errored": "host-hung",
    "harness-error": "harness",
}


def run_info(**changes: object) -> RunInfo:
    base = RunInfo(
        host="a host",
        driver="subprocess",
        harness_version="0",
        started_at="2026-01-01T00:00:00.000+00:00",
        duration_s=1.0,
        workers=1,
    )
    return base.model_copy(update=changes)


def result(
    name: str, status: str, tags: Sequence[str] = (R1,), blamed: Sequence[str] = ()
) -> ScenarioResult:
    """A scenario result; a failing one blames ``blamed`` (errors blame nothing)."""
    failure = None
    if status in FAILING:
        failure = FailureRecord(
            kind=KIND_OF[status],
            message=f"{name} went wrong",
            blamed=list(blamed) if status == "failed" else [],
        )
    return ScenarioResult(
        id=f"made-up.feature: {name}",
        nodeid="",
        feature_file="made-up.feature",
        feature="Made up",
        area="made-up",
        rule=None,
        title=name,
        line=1,
        requirements=list(tags),
        status=status,  # type: ignore[arg-type]
        duration_s=0.0,
        failure=failure,
    )


def verdict(summary: Summary, requirement_id: str) -> str:
    return next(r.status for r in summary.requirements if r.id == requirement_id)


def scenario_status(summary: Summary, name: str) -> str:
    return next(s.status for s in summary.scenarios if s.title == name)


# -- one requirement's status: failed > errored > expected-failure > unverified > passed >
#    not-run, and pending for a requirement no feature covers yet ----------------------------

PRECEDENCE = [
    ("failed-beats-everything", ["passed", "errored", "unverified", "failed"], set(), "failed"),
    ("errored-beats-expected-failure", ["passed", "errored", "failed"], {R1}, "errored"),
    ("expected-failure-beats-unverified", ["unverified", "failed"], {R1}, "expected-failure"),
    ("unverified-beats-passed", ["passed", "unverified", "not-run"], set(), "unverified"),
    ("passed-beats-not-run", ["not-run", "passed"], set(), "passed"),
    ("not-run", ["not-run"], set(), "not-run"),
    ("harness-error-is-not-the-hosts", ["harness-error"], set(), "not-run"),
]


@pytest.mark.parametrize(
    ("statuses", "excused", "expected"),
    [case[1:] for case in PRECEDENCE],
    ids=[case[0] for case in PRECEDENCE],
)
def test_requirement_status_precedence(
    statuses: list[str], excused: set[str], expected: str
) -> None:
    scenarios = [result(f"s{n}", status, blamed=[R1]) for n, status in enumerate(statuses)]
    summary = build_summary(scenarios, run_info(), Expectations(requirements=frozenset(excused)))
    assert verdict(summary, R1) == expected


def test_require_full_counts_unverified_scenarios_as_regressions() -> None:
    scenarios = [result("checked", "passed"), result("needs a fault point", "unverified")]
    relaxed = build_summary(scenarios, run_info())
    strict = build_summary(scenarios, run_info(require_full=True))
    assert relaxed.regressions == []
    assert strict.regressions == ["made-up.feature: needs a fault point"]
    assert verdict(relaxed, R1) == verdict(strict, R1) == "unverified"


def test_a_requirement_no_feature_covers_yet_is_pending(monkeypatch: pytest.MonkeyPatch) -> None:
    # The real catalog has no pending entry today; mark one as a new, untagged requirement.
    real = active_catalog()
    uncovered, covered = list(real.values())[:2]
    with_pending = {**real, uncovered.id: replace(uncovered, pending=uncovered.area)}
    monkeypatch.setattr(verdicts, "active_catalog", lambda: with_pending)
    monkeypatch.setattr(verdicts, "tagged_ids", lambda: tagged_ids() - {uncovered.id})
    summary = build_summary([], run_info())
    assert verdict(summary, uncovered.id) == "pending"
    assert verdict(summary, covered.id) == "not-run"


def test_a_failure_counts_only_against_the_requirements_it_blames() -> None:
    summary = build_summary(
        [result("touches both", "failed", tags=[R1, R2], blamed=[R2])], run_info()
    )
    assert verdict(summary, R2) == "failed"
    assert verdict(summary, R1) == "not-run"
    by_id = {r.id: r for r in summary.requirements}
    assert by_id[R2].failed_by == ["made-up.feature: touches both"]
    assert by_id[R1].failed_by == []
    assert by_id[R1].scenarios == by_id[R2].scenarios == ["made-up.feature: touches both"]


# -- regressions and the expectations file ---------------------------------------------------


def test_failed_and_errored_scenarios_are_regressions_harness_errors_are_apart() -> None:
    summary = build_summary(
        [
            result("broke a check", "failed", blamed=[R1]),
            result("hung", "errored"),
            result("harness fault", "harness-error"),
            result("fine", "passed"),
        ],
        run_info(),
    )
    assert summary.regressions == ["made-up.feature: broke a check", "made-up.feature: hung"]
    assert summary.harness_errors == ["made-up.feature: harness fault"]
    assert summary.counts.scenarios["harness-error"] == 1
    assert sum(summary.counts.scenarios.values()) == len(summary.scenarios) == 4
    assert sum(summary.counts.requirements.values()) == len(active_catalog())


def test_a_requirement_entry_excuses_only_failures_blaming_listed_requirements() -> None:
    scenarios = [result("touches both", "failed", tags=[R1, R2], blamed=[R1, R2])]
    only_one = build_summary(scenarios, run_info(), Expectations(requirements=frozenset({R1})))
    assert only_one.regressions == ["made-up.feature: touches both"]
    assert scenario_status(only_one, "touches both") == "failed"
    assert verdict(only_one, R1) == verdict(only_one, R2) == "failed"
    both = build_summary(scenarios, run_info(), Expectations(requirements=frozenset({R1, R2})))
    assert both.regressions == []
    assert scenario_status(both, "touches both") == "expected-failure"
    assert verdict(both, R1) == verdict(both, R2) == "expected-failure"


def test_a_requirement_entry_does_not_excuse_a_host_that_errored() -> None:
    """An errored scenario blames no requirement, so only its scenario entry excuses it."""
    scenarios = [result("hung", "errored")]
    by_requirement = build_summary(
        scenarios, run_info(), Expectations(requirements=frozenset({R1}))
    )
    assert by_requirement.regressions == ["made-up.feature: hung"]
    by_scenario = build_summary(
        scenarios, run_info(), Expectations(scenarios=frozenset({"made-up.feature: hung"}))
    )
    assert by_scenario.regressions == []
    assert scenario_status(by_scenario, "hung") == "expected-failure"
    assert verdict(by_scenario, R1) == "expected-failure"


def test_a_scenario_entry_excuses_the_scenario_whatever_it_blames() -> None:
    expectations = Expectations(scenarios=frozenset({"made-up.feature: touches both"}))
    summary = build_summary(
        [result("touches both", "failed", tags=[R1, R2], blamed=[R2])], run_info(), expectations
    )
    assert summary.regressions == []
    assert verdict(summary, R2) == "expected-failure"
    assert verdict(summary, R1) == "not-run"  # its check did not fail


def test_unexpected_passes_are_reported_for_scenario_and_requirement_entries() -> None:
    expectations = Expectations(
        scenarios=frozenset({"made-up.feature: fixed", "made-up.feature: still broken"}),
        requirements=frozenset({R1, R2, "R7.1"}),
    )
    summary = build_summary(
        [
            result("fixed", "passed", tags=[R1]),
            result("still broken", "failed", tags=[R2], blamed=[R2]),
        ],
        run_info(),
        expectations,
    )
    # R7.1 ran nowhere: not passing is not an unexpected pass.
    assert summary.unexpected_passes == ["made-up.feature: fixed", R1]
    assert summary.regressions == []


def test_unlisted_scenarios_are_completed_as_not_run_with_the_selections_reason() -> None:
    universe = all_scenarios()
    chosen, other = universe[0], universe[1]
    ran = result("x", "passed").model_copy(update={"id": chosen.id})
    completed = complete([ran], universe, reasons={other.id: "not in the selected areas"})
    assert len(completed) == len(universe)
    statuses = {s.id: (s.status, s.reason) for s in completed}
    assert statuses[chosen.id] == ("passed", None)
    assert statuses[other.id] == ("not-run", "not in the selected areas")
    assert statuses[universe[2].id] == ("not-run", DESELECTED_REASON)


# -- merge ---------------------------------------------------------------------------------


def _shard(ran: list[ScenarioResult], shard: str, **run: object) -> Summary:
    return build_summary(complete(ran, all_scenarios()), run_info(shard=shard, **run))


def test_merge_takes_each_scenario_from_the_shard_that_ran_it() -> None:
    first, second = all_scenarios()[0], all_scenarios()[1]
    passed = result("a", "passed", tags=first.requirements).model_copy(update={"id": first.id})
    failed = result("b", "failed", tags=second.requirements, blamed=second.requirements[:1])
    failed = failed.model_copy(update={"id": second.id})
    one = _shard([passed], "1/2", workers=2, duration_s=5.0)
    two = _shard([failed], "2/2", workers=3, duration_s=7.0, interrupted=True)
    merged = merge_summaries([one, two], Expectations())
    statuses = {s.id: s.status for s in merged.scenarios}
    assert statuses[first.id] == "passed"
    assert statuses[second.id] == "failed"
    assert merged.regressions == [second.id]
    assert len(merged.scenarios) == len(all_scenarios())
    assert (merged.run.shard, merged.run.workers, merged.run.duration_s) == (None, 5, 7.0)
    assert merged.run.interrupted is True
    assert [s.id for s in merged.scenarios] == [s.id for s in all_scenarios()]
    excused = merge_summaries([one, two], Expectations(scenarios=frozenset({second.id})))
    assert excused.regressions == []
