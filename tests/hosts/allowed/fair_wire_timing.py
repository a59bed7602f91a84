"""Allowed variations (the wire and its timing), written from the contract alone."""

from __future__ import annotations

import asyncio
import json
import logging
import queue
import random
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, BinaryIO

from hosts.registry import AllowedCase, patch, variant
from reference_host import commands, ids, permissions, rpc, server
from reference_host import host as host_module
from reference_host.errors import HostError
from reference_host.host import Host
from reference_host.rpc import Dispatcher

# -- helpers --------------------------------------------------------------------------


class _Out:
    """A stand-in for the host's stdout; ``finish`` runs once the host has stopped."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream

    def write(self, data: bytes) -> int:
        self.stream.write(data)
        return len(data)

    def flush(self) -> None:
        self.stream.flush()

    def finish(self) -> None:
        """Write whatever is still held back."""


def _wrap_stdout(make: Callable[[BinaryIO, asyncio.AbstractEventLoop], _Out]) -> None:
    """Serve with stdout replaced by ``make(stdout, loop)``."""
    original = server._serve_on

    async def serve_on(args: Any, storage: Any, clock: Any, stdin: BinaryIO, stdout: Any) -> int:
        out = make(stdout, asyncio.get_running_loop())
        try:
            return await original(args, storage, clock, stdin, out)
        finally:
            out.finish()

    patch(server, "_serve_on", serve_on)


def _expand_notifications(expand: Callable[[str, dict[str, Any]], list[dict[str, Any]]]) -> None:
    """Send every notification as the notifications ``expand(method, params)`` returns."""
    original = Host.__init__

    def init(self: Host, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        notify = self.notify

        def expanded(method: str, params: dict[str, Any]) -> None:
            for each in expand(method, params):
                notify(method, each)

        self.notify = expanded

    patch(Host, "__init__", init, wraps=True)


def _use_ids(make: Callable[[str], str]) -> None:
    """Make every host-chosen identifier with ``make(prefix)``."""
    for module in (ids, host_module, commands, permissions):
        patch(module, "new_id", make)


# -- how lines are written ------------------------------------------------------------


# Framing: "Each message is one compact JSON object in UTF-8 followed by `\n`"; the contract
# says nothing of how many writes carry a line. This host writes every line in pieces of
# at most 7 bytes (cutting UTF-8 characters in two), flushing after each piece.
@variant("lines-in-tiny-writes")
def _lines_in_tiny_writes() -> None:
    class TinyWrites(_Out):
        def write(self, data: bytes) -> int:
            for start in range(0, len(data), 7):
                self.stream.write(data[start : start + 7])
                self.stream.flush()
            return len(data)

    _wrap_stdout(lambda stream, _loop: TinyWrites(stream))


# Framing: one message per line, "followed by `\n`"; nothing says one write per message.
# This host buffers what it sends and writes it every 20 ms, several lines in one write,
# always in the order sent.
@variant("several-lines-per-write")
def _several_lines_per_write() -> None:
    class Coalesced(_Out):
        def __init__(self, stream: BinaryIO, loop: asyncio.AbstractEventLoop) -> None:
            super().__init__(stream)
            self.loop = loop
            self.pending = bytearray()
            self.lock = threading.Lock()
            self.scheduled = False

        def write(self, data: bytes) -> int:
            with self.lock:
                self.pending += data
            return len(data)

        def flush(self) -> None:
            with self.lock:
                if self.scheduled:
                    return
                self.scheduled = True
            self.loop.call_soon_threadsafe(self.loop.call_later, 0.02, self.finish)

        def finish(self) -> None:
            with self.lock:
                data = bytes(self.pending)
                self.pending.clear()
                self.scheduled = False
            if data:
                try:
                    self.stream.write(data)
                    self.stream.flush()
                except (OSError, ValueError):
                    pass

    _wrap_stdout(Coalesced)


# Framing fixes the bytes of a line, not when they arrive; "the harness waits ... within
# its timeout" (Ordering). This host writes the first half of every line, pauses 15 ms,
# then writes the rest (a writer thread, lines kept in order).
@variant("line-halves-with-a-pause")
def _line_halves_with_a_pause() -> None:
    class Paused(_Out):
        def __init__(self, stream: BinaryIO) -> None:
            super().__init__(stream)
            self.lines: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
            self.thread = threading.Thread(target=self._run, name="paused-writer", daemon=True)
            self.thread.start()

        def write(self, data: bytes) -> int:
            self.lines.put(bytes(data))
            return len(data)

        def flush(self) -> None:
            pass

        def _run(self) -> None:
            while (line := self.lines.get()) is not None:
                half = len(line) // 2
                try:
                    self.stream.write(line[:half])
                    self.stream.flush()
                    time.sleep(0.015)
                    self.stream.write(line[half:])
                    self.stream.flush()
                except (OSError, ValueError):
                    return

        def finish(self) -> None:
            self.lines.put(None)
            self.thread.join(timeout=4)

    _wrap_stdout(lambda stream, _loop: Paused(stream))


# -- the order and number of notifications ------------------------------------------


Held = list[tuple[dict[str, Any], bytes]]


class _Regrouped(_Out):
    """Holds notifications up to 30 ms, then sends them in the order ``arrange`` gives;
    anything held goes out before the next response."""

    def __init__(
        self,
        stream: BinaryIO,
        loop: asyncio.AbstractEventLoop,
        arrange: Callable[[Held], Held],
    ) -> None:
        super().__init__(stream)
        self.loop = loop
        self.arrange = arrange
        self.held: Held = []
        self.timer: asyncio.TimerHandle | None = None

    def write(self, data: bytes) -> int:
        message = json.loads(data)
        if "id" in message:  # a response: what is held goes first, in its new order
            self.finish()
            self.stream.write(data)
        else:
            self.held.append((message, bytes(data)))
            if self.timer is None:
                self.timer = self.loop.call_later(0.03, self._release)
        return len(data)

    def flush(self) -> None:
        self.stream.flush()

    def _release(self) -> None:
        try:
            self.finish()
            self.stream.flush()
        except (OSError, ValueError):
            pass

    def finish(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        held, self.held = self.held, []
        for _message, line in self.arrange(held):
            self.stream.write(line)


# Ordering: "Where the contract gives no order, the harness waits for whichever message
# comes later"; "the order of notifications and responses where Ordering names none" is
# the host's, and it names no order between a turn's turn/ended and the session/updated
# that shows the session idle after it (both report a turn that has ended and is
# stored). This host holds notifications up to 30 ms (all of them before the next
# response) and sends the turn/ended right after that session's next session/updated
# instead of before it; every other order stays as it was.
@variant("turn-ended-after-idle-session")
def _turn_ended_after_idle_session() -> None:
    def ended_after_session(held: Held) -> Held:
        arranged: Held = []
        waiting: dict[str, Held] = {}
        for message, line in held:
            method, params = message["method"], message["params"]
            if method == "turn/ended":
                waiting.setdefault(params["sessionId"], []).append((message, line))
                continue
            arranged.append((message, line))
            if method == "session/updated":
                arranged += waiting.pop(params["session"]["sessionId"], [])
        return arranged + [each for late in waiting.values() for each in late]

    _wrap_stdout(lambda stream, loop: _Regrouped(stream, loop, ended_after_session))


# Ordering names, for the end of a turn, only "turn/toolResult for every call of a turn,
# and command/exited for every command, before that turn's turn/ended"; where a turn's
# last results and its turn/ended fall relative to the session/updated that shows the
# session idle is not named. This host sends a turn's closing notifications (the
# turn/toolResult notifications after its last turn/toolCall, then its turn/ended) right
# after that idle session/updated; each turn/toolCall still comes before the call runs.
@variant("turn-close-after-idle-session")
def _turn_close_after_idle_session() -> None:
    def close_after_idle(held: Held) -> Held:
        methods = [message["method"] for message, _line in held]
        moved: dict[int, Held] = {}  # index of the idle session/updated -> what follows it
        taken: set[int] = set()
        for end, (message, _line) in enumerate(held):
            if message["method"] != "turn/ended":
                continue
            session, turn = message["params"]["sessionId"], message["params"]["turnId"]
            idle = next(
                (
                    index
                    for index in range(end + 1, len(held))
                    if methods[index] == "session/updated"
                    and held[index][0]["params"]["session"]["sessionId"] == session
                    and held[index][0]["params"]["session"]["activeTurnId"] is None
                ),
                None,
            )
            if idle is None:
                continue
            closing = [end]
            for index in range(end - 1, -1, -1):
                params = held[index][0]["params"]
                if params.get("turnId") != turn:
                    continue
                if methods[index] != "turn/toolResult":
                    break  # a turn/toolCall (or text) of this turn: keep what precedes it
                closing.insert(0, index)
            taken.update(closing)
            moved.setdefault(idle, []).extend(held[index] for index in closing)
        arranged: Held = []
        for index, each in enumerate(held):
            if index not in taken:
                arranged.append(each)
            arranged += moved.get(index, [])
        return arranged

    _wrap_stdout(lambda stream, loop: _Regrouped(stream, loop, close_after_idle))


# Sessions: "Every change of what session/get reports ... is announced by a
# session/updated carrying the whole session as it now is, so the last one you sent for
# a session reads as session/get does". Only execution/updated is held to "once per
# change"; this host sends every session/updated twice.
@variant("session-updates-repeated")
def _session_updates_repeated() -> None:
    def twice(method: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        return [params, params] if method == "session/updated" else [params]

    _expand_notifications(twice)


# P31: the turn reports the text "in turn/text notifications whose texts, joined in order,
# are the model's full answer"; how the text is cut into pieces is not fixed. This host
# sends one turn/text per character.
@variant("text-one-character-each")
def _text_one_character_each() -> None:
    def characters(method: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        if method != "turn/text" or len(params["text"]) <= 1:
            return [params]
        return [{**params, "text": char} for char in params["text"]]

    _expand_notifications(characters)


# -- ids -------------------------------------------------------------------------------


# types.schema.json `Id`: "An opaque identifier chosen by the host", a string of 1 to 200
# characters, no pattern; "identifiers' format" is listed among the host's choices. This
# host's ids are strings of decimal digits.
@variant("digit-string-ids")
def _digit_string_ids() -> None:
    generator = random.SystemRandom()

    def new_id(prefix: str) -> str:
        return str(generator.randrange(10**17, 10**18))

    _use_ids(new_id)


# The same `Id` type (min length 1, max length 200, no pattern): this host's ids are 200
# characters long and hold upper case, a space, `:`, `/`, `#`, `%` and non-ASCII letters.
@variant("long-unicode-ids")
def _long_unicode_ids() -> None:
    def new_id(prefix: str) -> str:
        head = f"Π {prefix.upper()}:{uuid.uuid4()}/#%é/"
        return (head + "ü" * 200)[:200]

    _use_ids(new_id)


# -- errors ----------------------------------------------------------------------------


# Framing (protocol.md): "Clients should branch on `error.data.code`, never on
# `error.message`"; "error and log message texts" are the host's. This host words every
# error response otherwise (codes and numeric codes kept).
@variant("errors-worded-otherwise")
def _errors_worded_otherwise() -> None:
    original = rpc._error

    def reworded(request_id: Any, error: HostError) -> dict[str, Any]:
        response = original(request_id, error)
        response["error"]["message"] = f"Anfrage abgelehnt ({error.code.lower()})"
        response["error"]["data"]["message"] = f"[{error.jsonrpc_code}] {error.message.upper()}"
        return response

    patch(rpc, "_error", reworded)


# types.schema.json `ErrorData`: `details` is "Optional machine-readable context" (not
# required); only UNSUPPORTED_PROTOCOL_VERSION must list `details.supported`. This host
# leaves `details` out of every other error, in responses and notifications alike.
@variant("errors-without-details")
def _errors_without_details() -> None:
    to_data = HostError.to_data

    def without_details(self: HostError) -> dict[str, Any]:
        data = to_data(self)
        if self.code != "UNSUPPORTED_PROTOCOL_VERSION":
            data.pop("details", None)
        return data

    patch(HostError, "to_data", without_details)


# The same optional `details` (an object with no listed members): this host adds
# machine-readable context to every error it reports, in responses and notifications.
@variant("errors-with-extra-details")
def _errors_with_extra_details() -> None:
    to_data = HostError.to_data

    def with_details(self: HostError) -> dict[str, Any]:
        data = to_data(self)
        data["details"] = {
            **data.get("details", {}),
            "host": "fair-wire-timing",
            "retryable": False,
        }
        return data

    patch(HostError, "to_data", with_details)


# -- logs and timing -------------------------------------------------------------------


# Framing: "stderr is yours for logs" / "The host may log freely on stderr; no client
# parses it". This host logs at DEBUG and copies every line it sends to stderr.
@variant("chatty-stderr")
def _chatty_stderr() -> None:
    parse = server._parse
    dispatcher_init = Dispatcher.__init__
    log = logging.getLogger("reference_host.wire")

    def parse_debug(argv: Any) -> Any:
        args = parse(argv)
        args.log_level = "DEBUG"
        return args

    def init(self: Dispatcher, send: Callable[[dict[str, Any]], None]) -> None:
        def logged(message: dict[str, Any]) -> None:
            log.debug("-> %s", json.dumps(message, indent=2)[:2000])
            send(message)

        dispatcher_init(self, logged)
        log.info("=== fair-wire-timing host: every line sent is echoed here ===")

    patch(server, "_parse", parse_debug)
    patch(Dispatcher, "__init__", init)


# The step timeout (10 s by default) bounds every wait; nothing asks for a quicker answer.
# This host takes 100 ms of real time before it handles each request.
@variant("unhurried-answers")
def _unhurried_answers() -> None:
    call = Dispatcher._call

    async def slowly(self: Dispatcher, method: str, params: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0.1)
        return await call(self, method, params)

    patch(Dispatcher, "_call", slowly)


# The command line: the preflight checks that the host "answers `initialize` with protocol
# version 9 within the step timeout". This host takes 2 s to answer initialize.
@variant("slow-initialize")
def _slow_initialize() -> None:
    initialize = Host.initialize

    async def slowly(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(2)
        return await initialize(self, params)

    patch(Host, "initialize", slowly)


CASES = [
    AllowedCase(
        "lines-in-tiny-writes",
        "handshake,sessions",
        why="how a line is cut into writes is the host's; only the line is the contract (P5)",
    ),
    AllowedCase(
        "several-lines-per-write",
        "handshake,isolation",
        why="several lines may go out in one write, in order (P5)",
    ),
    AllowedCase(
        "turn-close-after-idle-session",
        "turn_boundaries,sessions",
        why="a turn's last notifications have no order with the idle session/updated",
    ),
    AllowedCase(
        "text-one-character-each",
        "sessions",
        "answer",
        why="how the answer is cut into turn/text pieces is the host's (P31)",
    ),
    AllowedCase(
        "long-unicode-ids",
        "sessions,approval,shell",
        why="identifiers are opaque, up to 200 characters of any kind",
    ),
    AllowedCase(
        "errors-worded-otherwise",
        "protocol_errors",
        why="clients branch on error.data.code, never on the message",
    ),
    AllowedCase(
        "errors-with-extra-details",
        "protocol_errors,handshake",
        why="error details are optional and open",
    ),
    AllowedCase(
        "chatty-stderr",
        "handshake,restart_interruption",
        why="stderr is the host's for logs",
    ),
]
