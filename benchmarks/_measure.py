"""Side-by-side timing: alternate the candidates round by round and compare medians.

Absolute times move with whatever else the machine runs; the ratio of two candidates
measured in turns, in one process, moves much less. Every benchmark here reports a ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path


def parser(description: str | None) -> argparse.ArgumentParser:
    """A command line with the ``--quick`` and ``--rounds`` options every benchmark takes."""
    cli = argparse.ArgumentParser(description=description)
    cli.add_argument("--quick", action="store_true", help="fewer rounds, smaller data")
    cli.add_argument(
        "--rounds", type=positive_int, help="rounds of each candidate (overrides the default)"
    )
    return cli


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is less than 1")
    return value


def writable_dir(text: str) -> str:
    """An argparse type: a folder that exists and this process may write in."""
    if not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is not an existing folder")
    if not os.access(text, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text!r} is not writable")
    return text


@dataclass(frozen=True)
class Comparison:
    """Samples of a measured candidate and of its reference, taken in alternation."""

    label: str
    measured: list[float]
    reference: list[float]

    @property
    def ratio(self) -> float:
        """Median of the measured samples over the median of the reference samples."""
        return statistics.median(self.measured) / statistics.median(self.reference)

    def spread(self) -> tuple[float, float]:
        """The lower and upper quartiles of the per-round ratios."""
        ratios = sorted(m / r for m, r in zip(self.measured, self.reference, strict=True))
        if len(ratios) < 4:
            return ratios[0], ratios[-1]
        quartiles = statistics.quantiles(ratios, n=4)
        return quartiles[0], quartiles[2]

    def line(self, measured_name: str, reference_name: str, goal: float | None = None) -> str:
        """One printable line: both medians, the ratio, its spread and the goal."""
        low, high = self.spread()
        verdict = ""
        if goal is not None:
            verdict = f"  goal <= {goal:g}: {'met' if self.ratio <= goal else 'NOT met'}"
        return (
            f"{self.label}: {measured_name} {_ms(statistics.median(self.measured))}, "
            f"{reference_name} {_ms(statistics.median(self.reference))}, "
            f"ratio {self.ratio:.2f} (per-round quartiles {low:.2f}-{high:.2f}, "
            f"{len(self.measured)} rounds){verdict}"
        )


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def alternate(
    label: str, measured: Callable[[], float], reference: Callable[[], float], rounds: int
) -> Comparison:
    """Run both candidates ``rounds`` times, swapping which goes first every round.

    Each candidate returns the seconds of the work it timed, so set-up stays outside.
    """
    measured_samples: list[float] = []
    reference_samples: list[float] = []
    for index in range(rounds):
        if index % 2:
            reference_samples.append(reference())
            measured_samples.append(measured())
        else:
            measured_samples.append(measured())
            reference_samples.append(reference())
    return Comparison(label, measured_samples, reference_samples)


async def alternate_async(
    label: str,
    measured: Callable[[], Awaitable[float]],
    reference: Callable[[], Awaitable[float]],
    rounds: int,
) -> Comparison:
    """:func:`alternate` for candidates that run on the current event loop."""
    measured_samples: list[float] = []
    reference_samples: list[float] = []
    for index in range(rounds):
        if index % 2:
            reference_samples.append(await reference())
            measured_samples.append(await measured())
        else:
            measured_samples.append(await measured())
            reference_samples.append(await reference())
    return Comparison(label, measured_samples, reference_samples)
