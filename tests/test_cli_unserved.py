"""A run against a host that answers the handshake and then serves nothing stops after
its first scenarios with one diagnosis, instead of waiting out every scenario's timeouts;
``--unserved-limit 0`` runs them all."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_runs import assert_nothing_left, start_cli, summary
from hosts.runner import SERVE

# Eight scenarios whose first request the host never answers.
_IDLE = ["--areas", "sessions", "-k", "idle and session"]


def _run(tmp_path: Path, *extra: str) -> tuple[int, str, dict[str, Any]]:
    report = tmp_path / "report"
    run = start_cli(
        "run",
        "--host-cmd",
        shlex.join([sys.executable, str(SERVE), "answers-only-initialize"]),
        "--report",
        str(report),
        "--timeout",
        "1",
        "--workers",
        "2",
        *_IDLE,
        *extra,
    )
    finished = run.finish(300)
    assert_nothing_left(run.mark)
    return finished.status, finished.output, summary(report)


def test_a_host_that_serves_nothing_stops_the_run_after_its_first_scenarios(
    tmp_path: Path,
) -> None:
    status, output, data = _run(tmp_path, "--unserved-limit", "3")
    assert status == 1, output
    scenarios = [s for s in data["scenarios"] if s["area"] == "sessions"]
    chosen = [s for s in scenarios if s["status"] != "not-run" or "stopped" in (s["reason"] or "")]
    errored = [s for s in chosen if s["status"] == "errored"]
    stopped = [s for s in chosen if s["status"] == "not-run"]
    assert 3 <= len(errored) < 8 and stopped, output  # the ones under way when it stopped end too
    assert all(s["failure"]["kind"] == "host-hung" for s in errored), errored
    (reason,) = {s["reason"] for s in stopped}
    assert reason.startswith("the run stopped: its first 3 scenarios to end all found the host")
    assert "--unserved-limit 0" in reason
    assert f"{reason}: scenarios it did not reach are not-run" in output
    assert data["run"]["interrupted"] is False


def test_an_unserved_limit_of_zero_runs_every_scenario(tmp_path: Path) -> None:
    status, output, data = _run(tmp_path, "--unserved-limit", "0")
    assert status == 1, output
    chosen = [s for s in data["scenarios"] if "idle" in s["title"] and s["area"] == "sessions"]
    assert len(chosen) == 8 and {s["status"] for s in chosen} == {"errored"}, output


@pytest.mark.parametrize("value", ["-1", "three", "2.5"])
def test_the_unserved_limit_is_a_whole_number_of_at_least_zero(tmp_path: Path, value: str) -> None:
    run = start_cli("run", "--report", str(tmp_path / "r"), "--unserved-limit", value)
    finished = run.finish(60)
    assert finished.status == 2, finished.output
    assert "--unserved-limit" in finished.output and "give 0 or more" in finished.output
