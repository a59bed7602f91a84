"""Ctrl-C, SIGTERM and --max-time stop a run at once, with reports and no leftovers.

Each test starts ``python -m conformance run`` against the bundled reference host as a
user would, waits for the console to show the first finished scenario, and then stops
the run the way a user or a CI runner does. The run's mark in the environment finds
every process it started (pytest, its workers, the hosts) to prove none outlived it.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from cli_runs import CliRun, assert_nothing_left, host_cmd, start_cli, summary, write_script

from conformance.commands.run import GRACE_S
from conformance.reports.text import STATUS_LABEL
from conformance.scenarios import all_scenarios
from conformance.verdicts import INTERRUPTED_REASON

FIRST_RECORD_S = 120  # starting pytest and its first scenario, on a loaded machine
STOPPED_WITHIN_S = 10.0  # "within a few seconds", on a loaded machine
SCENARIO_LINES = tuple(
    label for status, label in STATUS_LABEL.items() if status not in ("not-run", "pending")
)


def _full_run(tmp_path: Path, *options: str) -> CliRun:
    return start_cli(
        "run",
        "--report",
        str(tmp_path / "report"),
        *options,
        env={"TMPDIR": str(_temp_folder(tmp_path))},
    )


def _assert_no_leftovers(run: CliRun, tmp_path: Path) -> None:
    assert_nothing_left(run.mark)
    assert list(_temp_folder(tmp_path).iterdir()) == [], "temporary folders were left behind"


def _stop_after_first_record(run: CliRun, signum: int) -> str:
    line = run.wait_for_line(SCENARIO_LINES, FIRST_RECORD_S)
    run.process.send_signal(signum)
    return line


def _assert_partial_reports(report: Path, first_line: str) -> dict[str, Any]:
    """summary.json says interrupted, keeps what ran and marks the rest not-run; junit
    has every scenario."""
    data = summary(report)
    assert data["run"]["interrupted"] is True
    assert data["preflight"]["ok"] is True
    ran = [s for s in data["scenarios"] if s["status"] != "not-run"]
    assert ran, "the scenario the console showed is missing from summary.json"
    assert any(s["id"] in first_line for s in ran), first_line
    unreached = [s for s in data["scenarios"] if s["status"] == "not-run"]
    assert unreached, "a full run cannot have finished before the signal"
    assert {s["reason"] for s in unreached} == {INTERRUPTED_REASON}
    assert len(data["scenarios"]) == len(all_scenarios())
    junit = ET.parse(report / "junit.xml").getroot()
    assert len(junit.findall(".//testcase")) == len(all_scenarios())
    return data


@pytest.mark.parametrize(
    ("signum", "status", "workers"),
    [(signal.SIGINT, 130, "2"), (signal.SIGTERM, 143, "1")],
    ids=["SIGINT-two-workers", "SIGTERM-one-worker"],
)
def test_a_signal_stops_a_full_run_within_seconds_with_a_partial_report(
    tmp_path: Path, signum: int, status: int, workers: str
) -> None:
    report = tmp_path / "report"
    run = _full_run(tmp_path, "--workers", workers)
    first = _stop_after_first_record(run, signum)
    signalled = time.monotonic()
    finished = run.finish(60)
    assert finished.status == status, finished.output
    assert finished.ended - signalled <= STOPPED_WITHIN_S, finished.output
    assert f"{signal.Signals(signum).name}: stopping the run" in finished.stderr
    assert "Traceback" not in finished.stderr, finished.output
    _assert_no_leftovers(run, tmp_path)
    _assert_partial_reports(report, first)
    assert "the run was interrupted" in finished.stdout


def test_a_second_ctrl_c_ends_the_run_at_once(tmp_path: Path) -> None:
    report = tmp_path / "report"
    run = _full_run(tmp_path, "--workers", "1")
    first = _stop_after_first_record(run, signal.SIGINT)
    run.wait_for_line(("SIGINT: stopping the run",), 30, stream="stderr")
    run.process.send_signal(signal.SIGINT)
    again = time.monotonic()
    finished = run.finish(60)
    assert finished.status == 130, finished.output
    assert "SIGINT again: ended every process at once" in finished.stderr, finished.output
    assert finished.ended - again < GRACE_S, "the second Ctrl-C waited for the grace period"
    _assert_no_leftovers(run, tmp_path)
    _assert_partial_reports(report, first)


def test_max_time_stops_the_run_with_status_124(tmp_path: Path) -> None:
    report = tmp_path / "report"
    run = _full_run(tmp_path, "--workers", "1", "--max-time", "3")
    finished = run.finish(60)
    assert finished.status == 124, finished.output
    # --max-time counts from the end of the argument checks, which take a second or two
    assert finished.seconds <= 3 + STOPPED_WITHIN_S + 3, finished.output
    assert "--max-time ran out" in finished.stderr, finished.output
    _assert_no_leftovers(run, tmp_path)
    data = summary(report)
    assert data["run"]["interrupted"] is True
    not_run = [s for s in data["scenarios"] if s["status"] == "not-run"]
    assert not_run, "a full run cannot end within 3 s"
    assert {s["reason"] for s in not_run} == {INTERRUPTED_REASON}
    assert (report / "junit.xml").exists()


def _temp_folder(tmp_path: Path) -> Path:
    """The TMPDIR of the command under test, to see that it cleans up after itself."""
    folder = tmp_path / "tmp"
    folder.mkdir(exist_ok=True)
    return folder


def _hung_host(folder: Path) -> tuple[str, Path]:
    """A host that tells the test it started, then never answers."""
    started = folder / "started.fifo"
    os.mkfifo(started)
    script = write_script(
        folder,
        "hung_host.py",
        f"""
        import time
        with open({str(started)!r}, "w") as started:
            started.write("started\\n")
        time.sleep(1000)
        """,
    )
    return host_cmd(script), started


def _wait_for_fifo(path: Path, timeout: float) -> None:
    said: list[str] = []
    reader = threading.Thread(target=lambda: said.append(path.read_text()), daemon=True)
    reader.start()
    reader.join(timeout)
    assert said == ["started\n"], f"the host did not start within {timeout} s"


@pytest.mark.parametrize(
    ("signals", "status"),
    [((signal.SIGINT,), 130), ((signal.SIGTERM,), 143), ((signal.SIGINT, signal.SIGINT), 130)],
    ids=["SIGINT", "SIGTERM", "SIGINT-twice"],
)
def test_a_signal_during_the_preflight_stops_the_run_and_its_host(
    tmp_path: Path, signals: tuple[int, ...], status: int
) -> None:
    command, started = _hung_host(tmp_path)
    report = tmp_path / "report"
    run = start_cli(
        "run",
        "--host-cmd",
        command,
        "--report",
        str(report),
        "--areas",
        "handshake",
        env={"TMPDIR": str(_temp_folder(tmp_path))},
    )
    _wait_for_fifo(started, 60)
    for signum in signals:
        run.process.send_signal(signum)
    finished = run.finish(30)
    assert finished.status == status, finished.output
    assert "Traceback" not in finished.stderr, finished.output
    _assert_no_leftovers(run, tmp_path)
    if len(signals) > 1:
        return  # the second signal may end the command before its reports are complete
    assert "before the suite started: no scenario ran" in finished.stderr, finished.output
    data = summary(report)
    assert data["run"]["interrupted"] is True
    assert {s["status"] for s in data["scenarios"]} == {"not-run"}
    assert (report / "junit.xml").exists()
