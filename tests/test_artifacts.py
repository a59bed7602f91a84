"""Tests of the plan artifact writer and reader on real files (§2)."""

from __future__ import annotations

import hashlib
import os
import re
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reference_host.artifacts import (
    Artifact,
    encode_markdown,
    read_artifact,
    write_artifact,
)
from reference_host.errors import HostError

NAME = re.compile(r"[A-Za-z0-9._-]+\.md")


def no_fault(point: str) -> bool:
    return False


class Faults:
    """Records the fault points asked about and arms the ones named."""

    def __init__(self, *armed: str) -> None:
        self.armed = set(armed)
        self.asked: list[str] = []

    def __call__(self, point: str) -> bool:
        self.asked.append(point)
        return point in self.armed


def tree(root: Path) -> dict[str, bytes | str | None]:
    """Every entry below ``root``: file bytes, symlink target, or None for a directory."""
    found: dict[str, bytes | str | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            key = str(path.relative_to(root))
            if path.is_symlink():
                found[key] = "-> " + str(path.readlink())
            elif path.is_dir():
                found[key] = None
            else:
                found[key] = path.read_bytes()
    return found


def plan_files(root: Path) -> list[str]:
    return sorted(entry.name for entry in (root / ".pi" / "plan").iterdir())


def expect_error(code: str, root: str, content: bytes = b"plan", fault=no_fault) -> HostError:
    with pytest.raises(HostError) as caught:
        write_artifact(root, content, fault)
    assert caught.value.code == code
    return caught.value


# -- writing ---------------------------------------------------------------------------------


def test_write_creates_a_unique_markdown_file_with_the_exact_bytes(tmp_path: Path) -> None:
    content = "# Plan\r\n\n- step ✓\n\tno trailing newline".encode()
    artifact = write_artifact(str(tmp_path), content, no_fault)
    assert isinstance(artifact, Artifact)
    prefix, name = artifact.relative_path.rsplit("/", 1)
    assert prefix == ".pi/plan"
    assert NAME.fullmatch(name)
    path = tmp_path / ".pi" / "plan" / name
    assert path.read_bytes() == content
    assert artifact.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert artifact.byte_size == path.stat().st_size == len(content)
    assert plan_files(tmp_path) == [name]


def test_artifact_file_has_no_write_bits(tmp_path: Path) -> None:
    artifact = write_artifact(str(tmp_path), b"x", no_fault)
    mode = (tmp_path / artifact.relative_path).stat().st_mode
    assert stat.S_ISREG(mode)
    assert mode & 0o222 == 0


def test_empty_markdown_is_a_valid_artifact(tmp_path: Path) -> None:
    artifact = write_artifact(str(tmp_path), b"", no_fault)
    assert (tmp_path / artifact.relative_path).read_bytes() == b""
    assert artifact.byte_size == 0
    assert artifact.sha256 == hashlib.sha256(b"").hexdigest()


def test_large_content_is_written_completely(tmp_path: Path) -> None:
    content = os.urandom(3 * 1024 * 1024 + 17)
    artifact = write_artifact(str(tmp_path), content, no_fault)
    assert (tmp_path / artifact.relative_path).read_bytes() == content
    assert artifact.byte_size == len(content)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(content=st.binary(max_size=2048))
def test_any_bytes_round_trip_through_write_and_read(tmp_path: Path, content: bytes) -> None:
    artifact = write_artifact(str(tmp_path), content, no_fault)
    assert read_artifact(str(tmp_path), artifact.relative_path) == content
    assert artifact.sha256 == hashlib.sha256(content).hexdigest()


def test_two_writes_get_two_different_files(tmp_path: Path) -> None:
    first = write_artifact(str(tmp_path), b"same", no_fault)
    second = write_artifact(str(tmp_path), b"same", no_fault)
    assert first.relative_path != second.relative_path
    assert first.sha256 == second.sha256
    assert len(plan_files(tmp_path)) == 2
    assert (tmp_path / first.relative_path).read_bytes() == b"same"
    assert (tmp_path / second.relative_path).read_bytes() == b"same"


def test_existing_files_are_left_untouched(tmp_path: Path) -> None:
    plan = tmp_path / ".pi" / "plan"
    plan.mkdir(parents=True)
    (plan / "old.md").write_bytes(b"earlier plan")
    (tmp_path / ".pi" / "settings.json").write_bytes(b"{}")
    (tmp_path / "README.md").write_bytes(b"readme")
    before = tree(tmp_path)
    stats = {key: (tmp_path / key).stat().st_mtime_ns for key in before}
    artifact = write_artifact(str(tmp_path), b"new plan", no_fault)
    after = tree(tmp_path)
    new = after.pop(artifact.relative_path)
    assert new == b"new plan"
    assert after == before
    for key in ("README.md", ".pi/settings.json", ".pi/plan/old.md"):
        assert (tmp_path / key).stat().st_mtime_ns == stats[key]


def test_fault_points_are_asked_in_order_when_nothing_is_armed(tmp_path: Path) -> None:
    faults = Faults()
    write_artifact(str(tmp_path), b"x", faults)
    assert faults.asked == ["artifactWrite", "artifactFlush"]


# -- unsafe plan paths -----------------------------------------------------------------------


@pytest.mark.parametrize("dangling", [False, True])
def test_symlinked_pi_is_refused_and_nothing_is_written_outside(
    tmp_path: Path, dangling: bool
) -> None:
    root = tmp_path / "ws"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    target = outside / "missing" if dangling else outside
    (root / ".pi").symlink_to(target, target_is_directory=True)
    expect_error("PLAN_PATH_UNSAFE", str(root))
    assert tree(outside) == {}
    assert tree(root) == {".pi": "-> " + str(target)}


def test_symlinked_pi_plan_is_refused_and_nothing_is_written_outside(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    outside = tmp_path / "outside"
    (root / ".pi").mkdir(parents=True)
    outside.mkdir()
    (outside / "keep.md").write_bytes(b"keep")
    (root / ".pi" / "plan").symlink_to(outside, target_is_directory=True)
    expect_error("PLAN_PATH_UNSAFE", str(root))
    assert tree(outside) == {"keep.md": b"keep"}


def test_symlink_to_a_directory_inside_the_workspace_is_refused_too(tmp_path: Path) -> None:
    (tmp_path / "real" / "plan").mkdir(parents=True)
    (tmp_path / ".pi").symlink_to(tmp_path / "real", target_is_directory=True)
    expect_error("PLAN_PATH_UNSAFE", str(tmp_path))
    assert list((tmp_path / "real" / "plan").iterdir()) == []


@pytest.mark.parametrize("as_file", [".pi", ".pi/plan"])
def test_regular_file_in_place_of_a_plan_directory_is_refused(tmp_path: Path, as_file: str) -> None:
    (tmp_path / as_file).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / as_file).write_bytes(b"not a directory")
    before = tree(tmp_path)
    expect_error("PLAN_PATH_UNSAFE", str(tmp_path))
    assert tree(tmp_path) == before


# -- invalid workspace roots -----------------------------------------------------------------


def test_missing_root_is_workspace_invalid(tmp_path: Path) -> None:
    expect_error("WORKSPACE_INVALID", str(tmp_path / "nope"))
    assert not (tmp_path / "nope").exists()


def test_relative_root_is_workspace_invalid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "ws").mkdir()
    monkeypatch.chdir(tmp_path)
    expect_error("WORKSPACE_INVALID", "ws")
    assert tree(tmp_path / "ws") == {}


