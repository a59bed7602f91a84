"""Collects scenario outcomes during a run and writes ``summary.json``."""

from __future__ import annotations

import tomllib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conformance.requirements import catalog, sort_key, tagged_ids
from conformance.summary_model import (
    Counts,
    RequirementResult,
    RequirementStatus,
    ScenarioOutcome,
    ScenarioResult,
    Summary,
)


@dataclass(frozen=True)
class Expectations:
    """Known failures a CI owner accepts for now: scenario nodeid fragments or IDs."""

    scenarios: tuple[str, ...] = ()
    requirements: tuple[str, ...] = ()

    @classmethod
    def load(cls, path: Path | None) -> Expectations:
        """Read an expectations TOML file (``expected_failures.scenarios/requirements``)."""
        if path is None:
            return cls()
        with path.open("rb") as handle:
            data = tomllib.load(handle).get("expected_failures", {})
        return cls(tuple(data.get("scenarios", [])), tuple(data.get("requirements", [])))

    def covers(self, result: ScenarioResult) -> bool:
        """Whether a failure of this scenario is expected."""
        return any(fragment in result.nodeid for fragment in self.scenarios) or any(
            requirement in self.requirements for requirement in result.requirements
        )


@dataclass
class ResultCollector:
    """A pytest plugin object recording every scenario's outcome."""

    report_dir: Path
    driver: str
    host: str = "reference host"
    expectations: Expectations = field(default_factory=Expectations)
    results: dict[str, ScenarioResult] = field(default_factory=dict)
    not_expressible: list[str] = field(default_factory=list)

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Fold setup, call and teardown reports into one outcome per scenario."""
        if report.when == "call" or report.failed or report.skipped:
            previous = self.results.get(report.nodeid)
            if previous is not None and previous.outcome == "failed":
                return
            outcome: ScenarioOutcome = (
                "failed" if report.failed else "skipped" if report.skipped else "passed"
            )
            message = None
            if report.failed:
                message = report.longreprtext.strip().splitlines()[-1][:500] or "failed"
            requirements = sorted(
                {str(value) for key, value in report.user_properties if key == "requirement"},
                key=sort_key,
            )
            areas = [str(value) for key, value in report.user_properties if key == "area"]
            self.results[report.nodeid] = ScenarioResult(
                nodeid=report.nodeid,
                feature=areas[0] if areas else report.location[0],
                name=report.head_line or report.nodeid,
                requirements=requirements or (previous.requirements if previous else []),
                outcome=outcome,
                duration_s=round(report.duration + (previous.duration_s if previous else 0), 3),
                message=message,
            )

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Write ``summary.json``."""
        self.report_dir.mkdir(parents=True, exist_ok=True)
        summary = build_summary(
            list(self.results.values()), self.driver, self.host, self.expectations
        ).model_copy(update={"not_expressible": sorted(self.not_expressible)})
        (self.report_dir / "summary.json").write_text(
            summary.model_dump_json(indent=2) + "\n", encoding="utf-8"
        )


def build_summary(
    scenarios: list[ScenarioResult], driver: str, host: str, expectations: Expectations
) -> Summary:
    """Derive each requirement's status from the scenarios that carry its tag."""
    adjusted = [
        s.model_copy(update={"outcome": "expected-failure"})
        if s.outcome == "failed" and expectations.covers(s)
        else s
        for s in scenarios
    ]
    by_requirement: dict[str, list[ScenarioResult]] = defaultdict(list)
    for scenario in adjusted:
        for requirement_id in scenario.requirements:
            by_requirement[requirement_id].append(scenario)
    tagged = tagged_ids()
    requirements: list[RequirementResult] = []
    for requirement in sorted(catalog().values(), key=lambda r: sort_key(r.id)):
        ran = [s for s in by_requirement.get(requirement.id, []) if s.outcome != "skipped"]
        status: RequirementStatus
        if any(s.outcome in ("failed", "expected-failure") for s in ran):
            status = "failed"
        elif ran:
            status = "passed"
        elif requirement.id not in tagged and requirement.pending:
            status = "pending"
        else:
            status = "not-run"
        requirements.append(
            RequirementResult(
                id=requirement.id,
                section=requirement.section,
                area=requirement.area,
                text=requirement.text,
                status=status,
                pending_area=requirement.pending if status == "pending" else None,
                scenarios=[s.nodeid for s in by_requirement.get(requirement.id, [])],
            )
        )

    def count(status: str) -> int:
        return sum(1 for r in requirements if r.status == status)

    counts = Counts(
        scenarios_passed=sum(1 for s in adjusted if s.outcome == "passed"),
        scenarios_failed=sum(1 for s in adjusted if s.outcome == "failed"),
        scenarios_expected_failures=sum(1 for s in adjusted if s.outcome == "expected-failure"),
        requirements_passed=count("passed"),
        requirements_failed=count("failed"),
        requirements_pending=count("pending"),
        requirements_not_run=count("not-run"),
    )
    return Summary(
        driver=driver,
        host=host,
        counts=counts,
        requirements=requirements,
        scenarios=adjusted,
        regressions=[s.nodeid for s in adjusted if s.outcome == "failed"],
        unexpected_passes=[
            s.nodeid
            for s in adjusted
            if s.outcome == "passed" and expectations.scenarios and expectations.covers(s)
        ],
    )
