"""Broken hosts: a held-out set (conventions carried over from other protocols: JSON-RPC
libraries, LSP, MCP, OpenAI Chat Completions), written from the contract alone."""

from __future__ import annotations

import json
from typing import Any

from hosts.registry import BrokenCase, patch, rewrite_notifications, variant


def _json_object(frame: object) -> object:
    """The JSON value of a request line, or None when it is not one (left to the host)."""
    if not isinstance(frame, bytes) or not frame.strip():
        return None
    try:
        return json.loads(frame.decode("utf-8"))
    except (ValueError, RecursionError):
        return None


# P1 (implementing-a-host.md, Framing): a message with a broken envelope "gets an error
# (INVALID_REQUEST, or INVALID_PARAMS when only params is wrong) ..., even when it has no
# id: such a line is not a notification you may leave unanswered".
# Bug: the general JSON-RPC habit "the server MUST NOT reply to a notification": a line that
# has a method and no id is taken for a notification and dropped silently, also when its
# envelope is broken (params null or an array, an extra member).
# Observed: no answer at all to such a line. Recipe: initialize; send
# {"jsonrpc":"2.0","method":"session/list","params":null} (no id); expect an
# INVALID_REQUEST/INVALID_PARAMS error with id null; this host sends nothing.
@variant("conv-invalid-notification-silent")
def invalid_notification_silent() -> None:
    from reference_host.rpc import Dispatcher

    original = Dispatcher.handle

    async def handle(self: Dispatcher, frame: Any) -> None:
        message = _json_object(frame)
        if (
            isinstance(message, dict)
            and "id" not in message
            and isinstance(message.get("method"), str)
            and Dispatcher._envelope_problem(message) is not None
        ):
            return  # "a notification is never answered, not even with an error"
        await original(self, frame)

    patch(Dispatcher, "handle", handle, wraps=True)


# P1 (Framing): "Batches are not supported"; "a JSON value that is not a request object
# (a batch, ...) gets INVALID_REQUEST".
# Bug: batch support carried over from a general JSON-RPC 2.0 library: a non-empty array
# of request objects is served element by element, each answered on its own line.
# Observed: [{"jsonrpc":"2.0","id":5,"method":"session/list","params":{}}] is answered
# with a session/list result under id 5 instead of one INVALID_REQUEST with id null.
@variant("conv-batch-served")
def batch_served() -> None:
    from reference_host.rpc import Dispatcher

    original = Dispatcher.handle

    async def handle(self: Dispatcher, frame: Any) -> None:
        message = _json_object(frame)
        if isinstance(message, list) and message and all(isinstance(m, dict) for m in message):
            for element in message:
                await original(self, json.dumps(element).encode("utf-8"))
            return
        await original(self, frame)

    patch(Dispatcher, "handle", handle, wraps=True)


