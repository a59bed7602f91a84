"""Broken hosts: the wire, the handshake, sessions, isolation and turn boundaries.

Each variant is a bug a host team could plausibly ship: a check forgotten on one path, a
lenient parser, a shortcut in containment, state kept only in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, BinaryIO

from hosts.registry import BrokenCase, patch, rewrite_notifications, variant
from pi_contract import load_json, method_index
from reference_host import framing, jsontext, rpc, server, turns, validation
from reference_host import host as host_module
from reference_host.approvals import Approvals, approval_wire
from reference_host.errors import HostError
from reference_host.framing import Frame, OversizedFrame
from reference_host.host import Host
from reference_host.rpc import Dispatcher
from reference_host.state import Activity, ensure_idle_for
from reference_host.storage import SessionRow, Storage
from reference_host.tools import files
from reference_host.turns import TurnRunner
from reference_host.workspace import resolve_inside

ORIGINAL_RESOLVE = resolve_inside
ORIGINAL_IDLE = ensure_idle_for


# -- the handshake (R7.1, P6) ---------------------------------------------------------------


@variant("accepts-protocol-8")
def _accepts_protocol_8() -> None:
    original = Host.initialize

    async def initialize(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        return await original(self, {**params, "protocolVersion": 9})

    patch(Host, "initialize", initialize)


@variant("accepts-future-versions")
def _accepts_future_versions() -> None:
    # "Newer clients are backwards compatible": any version from 9 up is taken as 9.
    original = Host.initialize

    async def initialize(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        if params["protocolVersion"] >= 9:
            params = {**params, "protocolVersion": 9}
        return await original(self, params)

    patch(Host, "initialize", initialize)


@variant("version-refusal-without-supported")
def _version_refusal_without_supported() -> None:
    # The refusal says what was asked for, not what the host speaks.
    original = Host.initialize

    async def initialize(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        try:
            result: dict[str, Any] = await original(self, params)
        except HostError as error:
            if error.code != "UNSUPPORTED_PROTOCOL_VERSION":
                raise
            details = {"requested": params["protocolVersion"]}
            raise HostError(error.code, error.message, details) from None
        return result

    patch(Host, "initialize", initialize)


@variant("serves-before-initialize")
def _serves_before_initialize() -> None:
    # The initialized flag is never consulted.
    original = Dispatcher._call

    async def call(self: Dispatcher, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.initialized = True
        result: dict[str, Any] = await original(self, method, params)
        return result

    patch(Dispatcher, "_call", call)


@variant("reads-before-initialize")
def _reads_before_initialize() -> None:
    # Only methods that change something wait for the handshake.
    original = Dispatcher._call
    readers = ("session/list", "session/get", "shell/list", "task/list", "conformance/clock/get")

    async def call(self: Dispatcher, method: str, params: dict[str, Any]) -> dict[str, Any]:
        initialized = self.initialized
        if method in readers:
            self.initialized = True
        try:
            result: dict[str, Any] = await original(self, method, params)
        finally:
            self.initialized = initialized
        return result

    patch(Dispatcher, "_call", call)


@variant("reinitializes")
def _reinitializes() -> None:
    # A second initialize starts the connection over instead of being refused.
    original = Host.initialize

    async def initialize(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        self.initialized = False
        result: dict[str, Any] = await original(self, params)
        return result

    patch(Host, "initialize", initialize)


@variant("announces-no-conformance")
def _announces_no_conformance() -> None:
    # The capability is read from a setting that the command-line flag never sets.
    original = Host.initialize

    async def initialize(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await original(self, params)
        result["capabilities"]["conformance"] = False
        return result

    patch(Host, "initialize", initialize)


# -- what the host writes (P5) --------------------------------------------------------------


@variant("schema-invalid-session")
def _schema_invalid_session() -> None:
    original = Host.session_wire

    def session_wire(self: Host, row: Any) -> dict[str, Any]:
        wire = original(self, row)
        wire["createdAt"] = "2026-01-01T00:00:00Z"  # the contract says epoch milliseconds
        return wire

    patch(Host, "session_wire", session_wire)


@variant("generic-error-numbers")
def _generic_error_numbers() -> None:
    # Every application error is sent as the JSON-RPC "server error" -32000.
    original = rpc._error

    def error(request_id: Any, failure: HostError) -> dict[str, Any]:
        message = original(request_id, failure)
        if message["error"]["code"] > -32100:
            message["error"]["code"] = -32000
        return message

    patch(rpc, "_error", error)


@variant("nan-in-notification")
def _nan_in_notification() -> None:
    # Session updates carry a float timestamp computed from an unset clock, and the encoder
    # writes what Python's json module writes for it.
    original = Dispatcher.notify

    def notify(self: Dispatcher, method: str, params: dict[str, Any]) -> None:
        if method == "session/updated":
            params = {"session": {**params["session"], "createdAt": math.nan}}
            self._send({"jsonrpc": "2.0", "method": method, "params": params})
            return
        original(self, method, params)

    def dumps(value: Any, *, ascii_only: bool = False) -> str:
        return json.dumps(value, ensure_ascii=ascii_only, separators=(",", ":"))

    patch(Dispatcher, "notify", notify)
    patch(rpc, "dumps", dumps)


# -- framing (P1, P2) -----------------------------------------------------------------------


@variant("blank-lines-parse-error")
def _blank_lines_parse_error() -> None:
    # A blank line is handed to the JSON parser like any other line.
    original = Dispatcher.handle

    async def handle(self: Dispatcher, frame: Frame) -> None:
        if isinstance(frame, bytes) and not frame.strip():
            self._send(rpc._error(None, HostError("PARSE_ERROR", "empty line")))
            return
        await original(self, frame)

    patch(Dispatcher, "handle", handle)


@variant("positive-ids-only")
def _positive_ids_only() -> None:
    # Request ids are taken to be counters from 1, so zero and negatives are refused.
    original = rpc._valid_id

    def valid_id(value: Any) -> bool:
        if isinstance(value, int) and not isinstance(value, bool) and value <= 0:
            return False
        return bool(original(value))

    patch(rpc, "_valid_id", valid_id)


@variant("not-a-request-parse-error")
def _not_a_request_parse_error() -> None:
    # Everything the host cannot use is reported as unparseable.
    original = Dispatcher.handle

    async def handle(self: Dispatcher, frame: Frame) -> None:
        if isinstance(frame, bytes) and frame.strip():
            with contextlib.suppress(ValueError, RecursionError):
                problem = Dispatcher._envelope_problem(jsontext.loads(frame.decode("utf-8")))
                if problem is not None:
                    self._send(rpc._error(None, HostError("PARSE_ERROR", problem)))
                    return
        await original(self, frame)

    patch(Dispatcher, "handle", handle)


def _frames_counting_newline(stream: BinaryIO, max_bytes: int) -> Iterator[Frame]:
    # The limit is applied to the line with its newline, one byte short of the promise.
    for frame in framing.read_frames(stream, max_bytes - 1):
        yield OversizedFrame(max_bytes) if isinstance(frame, OversizedFrame) else frame


@variant("frame-limit-counts-newline")
def _frame_limit_counts_newline() -> None:
    patch(server, "read_frames", _frames_counting_newline)


@variant("announces-larger-frame-limit")
def _announces_larger_frame_limit() -> None:
    # The announced limit is the documented default; the reader was built with 1 MiB.
    def frames(stream: BinaryIO, max_bytes: int) -> Iterator[Frame]:
        yield from framing.read_frames(stream, min(max_bytes, 1024 * 1024))

    patch(server, "read_frames", frames)


@variant("no-frame-limit")
def _no_frame_limit() -> None:
    # Lines are read whole, however long.
    def frames(stream: BinaryIO, max_bytes: int) -> Iterator[Frame]:
        while line := stream.readline():
            yield line.rstrip(b"\n")

    patch(server, "read_frames", frames)


# -- methods and params (P3, P4) ------------------------------------------------------------


@variant("unknown-method-internal-error")
def _unknown_method_internal_error() -> None:
    # The handler table is indexed directly; a missing key surfaces as an internal error.
    async def call(self: Dispatcher, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method != "initialize" and not self.initialized:
            raise HostError("NOT_INITIALIZED", "send initialize first")
        handler = self._handlers[method]
        problem = validation.params_problem(method, params)
        if problem is not None:
            raise HostError("INVALID_PARAMS", problem)
        return await handler(jsontext.integral(params))

    patch(Dispatcher, "_call", call)


@variant("methods-case-insensitive")
def _methods_case_insensitive() -> None:
    original = Dispatcher._call

    async def call(self: Dispatcher, method: str, params: dict[str, Any]) -> dict[str, Any]:
        known = {name.lower(): name for name in self._handlers}
        result: dict[str, Any] = await original(self, known.get(method.lower(), method), params)
        return result

    patch(Dispatcher, "_call", call)


def _without_unknown_members(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """Params with the members their schema does not name dropped."""
    types = load_json("protocol-v9/types.schema.json")
    definition = types["$defs"][method_index()[method]["params"]]
    known = definition.get("properties", {})
    return {key: value for key, value in params.items() if key in known}


@variant("lenient-params")
def _lenient_params() -> None:
    # Members the schema does not name are dropped instead of refused.
    original = Dispatcher._call

    async def call(self: Dispatcher, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method in self._handlers and isinstance(params, dict):
            params = _without_unknown_members(method, params)
        result: dict[str, Any] = await original(self, method, params)
        return result

    patch(Dispatcher, "_call", call)


@variant("partial-configure")
def _partial_configure() -> None:
    # Each setting of a configuration request is checked and applied on its own.
    original = Dispatcher._call

    async def call(self: Dispatcher, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method != "session/configure" or not self.initialized:
            result: dict[str, Any] = await original(self, method, params)
            return result
        for key, value in params.items():
            if key == "sessionId":
                continue
            single = {"sessionId": params.get("sessionId"), key: value}
            if validation.params_problem(method, single) is not None:
                raise HostError("INVALID_PARAMS", f"params/{key} is not valid")
            result = await original(self, method, single)
        return result

    patch(Dispatcher, "_call", call)


def _without_ranges(schema: Any) -> Any:
    if isinstance(schema, dict):
        dropped = ("maximum", "maxLength", "pattern", "format")
        return {k: _without_ranges(v) for k, v in schema.items() if k not in dropped}
    if isinstance(schema, list):
        return [_without_ranges(item) for item in schema]
    return schema


@variant("no-range-checks")
def _no_range_checks() -> None:
    # Params are checked for their types only: no ranges, lengths, URL shapes or Unicode.
    def ranges_dropped(relative: str) -> Any:
        return _without_ranges(load_json(relative))

    patch(validation, "load_json", ranges_dropped)
    patch(validation, "_lone_surrogate", lambda value, where: None)
    patch(validation, "_provider_problem", lambda params: None)


@variant("numbers-internal-error")
def _numbers_internal_error() -> None:
    # A number the parser cannot hold escapes as an unexpected failure.
    original = Dispatcher.handle

    async def handle(self: Dispatcher, frame: Frame) -> None:
        if isinstance(frame, bytes):
            try:
                jsontext.loads(frame.decode("utf-8"))
            except jsontext.JsonTextError as exc:
                if re.search(r"number|digits", str(exc)):
                    failure = HostError("INTERNAL_ERROR", f"reading the request failed: {exc}")
                    self._send(rpc._error(None, failure))
                    return
            except (UnicodeDecodeError, RecursionError):
                pass
        await original(self, frame)

    patch(Dispatcher, "handle", handle)


# -- plans sent back (R1.10) and feedback (R3.7) --------------------------------------------


@variant("request-changes-method")
def _request_changes_method() -> None:
    # The 0.4.14 action survives as an alias: it rejects the plan and keeps the feedback.
    original = Dispatcher._call

    async def call(self: Dispatcher, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "approval/requestChanges" and self.initialized:
            method = "approval/reject"
            params = {k: v for k, v in params.items() if k in ("sessionId", "approvalId")}
        result: dict[str, Any] = await original(self, method, params)
        return result

    patch(Dispatcher, "_call", call)


@variant("approve-ignores-unknown-fields")
def _approve_ignores_unknown_fields() -> None:
    original = Dispatcher._call

    async def call(self: Dispatcher, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "approval/approve" and isinstance(params, dict):
            params = _without_unknown_members(method, params)
        result: dict[str, Any] = await original(self, method, params)
        return result

    patch(Dispatcher, "_call", call)


@variant("reject-takes-feedback")
def _reject_takes_feedback() -> None:
    # Reject accepts an optional note for the model and logs it.
    original = Dispatcher._call

    async def call(self: Dispatcher, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "approval/reject" and isinstance(params, dict):
            params = {k: v for k, v in params.items() if k not in ("feedback", "comment")}
        result: dict[str, Any] = await original(self, method, params)
        return result

    patch(Dispatcher, "_call", call)


# -- sessions (R1.1, R1.2, R1.3, R5.6) ------------------------------------------------------


@variant("modes-case-insensitive")
def _modes_case_insensitive() -> None:
    original = Dispatcher._call

    async def call(self: Dispatcher, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if isinstance(params, dict) and isinstance(params.get("mode"), str):
            params = {**params, "mode": params["mode"].lower()}
        result: dict[str, Any] = await original(self, method, params)
        return result

    patch(Dispatcher, "_call", call)


@variant("mode-not-stored")
def _mode_not_stored() -> None:
    # A mode switch is kept in memory; the stored row keeps the mode the session began with.
    original_update = Storage.update_session
    modes: dict[str, Any] = {}

    async def update_session(self: Storage, session: SessionRow) -> None:
        stored = await self.get_session(session.id)
        if stored is not None:
            modes[session.id] = session.mode
            session = replace(session, mode=stored.mode)
        await original_update(self, session)

    original_get = Storage.get_session

    async def get_session(self: Storage, session_id: str) -> SessionRow | None:
        row = await original_get(self, session_id)
        if row is not None and session_id in modes:
            row = replace(row, mode=modes[session_id])
        return row

    patch(Storage, "update_session", update_session)
    patch(Storage, "get_session", get_session)


@variant("inherits-last-mode")
def _inherits_last_mode() -> None:
    # A new session without a mode takes the mode of the session created before it.
    original = Host.session_create
    last: list[str] = []

    async def session_create(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        if "mode" not in params and last:
            params = {**params, "mode": last[-1]}
        result: dict[str, Any] = await original(self, params)
        last.append(result["session"]["mode"])
        return result

    patch(Host, "session_create", session_create)


@variant("fresh-agent-on-mode-switch")
def _fresh_agent_on_mode_switch() -> None:
    # Switching mode starts the agent over: the model no longer sees the conversation.
    original = Host.session_configure

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        before = await self.require_session(params["sessionId"])
        result: dict[str, Any] = await original(self, params)
        if "mode" in params and params["mode"] != before.mode:
            reset = {"role": "system", "content": "You are a new agent.", "contextReset": True}
            await self.storage.append_transcript(
                before.id, None, "system", reset, self.clock.now_ms()
            )
        return result

    patch(Host, "session_configure", session_configure)


@variant("plan-turns-without-history")
def _plan_turns_without_history() -> None:
    # A planning turn starts from the prompt alone.
    original = TurnRunner._history

    async def history(self: TurnRunner, session_id: str) -> list[dict[str, Any]]:
        session = await self.host.require_session(session_id)
        found: list[dict[str, Any]] = await original(self, session_id)
        return found[-1:] if session.mode == "plan" else found  # the turn's own prompt

    patch(TurnRunner, "_history", history)


@variant("configuration-not-stored")
def _configuration_not_stored() -> None:
    # Settings changed while idle are answered and announced but never written.
    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        ensure_idle_for(self.activity_of(row.id), "configuration change")
        if params.get("shellId") is not None:
            host_module._require_shell(params["shellId"])
        changes: dict[str, Any] = {}
        if "mode" in params:
            changes["mode"] = params["mode"]
        if "permissionMode" in params:
            changes["permission_mode"] = params["permissionMode"]
        if "provider" in params:
            changes["provider_base_url"] = params["provider"]["baseUrl"]
            changes["model"] = params["provider"]["model"]
        if "shellId" in params:
            changes["shell_id"] = params["shellId"]
        updated = replace(row, **changes)
        wire = self.session_wire(updated)
        self.notify("session/updated", {"session": wire})
        return {"session": wire}

    patch(Host, "session_configure", session_configure)


# -- the provider key (P21) -----------------------------------------------------------------


@variant("no-api-key")
def _no_api_key() -> None:
    # The key is read from the host's own variable name, which nobody sets.
    patch(turns, "API_KEY_ENV", "PI_PROVIDER_API_KEY")


@variant("api-key-header")
def _api_key_header() -> None:
    # The key travels in an Azure-style api-key header instead of a bearer token.
    original = getattr(turns, "complete")  # noqa: B009 - the name the turn runner calls

    async def complete(client: Any, config: Any, *args: Any, **kwargs: Any) -> Any:
        client.headers["api-key"] = config.api_key or ""
        return await original(client, replace(config, api_key=None), *args, **kwargs)

    patch(turns, "complete", complete)


@variant("key-in-settings")
def _key_in_settings() -> None:
    # The key is remembered with the provider, so that a later start need not be given it.
    original = Host.session_create

    async def session_create(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await original(self, params)
        key = os.environ.get(turns.API_KEY_ENV)
        if key:
            await self.storage.set_setting("provider_api_key", key)
        return result

    patch(Host, "session_create", session_create)


@variant("key-in-session")
def _key_in_session() -> None:
    # The resolved provider configuration, key included, is what the host reports.
    original = Host.session_wire

    def session_wire(self: Host, row: Any) -> dict[str, Any]:
        wire = original(self, row)
        if wire["provider"] is not None:
            wire["provider"] = {**wire["provider"], "apiKey": os.environ.get(turns.API_KEY_ENV)}
        return wire

    patch(Host, "session_wire", session_wire)


# -- turns and boundaries (R5.x) ------------------------------------------------------------


@variant("second-prompt-accepted")
def _second_prompt_accepted() -> None:
    # A prompt during a turn is queued behind it by starting another turn.
    async def session_prompt(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        activity = replace(self.activity_of(row.id), active_turn_id=None)
        ensure_idle_for(activity, "a new prompt")
        return {"turnId": await self.turns.start(row, "prompt", params["text"])}

    patch(Host, "session_prompt", session_prompt)


@variant("plan-prompt-while-planning")
def _plan_prompt_while_planning() -> None:
    # In Plan the busy check is left to the planning tools; a second plan request starts.
    original = Host.session_prompt

    async def session_prompt(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        if row.mode != "plan":
            result: dict[str, Any] = await original(self, params)
            return result
        activity = replace(self.activity_of(row.id), active_turn_id=None)
        ensure_idle_for(activity, "a new prompt")
        return {"turnId": await self.turns.start(row, "prompt", params["text"])}

    patch(Host, "session_prompt", session_prompt)


def _idle_check_ignoring(**ignored: None) -> Any:
    def check(activity: Activity, what: str) -> None:
        if what == "configuration change":
            activity = replace(activity, **ignored)
        ORIGINAL_IDLE(activity, what)

    return check


@variant("configure-during-turn")
def _configure_during_turn() -> None:
    # Configuration only waits for a pending approval, not for a running turn.
    patch(host_module, "ensure_idle_for", _idle_check_ignoring(active_turn_id=None))


@variant("configure-while-pending")
def _configure_while_pending() -> None:
    # Configuration only waits for a running turn, not for a pending approval.
    patch(host_module, "ensure_idle_for", _idle_check_ignoring(pending_approval_id=None))


@variant("configure-while-executing")
def _configure_while_executing() -> None:
    # An approved execution counts as background work: the session can be reconfigured.
    patch(host_module, "ensure_idle_for", _execution_blind_check)


def _execution_blind_check(activity: Activity, what: str) -> None:
    if what == "configuration change" and activity.active_execution_id is not None:
        return
    ORIGINAL_IDLE(activity, what)


@variant("prompt-while-pending")
def _prompt_while_pending() -> None:
    # The idle check forgets the pending approval, so a prompt starts a new turn.
    async def session_prompt(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        activity = replace(self.activity_of(row.id), pending_approval_id=None)
        ensure_idle_for(activity, "a new prompt")
        return {"turnId": await self.turns.start(row, "prompt", params["text"])}

    patch(Host, "session_prompt", session_prompt)


@variant("shell-change-during-turn")
def _shell_change_during_turn() -> None:
    # A configuration change that only selects a shell skips the idle check.
    original = Host.session_configure

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        if set(params) != {"sessionId", "shellId"}:
            result: dict[str, Any] = await original(self, params)
            return result
        row = await self.require_session(params["sessionId"])
        if params["shellId"] is not None:
            host_module._require_shell(params["shellId"])
        updated = replace(row, shell_id=params["shellId"], updated_at=self.clock.now_ms())
        await self.storage.update_session(updated)
        return {"session": await self.publish_session(row.id)}

    patch(Host, "session_configure", session_configure)


@variant("cancel-while-pending")
def _cancel_while_pending() -> None:
    # Cancel is always allowed; with no turn it just answers that nothing ran.
    patch(host_module, "ensure_can_cancel", lambda activity: None)


@variant("pending-after-reject")
def _pending_after_reject() -> None:
    # Rejecting records the decision but leaves the session marked as waiting for one.
    original = Approvals.reject

    async def reject(self: Approvals, session_id: str, approval_id: str) -> dict[str, Any]:
        result: dict[str, Any] = await original(self, session_id, approval_id)
        self.host.set_activity(session_id, pending_approval_id=approval_id)
        return result

    patch(Approvals, "reject", reject)


@variant("cancel-reports-last-turn")
def _cancel_reports_last_turn() -> None:
    # Cancel answers with the session's most recent turn, running or not.
    original = TurnRunner.cancel
    last: dict[str, str] = {}
    original_start = TurnRunner.start

    async def start(self: TurnRunner, session: Any, *args: Any, **kwargs: Any) -> str:
        turn_id: str = await original_start(self, session, *args, **kwargs)
        last[session.id] = turn_id
        return turn_id

    async def cancel(self: TurnRunner, session_id: str) -> str | None:
        return await original(self, session_id) or last.get(session_id)

    patch(TurnRunner, "start", start)
    patch(TurnRunner, "cancel", cancel)


@variant("cancel-stored-as-completed")
def _cancel_stored_as_completed() -> None:
    # The stored turn only knows how it was meant to end.
    original = Storage.end_turn

    async def end_turn(self: Storage, turn_id: str, state: str, at: int) -> None:
        await original(self, turn_id, "completed" if state == "cancelled" else state, at)

    patch(Storage, "end_turn", end_turn)


# -- isolation (R5.8, R5.9) -----------------------------------------------------------------


def _absolute_trusted(root: Path, relative: str, *, must_exist: bool) -> Path:
    # An absolute path is taken to be one the model was shown, and used as it is.
    if Path(relative).is_absolute():
        return Path(relative)
    return ORIGINAL_RESOLVE(root, relative, must_exist=must_exist)


def _prefix_containment(root: Path, relative: str, *, must_exist: bool) -> Path:
    # Containment compared as text: /work/project-other starts with /work/project.
    real_root = root.resolve(strict=True)
    resolved = (real_root / relative).resolve(strict=False)
    if not str(resolved).startswith(str(real_root)):
        raise HostError("PATH_OUTSIDE_WORKSPACE", f"path {relative!r} is outside the workspace")
    if must_exist and not resolved.exists():
        raise HostError("FILE_NOT_FOUND", f"path {relative!r} does not exist")
    return resolved


def _lexical_containment(root: Path, relative: str, *, must_exist: bool) -> Path:
    # Containment checked on the path as written; links are followed only when opened.
    real_root = root.resolve(strict=True)
    joined = Path(os.path.normpath(real_root / relative))
    if not joined.is_relative_to(real_root):
        raise HostError("PATH_OUTSIDE_WORKSPACE", f"path {relative!r} is outside the workspace")
    if must_exist and not joined.exists():
        raise HostError("FILE_NOT_FOUND", f"path {relative!r} does not exist")
    return joined


def _contain_with(resolve: Any) -> None:
    # One containment helper serves the file tools and the plan-folder guard alike.
    patch(files, "resolve_inside", resolve)
    patch(turns, "resolve_inside", resolve)


@variant("absolute-paths-trusted")
def _absolute_paths_trusted() -> None:
    _contain_with(_absolute_trusted)


@variant("prefix-containment")
def _prefix_containment_variant() -> None:
    _contain_with(_prefix_containment)


@variant("links-not-resolved")
def _links_not_resolved() -> None:
    _contain_with(_lexical_containment)


@variant("text-to-last-prompted-session")
def _text_to_last_prompted_session() -> None:
    # Streamed text goes to "the current session": the one prompted last.
    current: list[str] = []
    original_prompt = Host.session_prompt

    async def session_prompt(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        current.append(params["sessionId"])
        result: dict[str, Any] = await original_prompt(self, params)
        return result

    original_init = Host.__init__

    def init(self: Host, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        notify = self.notify

        def routed(method: str, params: dict[str, Any]) -> None:
            if method == "turn/text" and current:
                params = {**params, "sessionId": current[-1]}
            notify(method, params)

        self.notify = routed

    patch(Host, "session_prompt", session_prompt)
    patch(Host, "__init__", init)


@variant("cancel-cancels-all")
def _cancel_cancels_all() -> None:
    # Cancel stops every running turn of the host, not only the session's.
    original = TurnRunner.cancel

    async def cancel(self: TurnRunner, session_id: str) -> str | None:
        others = [task for sid, task in self.tasks.items() if sid != session_id]
        for task in others:
            task.cancel()
        turn_id = await original(self, session_id)
        for task in others:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        return turn_id

    patch(TurnRunner, "cancel", cancel)


@variant("approval-lookup-ignores-session")
def _approval_lookup_ignores_session() -> None:
    # Approval ids are unique, so the host finds them by id alone.
    async def require(self: Approvals, session_id: str, approval_id: str) -> Any:
        await self.host.require_session(session_id)
        row = await self.host.storage.get_approval(approval_id)
        if row is None:
            raise HostError("APPROVAL_NOT_FOUND", f"no approval {approval_id!r}")
        return row

    patch(Approvals, "require", require)


@variant("lists-every-approval")
def _lists_every_approval() -> None:
    # The approval list is read without its session filter.
    async def approval_list(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        await self.require_session(params["sessionId"])
        rows = []
        for session in await self.storage.list_sessions():
            rows += await self.storage.list_approvals(session.id)
        return {"approvals": [approval_wire(a) for a in rows]}

    patch(Host, "approval_list", approval_list)


# -- a host that stops (not a case: its verdict is errored, see test_host_stops.py) --------


@variant("exits-on-prompt")
def _exits_on_prompt() -> None:
    # A fatal error on the first prompt ends the process at once.
    async def session_prompt(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        os._exit(7)

    patch(Host, "session_prompt", session_prompt)


@variant("exits-mid-turn")
def _exits_mid_turn() -> None:
    # A fatal error while the model is being asked ends the process at once.
    async def ask_model(self: TurnRunner, *args: Any) -> Any:
        os._exit(9)

    patch(TurnRunner, "_ask_model", ask_model)


@variant("reads-id-from-non-utf8")
def _reads_id_from_non_utf8() -> None:
    # A line that is not valid UTF-8 is read anyway, its bad bytes replaced, and the
    # PARSE_ERROR answer carries the id found in it.
    original = rpc.Dispatcher.handle

    async def handle(self: rpc.Dispatcher, frame: Any) -> None:
        if isinstance(frame, bytes):
            try:
                frame.decode("utf-8")
            except UnicodeDecodeError:
                with contextlib.suppress(ValueError):
                    found = json.loads(frame.decode("utf-8", errors="replace"))
                    if isinstance(found, dict) and "id" in found:
                        problem = HostError("PARSE_ERROR", "not valid UTF-8")
                        self._send(rpc._error(found["id"], problem))
                        return
        await original(self, frame)

    patch(rpc.Dispatcher, "handle", handle)


@variant("tool-calls-name-newest-session")
def _tool_calls_name_newest_session() -> None:
    # R5.9: every notification names the session of the turn it reports. This host builds
    # turn/toolCall from the session it created last instead of the call's own turn, so
    # with two sessions at once the first session's calls are announced in the second.
    newest: list[str] = []

    def rewrite(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        if method == "session/updated" and params["session"]["sessionId"] not in newest:
            newest.append(params["session"]["sessionId"])
        if method == "turn/toolCall" and newest:
            return {**params, "sessionId": newest[-1]}
        return params

    rewrite_notifications(rewrite)


# P2: the rest of a line past the frame limit is read as lines of its own (a mutant of the
# reference host's framing that stopped skipping it).
@variant("oversized-line-rest-read-as-lines")
def _oversized_line_rest_read_as_lines() -> None:
    def read_frames(stream: Any, max_bytes: int = framing.DEFAULT_MAX_FRAME_BYTES) -> Any:
        while True:
            line = stream.readline(max_bytes + 1)
            if not line:
                return
            if line.endswith(b"\n"):
                yield line[:-1]
            elif len(line) <= max_bytes:
                yield line
            else:
                yield framing.OversizedFrame(max_bytes)  # the rest is left to be read

    patch(server, "read_frames", read_frames)


# P4: a whole number written as 60000.0 fails inside the host (INTERNAL_ERROR), neither
# taken nor refused as invalid (a mutant of the reference host's integral() did this).
@variant("integral-float-internal-error")
def _integral_float_internal_error() -> None:
    def integral(value: Any) -> Any:
        if isinstance(value, float) and value.is_integer():
            raise TypeError("int() argument must be a string or a number, not 'NoneType'")
        if isinstance(value, dict):
            return {key: integral(item) for key, item in value.items()}
        if isinstance(value, list):
            return [integral(item) for item in value]
        return value

    patch(rpc, "integral", integral)


CASES = [
    BrokenCase(
        "integral-float-internal-error",
        "protocol_errors",
        "written_with_a_decimal_point",
        "P4",
        "60000.0 is a whole number",
    ),
    BrokenCase(
        "oversized-line-rest-read-as-lines",
        "protocol_errors",
        "twice_as_long_as_the_frame_limit",
        "P2",
        "the rest of a line past the limit is not a line",
    ),
    BrokenCase(
        "reads-id-from-non-utf8",
        "protocol_errors",
        "line_that_is_not_utf",
        "P1",
        "the refusal names request id",
    ),
    # handshake
    BrokenCase("accepts-protocol-8", "handshake", "previous_version", "R7.1", "to refuse"),
    BrokenCase("accepts-future-versions", "handshake", "future_version", "R7.1", "to refuse"),
    BrokenCase(
        "version-refusal-without-supported",
        "handshake",
        "previous_version",
        "R7.1",
        "details.supported",
    ),
    BrokenCase(
        "serves-before-initialize",
        "handshake",
        "before_the_connection_is_opened",
        "P6",
        "expected the host to refuse",
    ),
    BrokenCase(
        "reads-before-initialize",
        "handshake",
        "before_the_connection_is_opened and list_of_sessions",
        "P6",
        "expected the host to refuse",
    ),
    BrokenCase("reinitializes", "handshake", "opened_only_once", "P6", "to refuse"),
    BrokenCase(
        "announces-no-conformance",
        "handshake",
        "announces_what_it_can_do",
        "P6",
        "announces conformance",
    ),
    # what the host writes
    BrokenCase(
        "schema-invalid-session",
        "sessions",
        "starts_in_agent_mode",
        "P5",
        "broke the protocol v9 contract",
    ),
    BrokenCase(
        "generic-error-numbers",
        "handshake",
        "catalogs_number",
        "P5",
        "the catalog lists",
    ),
    BrokenCase(
        "nan-in-notification",
        "sessions",
        "idle_session_takes_a_new and mode",
        "P5",
        "NaN",
    ),
    # framing
    BrokenCase("blank-lines-parse-error", "protocol_errors", "blank_lines", "P1", "instead of 2"),
    BrokenCase(
        "positive-ids-only",
        "protocol_errors",
        "identifier_the_client_chose and zero",
        "P1",
        "no answer carries the identifier",
    ),
    BrokenCase(
        "not-a-request-parse-error",
        "protocol_errors",
        "not_a_request_is_refused",
        "P1",
        "expected INVALID_REQUEST",
    ),
    BrokenCase(
        "frame-limit-counts-newline",
        "protocol_errors",
        "exactly_at_the_frame_limit",
        "P2",
        "was refused",
    ),
    BrokenCase(
        "announces-larger-frame-limit",
        "protocol_errors",
        "exactly_at_the_frame_limit",
        "P2",
        "was refused",
    ),
    BrokenCase(
        "no-frame-limit",
        "protocol_errors",
        "one_byte_over_the_frame_limit",
        "P2",
        "expected an error response",
    ),
    # methods and params
    BrokenCase(
        "unknown-method-internal-error",
        "protocol_errors",
        "method_that_is_not_published",
        "P3",
        "expected METHOD_NOT_FOUND",
    ),
    BrokenCase(
        "methods-case-insensitive",
        "protocol_errors",
        "method_that_is_not_published and other_case",
        "P3",
        "expected the host to refuse",
    ),
    BrokenCase(
        "lenient-params",
        "protocol_errors",
        "parameter_that_does_not_exist",
        "P4",
        "expected the host to refuse",
    ),
    BrokenCase(
        "partial-configure",
        "protocol_errors",
        "one_invalid_setting",
        "P4",
        "the refused change took effect",
    ),
    BrokenCase(
        "no-range-checks",
        "protocol_errors",
        "out_of_the_published_range",
        "P4",
        "expected the host to refuse",
    ),
    BrokenCase(
        "numbers-internal-error",
        "protocol_errors",
        "number_the_host_cannot_hold",
        "P4",
        "expected PARSE_ERROR or INVALID_PARAMS",
    ),
    # plans sent back, feedback
    BrokenCase(
        "request-changes-method",
        "protocol_errors",
        "sent_back_for_changes and action_of_its_own",
        "R1.10",
        "expected the host to refuse",
    ),
    BrokenCase(
        "approve-ignores-unknown-fields",
        "protocol_errors",
        "sent_back_for_changes and approving",
        "R1.10",
        "expected the host to refuse",
    ),
    BrokenCase(
        "reject-takes-feedback",
        "protocol_errors",
        "decision_with_feedback",
        "R3.7",
        "expected the host to refuse",
    ),
    # sessions
    BrokenCase(
        "modes-case-insensitive",
        "sessions",
        "other_than_agent_or_plan",
        "R1.1",
        "expected the host to refuse",
    ),
    BrokenCase(
        "mode-not-stored",
        "sessions",
        "idle_session_switches",
        "R1.1",
        "the host reports",
    ),
    BrokenCase(
        "inherits-last-mode",
        "sessions",
        "after_a_plan_session_was_created",
        "R1.2",
        "the session is in plan mode",
    ),
    BrokenCase(
        "fresh-agent-on-mode-switch",
        "sessions",
        "keeps_the_agent or keeps_the_planning",
        "R1.3",
        "not shown the earlier question",
    ),
    BrokenCase(
        "plan-turns-without-history",
        "sessions",
        "switching_to_plan_keeps_the_agent",
        "R1.3",
        "not shown the earlier question",
    ),
    BrokenCase(
        "configuration-not-stored",
        "sessions",
        "idle_session_takes_a_new",
        "R5.6",
        "the host reports",
    ),
    # the provider key
    BrokenCase("no-api-key", "sessions", "receives_the_key", "P21", "as a bearer token"),
    BrokenCase("api-key-header", "sessions", "receives_the_key", "P21", "as a bearer token"),
    BrokenCase("key-in-settings", "sessions", "receives_the_key", "P21", "stored the provider key"),
    BrokenCase(
        "key-in-session", "sessions", "receives_the_key", "P21", "provider.apiKey\n  Extra inputs"
    ),
    # turn boundaries
    BrokenCase(
        "second-prompt-accepted",
        "turn_boundaries",
        "second_prompt_during_a_turn",
        "R5.1",
        "expected SESSION_BUSY",
    ),
    BrokenCase(
        "cancel-reports-last-turn",
        "turn_boundaries",
        "second_cancel",
        "R5.1",
        "says it cancelled",
    ),
    BrokenCase(
        "cancel-stored-as-completed",
        "turn_boundaries",
        "cancelling_a_turn_ends_it",
        "R5.1",
        "stored as completed",
    ),
    BrokenCase(
        "plan-prompt-while-planning",
        "turn_boundaries",
        "another_plan_while_the_planning_turn",
        "R5.2",
        "expected SESSION_BUSY",
    ),
    BrokenCase(
        "configure-during-turn",
        "turn_boundaries",
        "during_a_turn_is_refused",
        "R5.3",
        "to refuse",
    ),
    BrokenCase(
        "shell-change-during-turn",
        "turn_boundaries",
        "changing_the_shell_during_a_turn",
        "R5.4",
        "to refuse",
    ),
    BrokenCase(
        "configure-while-executing",
        "turn_boundaries",
        "planning_again_while",
        "R5.5",
        "to refuse",
    ),
    BrokenCase(
        "configure-while-executing",
        "turn_boundaries",
        "approved_plan_waits_to_run",
        "R5.6",
        "to refuse",
        label="queued",
    ),
    BrokenCase(
        "prompt-while-pending",
        "turn_boundaries",
        "prompt_while_a_plan_is_pending",
        "R5.7",
        "to refuse",
    ),
    BrokenCase(
        "configure-while-pending",
        "turn_boundaries",
        "while_a_plan_is_pending",
        "R5.7",
        "to refuse",
    ),
    BrokenCase(
        "cancel-while-pending",
        "turn_boundaries",
        "cancelling_while_a_plan_is_pending",
        "R5.7",
        "to refuse",
    ),
    BrokenCase(
        "pending-after-reject",
        "turn_boundaries",
        "once_the_plan_is_rejected",
        "R5.7",
        "APPROVAL_PENDING",
    ),
    # isolation
    BrokenCase(
        "absolute-paths-trusted",
        "isolation",
        "another_projects_file and absolute",
        "R5.8",
        "ran",
    ),
    BrokenCase(
        "prefix-containment",
        "isolation",
        "into_another_project and climbing",
        "R5.8",
        "ran",
    ),
    BrokenCase(
        "links-not-resolved",
        "isolation",
        "another_projects_file and link",
        "R5.8",
        "ran",
    ),
    BrokenCase(
        "text-to-last-prompted-session",
        "isolation",
        "answering_at_once",
        "R5.9",
        "names session",
    ),
    BrokenCase(
        "cancel-cancels-all",
        "isolation",
        "leaves_the_other",
        "R5.9",
        "no longer the session's active turn",
    ),
    BrokenCase(
        "approval-lookup-ignores-session",
        "isolation",
        "through_another_session",
        "R5.9",
        "to refuse",
    ),
    BrokenCase(
        "lists-every-approval",
        "isolation",
        "plans_are_not_listed",
        "R5.9",
        "another session's plans",
    ),
    BrokenCase(
        "tool-calls-name-newest-session",
        "isolation",
        "each_hear_only_their_own_output",
        "R5.9",
        "a turn of session",
    ),
]
