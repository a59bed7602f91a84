"""Broken hosts: a held-out set (the migration and startup recovery with varied data),
written from the contract alone.

Nine of these twelve went uncaught at first; all are caught now. The v8 seeds
gained a decided approval without a decision time whose title is written with JSON
escapes, approvals inserted out of time order and a `system` transcript row; two
scenarios start on a v8 database of the scenario's project (its conversation goes on, its
due task runs), one restart has a pending plan beside another session's queued execution,
and one restarts again after the user left the Plan a recovery kept. The ninth,
recovery-closes-open-commands, fails the scenario that compares a crashed command's record
before and after the restart (the startup recovery changes approvals, executions and turns
only): its row is written as the command starts, before any of its output is streamed.
"""

from __future__ import annotations

import re
import weakref
from typing import Any

from hosts.allowed.fair_state_choices import record_commands_at_start
from hosts.registry import BrokenCase, patch, variant
from reference_host import migration, storage
from reference_host.host import Host
from reference_host.storage import Storage
from reference_host.tasks import Tasks
from reference_host.turns import TurnRunner, answered_only

# what a variant learnt about a store, kept beside it rather than on it
_MIGRATED: weakref.WeakSet[Storage] = weakref.WeakSet()
_RESTORED_TURNS: weakref.WeakKeyDictionary[Storage, list[tuple[str, str]]] = (
    weakref.WeakKeyDictionary()
)

_TITLE_EXPRESSION = (
    "CASE WHEN json_valid(proposal_json)\n"
    "       THEN coalesce(CAST(json_extract(proposal_json, '$.title') AS TEXT), '') ELSE '' END"
)
_RAW_TITLE = re.compile(r'"title"\s*:\s*"((?:[^"\\]|\\.)*)"')


def _rewrite_legacy_copy(old: str, new: str) -> None:
    """Replace one piece of the v8 plan_approvals copy (the migration's one changed piece)."""
    copy = migration._COPY_LEGACY_APPROVALS
    assert old in copy, f"the legacy copy has no {old!r}"
    patch(migration, "_COPY_LEGACY_APPROVALS", copy.replace(old, new, 1))


# P16 / R7.7 (v8.sql: the title is the proposal's "title", as text): the migration picks
# the title out of the raw proposal text with a pattern and keeps the string's JSON
# escapes as written, so a v8 title stored as "caf\u00e9" or with an escaped quote
# becomes the text `caf\u00e9`, not `café`.
@variant("legacy-title-escapes-kept")
def _legacy_title_escapes_kept() -> None:
    original = storage.migrate_v8_to_v10

    def raw_title(proposal: Any) -> str | None:
        match = _RAW_TITLE.search(proposal) if isinstance(proposal, str) else None
        return match.group(1) if match else None

    async def migrate(conn: Any, statements: list[str]) -> None:
        await conn.create_function("legacy_raw_title", 1, raw_title, deterministic=True)
        await original(conn, statements)

    _rewrite_legacy_copy(
        _TITLE_EXPRESSION, f"coalesce(legacy_raw_title(proposal_json), {_TITLE_EXPRESSION})"
    )
    patch(storage, "migrate_v8_to_v10", migrate)


# P16 (decidedAt is kept; none for a pending row): a v8 approved, rejected or
# changes_requested row whose decided_at is NULL (v8 allows it) is "repaired" with its
# created_at, so the legacy approval reads decidedAt = createdAt instead of null.
@variant("legacy-missing-decision-time-filled")
def _legacy_missing_decision_time_filled() -> None:
    _rewrite_legacy_copy("ELSE decided_at END", "ELSE coalesce(decided_at, created_at) END")


# P16 (v8.sql: legacy_proposal_json keeps the proposal and the request-changes feedback
# verbatim): a v8 row without feedback (NULL) is kept with "feedback": "" instead of null.
@variant("legacy-null-feedback-as-empty")
def _legacy_null_feedback_as_empty() -> None:
    _rewrite_legacy_copy("'feedback', feedback)", "'feedback', coalesce(feedback, ''))")


