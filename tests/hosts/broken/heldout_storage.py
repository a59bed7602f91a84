"""Broken hosts: a second held-out set (artifacts, approvals, recovery, storage, migration),
written from the contract alone before the suite's checks were read. Four of these twelve
went uncaught until the scenarios their cases name were added."""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from pathlib import Path
from typing import Any

from hosts.registry import BrokenCase, patch, variant
from reference_host import approvals, artifacts
from reference_host.approvals import Approvals
from reference_host.errors import HostError
from reference_host.host import Host
from reference_host.storage import ApprovalRow, Storage
from reference_host.turns import TurnRunner

# -- plan artifacts -----------------------------------------------------------------------


@variant("artifact-ends-with-newline")
def _artifact_ends_with_newline() -> None:
    # Plans are written as POSIX text files: a markdown that does not end with a newline
    # gets one. Hash and size are computed over the bytes written, so record, wire and
    # file agree with each other; only the submitted markdown differs.
    original = approvals.encode_markdown

    def encode(markdown: str) -> bytes:
        content = original(markdown)
        return content if content.endswith(b"\n") else content + b"\n"

    patch(approvals, "encode_markdown", encode)


@variant("title-trimmed")
def _title_trimmed() -> None:
    # The title is "cleaned up" before it is stored: surrounding whitespace is stripped.
    original = approvals._require_text

    def require_text(args: dict[str, Any], field: str) -> str:
        value = original(args, field)
        return value.strip() if field == "title" else value

    patch(approvals, "_require_text", require_text)


@variant("refuses-empty-plan")
def _refuses_empty_plan() -> None:
    # A plan whose markdown is empty (or only whitespace) is refused as bad tool input,
    # although the tool schema accepts any string.
    original = Approvals.submit

    async def submit(self: Approvals, session: Any, turn_id: str, args: dict[str, Any]) -> Any:
        markdown = args.get("markdown")
        if isinstance(markdown, str) and not markdown.strip():
            raise HostError("INVALID_TOOL_INPUT", "SubmitPlan: the plan is empty")
        return await original(self, session, turn_id, args)

    patch(Approvals, "submit", submit)


@variant("plan-folder-file-is-write-failure")
def _plan_folder_file_is_write_failure() -> None:
    # The host checks explicitly for a symlinked .pi or .pi/plan (PLAN_PATH_UNSAFE); any
    # other failure to make or open the folder, e.g. a regular file where the folder
    # should be, is reported as a failed write.
    original = artifacts._open_plan_dir

    def open_plan_dir(parent_fd: int, name: str, shown: str) -> tuple[int, bool]:
        try:
            return original(parent_fd, name, shown)
        except HostError as error:
            if error.code != "PLAN_PATH_UNSAFE":
                raise
            try:
                info = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
            except OSError:
                raise error from None
            if stat.S_ISLNK(info.st_mode):
                raise
            raise HostError(
                "ARTIFACT_WRITE_FAILED", f"cannot create {shown}: {error.message}"
            ) from error

    patch(artifacts, "_open_plan_dir", open_plan_dir)


@variant("reads-recorded-length-only")
def _reads_recorded_length_only() -> None:
    # The integrity check reads exactly the recorded number of bytes and hashes them: a
    # file that has grown (bytes appended after the recorded ones) passes the check.
    def read_verified(root: str, relative_path: str, sha256: str, byte_size: int) -> bytes:
        import hashlib

        content = artifacts.read_artifact(root, relative_path, limit=byte_size)
        if len(content) != byte_size or hashlib.sha256(content).hexdigest() != sha256:
            raise HostError("ARTIFACT_MODIFIED", f"{relative_path} changed after submission")
        return content

    patch(approvals, "read_verified", read_verified)


# -- execution ----------------------------------------------------------------------------


