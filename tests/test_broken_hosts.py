"""Every harness check must be able to fail: run scenarios against broken hosts."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

BROKEN = Path(__file__).with_name("broken_hosts.py")


@dataclass(frozen=True)
class Case:
    """A broken variant, the scenarios to run, and the requirement that must fail."""

    variant: str
    areas: str
    keyword: str
    requirement: str


CASES = [
    Case("accepts-protocol-8", "handshake", "previous_version", "R7.1"),
    Case("schema-invalid-session", "sessions", "starts_in_agent_mode", "R7.14"),
]


def run_suite(tmp_path: Path, case: Case) -> tuple[int, dict[str, object], str]:
    """Run pi-conformance on the variant; return exit status, summary and output."""
    host_cmd = shlex.join([sys.executable, str(BROKEN), case.variant])
    report = tmp_path / "report"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "conformance.cli",
            "run",
            "--host-cmd",
            host_cmd,
            "--report",
            str(report),
            "--areas",
            case.areas,
            "-k",
            case.keyword,
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    summary = json.loads((report / "summary.json").read_text(encoding="utf-8"))
    return completed.returncode, summary, completed.stdout + completed.stderr


@pytest.mark.parametrize("case", CASES, ids=[c.variant for c in CASES])
def test_broken_host_is_rejected(tmp_path: Path, case: Case) -> None:
    status, summary, output = run_suite(tmp_path, case)
    assert status == 1, f"the suite passed a broken host ({case.variant}):\n{output}"
    statuses = {r["id"]: r["status"] for r in summary["requirements"]}  # type: ignore[index]
    assert statuses[case.requirement] == "failed", (
        f"{case.variant} should fail {case.requirement}; statuses: "
        f"{ {k: v for k, v in statuses.items() if v in ('failed', 'passed')} }\n{output}"
    )
    assert summary["regressions"], output
