"""``merge``: combine the reports of shards into one, as if the run had been whole."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from conformance.commands.common import EXIT_OK, EXIT_REGRESSION, UsageProblem, writable_folder
from conformance.expectations import Expectations, ExpectationsError
from conformance.reports import SUMMARY_FILE, load_summary, write_all
from conformance.reports.text import render_console
from conformance.requirements import active_catalog
from conformance.scenarios import all_scenarios
from conformance.summary_model import FORMAT_VERSION, RunInfo, ScenarioResult, Summary
from conformance.verdicts import build_summary


def add_parsers(commands: Any) -> None:
    """Register ``merge``."""
    merge = commands.add_parser(
        "merge", help="combine shard reports into one set of reports, as if the run had been whole"
    )
    merge.add_argument("reports", nargs="+", type=Path, help="report folders or summary.json files")
    merge.add_argument("--report", type=Path, default=Path("conformance-report"), help="output")
    merge.add_argument("--expectations", type=Path, help="TOML file of known failures")
    merge.set_defaults(handler=run_merge)


def read_summaries(paths: list[Path]) -> list[Summary]:
    """Load each summary; a missing or foreign file is a usage problem."""
    summaries: list[Summary] = []
    for path in paths:
        if not path.exists():
            raise UsageProblem(
                f"{path} does not exist; give report folders or their summary.json files"
            )
        try:
            summaries.append(load_summary(path))
        except FileNotFoundError:
            raise UsageProblem(
                f"{path}: no {SUMMARY_FILE} in this folder; give a folder written by "
                "'pi-conformance run --report' or its summary.json"
            ) from None
        except OSError as problem:
            raise UsageProblem(f"{path}: cannot be read: {problem.strerror}") from None
        except ValidationError as problem:
            raise UsageProblem(
                f"{path}: not a pi-conformance {SUMMARY_FILE} (format {FORMAT_VERSION}): "
                f"{_first_error(problem)}"
            ) from None
    return summaries


def _first_error(problem: ValidationError) -> str:
    """The first thing wrong, as 'where: what', and how many more there are."""
    errors = problem.errors(include_url=False)
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"]) or "the file"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {first['msg'].lower()}{more}"


def merge_summaries(summaries: list[Summary], expectations: Expectations) -> Summary:
    """One summary from several shards: each scenario's result from the shard that ran it."""
    chosen: dict[str, ScenarioResult] = {}
    for summary in summaries:
        for scenario in summary.scenarios:
            previous = chosen.get(scenario.id)
            if previous is None or (previous.status == "not-run" and scenario.status != "not-run"):
                chosen[scenario.id] = scenario
    first = summaries[0].run
    run = RunInfo(
        host=first.host,
        driver=first.driver,
        harness_version=first.harness_version,
        started_at=min(s.run.started_at for s in summaries),
        duration_s=max(s.run.duration_s for s in summaries),
        workers=sum(s.run.workers for s in summaries),
        shard=None,
        areas=first.areas,
        keyword=first.keyword,
        require_full=any(s.run.require_full for s in summaries),
        interrupted=any(s.run.interrupted for s in summaries),
        host_identity=next((s.run.host_identity for s in summaries if s.run.host_identity), None),
    )
    order = {s.id: n for n, s in enumerate(all_scenarios())}
    scenarios = sorted(chosen.values(), key=lambda s: (order.get(s.id, len(order)), s.id))
    return build_summary(scenarios, run, expectations, summaries[0].preflight)


def run_merge(args: argparse.Namespace) -> int:
    """Merge, write every report, print the verdicts."""
    summaries = read_summaries(list(args.reports))
    hosts = {s.run.host for s in summaries}
    if len(hosts) > 1:
        raise UsageProblem(f"the reports test different hosts {sorted(hosts)}; use compare")
    try:
        expectations = Expectations.load(
            args.expectations, [s.id for s in all_scenarios()], list(active_catalog())
        )
    except ExpectationsError as problem:
        raise UsageProblem(f"--expectations: {problem}") from None
    output = writable_folder(args.report, "--report")
    merged = merge_summaries(summaries, expectations)
    write_all(merged, output)
    print(render_console(merged, verbose=False))
    print(f"\nmerged {len(summaries)} report(s) into {output}")
    return EXIT_REGRESSION if merged.regressions else EXIT_OK
