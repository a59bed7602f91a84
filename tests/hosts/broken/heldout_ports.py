"""Broken hosts: a held-out set (mistakes of a host ported from another language:
JavaScript/TypeScript, Go, Rust, Java, C#), written from the contract alone.

Each variant re-expresses, by patching the reference host, one mistake that such a port
typically makes: truthiness, numbers, string lengths and cases, maps, ignored errors,
un-awaited promises, times, and JSON null against an absent member.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from hosts.registry import BrokenCase, patch, rewrite_provider_messages, variant

# -- helpers ------------------------------------------------------------------------------


def _js_string(value: Any) -> str:
    """JavaScript's ``String(value)`` for the scalars a JSON parser gives."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    return str(value)


def _js_number(value: Any) -> Any:
    """ajv's coercion of a scalar to a number (``x == +x`` for strings), or ``value``
    unchanged when ajv would not coerce it."""
    if isinstance(value, bool):
        return int(value)
    if value is None:
        return 0
    if isinstance(value, str) and value.strip():
        try:
            number = float(value)
        except ValueError:
            return value
        if number != number or number in (float("inf"), float("-inf")):
            return value
        return int(number) if number.is_integer() else number
    return value


def _ajv_coerced(parameters: dict[str, Any], args: Any) -> Any:
    """``args`` as ajv with ``coerceTypes: true`` leaves them: each scalar member whose
    declared type it is not is converted to that type when ajv knows how."""
    if not isinstance(args, dict):
        return args
    properties = parameters.get("properties", {})
    coerced = dict(args)
    for name, value in args.items():
        wanted = properties.get(name, {}).get("type")
        if isinstance(value, dict | list):
            continue  # ajv coerces scalars only
        if wanted == "string" and not isinstance(value, str):
            coerced[name] = _js_string(value)
        elif wanted in ("integer", "number") and (isinstance(value, str | bool) or value is None):
            number = _js_number(value)
            if wanted == "number" or isinstance(number, int):
                coerced[name] = number
        elif wanted == "boolean" and not isinstance(value, bool):
            if value in ("true", 1):
                coerced[name] = True
            elif value in ("false", 0) or value is None:
                coerced[name] = False
    return coerced


# R1.8 / P27 (implementing-a-host.md, Planning: "SubmitPlan takes exactly title, markdown
# and question, all strings ... (missing or extra fields, a number, `null`, ...) get
# INVALID_TOOL_INPUT and create nothing"; Tool inputs: "a wrong type ... gets
# INVALID_TOOL_INPUT (status error), does nothing").
# Bug: a TypeScript port validates tool arguments with ajv created with
# `coerceTypes: true` (copied from its HTTP layer), so a number or `null` where a string
# belongs is converted ("42", "") and a numeric string where an integer belongs becomes
# that number; the converted call runs.
# Observed: SubmitPlan {"title": 42, "markdown": "# x", "question": "ok?"} is `ok`, and an
# approval titled "42" is pending; Bash {"command": "true", "timeout_ms": "5000"} runs.
# Trigger: a Plan turn whose model calls SubmitPlan with a numeric or null title.
@variant("lang-ajv-coerce-types")
def ajv_coerce_types() -> None:
    from reference_host import turns
    from reference_host.provider_client import ToolSpec

    original: Callable[[ToolSpec, Any], dict[str, Any]] = vars(turns)["validate_args"]

    def validate_args(spec: ToolSpec, args: Any) -> dict[str, Any]:
        return original(spec, _ajv_coerced(spec.parameters, args))

    patch(turns, "validate_args", validate_args, wraps=True)


