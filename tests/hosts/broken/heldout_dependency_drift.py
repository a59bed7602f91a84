"""Broken hosts: a held-out set (dependency and runtime drift), written from the contract
alone. Each host was right until a library, a runtime or a default changed under it, or
was written against another version's behaviour."""

from __future__ import annotations

import base64
import json
import math
import os
import stat
import weakref
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

from hosts.registry import BrokenCase, patch, variant


# R3.2 (implementing-a-host.md, Approval §3): `artifact/read` returns the bytes "as
# `contentBase64` in the standard base64 of RFC 4648 (padded, no line breaks)".
# Bug: the artifact bytes are encoded with the URL-safe helper (`urlsafe_b64encode`, the
# one the project's id and URL code uses): `-` and `_` where the standard alphabet has
# `+` and `/`. A client decoding with the standard alphabet gets other bytes or an error.
# Recipe: submit a plan whose markdown encodes to `+` or `/` (e.g. "??>>" or "~~~ ÿ"),
# then `artifact/read`; decode `contentBase64` with strict standard base64 and compare it
# with the file's bytes (or look for `-`/`_` in it).
@variant("drift-artifact-base64-urlsafe")
def artifact_base64_urlsafe() -> None:
    from reference_host.approvals import Approvals
    from reference_host.storage import ApprovalRow

    async def read_artifact(self: Approvals, row: ApprovalRow) -> dict[str, Any]:
        session = await self.host.require_session(row.session_id)
        content = await self.verified_content(session, row)
        return {
            "approvalId": row.id,
            "path": row.artifact_path,
            "contentBase64": base64.urlsafe_b64encode(content).decode("ascii"),
            "sha256": row.artifact_sha256,
            "byteSize": row.artifact_bytes,
        }

    patch(Approvals, "read_artifact", read_artifact)


# P5 / P18 (Framing; Storage "Refusing to start"): every line sent is "one compact JSON
# object" (no whitespace between tokens), and a host that cannot serve writes "exactly
# one line to stdout, a JSON-RPC error with "id": null".
# Bug: the start-up refusal is written before the protocol writer exists, with the plain
# `json.dumps` defaults, whose separators are ", " and ": ": the refusal line is not
# compact (every other line is).
# Recipe: start a host on a data directory another host holds (DATA_DIR_IN_USE), or on a
# `host.db` at user_version 7 (STORAGE_SCHEMA_UNSUPPORTED); the one stdout line reads
# `{"jsonrpc": "2.0", "id": null, ...}` with blanks between tokens.
@variant("drift-refusal-line-not-compact")
def refusal_line_not_compact() -> None:
    import contextlib
    import logging

    from reference_host import server
    from reference_host.errors import HostError

    def refuse(error: HostError, stdout: BinaryIO) -> int:
        logging.getLogger("reference_host").error("not serving: %s: %s", error.code, error.message)
        with contextlib.suppress(OSError, ValueError):
            line = json.dumps(server._startup_error(error), ensure_ascii=False)
            stdout.write(line.encode("utf-8") + b"\n")
            stdout.flush()
        return server.EXIT_STORAGE

    patch(server, "_refuse", refuse)


# Framing ("Timestamps are integers: milliseconds since the Unix epoch"), R3.9, R4.3.
# Bug: the 30-minute deadline is written as `30 * 60 * 1e3` (a float literal), so the
# approval created by SubmitPlan carries `expiresAt` as a float: the `approval/updated`
# that announces it says `"expiresAt":1765...000.0`. SQLite's INTEGER affinity turns the
# stored value back into an integer, so `approval/get`, `approval/list` and the row read
# as integers; only the announcement (and anything built from the fresh row) is a float.
# Recipe: a Plan turn that submits a plan; read the text of the `approval/updated` with
# status pending: `expiresAt` is written with a fraction (`.0`), not as an integer.
@variant("drift-expires-at-float")
def expires_at_float() -> None:
    from reference_host import state

    patch(state, "APPROVAL_TTL_MS", 30 * 60 * 1e3)


