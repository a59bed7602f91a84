"""Shards: ``merge`` of the shard reports equals the whole run, and the durations file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import SHARDS
from hosts.runner import Run
from summaries import every_status, scenario, summary_of

from conformance import durations
from conformance.cli import main
from conformance.commands.common import EXIT_REGRESSION, EXIT_USAGE
from conformance.options import longest_first, shard_of
from conformance.reports import REPORT_FILES, load_summary
from conformance.scenarios import all_scenarios


def _comparable(summary: dict[str, Any]) -> dict[str, Any]:
    """The verdicts of a summary, without timing, run metadata or per-run evidence.

    A failure's transcript, stderr and provider requests hold temporary paths, session
    ids and log times that differ from run to run, so only the failure's verdict stays.
    """
    verdict = ("kind", "message", "detail", "blamed", "violations")
    scenarios = []
    for s in summary["scenarios"]:
        failure = s["failure"]
        if failure is not None:
            step = failure["step"] and {**failure["step"], "duration_s": 0}
            failure = {key: failure[key] for key in verdict} | {"step": step}
        steps = [{k: v for k, v in step.items() if k != "duration_s"} for step in s["steps"]]
        kept = {k: v for k, v in s.items() if k not in ("duration_s", "steps", "failure")}
        scenarios.append({**kept, "steps": steps, "failure": failure})
    return {
        **{k: v for k, v in summary.items() if k not in ("run", "preflight", "scenarios")},
        "scenarios": scenarios,
    }


def test_merged_shards_equal_the_whole_run(
    broken_run: Run, shard_runs: list[Run], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ran_in = [
        {s["id"] for s in run.summary["scenarios"] if s["status"] != "not-run"}
        for run in shard_runs
    ]
    whole = {s["id"] for s in broken_run.summary["scenarios"] if s["status"] != "not-run"}
    assert len(whole) == 3
    assert all(ran_in), "every shard ran something"
    assert set.union(*ran_in) == whole
    assert sum(len(ids) for ids in ran_in) == len(whole), "the shards overlap"
    assert [run.summary["run"]["shard"] for run in shard_runs] == [
        f"{i}/{SHARDS}" for i in range(1, SHARDS + 1)
    ]

    merged_dir = tmp_path / "merged"
    status = main(["merge", *(str(run.report) for run in shard_runs), "--report", str(merged_dir)])
    assert status == EXIT_REGRESSION, capsys.readouterr().out  # the broken host's failure
    assert {p.name for p in merged_dir.iterdir()} >= set(REPORT_FILES)
    merged = json.loads((merged_dir / "summary.json").read_text(encoding="utf-8"))
    assert merged["run"]["shard"] is None
    assert _comparable(merged) == _comparable(broken_run.summary)
    assert merged["counts"] == broken_run.summary["counts"]
    assert merged["regressions"] == broken_run.summary["regressions"] != []


def test_shards_split_every_selection_exactly_once() -> None:
    ids = [s.id for s in all_scenarios()]
    for total in (1, 2, 3, 7):
        parts = [shard_of(ids, index, total) for index in range(1, total + 1)]
        assert set.union(*parts) == set(ids)
        assert sum(len(p) for p in parts) == len(ids)
        assert parts == [shard_of(ids, index, total) for index in range(1, total + 1)]


def test_workers_are_handed_the_longest_scenarios_first() -> None:
    """Every scenario once, by shipped duration, longest first; an unknown one as the median."""
    ids = [s.id for s in all_scenarios()]
    times = json.loads(durations.DURATIONS_FILE.read_text(encoding="utf-8"))
    median = sorted(times.values())[len(times) // 2]
    unknown = "approval.feature: a scenario the durations file does not know"
    ordered = longest_first([*reversed(ids), unknown])
    assert sorted(ordered) == sorted([*ids, unknown])
    seconds = [times.get(i, median) for i in ordered]
    assert seconds == sorted(seconds, reverse=True)
    assert seconds[0] == max(times.values()) > median
    same = [i for i in ordered if times.get(i, median) == seconds[-1]]
    assert same == sorted(same)  # ties by id: every worker collects the same order
    assert longest_first(ids) == longest_first(list(reversed(ids)))


def test_the_shipped_durations_balance_the_full_suite() -> None:
    ids = [s.id for s in all_scenarios()]
    times = json.loads(durations.DURATIONS_FILE.read_text(encoding="utf-8"))
    assert times and all(isinstance(v, float) and v > 0 for v in times.values())
    for total in (2, 3, 4):
        parts = [shard_of(ids, k, total) for k in range(1, total + 1)]
        loads = [sum(times.get(i, 1.0) for i in part) for part in parts]
        assert max(loads) - min(loads) <= max(times.values()), loads


def test_durations_come_from_the_scenarios_that_ran(tmp_path: Path) -> None:
    first = summary_of(every_status())
    second = summary_of([scenario("It passes", "passed", duration_s=2.345)])
    found = durations.durations_of([first, second])
    assert "approval.feature: It did not run" not in found
    assert found["approval.feature: It passes"] == 2.3  # the longest of the runs, rounded
    assert found["approval.feature: It errors".replace("approval", "handshake")] == 0.5
    assert list(found) == sorted(found)

    for n, summary in enumerate((first, second)):
        (tmp_path / f"r{n}").mkdir()
        (tmp_path / f"r{n}" / "summary.json").write_text(summary.model_dump_json(), "utf-8")
    output = tmp_path / "durations.json"
    reports = [str(tmp_path / "r0"), str(tmp_path / "r1")]
    assert durations.main([*reports, "--output", str(output)]) == 0
    assert json.loads(output.read_text(encoding="utf-8")) == found
    assert load_summary(tmp_path / "r1").scenarios[0].duration_s == 2.345


def test_durations_refuse_reports_where_nothing_ran(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "summary.json"
    report.write_text(summary_of([scenario("x", "not-run")]).model_dump_json(), "utf-8")
    assert durations.main([str(report), "--output", str(tmp_path / "d.json")]) == EXIT_USAGE
    assert "no scenario ran" in capsys.readouterr().err
    assert durations.main([str(tmp_path / "missing")]) == EXIT_USAGE
    assert not (tmp_path / "d.json").exists()
