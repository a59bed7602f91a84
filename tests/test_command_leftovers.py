"""When a command ends, everything it started ends: also what left its process group.

Each command prints the pid of something it started in the background and detached
(``setsid``, a double fork); once ``command/exited`` has been sent that process must be
gone, whether the shell exited normally, timed out or was cancelled, or the host stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import select
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from hostkit import InProcessHost, SubprocessHost

from conformance.mock_provider import MockProvider, ScriptedToolCall, TextReply, ToolCallsReply
from reference_host import commands, shells
from reference_host.clock import ManualClock
from reference_host.commands import run_command

SH = shells.find("sh")
assert SH is not None
WAIT_S = 10.0

DETACHING = {
    "setsid": "setsid sleep 1000 & echo $!",
    "double fork": "(sleep 1000 & echo $!) ",
    "setsid double fork": "(setsid sleep 1000 & echo $!) ",
    "nohup in a subshell": "(nohup sleep 1000 >/dev/null 2>&1 & echo $!)",
}


def gone_within(pid: int, seconds: float) -> bool:
    """Whether ``pid`` ends (or is an unreaped zombie) within ``seconds``."""
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        if select.select([handle], [], [], seconds)[0]:
            return True
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state == "Z"
    except FileNotFoundError:
        return True
    finally:
        os.close(handle)


def kill_leftover(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


class Notes:
    def __init__(self) -> None:
        self.messages: list[tuple[str, dict[str, object]]] = []
        self.changed = asyncio.Event()

    def __call__(self, method: str, params: dict[str, object]) -> None:
        self.messages.append((method, params))
        self.changed.set()

    def stdout(self) -> str:
        return "".join(str(p["text"]) for m, p in self.messages if m == "command/output")

    async def wait_for_pid(self) -> int:
        async with asyncio.timeout(WAIT_S):
            while not self.stdout().split():
                self.changed.clear()
                await self.changed.wait()
        return int(self.stdout().split()[0])


def command(notes: Notes, clock: ManualClock, text: str, cwd: Path, timeout_ms: int = 600_000):
    assert SH is not None
    return run_command(
        shell=SH,
        command=text,
        cwd=cwd,
        session_id="s",
        turn_id="t",
        clock=clock,
        notify=notes,
        timeout_ms=timeout_ms,
    )


@pytest.mark.parametrize("text", DETACHING.values(), ids=DETACHING.keys())
def test_a_normal_exit_ends_what_the_command_left_running(tmp_path: Path, text: str) -> None:
    async def body() -> int:
        notes = Notes()
        result = await asyncio.wait_for(command(notes, ManualClock(0), text, tmp_path), WAIT_S)
        assert result.exit_code == 0
        return int(notes.stdout().split()[0])

    pid = asyncio.run(body())
    try:
        assert gone_within(pid, WAIT_S), f"{pid} outlived its command"
    finally:
        kill_leftover(pid)


@pytest.mark.parametrize("text", DETACHING.values(), ids=DETACHING.keys())
def test_a_timeout_ends_what_left_the_group(tmp_path: Path, text: str) -> None:
    async def body() -> int:
        notes, clock = Notes(), ManualClock(0)
        task = asyncio.create_task(command(notes, clock, text + "; sleep 1000", tmp_path, 1000))
        pid = await notes.wait_for_pid()
        await clock.advance(1000)
        result = await asyncio.wait_for(task, WAIT_S)
        assert result.timed_out
        return pid

    pid = asyncio.run(body())
    try:
        assert gone_within(pid, WAIT_S), f"{pid} outlived its command"
    finally:
        kill_leftover(pid)


@pytest.mark.parametrize("text", DETACHING.values(), ids=DETACHING.keys())
def test_a_cancel_ends_what_left_the_group(tmp_path: Path, text: str) -> None:
    async def body() -> int:
        notes = Notes()
        task = asyncio.create_task(command(notes, ManualClock(0), text + "; sleep 1000", tmp_path))
        pid = await notes.wait_for_pid()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, WAIT_S)
        assert notes.messages[-1][0] == "command/exited"
        return pid

    pid = asyncio.run(body())
    try:
        assert gone_within(pid, WAIT_S), f"{pid} outlived its command"
    finally:
        kill_leftover(pid)


def test_a_straggler_holding_the_output_does_not_hold_the_command(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The host gives a pipe 1 s to reach its end once the command is over; on a loaded
    # machine finding and ending the straggler can take longer than that, which is not
    # what this test is about: it proves the straggler is found at all.
    monkeypatch.setattr(commands, "OUTPUT_GRACE_S", WAIT_S)

    async def body() -> int:
        notes = Notes()
        await asyncio.wait_for(
            command(notes, ManualClock(0), "setsid sleep 1000 & echo $!", tmp_path), WAIT_S
        )
        return int(notes.stdout().split()[0])

    with caplog.at_level(logging.WARNING, logger="reference_host.commands"):
        pid = asyncio.run(body())
    kill_leftover(pid)
    # The straggler was ended with the command, so its pipe closed at once: the host did
    # not have to give up waiting for the output.
    assert "output still open" not in caplog.text


def test_the_host_uses_no_private_asyncio_api() -> None:
    source = Path(commands.__file__).read_text(encoding="utf-8")
    assert "._transport" not in source and '"_transport"' not in source


# -- through the host ----------------------------------------------------------------------------


@pytest.fixture
def provider() -> Iterator[MockProvider]:
    with MockProvider() as running:
        yield running


def bash_turn(
    host: InProcessHost | SubprocessHost, provider: MockProvider, cwd: Path, *texts: str
) -> str:
    calls = [ScriptedToolCall("Bash", {"command": text}, f"c{i}") for i, text in enumerate(texts)]
    provider.enqueue(*(ToolCallsReply((call,)) for call in calls), TextReply("done"))
    host.initialize()
    session: str = host.request(
        "session/create",
        {
            "workspaceRoot": str(cwd),
            "permissionMode": "auto",
            "provider": {"baseUrl": provider.base_url, "model": "m"},
        },
    )["session"]["sessionId"]
    host.request("session/prompt", {"sessionId": session, "text": "run"})
    return session


def test_every_command_exited_precedes_its_turn_ended(
    tmp_path: Path, provider: MockProvider
) -> None:
    host = InProcessHost(tmp_path / "data")
    try:
        bash_turn(host, provider, tmp_path, DETACHING["setsid"], DETACHING["double fork"])
        host.notified("turn/ended")
        methods = [m.get("method") for m in host.messages]
        assert methods.count("command/exited") == 2
        last_exit = max(i for i, m in enumerate(methods) if m == "command/exited")
        assert last_exit < methods.index("turn/ended")
        pids = [int(p["text"].split()[0]) for p in host.notifications("command/output")]
        for pid in pids:
            assert gone_within(pid, WAIT_S)
    finally:
        host.stop()
        for pid in [int(p["text"].split()[0]) for p in host.notifications("command/output")]:
            kill_leftover(pid)


def test_stopping_the_host_ends_a_running_command_and_what_it_detached(
    tmp_path: Path, provider: MockProvider
) -> None:
    host = SubprocessHost(tmp_path / "data")
    pid = 0
    try:
        bash_turn(host, provider, tmp_path, "setsid sleep 1000 & echo $!; sleep 1000")
        pid = int(host.notified("command/output")["text"].split()[0])
        assert host.stop() == 0
        assert gone_within(pid, WAIT_S), f"{pid} outlived the host"
    finally:
        if host.process.poll() is None:
            host.process.kill()
        if pid:
            kill_leftover(pid)


def test_the_host_reaps_what_it_inherits(tmp_path: Path, provider: MockProvider) -> None:
    host = SubprocessHost(tmp_path / "data")
    try:
        # The first command leaves an orphan that ends by itself; the host, its new parent,
        # must reap it (by the end of the next command at the latest).
        bash_turn(host, provider, tmp_path, "(sleep 0 &) ; true", "sleep 0.2")
        host.notified("turn/ended")
        zombies = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                    if fields[0] == "Z" and int(fields[1]) == host.process.pid:
                        zombies.append(entry.name)
        assert zombies == []
    finally:
        host.stop()
