"""Every harness check must be able to fail: run scenarios against broken hosts."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conformance.plugin import SCHEMA_REQUIREMENT

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
    # §1: Plan gating
    Case("offers-write-in-plan", "plan_tools", "offered_exactly_the_planning_tools", "R1.4"),
    # The [Read] example only: in the [Bash] example the unchecked Bash call waits for a
    # permission answer, so the scenario fails by a timeout rather than by its check.
    Case(
        "accepts-submit-plan-beside-another-call",
        "submit_plan",
        "beside_another_call and Read",
        "R1.6",
    ),
    # §2: the artifact's bytes
    Case("normalises-line-endings", "artifact_integrity", "byte_for_byte and CRLF", "R2.7"),
    Case("prepends-title", "artifact_integrity", "title_and_question_stay_out", "R2.7"),
    # §2: one new file per submission, never followed through a symlink
    Case("reuses-file-name", "artifact_integrity", "two_identical_submissions", "R2.4"),
    Case("follows-symlinked-pi", "artifact_integrity", "symlink", "R2.12"),
    # §2: what the approval row records, and when it is committed
    Case("records-wrong-hash", "artifact_integrity", "recorded_hash_and_size", "R2.11"),
    Case("records-wrong-size", "artifact_integrity", "recorded_hash_and_size", "R2.11"),
    Case("commits-row-before-flush", "artifact_integrity", "failed_flush", "R2.10"),
]


def run_suite(
    tmp_path: Path, areas: str, keyword: str, variant: str | None = None
) -> tuple[int, dict[str, Any], str]:
    """Run pi-conformance on a variant (default: the unpatched reference host).

    Return the exit status, the summary and the console output.
    """
    host = ["--host-cmd", shlex.join([sys.executable, str(BROKEN), variant])] if variant else []
    report = tmp_path / "report"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "conformance.cli",
            "run",
            *host,
            "--report",
            str(report),
            "--areas",
            areas,
            "-k",
            keyword,
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
    status, summary, output = run_suite(tmp_path, case.areas, case.keyword, case.variant)
    assert status == 1, f"the suite passed a broken host ({case.variant}):\n{output}"
    statuses = {r["id"]: r["status"] for r in summary["requirements"]}
    assert statuses[case.requirement] == "failed", (
        f"{case.variant} should fail {case.requirement}; statuses: "
        f"{ {k: v for k, v in statuses.items() if v in ('failed', 'passed')} }\n{output}"
    )
    assert summary["regressions"], output
    # Caught by a check, not by a timeout, a stopped host or a harness error.
    for scenario in summary["scenarios"]:
        if scenario["outcome"] == "failed":
            assert scenario["message"].endswith("AssertionError"), (
                f"{scenario['nodeid']} failed by {scenario['message']}, not by a check\n{output}"
            )


def test_the_selections_pass_against_the_reference_host(tmp_path: Path) -> None:
    """Each case's scenarios pass unpatched, so their failure above is the variant's doing."""
    areas = ",".join(sorted({case.areas for case in CASES}))
    keyword = " or ".join(f"({case.keyword})" for case in CASES)
    status, summary, output = run_suite(tmp_path, areas, keyword)
    assert status == 0, output
    passed = {s["nodeid"] for s in summary["scenarios"] if s["outcome"] == "passed"}
    assert len(passed) == len(summary["scenarios"]), output
    statuses = {r["id"]: r["status"] for r in summary["requirements"]}
    for case in CASES:
        if case.requirement == SCHEMA_REQUIREMENT:
            continue  # blamed for any schema violation, whatever the scenario's tags
        found = statuses[case.requirement]
        assert found == "passed", f"{case.requirement} is {found} unpatched\n{output}"
