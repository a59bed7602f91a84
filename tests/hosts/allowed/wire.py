"""Allowed variations: capabilities a host may leave out, and choices the wire contract and
the session rules leave to the host."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hosts.registry import AllowedCase, patch, variant
from reference_host import host as host_module
from reference_host import jsontext, rpc, server
from reference_host.errors import HostError
from reference_host.framing import Frame
from reference_host.rpc import Dispatcher
from reference_host.tools import files
from reference_host.turns import TurnRunner
from reference_host.workspace import resolve_inside


@variant("no-fault-points")
def _no_fault_points() -> None:
    # Fault points are optional: a host may offer none. Scenarios that need one become
    # unverified, never failed.
    patch(host_module, "FAULT_POINTS", ())


@variant("smallest-frame-limit")
def _smallest_frame_limit() -> None:
    # The frame limit is the host's to choose, from 65536 bytes up.
    patch(server, "DEFAULT_MAX_FRAME_BYTES", 65536)


@variant("cancel-answers-early")
def _cancel_answers_early() -> None:
    # session/cancel may answer before the cancelled turn has ended.
    async def cancel(self: TurnRunner, session_id: str) -> str | None:
        task = self.tasks.get(session_id)
        turn_id = self.host.activity_of(session_id).active_turn_id
        if task is None or task.done():
            return None
        if task in self.closing:  # too late: its end is being recorded, and stays whole
            return None
        task.cancel()
        await asyncio.sleep(0)  # the answer goes out while the turn is still winding down
        return turn_id

    patch(TurnRunner, "cancel", cancel)


@variant("absolute-paths-invalid-input")
def _absolute_paths_invalid_input() -> None:
    # Tool paths are workspace-relative: any absolute path is refused as invalid input.
    def resolve(root: Path, relative: str, *, must_exist: bool) -> Path:
        if Path(relative).is_absolute():
            raise HostError("INVALID_TOOL_INPUT", f"path {relative!r} must be relative")
        return resolve_inside(root, relative, must_exist=must_exist)

    patch(files, "resolve_inside", resolve)


_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,15}|"[^"\\]*")')


@variant("numbers-as-invalid-params")
def _numbers_as_invalid_params() -> None:
    # A number the host cannot hold is refused as invalid params, under the request's id.
    original = Dispatcher.handle

    async def handle(self: Dispatcher, frame: Frame) -> None:
        if isinstance(frame, bytes):
            try:
                jsontext.loads(frame.decode("utf-8"))
            except jsontext.JsonTextError as exc:
                found = _ID.search(frame)
                if found and re.search(r"number|digits", str(exc)):
                    request_id = json.loads(found.group(1))
                    failure = HostError("INVALID_PARAMS", f"a number out of range: {exc}")
                    self._send(rpc._error(request_id, failure))
                    return
            except (UnicodeDecodeError, RecursionError):
                pass
        await original(self, frame)

    patch(Dispatcher, "handle", handle)


@variant("unsafe-integer-ids-refused")
def _unsafe_integer_ids_refused() -> None:
    # A host that reads JSON numbers as doubles (JavaScript's JSON.parse) and so refuses an
    # integer id it cannot hold exactly, past 2^53 - 1, as an invalid request with a null id.
    original: Callable[[str], Any] = vars(rpc)["loads"]

    def loads(text: str) -> Any:
        message = original(text)
        if isinstance(message, dict):
            request_id = message.get("id")
            if type(request_id) is int and abs(request_id) > 2**53 - 1:
                message["id"] = 0.5  # what the host holds is no valid id: INVALID_REQUEST
        return message

    patch(rpc, "loads", loads)


@variant("invalid-request-without-id")
def _invalid_request_without_id() -> None:
    # An invalid request is answered with a null id even when its id could be read.
    original = rpc._error

    def error(request_id: Any, failure: HostError) -> dict[str, Any]:
        if failure.code == "INVALID_REQUEST":
            request_id = None
        message: dict[str, Any] = original(request_id, failure)
        return message

    patch(rpc, "_error", error)


CASES = [
    AllowedCase(
        "no-fault-points",
        "approval,artifact_integrity,restart_interruption",
        why="fault injection points are optional capabilities",
        alone="it leaves every scenario that injects a fault unverified",
    ),
    AllowedCase(
        "smallest-frame-limit",
        "protocol_errors,handshake",
        why="the frame limit is the host's, from 65536 bytes up",
    ),
    AllowedCase(
        "cancel-answers-early",
        "turn_boundaries,isolation",
        why="session/cancel may answer before the turn has ended",
    ),
    AllowedCase(
        "absolute-paths-invalid-input",
        "isolation",
        why="a path into another workspace may be refused as invalid input",
    ),
    AllowedCase(
        "numbers-as-invalid-params",
        "protocol_errors",
        "number_the_host_cannot_hold",
        why="an unrepresentable number may get INVALID_PARAMS instead of PARSE_ERROR",
    ),
    AllowedCase(
        "unsafe-integer-ids-refused",
        "protocol_errors",
        "identifier",
        why="an integer id the host cannot hold exactly may be refused with a null id",
    ),
    AllowedCase(
        "invalid-request-without-id",
        "protocol_errors",
        "not_a_request",
        why="an invalid request may be answered with a null id",
    ),
]
