"""Cucumber JSON: its shape, how verdicts map onto it, and a real run under pytest-xdist."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
from hosts.runner import Run
from summaries import every_status, summary_of

from conformance.reports import CUCUMBER_FILE
from conformance.reports.cucumber import cucumber_features, render_cucumber

_RESULT = {
    "type": "object",
    "required": ["status", "duration"],
    "properties": {
        "status": {"enum": ["passed", "failed", "skipped"]},
        "duration": {"type": "integer", "minimum": 0},
        "error_message": {"type": "string", "minLength": 1},
    },
    "additionalProperties": False,
}
_TAGS = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["name", "line"],
        "properties": {
            "name": {"type": "string", "pattern": "^@\\S+$"},
            "line": {"type": "integer"},
        },
        "additionalProperties": False,
    },
}
_HOOKS = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["match", "result"],
        "properties": {"match": {"type": "object"}, "result": _RESULT},
    },
}
# The Cucumber JSON layout that report tools (cucumber-html-reporter, Jenkins, Xray) read.
CUCUMBER_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "array",
    "items": {
        "type": "object",
        "required": ["uri", "id", "keyword", "name", "description", "line", "tags", "elements"],
        "properties": {
            "uri": {"type": "string", "pattern": "^features/[^/]+\\.feature$"},
            "id": {"type": "string", "minLength": 1},
            "keyword": {"const": "Feature"},
            "name": {"type": "string"},
            "description": {"type": "string"},
            "line": {"type": "integer", "minimum": 1},
            "tags": _TAGS,
            "elements": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "required": [
                        "id",
                        "keyword",
                        "name",
                        "description",
                        "line",
                        "type",
                        "tags",
                        "steps",
                    ],
                    "properties": {
                        "id": {"type": "string", "pattern": "^[a-z0-9-]+;[a-z0-9-]*$"},
                        "keyword": {"enum": ["Scenario", "Scenario Outline", "Example"]},
                        "type": {"const": "scenario"},
                        "line": {"type": "integer", "minimum": 1},
                        "tags": _TAGS,
                        "before": _HOOKS,
                        "after": _HOOKS,
                        "steps": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "required": ["keyword", "name", "line", "match", "result"],
                                "properties": {
                                    "keyword": {"type": "string", "pattern": "^[A-Z][a-z]* $"},
                                    "name": {"type": "string"},
                                    "line": {"type": "integer", "minimum": 1},
                                    "match": {
                                        "type": "object",
                                        "required": ["location"],
                                        "properties": {"location": {"type": "string"}},
                                    },
                                    "result": _RESULT,
                                },
                                "additionalProperties": False,
                            },
                        },
                    },
                },
            },
        },
    },
}


def _elements(features: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for f in features for e in f["elements"]}


def test_the_document_has_cucumbers_shape() -> None:
    document = json.loads(render_cucumber(summary_of(every_status())))
    jsonschema.validate(document, CUCUMBER_SCHEMA)


def test_scenarios_that_did_not_run_are_left_out_and_features_group_the_rest() -> None:
    features = cucumber_features(summary_of(every_status()))
    uris = [f["uri"] for f in features]
    assert uris == ["features/approval.feature", "features/handshake.feature"]
    names = set(_elements(features))
    assert "It did not run" not in names
    assert len(names) == 6
    approval = features[0]
    assert approval["name"] == "Approving and rejecting a plan"
    assert {"name": "@area:approval", "line": approval["line"] - 1} in approval["tags"]


def test_step_results_follow_the_steps_as_they_ran() -> None:
    elements = _elements(cucumber_features(summary_of(every_status())))
    failed = next(e for name, e in elements.items() if name.startswith("It fails <script>"))
    assert [s["result"]["status"] for s in failed["steps"]] == ["passed", "failed", "skipped"]
    message = failed["steps"][1]["result"]["error_message"]
    assert message.startswith("bad <script>")  # JSON carries the text as it is
    assert "blamed on: R3.6" in message
    assert failed["steps"][0]["keyword"] == "Given "
    assert failed["steps"][0]["result"]["duration"] == 10_000_000  # nanoseconds
    assert "error_message" not in failed["steps"][0]["result"]
    expected = elements["It fails as expected"]
    assert expected["steps"][2]["result"]["error_message"].startswith("expected failure")
    unverified = elements["It is unverified"]
    assert "after" not in unverified and "before" not in unverified


def test_a_failure_outside_the_steps_is_a_failed_hook() -> None:
    elements = _elements(cucumber_features(summary_of(every_status())))
    errored = elements["It errors"]
    assert all(s["result"]["status"] == "passed" for s in errored["steps"])
    assert errored["after"][0]["result"]["status"] == "failed"
    assert "the host stopped" in errored["after"][0]["result"]["error_message"]
    broken = elements["The harness broke"]
    assert broken["steps"] == []
    assert broken["before"][0]["result"]["error_message"].startswith("harness error")


def test_a_real_run_under_xdist_writes_every_scenario_it_ran(broken_run: Run) -> None:
    """pytest-bdd's own writer leaves an empty list under xdist; this file must not."""
    summary = broken_run.summary
    assert summary["run"]["workers"] == 2, "the run was meant to use two xdist workers"
    document = json.loads((broken_run.report / CUCUMBER_FILE).read_text(encoding="utf-8"))
    jsonschema.validate(document, CUCUMBER_SCHEMA)
    ran = [s for s in summary["scenarios"] if s["status"] != "not-run"]
    assert len(ran) == 3
    elements = _elements(document)
    assert set(elements) == {s["title"] for s in ran}
    for scenario in ran:
        steps = elements[scenario["title"]]["steps"]
        assert [(s["line"], s["name"]) for s in steps] == [
            (s["line"], s["text"]) for s in scenario["steps"]
        ]
        expected = [{"not-run": "skipped"}.get(s["status"], s["status"]) for s in scenario["steps"]]
        assert [s["result"]["status"] for s in steps] == expected
    failing = next(s for s in ran if s["status"] == "failed")
    failed_step = next(
        s for s in elements[failing["title"]]["steps"] if s["result"]["status"] == "failed"
    )
    assert failing["failure"]["message"] in failed_step["result"]["error_message"]