def test_root_that_is_a_file_is_workspace_invalid(tmp_path: Path) -> None:
    file = tmp_path / "file"
    file.write_bytes(b"x")
    expect_error("WORKSPACE_INVALID", str(file))
    assert file.read_bytes() == b"x"


# -- injected faults -------------------------------------------------------------------------


@pytest.mark.parametrize("point", ["artifactWrite", "artifactFlush"])
def test_injected_fault_fails_the_write_and_leaves_no_file(tmp_path: Path, point: str) -> None:
    plan = tmp_path / ".pi" / "plan"
    plan.mkdir(parents=True)
    (plan / "old.md").write_bytes(b"old")
    faults = Faults(point)
    expect_error("ARTIFACT_WRITE_FAILED", str(tmp_path), b"doomed plan", faults)
    assert point in faults.asked
    assert plan_files(tmp_path) == ["old.md"]
    assert (plan / "old.md").read_bytes() == b"old"


def test_a_fault_is_not_sticky(tmp_path: Path) -> None:
    expect_error("ARTIFACT_WRITE_FAILED", str(tmp_path), b"x", Faults("artifactFlush"))
    artifact = write_artifact(str(tmp_path), b"y", no_fault)
    assert plan_files(tmp_path) == [artifact.relative_path.rsplit("/", 1)[1]]


