"""``fuzz``: send a host requests with params generated from the published schemas, hostile
mutations of them and byte-level garbage; every answer must be one the contract allows and
the host must keep serving."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conformance.client import HarnessError
from conformance.commands.common import (
    EXIT_HARNESS,
    EXIT_OK,
    EXIT_REGRESSION,
    positive_seconds,
)
from conformance.commands.explore import add_host_options, host_driver
from conformance.drivers import HostStartError

if TYPE_CHECKING:
    from conformance.fuzz import FuzzReport

CATEGORIES = ("valid", "hostile-valid", "invalid")


def count(text: str) -> int:
    """argparse type: a whole number of at least 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must not be negative")
    return value


def add_parsers(commands: Any) -> None:
    """Register ``fuzz``."""
    parser = commands.add_parser(
        "fuzz",
        help="fuzz a host with schema-driven and garbage frames",
        description="Send requests whose params are generated from schemas/protocol-v9, hostile "
        "mutations of them (wrong types, extra or missing fields, huge strings, deep nesting, "
        "lone surrogates, big integers, NaN) and byte-level garbage. Every answer must be "
        "schema-valid and one the contract allows, and the host must keep serving. Exit "
        "status 0: nothing found; 1: findings, each with a reproducer; 2: a bad argument; "
        "4: the harness failed.",
    )
    add_host_options(parser)
    parser.add_argument(
        "--examples", type=count, default=300, help="schema-driven requests (default 300)"
    )
    parser.add_argument(
        "--frames", type=count, default=100, help="byte-level garbage lines (default 100)"
    )
    parser.add_argument(
        "--seed", type=int, help="other frames; without it the search is derandomised"
    )
    parser.add_argument(
        "--timeout",
        type=positive_seconds,
        default=10.0,
        help="longest wait for one answer, in seconds (default 10)",
    )
    parser.add_argument(
        "--no-reduce", action="store_true", help="report findings without shortening them"
    )
    parser.add_argument("--json", type=Path, help="also write the report as JSON to this file")
    parser.add_argument("-q", "--quiet", action="store_true", help="leave out the coverage table")
    parser.set_defaults(handler=fuzz_command)


def fuzz_command(args: argparse.Namespace) -> int:
    """Run the fuzzer and report."""
    from conformance.fuzz import FuzzSettings, fuzz  # heavy: only here

    driver, label = host_driver(args)
    settings = FuzzSettings(
        examples=args.examples,
        frames=args.frames,
        seed=args.seed,
        timeout=args.timeout,
        reduce=not args.no_reduce,
    )
    try:
        report = fuzz(driver, settings)
    except (HarnessError, HostStartError) as problem:
        print(f"pi-conformance fuzz: the harness failed: {problem}", file=sys.stderr)
        return EXIT_HARNESS
    if args.json is not None:
        args.json.write_text(json.dumps(report.to_json(), indent=2) + "\n", encoding="utf-8")
    if not args.quiet:
        print(coverage_table(report))
        print()
    print(render_findings(report))
    search = f"seed {args.seed}" if args.seed is not None else "derandomised"
    print(
        f"fuzzed {label} ({search}, {report.elapsed:.1f} s): {report.frames} hostile frames "
        f"({report.requests} requests, {report.garbage} garbage lines), {report.answers} "
        f"answers, {report.invalid_answers} schema-invalid messages, {report.deaths} deaths, "
        f"{report.hangs} hangs, {len(report.findings)} findings"
    )
    return EXIT_REGRESSION if report.findings else EXIT_OK


def coverage_table(report: FuzzReport) -> str:
    """Requests sent per method and kind of params, with how they were answered."""
    lines = [f"{'method':<28} " + " ".join(f"{c:>14}" for c in CATEGORIES) + "  answers"]
    for method, by_category in sorted(report.coverage.items()):
        sent = [sum(by_category.get(c, {}).values()) for c in CATEGORIES]
        outcomes: dict[str, int] = {}
        for counts in by_category.values():
            for outcome, n in counts.items():
                outcomes[outcome] = outcomes.get(outcome, 0) + n
        answers = ", ".join(f"{o} {n}" for o, n in sorted(outcomes.items(), key=lambda i: -i[1]))
        lines.append(f"{method:<28} " + " ".join(f"{n:>14}" for n in sent) + f"  {answers}")
    kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(report.garbage_kinds.items()))
    lines.append(f"garbage lines: {kinds or 'none'}")
    return "\n".join(lines)


def render_findings(report: FuzzReport) -> str:
    """Every finding with its reproducer (the frames to send after initialize)."""
    if not report.findings:
        return "no findings"
    blocks = []
    for number, finding in enumerate(report.findings.values(), 1):
        reproducer = "\n".join(f"    {line}" for line in finding.reproducer().splitlines())
        blocks.append(
            f"finding {number}: {finding.category} on {finding.method} ({finding.kind}), "
            f"seen {finding.count}x\n  expected: {finding.expected}\n  got: {finding.got}\n"
            f"  reproduce, after initialize:\n{reproducer}"
            + (f"\n  the host's log ended: {finding.log}" if finding.log else "")
        )
    return "\n\n".join(blocks)