# R7.1 / ADR §7 (initialize handshake): "Accept only protocolVersion: 9. Any other value
# gets UNSUPPORTED_PROTOCOL_VERSION, with details.supported ... [9]".
# Bug: MCP-style version negotiation: when the client asks for a version the host does not
# speak, the host answers successfully with the version it does speak (9) and leaves it to
# the client to disconnect.
# Observed: initialize {"protocolVersion": 8} (or 10) succeeds with protocolVersion 9 and
# the connection is open; later requests are served instead of NOT_INITIALIZED.
@variant("conv-version-counteroffer")
def version_counteroffer() -> None:
    from pi_contract import PROTOCOL_VERSION
    from reference_host.host import Host

    original = Host.initialize

    async def initialize(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        if not self.initialized and params.get("protocolVersion") != PROTOCOL_VERSION:
            params = {**params, "protocolVersion": PROTOCOL_VERSION}  # counter-offer ours
        return await original(self, params)

    patch(Host, "initialize", initialize, wraps=True)


# P5 / error catalog (schemas/error-codes.json): "Every error response carries
# error.data.code from schemas/error-codes.json and the numeric error.code the catalog
# lists for it": ARTIFACT_MODIFIED is -32035.
# Bug: an LSP habit: "the content was modified underneath the request" is LSP's
# ContentModified, -32801, so the host answers ARTIFACT_MODIFIED with error.code -32801
# (error.data.code stays ARTIFACT_MODIFIED).
# Recipe: Plan session, SubmitPlan, change the artifact's bytes, approval/approve (or
# artifact/read): error.code is -32801, not -32035.
@variant("conv-artifact-modified-lsp-code")
def artifact_modified_lsp_code() -> None:
    from reference_host import rpc
    from reference_host.errors import HostError

    original = rpc._error

    def error(request_id: Any, failure: HostError) -> dict[str, Any]:
        message = original(request_id, failure)
        if failure.code == "ARTIFACT_MODIFIED":
            message["error"]["code"] = -32801  # LSP ContentModified
        return message

    patch(rpc, "_error", error, wraps=True)


# R5.1 (Sessions, turns: Cancel): "It may answer before the turn has ended; the turn then
# ends with outcome cancelled (also in storage)"; a cancelled execution turn "ends
# cancelled in turn/ended and in turns.state".
# Bug: cancellation the LSP way: a cancelled request ends in an error (RequestCancelled),
# so the host ends a cancelled turn as a failure: outcome "failed" (turns.state failed)
# with error TURN_CANCELLED.
# Recipe: prompt a turn whose model answer is held (or a Bash waiting on a gate);
# session/cancel; turn/ended says outcome "failed" and the turns row state "failed".
@variant("conv-cancel-as-failure")
def cancel_as_failure() -> None:
    from reference_host.errors import HostError
    from reference_host.storage import ApprovalRow
    from reference_host.turns import TurnRunner

    original = TurnRunner._end

    async def end(
        self: TurnRunner,
        session_id: str,
        turn_id: str,
        approval: ApprovalRow | None,
        on_end: Any,
        outcome: str,
        error: HostError | None,
    ) -> None:
        if outcome == "cancelled":
            outcome = "failed"  # a cancelled request is answered with an error
        await original(self, session_id, turn_id, approval, on_end, outcome, error)

    patch(TurnRunner, "_end", end, wraps=True)


# R3.9 / ADR §3: "The approval deadline is an absolute 30-minute deadline from host
# creation"; expiresAt is createdAt + 30 minutes on the host clock, and every timestamp is
# integer milliseconds.
# Bug: the deadline computed as a JWT-style `exp`, in seconds: createdAt + 30 * 60, i.e.
# 1.8 s of host-clock time after creation in a millisecond contract.
# Recipe: SubmitPlan; approval/get: expiresAt - createdAt is 1800, not 1800000; advance
# the clock by 2 s: the approval expires (PLAN_APPROVAL_TIMEOUT) long before 30 minutes.
@variant("conv-ttl-seconds")
def ttl_seconds() -> None:
    from reference_host import approvals

    def deadline_for(created_at_ms: int) -> int:
        return created_at_ms + 30 * 60  # "exp = iat + 1800"

    patch(approvals, "deadline_for", deadline_for)


# P1 (Request ids): "answer every request under exactly the id it carried: a string, or any
# integer".
# Bug: a JSON-RPC layer that normalises ids: a string id made of digits is written back as
# the number (`"id":"42"` is answered `"id":42`), as libraries that key pending requests
# by integer do.
# Recipe: initialize under id "7" (or any request with a digit-string id); the response's
# id is the integer 7.
@variant("conv-numeric-string-id")
def numeric_string_id() -> None:
    from reference_host.rpc import Dispatcher

    original = Dispatcher.__init__

    def init(self: Dispatcher, send: Any) -> None:
        def normalised(message: dict[str, Any]) -> None:
            request_id = message.get("id")
            if isinstance(request_id, str) and request_id.isascii() and request_id.isdigit():
                message = {**message, "id": int(request_id)}
            send(message)

        original(self, normalised)

    patch(Dispatcher, "__init__", init, wraps=True)


# The model provider (implementing-a-host.md): "The calls an answer makes are made whatever
# its finish_reason reads (some providers end an answer with calls in stop)."
# Bug: OpenAI habit: tool calls are run only when finish_reason is "tool_calls"; an answer
# that ends with finish_reason "stop" is taken as the final answer and its calls dropped.
# Recipe: script a streamed answer with one Read call whose last chunk has
# finish_reason "stop"; the host sends no turn/toolCall, the turn ends completed with no
# second provider request.
@variant("conv-finish-stop-drops-calls")
def finish_stop_drops_calls() -> None:
    from reference_host.provider_client import AssistantReply, _Accumulator

    original = _Accumulator.reply

    def reply(self: _Accumulator) -> AssistantReply:
        answer = original(self)
        if answer.finish_reason == "stop" and answer.tool_calls:
            return AssistantReply(answer.text, (), answer.finish_reason)
        return answer

    patch(_Accumulator, "reply", reply, wraps=True)


# P25 (The model provider): "A streamed answer ends with [DONE]. One that breaks off before
# it (the connection closed, or the body ended without [DONE]) ... ends the turn failed
# with PROVIDER_ERROR".
# Bug: a client that treats the end of the HTTP body as the end of the stream, as many SSE
# clients do: a body that ends cleanly without [DONE] is an ordinary, complete answer.
# Recipe: script an answer whose body ends after a text chunk, without `data: [DONE]`; the
# turn ends completed with error null instead of failed with PROVIDER_ERROR.
@variant("conv-eof-ends-stream")
def eof_ends_stream() -> None:
    from reference_host import provider_client

    original = provider_client._read_events

    async def read_events(response: Any, acc: Any) -> bool:
        await original(response, acc)
        return True  # the body ended: so did the stream

    patch(provider_client, "_read_events", read_events, wraps=True)


# The model provider: "A streamed answer holding several tool calls may send their pieces
# interleaved: each piece names its call by index, and a call's arguments are its pieces
# joined in order."
# Bug: argument fragments are appended to the call whose header (id) came last, the way a
# sequential accumulator does; a piece without an id is taken to continue "the current
# call" whatever index it names.
# Recipe: stream two calls whose headers (id, name) come first, then their argument pieces
# interleaved (index 0, index 1, index 0 ...); call 0 gets no arguments (INVALID_TOOL_INPUT)
# and call 1 gets both calls' pieces.
@variant("conv-args-to-last-call")
def args_to_last_call() -> None:
    from reference_host.provider_client import _Accumulator

    original = _Accumulator._feed_delta

    async def feed_delta(self: _Accumulator, delta: dict[str, Any], data: str) -> None:
        tool_calls = delta.get("tool_calls")
        if isinstance(tool_calls, list):
            pieces: list[Any] = []
            for position, item in enumerate(tool_calls):
                if isinstance(item, dict):
                    # "the current call" rides on the accumulator, a dataclass (unhashable,
                    # so no weak map) without such a field: set and read by name (B010, B009)
                    if item.get("id"):
                        setattr(self, "current_call", item.get("index", position))  # noqa: B010
                    elif getattr(self, "current_call", None) is not None:
                        item = {**item, "index": getattr(self, "current_call")}  # noqa: B009
                pieces.append(item)
            delta = {**delta, "tool_calls": pieces}
        await original(self, delta, data)

    patch(_Accumulator, "_feed_delta", feed_delta, wraps=True)


# P9 (Errors and tool results): "A refusal or failure carries its canonical code in
# error.code, and its status is the catalog's toolResultStatus for that code".
# Bug: MCP's tool-result shape: a tool that ran and failed is a normal result flagged as an
# error (isError), not an error object; so turn/toolResult of a failing tool
# (FILE_NOT_FOUND, EDIT_NO_MATCH, TOOL_FAILED, COMMAND_TIMED_OUT) says status "error" with
# the message in output and `error: null`. Refusals by policy keep their error.
# Recipe: Read of a missing file; turn/toolResult is status error, error null (expected
# error.code FILE_NOT_FOUND).
@variant("conv-mcp-iserror-result")
def mcp_iserror_result() -> None:
    ran_and_failed = {"FILE_NOT_FOUND", "EDIT_NO_MATCH", "TOOL_FAILED", "COMMAND_TIMED_OUT"}

    def rewrite(method: str, params: dict[str, Any]) -> dict[str, Any]:
        error = params.get("error")
        if (
            method == "turn/toolResult"
            and isinstance(error, dict)
            and error.get("code") in ran_and_failed
        ):
            return {**params, "error": None}
        return params

    rewrite_notifications(rewrite)


# P4 / P6 (Params; the initialize handshake): InitializeParams is closed: "a member the
# schema does not define, also inside provider or clientInfo" gets INVALID_PARAMS.
# Bug: LSP-style capability negotiation tolerated: the host lets a client's initialize carry
# the LSP members (capabilities, processId, rootUri, trace, ...) and ignores them, instead
# of refusing the params.
# Recipe: initialize {"protocolVersion":9,"capabilities":{}}: succeeds (expected
# INVALID_PARAMS, the connection still unopened).
@variant("conv-initialize-lsp-members")
def initialize_lsp_members() -> None:
    from reference_host import rpc
    from reference_host.validation import params_problem as original

    lsp_members = {
        "capabilities",
        "processId",
        "rootUri",
        "rootPath",
        "workspaceFolders",
        "trace",
        "locale",
        "initializationOptions",
    }

    def params_problem(method: str, params: dict[str, Any]) -> str | None:
        if method == "initialize":
            params = {k: v for k, v in params.items() if k not in lsp_members}
        return original(method, params)

    patch(rpc, "params_problem", params_problem, wraps=True)


# P1 / P5 (Framing): "Every error response carries error.data.code from
# schemas/error-codes.json"; the ErrorResponse envelope requires error.data.
# Bug: the framing layer comes from a generic JSON-RPC library that knows nothing of the
# catalog: a PARSE_ERROR or INVALID_REQUEST answer is {"code":-32700,"message":...} with no
# `data` (optional in JSON-RPC 2.0); method-level errors still carry it.
# Recipe: send the line `{not json`; the error has no error.data.code "PARSE_ERROR".
@variant("conv-framing-error-no-data")
def framing_error_no_data() -> None:
    from reference_host import rpc
    from reference_host.errors import HostError

    original = rpc._error

    def error(request_id: Any, failure: HostError) -> dict[str, Any]:
        message = original(request_id, failure)
        if failure.code in {"PARSE_ERROR", "INVALID_REQUEST"}:
            del message["error"]["data"]
        return message

    patch(rpc, "_error", error, wraps=True)


CASES = [
    BrokenCase(
        "conv-invalid-notification-silent",
        "protocol_errors",
        "malformed_line_without_an_identifier_is_answered_all_the_same and member",
        "P1",
        "expected 1 unsolicited responses",
        slow=True,
    ),
    BrokenCase(
        "conv-batch-served",
        "protocol_errors",
        "json_value_that_is_not_a_request_is_refused and list",
        "P1",
        "expected an error response",
    ),
    BrokenCase(
        "conv-version-counteroffer",
        "handshake",
        "speaking_the_previous_version_is_refused",
        "R7.1",
        "expected the host to refuse",
    ),
    BrokenCase(
        "conv-artifact-modified-lsp-code",
        "artifact_integrity",
        "plan_file_changed_on_disk_after_submission_is_not_approved",
        "P5",
        "broke the protocol v9 contract",
    ),
    BrokenCase(
        "conv-cancel-as-failure",
        "turn_boundaries",
        "cancelling_a_turn_ends_it_and_frees_the_session",
        "R5.1",
        "the turn ended failed, not cancelled",
    ),
    BrokenCase(
        "conv-ttl-seconds",
        "approval",
        "pending_approval_shows_its_title_question_artifact_expiry_and_status",
        "R3.1",
        "is not the absolute time 30 minutes after",
    ),
    BrokenCase(
        "conv-numeric-string-id",
        "protocol_errors",
        "answers_under_the_identifier_the_client_chose and digits",
        "P1",
        "no answer carries the identifier '42'",
    ),
    BrokenCase(
        "conv-finish-stop-drops-calls",
        "approval",
        "approving_with_auto_switches_the_session_to_agent_with_that_mode",
        "R4.4",
        "made 0 approvals",
    ),
    BrokenCase(
        "conv-eof-ends-stream",
        "sessions",
        "model_answer_that_breaks_off_ends_the_turn_as_failed and first",
        "P25",
        "expected failed with PROVIDER_ERROR",
    ),
    BrokenCase(
        "conv-args-to-last-call",
        "submit_plan",
        "two_plans_in_one_message_are_both_refused",
        "P27",
        "announced the SubmitPlan call's input",
    ),
    BrokenCase(
        "conv-mcp-iserror-result",
        "plan_tools",
        "ordinary_tool_failure_is_reported_with_its_code and read",
        "P9",
        "stopped with None, expected FILE_NOT_FOUND",
    ),
    BrokenCase(
        "conv-framing-error-no-data",
        "protocol_errors",
        "line_that_is_not_json",
        "P5",
        "expected PARSE_ERROR",
    ),
    BrokenCase(
        "conv-initialize-lsp-members",
        "handshake",
        "opening_the_connection_with_settings_the_protocol_does_not_have",
        "P4",
        "expected the host to refuse",
    ),
]
