"""A Markdown summary, short enough for a CI job summary page."""

from __future__ import annotations

from collections import defaultdict

from conformance.reports.text import STATUS_LABEL, count_line
from conformance.summary_model import RequirementResult, Summary

_MAX_FAILURES = 40


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(summary: Summary) -> str:
    """The Markdown page."""
    run = summary.run
    lines = [
        f"# ADR 0053 conformance: {_cell(run.host)}",
        "",
        f"{run.driver} driver, harness {run.harness_version}, {run.duration_s:.1f} s"
        + (f", shard {run.shard}" if run.shard else "")
        + (" — **interrupted**" if run.interrupted else ""),
        "",
        f"- Requirements: {count_line(summary.counts.requirements)}",
        f"- Scenarios: {count_line(summary.counts.scenarios)}",
    ]
    if summary.preflight is not None and not summary.preflight.ok:
        lines += ["", f"**Preflight failed:** {_cell(summary.preflight.diagnosis or '')}"]
    if summary.regressions:
        lines += ["", f"**{len(summary.regressions)} regression(s)**"]
    failing = [s for s in summary.scenarios if s.failure is not None]
    if failing:
        lines += [
            "",
            "## Failures",
            "",
            "| status | scenario | blamed | message |",
            "|---|---|---|---|",
        ]
        for scenario in failing[:_MAX_FAILURES]:
            failure = scenario.failure
            assert failure is not None
            lines.append(
                f"| {STATUS_LABEL[scenario.status]} | {_cell(scenario.id)} "
                f"| {', '.join(failure.blamed) or '-'} | {_cell(failure.message)} |"
            )
        if len(failing) > _MAX_FAILURES:
            lines.append(f"| | … {len(failing) - _MAX_FAILURES} more in summary.json | | |")
    unverified = [s for s in summary.scenarios if s.status == "unverified"]
    if unverified:
        lines += ["", "## Unverified", ""]
        lines += [f"- {_cell(s.id)}: {_cell(s.reason or '')}" for s in unverified]
    lines += ["", "## Requirements", ""]
    by_section: dict[str, list[RequirementResult]] = defaultdict(list)
    for requirement in summary.requirements:
        by_section[requirement.section].append(requirement)
    for section, requirements in by_section.items():
        lines += [f"### {section}", "", "| | ID | requirement |", "|---|---|---|"]
        lines += [f"| {STATUS_LABEL[r.status]} | {r.id} | {_cell(r.text)} |" for r in requirements]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
