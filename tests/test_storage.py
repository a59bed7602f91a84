"""Tests of the host database (storage schema v10) on real SQLite files."""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pi_contract import STORAGE_SCHEMA_VERSION, error_catalog, schemas_dir
from reference_host.errors import HostError
from reference_host.storage import DB_FILE, SessionRow, Storage, v10_ddl

T = TypeVar("T")
SCHEMA_QUERY = "SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY name"
T0 = 1_700_000_000_000


def with_storage(data_dir: Path, body: Callable[[Storage], Awaitable[T]]) -> T:
    """Open the storage in ``data_dir``, run ``body`` and close it again."""

    async def run() -> T:
        storage = await Storage.open(data_dir)
        try:
            return await body(storage)
        finally:
            await storage.close()

    return asyncio.run(run())


def open_and_close(data_dir: Path) -> None:
    async def nothing(_: Storage) -> None:
        return None

    with_storage(data_dir, nothing)


def reference_schema() -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript((schemas_dir() / "storage" / "v10.sql").read_text(encoding="utf-8"))
        return conn.execute(SCHEMA_QUERY).fetchall()
    finally:
        conn.close()


def session(session_id: str = "s-1", **changes: Any) -> SessionRow:
    fields: dict[str, Any] = {
        "id": session_id,
        "workspace_root": "/tmp/ws",
        "mode": "agent",
        "permission_mode": "ask",
        "provider_base_url": None,
        "model": None,
        "shell_id": None,
        "created_at": T0,
        "updated_at": T0,
    }
    fields.update(changes)
    return SessionRow(**fields)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def direct(data_dir: Path) -> sqlite3.Connection:
    """A plain sqlite3 connection to the host database, outside the host."""
    conn = sqlite3.connect(data_dir / DB_FILE, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


# -- creation --------------------------------------------------------------------------------


def test_v10_ddl_is_the_published_file() -> None:
    assert v10_ddl() == (schemas_dir() / "storage" / "v10.sql").read_text(encoding="utf-8")
    assert STORAGE_SCHEMA_VERSION == 10


def test_empty_data_dir_gets_v10_in_wal_with_synchronous_full(tmp_path: Path) -> None:
    data_dir = tmp_path / "new" / "nested"  # created on demand

    async def inspect(storage: Storage) -> tuple[int, str, int, int]:
        async with storage.transaction() as conn:
            async with conn.execute("PRAGMA journal_mode") as cursor:
                journal = (await cursor.fetchone())[0]
            async with conn.execute("PRAGMA synchronous") as cursor:
                synchronous = (await cursor.fetchone())[0]
            async with conn.execute("PRAGMA foreign_keys") as cursor:
                foreign_keys = (await cursor.fetchone())[0]
        return await storage.user_version(), journal, synchronous, foreign_keys

    version, journal, synchronous, foreign_keys = with_storage(data_dir, inspect)
    assert version == 10
    assert journal == "wal"
    assert synchronous == 2  # FULL
    assert foreign_keys == 1
    assert (data_dir / DB_FILE).is_file()

    conn = sqlite3.connect(data_dir / DB_FILE)
    try:
        assert conn.execute("PRAGMA user_version").fetchone() == (10,)
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)  # persistent
    finally:
        conn.close()


def test_created_schema_equals_the_published_ddl(tmp_path: Path) -> None:
    open_and_close(tmp_path)
    conn = sqlite3.connect(tmp_path / DB_FILE)
    try:
        created = conn.execute(SCHEMA_QUERY).fetchall()
    finally:
        conn.close()
    expected = reference_schema()
    assert created == expected
    names = {row[1] for row in created}
    assert {"sessions", "plan_approvals", "plan_approvals_one_pending", "turns"} <= names


def test_an_existing_empty_file_is_treated_as_empty(tmp_path: Path) -> None:
    (tmp_path / DB_FILE).write_bytes(b"")
    assert with_storage(tmp_path, lambda s: s.user_version()) == 10


def test_reopening_keeps_data_and_schema(tmp_path: Path) -> None:
    async def write(storage: Storage) -> None:
        await storage.insert_session(session("s-1"))
        await storage.set_setting("default_shell_id", "bash")
        await storage.append_transcript("s-1", "t-1", "user", {"text": "hi"}, T0)

    with_storage(tmp_path, write)
    conn = sqlite3.connect(tmp_path / DB_FILE)
    try:
        schema_after_first = conn.execute(SCHEMA_QUERY).fetchall()
    finally:
        conn.close()

    async def read(storage: Storage) -> tuple[Any, ...]:
        return (
            await storage.user_version(),
            await storage.get_session("s-1"),
            await storage.get_setting("default_shell_id"),
            await storage.transcript("s-1"),
        )

    version, row, shell, transcript = with_storage(tmp_path, read)
    assert version == 10
    assert row == session("s-1")
    assert shell == "bash"
    assert transcript == [(1, "t-1", "user", {"text": "hi"}, T0)]

    conn = sqlite3.connect(tmp_path / DB_FILE)
    try:
        assert conn.execute(SCHEMA_QUERY).fetchall() == schema_after_first
    finally:
        conn.close()


