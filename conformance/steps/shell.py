"""Steps about the shell catalog, command output, timeouts and the audit (§5, §7)."""

from __future__ import annotations

import contextlib
import os
import select
from pathlib import Path
from typing import Any

from pytest_bdd import given, parsers, then, when

from conformance.mock_provider import ScriptedToolCall, TextReply, ToolCallsReply
from conformance.steps.sessions import session_id
from conformance.world import World


def _catalog(world: World) -> dict[str, Any]:
    return world.rpc.request("shell/list", {})


@given(parsers.parse("the machine has the shell {shell}"))
def machine_has(world: World, shell: str) -> None:
    ids = [s["shellId"] for s in _catalog(world)["shells"]]
    assert shell in ids, f"the host's shell catalog {ids} lacks {shell}; this scenario needs it"


@given(parsers.parse("the user made {shell} the default shell"))
@when(parsers.parse("the user makes {shell} the default shell"))
def make_default(world: World, shell: str) -> None:
    world.attempt("shell/setDefault", {"shellId": shell})


@when(parsers.parse('the user tries to make "{shell}" the default shell'))
def make_unknown_default(world: World, shell: str) -> None:
    world.attempt("shell/setDefault", {"shellId": shell})


@then(parsers.parse("the default shell is {shell}"))
def default_is(world: World, shell: str) -> None:
    found = _catalog(world)["defaultShellId"]
    assert found == shell, f"the default shell is {found}"


@then("every shell in the catalog has a stable id and an absolute path")
def catalog_entries(world: World) -> None:
    shells = _catalog(world)["shells"]
    assert shells, "the catalog is empty"
    ids = [s["shellId"] for s in shells]
    assert len(ids) == len(set(ids)), f"duplicate ids: {ids}"
    for shell in shells:
        assert shell["path"].startswith("/"), shell
    again = [s["shellId"] for s in _catalog(world)["shells"]]
    assert again == ids, "the catalog changed between two reads"


@given(parsers.parse("the session uses the shell {shell}"))
def session_shell(world: World, shell: str) -> None:
    world.rpc.request("session/configure", {"sessionId": session_id(world), "shellId": shell})


@given(parsers.parse('the model will run the command "{command}" with a timeout of {ms:d} ms'))
def model_runs_with_timeout(world: World, command: str, ms: int) -> None:
    world.provider.enqueue(
        ToolCallsReply((ScriptedToolCall("Bash", {"command": command, "timeout_ms": ms}),)),
        TextReply("The command took too long."),  # the answer to the timed-out result
    )


@when(parsers.parse('the command has printed "{text}"'))
def printed(world: World, text: str) -> None:
    since = world.cursors.turn
    world.wait_for("command/output", lambda p: text in p["text"], since=since)


@when("the command has printed its background process id")
def printed_pid(world: World) -> None:
    since = world.cursors.turn
    world.wait_for(
        "command/output",
        lambda p: p["stream"] == "stdout" and p["text"].strip().isdigit(),
        since=since,
    )


@when(parsers.parse("{seconds:d} seconds pass"))
def seconds_pass(world: World, seconds: int) -> None:
    world.rpc.request("conformance/clock/advance", {"ms": seconds * 1000})


def _exit(world: World) -> dict[str, Any]:
    since = world.cursors.turn
    return world.wait_for("command/exited", since=since)


def _chunks(world: World) -> list[dict[str, Any]]:
    """The output notifications of the command that exited, in arrival order."""
    exited = _exit(world)
    since = world.cursors.turn
    return [
        n["params"]
        for n in world.notifications("command/output", since)
        if n["params"]["commandId"] == exited["commandId"]
    ]


def _output(world: World, stream: str) -> str:
    return "".join(c["text"] for c in _chunks(world) if c["stream"] == stream)


@then(parsers.parse("the command ran in the shell {shell}"))
def ran_in(world: World, shell: str) -> None:
    since = world.cursors.turn
    started = world.wait_for("command/started", since=since)
    assert started["shellId"] == shell, f"the command ran in {started['shellId']}"
    path = next(s["path"] for s in _catalog(world)["shells"] if s["shellId"] == shell)
    reported = _output(world, "stdout").strip()
    assert os.path.realpath(reported) == os.path.realpath(path), (
        f"the process ran {reported}, the catalog says {shell} is {path}"
    )


@then("its output streamed in order with stdout and stderr apart")
def streamed_in_order(world: World) -> None:
    chunks = _chunks(world)
    since = world.cursors.turn
    seqs = [c["seq"] for c in chunks]
    assert seqs == list(range(len(seqs))), f"output sequence numbers: {seqs}"
    assert _output(world, "stdout") == "out 1\nout 2\n", repr(_output(world, "stdout"))
    assert _output(world, "stderr") == "err 1\n", repr(_output(world, "stderr"))
    started = world.notifications("command/started", since)
    assert started, "no command/started notification"
    first_output = world.notifications("command/output", since)[0]
    assert first_output["params"]["commandId"] == started[0]["params"]["commandId"]


@then(parsers.parse("the command exited with code {code:d}"))
def exited_with(world: World, code: int) -> None:
    exited = _exit(world)
    assert exited["exitCode"] == code, exited


@then("the command timed out")
def timed_out(world: World) -> None:
    exited = _exit(world)
    assert exited["timedOut"] is True, exited


@then("the command was cancelled")
def cancelled(world: World) -> None:
    exited = _exit(world)
    assert exited["cancelled"] is True, exited


@then("no process the command started is still alive")
def group_gone(world: World) -> None:
    pids = [int(word) for word in _output(world, "stdout").split() if word.isdigit()]
    assert pids, "the command did not print the pid of its background process"
    for pid in pids:
        _wait_gone(pid, world.timeout)


def _wait_gone(pid: int, timeout: float) -> None:
    """Wait on the process itself (pidfd), not by sleeping, until it has ended."""
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        ready, _, _ = select.select([handle], [], [], timeout)
        assert ready or _is_zombie(pid), f"process {pid} is still alive after {timeout} s"
    finally:
        with contextlib.suppress(OSError):
            os.close(handle)


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


@then("the command's output was truncated")
def truncated(world: World) -> None:
    exited = _exit(world)
    assert exited["truncated"] is True, exited


@then(parsers.parse("the command's output is one line of {count:d} characters"))
def long_line(world: World, count: int) -> None:
    out = _output(world, "stdout")
    assert out.endswith("\n") and "\n" not in out[:-1], "the output was split into lines"
    assert len(out) - 1 == count, f"the line has {len(out) - 1} characters"


@then(parsers.parse('the command\'s output shows a replacement character before "{text}"'))
def replacement(world: World, text: str) -> None:
    out = _output(world, "stdout")
    assert "\ufffd" + text in out, repr(out)


@then("the command is recorded for audit")
def audited(world: World) -> None:
    exited = _exit(world)
    rows = world.storage().rows("command_audit", "id = ?", (exited["commandId"],))
    if not rows:  # a host may key its audit differently; match on the command instead
        rows = world.storage().rows("command_audit")
    assert rows, "command_audit holds no row for the command"
    row = rows[-1]
    assert row["shell_id"] and row["shell_path"].startswith("/"), row
    assert row["cwd"] == str(world.workspace), row
    assert row["exit_code"] == exited["exitCode"], row
    assert row["duration_ms"] is not None and row["duration_ms"] >= 0, row
    assert row["command"], row
