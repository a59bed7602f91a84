"""The host's single clock: every deadline and timer is measured against it.

``SystemClock`` follows wall time. ``ManualClock`` (used with ``--conformance``) stands still
until ``set``/``advance`` moves it, and fires due timers before those calls return, so a
client that moved the clock observes the consequences in its very next request.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

TimerCallback = Callable[[], Awaitable[None]]


def wall_time_ms() -> int:
    """Milliseconds since the Unix epoch, from the system clock."""
    return time.time_ns() // 1_000_000


@dataclass(order=True)
class _Timer:
    due_ms: int
    seq: int
    callback: TimerCallback = field(compare=False)
    cancelled: bool = field(default=False, compare=False)


class TimerHandle:
    """Lets the owner of a timer cancel it."""

    def __init__(self, timer: _Timer) -> None:
        self._timer = timer

    def cancel(self) -> None:
        """Prevent the callback from running if it has not run yet."""
        self._timer.cancelled = True


class Clock(ABC):
    """Base clock with a timer heap; subclasses decide how time moves."""

    def __init__(self) -> None:
        self._timers: list[_Timer] = []
        self._seq = itertools.count()

    @abstractmethod
    def now_ms(self) -> int:
        """The current time in epoch milliseconds."""

    def call_at(self, due_ms: int, callback: TimerCallback) -> TimerHandle:
        """Run ``callback`` once the clock reaches ``due_ms``."""
        timer = _Timer(due_ms, next(self._seq), callback)
        heapq.heappush(self._timers, timer)
        self._schedule_wakeup()
        return TimerHandle(timer)

    async def fire_due(self) -> None:
        """Run, in due order, every timer whose time has come."""
        while self._timers and self._timers[0].due_ms <= self.now_ms():
            timer = heapq.heappop(self._timers)
            if not timer.cancelled:
                await timer.callback()
        self._schedule_wakeup()

    def _schedule_wakeup(self) -> None:  # noqa: B027 - optional hook
        """Hook for clocks that wake themselves up; the manual clock does not."""

    def close(self) -> None:
        """Drop every pending timer."""
        self._timers.clear()


class ManualClock(Clock):
    """A clock that moves only when told to (conformance mode)."""

    def __init__(self, start_ms: int) -> None:
        super().__init__()
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    async def set(self, now_ms: int) -> int:
        """Jump to ``now_ms`` and fire what became due."""
        self._now = now_ms
        await self.fire_due()
        return self._now

    async def advance(self, delta_ms: int) -> int:
        """Move forward by ``delta_ms`` and fire what became due."""
        return await self.set(self._now + delta_ms)


class SystemClock(Clock):
    """Wall-clock time; timers are woken by the event loop."""

    def __init__(self) -> None:
        super().__init__()
        self._wakeup: asyncio.TimerHandle | None = None

    def now_ms(self) -> int:
        return wall_time_ms()

    def _schedule_wakeup(self) -> None:
        if self._wakeup is not None:
            self._wakeup.cancel()
            self._wakeup = None
        if not self._timers:
            return
        loop = asyncio.get_running_loop()
        delay = max(0.0, (self._timers[0].due_ms - self.now_ms()) / 1000)
        self._wakeup = loop.call_later(delay, lambda: loop.create_task(self.fire_due()))

    def close(self) -> None:
        super().close()
        if self._wakeup is not None:
            self._wakeup.cancel()
