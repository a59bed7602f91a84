"""Write ``conformance/suite/durations.json``, which balances ``--shard I/N``, from real runs.

``python -m conformance.durations REPORT...`` reads the summaries of one or more runs (a
whole run, or every shard of one), takes each scenario's duration from the run that ran
it, rounds it to a tenth of a second and writes the file, keys sorted. Regenerate it
from a full subprocess run when scenarios are added or their cost changes a lot.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from conformance.commands.common import EXIT_OK, EXIT_USAGE, UsageProblem
from conformance.commands.merge import read_summaries
from conformance.summary_model import Summary

DURATIONS_FILE = Path(__file__).resolve().parent / "suite" / "durations.json"
RESOLUTION_S = 0.1


def durations_of(summaries: Sequence[Summary]) -> dict[str, float]:
    """Scenario id → seconds, from the scenarios that ran (the longest run of each wins)."""
    found: dict[str, float] = {}
    for summary in summaries:
        for scenario in summary.scenarios:
            if scenario.status == "not-run":
                continue
            seconds = max(RESOLUTION_S, round(scenario.duration_s, 1))
            found[scenario.id] = max(found.get(scenario.id, 0.0), seconds)
    return dict(sorted(found.items()))


def render(durations: dict[str, float]) -> str:
    """The file's text: one scenario per line, so that changes read well in a diff."""
    return json.dumps(durations, indent=0, ensure_ascii=False) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Read the reports and write the durations file."""
    parser = argparse.ArgumentParser(
        prog="python -m conformance.durations",
        description="Write the scenario durations that balance --shard, from run reports.",
    )
    parser.add_argument("reports", nargs="+", type=Path, help="report folders or summary.json")
    parser.add_argument(
        "--output", type=Path, default=DURATIONS_FILE, help=f"default: {DURATIONS_FILE.name}"
    )
    args = parser.parse_args(argv)
    try:
        durations = durations_of(read_summaries(list(args.reports)))
        if not durations:
            raise UsageProblem("no scenario ran in these reports")
    except UsageProblem as problem:
        print(f"python -m conformance.durations: {problem}", file=sys.stderr)
        return EXIT_USAGE
    args.output.write_text(render(durations), encoding="utf-8")
    total = sum(durations.values())
    print(f"wrote {len(durations)} scenario durations ({total:.0f} s in all) to {args.output}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
