"""Generate ``docs/acceptance.md``: every requirement with the scenarios that check it.

Readers get, per ADR section, each numbered requirement in plain words and the scenarios
(by feature and rule) that prove it, then every feature in full. The page is built from
``features/requirements.toml`` and the Gherkin files with pytest-bdd's own parser, so it
always says what the suite runs. ``--check`` fails when the committed page is stale.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pytest_bdd.parser import FeatureParser

from conformance.docgen import template_environment, write_or_check
from conformance.requirements import REQUIREMENT_TAG, Requirement, active_catalog, sort_key
from pi_contract import features_dir

DEFAULT_OUTPUT: Final = Path(__file__).resolve().parent.parent / "docs" / "acceptance.md"


@dataclass(frozen=True)
class ScenarioDoc:
    """One scenario as a reader sees it."""

    feature: str
    rule: str
    name: str
    requirements: tuple[str, ...]
    steps: tuple[str, ...]
    examples: tuple[tuple[str, ...], ...]
    only_subprocess: bool


@dataclass(frozen=True)
class FeatureDoc:
    """One feature file."""

    file: str
    name: str
    description: str
    scenarios: tuple[ScenarioDoc, ...]


def load_features(root: Path | None = None) -> list[FeatureDoc]:
    """Parse every feature with pytest-bdd's parser."""
    folder = root or features_dir()
    documents = []
    for path in sorted(folder.glob("*.feature")):
        feature = FeatureParser(str(folder), path.name).parse()
        scenarios = []
        for template in feature.scenarios.values():
            rule_tags = template.rule.tags if template.rule else set()
            tags = template.tags | rule_tags | feature.tags
            examples: list[tuple[str, ...]] = []
            only_subprocess = False
            for block in template.examples:
                header = tuple(block.example_params)
                if not examples:
                    examples.append(header)
                examples += [tuple(str(v) for v in row) for row in block.examples]
                only_subprocess = only_subprocess or "subprocess_only" in (block.tags or set())
            scenarios.append(
                ScenarioDoc(
                    feature=feature.name,
                    rule=template.rule.name if template.rule else "",
                    name=template.name,
                    requirements=tuple(
                        sorted((t for t in tags if REQUIREMENT_TAG.match(t)), key=sort_key)
                    ),
                    steps=tuple(f"{step.keyword} {step.name}" for step in template.steps),
                    examples=tuple(examples),
                    only_subprocess=only_subprocess,
                )
            )
        documents.append(
            FeatureDoc(path.name, feature.name, feature.description.strip(), tuple(scenarios))
        )
    return documents


def render_acceptance() -> str:
    """The whole page."""
    features = load_features()
    by_requirement: dict[str, list[ScenarioDoc]] = defaultdict(list)
    for feature in features:
        for scenario in feature.scenarios:
            for requirement_id in scenario.requirements:
                by_requirement[requirement_id].append(scenario)
    sections: dict[str, list[Requirement]] = defaultdict(list)
    for requirement in sorted(active_catalog().values(), key=lambda r: sort_key(r.id)):
        sections[requirement.section].append(requirement)
    return (
        template_environment()
        .get_template("acceptance.md.j2")
        .render(sections=sections, by_requirement=by_requirement, features=features)
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Write the acceptance page, or with ``--check`` verify it is current."""
    parser = argparse.ArgumentParser(prog="python -m conformance.acceptance")
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is stale")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    return write_or_check(
        args.output,
        render_acceptance(),
        "features/",
        "python -m conformance.acceptance",
        args.check,
    )


if __name__ == "__main__":
    sys.exit(main())
