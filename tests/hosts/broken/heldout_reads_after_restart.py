"""Broken hosts: a held-out set (reads after restart), written from the contract alone.

Four of these eleven went uncaught at first; all are caught now, by a second restart after
a recovery, a command before and after a restart in one session, two tasks due at one
instant across a restart, and a plan file changed while no host ran."""

from __future__ import annotations

import asyncio
import base64
import contextvars
import itertools
import weakref
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

from hosts.registry import BrokenCase, patch, variant
from reference_host import artifacts, commands, turns
from reference_host.approvals import Approvals
from reference_host.storage import ApprovalRow, SessionRow, Storage
from reference_host.tasks import Tasks
from reference_host.turns import TurnRunner

_RUNS_FAILED = (
    "UPDATE scheduled_task_runs SET outcome = 'failed', error_code = 'TURN_INTERRUPTED', "
    "error_message = 'the host stopped before the run finished' WHERE outcome = 'running'"
)


async def _recover(
    storage: Storage,
    now: int,
    *,
    turns_where: str = "state = 'active'",
    before_executions: str | None = None,
    executions_where: str = "execution_state IN ('queued', 'running')",
    runs: str = _RUNS_FAILED,
) -> tuple[int, int, int]:
    """The reference's start-up recovery (one transaction), with one of its statements
    written another way."""
    async with storage.transaction() as conn:
        approvals = await conn.execute(
            "UPDATE plan_approvals SET status = 'interrupted', "
            "status_code = 'TURN_INTERRUPTED', decided_at = ? WHERE status = 'pending'",
            (now,),
        )
        if before_executions is not None:
            await conn.execute(before_executions)
        executions = await conn.execute(
            f"UPDATE plan_approvals SET execution_state = 'interrupted' WHERE {executions_where}"
        )
        turns = await conn.execute(
            f"UPDATE turns SET state = 'interrupted', ended_at = ? WHERE {turns_where}", (now,)
        )
        await conn.execute(runs, (now,) if "?" in runs else ())
    return approvals.rowcount, executions.rowcount, turns.rowcount


@variant("recovery-restamps-interrupted-turns")
def _recovery_restamps_interrupted_turns() -> None:
    # R4.10 / R4.1 (Storage, no boot epoch): the start-up recovery ends "every turn that is
    # not finished", written as a list of the finished states that forgets `interrupted`:
    # a second restart with nothing to recover stamps a new ended_at on the turns the first
    # recovery already interrupted.
    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        return await _recover(
            self, now, turns_where="state NOT IN ('completed', 'failed', 'cancelled')"
        )

    patch(Storage, "recover", recover)


@variant("recovery-appends-a-failed-run")
def _recovery_appends_a_failed_run() -> None:
    # P28: a run cut short by a restart is recorded as a new `failed` run (an append-only run
    # log: "the run failed at start-up"), instead of ending the run's own record: the
    # original scheduled_task_runs row still reads `running`, and lastRun names a run id
    # and startedAt the task never had (or the stale `running` one).
    appended = (
        "INSERT INTO scheduled_task_runs (id, task_id, session_id, started_at, outcome, "
        "error_code, error_message) SELECT 'run_' || lower(hex(randomblob(16))), task_id, "
        "session_id, ?, 'failed', 'TURN_INTERRUPTED', 'the host stopped before the run "
        "finished' FROM scheduled_task_runs r WHERE outcome = 'running' AND NOT EXISTS "
        "(SELECT 1 FROM scheduled_task_runs f WHERE f.task_id = r.task_id "
        "AND f.session_id IS r.session_id AND f.error_code = 'TURN_INTERRUPTED')"
    )

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        return await _recover(self, now, runs=appended)

    patch(Storage, "recover", recover)


