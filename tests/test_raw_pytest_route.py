"""The suite runs under plain pytest too, from anywhere, and writes the same reports."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from conformance.reports import load_summary
from conformance.scenarios import all_scenarios
from conformance.verdicts import DESELECTED_REASON

WAIT_S = 300


def _pytest(folder: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--pyargs", "conformance.suite", *options],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=False,
    )


def test_plain_pytest_writes_the_reports_for_an_area(tmp_path: Path) -> None:
    report = tmp_path / "report"
    completed = _pytest(
        tmp_path, "-q", "--conformance-report", str(report), "--conformance-areas", "handshake"
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


def test_the_test_names_pytest_collects_are_the_ones_selection_matches(tmp_path: Path) -> None:
    completed = _pytest(tmp_path, "--collect-only", "-q")
    assert completed.returncode == 0, completed.stdout + completed.stderr
    collected = {line.rpartition("::")[2] for line in completed.stdout.splitlines() if "::" in line}
    assert collected == {s.test_name for s in all_scenarios()}
