"""Run ``pi-conformance`` against a host variant, as a user would, and read its summary."""

from __future__ import annotations

import errno
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hosts.registry import FROM_ENV, MAP_VARIABLE, VARIANT_VARIABLE

SERVE = Path(__file__).with_name("serve.py")
IN_PROCESS_ENTRY = "hosts.serve:serve_variant"
PER_SCENARIO_ENTRY = "hosts.serve:serve_scenario_variant"
TESTS = SERVE.parent.parent
SPAWN_ATTEMPTS = 3


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
    variants: Mapping[str, str] | None = None,
    in_process: bool = False,
) -> Run:
    """Run the selected scenarios against ``variant`` (default: the unpatched host), or
    give each scenario the variant ``variants`` maps it to; ``extra`` are further options
    of ``pi-conformance run``. ``in_process`` serves ``variant`` with the in-process driver
    (a variant patches the host's code for its whole process; with ``variants``, each
    scenario's first host undoes the variant before it and applies its own)."""
    env = dict(os.environ)
    passthrough: list[str] = []
    host: list[str] = []
    if in_process:
        env[VARIANT_VARIABLE] = variant or ""
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), env.get("PYTHONPATH")]))
        entry = PER_SCENARIO_ENTRY if variants else IN_PROCESS_ENTRY if variant else "reference"
        host = ["--driver", "inprocess", "--host-module", entry]
        variant = None
    if variants is not None:
        plan = report.parent / f"{report.name}-variants.json"
        plan.write_text(json.dumps(dict(variants)), encoding="utf-8")
        env[MAP_VARIABLE] = str(plan)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), env.get("PYTHONPATH")]))
        passthrough = ["--", "-p", "hosts.variant_per_scenario"]
        variant = None if in_process else FROM_ENV
    if variant:
        host = ["--host-cmd", shlex.join([sys.executable, str(SERVE), variant])]
    selection = ["--areas", areas] + (["-k", keyword] if keyword else [])
    command = [
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
        # a case is judged on every scenario it selects, also when its host serves none
        "--unserved-limit",
        "0",
        *extra,
        "-q",
        *passthrough,
    ]
    completed = _run_once_started(command, env)
    output = completed.stdout + completed.stderr
    summary_file = report / "summary.json"
    assert summary_file.exists(), (
        f"the run wrote no summary (status {completed.returncode})\n{output}"
    )
    summary = json.loads(summary_file.read_text(encoding="utf-8"))
    return Run(completed.returncode, summary, output, report)


def _run_once_started(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``command``; a spawn the kernel refuses with EFAULT before the program started
    (seen on loaded CI machines) is tried again: no run took place, so nothing is judged."""
    attempt = 1
    while True:
        try:
            return subprocess.run(
                command, capture_output=True, text=True, timeout=600, check=False, env=env
            )
        except OSError as problem:
            if problem.errno != errno.EFAULT or attempt == SPAWN_ATTEMPTS:
                raise
            attempt += 1
