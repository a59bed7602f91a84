"""Deliberately broken variants of the reference host, to prove the suite's checks can fail.

Run as ``python tests/broken_hosts.py VARIANT --data-dir DIR --conformance``. Each variant
patches one behaviour of the reference host so that it breaks one clause, then serves
protocol v9 exactly like ``python -m reference_host``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import signal
import sys
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiosqlite

from reference_host import approvals, artifacts, commands, migration, shells, turns
from reference_host import host as host_module
from reference_host import storage as storage_module
from reference_host.approvals import Approvals
from reference_host.errors import HostError
from reference_host.host import Host
from reference_host.provider_client import ProviderConfig, complete
from reference_host.rpc import Dispatcher
from reference_host.server import serve
from reference_host.state import PermissionMode, deadline_for, ensure_idle_for, is_expired
from reference_host.storage import ApprovalRow, SessionRow, Storage
from reference_host.tasks import Tasks

Patch = Callable[[], None]
VARIANTS: dict[str, Patch] = {}


def patch(owner: object, name: str, value: object) -> None:
    """Replace ``owner.name`` in this host process (the variant's one broken piece)."""
    setattr(owner, name, value)


def variant(name: str) -> Callable[[Patch], Patch]:
    """Register a patch under ``name``."""

    def register(patch: Patch) -> Patch:
        VARIANTS[name] = patch
        return patch

    return register


@variant("accepts-protocol-8")
def _accepts_protocol_8() -> None:
    original = Host.initialize

    async def initialize(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        return await original(self, {**params, "protocolVersion": 9})

    patch(Host, "initialize", initialize)


@variant("schema-invalid-session")
def _schema_invalid_session() -> None:
    original = Host.session_wire

    def session_wire(self: Host, row: Any) -> dict[str, Any]:
        wire = original(self, row)
        wire["createdAt"] = "2026-01-01T00:00:00Z"  # the contract says epoch milliseconds
        return wire

    patch(Host, "session_wire", session_wire)


# -- §2: the artifact's bytes -------------------------------------------------------------


@variant("normalises-line-endings")
def _normalises_line_endings() -> None:
    # Hash and size are computed by write_artifact on these bytes, so they stay consistent
    # with the file: only a comparison with the submitted bytes can notice.
    original = approvals.encode_markdown

    def encode_markdown(markdown: str) -> bytes:
        return original(markdown.replace("\r\n", "\n").replace("\r", "\n"))

    patch(approvals, "encode_markdown", encode_markdown)


@variant("prepends-title")
def _prepends_title() -> None:
    original = Approvals.submit

    async def submit(
        self: Approvals, session: Any, turn_id: str, args: dict[str, Any]
    ) -> ApprovalRow:
        wrapped = f"# {args['title']}\n\n{args['markdown']}"
        return await original(self, session, turn_id, {**args, "markdown": wrapped})

    patch(Approvals, "submit", submit)


# -- §2: where the artifact goes ----------------------------------------------------------


@variant("reuses-file-name")
def _reuses_file_name() -> None:
    def create_truncating(plan_fd: int) -> tuple[str, int]:
        name = "plan.md"
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        # The earlier artifact is read-only: make it writable so that it is overwritten.
        with contextlib.suppress(FileNotFoundError):
            os.chmod(name, 0o644, dir_fd=plan_fd)
        return name, os.open(name, flags, artifacts.READ_ONLY, dir_fd=plan_fd)

    assert hasattr(artifacts, "_create_exclusive"), "nothing to patch"
    artifacts._create_exclusive = create_truncating


@variant("follows-symlinked-pi")
def _follows_symlinked_pi() -> None:
    assert hasattr(artifacts, "_DIR_FLAGS"), "nothing to patch"
    artifacts._DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC  # no O_NOFOLLOW


# -- §1: Plan gating ----------------------------------------------------------------------


@variant("offers-write-in-plan")
def _offers_write_in_plan() -> None:
    original = turns.offered_tools

    def offered_tools(mode: str) -> list[Any]:
        offered = original(mode)
        if mode == "plan":
            offered.append(turns._SPECS["Write"])
        return offered

    turns.offered_tools = offered_tools


@variant("accepts-submit-plan-beside-another-call")
def _accepts_submit_plan_beside_another_call() -> None:
    # Running each call as a batch of its own never meets the SubmitPlan-alone check.
    original = turns.TurnRunner._run_batch

    async def run_batch(
        self: turns.TurnRunner, session: Any, turn_id: str, calls: tuple[Any, ...], unattended: bool
    ) -> list[turns.CallOutcome]:
        outcomes: list[turns.CallOutcome] = []
        for call in calls:
            session = await self.host.require_session(session.id)
            outcomes += await original(self, session, turn_id, (call,), unattended)
        return outcomes

    patch(turns.TurnRunner, "_run_batch", run_batch)


# -- §2: what the approval records --------------------------------------------------------


def _store_altered(alter: Callable[[ApprovalRow], ApprovalRow]) -> None:
    original = Storage.insert_approval

    async def insert_approval(self: Storage, row: ApprovalRow) -> None:
        await original(self, alter(row))

    patch(Storage, "insert_approval", insert_approval)


WRONG_SHA256 = hashlib.sha256(b"not the artifact").hexdigest()


@variant("records-wrong-hash")
def _records_wrong_hash() -> None:
    _store_altered(lambda row: replace(row, artifact_sha256=WRONG_SHA256))


@variant("records-wrong-size")
def _records_wrong_size() -> None:
    _store_altered(lambda row: replace(row, artifact_bytes=(row.artifact_bytes or 0) + 1))


@variant("commits-row-before-flush")
def _commits_row_before_flush() -> None:
    # The flush (and its injected failure) happens only after the row is committed, so a
    # failed flush is reported but leaves the committed approval row behind.
    unflushed: dict[str, Path] = {}
    original_write = approvals.write_artifact
    original_insert = Storage.insert_approval

    def write_artifact(root: str, content: bytes, fault: artifacts.FaultCheck) -> Any:
        flush_fails = fault("artifactFlush")
        artifact = original_write(root, content, fault)
        if flush_fails:
            unflushed[artifact.relative_path] = Path(root, artifact.relative_path)
        return artifact

    async def insert_approval(self: Storage, row: ApprovalRow) -> None:
        await original_insert(self, row)
        path = unflushed.pop(row.artifact_path or "", None)
        if path is not None:
            path.unlink()
            raise HostError("ARTIFACT_WRITE_FAILED", "injected artifact flush failure")

    patch(approvals, "write_artifact", write_artifact)
    patch(Storage, "insert_approval", insert_approval)


# -- §3: the deadline and the decision ----------------------------------------------------


@variant("extends-deadline-on-read")
def _extends_deadline_on_read() -> None:
    # Every read of a session's approvals restarts the 30 minutes of those still pending,
    # in storage too, as a "sliding" deadline would.
    async def extend(host: Host, session_id: str) -> None:
        async with host.storage.transaction() as conn:
            await conn.execute(
                "UPDATE plan_approvals SET expires_at = ? "
                "WHERE session_id = ? AND status = 'pending'",
                (deadline_for(host.clock.now_ms()), session_id),
            )

    def extending(original: Any) -> Any:
        async def read(self: Host, params: dict[str, Any]) -> dict[str, Any]:
            await extend(self, params["sessionId"])
            result: dict[str, Any] = await original(self, params)
            return result

        return read

    for name in ("approval_get", "approval_list", "artifact_read"):
        setattr(Host, name, extending(getattr(Host, name)))


@variant("approves-on-timeout")
def _approves_on_timeout() -> None:
    # At the deadline the pending approval is recorded as approved (mode ask), not expired.
    async def expire(self: Approvals, approval_id: str) -> None:
        host = self.host
        row = await host.storage.get_approval(approval_id)
        if row is None or row.status != "pending":
            return
        if not is_expired(row.expires_at, host.clock.now_ms()):
            return
        approved = replace(
            row, status="approved", permission_mode="ask", decided_at=host.clock.now_ms()
        )
        await host.storage.update_approval(approved)
        host.set_activity(row.session_id, pending_approval_id=None)
        host.notify("approval/updated", {"approval": approvals.approval_wire(approved)})
        await host.publish_session(row.session_id)

    patch(Approvals, "expire", expire)


@variant("reject-grants-mode")
def _reject_grants_mode() -> None:
    # Rejecting also switches the session's permission mode to auto.
    original = Approvals.reject

    async def reject(self: Approvals, session_id: str, approval_id: str) -> dict[str, Any]:
        result = await original(self, session_id, approval_id)
        session = await self.host.require_session(session_id)
        await self.host.storage.update_session(replace(session, permission_mode="auto"))
        await self.host.publish_session(session_id)
        return result

    patch(Approvals, "reject", reject)


@variant("reject-reports-mode")
def _reject_reports_mode() -> None:
    # A rejected approval is reported with a selected permission mode. (Storage v10 cannot
    # hold one: plan_approvals has CHECK (status = 'approved' OR permission_mode IS NULL).)
    original = approvals.approval_wire

    def approval_wire(row: ApprovalRow) -> dict[str, Any]:
        wire = original(row)
        if row.status == "rejected":
            wire["permissionMode"] = "auto"
        return wire

    approvals.approval_wire = approval_wire
    patch(host_module, "approval_wire", approval_wire)


@variant("defaults-missing-permission-mode")
def _defaults_missing_permission_mode() -> None:
    # An approve without permissionMode is completed with "ask" before validation.
    original = Dispatcher._call

    async def call(self: Dispatcher, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "approval/approve" and isinstance(params, dict):
            params = {"permissionMode": "ask", **params}
        return await original(self, method, params)

    patch(Dispatcher, "_call", call)


# -- §5: what a pending approval allows ---------------------------------------------------


@variant("prompt-while-pending")
def _prompt_while_pending() -> None:
    # The idle check forgets the pending approval, so a prompt starts a new turn.
    async def session_prompt(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        activity = replace(self.activity_of(row.id), pending_approval_id=None)
        ensure_idle_for(activity, "a new prompt")
        return {"turnId": await self.turns.start(row, "prompt", params["text"])}

    patch(Host, "session_prompt", session_prompt)


@variant("shell-change-during-turn")
def _shell_change_during_turn() -> None:
    # A configuration change that only selects a shell skips the idle check.
    original = Host.session_configure

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        if set(params) != {"sessionId", "shellId"}:
            result: dict[str, Any] = await original(self, params)
            return result
        row = await self.require_session(params["sessionId"])
        if params["shellId"] is not None:
            host_module._require_shell(params["shellId"])
        updated = replace(row, shell_id=params["shellId"], updated_at=self.clock.now_ms())
        await self.storage.update_session(updated)
        return {"session": await self.publish_session(row.id)}

    patch(Host, "session_configure", session_configure)


# -- §4: approval is one transaction, and decides once -------------------------------------


@variant("approves-in-two-commits")
def _approves_in_two_commits() -> None:
    # The session is committed to Agent first; the approval row follows in a later commit,
    # so the approvalCommit fault (before that later commit) leaves the session in Agent.
    original = Approvals.approve

    async def approve(
        self: Approvals, session_id: str, approval_id: str, mode: PermissionMode
    ) -> dict[str, Any]:
        row = await self.require(session_id, approval_id)
        if row.status == "pending" and not is_expired(row.expires_at, self.host.clock.now_ms()):
            session = await self.host.require_session(session_id)
            agent = replace(session, mode="agent", permission_mode=mode)
            await self.host.storage.update_session(agent)
        return await original(self, session_id, approval_id, mode)

    patch(Approvals, "approve", approve)


@variant("double-approve")
def _double_approve() -> None:
    # An already approved approval may be approved again, starting another execution.
    original = approvals.ensure_decidable

    def ensure_decidable(facts: Any, now_ms: int) -> None:
        if facts.status == "approved":
            facts = replace(facts, status="pending")
        original(facts, now_ms)

    approvals.ensure_decidable = ensure_decidable
    original_approve = approvals.Approvals.approve

    async def approve(self: Any, session_id: str, approval_id: str, mode: str) -> Any:
        # ... and the host forgets the execution it is already running.
        self.host.set_activity(session_id, active_execution_id=None)
        return await original_approve(self, session_id, approval_id, mode)

    patch(approvals.Approvals, "approve", approve)


@variant("ignores-permission-mode")
def _ignores_permission_mode() -> None:
    # The session and the approval show the chosen mode, but the execution turn runs as auto.
    execution_turns: set[str] = set()
    original_start = turns.TurnRunner.start
    original_run_call = turns.TurnRunner._run_call

    async def start(
        self: turns.TurnRunner, session: SessionRow, kind: str, *args: Any, **kw: Any
    ) -> str:
        turn_id = await original_start(self, session, kind, *args, **kw)
        if kind == "execution":
            execution_turns.add(turn_id)
        return turn_id

    async def run_call(
        self: turns.TurnRunner, session: SessionRow, turn_id: str, call: Any, unattended: bool
    ) -> turns.CallOutcome:
        if turn_id in execution_turns:
            session = replace(session, permission_mode="auto")
        return await original_run_call(self, session, turn_id, call, unattended)

    patch(turns.TurnRunner, "start", start)
    patch(turns.TurnRunner, "_run_call", run_call)


@variant("keeps-old-permission-mode")
def _keeps_old_permission_mode() -> None:
    # Approval switches the session to Agent but keeps the permission mode it had before.
    approving: dict[str, PermissionMode] = {}
    original_approve = Approvals.approve
    original_write = Storage.write_session

    async def approve(
        self: Approvals, session_id: str, approval_id: str, mode: PermissionMode
    ) -> dict[str, Any]:
        approving[session_id] = (await self.host.require_session(session_id)).permission_mode
        try:
            return await original_approve(self, session_id, approval_id, mode)
        finally:
            approving.pop(session_id, None)

    async def write_session(conn: aiosqlite.Connection, session: SessionRow) -> None:
        if session.id in approving:
            session = replace(session, permission_mode=approving[session.id])
        await original_write(conn, session)

    patch(Approvals, "approve", approve)
    patch(Storage, "write_session", staticmethod(write_session))


# -- §4: restart recovery -----------------------------------------------------------------


async def _unfinished_executions(storage: Storage) -> list[str]:
    """Ids of the approvals whose execution is queued or running."""
    async with storage._conn.execute(
        "SELECT id FROM plan_approvals WHERE execution_state IN ('queued', 'running')"
    ) as cursor:
        return [row[0] for row in await cursor.fetchall()]


@variant("replays-queued-execution")
def _replays_queued_execution() -> None:
    # Recovery marks the executions interrupted, as it should, and then the host starts
    # each of them again as a new execution turn before it serves. The rows stay
    # interrupted: only the replayed work itself can give the variant away.
    replay: list[str] = []
    original_recover = Storage.recover
    original_schedule = Tasks.schedule_all

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        replay.extend(await _unfinished_executions(self))
        return await original_recover(self, now)

    async def schedule_all(self: Tasks) -> None:
        await original_schedule(self)
        host = self.host
        for approval_id in replay:
            row = await host.storage.get_approval(approval_id)
            assert row is not None
            session = await host.require_session(row.session_id)
            content = artifacts.read_artifact(session.workspace_root or "", row.artifact_path or "")
            prompt = approvals._execution_prompt(row, content)
            await host.turns.start(session, "execution", prompt)

    patch(Storage, "recover", recover)
    patch(Tasks, "schedule_all", schedule_all)


@variant("answers-before-recovery")
def _answers_before_recovery() -> None:
    # Recovery is deferred until the second request arrives: the first one (initialize) is
    # answered while the previous process's approvals are still pending in storage.
    deferred: list[tuple[Storage, int]] = []
    handled = 0
    original_recover = Storage.recover
    original_handle = Dispatcher.handle

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        deferred.append((self, now))
        return 0, 0, 0

    async def handle(self: Dispatcher, frame: Any) -> None:
        nonlocal handled
        if handled >= 1:
            while deferred:
                await original_recover(*deferred.pop())
        handled += 1
        await original_handle(self, frame)

    patch(Storage, "recover", recover)
    patch(Dispatcher, "handle", handle)


@variant("interrupted-execution-back-to-plan")
def _interrupted_execution_back_to_plan() -> None:
    # Recovery puts a session whose approved execution it interrupted back into Plan.
    original = Storage.recover

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        ids = await _unfinished_executions(self)
        counts = await original(self, now)
        async with self.transaction() as conn:
            for approval_id in ids:
                await conn.execute(
                    "UPDATE sessions SET mode = 'plan' WHERE id = "
                    "(SELECT session_id FROM plan_approvals WHERE id = ?)",
                    (approval_id,),
                )
        return counts

    patch(Storage, "recover", recover)


def _open_then(action: Callable[[Storage], Any]) -> None:
    original = Storage.open.__func__

    async def open_storage(cls: type[Storage], data_dir: Path) -> Storage:
        storage: Storage = await original(cls, data_dir)
        await action(storage)
        return storage

    patch(Storage, "open", classmethod(open_storage))


@variant("stores-boot-epoch")
def _stores_boot_epoch() -> None:
    # Each process records its boot epoch in a table of its own.
    async def record(storage: Storage) -> None:
        async with storage.transaction() as conn:
            await conn.execute("CREATE TABLE IF NOT EXISTS host_boots (epoch TEXT NOT NULL)")
            await conn.execute("INSERT INTO host_boots (epoch) VALUES (?)", (uuid.uuid4().hex,))

    _open_then(record)


@variant("stores-boot-epoch-setting")
def _stores_boot_epoch_setting() -> None:
    # Each process records its boot epoch in the published settings table: the schema
    # stays exactly v10.
    async def record(storage: Storage) -> None:
        await storage.set_setting("boot_epoch", uuid.uuid4().hex)

    _open_then(record)


# -- §7: the v8 -> v10 migration ----------------------------------------------------------


@variant("migrates-outside-transaction")
def _migrates_outside_transaction() -> None:
    # Each migration statement commits on its own (the connection is in autocommit mode).
    async def migrate(conn: aiosqlite.Connection, v10_statements: list[str]) -> None:
        await conn.execute("PRAGMA foreign_keys = OFF")
        try:
            for statement in migration.migration_statements(v10_statements):
                await conn.execute(statement)
        except aiosqlite.Error as exc:
            raise HostError("MIGRATION_FAILED", f"the v8 to v10 migration failed: {exc}") from exc

    storage_module.migrate_v8_to_v10 = migrate


@variant("writes-version-first")
def _writes_version_first() -> None:
    # user_version = 10 is committed before the transaction that migrates the data.
    original = storage_module.migrate_v8_to_v10

    async def migrate(conn: aiosqlite.Connection, v10_statements: list[str]) -> None:
        await conn.execute(f"PRAGMA user_version = {migration.V10}")
        await original(conn, v10_statements)

    storage_module.migrate_v8_to_v10 = migrate


# -- §6: scheduled Plan runs --------------------------------------------------------------


def _before_plan_refusal(work: Callable[[Tasks, dict[str, Any]], Any]) -> None:
    original = Tasks.run

    async def run(self: Tasks, row: dict[str, Any]) -> dict[str, Any]:
        if row["mode"] != "agent":
            await work(self, row)
        return await original(self, row)

    patch(Tasks, "run", run)


@variant("calls-provider-before-refusing-plan-task")
def _calls_provider_before_refusing_plan_task() -> None:
    # A Plan task's prompt goes to the model first; the refusal comes afterwards.
    async def ask_model(tasks: Tasks, row: dict[str, Any]) -> None:
        config = ProviderConfig(row["provider_base_url"], row["model"], None)

        async def ignore(_text: str) -> None:
            return None

        with contextlib.suppress(Exception):
            await complete(
                tasks.host.http,
                config,
                [{"role": "user", "content": row["prompt"]}],
                turns.offered_tools("plan"),
                ignore,
            )

    _before_plan_refusal(ask_model)


@variant("writes-artifact-for-plan-task")
def _writes_artifact_for_plan_task() -> None:
    # A Plan task gets a plan artifact written before it is refused.
    async def write(tasks: Tasks, row: dict[str, Any]) -> None:
        if row["workspace_root"] is not None:
            content = artifacts.encode_markdown(f"# {row['name']}\n\n{row['prompt']}\n")
            await asyncio.to_thread(
                artifacts.write_artifact, row["workspace_root"], content, tasks.host.faults.take
            )

    _before_plan_refusal(write)


# -- §5, §7: shells -----------------------------------------------------------------------


@variant("kills-only-direct-child")
def _kills_only_direct_child() -> None:
    # Timeout and cancellation end the shell process, not its process group, and the host
    # then stops listening to the command's output, as a host that waits for the shell
    # alone does. The command is reported ended; what it started in the background lives on
    # (until the harness reaps the host's leftovers).
    def kill_shell(process: asyncio.subprocess.Process) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(process.pid, signal.SIGKILL)
        transport = process._transport
        for fd in (1, 2):
            pipe = transport.get_pipe_transport(fd)
            if pipe is not None:
                pipe.close()

    commands._kill_group = kill_shell


@variant("ignores-default-shell")
def _ignores_default_shell() -> None:
    # Commands are announced with the selected shell's id but always run in sh.
    sh = shells.find("sh")
    assert sh is not None, "this variant needs sh"
    original = turns.run_command

    async def run_command(*, shell: shells.Shell, **kwargs: Any) -> commands.CommandResult:
        return await original(shell=replace(shell, path=sh.path), **kwargs)

    turns.run_command = run_command


def main(argv: list[str]) -> int:
    """Apply the named variant's patch and serve on stdio."""
    if not argv or argv[0] not in VARIANTS:
        print(
            f"usage: broken_hosts.py {{{'|'.join(sorted(VARIANTS))}}} --data-dir DIR",
            file=sys.stderr,
        )
        return 2
    VARIANTS[argv[0]]()
    return serve(argv[1:], sys.stdin.buffer, sys.stdout.buffer, sys.stderr)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
