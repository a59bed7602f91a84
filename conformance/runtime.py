"""The suite's pytest plugin: fixtures, step tracking and one record per scenario.

Loaded by :mod:`conformance.plugin` only when the conformance suite is collected, so other
pytest runs in the same environment pay nothing for it. It runs wherever scenarios run
(the xdist workers, or the single pytest process) and attaches each scenario's
:class:`~conformance.summary_model.ScenarioResult` to its test report; the collector on
the controlling process turns those into the reports.
"""

from __future__ import annotations

import gc
import os
import threading
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pytest_bdd.parser import ScenarioTemplate
from pytest_bdd.scenario import scenario_wrapper_template_registry

from conformance import aftercheck, step_lookup, surface
from conformance.drivers import (
    DEFAULT_HOST_CMD,
    HostDriver,
    InProcessDriver,
    SubprocessDriver,
)
from conformance.failures import Verdict, classify, failure_record
from conformance.mock_provider import MockProvider
from conformance.options import RunOptions, longest_first, shard_of
from conformance.requirements import REQUIREMENT_TAG
from conformance.runtime_records import attach, stopped_reason
from conformance.scenarios import SUBPROCESS_ONLY, area_of, scenario_id
from conformance.summary_model import ScenarioResult, StepResult
from conformance.workspace_names import workspace_name_for
from conformance.world import World

STEP_MODULES = (
    "conformance.steps.common",
    "conformance.steps.sessions",
    "conformance.steps.model",
    "conformance.steps.plan",
    "conformance.steps.plan_lifecycle",
    "conformance.steps.tool_work",
    "conformance.steps.approval",
    "conformance.steps.execution",
    "conformance.steps.boundaries",
    "conformance.steps.restart",
    "conformance.steps.storage",
    "conformance.steps.migration",
    "conformance.steps.tasks",
    "conformance.steps.shell",
)

_WORLD = pytest.StashKey["World"]()
_TRACK = pytest.StashKey["ScenarioTrack"]()
_STOPPED = pytest.StashKey[str]()  # why the run stopped before this scenario started


@dataclass
class ScenarioTrack:
    """What happened to one scenario's steps, gathered from pytest-bdd's hooks."""

    feature_file: str
    feature: str
    area: str
    rule: str | None
    title: str
    line: int
    tags: list[str]
    steps: list[dict[str, Any]] = field(default_factory=list)
    current: int | None = None
    failed: int | None = None
    step_function: object = None
    error: BaseException | None = None
    started: float = 0.0

    @property
    def id(self) -> str:
        """The stable scenario id."""
        return scenario_id(self.feature_file, self.title)

    def step_result(self, index: int) -> StepResult:
        """The step at ``index`` as a result model."""
        step = self.steps[index]
        return StepResult(
            keyword=step["keyword"],
            text=step["text"],
            line=step["line"],
            status=step["status"],
            duration_s=round(step["duration_s"], 3),
        )


def pytest_configure(config: pytest.Config) -> None:
    """Load the step definitions; look each step up once."""
    step_lookup.install()
    for module in STEP_MODULES:
        if not config.pluginmanager.has_plugin(module):
            config.pluginmanager.import_plugin(module)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Start no scenario once the run has stopped early (the collector leaves a note in
    the report folder, which every worker can read): it stays not-run, with the reason."""
    report_dir = item.config.getoption("--conformance-report")
    if report_dir:
        reason = stopped_reason(Path(str(report_dir)))
        if reason is not None:
            item.stash[_STOPPED] = reason
            pytest.skip(reason)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Freeze what the run leaves, so that the process exits without a last walk of it.

    The interpreter's final garbage collection walked everything the scenarios left
    behind (half a second per worker after a full run), and xdist waits for each worker
    to exit before the reports are written.
    """
    gc.freeze()