# R1.3 / R7.7 (implementing-a-host.md, Migrating from v8: "`session/transcript` reports
# each row, in `id` order"; Planning, new_context: "`session/transcript` still hold the
# whole conversation, every row in `id` order"; `seq` "grows from each entry to the next").
# Bug: a JavaScript port collects the rows in a Map keyed by row id and lists them as
# `[...rows.keys()].sort().map(k => rows.get(k))`: Array.prototype.sort without a
# comparator compares numbers as strings, so row 10 comes before row 9.
# Observed: once a session's rows straddle a power of ten (ids 9 and 10, or a migrated v8
# transcript with ids 99 and 100), session/transcript lists them out of order and `seq`
# goes down. (The provider history reads the table in id order and stays right.)
# Trigger: a session with ten or more transcript rows (five prompts, each answered with
# text), then session/transcript.
@variant("lang-js-sort-transcript")
def js_sort_transcript() -> None:
    from reference_host.host import Host

    async def session_transcript(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        by_id = {
            seq: (seq, turn, role, content, at)
            for seq, turn, role, content, at in (await self.storage.transcript(row.id))
        }
        entries = []
        for key in sorted(by_id, key=str):  # [...keys].sort(): string order
            seq, turn, role, content, at = by_id[key]
            entries.append(
                {"seq": seq, "turnId": turn, "role": role, "content": content, "createdAt": at}
            )
        return {"entries": entries}

    patch(Host, "session_transcript", session_transcript)


# R7.3 (implementing-a-host.md, Commands and shells: "`shellId: null` clears the session's
# own choice (R7.3): from then on the session reads `shellId: null` (in the answer, in
# `session/get` and in `sessions.shell_id`) and its commands run in the default shell").
# Bug: a Go port decodes session/configure into a struct with `ShellID *string`;
# encoding/json leaves the pointer nil both when the member is absent and when it is
# `null`, so `"shellId": null` reads as "not given" and the session keeps its shell.
# Observed: session/configure {"shellId": null} answers (and stores) the old shellId;
# Bash keeps running in the session's chosen shell, not the default.
# Trigger: session/create with shellId "bash" (default sh), session/configure
# {"sessionId": s, "shellId": null}, then session/get.
@variant("lang-go-nil-shell-null")
def go_nil_shell_null() -> None:
    from reference_host.host import Host

    original = Host.session_configure

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("shellId") is None:  # nil pointer: absent and null alike
            params = {key: value for key, value in params.items() if key != "shellId"}
        return await original(self, params)

    patch(Host, "session_configure", session_configure, wraps=True)


# P29 (implementing-a-host.md, Scheduled tasks: "`task/create` and `task/update` answer
# the task with every field as the user gave it ... A task with `enabled: false` does not
# run when its `runAt` comes due"; "`runAt: null` in a `task/update` takes the task off
# the schedule (answered, listed and stored as `null`)").
# Bug: a JavaScript port copies the update with
# `for (const k of FIELDS) if (params[k]) task[k] = params[k]`: a falsy value is taken for
# "not given", so `enabled: false` and `runAt: null` (and `runAt: 0`) are dropped.
# Observed: task/update {"enabled": false} answers enabled: true and the task still runs
# at its runAt; task/update {"runAt": null} answers the old runAt and the task still runs.
# Trigger: task/create (Agent, runAt = now + 60 s), task/update {"taskId", "enabled":
# false}, conformance/clock/advance 120000: a task/runFinished arrives.
@variant("lang-js-truthy-task-update")
def js_truthy_task_update() -> None:
    from reference_host.tasks import Tasks

    original = Tasks.update

    async def update(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        kept = {key: value for key, value in params.items() if key == "taskId" or value}
        return await original(self, kept)

    patch(Tasks, "update", update, wraps=True)


# P10 (implementing-a-host.md, Planning, The tools work, new_context: "An empty `summary`
# is a reset like any other: the model is shown none of what came before").
# Bug: a JavaScript port guards the reset with `if (args.summary) history.reset(...)`,
# so `new_context` with `summary: ""` answers `ok` but resets nothing.
# Observed: after new_context {"summary": ""}, the next provider request of the turn (and
# the first of the next turn) still carries the earlier turns' messages.
# Trigger: prompt "first" (model answers text), prompt "second" whose model calls
# new_context {"summary": ""}, then answers; the request after the call still holds
# "first".
@variant("lang-js-empty-summary")
def js_empty_summary() -> None:
    from reference_host.storage import SessionRow
    from reference_host.turns import CallOutcome, TurnRunner

    original = TurnRunner._dispatch

    async def dispatch(
        self: TurnRunner, session: SessionRow, turn_id: str, name: str, args: dict[str, Any]
    ) -> CallOutcome:
        if name == "new_context" and not args.get("summary"):
            return CallOutcome("ok", "A new context starts from the summary.")
        return await original(self, session, turn_id, name, args)

    patch(TurnRunner, "_dispatch", dispatch, wraps=True)


# R3.9 (ADR §3 "an absolute 30-minute deadline from host creation"; implementing-a-host.md,
# Approval: "The deadline is `createdAt + 30 minutes` on the host clock, where `createdAt`
# is the clock when the approval is created").
# Bug: a Go port computes the deadline as
# `time.Unix(createdMs/1000, 0).Add(30 * time.Minute).UnixMilli()`: time.Unix with a
# zero nanosecond argument drops the milliseconds, so the deadline is truncated to the
# whole second while createdAt keeps them.
# Observed: expiresAt - createdAt = 1800000 - (createdAt mod 1000); the approval expires
# up to 999 ms early, so an approve 1 ms before createdAt + 30 min gets
# PLAN_APPROVAL_TIMEOUT.
# Trigger: submit a plan while the host clock is not on a whole second (its start value,
# or clock/set to 1_700_000_000_123), then approval/get.
@variant("lang-go-unix-seconds-deadline")
def go_unix_seconds_deadline() -> None:
    from reference_host import approvals
    from reference_host.state import APPROVAL_TTL_MS

    def deadline_for(created_at_ms: int) -> int:
        return (created_at_ms // 1000) * 1000 + APPROVAL_TTL_MS

    patch(approvals, "deadline_for", deadline_for)


_ENUMS: dict[str, tuple[str, ...]] = {
    "mode": ("agent", "plan"),
    "permissionMode": ("ask", "accept-edits", "auto"),
    "decision": ("allow", "deny"),
}


# R3.4 / R1.1 / P4 (implementing-a-host.md, Approval: "Approve needs `permissionMode`
# `ask`, `accept-edits` or `auto` (R3.4), spelt exactly so (no other case, no surrounding
# blank space)"; Sessions: "A session is `agent` or `plan`, spelt exactly so (R1.1)").
# Bug: a C# port reads the enum members with a JsonConverter that calls
# `Enum.TryParse(value, ignoreCase: true, out ...)`, which also ignores surrounding
# white space: "Auto", " ask ", "PLAN" and "Allow" are taken as the canonical values.
# Observed: approval/approve {"permissionMode": "AUTO"} approves (the session reads
# permissionMode "auto") instead of INVALID_PARAMS; session/create {"mode": "Plan"}
# creates a Plan session.
# Trigger: a pending approval, approval/approve with permissionMode "Auto" or " ask".
@variant("lang-csharp-enum-ignorecase")
def csharp_enum_ignorecase() -> None:
    from reference_host.rpc import Dispatcher

    original = Dispatcher._call

    def parsed(params: Any) -> Any:
        if not isinstance(params, dict):
            return params
        changed = dict(params)
        for name, values in _ENUMS.items():
            value = params.get(name)
            if isinstance(value, str) and value.strip().lower() in values:
                changed[name] = value.strip().lower()
        return changed

    async def call(self: Dispatcher, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return await original(self, method, parsed(params))

    patch(Dispatcher, "_call", call, wraps=True)


# P4 (implementing-a-host.md, Framing, Params: "string lengths, counted in characters, not
# bytes"; "an escaped surrogate pair, `\ud83d\ude00`, is one character, as JSON defines
# it, and is accepted").
# Bug: a TypeScript port checks minLength/maxLength with `value.length`, which counts
# UTF-16 code units: a character outside the Basic Multilingual Plane (an emoji) counts
# twice.
# Observed: task/create with a name of 150 emoji (150 characters, within maxLength 200)
# gets INVALID_PARAMS; so do a shellId, model or clientInfo.name of 101..200 such
# characters.
# Trigger: task/create {"name": "😀" * 150, ...}.
@variant("lang-js-utf16-length")
def js_utf16_length() -> None:
    from collections.abc import Mapping

    from reference_host import schema_subset
    from reference_host.schema_subset import Problem, _Checker

    def string(schema: Mapping[str, Any], value: str, path: tuple[str | int, ...]) -> Any:
        units = len(value.encode("utf-16-le", "surrogatepass")) // 2  # JS .length
        shown = schema_subset._shown(value)
        if "minLength" in schema and units < schema["minLength"]:
            return Problem(path, f"{shown} is shorter than {schema['minLength']}")
        if "maxLength" in schema and units > schema["maxLength"]:
            return Problem(path, f"{shown} is longer than {schema['maxLength']}")
        if "pattern" in schema and schema_subset._pattern(schema["pattern"]).search(value) is None:
            return Problem(path, f"{shown} does not match {schema['pattern']!r}")
        return None

    patch(_Checker, "_string", staticmethod(string))


# P34 (implementing-a-host.md, Errors and tool results: "A request that names a session you
# do not have gets `SESSION_NOT_FOUND` and changes nothing, a read (`session/get`,
# `approval/list`, `session/transcript`) as much as a change").
# Bug: a Go port serves approval/list from `approvalsBySession[sessionID]`; a missing key
# gives the zero value, a nil slice, so an unknown session reads as one without approvals.
# Observed: approval/list {"sessionId": "ses_unknown"} answers {"approvals": []} instead
# of SESSION_NOT_FOUND.
# Trigger: approval/list naming a session id that was never created.
@variant("lang-go-nil-slice-approvals")
def go_nil_slice_approvals() -> None:
    from reference_host.approvals import approval_wire
    from reference_host.host import Host

    async def approval_list(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        rows = await self.storage.list_approvals(params["sessionId"])
        return {"approvals": [approval_wire(row) for row in rows]}

    patch(Host, "approval_list", approval_list)


# P13 (implementing-a-host.md, Plan artifacts, Integrity: "a missing file or one that is
# not a regular file is `ARTIFACT_UNREADABLE`. A symbolic link in the artifact's place
# counts as not a regular file").
# Bug: a Go port reads the artifact back with `data, _ := os.ReadFile(path)`: the error is
# discarded, so a missing or unreadable artifact reads as zero bytes, which then fail the
# size check.
# Observed: after the artifact is deleted (or replaced by a folder or a symlink),
# artifact/read and approval/approve answer ARTIFACT_MODIFIED instead of
# ARTIFACT_UNREADABLE; for a plan whose markdown is "" a deleted artifact even verifies,
# and artifact/read returns it and the approve starts the execution.
# Trigger: SubmitPlan, delete <root>/.pi/plan/<name>.md, artifact/read.
@variant("lang-go-readfile-error-ignored")
def go_readfile_error_ignored() -> None:
    from reference_host import artifacts
    from reference_host.errors import HostError

    original = artifacts.read_artifact

    def read_artifact(root: str, relative_path: str, limit: int | None = None) -> bytes:
        try:
            return original(root, relative_path, limit)
        except HostError:
            return b""  # data, _ := os.ReadFile(...)

    patch(artifacts, "read_artifact", read_artifact, wraps=True)


# P25 (implementing-a-host.md, The model provider: "one with a `data` piece that is not
# JSON or not a JSON object (also when `[DONE]` follows), ends the turn `failed` with
# `PROVIDER_ERROR`, as an HTTP error does").
# Bug: a JavaScript port parses each event with
# `try { chunk = JSON.parse(data) } catch { continue }` and reads `chunk?.choices`, so an
# unparseable or non-object piece is skipped as if it were a keep-alive.
# Observed: a stream `data: {"choices":[{"delta":{"content":"hi"}}]}`, `data: {not json`,
# `data: [DONE]` ends the turn `completed` with the text "hi" instead of `failed` with
# PROVIDER_ERROR.
# Trigger: session/prompt whose scripted provider answer holds a `data: not-json` piece
# before `[DONE]`.
@variant("lang-js-sse-skip-bad-chunk")
def js_sse_skip_bad_chunk() -> None:
    from reference_host.provider_client import _Accumulator

    original = _Accumulator.feed

    async def feed(self: _Accumulator, data: str) -> None:
        try:
            chunk = json.loads(data)
        except ValueError:
            return
        if not isinstance(chunk, dict):
            return  # chunk?.choices is undefined: nothing to do
        await original(self, data)

    patch(_Accumulator, "feed", feed, wraps=True)


# Ordering (implementing-a-host.md, Ordering: "A response comes after the notifications
# of every change it already reports: `session/configure`'s `session/updated` comes
# before its answer, which reports the same session"; R7.2).
# Bug: a JavaScript port announces the change with an async helper it does not await
# (`this.publishSession(id)` instead of `await this.publishSession(id)`): the helper's
# first await lets the handler return, so the answer is written first and the
# session/updated follows it.
# Observed: after session/configure the client reads the result line and only then the
# session/updated line.
# Trigger: session/configure {"sessionId": s, "permissionMode": "auto"}; compare the
# positions of its response and its session/updated on stdout.
@variant("lang-js-unawaited-publish")
def js_unawaited_publish() -> None:
    from dataclasses import replace

    from reference_host import host as host_module
    from reference_host.host import Host
    from reference_host.state import ensure_idle_for

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        ensure_idle_for(self.activity_of(row.id), "configuration change")
        changes: dict[str, Any] = {}
        if "mode" in params:
            changes["mode"] = params["mode"]
        if "permissionMode" in params:
            changes["permission_mode"] = params["permissionMode"]
        if "provider" in params:
            changes["provider_base_url"] = params["provider"]["baseUrl"]
            changes["model"] = params["provider"]["model"]
        if "shellId" in params:
            if params["shellId"] is not None:
                host_module._require_shell(params["shellId"])
            changes["shell_id"] = params["shellId"]
        updated = replace(row, **changes, updated_at=self.clock.now_ms())
        await self.storage.update_session(updated)
        wire = self.session_wire(updated)
        # not awaited: runs once the handler has returned and its answer was sent
        asyncio.get_running_loop().call_soon(self.notify, "session/updated", {"session": wire})
        return {"session": wire}

    patch(Host, "session_configure", session_configure)


_MAX_SAFE_INTEGER = 2**53 - 1


# P1 (implementing-a-host.md, Framing, Request ids: "answer every request under exactly
# the id it carried: a string, or any integer ... The fuzzer (`pi-conformance fuzz`) also
# sends ids of 20 to 50,000 digits: answer such a line under exactly that id, or, if you
# cannot hold it, with `PARSE_ERROR` or `INVALID_REQUEST` and `"id": null`").
# Bug: a JavaScript port uses JSON.parse, so every number is a double: an integer id past
# 2^53 - 1 is rounded to the nearest double and answered under that rounded id (one too
# large for a double, Infinity, is refused, which is allowed).
# Observed: a request with "id": 12345678901234567891 is answered with
# "id": 12345678901234567168; "id": 9007199254740993 with 9007199254740992.
# Trigger: session/list with id 9007199254740993 (or any 17- to 308-digit integer).
@variant("lang-js-double-request-ids")
def js_double_request_ids() -> None:
    from reference_host import rpc

    original: Callable[[str], Any] = vars(rpc)["loads"]

    def loads(text: str) -> Any:
        message = original(text)
        if isinstance(message, dict):
            request_id = message.get("id")
            if (
                isinstance(request_id, int)
                and not isinstance(request_id, bool)
                and abs(request_id) > _MAX_SAFE_INTEGER
            ):
                try:
                    message["id"] = int(float(request_id))
                except OverflowError:
                    message["id"] = float("inf")  # Infinity: not a valid id, refused
        return message

    patch(rpc, "loads", loads, wraps=True)


# R1.3 (implementing-a-host.md, The model provider: "A call id is unique only within its
# message: a model may give a call in a later message the id of an earlier one (some
# providers number each message's calls from one), and each call still reaches later
# requests with its own result (R1.3)"; P10: the tool message answering a call carries
# that call's own result).
# Bug: a TypeScript port keeps tool results in a `Map<toolCallId, string>` for the whole
# conversation and renders each tool message as `results.get(msg.tool_call_id)`; a later
# call with a reused id overwrites the earlier call's entry.
# Observed: when the model's second message calls Read(b.txt) with id "call_1", which its
# first message used for Read(a.txt), the next provider request answers both calls with
# b.txt's content.
# Trigger: one prompt; model message 1: Read a.txt (id call_1); message 2: Read b.txt
# (id call_1); in request 3 the first tool message must hold a.txt's text.
@variant("lang-js-tool-results-map")
def js_tool_results_map() -> None:
    def rewrite(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        results: dict[Any, Any] = {}
        for message in messages:
            if message.get("role") == "tool":
                results[message.get("tool_call_id")] = message.get("content")
        return [
            {**message, "content": results[message.get("tool_call_id")]}
            if message.get("role") == "tool"
            else message
            for message in messages
        ]

    rewrite_provider_messages(rewrite)


CASES = [
    BrokenCase(
        "lang-ajv-coerce-types",
        "submit_plan",
        "malformed_submission_is_refused_and_creates_nothing and null",
        "R1.8",
        "the SubmitPlan call ran, expected INVALID_TOOL_INPUT",
    ),
    BrokenCase(
        "lang-js-sort-transcript",
        "migration",
        "v8_database_is_upgraded_and_its_data_survives",
        "R7.7",
        "does not increase from entry to entry",
    ),
    BrokenCase(
        "lang-go-nil-shell-null",
        "shell",
        "whose_shell_of_its_own_is_cleared_runs_commands",
        "R7.3",
        "the session still names",
    ),
    BrokenCase(
        "lang-js-truthy-task-update",
        "scheduled_plan",
        "task_does_not_run_when_its_time_comes and switched",
        "P29",
        "for the switched-off task",
    ),
    BrokenCase(
        "lang-js-empty-summary",
        "plan_tools",
        "new_context_with_an_empty_summary_still_replaces",
        "P10",
        "after the new context the model was still given",
    ),
    BrokenCase(
        "lang-go-unix-seconds-deadline",
        "submit_plan",
        "the_model_submits_a_plan",
        "R3.9",
        "not 30 minutes later",
    ),
    BrokenCase(
        "lang-csharp-enum-ignorecase",
        "approval",
        "approving_with_an_unknown_permission_mode_is_refused and capital",
        "R3.4",
        "expected the host to refuse",
    ),
    BrokenCase(
        "lang-js-utf16-length",
        "protocol_errors",
        "value_at_the_edge_of_the_published_range_is_taken and BMP",
        "P4",
        "the host refused a request the schema allows",
    ),
    BrokenCase(
        "lang-go-nil-slice-approvals",
        "sessions",
        "request_for_a_session_the_host_does_not_have_is_refused and plans",
        "P34",
        "expected the host to refuse",
    ),
    BrokenCase(
        "lang-go-readfile-error-ignored",
        "artifact_integrity",
        "replaced_by_a_folder_on_disk_after_submission",
        "P13",
        "not ARTIFACT_UNREADABLE",
    ),
    BrokenCase(
        "lang-js-sse-skip-bad-chunk",
        "sessions",
        "model_answer_that_breaks_off_ends_the_turn_as_failed and JSON",
        "P25",
        "expected failed with PROVIDER_ERROR",
    ),
    BrokenCase(
        "lang-js-unawaited-publish",
        "sessions",
        "idle_session_takes_a_new_shell",
        "R7.2",
        "was answered before the session/updated",
    ),
    BrokenCase(
        "lang-js-double-request-ids",
        "protocol_errors",
        "integer_identifier_beyond_what_every_client_can_hold",
        "P1",
        "answering under a rounded one",
    ),
    BrokenCase(
        "lang-js-tool-results-map",
        "sessions",
        "each_read_keeps_its_own_result_when_the_model_names",
        "R1.3",
        "the first file holds apples",
    ),
]
