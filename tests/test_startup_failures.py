"""Start-up: one owner per data dir, and every refusal is one JSON-RPC error line.

Each refusal is checked from outside, on the real process: exactly one line on stdout, a
JSON-RPC error with a null id and a canonical code, a non-zero exit, no traceback, and
the data dir (and anything a symlink points to) left exactly as it was.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hostkit import HOST_CMD, WAIT_S, InProcessHost, SubprocessHost, strict_loads

from conformance.mock_provider import MockProvider, StallReply
from conformance.storage_seed import seed_v8
from pi_contract import error_catalog

DB = "host.db"


def tree(root: Path) -> dict[str, Any]:
    """Every entry below ``root`` (not following symlinks): kind, mode and content digest."""
    found: dict[str, Any] = {}
    if not root.exists() and not root.is_symlink():
        return found
    entries = [root, *sorted(root.rglob("*"))] if root.is_dir() else [root]
    for path in entries:
        info = path.lstat()
        if path.is_symlink():
            found[str(path)] = ("link", str(path.readlink()))
        elif path.is_file():
            found[str(path)] = ("file", info.st_mode, hashlib.sha256(path.read_bytes()).hexdigest())
        else:
            found[str(path)] = ("dir", info.st_mode)
    return found


def refusal(data_dir: Path) -> dict[str, Any]:
    """Start a host on ``data_dir`` that must refuse; return its one error object."""
    completed = subprocess.run(
        [*HOST_CMD, "--data-dir", str(data_dir)],
        input=b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":9}}\n',
        capture_output=True,
        timeout=WAIT_S,
        check=False,
    )
    stderr = completed.stderr.decode("utf-8", "replace")
    assert completed.returncode != 0, stderr
    assert "Traceback" not in stderr, stderr
    lines = completed.stdout.splitlines()
    assert len(lines) == 1, completed.stdout
    message = strict_loads(lines[0])
    assert set(message) == {"jsonrpc", "id", "error"}
    assert message["id"] is None
    error: dict[str, Any] = message["error"]
    code = error["data"]["code"]
    assert error["code"] == error_catalog()[code]["jsonrpcCode"]
    return error


def refused_with(data_dir: Path, *watched: Path) -> str:
    before = {path: tree(path) for path in (data_dir, *watched)}
    code: str = refusal(data_dir)["data"]["code"]
    assert {path: tree(path) for path in before} == before, "the refused start changed files"
    return code


def test_host_db_that_is_a_text_file(tmp_path: Path) -> None:
    (tmp_path / DB).write_text("these are my notes, not a database\n" * 50)
    assert refused_with(tmp_path) == "STORAGE_UNAVAILABLE"


def test_host_db_that_is_a_directory(tmp_path: Path) -> None:
    (tmp_path / DB).mkdir()
    assert refused_with(tmp_path) == "STORAGE_UNAVAILABLE"


def test_host_db_that_is_a_dangling_symlink(tmp_path: Path) -> None:
    data, elsewhere = tmp_path / "data", tmp_path / "elsewhere"
    data.mkdir()
    elsewhere.mkdir()
    (data / DB).symlink_to(elsewhere / "stolen.db")
    assert refused_with(data, elsewhere) == "STORAGE_UNAVAILABLE"
    assert not (elsewhere / "stolen.db").exists()


def test_host_db_that_is_a_symlink_to_a_good_database(tmp_path: Path) -> None:
    data, elsewhere = tmp_path / "data", tmp_path / "elsewhere"
    data.mkdir()
    elsewhere.mkdir()
    host = InProcessHost(elsewhere)
    host.initialize()
    host.stop()
    (data / DB).symlink_to(elsewhere / DB)
    assert refused_with(data, elsewhere) == "STORAGE_UNAVAILABLE"


def test_data_dir_that_is_a_regular_file(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.write_text("not a folder")
    assert refused_with(data) == "STORAGE_UNAVAILABLE"


def test_data_dir_below_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder")
    assert refused_with(tmp_path / "file" / "data", tmp_path) == "STORAGE_UNAVAILABLE"


@contextlib.contextmanager
def read_only(directory: Path) -> Iterator[None]:
    """Make ``directory`` unwritable, also for root (immutable), or skip."""
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


def test_read_only_empty_data_dir(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    with read_only(data):
        assert refused_with(data) == "STORAGE_UNAVAILABLE"


def test_read_only_data_dir_with_a_database(tmp_path: Path) -> None:
    data = tmp_path / "data"
    host = InProcessHost(data)
    host.initialize()
    host.stop()
    with read_only(data):
        assert refused_with(data) == "STORAGE_UNAVAILABLE"


def test_unsupported_version(tmp_path: Path) -> None:
    with closing(sqlite3.connect(tmp_path / DB)) as conn:
        conn.execute("PRAGMA user_version = 11")
    assert refused_with(tmp_path) == "STORAGE_SCHEMA_UNSUPPORTED"


def test_failed_migration(tmp_path: Path) -> None:
    seed_v8(tmp_path / DB, sessions=2, transcript_per_session=3)
    with closing(sqlite3.connect(tmp_path / DB)) as conn, conn:
        conn.execute("CREATE TABLE command_audit (id TEXT)")
    assert refused_with(tmp_path) == "MIGRATION_FAILED"


def test_a_missing_data_dir_is_created(tmp_path: Path) -> None:
    host = SubprocessHost(tmp_path / "new" / "data")
    assert host.initialize()["storageSchemaVersion"] == 10
    assert host.stop() == 0
    assert (tmp_path / "new" / "data" / DB).is_file()


# -- one owner per data dir ----------------------------------------------------------------


@pytest.fixture
def provider() -> Iterator[MockProvider]:
    with MockProvider() as running:
        yield running


def test_a_second_host_refuses_and_the_first_is_undisturbed(
    tmp_path: Path, provider: MockProvider
) -> None:
    data = tmp_path / "data"
    provider.enqueue(StallReply())
    first = SubprocessHost(data)
    try:
        first.initialize()
        session = first.request(
            "session/create",
            {"workspaceRoot": None, "provider": {"baseUrl": provider.base_url, "model": "m"}},
        )["session"]["sessionId"]
        turn = first.request("session/prompt", {"sessionId": session, "text": "think"})["turnId"]
        with closing(sqlite3.connect(f"file:{data / DB}?mode=ro", uri=True)) as conn:
            before = conn.execute("SELECT id, state FROM turns").fetchall()
        assert before == [(turn, "active")]

        assert refusal(data)["data"]["code"] == "DATA_DIR_IN_USE"

        with closing(sqlite3.connect(f"file:{data / DB}?mode=ro", uri=True)) as conn:
            assert conn.execute("SELECT id, state FROM turns").fetchall() == before
        assert (
            first.request("session/get", {"sessionId": session})["session"]["activeTurnId"] == turn
        )
        first.request("session/cancel", {"sessionId": session})
        assert first.notified("turn/ended")["outcome"] == "cancelled"
    finally:
        provider.release_stalls()
        assert first.stop() == 0


def test_serve_releases_the_data_dir_when_it_returns(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = InProcessHost(data)
    first.initialize()
    second = InProcessHost(data)
    second.wait(lambda m: "error" in m)
    assert second.messages[0]["error"]["data"]["code"] == "DATA_DIR_IN_USE"
    assert second.stop() != 0
    assert first.stop() == 0
    third = InProcessHost(data)
    assert third.initialize()["storageSchemaVersion"] == 10
    assert third.stop() == 0
