"""Allowed variations (error choices), written from the contract alone.

All fifteen pass the suite. The cases below run the seven whose choice a scenario meets;
the others take an order of checks no scenario reaches (a request that breaks two rules
the contract does not order), and implementing-a-host.md now lists those orders as the
host's.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from hosts.registry import AllowedCase, patch, rewrite_notifications, variant
from reference_host import host as host_module
from reference_host import rpc, server, turns
from reference_host.approvals import Approvals
from reference_host.errors import HostError
from reference_host.framing import OversizedFrame
from reference_host.host import Host
from reference_host.jsontext import JsonTextError, loads
from reference_host.permissions import needs_permission
from reference_host.rpc import Dispatcher
from reference_host.state import Activity
from reference_host.tools.base import validate_args
from reference_host.turns import CallOutcome, TurnRunner

log = logging.getLogger("reference_host.fair_error_choices")


def _parsed(frame: Any) -> Any:
    """The frame's JSON value, or None when it is not a readable JSON object."""
    if isinstance(frame, OversizedFrame):
        return None
    try:
        message = loads(frame.decode("utf-8"))
    except (UnicodeDecodeError, JsonTextError, RecursionError):
        return None
    return message if isinstance(message, dict) else None


@variant("busy-before-approval-pending")
def _busy_before_approval_pending() -> None:
    # Two faults at once, order not fixed: "While a turn ... is active ... a second prompt
    # ... is refused with SESSION_BUSY" and "While a Plan approval is pending ... a prompt,
    # a configuration change ... gets APPROVAL_PENDING (R5.7)". Neither sentence says which
    # wins while both hold (the Plan turn that submitted is still ending). This host
    # reports SESSION_BUSY first.
    def busy_first(activity: Activity, what: str) -> None:
        if activity.active_turn_id is not None or activity.active_execution_id is not None:
            raise HostError(
                "SESSION_BUSY",
                f"{what} refused: the session is busy",
                {"turnId": activity.active_turn_id, "executionId": activity.active_execution_id},
            )
        if activity.pending_approval_id is not None:
            raise HostError(
                "APPROVAL_PENDING",
                f"{what} refused: a plan approval is pending",
                {"approvalId": activity.pending_approval_id},
            )

    patch(host_module, "ensure_idle_for", busy_first)


@variant("approval-owner-decides")
def _approval_owner_decides() -> None:
    # P34: a request that names an approval may answer APPROVAL_NOT_FOUND instead of
    # SESSION_NOT_FOUND when the session is unknown; the catalog defines APPROVAL_NOT_FOUND
    # as "No approval has that id in that session", true as well then. This host keys
    # approvals by id and checks only their owner: an approval that is not the named
    # session's, an unknown session's included, is APPROVAL_NOT_FOUND, and the session is
    # never looked up on its own.
    async def require(self: Approvals, session_id: str, approval_id: str) -> Any:
        row = await self.host.storage.get_approval(approval_id)
        if row is None or row.session_id != session_id:
            raise HostError(
                "APPROVAL_NOT_FOUND", f"session {session_id!r} has no approval {approval_id!r}"
            )
        return row

    patch(Approvals, "require", require)


@variant("approve-verifies-artifact-first")
def _approve_verifies_artifact_first() -> None:
    # methods.json, approval/approve: "First the host re-reads the artifact and checks its
    # size and SHA-256 against the record (ARTIFACT_MODIFIED, ARTIFACT_UNREADABLE ...)";
    # P13: approve checks the bytes "on every call". The contract does not order this check
    # against APPROVAL_NOT_PENDING or EXECUTION_ACTIVE. This host checks a recorded
    # artifact right after the deadline (P14 keeps PLAN_APPROVAL_TIMEOUT first) and
    # before the status and the execution; a changed plan is ARTIFACT_MODIFIED also for an
    # approval that is no longer pending. Nothing changes either way.
    approve = Approvals.approve

    async def artifact_first(
        self: Approvals, session_id: str, approval_id: str, mode: Any
    ) -> dict[str, Any]:
        row = await self.require(session_id, approval_id)
        await self.host.turns.settle(session_id, row.turn_id)
        row = await self.require(session_id, approval_id)
        past_deadline = self.host.clock.now_ms() >= row.expires_at
        if row.artifact_path is not None and row.status != "expired" and not past_deadline:
            session = await self.host.require_session(session_id)
            await self.verified_content(session, row)
        return await approve(self, session_id, approval_id, mode)

    patch(Approvals, "approve", artifact_first)


_STANDARD = {
    -32700: "Parse error",
    -32600: "Invalid Request",
    -32601: "Method not found",
    -32602: "Invalid params",
    -32603: "Internal error",
}


