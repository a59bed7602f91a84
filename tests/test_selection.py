"""Which scenarios a run executes: stable ids, areas, -k and shards."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest
from pytest_bdd.gherkin_parser import get_gherkin_document

from conformance.options import parse_shard
from conformance.scenarios import ScenarioInfo, all_scenarios, areas
from conformance.selection import SelectionError, any_of, compile_keyword, select
from conformance.verdicts import NOT_EXPRESSIBLE_REASON
from pi_contract import features_dir

UNIVERSE = all_scenarios()


def _written_scenarios(folder: Path) -> Counter[str]:
    """How many runnable scenarios each feature file spells out (an outline: one per
    example row), read with the Gherkin parser rather than through the suite."""
    written: Counter[str] = Counter()
    for path in sorted(folder.glob("*.feature")):
        document = get_gherkin_document(str(path))
        children = list(document.feature.children) if document.feature else []
        while children:
            child = children.pop()
            if child.rule is not None:
                children.extend(child.rule.children)
            if child.scenario is not None:
                rows = sum(len(e.table_body or []) for e in child.scenario.examples)
                written[path.name] += rows or 1
    return written


def _collisions(folder: Path, scenarios: Sequence[ScenarioInfo]) -> list[str]:
    """What makes two written scenarios one: a shared id, or a title the parser merged."""
    ids = Counter(s.id for s in scenarios)
    problems = [f"two scenarios have the id {i!r}" for i, n in ids.items() if n > 1]
    seen = Counter(s.feature_file for s in scenarios)
    for file, count in _written_scenarios(folder).items():
        if seen[file] != count:
            problems.append(f"{file} has {count} scenarios but only {seen[file]} distinct ids")
    return problems


def test_every_scenario_has_its_own_id() -> None:
    assert _collisions(features_dir(), UNIVERSE) == []


@pytest.mark.parametrize(
    "second",
    [
        # the same title twice in one file
        "Scenario: Saying hello\n    Given a greeting",
        # an outline whose example renders a title that is already taken
        "Scenario Outline: Saying <word>\n    Given a greeting\n"
        "    Examples:\n      | word  |\n      | hello |",
    ],
    ids=["same-title", "outline-renders-a-taken-title"],
)
def test_two_scenarios_rendering_one_id_are_caught(tmp_path: Path, second: str) -> None:
    feature = "@area:greeting\nFeature: Greeting\n  Scenario: Saying hello\n    Given a greeting\n"
    (tmp_path / "greeting.feature").write_text(f"{feature}\n  {second}\n", encoding="utf-8")
    assert _collisions(tmp_path, all_scenarios(tmp_path)), "the collision went unnoticed"


def test_areas_choose_whole_feature_areas() -> None:
    chosen = select(UNIVERSE, ["handshake"]).chosen
    assert {s.area for s in chosen} == {"handshake"}
    in_area = sum(s.area == "handshake" for s in UNIVERSE)
    assert len(chosen) == in_area > 1
    left_out = select(UNIVERSE, ["handshake"]).left_out
    assert len(left_out) == len(UNIVERSE) - in_area
    assert set(left_out.values()) == {"not in the selected areas"}
    assert "handshake" in areas()


def test_keyword_matches_words_of_the_id_with_and_or_not() -> None:
    chosen = select(UNIVERSE, ["handshake"], "speaking and version and not future").chosen
    assert [s.title for s in chosen] == [
        "A client speaking version 9 is accepted",
        "A client speaking the previous version is refused",
    ]
    by_file = select(UNIVERSE, None, "Handshake.Feature").chosen
    assert by_file == select(UNIVERSE, ["handshake"]).chosen


def test_keyword_matches_the_names_pytest_shows() -> None:
    one = select(UNIVERSE, None, "test_a_client_speaking_version_9_is_accepted").chosen
    assert [s.id for s in one] == ["handshake.feature: A client speaking version 9 is accepted"]
    outline = "test_approving_with_mode_switches_the_session_to_agent_with_that_mode"
    example = select(UNIVERSE, None, f"{outline}[ask]").chosen
    assert [s.title for s in example] == [
        "Approving with ask switches the session to Agent with that mode"
    ]
    flattened = select(UNIVERSE, None, "client_speaking_the_previous_version").chosen
    assert [s.title for s in flattened] == ["A client speaking the previous version is refused"]


def test_keyword_matches_requirement_tags() -> None:
    chosen = select(UNIVERSE, None, "R7.1").chosen
    assert chosen and all("R7.1" in s.tags or "R7.1" in s.id for s in chosen)


def test_a_malformed_keyword_names_the_option() -> None:
    with pytest.raises(SelectionError, match=r"^-k: 'a and' is not a valid expression"):
        select(UNIVERSE, None, "a and")


def test_a_driver_that_cannot_crash_leaves_out_what_needs_a_crash() -> None:
    selection = select(UNIVERSE, None, None, None, crash_capable=False)
    needs_crash = {s.id for s in UNIVERSE if s.subprocess_only}
    assert needs_crash, "the suite has scenarios that crash the host"
    assert not needs_crash & {s.id for s in selection.chosen}
    assert {selection.left_out[i] for i in needs_crash} == {NOT_EXPRESSIBLE_REASON}


@pytest.mark.parametrize("total", [1, 2, 3, 5])
def test_shards_are_deterministic_disjoint_and_cover_the_selection(total: int) -> None:
    wanted = ["approval", "handshake", "shell"]
    base = select(UNIVERSE, wanted)

    def split() -> list[list[str]]:
        return [
            [s.id for s in select(UNIVERSE, wanted, None, (i, total)).chosen]
            for i in range(1, total + 1)
        ]

    shards, again = split(), split()
    assert shards == again
    everything = [i for shard in shards for i in shard]
    assert len(everything) == len(set(everything)), "a scenario is in two shards"
    assert set(everything) == {s.id for s in base.chosen}
    assert all(shards), "a shard is empty"


def test_a_shard_says_why_a_scenario_is_left_out() -> None:
    selection = select(UNIVERSE, ["handshake"], None, (1, 2))
    reasons = set(selection.left_out.values())
    assert reasons == {"not in the selected areas", "in another shard than 1/2"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0/2", "between 1 and N"),
        ("3/2", "between 1 and N"),
        ("1/0", "N at least 1"),
        ("1", "is not I/N"),
        ("a/b", "is not I/N"),
    ],
)
def test_a_bad_shard_is_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_shard(text)


def test_any_of_thousands_of_terms_compiles_and_selects_each_of_them() -> None:
    terms = [f"word_{n}" for n in range(5000)] + ["word_7 and not other"]
    expression = compile_keyword(any_of(terms))
    assert expression.evaluate(lambda name: name == "word_4321")
    assert expression.evaluate(lambda name: name == "word_7")
    assert not expression.evaluate(lambda name: name == "word_5000")


def test_any_of_nothing_selects_by_no_keyword() -> None:
    assert any_of([]) == ""