# R4.4 / P32 (Approval §3 "Decisions are recorded"; Conformance mode): "`decidedAt` is
# the host clock at the moment of the approve or reject", and every reported timestamp is
# read from the host clock.
# Bug: reject stamps `decidedAt` with `datetime.now()` (the system clock), as the helper
# it was ported from did; approve uses the host clock. Under --conformance the host clock
# stands still and is moved by the harness, so a rejected approval's `decidedAt` is the
# wall time, not the host clock.
# Recipe: submit a plan, `conformance/clock/advance` by 10 minutes, `approval/reject`;
# `decidedAt` (answer, `approval/updated`, row) differs from `conformance/clock/get`.
@variant("drift-reject-decided-wall-clock")
def reject_decided_wall_clock() -> None:
    from dataclasses import replace

    from reference_host import approvals as approvals_module
    from reference_host import state
    from reference_host.approvals import Approvals, approval_wire

    async def reject(self: Approvals, session_id: str, approval_id: str) -> dict[str, Any]:
        host = self.host
        row = await self.require(session_id, approval_id)
        await host.turns.settle(session_id, row.turn_id)
        await self._ensure_decidable(row)
        decided = int(datetime.now().timestamp() * 1000)
        facts = state.reject(approvals_module._facts(row))
        rejected = replace(approvals_module._with(row, facts), decided_at=decided)
        await host.storage.update_approval(rejected)
        host.set_activity(session_id, pending_approval_id=None)
        host.notify("approval/updated", {"approval": approval_wire(rejected)})
        await host.publish_session(session_id)
        return {"approval": approval_wire(rejected)}

    patch(Approvals, "reject", reject)


# P16 (Migrating from v8): a legacy approval's "`expiresAt` is `createdAt` plus 30
# minutes" (schemas/storage/v8.sql: "expires_at is created_at + 30 minutes").
# Bug: the migration adds 1800 to created_at: thirty minutes in seconds, as the v8 code's
# own TTL constant was, while v8 and v10 times are milliseconds. Every migrated approval
# reads `expiresAt = createdAt + 1800`.
# Recipe: seed a v8 file with a plan_approvals row, start the host, `approval/list` (or
# read plan_approvals.expires_at): expiresAt - createdAt is 1800, not 1800000.
@variant("drift-legacy-expiry-seconds")
def legacy_expiry_seconds() -> None:
    from reference_host import migration

    copy = migration._COPY_LEGACY_APPROVALS.replace("created_at + 1800000", "created_at + 1800")
    assert copy != migration._COPY_LEGACY_APPROVALS
    patch(migration, "_COPY_LEGACY_APPROVALS", copy)


# P29 (Scheduled tasks "A task as given"): "Whatever updates a task had, ... its
# `createdAt` stays the time it was created", and task/list and the scheduled_tasks row
# report the same values as the answer.
# Bug: task/update writes the task back with an UPSERT of the whole row (`INSERT OR
# REPLACE`), built the way task/create builds one, which stamps created_at with the time
# of the write. The answer is the merged row in memory (the old createdAt), but task/list
# and the row show the time of the update.
# Recipe: task/create at T0, conformance/clock/advance 60000, task/update {name}; compare
# the task's createdAt in task/list (and scheduled_tasks.created_at) with task/create's.
@variant("drift-task-upsert-createdat")
def task_upsert_createdat() -> None:
    from reference_host.storage import Storage

    async def update_task(self: Storage, task_id: str, changes: dict[str, Any]) -> None:
        row = await self.get_task(task_id)
        if row is None:
            return
        merged = {**row, **changes}
        merged["created_at"] = merged["updated_at"]  # the row is saved as a new one
        columns = ", ".join(merged)
        marks = ", ".join("?" for _ in merged)
        async with self.transaction() as conn:
            await conn.execute(
                f"INSERT OR REPLACE INTO scheduled_tasks ({columns}) VALUES ({marks})",
                tuple(merged.values()),
            )

    patch(Storage, "update_task", update_task)


