"""docs/acceptance.md is generated from the features and the requirement catalog."""

from __future__ import annotations

from conformance import acceptance
from conformance.requirements import active_catalog


def test_acceptance_page_is_current() -> None:
    assert acceptance.main(["--check"]) == 0, (
        "docs/acceptance.md is stale: run python -m conformance.acceptance"
    )


def test_every_requirement_and_feature_is_on_the_page() -> None:
    page = acceptance.render_acceptance()
    for requirement_id in active_catalog():
        assert f"| {requirement_id} |" in page, requirement_id
    for feature in acceptance.load_features():
        assert f"## {feature.name}" in page, feature.name
        for scenario in feature.scenarios:
            assert f"### {scenario.name}" in page, scenario.name


def test_scenarios_carry_their_rule_and_requirements() -> None:
    features = {f.file: f for f in acceptance.load_features()}
    submit = {s.name: s for s in features["submit_plan.feature"].scenarios}
    alone = submit["A plan submitted beside another call is refused as a whole (<arrangement>)"]
    assert alone.requirements == ("R1.6",)
    assert "only tool call" in alone.rule
    assert alone.examples[0] == ("arrangement",) and len(alone.examples) == 6
