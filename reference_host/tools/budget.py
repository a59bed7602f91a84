"""A time budget for one tool call's work on a worker thread.

The work checks the budget as it goes (per file, per line); it runs out at its deadline
or as soon as the call is cancelled, so a cancelled turn or a stopping host never waits
long for a worker thread.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from reference_host.errors import HostError

T = TypeVar("T")


class Budget:
    """Seconds a tool may spend, shared between the event loop and the worker thread."""

    def __init__(self, tool: str, seconds: float) -> None:
        self.tool = tool
        self.seconds = seconds
        self._deadline = time.monotonic() + seconds
        self.cancelled = threading.Event()

    def remaining(self) -> float:
        """Seconds left (0 once cancelled or past the deadline)."""
        if self.cancelled.is_set():
            return 0.0
        return max(0.0, self._deadline - time.monotonic())

    def exceeded(self) -> HostError:
        """The TOOL_FAILED error of a call that ran out of time."""
        return HostError(
            "TOOL_FAILED",
            f"{self.tool} exceeded its time budget of {self.seconds:g} s; "
            "narrow the pattern or the files searched",
            {"tool": self.tool, "budgetSeconds": self.seconds},
        )

    def check(self) -> None:
        """Raise :meth:`exceeded` when no time is left."""
        if self.remaining() <= 0:
            raise self.exceeded()


async def run_within(budget: Budget, work: Callable[[Budget], T]) -> T:
    """Run ``work(budget)`` on a worker thread; cancelling the caller ends the budget."""
    try:
        return await asyncio.to_thread(work, budget)
    except asyncio.CancelledError:
        budget.cancelled.set()
        raise
