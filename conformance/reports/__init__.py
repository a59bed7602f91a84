"""Every report format, rendered from one :class:`~conformance.summary_model.Summary`."""

from __future__ import annotations

from pathlib import Path

from conformance.reports.cucumber import render_cucumber
from conformance.reports.html import render_html
from conformance.reports.junit import render_junit
from conformance.reports.markdown import render_markdown
from conformance.summary_model import Summary

SUMMARY_FILE = "summary.json"
JUNIT_FILE = "junit.xml"
MARKDOWN_FILE = "summary.md"
HTML_FILE = "report.html"
CUCUMBER_FILE = "cucumber.json"
REPORT_FILES = (SUMMARY_FILE, JUNIT_FILE, MARKDOWN_FILE, HTML_FILE, CUCUMBER_FILE)


def write_all(summary: Summary, report_dir: Path) -> list[Path]:
    """Write every report format (:data:`REPORT_FILES`) into ``report_dir``; return the
    paths."""
    report_dir.mkdir(parents=True, exist_ok=True)
    outputs = {
        SUMMARY_FILE: summary.model_dump_json(indent=2) + "\n",
        JUNIT_FILE: render_junit(summary),
        MARKDOWN_FILE: render_markdown(summary),
        HTML_FILE: render_html(summary),
        CUCUMBER_FILE: render_cucumber(summary),
    }
    written: list[Path] = []
    for name, text in outputs.items():
        target = report_dir / name
        partial = target.with_name(f".{name}.partial")
        partial.write_text(text, encoding="utf-8")
        partial.replace(target)  # readers never see half a report
        written.append(target)
    return written


def load_summary(path: Path) -> Summary:
    """Read a summary.json (or the summary.json inside a report folder)."""
    file = path / SUMMARY_FILE if path.is_dir() else path
    return Summary.model_validate_json(file.read_text(encoding="utf-8"))