def test_a_v10_file_made_from_the_published_ddl_is_opened_as_is(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / DB_FILE)
    try:
        conn.executescript(v10_ddl())
        conn.execute(
            "INSERT INTO sessions (id, mode, permission_mode, created_at, updated_at) "
            "VALUES ('ext', 'plan', 'auto', 1, 2)"
        )
        conn.commit()
    finally:
        conn.close()

    async def read(storage: Storage) -> list[SessionRow]:
        return await storage.list_sessions()

    assert with_storage(tmp_path, read) == [
        SessionRow("ext", None, "plan", "auto", None, None, None, 1, 2)
    ]


# -- refusal ---------------------------------------------------------------------------------


def make_foreign_db(path: Path, user_version: int) -> None:
    # WAL mode, as a host (or a previous host version) leaves its database.
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY, note TEXT)")
        conn.execute("INSERT INTO sessions VALUES ('old', 'keep me')")
        conn.execute(f"PRAGMA user_version = {user_version}")
        conn.commit()
    finally:
        conn.close()


@pytest.mark.parametrize("user_version", [9, 11, 0, 1])
def test_unsupported_databases_are_refused_and_left_untouched(
    tmp_path: Path, user_version: int
) -> None:
    db = tmp_path / DB_FILE
    make_foreign_db(db, user_version)
    before = sha256(db)
    files_before = sorted(p.name for p in tmp_path.iterdir())

    with pytest.raises(HostError) as excinfo:
        open_and_close(tmp_path)
    error = excinfo.value
    assert error.code == "STORAGE_SCHEMA_UNSUPPORTED"
    assert error.jsonrpc_code == error_catalog()["STORAGE_SCHEMA_UNSUPPORTED"]["jsonrpcCode"]
    assert error.details == {"userVersion": user_version}
    assert str(user_version) in error.message

    assert sha256(db) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == files_before
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA user_version").fetchone() == (user_version,)
        assert conn.execute("SELECT * FROM sessions").fetchall() == [("old", "keep me")]
    finally:
        conn.close()


# -- sessions --------------------------------------------------------------------------------


def test_session_insert_get_list_update_round_trip(tmp_path: Path) -> None:
    first = session("s-b", created_at=T0, updated_at=T0)
    second = session(
        "s-a",
        workspace_root=None,
        mode="plan",
        permission_mode="auto",
        provider_base_url="http://127.0.0.1:9/v1",
        model="gpt-test",
        shell_id="zsh",
        created_at=T0 + 5,
        updated_at=T0 + 5,
    )
    third = session("s-c", created_at=T0, updated_at=T0)  # same time as first: id breaks tie
    changed = SessionRow(
        id="s-b",
        workspace_root="/ignored/by/update",
        mode="plan",
        permission_mode="accept-edits",
        provider_base_url="http://127.0.0.1:1/v1",
        model="m2",
        shell_id="bash",
        created_at=T0 + 999,  # not a configurable field
        updated_at=T0 + 10,
    )

    async def body(storage: Storage) -> tuple[Any, ...]:
        assert await storage.list_sessions() == []
        assert await storage.get_session("s-b") is None
        for row in (first, second, third):
            await storage.insert_session(row)
        got = await storage.get_session("s-a")
        listed = await storage.list_sessions()
        await storage.update_session(changed)
        after = await storage.get_session("s-b")
        others = (await storage.get_session("s-a"), await storage.get_session("s-c"))
        return got, listed, after, others

    got, listed, after, others = with_storage(tmp_path, body)
    assert got == second
    assert listed == [first, third, second]
    assert after == SessionRow(
        id="s-b",
        workspace_root="/tmp/ws",
        mode="plan",
        permission_mode="accept-edits",
        provider_base_url="http://127.0.0.1:1/v1",
        model="m2",
        shell_id="bash",
        created_at=T0,
        updated_at=T0 + 10,
    )
    assert others == (second, third)


def test_duplicate_session_id_is_rejected_and_rolled_back(tmp_path: Path) -> None:
    async def body(storage: Storage) -> list[SessionRow]:
        await storage.insert_session(session("s-1"))
        with pytest.raises(sqlite3.IntegrityError):
            await storage.insert_session(session("s-1", model="other"))
        await storage.insert_session(session("s-2"))  # the connection is usable again
        return await storage.list_sessions()

    assert [row.id for row in with_storage(tmp_path, body)] == ["s-1", "s-2"]


