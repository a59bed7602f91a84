"""Model-supplied patterns cannot freeze the host: Grep and Glob work within a time budget."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hostkit import InProcessHost, SubprocessHost

from conformance.mock_provider import MockProvider, ScriptedToolCall, TextReply, ToolCallsReply
from reference_host.errors import HostError
from reference_host.tools import files
from reference_host.tools.base import ToolContext
from reference_host.tools.files import Glob, Grep

EVIL = r"(x+x+)+y"  # backtracks exponentially in any backtracking engine


def ctx(root: Path) -> ToolContext:
    return ToolContext("s1", "t1", root)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "long.txt").write_text("a" * 40 + "!\n" + "x" * 3000 + "\n")
    return root


def test_a_nested_quantifier_over_a_long_line_is_quick(ws: Path) -> None:
    started = time.monotonic()
    result = asyncio.run(Grep().run(ctx(ws), {"pattern": r"^(a+)+$"}))
    assert result == files.NO_MATCHES
    assert time.monotonic() - started < 10  # hours with a plain backtracking engine


def test_a_pattern_that_exceeds_the_budget_is_tool_failed(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "GREP_BUDGET_S", 0.5)
    started = time.monotonic()
    with pytest.raises(HostError) as caught:
        asyncio.run(Grep().run(ctx(ws), {"pattern": EVIL}))
    assert caught.value.code == "TOOL_FAILED"
    assert "time budget" in caught.value.message
    assert time.monotonic() - started < 5


def test_glob_works_within_a_budget_too(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for index in range(50):
        (ws / f"d{index}").mkdir()
        (ws / f"d{index}" / "f.py").write_text("")
    assert len(asyncio.run(Glob().run(ctx(ws), {"pattern": "**/*.py"})).splitlines()) == 50
    monkeypatch.setattr(files, "GLOB_BUDGET_S", 0.0)
    with pytest.raises(HostError) as caught:
        asyncio.run(Glob().run(ctx(ws), {"pattern": "**/*.py"}))
    assert caught.value.code == "TOOL_FAILED"


def test_an_invalid_pattern_is_still_invalid_tool_input(ws: Path) -> None:
    with pytest.raises(HostError) as caught:
        asyncio.run(Grep().run(ctx(ws), {"pattern": "(unclosed"}))
    assert caught.value.code == "INVALID_TOOL_INPUT"


# -- the host stays responsive -------------------------------------------------------------------


@pytest.fixture
def provider() -> Iterator[MockProvider]:
    with MockProvider() as running:
        yield running


def grep_turn(host: InProcessHost | SubprocessHost, provider: MockProvider, ws: Path) -> str:
    """Start a turn whose model greps with the evil pattern; return the session id."""
    call = ScriptedToolCall("Grep", {"pattern": EVIL}, "g1")
    provider.enqueue(ToolCallsReply((call,)), TextReply("done"))
    host.initialize()
    session: str = host.request(
        "session/create",
        {"workspaceRoot": str(ws), "provider": {"baseUrl": provider.base_url, "model": "m"}},
    )["session"]["sessionId"]
    host.request("session/prompt", {"sessionId": session, "text": "search"})
    host.notified("turn/toolCall")
    return session


def test_other_requests_and_cancel_are_answered_while_grep_runs(
    tmp_path: Path, ws: Path, provider: MockProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "GREP_BUDGET_S", 30.0)
    host = InProcessHost(tmp_path / "data")
    try:
        session = grep_turn(host, provider, ws)
        started = time.monotonic()
        host.request("session/list")
        host.request("session/create", {"workspaceRoot": None})
        # Generous bounds for a loaded machine; a frozen host would take the whole 30 s.
        assert time.monotonic() - started < 5.0
        host.request("session/cancel", {"sessionId": session})
        ended = host.notified("turn/ended", timeout=5)
        assert ended["outcome"] == "cancelled"
        (result,) = host.notifications("turn/toolResult")
        assert result["error"]["code"] == "TURN_CANCELLED"
        assert time.monotonic() - started < 10.0
    finally:
        host.stop()


def test_the_budget_ends_the_grep_and_the_turn_goes_on(
    tmp_path: Path, ws: Path, provider: MockProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "GREP_BUDGET_S", 1.0)
    host = InProcessHost(tmp_path / "data")
    try:
        grep_turn(host, provider, ws)
        assert host.notified("turn/ended", timeout=10)["outcome"] == "completed"
        (result,) = host.notifications("turn/toolResult")
        assert (result["status"], result["error"]["code"]) == ("error", "TOOL_FAILED")
    finally:
        host.stop()


def test_sigterm_stops_the_host_during_a_grep(
    tmp_path: Path, ws: Path, provider: MockProvider
) -> None:
    host = SubprocessHost(tmp_path / "data")
    try:
        grep_turn(host, provider, ws)
        started = time.monotonic()
        host.process.send_signal(signal.SIGTERM)
        assert host.process.wait(30) == 0
        assert time.monotonic() - started < 8.0  # within the grep's 10 s budget: not frozen
    finally:
        if host.process.poll() is None:
            host.process.kill()
            host.process.wait()