def pytest_bdd_apply_tag(tag: str, function: Any) -> bool | None:
    """Turn ``@R4.9`` into ``requirement("R4.9")`` and ``@area:x`` into ``area("x")``."""
    if REQUIREMENT_TAG.match(tag):
        pytest.mark.requirement(tag)(function)
        return True
    if tag.startswith("area:"):
        pytest.mark.area(tag.partition(":")[2])(function)
        return True
    if tag == SUBPROCESS_ONLY:
        pytest.mark.subprocess_only(function)
        return True
    return None


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Keep the selected scenarios: exact ids, or areas and a shard; drop what the driver
    cannot express."""
    options = RunOptions.from_config(config)
    others = [i for i in items if i.get_closest_marker("area") is None]
    scenarios = [i for i in items if i.get_closest_marker("area") is not None]
    keep: list[pytest.Item] = []
    for item in scenarios:
        area = str(item.get_closest_marker("area").args[0])  # type: ignore[union-attr]
        expressible = options.crash_capable or item.get_closest_marker("subprocess_only") is None
        if options.chosen is not None:
            selected = scenario_id_of(item) in options.chosen
        else:
            selected = options.areas is None or area in options.areas
        if selected and expressible:
            keep.append(item)
    if options.shard is not None and options.chosen is None:
        wanted = shard_of([scenario_id_of(i) for i in keep], *options.shard)
        keep = [i for i in keep if scenario_id_of(i) in wanted]
    kept = set(map(id, keep))
    dropped = [i for i in scenarios if id(i) not in kept]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # every worker collects the same order; the reports follow the features' order
        ids = {id(i): scenario_id_of(i) for i in keep}
        rank = {scenario: n for n, scenario in enumerate(longest_first(list(ids.values())))}
        keep.sort(key=lambda i: rank[ids[id(i)]])
    items[:] = [*others, *keep]


def _template(item: pytest.Item) -> ScenarioTemplate | None:
    """The Gherkin scenario a collected test runs (None for other tests)."""
    function = getattr(item, "obj", None)
    if function is None:
        return None
    return scenario_wrapper_template_registry.get(function)


def scenario_id_of(item: pytest.Item) -> str:
    """The stable id of a collected scenario, from its feature and rendered title."""
    template = _template(item)
    if template is None:
        return item.nodeid
    example = getattr(item, "callspec", None)
    context = example.params.get("_pytest_bdd_example", {}) if example else {}
    rendered = template.render(context)
    return scenario_id(Path(template.feature.filename).name, rendered.name)


@pytest.fixture(scope="session")
def host_driver(pytestconfig: pytest.Config) -> HostDriver:
    """The driver chosen on the command line."""
    options = RunOptions.from_config(pytestconfig)
    if options.driver == "inprocess":
        return InProcessDriver.load(options.host_module or "reference")
    if options.host_cmd:
        return SubprocessDriver.from_command_line(options.host_cmd)
    return SubprocessDriver(DEFAULT_HOST_CMD)


@pytest.fixture(scope="session")
def mock_provider() -> Iterator[MockProvider]:
    """The scripted model provider on 127.0.0.1, shared by the session, reset per scenario."""
    with MockProvider() as provider:
        yield provider


@pytest.fixture
def world(
    request: pytest.FixtureRequest,
    host_driver: HostDriver,
    mock_provider: MockProvider,
    tmp_path: Path,
    pytestconfig: pytest.Config,
) -> Generator[World, None, None]:
    """A fresh data dir, workspace and provider script for one scenario, with a deadline."""
    options = RunOptions.from_config(pytestconfig)
    mock_provider.new_scenario(scenario_id_of(request.node))
    workspace = tmp_path / workspace_name_for(scenario_id_of(request.node))
    workspace.mkdir()
    state = World(
        driver=host_driver,
        data_dir=tmp_path / "data",
        workspace=workspace.resolve(),
        timeout=options.step_timeout,
        provider=mock_provider,
        deadline_s=options.scenario_timeout,
    )
    request.node.stash[_WORLD] = state
    watchdog = threading.Timer(options.scenario_timeout, state.abort)
    watchdog.daemon = True
    watchdog.start()
    try:
        yield state
    finally:
        watchdog.cancel()
        state.close()
        mock_provider.release_stalls()


# -- step tracking ----------------------------------------------------------------------


def pytest_bdd_before_scenario(request: pytest.FixtureRequest, feature: Any, scenario: Any) -> None:
    """Remember the scenario's steps, all not-run until they run."""
    tags = sorted(set(scenario.tags) | set(feature.tags))
    track = ScenarioTrack(
        feature_file=Path(feature.filename).name,
        feature=feature.name,
        area=area_of(feature),
        rule=scenario.rule.name if scenario.rule else None,
        title=scenario.name,
        line=scenario.line_number,
        tags=tags,
        steps=[
            {
                "keyword": step.keyword.strip(),
                "text": step.name,
                "line": step.line_number,
                "status": "not-run",
                "duration_s": 0.0,
            }
            for step in scenario.steps
        ],
        started=time.monotonic(),
    )
    request.node.stash[_TRACK] = track


def _index(scenario: Any, step: Any) -> int | None:
    for index, candidate in enumerate(scenario.steps):
        if candidate is step:
            return index
    return None


def pytest_bdd_before_step(
    request: pytest.FixtureRequest, feature: Any, scenario: Any, step: Any, step_func: Any
) -> None:
    track = request.node.stash.get(_TRACK, None)
    if track is not None:
        track.current = _index(scenario, step)
        if track.current is not None:
            track.steps[track.current]["started"] = time.monotonic()


