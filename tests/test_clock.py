"""Tests of the host clock: the manual (conformance) clock and the system clock."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from reference_host.clock import ManualClock, SystemClock, TimerCallback, wall_time_ms

START = 1_700_000_000_000


def recorder(fired: list[str], label: str) -> TimerCallback:
    async def callback() -> None:
        fired.append(label)

    return callback


def test_manual_clock_stands_still() -> None:
    async def scenario() -> tuple[int, int, int]:
        clock = ManualClock(START)
        first = clock.now_ms()
        await asyncio.sleep(0)
        await asyncio.sleep(0.01)
        return first, clock.now_ms(), clock.now_ms()

    assert asyncio.run(scenario()) == (START, START, START)


def test_set_and_advance_move_the_clock_and_return_the_new_time() -> None:
    async def scenario() -> list[int]:
        clock = ManualClock(START)
        seen = [await clock.advance(250), clock.now_ms()]
        seen += [await clock.set(START + 10_000), clock.now_ms()]
        seen += [await clock.advance(0), clock.now_ms()]
        return seen

    assert asyncio.run(scenario()) == [
        START + 250,
        START + 250,
        START + 10_000,
        START + 10_000,
        START + 10_000,
        START + 10_000,
    ]


def test_advance_fires_due_timers_in_due_order_before_returning() -> None:
    fired: list[str] = []

    async def scenario() -> None:
        clock = ManualClock(START)
        clock.call_at(START + 300, recorder(fired, "c"))
        clock.call_at(START + 100, recorder(fired, "a"))
        clock.call_at(START + 200, recorder(fired, "b1"))
        clock.call_at(START + 200, recorder(fired, "b2"))  # same due time: insertion order
        clock.call_at(START + 500, recorder(fired, "late"))
        assert fired == []
        await clock.advance(300)
        assert fired == ["a", "b1", "b2", "c"]

    asyncio.run(scenario())
    assert fired == ["a", "b1", "b2", "c"]


def test_timers_fire_exactly_once() -> None:
    fired: list[str] = []

    async def scenario() -> None:
        clock = ManualClock(START)
        clock.call_at(START + 10, recorder(fired, "once"))
        await clock.set(START + 10)
        await clock.set(START + 10)
        await clock.advance(1_000)
        await clock.fire_due()

    asyncio.run(scenario())
    assert fired == ["once"]


def test_a_timer_due_now_fires_on_the_next_move_only() -> None:
    fired: list[str] = []

    async def scenario() -> None:
        clock = ManualClock(START)
        clock.call_at(START, recorder(fired, "now"))
        assert fired == []  # scheduling never runs a callback by itself
        await clock.advance(0)
        assert fired == ["now"]

    asyncio.run(scenario())


def test_cancelled_timers_never_fire() -> None:
    fired: list[str] = []

    async def scenario() -> None:
        clock = ManualClock(START)
        handle = clock.call_at(START + 10, recorder(fired, "cancelled"))
        clock.call_at(START + 20, recorder(fired, "kept"))
        later = clock.call_at(START + 5_000, recorder(fired, "cancelled-later"))
        handle.cancel()
        await clock.advance(100)
        later.cancel()
        later.cancel()  # cancelling twice is harmless
        await clock.advance(10_000)

    asyncio.run(scenario())
    assert fired == ["kept"]


def test_cancelling_after_firing_is_harmless() -> None:
    fired: list[str] = []

    async def scenario() -> None:
        clock = ManualClock(START)
        handle = clock.call_at(START + 1, recorder(fired, "x"))
        await clock.advance(1)
        handle.cancel()
        await clock.advance(1)

    asyncio.run(scenario())
    assert fired == ["x"]


def test_timers_due_later_stay_pending() -> None:
    fired: list[str] = []

    async def scenario() -> None:
        clock = ManualClock(START)
        clock.call_at(START + 1_000, recorder(fired, "later"))
        await clock.advance(999)
        assert fired == []
        await clock.set(START + 1_000)
        assert fired == ["later"]

    asyncio.run(scenario())


def test_callbacks_observe_the_new_time() -> None:
    observed: list[int] = []

    async def scenario() -> None:
        clock = ManualClock(START)

        async def look() -> None:
            observed.append(clock.now_ms())

        clock.call_at(START + 5, look)
        await clock.set(START + 60_000)

    asyncio.run(scenario())
    assert observed == [START + 60_000]


def test_timer_scheduled_from_a_callback_for_a_past_time_fires_in_the_same_advance() -> None:
    fired: list[str] = []

    async def scenario() -> None:
        clock = ManualClock(START)

        async def first() -> None:
            fired.append("first")
            clock.call_at(START, recorder(fired, "chained-past"))
            clock.call_at(START + 10**9, recorder(fired, "chained-future"))

        clock.call_at(START + 50, first)
        clock.call_at(START + 60, recorder(fired, "second"))
        await clock.advance(100)
        # The chained timer is due at START, before "second", so it fires first.
        assert fired == ["first", "chained-past", "second"]

    asyncio.run(scenario())
    assert fired == ["first", "chained-past", "second"]


def test_close_drops_pending_timers() -> None:
    fired: list[str] = []

    async def scenario() -> None:
        clock = ManualClock(START)
        clock.call_at(START + 1, recorder(fired, "dropped"))
        clock.close()
        await clock.advance(10)

    asyncio.run(scenario())
    assert fired == []


@settings(max_examples=50, deadline=None)
@given(
    offsets=st.lists(st.integers(min_value=0, max_value=1_000), max_size=12),
    first=st.integers(min_value=0, max_value=1_000),
    cancel=st.sets(st.integers(min_value=0, max_value=11)),
)
def test_fired_timers_are_exactly_the_due_ones_in_due_order(
    offsets: list[int], first: int, cancel: set[int]
) -> None:
    fired: list[int] = []

    def record(index: int) -> TimerCallback:
        async def callback() -> None:
            fired.append(index)

        return callback

    async def scenario() -> tuple[list[int], list[int]]:
        clock = ManualClock(START)
        handles = [clock.call_at(START + off, record(i)) for i, off in enumerate(offsets)]
        for index in cancel:
            if index < len(handles):
                handles[index].cancel()
        await clock.advance(first)
        after_first = list(fired)
        await clock.set(START + 1_000)
        return after_first, list(fired)

    after_first, after_all = asyncio.run(scenario())
    live = [i for i in range(len(offsets)) if i not in cancel]
    by_due = sorted(live, key=lambda i: (offsets[i], i))
    assert after_first == [i for i in by_due if offsets[i] <= first]
    assert after_all == by_due


# -- SystemClock -------------------------------------------------------------------------------


def test_system_clock_follows_wall_time() -> None:
    clock = SystemClock()
    before = wall_time_ms()
    now = clock.now_ms()
    after = wall_time_ms()
    assert before <= now <= after


def test_system_clock_fires_a_timer_due_shortly() -> None:
    async def scenario() -> tuple[int, int]:
        clock = SystemClock()
        done = asyncio.Event()
        fired_at: list[int] = []

        async def callback() -> None:
            fired_at.append(clock.now_ms())
            done.set()

        due = clock.now_ms() + 30
        clock.call_at(due, callback)
        try:
            await asyncio.wait_for(done.wait(), timeout=5)
        finally:
            clock.close()
        return due, fired_at[0]

    due, fired_at = asyncio.run(scenario())
    assert fired_at >= due


def test_system_clock_skips_cancelled_timers_and_fires_the_rest_in_order() -> None:
    async def scenario() -> list[str]:
        clock = SystemClock()
        fired: list[str] = []
        done = asyncio.Event()

        async def last() -> None:
            fired.append("last")
            done.set()

        now = clock.now_ms()
        cancelled = clock.call_at(now + 5, recorder(fired, "cancelled"))
        clock.call_at(now + 40, last)
        clock.call_at(now + 10, recorder(fired, "first"))
        cancelled.cancel()
        try:
            await asyncio.wait_for(done.wait(), timeout=5)
        finally:
            clock.close()
        return fired

    assert asyncio.run(scenario()) == ["first", "last"]


def test_system_clock_fires_an_already_past_timer() -> None:
    async def scenario() -> bool:
        clock = SystemClock()
        done = asyncio.Event()

        async def callback() -> None:
            done.set()

        clock.call_at(clock.now_ms() - 60_000, callback)
        try:
            await asyncio.wait_for(done.wait(), timeout=5)
        finally:
            clock.close()
        return done.is_set()

    assert asyncio.run(scenario())
