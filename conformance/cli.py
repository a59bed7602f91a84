"""``pi-conformance``: run the ADR 0053 conformance suite against a host and report.

Exit statuses: 0 nothing regressed; 1 a regression (a scenario failed or errored that the
expectations file does not list); 2 a bad argument or an empty selection; 3 the preflight
found the host unable to run any scenario; 4 the harness itself failed; 124 ``--max-time``
ran out; 130 and 143 interrupted by SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from conformance.commands import compare, explore, fuzz, listing, merge, run
from conformance.commands.common import EXIT_USAGE, UsageProblem

_COMMANDS = (run, merge, compare, listing, explore, fuzz)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, as every other refusal is."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see '{self.prog} --help')\n")


def parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    top = _Parser(
        prog="pi-conformance",
        description="Run the ADR 0053 conformance suite against a host and report.",
        epilog=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in _COMMANDS:
        module.add_parsers(commands)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``pi-conformance`` command."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    passthrough: list[str] = []
    if "--" in arguments:
        cut = arguments.index("--")
        arguments, passthrough = arguments[:cut], arguments[cut + 1 :]
    top = parser()
    args, unknown = top.parse_known_args(arguments)
    if unknown:  # name the subcommand the options were given to, and its help
        prog = f"{top.prog} {args.command}"
        top.exit(
            EXIT_USAGE,
            f"{prog}: unrecognized arguments: {' '.join(unknown)} (see '{prog} --help')\n",
        )
    args.pytest_args = passthrough
    try:
        return int(args.handler(args))
    except UsageProblem as problem:
        print(f"pi-conformance {args.command}: {problem}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
