"""The HTML report rendered from hand-built summaries: structure, vocabulary and escaping."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

from summaries import HOSTILE, every_status, scenario, summary_of

from conformance.reports import HTML_FILE, write_all
from conformance.reports.html import render_html, section_of


class Page(HTMLParser):
    """Every start tag with its attributes, and the text, of a rendered page."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def having(self, tag: str, **attrs: str) -> list[dict[str, str | None]]:
        return [
            found
            for name, found in self.tags
            if name == tag and all(found.get(k.replace("_", "-")) == v for k, v in attrs.items())
        ]


def test_hostile_host_output_is_escaped_everywhere() -> None:
    html = render_html(summary_of(every_status()))
    assert "<script>window" not in html
    assert "<img" not in html
    page = Page(html)
    # One script (the page's own) and no image or other active element came from the data.
    assert [t for t, _ in page.tags if t in ("script", "img", "iframe", "object", "embed")] == [
        "script"
    ]
    assert not any(name.startswith("on") for _, attrs in page.tags for name in attrs)
    # The hostile text is shown to the reader as text, in the message, stderr and transcript.
    text = "".join(page.text)
    assert text.count(HOSTILE) >= 4


def test_the_page_loads_nothing_from_outside() -> None:
    html = render_html(summary_of(every_status()))
    page = Page(html)
    assert not page.having("link")
    for _, attrs in page.tags:
        for name in ("src", "href"):
            value = attrs.get(name)
            assert value is None or value.startswith("#"), f"{name}={value!r} leaves the page"
    assert "default-src 'none'" in html  # a policy that blocks any network load


def test_header_counts_use_the_vocabulary_exactly() -> None:
    summary = summary_of(every_status())
    page = Page(render_html(summary))
    counts = {
        attrs["data-status"]: attrs["data-count"]
        for attrs in page.having("li")
        if attrs.get("data-count") is not None and "count" in (attrs.get("class") or "")
    }
    expected_scenarios = {
        "passed",
        "failed",
        "errored",
        "unverified",
        "not-run",
        "expected-failure",
        "harness-error",
    }
    assert expected_scenarios <= set(counts)
    for status in expected_scenarios:
        assert summary.counts.scenarios[status] == 1
    scenario_counts = page.having("ul", id="scenario-counts")
    assert scenario_counts
    assert "pending" in counts  # requirement counts include the pending ones


def test_scenarios_are_grouped_by_adr_section_then_rule() -> None:
    html = render_html(summary_of(every_status()))
    page = Page(html)
    sections = [a["data-section"] for a in page.having("details") if "data-section" in a]
    assert sections == ["§1", "§2", "§3", "§4", "§7", "Project"]
    assert "Rule: Reject is final and grants no permission mode" in html
    # Each scenario is a closed <details> with its status and id.
    scenarios = [a for a in page.having("details") if a.get("data-scenario-id")]
    assert len(scenarios) == 7
    assert all("open" not in a for a in scenarios)


def test_a_failure_record_carries_all_its_evidence() -> None:
    summary = summary_of(every_status())
    html = render_html(summary)
    failed = next(s for s in summary.scenarios if s.status == "failed")
    anchor = re.search(
        r'<details class="scenario st-failed" id="(sc-\d+)"', html
    )  # the failing scenario's own block
    assert anchor is not None
    following = html.find('<details class="scenario', anchor.end())
    block = html[anchor.start() : following]
    for piece in (
        'class="message"',
        "line 11: <b>When</b> step number 2",  # the failed step
        'href="#req-R3.6"',  # blamed, linked to the requirement
        "exited with status 3",
        "Wire transcript (1 line",
        "0.500 s",
        "← received",
        "Provider requests (1)",
        "mock-model",
        "Read, SubmitPlan",
        "Host stderr (tail)",
        "Protocol messages that broke the schemas (1)",
    ):
        assert piece in block, piece
    assert failed.failure is not None
    marks = re.findall(r'<li class="step st-([a-z-]+)"', block)
    assert marks == ["passed", "failed", "not-run"]


def test_the_requirement_matrix_links_to_requirements_and_those_to_scenarios() -> None:
    summary = summary_of(every_status())
    page = Page(render_html(summary))
    cells = page.having("a", data_requirement="R3.6")
    assert cells and cells[0]["href"] == "#req-R3.6" and cells[0]["data-status"] == "failed"
    assert len(page.having("a")) > len(summary.requirements)
    assert page.having("tr", id="req-R3.6")
    failed_anchor = next(
        a["id"] for a in page.having("details") if a.get("data-status") == "failed"
    )
    assert page.having("a", href=f"#{failed_anchor}")


def test_a_partial_run_hides_not_run_scenarios_at_first() -> None:
    partial = summary_of([scenario("It passes", "passed")])  # the rest of the catalog: none
    assert 'data-default-filter=""' in render_html(partial)
    with_not_run = summary_of(every_status())
    assert 'data-default-filter="ran"' in render_html(with_not_run)


def test_a_failed_preflight_is_shown_first() -> None:
    summary = summary_of([scenario("It did not run", "not-run", reason="preflight failed")])
    from conformance.summary_model import HostExit, Preflight

    failed = summary.model_copy(
        update={
            "preflight": Preflight(
                ok=False,
                diagnosis="the host printed a line that is not JSON",
                detail="offending line: 'Welcome <b>!</b>'",
                host_exit=HostExit(running=False, status=1),
                stderr_tail="boom",
            )
        }
    )
    html = render_html(failed)
    assert 'data-verdict="failed"' in html
    assert "the host printed a line that is not JSON" in html
    assert "&lt;b&gt;" in html
    assert "exited with status 1" in html


def test_section_of_reads_the_rule_then_the_requirements() -> None:
    sections = {"R3.6": "§3", "P7": "Project", "C4": "Consequences"}
    assert section_of(scenario("a", "passed", rule="X (§5, §1)"), sections) == "§5"
    assert section_of(scenario("a", "passed", rule="X (Consequences)"), sections) == "Consequences"
    assert section_of(scenario("a", "passed", rule="X (project rule P7)"), sections) == "Project"
    assert section_of(scenario("a", "passed", rule="No reference"), sections) == "§3"
    assert section_of(scenario("a", "passed", rule=None, requirements=["C4", "P7"]), sections) == (
        "Consequences"
    )
    assert section_of(scenario("a", "passed", rule=None, requirements=[]), sections) == "Other"


def test_write_all_writes_the_page_beside_the_others(tmp_path: Path) -> None:
    written = write_all(summary_of(every_status()), tmp_path)
    assert tmp_path / HTML_FILE in written
    assert (tmp_path / HTML_FILE).read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert not list(tmp_path.glob(".*.partial"))
