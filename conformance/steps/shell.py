"""Steps about shells, streamed command output, the end of a command and its audit
(§5, §7, Consequences, project rules P19 and P20).

Scenarios name shells by kind ("the POSIX shell", "the bash shell"); the ids are the
host's, taken from ``shell/list``, and a host without a shell of the kind a scenario needs
makes it unverified. The machinery lives here, not in the Gherkin: a command waits on a
named pipe (a FIFO) in the workspace until the harness has looked at it, and a small
Python program started by the command plays the process it leaves behind (in the
background, in a session of its own, behind a double fork, ignoring SIGTERM). Processes are
examined with psutil, so this works on Linux and macOS.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any, Final

import psutil
from pytest_bdd import given, parsers, then, when

from conformance.blame import blame, verifies
from conformance.capabilities import Unverified, require_output_room, shell_of_kind
from conformance.messages import (
    message_text,
    messages_after_call,
    request_answering,
    request_text,
    unanswered_calls,
)
from conformance.mock_provider import ScriptedToolCall, StallReply, TextReply, ToolCallsReply
from conformance.protocol_models import ShellListResult
from conformance.steps.model import script_calls, tool_call
from conformance.steps.plan import check_one_result
from conformance.steps.requests import granted, mock_provider, plain
from conformance.steps.sessions import read_session, session_id
from conformance.world import World, need

KINDS = {"POSIX": "posix-sh", "bash": "bash"}
CHUNK_CHARS = 16384
NOTICE_ALLOWANCE = 1024  # a host's own truncation notice may add this much
LARGEST_CAP_EXERCISED = 16 * 1024 * 1024
STILL_RUNNING_S = 1.0  # how long a command that must still run is watched for an end
GONE_GRACE_S = 2.0  # a killed process takes a moment to disappear from the process table
SETTINGS_KEY = "default_shell_id"

# The process a command leaves behind. It reports its pid through the FIFO named by its
# second argument, then lives on until something ends it.
LEAVER = r"""
import os, signal, sys, time
mode, ready = sys.argv[1], sys.argv[2]
if mode == "ignoring-term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if mode == "own-session":
    os.setsid()
if mode == "double-fork":
    if os.fork():
        os._exit(0)
    os.setsid()
    if os.fork():
        os._exit(0)
with open(ready, "w") as fifo:
    fifo.write(f"{os.getpid()}\n")
time.sleep(3600)
"""
LEFT_BEHIND = {
    "in the background": "background",
    "in a session of its own": "own-session",
    "behind a double fork": "double-fork",
    "ignoring requests to stop": "ignoring-term",
}
NAMED_COMMANDS = {
    "writes to both streams and exits with code 3": (
        "echo 'out 1'; echo 'err 1' >&2; echo 'out 2'; exit 3"
    ),
    "prints a line longer than 64 KiB": "head -c 70000 /dev/zero | tr '\\0' b; echo",
    "prints bytes that are not UTF-8": "printf '\\377ok\\n'",
    # a continuation byte with no character before it, read apart from what follows
    "prints a byte that continues no character, on its own": (
        "printf '\\200'; sleep 0.3; printf 'ok\\n'"
    ),
    # "é" (C3 A9) in two writes, apart in time: a host reads them in two pieces
    "prints a character in two pieces": "printf '\\303'; sleep 0.3; printf '\\251ok\\n'",
    # "€" (E2 82 AC) cut after its second byte, "🚀" (F0 9F 9A 80) after its third
    "prints a three-byte character cut after its second byte": (
        "printf '\\342\\202'; sleep 0.3; printf '\\254ok\\n'"
    ),
    "prints a four-byte character cut after its third byte": (
        "printf '\\360\\237\\232'; sleep 0.3; printf '\\200ok\\n'"
    ),
    # a CR LF line end, then a lone CR, and no line end at all
    "prints carriage returns": "printf 'a  \\r\\nb\\rc \\t\\r\\n'",
    "prints a NUL character": "printf 'a\\000b\\n'",
}
CARRIAGE_RETURNS = "a  \r\nb\rc \t\r\n"  # trailing blanks too: nothing is tidied
PRINTED_AS_IS = {"carriage returns": CARRIAGE_RETURNS, "NUL character": "a\0b\n"}
TWO_BYTE_CHAR = "\u00e9"  # é, C3 A9 in UTF-8


# -- helpers --------------------------------------------------------------------------------


def _catalog(world: World) -> ShellListResult:
    return granted(world.rpc.list_shells)


def _shell(world: World, label: str) -> dict[str, Any]:
    """The host's shell of the kind ``label`` names; unverified when it has none."""
    return shell_of_kind(world, KINDS[label])


def _gate(world: World, name: str) -> Path:
    """A named pipe in the workspace that a command waits on."""
    path = world.workspace / name
    os.mkfifo(path)
    return path


def _release(world: World, gate: Path) -> None:
    """Let a command waiting on ``gate`` go on, whether it already waits or is about to.

    The word is written into the pipe through a descriptor that stays open (for reading
    and writing, so opening never blocks) until the turn ends: closed any earlier, a word
    written before the command opened the pipe would be lost, and the command would wait
    for ever.
    """
    fd = os.open(gate, os.O_RDWR | os.O_NONBLOCK)
    world.commands.open_gates.append(fd)
    os.write(fd, b"go\n")


def _start(
    world: World, command: str, *, timeout_ms: int | None = None, finish: bool = True
) -> str:
    """Script a Bash call of ``command`` (and, with ``finish``, the answer after its
    result), prompt the session, and return the turn's id without waiting for it."""
    arguments: dict[str, Any] = {"command": command}
    if timeout_ms is not None:
        arguments["timeout_ms"] = timeout_ms
    answer = "The command is done." if finish else None
    return _prompt_calls(world, (ScriptedToolCall("Bash", arguments),), answer, "Run it.")


def _prompt_calls(
    world: World, calls: tuple[ScriptedToolCall, ...], answer: str | None, text: str
) -> str:
    """Script one message making ``calls`` (and ``answer`` after their results), prompt the
    session in its POSIX shell, and return the turn's id without waiting for it."""
    speak_posix(world)
    world.provider.enqueue(ToolCallsReply(calls))
    if answer is not None:
        world.provider.enqueue(TextReply(answer))
    world.cursors.turn = world.mark()
    world.cursors.provider_turn = len(world.provider.requests())
    turn_id = granted(world.rpc.prompt, session_id(world), text).turnId
    world.commands.turn_id = turn_id
    return turn_id


POSIX_KINDS: Final = ("posix-sh", "bash")


