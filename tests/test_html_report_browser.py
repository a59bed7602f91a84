"""The HTML report as a reader sees it, in a real headless Chromium.

Chromium is a test requirement: when it is missing these tests fail (they never skip),
and .ci/run installs it. Select them alone with ``pytest -m browser``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import INSTALL_HINT, Chromium, find_chromium
from conftest import BROKEN_REQUIREMENT, BROKEN_SCENARIO
from hosts.runner import Run
from summaries import every_status, summary_of

from conformance.reports import HTML_FILE
from conformance.reports.html import render_html

pytestmark = pytest.mark.browser


@pytest.fixture
def chromium(tmp_path: Path) -> Iterator[Chromium]:
    """A fresh headless Chromium with its own profile."""
    executable = find_chromium()
    if executable is None:
        pytest.fail(f"the HTML report's browser test needs Chromium; {INSTALL_HINT}")
    browser = Chromium(executable, tmp_path / "profile")
    try:
        yield browser
    finally:
        browser.close()


def _visible(browser: Chromium, selector: str) -> bool:
    return bool(
        browser.evaluate(
            f"(() => {{ const el = document.querySelector({json.dumps(selector)});"
            " return !!el && el.checkVisibility(); })()"
        )
    )


def _text(browser: Chromium, selector: str) -> str:
    return str(browser.evaluate(f"document.querySelector({json.dumps(selector)}).innerText"))


def test_a_reader_sees_the_counts_and_opens_a_failure_record(
    broken_run: Run, chromium: Chromium, tmp_path: Path
) -> None:
    summary = broken_run.summary
    chromium.open((broken_run.report / HTML_FILE).as_uri())
    chromium.screenshot(tmp_path / "report.png")

    # The header: host, driver and the counts, as the summary has them.
    assert _text(chromium, "#host") == summary["run"]["host"]
    assert _text(chromium, "#driver") == "subprocess"
    for group, counts in (("scenario", "scenarios"), ("requirement", "requirements")):
        shown = chromium.evaluate(
            f"Object.fromEntries([...document.querySelectorAll('#{group}-counts li')]"
            ".map(li => [li.dataset.status, li.innerText.trim()]))"
        )
        assert shown == {s: f"{n} {s}" for s, n in summary["counts"][counts].items()}
    assert summary["counts"]["scenarios"]["failed"] == 1

    # A click on a count shows only the scenarios of that status; another click undoes it.
    visible = "[...document.querySelectorAll('details.scenario')].filter(d => d.checkVisibility())"
    ran = sum(1 for s in summary["scenarios"] if s["status"] != "not-run")
    assert chromium.evaluate(f"{visible}.length") == ran  # a partial run hides not-run ones
    chromium.click('#scenario-counts li[data-status="failed"] button')
    assert chromium.evaluate(f"{visible}.map(d => d.dataset.scenarioId)") == [BROKEN_SCENARIO]
    chromium.click('#scenario-counts li[data-status="failed"] button')
    assert chromium.evaluate(f"{visible}.length") == len(summary["scenarios"])

    # The failing scenario starts closed; a click shows its failure record.
    scenario = f'details.scenario[data-scenario-id="{BROKEN_SCENARIO}"]'
    message = f"{scenario} .failure .message"
    expected = next(s for s in summary["scenarios"] if s["id"] == BROKEN_SCENARIO)["failure"]
    assert _visible(chromium, scenario)
    assert not _visible(chromium, message)
    chromium.click(f"{scenario} > summary")
    assert _visible(chromium, message)
    assert _text(chromium, message) == expected["message"]
    assert expected["step"]["text"] in _text(chromium, f"{scenario} .failed-step")
    assert _text(chromium, f"{scenario} .blamed") == BROKEN_REQUIREMENT
    assert _visible(chromium, f"{scenario} .transcript tr.received")
    assert "still running" in _text(chromium, f"{scenario} .host-exit")
    chromium.screenshot(tmp_path / "report-failure-open.png")
    assert (tmp_path / "report-failure-open.png").stat().st_size > 10_000


def test_the_requirement_matrix_leads_to_the_scenarios(broken_run: Run, chromium: Chromium) -> None:
    chromium.open((broken_run.report / HTML_FILE).as_uri())
    cell = f'#matrix a.cell[data-requirement="{BROKEN_REQUIREMENT}"]'
    assert chromium.evaluate(f"getComputedStyle(document.querySelector('{cell}')).color")
    assert _text(chromium, cell) == BROKEN_REQUIREMENT
    chromium.click(cell)
    row = f'tr[id="req-{BROKEN_REQUIREMENT}"]'
    assert chromium.evaluate("location.hash") == f"#req-{BROKEN_REQUIREMENT}"
    assert _text(chromium, f"{row} td:first-child") == "failed"
    chromium.click(f"{row} a")
    scenario = f'details.scenario[data-scenario-id="{BROKEN_SCENARIO}"]'
    assert chromium.evaluate(f"document.querySelector({json.dumps(scenario)}).open") is True
    assert _visible(chromium, f"{scenario} .failure .message")


def test_hostile_host_output_stays_text(chromium: Chromium, tmp_path: Path) -> None:
    page = tmp_path / HTML_FILE
    page.write_text(render_html(summary_of(every_status())), encoding="utf-8")
    chromium.open(page.as_uri())
    chromium.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
    assert chromium.evaluate("window.pwned === undefined") is True
    assert chromium.evaluate("document.images.length") == 0
    assert chromium.evaluate("document.scripts.length") == 1
    shown = _text(chromium, 'details.scenario[data-status="failed"] .failure .message')
    assert "<script>window.pwned=1</script>" in shown
    chromium.screenshot(tmp_path / "hostile.png")
