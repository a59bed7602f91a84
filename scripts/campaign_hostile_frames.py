"""The hostile-frames campaign: at least 10,000 hostile frames against one host.

Schema-driven requests (params generated from schemas/protocol-v9, half of them mutated:
wrong types, extra or missing fields, huge strings, deep nesting, lone surrogates, big
integers, NaN) and byte-level garbage lines. Every answer must be schema-valid and allowed
by the contract, and the host must keep serving; a host that dies or hangs is counted and
replaced. The figures go into docs/reliability.md.

    python scripts/campaign_hostile_frames.py [--host-cmd CMD | --host-module NAME]
        [--requests N] [--garbage N] [--seed S] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from conformance.commands.explore import add_host_options, host_driver
from conformance.commands.fuzz import coverage_table, render_findings
from conformance.fuzz import FuzzReport, FuzzSettings, fuzz


def figures(report: FuzzReport, command: str) -> str:
    """The campaign's counts as the Markdown table of docs/reliability.md."""
    rows = [
        ("hostile frames sent", report.frames),
        ("schema-driven requests", report.requests),
        ("byte-level garbage lines", report.garbage),
        ("answers received", report.answers),
        ("follow-up requests (host still serving)", report.probes),
        ("schema-invalid messages from the host", report.invalid_answers),
        ("host deaths (host replaced, campaign went on)", report.deaths),
        ("host hangs", report.hangs),
        ("distinct findings", len(report.findings)),
    ]
    table = ["| measure | count |", "| --- | ---: |"]
    table += [f"| {name} | {value:,} |" for name, value in rows]
    return f"Command: `{command}` ({report.elapsed / 60:.1f} min)\n\n" + "\n".join(table)


def main(argv: list[str]) -> int:
    """Run the campaign and print its figures, coverage and findings."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add_host_options(parser)
    parser.add_argument("--requests", type=int, default=7_000, help="schema-driven requests")
    parser.add_argument("--garbage", type=int, default=3_500, help="byte-level garbage lines")
    parser.add_argument("--seed", type=int, help="other frames (default: derandomised)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per answer")
    parser.add_argument("--json", type=Path, help="also write the full report as JSON")
    args = parser.parse_args(argv)
    driver, _label = host_driver(args)
    settings = FuzzSettings(
        examples=args.requests, frames=args.garbage, seed=args.seed, timeout=args.timeout
    )
    report = fuzz(driver, settings)
    if args.json is not None:
        args.json.write_text(json.dumps(report.to_json(), indent=2) + "\n", encoding="utf-8")
    print(coverage_table(report))
    print()
    print(render_findings(report))
    print()
    print(figures(report, "python scripts/campaign_hostile_frames.py " + " ".join(argv)))
    return 1 if report.findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
