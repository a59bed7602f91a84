"""How a scenario's record travels on its pytest report (also across xdist workers)."""

from __future__ import annotations

import json

import pytest

from conformance.summary_model import ScenarioResult

RECORD_PROPERTY = "pi_record"


def attach(report: pytest.TestReport, result: ScenarioResult) -> None:
    """Put the record on the report, where the collector finds it."""
    report.user_properties.append((RECORD_PROPERTY, result.model_dump_json()))


def record_of(report: pytest.TestReport) -> ScenarioResult | None:
    """The scenario record a report carries, if any."""
    for key, value in report.user_properties:
        if key == RECORD_PROPERTY:
            return ScenarioResult.model_validate(json.loads(str(value)))
    return None
