"""What every explored sequence shares, and the small values the actions pass around."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.client import RpcError
from conformance.drivers import HostDriver
from conformance.explore.invariants import InvariantBrokenError
from conformance.explore.story import Story
from conformance.mock_provider import MockProvider


class OutOfTimeError(BaseException):
    """The time budget ran out: the search stops (a BaseException, so hypothesis lets go)."""


@dataclass
class ExploreContext:
    """What every explored sequence shares: the host driver, the model provider, limits."""

    driver: HostDriver
    provider: MockProvider
    temp_root: Path
    timeout: float
    can_crash: bool
    fault_points: frozenset[str]
    deadline: float | None = None  # time.monotonic() after which no new sequence starts
    examples: int = 0
    steps: int = 0
    failures: list[tuple[Story, InvariantBrokenError]] = field(default_factory=list)
    first_failure_at: float | None = None

    def record(self, story: Story, failure: InvariantBrokenError) -> None:
        """Remember a failing sequence (the last one recorded is the latest replay)."""
        if self.first_failure_at is None:
            self.first_failure_at = time.monotonic()
        self.failures.append((Story(list(story.steps)), failure))

    def smallest_failure(self) -> tuple[Story, InvariantBrokenError] | None:
        """The shortest failing sequence seen for the invariant that broke first."""
        if not self.failures:
            return None
        key = self.failures[0][1].key
        same = [entry for entry in self.failures if entry[1].key == key]
        return min(same, key=lambda entry: len(entry[0].steps))

    def out_of_time(self) -> bool:
        """Whether the exploration's time budget is spent."""
        return self.deadline is not None and time.monotonic() > self.deadline


@dataclass(frozen=True)
class Answer:
    """A result or a canonical error."""

    result: dict[str, Any] | None
    error: RpcError | None

    @property
    def code(self) -> str | None:
        """The canonical error code, if refused."""
        return self.error.canonical if self.error is not None else None