@variant("jsonrpc-standard-messages")
def _jsonrpc_standard_messages() -> None:
    # "Clients should branch on error.data.code, never on error.message" (protocol.md), and
    # its own example answers with "message":"invalid params" beside a detailed
    # data.message; "error and log message texts" are the host's. This host puts the
    # JSON-RPC 2.0 specification's short phrase in error.message ("Server error: <code>"
    # for the host's own codes) and keeps the detail in error.data.message.
    def standard(request_id: Any, error: HostError) -> dict[str, Any]:
        code = error.jsonrpc_code
        text = _STANDARD.get(code) or f"Server error: {error.code.lower().replace('_', ' ')}"
        return {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {"code": code, "message": text, "data": error.to_data()},
        }

    patch(rpc, "_error", standard)
    patch(server, "_startup_error", lambda error: standard(None, error))


@variant("failure-notifications-with-details")
def _failure_notifications_with_details() -> None:
    # ErrorData (types.schema.json) has "details": {"type": "object", "description":
    # "Optional machine-readable context."} with no properties fixed. This host fills
    # details in every error that turn/toolResult and turn/ended report (the session, the
    # turn, the call and a retry hint), keeping whatever details it already had.
    def add_details(method: str, params: dict[str, Any]) -> dict[str, Any]:
        error = params.get("error")
        if method not in ("turn/toolResult", "turn/ended") or not isinstance(error, dict):
            return params
        context: dict[str, Any] = {
            "sessionId": params["sessionId"],
            "turnId": params["turnId"],
            "retryable": error["code"] not in ("TOOL_DENIED", "UNKNOWN_TOOL"),
            "seeAlso": None,
        }
        if "toolCallId" in params:
            context["toolCallId"] = params["toolCallId"]
            context["tool"] = params["tool"]
        details = {**context, **error.get("details", {})}
        return {**params, "error": {**error, "details": details}}

    rewrite_notifications(add_details)


@variant("non-object-params-invalid-params")
def _non_object_params_invalid_params() -> None:
    # P1: "params that is null, an array or a string gets an error (INVALID_REQUEST;
    # INVALID_PARAMS too when only params is wrong), even when it has no id". This host
    # answers INVALID_PARAMS when the envelope is otherwise a request for a method it
    # serves (with the request's id, or null without one); any other fault keeps
    # INVALID_REQUEST.
    handle = Dispatcher.handle

    async def params_first(self: Dispatcher, frame: Any) -> None:
        message = _parsed(frame)
        if message is not None and "params" in message and not isinstance(message["params"], dict):
            rest = {k: v for k, v in message.items() if k != "params"}
            method = message.get("method")
            serves = method == "initialize" or (self.initialized and method in self._handlers)
            if Dispatcher._envelope_problem(rest) is None and serves:
                reply_id = message.get("id")
                problem = HostError("INVALID_PARAMS", "params must be an object")
                self._send(rpc._error(reply_id, problem))
                return
        await handle(self, frame)

    patch(Dispatcher, "handle", params_first)


@variant("already-initialized-before-params")
def _already_initialized_before_params() -> None:
    # "The one exception is a second initialize with broken params: ALREADY_INITIALIZED or
    # INVALID_PARAMS ..., your choice." This host answers any second initialize with
    # ALREADY_INITIALIZED before it looks at the params.
    call = Dispatcher._call

    async def initialized_first(self: Dispatcher, method: str, params: Any) -> dict[str, Any]:
        if method == "initialize" and self.initialized:
            raise HostError("ALREADY_INITIALIZED", "this connection is initialized already")
        return await call(self, method, params)

    patch(Dispatcher, "_call", initialized_first)


@variant("refusal-text-echoes-the-call")
def _refusal_text_echoes_the_call() -> None:
    # "What the suite does not require: ... the text the model is given for a refused tool
    # call (its turn/toolResult is fixed)." This host keeps turn/toolResult as the reference
    # host sends it and gives the model a longer text for every call that is not ok: the
    # tool's name, its arguments as the model sent them, and a hint what to do instead.
    run_batch = TurnRunner._run_batch

    async def echoed(
        self: TurnRunner, session: Any, turn_id: str, calls: Any, unattended: bool
    ) -> list[CallOutcome]:
        outcomes = await run_batch(self, session, turn_id, calls, unattended)
        told: list[CallOutcome] = []
        for call, outcome in zip(calls, outcomes, strict=True):
            if outcome.status == "ok" or outcome.error is None:
                told.append(outcome)
                continue
            text = (
                f"The host did not run your call to {call.name}.\n"
                f"Arguments you sent: {call.arguments}\n"
                f"Reason ({outcome.error.code}): {outcome.error.message}\n"
                "Do not repeat the same call; choose another way."
            )
            told.append(CallOutcome(outcome.status, text, outcome.error, outcome.ends_turn))
        return told

    patch(TurnRunner, "_run_batch", echoed)


