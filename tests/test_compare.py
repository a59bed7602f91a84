"""``pi-conformance compare``: the matrix, regressions and fixes, outputs and bad inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import BROKEN_REQUIREMENT, BROKEN_SCENARIO
from hosts.runner import Run
from summaries import HOSTILE, every_status, failure, scenario, summary_of

from conformance.cli import main
from conformance.commands.common import EXIT_OK, EXIT_REGRESSION, EXIT_USAGE
from conformance.reports.compare import compare, render_html, render_markdown
from conformance.summary_model import HostIdentity, Summary


def _with_identity(summary: Summary, name: str) -> Summary:
    run = summary.run.model_copy(
        update={"host_identity": HostIdentity(name=name, version="1", capabilities={})}
    )
    return summary.model_copy(update={"run": run})


def _runs(before: str, after: str) -> tuple[Summary, Summary]:
    """Two runs of one host in which one scenario (tagged R3.6) went from ``before`` to
    ``after``."""
    made = []
    for status in (before, after):
        record = failure() if status in ("failed", "errored") else None
        made.append(
            _with_identity(
                summary_of([scenario("It changes", status, record=record)]),  # type: ignore[arg-type]
                "my-host",
            )
        )
    return made[0], made[1]


def test_rows_are_requirements_and_columns_are_runs() -> None:
    first = summary_of(every_status(), host="host-a", driver="subprocess")
    second = summary_of([scenario("It passes", "passed")], host="host-b", driver="inprocess")
    comparison = compare([first, second])
    assert [c.key for c in comparison.columns] == ["#1", "#2"]
    assert [c.label for c in comparison.columns] == ["host-a (subprocess)", "host-b (inprocess)"]
    rows = {r.id: r for r in comparison.rows}
    assert set(rows) == {r.id for r in first.requirements}
    assert rows["R3.6"].statuses == ["failed", "passed"]
    assert rows["R1.1"].statuses == ["not-run", "not-run"]
    assert rows["R3.6"].differs and not rows["R1.1"].differs
    # Different hosts: the matrix only, no regressions or fixes.
    assert not comparison.same_host and comparison.steps == []


def test_two_runs_of_one_host_list_regressions_per_requirement_and_scenario() -> None:
    comparison = compare(list(_runs("passed", "failed")))
    assert comparison.same_host
    [step] = comparison.steps
    assert [(c.id, c.before, c.after) for c in step.of("regression", "requirement")] == [
        ("R3.6", "passed", "failed")
    ]
    assert [c.id for c in step.of("regression", "scenario")] == ["approval.feature: It changes"]
    assert not step.of("fix", "requirement") and comparison.regressions == 2


@pytest.mark.parametrize("before", ["failed", "errored"])
def test_a_failure_that_now_passes_is_a_fix(before: str) -> None:
    [step] = compare(list(_runs(before, "passed"))).steps
    assert [(c.kind, c.subject) for c in step.changes] == [
        ("fix", "requirement"),
        ("fix", "scenario"),
    ]


@pytest.mark.parametrize(("before", "after"), [("passed", "unverified"), ("failed", "errored")])
def test_other_changes_are_neither(before: str, after: str) -> None:
    [step] = compare(list(_runs(before, after))).steps
    assert [c for c in step.changes if c.subject == "scenario"] == []


def test_markdown_and_html_escape_what_the_runs_say() -> None:
    hostile = summary_of(every_status(), host=f"host | {HOSTILE}")
    comparison = compare([hostile, summary_of(every_status())])
    markdown = render_markdown(comparison)
    assert "host \\| <script>" in markdown
    table = [line for line in markdown.splitlines() if line.startswith("| R3.6 ")]
    assert table == ["| R3.6 (§3) | failed | failed |"]
    html = render_html(comparison)
    assert "<script>window" not in html and "<img" not in html
    assert "&lt;script&gt;window.pwned=1&lt;/script&gt;" in html
    assert 'data-requirement="R3.6"' in html


def _write_summaries(tmp_path: Path, *summaries: Summary) -> list[str]:
    paths = []
    for n, summary in enumerate(summaries):
        path = tmp_path / f"run{n}.json"
        path.write_text(summary.model_dump_json(), encoding="utf-8")
        paths.append(str(path))
    return paths


def test_the_command_writes_markdown_and_html(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = _write_summaries(tmp_path, *_runs("passed", "failed"))
    outputs = ["--markdown", str(tmp_path / "m.md"), "--html", str(tmp_path / "c.html")]
    status = main(["compare", *paths, *outputs])
    assert status == EXIT_REGRESSION
    out = capsys.readouterr().out
    assert "R3.6: passed -> failed" in out
    assert "## From #1 to #2" in (tmp_path / "m.md").read_text(encoding="utf-8")
    assert (tmp_path / "c.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "does not exist"),
        ("not json at all", "not a pi-conformance summary"),
        (json.dumps({"format_version": 2}), "not a pi-conformance summary"),
    ],
)
def test_bad_inputs_are_one_line_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, problem: str
) -> None:
    target = tmp_path / "report"
    if content is not None:
        target.write_text(content, encoding="utf-8")
    assert main(["compare", str(target)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"pi-conformance compare: {target}")
    assert problem in err


def test_an_unwritable_output_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = _write_summaries(tmp_path, summary_of(every_status()))
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    assert main(["compare", *paths, "--html", str(blocker / "c.html")]) == EXIT_USAGE
    assert capsys.readouterr().err.startswith("pi-conformance compare: --html: cannot write")


def test_two_real_runs_of_one_host(
    reference_run: Run, broken_run: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reference host, then a host whose Reject grants a permission mode (same name)."""
    html = tmp_path / "compare.html"
    markdown = tmp_path / "compare.md"
    args = ["--html", str(html), "--markdown", str(markdown)]
    status = main(["compare", str(reference_run.report), str(broken_run.report), *args])
    out = capsys.readouterr().out
    assert status == EXIT_REGRESSION, out
    assert f"{BROKEN_REQUIREMENT}: passed -> failed" in out
    assert f"{BROKEN_SCENARIO}: passed -> failed" in out
    assert "python " in out and "(subprocess)" in out  # columns named by host and driver
    page = html.read_text(encoding="utf-8")
    assert f'<tr id="req-{BROKEN_REQUIREMENT}" data-requirement="{BROKEN_REQUIREMENT}"' in page
    assert "regressions of requirements (1)" in page
    assert f"| {BROKEN_REQUIREMENT} (§3) | passed | failed |" in markdown.read_text("utf-8")

    # The other way round, the same difference is a fix.
    status = main(["compare", str(broken_run.report), str(reference_run.report)])
    out = capsys.readouterr().out
    assert status == EXIT_OK
    assert "fixes of requirements (1):" in out and f"{BROKEN_SCENARIO}: failed -> passed" in out