def test_invalid_session_mode_is_refused_by_the_schema(tmp_path: Path) -> None:
    async def body(storage: Storage) -> list[SessionRow]:
        with pytest.raises(sqlite3.IntegrityError):
            await storage.insert_session(session("s-1", mode="build"))
        return await storage.list_sessions()

    assert with_storage(tmp_path, body) == []


# -- settings --------------------------------------------------------------------------------


def test_settings_upsert(tmp_path: Path) -> None:
    async def body(storage: Storage) -> list[str | None]:
        seen = [await storage.get_setting("default_shell_id")]
        await storage.set_setting("default_shell_id", "bash")
        seen.append(await storage.get_setting("default_shell_id"))
        await storage.set_setting("default_shell_id", "zsh")
        seen.append(await storage.get_setting("default_shell_id"))
        await storage.set_setting("other", "")
        seen.append(await storage.get_setting("other"))
        return seen

    assert with_storage(tmp_path, body) == [None, "bash", "zsh", ""]
    conn = sqlite3.connect(tmp_path / DB_FILE)
    try:
        rows = conn.execute("SELECT key, value FROM settings ORDER BY key").fetchall()
    finally:
        conn.close()
    assert rows == [("default_shell_id", "zsh"), ("other", "")]


# -- transcript ------------------------------------------------------------------------------


def test_transcript_appends_in_order_per_session(tmp_path: Path) -> None:
    async def body(storage: Storage) -> tuple[Any, ...]:
        await storage.insert_session(session("s-1"))
        await storage.insert_session(session("s-2"))
        await storage.append_transcript("s-1", "t-1", "user", {"content": "hi ✓"}, T0 + 2)
        await storage.append_transcript("s-2", None, "system", {"content": "other"}, T0)
        await storage.append_transcript(
            "s-1", "t-1", "assistant", {"content": None, "tool_calls": [{"id": "c"}]}, T0 + 1
        )
        await storage.append_transcript("s-1", "t-1", "tool", {"content": "ok"}, T0 + 3)
        return (
            await storage.transcript("s-1"),
            await storage.transcript("s-2"),
            await storage.transcript("missing"),
        )

    first, second, missing = with_storage(tmp_path, body)
    # Ordered by append, not by timestamp.
    assert [(entry[2], entry[3], entry[4]) for entry in first] == [
        ("user", {"content": "hi ✓"}, T0 + 2),
        ("assistant", {"content": None, "tool_calls": [{"id": "c"}]}, T0 + 1),
        ("tool", {"content": "ok"}, T0 + 3),
    ]
    seqs = [entry[0] for entry in first]
    assert seqs == sorted(seqs)
    assert len(set(seqs)) == 3
    assert all(entry[1] == "t-1" for entry in first)
    assert second == [(second[0][0], None, "system", {"content": "other"}, T0)]
    assert missing == []


def test_transcript_rejects_unknown_session_and_role(tmp_path: Path) -> None:
    async def body(storage: Storage) -> list[Any]:
        await storage.insert_session(session("s-1"))
        with pytest.raises(sqlite3.IntegrityError):
            await storage.append_transcript("nope", None, "user", {}, T0)
        with pytest.raises(sqlite3.IntegrityError):
            await storage.append_transcript("s-1", None, "narrator", {}, T0)
        return await storage.transcript("s-1")

    assert with_storage(tmp_path, body) == []


# -- plan_approvals partial unique indexes ---------------------------------------------------

APPROVAL_COLUMNS = (
    "id, session_id, turn_id, title, question, artifact_path, artifact_sha256, "
    "artifact_bytes, created_at, expires_at, status, permission_mode, execution_id, "
    "execution_state"
)


def insert_approval(
    conn: sqlite3.Connection,
    approval_id: str,
    session_id: str,
    status: str,
    *,
    permission_mode: str | None = None,
    execution_id: str | None = None,
    execution_state: str | None = None,
) -> None:
    conn.execute(
        f"INSERT INTO plan_approvals ({APPROVAL_COLUMNS}) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            approval_id,
            session_id,
            f"turn-{approval_id}",
            "Title",
            "Proceed?",
            f".pi/plan/{approval_id}.md",
            "a" * 64,
            12,
            T0,
            T0 + 30 * 60 * 1000,
            status,
            permission_mode,
            execution_id,
            execution_state,
        ),
    )