def speak_posix(world: World, alias: str = "main") -> None:
    """Make sure the session runs the scenarios' POSIX command lines in a POSIX-kind shell.

    A session with a shell of its own, or whose default shell is of a POSIX kind, is left
    as it is. The default is otherwise the host's choice (R7.6), so a session on a default
    of another kind, or on one the host does not name, is given the host's first
    POSIX-kind shell; a host without one leaves the scenario unverified.
    """
    if read_session(world, alias).get("shellId") is not None:
        return
    catalog = granted(world.rpc.list_shells)
    kinds = {shell.shellId: shell.kind for shell in catalog.shells}
    if kinds.get(catalog.defaultShellId or "") in POSIX_KINDS:
        return
    posix = next((shell for shell in catalog.shells if shell.kind in POSIX_KINDS), None)
    if posix is None:
        raise Unverified("shell:posix-sh", "the host's catalog has no POSIX or bash shell")
    granted(world.rpc.configure_session, session_id(world, alias), shell_id=posix.shellId)


def _turn_id(world: World) -> str:
    return need(world.commands.turn_id, "turn that runs the command")


def _turn_end(world: World) -> dict[str, Any]:
    turn_id = _turn_id(world)
    ended = world.wait_for("turn/ended", lambda p: p["turnId"] == turn_id, since=world.cursors.turn)
    world.last_turn_end = ended
    while world.commands.open_gates:
        os.close(world.commands.open_gates.pop())
    return ended


def _started(world: World) -> dict[str, Any]:
    turn_id, own = _turn_id(world), session_id(world)
    _command_started_before_its_turn_ended(world, turn_id)
    started = world.wait_for(
        "command/started",
        lambda p: p["turnId"] == turn_id or p["sessionId"] == own,
        since=world.cursors.turn,
    )
    with blame("R5.9"):
        assert started["turnId"] == turn_id, (
            f"command/started names the turn {started['turnId']}, but the command was run in "
            f"the session's turn {turn_id}: a command belongs to the turn whose call ran it"
        )
    return started


def _command_started_before_its_turn_ended(world: World, turn_id: str) -> None:
    """Fail at once, naming the call's result, when the turn already ended without
    announcing a command: a command runs inside its turn, so none can follow its end."""
    since = world.cursors.turn
    ended = any(n["params"]["turnId"] == turn_id for n in world.notifications("turn/ended", since))
    own = session_id(world)
    if not ended or any(
        n["params"]["turnId"] == turn_id or n["params"]["sessionId"] == own
        for n in world.notifications("command/started", since)
    ):
        return
    raise AssertionError(
        f"the turn {turn_id} ended without starting the model's command; its tool results: "
        f"{world.tool_results(turn_id, since)}"
    )


def _exited(world: World) -> dict[str, Any]:
    command_id = _started(world)["commandId"]
    return world.wait_for(
        "command/exited", lambda p: p["commandId"] == command_id, since=world.cursors.turn
    )


def _chunks(world: World) -> list[dict[str, Any]]:
    """The command's output notifications, in arrival order, once it has exited."""
    command_id = _exited(world)["commandId"]
    return [
        n["params"]
        for n in world.notifications("command/output", world.cursors.turn)
        if n["params"]["commandId"] == command_id
    ]


def _output(world: World, stream: str) -> str:
    return "".join(c["text"] for c in _chunks(world) if c["stream"] == stream)


def _wait_output(world: World, text: str) -> dict[str, Any]:
    turn_id = _turn_id(world)
    command_id = world.wait_for(
        "command/started", lambda p: p["turnId"] == turn_id, since=world.cursors.turn
    )["commandId"]
    return wait_command_line(world, command_id, text, world.cursors.turn)


def wait_command_line(world: World, command_id: str, text: str, since: int) -> dict[str, Any]:
    """Wait until one stream of the command, its pieces joined in ``seq`` order, holds
    ``text`` and the rest of its line; the command's id and that stream's text so far.

    How output is cut into command/output notifications is the host's (P20): a line may
    come in several pieces."""
    while True:
        mark = world.mark()  # before reading, so that no piece is missed in between
        pieces = sorted(
            (n["params"] for n in world.notifications("command/output", since)),
            key=lambda p: p["seq"],
        )
        for stream in ("stdout", "stderr"):
            joined = "".join(
                p["text"] for p in pieces if p["commandId"] == command_id and p["stream"] == stream
            )
            at = joined.find(text)
            if at >= 0 and "\n" in joined[at:]:
                return {"commandId": command_id, "stream": stream, "text": joined}
        world.wait_for("command/output", lambda p: p["commandId"] == command_id, since=mark)


def _cap(world: World) -> int:
    cap = int(world.capabilities()["maxCommandOutputBytes"])
    if cap > LARGEST_CAP_EXERCISED:
        raise Unverified(
            "maxCommandOutputBytes",
            f"the announced output cap of {cap} bytes is larger than the suite exercises "
            f"({LARGEST_CAP_EXERCISED} bytes)",
        )
    return cap


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


# -- the catalog and the default shell ----------------------------------------------------


@then("every shell in the catalog has a stable id, an absolute path and a kind")
@verifies("R7.6")
def catalog_entries(world: World) -> None:
    catalog = _catalog(world)
    shells = catalog.shells
    assert shells, "the catalog is empty"
    ids = [s.shellId for s in shells]
    assert len(ids) == len(set(ids)), f"duplicate ids: {ids}"
    for shell in shells:
        assert Path(shell.path).is_absolute(), f"{shell.shellId} has the path {shell.path}"
        assert os.access(shell.path, os.X_OK), f"{shell.path} is not an executable file"
    assert catalog.defaultShellId in ids, f"the default {catalog.defaultShellId} is unknown"
    again = _catalog(world).shells
    assert sorted(again, key=lambda s: s.shellId) == sorted(shells, key=lambda s: s.shellId), (
        "the catalog changed between two reads"
    )


@given(parsers.parse("the user made the {label} shell the default shell"))
@when(parsers.parse("the user makes the {label} shell the default shell"))
def make_default(world: World, label: str) -> None:
    shell = _shell(world, label)
    world.commands.default_before = _catalog(world).defaultShellId
    result = granted(world.rpc.set_default_shell, shell["shellId"])
    assert result.defaultShellId == shell["shellId"], result
    world.commands.chosen_default = shell


def _another_default(world: World) -> dict[str, Any]:
    """A POSIX or bash shell other than the default; the default is kept as it was."""
    current = _catalog(world).defaultShellId
    for label in KINDS:
        try:
            shell = _shell(world, label)
        except Unverified:
            continue
        if shell["shellId"] != current:
            world.commands.default_before = current
            world.commands.chosen_default = shell
            return shell
    raise Unverified("shell:posix-sh", "the host has no POSIX or bash shell besides its default")


@given("the user chose a new default shell")
def choose_new_default(world: World) -> None:
    granted(world.rpc.set_default_shell, _another_default(world)["shellId"])


@when("the user chooses another default shell")
def choose_another_default(world: World) -> None:
    world.attempt_typed(world.rpc.set_default_shell, _another_default(world)["shellId"])