# R1.3 / R7.7 (Migrating from v8; Planning `new_context`): `session/transcript` "reports
# each row, in `id` order"; the transcript table and session/transcript "hold the whole
# conversation, every row in `id` order".
# Bug: the transcript is read `ORDER BY created_at` (time was assumed to grow with id).
# Rows of one instant keep their id order, so nothing shows while the clock only moves
# forward; once it is set back (conformance/clock/set), or for v8 rows whose times do not
# follow their ids, the entries come out of id order (and so do the messages sent to the
# model, which are read the same way).
# Recipe: prompt a turn at T, `conformance/clock/set` to T - 1 hour, prompt another turn;
# session/transcript lists the second turn's rows before the first's (seq not increasing).
@variant("drift-transcript-order-by-time")
def transcript_order_by_time() -> None:
    from reference_host.storage import Storage

    async def transcript(
        self: Storage, session_id: str
    ) -> list[tuple[int, str | None, str, Any, int]]:
        async with self._conn.execute(
            "SELECT id, turn_id, role, content, created_at FROM transcript "
            "WHERE session_id = ? ORDER BY created_at",
            (session_id,),
        ) as cursor:
            rows = await cursor.fetchall()
        return [(r[0], r[1], r[2], json.loads(r[3]), r[4]) for r in rows]

    patch(Storage, "transcript", transcript)


# P10 (Planning "The tools work", Grep): "Only LF ends a line (a CR just before it is not
# part of the line) ...; a lone CR, U+2028, U+0085 or a form feed is a character inside a
# line", and `^`/`$` anchor at every line's start and end.
# Bug: Grep splits a file's text with `str.splitlines()`, which also ends lines at a lone
# CR, form feed, U+0085, U+2028 and the other Unicode line breaks: line numbers after such
# a character are too high, `^` matches after it, and a match is reported as a fragment
# of its line.
# Recipe: a file "alpha\x0cbeta\ngamma\n"; Grep `^beta` finds a match (it must not), and
# Grep `gamma` reports line 3 instead of line 2; Grep `alpha.beta` finds nothing.
@variant("drift-grep-splitlines")
def grep_splitlines() -> None:
    from reference_host.tools import files
    from reference_host.tools.budget import Budget

    def grep(root: Path, compiled: Any, parts: list[str] | None, budget: Budget) -> str:
        out: list[str] = []
        for relative, real in files._workspace_files(root, budget):
            if parts is not None and not files._glob_match(parts, relative.split("/")):
                continue
            try:
                data = real.read_bytes()
            except OSError:
                continue
            if b"\0" in data[: files._BINARY_PROBE]:
                continue
            text = data.decode("utf-8", errors="replace")
            for number, line in enumerate(text.splitlines(), start=1):
                if not files._search(compiled, line, budget):
                    continue
                if len(out) == files.GREP_MAX_MATCHES:
                    out.append(
                        f"[results capped at {files.GREP_MAX_MATCHES} matches; "
                        "narrow the pattern or glob]"
                    )
                    return "\n".join(out)
                out.append(f"{relative}:{number}:{line}")
        return "\n".join(out) if out else files.NO_MATCHES

    patch(files.Grep, "_grep", staticmethod(grep))


# R7.3 / P20 (Commands and shells, Output): output is "decoded as UTF-8 with invalid
# bytes replaced by U+FFFD (a character whose bytes arrive in separate reads is valid and
# is shown whole, never cut in two)".
# Bug: each pipe read is decoded on its own (`bytes.decode(errors="replace")` per read,
# as the runtime's line-free read loop it was ported from did); the incremental decoder
# that held back a character's first bytes until the rest arrived was dropped. A
# character whose bytes straddle two reads becomes two or more U+FFFD.
# Recipe: Bash `printf '\303'; sleep 0.3; printf '\251\n'` (an é written in two halves),
# or `python3 -c "print('é'*5000)"` (its 4096-byte reads cut an é); the joined
# command/output text holds U+FFFD instead of é.
@variant("drift-output-split-char")
def output_split_char() -> None:
    from reference_host import commands

    def whole(data: bytes) -> int:
        return len(data)

    patch(commands, "_utf8_boundary", whole)


