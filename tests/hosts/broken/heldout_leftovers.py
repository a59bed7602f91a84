"""Broken hosts: a held-out set (what others left behind: a data directory or a workspace
that another tool, an older host or a crash touched), written from the contract alone."""

from __future__ import annotations

import contextlib
import hashlib
import os
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hosts.registry import BrokenCase, patch, variant


# R7.7 (implementing-a-host.md, "Migrating from v8": "You may add settings rows under keys
# of your own ...; every v8 key keeps its value") and R4.1 ("No boot epoch": "a restart
# that finds nothing to recover changes no stored value").
# Bug: the host tidies `settings` on every start, deleting the rows under keys it does not
# read (only `default_shell_id` is its own), taking them for leftovers of older versions.
# Observed: a v8 key (or any key another tool wrote) is gone from `settings` after the
# start. Recipe: seed a v8 (or v10) host.db with a `settings` row ('theme', 'dark'), start
# the host, initialize, read `settings` read-only: the row is missing.
@variant("left-startup-prunes-settings")
def startup_prunes_settings() -> None:
    from reference_host import server
    from reference_host.clock import Clock
    from reference_host.storage import Storage

    original = server._open_and_recover

    async def open_and_recover(data_dir: Path, clock: Clock) -> Storage:
        storage = await original(data_dir, clock)
        async with storage.transaction() as conn:
            await conn.execute("DELETE FROM settings WHERE key <> 'default_shell_id'")
        return storage

    patch(server, "_open_and_recover", open_and_recover, wraps=True)