@then("the chosen shell is the default shell")
@verifies("R7.6")
def chosen_is_default(world: World) -> None:
    world.outcome.require_result()
    chosen = need(world.commands.chosen_default, "chosen default shell")["shellId"]
    found = _catalog(world).defaultShellId
    assert found == chosen, f"the default shell is {found}, not the chosen {chosen}"
    rows = world.storage().rows("settings", "key = ?", (SETTINGS_KEY,))
    stored = rows[0]["value"] if rows else None
    assert stored == chosen, f"settings hold {SETTINGS_KEY} = {stored}, not the chosen {chosen}"


@when(parsers.parse('the user tries to make "{shell}" the default shell'))
def make_unknown_default(world: World, shell: str) -> None:
    world.commands.default_before = _catalog(world).defaultShellId
    world.attempt_typed(world.rpc.set_default_shell, shell)


@then("the chosen default shell is still the default")
@verifies("R7.6")
def default_kept(world: World) -> None:
    chosen = need(world.commands.chosen_default, "chosen default shell")
    found = _catalog(world).defaultShellId
    assert found == chosen["shellId"], f"after the restart the default shell is {found}"
    rows = world.storage().rows("settings", "key = ?", (SETTINGS_KEY,))
    assert rows and rows[0]["value"] == chosen["shellId"], (
        f"settings hold {SETTINGS_KEY} = {rows[0]['value'] if rows else 'nothing'}"
    )


@then("the default shell is unchanged")
@verifies("R7.6")
def default_unchanged(world: World) -> None:
    found = _catalog(world).defaultShellId
    assert found == world.commands.default_before, f"the default shell became {found}"


def _session_using(world: World, alias: str, label: str) -> None:
    """A session for the project, permission mode auto, with the ``label`` shell its own."""
    shell = _shell(world, label)
    created = granted(
        world.rpc.create_session,
        str(world.workspace),
        permission_mode="auto",
        shell_id=shell["shellId"],
        provider=mock_provider(world),
    ).session
    assert created.shellId == shell["shellId"], created
    world.sessions[alias] = plain(created)


@given(
    parsers.parse("a session for the project with permission mode auto, using the {label} shell")
)
def session_with_shell(world: World, label: str) -> None:
    _session_using(world, "main", label)


@given(parsers.parse("another session of the project uses the {label} shell"))
def neighbour_with_shell(world: World, label: str) -> None:
    _session_using(world, "neighbour", label)


@when("the user clears the session's own choice of shell")
def clear_session_shell(world: World) -> None:
    cleared = granted(world.rpc.configure_session, session_id(world), shell_id=None).session
    world.sessions["main"] = plain(cleared)


@then("the session has no shell of its own")
@verifies("R7.3")
def no_shell_of_its_own(world: World) -> None:
    answered = world.sessions["main"].get("shellId")
    assert answered is None, f"the session still names {answered} in the configure answer"
    found = granted(world.rpc.get_session, session_id(world)).session.shellId
    assert found is None, f"the session still names {found} when read back"
    row = world.storage().rows("sessions", "id = ?", (session_id(world),))[0]
    assert row["shell_id"] is None, f"the session still names {row['shell_id']} in storage"


# -- which shell ran the command ----------------------------------------------------------------


def reveal_shell(world: World) -> None:
    """Run a command that waits until the harness has seen which program its shell is."""
    (world.workspace / ".gate-shell").unlink(missing_ok=True)  # an earlier command's
    gate = _gate(world, ".gate-shell")
    _start(world, 'echo "SHELL $$"; read answer < .gate-shell')
    line = _wait_output(world, "SHELL ")["text"]
    pid = int(line.split("SHELL ", 1)[1].split()[0])
    try:
        world.commands.executable = os.path.realpath(psutil.Process(pid).exe())
    except psutil.Error as error:
        world.commands.executable = f"unknown ({error})"
    finally:
        _release(world, gate)
    _turn_end(world)


def _distinct(world: World) -> None:
    programs = {os.path.realpath(_shell(world, label)["path"]) for label in KINDS}
    if len(programs) < len(KINDS):
        raise Unverified(
            "shell:distinct",
            f"the host's POSIX and bash shells are the same program ({programs.pop()}): the "
            "suite cannot tell which of them ran a command",
        )


@then(parsers.parse("the command ran in the {label} shell"))
@verifies("R7.3", "R7.6")
def ran_in(world: World, label: str) -> None:
    _distinct(world)
    shell = _shell(world, label)
    started = _started(world)
    assert started["shellId"] == shell["shellId"], (
        f"the command was announced in {started['shellId']}, not in {shell['shellId']}"
    )
    expected = os.path.realpath(shell["path"])
    assert world.commands.executable == expected, (
        f"the process ran {world.commands.executable}, the catalog says "
        f"{shell['shellId']} is {shell['path']}"
    )


@then("a command now runs in the chosen default shell")
@verifies("R7.6")
def runs_in_default(world: World) -> None:
    chosen = need(world.commands.chosen_default, "chosen default shell")
    created = granted(
        world.rpc.create_session,
        str(world.workspace),
        permission_mode="auto",
        provider=mock_provider(world),
    )
    world.sessions["main"] = plain(created.session)
    reveal_shell(world)
    started = _started(world)
    assert started["shellId"] == chosen["shellId"], (
        f"after the restart a command ran in {started['shellId']}, not in the default "
        f"{chosen['shellId']}"
    )
    assert world.commands.executable == os.path.realpath(chosen["path"]), (
        f"the process ran {world.commands.executable}, not {chosen['path']}"
    )


# -- output ---------------------------------------------------------------------------------------


def prints_then_waits(world: World) -> None:
    """Run a command that prints a line, then waits until the harness has seen it."""
    gate = _gate(world, ".gate-stream")
    _start(world, "echo first; read answer < .gate-stream; echo second")
    try:
        note = _wait_output(world, "first")
    except TimeoutError:
        world.commands.ran_while_running = False  # nothing came while the command waited
    else:
        ended = world.notifications("command/exited", world.cursors.turn)
        world.commands.ran_while_running = not any(
            n["params"]["commandId"] == note["commandId"] for n in ended
        )
    finally:
        _release(world, gate)
    _turn_end(world)


@then("the line arrived while the command was still running")
@verifies("R7.3")
def arrived_while_running(world: World) -> None:
    assert world.commands.ran_while_running is not False, (
        "the command's first line arrived only after the command had ended"
    )
    assert _output(world, "stdout") == "first\nsecond\n", repr(_output(world, "stdout"))


@given("the session already ran a command that revealed its shell")
def ran_reveal(world: World) -> None:
    reveal_shell(world)


