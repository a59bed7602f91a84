"""Runs side by side: a requirement-by-run matrix, and what changed between runs of one host.

Rendered as console text, Markdown and a self-contained HTML page, all from the runs'
summaries. Regressions (passed → failed or errored) and fixes (failed or errored →
passed) are listed per requirement and per scenario between consecutive runs, when every
run tests the same host.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from itertools import pairwise
from pathlib import Path
from typing import Final, Literal

import jinja2

from conformance.reports.html import (
    REQUIREMENT_STATUSES,
    SECTION_TITLES,
    count,
    seconds,
    section_order,
    when,
)
from conformance.reports.text import count_line
from conformance.requirements import sort_key
from conformance.summary_model import Summary

_TEMPLATES: Final = Path(__file__).resolve().parent.parent / "templates"
TEMPLATE: Final = "compare.html.j2"
BAD: Final = frozenset({"failed", "errored"})
ABSENT: Final = "-"
PLURAL: Final = {"regression": "regressions", "fix": "fixes"}


@dataclass(frozen=True)
class Column:
    """One run: its key in the matrix (``#1``), how it is labelled, and its summary."""

    key: str
    summary: Summary

    @property
    def host(self) -> str:
        """The host as the run named it."""
        return self.summary.run.host

    @property
    def label(self) -> str:
        """Host and driver."""
        return f"{self.host} ({self.summary.run.driver})"

    @property
    def identity(self) -> str:
        """What tells hosts apart: the name the host gives itself, else its command line."""
        found = self.summary.run.host_identity
        return found.name if found is not None else self.host


@dataclass(frozen=True)
class Row:
    """One requirement across the runs (``None`` where a run does not know it)."""

    id: str
    section: str
    text: str
    statuses: list[str | None]

    @property
    def differs(self) -> bool:
        """Whether the runs disagree on it."""
        return len(set(self.statuses)) > 1


@dataclass(frozen=True)
class Change:
    """A regression or a fix of one requirement or scenario between two runs."""

    kind: Literal["regression", "fix"]
    subject: Literal["requirement", "scenario"]
    id: str
    before: str
    after: str


@dataclass(frozen=True)
class Step:
    """What changed from one run to the next."""

    before: Column
    after: Column
    changes: list[Change] = field(default_factory=list)

    def of(
        self, kind: Literal["regression", "fix"], subject: Literal["requirement", "scenario"]
    ) -> list[Change]:
        """The changes of one kind about one subject."""
        return [c for c in self.changes if c.kind == kind and c.subject == subject]


@dataclass(frozen=True)
class Comparison:
    """Everything the renderers show."""

    columns: list[Column]
    rows: list[Row]
    steps: list[Step]
    same_host: bool

    @property
    def regressions(self) -> int:
        """How many regressions the steps hold."""
        return sum(c.kind == "regression" for s in self.steps for c in s.changes)

    def sections(self, changed_only: bool = False) -> list[tuple[str, str, list[Row]]]:
        """The rows grouped by ADR section, in section order."""
        grouped: dict[str, list[Row]] = {}
        for row in self.rows:
            if row.differs or not changed_only:
                grouped.setdefault(row.section, []).append(row)
        return [
            (key, SECTION_TITLES.get(key, key), grouped[key])
            for key in sorted(grouped, key=section_order)
        ]


def _kind(before: str, after: str) -> Literal["regression", "fix"] | None:
    if before == "passed" and after in BAD:
        return "regression"
    if before in BAD and after == "passed":
        return "fix"
    return None


def changes_between(before: Summary, after: Summary) -> list[Change]:
    """Regressions and fixes of requirements, then of scenarios, from ``before`` to ``after``."""
    found: list[Change] = []
    pairs: list[tuple[Literal["requirement", "scenario"], dict[str, str], dict[str, str]]] = [
        (
            "requirement",
            {r.id: r.status for r in before.requirements},
            {r.id: r.status for r in after.requirements},
        ),
        (
            "scenario",
            {s.id: s.status for s in before.scenarios},
            {s.id: s.status for s in after.scenarios},
        ),
    ]
    for subject, old, new in pairs:
        for item in old.keys() & new.keys():
            kind = _kind(old[item], new[item])
            if kind is not None:
                found.append(Change(kind, subject, item, old[item], new[item]))
    order = {s.id: n for n, s in enumerate(after.scenarios)}
    return sorted(
        found,
        key=lambda c: (
            c.subject != "requirement",
            sort_key(c.id) if c.subject == "requirement" else (order.get(c.id, 0), c.id),
        ),
    )


def compare(summaries: Sequence[Summary]) -> Comparison:
    """The matrix of the runs, in the order given, and the changes between them."""
    columns = [Column(f"#{n}", s) for n, s in enumerate(summaries, start=1)]
    known: dict[str, tuple[str, str]] = {}
    for summary in summaries:
        for requirement in summary.requirements:
            known.setdefault(requirement.id, (requirement.section, requirement.text))
    by_run = [{r.id: r.status for r in s.requirements} for s in summaries]
    rows = [
        Row(rid, section, text, [statuses.get(rid) for statuses in by_run])
        for rid, (section, text) in sorted(known.items(), key=lambda item: sort_key(item[0]))
    ]
    same_host = len(columns) > 1 and len({c.identity for c in columns}) == 1
    steps = (
        [
            Step(before, after, changes_between(before.summary, after.summary))
            for before, after in pairwise(columns)
        ]
        if same_host
        else []
    )
    return Comparison(columns, rows, steps, same_host)


# -- console ------------------------------------------------------------------------------


def _describe(column: Column) -> str:
    run = column.summary.run
    return (
        f"{column.key}  {column.label}, {when(run.started_at)}, harness {run.harness_version}"
        + (f", shard {run.shard}" if run.shard else "")
    )


def _changes_text(comparison: Comparison) -> list[str]:
    lines: list[str] = []
    for step in comparison.steps:
        lines += ["", f"from {step.before.key} to {step.after.key}:"]
        if not step.changes:
            lines.append("  no regression and no fix")
        for kind in ("regression", "fix"):
            for subject in ("requirement", "scenario"):
                found = step.of(kind, subject)
                if found:
                    lines.append(f"  {PLURAL[kind]} of {subject}s ({len(found)}):")
                    lines += [f"    {c.id}: {c.before} -> {c.after}" for c in found]
    return lines


def render_console(comparison: Comparison, changed_only: bool = False) -> str:
    """The matrix as a text table, with a legend of the runs and the changes."""
    lines = ["runs:"]
    lines += [f"  {_describe(c)}" for c in comparison.columns]
    width = max(len(s) for s in REQUIREMENT_STATUSES) + 2
    header = f"{'requirement':<12}" + "".join(f"{c.key:<{width}}" for c in comparison.columns)
    lines += ["", header + "text"]
    for key, title, rows in comparison.sections(changed_only):
        lines.append(f"{key} {title}" if title != key else key)
        for row in rows:
            cells = "".join(f"{status or ABSENT:<{width}}" for status in row.statuses)
            text = row.text if len(row.text) <= 60 else row.text[:59] + "…"
            lines.append(f"  {row.id:<10}{cells}{text}")
    if changed_only and not any(row.differs for row in comparison.rows):
        lines.append("  (every requirement has the same status in every run)")
    lines += ["", "requirements per run:"]
    lines += [f"  {c.key}  {count_line(c.summary.counts.requirements)}" for c in comparison.columns]
    lines += ["scenarios per run:"]
    lines += [f"  {c.key}  {count_line(c.summary.counts.scenarios)}" for c in comparison.columns]
    if len(comparison.columns) > 1 and not comparison.same_host:
        lines += ["", "the runs test different hosts: regressions and fixes are not listed"]
    lines += _changes_text(comparison)
    return "\n".join(lines)


# -- Markdown -----------------------------------------------------------------------------


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(comparison: Comparison, changed_only: bool = False) -> str:
    """The matrix as a Markdown table, for a CI job summary or a pull request."""
    columns = comparison.columns
    lines = ["# ADR 0053 conformance: runs compared", ""]
    lines += [f"- **{c.key}**: {_cell(c.label)}, {when(c.summary.run.started_at)}" for c in columns]
    lines += [
        "",
        "| requirement | " + " | ".join(c.key for c in columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for key, _title, rows in comparison.sections(changed_only):
        for row in rows:
            cells = " | ".join(status or ABSENT for status in row.statuses)
            lines.append(f"| {row.id} ({key}) | {cells} |")
    lines += ["", "| scenarios | " + " | ".join(c.key for c in columns) + " |"]
    lines += ["|---|" + "---|" * len(columns)]
    for status, _n in count(s for c in columns for s in c.summary.counts.scenarios).items():
        cells = " | ".join(str(c.summary.counts.scenarios.get(status, 0)) for c in columns)
        lines.append(f"| {status} | {cells} |")
    if len(columns) > 1 and not comparison.same_host:
        lines += ["", "The runs test different hosts: regressions and fixes are not listed."]
    for step in comparison.steps:
        lines += ["", f"## From {step.before.key} to {step.after.key}", ""]
        if not step.changes:
            lines.append("No regression and no fix.")
        for change in step.changes:
            lines.append(
                f"- {change.kind} of {change.subject} `{_cell(change.id)}`: "
                f"{change.before} → {change.after}"
            )
    return "\n".join(lines) + "\n"


# -- HTML ---------------------------------------------------------------------------------


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["seconds"] = seconds
    env.filters["when"] = when
    return env


def render_html(comparison: Comparison) -> str:
    """The matrix as a self-contained HTML page, in the style of Bowtie's and wpt.fyi's."""
    return (
        _environment()
        .get_template(TEMPLATE)
        .render(
            comparison=comparison,
            columns=comparison.columns,
            sections=comparison.sections(),
            statuses=REQUIREMENT_STATUSES,
            absent=ABSENT,
            plural=PLURAL,
        )
    )
