"""Steps about the storage v8 -> v10 migration and unsupported schema versions (§7)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from pytest_bdd import given, parsers, then, when

from conformance.client import HostStoppedError
from conformance.storage_inspector import DB_FILE
from conformance.storage_seed import V8_TABLES, file_digest, seed_v8, table_rows
from conformance.world import World


def _db(world: World) -> Path:
    return world.data_dir / DB_FILE


@given(
    parsers.parse(
        "a data directory with a v8 database of {sessions:d} sessions and their transcripts"
    )
)
def v8_database(world: World, sessions: int) -> None:
    seed_v8(_db(world), sessions, 40)
    world.seeded.tables = {table: table_rows(_db(world), table) for table in V8_TABLES}
    world.seeded.digest = file_digest(_db(world))


@given(parsers.parse('the v8 database already holds a table named "{name}"'))
def conflicting_table(world: World, name: str) -> None:
    with closing(sqlite3.connect(_db(world))) as conn:
        conn.execute(f"CREATE TABLE {name} (unrelated TEXT)")
        conn.commit()
    world.seeded.tables = {table: table_rows(_db(world), table) for table in V8_TABLES}
    world.seeded.digest = file_digest(_db(world))


@given(parsers.parse("a data directory with a database at schema version {version:d}"))
def other_version(world: World, version: int) -> None:
    _db(world).parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(_db(world))) as conn:
        conn.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY)")
        conn.execute("INSERT INTO sessions VALUES ('kept')")
        conn.execute(f"PRAGMA user_version = {version}")
        conn.commit()
    world.seeded.digest = file_digest(_db(world))


@when("the host starts on that data directory")
def host_starts(world: World) -> None:
    world.start_host()
    try:
        world.handshake = world.rpc.initialize()
        world.seeded.refusal = None
    except HostStoppedError as stopped:
        world.seeded.refusal = str(stopped)


@then(parsers.parse("the host refuses to start with {code}"))
def refuses(world: World, code: str) -> None:
    assert world.seeded.refusal is not None, "the host served requests"
    said = [m for m in world.rpc.unmatched if "error" in m]
    status = world.stop_host()
    assert status not in (0, None), f"the host exited with status {status}"
    codes = [m["error"].get("data", {}).get("code") for m in said]
    assert code in codes or code in world.stderr(), (
        f"the host did not report {code}: stdout errors {codes}, stderr {world.stderr()[-500:]!r}"
    )


@then("the database file is exactly as it was")
def file_unchanged(world: World) -> None:
    assert file_digest(_db(world)) == world.seeded.digest, "the database file changed"


@then(parsers.parse("the database is at schema version {version:d}"))
def at_version(world: World, version: int) -> None:
    found = world.storage().user_version()
    assert found == version, f"PRAGMA user_version is {found}"


@then("the sessions, transcript, settings and scheduled tasks survived exactly")
def survived(world: World) -> None:
    for table, before in world.seeded.tables.items():
        columns = len(before[0]) if before else 0
        after = [row[:columns] for row in table_rows(_db(world), table)]
        assert after == before, (
            f"{table} changed in the migration ({len(before)} -> {len(after)} rows)"
        )


@then("the earlier plan approvals are kept, a pending one as interrupted")
def legacy_approvals(world: World) -> None:
    rows = {r["id"]: r for r in world.storage().rows("plan_approvals")}
    assert set(rows) == {"old-pending", "old-changes"}, f"plan_approvals holds {sorted(rows)}"
    assert rows["old-pending"]["status"] == "interrupted", rows["old-pending"]
    assert rows["old-changes"]["status"] == "rejected", rows["old-changes"]
    assert rows["old-pending"]["execution_id"] is None, rows["old-pending"]


@then("the migrated sessions can be read through the protocol")
def sessions_readable(world: World) -> None:
    sessions = world.rpc.request("session/list", {})["sessions"]
    ids = {s["sessionId"] for s in sessions}
    expected = {row[0] for row in world.seeded.tables["sessions"]}
    assert expected <= ids, f"missing sessions {expected - ids}"
