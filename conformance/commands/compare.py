"""``compare``: runs side by side, requirement by requirement, and what changed between them."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from conformance.commands.common import EXIT_OK, EXIT_REGRESSION, UsageProblem
from conformance.commands.merge import read_summaries
from conformance.reports.compare import compare, render_console, render_html, render_markdown


def add_parsers(commands: Any) -> None:
    """Register ``compare``."""
    parser = commands.add_parser(
        "compare",
        help="show runs side by side: a requirement x run matrix, and regressions between runs",
        description="Show the requirement verdicts of several runs side by side (one column "
        "per run, labelled by host and driver). When every run tests the same host, also list "
        "the regressions (passed -> failed or errored) and the fixes between consecutive runs, "
        "per requirement and per scenario; the exit status is then 1 if there is a regression.",
    )
    parser.add_argument(
        "reports", nargs="+", type=Path, help="report folders or summary.json files, oldest first"
    )
    parser.add_argument("--markdown", type=Path, metavar="FILE", help="also write Markdown here")
    parser.add_argument("--html", type=Path, metavar="FILE", help="also write an HTML page here")
    parser.add_argument(
        "--changed", action="store_true", help="list only requirements whose status differs"
    )
    parser.set_defaults(handler=run_compare)


def _write(path: Path, text: str, option: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as problem:
        reason = problem.strerror or str(problem)
        raise UsageProblem(f"{option}: cannot write {str(path)!r}: {reason}") from None


def run_compare(args: argparse.Namespace) -> int:
    """Compare, print, and write the files asked for."""
    comparison = compare(read_summaries(list(args.reports)))
    print(render_console(comparison, changed_only=args.changed))
    if args.markdown:
        _write(args.markdown, render_markdown(comparison, changed_only=args.changed), "--markdown")
        print(f"\nMarkdown: {args.markdown}")
    if args.html:
        _write(args.html, render_html(comparison), "--html")
        print(f"HTML: {args.html}")
    return EXIT_REGRESSION if comparison.regressions else EXIT_OK
