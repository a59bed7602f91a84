"""The pytest entry point: options only, until the conformance suite itself is collected.

Registered through the ``pytest11`` entry point, so it is active wherever the
distribution is installed. It costs other pytest runs nothing: the step definitions, the
host drivers and the mock provider load only when ``conformance/suite`` is collected, and
the result collector only when a report folder is asked for.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from conformance.options import DEFAULT_SCENARIO_TIMEOUT, DEFAULT_STEP_TIMEOUT

_SUITE_DIR = Path(__file__).resolve().parent / "suite"
_RUNTIME = "conformance.runtime"
_COLLECTOR = "pi-conformance-collector"


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
        default=float(os.environ.get("PI_CONFORMANCE_TIMEOUT", DEFAULT_STEP_TIMEOUT)),
        help="longest wait, in seconds, for any single host reaction",
    )
    group.addoption(
        "--scenario-timeout",
        type=float,
        default=DEFAULT_SCENARIO_TIMEOUT,
        help="longest time, in seconds, one scenario may take before its host is stopped",
    )
    group.addoption(
        "--conformance-report", default=None, help="folder for the reports (summary.json, ...)"
    )
    group.addoption(
        "--conformance-expectations",
        default=None,
        help="TOML file of known failures that do not count as regressions",
    )
    group.addoption(
        "--conformance-areas", default=None, help="comma-separated feature areas to run"
    )
    group.addoption("--conformance-shard", default=None, help="run shard I of N, as I/N")
    group.addoption(
        "--require-full",
        action="store_true",
        default=False,
        help="count scenarios the host's capabilities leave unverified as failures",
    )
    group.addoption(
        "--conformance-unserved-limit",
        type=int,
        default=0,
        help="stop once the first N scenarios to end all found the host not serving (0: never)",
    )
    group.addoption("--conformance-select", default=None, help=_hidden_help())
    group.addoption("--conformance-keyword", default=None, help=_hidden_help())
    group.addoption("--conformance-events-fd", type=int, default=None, help=_hidden_help())
    group.addoption("--conformance-preflight", default=None, help=_hidden_help())


def _hidden_help() -> str:
    """Help text of options only ``pi-conformance`` passes."""
    return "(set by pi-conformance)"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "requirement(id): ADR 0053 requirement a scenario checks")
    config.addinivalue_line("markers", "area(name): feature area of a scenario")
    config.addinivalue_line("markers", "subprocess_only: needs a driver that can crash the host")
    is_worker = hasattr(config, "workerinput")
    if config.getoption("--conformance-report") and not is_worker:
        from conformance.collector import ResultCollector

        config.pluginmanager.register(ResultCollector.from_config(config), _COLLECTOR)


def pytest_pycollect_makemodule(module_path: Path, parent: Any) -> None:
    """Load the suite's runtime plugin just before the suite's module is collected."""
    if module_path.resolve().is_relative_to(_SUITE_DIR):
        manager = parent.config.pluginmanager
        if not manager.has_plugin(_RUNTIME):
            manager.import_plugin(_RUNTIME)
