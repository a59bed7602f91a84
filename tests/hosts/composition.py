"""Compose allowed variants into a few hosts that each take many freedoms at once.

A real host differs from the reference in many allowed ways together, so a check that is
fair to each freedom alone may still trip over two of them at once; and a composite host
runs the whole suite, not only the areas its members were written for. Members of one
composite replace disjoint parts of the reference host, so each member's change is live
in the composite, not overwritten by another's. A failure of a composite is attributed by
running its failing scenarios against each member alone (``tests/test_allowed_variations.py``).

``python tests/hosts/composition.py VARIANT...`` applies each variant in turn in a process
of its own and prints, as JSON, what each one replaced.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

if __name__ == "__main__":  # run as a script: tests/ holds the hosts package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from conformance.scenarios import all_scenarios
from conformance.selection import any_of
from hosts.registry import COMPOSED, WRAPPED, AllowedCase


@dataclass(frozen=True)
class Composite:
    """Allowed variants that one host applies together."""

    members: tuple[str, ...]

    @property
    def name(self) -> str:
        """The variant name that serves the composite (``hosts/serve.py``)."""
        return COMPOSED.join(self.members)


def replaced_by(variants: Sequence[str]) -> dict[str, list[str]]:
    """What each variant replaces, recorded in a process of its own (applying a variant
    patches the process that applies it)."""
    completed = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), *variants],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    replaced: dict[str, list[str]] = json.loads(completed.stdout)
    return replaced


def compose(cases: Iterable[AllowedCase], replaced: Mapping[str, Sequence[str]]) -> list[Composite]:
    """Few composites, deterministically: each variant, the one that changes most first,
    joins the first composite where no other member touches a part it replaces and no
    member replaces a part it wraps. Wrappers of one part share a composite: each calls
    the one it found, so all stay live."""
    groups: list[tuple[list[str], set[str], set[str]]] = []  # members, replaced, wrapped
    for case in sorted(cases, key=lambda c: (-len(replaced[c.variant]), c.variant)):
        assert replaced[case.variant], f"{case.variant} changes nothing through registry.patch"
        wraps = {p.removesuffix(WRAPPED) for p in replaced[case.variant] if p.endswith(WRAPPED)}
        owns = {p for p in replaced[case.variant] if not p.endswith(WRAPPED)}
        home = next((g for g in groups if not owns & (g[1] | g[2]) and not wraps & g[1]), None)
        if home is None:
            groups.append(([case.variant], owns, wraps))
        else:
            home[0].append(case.variant)
            home[1].update(owns)
            home[2].update(wraps)
    return [Composite(tuple(members)) for members, _, _ in groups]


def every_area() -> str:
    """The ``--areas`` of the whole suite."""
    return ",".join(sorted({scenario.area for scenario in all_scenarios()}))


def keyword_for(scenario_ids: Iterable[str]) -> str:
    """A ``-k`` that selects the scenarios ``scenario_ids`` (and any whose id extends one)."""
    return any_of([re.sub(r"\W", "", sid.replace(" ", "_")).lower() for sid in scenario_ids])


def _main(variants: list[str]) -> int:
    from hosts.catalog import load_all
    from hosts.registry import apply_recording

    load_all()
    print(json.dumps(apply_recording(variants)))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
