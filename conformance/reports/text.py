"""The console rendering of a run: verdicts grouped by ADR section, then what to act on."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from conformance.summary_model import RequirementResult, ScenarioResult, Summary

STATUS_LABEL = {
    "passed": "PASS",
    "failed": "FAIL",
    "errored": "ERROR",
    "unverified": "UNVERIFIED",
    "not-run": "NOT RUN",
    "expected-failure": "XFAIL",
    "harness-error": "HARNESS",
    "pending": "PENDING",
}
_STOPPED = "the run stopped"
_ORDER = [
    "passed",
    "failed",
    "errored",
    "expected-failure",
    "unverified",
    "harness-error",
    "not-run",
    "pending",
]


def count_line(counts: Mapping[str, int]) -> str:
    """``'80 passed, 2 failed, 3 unverified'`` (zero counts left out)."""
    parts = [f"{counts[s]} {s}" for s in _ORDER if counts.get(s)]
    return ", ".join(parts) or "none"


def scenario_line(scenario: ScenarioResult) -> str:
    """One progress line for a finished scenario."""
    line = f"{STATUS_LABEL[scenario.status]:<10} {scenario.id}  ({scenario.duration_s:.2f} s)"
    if scenario.failure is not None:
        blamed = f" [{', '.join(scenario.failure.blamed)}]" if scenario.failure.blamed else ""
        line += f"\n           {scenario.failure.message}{blamed}"
    elif scenario.status == "unverified" and scenario.reason:
        line += f"\n           {scenario.reason}"
    return line


def render_console(summary: Summary, verbose: bool = True) -> str:
    """The end-of-run text."""
    run = summary.run
    lines = [f"ADR 0053 conformance: {run.host} ({run.driver} driver)"]
    if verbose:
        by_section: dict[str, list[RequirementResult]] = defaultdict(list)
        for requirement in summary.requirements:
            by_section[requirement.section].append(requirement)
        for section, requirements in by_section.items():
            lines += ["", section]
            for r in requirements:
                extra = f"  [pending: {r.pending_area}]" if r.pending_area else ""
                lines.append(f"  {STATUS_LABEL[r.status]:<10} {r.id:<6} {r.text}{extra}")
    lines += [
        "",
        f"requirements: {count_line(summary.counts.requirements)}",
        f"scenarios: {count_line(summary.counts.scenarios)}",
    ]
    if summary.not_expressible:
        lines.append(
            f"{len(summary.not_expressible)} scenario(s) need a driver that can stop the host "
            f"abruptly and were not run under the {run.driver} driver"
        )
    if run.interrupted:
        lines.append("the run was interrupted: scenarios it did not reach are not-run")
    stops = {s.reason for s in summary.scenarios if s.reason and s.reason.startswith(_STOPPED)}
    lines.extend(f"{reason}: scenarios it did not reach are not-run" for reason in sorted(stops))
    failing = {s.id: s for s in summary.scenarios}
    for scenario_id in summary.regressions:
        scenario = failing[scenario_id]
        message = scenario.failure.message if scenario.failure else scenario.reason or ""
        lines.append(f"REGRESSION {scenario_id}: {message}")
    for scenario_id in summary.harness_errors:
        scenario = failing[scenario_id]
        message = scenario.failure.message if scenario.failure else ""
        lines.append(f"HARNESS ERROR {scenario_id}: {message}")
    for entry in summary.unexpected_passes:
        lines.append(f"UNEXPECTED PASS {entry} (remove it from the expectations file)")
    return "\n".join(lines)
