"""``areas``, ``requirements`` and ``scenarios``: what the suite holds."""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

from conformance.commands.common import checked_areas
from conformance.requirements import active_catalog, sort_key
from conformance.scenarios import all_scenarios


def add_parsers(commands: Any) -> None:
    """Register the listing subcommands."""
    areas = commands.add_parser("areas", help="list the feature areas and their scenarios")
    areas.set_defaults(handler=list_areas)
    requirements = commands.add_parser("requirements", help="list the requirement catalog")
    requirements.set_defaults(handler=list_requirements)
    scenarios = commands.add_parser(
        "scenarios", help="list the scenario ids (as the expectations file names them)"
    )
    scenarios.add_argument("--areas", help="only these comma-separated areas")
    scenarios.set_defaults(handler=list_scenarios)


def list_areas(args: argparse.Namespace) -> int:
    """Print each area with its number of scenarios."""
    counts = Counter(s.area for s in all_scenarios())
    for area in sorted(counts):
        print(f"{area:<22} {counts[area]:>3} scenarios")
    return 0


def list_requirements(args: argparse.Namespace) -> int:
    """Print the active catalog."""
    for requirement in sorted(active_catalog().values(), key=lambda r: sort_key(r.id)):
        print(f"{requirement.id:<6} {requirement.section:<13} {requirement.text}")
    return 0


def list_scenarios(args: argparse.Namespace) -> int:
    """Print every scenario id, optionally of some areas."""
    wanted = checked_areas(args.areas)
    for scenario in all_scenarios():
        if wanted is None or scenario.area in wanted:
            print(scenario.id)
    return 0
