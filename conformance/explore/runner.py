"""Run the explorer against a host: probe it, let hypothesis drive it, tell what broke."""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import hypothesis
from hypothesis import HealthCheck, Phase, Verbosity
from hypothesis.errors import FlakyFailure, FlakyStrategyDefinition
from hypothesis.reporting import with_reporter
from hypothesis.stateful import get_state_machine_test

from conformance.client import HostClient
from conformance.drivers import HostDriver
from conformance.explore.invariants import InvariantBrokenError
from conformance.explore.machine import ExploreContext, Explorer, OutOfTimeError
from conformance.explore.story import Story
from conformance.mock_provider import MockProvider
from conformance.scratch import scratch_parent


@dataclass(frozen=True)
class ExploreSettings:
    """The budget and the randomness of one exploration."""

    examples: int = 10
    steps: int = 20
    seed: int | None = None  # None: hypothesis' derandomised, repeatable search
    timeout: float = 10.0  # longest wait for one host reaction, in seconds
    shrink: bool = True
    max_time: float | None = None  # seconds after which no new sequence is started


@dataclass(frozen=True)
class ExploreFailure:
    """The invariant that broke, and the shortest sequence found that breaks it."""

    invariant: str
    statement: str
    detail: str
    scenario: str
    reproduced: bool


@dataclass
class ExploreResult:
    """What one exploration did and found."""

    examples: int
    steps: int
    elapsed: float
    failure: ExploreFailure | None = None
    first_failure_after: float | None = None  # seconds until the first failure was seen
    report: list[str] = field(default_factory=list)  # hypothesis' own account

    @property
    def passed(self) -> bool:
        """No invariant broke."""
        return self.failure is None


@dataclass(frozen=True)
class HostTraits:
    """What the explorer needs to know about a host before it starts exploring."""

    can_crash: bool
    fault_points: frozenset[str]


def probe(driver: HostDriver, folder: Path, timeout: float) -> HostTraits:
    """Start the host once to learn its fault points and whether it can be crashed."""
    folder.mkdir(parents=True, exist_ok=True)
    host = driver.start(folder)
    client = HostClient(host, timeout)
    try:
        capabilities = client.initialize()["capabilities"]
    finally:
        host.stop()
        client.close()
    return HostTraits(host.supports_crash, frozenset(capabilities.get("faultInjection", [])))


def explore(driver: HostDriver, settings: ExploreSettings) -> ExploreResult:
    """Explore ``driver``'s host; the result holds the failing scenario, if any."""
    started = time.monotonic()
    report: list[str] = []

    def take(message: object) -> None:
        report.append(str(message))

    with (
        MockProvider() as provider,
        tempfile.TemporaryDirectory(prefix="pi-explore-", dir=scratch_parent()) as tmp,
    ):
        root = Path(tmp)
        traits = probe(driver, root / "probe", settings.timeout)
        context = ExploreContext(
            driver=driver,
            provider=provider,
            temp_root=root,
            timeout=settings.timeout,
            can_crash=traits.can_crash,
            fault_points=traits.fault_points,
            deadline=None if settings.max_time is None else started + settings.max_time,
        )
        machine = type("ExploredHost", (Explorer,), {"context": context})
        phases = [Phase.explicit, Phase.generate] + ([Phase.shrink] if settings.shrink else [])
        test = get_state_machine_test(
            machine,
            settings=hypothesis.settings(
                max_examples=settings.examples,
                stateful_step_count=settings.steps,
                deadline=None,
                database=None,
                derandomize=settings.seed is None,
                phases=phases,
                suppress_health_check=list(HealthCheck),
                report_multiple_bugs=False,
                verbosity=Verbosity.normal,
                print_blob=False,
            ),
        )
        if settings.seed is not None:
            test = hypothesis.seed(settings.seed)(test)
        failure: ExploreFailure | None = None
        try:
            with with_reporter(take):
                test()
        except InvariantBrokenError:
            failure = _failure(context, context.failures[-1], "")
        except FlakyFailure as flaky:
            if not context.failures:
                raise
            failure = _failure(context, context.failures[-1], "it did not happen again on replay")
            report.append(f"hypothesis: {flaky}")
        except (OutOfTimeError, FlakyStrategyDefinition) as stop:
            out_of_time = _ran_out_of_time(stop)
            if not out_of_time and not context.failures:
                raise
            smallest = context.smallest_failure()
            report.append("the time budget ran out" if out_of_time else f"hypothesis: {stop}")
            if smallest is not None:
                remark = (
                    "the time budget ran out while shortening it"
                    if out_of_time
                    else "it did not happen the same way again on replay"
                )
                failure = _failure(context, smallest, remark)
        return ExploreResult(
            examples=context.examples,
            steps=context.steps,
            elapsed=time.monotonic() - started,
            failure=failure,
            first_failure_after=(
                None if context.first_failure_at is None else context.first_failure_at - started
            ),
            report=report,
        )


def _failure(
    context: ExploreContext, found: tuple[Story, InvariantBrokenError], remark: str
) -> ExploreFailure:
    story, broken = found
    note = "found by the explorer" + (f"; {remark}" if remark else "")
    title = f"The host breaks: {broken.statement}"
    scenario = story.render(title, broken.statement, broken.detail, note)
    return ExploreFailure(broken.key, broken.statement, broken.detail, scenario, not remark)


def _ran_out_of_time(stop: BaseException) -> bool:
    """Whether ``stop`` is, or was raised while handling, the end of the time budget.

    Hypothesis may report a sequence cut short by the budget as inconsistent data
    generation; the budget is then found further down the exception's context.
    """
    seen: BaseException | None = stop
    while seen is not None:
        if isinstance(seen, OutOfTimeError):
            return True
        seen = seen.__context__
    return False
