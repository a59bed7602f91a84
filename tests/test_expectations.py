"""The expectations file: validated up front, exact entries, one-line problems."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.expectations import Expectations, ExpectationsError
from conformance.requirements import active_catalog
from conformance.scenarios import all_scenarios

SCENARIOS = ["approval.feature: Two approvals sent at once: exactly one wins"]
REQUIREMENTS = ["R4.10", "R4.11", "P5"]


def load(tmp_path: Path, text: str) -> Expectations:
    path = tmp_path / "expected.toml"
    path.write_text(text, encoding="utf-8")
    return Expectations.load(path, SCENARIOS, REQUIREMENTS)


def test_no_file_expects_nothing() -> None:
    assert Expectations.load(None, SCENARIOS, REQUIREMENTS).empty


def test_a_valid_file_lists_exact_scenarios_and_requirements(tmp_path: Path) -> None:
    expectations = load(
        tmp_path,
        '[expected_failures]\nscenarios = ["approval.feature: Two approvals sent at once: '
        'exactly one wins"]\nrequirements = ["R4.10"]\n',
    )
    assert expectations.scenarios == frozenset(SCENARIOS)
    assert expectations.requirements == frozenset({"R4.10"})
    assert not expectations.empty


def test_an_empty_table_is_allowed(tmp_path: Path) -> None:
    assert load(tmp_path, "[expected_failures]\n").empty
    assert load(tmp_path, "").empty


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("scenarios = [unclosed\n", r"expected\.toml is not valid TOML: .*line 1"),
        (
            "[expected_failure]\n",
            r"unknown table\(s\) or key\(s\) \['expected_failure'\]; "
            r"the file holds one table, \[expected_failures\]",
        ),
        ('scenarios = ["x"]\n', r"unknown table\(s\) or key\(s\) \['scenarios'\]"),
        ("expected_failures = 3\n", r"expected_failures must be a table"),
        (
            "[expected_failures]\ntests = []\n",
            r"unknown key\(s\) \['tests'\] in "
            r"\[expected_failures\]; it takes only 'scenarios' and 'requirements' lists",
        ),
        (
            '[expected_failures]\nscenarios = "approval.feature"\n',
            r"'scenarios' must be a list "
            "of strings",
        ),
        (
            "[expected_failures]\nrequirements = [4.10]\n",
            r"'requirements' must be a list of "
            "strings",
        ),
        (
            '[expected_failures]\nscenarios = ["test_"]\n',
            r"unknown scenario id\(s\) \['test_'\]; "
            r"list them with 'pi-conformance scenarios'",
        ),
        (
            '[expected_failures]\nscenarios = ["approval.feature: Two approvals"]\n',
            r"unknown scenario id\(s\)",
        ),  # a prefix is not an id
        (
            '[expected_failures]\nrequirements = ["R4.10", "R9.9", "r4.11"]\n',
            r"unknown requirement ID\(s\) \['R9.9', 'r4.11'\]; list them with "
            r"'pi-conformance requirements'",
        ),
    ],
    ids=[
        "not-toml",
        "misspelt-table",
        "key-outside-the-table",
        "table-not-a-table",
        "unknown-key",
        "scenarios-not-a-list",
        "requirements-not-strings",
        "unknown-scenario",
        "scenario-prefix",
        "unknown-requirement",
    ],
)
def test_a_bad_file_is_refused_in_one_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ExpectationsError, match=message) as refused:
        load(tmp_path, text)
    assert "\n" not in str(refused.value)
    assert str(refused.value).startswith(str(tmp_path / "expected.toml"))


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ExpectationsError, match=r"absent\.toml does not exist$"):
        Expectations.load(tmp_path / "absent.toml", SCENARIOS, REQUIREMENTS)


def test_a_file_that_cannot_be_read_says_why(tmp_path: Path) -> None:
    with pytest.raises(ExpectationsError, match=r"cannot be read: Is a directory$"):
        Expectations.load(tmp_path, SCENARIOS, REQUIREMENTS)


def test_a_requirement_entry_excuses_a_failure_only_when_it_lists_every_blamed_id() -> None:
    expectations = Expectations(requirements=frozenset({"R4.10", "P5"}))
    assert expectations.excuses("any", ["R4.10"])
    assert expectations.excuses("any", ["R4.10", "P5"])
    assert not expectations.excuses("any", ["R4.10", "R4.11"])
    assert not expectations.excuses("any", [])  # blames nothing: not a requirement's failure


def test_a_scenario_entry_excuses_its_scenario_exactly() -> None:
    expectations = Expectations(scenarios=frozenset(SCENARIOS))
    assert expectations.excuses(SCENARIOS[0], [])
    assert expectations.excuses(SCENARIOS[0], ["R4.11"])
    assert not expectations.excuses(SCENARIOS[0][:-1], [])


def test_the_readmes_example_is_a_valid_file(tmp_path: Path) -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    example = readme.split("[expected_failures]", 1)[1].split("```", 1)[0]
    path = tmp_path / "known.toml"
    path.write_text("[expected_failures]" + example.replace("\n  ", "\n"), encoding="utf-8")
    loaded = Expectations.load(path, [s.id for s in all_scenarios()], list(active_catalog()))
    assert loaded.scenarios and loaded.requirements
