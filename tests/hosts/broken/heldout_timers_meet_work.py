"""Broken hosts: a held-out set (timers meeting other work), written from the contract alone.

None of these twelve was caught at first; all are caught now. Every timer scenario had one
timer due at a time, in a project that was otherwise idle, reached by `advance` on a clock
that only moved forward. New scenarios: a revision still waits at the rejected plan's
deadline; a plan expires while another session's turn is under way; tasks that come due
while a plan of their project waits, after a move back in time, in a jump of a week, two
days after a restart, beside a refused Plan task, or after another task was deleted; a
command's timeout after a cancel in another session, when the clock is set past it, in a
scheduled run, and for the second command of a message.
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from hosts.registry import BrokenCase, patch, variant
from reference_host import clock as clock_module
from reference_host import turns
from reference_host.approvals import TIMEOUT_CODE, Approvals, approval_wire
from reference_host.clock import Clock, ManualClock
from reference_host.host import Host
from reference_host.tasks import Tasks
from reference_host.turns import TurnRunner

log = logging.getLogger(__name__)

HOUR_MS = 60 * 60 * 1000
DAY_MS = 24 * HOUR_MS
Callback = Callable[[], Awaitable[None]]


class _Handle:
    """A cancellable timer of a variant's own making."""

    def __init__(self, cancel: Callable[[], None]) -> None:
        self._cancel = cancel

    def cancel(self) -> None:
        self._cancel()


class _CommandClock:
    """The clock a command is given: reads the host clock, arms its timeout through
    ``arm(due_ms, callback)``."""

    def __init__(self, clock: Clock, arm: Callable[[int, Callback], Any]) -> None:
        self._clock = clock
        self._arm = arm

    def now_ms(self) -> int:
        return self._clock.now_ms()

    def call_at(self, due_ms: int, callback: Callback) -> Any:
        return self._arm(due_ms, callback)


def _wrap_run_command(
    make_clock: Callable[[Clock, dict[str, Any]], Any],
) -> None:
    """Give every command (Bash) the clock ``make_clock(host_clock, kwargs)`` returns."""
    original = turns.run_command

    async def run_command(**kwargs: Any) -> Any:
        kwargs["clock"] = make_clock(kwargs["clock"], kwargs)
        return await original(**kwargs)

    patch(turns, "run_command", run_command)


# -- approval deadlines ---------------------------------------------------------------


@variant("expiry-waits-for-other-sessions-turns")
def _expiry_waits_for_other_sessions_turns() -> None:
    # R3.11: the deadline timer does not expire an approval while another session has a
    # turn under way (an execution, a prompt, a scheduled run): the host holds back timer
    # work that writes approvals until no turn is mid-flight and tries again at the next
    # clock move, so the approval reads `pending` past its expiresAt. (A decision that
    # arrives after the deadline is still answered PLAN_APPROVAL_TIMEOUT and expires it.)
    deciding: contextvars.ContextVar[bool] = contextvars.ContextVar("deciding", default=False)
    expire = Approvals.expire
    ensure_decidable = Approvals._ensure_decidable

    async def _ensure_decidable(self: Approvals, row: Any) -> None:
        token = deciding.set(True)
        try:
            await ensure_decidable(self, row)
        finally:
            deciding.reset(token)

    async def _expire(self: Approvals, approval_id: str) -> None:
        host: Any = self.host
        row = await host.storage.get_approval(approval_id)
        if row is not None and row.status == "pending" and not deciding.get():
            others_busy = any(
                activity.active_turn_id is not None
                for session_id, activity in host.activity.items()
                if session_id != row.session_id
            )
            if others_busy:
                host.clock.call_at(host.clock.now_ms() + 1, lambda: self.expire(approval_id))
                return
        await expire(self, approval_id)

    patch(Approvals, "_ensure_decidable", _ensure_decidable)
    patch(Approvals, "expire", _expire)


@variant("old-deadline-expires-the-current-plan")
def _old_deadline_expires_the_current_plan() -> None:
    # R3.9 / R3.11: the deadline timer of an approval looks up its session and expires the
    # session's *pending* approval, without checking it is the one whose timer fired: after
    # a plan was rejected (or approved) and a revision submitted, the first plan's deadline
    # expires the revision 30 minutes after the first plan, before the revision's expiresAt.
    async def _expire(self: Approvals, approval_id: str) -> None:
        host = self.host
        fired = await host.storage.get_approval(approval_id)
        if fired is None:
            return
        current_id = host.activity_of(fired.session_id).pending_approval_id
        if current_id is None:
            return
        row = await host.storage.get_approval(current_id)
        if row is None or row.status != "pending":
            return
        now = host.clock.now_ms()
        expired = replace(row, status="expired", status_code=TIMEOUT_CODE, decided_at=now)
        await host.storage.update_approval(expired)
        host.set_activity(row.session_id, pending_approval_id=None)
        host.notify("approval/updated", {"approval": approval_wire(expired)})
        await host.publish_session(row.session_id)

    patch(Approvals, "expire", _expire)


