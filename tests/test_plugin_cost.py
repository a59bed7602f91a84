"""The pytest plugin costs other test suites nothing: it registers options only.

An unrelated, trivial pytest run in the same environment must not import the suite's
step definitions, runtime, drivers or mock provider, nor their heavy dependencies.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HEAVY = (
    "conformance.runtime",
    "conformance.steps",
    "conformance.mock_provider",
    "conformance.world",
    "conformance.client",
    "conformance.drivers",
    "conformance.collector",
    "reference_host",
    "aiohttp",
    "jsonschema",
)
PROBE = """
import json, os, sys

def pytest_sessionfinish(session):
    with open(os.environ["PI_TEST_MODULES_FILE"], "w") as out:
        json.dump(sorted(sys.modules), out)
"""


def _modules_of_a_trivial_run(folder: Path, *options: str) -> list[str]:
    (folder / "conftest.py").write_text(PROBE, encoding="utf-8")
    (folder / "test_trivial.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
    record = folder / "modules.json"
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *options],
        cwd=folder,
        env={**_environment(), "PI_TEST_MODULES_FILE": str(record)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    modules: list[str] = json.loads(record.read_text(encoding="utf-8"))
    return modules


def _environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(f"{h}.") for h in HEAVY)]


def test_an_unrelated_pytest_run_loads_only_the_plugins_options(tmp_path: Path) -> None:
    modules = _modules_of_a_trivial_run(tmp_path)
    assert "conformance.plugin" in modules, "the plugin is not installed: this proves nothing"
    assert _heavy(modules) == []


def test_the_probe_sees_a_heavy_module_when_one_is_loaded(tmp_path: Path) -> None:
    modules = _modules_of_a_trivial_run(tmp_path, "-p", "conformance.drivers")
    assert _heavy(modules) == ["conformance.drivers"]