# -- encoding --------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "plain", "é✓😀", "a\r\nb\x00c"])
def test_encode_markdown_is_exact_utf8(text: str) -> None:
    assert encode_markdown(text) == text.encode("utf-8")


@pytest.mark.parametrize("text", ["\ud800", "ok \udfff", "\ud83d\ude00"])
def test_encode_markdown_refuses_lone_surrogates(text: str) -> None:
    with pytest.raises(HostError) as caught:
        encode_markdown(text)
    assert caught.value.code == "INVALID_TOOL_INPUT"


# -- reading ---------------------------------------------------------------------------------


def test_read_artifact_returns_the_written_bytes(tmp_path: Path) -> None:
    content = b"# plan\n\xe2\x9c\x93\n"
    artifact = write_artifact(str(tmp_path), content, no_fault)
    assert read_artifact(str(tmp_path), artifact.relative_path) == content


@pytest.mark.parametrize(
    "relative",
    [
        "plan.md",
        "old.md",
        ".pi/old.md",
        "plan/old.md",
        ".pi/plan",
        ".pi/plan/sub/old.md",
        "/.pi/plan/old.md",
        "./.pi/plan/old.md",
        ".pi/./plan/old.md",
        ".pi/plan/../plan/old.md",
        ".pi/plan/..",
        ".pi/plan/",
        "../ws/.pi/plan/old.md",
        ".pi\\plan\\old.md",
    ],
)
def test_read_artifact_refuses_paths_outside_the_plan_folder(tmp_path: Path, relative: str) -> None:
    plan = tmp_path / "ws" / ".pi" / "plan"
    (plan / "sub").mkdir(parents=True)
    (plan / "old.md").write_bytes(b"old")
    (plan / "sub" / "old.md").write_bytes(b"old")
    (tmp_path / "ws" / ".pi" / "old.md").write_bytes(b"old")
    (tmp_path / "ws" / "old.md").write_bytes(b"old")
    with pytest.raises(HostError) as caught:
        read_artifact(str(tmp_path / "ws"), relative)
    assert caught.value.code == "ARTIFACT_UNREADABLE"


def test_read_artifact_refuses_a_symlinked_artifact_file(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    plan = root / ".pi" / "plan"
    plan.mkdir(parents=True)
    secret = tmp_path / "secret.md"
    secret.write_bytes(b"secret")
    (plan / "link.md").symlink_to(secret)
    with pytest.raises(HostError) as caught:
        read_artifact(str(root), ".pi/plan/link.md")
    assert caught.value.code == "ARTIFACT_UNREADABLE"


@pytest.mark.parametrize("linked", [".pi", ".pi/plan"])
def test_read_artifact_refuses_symlinked_plan_directories(tmp_path: Path, linked: str) -> None:
    root = tmp_path / "ws"
    outside = tmp_path / "outside"
    (outside / "plan").mkdir(parents=True)
    (outside / "plan" / "p.md").write_bytes(b"outside")
    (outside / "p.md").write_bytes(b"outside")
    (root / linked).parent.mkdir(parents=True, exist_ok=True)
    (root / linked).symlink_to(outside, target_is_directory=True)
    with pytest.raises(HostError) as caught:
        read_artifact(str(root), ".pi/plan/p.md")
    assert caught.value.code == "ARTIFACT_UNREADABLE"


def test_read_artifact_of_a_missing_file_is_unreadable(tmp_path: Path) -> None:
    (tmp_path / ".pi" / "plan").mkdir(parents=True)
    with pytest.raises(HostError) as caught:
        read_artifact(str(tmp_path), ".pi/plan/missing.md")
    assert caught.value.code == "ARTIFACT_UNREADABLE"
