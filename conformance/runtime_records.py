"""How a scenario's record travels on its pytest report (also across xdist workers), and
how the controlling process tells every worker that the run stopped early."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.summary_model import ScenarioResult

RECORD_PROPERTY = "pi_record"
STOP_NOTE = "stopped.txt"  # in the report folder while a run that stopped early ends


def attach(report: pytest.TestReport, result: ScenarioResult) -> None:
    """Put the record on the report, where the collector finds it."""
    report.user_properties.append((RECORD_PROPERTY, result.model_dump_json()))


def record_of(report: pytest.TestReport) -> ScenarioResult | None:
    """The scenario record a report carries, if any."""
    for key, value in report.user_properties:
        if key == RECORD_PROPERTY:
            return ScenarioResult.model_validate(json.loads(str(value)))
    return None


def note_stop(report_dir: Path, reason: str) -> None:
    """Tell every worker to start no further scenario, and why."""
    (report_dir / STOP_NOTE).write_text(reason, encoding="utf-8")


def stopped_reason(report_dir: Path) -> str | None:
    """Why the run stopped early, if it has."""
    try:
        return (report_dir / STOP_NOTE).read_text(encoding="utf-8")
    except OSError:
        return None


def clear_stop(report_dir: Path) -> None:
    """Remove the note once the run has ended."""
    (report_dir / STOP_NOTE).unlink(missing_ok=True)
