"""A cancel that arrives while a finished turn is being recorded as ended does not cut that
record short: the turn ends as it finished, and the session takes the next prompt."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hostkit import WAIT_S, InProcessHost

from conformance.mock_provider import MockProvider, TextReply
from reference_host.storage import Storage
from reference_host.turns import TurnRunner


@pytest.fixture
def provider() -> Iterator[MockProvider]:
    with MockProvider() as running:
        yield running


def test_a_cancel_during_the_turns_end_waits_for_it_and_cancels_nothing(
    tmp_path: Path, provider: MockProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    ending, cancelling, release = threading.Event(), threading.Event(), threading.Event()
    end_turn, cancel = Storage.end_turn, TurnRunner.cancel

    async def slow_end_turn(self: Storage, turn_id: str, state: str, at: int) -> None:
        ending.set()
        await asyncio.to_thread(release.wait, WAIT_S)  # the write is slow to commit
        await end_turn(self, turn_id, state, at)

    async def watched_cancel(self: TurnRunner, session_id: str) -> Any:
        # cancel decides before its first await, so once this is set the decision is made
        cancelling.set()
        return await cancel(self, session_id)

    monkeypatch.setattr(Storage, "end_turn", slow_end_turn)
    monkeypatch.setattr(TurnRunner, "cancel", watched_cancel)
    provider.enqueue(TextReply("done"), TextReply("again"))
    (tmp_path / "ws").mkdir()
    host = InProcessHost(tmp_path / "data")
    try:
        host.initialize()
        session = host.request(
            "session/create",
            {
                "workspaceRoot": str(tmp_path / "ws"),
                "provider": {"baseUrl": provider.base_url, "model": "m"},
            },
        )["session"]["sessionId"]
        turn = host.request("session/prompt", {"sessionId": session, "text": "hi"})["turnId"]
        assert ending.wait(WAIT_S), "the turn never reached its end"
        cancel_id = host.send("session/cancel", {"sessionId": session})
        assert cancelling.wait(WAIT_S), "the cancel never reached the turn runner"
        release.set()
        assert host.answer(cancel_id)["result"] == {"turnId": None}
        ended = host.notified("turn/ended")
        assert (ended["turnId"], ended["outcome"]) == (turn, "completed")
        host.request("session/prompt", {"sessionId": session, "text": "again"})
        assert host.notified("turn/ended", lambda p: p["turnId"] != turn)["outcome"] == "completed"
    finally:
        release.set()
        host.stop()
