"""Broken hosts: a held-out set (code generated from the schemas, and trusted), written from
the contract alone.

Each host is the reference host whose author generated its wire types from ``schemas/``
(pydantic, TypeScript, serde) and trusted what the generator made of them: optional read as
nullable, ``exclude_none``, defaults filled in, enums by name or case, integers as numbers,
aliases, closed objects, unions, formats and lengths.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from hosts.registry import BrokenCase, patch, variant

ParamsRewrite = Callable[[str, dict[str, Any]], dict[str, Any]]


def _rewrite_params(rewrite: ParamsRewrite) -> None:
    """Pass the params of every request through ``rewrite(method, params)`` before the host
    validates them: where a generated params model turns the wire object into the one the
    handlers see."""
    from reference_host.rpc import Dispatcher

    original = Dispatcher._call

    async def call(self: Dispatcher, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return await original(self, method, rewrite(method, dict(params)))

    patch(Dispatcher, "_call", call, wraps=True)


# ErrorData (types.schema.json; protocol.md "ErrorData"): `details` is optional and, when
# present, an object; it is never null ("No other fields are accepted", and `details` has
# type object only). Framing: error.data is an ErrorData.
# Bug: the generated ErrorData model has `details: Optional[dict] = None` and is dumped
# without exclude_none, so every error without details carries `"details": null` (in
# JSON-RPC errors, turn/toolResult and turn/ended errors, task runs).
# Client: `error.data.details` is null where the field must be absent or an object.
# Recipe: initialize; session/get {"sessionId": "nope"} -> error.data has "details": null.
@variant("gen-error-details-null")
def error_details_null() -> None:
    from reference_host.errors import HostError

    def to_data(self: HostError) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": self.details or None}

    patch(HostError, "to_data", to_data)


# R7.3 (implementing-a-host "Commands and shells"): `session/configure` with
# `shellId: null` clears the session's own choice; from then on the session reads
# `shellId: null` (answer, session/get, sessions.shell_id). SessionConfigureParams.shellId
# is `string | null`, optional.
# Bug: the generated params model types shellId as `Optional[str] = None`, and the handler
# asks `if params.shell_id is not None`, so an explicit null reads as "not given": the
# session keeps its shell (the answer and session/updated still come, unchanged).
# Recipe: shell/list; session/create {workspaceRoot, shellId: <a listed shell>};
# session/configure {sessionId, shellId: null} -> session.shellId is still the shell
# (expected null); sessions.shell_id unchanged.
@variant("gen-configure-shell-null-ignored")
def configure_shell_null_ignored() -> None:
    from reference_host.host import Host

    original = Host.session_configure

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        if "shellId" in params and params["shellId"] is None:
            params = {key: value for key, value in params.items() if key != "shellId"}
        return await original(self, params)

    patch(Host, "session_configure", session_configure, wraps=True)


# R3.5 / R3.4 (ADR §3 "Approve requires an explicit execution permission mode ... the UI
# selects ask by default"; protocol.md approval/approve: "the permission mode is required
# and never defaulted by the host"): an approve without permissionMode is INVALID_PARAMS
# and starts nothing.
# Bug: the author read "the UI selects ask by default" into the generated params model
# (`permissionMode: PermissionMode = "ask"`), so an omitted mode is filled in before
# validation and the plan is approved under `ask`.
# Recipe: a Plan turn submits a plan; approval/approve {sessionId, approvalId} (no
# permissionMode) -> approved with permissionMode "ask" and an execution queued (expected
# INVALID_PARAMS, approval still pending).
@variant("gen-approve-default-ask")
def approve_default_ask() -> None:
    def rewrite(method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "approval/approve" and "permissionMode" not in params:
            params["permissionMode"] = "ask"
        return params

    _rewrite_params(rewrite)


# P29 (implementing-a-host "Scheduled tasks": "fields a task/update leaves out keep their
# values"); TaskUpdateParams has no defaults.
# Bug: the update model was generated from TaskCreateParams' shape with its defaults
# (`enabled = True`, `permissionMode = "ask"`) and dumped without exclude_unset, so every
# task/update that leaves them out re-enables the task and resets its permission mode.
# Recipe: task/create {..., permissionMode: "auto", enabled: false}; task/update
# {taskId, name: "renamed"} -> task.enabled true, permissionMode "ask" (expected false,
# "auto"); the scheduled_tasks row likewise; a runAt then fires a task that was off.
@variant("gen-task-update-defaults")
def task_update_defaults() -> None:
    from reference_host.tasks import Tasks

    original = Tasks.update

    async def update(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        return await original(self, {"enabled": True, "permissionMode": "ask", **params})

    patch(Tasks, "update", update, wraps=True)


# R3.4 (implementing-a-host "Approval": permissionMode `ask`, `accept-edits` or `auto`,
# "spelt exactly so (no other case, no surrounding blank space)"), R1.1 (mode `agent` or
# `plan`, "spelt exactly so"); INVALID_PARAMS: "unknown permission mode".
# Bug: the generated enums parse case-insensitively and trim (a `_missing_` hook that
# lower-cases), so "Auto", " ASK " or "Plan" are accepted as the enum member.
# Recipe: a pending approval; approval/approve {..., permissionMode: "Auto"} -> approved
# with "auto" (expected INVALID_PARAMS, still pending). Or session/create
# {workspaceRoot: null, mode: "PLAN"} -> a Plan session.
@variant("gen-enum-case-insensitive")
def enum_case_insensitive() -> None:
    members = {
        "mode": ("agent", "plan"),
        "permissionMode": ("ask", "accept-edits", "auto"),
        "decision": ("allow", "deny"),
    }

    def rewrite(method: str, params: dict[str, Any]) -> dict[str, Any]:
        for key, allowed in members.items():
            value = params.get(key)
            if isinstance(value, str) and value.strip().lower() in allowed:
                params[key] = value.strip().lower()
        return params

    _rewrite_params(rewrite)


# Session schema (types.schema.json): `permissionMode` is one of "ask", "accept-edits",
# "auto"; R7.2: session/get, session/list and session/updated report the session as stored.
# Bug: the Session serialiser writes the enum member's name in snake case
# (PermissionMode.ACCEPT_EDITS -> "accept_edits") instead of its value; storage and the
# approval record keep "accept-edits".
# Recipe: session/create {workspaceRoot: null, permissionMode: "accept-edits"} ->
# session.permissionMode "accept_edits" (expected "accept-edits"); also after an approve
# with accept-edits (approve result's session, session/updated).
@variant("gen-enum-name-accept-edits")
def enum_name_accept_edits() -> None:
    from reference_host.host import Host
    from reference_host.storage import SessionRow

    original = Host.session_wire

    def session_wire(self: Host, row: SessionRow) -> dict[str, Any]:
        wire = original(self, row)
        if wire["permissionMode"] == "accept-edits":
            wire["permissionMode"] = "accept_edits"
        return wire

    patch(Host, "session_wire", session_wire, wraps=True)


# Timestamp and every `integer` of the schemas (protocol.md Types: Timestamp "integer";
# Framing: "Timestamps are integers"); INVALID_PARAMS: "mistyped fields"; P27: a tool
# argument of the wrong type is INVALID_TOOL_INPUT.
# Bug: the generator maps JSON Schema `integer` to `number` (TypeScript) / float, so a
# fractional value passes validation wherever an integer is required: it is stored and
# echoed as given.
# Recipe: task/create {..., runAt: 1700000000000.5} -> accepted, task.runAt
# 1700000000000.5 (expected INVALID_PARAMS); conformance/clock/advance {ms: 0.5} ->
# accepted; a Bash call {"command": "true", "timeout_ms": 1.5} runs (expected
# INVALID_TOOL_INPUT).
@variant("gen-integer-as-number")
def integer_as_number() -> None:
    from reference_host import schema_subset

    original = schema_subset._is_type

    def is_type(value: Any, name: str) -> bool:
        if name == "integer":
            return isinstance(value, int | float) and not isinstance(value, bool)
        return original(value, name)

    patch(schema_subset, "_is_type", is_type, wraps=True)


# "Closed objects" (protocol.md Framing): where a params table says "No other fields are
# accepted" an extra field is INVALID_PARAMS. The wire names are camelCase.
# Bug: the pydantic params models have snake_case attributes with camelCase aliases and
# `populate_by_name=True`, so a param sent under its attribute name (`permission_mode`,
# `workspace_root`, `approval_id`) is accepted as the camelCase field.
# Recipe: a pending approval; approval/approve {sessionId, approvalId,
# permission_mode: "auto"} -> approved (expected INVALID_PARAMS: an extra field and a
# missing permissionMode). Or session/create {workspace_root: null} -> a session.
@variant("gen-snake-case-params")
def snake_case_params() -> None:
    def camel(name: str) -> str:
        return re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), name)

    def rewrite(method: str, params: dict[str, Any]) -> dict[str, Any]:
        renamed: dict[str, Any] = {}
        for key, value in params.items():
            wire = camel(key) if "_" in key else key
            if wire != key and wire in params:
                wire = key  # both spellings: the camelCase one wins, the other stays extra
            renamed[wire] = value
        return renamed

    _rewrite_params(rewrite)


# ProviderConfig (types.schema.json): "No other fields are accepted"; "An API key is never
# part of the protocol"; an extra field in params is INVALID_PARAMS (Framing, closed
# objects). Same for InitializeParams.clientInfo.
# Bug: only the top-level params models were generated with `extra="forbid"`; the nested
# ProviderConfig and clientInfo models keep pydantic's default `extra="ignore"`, so an
# unknown member inside them is silently dropped.
# Recipe: session/create {workspaceRoot: null, provider: {baseUrl, model,
# apiKey: "sk-x"}} -> a session (expected INVALID_PARAMS); same for task/create,
# session/configure, and initialize {protocolVersion: 9, clientInfo: {name, extra: 1}}.
@variant("gen-nested-extra-ignored")
def nested_extra_ignored() -> None:
    known = {"provider": ("baseUrl", "model"), "clientInfo": ("name", "version")}

    def rewrite(method: str, params: dict[str, Any]) -> dict[str, Any]:
        for key, fields in known.items():
            value = params.get(key)
            if isinstance(value, dict):
                params[key] = {name: value[name] for name in fields if name in value}
        return params

    _rewrite_params(rewrite)


# ProviderConfig.baseUrl (types.schema.json): "an absolute http or https URL with a host
# ... an optional port (0-65535) and no user information. Anything else gets
# INVALID_PARAMS"; its `pattern` states it, `format: uri` is an annotation.
# Bug: the generator turned `format: uri` into its URL type (pydantic AnyUrl) and dropped
# the `pattern`, so any URI with a host passes: another scheme (ftp, ws) or user
# information is accepted.
# Recipe: session/create {workspaceRoot: null, provider: {baseUrl:
# "ftp://127.0.0.1:8080/v1", model: "m"}} -> a session (expected INVALID_PARAMS); also
# "http://user:pw@127.0.0.1:8080/v1".
@variant("gen-baseurl-uri-format")
def baseurl_uri_format() -> None:
    from reference_host.schema_subset import Problem, _Checker

    original = _Checker._string

    def string(
        schema: Mapping[str, Any], value: str, path: tuple[str | int, ...]
    ) -> Problem | None:
        if schema.get("format") == "uri":
            parts = urlsplit(value)
            if not parts.scheme or not parts.netloc:
                return Problem(path, f"{value!r} is not a URI")
            schema = {k: v for k, v in schema.items() if k != "pattern"}
        return original(schema, value, path)

    patch(_Checker, "_string", staticmethod(string), wraps=True)


# P27 (implementing-a-host "Errors and tool results"): `turn/toolCall`'s `input` is the
# call's arguments as the model sent them: "the parsed object when they are JSON, their
# raw text when they are not" (TurnToolCallParams.input).
# Bug: the OpenAI-generated type of `function.arguments` is `string`, and the
# notification model's `input: str | dict` union takes the first branch that fits, so
# the raw argument text is forwarded unparsed every time.
# Recipe: a turn whose model calls Read {"path": "a.txt"} -> turn/toolCall.input is the
# string "{\"path\": \"a.txt\"}" (expected the object {"path": "a.txt"}).
@variant("gen-toolcall-input-raw")
def toolcall_input_raw() -> None:
    from reference_host import turns
    from reference_host.provider_client import ToolCall

    def parse_arguments(call: ToolCall) -> Any:
        return call.arguments

    patch(turns, "_parse_arguments", parse_arguments)


# TaskRun (types.schema.json): `sessionId` (Id | null) and `error` (ErrorData | null) are
# required; TaskRunResult, TaskRunFinishedParams and ScheduledTask.lastRun carry a TaskRun
# (P28, R6.1: task/runFinished and lastRun report the run).
# Bug: the TaskRun model is dumped with `exclude_none=True` (to keep the optional fields
# out), which also drops the required nulls: a running or completed run has no `error`,
# a refused Plan run has neither `sessionId` nor `error`.
# Recipe: task/create an Agent task; task/run -> run lacks "error" (expected
# "error": null); a Plan task's task/runFinished -> run lacks "sessionId".
@variant("gen-taskrun-exclude-none")
def taskrun_exclude_none() -> None:
    from reference_host import tasks

    original = tasks._run_wire

    def run_wire(run: dict[str, Any] | None) -> dict[str, Any] | None:
        wire = original(run)
        if wire is None:
            return None
        return {key: value for key, value in wire.items() if value is not None}

    patch(tasks, "_run_wire", run_wire, wraps=True)


# SessionCreateParams (protocol.md session/create): `workspaceRoot` is required,
# `string | null`; "null for a session without a project". A missing required field is
# INVALID_PARAMS (error catalog).
# Bug: pydantic v1 semantics: a field typed `Optional[str]` is implicitly optional with
# default None, so a session/create (or task/create) that omits workspaceRoot creates a
# session (task) without a project instead of being refused.
# Recipe: session/create {} -> a session with workspaceRoot null (expected
# INVALID_PARAMS); task/create without workspaceRoot -> a task.
@variant("gen-root-optional-as-nullable")
def root_optional_as_nullable() -> None:
    def rewrite(method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method in ("session/create", "task/create") and "workspaceRoot" not in params:
            params["workspaceRoot"] = None
        return params

    _rewrite_params(rewrite)


# Id, names, shell ids, workspace roots, base URLs carry `maxLength` (types.schema.json:
# Id max length 200; task name 200; shellId 200; workspaceRoot 4096; baseUrl 2048); a
# value that breaks it does not match the method's schema: INVALID_PARAMS.
# Bug: the code generator drops `maxLength` (TypeScript and serde types have no length),
# so over-long strings are accepted and stored.
# Recipe: task/create {name: "x" * 201, ...} -> a task named so (expected INVALID_PARAMS);
# session/create {workspaceRoot: null, provider: {baseUrl, model: "m" * 201}} -> accepted.
@variant("gen-maxlength-dropped")
def maxlength_dropped() -> None:
    from reference_host.schema_subset import Problem, _Checker

    original = _Checker._string

    def string(
        schema: Mapping[str, Any], value: str, path: tuple[str | int, ...]
    ) -> Problem | None:
        return original({k: v for k, v in schema.items() if k != "maxLength"}, value, path)

    patch(_Checker, "_string", staticmethod(string), wraps=True)


# Id (types.schema.json): "An opaque identifier chosen by the host", any string of 1 to
# 200 characters; P34: a request that names a session you do not have gets
# SESSION_NOT_FOUND (likewise TASK_NOT_FOUND, APPROVAL_NOT_FOUND,
# PERMISSION_REQUEST_NOT_FOUND for unknown ids).
# Bug: the generated Id type was given the host's own id format (`<prefix>_<32 hex>`) as
# a validator, so an id of another shape is INVALID_PARAMS instead of "not found".
# Recipe: session/get {sessionId: "s1"} -> INVALID_PARAMS (expected SESSION_NOT_FOUND);
# task/delete {taskId: "nope"} -> INVALID_PARAMS (expected TASK_NOT_FOUND).
@variant("gen-id-format-validated")
def id_format_validated() -> None:
    from reference_host import rpc, validation

    original = validation.params_problem
    shape = re.compile(r"^[a-z]+_[0-9a-f]{32}$")
    id_fields = ("sessionId", "approvalId", "taskId", "requestId")

    def params_problem(method: str, params: Any) -> str | None:
        problem = original(method, params)
        if problem is not None or not isinstance(params, dict):
            return problem
        for field in id_fields:
            value = params.get(field)
            if isinstance(value, str) and not shape.match(value):
                return f"params/{field}: {value!r} is not a valid id"
        return None

    patch(rpc, "params_problem", params_problem, wraps=True)


CASES = [
    BrokenCase(
        "gen-error-details-null",
        "handshake",
        "client_giving_the_version_as_text_is_refused",
        "P5",
        "broke the protocol v9 contract",
    ),
    BrokenCase(
        "gen-configure-shell-null-ignored",
        "shell",
        "session_whose_shell_of_its_own_is_cleared",
        "R7.3",
        "the session still names",
    ),
    BrokenCase(
        "gen-approve-default-ask",
        "approval",
        "approving_without_a_permission_mode_is_refused",
        "R3.5",
        "expected the host to refuse",
    ),
    BrokenCase(
        "gen-task-update-defaults",
        "scheduled_plan",
        "task_taken_off_the_schedule_does_not_run_at_its_earlier_time",
        "P29",
        "a task/update that gave only runAt also changed",
    ),
    BrokenCase(
        "gen-enum-case-insensitive",
        "sessions",
        "new_session_in_a_mode_other_than_agent_or_plan_is_refused and AGENT",
        "R1.1",
        "expected the host to refuse",
    ),
    BrokenCase(
        "gen-enum-name-accept-edits",
        "plan_tools",
        "command_the_model_runs_while_planning_waits_for_the_users_permission and accept",
        "P5",
        "does not fit the published SessionResult",
    ),
    BrokenCase(
        "gen-integer-as-number",
        "protocol_errors",
        "value_out_of_the_published_range_is_refused and fraction",
        "P4",
        "expected the host to refuse",
    ),
    BrokenCase(
        "gen-snake-case-params",
        "protocol_errors",
        "value_out_of_the_published_range_is_refused and snake",
        "P4",
        "expected the host to refuse",
    ),
    BrokenCase(
        "gen-nested-extra-ignored",
        "protocol_errors",
        "value_out_of_the_published_range_is_refused and member_of_its_own",
        "P4",
        "expected the host to refuse",
    ),
    BrokenCase(
        "gen-baseurl-uri-format",
        "protocol_errors",
        "value_out_of_the_published_range_is_refused and password",
        "P4",
        "expected the host to refuse",
    ),
    BrokenCase(
        "gen-toolcall-input-raw",
        "plan_tools",
        "turn_that_entered_plan_mode_and_then_failed_leaves_the_session_in_plan",
        "P27",
        "call's input as",
    ),
    BrokenCase(
        "gen-taskrun-exclude-none",
        "scheduled_plan",
        "never_switches_a_refused_task_to_agent_when_it_comes_due",
        "P5",
        "does not fit the published TaskListResult",
    ),
    BrokenCase(
        "gen-root-optional-as-nullable",
        "protocol_errors",
        "value_out_of_the_published_range_is_refused and without_its_project_field",
        "P4",
        "expected the host to refuse",
    ),
    BrokenCase(
        "gen-maxlength-dropped",
        "protocol_errors",
        "value_out_of_the_published_range_is_refused and absurd_length",
        "P4",
        "expected the host to refuse",
    ),
    BrokenCase(
        "gen-id-format-validated",
        "handshake",
        "refusal_carries_the_catalogs_number_for_its_code and SESSION_NOT_FOUND",
        "P5",
        "expected SESSION_NOT_FOUND",
    ),
]