@when(parsers.parse("the model runs a command that {does}"))
def runs_named(world: World, does: str) -> None:
    if does in NAMED_COMMANDS:
        _start(world, NAMED_COMMANDS[does])
        _turn_end(world)
    elif does == "reveals its shell":
        reveal_shell(world)
    elif does == "prints a line and then waits":
        prints_then_waits(world)
    elif does.startswith("leaves a process "):
        _leave_behind(world, does)
    else:
        raise AssertionError(f"no command is named {does!r}")


@then("its output streamed in order with stdout and stderr apart")
@verifies("P20")
def streamed_in_order(world: World) -> None:
    require_output_room(world, len("out 1\nout 2\nerr 1\n"))  # both streams share the cap
    chunks = _chunks(world)
    seqs = [c["seq"] for c in chunks]
    assert seqs == list(range(len(seqs))), f"output sequence numbers: {seqs}"
    assert _output(world, "stdout") == "out 1\nout 2\n", repr(_output(world, "stdout"))
    assert _output(world, "stderr") == "err 1\n", repr(_output(world, "stderr"))
    started = world.notifications("command/started", world.cursors.turn)
    first = world.notifications("command/output", world.cursors.turn)[0]
    assert started and first["params"]["commandId"] == started[0]["params"]["commandId"], (
        "output arrived before its command was announced"
    )


@when(parsers.parse("the model runs a command whose shell is ended by signal {number:d}"))
def shell_signalled(world: World, number: int) -> None:
    _start(world, f"kill -{number} $$")


@then(parsers.parse("the command ended by signal {number:d}"))
@verifies("R7.3")
def ended_by_signal(world: World, number: int) -> None:
    exited = _exited(world)
    assert exited["signal"] == number, (
        f"the shell, ended by signal {number}, was reported with signal {exited['signal']} "
        f"and exit code {exited['exitCode']}"
    )


@when(parsers.parse("the model runs a command whose shell exits with status {status:d}"))
def shell_exits_with(world: World, status: int) -> None:
    _start(world, f"exit {status}")
    _turn_end(world)


@then(parsers.parse("the command exited with code {code:d}"))
@verifies("R7.3")
def exited_with(world: World, code: int) -> None:
    exited = _exited(world)
    ending = (exited["exitCode"], exited["signal"])
    assert ending == (code, None), (
        f"the shell exited on its own with status {code}, but the command ended with (exit "
        f"code, signal) {ending}: signal is for a shell a signal ended, whatever the status"
    )
    with blame("C5"):  # the audit records what command/exited reported, and what happened
        rows = world.storage().rows("command_audit", "id = ?", (exited["commandId"],))
        recorded = (rows[0]["exit_code"], rows[0]["signal"]) if rows else "no row"
        assert recorded == (code, None), (
            f"command_audit records (exit code, signal) {recorded} for a shell that exited "
            f"with status {code}"
        )


@then(parsers.parse("the output is one line of {count:d} characters in chunks of at most 16384"))
@verifies("P20")
def long_line(world: World, count: int) -> None:
    if _cap(world) <= count:
        raise Unverified(
            "maxCommandOutputBytes",
            f"the announced output cap is smaller than the {count + 1} bytes this check prints",
        )
    chunks = _chunks(world)
    sizes = [len(c["text"]) for c in chunks]
    assert max(sizes) <= CHUNK_CHARS, f"chunks of {max(sizes)} characters"
    assert [c["seq"] for c in chunks] == list(range(len(chunks))), "chunks out of sequence"
    out = _output(world, "stdout")
    assert out == "b" * count + "\n", f"the line arrived as {len(out)} characters"


@then(parsers.parse('the output shows a replacement character before "{text}"'))
@verifies("P20")
def replacement(world: World, text: str) -> None:
    out = _output(world, "stdout")
    assert out == "\ufffd" + text + "\n", repr(out)


@then(parsers.parse('the output shows "{text}" whole'))
@verifies("P20")
def shows_whole(world: World, text: str) -> None:
    out = _output(world, "stdout")
    assert out == text + "\n", f"a character split between two reads was not kept whole: {out!r}"


@when(parsers.parse("the model runs a command whose output is {size} the host's output cap"))
def output_near_cap(world: World, size: str) -> None:
    cap = _cap(world)
    over = {"exactly": 0, "one byte over": 1, "eight kibibytes over": 8192}[size]
    # the bytes past the cap are a control character no notice holds, so none can hide there
    command = f"head -c {cap} /dev/zero | tr '\\0' 7"
    if over:
        command += f"; head -c {over} /dev/zero | tr '\\0' '\\001'"
    _start(world, command)
    _turn_end(world)


@when("the model runs a command whose two streams together pass the host's output cap")
def both_streams_over_cap(world: World) -> None:
    half = _cap(world) // 2 + 64
    _start(
        world,
        f"head -c {half} /dev/zero | tr '\\0' o; head -c {half} /dev/zero | tr '\\0' e >&2",
    )
    _turn_end(world)


@then("the output was streamed whole and not marked truncated")
@verifies("P20")
def streamed_whole(world: World) -> None:
    cap = _cap(world)
    exited = _exited(world)
    assert exited["truncated"] is False, f"output of exactly the cap was marked truncated: {exited}"
    out = _output(world, "stdout")
    assert out == "7" * cap, f"{len(out)} characters of {cap} were streamed"
    assert max(len(c["text"]) for c in _chunks(world)) <= CHUNK_CHARS


@then("the output was cut at the cap and marked truncated")
@verifies("P20")
def cut_at_cap(world: World) -> None:
    cap = _cap(world)
    exited = _exited(world)
    assert exited["truncated"] is True, f"output past the cap was not marked truncated: {exited}"
    out = _output(world, "stdout")
    assert out.startswith("7" * cap), (
        f"the first {cap} bytes of the output were not streamed ({len(out)} characters arrived)"
    )
    notice = out[cap:]
    assert not notice.startswith("7"), f"output past the announced cap of {cap} bytes was streamed"
    assert "\x01" not in notice, (
        f"output past the announced cap of {cap} bytes was streamed after it: {notice[:200]!r}"
    )
    assert len(notice.encode()) <= NOTICE_ALLOWANCE, f"{len(notice)} characters after the cap"
    row = world.storage().rows("command_audit", "id = ?", (exited["commandId"],))
    assert row and row[0]["truncated"] == 1, f"the audit does not record the truncation: {row}"


@when(
    "the model runs a command whose output of two-byte characters passes the host's output "
    "cap in bytes, not in characters"
)
def two_byte_output_over_cap(world: World) -> None:
    cap = _cap(world)
    if cap < 4:
        raise Unverified(
            "maxCommandOutputBytes",
            f"the announced output cap of {cap} bytes is too small to tell bytes from characters",
        )
    count = cap // 2 + 1  # over the cap in bytes, under it in characters
    character = "".join(f"\\{byte:03o}" for byte in TWO_BYTE_CHAR.encode())
    _start(world, f"yes \"$(printf '{character}')\" | tr -d '\\n' | head -c {2 * count}")
    _turn_end(world)