# P10 (Planning "The tools work", Glob and Grep): "Files in hidden folders (`.github/`)
# count like any other; a `.git` folder you may leave out", and for Grep "Hidden folders
# and `.git` are as for Glob".
# Bug: the workspace walker follows `glob.glob(recursive=True)`'s default
# (`include_hidden=False`) and does not descend into folders whose name starts with a dot;
# Glob `**/*.yml` misses `.github/workflows/ci.yml`, and Grep never reads files there.
# Recipe: create `.github/ci.yml` holding "needle"; Glob `**/*.yml` gives (no matches),
# Grep `needle` gives (no matches); both must list `.github/ci.yml`.
@variant("drift-walk-skips-hidden-dirs")
def walk_skips_hidden_dirs() -> None:
    from reference_host.tools import files
    from reference_host.tools.budget import Budget

    def workspace_files(root: Path, budget: Budget) -> list[tuple[str, Path]]:
        found: list[tuple[str, Path]] = []
        for directory, dirnames, filenames in os.walk(root):
            budget.check()
            dirnames[:] = [name for name in dirnames if not name.startswith(".")]
            base = Path(directory)
            for name in filenames:
                if name in files._SKIPPED_NAMES:
                    continue
                budget.check()
                path = base / name
                try:
                    real = path.resolve(strict=True)
                    mode = real.stat().st_mode
                except (OSError, RuntimeError):
                    continue
                if real.is_relative_to(root) and stat.S_ISREG(mode):
                    found.append((path.relative_to(root).as_posix(), real))
        found.sort()
        return found

    patch(files, "_workspace_files", workspace_files)


# P1 (Framing "Request ids"): "An integer id you cannot hold exactly (one past 2^53 - 1
# when you read JSON numbers as doubles ...) you refuse with PARSE_ERROR or
# INVALID_REQUEST and "id": null; never answer it under an id rounded to what you can
# hold."
# Bug: the request reader was written against a JSON library that reads every number as
# a double (as JavaScript does): an integer past 2^53 is rounded to the nearest double and
# the request is served and answered under that rounded id.
# Recipe: send `{"jsonrpc":"2.0","id":9007199254740993,"method":"session/list"}` (2^53 +
# 1); the answer's id is 9007199254740992 (a 20-digit id is likewise rounded).
@variant("drift-id-as-double")
def id_as_double() -> None:
    from reference_host import jsontext, rpc
    from reference_host.jsontext import JsonTextError

    def as_double(text: str) -> int:
        value = jsontext._bounded_int(text)
        if abs(value) <= 2**53:
            return value
        rounded = float(text)
        if not math.isfinite(rounded):
            raise JsonTextError(f"the number {text[:40]} is too large")
        return int(rounded)

    def loads(text: str) -> Any:
        try:
            return json.loads(
                text,
                parse_constant=jsontext._refuse_constant,
                parse_float=jsontext._finite_float,
                parse_int=as_double,
            )
        except JsonTextError:
            raise
        except ValueError as exc:
            raise JsonTextError(str(exc)) from exc

    patch(rpc, "loads", loads)


# P7 (Approval §3 "Permission modes"): "A `requestId` names one question among all the
# host's sessions: ... a question asked after a restart never has the id of one asked
# before it (a client may still hold the old one)."
# Bug: permission request ids follow the earlier id scheme, `perm-<n>` from a counter
# that each host process starts at 1 (the counter lives on the broker, so it is new for
# every process): unique within a process, but the first question after a restart is
# `perm-1` again, the id of the first question before it.
# Recipe: under `ask`, a turn whose Bash asks (requestId perm-1); restart the host;
# another turn whose Bash asks: its requestId is perm-1 again, and an answer a client
# sends for the old question answers the new one.
@variant("drift-permission-id-counter")
def permission_id_counter() -> None:
    import asyncio

    from reference_host.permissions import PermissionBroker, _Request

    counters: weakref.WeakKeyDictionary[PermissionBroker, int] = weakref.WeakKeyDictionary()

    async def ask(
        self: PermissionBroker, session_id: str, turn_id: str, tool: str, tool_input: Any
    ) -> bool:
        number = counters.get(self, 0) + 1
        counters[self] = number
        request_id = f"perm-{number}"
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._open[request_id] = _Request(session_id, answer)
        self._notify(
            "permission/requested",
            {
                "sessionId": session_id,
                "turnId": turn_id,
                "requestId": request_id,
                "tool": tool,
                "input": tool_input,
            },
        )
        try:
            return await answer
        finally:
            self._open.pop(request_id, None)

    patch(PermissionBroker, "ask", ask)


