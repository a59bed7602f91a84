"""The storage contract checks: structure compared, not SQL text; the boot epoch found."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import pytest
from hosts.allowed.lifecycle import OTHER_SPELLING

from conformance.storage_contract import (
    changed_values,
    check_clauses,
    describe,
    differences,
    epoch_names,
    partial_where,
    published_v10,
    sql_tokens,
    stored_values,
)
from pi_contract import schemas_dir

V10 = (schemas_dir() / "storage" / "v10.sql").read_text(encoding="utf-8")


def _shape(script: str):  # type: ignore[no-untyped-def]
    with closing(sqlite3.connect(":memory:")) as conn:
        conn.executescript(script)
        return describe(conn)


def test_the_published_ddl_matches_itself() -> None:
    assert differences(published_v10(), _shape(V10)) == []


def test_the_same_structure_written_otherwise_matches() -> None:
    assert differences(published_v10(), _shape(OTHER_SPELLING)) == []


def test_tokens_ignore_case_quotes_whitespace_and_comments() -> None:
    one = sql_tokens("status IN ('a', 'B') -- note\n")
    other = sql_tokens("\"STATUS\"   in(\n/* c */ 'a','B')")
    assert one == other
    assert "'B'" in one  # literals keep their case


def test_checks_are_found_at_column_and_table_level() -> None:
    sql = "CREATE TABLE t (a TEXT CHECK (a <> ''), b INT, CONSTRAINT c CHECK ((b > 0)))"
    assert check_clauses(sql) == ["( b > 0 )", "a <> ''"]


def test_partial_where_is_normalised() -> None:
    assert partial_where("CREATE INDEX i ON t (a) WHERE s = 'x'") == "s = 'x'"
    assert partial_where("CREATE INDEX i ON t (a)") is None


@pytest.mark.parametrize(
    ("old", "new", "reported"),
    [
        ("title TEXT NOT NULL,", "title TEXT,", "column title TEXT NOT NULL is title TEXT"),
        (
            "permission_mode TEXT NOT NULL DEFAULT 'ask' CHECK (permission_mode IN "
            "('ask', 'accept-edits', 'auto')),\n  provider_base_url",
            "permission_mode TEXT NOT NULL DEFAULT 'auto' CHECK (permission_mode IN "
            "('ask', 'accept-edits', 'auto')),\n  provider_base_url",
            "DEFAULT 'auto'",
        ),
        ("WHERE status = 'pending'", "", "missing UNIQUE INDEX ON plan_approvals (session_id)"),
        ("WHERE state = 'active'", "WHERE state <> 'completed'", "extra UNIQUE INDEX ON turns"),
        ("execution_id TEXT UNIQUE,", "execution_id TEXT,", "missing UNIQUE INDEX"),
        ("'completed', 'interrupted'))", "'completed'))", "missing CHECK"),
        (
            "  turn_id TEXT,\n  title",
            "  turn_id TEXT,\n  boot_epoch TEXT,\n  title",
            "extra column",
        ),
        (
            "session_id TEXT NOT NULL REFERENCES sessions (id),\n  turn_id TEXT,\n  shell_id",
            "session_id TEXT NOT NULL,\n  turn_id TEXT,\n  shell_id",
            "missing foreign key",
        ),
        ("CREATE INDEX transcript_by_session ON transcript (session_id, id);", "", "missing INDEX"),
        ("id INTEGER PRIMARY KEY,", "id INTEGER,", "PRIMARY KEY"),
    ],
)
def test_a_structural_difference_is_reported(old: str, new: str, reported: str) -> None:
    assert old in V10, old
    found = differences(published_v10(), _shape(V10.replace(old, new, 1)))
    assert any(reported in line for line in found), found


def test_extra_tables_views_and_triggers_are_reported() -> None:
    script = V10 + "CREATE TABLE host_boots (epoch TEXT); CREATE VIEW v AS SELECT 1;"
    found = differences(published_v10(), _shape(script))
    assert "extra table host_boots" in found and "extra view v" in found


def test_epoch_names_are_found_in_tables_and_columns() -> None:
    shape = _shape("CREATE TABLE host_boots (at INT); CREATE TABLE t (process_epoch TEXT);")
    assert epoch_names(shape) == ["host_boots", "t.process_epoch"]


def test_changed_values_are_described_by_row_key() -> None:
    with closing(sqlite3.connect(":memory:")) as conn:
        conn.executescript(
            "CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT);"
            "INSERT INTO settings VALUES ('theme', 'dark'), ('instance', 'a1');"
            "CREATE TABLE log (line TEXT); INSERT INTO log VALUES ('x');"
        )
        before = stored_values(conn)
        conn.execute("UPDATE settings SET value = 'b2' WHERE key = 'instance'")
        conn.execute("INSERT INTO log VALUES ('y')")
        after = stored_values(conn)
    assert changed_values(before, before) == []
    changes = changed_values(before, after)
    assert "settings[key='instance'].value changed from 'a1' to 'b2'" in changes
    assert any(c.startswith("log: a row appeared") for c in changes), changes