# R7.2 (approval/list is oldest first: createdAt never decreases along the list):
# approvals are listed in insertion (rowid) order. The host inserts its own approvals as
# they are created, so only rows whose insertion order differs from their createdAt show
# it: v8 rows the v8 program wrote out of created_at order, or approvals submitted while
# the clock was set back.
@variant("approval-list-in-row-order")
def _approval_list_in_row_order() -> None:
    async def list_approvals(self: Storage, session_id: str) -> list[storage.ApprovalRow]:
        async with self._conn.execute(
            f"SELECT {storage.APPROVAL_COLUMNS} FROM plan_approvals WHERE session_id = ? "
            "ORDER BY rowid",
            (session_id,),
        ) as cursor:
            rows = await cursor.fetchall()
        return [storage.ApprovalRow(*row) for row in rows]

    patch(Storage, "list_approvals", list_approvals)


# R7.7 / R1.3 (session/transcript reports each row, in id order; the role may be
# "system"): the only system rows the host writes itself are its new_context markers, so
# its transcript reader treats any other system row as hidden prompt material and leaves
# it out; a migrated v8 transcript loses its system rows.
@variant("transcript-skips-system-rows")
def _transcript_skips_system_rows() -> None:
    original = Host.session_transcript

    async def session_transcript(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await original(self, params)
        entries = result["entries"]
        return {
            "entries": [
                e for e in entries if e["role"] != "system" or e["content"].get("contextReset")
            ]
        }

    patch(Host, "session_transcript", session_transcript)


# R7.7 / R1.3 (the conversation survives the migration; the next turn's request carries
# the earlier turns): the provider history is built from the transcript rows of the
# session's recorded turns (a join on the turns table), so the rows of a migrated v8
# conversation, whose turns were never in a v10 turns table, are left out of the request.
@variant("migrated-history-not-sent")
def _migrated_history_not_sent() -> None:
    async def _history(self: TurnRunner, session_id: str) -> list[dict[str, Any]]:
        host_storage = self.host.storage
        async with host_storage._conn.execute(
            "SELECT id FROM turns WHERE session_id = ?", (session_id,)
        ) as cursor:
            known = {row[0] for row in await cursor.fetchall()}
        entries = await host_storage.transcript(session_id)
        contents = [content for _seq, turn, _role, content, _at in entries if turn in known]
        start = max((i for i, c in enumerate(contents) if c.get("contextReset")), default=0)
        kept = [{k: v for k, v in c.items() if k != "contextReset"} for c in contents[start:]]
        return answered_only(kept)

    patch(TurnRunner, "_history", _history)


# R7.7 / P29 (scheduled tasks survive the migration; a task keeps its time across a
# restart: an enabled task whose runAt is still ahead runs when it comes due): a start
# that migrated a v8 file treats the database as new and arms no task timer, so a v8
# task due later never runs in that process (it would after one more restart).
@variant("migrated-tasks-not-armed")
def _migrated_tasks_not_armed() -> None:
    prepare = Storage._prepare_schema
    schedule_all = Tasks.schedule_all

    async def _prepare_schema(self: Storage) -> None:
        if await self.user_version() == migration.V8:
            _MIGRATED.add(self)
        await prepare(self)

    async def schedule_all_unless_migrated(self: Tasks) -> None:
        if self.host.storage in _MIGRATED:
            return
        await schedule_all(self)

    patch(Storage, "_prepare_schema", _prepare_schema)
    patch(Tasks, "schedule_all", schedule_all_unless_migrated)


_ACTIVE_TURN_SESSIONS = "SELECT session_id FROM turns WHERE state = 'active'"


async def _finish_recovery(conn: Any, now: int) -> None:
    """The reference recovery's last two steps: active turns and running task runs."""
    await conn.execute(
        "UPDATE turns SET state = 'interrupted', ended_at = ? WHERE state = 'active'", (now,)
    )
    await conn.execute(
        "UPDATE scheduled_task_runs SET outcome = 'failed', error_code = 'TURN_INTERRUPTED', "
        "error_message = 'the host stopped before the run finished' WHERE outcome = 'running'"
    )


# R4.10 / C3 (recovery marks every earlier pending approval interrupted and every
# queued or running execution interrupted): the recovery finds its work through the turns
# the previous process left active, and interrupts the pending approvals and executions
# of those sessions only. A pending approval whose Plan turn had already ended, and an
# execution still queued without a turn, stay pending / queued after the restart.
@variant("recovery-follows-active-turns")
def _recovery_follows_active_turns() -> None:
    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self.transaction() as conn:
            approvals = await conn.execute(
                "UPDATE plan_approvals SET status = 'interrupted', "
                "status_code = 'TURN_INTERRUPTED', decided_at = ? WHERE status = 'pending' "
                f"AND session_id IN ({_ACTIVE_TURN_SESSIONS})",
                (now,),
            )
            executions = await conn.execute(
                "UPDATE plan_approvals SET execution_state = 'interrupted' "
                "WHERE execution_state IN ('queued', 'running') "
                f"AND session_id IN ({_ACTIVE_TURN_SESSIONS})"
            )
            turns = await conn.execute("SELECT count(*) FROM turns WHERE state = 'active'")
            row = await turns.fetchone()
            await _finish_recovery(conn, now)
        return approvals.rowcount, executions.rowcount, int(row[0]) if row else 0

    patch(Storage, "recover", recover)


# R4.10 (every earlier pending approval and every queued or running execution, in every
# session): the recovery assumes a crash leaves either plans waiting or executions
# running, not both: when it finds a queued or running execution it interrupts the
# executions and leaves pending approvals (of other sessions) pending.
@variant("recovery-one-kind-per-start")
def _recovery_one_kind_per_start() -> None:
    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        approvals = executions = 0
        async with self.transaction() as conn:
            cursor = await conn.execute(
                "UPDATE plan_approvals SET execution_state = 'interrupted' "
                "WHERE execution_state IN ('queued', 'running')"
            )
            executions = cursor.rowcount
            if executions == 0:
                cursor = await conn.execute(
                    "UPDATE plan_approvals SET status = 'interrupted', "
                    "status_code = 'TURN_INTERRUPTED', decided_at = ? WHERE status = 'pending'",
                    (now,),
                )
                approvals = cursor.rowcount
            await _finish_recovery(conn, now)
        return approvals, executions, 0

    patch(Storage, "recover", recover)


# R4.10 / R4.13 (that is all recovery changes; a restart that finds nothing to recover
# changes no stored value): the host implements "a session whose pending approval was
# interrupted stays in Plan" by writing it at every start: a session whose latest
# approval is interrupted (TURN_INTERRUPTED) is set back to Plan, also when the user has
# since switched it to Agent and the restart is a later one with nothing to recover.
@variant("recovery-replans-latest-interrupted")
def _recovery_replans_latest_interrupted() -> None:
    original = Storage.recover

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        counts = await original(self, now)
        async with self.transaction() as conn:
            await conn.execute(
                "UPDATE sessions SET mode = 'plan', updated_at = ? WHERE mode <> 'plan' AND id IN ("
                "SELECT a.session_id FROM plan_approvals a WHERE a.status = 'interrupted' "
                "AND a.status_code = 'TURN_INTERRUPTED' AND NOT EXISTS ("
                "SELECT 1 FROM plan_approvals b WHERE b.session_id = a.session_id AND "
                "(b.created_at > a.created_at OR "
                "(b.created_at = a.created_at AND b.rowid > a.rowid))))",
                (now,),
            )
        return counts

    patch(Storage, "recover", recover)


# R4.11 / R7.2 / R4.14 (the turns the previous process left active are ended; the session
# is idle and takes a new prompt; session/get reports the active turn): the host restores
# each session's activity from storage at start, but reads the active turns before the
# recovery transaction commits, so a session whose turn was cut off keeps reporting that
# dead turn as activeTurnId and refuses prompts with SESSION_BUSY.
@variant("active-turn-restored-before-recovery")
def _active_turn_restored_before_recovery() -> None:
    original = Storage.recover
    init = Host.__init__

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self._conn.execute(
            "SELECT session_id, id FROM turns WHERE state = 'active'"
        ) as cursor:
            _RESTORED_TURNS[self] = [(r[0], r[1]) for r in await cursor.fetchall()]
        return await original(self, now)

    def __init__(self: Host, host_storage: Storage, *args: Any, **kwargs: Any) -> None:
        init(self, host_storage, *args, **kwargs)
        for session_id, turn_id in _RESTORED_TURNS.get(host_storage, []):
            self.set_activity(session_id, active_turn_id=turn_id)

    patch(Storage, "recover", recover)
    patch(Host, "__init__", __init__)


# R4.10 / C5 (recovery changes only approvals, executions and turns; command_audit
# holds what command/exited reported): a host that writes each command's row when it
# starts also "closes" at recovery the rows of commands the previous process left running,
# recording them cancelled with an end time, though no command/exited ever reported them
# so (and the process may still run).
@variant("recovery-closes-open-commands")
def _recovery_closes_open_commands() -> None:
    record_commands_at_start()
    original = Storage.recover

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        counts = await original(self, now)
        async with self.transaction() as conn:
            await conn.execute(
                "UPDATE command_audit SET cancelled = 1, ended_at = ?, "
                "duration_ms = max(0, ? - started_at) WHERE ended_at IS NULL",
                (now, now),
            )
        return counts

    patch(Storage, "recover", recover)


CASES = [
    BrokenCase(
        "recovery-closes-open-commands",
        "restart_interruption",
        "crash_leaves_the_record_of_the_command",
        "R4.10",
        "the restart changed the record of a command the crash cut short",
    ),
    BrokenCase(
        "legacy-null-feedback-as-empty",
        "migration",
        "v8_approval_that_was and pending",
        "P16",
        "legacy_proposal_json holds",
    ),
    BrokenCase(
        "recovery-follows-active-turns",
        "restart_interruption",
        "pending_approval_is_interrupted_when_the_host and crashes",
        "R4.10",
        "recovery did not run before the first answer",
    ),
    BrokenCase(
        "active-turn-restored-before-recovery",
        "restart_interruption",
        "running_execution_is_interrupted_when_the_host and crashes",
        "R4.11",
        "the restarted host shows the session busy",
    ),
    BrokenCase(
        "legacy-title-escapes-kept",
        "migration",
        "v8_approval_that_was and no_decision_time",
        "P16",
        "the legacy approval reads title 'Say \\\\\"caf",
    ),
    BrokenCase(
        "legacy-missing-decision-time-filled",
        "migration",
        "v8_approval_that_was and no_decision_time",
        "P16",
        "'decidedAt': 1700000700000",
    ),
    BrokenCase(
        "approval-list-in-row-order",
        "migration",
        "earlier_approvals_are_kept",
        "R7.2",
        "approvals are listed oldest first by createdAt, legacy ones too",
    ),
    BrokenCase(
        "transcript-skips-system-rows",
        "migration",
        "upgraded_and_its_data_survives",
        "R7.7",
        "the transcript of v8-session-0 reads differently",
    ),
    BrokenCase(
        "migrated-history-not-sent",
        "migration",
        "migrated_conversation_goes_on",
        "R7.7",
        "a migrated session's transcript is its conversation",
    ),
    BrokenCase(
        "migrated-tasks-not-armed",
        "migration",
        "migrated_scheduled_task_runs",
        "P29",
        "a task migrated from v8 keeps its time",
    ),
    BrokenCase(
        "recovery-one-kind-per-start",
        "restart_interruption",
        "queued_execution_and_another_session",
        "R4.10",
        "the other session's pending plan is pending after the restart",
    ),
    BrokenCase(
        "recovery-replans-latest-interrupted",
        "restart_interruption",
        "keeps_the_mode_the_user_chose",
        "R4.1",
        "mode changed from 'agent' to 'plan'",
    ),
]
