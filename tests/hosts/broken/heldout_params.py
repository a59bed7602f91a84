"""Broken hosts: a twelfth held-out set (request params and error codes), written from the
contract alone.

All fourteen went uncaught at first; all are caught now, by values the fixtures had held
fixed: lengths counted in characters beyond ASCII, limits met exactly, fractions, nulls,
members inside nested objects, a change that names nothing, one wrong setting among
right ones, fields an update leaves out, the question of a cancelled turn, a decision
that is neither allow nor deny, a version written as text, a missing required field.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from hosts.registry import BrokenCase, patch, variant
from reference_host import rpc, schema_subset, validation
from reference_host.errors import HostError
from reference_host.host import Host
from reference_host.ids import new_id
from reference_host.permissions import PermissionBroker, _Request
from reference_host.schema_subset import Problem, _shown
from reference_host.tasks import Tasks
from reference_host.validation import MAX_TIMESTAMP


def _before_validation(adjust: Callable[[str, Any], str | None]) -> None:
    """Run ``adjust(method, params)`` before the schema check: it may rewrite the params in
    place (what the handler then sees) or return a problem of its own."""
    original = rpc.params_problem

    def params_problem(method: str, params: Any) -> str | None:
        if isinstance(params, dict):
            problem = adjust(method, params)
            if problem is not None:
                return problem
        return original(method, params)

    patch(rpc, "params_problem", params_problem)


# P4 (string lengths): the host counts a string's length in UTF-8 bytes, as its language's
# len() does, not in characters (JSON Schema's maxLength counts code points): a task name of
# 150 accented letters (300 bytes), or an id of 120 CJK characters, is refused.
@variant("lengths-in-utf8-bytes")
def _lengths_in_utf8_bytes() -> None:
    def _string(schema: Any, value: str, path: tuple[str | int, ...]) -> Problem | None:
        size = len(value.encode("utf-8", "surrogatepass"))
        if "minLength" in schema and size < schema["minLength"]:
            return Problem(path, f"{_shown(value)} is shorter than {schema['minLength']}")
        if "maxLength" in schema and size > schema["maxLength"]:
            return Problem(path, f"{_shown(value)} is longer than {schema['maxLength']}")
        if "pattern" in schema and schema_subset._pattern(schema["pattern"]).search(value) is None:
            return Problem(path, f"{_shown(value)} does not match {schema['pattern']!r}")
        return None

    patch(schema_subset._Checker, "_string", staticmethod(_string))


# P4 (string lengths, checked before state): a workspaceRoot longer than 4096 characters is not
# checked against the schema's maxLength; the host tries the path on the file system, which
# fails (ENAMETOOLONG), and answers WORKSPACE_INVALID instead of INVALID_PARAMS.
@variant("long-root-is-workspace-invalid")
def _long_root_is_workspace_invalid() -> None:
    original = rpc.params_problem

    def params_problem(method: str, params: Any) -> str | None:
        if method in ("session/create", "task/create") and isinstance(params, dict):
            root = params.get("workspaceRoot")
            if isinstance(root, str) and len(root) > 4096:
                return original(method, {**params, "workspaceRoot": "/"})  # all but the length
        return original(method, params)

    patch(rpc, "params_problem", params_problem)


# ClockAdvanceParams (P4 ranges, P32): the host checks `ms` against the schema's maximum
# but not where the clock lands: an advance that takes the clock past 8.64e15 minus 30
# minutes is accepted (and the clock then reports, and sets deadlines at, instants past the
# last valid Timestamp) instead of getting INVALID_PARAMS.
@variant("advance-past-the-clock-limit")
def _advance_past_the_clock_limit() -> None:
    async def clock_advance(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        clock = self._manual_clock()
        return {"now": await clock.set(clock.now_ms() + params["ms"])}

    patch(Host, "clock_advance", clock_advance)


# P4 / Timestamp (ranges, an off-by-one at a limit): the latest Timestamp, 8640000000000000,
# is allowed ("at most"); the host treats the maximum as exclusive and refuses a task's
# runAt of exactly that value with INVALID_PARAMS.
@variant("run-at-maximum-refused")
def _run_at_maximum_refused() -> None:
    def adjust(method: str, params: dict[str, Any]) -> str | None:
        if method in ("task/create", "task/update") and params.get("runAt") == MAX_TIMESTAMP:
            return f"params/runAt: must be less than {MAX_TIMESTAMP}"
        return None

    _before_validation(adjust)


# P4 (types) / Framing (timestamps are integers): a fractional runAt, clock `now` or advance
# `ms` (1700000000000.5) is truncated to an integer and accepted, as a host that reads every
# JSON number into a double and casts it does, instead of getting INVALID_PARAMS.
@variant("fractional-timestamps-truncated")
def _fractional_timestamps_truncated() -> None:
    fields = {
        "task/create": "runAt",
        "task/update": "runAt",
        "conformance/clock/set": "now",
        "conformance/clock/advance": "ms",
    }

    def adjust(method: str, params: dict[str, Any]) -> str | None:
        name = fields.get(method)
        value = params.get(name) if name else None
        if isinstance(value, float) and not value.is_integer():
            params[name] = int(value)
        return None

    _before_validation(adjust)


# P4 (nulls): an optional field sent as null (`"mode": null`, `"permissionMode": null`,
# `"enabled": null`, and in session/create `"provider": null` or `"shellId": null`) is
# read as if it were absent (`params.get(...) or default`), and the request is accepted,
# instead of getting INVALID_PARAMS: null is not a Mode, a PermissionMode or a boolean.
@variant("null-means-default")
def _null_means_default() -> None:
    optional = {
        "session/create": ("mode", "permissionMode", "provider", "shellId"),
        "session/configure": ("mode", "permissionMode", "provider"),
        "task/create": ("permissionMode", "enabled"),
        "task/update": ("mode", "permissionMode", "enabled", "provider"),
    }

    def adjust(method: str, params: dict[str, Any]) -> str | None:
        for name in optional.get(method, ()):
            if name in params and params[name] is None:
                del params[name]
        return None

    _before_validation(adjust)


# P4 / "Closed objects" (unknown members): the host rejects unknown top-level members, but
# decodes nested objects (`provider`, `clientInfo`) into structures that drop what they do
# not know: a provider carrying `"apiKey"` or `"temperature"`, or a clientInfo with a
# `"title"`, is accepted instead of getting INVALID_PARAMS.
@variant("nested-members-unchecked")
def _nested_members_unchecked() -> None:
    known = {"provider": ("baseUrl", "model"), "clientInfo": ("name", "version")}

    def adjust(method: str, params: dict[str, Any]) -> str | None:
        for name, members in known.items():
            nested = params.get(name)
            if isinstance(nested, dict):
                for key in [key for key in nested if key not in members]:
                    del nested[key]
        return None

    _before_validation(adjust)


# P4 / SessionConfigureParams, TaskUpdateParams (minProperties 2; partial updates): a
# session/configure or task/update that names only its session or task changes nothing,
# and the host answers it as a successful no-op (with a session/updated) instead of
# refusing it with INVALID_PARAMS.
@variant("empty-update-accepted")
def _empty_update_accepted() -> None:
    fillers = {"session/configure": ("sessionId", "mode"), "task/update": ("taskId", "name")}
    original = rpc.params_problem

    def params_problem(method: str, params: Any) -> str | None:
        if method in fillers and isinstance(params, dict):
            name, filler = fillers[method]
            if list(params) == [name]:  # checked as if it changed something
                return original(method, {**params, filler: "agent"})
        return original(method, params)

    patch(rpc, "params_problem", params_problem)


# P4 (a request that changes several settings at once and has one of them wrong changes none
# of them): session/configure checks the provider's URL (port range, a usable host) only
# when it reaches the provider, after it has stored and announced the mode and permission
# mode of the same request; the answer is INVALID_PARAMS but those changes stay.
@variant("configure-half-applied")
def _configure_half_applied() -> None:
    original_problem = rpc.params_problem
    original_configure = Host.session_configure

    def params_problem(method: str, params: Any) -> str | None:
        if method == "session/configure" and isinstance(params, dict):
            provider = params.get("provider")
            if isinstance(provider, dict) and isinstance(provider.get("baseUrl"), str):
                usable = {**provider, "baseUrl": "http://127.0.0.1/"}
                return original_problem(method, {**params, "provider": usable})
        return original_problem(method, params)

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        problem = validation._provider_problem(params)
        if problem is None:
            return await original_configure(self, params)
        rest = {key: value for key, value in params.items() if key != "provider"}
        if len(rest) > 1:
            await original_configure(self, rest)
        raise HostError("INVALID_PARAMS", problem)

    patch(rpc, "params_problem", params_problem)
    patch(Host, "session_configure", session_configure)


# P29 (fields a task/update leaves out keep their values): the update handler shares the
# create path's defaults, so an update that leaves out permissionMode (renaming the task,
# moving its runAt) resets an `auto` or `accept-edits` task to `ask`.
@variant("task-update-defaults-permission-mode")
def _task_update_defaults_permission_mode() -> None:
    original = Tasks.update

    async def update(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        return await original(self, {"permissionMode": "ask", **params})

    patch(Tasks, "update", update)


# P7 / PermissionRespondParams (decision is "allow" or "deny"): the host does not check the
# decision against the enum; anything but "allow" ("Allow", "yes", "approve") is read as a
# denial, consuming the question, instead of getting INVALID_PARAMS and leaving the
# question open.
@variant("any-decision-but-allow-denies")
def _any_decision_but_allow_denies() -> None:
    original = rpc.params_problem

    def params_problem(method: str, params: Any) -> str | None:
        if method == "permission/respond" and isinstance(params, dict):
            decision = params.get("decision")
            if isinstance(decision, str) and decision not in ("allow", "deny"):
                return original(method, {**params, "decision": "deny"})
        return original(method, params)

    patch(rpc, "params_problem", params_problem)


# P7 (PERMISSION_REQUEST_NOT_FOUND: "No open permission request has that id"): when a turn
# is cancelled while it waits for a permission answer, the host keeps the question in its
# table; a later permission/respond to it is answered `{}` as if it had been taken, instead
# of PERMISSION_REQUEST_NOT_FOUND. (A second answer to an answered question is still
# refused.)
@variant("permission-open-after-cancel")
def _permission_open_after_cancel() -> None:
    async def ask(
        self: PermissionBroker, session_id: str, turn_id: str, tool: str, tool_input: Any
    ) -> bool:
        request_id = new_id("perm")
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._open[request_id] = _Request(session_id, answer)
        self._notify(
            "permission/requested",
            {
                "sessionId": session_id,
                "turnId": turn_id,
                "requestId": request_id,
                "tool": tool,
                "input": tool_input,
            },
        )
        result = await answer  # a cancelled turn leaves the request in the table
        self._open.pop(request_id, None)
        return result

    def respond(self: PermissionBroker, request_id: str, decision: str) -> None:
        request = self._open.get(request_id)
        if request is not None and request.answer.cancelled():
            del self._open[request_id]  # too late to matter; taken quietly
            return
        if request is None or request.answer.done():
            raise HostError(
                "PERMISSION_REQUEST_NOT_FOUND", f"no open permission request {request_id!r}"
            )
        request.answer.set_result(decision == "allow")

    patch(PermissionBroker, "ask", ask)
    patch(PermissionBroker, "respond", respond)


# R7.1 / InitializeParams (protocolVersion is an integer): the host coerces the requested
# version with int(), so `"protocolVersion": "9"` (a string) or 9.5 opens the connection
# as version 9 instead of being refused (INVALID_PARAMS, or UNSUPPORTED_PROTOCOL_VERSION).
@variant("coerces-protocol-version")
def _coerces_protocol_version() -> None:
    def adjust(method: str, params: dict[str, Any]) -> str | None:
        version = params.get("protocolVersion")
        if method == "initialize" and isinstance(version, str | float):
            with contextlib.suppress(ValueError, OverflowError):
                params["protocolVersion"] = int(version)
        return None

    _before_validation(adjust)


# P4 (required members): `workspaceRoot` is required in session/create and task/create
# (null for no project); the host reads it with `params.get("workspaceRoot")`, so a request
# that leaves it out creates a session (or task) without a project instead of getting
# INVALID_PARAMS.
@variant("missing-root-means-no-project")
def _missing_root_means_no_project() -> None:
    def adjust(method: str, params: dict[str, Any]) -> str | None:
        if method in ("session/create", "task/create") and "workspaceRoot" not in params:
            params["workspaceRoot"] = None
        return None

    _before_validation(adjust)


CASES = [
    BrokenCase(
        "lengths-in-utf8-bytes",
        "protocol_errors",
        "edge_of_the_published_range and ASCII",
        "P4",
        "refused a request the schema allows",
    ),
    BrokenCase(
        "long-root-is-workspace-invalid",
        "protocol_errors",
        "out_of_the_published_range and longer",
        "P4",
        "expected INVALID_PARAMS",
    ),
    BrokenCase(
        "advance-past-the-clock-limit",
        "protocol_errors",
        "out_of_the_published_range and deadline",
        "P4",
        "expected the host to refuse",
    ),
    BrokenCase(
        "run-at-maximum-refused",
        "protocol_errors",
        "edge_of_the_published_range and representable",
        "P4",
        "refused a request the schema allows",
    ),
    BrokenCase(
        "fractional-timestamps-truncated",
        "protocol_errors",
        "out_of_the_published_range and fraction",
        "P4",
        "expected the host to refuse",
    ),
    BrokenCase(
        "null-means-default",
        "protocol_errors",
        "out_of_the_published_range and null",
        "P4",
        "expected the host to refuse",
    ),
    BrokenCase(
        "nested-members-unchecked",
        "protocol_errors",
        "out_of_the_published_range and member",
        "P4",
        "expected the host to refuse",
    ),
    BrokenCase(
        "empty-update-accepted",
        "protocol_errors",
        "out_of_the_published_range and names",
        "P4",
        "expected the host to refuse",
    ),
    BrokenCase(
        "configure-half-applied",
        "protocol_errors",
        "one_invalid_setting and port",
        "P4",
        "the refused change took effect",
    ),
    BrokenCase(
        "task-update-defaults-permission-mode",
        "scheduled_plan",
        "taken_off_the_schedule",
        "P29",
        "also changed",
    ),
    BrokenCase(
        "any-decision-but-allow-denies",
        "protocol_errors",
        "out_of_the_published_range and neither",
        "P4",
        "expected INVALID_PARAMS",
    ),
    BrokenCase(
        "permission-open-after-cancel",
        "turn_boundaries",
        "cancelled_turn_can_no_longer",
        "P7",
        "expected the host to refuse",
    ),
    BrokenCase(
        "coerces-protocol-version",
        "handshake",
        "version_as_text",
        "R7.1",
        "expected the host to refuse",
    ),
    BrokenCase(
        "missing-root-means-no-project",
        "protocol_errors",
        "out_of_the_published_range and without",
        "P4",
        "expected the host to refuse",
    ),
]