@then("the output was cut at the cap in bytes and marked truncated")
@verifies("P20")
def cut_at_cap_in_bytes(world: World) -> None:
    cap = _cap(world)
    count = cap // 2 + 1
    exited = _exited(world)
    out = _output(world, "stdout")
    whole = len(out) - len(out.lstrip(TWO_BYTE_CHAR))
    assert exited["truncated"] is True, (
        f"{count} characters of 2 bytes ({2 * count} bytes) passed the announced cap of {cap} "
        f"bytes, but the output was not marked truncated ({whole} characters were streamed): "
        "maxCommandOutputBytes counts bytes, not characters"
    )
    assert whole <= cap // 2, (
        f"{whole} characters of 2 bytes ({2 * whole} bytes) were streamed, past the announced "
        f"cap of {cap} bytes: maxCommandOutputBytes counts bytes, not characters"
    )
    assert whole == cap // 2, (
        f"only {whole} characters of 2 bytes were streamed, {2 * whole} of the {cap} bytes the "
        "cap lets through"
    )
    notice = out[whole:]
    assert len(notice.encode()) <= NOTICE_ALLOWANCE, (
        f"{len(notice.encode())} bytes were streamed after the cap"
    )


@then(parsers.parse("the output and the model's result hold the {sample} as printed"))
@verifies("P20")
def printed_as_is(world: World, sample: str) -> None:
    printed = PRINTED_AS_IS[sample]
    require_output_room(world, len(printed))
    out = _output(world, "stdout")
    assert out == printed, (
        f"the command printed {printed!r}, command/output (joined in seq order) "
        f"carried {out!r}: output is streamed as the command wrote it, line ends included"
    )
    with blame("P10"):  # Bash gives the model the command's output
        turn_id = _turn_id(world)
        results = [
            r for r in world.tool_results(turn_id, world.cursors.turn) if r["tool"] == "Bash"
        ]
        assert len(results) == 1, f"the Bash call got {len(results)} results"
        call_id = results[0]["toolCallId"]
        requests = world.provider.requests()[world.cursors.provider_turn :]
        request = request_answering(requests, call_id)
        assert request is not None, "the model was never given the result of its Bash call"
        given = "\n".join(message_text(m) for m in messages_after_call(request, call_id))
        escaped = json.dumps(printed)[1:-1]  # a result given as JSON text
        assert printed in given or escaped in given, (
            f"the command printed {printed!r}, the model was given {given!r}: Bash "
            "gives the model the command's output as it was printed"
        )


@then("the output of both streams together stayed within the cap")
@verifies("P20")
def within_cap(world: World) -> None:
    cap = _cap(world)
    exited = _exited(world)
    assert exited["truncated"] is True, f"the output was not marked truncated: {exited}"
    streamed = sum(len(c["text"].encode()) for c in _chunks(world))
    assert streamed <= cap + 2 * NOTICE_ALLOWANCE, (
        f"{streamed} bytes were streamed, the announced cap is {cap} bytes for both streams"
    )
    payload = _output(world, "stdout").count("o") + _output(world, "stderr").count("e")
    assert payload >= cap - 2 * NOTICE_ALLOWANCE, f"only {payload} bytes of output were streamed"


SHORT_OF_CAP: Final = 500  # the first stream stops this many bytes short of the cap
PAST_CAP: Final = 8192  # the numbered output goes on this far past the cap
NUMBERED_FILE: Final = "numbered.txt"


def _numbered(cap: int) -> str:
    """Numbered lines (``00000001``, ``00000002``, ...) after a header line whose length
    puts the character just past the cap on the third digit of a line number, so that no
    notice of the host's own can be taken for the output going on."""
    header = 9 + (cap - 2) % 9
    count = (cap + PAST_CAP - header) // 9 + 1
    text = "numbered".ljust(header - 1, ".") + "\n" + "".join(f"{n:08d}\n" for n in range(count))
    return text[: cap + PAST_CAP]


