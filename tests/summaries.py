"""Hand-built summaries for the report tests: one scenario of every status."""

from __future__ import annotations

from conformance.summary_model import (
    FailureRecord,
    HostExit,
    ProviderCall,
    RunInfo,
    ScenarioResult,
    ScenarioStatus,
    StepResult,
    Summary,
    WireLine,
)
from conformance.verdicts import build_summary

HOSTILE = '<script>window.pwned=1</script> | <img src=x onerror="window.pwned=2"> & "q" \'s\''


def run_info(host: str = "my-host --flag", driver: str = "subprocess") -> RunInfo:
    """Run metadata of a made-up run."""
    return RunInfo(
        host=host,
        driver=driver,
        harness_version="0.1.0",
        started_at="2026-01-02T03:04:05.678+00:00",
        duration_s=12.5,
        workers=2,
    )


def steps(failed_at: int | None = None, count: int = 3) -> list[StepResult]:
    """``count`` steps, passed up to ``failed_at``, which failed, then not run."""
    result: list[StepResult] = []
    for index in range(count):
        if failed_at is None or index < failed_at:
            status = "passed"
        elif index == failed_at:
            status = "failed"
        else:
            status = "not-run"
        result.append(
            StepResult(
                keyword=("Given", "When", "Then")[index % 3],
                text=f"step number {index + 1}",
                line=10 + index,
                status=status,  # type: ignore[arg-type]
                duration_s=0.01 if status != "not-run" else 0.0,
            )
        )
    return result


def failure(
    message: str = "the approval was not rejected",
    blamed: list[str] | None = None,
    kind: str = "check",
    step: StepResult | None = None,
) -> FailureRecord:
    """A failure record with evidence of every kind."""
    return FailureRecord(
        kind=kind,  # type: ignore[arg-type]
        message=message,
        detail="assert 'auto' == 'ask'",
        step=step,
        blamed=["R3.6"] if blamed is None else blamed,
        host_exit=HostExit(running=False, status=3),
        stderr_tail="host log line 1\nhost log line 2\n",
        transcript=[
            WireLine(direction="sent", at_s=0.01, text='{"jsonrpc":"2.0","id":1}'),
            WireLine(direction="received", at_s=0.25, text='{"jsonrpc":"2.0","id":1,"result":{}}'),
        ],
        provider_requests=[
            ProviderCall(
                model="mock-model",
                stream=True,
                tools=["Read", "SubmitPlan"],
                messages=2,
                last_message="user: Plan the change",
            )
        ],
        violations=["turn/started: /params/kind: 'x' is not one of ['prompt']"],
    )


def scenario(
    title: str,
    status: ScenarioStatus,
    *,
    feature_file: str = "approval.feature",
    rule: str | None = "Reject is final and grants no permission mode (§3, Consequences)",
    requirements: list[str] | None = None,
    record: FailureRecord | None = None,
    scenario_steps: list[StepResult] | None = None,
    reason: str | None = None,
    duration_s: float = 0.5,
) -> ScenarioResult:
    """One scenario result."""
    return ScenarioResult(
        id=f"{feature_file}: {title}",
        nodeid=f"test_features.py::test_{title.lower().replace(' ', '_')}",
        feature_file=feature_file,
        feature="Approving and rejecting a plan",
        area=feature_file.removesuffix(".feature"),
        rule=rule,
        title=title,
        line=60,
        requirements=["R3.6"] if requirements is None else requirements,
        status=status,
        reason=reason,
        duration_s=duration_s,
        steps=steps() if scenario_steps is None else scenario_steps,
        failure=record,
    )


def every_status() -> list[ScenarioResult]:
    """One scenario of each status; the failed one carries hostile text everywhere."""
    failed_steps = steps(failed_at=1)
    hostile = FailureRecord(
        **{
            **failure(message=f"bad {HOSTILE}", step=failed_steps[1]).model_dump(),
            "detail": HOSTILE,
            "stderr_tail": f"stderr {HOSTILE}",
            "transcript": [WireLine(direction="received", at_s=0.5, text=HOSTILE)],
        }
    )
    return [
        scenario("It passes", "passed", requirements=["R3.1"], rule="Approval carries (§3, §7)"),
        scenario(
            f"It fails {HOSTILE}",
            "failed",
            record=hostile,
            scenario_steps=failed_steps,
        ),
        scenario(
            "It errors",
            "errored",
            feature_file="handshake.feature",
            rule="The host speaks protocol version 9 and nothing else (§7)",
            requirements=["R7.8"],
            record=failure("the host stopped", ["R7.8"], kind="host-stopped"),
            scenario_steps=steps(),
        ),
        scenario(
            "It is unverified",
            "unverified",
            requirements=["R4.4"],
            rule="Approval is one transaction (§4)",
            reason="needs the fault point approvalCommit, which the host did not declare",
            scenario_steps=steps(failed_at=None, count=1),
        ),
        scenario("It did not run", "not-run", requirements=["R1.1"], rule=None, reason="x"),
        scenario(
            "It fails as expected",
            "expected-failure",
            requirements=["R2.1"],
            rule="The artifact holds the submitted bytes unchanged (§2)",
            record=failure("bytes differ", ["R2.1"]),
            scenario_steps=steps(failed_at=2),
        ),
        scenario(
            "The harness broke",
            "harness-error",
            requirements=["P1"],
            rule=None,
            record=failure("the harness could not start the mock provider", [], kind="harness"),
            scenario_steps=[],
        ),
    ]


def summary_of(
    scenarios: list[ScenarioResult], host: str = "my-host --flag", driver: str = "subprocess"
) -> Summary:
    """The summary ``build_summary`` derives (without an expectations file)."""
    return build_summary(scenarios, run_info(host, driver))
