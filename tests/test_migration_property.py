"""Property tests of the v8 -> v10 storage migration (ADR 0053 §7) on generated v8 files.

Any v8 contents written with the published v8 DDL migrate to exactly the published v10
schema with every v8 row kept; v8 plan approvals survive as legacy rows. A v8 file the
migration cannot complete is left byte-identical and reported as MIGRATION_FAILED.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import tempfile
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformance.storage_seed import V8_TABLES, seed_v8
from pi_contract import schemas_dir
from reference_host.errors import HostError
from reference_host.storage import DB_FILE, Storage

SCHEMA_QUERY = (
    "SELECT type, name, tbl_name, sql FROM sqlite_schema "
    "WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name"
)
STATUS_V8_TO_V10 = {
    "pending": "interrupted",
    "changes_requested": "rejected",
    "approved": "approved",
    "rejected": "rejected",
}
MODES = ("agent", "plan")
PERMISSION_MODES = ("ask", "accept-edits", "auto")

# -- strategies -----------------------------------------------------------------------------

text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=40)
opt_text = st.none() | text
epoch_ms = st.integers(min_value=0, max_value=2**53)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(text, children, max_size=4),
    max_leaves=12,
)
json_text = st.builds(json.dumps, json_values) | st.builds(
    lambda value: json.dumps(value, ensure_ascii=False), json_values
)
proposals = (
    json_text  # valid JSON of any shape
    | st.builds(lambda title, value: json.dumps({"title": title, "body": value}), text, json_values)
    | text  # anything at all, mostly not JSON
    | st.sampled_from(["", "{", "[1,", '{"title": 5}', '{"title": null}', "null", "NaN"])
)


@st.composite
def v8_contents(draw: st.DrawFn) -> dict[str, list[tuple[Any, ...]]]:
    """Rows for every v8 table, in the published v8 column order."""
    session_ids = draw(st.lists(text, min_size=1, max_size=5, unique=True))
    sessions = [
        (
            session_id,
            draw(opt_text),
            draw(st.sampled_from(MODES)),
            draw(st.sampled_from(PERMISSION_MODES)),
            draw(opt_text),
            draw(opt_text),
            draw(epoch_ms),
            draw(epoch_ms),
        )
        for session_id in session_ids
    ]
    transcript = [
        (
            row_id,
            draw(st.sampled_from(session_ids)),
            draw(opt_text),
            draw(st.sampled_from(["user", "assistant", "tool", "system"])),
            draw(json_text),
            draw(epoch_ms),
        )
        for row_id in draw(
            st.lists(st.integers(min_value=1, max_value=2**62), max_size=12, unique=True)
        )
    ]
    settings_rows = list(draw(st.dictionaries(text, text, max_size=5)).items())
    scheduled = [
        (
            task_id,
            draw(text),
            draw(text),
            draw(st.sampled_from(MODES)),
            draw(opt_text),
            draw(opt_text),
            draw(opt_text),
            draw(st.sampled_from(PERMISSION_MODES)),
            draw(st.none() | epoch_ms),
            draw(st.sampled_from([0, 1])),
            draw(epoch_ms),
            draw(epoch_ms),
        )
        for task_id in draw(st.lists(text, max_size=3, unique=True))
    ]
    # Each v8 status at least once, so every branch of the status mapping is exercised.
    statuses = list(STATUS_V8_TO_V10) + draw(
        st.lists(st.sampled_from(list(STATUS_V8_TO_V10)), max_size=4)
    )
    approval_ids = draw(st.lists(text, min_size=len(statuses), max_size=len(statuses), unique=True))
    approvals = [
        (
            approval_id,
            draw(st.sampled_from(session_ids)),
            draw(proposals),
            status,
            draw(opt_text),
            draw(epoch_ms),
            draw(st.none() | epoch_ms),
        )
        for approval_id, status in zip(approval_ids, statuses, strict=True)
    ]
    return {
        "sessions": sessions,
        "transcript": transcript,
        "settings": settings_rows,
        "scheduled_tasks": scheduled,
        "plan_approvals": approvals,
    }


# -- helpers --------------------------------------------------------------------------------


def v8_ddl() -> str:
    return (schemas_dir() / "storage" / "v8.sql").read_text(encoding="utf-8")


def v10_schema() -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(":memory:")) as conn:
        conn.executescript((schemas_dir() / "storage" / "v10.sql").read_text(encoding="utf-8"))
        return conn.execute(SCHEMA_QUERY).fetchall()


V10_SCHEMA = v10_schema()


def write_v8(path: Path, contents: dict[str, list[tuple[Any, ...]]]) -> None:
    with closing(sqlite3.connect(path)) as conn:
        conn.executescript(v8_ddl())
        with conn:
            for table, rows in contents.items():
                for row in rows:
                    marks = ", ".join("?" for _ in row)
                    conn.execute(f"INSERT INTO {table} VALUES ({marks})", row)


def columns_of(conn: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]


def rows_of(conn: sqlite3.Connection, table: str, columns: list[str]) -> list[tuple[Any, ...]]:
    return conn.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY 1").fetchall()


def open_and_close(data_dir: Path) -> None:
    async def run() -> None:
        storage = await Storage.open(data_dir)
        await storage.close()

    asyncio.run(run())


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- properties -----------------------------------------------------------------------------


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contents=v8_contents())
def test_any_v8_contents_migrate_to_v10_with_every_row_kept(
    contents: dict[str, list[tuple[Any, ...]]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp)
        db = data_dir / DB_FILE
        write_v8(db, contents)
        with closing(sqlite3.connect(db)) as conn:
            assert conn.execute("PRAGMA user_version").fetchone()[0] == 8
            v8_columns = {table: columns_of(conn, table) for table in contents}
            before = {table: rows_of(conn, table, cols) for table, cols in v8_columns.items()}

        open_and_close(data_dir)

        with closing(sqlite3.connect(db)) as conn:
            assert conn.execute("PRAGMA user_version").fetchone()[0] == 10
            assert conn.execute(SCHEMA_QUERY).fetchall() == V10_SCHEMA
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
            for table in V8_TABLES:
                assert rows_of(conn, table, v8_columns[table]) == before[table], table
            assert conn.execute("SELECT shell_id FROM sessions").fetchall() == [
                (None,) for _ in before["sessions"]
            ]
            migrated = {
                row[0]: row[1:]
                for row in conn.execute(
                    "SELECT id, session_id, status, legacy_proposal_json, created_at, "
                    "artifact_path, execution_id FROM plan_approvals"
                )
            }
        old = before["plan_approvals"]
        assert set(migrated) == {row[0] for row in old}
        for approval_id, session_id, proposal, status, feedback, created_at, _ in old:
            new_session, new_status, legacy, new_created, artifact, execution = migrated[
                approval_id
            ]
            assert (new_session, new_created) == (session_id, created_at)
            assert new_status == STATUS_V8_TO_V10[status]
            assert (artifact, execution) == (None, None)
            recovered = json.loads(legacy)
            assert recovered == {"proposal": proposal, "feedback": feedback}


CONFLICTS = {
    "table turns": "CREATE TABLE turns (x)",
    "index turns_one_active": "CREATE INDEX turns_one_active ON settings (value)",
    "view command_audit": "CREATE VIEW command_audit AS SELECT * FROM settings",
    "table plan_approvals_v10": "CREATE TABLE plan_approvals_v10 (id TEXT)",
    "index scheduled_task_runs_by_task": (
        "CREATE INDEX scheduled_task_runs_by_task ON scheduled_tasks (name)"
    ),
}


@pytest.mark.parametrize("ddl", CONFLICTS.values(), ids=CONFLICTS.keys())
def test_conflicting_object_fails_the_migration_and_leaves_the_file_untouched(
    ddl: str, tmp_path: Path
) -> None:
    db = tmp_path / DB_FILE
    seed_v8(db, sessions=3, transcript_per_session=20)
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(ddl)
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 8
    digest = sha256(db)

    with pytest.raises(HostError) as raised:
        open_and_close(tmp_path)

    assert raised.value.code == "MIGRATION_FAILED"
    assert sha256(db) == digest, "a failed migration changed the file"
    assert not (tmp_path / f"{DB_FILE}-journal").exists()
    assert not (tmp_path / f"{DB_FILE}-wal").exists()
    with closing(sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 8
