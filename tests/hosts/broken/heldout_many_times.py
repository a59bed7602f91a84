"""Broken hosts: a held-out set (counts and repetitions), written from the contract alone."""

from __future__ import annotations

import contextvars
import heapq
import itertools
import json
import os
from collections import Counter
from dataclasses import replace
from typing import Any

from hosts.registry import BrokenCase, patch, variant


# R7.2: approval/list lists a session's approvals oldest first (createdAt never decreases
# along the list). Bug: approval ids are a per-process sequence (`apr_<n>_<salt>`) and the
# list is ordered by id, as text, on the belief that ids grow with creation: once a session
# holds approval 9 and approval 10 of the process, "apr_10_..." sorts before "apr_9_...".
@variant("approval-list-ordered-by-id-text")
def approval_list_ordered_by_id_text() -> None:
    from reference_host import ids
    from reference_host.host import Host
    from reference_host.storage import APPROVAL_COLUMNS, ApprovalRow, Storage

    original_init = Host.__init__

    def init(self: Host, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self.__dict__["_approval_numbers"] = itertools.count(1)

    def new_id(self: Host, prefix: str) -> str:
        if prefix == "apr":
            number = next(self.__dict__["_approval_numbers"])
            return f"apr_{number}_{os.urandom(4).hex()}"
        return ids.new_id(prefix)

    async def list_approvals(self: Storage, session_id: str) -> list[ApprovalRow]:
        async with self._conn.execute(
            f"SELECT {APPROVAL_COLUMNS} FROM plan_approvals WHERE session_id = ? ORDER BY id",
            (session_id,),
        ) as cursor:
            rows = await cursor.fetchall()
        return [ApprovalRow(*row) for row in rows]

    patch(Host, "__init__", init)
    patch(Host, "new_id", new_id)
    patch(Storage, "list_approvals", list_approvals)


# R1.3: a session is one agent whose whole conversation (since the last new_context) is
# shown to the model in the next turn; the next turn's request carries the earlier turns.
# Bug: a fixed-size context window: the history rebuilt at the start of a turn keeps only
# the last 40 stored messages, so a long conversation silently loses its first turns.
@variant("history-window-last-forty")
def history_window_last_forty() -> None:
    from reference_host.turns import TurnRunner, answered_only

    async def history(self: TurnRunner, session_id: str) -> list[dict[str, Any]]:
        entries = await self.host.storage.transcript(session_id)
        contents = [content for _seq, _turn, _role, content, _at in entries]
        start = max((i for i, c in enumerate(contents) if c.get("contextReset")), default=0)
        kept = [{k: v for k, v in c.items() if k != "contextReset"} for c in contents[start:]]
        return answered_only(kept[-40:])

    patch(TurnRunner, "_history", history)


# P7: a requestId names one question among all the host's sessions, and a question asked
# after a restart never has the id of one asked before it (a client may still hold the
# old one). Bug: request ids come from an in-memory counter (`perm_1`, `perm_2`, ...) that
# starts again at one in every process: the first question after a restart reuses the id
# of the first question before it.
@variant("permission-ids-restart-at-one")
def permission_ids_restart_at_one() -> None:
    from reference_host import ids, permissions

    numbers = itertools.count(1)

    def new_id(prefix: str) -> str:
        if prefix == "perm":
            return f"perm_{next(numbers)}"
        return ids.new_id(prefix)

    patch(permissions, "new_id", new_id)


# R7.3, P20: command/output pieces are numbered by seq from 0 for each command (each
# command counts its own pieces, no gap, no number used twice). Bug: the numbering counter
# lives on the turn, not on the command: a turn's second command starts numbering where
# the first one stopped instead of at 0.
@variant("output-seq-counted-per-turn")
def output_seq_counted_per_turn() -> None:
    from reference_host import commands

    original_supervise = commands._supervise
    current_turn: contextvars.ContextVar[str | None] = contextvars.ContextVar(
        "current_turn", default=None
    )
    last_of_turn: dict[str, Any] = {}

    class TurnCollector(commands._Collector):
        def __init__(self) -> None:
            super().__init__()
            turn = current_turn.get()
            if turn is not None:
                before = last_of_turn.get(turn)
                if before is not None:
                    self.seq = before.seq
                last_of_turn[turn] = self

    async def supervise(process: Any, read_ends: list[int], **kwargs: Any) -> Any:
        token = current_turn.set(kwargs.get("turn_id"))
        try:
            return await original_supervise(process, read_ends, **kwargs)
        finally:
            current_turn.reset(token)

    patch(commands, "_Collector", TurnCollector)
    patch(commands, "_supervise", supervise)


# P29 (and Ordering): one clock move can make many timers due, and each of them fires in
# that move; every enabled task whose runAt comes due runs, however many are due at the
# same moment. Bug: to keep the loop responsive the clock fires at most four timers per
# move; the rest stay due and only fire on the next clock move.
@variant("clock-fires-four-timers-per-move")
def clock_fires_four_timers_per_move() -> None:
    from reference_host.clock import Clock

    async def fire_due(self: Clock) -> None:
        fired = 0
        while self._timers and self._timers[0].due_ms <= self.now_ms() and fired < 4:
            timer = heapq.heappop(self._timers)
            if not timer.cancelled:
                await timer.callback()
                fired += 1
        self._schedule_wakeup()

    patch(Clock, "fire_due", fire_due)


# R2.4: the artifact name must be new for every submission, also for identical plans
# submitted at one instant; an existing file is never replaced. Bug: artifacts are named
# after their content (`plan-<sha256 prefix>.md`), with one fallback name (`-2`) for a
# collision: the third submission of the same markdown in a workspace finds both names
# taken and fails with ARTIFACT_WRITE_FAILED, creating no approval.
@variant("artifact-name-two-tries")
def artifact_name_two_tries() -> None:
    import hashlib

    from reference_host import approvals, artifacts
    from reference_host.errors import HostError

    original_write = artifacts.write_artifact
    content_of: contextvars.ContextVar[bytes] = contextvars.ContextVar("content", default=b"")

    def create_exclusive(plan_fd: int) -> tuple[str, int]:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        stem = "plan-" + hashlib.sha256(content_of.get()).hexdigest()[:16]
        for name in (f"{stem}.md", f"{stem}-2.md"):
            try:
                return name, os.open(name, flags, artifacts.READ_ONLY, dir_fd=plan_fd)
            except FileExistsError:
                continue
            except OSError as exc:
                raise HostError(
                    "ARTIFACT_WRITE_FAILED", f"cannot create the artifact: {exc}"
                ) from exc
        raise HostError("ARTIFACT_WRITE_FAILED", "no unused artifact name could be found")

    def write_artifact(root: str, content: bytes, fault: Any) -> Any:
        token = content_of.set(content)
        try:
            return original_write(root, content, fault)
        finally:
            content_of.reset(token)

    patch(artifacts, "_create_exclusive", create_exclusive)
    patch(approvals, "write_artifact", write_artifact)


# P7: an answer covers its one call: a later call asks again, in the same turn or another,
# also when it runs the very command or writes the very file allowed before. Bug: a
# convenience memory: once the user has allowed the same tool with the same input twice
# in a session, the third such call runs without asking.
@variant("permission-remembered-after-two-allows")
def permission_remembered_after_two_allows() -> None:
    from reference_host.permissions import PermissionBroker

    original_ask = PermissionBroker.ask
    allowed: Counter[tuple[str, str, str]] = Counter()

    async def ask(
        self: PermissionBroker, session_id: str, turn_id: str, tool: str, tool_input: Any
    ) -> bool:
        key = (session_id, tool, json.dumps(tool_input, sort_keys=True))
        if allowed[key] >= 2:
            return True
        answer = await original_ask(self, session_id, turn_id, tool, tool_input)
        if answer:
            allowed[key] += 1
        return answer

    patch(PermissionBroker, "ask", ask)


# R4.8, R5.7 (and R7.2): while an approval is pending the session refuses a prompt with
# APPROVAL_PENDING, and session/get reports its pendingApprovalId. Bug: what each session
# is busy with is kept in a small cache of the eight sessions changed most recently; when
# a ninth session becomes busy, the least recently changed entry is dropped, and with it
# the pending approval (or active execution) of that session.
@variant("activity-cache-of-eight-sessions")
def activity_cache_of_eight_sessions() -> None:
    from reference_host.host import Host
    from reference_host.state import Activity

    def set_activity(self: Host, session_id: str, **changes: str | None) -> None:
        current = self.activity.pop(session_id, Activity())
        self.activity[session_id] = replace(current, **changes)
        while len(self.activity) > 8:
            self.activity.pop(next(iter(self.activity)))

    patch(Host, "set_activity", set_activity)


# C5: every command is recorded in command_audit, its row's id the commandId; the rows
# stay (the start-up recovery changes nothing there). Bug: command ids come from an
# in-memory counter (`cmd_1`, `cmd_2`, ...) that starts again after a restart, and the
# audit write is an upsert on id: the first command after a restart overwrites the row of
# the first command before it.
@variant("command-ids-restart-at-one")
def command_ids_restart_at_one() -> None:
    from reference_host import commands, ids

    numbers = itertools.count(1)

    def new_id(prefix: str) -> str:
        if prefix == "cmd":
            return f"cmd_{next(numbers)}"
        return ids.new_id(prefix)

    patch(commands, "new_id", new_id)


# R7.2: session/list lists every session exactly as session/get reports it. Bug: the list
# is a "recent sessions" query, newest first, LIMIT 10: the eleventh session pushes the
# oldest one out of the list, though session/get still finds it.
@variant("session-list-ten-most-recent")
def session_list_ten_most_recent() -> None:
    from reference_host.storage import _SESSION_COLUMNS, SessionRow, Storage

    async def list_sessions(self: Storage) -> list[SessionRow]:
        async with self._conn.execute(
            f"SELECT {_SESSION_COLUMNS} FROM sessions ORDER BY created_at DESC, id DESC LIMIT 10"
        ) as cursor:
            rows = await cursor.fetchall()
        return [SessionRow(*row) for row in rows]

    patch(Storage, "list_sessions", list_sessions)


# R1.3: a call id is unique only within its message; a model may give a call in a later
# message the id of an earlier one, and each call still reaches later requests with its
# own result. Bug: when the history is rebuilt for a new turn, tool results are
# de-duplicated by tool_call_id (keeping the first, "a result written twice"), so the later
# call that reused an id loses its result in every later turn.
@variant("history-dedupes-repeated-call-ids")
def history_dedupes_repeated_call_ids() -> None:
    from reference_host.turns import TurnRunner, answered_only

    async def history(self: TurnRunner, session_id: str) -> list[dict[str, Any]]:
        entries = await self.host.storage.transcript(session_id)
        contents = [content for _seq, _turn, _role, content, _at in entries]
        start = max((i for i, c in enumerate(contents) if c.get("contextReset")), default=0)
        kept: list[dict[str, Any]] = []
        seen: set[str] = set()
        for content in contents[start:]:
            if content.get("role") == "tool":
                call_id = str(content.get("tool_call_id"))
                if call_id in seen:
                    continue
                seen.add(call_id)
            kept.append({k: v for k, v in content.items() if k != "contextReset"})
        return answered_only(kept)

    patch(TurnRunner, "_history", history)


# R3.9 (with R1.11): the deadline is createdAt + 30 minutes of each approval, created at
# its SubmitPlan; a revision after a rejection or an expiry is a new approval with its own
# deadline. Bug: so that reopening never extends a deadline (R3.10), the host keeps the
# session's deadline in memory and forgets it when the user approves or rejects; an expiry
# is not a decision, so the next plan of that session inherits the passed deadline.
@variant("deadline-cache-kept-after-expiry")
def deadline_cache_kept_after_expiry() -> None:
    from reference_host import approvals, state
    from reference_host.approvals import Approvals

    deadlines: dict[str, int] = {}
    submitting: contextvars.ContextVar[str | None] = contextvars.ContextVar(
        "submitting", default=None
    )
    original_deadline = state.deadline_for
    original_submit = Approvals.submit
    original_approve = Approvals.approve
    original_reject = Approvals.reject

    def deadline_for(created_at_ms: int) -> int:
        session_id = submitting.get()
        if session_id is None:
            return original_deadline(created_at_ms)
        return deadlines.setdefault(session_id, original_deadline(created_at_ms))

    async def submit(self: Approvals, session: Any, turn_id: str, args: dict[str, Any]) -> Any:
        token = submitting.set(session.id)
        try:
            return await original_submit(self, session, turn_id, args)
        finally:
            submitting.reset(token)

    async def approve(
        self: Approvals, session_id: str, approval_id: str, mode: Any
    ) -> dict[str, Any]:
        result = await original_approve(self, session_id, approval_id, mode)
        deadlines.pop(session_id, None)
        return result

    async def reject(self: Approvals, session_id: str, approval_id: str) -> dict[str, Any]:
        result = await original_reject(self, session_id, approval_id)
        deadlines.pop(session_id, None)
        return result

    patch(approvals, "deadline_for", deadline_for)
    patch(Approvals, "submit", submit)
    patch(Approvals, "approve", approve)
    patch(Approvals, "reject", reject)


# R4.5, R4.7: execution/updated reports every change of an execution's state once per
# change (never twice for the same state), with the execution's turnId. Bug: to send each
# state once, the host remembers the states it announced per session instead of per
# execution: a session's second execution announces none of running, completed or
# interrupted (approval/updated still reports them).
@variant("execution-updates-remembered-per-session")
def execution_updates_remembered_per_session() -> None:
    from reference_host.approvals import Approvals
    from reference_host.storage import ApprovalRow

    original = Approvals._notify_execution
    announced: set[tuple[str, str | None]] = set()

    def notify_execution(self: Approvals, row: ApprovalRow, turn_id: str | None) -> None:
        key = (row.session_id, row.execution_state)
        if key in announced:
            return
        announced.add(key)
        original(self, row, turn_id)

    patch(Approvals, "_notify_execution", notify_execution)


# R4.10: every start recovers every earlier approval and execution alike, also one made in
# a session that an earlier restart already recovered. Bug: the recovery remembers (in a
# settings row of its own) the sessions it has recovered and skips them on later starts:
# a plan left pending in such a session by a second crash stays `pending` after the third
# start.
@variant("recovery-remembers-recovered-sessions")
def recovery_skips_sessions_recovered_before() -> None:
    from reference_host.storage import Storage

    key = "recovered_sessions"

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self._conn.execute("SELECT value FROM settings WHERE key = ?", (key,)) as c:
            row = await c.fetchone()
        done: list[str] = json.loads(row[0]) if row is not None else []
        marks = ", ".join("?" for _ in done)
        skip = f" AND session_id NOT IN ({marks})" if done else ""
        async with self.transaction() as conn:
            touched: set[str] = set()
            for query in (
                "SELECT session_id FROM plan_approvals WHERE status = 'pending'",
                "SELECT session_id FROM plan_approvals "
                "WHERE execution_state IN ('queued', 'running')",
            ):
                async with conn.execute(query + skip, tuple(done)) as cursor:
                    touched.update(str(r[0]) for r in await cursor.fetchall())
            approvals = await conn.execute(
                "UPDATE plan_approvals SET status = 'interrupted', "
                "status_code = 'TURN_INTERRUPTED', decided_at = ? WHERE status = 'pending'" + skip,
                (now, *done),
            )
            executions = await conn.execute(
                "UPDATE plan_approvals SET execution_state = 'interrupted' "
                "WHERE execution_state IN ('queued', 'running')" + skip,
                tuple(done),
            )
            turns = await conn.execute(
                "UPDATE turns SET state = 'interrupted', ended_at = ? WHERE state = 'active'",
                (now,),
            )
            await conn.execute(
                "UPDATE scheduled_task_runs SET outcome = 'failed', "
                "error_code = 'TURN_INTERRUPTED', "
                "error_message = 'the host stopped before the run finished' "
                "WHERE outcome = 'running'"
            )
            if touched:
                await conn.execute(
                    "INSERT INTO settings (key, value) VALUES (?, ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (key, json.dumps(sorted({*done, *touched}))),
                )
        return approvals.rowcount, executions.rowcount, turns.rowcount

    patch(Storage, "recover", recover)


CASES = [
    BrokenCase(
        "approval-list-ordered-by-id-text",
        "approval",
        "plans_from_either_side_of_a_round",
        "R7.2",
        "approval/list lists",
    ),
    BrokenCase(
        "history-window-last-forty",
        "sessions",
        "a_long_conversation_reaches_the_model_whole",
        "R1.3",
        "the last request did not carry 'Question 1 of 20?",
    ),
    BrokenCase(
        "permission-ids-restart-at-one",
        "execution",
        "a_question_asked_after_a_restart_takes",
        "P7",
        "expected the host to refuse, but it answered",
        process="what it gets wrong lives in the host process, which an in-process restart keeps",
    ),
    BrokenCase(
        "output-seq-counted-per-turn",
        "shell",
        "the_cap_counts_each_commands_own_output",
        "P20",
        "the output of command",
    ),
    BrokenCase(
        "command-ids-restart-at-one",
        "shell",
        "a_command_after_a_restart_is_recorded",
        "C5",
        "the audit row of command",
        process="what it gets wrong lives in the host process, which an in-process restart keeps",
    ),
    BrokenCase(
        "session-list-ten-most-recent",
        "sessions",
        "every_session_is_listed_however_many_there",
        "R7.2",
        "session/list lists 10 of the 25 sessions the user created; missing",
    ),
    BrokenCase(
        "history-dedupes-repeated-call-ids",
        "sessions",
        "each_read_keeps_its_own_result_when",
        "R1.3",
        "the last request did not carry 'the second file holds pears",
    ),
    BrokenCase(
        "deadline-cache-kept-after-expiry",
        "deadline",
        "after_expiry_a_new_plan_can_be",
        "R3.9",
        "the plan created at",
    ),
    BrokenCase(
        "execution-updates-remembered-per-session",
        "execution",
        "after_a_cancelled_execution_the_sessions_next",
        "R4.9",
        "the execution was announced as",
    ),
    BrokenCase(
        "recovery-remembers-recovered-sessions",
        "restart_interruption",
        "a_plan_made_between_two_restarts_is",
        "R4.10",
        "when the restarted host answered its first request, storage still show",
    ),
    BrokenCase(
        "clock-fires-four-timers-per-move",
        "scheduled_plan",
        "six_tasks_due_at_the_same_time",
        "P29",
        "of 6 enabled tasks that came due",
    ),
    BrokenCase(
        "artifact-name-two-tries",
        "artifact_integrity",
        "a_third_identical_submission",
        "R2.4",
        "3 plans were submitted, the host lists 2",
    ),
    BrokenCase(
        "activity-cache-of-eight-sessions",
        "approval",
        "a_waiting_plan_still_holds_its_session",
        "R4.8",
        "expected the host to refuse, but it answered",
    ),
    BrokenCase(
        "permission-remembered-after-two-allows",
        "execution",
        "a_command_allowed_twice_still_asks",
        "P7",
        "Bash ran without asking for permission",
    ),
]
