"""The requirement catalog (``features/requirements.toml``) and scenario tags."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from pi_contract import features_dir

REQUIREMENT_TAG = re.compile(r"^(R[1-7]\.\d+|C\d+|P\d+)$")
_TAG_LINE = re.compile(r"^\s*(@\S+(?:\s+@\S+)*)\s*$")


@dataclass(frozen=True)
class Requirement:
    """One numbered normative statement of the ADR."""

    id: str
    section: str
    text: str
    area: str
    pending: str | None = None
    retired_by: str | None = None

    @property
    def kind(self) -> str:
        """``adr`` for R-ids, ``consequence`` for C-ids, ``project`` for P-ids."""
        return {"R": "adr", "C": "consequence", "P": "project"}[self.id[0]]

    @property
    def active(self) -> bool:
        """False once the requirement was retired in favour of another ID."""
        return self.retired_by is None


@cache
def catalog(path: Path | None = None) -> dict[str, Requirement]:
    """Every requirement, keyed by ID, in catalog order."""
    source = path or features_dir() / "requirements.toml"
    with source.open("rb") as handle:
        data = tomllib.load(handle)
    entries: dict[str, Requirement] = {}
    for raw in data["requirement"]:
        requirement = Requirement(
            id=raw["id"],
            section=raw["section"],
            text=raw["text"],
            area=raw["area"],
            pending=raw.get("pending"),
            retired_by=raw.get("retired_by"),
        )
        if requirement.id in entries:
            raise ValueError(f"requirement {requirement.id} is listed twice")
        entries[requirement.id] = requirement
    return entries


def active_catalog() -> dict[str, Requirement]:
    """The requirements a host is judged by (retired ones left out)."""
    return {key: value for key, value in catalog().items() if value.active}


def sort_key(requirement_id: str) -> tuple[int, int, int]:
    """R-ids by section then number, then C-ids, then P-ids."""
    if requirement_id.startswith("C"):
        return (1, 0, int(requirement_id[1:]))
    if requirement_id.startswith("P"):
        return (2, 0, int(requirement_id[1:]))
    section, number = requirement_id[1:].split(".")
    return (0, int(section), int(number))


def feature_tags(feature_root: Path | None = None) -> dict[str, set[str]]:
    """Requirement IDs tagged in each feature file, keyed by the file's name.

    Read straight from the Gherkin text so that a tag is counted whether or not the
    scenario is selected in a particular run.
    """
    root = feature_root or features_dir()
    found: dict[str, set[str]] = {}
    for feature in sorted(root.glob("*.feature")):
        tags: set[str] = set()
        for line in feature.read_text(encoding="utf-8").splitlines():
            match = _TAG_LINE.match(line)
            if match:
                tags.update(
                    tag[1:] for tag in match.group(1).split() if REQUIREMENT_TAG.match(tag[1:])
                )
        found[feature.name] = tags
    return found


def tagged_ids(feature_root: Path | None = None) -> set[str]:
    """Every requirement ID that some scenario carries."""
    return set().union(*feature_tags(feature_root).values())