@variant("failed-execution-completed")
def _failed_execution_completed() -> None:
    # Only a cancelled execution turn interrupts its execution; one that failed (the
    # provider answered with an error) is taken as finished: completed.
    outcomes: dict[str, str] = {}
    original_end = Storage.end_turn
    original_finished = Approvals.execution_finished

    async def end_turn(self: Storage, turn_id: str, state: str, at: int) -> None:
        outcomes[turn_id] = state
        await original_end(self, turn_id, state, at)

    async def execution_finished(self: Approvals, approval_id: str, final: Any) -> None:
        row = await self.host.storage.get_approval(approval_id)
        if row is not None and outcomes.get(row.execution_turn_id or "") == "failed":
            final = "completed"
        await original_finished(self, approval_id, final)

    patch(Storage, "end_turn", end_turn)
    patch(Approvals, "execution_finished", execution_finished)


@variant("plan-turn-open-until-decided")
def _plan_turn_open_until_decided() -> None:
    # The Plan turn that submitted a plan is announced as ended (completed), but its turns
    # row stays active "awaiting the decision" and is closed (completed) only when the
    # approval is approved, rejected or expires. A restart meanwhile interrupts it.
    original_end = Storage.end_turn
    original_write = Storage.write_approval

    async def end_turn(self: Storage, turn_id: str, state: str, at: int) -> None:
        if state == "completed":
            async with self._conn.execute(
                "SELECT 1 FROM plan_approvals WHERE turn_id = ? AND status = 'pending'",
                (turn_id,),
            ) as cursor:
                if await cursor.fetchone() is not None:
                    return  # closed with the decision
        await original_end(self, turn_id, state, at)

    async def write_approval(conn: Any, row: ApprovalRow) -> None:
        await original_write(conn, row)
        if row.status != "pending" and row.turn_id is not None:
            await conn.execute(
                "UPDATE turns SET state = 'completed', ended_at = ? "
                "WHERE id = ? AND state = 'active'",
                (row.decided_at if row.decided_at is not None else row.created_at, row.turn_id),
            )

    patch(Storage, "end_turn", end_turn)
    patch(Storage, "write_approval", staticmethod(write_approval))


# -- startup recovery ---------------------------------------------------------------------


async def _recover(
    self: Storage,
    now: int,
    *,
    execution_code: str | None = None,
    expire_overdue: bool = False,
) -> tuple[int, int, int]:
    """Storage.recover with one change, still in one transaction."""
    async with self.transaction() as conn:
        if expire_overdue:
            await conn.execute(
                "UPDATE plan_approvals SET status = 'expired', "
                "status_code = 'PLAN_APPROVAL_TIMEOUT', decided_at = ? "
                "WHERE status = 'pending' AND expires_at <= ?",
                (now, now),
            )
        approvals_ = await conn.execute(
            "UPDATE plan_approvals SET status = 'interrupted', "
            "status_code = 'TURN_INTERRUPTED', decided_at = ? WHERE status = 'pending'",
            (now,),
        )
        if execution_code is None:
            executions = await conn.execute(
                "UPDATE plan_approvals SET execution_state = 'interrupted' "
                "WHERE execution_state IN ('queued', 'running')"
            )
        else:
            executions = await conn.execute(
                "UPDATE plan_approvals SET execution_state = 'interrupted', status_code = ? "
                "WHERE execution_state IN ('queued', 'running')",
                (execution_code,),
            )
        turns_ = await conn.execute(
            "UPDATE turns SET state = 'interrupted', ended_at = ? WHERE state = 'active'",
            (now,),
        )
        await conn.execute(
            "UPDATE scheduled_task_runs SET outcome = 'failed', "
            "error_code = 'TURN_INTERRUPTED', "
            "error_message = 'the host stopped before the run finished' "
            "WHERE outcome = 'running'"
        )
    return approvals_.rowcount, executions.rowcount, turns_.rowcount


