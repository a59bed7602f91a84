"""Every requirement is covered or explicitly pending; every tag names a requirement."""

from __future__ import annotations

import re

from conformance.requirements import (
    REQUIREMENT_TAG,
    active_catalog,
    catalog,
    feature_tags,
    tagged_ids,
)
from pi_contract import features_dir

AREAS = {
    "handshake",
    "protocol_errors",
    "sessions",
    "plan_tools",
    "submit_plan",
    "artifact_integrity",
    "approval",
    "deadline",
    "execution",
    "turn_boundaries",
    "isolation",
    "restart_interruption",
    "migration",
    "scheduled_plan",
    "shell",
    "storage",
}


def test_ids_are_well_formed_and_sequential() -> None:
    ids = list(catalog())
    assert all(REQUIREMENT_TAG.match(i) for i in ids), ids
    by_section: dict[str, list[int]] = {}
    for requirement_id in ids:
        head, _, number = (
            requirement_id.rpartition(".")
            if "." in requirement_id
            else (requirement_id[0], "", requirement_id[1:])
        )
        by_section.setdefault(head, []).append(int(number))
    for section, numbers in by_section.items():
        assert numbers == list(range(1, len(numbers) + 1)), f"{section} numbering has gaps"


def test_every_tag_names_a_known_requirement() -> None:
    known = set(active_catalog())
    retired = {r.id: r.retired_by for r in catalog().values() if not r.active}
    for feature, tags in feature_tags().items():
        stale = {tag: retired[tag] for tag in tags if tag in retired}
        assert not stale, f"{feature} tags retired requirements (use their successors): {stale}"
        unknown = tags - known
        assert not unknown, f"{feature} tags unknown requirements {sorted(unknown)}"


def test_a_retired_requirement_names_an_active_successor() -> None:
    active = active_catalog()
    for requirement in catalog().values():
        if not requirement.active:
            assert requirement.retired_by in active, requirement
            assert not requirement.pending, requirement


def test_every_requirement_has_a_scenario_or_a_pending_area() -> None:
    tagged = tagged_ids()
    uncovered = [r.id for r in active_catalog().values() if r.id not in tagged and not r.pending]
    assert not uncovered, f"requirements with neither scenario nor pending area: {uncovered}"


def test_a_covered_requirement_is_not_still_marked_pending() -> None:
    tagged = tagged_ids()
    stale = [r.id for r in catalog().values() if r.id in tagged and r.pending]
    assert not stale, f"requirements with scenarios still marked pending: {stale}"


def test_areas_are_known() -> None:
    for requirement in catalog().values():
        assert requirement.area in AREAS, requirement
        assert requirement.pending in (None, *AREAS), requirement


def test_every_scenario_carries_a_requirement_and_every_feature_an_area() -> None:
    for feature in sorted(features_dir().glob("*.feature")):
        lines = feature.read_text(encoding="utf-8").splitlines()
        assert any(line.strip().startswith("@area:") for line in lines), feature.name
        for index, line in enumerate(lines):
            if re.match(r"\s*Scenario( Outline)?:", line):
                tags = lines[index - 1].split() if index else []
                ids = [t for t in tags if REQUIREMENT_TAG.match(t.lstrip("@"))]
                assert ids, f"{feature.name}:{index + 1} scenario without a requirement tag"
