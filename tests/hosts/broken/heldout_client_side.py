"""Broken hosts: a held-out set (the client's side varied: equally valid spellings of one
request), written from the contract alone."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from hosts.registry import BrokenCase, patch, variant

# A UTF-16 surrogate written as a JSON escape, upper- or lower-case hex.
_ANY_HIGH_ESCAPE = re.compile(rb"\\u[dD][89aAbB][0-9a-fA-F]{2}")
# A lone surrogate escape, as an implementer who only ever saw lower-case hex would write it:
# a high one not followed by a low one, or a low one not preceded by a high one.
_LONE_LOWER_ESCAPE = re.compile(
    rb"\\ud[89ab][0-9a-f]{2}(?!\\ud[c-f][0-9a-f]{2})|(?<!\\ud[89ab][0-9a-f]{2})\\ud[c-f][0-9a-f]{2}"
)


def _request_of(frame: object) -> dict[str, Any] | None:
    """The frame as a well-formed request with an id, or None (left to the reference)."""
    from reference_host.jsontext import JsonTextError, loads
    from reference_host.rpc import Dispatcher

    if not isinstance(frame, bytes) or not frame.strip():
        return None
    try:
        message = loads(frame.decode("utf-8"))
    except (UnicodeDecodeError, JsonTextError, RecursionError):
        return None
    if Dispatcher._envelope_problem(message) is not None or "id" not in message:
        return None
    assert isinstance(message, dict)
    return message


def _refuse(dispatcher: Any, request_id: Any, code: str, message: str) -> None:
    from reference_host.errors import HostError
    from reference_host.rpc import _error

    dispatcher._send(_error(request_id, HostError(code, message)))


def _rewrite_sent(rewrite: Any) -> None:
    """Pass every message the dispatcher sends through ``rewrite(message)``."""
    from reference_host.rpc import Dispatcher, Send

    original = Dispatcher.__init__

    def init(self: Dispatcher, send: Send) -> None:
        def rewritten(message: dict[str, Any]) -> None:
            send(rewrite(message))

        original(self, rewritten)

    patch(Dispatcher, "__init__", init, wraps=True)


# Framing / P1: "a line that is not UTF-8 JSON gets PARSE_ERROR; a JSON value that is not a
# request object ... gets INVALID_REQUEST" and "A request is exactly the Request of
# envelope.schema.json": what counts is the JSON value, not its spelling. Only what the
# host SENDS must be compact; a request with spaces between its tokens is a request.
# Bug: the envelope check tests the raw line for the bytes `"jsonrpc":"2.0"` (the way the
# implementer's own client writes it) instead of the parsed member, so a request written
# `"jsonrpc": "2.0"` (a space after the colon) or `"jsonrpc":"2\u002e0"` is answered
# INVALID_REQUEST (under its id). Compact requests are served as before.
# Trigger: {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {...}}.
@variant("cs-jsonrpc-raw-text-match")
def jsonrpc_raw_text_match() -> None:
    from reference_host.framing import Frame
    from reference_host.rpc import Dispatcher

    original = Dispatcher.handle

    async def handle(self: Dispatcher, frame: Frame) -> None:
        message = _request_of(frame)
        if message is not None and isinstance(frame, bytes) and b'"jsonrpc":"2.0"' not in frame:
            _refuse(self, message["id"], "INVALID_REQUEST", 'jsonrpc must be "2.0"')
            return
        await original(self, frame)

    patch(Dispatcher, "handle", handle, wraps=True)


# P4 / ApprovalRef: params are a JSON object; its members have names, not positions.
# `approval/get`, `approval/approve`, `approval/reject` and `artifact/read` take
# `sessionId` and `approvalId` (and `permissionMode`), in any order a client writes them.
# Bug: these handlers unpack the closed params object by position
# (`session_id, approval_id = params.values()`), which holds only while the client writes
# sessionId first. A client writing {"approvalId":..,"sessionId":..} gets
# SESSION_NOT_FOUND (the approval id looked up as a session) instead of its approval; an
# approve written {"permissionMode":"auto","sessionId":..,"approvalId":..} likewise.
@variant("cs-approval-params-by-position")
def approval_params_by_position() -> None:
    from reference_host.approvals import approval_wire
    from reference_host.host import Host

    def positional(params: Mapping[str, Any], count: int) -> list[Any]:
        return list(params.values())[:count]

    async def approval_get(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        session_id, approval_id = positional(params, 2)
        row = await self.approvals.require(session_id, approval_id)
        return {"approval": approval_wire(row)}

    async def approval_approve(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        session_id, approval_id, mode = positional(params, 3)
        return await self.approvals.approve(session_id, approval_id, mode)

    async def approval_reject(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        session_id, approval_id = positional(params, 2)
        return await self.approvals.reject(session_id, approval_id)

    async def artifact_read(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        session_id, approval_id = positional(params, 2)
        row = await self.approvals.require(session_id, approval_id)
        return await self.approvals.read_artifact(row)

    patch(Host, "approval_get", approval_get)
    patch(Host, "approval_approve", approval_approve)
    patch(Host, "approval_reject", approval_reject)
    patch(Host, "artifact_read", artifact_read)


# P4: "strings holding a lone surrogate (an escaped surrogate pair, `\ud83d\ude00`, is one
# character, as JSON defines it, and is accepted)".
# Bug: lone surrogates are looked for in the raw line with a regex for any high-surrogate
# escape, forgetting that a high escape followed by a low one is a valid pair. A prompt,
# task name or clientInfo.name holding an emoji written as `\ud83d\ude00` is refused with
# INVALID_PARAMS; the same emoji as raw UTF-8 bytes is accepted.
# Trigger: session/prompt (or task/create) with text "\ud83d\ude00" escaped on the wire.
@variant("cs-escaped-pair-refused")
def escaped_pair_refused() -> None:
    from reference_host.framing import Frame
    from reference_host.rpc import Dispatcher

    original = Dispatcher.handle

    async def handle(self: Dispatcher, frame: Frame) -> None:
        message = _request_of(frame)
        if (
            message is not None
            and isinstance(frame, bytes)
            and self.initialized
            and message["method"] in self._handlers
            and _ANY_HIGH_ESCAPE.search(frame)
        ):
            _refuse(self, message["id"], "INVALID_PARAMS", "params: not valid Unicode")
            return
        await original(self, frame)

    patch(Dispatcher, "handle", handle, wraps=True)


# P4: a string holding a lone surrogate gets INVALID_PARAMS and changes nothing ("Never
# INTERNAL_ERROR"). JSON hex digits may be upper- or lower-case (`\uD800` = `\ud800`).
# Bug: lone surrogates are looked for in the raw line with a regex written for lower-case
# hex only (the parsed value is no longer checked). `\ud800` is refused as before;
# `\uD800` slips through: a session/get or task/create naming it is answered by the state
# check or fails inside the host (SQLite cannot store it: INTERNAL_ERROR) instead of
# INVALID_PARAMS.
# Trigger: task/create with name "\uD800" (upper-case escape), or session/get with
# sessionId "\uDC00".
@variant("cs-lone-surrogate-lowercase-only")
def lone_surrogate_lowercase_only() -> None:
    from reference_host import validation
    from reference_host.framing import Frame
    from reference_host.rpc import Dispatcher

    original = Dispatcher.handle

    async def handle(self: Dispatcher, frame: Frame) -> None:
        message = _request_of(frame)
        if (
            message is not None
            and isinstance(frame, bytes)
            and self.initialized
            and message["method"] in self._handlers
            and _LONE_LOWER_ESCAPE.search(frame)
        ):
            _refuse(self, message["id"], "INVALID_PARAMS", "params: not valid Unicode")
            return
        await original(self, frame)

    def no_parsed_check(value: Any, where: str) -> str | None:
        return None

    patch(Dispatcher, "handle", handle, wraps=True)
    patch(validation, "_lone_surrogate", no_parsed_check)


def _length_rule(measure: Any) -> None:
    """Check minLength/maxLength with ``measure(text)`` instead of code points."""
    from reference_host import schema_subset
    from reference_host.schema_subset import Problem, _Checker

    def string(
        schema: Mapping[str, Any], value: str, path: tuple[str | int, ...]
    ) -> Problem | None:
        size = measure(value)
        if "minLength" in schema and size < schema["minLength"]:
            return Problem(path, f"{value[:80]!r} is shorter than {schema['minLength']}")
        if "maxLength" in schema and size > schema["maxLength"]:
            return Problem(path, f"{value[:80]!r} is longer than {schema['maxLength']}")
        if "pattern" in schema and schema_subset._pattern(schema["pattern"]).search(value) is None:
            return Problem(path, f"{value[:80]!r} does not match {schema['pattern']!r}")
        return None

    patch(_Checker, "_string", staticmethod(string))


# P4: "string lengths, counted in characters, not bytes".
# Bug: lengths are measured on the UTF-8 encoding (len(value.encode())), as a byte-oriented
# implementation does. A 200-character task or session name of "é" (written raw or as
# \u00e9) is 400 bytes and is refused with INVALID_PARAMS; ASCII names are unaffected.
# Trigger: task/create with name "é" * 200 (or shellId/model of 101 "é").
@variant("cs-length-in-utf8-bytes")
def length_in_utf8_bytes() -> None:
    _length_rule(lambda text: len(text.encode("utf-8", "surrogatepass")))


# P4: lengths "counted in characters"; "an escaped surrogate pair, `\ud83d\ude00`, is one
# character, as JSON defines it".
# Bug: lengths are counted in UTF-16 code units (a port of JavaScript's `.length`), so
# every character outside the BMP counts twice. A name of 200 emoji (or 101) is refused
# with INVALID_PARAMS, however it is spelled; names within the BMP are unaffected.
# Trigger: task/create with name "😀" * 200, or model "😀" * 101.
@variant("cs-length-in-utf16-units")
def length_in_utf16_units() -> None:
    _length_rule(lambda text: len(text.encode("utf-16-le", "surrogatepass")) // 2)


# P4 / schemas: maxLength is inclusive ("Max length 200": a 200-character name is valid);
# params that break the schema "including its ranges and lengths" are refused, the rest
# served.
# Bug: the length check is off by one (`len(value) >= maxLength` refuses), so a string
# exactly at its limit (a 200-character task name, a 200-character Id, a 4096-character
# workspaceRoot) gets INVALID_PARAMS; one character less is accepted.
# Trigger: task/create with name "n" * 200.
@variant("cs-max-length-exclusive")
def max_length_exclusive() -> None:
    _length_rule(lambda text: len(text) + 1 if text else 0)


# P4: params with "whole numbers only, where a whole number written as `1000.0` or `1e3`
# you may take as that number or refuse" get INVALID_PARAMS otherwise: a fractional
# number where the schema says integer is refused.
# Bug: to accept 1e3 and 10.0 (which the JSON parser gives as floats) the integer check
# was relaxed to "any finite number" and the value converted with int(), which truncates:
# `protocolVersion: 9.5` is accepted as 9, `conformance/clock/advance {"ms": 1.5}` moves
# the clock 1 ms, a task's `runAt` of 1700000000000.7 is stored as ...000.
# Trigger: initialize with protocolVersion 9.5; clock/advance ms 0.5.
@variant("cs-fraction-truncated")
def fraction_truncated() -> None:
    from reference_host import rpc, schema_subset

    original_is_type = schema_subset._is_type

    def is_type(value: Any, name: str) -> bool:
        if name == "integer" and isinstance(value, float):
            return value == value and abs(value) != float("inf")
        return original_is_type(value, name)

    def integral(value: Any) -> Any:
        if isinstance(value, float):
            return int(value)
        if isinstance(value, dict):
            return {key: integral(item) for key, item in value.items()}
        if isinstance(value, list):
            return [integral(item) for item in value]
        return value

    patch(schema_subset, "_is_type", is_type, wraps=True)
    patch(rpc, "integral", integral)


# P1 Request ids: "answer every request under exactly the id it carried: a string, or any
# integer, zero and negative ones included".
# Bug: the reply id is taken as `message.get("id") or None`, so a request with id 0 is
# answered (result or error) with `"id": null`; every other id is answered correctly.
# Trigger: {"jsonrpc":"2.0","id":0,"method":"session/list","params":{}}.
@variant("cs-id-zero-answered-null")
def id_zero_answered_null() -> None:
    def rewrite(message: dict[str, Any]) -> dict[str, Any]:
        if "method" not in message and "id" in message and not message["id"]:
            return {**message, "id": None}
        return message

    _rewrite_sent(rewrite)


# P1 Request ids: "any integer, zero and negative ones included".
# Bug: the envelope check accepts an integer id only when it is not negative (ids are
# taken for sequence numbers), so a request with id -1 gets INVALID_REQUEST with
# `"id": null` and is not served.
# Trigger: {"jsonrpc":"2.0","id":-5,"method":"session/list","params":{}}.
@variant("cs-negative-id-refused")
def negative_id_refused() -> None:
    from reference_host import rpc

    original = rpc._valid_id

    def valid_id(value: Any) -> bool:
        if isinstance(value, int) and not isinstance(value, bool) and value < 0:
            return False
        return original(value)

    patch(rpc, "_valid_id", valid_id, wraps=True)


# P1 Request ids: "answer every request under exactly the id it carried: a string, or any
# integer". The string "7" and the number 7 are different ids.
# Bug: ids are normalised with int() when they look numeric (the host keys its requests by
# number), so a request with id "42" is answered with `"id": 42`; other string ids and
# all integers are answered correctly.
# Trigger: {"jsonrpc":"2.0","id":"42","method":"session/list","params":{}}.
@variant("cs-numeric-string-id-coerced")
def numeric_string_id_coerced() -> None:
    numeric = re.compile(r"-?[0-9]+")

    def rewrite(message: dict[str, Any]) -> dict[str, Any]:
        request_id = message.get("id")
        if (
            "method" not in message
            and isinstance(request_id, str)
            and numeric.fullmatch(request_id)
        ):
            return {**message, "id": int(request_id)}
        return message

    _rewrite_sent(rewrite)


# P1 / envelope: a request's `id` is "an integer or a non-empty string", with no length
# limit (the 200-character limit is the `Id` type of host-chosen identifiers, not the
# JSON-RPC request id).
# Bug: the envelope check reuses the Id type's limit for the request id, so a request
# with a 201-character string id (a UUID-plus-trace id, say) gets INVALID_REQUEST with
# `"id": null` and is not served.
# Trigger: {"jsonrpc":"2.0","id":"r"*300,"method":"session/list","params":{}}.
@variant("cs-long-string-id-refused")
def long_string_id_refused() -> None:
    from reference_host import rpc

    original = rpc._valid_id

    def valid_id(value: Any) -> bool:
        if isinstance(value, str) and len(value) > 200:
            return False
        return original(value)

    patch(rpc, "_valid_id", valid_id, wraps=True)


# R7.3: "`shellId: null` clears the session's own choice: from then on the session reads
# `shellId: null` (in the answer, in `session/get` and in `sessions.shell_id`) and its
# commands run in the default shell." (SessionConfigureParams.shellId is string | null.)
# Bug: session/configure reads the optional setting with `params.get("shellId") is not
# None`, so an explicit null is taken for "not given": the answer, session/get and the
# row keep the old shell, and Bash keeps running in it.
# Trigger: session/create with shellId S; session/configure {sessionId, shellId: null};
# the answer still reads shellId S.
@variant("cs-configure-null-shell-ignored")
def configure_null_shell_ignored() -> None:
    from reference_host import host as host_module
    from reference_host.host import Host
    from reference_host.state import ensure_idle_for

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        ensure_idle_for(self.activity_of(row.id), "configuration change")
        changes: dict[str, Any] = {}
        if params.get("mode") is not None:
            changes["mode"] = params["mode"]
        if params.get("permissionMode") is not None:
            changes["permission_mode"] = params["permissionMode"]
        if params.get("provider") is not None:
            changes["provider_base_url"] = params["provider"]["baseUrl"]
            changes["model"] = params["provider"]["model"]
        if params.get("shellId") is not None:
            host_module._require_shell(params["shellId"])
            changes["shell_id"] = params["shellId"]
        updated = replace(row, **changes, updated_at=self.clock.now_ms())
        await self.storage.update_session(updated)
        wire = self.session_wire(updated)
        self.notify("session/updated", {"session": wire})
        return {"session": wire}

    patch(Host, "session_configure", session_configure)


# P29: "fields a `task/update` leaves out keep their values"; only "`runAt: null` in a
# `task/update` takes the task off the schedule".
# Bug: task/update reads the nullable runAt with `params.get("runAt")`, so leaving it out
# is taken as null: renaming a task, or switching it off and on, takes it off the schedule
# (answered, listed and stored with runAt null) and it never runs at its time.
# Trigger: task/create with runAt T; task/update {taskId, name: "x"}; the answer reads
# runAt null, and moving the clock past T runs nothing.
@variant("cs-task-update-omitted-runat-clears")
def task_update_omitted_runat_clears() -> None:
    from reference_host.tasks import Tasks

    original = Tasks.update

    async def update(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        return await original(self, {**params, "runAt": params.get("runAt")})

    patch(Tasks, "update", update, wraps=True)


# cs-jsonrpc-raw-text-match is caught before any scenario runs: the preflight's request
# is spaced, and the host refuses it (tests/test_preflight_hosts.py, reads-only-compact-requests).
CASES = [
    BrokenCase(
        "cs-approval-params-by-position",
        "approval",
        "rejected_plan_cannot_be",
        "R4.4",
        "failed with SESSION_NOT_FOUND",
    ),
    BrokenCase(
        "cs-escaped-pair-refused",
        "sessions",
        "characters_come_escaped",
        "P31",
        "the prompt was refused",
    ),
    BrokenCase(
        "cs-lone-surrogate-lowercase-only",
        "protocol_errors",
        "escaped_in_capitals",
        "P4",
        "expected INVALID_PARAMS",
    ),
    BrokenCase(
        "cs-length-in-utf8-bytes",
        "protocol_errors",
        "longest_length",
        "P4",
        "the host refused a request the schema allows",
    ),
    BrokenCase(
        "cs-length-in-utf16-units",
        "protocol_errors",
        "longest_length",
        "P4",
        "the host refused a request the schema allows",
    ),
    BrokenCase(
        "cs-max-length-exclusive",
        "protocol_errors",
        "longest_length",
        "P4",
        "the host refused a request the schema allows",
    ),
    BrokenCase(
        "cs-fraction-truncated",
        "protocol_errors",
        "fraction_of_a_millisecond",
        "P4",
        "expected the host to refuse",
    ),
    BrokenCase(
        "cs-id-zero-answered-null",
        "protocol_errors",
        "identifier_the_client_chose",
        "P1",
        "no answer carries the identifier 0",
    ),
    BrokenCase(
        "cs-negative-id-refused",
        "protocol_errors",
        "identifier_the_client_chose",
        "P1",
        "no answer carries the identifier -1",
    ),
    BrokenCase(
        "cs-numeric-string-id-coerced",
        "protocol_errors",
        "identifier_the_client_chose",
        "P1",
        "no answer carries the identifier '42'",
    ),
    BrokenCase(
        "cs-long-string-id-refused",
        "protocol_errors",
        "identifier_the_client_chose",
        "P1",
        "no answer carries the identifier 'rrr",
    ),
    BrokenCase(
        "cs-configure-null-shell-ignored",
        "shell",
        "shell_of_its_own_is_cleared",
        "R7.3",
        "the session still names",
    ),
    BrokenCase(
        "cs-task-update-omitted-runat-clears",
        "scheduled_plan",
        "renamed_before_its_time",
        "P29",
        "a task/update keeps the fields it leaves out",
    ),
]