@variant("command-ids-restart-from-one")
def _command_ids_restart_from_one() -> None:
    # C5 / R4.3 (Commands and shells: the audit row's id is the commandId; what you reported
    # survives): a command id is the session's id and the number of the command in that
    # session, counted in memory from 1 at each start of the host; so the first command of a
    # session after a restart reuses the id of its first command before, and its audit row
    # (written as an upsert keyed by id) replaces the earlier command's record.
    counters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Iterator[int]]] = (
        weakref.WeakKeyDictionary()
    )
    session_of_command: contextvars.ContextVar[str] = contextvars.ContextVar("session")
    original_new_id = commands.new_id
    original_run = turns.run_command

    def new_id(prefix: str) -> str:
        session_id = session_of_command.get(None)
        if prefix != "cmd" or session_id is None:
            return original_new_id(prefix)
        per_session = counters.setdefault(asyncio.get_running_loop(), {})
        counter = per_session.setdefault(session_id, itertools.count(1))
        return f"{session_id}-cmd-{next(counter)}"

    async def run_command(**kwargs: Any) -> Any:
        token = session_of_command.set(kwargs["session_id"])
        try:
            return await original_run(**kwargs)
        finally:
            session_of_command.reset(token)

    patch(commands, "new_id", new_id)
    patch(turns, "run_command", run_command)


@variant("restart-arms-one-task-per-instant")
def _restart_arms_one_task_per_instant() -> None:
    # P29 (a task keeps its time across a restart; every enabled task whose runAt comes due
    # runs, however many at one moment): at start-up the host rebuilds its timer table keyed
    # by the due time, so of several tasks due at the same instant only the last one listed
    # is armed. Tasks created or updated while the host runs are armed one by one, as before.
    async def schedule_all(self: Tasks) -> None:
        now = self.host.clock.now_ms()
        due: dict[int, str] = {}
        for row in await self.host.storage.list_tasks():
            if row["enabled"] and row["run_at"] is not None and row["run_at"] > now:
                due[row["run_at"]] = row["id"]
        for run_at, task_id in due.items():
            self._arm(task_id, run_at)

    patch(Tasks, "schedule_all", schedule_all)


@variant("recovery-drops-queued-execution")
def _recovery_drops_queued_execution() -> None:
    # R4.5 / R4.10 (startup recovery marks every queued or running execution interrupted,
    # every other field as it was): an execution still `queued` at the restart "never
    # started", so recovery takes it off the approval (execution id and state cleared) rather
    # than marking it interrupted; a running one is interrupted as it should be.
    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        return await _recover(
            self,
            now,
            before_executions=(
                "UPDATE plan_approvals SET execution_id = NULL, execution_state = NULL, "
                "execution_turn_id = NULL WHERE execution_state = 'queued'"
            ),
            executions_where="execution_state = 'running'",
        )

    patch(Storage, "recover", recover)