@variant("recovery-codes-executions")
def _recovery_codes_executions() -> None:
    # Recovery records why an execution stopped on its approval: the approved row whose
    # execution it interrupts also gets statusCode TURN_INTERRUPTED.
    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        return await _recover(self, now, execution_code="TURN_INTERRUPTED")

    patch(Storage, "recover", recover)


@variant("recovery-expires-overdue")
def _recovery_expires_overdue() -> None:
    # A pending approval whose deadline passed while the host was down is recorded as
    # expired (PLAN_APPROVAL_TIMEOUT) at startup; only those still within it are
    # interrupted.
    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        return await _recover(self, now, expire_overdue=True)

    patch(Storage, "recover", recover)


@variant("recovery-deletes-interrupted-artifacts")
def _recovery_deletes_interrupted_artifacts() -> None:
    # A plan that a restart interrupted can never be approved, so startup recovery tidies
    # the project up: the artifact files of the approvals it interrupts are removed.
    original = Storage.recover

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self._conn.execute(
            "SELECT s.workspace_root, a.artifact_path FROM plan_approvals a "
            "JOIN sessions s ON s.id = a.session_id "
            "WHERE a.status = 'pending' AND a.artifact_path IS NOT NULL "
            "AND s.workspace_root IS NOT NULL"
        ) as cursor:
            doomed = [(str(r[0]), str(r[1])) for r in await cursor.fetchall()]
        counts = await original(self, now)
        for root, relative in doomed:
            with contextlib.suppress(OSError):
                (Path(root) / relative).unlink()
        return counts

    patch(Storage, "recover", recover)


# -- storage and migration ----------------------------------------------------------------


@variant("migrated-db-not-wal")
def _migrated_db_not_wal() -> None:
    # WAL is switched on when the host creates a database; a v8 file it migrates keeps
    # the rollback journal it had.
    import aiosqlite

    from reference_host import storage as storage_module
    from reference_host.datadir import DB_FILE

    async def _open(cls: type[Storage], data_dir: Path) -> Storage:
        conn = await aiosqlite.connect(
            storage_module._file_uri(data_dir / DB_FILE), uri=True, isolation_level=None
        )
        try:
            await conn.execute("PRAGMA busy_timeout = 5000")
            storage = cls(conn)
            await storage._check_version()
            await conn.execute("PRAGMA synchronous = FULL")
            await storage._prepare_schema()  # a new database is created in WAL mode here
            await conn.execute("PRAGMA foreign_keys = ON")
        except BaseException:
            await conn.close()
            raise
        return storage

    patch(Storage, "_open", classmethod(_open))


