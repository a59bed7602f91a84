"""Approve and artifact/read check the artifact against its record first (§2, §3).

A changed, missing or unreadable artifact is refused with a canonical code; the approval
stays pending, the session is unchanged, nothing is executed or returned, and nothing is
left stuck: the user can still reject, and then prompt again.
"""

from __future__ import annotations

import base64
import hashlib
import os
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hostkit import InProcessHost, RpcError

from conformance.mock_provider import MockProvider, ScriptedToolCall, TextReply, ToolCallsReply
from reference_host.storage import Storage

MARKDOWN = "# Plan\n\n1. Add a cache.\n2. Measure it.\n"


@dataclass
class Pending:
    host: InProcessHost
    provider: MockProvider
    session: str
    approval: str
    artifact: Path


@pytest.fixture
def pending(tmp_path: Path) -> Iterator[Pending]:
    workspace = tmp_path / "project"
    workspace.mkdir()
    with MockProvider() as provider:
        submit = {"title": "Cache", "markdown": MARKDOWN, "question": "Go?"}
        provider.enqueue(ToolCallsReply((ScriptedToolCall("SubmitPlan", submit),)))
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
            host.request("session/prompt", {"sessionId": session, "text": "plan it"})
            host.notified("turn/ended")
            (approval,) = host.request("approval/list", {"sessionId": session})["approvals"]
            assert approval["status"] == "pending"
            artifact = workspace / approval["artifact"]["path"]
            yield Pending(host, provider, session, approval["approvalId"], artifact)
        finally:
            host.stop()


def rewrite(path: Path, data: bytes) -> None:
    path.chmod(0o644)
    path.write_bytes(data)


def same_size_other_bytes(path: Path) -> None:
    rewrite(path, MARKDOWN.replace("cache", "CACHE").encode())


def appended(path: Path) -> None:
    rewrite(path, MARKDOWN.encode() + b"\n3. rm -rf /\n")


def invalid_utf8(path: Path) -> None:
    rewrite(path, b"\xff" * len(MARKDOWN.encode()))


def deleted(path: Path) -> None:
    path.unlink()


def a_directory(path: Path) -> None:
    path.unlink()
    path.mkdir()


def a_symlink_to_the_same_bytes(path: Path) -> None:
    copy = path.with_name("copy.txt")
    copy.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(copy)


def a_fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


TAMPERING: dict[str, tuple[Callable[[Path], None], str]] = {
    "same size, other bytes": (same_size_other_bytes, "ARTIFACT_MODIFIED"),
    "appended": (appended, "ARTIFACT_MODIFIED"),
    "invalid UTF-8": (invalid_utf8, "ARTIFACT_MODIFIED"),
    "deleted": (deleted, "ARTIFACT_UNREADABLE"),
    "a directory": (a_directory, "ARTIFACT_UNREADABLE"),
    "a symlink": (a_symlink_to_the_same_bytes, "ARTIFACT_UNREADABLE"),
    "a fifo": (a_fifo, "ARTIFACT_UNREADABLE"),
}


@pytest.mark.parametrize("change", TAMPERING, ids=list(TAMPERING))
def test_approving_a_tampered_artifact_is_refused_and_changes_nothing(
    pending: Pending, change: str
) -> None:
    tamper, code = TAMPERING[change]
    host, session, approval = pending.host, pending.session, pending.approval
    before = host.request("session/get", {"sessionId": session})["session"]
    requests_before = len(pending.provider.requests())
    tamper(pending.artifact)

    refused = {"sessionId": session, "approvalId": approval, "permissionMode": "auto"}
    assert host.refused("approval/approve", refused) == code
    assert host.refused("artifact/read", {"sessionId": session, "approvalId": approval}) == code

    got = host.request("approval/get", {"sessionId": session, "approvalId": approval})
    assert got["approval"]["status"] == "pending"
    assert got["approval"]["executionId"] is None
    assert host.request("session/get", {"sessionId": session})["session"] == before
    assert not [t for t in host.notifications("turn/started") if t["kind"] == "execution"]
    assert len(pending.provider.requests()) == requests_before

    # Nothing is stuck: the user can still reject, and then prompt again.
    host.request("approval/reject", {"sessionId": session, "approvalId": approval})
    pending.provider.enqueue(TextReply("fine"))
    host.request("session/prompt", {"sessionId": session, "text": "again"})
    assert host.notified("turn/ended", lambda p: p["outcome"] == "completed")


def test_an_intact_artifact_is_read_and_approved(pending: Pending) -> None:
    host, session, approval = pending.host, pending.session, pending.approval
    read = host.request("artifact/read", {"sessionId": session, "approvalId": approval})
    content = base64.b64decode(read["contentBase64"])
    assert content == MARKDOWN.encode()
    assert read["sha256"] == hashlib.sha256(content).hexdigest()
    pending.provider.enqueue(TextReply("done"))
    params = {"sessionId": session, "approvalId": approval, "permissionMode": "auto"}
    assert host.request("approval/approve", params)["approval"]["status"] == "approved"
    host.notified("turn/ended", lambda p: p["outcome"] == "completed")


def test_an_artifact_restored_to_its_bytes_can_be_approved(pending: Pending) -> None:
    same_size_other_bytes(pending.artifact)
    params = {"sessionId": pending.session, "approvalId": pending.approval, "permissionMode": "ask"}
    with pytest.raises(RpcError):
        pending.host.request("approval/approve", params)
    pending.artifact.write_bytes(MARKDOWN.encode())
    pending.provider.enqueue(TextReply("done"))
    assert pending.host.request("approval/approve", params)["approval"]["status"] == "approved"


def test_an_execution_that_cannot_start_is_interrupted_not_stuck(
    pending: Pending, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = Storage.start_turn

    async def disk_full(self: Storage, *args: object) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(Storage, "start_turn", disk_full)
    host, session, approval = pending.host, pending.session, pending.approval
    params = {"sessionId": session, "approvalId": approval, "permissionMode": "auto"}
    assert "error" in host.answer(host.send("approval/approve", params))
    monkeypatch.setattr(Storage, "start_turn", original)

    got = host.request("approval/get", {"sessionId": session, "approvalId": approval})
    assert got["approval"]["executionState"] == "interrupted"
    assert (
        host.request("session/get", {"sessionId": session})["session"]["activeExecutionId"] is None
    )
    pending.provider.enqueue(TextReply("fine"))
    host.request("session/prompt", {"sessionId": session, "text": "again"})
    assert host.notified("turn/ended", lambda p: p["outcome"] == "completed")