def _finish_step(track: ScenarioTrack, status: str) -> None:
    if track.current is None:
        return
    step = track.steps[track.current]
    step["status"] = status
    step["duration_s"] = time.monotonic() - step.pop("started", time.monotonic())


def pytest_bdd_after_step(
    request: pytest.FixtureRequest,
    feature: Any,
    scenario: Any,
    step: Any,
    step_func: Any,
    step_func_args: dict[str, Any],
) -> None:
    track = request.node.stash.get(_TRACK, None)
    if track is not None:
        _finish_step(track, "passed")
        track.current = None


def pytest_bdd_step_error(
    request: pytest.FixtureRequest,
    feature: Any,
    scenario: Any,
    step: Any,
    step_func: Any,
    step_func_args: dict[str, Any],
    exception: Exception,
) -> None:
    track = request.node.stash.get(_TRACK, None)
    if track is not None:
        track.failed = track.current
        _finish_step(track, "failed")
        track.step_function = step_func
        track.error = exception


def pytest_bdd_step_func_lookup_error(
    request: pytest.FixtureRequest, feature: Any, scenario: Any, step: Any, exception: Exception
) -> None:
    track = request.node.stash.get(_TRACK, None)
    if track is not None:
        track.current = _index(scenario, step)
        track.failed = track.current
        _finish_step(track, "failed")
        track.error = exception


# -- one record per scenario ---------------------------------------------------------------


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, None]:
    """Attach the scenario's record to its report; a contract violation fails the scenario."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    track = item.stash.get(_TRACK, None)
    if track is None:
        stopped = _STOPPED in item.stash
        if report.when == "setup" and (report.failed or report.skipped) and not stopped:
            _record_setup_problem(item, report, call)
        return
    if report.when != "call":
        return
    world = item.stash.get(_WORLD, None)
    error = call.excinfo.value if call.excinfo is not None else None
    found, broken_check = aftercheck.checked(world) if world is not None else ([], None)
    verdict = classify(error or broken_check, track.step_function, track.tags, world, found)
    if verdict.status != "passed" and report.passed:
        report.outcome = "failed"  # a clean run whose messages broke the contract
        report.longrepr = verdict.message + "\n" + verdict.detail
    if verdict.status == "unverified" and track.current is not None:
        track.steps[track.current]["status"] = "not-run"
    failed_step = track.step_result(track.failed) if track.failed is not None else None
    if failed_step is None and verdict.kind is not None and track.current is not None:
        failed_step = track.step_result(track.current)
    result = ScenarioResult(
        id=track.id,
        nodeid=item.nodeid,
        feature_file=track.feature_file,
        feature=track.feature,
        area=track.area,
        rule=track.rule,
        title=track.title,
        line=track.line,
        requirements=[t for t in track.tags if REQUIREMENT_TAG.match(t)],
        status=verdict.status,
        reason=verdict.reason,
        duration_s=round(time.monotonic() - track.started, 3),
        steps=[track.step_result(i) for i in range(len(track.steps))],
        failure=failure_record(verdict, failed_step, world),
    )
    attach(report, result)
    report_dir = item.config.getoption("--conformance-report")
    if world is not None and report_dir:
        _record_surface(Path(str(report_dir)), world)


def _record_surface(report_dir: Path, world: World) -> None:
    """Append what the scenario exercised of the protocol (see conformance.surface)."""
    lines = world.transcript()
    sent = [line.text for line, _ in lines if line.direction == "client-to-host"]
    received = [line.text for line, _ in lines if line.direction == "host-to-client"]
    surface.append(report_dir, surface.observe(sent, received))


def _record_setup_problem(
    item: pytest.Item, report: pytest.TestReport, call: pytest.CallInfo[None]
) -> None:
    """A scenario that never started (a fixture failed): the harness's fault."""
    template = _template(item)
    if template is None:
        return
    error = call.excinfo.value if call.excinfo is not None else None
    verdict = classify(error, None, [], None)
    if verdict.status == "passed":
        verdict = Verdict("harness-error", "harness", "the scenario could not be set up")
    example = getattr(item, "callspec", None)
    context = example.params.get("_pytest_bdd_example", {}) if example else {}
    rendered = template.render(context)
    tags = sorted(set(template.tags) | set(template.feature.tags))
    feature_file = Path(template.feature.filename).name
    result = ScenarioResult(
        id=scenario_id(feature_file, rendered.name),
        nodeid=item.nodeid,
        feature_file=feature_file,
        feature=template.feature.name,
        area=area_of(template.feature),
        rule=template.rule.name if template.rule else None,
        title=rendered.name,
        line=template.line_number,
        requirements=[t for t in tags if REQUIREMENT_TAG.match(t)],
        status=verdict.status,
        reason=verdict.reason,
        duration_s=round(report.duration, 3),
        failure=failure_record(verdict, None, None),
    )
    attach(report, result)
