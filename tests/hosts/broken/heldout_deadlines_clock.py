"""Broken hosts: a held-out set (deadlines and the clock), written from the contract alone."""

from __future__ import annotations

import contextvars
from dataclasses import replace
from typing import Any

from hosts.registry import BrokenCase, patch, variant
from reference_host import approvals, clock, migration, state, storage, turns
from reference_host.approvals import TIMEOUT_CODE, Approvals, approval_wire
from reference_host.clock import Clock, TimerHandle, wall_time_ms
from reference_host.host import Host, _within_clock_range
from reference_host.state import APPROVAL_TTL_MS, is_expired
from reference_host.tasks import Tasks
from reference_host.turns import TurnRunner


# Conformance mode / P32: conformance/clock/advance moves the clock to the system time plus
# `ms` (copied from the wall-clock code path) instead of the host clock plus `ms`: the
# real time that passed since the clock was last set leaks into every advance, and an
# advance after a `set` to another date jumps back to today.
@variant("advance-from-system-time")
def _advance_from_system_time() -> None:
    async def clock_advance(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        manual = self._manual_clock()
        return {"now": await manual.set(_within_clock_range(wall_time_ms() + params["ms"]))}

    patch(Host, "clock_advance", clock_advance)


# Conformance mode / P32: the host treats its clock as monotonic: conformance/clock/set to
# an earlier time is accepted but leaves the clock where it was (the answer reports the
# unchanged time), so timestamps taken afterwards are not the time the client set.
@variant("clock-set-never-goes-back")
def _clock_set_never_goes_back() -> None:
    async def clock_set(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        manual = self._manual_clock()
        wanted = _within_clock_range(params["now"])
        return {"now": await manual.set(max(manual.now_ms(), wanted))}

    patch(Host, "clock_set", clock_set)


# R3.9 / §3 The deadline: the 30 minutes are added in whole seconds (a TTL helper that
# works in seconds), so `expiresAt` is createdAt's second plus 30 minutes: up to 999 ms
# before createdAt + 30 minutes, over the wire and in storage alike.
@variant("deadline-from-whole-seconds")
def _deadline_from_whole_seconds() -> None:
    def deadline_for(created_at_ms: int) -> int:
        return (created_at_ms // 1000 + APPROVAL_TTL_MS // 1000) * 1000

    patch(approvals, "deadline_for", deadline_for)


# R3.11 / P32: `expiresAt` is computed from the host clock, but the expiry timer is armed
# at the system time plus 30 minutes: under --conformance the timer is due later than
# `expiresAt` by the real time the host has run (or never, after the clock was set back),
# so the clock reaching `expiresAt` does not expire the approval by itself.
@variant("expiry-timer-from-system-time")
def _expiry_timer_from_system_time() -> None:
    submitting: contextvars.ContextVar[bool] = contextvars.ContextVar("submitting", default=False)
    submit = Approvals.submit
    call_at = Clock.call_at

    async def _submit(self: Approvals, *args: Any, **kwargs: Any) -> Any:
        token = submitting.set(True)
        try:
            return await submit(self, *args, **kwargs)
        finally:
            submitting.reset(token)

    def _call_at(self: Clock, due_ms: int, callback: Any) -> TimerHandle:
        if submitting.get():
            due_ms = wall_time_ms() + APPROVAL_TTL_MS
        return call_at(self, due_ms, callback)

    patch(Approvals, "submit", _submit)
    patch(clock.Clock, "call_at", _call_at)


# R3.11 / R7.2: when the deadline expires an approval the host records it and sends its
# approval/updated, but no session/updated: the session's `pendingApprovalId` changed to
# null and the last session/updated the client saw still names the approval.
@variant("expiry-session-not-announced")
def _expiry_session_not_announced() -> None:
    async def expire(self: Approvals, approval_id: str) -> None:
        host = self.host
        row = await host.storage.get_approval(approval_id)
        if row is None or row.status != "pending":
            return
        if not is_expired(row.expires_at, host.clock.now_ms()):
            return
        expired = replace(
            row, status="expired", status_code=TIMEOUT_CODE, decided_at=host.clock.now_ms()
        )
        await host.storage.update_approval(expired)
        host.set_activity(row.session_id, pending_approval_id=None)
        host.notify("approval/updated", {"approval": approval_wire(expired)})

    patch(Approvals, "expire", expire)


# R3.11 with P13 / R4.6 / R4.9: the host disarms an approval's deadline timer as soon as an
# approve or reject is accepted for processing, before it commits. An approve that is then
# refused (ARTIFACT_MODIFIED, ARTIFACT_UNREADABLE, EXECUTION_ACTIVE, the approvalCommit
# fault) leaves the approval pending with no timer: it is no longer expired eagerly when
# the clock reaches `expiresAt` (a decision at or after the deadline still gets
# PLAN_APPROVAL_TIMEOUT).
@variant("failed-approve-drops-the-deadline")
def _failed_approve_drops_the_deadline() -> None:
    deciding: contextvars.ContextVar[bool] = contextvars.ContextVar("deciding", default=False)
    disarmed: set[str] = set()
    expire = Approvals.expire
    ensure = Approvals._ensure_decidable

    async def _ensure_decidable(self: Approvals, row: Any) -> None:
        token = deciding.set(True)
        try:
            await ensure(self, row)
        finally:
            deciding.reset(token)
        disarmed.add(row.id)

    async def _expire(self: Approvals, approval_id: str) -> None:
        if approval_id in disarmed and not deciding.get():
            return  # the timer was cancelled
        await expire(self, approval_id)

    patch(Approvals, "_ensure_decidable", _ensure_decidable)
    patch(Approvals, "expire", _expire)


# C5 / Commands and shells: a command's timeout counts from the moment its tool call was
# taken up (before the permission question), not from the command's own start: the host
# clock moving while the user is asked eats into `timeout_ms`, and a command allowed after
# a long wait times out at once.
@variant("command-timeout-counts-permission-wait")
def _command_timeout_counts_permission_wait() -> None:
    call_started: contextvars.ContextVar[int | None] = contextvars.ContextVar(
        "call_started", default=None
    )
    run_call = TurnRunner._run_call
    run_command = turns.run_command

    async def _run_call(self: TurnRunner, *args: Any, **kwargs: Any) -> Any:
        token = call_started.set(self.host.clock.now_ms())
        try:
            return await run_call(self, *args, **kwargs)
        finally:
            call_started.reset(token)

    async def _run_command(*, clock: Clock, timeout_ms: int, **kwargs: Any) -> Any:
        started = call_started.get()
        if started is not None:
            timeout_ms -= clock.now_ms() - started  # the deadline is call start + timeout
        return await run_command(clock=clock, timeout_ms=timeout_ms, **kwargs)

    patch(TurnRunner, "_run_call", _run_call)
    patch(turns, "run_command", _run_command)


# P14 (One millisecond before `expiresAt` the plan can still be approved): the host keeps
# the deadline as the last valid millisecond (`expiresAt - 1`) but still compares with
# `now >= deadline`, so an approve or reject at `expiresAt - 1` gets PLAN_APPROVAL_TIMEOUT
# and the approval ends `expired` one millisecond early (the timer itself is at
# `expiresAt`).
@variant("deadline-last-millisecond-lost")
def _deadline_last_millisecond_lost() -> None:
    def expired(expires_at_ms: int, now_ms: int) -> bool:
        return now_ms >= expires_at_ms - 1

    patch(state, "is_expired", expired)
    patch(approvals, "is_expired", expired)


# Conformance mode (P32) / R1.3: transcript rows are treated as bookkeeping and stamped
# with the system time; but a transcript entry's `createdAt` is reported by
# session/transcript and must be read from the host clock.
@variant("transcript-times-from-system-clock")
def _transcript_times_from_system_clock() -> None:
    insert = storage._insert_transcript

    async def _insert_transcript(
        conn: Any, session_id: str, turn_id: str | None, role: str, content: Any, at: int
    ) -> None:
        await insert(conn, session_id, turn_id, role, content, wall_time_ms())

    patch(storage, "_insert_transcript", _insert_transcript)


# P29 / Conformance mode (a task runs when the clock reaches `runAt`): the scheduler works
# in whole seconds and arms a task's timer at `runAt` rounded down to its second, so a task
# whose `runAt` is not a whole second runs up to 999 ms early (`runAt` itself is answered,
# listed and stored as given).
@variant("task-timer-whole-seconds")
def _task_timer_whole_seconds() -> None:
    arm = Tasks._arm

    def _arm(self: Tasks, task_id: str, run_at: int | None) -> None:
        arm(self, task_id, None if run_at is None else run_at // 1000 * 1000)

    patch(Tasks, "_arm", _arm)


# R4.10 / R4.12 (startup recovery): at start the host re-arms the deadline of every
# approval the recovery interrupted, whose `expiresAt` is still ahead, and its expiry
# treats an interrupted approval with no execution as undecided: when the clock reaches
# the deadline the interrupted approval turns `expired` with PLAN_APPROVAL_TIMEOUT and an
# approval/updated, although finished work must stay exactly as it was.
@variant("restart-rearms-interrupted-deadlines")
def _restart_rearms_interrupted_deadlines() -> None:
    schedule_all = Tasks.schedule_all

    async def _schedule_all(self: Tasks) -> None:
        await schedule_all(self)
        host = self.host
        now = host.clock.now_ms()
        for session in await host.storage.list_sessions():
            for row in await host.storage.list_approvals(session.id):
                if (
                    row.status == "interrupted"
                    and row.status_code == "TURN_INTERRUPTED"
                    and row.execution_id is None
                    and row.expires_at > now
                ):
                    host.clock.call_at(row.expires_at, _lapse(host, row.id))

    def _lapse(host: Any, approval_id: str) -> Any:
        async def lapse() -> None:
            row = await host.storage.get_approval(approval_id)
            if row is None or row.status != "interrupted" or row.execution_id is not None:
                return
            expired = replace(
                row, status="expired", status_code=TIMEOUT_CODE, decided_at=host.clock.now_ms()
            )
            await host.storage.update_approval(expired)
            host.notify("approval/updated", {"approval": approval_wire(expired)})

        return lapse

    patch(Tasks, "schedule_all", _schedule_all)


# P16 / Migrating from v8 (`expiresAt` is createdAt plus 30 minutes): the migration takes
# v8's `created_at` for seconds and adds 1800 to it, so a legacy approval's `expiresAt`
# is 1.8 seconds after its `createdAt` instead of 30 minutes.
@variant("legacy-expiry-in-seconds")
def _legacy_expiry_in_seconds() -> None:
    copy = migration._COPY_LEGACY_APPROVALS
    assert "created_at + 1800000" in copy
    patch(
        migration,
        "_COPY_LEGACY_APPROVALS",
        copy.replace("created_at + 1800000", "created_at + 1800"),
    )


# C5 / R5.9 (work stays in its session): the host keeps one "current command timer": a
# command that ends cancels the timer armed last, which belongs to another command when
# two run at once (two sessions), so that other command never times out; the ended
# command's own timer is left armed.
@variant("one-command-timer-per-host")
def _one_command_timer_per_host() -> None:
    latest: list[TimerHandle] = []
    run_command = turns.run_command

    class _SharedSlot:
        def __init__(self, host_clock: Clock) -> None:
            self._clock = host_clock

        def now_ms(self) -> int:
            return self._clock.now_ms()

        def call_at(self, due_ms: int, callback: Any) -> Any:
            handle = self._clock.call_at(due_ms, callback)
            latest[:] = [handle]

            class _Cancel:
                @staticmethod
                def cancel() -> None:
                    if latest:
                        latest.pop().cancel()

            return _Cancel()

    async def _run_command(*, clock: Clock, **kwargs: Any) -> Any:
        return await run_command(clock=_SharedSlot(clock), **kwargs)

    patch(turns, "run_command", _run_command)


CASES = [
    BrokenCase(
        "one-command-timer-per-host",
        "isolation",
        "leaves_another_sessions_command_timeout_armed",
        "R5.9",
        "disarmed another's timeout",
        slow=True,
    ),
    BrokenCase(
        "advance-from-system-time",
        "deadline",
        "the_plan_expires_when_the_time_is_up",
        "R3.11",
        "the deadline passed but no expiry was announced",
        slow=True,
    ),
    BrokenCase(
        "clock-set-never-goes-back",
        "deadline",
        "a_clock_set_back_does_not_bring_the",
        "P32",
        "conformance/clock/set answered now =",
    ),
    BrokenCase(
        "command-timeout-counts-permission-wait",
        "shell",
        "a_commands_timeout_counts_from_the_commands_own",
        "C5",
        "the command ended before its own timeout had run out",
    ),
    BrokenCase(
        "deadline-from-whole-seconds",
        "approval",
        "the_pending_approval_shows_its_title_question_artifact",
        "R3.1",
        "is not the absolute time 30 minutes",
    ),
    BrokenCase(
        "deadline-last-millisecond-lost",
        "deadline",
        "one_millisecond_before_the_deadline_the_plan_can",
        "R4.6",
        "the approval is expired",
    ),
    BrokenCase(
        "expiry-session-not-announced",
        "deadline",
        "the_plan_expires_when_the_time_is_up",
        "R7.2",
        "two reports of one record disagreed",
    ),
    BrokenCase(
        "expiry-timer-from-system-time",
        "artifact_integrity",
        "the_artifact_stays_as_written_after_ending",
        "C10",
        "no approval/updated notification matched",
        slow=True,
    ),
    BrokenCase(
        "failed-approve-drops-the-deadline",
        "artifact_integrity",
        "a_plan_whose_approval_was_refused_still_expires",
        "R3.10",
        "the plan did not expire",
        slow=True,
    ),
    BrokenCase(
        "legacy-expiry-in-seconds",
        "migration",
        "a_v8_approval_that_was_v8_status_is",
        "P16",
        "the legacy approval reads",
    ),
    BrokenCase(
        "restart-rearms-interrupted-deadlines",
        "restart_interruption",
        "a_plan_interrupted_by_a_restart_stays_interrupted",
        "R4.12",
        "the interrupted approval now reads expired",
    ),
    BrokenCase(
        "task-timer-whole-seconds",
        "scheduled_plan",
        "a_task_does_not_run_a_millisecond_before",
        "P32",
        "a millisecond before its runAt",
    ),
    BrokenCase(
        "transcript-times-from-system-clock",
        "sessions",
        "every_entry_of_the_conversation_carries_the_host",
        "P32",
        "throughout the conversation, but transcript entries read",
    ),
]