@pytest.fixture
def approvals_db(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    async def create(storage: Storage) -> None:
        await storage.insert_session(session("s-1"))
        await storage.insert_session(session("s-2"))

    with_storage(tmp_path, create)
    conn = direct(tmp_path)
    yield conn
    conn.close()


def test_one_pending_approval_per_session(approvals_db: sqlite3.Connection) -> None:
    conn = approvals_db
    insert_approval(conn, "a-1", "s-1", "pending")
    with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
        insert_approval(conn, "a-2", "s-1", "pending")
    # Another session may have its own pending approval, and decided ones do not count.
    insert_approval(conn, "b-1", "s-2", "pending")
    insert_approval(conn, "a-3", "s-1", "rejected")
    insert_approval(conn, "a-4", "s-1", "expired")
    # Once the first is decided, a new pending approval is accepted.
    conn.execute("UPDATE plan_approvals SET status = 'rejected' WHERE id = 'a-1'")
    insert_approval(conn, "a-5", "s-1", "pending")
    pending = conn.execute(
        "SELECT id FROM plan_approvals WHERE status = 'pending' ORDER BY id"
    ).fetchall()
    assert pending == [("a-5",), ("b-1",)]


def test_pending_index_also_guards_updates(approvals_db: sqlite3.Connection) -> None:
    conn = approvals_db
    insert_approval(conn, "a-1", "s-1", "pending")
    insert_approval(conn, "a-2", "s-1", "rejected")
    with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
        conn.execute("UPDATE plan_approvals SET status = 'pending' WHERE id = 'a-2'")


@pytest.mark.parametrize("first_state", ["queued", "running"])
@pytest.mark.parametrize("second_state", ["queued", "running"])
def test_one_queued_or_running_execution_per_session(
    approvals_db: sqlite3.Connection, first_state: str, second_state: str
) -> None:
    conn = approvals_db
    insert_approval(
        conn,
        "a-1",
        "s-1",
        "approved",
        permission_mode="ask",
        execution_id="e-1",
        execution_state=first_state,
    )
    with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
        insert_approval(
            conn,
            "a-2",
            "s-1",
            "approved",
            permission_mode="auto",
            execution_id="e-2",
            execution_state=second_state,
        )
    count = conn.execute("SELECT count(*) FROM plan_approvals").fetchone()
    assert count == (1,)


def test_finished_executions_do_not_block_a_new_one(approvals_db: sqlite3.Connection) -> None:
    conn = approvals_db
    for index, state in enumerate(["completed", "interrupted", "completed"]):
        insert_approval(
            conn,
            f"a-{index}",
            "s-1",
            "approved",
            permission_mode="ask",
            execution_id=f"e-{index}",
            execution_state=state,
        )
    insert_approval(
        conn,
        "a-new",
        "s-1",
        "approved",
        permission_mode="accept-edits",
        execution_id="e-new",
        execution_state="queued",
    )
    insert_approval(
        conn,
        "b-1",
        "s-2",
        "approved",
        permission_mode="auto",
        execution_id="e-b",
        execution_state="running",
    )
    # Moving a finished one back to running would make two active executions in s-1.
    with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
        conn.execute("UPDATE plan_approvals SET execution_state = 'running' WHERE id = 'a-0'")
    active = conn.execute(
        "SELECT id FROM plan_approvals WHERE execution_state IN ('queued', 'running') ORDER BY id"
    ).fetchall()
    assert active == [("a-new",), ("b-1",)]


def test_a_pending_approval_and_an_active_execution_coexist_in_the_schema(
    approvals_db: sqlite3.Connection,
) -> None:
    # The two indexes are independent: each restricts only its own kind of row.
    conn = approvals_db
    insert_approval(
        conn,
        "a-1",
        "s-1",
        "approved",
        permission_mode="ask",
        execution_id="e-1",
        execution_state="running",
    )
    insert_approval(conn, "a-2", "s-1", "pending")
    assert conn.execute("SELECT count(*) FROM plan_approvals").fetchone() == (2,)


def test_a_turn_and_its_first_message_are_one_transaction(tmp_path: Path) -> None:
    """The prompt is stored with its turn; a turn that cannot be stored leaves no message."""
    prompt = {"role": "user", "content": "Where is the cache configured?"}

    async def body(storage: Storage) -> list[Any]:
        await storage.insert_session(session("s-1"))
        await storage.start_turn("turn-1", "s-1", "prompt", T0, prompt)
        with pytest.raises(sqlite3.IntegrityError):  # a second active turn of the session
            await storage.start_turn("turn-2", "s-1", "prompt", T0 + 1, {**prompt, "n": 2})
        await storage.end_turn("turn-1", "completed", T0 + 2)
        await storage.start_turn("turn-3", "s-1", "scheduled", T0 + 3)
        return await storage.transcript("s-1")

    entries = with_storage(tmp_path, body)
    assert [(turn, role, content, at) for _seq, turn, role, content, at in entries] == [
        ("turn-1", "user", prompt, T0)
    ]
