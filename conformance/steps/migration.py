"""Steps about the storage v8 -> v10 migration, schema versions the host does not know,
and refusing to start (§7, project rules P16 and P18)."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Any

from pytest_bdd import given, parsers, then, when

from conformance.blame import verifies
from conformance.client import HostStoppedError
from conformance.messages import message_text
from conformance.mock_provider import TextReply
from conformance.steps.requests import granted, mock_provider, plain
from conformance.steps.restart import prompt_and_wait
from conformance.steps.sessions import session_id, transcript_entries
from conformance.steps.tasks import DUE_IN_MS, TASK_PROMPT, task_ran_at_its_time
from conformance.storage_inspector import DB_FILE
from conformance.storage_seed import (
    LEGACY_APPROVALS,
    LEGACY_DEADLINE_MS,
    V8_STATUS_TO_V10,
    V8_TABLES,
    V8Approval,
    file_digest,
    seed_other_version,
    seed_v8,
    seed_v10,
    table_rows,
)
from conformance.world import World, need

V8_TASK_ID = "v8-changelog"  # the task due soon in the v8 database of the project
VERSION_BY_AGE = {
    "older than v8": 7,
    "between v8 and v10": 9,
    "newer than v10": 11,
    "left by another program": 0,  # no schema version, yet tables and rows
}


def _db(world: World) -> Path:
    return world.data_dir / DB_FILE


def _tree(path: Path) -> dict[str, str]:
    """What ``path`` holds: each entry's digest, link target or 'dir'; a file's own digest."""
    if path.is_symlink():
        return {".": f"link:{path.readlink()}"}
    if path.is_file():
        return {".": hashlib.sha256(path.read_bytes()).hexdigest()}
    found: dict[str, str] = {}
    for entry in sorted(path.rglob("*")) if path.exists() else []:
        name = entry.relative_to(path).as_posix()
        if entry.is_symlink():
            found[name] = f"link:{entry.readlink()}"
        elif entry.is_dir():
            found[name] = "dir"
        else:
            found[name] = hashlib.sha256(entry.read_bytes()).hexdigest()
    return found


def _remember(world: World) -> None:
    """Record the seeded data dir (and anything it links to) as it is before the start."""
    world.seeded.files = _tree(world.data_dir)
    elsewhere = world.data_dir.parent / "elsewhere"
    if elsewhere.exists():
        world.seeded.files.update({f"elsewhere/{k}": v for k, v in _tree(elsewhere).items()})
    db = _db(world)
    if db.is_file() and not db.is_symlink() and db.read_bytes()[:16] == b"SQLite format 3\0":
        world.seeded.digest = file_digest(_db(world))
        world.seeded.tables = {
            table: table_rows(_db(world), table) for table in V8_TABLES if _has_table(world, table)
        }


def _has_table(world: World, table: str) -> bool:
    with closing(sqlite3.connect(_db(world))) as conn:
        found = conn.execute(
            "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?", (table,)
        ).fetchone()
    return found is not None


# -- arranging the data dir ----------------------------------------------------------------


@given(
    parsers.parse(
        "a data directory with a v8 database of {sessions:d} sessions and their transcripts"
    )
)
def v8_database(world: World, sessions: int) -> None:
    seed_v8(_db(world), sessions, 40)
    with closing(sqlite3.connect(_db(world))) as conn:
        world.seeded.approvals = conn.execute("SELECT * FROM plan_approvals").fetchall()
    _remember(world)


@given(parsers.parse("a data directory with a v8 database holding an approval that was {status}"))
def v8_with_approval(world: World, status: str) -> None:
    seed_v8(_db(world), 2, 6, (LEGACY_APPROVALS[status],))
    _remember(world)


@given("a data directory with a v8 database of a conversation and a task for the project")
def v8_database_for_project(world: World) -> None:
    """One v8 session and one enabled Agent task, both of the scenario's project and on its
    mock provider; the task is due a few minutes after the host starts (its clock starts at
    the system time, P32)."""
    seed_v8(_db(world), 1, 8)
    provider = mock_provider(world)
    root, due = str(world.workspace), time.time_ns() // 1_000_000 + DUE_IN_MS
    with closing(sqlite3.connect(_db(world))) as conn:
        conn.execute(
            "UPDATE sessions SET workspace_root = ?, provider_base_url = ?, model = ?",
            (root, provider.baseUrl, provider.model),
        )
        conn.execute(
            "INSERT INTO scheduled_tasks VALUES (?, 'Changelog', ?, 'agent', ?, ?, ?, 'auto', "
            "?, 1, 1, 2)",
            (V8_TASK_ID, TASK_PROMPT, root, provider.baseUrl, provider.model, due),
        )
        conn.commit()
    world.tasks.task = {"taskId": V8_TASK_ID, "runAt": due}
    _remember(world)


@given(parsers.parse('the v8 database already holds a table named "{name}"'))
def conflicting_table(world: World, name: str) -> None:
    with closing(sqlite3.connect(_db(world))) as conn:
        conn.execute(f"CREATE TABLE {name} (unrelated TEXT)")
        conn.commit()
    _remember(world)


@given(parsers.parse("a data directory with a database {age}"))
def other_version(world: World, age: str) -> None:
    seed_other_version(_db(world), VERSION_BY_AGE[age])
    _remember(world)


@given(parsers.parse("a data directory whose database is {what}"))
def unusable_database(world: World, what: str) -> None:
    world.data_dir.mkdir(parents=True, exist_ok=True)
    db = _db(world)
    if what == "a folder":
        db.mkdir()
        (db / "notes.txt").write_text("a folder, not a database\n", encoding="utf-8")
    elif what == "a text file":
        db.write_text("this is not a SQLite database\n", encoding="utf-8")
    elif what == "a link to a database elsewhere":
        elsewhere = world.data_dir.parent / "elsewhere"
        seed_v10(elsewhere / DB_FILE)
        db.symlink_to(elsewhere / DB_FILE)
    else:
        raise AssertionError(f"no unusable database is arranged as {what!r}")
    _remember(world)


@given("a data directory that is a file")
def data_dir_is_file(world: World) -> None:
    if world.data_dir.is_dir():
        shutil.rmtree(world.data_dir)
    world.data_dir.parent.mkdir(parents=True, exist_ok=True)
    world.data_dir.write_text("a file where the data directory should be\n", encoding="utf-8")
    _remember(world)


# -- starting the host ----------------------------------------------------------------------


@when("the host starts on that data directory")
def host_starts(world: World) -> None:
    world.start_host(create_data_dir=False)  # the scenario arranged the data dir
    try:
        world.handshake = world.rpc.initialize()
        world.seeded.refusal = None
    except HostStoppedError as stopped:
        world.seeded.refusal = str(stopped)


def _refusal_lines(world: World) -> list[Any]:
    """Every JSON value the refusing host wrote."""
    return list(world.rpc.received)


@then(parsers.parse("the host refuses to start with {code}"))
@verifies("R7.4", "R7.8", "P18")
def refuses(world: World, code: str) -> None:
    assert world.seeded.refusal is not None, "the host served requests"
    errors = [m for m in _refusal_lines(world) if isinstance(m, dict) and "error" in m]
    codes = [(m["error"].get("data") or {}).get("code") for m in errors]
    assert code in codes, f"the host reported {codes or 'nothing'} on stdout, not {code}"


@then("the host said so in one error line and exited with a failure status")
@verifies("P18")
def refusal_line(world: World) -> None:
    lines = _refusal_lines(world)
    assert len(lines) == 1, f"the refusing host wrote {len(lines)} lines: {lines[:3]}"
    line = lines[0]
    assert isinstance(line, dict) and "error" in line, f"the line is not an error: {line}"
    assert line.get("id", "absent") is None, f"the error line carries id {line.get('id')!r}"
    status = world.stop_host()
    assert status not in (0, None), f"the refusing host exited with status {status}"


@then("the data directory is exactly as it was")
@verifies("R7.8", "P18")
def data_dir_unchanged(world: World) -> None:
    world.stop_host()
    now = _tree(world.data_dir)
    elsewhere = world.data_dir.parent / "elsewhere"
    if elsewhere.exists():
        now.update({f"elsewhere/{k}": v for k, v in _tree(elsewhere).items()})
    before = world.seeded.files
    changed = sorted(k for k in set(now) | set(before) if now.get(k) != before.get(k))
    assert not changed, f"the host changed the data directory: {changed}"


@then(parsers.parse("the database is at schema version {version:d}"))
@verifies("R7.4", "R7.9")
def at_version(world: World, version: int) -> None:
    found = world.storage().user_version()
    assert found == version, f"PRAGMA user_version is {found}"
    if world.handshake is not None:
        reported = world.handshake["storageSchemaVersion"]
        assert reported == version, f"the host reports storage schema version {reported}"


# -- the data that came through ---------------------------------------------------------------


@then("the sessions, transcript, settings and scheduled tasks survived exactly")
@verifies("R7.7")
def survived(world: World) -> None:
    for table, before in world.seeded.tables.items():
        after = table_rows(_db(world), table, _V8_COLUMNS[table])
        if table == "settings":
            # a host may add rows under keys of its own; every seeded key keeps its value
            seeded_keys = {row[0] for row in before}
            after = [row for row in after if row[0] in seeded_keys]
        assert after == before, (
            f"{table} changed in the migration ({len(before)} -> {len(after)} rows; first "
            f"difference {_first_difference(before, after)})"
        )


_V8_COLUMNS = {
    "sessions": [
        "id", "workspace_root", "mode", "permission_mode", "provider_base_url", "model",
        "created_at", "updated_at",
    ],
    "transcript": ["id", "session_id", "turn_id", "role", "content", "created_at"],
    "settings": ["key", "value"],
    "scheduled_tasks": [
        "id", "name", "prompt", "mode", "workspace_root", "provider_base_url", "model",
        "permission_mode", "run_at", "enabled", "created_at", "updated_at",
    ],
}  # fmt: skip


def _first_difference(before: list[Any], after: list[Any]) -> str:
    for old, new in zip(before, after, strict=False):
        if old != new:
            return f"{old} became {new}"
    return "a row was added or removed"


@then("the migrated sessions and their transcripts can be read through the protocol")
@verifies("R7.7")
def sessions_readable(world: World) -> None:
    sessions = {s.sessionId: plain(s) for s in granted(world.rpc.list_sessions).sessions}
    transcript = world.seeded.tables["transcript"]
    for row in world.seeded.tables["sessions"]:
        session_id, root, mode, permission, base_url, model, created, _updated = row
        found = sessions.get(session_id)
        assert found is not None, f"the migrated session {session_id} is not listed"
        fields = ("workspaceRoot", "mode", "permissionMode", "provider", "createdAt")
        shown = {k: found[k] for k in fields}
        expected = {
            "workspaceRoot": root,
            "mode": mode,
            "permissionMode": permission,
            "provider": {"baseUrl": base_url, "model": model},
            "createdAt": created,
        }
        assert shown == expected, f"the migrated session {session_id} reads {shown}"
        entries = transcript_entries(world, session_id)
        read = [(e.turnId, e.role, e.content, e.createdAt) for e in entries]
        stored = [
            (turn, role, json.loads(content), at)
            for _id, owner, turn, role, content, at in transcript
            if owner == session_id
        ]
        assert read == stored, f"the transcript of {session_id} reads differently: {read[:2]}"


# -- legacy approvals (P16) ---------------------------------------------------------------------


def _seeded_legacy(world: World) -> V8Approval:
    rows = world.storage().rows("plan_approvals")
    ids = {a.id: a for a in LEGACY_APPROVALS.values()}
    found = [ids[r["id"]] for r in rows if r["id"] in ids]
    assert found, f"the seeded v8 approval is not in plan_approvals: {[r['id'] for r in rows]}"
    return found[0]


def _listed(world: World, approval: V8Approval) -> dict[str, Any]:
    session = f"v8-session-{approval.session % 2}"
    listed = granted(world.rpc.list_approvals, session).approvals
    matching = [plain(a) for a in listed if a.approvalId == approval.id]
    assert matching, f"approval/list of {session} does not list the v8 approval {approval.id}"
    got = plain(granted(world.rpc.get_approval, session, approval.id).approval)
    assert got == matching[0], f"approval/get and approval/list disagree: {got} vs {matching[0]}"
    return matching[0]


@then(parsers.parse("the host lists that approval as {status}, with no turn and no artifact"))
@verifies("P16")
def legacy_listed(world: World, status: str) -> None:
    approval = _seeded_legacy(world)
    shown = _listed(world, approval)
    assert shown["status"] == status == V8_STATUS_TO_V10[approval.status], (
        f"the v8 approval that was {approval.status} is listed as {shown['status']}"
    )
    assert shown["turnId"] is None and shown["artifact"] is None, (
        f"the legacy approval is listed with turn {shown['turnId']!r} and artifact "
        f"{shown['artifact']!r}"
    )
    expected = {
        "createdAt": approval.created_at,
        "expiresAt": approval.created_at + LEGACY_DEADLINE_MS,
        "decidedAt": None if approval.status == "pending" else approval.decided_at,
        "permissionMode": None,
        "executionId": None,
        "executionState": None,
    }
    shown_times = {k: shown[k] for k in expected}
    assert shown_times == expected, f"the legacy approval reads {shown_times}"


@then("its title comes from the v8 proposal and its question is empty")
@verifies("P16")
def legacy_title(world: World) -> None:
    approval = _seeded_legacy(world)
    shown = _listed(world, approval)
    assert (shown["title"], shown["question"]) == (approval.legacy_title, ""), (
        f"the legacy approval reads title {shown['title']!r} and question {shown['question']!r}"
        f" from the proposal {approval.proposal_json!r}"
    )


@then("its stored record keeps the v8 proposal and its feedback")
@verifies("P16")
def legacy_stored(world: World) -> None:
    approval = _seeded_legacy(world)
    row = world.storage().rows("plan_approvals", "id = ?", (approval.id,))[0]
    kept = json.loads(need(row["legacy_proposal_json"], "legacy_proposal_json"))
    assert kept == {"proposal": approval.proposal_json, "feedback": approval.feedback}, (
        f"legacy_proposal_json holds {kept}, not the v8 proposal and its feedback"
    )
    assert row["status"] == V8_STATUS_TO_V10[approval.status], row
    assert (row["title"], row["question"]) == (approval.legacy_title, ""), row
    nulls = ("turn_id", "artifact_path", "artifact_sha256", "artifact_bytes", "execution_id")
    assert all(row[c] is None for c in nulls), row


@then("the earlier plan approvals are kept, a pending one as interrupted")
@verifies("R4.10", "P16")
def legacy_approvals(world: World) -> None:
    rows = {r["id"]: r for r in world.storage().rows("plan_approvals")}
    seeded = {row[0]: row[3] for row in world.seeded.approvals}
    assert set(rows) == set(seeded), f"plan_approvals holds {sorted(rows)}, seeded {seeded}"
    for approval_id, v8_status in seeded.items():
        found = rows[approval_id]["status"]
        assert found == V8_STATUS_TO_V10[v8_status], f"{approval_id} was {v8_status}, is {found}"


@then("the host lists them oldest first")
@verifies("R7.2")
def legacy_oldest_first(world: World) -> None:
    for session in sorted({row[1] for row in world.seeded.approvals}):
        listed = [plain(a) for a in granted(world.rpc.list_approvals, session).approvals]
        shown = [(a["approvalId"], a["createdAt"]) for a in listed]
        seeded = {row[0] for row in world.seeded.approvals if row[1] == session}
        assert {approval_id for approval_id, _ in shown} == seeded, (
            f"approval/list of {session} lists {shown}, not the v8 approvals {sorted(seeded)}"
        )
        times = [created for _, created in shown]
        assert times == sorted(times), (
            f"approval/list of {session} lists the migrated approvals as {shown}: approvals "
            "are listed oldest first by createdAt, legacy ones too, whatever order the v8 "
            "rows were written in"
        )


# -- a migrated conversation and task go on (R7.7) ----------------------------------------------


@when("the user continues the migrated conversation")
def continue_migrated(world: World) -> None:
    migrated = world.seeded.tables["sessions"][0][0]
    world.sessions["main"] = plain(granted(world.rpc.get_session, migrated).session)
    world.provider.enqueue(TextReply("We stopped at the last message."))
    ended = prompt_and_wait(world, "Where did we leave off?")
    assert ended["outcome"] == "completed", f"the migrated session's turn ended {ended}"


@then("the model was shown the migrated conversation")
@verifies("R7.7", "R1.3")
def shown_migrated(world: World) -> None:
    requests = world.provider.requests()[world.cursors.provider_turn :]
    assert requests, "the host made no request to the model provider"
    shown = [message_text(m) for m in requests[0].messages]
    said = [
        message_text(json.loads(content))  # text, or an array of text parts
        for _id, owner, _turn, role, content, _at in world.seeded.tables["transcript"]
        if owner == session_id(world) and role in ("user", "assistant")
    ]
    missing = [text for text in said if not any(text in message for message in shown)]
    assert not missing, (
        f"the first request of the migrated session's next turn lacks {len(missing)} of the "
        f"{len(said)} user and assistant messages of its v8 transcript (first {missing[0]!r}): "
        "a migrated session's transcript is its conversation"
    )


@then("the migrated task ran when its time came")
@verifies("P29", "R7.7")
def migrated_task_ran(world: World) -> None:
    tasks = {t.taskId: plain(t) for t in granted(world.rpc.list_tasks).tasks}
    task = tasks.get(V8_TASK_ID)
    assert task is not None, f"task/list does not list the v8 task {V8_TASK_ID}: {sorted(tasks)}"
    assert task["lastRun"] is not None, (
        f"the v8 task {V8_TASK_ID}, switched on and due at {task['runAt']}, had not run when "
        "the host clock passed its time (lastRun is null): a task migrated from v8 keeps its "
        "time from the start that migrated it"
    )
    task_ran_at_its_time(world)
