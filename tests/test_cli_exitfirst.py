"""``-x`` stops a run at its first failure and says why the rest did not run."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from cli_runs import assert_nothing_left, start_cli, summary
from hosts.runner import SERVE


def test_exitfirst_stops_at_the_first_failure_and_reports_the_rest_as_not_reached(
    tmp_path: Path,
) -> None:
    report = tmp_path / "report"
    run = start_cli(
        "run",
        "--host-cmd",
        shlex.join([sys.executable, str(SERVE), "accepts-protocol-8"]),
        "--report",
        str(report),
        "--areas",
        "handshake",
        "--workers",
        "1",
        "-x",
    )
    finished = run.finish(300)
    assert finished.status == 1, finished.output
    assert_nothing_left(run.mark)
    data = summary(report)
    handshake = [s for s in data["scenarios"] if s["area"] == "handshake"]
    failed = [s for s in handshake if s["status"] == "failed"]
    assert len(failed) == 1, finished.output
    unreached = [s for s in handshake if s["status"] not in {"passed", "failed"}]
    assert unreached, "-x ran every scenario"
    assert {(s["status"], s["reason"]) for s in unreached} == {
        ("not-run", "the run stopped after 1 failing scenario(s) (-x)")
    }
    assert data["run"]["interrupted"] is False
    assert data["regressions"] == [failed[0]["id"]]