@variant("refusals-logged-on-stderr")
def _refusals_logged_on_stderr() -> None:
    # "stderr is yours for logs" (P5 section); protocol.md: "The host may log freely on
    # stderr; no client parses it." This host logs every error answer and every tool call
    # that did not run ok as a WARNING line on stderr.
    error = rpc._error
    announce = TurnRunner._announce_results

    def logged(request_id: Any, failure: HostError) -> dict[str, Any]:
        log.warning("refused request %r: %s: %s", request_id, failure.code, failure.message)
        return error(request_id, failure)

    def announce_logged(
        self: TurnRunner, session_id: str, turn_id: str, calls: Any, outcomes: Any
    ) -> None:
        for call, outcome in zip(calls, outcomes, strict=True):
            if outcome.error is not None:
                log.warning(
                    "tool call %s (%s) in turn %s: %s %s",
                    call.call_id,
                    call.name,
                    turn_id,
                    outcome.status,
                    outcome.error.code,
                )
        announce(self, session_id, turn_id, calls, outcomes)

    patch(rpc, "_error", logged)
    patch(TurnRunner, "_announce_results", announce_logged)


@variant("refusals-after-a-storage-read")
def _refusals_after_a_storage_read() -> None:
    # Nothing fixes when a refusal is decided against storage, nor how soon it is answered
    # within the step timeout ("Where the contract gives no order, the harness waits for
    # whichever message comes later, within its timeout"). This host, before it answers a
    # refused request, reads every session and task back from storage (to log them) and
    # takes 150 ms more; nothing it reads changes the answer.
    handlers = Host.handlers

    def slow_refusals(self: Host) -> dict[str, Any]:
        table = handlers(self)

        def wrap(handler: Any) -> Any:
            async def wrapped(params: dict[str, Any]) -> dict[str, Any]:
                try:
                    return await handler(params)
                except HostError as refusal:
                    sessions = await self.storage.list_sessions()
                    tasks = await self.storage.list_tasks()
                    log.info(
                        "refusing %s with %d sessions and %d tasks stored",
                        refusal.code,
                        len(sessions),
                        len(tasks),
                    )
                    await asyncio.sleep(0.15)
                    raise

            return wrapped

        return {name: wrap(handler) for name, handler in table.items()}

    patch(Host, "handlers", slow_refusals)