# Storage ("WAL. Put the database in WAL mode. The harness opens host.db read-only, also
# while your host runs").
# Bug: WAL is switched on only in the script that creates a new database (the journal
# mode is persistent, so it was thought enough to set it once). A v8 file the host
# migrates keeps SQLite's default rollback journal (`delete`) for good, and a reader can
# meet `database is locked` while the host writes.
# Recipe: seed a v8 host.db, start the host, then read `PRAGMA journal_mode` of host.db:
# `delete`, not `wal` (also after a restart).
@variant("drift-wal-only-on-create")
def wal_only_on_create() -> None:
    import aiosqlite

    from reference_host import storage as storage_module
    from reference_host.datadir import DB_FILE
    from reference_host.storage import Storage

    async def open_storage(cls: type[Storage], data_dir: Path) -> Storage:
        conn = await aiosqlite.connect(
            storage_module._file_uri(data_dir / DB_FILE), uri=True, isolation_level=None
        )
        try:
            await conn.execute("PRAGMA busy_timeout = 5000")
            storage = cls(conn)
            await storage._check_version()
            await conn.execute("PRAGMA synchronous = FULL")
            await storage._prepare_schema()
            await conn.execute("PRAGMA foreign_keys = ON")
        except BaseException:
            await conn.close()
            raise
        return storage

    patch(Storage, "_open", classmethod(open_storage))


CASES = [
    BrokenCase(
        "drift-artifact-base64-urlsafe",
        "artifact_integrity",
        "returns_the_files_exact_bytes and byte_order_mark",
        "R3.2",
        "contentBase64 is not standard base64",
    ),
    BrokenCase(
        "drift-refusal-line-not-compact",
        "migration",
        "data_directory_that_is_a_file_is_refused",
        "P5",
        "broke the protocol v9 contract",
    ),
    BrokenCase(
        "drift-expires-at-float",
        "submit_plan",
        "the_model_submits_a_plan",
        "P5",
        "broke the protocol v9 contract",
    ),
    BrokenCase(
        "drift-reject-decided-wall-clock",
        "approval",
        "rejecting_keeps_the_session_in_plan",
        "R4.4",
        "but the host clock read",
    ),
    BrokenCase(
        "drift-legacy-expiry-seconds",
        "migration",
        "v8_approval_that_was_approved_is_listed_as_approved",
        "P16",
        "the legacy approval reads",
    ),
    BrokenCase(
        "drift-task-upsert-createdat",
        "scheduled_plan",
        "keeps_the_time_it_was_created",
        "P29",
        "createdAt",
    ),
    BrokenCase(
        "drift-transcript-order-by-time",
        "sessions",
        "keeps_its_order_when_the_clock_was_set_back",
        "R1.3",
        "seq does not increase",
    ),
    BrokenCase(
        "drift-grep-splitlines",
        "plan_tools",
        "matches_line_by_line and other_breaks",
        "P10",
        "after its Grep call the model was not given",
    ),
    BrokenCase(
        "drift-output-split-char",
        "shell",
        "bytes_arrive_apart_is_shown_whole",
        "P20",
        "was not kept whole",
    ),
    BrokenCase(
        "drift-walk-skips-hidden-dirs",
        "plan_tools",
        "finds_exactly_the_files_it_names and hidden_folder",
        "P10",
        "after its Glob call the model was not given",
    ),
    BrokenCase(
        "drift-id-as-double",
        "protocol_errors",
        "integer_identifier_beyond_what_every_client_can_hold",
        "P1",
        "an answer carries the identifier",
    ),
    BrokenCase(
        "drift-permission-id-counter",
        "execution",
        "asked_after_a_restart_takes_no_answer_meant_for_one_asked_before",
        "P7",
        "expected the host to refuse",
    ),
    BrokenCase(
        "drift-wal-only-on-create",
        "migration",
        "migrated_database_has_the_published_v10_structure",
        "R7.5",
        "not WAL",
    ),
]