@variant("reject-answers-before-commit")
def _reject_answers_before_commit() -> None:
    # R4.3 (Shutdown and crashes: a response or notification reports state already stored):
    # a reject is terminal and needs no transaction with the session, so the host hands its
    # row to a write-behind queue (flushed a second later, before any other write, and at a
    # clean exit) and answers at once. The host's own reads see the queued row; a crash right
    # after the answer loses the reject, and the restarted host shows the approval
    # `interrupted`.
    queues: weakref.WeakKeyDictionary[Storage, dict[str, ApprovalRow]] = weakref.WeakKeyDictionary()
    original_transaction = Storage.transaction
    original_insert = Storage.insert_approval
    original_get = Storage.get_approval
    original_list = Storage.list_approvals
    original_close = Storage.close

    def queue_of(storage: Storage) -> dict[str, ApprovalRow]:
        return queues.setdefault(storage, {})

    async def flush(storage: Storage) -> None:
        queue = queue_of(storage)
        for approval_id, row in list(queue.items()):
            async with original_transaction(storage) as conn:
                await Storage.write_approval(conn, row)
            if queue.get(approval_id) is row:
                del queue[approval_id]

    @asynccontextmanager
    async def transaction(self: Storage) -> AsyncIterator[Any]:
        await flush(self)
        async with original_transaction(self) as conn:
            yield conn

    async def insert_approval(self: Storage, row: ApprovalRow) -> None:
        await flush(self)
        await original_insert(self, row)

    async def get_approval(self: Storage, approval_id: str) -> ApprovalRow | None:
        return queue_of(self).get(approval_id) or await original_get(self, approval_id)

    async def list_approvals(self: Storage, session_id: str) -> list[ApprovalRow]:
        queue = queue_of(self)
        return [queue.get(row.id, row) for row in await original_list(self, session_id)]

    async def close(self: Storage) -> None:
        await flush(self)
        await original_close(self)

    pending_flushes: set[asyncio.Task[None]] = set()

    async def reject(self: Approvals, session_id: str, approval_id: str) -> dict[str, Any]:
        storage = self.host.storage
        queued: list[ApprovalRow] = []

        async def update_approval(row: ApprovalRow) -> None:
            if row.status != "rejected":  # an expiry found on the way is written as before
                await Storage.update_approval(storage, row)
                return
            queued.append(row)
            queue_of(storage)[row.id] = row

        patch(storage, "update_approval", update_approval)
        try:
            result = await original_reject(self, session_id, approval_id)
        finally:
            del storage.update_approval
        if queued:

            async def later() -> None:
                await asyncio.sleep(1.0)
                await flush(storage)

            task = asyncio.get_running_loop().create_task(later())
            pending_flushes.add(task)
            task.add_done_callback(pending_flushes.discard)
        return result

    original_reject = Approvals.reject
    patch(Storage, "transaction", transaction)
    patch(Storage, "insert_approval", insert_approval)
    patch(Storage, "get_approval", get_approval)
    patch(Storage, "list_approvals", list_approvals)
    patch(Storage, "close", close)
    patch(Approvals, "reject", reject)


@variant("unverified-reads-after-restart")
def _unverified_reads_after_restart() -> None:
    # P13 (artifact/read checks the bytes against the recorded SHA-256 and size, and never
    # returns bytes that disagree with the record): the host checks reads against the digest
    # it keeps for the artifacts it wrote itself; an approval loaded from the database after
    # a restart has no such entry, and its artifact is read back as the file now is.
    written: weakref.WeakKeyDictionary[Approvals, set[str]] = weakref.WeakKeyDictionary()
    original_submit = Approvals.submit
    original_read = Approvals.read_artifact

    async def submit(self: Approvals, session: SessionRow, turn_id: str, args: Any) -> ApprovalRow:
        row = await original_submit(self, session, turn_id, args)
        written.setdefault(self, set()).add(row.id)
        return row

    async def read_artifact(self: Approvals, row: ApprovalRow) -> dict[str, Any]:
        if row.id in written.get(self, set()) or row.artifact_path is None:
            return await original_read(self, row)
        session = await self.host.require_session(row.session_id)
        if session.workspace_root is None:
            return await original_read(self, row)
        content = await asyncio.to_thread(
            artifacts.read_artifact, session.workspace_root, row.artifact_path
        )
        return {
            "approvalId": row.id,
            "path": row.artifact_path,
            "contentBase64": base64.b64encode(content).decode("ascii"),
            "sha256": row.artifact_sha256,
            "byteSize": row.artifact_bytes,
        }

    patch(Approvals, "submit", submit)
    patch(Approvals, "read_artifact", read_artifact)


@variant("restart-rewrites-task-schedule")
def _restart_rewrites_task_schedule() -> None:
    # R4.1 (Storage, no boot epoch: a restart that finds nothing to recover changes no stored
    # value): while it arms the timers at start-up the host saves each armed task's schedule
    # back, which stamps the scheduled_tasks row's updated_at with the new process's clock.
    async def schedule_all(self: Tasks) -> None:
        now = self.host.clock.now_ms()
        for row in await self.host.storage.list_tasks():
            if row["enabled"] and row["run_at"] is not None and row["run_at"] > now:
                await self.host.storage.update_task(
                    row["id"], {"run_at": row["run_at"], "updated_at": now}
                )
                self._arm(row["id"], row["run_at"])

    patch(Tasks, "schedule_all", schedule_all)