# "What you reported survives a crash" (Shutdown and crashes; R4.3, R1.3) and P17/P18
# (a start leaves the data directory's files as they were until it serves).
# Bug: a host-db-wal and host.db-shm found at start-up are taken for debris of a killed
# process (the host holds the directory lock, so "nobody uses them") and deleted before
# the database is opened. Their committed but not yet checkpointed transactions are lost.
# Observed: a session, approval, setting or transcript row the previous process reported
# is missing after the restart. Recipe: create a session (and prompt it), SIGKILL the host
# (or stop it while a read-only reader still holds host.db open, so no checkpoint runs),
# start a new host on the same DIR: session/list no longer lists the session.
@variant("left-wal-discarded")
def wal_discarded() -> None:
    from reference_host.datadir import DB_FILE
    from reference_host.storage import Storage

    original = Storage.open

    async def open_storage(cls: type[Storage], data_dir: Path) -> Storage:
        if (data_dir / DB_FILE).is_file():
            for suffix in ("-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    (data_dir / (DB_FILE + suffix)).unlink()
        return await original(data_dir)

    patch(Storage, "open", classmethod(open_storage))


# P17 ("One owner": "A crashed host's lock must not survive it").
# Bug: besides its directory lock the host writes a pid file `host.lock`, created with
# O_EXCL and removed on a clean stop; one found at start-up is taken for a live owner. A
# crash (SIGKILL) leaves it behind, and every later start refuses DATA_DIR_IN_USE.
# Observed: after a crash the new host answers one `{"id":null,"error":{...
# DATA_DIR_IN_USE}}` line and exits. Recipe: start, initialize, SIGKILL the host, start a
# new host on the same DIR and send initialize.
@variant("left-stale-lockfile")
def stale_lockfile() -> None:
    from reference_host import datadir
    from reference_host.datadir import DataDirLock
    from reference_host.errors import HostError

    original_claim = datadir.claim
    original_release = DataDirLock.release
    owned: weakref.WeakKeyDictionary[DataDirLock, Path] = weakref.WeakKeyDictionary()

    def claim(data_dir: Path) -> DataDirLock:
        lock = original_claim(data_dir)
        pid_file = data_dir / "host.lock"
        try:
            fd = os.open(pid_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        except FileExistsError as exc:
            lock.release()
            raise HostError(
                "DATA_DIR_IN_USE",
                f"another host process is using the data directory {str(data_dir)!r}",
                {"dataDir": str(data_dir)},
            ) from exc
        try:
            os.write(fd, f"{os.getpid()}\n".encode())
        finally:
            os.close(fd)
        owned[lock] = pid_file
        return lock

    def release(self: DataDirLock) -> None:
        pid_file = owned.pop(self, None)
        if pid_file is not None:
            with contextlib.suppress(FileNotFoundError):
                pid_file.unlink()
        original_release(self)

    from reference_host import server

    patch(datadir, "claim", claim)
    patch(server, "claim", claim)  # the server took its own reference at import
    patch(DataDirLock, "release", release, wraps=True)


# R7.2 ("approval/list lists a session's approvals oldest first: createdAt never
# decreases along the list").
# Bug: approval/list orders by insertion (rowid), assuming rows are always written in time
# order. Rows migrated from v8 keep the v8 table's row order, and a row another machine
# (or a clock moved forward) dated in the future sits before a later, earlier-dated one.
# Observed: approval/list's createdAt decreases somewhere along the list. Recipe: seed a
# v8 plan_approvals with two rows of one session inserted newest first (or one dated in
# the future), start, approval/list; or move the clock a day ahead, submit a plan,
# restart (the clock starts again at the system time), submit another, approval/list.
@variant("left-approvals-by-rowid")
def approvals_by_rowid() -> None:
    from reference_host.storage import APPROVAL_COLUMNS, ApprovalRow, Storage

    async def list_approvals(self: Storage, session_id: str) -> list[ApprovalRow]:
        async with self._conn.execute(
            f"SELECT {APPROVAL_COLUMNS} FROM plan_approvals WHERE session_id = ? ORDER BY rowid",
            (session_id,),
        ) as cursor:
            rows = await cursor.fetchall()
        return [ApprovalRow(*row) for row in rows]

    patch(Storage, "list_approvals", list_approvals)


# P32 (Conformance mode: "A restarted host's clock starts afresh at the system time of its
# own start, whatever the previous process's clock read").
# Bug: to keep timestamps from going backwards across a restart, the host starts its clock
# at the newest time stored in the database when that is later than the system time, so
# rows dated in the future (a clock moved forward before the restart) drag it along.
# Observed: conformance/clock/get after a restart reads the previous process's late time,
# and every new createdAt follows it. Recipe: clock/advance by a day, session/create,
# restart on the same DIR, clock/get: expected about the system time, got a day ahead.
@variant("left-clock-resumes-from-rows")
def clock_resumes_from_rows() -> None:
    from reference_host import server
    from reference_host.clock import Clock, ManualClock
    from reference_host.storage import Storage

    original = server._open_and_recover
    latest = (
        "SELECT max(t) FROM (SELECT max(created_at) AS t FROM sessions "
        "UNION ALL SELECT max(created_at) FROM plan_approvals "
        "UNION ALL SELECT max(created_at) FROM transcript "
        "UNION ALL SELECT max(started_at) FROM turns)"
    )

    async def open_and_recover(data_dir: Path, clock: Clock) -> Storage:
        storage = await original(data_dir, clock)
        async with storage._conn.execute(latest) as cursor:
            row = await cursor.fetchone()
        newest = row[0] if row is not None else None
        if isinstance(clock, ManualClock) and newest is not None and newest > clock.now_ms():
            await clock.set(int(newest))
        return storage

    patch(server, "_open_and_recover", open_and_recover, wraps=True)


# P13 (Integrity: "approve and artifact/read check the file's bytes against its recorded
# SHA-256 and size, on every call ... artifact/read never returns bytes that disagree with
# the record").
# Bug: artifact/read verifies the bytes only while the approval is pending (the check was
# written to guard approve); for a decided, expired or interrupted approval it just reads
# the file back. A file replaced while the host was down is served as the plan.
# Observed: artifact/read answers the new bytes (with the recorded sha256 and byteSize
# beside them) instead of ARTIFACT_MODIFIED. Recipe: submit a plan, restart (the approval
# is interrupted), overwrite .pi/plan/<name>.md with other bytes, artifact/read.
@variant("left-read-decided-unverified")
def read_decided_unverified() -> None:
    import asyncio
    import base64

    from reference_host.approvals import Approvals
    from reference_host.artifacts import read_artifact
    from reference_host.storage import ApprovalRow

    original = Approvals.read_artifact

    async def read(self: Approvals, row: ApprovalRow) -> dict[str, Any]:
        if row.status == "pending" or row.artifact_path is None:
            return await original(self, row)
        session = await self.host.require_session(row.session_id)
        root = session.workspace_root or ""
        content = await asyncio.to_thread(read_artifact, root, row.artifact_path)
        return {
            "approvalId": row.id,
            "path": row.artifact_path,
            "contentBase64": base64.b64encode(content).decode("ascii"),
            "sha256": row.artifact_sha256,
            "byteSize": row.artifact_bytes,
        }

    patch(Approvals, "read_artifact", read, wraps=True)


# P13 ("a missing file or one that is not a regular file is ARTIFACT_UNREADABLE").
# Bug: the integrity check hashes "whatever is at the path", reading a missing file as
# empty content, so a deleted (or moved away) artifact fails the size/hash comparison and
# is reported as ARTIFACT_MODIFIED.
# Observed: approve and artifact/read of an approval whose file is gone answer
# ARTIFACT_MODIFIED, not ARTIFACT_UNREADABLE. Recipe: submit a plan, delete (or rename)
# its .pi/plan file, artifact/read (and approval/approve with permissionMode ask).
@variant("left-missing-artifact-modified")
def missing_artifact_modified() -> None:
    from reference_host import approvals
    from reference_host.errors import HostError

    # the name approvals imported, where the host calls it from
    original: Callable[[str, str, str, int], bytes] = vars(approvals)["read_verified"]

    def read_verified(root: str, relative_path: str, sha256: str, byte_size: int) -> bytes:
        try:
            return original(root, relative_path, sha256, byte_size)
        except HostError as error:
            if error.code == "ARTIFACT_UNREADABLE" and isinstance(
                error.__cause__, FileNotFoundError
            ):
                raise HostError(
                    "ARTIFACT_MODIFIED",
                    f"{relative_path} does not hold the recorded bytes",
                    {"path": relative_path, "recordedSha256": sha256, "recordedByteSize": 0},
                ) from error
            raise

    patch(approvals, "read_verified", read_verified, wraps=True)


# R2.4 / R2.5 (Plan artifacts: the name "must be new for every submission, also for two
# identical plans", "an existing file is never replaced"; ADR §2 "Each submission gets a
# unique file").
# Bug: artifacts are named after their content (`plan-<sha256 prefix>.md`), and a file
# already under that name is taken for the same plan written before (a retry after a
# crash between the file and its row) and reused instead of a new file being created.
# Observed: two submissions of the same markdown name the same artifact path; a file some
# other tool left under that name (different bytes) is recorded as the new plan, whose
# approve then fails ARTIFACT_MODIFIED. Recipe: SubmitPlan, reject, SubmitPlan again with
# the same markdown in a new turn; compare the two approvals' artifact.path.
@variant("left-plan-name-by-hash")
def plan_name_by_hash() -> None:
    from reference_host import approvals, artifacts
    from reference_host.artifacts import PLAN_DIR, READ_ONLY, Artifact, FaultCheck
    from reference_host.errors import HostError
    from reference_host.workspace import validate_root

    def write_artifact(root: str, content: bytes, fault: FaultCheck) -> Artifact:
        digest = hashlib.sha256(content).hexdigest()
        name = f"plan-{digest[:16]}.md"
        relative = "/".join((*PLAN_DIR, name))
        root_path = validate_root(root)
        try:
            root_fd = os.open(root_path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise HostError("WORKSPACE_INVALID", f"cannot open workspace root: {exc}") from exc
        opened = [root_fd]
        try:
            pi_fd, _ = artifacts._open_plan_dir(root_fd, PLAN_DIR[0], ".pi")
            opened.append(pi_fd)
            plan_fd, _ = artifacts._open_plan_dir(pi_fd, PLAN_DIR[1], ".pi/plan")
            opened.append(plan_fd)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            try:
                file_fd = os.open(name, flags, READ_ONLY, dir_fd=plan_fd)
            except FileExistsError:
                return Artifact(relative, digest, len(content))  # the same plan, already there
            except OSError as exc:
                raise HostError("ARTIFACT_WRITE_FAILED", f"cannot create {name}: {exc}") from exc
            try:
                artifacts._write_all(file_fd, content, fault)
            except BaseException:
                os.close(file_fd)
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=plan_fd)
                raise
            artifacts._close(file_fd)
            artifacts._flush_directory(plan_fd)
        finally:
            for fd in opened:
                with contextlib.suppress(OSError):
                    os.close(fd)
        return Artifact(relative, digest, len(content))

    patch(approvals, "write_artifact", write_artifact)


# R7.7 / R1.3 (Migrating from v8: "the next turn's request carries the text of its v8
# `user` and `assistant` rows"; the provider section: "Message content may be a string or
# an array of text parts").
# Bug: the host rebuilds the conversation for the provider from the transcript and skips
# user and assistant messages whose content is not a string (it only ever writes strings,
# so an array of text parts looks like another tool's debris).
# Observed: the first request of the next turn lacks the text of such a row. Recipe: seed
# a v8 session whose transcript has an assistant row with content
# [{"type":"text","text":"ZEBRA-42"}], start, session/prompt: the provider request holds
# no "ZEBRA-42".
@variant("left-history-drops-part-arrays")
def history_drops_part_arrays() -> None:
    from reference_host.turns import TurnRunner

    original = TurnRunner._history

    async def history(self: TurnRunner, session_id: str) -> list[dict[str, Any]]:
        messages = await original(self, session_id)
        return [
            m
            for m in messages
            if not (
                m.get("role") in ("user", "assistant")
                and isinstance(m.get("content"), list)
                and not m.get("tool_calls")
            )
        ]

    patch(TurnRunner, "_history", history, wraps=True)


# R7.7 (Migrating from v8: "session/transcript reports each row, in id order, with that
# text parsed as content and turnId, role and createdAt from the row"; R1.3: the
# transcript holds the whole conversation).
# Bug: session/transcript leaves out `system` rows, taken for the host's own bookkeeping
# notes; rows another version wrote under that role vanish from the wire (the table keeps
# them).
# Observed: session/transcript of a migrated session misses its v8 `system` rows (and
# new_context summaries). Recipe: seed a v8 session with transcript rows user, system,
# assistant; start; session/transcript lists two entries, not three.
@variant("left-transcript-hides-system")
def transcript_hides_system() -> None:
    from reference_host.host import Host

    async def session_transcript(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        entries = [
            {"seq": seq, "turnId": turn, "role": role, "content": content, "createdAt": at}
            for seq, turn, role, content, at in await self.storage.transcript(row.id)
            if role != "system"
        ]
        return {"entries": entries}

    patch(Host, "session_transcript", session_transcript)


# R2.8 (Plan artifacts: "Validate the workspace root first (R2.8: a root that no longer
# exists is WORKSPACE_INVALID, never recreated)"; ADR §2 "Host-core validates the session
# root").
# Bug: when the session's root is missing, the artifact writer takes it for a project not
# yet set up on this machine and makes <root>/.pi/plan with `mkdir -p` before writing, so a
# session whose project folder was deleted while the host was down gets its root recreated
# and the plan written into it.
# Observed: SubmitPlan's result is ok, an approval is pending, and the deleted root exists
# again holding only .pi/plan/<name>.md. Recipe: create a Plan session, stop the host,
# delete the workspace root, restart, prompt; the model calls SubmitPlan: expected
# turn/toolResult error WORKSPACE_INVALID and no approval.
@variant("left-artifact-recreates-root")
def artifact_recreates_root() -> None:
    from reference_host import approvals
    from reference_host.artifacts import PLAN_DIR, Artifact, FaultCheck

    original: Callable[[str, bytes, FaultCheck], Artifact] = vars(approvals)["write_artifact"]

    def write_artifact(root: str, content: bytes, fault: FaultCheck) -> Artifact:
        if Path(root).is_absolute() and not Path(root).exists():
            with contextlib.suppress(OSError):
                Path(root).joinpath(*PLAN_DIR).mkdir(parents=True)
        return original(root, content, fault)

    patch(approvals, "write_artifact", write_artifact, wraps=True)


# P28 ("A run cut short": "a run under way when your host stopped ... After the restart
# its record reads failed with TURN_INTERRUPTED, in task/list's lastRun and in
# scheduled_task_runs").
# Bug: the start-up recovery interrupts approvals, executions and turns, but the scheduled
# run history (a table newer than the recovery code) is forgotten: a run the previous
# process left under way stays `running` for good.
# Observed: after the restart task/list's lastRun reads outcome "running", error null.
# Recipe: task/create (agent), task/run with a provider that holds its answer, stop or
# kill the host while the run's turn waits, restart, task/list.
@variant("left-recovery-forgets-runs")
def recovery_forgets_runs() -> None:
    from reference_host.storage import Storage

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self.transaction() as conn:
            approvals = await conn.execute(
                "UPDATE plan_approvals SET status = 'interrupted', "
                "status_code = 'TURN_INTERRUPTED', decided_at = ? WHERE status = 'pending'",
                (now,),
            )
            executions = await conn.execute(
                "UPDATE plan_approvals SET execution_state = 'interrupted' "
                "WHERE execution_state IN ('queued', 'running')"
            )
            turns = await conn.execute(
                "UPDATE turns SET state = 'interrupted', ended_at = ? WHERE state = 'active'",
                (now,),
            )
        return approvals.rowcount, executions.rowcount, turns.rowcount

    patch(Storage, "recover", recover)


# P16 (Migrating from v8: "changes_requested becomes rejected ... decidedAt is kept (none
# for a pending row)"; schemas/storage/v8.sql: "decided_at is kept, except that a pending
# row gets none").
# Bug: the migration keeps decided_at only for the statuses it keeps by name (approved,
# rejected); a changes_requested row, renamed to rejected, loses its decision time.
# Observed: approval/get (and plan_approvals.decided_at) of such a legacy row reads
# decidedAt null. Recipe: seed a v8 plan_approvals row with status changes_requested and
# decided_at 1700000000000, start, approval/get: decidedAt must be 1700000000000.
@variant("left-legacy-requested-undecided")
def legacy_requested_undecided() -> None:
    from reference_host import migration

    sql = migration._COPY_LEGACY_APPROVALS.replace(
        "CASE status WHEN 'pending' THEN NULL ELSE decided_at END",
        "CASE WHEN status IN ('approved', 'rejected') THEN decided_at ELSE NULL END",
    )
    assert sql != migration._COPY_LEGACY_APPROVALS
    patch(migration, "_COPY_LEGACY_APPROVALS", sql)


# P29 ("A task ... keeps a runAt still ahead across a restart, however far ahead"; "an
# enabled task whose runAt is still ahead when your host starts runs when it comes due").
# Bug: at start-up the host re-arms each task with a relative delay held in a signed
# 32-bit millisecond count (as setTimeout does); a task more than about 24.8 days ahead
# overflows it and is armed to fire at once (the next clock move). Tasks created or
# updated while the host runs are armed by their absolute time and are unaffected.
# Observed: after a restart a task 30 days ahead runs (task/runFinished, a provider
# request) at the first small clock/advance. Recipe: task/create agent with runAt = now +
# 30 days, restart, clock/advance 1000: expected no run until the clock reaches runAt.
@variant("left-far-task-fires-early")
def far_task_fires_early() -> None:
    from reference_host.tasks import Tasks

    max_delay = 2**31 - 1

    async def schedule_all(self: Tasks) -> None:
        now = self.host.clock.now_ms()
        for row in await self.host.storage.list_tasks():
            if row["enabled"] and row["run_at"] is not None and row["run_at"] > now:
                delay = row["run_at"] - now
                self._arm(row["id"], now + (delay if delay <= max_delay else 1))

    patch(Tasks, "schedule_all", schedule_all)


CASES = [
    BrokenCase(
        "left-startup-prunes-settings",
        "migration",
        "v8_database_is_upgraded_and_its_data_survives",
        "R7.7",
        "settings changed in the migration",
    ),
    BrokenCase(
        "left-wal-discarded",
        "restart_interruption",
        "prompt_accepted_just_before_the_host_crashes",
        "R1.3",
        "SESSION_NOT_FOUND",
        process="the write-ahead log a crash leaves is there only after a host process was killed",
    ),
    BrokenCase(
        "left-stale-lockfile",
        "restart_interruption",
        "pending_approval_is_interrupted_when_the_host_crashes",
        "P17",
        "refused it as in use (DATA_DIR_IN_USE)",
        process="the lock file a crash leaves is there only after a host process was killed",
    ),
    BrokenCase(
        "left-approvals-by-rowid",
        "migration",
        "earlier_approvals_are_kept_and_a_pending_one",
        "R7.2",
        "approvals are listed oldest first",
    ),
    BrokenCase(
        "left-clock-resumes-from-rows",
        "restart_interruption",
        "restarted_hosts_clock_starts_at_the_present",
        "P32",
        "it must start at the system",
    ),
    BrokenCase(
        "left-read-decided-unverified",
        "restart_interruption",
        "changed_while_the_host_was_down_cannot_be_opened",
        "P13",
        "that disagree with the record",
    ),
    BrokenCase(
        "left-missing-artifact-modified",
        "artifact_integrity",
        "revision_whose_file_was_deleted",
        "P13",
        "not ARTIFACT_UNREADABLE",
    ),
    BrokenCase(
        "left-plan-name-by-hash",
        "artifact_integrity",
        "two_sessions_of_one_project_submitting_at_the_same_moment",
        "R2.4",
        "were given the artifact",
    ),
    BrokenCase(
        "left-history-drops-part-arrays",
        "migration",
        "migrated_conversation_goes_on_where_it_left_off",
        "R7.7",
        "user and assistant messages of its v8 transcript",
    ),
    BrokenCase(
        "left-transcript-hides-system",
        "plan_tools",
        "new_context_keeps_the_earlier_conversation",
        "R1.3",
        "they are to be the same, in id order",
    ),
    BrokenCase(
        "left-artifact-recreates-root",
        "artifact_integrity",
        "project_folder_that_disappeared_is_refused",
        "R2.8",
        "expected WORKSPACE_INVALID",
    ),
    BrokenCase(
        "left-recovery-forgets-runs",
        "scheduled_plan",
        "run_under_way_when_the_host_restarts_is_recorded",
        "P28",
        "expected failed (TURN_INTERRUPTED)",
    ),
    BrokenCase(
        "left-legacy-requested-undecided",
        "migration",
        "v8_approval_that_was_changes_requested",
        "P16",
        "'decidedAt': None",
    ),
    BrokenCase(
        "left-far-task-fires-early",
        "scheduled_plan",
        "weeks_ahead_does_not_run_after_a_restart",
        "P29",
        "a minute into its wait",
    ),
]
