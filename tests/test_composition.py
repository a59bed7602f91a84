"""How allowed variants are composed into hosts that take many freedoms at once."""

from __future__ import annotations

import pytest
from hosts.catalog import allowed_cases
from hosts.composition import compose, every_area, keyword_for, replaced_by
from hosts.registry import WRAPPED, AllowedCase

from conformance.commands.common import checked_areas
from conformance.scenarios import all_scenarios
from conformance.selection import select

TOGETHER = [case for case in allowed_cases() if not case.alone]


@pytest.fixture(scope="module")
def replaced() -> dict[str, list[str]]:
    return replaced_by([case.variant for case in TOGETHER])


def test_every_variant_that_may_is_in_exactly_one_composite(
    replaced: dict[str, list[str]],
) -> None:
    members = [m for composite in compose(TOGETHER, replaced) for m in composite.members]
    assert sorted(members) == sorted(case.variant for case in TOGETHER)
    assert len(compose(TOGETHER, replaced)) < len(TOGETHER) // 10


def test_members_of_a_composite_replace_disjoint_parts_and_only_wrap_shared_ones(
    replaced: dict[str, list[str]],
) -> None:
    for composite in compose(TOGETHER, replaced):
        touched: dict[str, list[str]] = {}
        for member in composite.members:
            for part in replaced[member]:
                touched.setdefault(part.removesuffix(WRAPPED), []).append(part)
        for part, by in touched.items():
            assert len(by) == 1 or all(p.endswith(WRAPPED) for p in by), (part, composite)


def test_wrappers_of_one_part_share_a_composite_and_replacements_do_not() -> None:
    cases = [AllowedCase("a", "x"), AllowedCase("b", "x"), AllowedCase("c", "x")]
    parts = {
        "a": [f"host:Host.__init__{WRAPPED}"],
        "b": [f"host:Host.__init__{WRAPPED}", "host:Host.handlers"],
        "c": ["host:Host.handlers"],
    }
    assert [c.members for c in compose(cases, parts)] == [("b", "a"), ("c",)]


def test_a_replacement_of_a_part_is_kept_apart_from_its_wrappers() -> None:
    cases = [AllowedCase("wrapper", "x"), AllowedCase("replacement", "x")]
    parts = {"wrapper": [f"host:Host.__init__{WRAPPED}"], "replacement": ["host:Host.__init__"]}
    assert [c.members for c in compose(cases, parts)] == [("replacement",), ("wrapper",)]


def test_the_composition_is_the_same_every_time(replaced: dict[str, list[str]]) -> None:
    assert compose(TOGETHER, replaced) == compose(list(reversed(TOGETHER)), replaced)


def test_a_variant_that_replaces_nothing_is_refused() -> None:
    with pytest.raises(AssertionError, match="changes nothing"):
        compose([AllowedCase("idle", "x")], {"idle": []})


def test_the_keyword_of_some_scenarios_selects_them() -> None:
    universe = all_scenarios()
    wanted = {s.id for s in universe[::50]}
    chosen = select(universe, checked_areas(every_area()), keyword_for(wanted)).chosen
    assert wanted <= {s.id for s in chosen}
    assert len(chosen) < 2 * len(wanted)
