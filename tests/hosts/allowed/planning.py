"""Allowed variations: what the host chooses about plan artifacts."""

from __future__ import annotations

import uuid

from hosts.registry import AllowedCase, patch, variant
from reference_host import artifacts


@variant("other-artifact-names")
def _other_artifact_names() -> None:
    # The file name under .pi/plan/ is the host's choice (§2); only the folder, the .md
    # suffix and uniqueness are required.
    patch(artifacts, "_unique_name", lambda: f"{uuid.uuid4()}.md")


CASES = [
    AllowedCase(
        "other-artifact-names",
        "artifact_integrity,submit_plan,approval",
        why="the artifact's file name is host-owned",
    ),
]
