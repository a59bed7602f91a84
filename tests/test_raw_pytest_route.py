"""The suite runs under plain pytest too, from anywhere, and writes the same reports.

A small observing plugin records the names of the tests pytest collected, before the
suite deselects the other areas: they must be the names ``-k`` selection matches.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from conformance.reports import load_summary
from conformance.scenarios import all_scenarios
from conformance.verdicts import DESELECTED_REASON

WAIT_S = 300


NAME_PROBE = """
import json, os, pytest

@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    with open(os.environ["PI_TEST_COLLECTED_FILE"], "w") as out:
        json.dump([item.name for item in items], out)
"""


def _pytest(folder: Path, *options: str) -> subprocess.CompletedProcess[str]:
    (folder / "name_probe.py").write_text(NAME_PROBE, encoding="utf-8")
    path = os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--pyargs", "conformance.suite", *options],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": path, "PI_TEST_COLLECTED_FILE": str(folder / "names")},
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=False,
    )


def test_plain_pytest_writes_the_reports_and_collects_the_names_k_matches(tmp_path: Path) -> None:
    report = tmp_path / "report"
    completed = _pytest(
        tmp_path,
        "-q",
        "-p",
        "name_probe",
        "--conformance-report",
        str(report),
        "--conformance-areas",
        "handshake",
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert {p.name for p in report.iterdir()} >= {
        "summary.json",
        "junit.xml",
        "summary.md",
        "records.jsonl",
    }
    summary = load_summary(report)
    handshake = [s for s in all_scenarios() if s.area == "handshake"]
    ran = [s for s in summary.scenarios if s.status != "not-run"]
    assert sorted(s.id for s in ran) == sorted(s.id for s in handshake)
    assert {s.status for s in ran} == {"passed"}
    assert {s.reason for s in summary.scenarios if s.status == "not-run"} == {DESELECTED_REASON}
    assert len(summary.scenarios) == len(all_scenarios())
    assert summary.run.areas == ["handshake"]
    assert summary.run.host == "bundled reference host"
    assert (summary.regressions, summary.harness_errors) == ([], [])
    # Each record names the test pytest ran, which is the name -k matches.
    test_names = {s.id: s.test_name for s in handshake}
    assert {s.nodeid.rpartition("::")[2] for s in ran} == set(test_names.values())
    junit = ET.parse(report / "junit.xml").getroot()
    assert len(junit.findall(".//testcase")) == len(all_scenarios())
    collected = json.loads((tmp_path / "names").read_text(encoding="utf-8"))
    assert sorted(collected) == sorted(s.test_name for s in all_scenarios())
