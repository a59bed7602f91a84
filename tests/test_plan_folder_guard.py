"""Write and Edit never reach the host-owned plan folder (ADR 0053 §2, Consequences)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reference_host.errors import HostError
from reference_host.turns import _refuse_plan_folder


@pytest.mark.parametrize(
    "path",
    [".pi/plan/plan-1.md", ".pi/plan", "./.pi/plan/x.md", "src/../.pi/plan/new.md"],
)
def test_paths_in_the_plan_folder_are_refused(tmp_path: Path, path: str) -> None:
    (tmp_path / ".pi" / "plan").mkdir(parents=True)
    with pytest.raises(HostError) as refused:
        _refuse_plan_folder(tmp_path, path)
    assert refused.value.code == "TOOL_DENIED"


def test_a_symlink_into_the_plan_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / ".pi" / "plan").mkdir(parents=True)
    (tmp_path / "shortcut").symlink_to(tmp_path / ".pi" / "plan")
    with pytest.raises(HostError):
        _refuse_plan_folder(tmp_path, "shortcut/evil.md")


@pytest.mark.parametrize("path", ["notes.md", ".pi/other.md", ".pi/planning/x.md", "plan/x.md"])
def test_other_paths_pass(tmp_path: Path, path: str) -> None:
    _refuse_plan_folder(tmp_path, path)