@variant("names-checked-before-state")
def _names_checked_before_state() -> None:
    # session/configure lists SESSION_NOT_FOUND, SESSION_BUSY, APPROVAL_PENDING and
    # SHELL_NOT_FOUND, session/create WORKSPACE_INVALID and SHELL_NOT_FOUND (methods.json);
    # the contract orders only INVALID_PARAMS first ("Params are checked before the state
    # of what they name"). This host checks a named shell next, before the session, its
    # activity and the workspace root: an unknown shell is SHELL_NOT_FOUND whatever else
    # is wrong.
    configure = Host.session_configure
    create = Host.session_create

    async def configure_shell_first(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("shellId") is not None:
            host_module._require_shell(params["shellId"])
        return await configure(self, params)

    async def create_shell_first(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("shellId") is not None:
            host_module._require_shell(params["shellId"])
        return await create(self, params)

    patch(Host, "session_configure", configure_shell_first)
    patch(Host, "session_create", create_shell_first)


@variant("wide-ids-invalid-request")
def _wide_ids_invalid_request() -> None:
    # P1: "The scenarios use integers no larger than 2^53 - 1"; for longer ids "answer
    # such a line under exactly that id, or, if you cannot hold it, with PARSE_ERROR or
    # INVALID_REQUEST and "id": null". This host holds ids in 64 bits: an integer id
    # beyond them is INVALID_REQUEST with "id": null.
    handle = Dispatcher.handle

    async def sixty_four_bits(self: Dispatcher, frame: Any) -> None:
        message = _parsed(frame)
        if message is not None:
            request_id = message.get("id")
            wide = isinstance(request_id, int) and not isinstance(request_id, bool)
            if wide and not -(2**63) <= request_id < 2**63:
                refusal = HostError("INVALID_REQUEST", "this host holds ids of 64 bits")
                self._send(rpc._error(None, refusal))
                return
        await handle(self, frame)

    patch(Dispatcher, "handle", sixty_four_bits)


@variant("odd-blank-lines-parse-error")
def _odd_blank_lines_parse_error() -> None:
    # P1: "a line of other whitespace only (a form feed, a vertical tab, a Unicode space or
    # a byte order mark) you may ignore too, or answer with PARSE_ERROR". This host ignores
    # only lines of JSON whitespace (space, tab, CR) and answers a line of form feeds or
    # vertical tabs with PARSE_ERROR (the reference host ignores those).
    handle = Dispatcher.handle

    async def strict_blank(self: Dispatcher, frame: Any) -> None:
        if isinstance(frame, bytes) and frame and not frame.strip() and frame.strip(b" \t\r"):
            self._send(rpc._error(None, HostError("PARSE_ERROR", "not JSON: whitespace only")))
            return
        await handle(self, frame)

    patch(Dispatcher, "handle", strict_blank)


@variant("tool-input-checked-before-the-gate")
def _tool_input_checked_before_the_gate() -> None:
    # R1.5/R1.7 (TOOL_DENIED for Write and Edit in Plan, SUBMIT_PLAN_OUTSIDE_PLAN_TURN) and
    # P27 (arguments tools.schema.json does not accept get INVALID_TOOL_INPUT) each say
    # what a call with one fault gets; none says which wins when a call has both. This
    # host checks the input of a tool it has against tools.schema.json first, so a Write
    # in Plan without its content is INVALID_TOOL_INPUT. Either way nothing runs.
    run_call = TurnRunner._run_call

    async def input_first(
        self: TurnRunner, session: Any, turn_id: str, call: Any, unattended: bool
    ) -> CallOutcome:
        if call.name in turns._KNOWN:
            try:
                validate_args(turns._SPECS[call.name], turns._arguments(call))
            except HostError as error:
                return turns._failure(error)
        return await run_call(self, session, turn_id, call, unattended)

    patch(TurnRunner, "_run_call", input_first)


@variant("permission-asked-before-input-check")
def _permission_asked_before_input_check() -> None:
    # P7: "ask asks before Write, Edit and Bash"; P8: a call that needs a permission answer
    # in an unattended run "is refused with PERMISSION_UNAVAILABLE ... without asking";
    # P27: bad arguments get INVALID_TOOL_INPUT. The contract does not say whether the
    # permission comes before the input check. This host decides permission first for any
    # call whose arguments are a JSON object (the question shows them as given), then
    # checks them: an allowed call with bad input is INVALID_TOOL_INPUT, a denied one
    # PERMISSION_DENIED; in an unattended run such a call is PERMISSION_UNAVAILABLE.
    async def permission_first(
        self: TurnRunner, session: Any, turn_id: str, call: Any, unattended: bool
    ) -> CallOutcome:
        refusal = turns._gate(session.mode, call.name)
        if refusal is not None:
            return turns._failure(refusal)
        spec = turns._SPECS[call.name]
        try:
            raw = turns._arguments(call)
            asks = needs_permission(session.permission_mode, call.name)
            if asks and isinstance(raw, dict):
                await self._require_permission(session, turn_id, call, raw, unattended)
                args = validate_args(spec, raw)
            else:
                args = validate_args(spec, raw)
                if asks:
                    await self._require_permission(session, turn_id, call, args, unattended)
            return await self._dispatch(session, turn_id, call.name, args)
        except HostError as error:
            return turns._failure(error)
        except Exception as exc:
            log.exception("tool call %s (%s) failed", call.call_id, call.name)
            return turns._failure(HostError("TOOL_FAILED", f"{call.name} failed: {exc}"))

    patch(TurnRunner, "_run_call", permission_first)


CASES = [
    AllowedCase(
        "approval-owner-decides",
        "isolation,sessions,approval",
        why="a request naming an approval may answer APPROVAL_NOT_FOUND for an unknown session",
    ),
    AllowedCase(
        "approve-verifies-artifact-first",
        "artifact_integrity,approval",
        why="the order of an approve's checks is stated only where the contract states it",
    ),
    AllowedCase(
        "jsonrpc-standard-messages",
        "protocol_errors,handshake",
        why="error.message is free text; only error.data.code and error.code are fixed",
    ),
    AllowedCase(
        "failure-notifications-with-details",
        "plan_tools,submit_plan",
        why="error.data.details is optional machine-readable context with no fields fixed",
    ),
    AllowedCase(
        "non-object-params-invalid-params",
        "protocol_errors",
        why="params that is not an object may get INVALID_REQUEST or INVALID_PARAMS (P1)",
    ),
    AllowedCase(
        "refusal-text-echoes-the-call",
        "plan_tools",
        why="the text the model is given for a refused tool call is the host's",
    ),
    AllowedCase(
        "refusals-logged-on-stderr",
        "protocol_errors,plan_tools",
        why="stderr is the host's for logs",
    ),
    AllowedCase(
        "refusals-after-a-storage-read",
        "approval",
        why="no rule bounds how long a refusal may take within the harness's timeout",
    ),
]
