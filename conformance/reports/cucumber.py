"""Cucumber JSON (``cucumber.json``), rendered from the summary like every other report.

pytest-bdd's own ``--cucumberjson`` writer keeps its scenario data on the worker that ran
the scenario and writes an empty list under pytest-xdist, so the harness writes the file
itself. Each executed scenario is an element of its feature, with the steps as they ran
(a step never reached is ``skipped``); scenarios that did not run are left out. A failure
outside any step (a crashed host before the first check, a scenario that could not be set
up) is a failed ``before`` or ``after`` hook, where Cucumber tools look for it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import cache
from typing import Any, Final

from conformance.reports.junit import failure_text
from conformance.scenarios import ScenarioInfo, by_id, parse_feature
from conformance.summary_model import FailureRecord, ScenarioResult, StepResult, Summary
from pi_contract import features_dir

_STEP_STATUS: Final[Mapping[str, str]] = {
    "passed": "passed",
    "failed": "failed",
    "not-run": "skipped",
}
_NANOSECONDS: Final = 1_000_000_000


def slug(text: str) -> str:
    """Cucumber's id style: lower case, words joined by hyphens."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


@cache
def _feature_facts(feature_file: str) -> dict[str, Any]:
    """Keyword, line, description, tags and scenario keywords of a shipped feature file."""
    path = features_dir() / feature_file
    if not path.is_file():
        return {}
    feature = parse_feature(path)
    return {
        "keyword": feature.keyword,
        "line": feature.line_number,
        "description": feature.description,
        "tags": sorted(feature.tags),
        "keywords": {t.line_number: t.keyword for t in feature.scenarios.values()},
    }


def _tags(names: list[str], line: int) -> list[dict[str, Any]]:
    return [{"name": f"@{name}", "line": line} for name in names]


def _error_message(scenario: ScenarioResult, failure: FailureRecord) -> str:
    prefix = {
        "expected-failure": "expected failure (listed in the expectations file): ",
        "harness-error": "harness error (not counted against the host): ",
    }.get(scenario.status, "")
    return prefix + failure_text(failure)


def _step(
    step: StepResult, scenario: ScenarioResult, failure: FailureRecord | None
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "status": _STEP_STATUS[step.status],
        "duration": round(step.duration_s * _NANOSECONDS),
    }
    if step.status == "failed" and failure is not None:
        result["error_message"] = _error_message(scenario, failure)
    return {
        "keyword": f"{step.keyword} ",
        "name": step.text,
        "line": step.line,
        "match": {"location": f"features/{scenario.feature_file}:{step.line}"},
        "result": result,
    }


def _hook(scenario: ScenarioResult, failure: FailureRecord) -> dict[str, Any]:
    return {
        "match": {"location": "pi-conformance"},
        "result": {
            "status": "failed",
            "duration": 0,
            "error_message": _error_message(scenario, failure),
        },
    }


def _element(
    scenario: ScenarioResult, facts: Mapping[str, Any], known: Mapping[str, ScenarioInfo]
) -> dict[str, Any]:
    info = known.get(scenario.id)
    tags = sorted(info.tags) if info is not None else list(scenario.requirements)
    keywords: Mapping[int, str] = facts.get("keywords", {})
    element: dict[str, Any] = {
        "id": f"{slug(scenario.feature)};{slug(scenario.title)}",
        "keyword": keywords.get(scenario.line, "Scenario"),
        "name": scenario.title,
        "description": "",
        "line": scenario.line,
        "type": "scenario",
        "tags": _tags(tags, max(scenario.line - 1, 1)),
        "steps": [_step(s, scenario, scenario.failure) for s in scenario.steps],
    }
    failure = scenario.failure
    has_failed_step = any(s.status == "failed" for s in scenario.steps)
    if failure is not None and not has_failed_step and scenario.status != "unverified":
        element["before" if not scenario.steps else "after"] = [_hook(scenario, failure)]
    return element


def cucumber_features(summary: Summary) -> list[dict[str, Any]]:
    """The Cucumber JSON document as Python data: one entry per feature that ran."""
    features: dict[str, dict[str, Any]] = {}
    known = by_id()
    for scenario in summary.scenarios:
        if scenario.status == "not-run":
            continue
        facts = _feature_facts(scenario.feature_file)
        feature = features.get(scenario.feature_file)
        if feature is None:
            line = int(facts.get("line", 1))
            feature = features[scenario.feature_file] = {
                "uri": f"features/{scenario.feature_file}",
                "id": slug(scenario.feature),
                "keyword": facts.get("keyword", "Feature"),
                "name": scenario.feature,
                "description": facts.get("description", ""),
                "line": line,
                "tags": _tags(facts.get("tags", []), max(line - 1, 1)),
                "elements": [],
            }
        feature["elements"].append(_element(scenario, facts, known))
    return list(features.values())


def render_cucumber(summary: Summary) -> str:
    """The whole cucumber.json document."""
    # compact: Python encodes an indented document in pure Python, many times slower
    features = cucumber_features(summary)
    return json.dumps(features, ensure_ascii=False, separators=(",", ":")) + "\n"
