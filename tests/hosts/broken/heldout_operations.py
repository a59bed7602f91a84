"""Broken hosts: a held-out set (operations-minded changes: start-up maintenance, locks,
logs, limits from the environment, shutdown), written from the contract alone."""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import os
import shutil
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from hosts.registry import BrokenCase, patch, variant


# §7 / R7.6 (shell/setDefault "persists the default ... it survives a restart") and
# "Shutdown and crashes": "What you reported survives a crash ... the restarted host shows
# every session, approval, setting and task as last reported".
# Bug: settings are cached in memory and written to `settings` when the host stops
# ("save settings on exit", to keep the hot path free of writes). A clean stop persists
# them; a SIGKILL loses the default shell the host had already confirmed.
# Recipe: shell/setDefault {shellId: <a non-default shell>} -> answered; shell/list shows
# it; SIGKILL the host; restart; shell/list shows the old default, and `settings` has no
# default_shell_id row.
@variant("ops-default-shell-saved-on-exit")
def default_shell_saved_on_exit() -> None:
    from reference_host import host as host_module
    from reference_host.host import DEFAULT_SHELL_KEY, Host

    unsaved: weakref.WeakKeyDictionary[Host, str] = weakref.WeakKeyDictionary()
    original_default = Host.default_shell_id
    original_close = Host.close

    async def shell_set_default(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        shell = host_module._require_shell(params["shellId"])
        unsaved[self] = shell.shell_id  # written back in close()
        return {"defaultShellId": shell.shell_id}

    async def default_shell_id(self: Host) -> str | None:
        if self in unsaved:
            return unsaved[self]
        return await original_default(self)

    async def close(self: Host) -> None:
        if self in unsaved:
            await self.storage.set_setting(DEFAULT_SHELL_KEY, unsaved.pop(self))
        await original_close(self)

    patch(Host, "shell_set_default", shell_set_default)
    patch(Host, "default_shell_id", default_shell_id, wraps=True)
    patch(Host, "close", close, wraps=True)


# P17 ("A crashed host's lock must not survive it"): the host keeps its flock and also
# writes a pid file `DIR/host.pid`, refusing to start while one is there, and removes it
# when it stops cleanly. After a SIGKILL the pid file stays, and every later start is
# refused with DATA_DIR_IN_USE although no host holds the directory.
# Recipe: start the host; SIGKILL it; start a new host on the same DIR -> it writes the
# DATA_DIR_IN_USE error line and exits instead of answering initialize.
@variant("ops-stale-pid-file")
def stale_pid_file() -> None:
    from reference_host import server
    from reference_host.datadir import DataDirLock
    from reference_host.errors import HostError

    original_claim = vars(server)["claim"]

    class PidFileLock:
        def __init__(self, lock: DataDirLock, pid_file: Path) -> None:
            self.lock = lock
            self.pid_file = pid_file

        def release(self) -> None:
            with contextlib.suppress(OSError):
                self.pid_file.unlink()
            self.lock.release()

    def claim(data_dir: Path) -> PidFileLock:
        lock: DataDirLock = original_claim(data_dir)
        pid_file = data_dir / "host.pid"
        if pid_file.exists():
            lock.release()
            raise HostError(
                "DATA_DIR_IN_USE",
                f"{pid_file} exists: another host process is using the data directory",
                {"dataDir": str(data_dir)},
            )
        pid_file.write_text(f"{os.getpid()}\n", encoding="ascii")
        return PidFileLock(lock, pid_file)

    patch(server, "claim", claim, wraps=True)


# P17 ("Hold the data directory alone for your process's lifetime ... A second host started
# on a DIR that a live host holds refuses to start with DATA_DIR_IN_USE before it reads or
# writes anything ... and the first host goes on serving, its pending approvals still
# pending").
# Bug: the lock is taken for the start-up only (migration and recovery) and released once
# the database is open ("SQLite locks the file from then on"). A second host on the same
# DIR starts, runs its recovery and interrupts the first host's pending approval.
# Recipe: host A: create a Plan session, prompt, SubmitPlan -> approval pending; start host
# B on the same DIR -> B answers initialize (no DATA_DIR_IN_USE); approval/get on A (or
# the plan_approvals row) reads `interrupted` / TURN_INTERRUPTED.
@variant("ops-lock-only-during-startup")
def lock_only_during_startup() -> None:
    from reference_host import server
    from reference_host.clock import Clock
    from reference_host.datadir import DataDirLock
    from reference_host.storage import Storage

    claimed: contextvars.ContextVar[DataDirLock | None] = contextvars.ContextVar(
        "ops_claimed", default=None
    )
    original_claim = vars(server)["claim"]
    original_open = server._open_and_recover

    def claim(data_dir: Path) -> DataDirLock:
        lock: DataDirLock = original_claim(data_dir)
        claimed.set(lock)
        return lock

    async def open_and_recover(data_dir: Path, clock: Clock) -> Storage:
        storage = await original_open(data_dir, clock)
        lock = claimed.get()
        if lock is not None:
            lock.release()  # start-up done: the database is open and recovered
        return storage

    patch(server, "claim", claim, wraps=True)
    patch(server, "_open_and_recover", open_and_recover, wraps=True)


# P18 ("leave every file in DIR ... as it was: no file changed, and nothing left behind
# that was not there") and P17 (a refused second host "refuses to start with
# DATA_DIR_IN_USE before it reads or writes anything (no ... file created or changed)").
# Bug: the host writes its log to `DIR/host.log` as well as stderr, and opens that log
# first thing, before it claims the directory, so a refused start leaves a log behind.
# Recipe: DIR holding a host.db at user_version 7 (or a second host on a live DIR) ->
# STORAGE_SCHEMA_UNSUPPORTED (DATA_DIR_IN_USE); DIR now also holds host.log (the live
# host's host.log has grown).
@variant("ops-log-file-in-data-dir")
def log_file_in_data_dir() -> None:
    import argparse

    from reference_host import server

    original_serve = server._serve

    async def serve(args: argparse.Namespace, stdin: BinaryIO, stdout: BinaryIO) -> int:
        logger = logging.getLogger("reference_host")
        handler: logging.Handler | None = None
        data_dir: Path = args.data_dir
        with contextlib.suppress(OSError):
            data_dir.mkdir(parents=True, exist_ok=True)
            handler = logging.FileHandler(data_dir / "host.log", encoding="utf-8")
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
            logger.addHandler(handler)
        try:
            return await original_serve(args, stdin, stdout)
        finally:
            if handler is not None:
                logger.removeHandler(handler)
                handler.close()

    patch(server, "_serve", serve, wraps=True)


# §2 / R2.1, R2.2: the host writes the markdown "to a new file
# <workspaceRoot>/.pi/plan/<name>.md ... and nothing else in the project".
# Bug: for the operators' audit trail, every submission also appends a JSON line to
# `<workspaceRoot>/.pi/plan-audit.log` (approval id, path, SHA-256, size).
# Recipe: Plan session with a workspace; SubmitPlan -> approval pending; the workspace now
# holds `.pi/plan-audit.log` besides `.pi/plan/<name>.md`.
def _append_line(path: Path, line: str) -> None:
    with contextlib.suppress(OSError), path.open("a", encoding="utf-8") as handle:
        handle.write(line + "\n")


@variant("ops-plan-audit-log-in-project")
def plan_audit_log_in_project() -> None:
    from reference_host.approvals import Approvals
    from reference_host.storage import ApprovalRow, SessionRow

    original_submit = Approvals.submit

    async def submit(
        self: Approvals, session: SessionRow, turn_id: str, args: dict[str, Any]
    ) -> ApprovalRow:
        row = await original_submit(self, session, turn_id, args)
        if session.workspace_root is not None:
            line = {
                "approvalId": row.id,
                "path": row.artifact_path,
                "sha256": row.artifact_sha256,
                "bytes": row.artifact_bytes,
                "at": row.created_at,
            }
            _append_line(Path(session.workspace_root, ".pi", "plan-audit.log"), json.dumps(line))
        return row

    patch(Approvals, "submit", submit, wraps=True)


# P2: "announce the longest request line you accept in capabilities.maxFrameBytes ... A
# line of exactly that length is served".
# Bug: the reader's limit is configurable through PI_HOST_MAX_FRAME_BYTES, whose default
# (1 MiB) differs from the one initialize announces (the --max-frame-bytes option, 8 MiB).
# Recipe: initialize -> maxFrameBytes = 8388608; send a valid request padded to 2 MiB (any
# length between 1 MiB and the announced limit) -> FRAME_TOO_LARGE instead of its answer.
@variant("ops-env-frame-limit")
def env_frame_limit() -> None:
    from reference_host import server
    from reference_host.framing import Frame

    original_read = vars(server)["read_frames"]

    def read_frames(stream: BinaryIO, max_bytes: int = 0) -> Iterator[Frame]:
        limit = int(os.environ.get("PI_HOST_MAX_FRAME_BYTES", str(1024 * 1024)))
        frames: Iterator[Frame] = original_read(stream, limit)
        return frames

    patch(server, "read_frames", read_frames, wraps=True)


# P20: "At most maxCommandOutputBytes bytes of each command's own output ... are streamed
# ...: output of exactly that size streams whole and is not truncated".
# Bug: the cap the command runner applies is read from PI_HOST_OUTPUT_CAP_BYTES with a
# default of 64 KiB, while initialize still announces the 256 KiB constant.
# Recipe: initialize -> maxCommandOutputBytes = 262144; Bash printing 100000 bytes ->
# command/output stops near 65536 bytes and command/exited says truncated: true.
@variant("ops-env-output-cap")
def env_output_cap() -> None:
    from reference_host import commands

    cap = int(os.environ.get("PI_HOST_OUTPUT_CAP_BYTES", str(64 * 1024)))
    patch(commands, "OUTPUT_CAP_BYTES", cap)


# §4 / R4.11 ("ends the turns the previous process left active: whether it stopped cleanly
# or crashed, each such turn's turns.state reads interrupted") and P28 (a run cut short by
# a restart "reads failed with TURN_INTERRUPTED").
# Bug: a graceful shutdown cancels the running turns the way session/cancel does, so they
# end `cancelled` (and a scheduled run `failed` with TURN_CANCELLED) before the process
# exits; the next start's recovery then finds nothing active.
# Recipe: prompt a turn whose provider request is held open; close stdin; restart ->
# turns.state of that turn is `cancelled`, not `interrupted` (task/run of an Agent task
# held the same way: lastRun.error.code TURN_CANCELLED).
@variant("ops-shutdown-cancels-turns")
def shutdown_cancels_turns() -> None:
    import asyncio

    from reference_host.turns import TurnRunner

    async def shutdown(self: TurnRunner) -> None:
        for task in list(self.tasks.values()):
            task.cancel()
        for task in list(self.tasks.values()):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self.stopping = True

    patch(TurnRunner, "shutdown", shutdown)


# ADR §4 ("Before serving any RPC after startup, host-core runs one transaction that marks
# all prior pending approvals as interrupted ..."), R4.10, R4.11 ("whether it stopped
# cleanly or crashed"), C ("A host restart interrupts even an approved queued or running
# execution").
# Bug: the recovery is treated as crash recovery only: a clean stop leaves a
# `DIR/.clean-shutdown` marker, and a start that finds it skips the recovery.
# Recipe: SubmitPlan -> pending; close stdin (clean stop); restart -> approval/get still
# `pending` and approve succeeds (expected: interrupted / APPROVAL_NOT_PENDING).
@variant("ops-skip-recovery-after-clean-stop")
def skip_recovery_after_clean_stop() -> None:
    from reference_host import server
    from reference_host.clock import Clock
    from reference_host.host import Host
    from reference_host.storage import Storage

    marker = ".clean-shutdown"
    dirs: weakref.WeakKeyDictionary[Storage, Path] = weakref.WeakKeyDictionary()
    original_open = server._open_and_recover
    original_close = Host.close

    async def open_and_recover(data_dir: Path, clock: Clock) -> Storage:
        clean = data_dir / marker
        if clean.is_file():
            storage = await Storage.open(data_dir)
            clean.unlink()
            logging.getLogger("reference_host").info("clean shutdown: no recovery needed")
        else:
            storage = await original_open(data_dir, clock)
        dirs[storage] = data_dir
        return storage

    async def close(self: Host) -> None:
        await original_close(self)
        data_dir = dirs.get(self.storage)
        if data_dir is not None:
            with contextlib.suppress(OSError):
                (data_dir / marker).write_text("", encoding="ascii")

    patch(server, "_open_and_recover", open_and_recover, wraps=True)
    patch(Host, "close", close, wraps=True)


# P18 / R7.8, R7.9: a failed migration "rolls everything back and leaves the file
# byte-identical; then refuse to start with MIGRATION_FAILED", and a refusal leaves
# "nothing left behind that was not there".
# Bug: before migrating a v8 database the host copies it to `DIR/host.db.v8.bak` (so an
# operator can restore it) and keeps the copy, also when the migration fails.
# Recipe: DIR with a v8 host.db that already holds a `command_audit` table -> the host
# refuses with MIGRATION_FAILED; DIR now holds host.db.v8.bak as well.
@variant("ops-migration-backup-left")
def migration_backup_left() -> None:
    import aiosqlite

    from reference_host import storage as storage_module

    original_migrate = vars(storage_module)["migrate_v8_to_v10"]

    async def migrate(conn: aiosqlite.Connection, v10_statements: list[str]) -> None:
        async with conn.execute("PRAGMA database_list") as cursor:
            databases = await cursor.fetchall()
        main = next((row[2] for row in databases if row[1] == "main"), "")
        if main:
            with contextlib.suppress(OSError):
                shutil.copyfile(main, main + ".v8.bak")
        await original_migrate(conn, v10_statements)

    patch(storage_module, "migrate_v8_to_v10", migrate, wraps=True)


# R7.5 ("Nothing may be missing and nothing added: no other table, column, index, view or
# trigger, also none your host adds later ... the suite compares the structure after every
# scenario").
# Bug: the start-up adds an index for the recovery's scan of running scheduled runs
# (`scheduled_task_runs (outcome)`, which v10 lacks) with CREATE INDEX IF NOT EXISTS.
# Recipe: start the host on an empty DIR; read host.db's index_list of scheduled_task_runs
# -> an extra index on (outcome).
@variant("ops-startup-adds-index")
def startup_adds_index() -> None:
    from reference_host.storage import Storage

    original_recover = Storage.recover

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self.transaction() as conn:
            await conn.execute(
                "CREATE INDEX IF NOT EXISTS scheduled_task_runs_by_outcome "
                "ON scheduled_task_runs (outcome)"
            )
        return await original_recover(self, now)

    patch(Storage, "recover", recover, wraps=True)


# C9 ("Artifacts are never deleted: they stay after rejection, expiry, completion and
# interruption by a restart"), ADR Consequences ("Plan artifacts accumulate under
# .pi/plan/").
# Bug: a start-up housekeeping step deletes the artifacts of rejected and expired
# approvals (they can never be approved, so the operator treats them as garbage).
# Recipe: SubmitPlan; approval/reject; restart; the file .pi/plan/<name>.md is gone and
# artifact/read answers ARTIFACT_UNREADABLE.
@variant("ops-cleanup-rejected-artifacts")
def cleanup_rejected_artifacts() -> None:
    from reference_host.storage import Storage

    original_recover = Storage.recover

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        counts = await original_recover(self, now)
        async with self._conn.execute(
            "SELECT s.workspace_root, a.artifact_path FROM plan_approvals a "
            "JOIN sessions s ON s.id = a.session_id "
            "WHERE a.status IN ('rejected', 'expired') AND a.artifact_path IS NOT NULL "
            "AND s.workspace_root IS NOT NULL"
        ) as cursor:
            rows = await cursor.fetchall()
        for root, relative in rows:
            with contextlib.suppress(OSError):
                Path(root, relative).unlink()
        return counts

    patch(Storage, "recover", recover, wraps=True)


# R1.3 ("each prompt you accepted in its session's transcript"; a reset or a failure
# changes what the model is shown, "not what is kept") and R4.10 ("the startup recovery
# changes nothing but approvals, executions and turns").
# Bug: the recovery "repairs" the history: it deletes the transcript rows of the turns it
# interrupts (so that no half-finished exchange is sent to the provider again), the
# accepted prompt among them.
# Recipe: prompt a turn whose provider request is held open; restart (clean or crash);
# session/transcript no longer has that prompt's user entry.
@variant("ops-recovery-drops-cut-transcript")
def recovery_drops_cut_transcript() -> None:
    from reference_host.storage import Storage

    original_recover = Storage.recover

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self.transaction() as conn:
            await conn.execute(
                "DELETE FROM transcript WHERE turn_id IN "
                "(SELECT id FROM turns WHERE state = 'active')"
            )
        return await original_recover(self, now)

    patch(Storage, "recover", recover, wraps=True)


CASES = [
    BrokenCase(
        "ops-default-shell-saved-on-exit",
        "shell",
        "default_shell_survives_a_restart and crashes",
        "R7.6",
        "after the restart the default shell is",
    ),
    BrokenCase(
        "ops-stale-pid-file",
        "restart_interruption",
        "pending_approval_is_interrupted_when_the_host and crashes",
        "P17",
        "refused it as in use",
    ),
    BrokenCase(
        "ops-lock-only-during-startup",
        "restart_interruption",
        "second_host_on_the_same_data_directory_refuses_to_start",
        "P17",
        "the second host served requests on a data directory in use",
    ),
    BrokenCase(
        "ops-log-file-in-data-dir",
        "migration",
        "database_that_is_a_folder_is_refused_and_left_alone",
        "P18",
        "the host changed the data directory",
    ),
    BrokenCase(
        "ops-plan-audit-log-in-project",
        "artifact_integrity",
        "title_that_looks_like_a_path_does_not_move_the_artifact",
        "R2.3",
        "the submission wrote",
    ),
    BrokenCase(
        "ops-env-frame-limit",
        "protocol_errors",
        "request_exactly_at_the_frame_limit_is_served",
        "P2",
        "was refused",
    ),
    BrokenCase(
        "ops-env-output-cap",
        "shell",
        "output_exactly_at_the_announced_cap_is_streamed_whole",
        "P20",
        "output of exactly the cap was marked truncated",
    ),
    BrokenCase(
        "ops-shutdown-cancels-turns",
        "scheduled_plan",
        "run_under_way_when_the_host_restarts_is_recorded_as_failed",
        "P28",
        "TURN_CANCELLED",
    ),
    BrokenCase(
        "ops-skip-recovery-after-clean-stop",
        "restart_interruption",
        "plan_interrupted_by_a_restart_stays_interrupted_when_its_deadline_passes",
        "R4.12",
        "the interrupted approval now reads pending",
    ),
    BrokenCase(
        "ops-migration-backup-left",
        "migration",
        "migration_that_fails_is_rolled_back_and_the_host_refuses_to_start",
        "P18",
        "the host changed the data directory",
    ),
    BrokenCase(
        "ops-startup-adds-index",
        "handshake",
        "speaking_a_future_version_is_refused",
        "R7.5",
        "the database differed from schemas/storage/v10.sql",
    ),
    BrokenCase(
        "ops-cleanup-rejected-artifacts",
        "artifact_integrity",
        "artifact_stays_as_written_after and host_is_restarted and rejects",
        "C9",
        "is gone",
    ),
    BrokenCase(
        "ops-recovery-drops-cut-transcript",
        "restart_interruption",
        "prompt_accepted_just_before_the_host and restarts",
        "R1.3",
        "the host's transcript lost the accepted prompt",
    ),
]
