"""junit.xml and summary.md, rendered from hand-built summaries."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from summaries import HOSTILE, every_status, failure, scenario, summary_of

from conformance.reports.junit import render_junit
from conformance.reports.markdown import render_markdown

OUTCOME = {
    "passed": None,
    "failed": "failure",
    "errored": "error",
    "harness-error": "error",
    "unverified": "skipped",
    "not-run": "skipped",
    "expected-failure": "skipped",
}


def _cases(xml: str) -> dict[str, ET.Element]:
    root = ET.fromstring(xml)
    return {case.get("name", ""): case for case in root.iter("testcase")}


def _property(case: ET.Element, name: str) -> list[str]:
    return [p.get("value", "") for p in case.iter("property") if p.get("name") == name]


def test_junit_parses_and_maps_each_status_to_its_element() -> None:
    summary = summary_of(every_status())
    cases = _cases(render_junit(summary))
    assert len(cases) == len(summary.scenarios)
    for result in summary.scenarios:
        case = cases[result.title]
        outcomes = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        expected = OUTCOME[result.status]
        assert outcomes == ([expected] if expected else []), result.status
        assert _property(case, "status") == [result.status]


def test_junit_failure_carries_the_message_and_the_record_as_text() -> None:
    summary = summary_of(every_status())
    failed = next(s for s in summary.scenarios if s.status == "failed")
    case = _cases(render_junit(summary))[failed.title]
    node = case.find("failure")
    assert node is not None and failed.failure is not None
    assert node.get("message") == failed.failure.message  # hostile text round-trips intact
    assert node.get("type") == "check"
    text = node.text or ""
    assert "at step (line 11): When step number 2" in text
    assert "blamed on: R3.6" in text
    assert "host exit: status 3" in text
    assert f"<    0.500s {HOSTILE}" in text  # the received line, with its time
    assert case.findtext("system-err") == failed.failure.stderr_tail
    errored = _cases(render_junit(summary))["It errors"].find("error")
    assert errored is not None and errored.get("type") == "host-stopped"


def test_junit_skipped_cases_say_why() -> None:
    cases = _cases(render_junit(summary_of(every_status())))
    unverified = cases["It is unverified"].find("skipped")
    assert unverified is not None
    assert unverified.get("message", "").startswith("unverified: needs the fault point")
    expected = cases["It fails as expected"].find("skipped")
    assert expected is not None
    assert expected.get("message") == "expected-failure: expected failure: bytes differ"


def test_junit_has_a_suite_and_a_classname_per_feature_and_requirement_properties() -> None:
    summary = summary_of(every_status())
    root = ET.fromstring(render_junit(summary))
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [
        "approval.feature: Approving and rejecting a plan",
        "handshake.feature: Approving and rejecting a plan",
    ]
    for suite in suites:
        feature = (suite.get("name") or "").split(".feature")[0]
        assert {c.get("classname") for c in suite.iter("testcase")} == {feature}
        assert suite.get("tests") == str(len(list(suite.iter("testcase"))))
    assert root.get("tests") == "7"
    assert (root.get("failures"), root.get("errors"), root.get("skipped")) == ("1", "2", "3")
    cases = _cases(render_junit(summary))
    assert _property(cases["It errors"], "requirement") == ["R7.8"]
    assert _property(cases["It errors"], "blamed") == ["R7.8"]
    assert _property(cases["It passes"], "blamed") == []
    assert cases["It passes"].get("file") == "features/approval.feature"
    assert cases["It passes"].get("line") == "60"


def test_junit_properties_name_the_host_and_driver() -> None:
    root = ET.fromstring(render_junit(summary_of(every_status(), host='h "1" <x>')))
    suite = root.find("testsuite")
    assert suite is not None
    values = {p.get("name"): p.get("value") for p in suite.find("properties") or []}
    assert values == {"host": 'h "1" <x>', "driver": "subprocess"}


def _table_rows(markdown: str, header: str) -> list[str]:
    lines = markdown.splitlines()
    start = lines.index(header)
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows


def _cells(row: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]


def test_markdown_escapes_pipes_and_newlines_in_table_cells() -> None:
    piped = failure(message="expected a|b\nbut got c|d", blamed=["R3.6"])
    summary = summary_of(
        [scenario("Title with | a pipe", "failed", record=piped)], host="my-host | tee log"
    )
    markdown = render_markdown(summary)
    assert markdown.startswith("# ADR 0053 conformance: my-host \\| tee log\n")
    rows = _table_rows(markdown, "| status | scenario | blamed | message |")
    assert len(rows) == 1
    assert _cells(rows[0]) == [
        "FAIL",
        "approval.feature: Title with \\| a pipe",
        "R3.6",
        "expected a\\|b but got c\\|d",
    ]


def test_markdown_lists_failures_unverified_and_every_requirement() -> None:
    summary = summary_of(every_status())
    markdown = render_markdown(summary)
    assert "- Scenarios: 1 passed, 1 failed, 1 errored, 1 expected-failure, 1 unverified" in (
        markdown
    )
    failures = _table_rows(markdown, "| status | scenario | blamed | message |")
    assert [_cells(r)[0] for r in failures] == ["FAIL", "ERROR", "XFAIL", "HARNESS"]
    assert all(len(_cells(r)) == 4 for r in failures)
    assert "## Unverified" in markdown
    assert "- approval.feature: It is unverified: needs the fault point" in markdown
    for requirement in summary.requirements:
        assert f"| {requirement.id} |" in markdown
    assert "**4 regression(s)**" not in markdown  # expected failures and harness errors aside
    assert "**2 regression(s)**" in markdown
