"""Broken hosts: a second held-out set (the wire, sessions, turns, tools, permissions and
tasks), written from the contract alone before the suite's checks were read. Seven of
these twelve went uncaught until the scenarios their cases name were added."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from hosts.registry import BrokenCase, patch, variant
from reference_host import server, turns
from reference_host.errors import HostError
from reference_host.host import Host
from reference_host.rpc import Dispatcher
from reference_host.state import ensure_idle_for
from reference_host.turns import TurnRunner

# -- framing ------------------------------------------------------------------------------


@variant("spaced-json")
def _spaced_json() -> None:
    # Every message is written with json.dumps' default separators (", " and ": "): valid
    # JSON on one line, but not the compact form the framing asks for.
    def encode(message: Any) -> bytes:
        try:
            return json.dumps(message, ensure_ascii=False, allow_nan=False).encode("utf-8")
        except UnicodeEncodeError:
            return json.dumps(message, allow_nan=False).encode("ascii")

    patch(server, "encode", encode)


# -- the handshake ------------------------------------------------------------------------


@variant("refused-initialize-opens")
def _refused_initialize_opens() -> None:
    # The connection is marked open as soon as initialize arrives, before its version is
    # checked: a refused initialize leaves the connection initialized, so a retry with the
    # right version gets ALREADY_INITIALIZED and other requests are served meanwhile.
    original = Host.initialize

    async def initialize(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        try:
            return await original(self, params)
        except HostError as error:
            if error.code == "UNSUPPORTED_PROTOCOL_VERSION":
                self.initialized = True
                self.on_initialized()
            raise

    patch(Host, "initialize", initialize)


@variant("method-lookup-before-handshake")
def _method_lookup_before_handshake() -> None:
    # The method table is consulted before the handshake state: before initialize, an
    # unknown method (or a misspelt one) gets METHOD_NOT_FOUND instead of NOT_INITIALIZED.
    original = Dispatcher._call

    async def call(self: Dispatcher, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method not in self._handlers:
            raise HostError("METHOD_NOT_FOUND", f"no method named {method!r}")
        return await original(self, method, params)

    patch(Dispatcher, "_call", call)


# -- request validation -------------------------------------------------------------------


@variant("notification-skips-envelope-check")
def _notification_skips_envelope_check() -> None:
    # A message without "id" is taken for a notification and dropped before its other
    # members are checked: {"jsonrpc":"2.0","method":"session/list","params":null} or one
    # with an extra member goes unanswered instead of getting INVALID_REQUEST.
    original = Dispatcher._envelope_problem

    def problem(message: Any) -> str | None:
        found = original(message)
        if (
            found is not None
            and isinstance(message, dict)
            and "id" not in message
            and message.get("jsonrpc") == "2.0"
            and isinstance(message.get("method"), str)
            and message["method"]
        ):
            return None  # a notification: nothing to answer
        return found

    patch(Dispatcher, "_envelope_problem", staticmethod(problem))


@variant("state-checked-before-params")
def _state_checked_before_params() -> None:
    # session/configure and session/prompt look at the session's activity before the
    # params are checked against the schema: broken params for a busy session, or one
    # with a plan pending, get SESSION_BUSY / APPROVAL_PENDING instead of INVALID_PARAMS.
    original = Dispatcher._call

    async def call(self: Dispatcher, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if (
            self.initialized
            and method in ("session/configure", "session/prompt")
            and isinstance(params.get("sessionId"), str)
        ):
            host = self._handlers[method].__self__
            row = await host.storage.get_session(params["sessionId"])
            if row is not None:
                ensure_idle_for(host.activity_of(row.id), method)
        return await original(self, method, params)

    patch(Dispatcher, "_call", call)


# -- sessions -----------------------------------------------------------------------------


@variant("provider-change-while-busy")
def _provider_change_while_busy() -> None:
    # A configuration request that changes only the provider (base URL and model) is
    # applied while a turn runs ("it takes effect from the next provider request"); only a
    # pending approval holds it back.
    original = Host.session_configure

    async def configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        if set(params) - {"sessionId"} == {"provider"}:
            row = await self.require_session(params["sessionId"])
            if self.activity_of(row.id).pending_approval_id is None:
                updated = replace(
                    row,
                    provider_base_url=params["provider"]["baseUrl"],
                    model=params["provider"]["model"],
                    updated_at=self.clock.now_ms(),
                )
                await self.storage.update_session(updated)
                wire = self.session_wire(updated)
                self.notify("session/updated", {"session": wire})
                return {"session": wire}
        return await original(self, params)

    patch(Host, "session_configure", configure)


# -- turns and the provider ---------------------------------------------------------------


@variant("whitespace-deltas-dropped")
def _whitespace_deltas_dropped() -> None:
    # Text deltas that hold only whitespace (a space, a newline) are taken for keep-alives
    # and not announced: the turn/text texts, joined, miss them.
    original = turns.complete

    async def complete(
        client: Any, config: Any, messages: Any, tools: Any, on_text: Any = None, **kw: Any
    ) -> Any:
        async def filtered(text: str) -> None:
            if text.strip():
                await on_text(text)

        return await original(
            client, config, messages, tools, filtered if on_text is not None else None, **kw
        )

    patch(turns, "complete", complete)


@variant("strips-the-prompt")
def _strips_the_prompt() -> None:
    # session/prompt trims the user's text (leading and trailing whitespace and newlines)
    # before it is stored and sent to the model.
    original = Host.session_prompt

    async def session_prompt(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        text = params["text"].strip() or params["text"]
        return await original(self, {**params, "text": text})

    patch(Host, "session_prompt", session_prompt)


# -- tools ---------------------------------------------------------------------------------


@variant("submit-plan-alone-only-when-first")
def _submit_plan_alone_only_when_first() -> None:
    # The batch rule looks at the first call only: a batch that starts with SubmitPlan is
    # refused as a whole, but one where SubmitPlan comes after another call runs every call,
    # the SubmitPlan included.
    original = TurnRunner._run_batch

    async def run_batch(
        self: TurnRunner, session: Any, turn_id: str, calls: tuple[Any, ...], unattended: bool
    ) -> list[Any]:
        if len(calls) > 1 and calls[0].name != "SubmitPlan":
            outcomes: list[Any] = []
            for call in calls:
                outcomes.extend(await original(self, session, turn_id, (call,), unattended))
                session = await self.host.require_session(session.id)
            return outcomes
        return await original(self, session, turn_id, calls, unattended)

    patch(TurnRunner, "_run_batch", run_batch)


@variant("audit-duration-from-clock")
def _audit_duration_from_clock() -> None:
    # command_audit.duration_ms is computed from the host clock (ended_at - started_at),
    # while command/exited reports the measured durationMs: under the frozen conformance
    # clock the audit says 0 ms (or the timeout advanced) for a command that took longer.
    original = turns._audit_row

    def audit_row(audit: dict[str, Any], result: Any, ended_at: int) -> dict[str, Any]:
        row = original(audit, result, ended_at)
        row["duration_ms"] = max(ended_at - audit["started_at"], 0)
        return row

    patch(turns, "_audit_row", audit_row)


# -- permissions ---------------------------------------------------------------------------


@variant("accept-edits-asks-for-write")
def _accept_edits_asks_for_write() -> None:
    # accept-edits is read as "accept edits of existing files": Edit runs without asking,
    # but Write (which may create a file) still asks, as Bash does.
    original = turns.needs_permission

    def needs_permission(permission_mode: str, tool: str) -> bool:
        if permission_mode == "accept-edits" and tool == "Write":
            return True
        return original(permission_mode, tool)

    patch(turns, "needs_permission", needs_permission)


# -- scheduled tasks and isolation ---------------------------------------------------------


@variant("unattended-flag-host-wide")
def _unattended_flag_host_wide() -> None:
    # "Unattended" is a flag of the turn runner, set while any scheduled run is under way:
    # meanwhile an interactive session's call that needs a permission answer is refused with
    # PERMISSION_UNAVAILABLE instead of being asked.
    original_run = TurnRunner._run
    original_require = TurnRunner._require_permission
    running = [0]

    async def run(
        self: TurnRunner,
        session_id: str,
        turn_id: str,
        approval: Any,
        unattended: bool,
        on_end: Any,
    ) -> None:
        running[0] += unattended
        try:
            await original_run(self, session_id, turn_id, approval, unattended, on_end)
        finally:
            running[0] -= unattended

    async def require(
        self: TurnRunner, session: Any, turn_id: str, call: Any, args: Any, unattended: bool
    ) -> None:
        await original_require(self, session, turn_id, call, args, unattended or running[0] > 0)

    patch(TurnRunner, "_run", run)
    patch(TurnRunner, "_require_permission", require)


CASES = [
    BrokenCase(
        "spaced-json",
        "handshake",
        "speaking_version_9_is_accepted",
        "P5",
        "not compact JSON",
    ),
    BrokenCase(
        "refused-initialize-opens",
        "handshake",
        "which_is_refused and future",
        "R7.1",
        "initialize failed with ALREADY_INITIALIZED",
    ),
    BrokenCase(
        "method-lookup-before-handshake",
        "handshake",
        "served_before_the_connection and never",
        "P6",
        "expected NOT_INITIALIZED, the host answered session/explode failed with METHOD_NOT_FOUND",
    ),
    BrokenCase(
        "notification-skips-envelope-check",
        "protocol_errors",
        "without_an_identifier",
        "P1",
        "expected 1 unsolicited responses, got []",
        slow=True,
    ),
    BrokenCase(
        "state-checked-before-params",
        "protocol_errors",
        "refused_as_such_while",
        "P4",
        "expected INVALID_PARAMS, the host answered",
    ),
    BrokenCase(
        "provider-change-while-busy",
        "turn_boundaries",
        "during_a_turn_is_refused and model",
        "R5.3",
        "expected the host to refuse",
    ),
    BrokenCase(
        "whitespace-deltas-dropped",
        "sessions",
        "exactly_as_the_model_gave_it",
        "P31",
        "the turn/text notifications, joined, read 'Step onedone",
    ),
    BrokenCase(
        "strips-the-prompt",
        "sessions",
        "exactly_as_the_user_typed_it",
        "P31",
        "the model was given the prompt 'Please look at the project.",
    ),
    BrokenCase(
        "submit-plan-alone-only-when-first",
        "submit_plan",
        "beside_another_call and Read",
        "R1.6",
        "SUBMIT_PLAN_NOT_ALONE",
    ),
    BrokenCase(
        "audit-duration-from-clock",
        "shell",
        "command_that_exits_is_recorded_for_audit",
        "C5",
        "the audit row differs from the command",
    ),
    BrokenCase(
        "accept-edits-asks-for-write",
        "execution",
        "file_changes_run_without_asking",
        "P7",
        "its turn asked for permission before ['Write']",
        slow=True,
    ),
    BrokenCase(
        "unattended-flag-host-wide",
        "scheduled_plan",
        "still_asks_its_user",
        "P8",
        "ran or was refused without asking its user",
    ),
]
