"""The pytest plugin: options, per-scenario fixtures, failure attachments and the report.

Registered through the ``pytest11`` entry point, so it is active wherever the
distribution is installed; it only acts on tests that use its fixtures.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from conformance.drivers import (
    DEFAULT_HOST_CMD,
    HostDriver,
    InProcessDriver,
    SubprocessDriver,
)
from conformance.mock_provider import MockProvider
from conformance.report import Expectations, ResultCollector
from conformance.requirements import REQUIREMENT_TAG
from conformance.world import World

_WORLD_KEY = pytest.StashKey[World]()
_COLLECTOR_KEY = pytest.StashKey[ResultCollector]()

SCHEMA_REQUIREMENT = "R7.14"

STEP_MODULES = (
    "conformance.steps.common",
    "conformance.steps.sessions",
    "conformance.steps.model",
    "conformance.steps.plan",
    "conformance.steps.approval",
    "conformance.steps.boundaries",
    "conformance.steps.restart",
    "conformance.steps.migration",
    "conformance.steps.tasks",
    "conformance.steps.shell",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pi-conformance", "ADR 0053 conformance harness")
    group.addoption(
        "--host-cmd",
        default=None,
        help="command line of the host under test (default: the bundled reference host); "
        "the harness appends --data-dir DIR --conformance",
    )
    group.addoption(
        "--host-module",
        default=None,
        help="run a Python host in-process: an entry point name in pi_conformance.hosts "
        "or module:function with the published serve signature",
    )
    group.addoption(
        "--driver",
        choices=("subprocess", "inprocess"),
        default=None,
        help="how to run the host (default: subprocess, or inprocess with --host-module)",
    )
    group.addoption(
        "--step-timeout",
        type=float,
        default=float(os.environ.get("PI_CONFORMANCE_TIMEOUT", "10")),
        help="longest wait, in seconds, for any single host reaction",
    )
    group.addoption(
        "--conformance-report",
        default=None,
        help="folder for summary.json (pi-conformance run sets it)",
    )
    group.addoption(
        "--conformance-expectations",
        default=None,
        help="TOML file of known failures that do not count as regressions",
    )
    group.addoption(
        "--conformance-areas",
        default=None,
        help="comma-separated feature areas to run (default: all)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "requirement(id): ADR 0053 requirement a scenario checks")
    config.addinivalue_line("markers", "area(name): feature area of a scenario")
    config.addinivalue_line("markers", "subprocess_only: needs a driver that can crash the host")
    for module in STEP_MODULES:
        if not config.pluginmanager.has_plugin(module):
            config.pluginmanager.import_plugin(module)
    report_dir = config.getoption("--conformance-report")
    if report_dir:
        expectations_file = config.getoption("--conformance-expectations")
        collector = ResultCollector(
            Path(report_dir),
            _driver_name(config),
            _host_label(config),
            Expectations.load(Path(expectations_file) if expectations_file else None),
        )
        config.stash[_COLLECTOR_KEY] = collector
        config.pluginmanager.register(collector, "pi-conformance-results")


def _driver_name(config: pytest.Config) -> str:
    chosen: str | None = config.getoption("--driver")
    if chosen:
        return chosen
    return "inprocess" if config.getoption("--host-module") else "subprocess"


def _host_label(config: pytest.Config) -> str:
    if config.getoption("--host-module"):
        return f"python host {config.getoption('--host-module')}"
    return str(config.getoption("--host-cmd") or "bundled reference host")


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Select areas, drop scenarios the driver cannot express, label items for reports."""
    wanted = config.getoption("--conformance-areas")
    areas = {a.strip() for a in wanted.split(",")} if wanted else None
    can_crash = _driver_name(config) == "subprocess"
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        area_mark = item.get_closest_marker("area")
        area = str(area_mark.args[0]) if area_mark else None
        if area is None and areas is None:
            keep.append(item)
            continue
        selected = areas is None or area in areas
        expressible = can_crash or item.get_closest_marker("subprocess_only") is None
        (keep if selected and expressible else dropped).append(item)
        if selected and not expressible and _COLLECTOR_KEY in config.stash:
            config.stash[_COLLECTOR_KEY].not_expressible.append(item.nodeid)
        item.user_properties.append(("area", area or ""))
        for mark in item.iter_markers("requirement"):
            item.user_properties.append(("requirement", str(mark.args[0])))
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def pytest_bdd_apply_tag(tag: str, function: Any) -> bool | None:
    """Turn ``@R4.9`` into ``requirement("R4.9")`` and ``@area:x`` into ``area("x")``."""
    if REQUIREMENT_TAG.match(tag):
        pytest.mark.requirement(tag)(function)
        return True
    if tag.startswith("area:"):
        pytest.mark.area(tag.partition(":")[2])(function)
        return True
    if tag == "subprocess_only":
        pytest.mark.subprocess_only(function)
        return True
    return None


@pytest.fixture(scope="session")
def host_driver(pytestconfig: pytest.Config) -> HostDriver:
    """The driver chosen on the command line."""
    name = _driver_name(pytestconfig)
    if name == "inprocess":
        return InProcessDriver.load(pytestconfig.getoption("--host-module") or "reference")
    command = pytestconfig.getoption("--host-cmd")
    if command:
        return SubprocessDriver.from_command_line(command)
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
    """A fresh data dir, workspace and provider script for one scenario."""
    if request.node.get_closest_marker("subprocess_only") and host_driver.name != "subprocess":
        pytest.fail(
            "this scenario needs the subprocess driver (it stops the host abruptly); "
            "it is deselected by pi-conformance for other drivers"
        )
    mock_provider.reset()
    data_dir = tmp_path / "data"
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    state = World(
        driver=host_driver,
        data_dir=data_dir,
        workspace=workspace.resolve(),
        timeout=pytestconfig.getoption("--step-timeout"),
        provider=mock_provider,
    )
    request.node.stash[_WORLD_KEY] = state
    yield state
    state.close()
    mock_provider.release_stalls()


def pytest_bdd_after_scenario(request: pytest.FixtureRequest, feature: Any, scenario: Any) -> None:
    """A scenario fails when any message broke the published contract."""
    state = request.node.stash.get(_WORLD_KEY, None)
    if state is None:
        return
    violations = state.violations()
    if violations:
        details = "\n".join(v.describe() for v in violations)
        raise AssertionError(
            f"{len(violations)} message(s) broke the protocol v9 schema:\n{details}"
        )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, None]:
    """Attach the host's stderr and contract violations to a failing scenario."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    state = item.stash.get(_WORLD_KEY, None)
    if state is None or not report.failed:
        return
    report.sections.append(("host stderr", state.stderr() or "(empty)"))
    violations = state.violations()
    if violations:
        report.sections.append(("protocol violations", "\n".join(v.describe() for v in violations)))
        if any(v.direction == "host-to-client" for v in violations):
            # Whatever the scenario checks, a malformed host message also breaks R7.14.
            report.user_properties.append(("requirement", SCHEMA_REQUIREMENT))
