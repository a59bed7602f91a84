"""The universe of scenarios, read from the Gherkin files, with stable ids.

A scenario's id is ``<feature file>: <title>``, where an outline's title is rendered with
its example's values (write outline titles so that they name the example). The same ids
key summary.json, the expectations file, junit, ``compare`` and ``merge``, and they stay
put when scenarios are added or reordered.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from pytest_bdd.parser import Feature, FeatureParser, ScenarioTemplate
from pytest_bdd.scenario import get_python_name_generator

from conformance.requirements import REQUIREMENT_TAG
from pi_contract import features_dir

SUBPROCESS_ONLY = "subprocess_only"


@dataclass(frozen=True)
class ScenarioInfo:
    """One runnable scenario (one example of an outline)."""

    id: str
    feature_file: str
    feature: str
    area: str
    rule: str | None
    title: str
    line: int
    tags: frozenset[str]
    test_name: str = ""  # the name pytest shows: test function and example, as pytest -k sees

    @property
    def requirements(self) -> list[str]:
        """The requirement IDs among the tags."""
        return sorted(t for t in self.tags if REQUIREMENT_TAG.match(t))

    @property
    def subprocess_only(self) -> bool:
        """Whether the scenario needs a driver that can stop the host abruptly."""
        return SUBPROCESS_ONLY in self.tags


def scenario_id(feature_file: str, title: str) -> str:
    """The stable id of a scenario."""
    return f"{feature_file}: {title}"


def test_name(function: str, context: Mapping[str, str]) -> str:
    """The name pytest shows for a scenario: its test function and its example's id, each
    value escaped to ASCII as pytest escapes parameter ids."""
    if not context:
        return function
    values = (value.encode("unicode_escape").decode("ascii") for value in context.values())
    return f"{function}[{'-'.join(values)}]"


def area_of(feature: Feature) -> str:
    """The ``@area:`` tag of a feature (empty when it has none)."""
    for tag in feature.tags:
        if tag.startswith("area:"):
            return tag.partition(":")[2]
    return ""


def _info(
    feature: Feature,
    template: ScenarioTemplate,
    context: Mapping[str, str],
    file: str,
    function: str,
    example_tags: frozenset[str],
) -> ScenarioInfo:
    rendered = template.render(context)
    tags = set(template.tags) | set(feature.tags) | example_tags
    return ScenarioInfo(
        id=scenario_id(file, rendered.name),
        feature_file=file,
        feature=feature.name,
        area=area_of(feature),
        rule=template.rule.name if template.rule else None,
        title=rendered.name,
        line=template.line_number,
        tags=frozenset(tags),
        test_name=test_name(function, context),
    )


@cache
def parse_feature(path: Path) -> Feature:
    """Parse one feature file with pytest-bdd's own parser (once per path; read it only)."""
    return FeatureParser(str(path.parent), path.name).parse()


@cache
def all_scenarios(root: Path | None = None) -> tuple[ScenarioInfo, ...]:
    """Every scenario of every shipped feature, in file and line order."""
    base = root or features_dir()
    found: list[ScenarioInfo] = []
    functions: set[str] = set()
    features = [parse_feature(path) for path in sorted(base.glob("*.feature"))]
    # pytest-bdd binds features in title order and gives a repeated test name a suffix.
    for feature in sorted(features, key=lambda f: f.name or f.filename):
        for template in feature.scenarios.values():
            function = next(
                n for n in get_python_name_generator(template.name) if n not in functions
            )
            functions.add(function)
            file = Path(feature.filename).name
            examples = [(c, frozenset(e.tags)) for e in template.examples for c in e.as_contexts()]
            for context, example_tags in examples or [({}, frozenset())]:
                found.append(_info(feature, template, context, file, function, example_tags))
    return tuple(sorted(found, key=lambda s: (s.feature_file, s.line, s.id)))


def by_id(root: Path | None = None) -> dict[str, ScenarioInfo]:
    """The scenarios keyed by id."""
    return {s.id: s for s in all_scenarios(root)}


def areas(root: Path | None = None) -> list[str]:
    """Every feature area, sorted."""
    return sorted({s.area for s in all_scenarios(root)})
