"""A self-contained HTML report (``report.html``): one file that reads offline from ``file://``.

The page is organised as ADR section → Rule → scenario → steps, with the run's header,
counts and a requirement matrix on top. Every string from the summary is escaped by the
template engine (host output is untrusted); the page loads nothing from the network.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Final, get_args

import jinja2

from conformance.summary_model import (
    HostExit,
    RequirementResult,
    RequirementStatus,
    ScenarioResult,
    ScenarioStatus,
    Summary,
)

_TEMPLATES: Final = Path(__file__).resolve().parent.parent / "templates"
TEMPLATE: Final = "report.html.j2"

SCENARIO_STATUSES: Final[tuple[str, ...]] = get_args(ScenarioStatus)
REQUIREMENT_STATUSES: Final[tuple[str, ...]] = get_args(RequirementStatus)
ATTENTION: Final = ("failed", "errored", "harness-error", "unverified")

# The ADR's own section headings, so a reader can place a requirement without the ADR open.
SECTION_TITLES: Final[Mapping[str, str]] = {
    "§1": "One Agent and one Plan submission tool",
    "§2": "Immutable host-written plan artifacts",
    "§3": "Approval and permission selection",
    "§4": "Process-epoch fence and recovery",
    "§5": "Turn and configuration boundaries",
    "§6": "Scheduled Plan policy",
    "§7": "Versioned contracts",
    "Consequences": "Consequences",
    "Project": "Project rules where the ADR is silent",
}
OTHER_SECTION: Final = "Other"
_RULE_REFERENCES = re.compile(r"\(([^()]*)\)\s*$")


def section_order(section: str) -> tuple[int, str]:
    """Sort key: §1…§7, then Consequences, Project, anything else."""
    keys = list(SECTION_TITLES)
    return (keys.index(section), section) if section in keys else (len(keys), section)


def section_of(scenario: ScenarioResult, requirement_sections: Mapping[str, str]) -> str:
    """The ADR section a scenario belongs to: the first one its Rule cites, else the first
    section of its requirements."""
    if scenario.rule:
        cited = _RULE_REFERENCES.search(scenario.rule)
        for reference in cited.group(1).split(",") if cited else []:
            token = reference.strip()
            if token.startswith("§"):
                return token
            if token.lower().startswith("consequences"):
                return "Consequences"
            if token.lower().startswith("project rule"):
                return "Project"
    sections = [requirement_sections[r] for r in scenario.requirements if r in requirement_sections]
    return min(sections, key=section_order) if sections else OTHER_SECTION


@dataclass(frozen=True)
class ScenarioView:
    """One scenario with its anchor in the page."""

    anchor: str
    result: ScenarioResult


@dataclass
class RuleView:
    """A Rule of one feature and its scenarios."""

    title: str
    feature: str
    feature_file: str
    scenarios: list[ScenarioView] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        """Scenario statuses of the rule, in vocabulary order, zeros left out."""
        return count(s.result.status for s in self.scenarios)


@dataclass
class SectionView:
    """One ADR section with its Rules."""

    key: str
    title: str
    rules: list[RuleView] = field(default_factory=list)

    @property
    def scenarios(self) -> list[ScenarioView]:
        """Every scenario of the section."""
        return [s for rule in self.rules for s in rule.scenarios]

    @property
    def counts(self) -> dict[str, int]:
        """Scenario statuses of the section, in vocabulary order, zeros left out."""
        return count(s.result.status for s in self.scenarios)


def count(statuses: Iterable[str]) -> dict[str, int]:
    """Occurrences per status, in vocabulary order, zeros left out."""
    found: dict[str, int] = defaultdict(int)
    for status in statuses:
        found[status] += 1
    order = dict.fromkeys([*SCENARIO_STATUSES, *REQUIREMENT_STATUSES])
    return {s: found[s] for s in order if found.get(s)}


def scenario_anchors(scenarios: Sequence[ScenarioResult]) -> dict[str, str]:
    """Scenario id → HTML anchor (by position, so any id makes a safe anchor)."""
    return {s.id: f"sc-{n}" for n, s in enumerate(scenarios, start=1)}


def sections(summary: Summary, anchors: Mapping[str, str]) -> list[SectionView]:
    """The scenario tree: section → Rule → scenario, in section and file order."""
    requirement_sections = {r.id: r.section for r in summary.requirements}
    tree: dict[str, SectionView] = {}
    rules: dict[tuple[str, str, str], RuleView] = {}
    for scenario in summary.scenarios:
        key = section_of(scenario, requirement_sections)
        section = tree.setdefault(key, SectionView(key, SECTION_TITLES.get(key, key)))
        rule_title = scenario.rule or "(no Rule)"
        rule_key = (key, scenario.feature_file, rule_title)
        if rule_key not in rules:
            rules[rule_key] = RuleView(rule_title, scenario.feature, scenario.feature_file)
            section.rules.append(rules[rule_key])
        rules[rule_key].scenarios.append(ScenarioView(anchors[scenario.id], scenario))
    return [tree[k] for k in sorted(tree, key=section_order)]


def requirement_matrix(
    requirements: Sequence[RequirementResult],
) -> list[tuple[str, str, list[RequirementResult]]]:
    """(section, title, requirements) rows of the matrix, in section order."""
    grouped: dict[str, list[RequirementResult]] = defaultdict(list)
    for requirement in requirements:
        grouped[requirement.section].append(requirement)
    return [
        (key, SECTION_TITLES.get(key, key), grouped[key])
        for key in sorted(grouped, key=section_order)
    ]


def host_exit_text(host_exit: HostExit | None) -> str:
    """How the host ended, in words."""
    if host_exit is None:
        return "unknown"
    if host_exit.running:
        return "still running"
    if host_exit.signal is not None:
        return f"killed by signal {host_exit.signal}"
    return f"exited with status {host_exit.status}"


def seconds(value: float) -> str:
    """A duration for people: ``0.23 s``, ``1 min 41 s``."""
    if value < 60:
        return f"{value:.2f} s" if value < 10 else f"{value:.1f} s"
    minutes, rest = divmod(round(value), 60)
    return f"{minutes} min {rest} s"


def when(started_at: str) -> str:
    """RFC 3339 → ``2026-12-03 09:07:30 UTC`` (as given when it does not parse)."""
    try:
        moment = datetime.fromisoformat(started_at)
    except ValueError:
        return started_at
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


@cache
def environment() -> jinja2.Environment:
    """The template engine, escaping every value it inserts."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["seconds"] = seconds
    env.filters["host_exit"] = host_exit_text
    return env


def default_filter(summary: Summary) -> str:
    """Hide the scenarios a partial run (areas, -k, a shard) did not run, at first."""
    statuses = {s.status for s in summary.scenarios}
    return "ran" if "not-run" in statuses and len(statuses) > 1 else ""


def render_html(summary: Summary) -> str:
    """The whole report.html document."""
    anchors = scenario_anchors(summary.scenarios)
    by_id = {s.id: s for s in summary.scenarios}
    attention = [
        (anchors[s.id], s) for s in summary.scenarios if s.status in ATTENTION
    ]  # what a host team acts on first, in file order
    return (
        environment()
        .get_template(TEMPLATE)
        .render(
            summary=summary,
            run=summary.run,
            started=when(summary.run.started_at),
            scenario_statuses=SCENARIO_STATUSES,
            requirement_statuses=REQUIREMENT_STATUSES,
            sections=sections(summary, anchors),
            matrix=requirement_matrix(summary.requirements),
            anchors=anchors,
            by_id=by_id,
            attention=attention,
            unexpected=summary.unexpected_passes,
            default_filter=default_filter(summary),
        )
    )
