"""``python -m conformance.killpoints``: run the kill-point campaign and print its figures."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from conformance.drivers import DEFAULT_HOST_CMD
from conformance.killpoints.campaign import RunResult, Settings, run_campaign, summary
from conformance.killpoints.workload import PHASES


def main(argv: list[str]) -> int:
    """Run the campaign; exit 1 when a run found an anomaly or could not reach its kill."""
    parser = argparse.ArgumentParser(
        prog="python -m conformance.killpoints",
        description="SIGKILL a host at random points of the plan lifecycle, restart it on "
        "the same data dir, and check it against the client's history.",
    )
    parser.add_argument("--host-cmd", help="the host command line (default: the reference host)")
    parser.add_argument("--runs", type=int, default=210, help="kill points (default 210)")
    parser.add_argument("--seed", type=int, default=53, help="the campaign's seed (default 53)")
    parser.add_argument(
        "--phase", action="append", choices=PHASES, help="only these phases (repeatable)"
    )
    parser.add_argument("--run-seed", type=int, help="run one kill point again (with --phase)")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds per wait")
    parser.add_argument("--json", type=Path, help="also write every run's result as JSON")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each run's history")
    args = parser.parse_args(argv)
    phases = tuple(args.phase or PHASES)
    if args.run_seed is not None and len(phases) != 1:
        parser.error("--run-seed needs exactly one --phase")
    settings = Settings(
        runs=1 if args.run_seed is not None else args.runs,
        seed=args.seed,
        phases=phases,
        host_cmd=tuple(shlex.split(args.host_cmd)) if args.host_cmd else DEFAULT_HOST_CMD,
        timeout=args.timeout,
        single=(phases[0], args.run_seed) if args.run_seed is not None else None,
    )

    def progress(run: RunResult) -> None:
        verdict = "error" if run.error else ("ANOMALY" if run.anomalies else "ok")
        print(f"{run.phase:18} {run.seed:>10} {run.variant:34} {run.seconds:5.1f}s {verdict}")
        if args.verbose:
            for line in run.operations:
                print(f"    {line}")
            for finding in run.anomalies or ([run.error] if run.error else []):
                print(f"    !! {finding}")
        sys.stdout.flush()

    report = run_campaign(settings, progress)
    if args.json is not None:
        args.json.write_text(json.dumps(report.to_json(), indent=2) + "\n", encoding="utf-8")
    print()
    print(summary(report, shlex.join(["python", "-m", "conformance.killpoints", *argv])))
    return 1 if report.anomalous() or report.errored() else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