@variant("reports-found-schema-version")
def _reports_found_schema_version() -> None:
    # storageSchemaVersion is the version the host found when it opened the database (10
    # for one it created): after migrating a v8 file it still announces 8.
    original_check = Storage._check_version
    original_init = Host.initialize

    async def check_version(self: Storage) -> None:
        found = await self.user_version()
        self._found_version = found or 10
        await original_check(self)

    async def initialize(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await original_init(self, params)
        found = getattr(self.storage, "_found_version", None)
        if found is not None:
            result["storageSchemaVersion"] = found
        return result

    patch(Storage, "_check_version", check_version)
    patch(Host, "initialize", initialize)


# -- found by the fairness audit: rules the contract now states -----------------------------

PROVIDER_TIMEOUT_MS = 60_000


@variant("provider-timeout-on-host-clock")
def _provider_timeout_on_host_clock() -> None:
    # The host measures its provider timeout (60 s) on the host clock, which the contract
    # keeps for deadlines and timers and says a provider wait is not: a model that thinks
    # for minutes of host time fails the turn with PROVIDER_ERROR.
    original = TurnRunner._ask_model

    async def ask(self: TurnRunner, session: Any, turn_id: str, messages: Any) -> Any:
        call = asyncio.ensure_future(original(self, session, turn_id, messages))
        expired: list[bool] = []

        async def expire() -> None:
            if not call.done():
                expired.append(True)
                call.cancel()

        clock = self.host.clock
        timer = clock.call_at(clock.now_ms() + PROVIDER_TIMEOUT_MS, expire)
        try:
            return await call
        except asyncio.CancelledError:
            if expired:
                raise HostError(
                    "PROVIDER_ERROR",
                    "the provider did not answer within 60 s of host time",
                    {"kind": "timeout", "status": None},
                ) from None
            raise
        finally:
            timer.cancel()

    patch(TurnRunner, "_ask_model", ask)


@variant("no-project-plan-workspace-invalid")
def _no_project_plan_workspace_invalid() -> None:
    # SubmitPlan in a session without a project is answered WORKSPACE_INVALID (a root that
    # no longer exists) instead of WORKSPACE_REQUIRED, which the contract states (P30).
    from reference_host.approvals import Approvals

    original = Approvals.submit

    async def submit(self: Approvals, session: Any, turn_id: str, args: dict[str, Any]) -> Any:
        activity = self.host.activity_of(session.id)
        if session.workspace_root is None and activity.pending_approval_id is None:
            raise HostError("WORKSPACE_INVALID", "the session has no workspace root")
        return await original(self, session, turn_id, args)

    patch(Approvals, "submit", submit)


CASES = [
    BrokenCase(
        "artifact-ends-with-newline",
        "artifact_integrity",
        "byte_for_byte and final",
        "R2.7",
        "artifact bytes differ from the submitted markdown",
    ),
    BrokenCase(
        "title-trimmed",
        "artifact_integrity",
        "exactly_as_submitted and surrounding",
        "R2.6",
        "submitted were '  Add a cache  '",
    ),
    BrokenCase(
        "refuses-empty-plan",
        "artifact_integrity",
        "byte_for_byte and empty",
        "R2.7",
        "the host lists no approval for the session",
    ),
    BrokenCase(
        "plan-folder-file-is-write-failure",
        "artifact_integrity",
        "plan_folder_is_unsafe and regular",
        "R2.12",
        "expected PLAN_PATH_UNSAFE",
    ),
    BrokenCase(
        "reads-recorded-length-only",
        "artifact_integrity",
        "after_submission_is_not_approved and extended",
        "P13",
        "expected the host to refuse",
    ),
    BrokenCase(
        "failed-execution-completed",
        "execution",
        "whose_turn_fails",
        "R4.5",
        "'running', 'completed']",
    ),
    BrokenCase(
        "plan-turn-open-until-decided",
        "submit_plan",
        "submitting_a_plan_ends_the_turn",
        "P11",
        "the turn is stored as",
    ),
    BrokenCase(
        "recovery-codes-executions",
        "restart_interruption",
        "still_waiting_in_the_queue and restarts",
        "R4.10",
        "recovery changed more than the execution state",
    ),
    BrokenCase(
        "recovery-expires-overdue",
        "restart_interruption",
        "deadline_passed_while_the_host_was_down",
        "R4.10",
        "storage showed the approval expired",
    ),
    BrokenCase(
        "recovery-deletes-interrupted-artifacts",
        "artifact_integrity",
        "stays_as_written_after and restarted",
        "C9",
        "is gone",
    ),
    BrokenCase(
        "migrated-db-not-wal",
        "migration",
        "migrated_database_has_the_published",
        "R7.5",
        "the database is in journal mode delete, not WAL",
    ),
    BrokenCase(
        "reports-found-schema-version",
        "migration",
        "upgraded_and_its_data_survives",
        "R7.4",
        "the host reports storage schema version 8",
    ),
    BrokenCase(
        "provider-timeout-on-host-clock",
        "deadline",
        "deadline_is_30_minutes_after",
        "R3.9",
        "PROVIDER_ERROR",
    ),
    BrokenCase(
        "no-project-plan-workspace-invalid",
        "submit_plan",
        "without_a_project",
        "R2.8",
        "WORKSPACE_REQUIRED",
    ),
]
