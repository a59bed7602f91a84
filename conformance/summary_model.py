"""The machine-readable result of a conformance run (``summary.json``).

These pydantic models are the single source of ``schemas/conformance-summary.schema.json``;
``python -m conformance.summary_model`` regenerates it and a test fails on drift. Every
report format (console, junit, Markdown, HTML, ``compare``, ``merge``) is rendered from a
:class:`Summary`, so they all speak one vocabulary.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

ScenarioStatus = Literal[
    "passed", "failed", "errored", "unverified", "not-run", "expected-failure", "harness-error"
]
RequirementStatus = Literal[
    "passed", "failed", "errored", "unverified", "not-run", "expected-failure", "pending"
]
FailureKind = Literal[
    "check", "host-stopped", "host-hung", "invalid-protocol", "deadline", "harness", "interrupted"
]
StepStatus = Literal["passed", "failed", "not-run"]

SCHEMA_FILE = "conformance-summary.schema.json"
FORMAT_VERSION = 2


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StepResult(_Strict):
    """One Gherkin step of a scenario as it ran."""

    keyword: str
    text: str
    line: int
    status: StepStatus
    duration_s: float = Field(default=0.0, ge=0)


class WireLine(_Strict):
    """One protocol line of the scenario, as the harness sent or received it."""

    direction: Literal["sent", "received"]
    at_s: float = Field(description="Seconds since the scenario's first host started")
    text: str


class ProviderCall(_Strict):
    """One request the host made to the harness's model provider."""

    model: str | None
    stream: bool
    tools: list[str]
    messages: int = Field(ge=0, description="Number of messages in the request")
    last_message: str = Field(description="Role and start of the last message")
    flagged: str | None = Field(
        default=None, description="'malformed' or 'unscripted' when the mock could not serve it"
    )


class HostExit(_Strict):
    """How a host process ended (or that it was still running)."""

    running: bool
    status: int | None = None
    signal: int | None = None


class FailureRecord(_Strict):
    """Everything a host team needs to act on one failed or errored scenario."""

    kind: FailureKind
    message: str = Field(description="The check's message as a sentence")
    detail: str = Field(default="", description="Further lines of the message, if any")
    step: StepResult | None = Field(default=None, description="The step that failed")
    blamed: list[str] = Field(description="Requirement IDs the failure is counted against")
    host_exit: HostExit | None = None
    stderr_tail: str = ""
    transcript: list[WireLine] = Field(default_factory=list)
    provider_requests: list[ProviderCall] = Field(default_factory=list)
    violations: list[str] = Field(
        default_factory=list, description="Protocol messages that broke the published schemas"
    )


class ScenarioResult(_Strict):
    """One scenario's verdict."""

    id: str = Field(description="Stable id: '<feature file>: <scenario title>'")
    nodeid: str
    feature_file: str
    feature: str = Field(description="The feature's title")
    area: str
    rule: str | None
    title: str
    line: int
    requirements: list[str] = Field(description="The requirement IDs the scenario is tagged with")
    status: ScenarioStatus
    reason: str | None = Field(default=None, description="Why a scenario is unverified or not run")
    duration_s: float = Field(ge=0)
    steps: list[StepResult] = Field(default_factory=list)
    failure: FailureRecord | None = None


class RequirementResult(_Strict):
    """One requirement's verdict, derived from its scenarios."""

    id: str
    section: str
    kind: Literal["adr", "consequence", "project"]
    area: str
    text: str
    status: RequirementStatus
    pending_area: str | None = Field(
        default=None, description="Feature area that will cover a pending requirement"
    )
    scenarios: list[str] = Field(description="ids of the scenarios tagged with it")
    failed_by: list[str] = Field(
        default_factory=list, description="ids of the scenarios whose failure blames it"
    )


class Counts(_Strict):
    """Totals of a run, per status."""

    scenarios: dict[str, int]
    requirements: dict[str, int]


class HostIdentity(_Strict):
    """What the host said about itself in ``initialize``."""

    name: str
    version: str
    capabilities: dict[str, object]


class Preflight(_Strict):
    """The single host start the harness makes before any scenario."""

    ok: bool
    diagnosis: str | None = None
    detail: str = ""
    host_exit: HostExit | None = None
    stderr_tail: str = ""
    duration_s: float = Field(default=0.0, ge=0)


class RunInfo(_Strict):
    """Where and how the run happened."""

    host: str
    driver: str
    harness_version: str
    started_at: str = Field(description="RFC 3339 UTC")
    duration_s: float = Field(ge=0)
    workers: int = Field(ge=1)
    shard: str | None = Field(default=None, description="'I/N' when the run was one shard")
    areas: list[str] | None = None
    keyword: str | None = None
    require_full: bool = False
    interrupted: bool = Field(default=False, description="Stopped early (signal or max-time)")
    host_identity: HostIdentity | None = None


class Summary(_Strict):
    """The whole ``summary.json``."""

    format_version: Literal[2] = 2
    run: RunInfo
    preflight: Preflight | None = None
    counts: Counts
    requirements: list[RequirementResult]
    scenarios: list[ScenarioResult]
    regressions: list[str] = Field(
        description="ids that failed or errored and are not listed in the expectations file"
    )
    unexpected_passes: list[str] = Field(
        description="expectation entries (scenario ids or requirement IDs) that now pass"
    )
    harness_errors: list[str] = Field(
        default_factory=list, description="ids whose scenario the harness itself broke"
    )
    not_expressible: list[str] = Field(
        default_factory=list,
        description="ids left out because the driver cannot express them "
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
