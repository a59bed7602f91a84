"""From scenario results to the verdicts of a run: statuses, requirements, regressions.

Pure functions over the models of :mod:`conformance.summary_model`; the collector, the
CLI's ``merge`` and the tests all build summaries through :func:`build_summary`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import get_args

from conformance.expectations import Expectations
from conformance.requirements import active_catalog, sort_key, tagged_ids
from conformance.scenarios import ScenarioInfo
from conformance.summary_model import (
    Counts,
    Preflight,
    RequirementResult,
    RequirementStatus,
    RunInfo,
    ScenarioResult,
    ScenarioStatus,
    Summary,
)

COUNTS_AGAINST_HOST: frozenset[str] = frozenset({"failed", "errored"})
NOT_EXPRESSIBLE_REASON = "needs a driver that can stop the host abruptly (subprocess)"
PREFLIGHT_REASON = "the preflight failed, so no scenario ran"
INTERRUPTED_REASON = "the run was interrupted before it reached this scenario"
DESELECTED_REASON = "not selected in this run"


def not_run(info: ScenarioInfo, reason: str) -> ScenarioResult:
    """The result of a scenario that did not run."""
    return ScenarioResult(
        id=info.id,
        nodeid="",
        feature_file=info.feature_file,
        feature=info.feature,
        area=info.area,
        rule=info.rule,
        title=info.title,
        line=info.line,
        requirements=info.requirements,
        status="not-run",
        reason=reason,
        duration_s=0.0,
    )


def complete(
    results: Iterable[ScenarioResult],
    universe: Sequence[ScenarioInfo],
    reason_for_missing: str = DESELECTED_REASON,
    crash_capable: bool = True,
    reasons: Mapping[str, str] | None = None,
) -> list[ScenarioResult]:
    """Every scenario of the universe once: a result where one exists, else not-run
    (with the selection's reason for leaving it out, when it gave one)."""
    found = {r.id: r for r in results}
    known = reasons or {}
    completed: list[ScenarioResult] = []
    for info in universe:
        if info.id in found:
            completed.append(found.pop(info.id))
        elif info.subprocess_only and not crash_capable:
            completed.append(not_run(info, NOT_EXPRESSIBLE_REASON))
        else:
            completed.append(not_run(info, known.get(info.id, reason_for_missing)))
    completed.extend(found.values())  # results of scenarios unknown to this catalog
    return completed


def _apply_expectations(
    scenarios: list[ScenarioResult], expectations: Expectations
) -> list[ScenarioResult]:
    adjusted: list[ScenarioResult] = []
    for scenario in scenarios:
        blamed = scenario.failure.blamed if scenario.failure else []
        if scenario.status in COUNTS_AGAINST_HOST and expectations.excuses(scenario.id, blamed):
            scenario = scenario.model_copy(update={"status": "expected-failure"})
        adjusted.append(scenario)
    return adjusted


def requirement_status(
    requirement_id: str,
    tagged: Sequence[ScenarioResult],
    blamed_by: Sequence[ScenarioResult],
) -> RequirementStatus:
    """One requirement's verdict from the scenarios tagged with it and those blaming it."""
    if any(s.status == "failed" for s in blamed_by):
        return "failed"
    if any(s.status == "errored" for s in tagged):
        return "errored"
    if any(s.status == "expected-failure" for s in blamed_by) or any(
        s.status == "expected-failure" and s.failure and s.failure.kind != "check" for s in tagged
    ):
        return "expected-failure"
    # A requirement one of whose checks could not run is not fully verified, even when
    # its other scenarios passed; it counts against the host only with --require-full.
    if any(s.status == "unverified" for s in tagged):
        return "unverified"
    if any(s.status == "passed" for s in tagged):
        return "passed"
    return "not-run"


def build_summary(
    scenarios: Sequence[ScenarioResult],
    run: RunInfo,
    expectations: Expectations = Expectations(),  # noqa: B008 - immutable value
    preflight: Preflight | None = None,
) -> Summary:
    """Derive every requirement's verdict, the regressions and the counts."""
    adjusted = _apply_expectations(list(scenarios), expectations)
    catalog = active_catalog()
    tagged_anywhere = tagged_ids()
    requirements: list[RequirementResult] = []
    for requirement in sorted(catalog.values(), key=lambda r: sort_key(r.id)):
        tagged = [s for s in adjusted if requirement.id in s.requirements]
        blamed_by = [
            s for s in adjusted if s.failure is not None and requirement.id in s.failure.blamed
        ]
        status = requirement_status(requirement.id, tagged, blamed_by)
        if status == "not-run" and requirement.id not in tagged_anywhere and requirement.pending:
            status = "pending"
        requirements.append(
            RequirementResult(
                id=requirement.id,
                section=requirement.section,
                kind=requirement.kind,  # type: ignore[arg-type]
                area=requirement.area,
                text=requirement.text,
                status=status,
                pending_area=requirement.pending if status == "pending" else None,
                scenarios=[s.id for s in tagged],
                failed_by=[s.id for s in blamed_by if s.status in ("failed", "expected-failure")],
            )
        )
    regressions = [s.id for s in adjusted if s.status in COUNTS_AGAINST_HOST]
    if run.require_full:
        regressions += [s.id for s in adjusted if s.status == "unverified"]
    by_requirement = {r.id: r for r in requirements}
    unexpected = [
        s.id for s in adjusted if s.id in expectations.scenarios and s.status == "passed"
    ] + sorted(
        (r for r in expectations.requirements if by_requirement[r].status == "passed"),
        key=sort_key,
    )
    return Summary(
        run=run,
        preflight=preflight,
        counts=Counts(
            scenarios=_count((s.status for s in adjusted), get_args(ScenarioStatus)),
            requirements=_count((r.status for r in requirements), get_args(RequirementStatus)),
        ),
        requirements=requirements,
        scenarios=adjusted,
        regressions=regressions,
        unexpected_passes=unexpected,
        harness_errors=[s.id for s in adjusted if s.status == "harness-error"],
        not_expressible=[s.id for s in adjusted if s.reason == NOT_EXPRESSIBLE_REASON],
    )


def _count(statuses: Iterable[str], every: Sequence[str]) -> dict[str, int]:
    counted = Counter(statuses)
    return {status: counted.get(status, 0) for status in every}
