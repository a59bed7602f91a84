"""``explore``: drive a host through random user action sequences and check the ADR's
invariants after every step; a failure is printed as the shortest scenario found."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from conformance.client import HarnessError
from conformance.commands.common import (
    EXIT_HARNESS,
    EXIT_OK,
    EXIT_REGRESSION,
    UsageProblem,
    positive_seconds,
)
from conformance.commands.run import _check_host_cmd, _check_host_module
from conformance.drivers import DEFAULT_HOST_CMD, HostDriver, HostStartError, SubprocessDriver


def positive_count(text: str) -> int:
    """argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def add_host_options(parser: argparse.ArgumentParser) -> None:
    """``--host-cmd`` or ``--host-module``, as ``run`` takes them."""
    target = parser.add_mutually_exclusive_group()
    target.add_argument(
        "--host-cmd",
        help="host command line; the harness appends --data-dir DIR --conformance "
        "(default: the bundled reference host)",
    )
    target.add_argument(
        "--host-module", help="run a Python host in-process: entry point name or module:function"
    )


def host_driver(args: argparse.Namespace) -> tuple[HostDriver, str]:
    """The driver the host options name, and how to call the host in messages."""
    if args.host_module:
        return _check_host_module(args.host_module), f"python host {args.host_module}"
    if args.host_cmd:
        return _check_host_cmd(args.host_cmd), args.host_cmd
    return SubprocessDriver(DEFAULT_HOST_CMD), "bundled reference host"


def add_parsers(commands: Any) -> None:
    """Register ``explore``."""
    parser = commands.add_parser(
        "explore",
        help="explore a host with random user action sequences (model-based)",
        description="Drive a host through random sequences of user actions (sessions, plans, "
        "approvals, the clock, cancels, restarts and crashes) and check the ADR's invariants "
        "after every step. Exit status 0: no invariant broke; 1: one broke, and the shortest "
        "sequence found is printed as a scenario; 2: a bad argument; 4: the harness failed.",
    )
    add_host_options(parser)
    parser.add_argument(
        "--examples", type=positive_count, default=20, help="sequences to try (default 20)"
    )
    parser.add_argument(
        "--steps", type=positive_count, default=20, help="actions per sequence (default 20)"
    )
    parser.add_argument(
        "--seed",
        type=int,
        help="explore other sequences; without it the search is derandomised and repeatable",
    )
    parser.add_argument(
        "--timeout",
        type=positive_seconds,
        default=10.0,
        help="longest wait for one host reaction, in seconds (default 10)",
    )
    parser.add_argument(
        "--max-time",
        type=positive_seconds,
        help="start no new sequence after this many seconds (shortening a failure included)",
    )
    parser.add_argument(
        "--no-shrink", action="store_true", help="print a failure as found, without shortening"
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="also print hypothesis' own account"
    )
    parser.set_defaults(handler=explore_command)


def explore_command(args: argparse.Namespace) -> int:
    """Run the exploration and report it."""
    from conformance.explore import INVARIANTS, ExploreSettings, explore  # heavy: only here

    driver, label = host_driver(args)
    settings = ExploreSettings(
        examples=args.examples,
        steps=args.steps,
        seed=args.seed,
        timeout=args.timeout,
        shrink=not args.no_shrink,
        max_time=args.max_time,
    )
    try:
        result = explore(driver, settings)
    except (HarnessError, HostStartError) as problem:
        print(f"pi-conformance explore: the harness failed: {problem}", file=sys.stderr)
        return EXIT_HARNESS
    if args.verbose and result.report:
        print("\n".join(result.report))
    search = f"seed {args.seed}" if args.seed is not None else "derandomised"
    summary = (
        f"explored {label}: {result.examples} sequences, {result.steps} steps, "
        f"{result.elapsed:.1f} s ({search})"
    )
    if result.failure is None:
        print(f"{summary}: no invariant broke ({len(INVARIANTS)} checked after every step)")
        return EXIT_OK
    print(result.failure.scenario)
    print()
    print(f"{summary}: broken invariant {result.failure.invariant!r}")
    return EXIT_REGRESSION


__all__ = ["UsageProblem", "add_host_options", "add_parsers", "host_driver", "positive_count"]
