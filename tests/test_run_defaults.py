"""Where a run's temporary folders go, and how many workers share a run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conformance import scratch
from conformance.commands import common


def _table(tmp_path: Path, *lines: str) -> Path:
    table = tmp_path / "mounts"
    table.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return table


def test_a_tmpfs_with_room_is_chosen(tmp_path: Path) -> None:
    folder = tmp_path / "mem"
    folder.mkdir()
    table = _table(tmp_path, "proc /proc proc rw 0 0", f"tmpfs {folder} tmpfs rw,relatime 0 0")
    free = os.statvfs(folder)
    if free.f_bavail * free.f_frsize < scratch.MIN_FREE_BYTES:
        pytest.fail("the test's own folder needs 1 GiB free to stand in for a tmpfs")
    assert scratch.memory_folder(folder, table) == folder


def test_another_file_system_is_not_chosen(tmp_path: Path) -> None:
    table = _table(tmp_path, f"/dev/vda {tmp_path} ext4 rw,relatime 0 0")
    assert scratch.memory_folder(tmp_path, table) is None


def test_the_last_mount_on_a_point_counts(tmp_path: Path) -> None:
    table = _table(tmp_path, f"tmpfs {tmp_path} tmpfs rw 0 0", f"/dev/vda {tmp_path} ext4 rw 0 0")
    assert scratch.memory_folder(tmp_path, table) is None


def test_no_mount_table_means_no_memory_folder(tmp_path: Path) -> None:
    assert scratch.memory_folder(tmp_path, tmp_path / "absent") is None


def test_a_missing_mount_point_is_not_chosen(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    table = _table(tmp_path, f"tmpfs {gone} tmpfs rw 0 0")
    assert scratch.memory_folder(gone, table) is None


def test_scratch_dir_wins_over_everything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    assert scratch.scratch_parent(tmp_path / "chosen") == tmp_path / "chosen"


def test_tmpdir_wins_over_a_memory_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    assert scratch.scratch_parent() is None  # the system's temporary folder: TMPDIR


def test_without_tmpdir_a_memory_folder_is_used_when_there_is_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TMPDIR", raising=False)
    assert scratch.scratch_parent() == scratch.memory_folder()


def test_auto_workers_are_one_per_core_and_one_more_in_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    assert common.workers("auto") == common.AUTO_WORKERS
    assert common.auto_workers("subprocess") == 4
    assert common.auto_workers("inprocess") == 5
    monkeypatch.setattr(os, "cpu_count", lambda: None)  # unknown: two cores at least
    assert common.auto_workers("subprocess") == 2
    assert common.workers("3") == 3
