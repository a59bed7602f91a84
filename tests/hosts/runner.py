"""Run ``pi-conformance`` against a host variant, as a user would, and read its summary."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SERVE = Path(__file__).with_name("serve.py")


@dataclass(frozen=True)
class Run:
    """The exit status, the summary, the console output and the report folder of one run."""

    status: int
    summary: dict[str, Any]
    output: str
    report: Path = Path()

    def scenarios(self, *statuses: str) -> list[dict[str, Any]]:
        """The scenarios with one of ``statuses``."""
        return [s for s in self.summary["scenarios"] if s["status"] in statuses]

    def requirement_status(self, requirement_id: str) -> str:
        """The verdict on one requirement."""
        return next(r["status"] for r in self.summary["requirements"] if r["id"] == requirement_id)


def run_suite(
    report: Path,
    areas: str,
    keyword: str = "",
    variant: str | None = None,
    workers: int = 1,
    extra: Sequence[str] = (),
) -> Run:
    """Run the selected scenarios against ``variant`` (default: the unpatched host);
    ``extra`` are further options of ``pi-conformance run``."""
    host = ["--host-cmd", shlex.join([sys.executable, str(SERVE), variant])] if variant else []
    selection = ["--areas", areas] + (["-k", keyword] if keyword else [])
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "conformance",
            "run",
            *host,
            "--report",
            str(report),
            *selection,
            "--workers",
            str(workers),
            *extra,
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    output = completed.stdout + completed.stderr
    summary_file = report / "summary.json"
    assert summary_file.exists(), (
        f"the run wrote no summary (status {completed.returncode})\n{output}"
    )
    summary = json.loads(summary_file.read_text(encoding="utf-8"))
    return Run(completed.returncode, summary, output, report)