# -- scheduled tasks ------------------------------------------------------------------


@variant("due-task-deferred-while-its-workspace-has-plan-work")
def _due_task_deferred_while_its_workspace_has_plan_work() -> None:
    # P29 / R5.1 (busy is each session's own): a task that comes due while an interactive
    # session of the same workspace root has a plan pending or an execution queued or
    # running is held back (the scheduler keeps scheduled work off a project a user is
    # working on) and tried again at the next clock move. Its run, a new session of its
    # own, should start when it comes due. `task/run` by hand is not affected.
    fire = Tasks._fire

    async def _fire(self: Tasks, task_id: str) -> None:
        host = self.host
        row = await host.storage.get_task(task_id)
        if row is not None and row["enabled"] and row["workspace_root"] is not None:
            for session in await host.storage.list_sessions():
                if session.workspace_root != row["workspace_root"]:
                    continue
                activity = host.activity_of(session.id)
                if activity.pending_approval_id or activity.active_execution_id:
                    self._timers.pop(task_id, None)
                    self._arm(task_id, host.clock.now_ms() + 1)
                    return
        await fire(self, task_id)

    patch(Tasks, "_fire", _fire)


@variant("task-delete-disarms-the-latest-armed-task")
def _task_delete_disarms_the_latest_armed_task() -> None:
    # P26 / P29: task/delete disarms the timer armed last (the host keeps its task timers
    # as a stack and pops one) instead of the deleted task's own. The deleted task still
    # does not run (its timer finds no task), but another task, armed after it, loses its
    # timer and never runs when its runAt comes due.
    async def delete(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require(params["taskId"])
        if self._timers:
            latest = next(reversed(self._timers))
            self._timers.pop(latest).cancel()
        await self.host.storage.delete_task(row["id"])
        return {}

    patch(Tasks, "delete", delete)


@variant("clock-back-arms-task-timers-twice")
def _clock_back_arms_task_timers_twice() -> None:
    # P29 (a task runs once when its runAt comes due) / P32: after `conformance/clock/set`
    # moves the clock backwards the host re-syncs its schedule from the database, arming
    # every enabled task whose runAt is ahead again, without disarming the timer it already
    # had. When the clock then passes that runAt, the task runs twice.
    clock_set = Host.clock_set

    async def _clock_set(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        before = self.clock.now_ms()
        result = await clock_set(self, params)
        now = result["now"]
        if now < before:
            tasks = self.tasks
            for row in await self.storage.list_tasks():
                if row["enabled"] and row["run_at"] is not None and row["run_at"] > now:
                    task_id = row["id"]
                    tasks._timers[task_id] = self.clock.call_at(
                        row["run_at"], lambda task_id=task_id: tasks._fire(task_id)
                    )
        return result

    patch(Host, "clock_set", _clock_set)


@variant("restart-arms-only-the-next-hour")
def _restart_arms_only_the_next_hour() -> None:
    # P29 (a task keeps its time across a restart): at start-up the scheduler loads only
    # the tasks due within the next hour (a look-ahead window whose refresh runs on real
    # time, so it never comes under the conformance clock). A task created before the
    # restart with a runAt more than an hour after the new process's start never runs;
    # tasks created in the running process are armed as usual.
    async def schedule_all(self: Tasks) -> None:
        now = self.host.clock.now_ms()
        for row in await self.host.storage.list_tasks():
            run_at = row["run_at"]
            if row["enabled"] and run_at is not None and now < run_at <= now + HOUR_MS:
                self._arm(row["id"], run_at)

    patch(Tasks, "schedule_all", schedule_all)


@variant("refused-due-task-ends-the-clock-move")
def _refused_due_task_ends_the_clock_move() -> None:
    # P32 / R3.11 / P29: a Plan task that comes due is refused as it should be, but its
    # refusal leaves the timer callback as an exception, and the clock catches failures
    # around its whole firing loop rather than around each timer: the timers due after it
    # in the same clock move (another task's runAt, an approval deadline, a command's
    # timeout) do not fire until the next move, after the clock call has been answered.
    async def _fire(self: Tasks, task_id: str) -> None:
        self._timers.pop(task_id, None)
        row = await self.host.storage.get_task(task_id)
        if row is None or not row["enabled"]:
            return
        await self.host.storage.update_task(task_id, {"run_at": None})
        await self.run(row)  # a refused run raises its HostError

    async def fire_due(self: Clock) -> None:
        try:
            while self._timers and self._timers[0].due_ms <= self.now_ms():
                timer = heapq.heappop(self._timers)
                if not timer.cancelled:
                    await timer.callback()
        except Exception:
            log.exception("a timer failed")
        self._schedule_wakeup()

    patch(Tasks, "_fire", _fire)
    patch(clock_module.Clock, "fire_due", fire_due)


@variant("far-jump-fires-one-day-of-timers")
def _far_jump_fires_one_day_of_timers() -> None:
    # P32 / P29 / R3.11: a clock move fires only the timers due within one day of where
    # the clock stood (a catch-up limit, so a host that slept for days does not fire a
    # flood of stale work at once); the clock itself moves the whole way. After a jump of
    # several days, a task, deadline or timeout due more than a day after the old time
    # fires only at the next clock move.
    async def set_clock(self: ManualClock, now_ms: int) -> int:
        before = self._now
        self._now = now_ms
        horizon = min(now_ms, before + DAY_MS) if now_ms > before else now_ms
        while self._timers and self._timers[0].due_ms <= horizon:
            timer = heapq.heappop(self._timers)
            if not timer.cancelled:
                await timer.callback()
        return self._now

    patch(ManualClock, "set", set_clock)


# -- command timeouts -----------------------------------------------------------------


@variant("cancel-disarms-every-command-timer")
def _cancel_disarms_every_command_timer() -> None:
    # C5 / R5.9: `session/cancel` clears the host's list of command timeouts (meant to be
    # the cancelled turn's), so a command another session is still running loses its
    # timeout: when the clock passes its start plus timeout_ms it goes on running.
    armed: list[Any] = []

    def make_clock(clock: Clock, kwargs: dict[str, Any]) -> Any:
        def arm(due_ms: int, callback: Callback) -> Any:
            handle = clock.call_at(due_ms, callback)
            armed.append(handle)
            return handle

        return _CommandClock(clock, arm)

    session_cancel = Host.session_cancel

    async def _session_cancel(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await session_cancel(self, params)
        for handle in armed:
            handle.cancel()
        armed.clear()
        return result

    _wrap_run_command(make_clock)
    patch(Host, "session_cancel", _session_cancel)


@variant("batch-timeouts-from-the-first-command")
def _batch_timeouts_from_the_first_command() -> None:
    # C5: the host starts one timeout clock per tool-call message, when the first command
    # of that message starts; a later Bash call of the same message times out at the
    # first command's start plus its own timeout_ms, so the time it waited behind the
    # earlier calls (a slow command, a permission question) counts against it.
    started: dict[str, int] = {}
    run_batch = TurnRunner._run_batch

    async def _run_batch(
        self: TurnRunner, session: Any, turn_id: str, calls: Any, unattended: bool
    ) -> Any:
        started.pop(session.id, None)
        return await run_batch(self, session, turn_id, calls, unattended)

    def make_clock(clock: Clock, kwargs: dict[str, Any]) -> Any:
        now = clock.now_ms()
        base = started.setdefault(kwargs["session_id"], now)

        def arm(due_ms: int, callback: Callback) -> Any:
            return clock.call_at(due_ms - now + base, callback)

        return _CommandClock(clock, arm)

    patch(TurnRunner, "_run_batch", _run_batch)
    _wrap_run_command(make_clock)


@variant("command-timeouts-count-advances-only")
def _command_timeouts_count_advances_only() -> None:
    # C5 / P32: a command's timeout is a countdown the host decrements by each
    # `conformance/clock/advance` (a watchdog fed with the elapsed time), not a deadline on
    # the host clock: a `conformance/clock/set` that moves the clock past the command's
    # start plus timeout_ms does not time it out. (Approval deadlines and tasks fire on
    # either move.)
    countdowns: list[dict[str, Any]] = []

    def make_clock(clock: Clock, kwargs: dict[str, Any]) -> Any:
        if not isinstance(clock, ManualClock):
            return clock

        def arm(due_ms: int, callback: Callback) -> Any:
            entry = {"remaining": due_ms - clock.now_ms(), "callback": callback}
            countdowns.append(entry)
            return _Handle(lambda: entry in countdowns and countdowns.remove(entry))

        return _CommandClock(clock, arm)

    clock_advance = Host.clock_advance

    async def _clock_advance(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await clock_advance(self, params)
        for entry in list(countdowns):
            entry["remaining"] -= params["ms"]
            if entry["remaining"] <= 0 and entry in countdowns:
                countdowns.remove(entry)
                await entry["callback"]()
        return result

    _wrap_run_command(make_clock)
    patch(Host, "clock_advance", _clock_advance)


@variant("scheduled-run-timeouts-on-real-time")
def _scheduled_run_timeouts_on_real_time() -> None:
    # C5 / P32 / P8: the unattended runner enforces a command's timeout_ms on real time
    # (a wall-clock timer of its own) rather than on the host clock, for the commands of
    # scheduled runs only; interactive turns use the host clock. A clock move past a
    # scheduled run's command start plus timeout_ms does not time it out.
    scheduled: set[str] = set()
    start = TurnRunner.start

    async def _start(self: TurnRunner, session: Any, kind: str, *args: Any, **kw: Any) -> str:
        if kind == "scheduled":
            scheduled.add(session.id)
        return await start(self, session, kind, *args, **kw)

    def make_clock(clock: Clock, kwargs: dict[str, Any]) -> Any:
        if kwargs["session_id"] not in scheduled:
            return clock

        def arm(due_ms: int, callback: Callback) -> Any:
            loop = asyncio.get_running_loop()
            delay = max(0, due_ms - clock.now_ms()) / 1000
            timer = loop.call_later(delay, lambda: loop.create_task(callback()))
            return _Handle(timer.cancel)

        return _CommandClock(clock, arm)

    patch(TurnRunner, "start", _start)
    _wrap_run_command(make_clock)


CASES = [
    BrokenCase(
        "expiry-waits-for-other-sessions-turns",
        "deadline",
        "while_another_sessions_turn_is_under_way",
        "R3.11",
        "the deadline passed but no expiry was announced",
    ),
    BrokenCase(
        "old-deadline-expires-the-current-plan",
        "deadline",
        "still_waits_at_the_rejected_plans_deadline",
        "R3.9",
        "each plan expires at its own deadline",
    ),
    BrokenCase(
        "due-task-deferred-while-its-workspace-has-plan-work",
        "scheduled_plan",
        "while_a_plan_of_its_project_awaits",
        "P29",
        "the task did not run when its time came",
    ),
    BrokenCase(
        "task-delete-disarms-the-latest-armed-task",
        "scheduled_plan",
        "deleting_a_task_leaves_another_tasks_time",
        "P29",
        "the task did not run when its time came",
    ),
    BrokenCase(
        "clock-back-arms-task-timers-twice",
        "scheduled_plan",
        "goes_back_and_then_past_its_time",
        "P29",
        "the task ran more than once when its time came",
    ),
    BrokenCase(
        "restart-arms-only-the-next-hour",
        "scheduled_plan",
        "due_in_two_days_keeps_its_time",
        "P29",
        "the task did not run when its time came",
    ),
    BrokenCase(
        "refused-due-task-ends-the-clock-move",
        "scheduled_plan",
        "does_not_hold_back_another_task",
        "P29",
        "the task did not run when its time came",
    ),
    BrokenCase(
        "far-jump-fires-one-day-of-timers",
        "scheduled_plan",
        "jumps_a_week_ahead",
        "P29",
        "the task did not run when its time came",
    ),
    BrokenCase(
        "cancel-disarms-every-command-timer",
        "isolation",
        "leaves_another_sessions_command_timeout_armed and cancelling",
        "R5.9",
        "one session's work disarmed another's timeout",
        slow=True,  # caught once the wait for the timeout runs out
    ),
    BrokenCase(
        "batch-timeouts-from-the-first-command",
        "shell",
        "counts_its_timeout_from_its_own_start",
        "C5",
        "a command's timeout counts from its own start",
    ),
    BrokenCase(
        "command-timeouts-count-advances-only",
        "shell",
        "set_past_its_timeout",
        "C5",
        "no command/exited notification matched",
        slow=True,  # caught once the wait for the command's end runs out
    ),
    BrokenCase(
        "scheduled-run-timeouts-on-real-time",
        "scheduled_plan",
        "scheduled_run_times_out_on_the_host_clock",
        "C5",
        "did not time out when the host clock passed its",
        slow=True,  # caught once the wait for the command's end runs out
    ),
]
