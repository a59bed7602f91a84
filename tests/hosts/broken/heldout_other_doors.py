"""Broken hosts: a held-out set (the same state through another door), written from the
contract alone."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

from hosts.registry import BrokenCase, patch, variant


def _prefixed(columns: str, alias: str) -> str:
    return ", ".join(f"{alias}.{column.strip()}" for column in columns.split(","))


# P16 / R7.2: v8 plan_approvals rows become legacy rows of the v10 table, and
# `approval/list` and `approval/get` show them with turnId null and artifact null.
# Bug: approval/list joins each approval to the turn that submitted it (to order and
# scope the list by turn), so a legacy approval, which has no turn, drops out of the
# list; approval/get (one row by id) still shows it.
@variant("od-approval-list-drops-legacy")
def approval_list_drops_legacy() -> None:
    from reference_host import storage as storage_module
    from reference_host.storage import APPROVAL_COLUMNS, ApprovalRow, Storage

    async def list_approvals(self: Storage, session_id: str) -> list[ApprovalRow]:
        query = (
            f"SELECT {_prefixed(APPROVAL_COLUMNS, 'a')} FROM plan_approvals a "
            "JOIN turns t ON t.id = a.turn_id WHERE a.session_id = ? "
            "ORDER BY a.created_at, a.rowid"
        )
        async with self._conn.execute(query, (session_id,)) as cursor:
            rows = await cursor.fetchall()
        return [storage_module.ApprovalRow(*row) for row in rows]

    patch(Storage, "list_approvals", list_approvals)


# R1.3: a context reset (new_context) changes what the model is shown, not what is kept:
# the transcript table and session/transcript still hold the whole conversation, every
# row in id order.
# Bug: session/transcript reuses the "history since the last reset" logic the turn runner
# uses for provider requests, so after a new_context it lists only the rows from the
# reset on; the transcript table still holds every row.
@variant("od-transcript-from-last-reset")
def transcript_from_last_reset() -> None:
    from reference_host.host import Host

    async def session_transcript(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        rows = await self.storage.transcript(row.id)
        start = max(
            (i for i, r in enumerate(rows) if isinstance(r[3], dict) and r[3].get("contextReset")),
            default=0,
        )
        entries = [
            {"seq": seq, "turnId": turn, "role": role, "content": content, "createdAt": at}
            for seq, turn, role, content, at in rows[start:]
        ]
        return {"entries": entries}

    patch(Host, "session_transcript", session_transcript)


# R1.3 / R7.7: session/transcript reports each transcript row in `id` order.
# Bug: the transcript is read ORDER BY created_at, id: the same as id order while the
# host clock only moves forward, but once the clock is set back between two turns of a
# session, the later turn's rows are listed before the earlier turn's (and the next
# provider request, built from the same read, carries them in that order too).
@variant("od-transcript-ordered-by-time")
def transcript_ordered_by_time() -> None:
    import json

    from reference_host.storage import Storage

    async def transcript(self: Storage, session_id: str) -> list[tuple[int, Any, str, Any, int]]:
        async with self._conn.execute(
            "SELECT id, turn_id, role, content, created_at FROM transcript "
            "WHERE session_id = ? ORDER BY created_at, id",
            (session_id,),
        ) as cursor:
            rows = await cursor.fetchall()
        return [(r[0], r[1], r[2], json.loads(r[3]), r[4]) for r in rows]

    patch(Storage, "transcript", transcript)


# R7.2 (and §6: a run's session is a session like any other): session/list lists every
# session exactly as session/get reports it.
# Bug: session/list leaves out the sessions that scheduled runs created (it was meant to
# list the user's sessions); session/get, task/list's lastRun.sessionId and the sessions
# table still have them.
@variant("od-session-list-hides-run-sessions")
def session_list_hides_run_sessions() -> None:
    from reference_host.storage import _SESSION_COLUMNS, SessionRow, Storage, _session

    async def list_sessions(self: Storage) -> list[SessionRow]:
        async with self._conn.execute(
            f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id NOT IN "
            "(SELECT session_id FROM scheduled_task_runs WHERE session_id IS NOT NULL) "
            "ORDER BY created_at, id"
        ) as cursor:
            rows = await cursor.fetchall()
        return [_session(row) for row in rows]

    patch(Storage, "list_sessions", list_sessions)


# R7.2 / C4: session/list lists every session exactly as session/get reports it,
# activeExecutionId included; from the approve result on, while the execution is queued
# or running, activeExecutionId names it.
# Bug: session/list fills activeExecutionId in one query over plan_approvals, picking the
# execution whose state is `running`; a queued execution (not yet started, e.g. held
# back by holdExecution) reads null in session/list while session/get names it.
@variant("od-list-active-exec-running-only")
def list_active_exec_running_only() -> None:
    from reference_host.host import Host

    async def session_list(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        async with self.storage._conn.execute(
            "SELECT session_id, execution_id FROM plan_approvals WHERE execution_state = 'running'"
        ) as cursor:
            running = {str(r[0]): str(r[1]) for r in await cursor.fetchall()}
        sessions = []
        for row in await self.storage.list_sessions():
            wire = self.session_wire(row)
            wire["activeExecutionId"] = running.get(row.id)
            sessions.append(wire)
        return {"sessions": sessions}

    patch(Host, "session_list", session_list)


# R7.2 / R4.5: every change of what session/get reports (the active execution included)
# is announced by a session/updated carrying the whole session as it now is, so the last
# one sent reads as session/get does; when the execution's turn ends activeExecutionId is
# null, in notifications, approval/get and storage alike.
# Bug: when an execution's turn ends without completing (cancelled or failed), the
# execution is finished in a clean-up step after the turn has been announced: the last
# session/updated still names the execution while session/get already reads null. A
# completed execution is finished in the right order.
@variant("od-interrupted-exec-stale-session-updated")
def interrupted_exec_stale_session_updated() -> None:
    from reference_host.turns import TurnRunner

    original = TurnRunner._end

    async def _end(
        self: TurnRunner,
        session_id: str,
        turn_id: str,
        approval: Any,
        on_end: Any,
        outcome: str,
        error: Any,
    ) -> None:
        if approval is None or outcome == "completed":
            await original(self, session_id, turn_id, approval, on_end, outcome, error)
            return
        host = self.host
        await host.storage.end_turn(turn_id, outcome, host.clock.now_ms())
        if on_end is not None:
            await on_end(outcome, error)
        host.set_activity(session_id, active_turn_id=None)
        host.notify(
            "turn/ended",
            {
                "sessionId": session_id,
                "turnId": turn_id,
                "outcome": outcome,
                "error": error.to_data() if error else None,
            },
        )
        await host.publish_session(session_id)
        await host.approvals.execution_finished(approval.id, "interrupted")

    patch(TurnRunner, "_end", _end)


# P29: `runAt: null` in a task/update takes the task off the schedule, answered, listed
# and stored as null (task/list and the scheduled_tasks row hold what the answer says).
# Bug: task/update writes only the fields whose new value is not null (a generic
# "update the given fields" helper that treats null as "not given"): the answer and the
# timer say runAt null, but task/list and the row keep the old time (and a restart arms
# it again).
@variant("od-task-update-null-runat-not-stored")
def task_update_null_runat_not_stored() -> None:
    from reference_host.tasks import Tasks

    async def update(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require(params["taskId"])
        columns = {
            "name": "name",
            "prompt": "prompt",
            "mode": "mode",
            "permissionMode": "permission_mode",
            "runAt": "run_at",
            "enabled": "enabled",
        }
        changes = {column: params[key] for key, column in columns.items() if key in params}
        if "provider" in params:
            changes["provider_base_url"] = params["provider"]["baseUrl"]
            changes["model"] = params["provider"]["model"]
        if "enabled" in changes:
            changes["enabled"] = int(changes["enabled"])
        changes["updated_at"] = self.host.clock.now_ms()
        stored = {column: value for column, value in changes.items() if value is not None}
        await self.host.storage.update_task(row["id"], stored)
        updated = {**row, **changes}
        self._arm(row["id"], updated["run_at"] if updated["enabled"] else None)
        return {"task": await self.wire(updated)}

    patch(Tasks, "update", update)


# R7.3: `shellId: null` clears the session's own choice: from then on the session reads
# shellId null in the answer, in session/get and in sessions.shell_id (and survives a
# restart like every setting, R4.3).
# Bug: the host serves sessions from an in-memory copy and writes changes through with
# `shell_id = COALESCE(?, shell_id)`, so clearing the shell is answered and read back as
# null, and commands use the default, but the sessions row keeps the old shell; after a
# restart session/get shows the old shell again.
@variant("od-session-shell-null-not-persisted")
def session_shell_null_not_persisted() -> None:
    import aiosqlite

    from reference_host.storage import SessionRow, Storage

    original_get = Storage.get_session
    original_list = Storage.list_sessions
    original_insert = Storage.insert_session

    def cache_of(storage: Storage) -> dict[str, SessionRow]:
        cache: dict[str, SessionRow] = storage.__dict__.setdefault("_od_sessions", {})
        return cache

    async def get_session(self: Storage, session_id: str) -> SessionRow | None:
        cache = cache_of(self)
        if session_id in cache:
            return cache[session_id]
        row = await original_get(self, session_id)
        if row is not None:
            cache[session_id] = row
        return row

    async def list_sessions(self: Storage) -> list[SessionRow]:
        cache = cache_of(self)
        return [cache.get(row.id, row) for row in await original_list(self)]

    async def insert_session(self: Storage, session: SessionRow) -> None:
        await original_insert(self, session)
        cache_of(self)[session.id] = session

    async def write_session(self: Storage, conn: aiosqlite.Connection, session: SessionRow) -> None:
        await conn.execute(
            "UPDATE sessions SET mode = ?, permission_mode = ?, provider_base_url = ?, "
            "model = ?, shell_id = COALESCE(?, shell_id), updated_at = ? WHERE id = ?",
            (
                session.mode,
                session.permission_mode,
                session.provider_base_url,
                session.model,
                session.shell_id,
                session.updated_at,
                session.id,
            ),
        )
        cache_of(self)[session.id] = session

    original_transaction = Storage.transaction

    @asynccontextmanager
    async def transaction(self: Storage) -> AsyncIterator[aiosqlite.Connection]:
        try:
            async with original_transaction(self) as conn:
                yield conn
        except BaseException:
            cache_of(self).clear()  # a rolled-back write: read the rows again
            raise

    patch(Storage, "transaction", transaction)
    patch(Storage, "get_session", get_session)
    patch(Storage, "list_sessions", list_sessions)
    patch(Storage, "insert_session", insert_session)
    patch(Storage, "write_session", write_session)


# R4.3: every field of an approval (executionState included) always equals its
# plan_approvals row; execution_state always holds the execution's current state, the
# same as approval/get reports.
# Bug: queued -> running is kept in the host's memory (the row update is left to the
# end of the execution): approval/get, approval/list and the notifications say
# `running`, the plan_approvals row still says `queued` until the turn ends.
@variant("od-running-state-only-in-memory")
def running_state_only_in_memory() -> None:
    from reference_host import state
    from reference_host.approvals import Approvals, approval_wire
    from reference_host.storage import ApprovalRow, Storage

    original_get = Storage.get_approval
    original_list = Storage.list_approvals
    original_update = Storage.update_approval

    def overlay_of(storage: Storage) -> dict[str, ApprovalRow]:
        overlay: dict[str, ApprovalRow] = storage.__dict__.setdefault("_od_running", {})
        return overlay

    async def get_approval(self: Storage, approval_id: str) -> ApprovalRow | None:
        overlay = overlay_of(self)
        if approval_id in overlay:
            return overlay[approval_id]
        return await original_get(self, approval_id)

    async def list_approvals(self: Storage, session_id: str) -> list[ApprovalRow]:
        overlay = overlay_of(self)
        return [overlay.get(row.id, row) for row in await original_list(self, session_id)]

    async def update_approval(self: Storage, row: ApprovalRow) -> None:
        overlay_of(self).pop(row.id, None)
        await original_update(self, row)

    async def execution_running(self: Approvals, approval_id: str, turn_id: str) -> None:
        row = await self._execution(approval_id)
        assert row.execution_state is not None
        running = replace(
            row,
            execution_state=state.advance_execution(row.execution_state, "running"),
            execution_turn_id=turn_id,
        )
        overlay_of(self.host.storage)[running.id] = running
        self._notify_execution(running, turn_id)
        self.host.notify("approval/updated", {"approval": approval_wire(running)})

    patch(Storage, "get_approval", get_approval)
    patch(Storage, "list_approvals", list_approvals)
    patch(Storage, "update_approval", update_approval)
    patch(Approvals, "execution_running", execution_running)


# R3.11 / R7.2: an earlier approval's deadline never expires a later one of the same
# session, nor takes it out of its session's pendingApprovalId; session/get's
# pendingApprovalId names the waiting approval (C2).
# Bug: the expiry timer clears the session's pending slot as soon as any of its
# approvals reaches its deadline, before checking that this approval is the one still
# pending. A rejected plan's timer firing while a revision waits empties
# pendingApprovalId in session/get and session/list, though approval/get and
# approval/list show the revision pending.
@variant("od-stale-timer-clears-pending")
def stale_timer_clears_pending() -> None:
    from reference_host.approvals import Approvals

    original = Approvals.expire

    async def expire(self: Approvals, approval_id: str) -> None:
        host = self.host
        row = await host.storage.get_approval(approval_id)
        if row is not None and host.clock.now_ms() >= row.expires_at:
            host.set_activity(row.session_id, pending_approval_id=None)
        await original(self, approval_id)

    patch(Approvals, "expire", expire)


# R7.2: approval/get, approval/list and the approval/updated that announced it report
# the same record; the suite may read the list at any time.
# Bug: approval/list is served from a per-session cache, dropped whenever a plan is
# submitted, approved, rejected or its execution moves, but not when the expiry timer
# fires: a list read before the deadline is served again afterwards, still `pending`,
# while approval/get says `expired`.
@variant("od-approval-list-cache-misses-expiry")
def approval_list_cache_misses_expiry() -> None:
    from reference_host.approvals import Approvals
    from reference_host.host import Host

    def cache_of(host: Any) -> dict[str, dict[str, Any]]:
        cache: dict[str, dict[str, Any]] = host.__dict__.setdefault("_od_approval_lists", {})
        return cache

    async def approval_list(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        cache = cache_of(self)
        session_id = params["sessionId"]
        if session_id in cache:
            return cache[session_id]
        from reference_host.approvals import approval_wire

        row = await self.require_session(session_id)
        result = {
            "approvals": [approval_wire(a) for a in await self.storage.list_approvals(row.id)]
        }
        cache[session_id] = result
        return result

    def dropping(name: str, session_of: Any) -> None:
        original = getattr(Approvals, name)

        async def wrapped(self: Approvals, *args: Any, **kwargs: Any) -> Any:
            try:
                return await original(self, *args, **kwargs)
            finally:
                session_id = await session_of(self, *args)
                if session_id is not None:
                    cache_of(self.host).pop(session_id, None)

        patch(Approvals, name, wrapped)

    async def by_session(self: Approvals, session: Any, *rest: Any) -> str | None:
        return str(session.id) if hasattr(session, "id") else str(session)

    async def by_approval(self: Approvals, approval_id: str, *rest: Any) -> str | None:
        row = await self.host.storage.get_approval(approval_id)
        return row.session_id if row is not None else None

    dropping("submit", by_session)
    dropping("approve", by_session)
    dropping("reject", by_session)
    dropping("execution_running", by_approval)
    dropping("execution_finished", by_approval)
    patch(Host, "approval_list", approval_list)


# R7.2: every change of what session/get reports is announced by a session/updated
# carrying the whole session as it now is; session/configure's session/updated comes
# before its answer and reports the same session.
# Bug: session/configure builds its session/updated from the stored row with only the
# first named setting applied (the notification is sent from inside the loop over the
# changes, once, on the first one); a configure that changes one setting is announced
# right, one that changes several at once announces only the first of them, while its
# answer and session/get carry all of them.
@variant("od-configure-updated-first-change-only")
def configure_updated_first_change_only() -> None:
    from reference_host.host import Host

    original = Host.session_configure

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        before = await self.storage.get_session(params["sessionId"])
        sent: list[dict[str, Any]] = []
        notify = self.notify

        def capture(method: str, body: dict[str, Any]) -> None:
            if (
                method == "session/updated"
                and not sent
                and body["session"]["sessionId"] == params["sessionId"]
            ):
                sent.append(body)
                return
            notify(method, body)

        self.notify = capture
        try:
            result = await original(self, params)
        finally:
            self.notify = notify
        if sent and before is not None:
            first = {
                "mode": "mode",
                "permissionMode": "permissionMode",
                "provider": "provider",
                "shellId": "shellId",
            }
            wire = dict(self.session_wire(before))
            for key in first:
                if key in params:
                    wire[key] = sent[0]["session"][key]
                    break
            notify("session/updated", {"session": wire})
        return result

    patch(Host, "session_configure", session_configure)


# R7.2: approval/list lists a session's approvals oldest first: createdAt never decreases
# along the list.
# Bug: approval/list is ordered by insertion (rowid), taken to be the same as oldest
# first. It is, while the host clock only moves forward; once the clock is set back
# between two plans of one session (or a v8 table held its rows out of time order), the
# later-inserted plan with the earlier createdAt comes second.
@variant("od-approval-list-insertion-order")
def approval_list_insertion_order() -> None:
    from reference_host.storage import APPROVAL_COLUMNS, ApprovalRow, Storage

    async def list_approvals(self: Storage, session_id: str) -> list[ApprovalRow]:
        async with self._conn.execute(
            f"SELECT {APPROVAL_COLUMNS} FROM plan_approvals WHERE session_id = ? ORDER BY rowid",
            (session_id,),
        ) as cursor:
            rows = await cursor.fetchall()
        return [ApprovalRow(*row) for row in rows]

    patch(Storage, "list_approvals", list_approvals)


# R5.9: an approval is found, listed and decided only through its own session
# (approval/list of a session lists that session's approvals).
# Bug: approval/list lists the plans of the session's project (every session bound to
# the same workspace root), since they share one .pi/plan folder; approval/get still
# finds an approval only through its own session. A session without a project lists
# its own approvals (it has none).
@variant("od-approval-list-by-project")
def approval_list_by_project() -> None:
    from reference_host.approvals import approval_wire
    from reference_host.host import Host
    from reference_host.storage import APPROVAL_COLUMNS, ApprovalRow

    async def approval_list(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        if row.workspace_root is None:
            approvals = await self.storage.list_approvals(row.id)
        else:
            async with self.storage._conn.execute(
                f"SELECT {_prefixed(APPROVAL_COLUMNS, 'a')} FROM plan_approvals a "
                "JOIN sessions s ON s.id = a.session_id WHERE s.workspace_root = ? "
                "ORDER BY a.created_at, a.rowid",
                (row.workspace_root,),
            ) as cursor:
                approvals = [ApprovalRow(*r) for r in await cursor.fetchall()]
        return {"approvals": [approval_wire(a) for a in approvals]}

    patch(Host, "approval_list", approval_list)


# R4.7: execution/updated's turnId names the execution's turn, always once that turn
# has started (running, completed, and interrupted by a cancel or a failure after it
# started); only before it started may it be null.
# Bug: the interrupted execution/updated is built from the approval record the turn was
# started with (taken at approve time, before the turn existed), so an execution
# interrupted after its turn started is announced with turnId null; the completed one
# is built from the stored row and names the turn.
@variant("od-interrupted-exec-updated-null-turn")
def interrupted_exec_updated_null_turn() -> None:
    from reference_host import state
    from reference_host.approvals import Approvals, approval_wire
    from reference_host.state import ExecutionState

    async def execution_finished(self: Approvals, approval_id: str, final: ExecutionState) -> None:
        row = await self._execution(approval_id)
        assert row.execution_state is not None
        done = replace(row, execution_state=state.advance_execution(row.execution_state, final))
        await self.host.storage.update_approval(done)
        self.host.set_activity(row.session_id, active_execution_id=None)
        turn_id = row.execution_turn_id if final == "completed" else None
        self._notify_execution(done, turn_id)
        self.host.notify("approval/updated", {"approval": approval_wire(done)})

    patch(Approvals, "execution_finished", execution_finished)


# R5.1: a cancelled turn ends with outcome `cancelled`, also in storage (turns.state).
# Bug: an execution's turn records in `turns.state` the state its execution ends in, so
# a cancelled execution turn is stored `interrupted` while turn/ended says `cancelled`;
# a cancelled prompt turn is stored `cancelled`.
@variant("od-cancelled-exec-turn-stored-interrupted")
def cancelled_exec_turn_stored_interrupted() -> None:
    from reference_host.storage import Storage
    from reference_host.turns import TurnRunner

    original_end = TurnRunner._end
    original_end_turn = Storage.end_turn

    async def _end(
        self: TurnRunner,
        session_id: str,
        turn_id: str,
        approval: Any,
        on_end: Any,
        outcome: str,
        error: Any,
    ) -> None:
        if approval is not None and outcome == "cancelled":
            execution_turns = self.host.storage.__dict__.setdefault("_od_exec_turns", set())
            execution_turns.add(turn_id)
        await original_end(self, session_id, turn_id, approval, on_end, outcome, error)

    async def end_turn(self: Storage, turn_id: str, state: str, at: int) -> None:
        if turn_id in self.__dict__.get("_od_exec_turns", set()):
            state = "interrupted"
        await original_end_turn(self, turn_id, state, at)

    patch(TurnRunner, "_end", _end)
    patch(Storage, "end_turn", end_turn)


CASES = [
    BrokenCase(
        "od-approval-list-drops-legacy",
        "migration",
        "earlier_approvals_are_kept_and_a_pending",
        "R7.2",
        "approval/list of v8-session-1 lists",
    ),
    BrokenCase(
        "od-transcript-from-last-reset",
        "plan_tools",
        "a_new_context_keeps_the_earlier_conversation",
        "R1.3",
        "session/transcript reports",
    ),
    BrokenCase(
        "od-transcript-ordered-by-time",
        "sessions",
        "a_conversation_keeps_its_order_when_the",
        "R1.3",
        "session/transcript's seq does not increase from entry to entry",
    ),
    BrokenCase(
        "od-session-list-hides-run-sessions",
        "scheduled_plan",
        "a_run_works_in_the_project_exactly",
        "R7.2",
        "the run's session",
    ),
    BrokenCase(
        "od-list-active-exec-running-only",
        "turn_boundaries",
        "changing_the_configuration_while_an_approved_plan",
        "R7.2",
        "two reports of one record disagreed: session/list shows",
    ),
    BrokenCase(
        "od-interrupted-exec-stale-session-updated",
        "execution",
        "an_execution_whose_turn_is_cancelled_is",
        "R7.2",
        "two reports of one record disagreed: the last session/updated",
    ),
    BrokenCase(
        "od-task-update-null-runat-not-stored",
        "scheduled_plan",
        "a_task_taken_off_the_schedule_is",
        "P29",
        "task/list reports other values",
    ),
    BrokenCase(
        "od-session-shell-null-not-persisted",
        "shell",
        "a_session_whose_shell_of_its_own",
        "R7.3",
        "the session still names dash in storage",
    ),
    BrokenCase(
        "od-running-state-only-in-memory",
        "execution",
        "an_approved_plan_is_queued_runs_and_completes",
        "R4.3",
        "the stored approval disagrees with the protocol",
    ),
    BrokenCase(
        "od-stale-timer-clears-pending",
        "deadline",
        "a_plan_submitted_after_a_rejected_one",
        "R3.8",
        "the session names the pending approval None, though the plan titled 'S",
    ),
    BrokenCase(
        "od-approval-list-cache-misses-expiry",
        "deadline",
        "deciding_one_plan_leaves_another_sessions_plan",
        "R3.11",
        "at its deadline the other session's plan reads pending",
    ),
    BrokenCase(
        "od-configure-updated-first-change-only",
        "sessions",
        "a_change_of_two_settings_at_once",
        "R7.2",
        "the last session/updated after the change shows",
    ),
    BrokenCase(
        "od-approval-list-insertion-order",
        "approval",
        "plans_from_either_side_of_a_round",
        "R7.2",
        "approval/list lists",
    ),
    BrokenCase(
        "od-approval-list-by-project",
        "isolation",
        "another_session_of_the_same_project_does",
        "R5.9",
        "the second session lists another session's plans",
    ),
    BrokenCase(
        "od-interrupted-exec-updated-null-turn",
        "execution",
        "an_execution_whose_turn_is_cancelled_is",
        "R4.7",
        "execution/updated reports execution",
    ),
    BrokenCase(
        "od-cancelled-exec-turn-stored-interrupted",
        "execution",
        "an_execution_whose_turn_is_cancelled_is",
        "R5.1",
        "but its turns row reads interrupted",
    ),
]