def _short_of_cap(cap: int) -> int:
    return cap - min(SHORT_OF_CAP, cap // 2)


@when(
    "the model runs a command whose numbered lines stop just short of the host's output cap "
    "on one stream and go on past it on the other"
)
def numbered_past_cap(world: World) -> None:
    """The first stream stops short of the cap; once the harness has seen all of it
    streamed, the second goes on past the cap in one piece, so the cap falls inside what a
    host reads at once, wherever its reads begin."""
    cap = _cap(world)
    if cap < 2 * SHORT_OF_CAP:
        raise Unverified(
            "maxCommandOutputBytes",
            f"the announced output cap of {cap} bytes is too small for this check",
        )
    (world.workspace / NUMBERED_FILE).write_text(_numbered(cap))
    first = _short_of_cap(cap)
    gate = _gate(world, ".gate-cap")
    _start(
        world,
        f"head -c {first} {NUMBERED_FILE}; read answer < .gate-cap; "
        f"tail -c +{first + 1} {NUMBERED_FILE} >&2",
    )
    try:
        command_id = _started(world)["commandId"]
        while True:
            mark = world.mark()
            pieces = [
                n["params"]["text"]
                for n in world.notifications("command/output", world.cursors.turn)
                if n["params"]["commandId"] == command_id
            ]
            if sum(len(text.encode()) for text in pieces) >= first:
                break
            world.wait_for("command/output", lambda p: p["commandId"] == command_id, since=mark)
    except TimeoutError:
        pass  # the host streams no more before the command goes on: judged at the end
    finally:
        _release(world, gate)
    _turn_end(world)


@then("no output past the cap was streamed, whatever notice the host added")
@verifies("P20")
def nothing_past_cap(world: World) -> None:
    cap = _cap(world)
    exited = _exited(world)
    assert exited["truncated"] is True, f"output past the cap was not marked truncated: {exited}"
    chunks = sorted(_chunks(world), key=lambda c: c["seq"])
    streamed, printed = "".join(c["text"] for c in chunks), _numbered(cap)
    same = next(
        (i for i, (a, b) in enumerate(zip(streamed, printed, strict=False)) if a != b),
        min(len(streamed), len(printed)),
    )
    assert same <= cap, (
        f"the command's output went on being streamed {same - cap} bytes past the announced "
        f"cap of {cap} bytes (both streams in seq order match what it printed up to byte "
        f"{same}): past the cap nothing more of the output is streamed, even when the cap "
        "falls inside what the host read at once"
    )


@when("the model runs two commands one after the other in one turn")
def two_commands(world: World) -> None:
    first = ScriptedToolCall("Bash", {"command": "echo first; echo first-err >&2"})
    world.provider.enqueue(ToolCallsReply((first,)))
    _start(world, "echo second; echo second-err >&2")
    _turn_end(world)


@when(
    "the model runs two commands one after the other in one turn, each printing two thirds "
    "of the host's output cap"
)
def two_commands_under_cap(world: World) -> None:
    size = _cap(world) * 2 // 3
    world.commands.each_printed = size
    first = ScriptedToolCall("Bash", {"command": f"head -c {size} /dev/zero | tr '\\0' 7"})
    world.provider.enqueue(ToolCallsReply((first,)))
    _start(world, f"head -c {size} /dev/zero | tr '\\0' 8")
    _turn_end(world)


def _two_commands_of_turn(world: World) -> list[str]:
    """The ids of the two commands the scenario's turn announced."""
    turn_id = _turn_id(world)
    commands = [
        n["params"]["commandId"]
        for n in world.notifications("command/started", world.cursors.turn)
        if n["params"]["turnId"] == turn_id
    ]
    assert len(commands) == 2, f"the turn ran {len(commands)} commands, not 2"
    return commands


def _exited_command(world: World, command_id: str, since: int) -> dict[str, Any]:
    return world.wait_for("command/exited", lambda p: p["commandId"] == command_id, since)


@then("the output of each command was streamed whole and not marked truncated")
@verifies("P20")
def each_streamed_whole(world: World) -> None:
    size, since = need(world.commands.each_printed, "output size"), world.cursors.turn
    for command_id in _two_commands_of_turn(world):
        exited = _exited_command(world, command_id, since)
        out = "".join(
            n["params"]["text"]
            for n in world.notifications("command/output", since)
            if n["params"]["commandId"] == command_id and n["params"]["stream"] == "stdout"
        )
        assert exited["truncated"] is False and len(out) == size, (
            f"command {command_id} printed {size} bytes, under the cap, but {len(out)} "
            f"were streamed and truncated reads {exited['truncated']}: the cap counts each "
            "command's own output, not the turn's"
        )


@then("the output of each command is numbered from 0")
@verifies("P20")
def numbered_per_command(world: World) -> None:
    since = world.cursors.turn
    for command_id in _two_commands_of_turn(world):
        seqs = [
            n["params"]["seq"]
            for n in world.notifications("command/output", since)
            if n["params"]["commandId"] == command_id
        ]
        assert seqs == list(range(len(seqs))) and seqs, (
            f"the output of command {command_id} is numbered {seqs}; each command numbers "
            "its own output from 0"
        )


# -- the end of a command (P19) ---------------------------------------------------------------


def _leave_behind(world: World, does: str) -> None:
    """``leaves a process <how> and exits`` or ``... and waits, with a timeout of N ms``."""
    rest = does.removeprefix("leaves a process ")
    how, _, then_what = rest.partition(" and ")
    mode = LEFT_BEHIND[how]
    ready = f".ready-{mode}"
    _gate(world, ready)
    leaver = f"{shlex.quote(sys.executable)} -c {shlex.quote(LEAVER)} {mode} {ready}"
    command = f'{leaver} & read left < {ready}; echo "LEFT $left"'
    if then_what == "exits":
        _start(world, command)
        return
    if then_what == "waits":  # until the turn is cancelled: no answer after it is scripted
        _start(world, command + "; sleep 3600", finish=False)
    else:
        timeout = then_what.removeprefix("waits, with a timeout of ").removesuffix(" ms")
        _start(world, command + "; sleep 3600", timeout_ms=int(timeout))
    line = _wait_output(world, "LEFT ")["text"]
    world.commands.left_pids = [int(line.split("LEFT ", 1)[1].split()[0])]


@when(parsers.parse("{seconds:d} seconds pass on the host clock"))
def seconds_pass(world: World, seconds: int) -> None:
    granted(world.rpc.clock_advance, seconds * 1000)


@when(parsers.parse("{ms:d} milliseconds pass on the host clock"))
def milliseconds_pass(world: World, ms: int) -> None:
    granted(world.rpc.clock_advance, ms)


@when(parsers.parse("the host clock is set {seconds:d} seconds ahead"))
def clock_set_ahead(world: World, seconds: int) -> None:
    now = granted(world.rpc.clock_get).now
    granted(world.rpc.clock_set, now + seconds * 1000)


@when("one more millisecond passes on the host clock")
def one_millisecond_passes(world: World) -> None:
    granted(world.rpc.clock_advance, 1)


@when(
    parsers.parse(
        "the model runs a command with a timeout of {ms:d} ms, "
        "after the user took {seconds:d} seconds to allow it"
    )
)
def command_after_slow_answer(world: World, ms: int, seconds: int) -> None:
    turn_id = _start(world, "echo started; sleep 3600", timeout_ms=ms)
    request = world.wait_for(
        "permission/requested",
        lambda p: p["turnId"] == turn_id and p["tool"] == "Bash",
        since=world.cursors.turn,
    )
    world.rpc.request("conformance/clock/advance", {"ms": seconds * 1000})
    world.rpc.request(
        "permission/respond", {"requestId": request["requestId"], "decision": "allow"}
    )
    _wait_output(world, "started")


_WAIT_FOR = "while [ ! -f {gate} ]; do sleep 0.05; done"


@when(
    "the model runs two commands in one message, each with a one-minute timeout, the first "
    "waiting until told"
)
def two_commands_in_one_message(world: World) -> None:
    calls = tuple(
        ScriptedToolCall(
            "Bash",
            {
                "command": f"echo {name}-started; {_WAIT_FOR.format(gate=gate)}",
                "timeout_ms": 60_000,
            },
        )
        for name, gate in (("first", "end-first"), ("second", "end-second"))
    )
    world.commands.clock_at_prompt = granted(world.rpc.clock_get).now
    turn_id = _prompt_calls(world, calls, "Both commands are done.", "Run both.")
    first = world.wait_for("command/started", lambda p: p["turnId"] == turn_id, world.cursors.turn)
    wait_command_line(world, first["commandId"], "first-started", world.cursors.turn)


@when("the first command is told to end and the second has started")
def first_ends_second_starts(world: World) -> None:
    turn_id = _turn_id(world)
    (world.workspace / "end-first").write_text("end\n", encoding="utf-8")
    second = world.wait_for(
        "command/started",
        lambda p: p["turnId"] == turn_id and "second-started" in p["command"],
        world.cursors.turn,
    )
    wait_command_line(world, second["commandId"], "second-started", world.cursors.turn)
    world.commands.second_command = second["commandId"]
    # The host may run a message's calls one after another or side by side: the second
    # command's own start is whenever the host started it.
    index = next(
        i
        for i, n in enumerate(world.notifications())
        if n["method"] == "command/started" and n["params"]["commandId"] == second["commandId"]
    )
    before = need(world.commands.clock_at_prompt, "the clock at the prompt")
    world.commands.second_started_at = world.clock_when(index, before)


@when("the host clock reaches 30 seconds after the second command's own start")
def clock_past_second_start(world: World) -> None:
    target = need(world.commands.second_started_at, "the second command's start") + 30_000
    now = granted(world.rpc.clock_get).now
    granted(world.rpc.clock_advance, max(0, target - now))


@then("the second command is still running, its own minute not yet over")
@verifies("C5")
def second_still_running(world: World) -> None:
    command = need(world.commands.second_command, "the second command")
    try:
        exited = world.wait_for(
            "command/exited",
            lambda p: p["commandId"] == command,
            since=world.cursors.turn,
            timeout=STILL_RUNNING_S,
        )
    except TimeoutError:
        (world.workspace / "end-second").write_text("end\n", encoding="utf-8")
        _turn_end(world)
        return
    raise AssertionError(
        f"the second command of the message ended {exited} 30 seconds into its one-minute "
        "timeout: a command's timeout counts from its own start, not from the first command "
        "of its message"
    )


@then("the command is still running")
@verifies("C5")
def still_running(world: World) -> None:
    command_id = _started(world)["commandId"]
    try:
        exited = world.wait_for(
            "command/exited",
            lambda p: p["commandId"] == command_id,
            since=world.cursors.turn,
            timeout=STILL_RUNNING_S,
        )
    except TimeoutError:
        return
    raise AssertionError(
        f"the command ended before its own timeout had run out ({exited}): a command's "
        "timeout counts from the command's start"
    )


@when("the user cancels the turn that runs the command")
def cancel_command_turn(world: World) -> None:
    _wait_output(world, "LEFT ")
    world.attempt_typed(world.rpc.cancel, session_id(world)).require_result()


@when("the host stops while the command runs")
def host_stops_during_command(world: World) -> None:
    world.stop_host(leave_commands=True)  # the harness ends leftovers only after the check


@then("no process the command started outlives the host")
@verifies("P19")
def nothing_outlives_host(world: World) -> None:
    pids = need(world.commands.left_pids, "the processes the command left")
    try:
        alive = _still_alive(pids)
    finally:
        world.end_leftovers()
    assert not alive, (
        f"processes a command started are still alive after the host stopped: {alive}; "
        "nothing a command started outlives the command or the host"
    )


def _left_pids(world: World) -> list[int]:
    words = _output(world, "stdout").replace("LEFT ", " ").split()
    pids = [int(word) for word in words if word.isdigit()]
    assert pids, "the command did not report the process it left behind"
    return pids


def _still_alive(pids: list[int]) -> list[int]:
    """Those of ``pids`` still alive once a moment's grace has passed."""
    deadline = time.monotonic() + GONE_GRACE_S
    alive = [pid for pid in pids if _alive(pid)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.02)  # no event announces another process's end: look again shortly
        alive = [pid for pid in alive if _alive(pid)]
    return alive


@then("no process the command started is alive when its turn ends")
@verifies("P19")
def nothing_left(world: World) -> None:
    ended = _turn_end(world)
    exited = _exited(world)
    order = [
        n["method"]
        for n in world.notifications(None, world.cursors.turn)
        if (n["method"] == "command/exited" and n["params"]["commandId"] == exited["commandId"])
        or (n["method"] == "turn/ended" and n["params"]["turnId"] == ended["turnId"])
    ]
    assert order == ["command/exited", "turn/ended"], (
        f"the command's end and its turn's end were announced in the order {order}"
    )
    alive = _still_alive(_left_pids(world))
    assert not alive, f"processes the command started are still alive after it ended: {alive}"


@when("the model runs a half-second command with a timeout of 200 ms")
def outlasts_timeout_in_real_time(world: World) -> None:
    # The shell's own sleep: real time passes while the host clock stands still (P32).
    _start(world, 'sleep 0.5; echo "outlasted"', timeout_ms=200)
    _turn_end(world)


@then("the command ran to its end, its timeout not reached on the host clock")
@verifies("C5", "P32")
def ran_past_real_timeout(world: World) -> None:
    exited = _exited(world)
    ending = {k: exited[k] for k in ("exitCode", "signal", "timedOut", "cancelled")}
    assert ending == {"exitCode": 0, "signal": None, "timedOut": False, "cancelled": False}, (
        f"a command whose 200 ms passed in real time but not on the host clock ended {ending}: "
        "command timeouts are measured on the host clock, which stood still"
    )
    assert _output(world, "stdout") == "outlasted\n", repr(_output(world, "stdout"))
    results = world.tool_results(_turn_id(world), world.cursors.turn)
    assert [r["status"] for r in results] == ["ok"], f"the Bash call's result: {results}"


@then("the command timed out with a COMMAND_TIMED_OUT error")
@verifies("P19", "C5")
def timed_out(world: World) -> None:
    exited = _exited(world)
    flags = {k: exited[k] for k in ("timedOut", "cancelled")}
    assert flags == {"timedOut": True, "cancelled": False}, (
        f"the end of the timed-out command reads {flags}"
    )
    assert exited["signal"] is not None, (
        f"the timed-out command's end reads exitCode {exited['exitCode']} and signal null, as "
        "if its shell had exited on its own: signal names the signal that ended the shell"
    )
    turn_id = _turn_id(world)
    world.wait_for(
        "turn/toolResult",
        lambda p: p["turnId"] == turn_id and p["tool"] == "Bash",
        since=world.cursors.turn,
    )
    results = [r for r in world.tool_results(turn_id, world.cursors.turn) if r["tool"] == "Bash"]
    assert len(results) == 1, f"the Bash call got {len(results)} results"
    code = (results[0].get("error") or {}).get("code")
    assert (results[0]["status"], code) == ("error", "COMMAND_TIMED_OUT"), (
        f"the timed-out command's tool result is {results[0]['status']} with {code}"
    )


@then("the turn ended as cancelled, and the command with it")
@verifies("C5")
def cancelled(world: World) -> None:
    ended = _turn_end(world)
    assert ended["outcome"] == "cancelled", f"the turn ended {ended['outcome']}"
    exited = _exited(world)
    flags = {k: exited[k] for k in ("cancelled", "timedOut")}
    assert flags == {"cancelled": True, "timedOut": False}, (
        f"the end of the cancelled command reads {flags}"
    )


@given(parsers.parse("the model ran a command that {does}"))
def ran_named(world: World, does: str) -> None:
    runs_named(world, does)
    exited = _exited(world)
    world.commands.earlier_audit = world.storage().rows(
        "command_audit", "id = ?", (exited["commandId"],)
    )
    assert world.commands.earlier_audit, f"command {exited['commandId']} was not recorded"


@given("the user cancelled a turn whose command was still running")
def cancelled_running_command(world: World) -> None:
    runs_named(world, "leaves a process in the background and waits")
    cancel_command_turn(world)
    cancelled(world)


@then("the command before the restart is still recorded for audit as it was")
@verifies("C5")
def earlier_audit_kept(world: World) -> None:
    earlier = world.commands.earlier_audit[0]
    now = world.storage().rows("command_audit", "id = ?", (earlier["id"],))
    assert now == [earlier], (
        f"the audit row of command {earlier['id']}, run before the restart, became {now}: "
        "every command keeps its own record (a command id is never used twice)"
    )


@then("the command's call got an error result, ran nothing, and the turn went on")
@verifies("P9")
def unstartable_command(world: World) -> None:
    call_id = need(world.script.last_call_id("Bash"), "the Bash call")
    result = check_one_result(world, call_id, "Bash")
    code = (result.get("error") or {}).get("code")
    assert (result["status"], code in _UNSTARTABLE) == ("error", True), (
        f"the Bash call whose project folder is gone ended {result['status']} with {code}, "
        f"expected an error result with one of {sorted(_UNSTARTABLE)}"
    )
    ended = need(world.last_turn_end, "finished turn")
    assert ended["outcome"] == "completed", (
        f"the turn ended {ended['outcome']}: a command that cannot start is the call's "
        "failure, and the turn goes on"
    )


_UNSTARTABLE = frozenset({"TOOL_FAILED", "WORKSPACE_INVALID"})


@then("the command is recorded for audit")
@verifies("C5")
def audited(world: World) -> None:
    started, exited = _started(world), _exited(world)
    rows = world.storage().rows("command_audit", "id = ?", (exited["commandId"],))
    assert len(rows) == 1, f"command_audit holds {len(rows)} rows for {exited['commandId']}"
    row = rows[0]
    catalog = {s.shellId: s for s in _catalog(world).shells}
    shell = catalog.get(started["shellId"])
    assert shell is not None, f"the command ran in {started['shellId']}, not in the catalog"
    expected = {
        "session_id": session_id(world),
        "turn_id": _turn_id(world),
        "shell_id": started["shellId"],
        "shell_path": shell.path,
        "command": started["command"],
        "cwd": world.arranged.root_as_given or str(world.workspace),
        "exit_code": exited["exitCode"],
        "signal": exited["signal"],
        "timed_out": int(exited["timedOut"]),
        "cancelled": int(exited["cancelled"]),
        "truncated": int(exited["truncated"]),
        "duration_ms": exited["durationMs"],
    }
    recorded = {key: row[key] for key in expected}
    wrong = {
        key: (recorded[key], value) for key, value in expected.items() if recorded[key] != value
    }
    assert not wrong, f"the audit row differs from the command (recorded, reported): {wrong}"
    with blame("C5"):  # the workspaceRoot string as given, not a resolved path
        given = world.arranged.root_as_given or str(world.workspace)
        assert started["cwd"] == given, (
            f"command/started names cwd {started['cwd']!r}, not {given!r}"
        )


# -- the shell cannot change during a turn (§5) ----------------------------------------------------


@given("a turn is running in that session")
def turn_running(world: World) -> None:
    world.provider.enqueue(StallReply())
    before = len(world.provider.requests())
    world.cursors.turn = world.mark()
    world.commands.turn_id = granted(world.rpc.prompt, session_id(world), "Think.").turnId
    world.provider.wait_for_requests(before + 1, world.timeout)


@when(parsers.parse("the user tries to choose the {label} shell for the session"))
def try_choose_shell(world: World, label: str) -> None:
    shell = _shell(world, label)
    world.attempt_typed(world.rpc.configure_session, session_id(world), shell_id=shell["shellId"])


@then(parsers.parse("the session still uses the {label} shell"))
@verifies("R5.4")
def still_uses(world: World, label: str) -> None:
    shell = _shell(world, label)
    found = granted(world.rpc.get_session, session_id(world)).session
    assert found.shellId == shell["shellId"], f"the session now uses {found.shellId}"
    row = world.storage().rows("sessions", "id = ?", (session_id(world),))[0]
    assert row["shell_id"] == shell["shellId"], f"storage shows the session with {row['shell_id']}"


# -- a cancelled message of several calls (P9) ------------------------------------------------


@given(parsers.parse('the model will run a waiting command and read "{path}" in one message'))
def waiting_command_and_read(world: World, path: str) -> None:
    speak_posix(world)
    script_calls(
        world,
        tool_call(world, "Bash", {"command": "echo started; sleep 3600"}),
        tool_call(world, "Read", {"path": path}),
        answer=None,  # the turn is cancelled: the model is not asked again
    )


CANCELLED_PROMPT: Final = "Run it, then read."


@given("the user sent a prompt and cancelled the turn while the command ran")
@when("the user sends a prompt and cancels the turn while the command runs")
def cancel_during_first_call(world: World) -> None:
    world.cursors.turn = world.mark()
    turn_id = granted(world.rpc.prompt, session_id(world), CANCELLED_PROMPT).turnId
    world.commands.turn_id = turn_id
    command_id = world.wait_for(
        "command/started", lambda p: p["turnId"] == turn_id, since=world.cursors.turn
    )["commandId"]
    wait_command_line(world, command_id, "started", world.cursors.turn)
    world.attempt_typed(world.rpc.cancel, session_id(world)).require_result()
    world.wait_for("turn/ended", lambda p: p["turnId"] == turn_id, since=world.cursors.turn)


@then("the next turn gave the model the cancelled prompt and a result for each of its calls")
@verifies("R1.3", "P9")
def next_turn_pairs_cancelled_calls(world: World) -> None:
    requests = world.provider.requests()[world.cursors.provider_turn :]
    assert requests, "the later turn never reached the model"
    first = requests[0]
    assert CANCELLED_PROMPT in request_text(first), (
        f"the later turn's request lacks the cancelled turn's prompt {CANCELLED_PROMPT!r}: a "
        "cancel stops a turn, it does not take it out of the conversation"
    )
    missing = unanswered_calls(first)
    assert not missing, (
        f"the later turn's request repeats the cancelled turn's calls {missing} without a tool "
        "message answering them: a call that reaches a request is answered there, or left out"
    )


@then("every call of that message got exactly one result")
@verifies("P9")
def one_result_per_cancelled_call(world: World) -> None:
    notes = world.notifications(since=world.cursors.turn)
    ended_at = next(
        (
            i
            for i, n in enumerate(notes)
            if n["method"] == "turn/ended" and n["params"]["turnId"] == world.commands.turn_id
        ),
        len(notes),
    )
    results = [(i, n["params"]) for i, n in enumerate(notes) if n["method"] == "turn/toolResult"]
    for call in world.script.last_batch:
        mine = [r for _, r in results if r["toolCallId"] == call.call_id]
        assert len(mine) == 1, (
            f"the {call.tool} call of the cancelled message got {len(mine)} results: {mine}"
        )
        late = [i for i, r in results if r["toolCallId"] == call.call_id and i > ended_at]
        assert not late, (
            f"the {call.tool} call's result came after its turn's turn/ended; every call's "
            "turn/toolResult comes before the turn ends (Ordering)"
        )
