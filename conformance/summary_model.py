"""The machine-readable result of a conformance run (``summary.json``).

These pydantic models are the single source of ``schemas/conformance-summary.schema.json``;
``python -m conformance.summary_model`` regenerates it and a test fails on drift.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

RequirementStatus = Literal["passed", "failed", "pending", "not-run"]
ScenarioOutcome = Literal["passed", "failed", "expected-failure", "skipped"]

SCHEMA_FILE = "conformance-summary.schema.json"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScenarioResult(_Strict):
    """One scenario's outcome."""

    nodeid: str
    feature: str
    name: str
    requirements: list[str]
    outcome: ScenarioOutcome
    duration_s: float = Field(ge=0)
    message: str | None = Field(default=None, description="Short failure reason")


class RequirementResult(_Strict):
    """One requirement's verdict, derived from its scenarios."""

    id: str
    section: str
    area: str
    text: str
    status: RequirementStatus
    pending_area: str | None = Field(
        default=None, description="Feature area that will cover a pending requirement"
    )
    scenarios: list[str] = Field(description="nodeids of the scenarios that check it")


class Counts(_Strict):
    """Totals of a run."""

    scenarios_passed: int = Field(ge=0)
    scenarios_failed: int = Field(ge=0)
    scenarios_expected_failures: int = Field(ge=0)
    requirements_passed: int = Field(ge=0)
    requirements_failed: int = Field(ge=0)
    requirements_pending: int = Field(ge=0)
    requirements_not_run: int = Field(ge=0)


class Summary(_Strict):
    """The whole ``summary.json``."""

    format_version: Literal[1] = 1
    driver: str
    host: str
    counts: Counts
    requirements: list[RequirementResult]
    scenarios: list[ScenarioResult]
    regressions: list[str] = Field(
        description="nodeids that failed and are not listed in the expectations file"
    )
    unexpected_passes: list[str] = Field(
        description="nodeids listed as expected failures that passed"
    )
    not_expressible: list[str] = Field(
        default_factory=list,
        description="nodeids left out because the driver cannot express them "
        "(for example a crash under the in-process driver)",
    )


def json_schema() -> dict[str, object]:
    """The JSON Schema (2020-12) of :class:`Summary`."""
    schema = Summary.model_json_schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://adr0053.invalid/schemas/{SCHEMA_FILE}",
        **schema,
    }


def render_schema() -> str:
    """The schema file's exact text."""
    return json.dumps(json_schema(), indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write the schema into the given schemas folder (default: ./schemas)."""
    target = Path((argv or sys.argv[1:] or ["schemas"])[0]) / SCHEMA_FILE
    target.write_text(render_schema(), encoding="utf-8")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
