"""``pi-conformance``: run the ADR 0053 conformance suite against a host and report."""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import conformance.suite

_STATUS_MARK = {"passed": "PASS", "failed": "FAIL", "pending": "PEND", "not-run": "----"}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pi-conformance", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run the features against a host")
    target = run.add_mutually_exclusive_group()
    target.add_argument(
        "--host-cmd",
        help="host command line; the harness appends --data-dir DIR --conformance "
        "(default: the bundled reference host)",
    )
    target.add_argument(
        "--host-module",
        help="run a Python host in-process: entry point name or module:function",
    )
    run.add_argument(
        "--driver",
        choices=("subprocess", "inprocess"),
        help="subprocess (default) or inprocess (default with --host-module: reference)",
    )
    run.add_argument("--report", type=Path, default=Path("conformance-report"), help="output dir")
    run.add_argument("--expectations", type=Path, help="TOML file of known failures")
    run.add_argument("--areas", help="comma-separated feature areas to run (default: all)")
    run.add_argument("-k", dest="keyword", help="only scenarios whose name matches (pytest -k)")
    run.add_argument("--timeout", type=float, help="longest wait for one host reaction (s)")
    run.add_argument("-q", "--quiet", action="store_true", help="less progress output")
    commands.add_parser("requirements", help="list the requirement catalog")
    return parser


def _pytest_args(args: argparse.Namespace) -> list[str]:
    suite = Path(conformance.suite.__file__).parent
    report: Path = args.report.resolve()
    pytest_args = [
        str(suite),
        "--rootdir",
        str(suite),
        "-c",
        str(suite / "pytest.ini"),
        "-p",
        "no:cacheprovider",
        "--junitxml",
        str(report / "junit.xml"),
        "--conformance-report",
        str(report),
        "-q" if args.quiet else "-v",
        "-rfE",
    ]
    if args.host_cmd:
        pytest_args += ["--host-cmd", args.host_cmd]
    if args.host_module:
        pytest_args += ["--host-module", args.host_module]
    if args.driver:
        pytest_args += ["--driver", args.driver]
    if args.expectations:
        pytest_args += ["--conformance-expectations", str(args.expectations.resolve())]
    if args.areas:
        pytest_args += ["--conformance-areas", args.areas]
    if args.keyword:
        pytest_args += ["-k", args.keyword]
    if args.timeout:
        pytest_args += ["--step-timeout", str(args.timeout)]
    return pytest_args


def print_summary(summary: dict[str, Any]) -> None:
    """Print each requirement's verdict, grouped by ADR section."""
    by_section: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for requirement in summary["requirements"]:
        by_section[requirement["section"]].append(requirement)
    print(f"\nADR 0053 conformance: {summary['host']} ({summary['driver']} driver)")
    for section, requirements in by_section.items():
        print(f"\n{section}")
        for requirement in requirements:
            mark = _STATUS_MARK[requirement["status"]]
            extra = (
                f"  [pending: {requirement['pending_area']}]" if requirement["pending_area"] else ""
            )
            print(f"  {mark}  {requirement['id']:<6} {requirement['text']}{extra}")
    counts = summary["counts"]
    print(
        f"\nrequirements: {counts['requirements_passed']} passed, "
        f"{counts['requirements_failed']} failed, {counts['requirements_pending']} pending, "
        f"{counts['requirements_not_run']} not run"
    )
    print(
        f"scenarios: {counts['scenarios_passed']} passed, {counts['scenarios_failed']} failed, "
        f"{counts['scenarios_expected_failures']} expected failures"
    )
    if summary["not_expressible"]:
        print(
            f"{len(summary['not_expressible'])} scenario(s) need a driver that can crash the "
            f"host and were not run under the {summary['driver']} driver"
        )
    for nodeid in summary["regressions"]:
        print(f"REGRESSION {nodeid}")
    for nodeid in summary["unexpected_passes"]:
        print(f"UNEXPECTED PASS {nodeid} (remove it from the expectations file)")


def run(args: argparse.Namespace) -> int:
    """Run the suite; 0 when nothing regressed, 1 on a regression, 2+ on usage errors."""
    summary_file = args.report.resolve() / "summary.json"
    summary_file.unlink(missing_ok=True)
    status = pytest.main(_pytest_args(args))
    if not summary_file.exists():
        print(f"pi-conformance: the run produced no report (pytest status {int(status)})")
        return int(status) or 2
    summary = json.loads(summary_file.read_text(encoding="utf-8"))
    print_summary(summary)
    print(f"\nreport: {summary_file} and {summary_file.with_name('junit.xml')}")
    if summary["regressions"]:
        return 1
    if status in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        return 0
    return int(status)


def list_requirements() -> int:
    """Print the catalog."""
    from conformance.requirements import catalog

    for requirement in catalog().values():
        print(f"{requirement.id:<6} {requirement.section:<13} {requirement.text}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``pi-conformance`` command."""
    args = _parser().parse_args(argv)
    if args.command == "requirements":
        return list_requirements()
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
