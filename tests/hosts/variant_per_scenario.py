"""A pytest plugin for the suite's own process: each scenario's host serves its own variant.

Loaded with ``-p hosts.variant_per_scenario`` into a ``pi-conformance run`` whose host
command is ``serve.py from-env``. ``PI_HOST_VARIANTS`` names a JSON file that maps scenario
ids to variant names; before each scenario starts its hosts, ``PI_HOST_VARIANT`` is set to
that scenario's variant (empty: the unpatched reference host). Each scenario still starts
hosts of its own, so many broken hosts share one run of the harness without sharing a host.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hosts.registry import MAP_VARIABLE, VARIANT_VARIABLE

_VARIANTS = pytest.StashKey[dict[str, str]]()


def pytest_configure(config: pytest.Config) -> None:
    """Read the scenario-to-variant map once."""
    path = Path(os.environ[MAP_VARIABLE])
    config.stash[_VARIANTS] = json.loads(path.read_text(encoding="utf-8"))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Name the scenario's variant before its fixtures start a host."""
    from conformance.runtime import scenario_id_of

    os.environ[VARIANT_VARIABLE] = item.config.stash[_VARIANTS].get(scenario_id_of(item), "")