@variant("unanswered-calls-after-restart")
def _unanswered_calls_after_restart() -> None:
    # Model provider (a call that never got its result because a restart ended the turn must
    # not reach a later request unanswered) / R1.3: the host leaves out the unanswered calls
    # of turns it cancelled itself, but an interrupted turn's assistant message goes back to
    # the provider with its tool_calls and no tool message after it.
    async def _history(self: TurnRunner, session_id: str) -> list[dict[str, Any]]:
        storage = self.host.storage
        entries = await storage.transcript(session_id)
        async with storage._conn.execute(
            "SELECT id FROM turns WHERE session_id = ? AND state = 'interrupted'", (session_id,)
        ) as cursor:
            interrupted = {row[0] for row in await cursor.fetchall()}
        contents = [content for _seq, _turn, _role, content, _at in entries]
        start = max((i for i, c in enumerate(contents) if c.get("contextReset")), default=0)
        kept = [
            ({k: v for k, v in c.items() if k != "contextReset"}, entries[i][1] in interrupted)
            for i, c in enumerate(contents[start:], start)
        ]
        return _paired(kept)

    patch(TurnRunner, "_history", _history)


def _paired(messages: list[tuple[dict[str, Any], bool]]) -> list[dict[str, Any]]:
    """The reference's pairing of calls and results, except for the messages marked as kept
    as they are (those of interrupted turns)."""
    answered = {str(m.get("tool_call_id")) for m, _ in messages if m.get("role") == "tool"}
    made: set[str] = set()
    kept: list[dict[str, Any]] = []
    for message, as_is in messages:
        calls = message.get("tool_calls") or []
        if as_is:
            made.update(str(call.get("id")) for call in calls)
            kept.append(message)
            continue
        paired = [call for call in calls if str(call.get("id")) in answered]
        made.update(str(call.get("id")) for call in paired)
        if len(paired) != len(calls):
            message = {k: v for k, v in message.items() if k != "tool_calls"}
            if paired:
                message["tool_calls"] = paired
            elif not message.get("content"):
                continue
        if message.get("role") == "tool" and str(message.get("tool_call_id")) not in made:
            continue
        kept.append(message)
    return kept


CASES = [
    BrokenCase(
        "recovery-appends-a-failed-run",
        "scheduled_plan",
        "run_under_way_when_the_host and restarts",
        "P28",
        "after the restart task/list shows the last run",
    ),
    BrokenCase(
        "recovery-drops-queued-execution",
        "restart_interruption",
        "an_execution_still_waiting_in_the_queue_is",
        "C8",
        "when the restarted host answered its first request",
    ),
    BrokenCase(
        "reject-answers-before-commit",
        "approval",
        "rejecting_keeps_the_session_in_plan_with_its",
        "R4.3",
        "the stored approval disagrees with the protocol",
    ),
    BrokenCase(
        "restart-rewrites-task-schedule",
        "restart_interruption",
        "a_restart_with_nothing_to_recover_changes_nothing",
        "R4.1",
        "a restart with nothing to recover changed stored values",
    ),
    BrokenCase(
        "unanswered-calls-after-restart",
        "restart_interruption",
        "a_message_whose_calls_a_restart_cut_short",
        "C3",
        "the new turn ended",
    ),
    BrokenCase(
        "recovery-restamps-interrupted-turns",
        "restart_interruption",
        "a_second_restart_after_a_recovery_changes_nothing",
        "R4.1",
        "a restart with nothing to recover changed stored values",
    ),
    BrokenCase(
        "command-ids-restart-from-one",
        "shell",
        "a_command_after_a_restart_is_recorded_beside",
        "C5",
        "every command keeps its own record",
    ),
    BrokenCase(
        "restart-arms-one-task-per-instant",
        "scheduled_plan",
        "tasks_due_at_the_same_time_all_run",
        "P29",
        "enabled tasks that came due",
    ),
    BrokenCase(
        "unverified-reads-after-restart",
        "restart_interruption",
        "a_plan_file_changed_while_the_host_was",
        "P13",
        "that disagree with the record",
    ),
]
