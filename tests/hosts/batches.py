"""Group broken-host cases into few runs of the harness, each scenario with its own variant.

Starting the harness costs more than most cases' scenarios, so cases share runs: a batch
holds cases whose scenarios do not overlap, and its run gives each scenario the host of the
case it belongs to (``hosts/variant_per_scenario.py``). Every scenario still starts hosts of
its own, so a case is judged exactly as if it had run alone, from its own scenarios.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from conformance.commands.common import checked_areas
from conformance.scenarios import SUBPROCESS_ONLY, all_scenarios
from conformance.selection import any_of, select
from hosts.registry import BrokenCase

SLOW_PER_BATCH = 2  # slow cases wait out a step timeout each; few per run keep runs short


@dataclass
class Batch:
    """Cases whose scenarios do not overlap, to run in one harness run."""

    slow: bool
    own: dict[str, frozenset[str]] = field(default_factory=dict)  # case id -> scenario ids
    # served in-process, each scenario's first host switching to its variant; the cases
    # whose scenarios need a host process (a crash, a signal) or that hang run in processes
    in_process: bool = False
    cases: list[BrokenCase] = field(default_factory=list)

    @property
    def load(self) -> int:
        """How many scenarios the batch's cases run."""
        return sum(len(ids) for ids in self.own.values())

    def fits(self, scenarios: frozenset[str]) -> bool:
        """Whether no case of the batch runs one of ``scenarios``."""
        return all(not (ids & scenarios) for ids in self.own.values())

    def add(self, case: BrokenCase, scenarios: frozenset[str]) -> None:
        """Take ``case`` and its scenarios."""
        self.cases.append(case)
        self.own[case.id] = scenarios

    @property
    def areas(self) -> str:
        """The ``--areas`` of the run: every case's areas."""
        return ",".join(sorted({a for case in self.cases for a in case.areas.split(",")}))

    @property
    def keyword(self) -> str:
        """The ``-k`` of the run: any case's keyword."""
        return any_of([case.keyword for case in self.cases])

    @property
    def variants(self) -> dict[str, str]:
        """Scenario id -> the variant its hosts serve (scenarios of no case: unpatched)."""
        return {scenario: case.variant for case in self.cases for scenario in self.own[case.id]}


def scenario_count(areas: str, keyword: str) -> int:
    """How many scenarios ``--areas areas -k keyword`` selects (subprocess driver)."""
    return len(select(all_scenarios(), checked_areas(areas), keyword or None).chosen)


def subprocess_only_keyword(areas: str, keyword: str) -> str:
    """The ``-k`` that narrows ``--areas areas -k keyword`` to the scenarios only a host
    process can take part in (a crash, a signal), or "" when it selects none of them."""
    narrowed = f"({keyword}) and {SUBPROCESS_ONLY}" if keyword else SUBPROCESS_ONLY
    universe = [s for s in all_scenarios() if s.subprocess_only]
    return narrowed if select(universe, checked_areas(areas), narrowed).chosen else ""


def own_scenarios(cases: Sequence[BrokenCase]) -> dict[str, frozenset[str]]:
    """The scenarios each case selects on its own (subprocess driver)."""
    universe = all_scenarios()
    return {
        case.id: frozenset(
            s.id for s in select(universe, checked_areas(case.areas), case.keyword).chosen
        )
        for case in cases
    }


def _spread(
    cases: Sequence[BrokenCase],
    own: dict[str, frozenset[str]],
    count: int,
    slow: bool,
    in_process: bool = False,
) -> list[Batch]:
    """Largest case first, each into the lightest batch it does not overlap (and, for slow
    cases, one that holds fewer than ``SLOW_PER_BATCH``)."""
    batches = [Batch(slow, in_process=in_process) for _ in range(min(count, len(cases)))]
    for case in sorted(cases, key=lambda c: (-len(own[c.id]), c.id)):
        fitting = [
            b
            for b in batches
            if b.fits(own[case.id]) and not (slow and len(b.cases) >= SLOW_PER_BATCH)
        ]
        if not fitting:
            fitting = [Batch(slow, in_process=in_process)]
            batches.append(fitting[0])
        min(fitting, key=lambda b: b.load).add(case, own[case.id])
    return [b for b in batches if b.cases]


def plan_batches(cases: Sequence[BrokenCase], runs: int) -> list[Batch]:
    """At least ``runs`` batches of fast cases (more if their scenarios overlap more), and
    the slow cases apart, a few per batch; heaviest batches first."""
    own = own_scenarios(cases)
    empty = [c.id for c in cases if not own[c.id]]
    assert not empty, f"these cases select no scenario (check their areas and keyword): {empty}"
    crash_only = {s.id for s in all_scenarios() if s.subprocess_only}
    in_process = [c for c in cases if not (c.slow or c.process or own[c.id] & crash_only)]
    fast = [c for c in cases if not c.slow and (c.process or own[c.id] & crash_only)]
    slow = [c for c in cases if c.slow]
    batches = (
        _spread(in_process, own, runs, slow=False, in_process=True)
        + _spread(fast, own, math.ceil(runs / 2), slow=False)
        + _spread(slow, own, math.ceil(len(slow) / SLOW_PER_BATCH), slow=True)
    )
    return sorted(batches, key=lambda b: (not b.slow, -b.load))
