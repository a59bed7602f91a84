"""SubmitPlan when the disk says no: canonical codes, no approval, and always a tool result."""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hostkit import InProcessHost

from conformance.mock_provider import MockProvider, ScriptedToolCall, TextReply, ToolCallsReply
from reference_host import artifacts
from reference_host.errors import HostError
from reference_host.storage import Storage

CONTENT = b"# Plan\n\nStep one.\n"


def never(_point: str) -> bool:
    return False


def failing(name: str, err: int, after: int = 0) -> Callable[..., Any]:
    """A stand-in for ``os.<name>`` that fails with ``err`` after ``after`` good calls."""
    real = getattr(os, name)
    calls = 0

    def stand_in(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls > after:
            raise OSError(err, os.strerror(err))
        return real(*args, **kwargs)

    return stand_in


def plan_files(root: Path) -> list[Path]:
    folder = root / ".pi" / "plan"
    return sorted(folder.iterdir()) if folder.is_dir() else []


@pytest.mark.parametrize(
    ("name", "err", "after"),
    [
        ("mkdir", errno.ENOSPC, 0),
        ("mkdir", errno.EROFS, 0),
        ("mkdir", errno.EACCES, 1),
        ("write", errno.ENOSPC, 0),
        ("fsync", errno.EIO, 0),
        ("fsync", errno.ENOSPC, 1),  # the file is flushed, a folder is not
        ("close", errno.EIO, 0),
    ],
)
def test_os_errors_while_writing_are_artifact_write_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, err: int, after: int
) -> None:
    monkeypatch.setattr(artifacts.os, name, failing(name, err, after))
    with pytest.raises(HostError) as caught:
        artifacts.write_artifact(str(tmp_path), CONTENT, never)
    monkeypatch.undo()
    assert caught.value.code == "ARTIFACT_WRITE_FAILED", caught.value.message
    assert plan_files(tmp_path) == []


def test_a_root_that_vanished_is_workspace_invalid(tmp_path: Path) -> None:
    root = tmp_path / "gone"
    with pytest.raises(HostError) as caught:
        artifacts.write_artifact(str(root), CONTENT, never)
    assert caught.value.code == "WORKSPACE_INVALID"


def test_a_root_with_an_overlong_name_is_workspace_invalid(tmp_path: Path) -> None:
    with pytest.raises(HostError) as caught:
        artifacts.write_artifact(str(tmp_path / ("x" * 300)), CONTENT, never)
    assert caught.value.code == "WORKSPACE_INVALID"


# -- through a running host, on real file systems ----------------------------------------------


@contextlib.contextmanager
def immutable(directory: Path) -> Iterator[None]:
    if os.geteuid() != 0:
        directory.chmod(0o555)
        try:
            yield
        finally:
            directory.chmod(0o755)
        return
    if subprocess.run(["chattr", "+i", str(directory)], check=False).returncode != 0:
        pytest.skip("cannot make a folder read-only for root here")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(directory)], check=True)


@contextlib.contextmanager
def full_disk(mount_point: Path) -> Iterator[None]:
    """A tiny tmpfs at ``mount_point``, filled up, or skip."""
    mount_point.mkdir()
    options = "size=64k,nr_inodes=16"
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mount_point)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip("cannot mount a small tmpfs here")
    try:
        with contextlib.suppress(OSError), (mount_point / "filler").open("wb") as filler:
            while True:
                filler.write(b"x" * 4096)
                filler.flush()
        with contextlib.suppress(OSError):
            for index in range(64):
                (mount_point / f"f{index}").mkdir()
        yield
    finally:
        subprocess.run(["umount", str(mount_point)], check=True)


def submit_into(tmp_path: Path, workspace: Path) -> tuple[dict[str, Any], list[Any], str]:
    """A Plan turn whose model submits a plan into ``workspace``, then answers "ok"."""
    with MockProvider() as provider:
        args = {"title": "T", "markdown": "# Plan\n", "question": "Go?"}
        provider.enqueue(
            ToolCallsReply((ScriptedToolCall("SubmitPlan", args, "c1"),)), TextReply("ok")
        )
        host = InProcessHost(tmp_path / "data")
        try:
            host.initialize()
            session = host.request(
                "session/create",
                {
                    "workspaceRoot": str(workspace),
                    "mode": "plan",
                    "provider": {"baseUrl": provider.base_url, "model": "m"},
                },
            )["session"]["sessionId"]
            host.request("session/prompt", {"sessionId": session, "text": "plan"})
            ended = host.notified("turn/ended")
            (result,) = host.notifications("turn/toolResult")
            approvals = host.request("approval/list", {"sessionId": session})["approvals"]
            return result, approvals, ended["outcome"]
        finally:
            host.stop()


def test_submit_plan_into_a_read_only_workspace(tmp_path: Path) -> None:
    workspace = tmp_path / "project"
    workspace.mkdir()
    with immutable(workspace):
        result, approvals, outcome = submit_into(tmp_path, workspace)
    assert (result["status"], result["error"]["code"]) == ("error", "ARTIFACT_WRITE_FAILED")
    assert approvals == []
    assert outcome == "completed"


def test_submit_plan_into_a_read_only_plan_folder(tmp_path: Path) -> None:
    workspace = tmp_path / "project"
    (workspace / ".pi" / "plan").mkdir(parents=True)
    with immutable(workspace / ".pi" / "plan"):
        result, approvals, _ = submit_into(tmp_path, workspace)
    assert (result["status"], result["error"]["code"]) == ("error", "ARTIFACT_WRITE_FAILED")
    assert approvals == []


def test_submit_plan_on_a_full_disk(tmp_path: Path) -> None:
    workspace = tmp_path / "project"
    with full_disk(workspace):
        result, approvals, outcome = submit_into(tmp_path, workspace)
        assert plan_files(workspace) == []
    assert (result["status"], result["error"]["code"]) == ("error", "ARTIFACT_WRITE_FAILED")
    assert approvals == []
    assert outcome == "completed"


def test_a_row_that_cannot_be_committed_leaves_no_artifact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def disk_full(self: Storage, row: Any) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(Storage, "insert_approval", disk_full)
    workspace = tmp_path / "project"
    workspace.mkdir()
    result, approvals, outcome = submit_into(tmp_path, workspace)
    assert (result["status"], result["error"]["code"]) == ("error", "TOOL_FAILED")
    assert approvals == []
    assert plan_files(workspace) == []
    assert outcome == "completed"
