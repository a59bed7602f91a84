"""Tests of permission selection and the permission request broker (§3)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import pytest

from reference_host.errors import HostError
from reference_host.permissions import PermissionBroker, needs_permission

WAIT_S = 10

TABLE = {
    # tool:    (ask,  accept-edits, auto)
    "Write": (True, False, False),
    "Edit": (True, False, False),
    "Bash": (True, True, False),
    "Read": (False, False, False),
    "Glob": (False, False, False),
    "Grep": (False, False, False),
}
MODES = ("ask", "accept-edits", "auto")


@pytest.mark.parametrize(
    ("mode", "tool", "expected"),
    [
        (mode, tool, answers[index])
        for tool, answers in TABLE.items()
        for index, mode in enumerate(MODES)
    ],
)
def test_needs_permission_table(mode: str, tool: str, expected: bool) -> None:
    assert needs_permission(mode, tool) is expected


class Recorder:
    def __init__(self) -> None:
        self.messages: list[tuple[str, dict[str, Any]]] = []
        self.changed = asyncio.Event()

    def __call__(self, method: str, params: dict[str, Any]) -> None:
        self.messages.append((method, params))
        self.changed.set()

    async def wait_for(self, condition: Callable[[], bool]) -> None:
        async with asyncio.timeout(WAIT_S):
            while not condition():
                self.changed.clear()
                await self.changed.wait()

    def request_ids(self) -> list[str]:
        return [params["requestId"] for _, params in self.messages]


def expect_not_found(broker: PermissionBroker, request_id: str, decision: str = "allow") -> None:
    with pytest.raises(HostError) as caught:
        broker.respond(request_id, decision)
    assert caught.value.code == "PERMISSION_REQUEST_NOT_FOUND"


def ask_and_answer(decision: str) -> tuple[bool, Recorder]:
    async def body() -> tuple[bool, Recorder]:
        rec = Recorder()
        broker = PermissionBroker(rec)
        task = asyncio.create_task(broker.ask("sess-1", "turn-1", "Bash", {"command": "ls"}))
        await rec.wait_for(lambda: len(rec.messages) == 1)
        assert not task.done()
        (request_id,) = rec.request_ids()
        broker.respond(request_id, decision)
        answer = await asyncio.wait_for(task, WAIT_S)
        return answer, rec

    return asyncio.run(body())


def test_ask_sends_a_permission_request_notification() -> None:
    _, rec = ask_and_answer("allow")
    ((method, params),) = rec.messages
    assert method == "permission/requested"
    assert set(params) == {"sessionId", "turnId", "requestId", "tool", "input"}
    assert params["sessionId"] == "sess-1"
    assert params["turnId"] == "turn-1"
    assert params["tool"] == "Bash"
    assert params["input"] == {"command": "ls"}
    assert isinstance(params["requestId"], str)
    assert params["requestId"]


def test_allow_answers_true() -> None:
    assert ask_and_answer("allow")[0] is True


def test_deny_answers_false() -> None:
    assert ask_and_answer("deny")[0] is False


def test_unknown_request_id_is_not_found() -> None:
    async def body() -> None:
        rec = Recorder()
        broker = PermissionBroker(rec)
        expect_not_found(broker, "perm_unknown")
        task = asyncio.create_task(broker.ask("s", "t", "Write", {}))
        await rec.wait_for(lambda: len(rec.messages) == 1)
        expect_not_found(broker, "perm_unknown")
        expect_not_found(broker, rec.request_ids()[0] + "x")
        assert not task.done()
        broker.respond(rec.request_ids()[0], "allow")
        assert await asyncio.wait_for(task, WAIT_S) is True

    asyncio.run(body())


@pytest.mark.parametrize("second", ["allow", "deny"])
def test_responding_twice_is_not_found(second: str) -> None:
    async def body() -> None:
        rec = Recorder()
        broker = PermissionBroker(rec)
        task = asyncio.create_task(broker.ask("s", "t", "Edit", {}))
        await rec.wait_for(lambda: len(rec.messages) == 1)
        (request_id,) = rec.request_ids()
        broker.respond(request_id, "deny")
        expect_not_found(broker, request_id, second)  # before the asker has resumed
        assert await asyncio.wait_for(task, WAIT_S) is False
        expect_not_found(broker, request_id, second)  # and after

    asyncio.run(body())


def test_concurrent_requests_are_answered_independently() -> None:
    async def body() -> None:
        rec = Recorder()
        broker = PermissionBroker(rec)
        first = asyncio.create_task(broker.ask("s1", "t1", "Write", {"path": "a"}))
        second = asyncio.create_task(broker.ask("s2", "t2", "Bash", {"command": "b"}))
        await rec.wait_for(lambda: len(rec.messages) == 2)
        first_id, second_id = rec.request_ids()
        assert first_id != second_id
        broker.respond(second_id, "allow")
        assert await asyncio.wait_for(second, WAIT_S) is True
        assert not first.done()
        broker.respond(first_id, "deny")
        assert await asyncio.wait_for(first, WAIT_S) is False

    asyncio.run(body())


def test_a_cancelled_request_can_no_longer_be_answered() -> None:
    async def body() -> None:
        rec = Recorder()
        broker = PermissionBroker(rec)
        task = asyncio.create_task(broker.ask("s", "t", "Bash", {}))
        await rec.wait_for(lambda: len(rec.messages) == 1)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        assert task.cancelled()
        expect_not_found(broker, rec.request_ids()[0])

    asyncio.run(body())
