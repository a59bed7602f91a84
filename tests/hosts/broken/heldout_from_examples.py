"""Broken hosts: a held-out set (hosts built from the contract's examples rather than its
rules), written from the contract alone."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from hosts.registry import BrokenCase, patch, variant


# P5 (docs/implementing-a-host.md, Framing: "Every error response carries error.data.code
# from schemas/error-codes.json and the numeric error.code the catalog lists for it").
# Bug: the approval handlers were written from the one error response protocol.md shows,
# an approval/approve answered with `"code":-32602`, so every error of approval/approve
# carries JSON-RPC code -32602 whatever its data.code: APPROVAL_NOT_PENDING (-32022),
# PLAN_APPROVAL_TIMEOUT (-32023), ARTIFACT_MODIFIED (-32035), APPROVAL_NOT_FOUND ... all
# read -32602. data.code is still right.
# Client sees: approve of an approval already rejected -> error.code -32602 with
# data.code APPROVAL_NOT_PENDING.
# Recipe: Plan session, SubmitPlan, approval/reject, then approval/approve of the same
# approval; compare error.code with the catalog's jsonrpcCode for data.code.
@variant("ex-approve-error-code-from-example")
def approve_error_code_from_example() -> None:
    from reference_host.errors import HostError
    from reference_host.host import Host

    class ExampleCodedError(HostError):
        @property
        def jsonrpc_code(self) -> int:
            return -32602  # as in the example response

    original = Host.approval_approve

    async def approval_approve(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        try:
            return await original(self, params)
        except HostError as error:
            raise ExampleCodedError(error.code, error.message, error.details) from error

    patch(Host, "approval_approve", approval_approve, wraps=True)


# P6 / protocol.md InitializeParams (`clientInfo` is "Required: no") and R7.1 (accept
# protocolVersion 9). Bug: the handshake was written from the initialize example, which
# carries `clientInfo`, so the host treats clientInfo as required: an initialize with
# only `{"protocolVersion":9}` is refused with INVALID_PARAMS and the connection stays
# unopened.
# Client sees: INVALID_PARAMS for a valid first initialize; then NOT_INITIALIZED for
# every other request.
# Recipe: initialize with params {"protocolVersion":9} and no clientInfo.
@variant("ex-clientinfo-required")
def clientinfo_required() -> None:
    from reference_host.errors import HostError
    from reference_host.host import Host

    original = Host.initialize

    async def initialize(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        if "clientInfo" not in params:
            raise HostError("INVALID_PARAMS", "params/clientInfo is required")
        return await original(self, params)

    patch(Host, "initialize", initialize, wraps=True)


# P1 (Framing, "Request ids": "answer every request under exactly the id it carried: a
# string, or any integer"). Bug: every example id is an integer, so the response writer
# keeps ids as numbers: a string id made of digits ("7") is answered under the integer 7.
# Other string ids ("abc", "r-1") are answered as sent.
# Client sees: {"id":"42",...} answered with {"id":42,...}.
# Recipe: after initialize, send session/list with id "42" (a string); the response's id
# is the number 42.
@variant("ex-digit-string-id-as-integer")
def digit_string_id_as_integer() -> None:
    from reference_host.rpc import Dispatcher

    original = Dispatcher.__init__

    def init(self: Dispatcher, send: Callable[[dict[str, Any]], None]) -> None:
        def numeric_ids(message: dict[str, Any]) -> None:
            request_id = message.get("id")
            if isinstance(request_id, str) and request_id.isascii() and request_id.isdigit():
                message = {**message, "id": int(request_id)}
            send(message)

        original(self, numeric_ids)

    patch(Dispatcher, "__init__", init, wraps=True)


# P29 ("`runAt: null` in a `task/update` takes the task off the schedule (answered,
# listed and stored as `null`)"). Bug: task/update was written from its one example (a
# change of mode) and copies an optional field only when it has a value
# (`if params.get("runAt") is not None`), so `runAt: null` is read as "leave runAt as it
# is": the task keeps its time, is answered and listed with it, and still runs when it
# comes due.
# Client sees: task/update {taskId, runAt: null} answers the task with its old runAt;
# advancing the clock past that time runs it (task/runFinished).
# Recipe: task/create agent task with runAt = now + 60000; task/update {runAt: null};
# check the answer's runAt is null; clock/advance 120000; no task/runFinished may come.
@variant("ex-task-runat-null-ignored")
def task_runat_null_ignored() -> None:
    from reference_host.tasks import Tasks

    original = Tasks.update

    async def update(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        kept = {k: v for k, v in params.items() if not (k == "runAt" and v is None)}
        return await original(self, kept)

    patch(Tasks, "update", update, wraps=True)


# Ordering ("an approve's approval/updated and session/updated ... come before its answer
# and report the approval and the session as the answer does"), R7.2, C4. Bug: the team
# generalised the one example of a free order ("session/prompt may answer before or after
# turn/started"; "the approve only sets the execution going") to every announcement an
# approve causes: the session announcements made while approve runs are held and sent
# once the approve has been answered. approval/updated, execution/updated and
# turn/started still come before the answer, and the held session/updated messages come
# right after it, in their order, so the last one still reads as session/get does.
# Client sees: approve response, then session/updated {mode: agent, permissionMode: the
# chosen one, activeExecutionId: the approve's executionId}.
# Recipe: Plan turn submits a plan; approval/approve permissionMode auto; expect a
# session/updated naming mode agent and the approve's executionId before the answer.
@variant("ex-approve-session-updated-after-answer")
def approve_session_updated_after_answer() -> None:
    import weakref

    from reference_host.approvals import Approvals
    from reference_host.host import Host

    Send = Callable[[str, dict[str, Any]], None]
    held: weakref.WeakKeyDictionary[Host, list[dict[str, Any]]] = weakref.WeakKeyDictionary()
    senders: weakref.WeakKeyDictionary[Host, Send] = weakref.WeakKeyDictionary()
    original_init = Host.__init__
    original_approve = Approvals.approve

    def init(self: Host, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        send = self.notify
        senders[self] = send

        def holding(method: str, params: dict[str, Any]) -> None:
            waiting = held.get(self)
            if waiting is not None and method == "session/updated":
                waiting.append(params)
                return
            send(method, params)

        self.notify = holding

    async def approve(
        self: Approvals, session_id: str, approval_id: str, mode: Any
    ) -> dict[str, Any]:
        host = self.host
        assert isinstance(host, Host)
        held[host] = []
        try:
            return await original_approve(self, session_id, approval_id, mode)
        finally:
            waiting = held.pop(host, [])
            send = senders[host]
            loop = asyncio.get_running_loop()
            for params in waiting:  # sent once the answer is out
                loop.call_soon(send, "session/updated", params)

    patch(Host, "__init__", init, wraps=True)
    patch(Approvals, "approve", approve, wraps=True)


# The model provider section ("Send your Chat Completions requests to that base URL ...:
# its path followed by /chat/completions, with one slash between them also when the base
# URL ends in one"). Bug: the URL is built as f"{baseUrl}/chat/completions", right for
# the example base URL (http://127.0.0.1:8080/v1) but a base URL ending in "/" gives
# ".../v1//chat/completions", which the provider does not serve: the turn ends failed
# with PROVIDER_ERROR.
# Client sees: session created with provider baseUrl "http://127.0.0.1:PORT/v1/"; a prompt
# ends failed with PROVIDER_ERROR; the provider saw a request to /v1//chat/completions.
# Recipe: session/create with a baseUrl ending in "/"; session/prompt; expect the scripted
# answer and turn/ended completed.
@variant("ex-provider-url-double-slash")
def provider_url_double_slash() -> None:
    import httpx

    from reference_host import provider_client as pc
    from reference_host import turns

    async def complete(
        client: httpx.AsyncClient,
        config: pc.ProviderConfig,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[pc.ToolSpec],
        on_text: Callable[[str], Awaitable[None]] | None = None,
        *,
        timeout: float = 60.0,  # noqa: ASYNC109 - as the original
    ) -> pc.AssistantReply:
        body: dict[str, Any] = {
            "model": config.model,
            "messages": [dict(message) for message in messages],
            "stream": True,
        }
        if tools:
            body["tools"] = [tool.to_wire() for tool in tools]
        headers = {"Accept": "text/event-stream"}
        if config.api_key:
            headers["Authorization"] = f"Bearer {config.api_key}"
        url = f"{config.base_url}/chat/completions"  # the bug: no care for a trailing "/"
        acc = pc._Accumulator(on_text)
        started = False
        try:
            async with client.stream(
                "POST", url, json=body, headers=headers, timeout=httpx.Timeout(timeout)
            ) as response:
                started = True
                if not response.is_success:
                    raise await pc._http_error(response)
                content_type = response.headers.get("content-type", "")
                if content_type.startswith("application/json"):
                    raise pc.ProviderError(
                        "provider answered with a JSON body instead of an event stream",
                        kind="protocol",
                        status=response.status_code,
                    )
                if not await pc._read_events(response, acc):
                    raise pc.ProviderError("provider stream ended without [DONE]", kind="stream")
        except httpx.TimeoutException as exc:
            raise pc.ProviderError(
                f"provider call timed out ({type(exc).__name__}, timeout {timeout:g}s)",
                kind="timeout",
            ) from exc
        except httpx.HTTPError as exc:
            if started:
                raise pc.ProviderError(f"provider stream broke: {exc}", kind="stream") from exc
            raise pc.ProviderError(f"provider request failed: {exc}", kind="http") from exc
        return acc.reply()

    patch(turns, "complete", complete)


# The model provider section ("A streamed answer is server-sent events as the HTML
# standard defines them ... the space after `data:` is optional"), P31/P25. Bug: the
# event parser was written from the example chunks, which all read `data: {...}`: it
# takes a line as data only when it starts with "data: " (with the space) and cuts six
# characters. A provider that writes `data:{...}` has every line ignored: no text, no
# [DONE], and the turn ends failed with PROVIDER_ERROR ("ended without [DONE]").
# Client sees: turn/ended failed PROVIDER_ERROR where the model answered normally.
# Recipe: script an answer whose SSE lines have no space after "data:"; prompt; expect
# turn/text with the answer and turn/ended completed.
@variant("ex-sse-data-space-required")
def sse_data_space_required() -> None:
    import httpx

    from reference_host import provider_client as pc
    from reference_host.sse import sse_lines

    async def read_events(response: httpx.Response, acc: Any) -> bool:
        data_lines: list[str] = []
        async for line in sse_lines(response.aiter_bytes()):
            if not line:
                if data_lines:
                    data, data_lines = "\n".join(data_lines), []
                    if data.strip() == "[DONE]":
                        return True
                    await acc.feed(data)
                continue
            if line.startswith("data: "):  # the bug: the space taken as part of the field
                data_lines.append(line[6:])
        if data_lines:
            data = "\n".join(data_lines)
            if data.strip() == "[DONE]":
                return True
            await acc.feed(data)
        return False

    patch(pc, "_read_events", read_events)


# The model provider section ("The calls an answer makes are made whatever its
# finish_reason reads (some providers end an answer with calls in `stop`)"), P9. Bug: the
# loop was written from the example answer with calls, which ends with
# finish_reason "tool_calls": the host runs the calls only when finish_reason is
# "tool_calls"; an answer that carries calls but ends in "stop" (or without a
# finish_reason) is taken as the model's final text, the calls are never announced nor
# run, and the turn ends completed.
# Client sees: no turn/toolCall, no turn/toolResult, the tool never runs (no file read,
# no command), turn/ended completed after one provider request.
# Recipe: script an answer with a Read (or Bash) call and finish_reason "stop", then a
# final answer; expect turn/toolCall, turn/toolResult ok and a second provider request.
@variant("ex-tool-calls-only-on-finish-tool-calls")
def tool_calls_only_on_finish_tool_calls() -> None:
    from reference_host import turns
    from reference_host.provider_client import AssistantReply

    original: Callable[..., Awaitable[AssistantReply]] = vars(turns)["complete"]

    async def complete(*args: Any, **kwargs: Any) -> AssistantReply:
        reply = await original(*args, **kwargs)
        if reply.finish_reason != "tool_calls":
            return AssistantReply(reply.text, (), reply.finish_reason)
        return reply

    patch(turns, "complete", complete, wraps=True)


# R7.3 (Commands and shells, Output: "`signal` is the number of the signal that ended
# the shell, or null when it exited on its own (then `exitCode` is its status, also above
# 128: `exit 130` is `exitCode: 130`, `signal: null`)"), C5 (command_audit holds what
# command/exited reported). Bug: the team decoded exit statuses the way a shell prints
# them ($? = 128 + n means "killed by signal n"), so a command that exits on its own
# with a status above 128 is reported as ended by a signal: `exit 130` becomes
# exitCode null, signal 2, in command/exited, command_audit and the model's result text.
# Statuses up to 128 and real signals are reported as the reference host does.
# Client sees: command/exited {exitCode: null, signal: 2} for `exit 130`.
# Recipe: Agent session, permission auto; the model calls Bash {"command": "exit 130"};
# expect command/exited exitCode 130, signal null.
@variant("ex-exit-over-128-as-signal")
def exit_over_128_as_signal() -> None:
    from reference_host import commands
    from reference_host.commands import CommandResult

    def result(**fields: Any) -> CommandResult:
        code = fields.get("exit_code")
        if fields.get("signal") is None and code is not None and code > 128:
            fields = {**fields, "exit_code": None, "signal": code - 128}
        return CommandResult(**fields)

    patch(commands, "CommandResult", result)


# R7.2 (`approval/list` "lists a session's approvals oldest first: `createdAt` never
# decreases along the list"; protocol.md approval/list "Lists a session's approvals,
# oldest first"). Bug: every example shows one approval, and the team ordered the list
# as its UI does, newest first (ORDER BY created_at DESC).
# Client sees: after a rejected plan and a revision submitted later, approval/list gives
# the revision first.
# Recipe: Plan turn submits plan A; reject; clock/advance 1000; a new Plan turn submits
# plan B; approval/list -> [B, A] instead of [A, B].
@variant("ex-approval-list-newest-first")
def approval_list_newest_first() -> None:
    from reference_host import storage as storage_module
    from reference_host.storage import APPROVAL_COLUMNS, ApprovalRow, Storage

    async def list_approvals(self: Storage, session_id: str) -> list[ApprovalRow]:
        query = (
            f"SELECT {APPROVAL_COLUMNS} FROM plan_approvals WHERE session_id = ? "
            "ORDER BY created_at DESC, rowid DESC"
        )
        async with self._conn.execute(query, (session_id,)) as cursor:
            rows = await cursor.fetchall()
        return [storage_module.ApprovalRow(*row) for row in rows]

    patch(Storage, "list_approvals", list_approvals)


# R7.2 / Sessions, turns and boundaries ("naming a setting with the value the session
# already has is a change like any other: it is accepted while idle, refused while busy
# or pending, and announced with `session/updated` before its answer"). Bug: the team
# followed the examples of configure, which all change something, and skips the write
# and the session/updated when the request names only values the session already has
# (an "optimisation"); the answer still carries the session.
# Client sees: session/configure {mode: "agent"} on an Agent session answers the session
# but no session/updated precedes the answer.
# Recipe: session/create (mode agent); session/configure {mode: "agent"}; wait for a
# session/updated before the answer.
@variant("ex-configure-same-value-silent")
def configure_same_value_silent() -> None:
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
        if all(getattr(row, column) == value for column, value in changes.items()):
            return {"session": self.session_wire(row)}  # the bug: "nothing changed"
        updated = replace(row, **changes, updated_at=self.clock.now_ms())
        await self.storage.update_session(updated)
        wire = self.session_wire(updated)
        self.notify("session/updated", {"session": wire})
        return {"session": wire}

    patch(Host, "session_configure", session_configure)


# P14 / R3.11 ("an approve or reject of a pending approval that arrives at or after
# `expiresAt` gets PLAN_APPROVAL_TIMEOUT"; "when the clock reaches `expiresAt`, your host
# expires the approval by itself"). Bug: the rule was built from its one example ("One
# millisecond before expiresAt the plan can still be approved") and the boundary put on
# the wrong side: an approval counts as expired only once the clock is past expiresAt
# (now > expiresAt). At exactly expiresAt it is still pending, its timer (which fires at
# expiresAt) finds it not yet expired and never fires again, and an approve at that
# instant succeeds.
# Client sees: clock/set to expiresAt exactly -> no approval/updated expired; approve at
# that instant -> approved instead of PLAN_APPROVAL_TIMEOUT.
# Recipe: submit a plan; conformance/clock/set now = expiresAt; approval/get -> still
# pending (must be expired); approval/approve -> success (must be PLAN_APPROVAL_TIMEOUT).
@variant("ex-expiry-strictly-after-deadline")
def expiry_strictly_after_deadline() -> None:
    from reference_host import approvals, state

    def is_expired(expires_at_ms: int, now_ms: int) -> bool:
        return now_ms > expires_at_ms

    patch(state, "is_expired", is_expired)
    patch(approvals, "is_expired", is_expired)


# R7.1 (The initialize handshake: "Any other value gets UNSUPPORTED_PROTOCOL_VERSION, with
# `details.supported` listing what you speak: exactly `[9]`"). Bug: the team read "the
# client asked for a protocol version other than 9" and the single version it speaks,
# and reports `details.supported` as the number 9 rather than the list [9].
# Client sees: initialize {protocolVersion: 8} -> error data.details.supported == 9.
# Recipe: initialize with protocolVersion 8; read error.data.details.supported.
@variant("ex-supported-version-scalar")
def supported_version_scalar() -> None:
    from reference_host.errors import HostError
    from reference_host.host import Host

    original = Host.initialize

    async def initialize(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        try:
            return await original(self, params)
        except HostError as error:
            if error.code == "UNSUPPORTED_PROTOCOL_VERSION" and error.details:
                details = {**error.details, "supported": 9}
                raise HostError(error.code, error.message, details) from error
            raise

    patch(Host, "initialize", initialize, wraps=True)


# P7 ("A `requestId` names one question among all the host's sessions: two questions
# never share one ... and a question asked after a restart never has the id of one asked
# before it (a client may still hold the old one)"). Bug: the ids were modelled on the
# examples' short ids ("s1", "a1"): permission questions are numbered "perm-1",
# "perm-2", ... by a counter of the running host, which starts again at 1 when the host
# restarts. Within one process every id is still unique.
# Client sees: the first question after a restart has requestId "perm-1", the id of the
# first question asked before the restart; an answer a stale client sends for the old
# question answers the new one.
# Recipe: ask-mode session; the model calls Bash -> permission/requested (id X); restart
# the host; prompt again, the model calls Bash -> permission/requested has id X again.
@variant("ex-permission-ids-restart-at-one")
def permission_ids_restart_at_one() -> None:
    import weakref

    from reference_host.permissions import PermissionBroker, _Request

    counters: weakref.WeakKeyDictionary[PermissionBroker, int] = weakref.WeakKeyDictionary()

    async def ask(
        self: PermissionBroker, session_id: str, turn_id: str, tool: str, tool_input: Any
    ) -> bool:
        counters[self] = counters.get(self, 0) + 1
        request_id = f"perm-{counters[self]}"
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
        try:
            return await answer
        finally:
            self._open.pop(request_id, None)

    patch(PermissionBroker, "ask", ask)


# P31 ("the turn reports the assistant's text in `turn/text` notifications whose texts,
# joined in order, are the model's full answer: a piece that is only whitespace is sent
# too"). Bug: written from streams whose pieces are words, the host skips a text delta
# that is only blank space ("if delta.strip()"), to spare the client empty updates; the
# model's answer is still stored and sent back to the provider whole.
# Client sees: a model answering "a", " ", "b" in three pieces gives turn/text "a" and
# "b" only; joined they read "ab", not "a b".
# Recipe: script an answer streamed as pieces "Hello", " ", "world", "\n"; join every
# turn/text of the turn; compare with "Hello world\n".
@variant("ex-turn-text-skips-blank-pieces")
def turn_text_skips_blank_pieces() -> None:
    from hosts.registry import rewrite_notifications

    def rewrite(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        if method == "turn/text" and not str(params.get("text", "")).strip():
            return None
        return params

    rewrite_notifications(rewrite)


# P29 / protocol.md ScheduledTask (`enabled` is a boolean) and P5 (every message conforms
# to the schemas). Bug: the task's wire object was written from the stored row, where
# the v10 schema keeps `enabled` as 0 or 1, and the example task the team copied had it
# so: task/create, task/update and task/list report `enabled` as the integer 1 or 0
# instead of true or false.
# Client sees: task/create {...} -> {"task": {..., "enabled": 1, ...}}.
# Recipe: task/create any task; read the answer's enabled; it must be the boolean true.
@variant("ex-task-enabled-as-integer")
def task_enabled_as_integer() -> None:
    from reference_host.tasks import Tasks

    original = Tasks.wire

    async def wire(self: Tasks, row: dict[str, Any]) -> dict[str, Any]:
        task = await original(self, row)
        return {**task, "enabled": int(row["enabled"])}

    patch(Tasks, "wire", wire, wraps=True)


CASES = [
    BrokenCase(
        "ex-approve-error-code-from-example",
        "approval",
        "interrupted_by_a_restart_cannot_be_approved_afterwards",
        "P5",
        "broke the protocol v9 contract",
    ),
    BrokenCase(
        "ex-clientinfo-required",
        "handshake",
        "whatever_it_says_of_itself and without_saying_who_it_is",
        "R7.1",
        "params/clientInfo is required",
    ),
    BrokenCase(
        "ex-digit-string-id-as-integer",
        "protocol_errors",
        "identifier_the_client_chose and text_made_of_digits",
        "P1",
        "no answer carries the identifier '42'",
    ),
    BrokenCase(
        "ex-task-runat-null-ignored",
        "scheduled_plan",
        "taken_off_the_schedule_does_not_run_at_its_earlier_time",
        "P29",
        "for the task taken off the schedule",
    ),
    BrokenCase(
        "ex-approve-session-updated-after-answer",
        "approval",
        "failed_approval_leaves_the_next_execution_held_back",
        "R7.2",
        "was answered before the session/updated that announces the change",
    ),
    BrokenCase(
        "ex-provider-url-double-slash",
        "sessions",
        "provider_address_that_ends_with_a_slash",
        "P24",
        "the turn ended failed",
    ),
    BrokenCase(
        "ex-sse-data-space-required",
        "protocol_errors",
        "cannot_be_sent_back_for_changes and by_choosing_changes",
        "R1.10",
        "PROVIDER_ERROR",
    ),
    BrokenCase(
        "ex-tool-calls-only-on-finish-tool-calls",
        "shell",
        "exits_with_status_255",
        "R7.3",
        "ended without starting the model's command",
    ),
    BrokenCase(
        "ex-exit-over-128-as-signal",
        "shell",
        "exits_with_status_255",
        "R7.3",
        "signal is for a shell a signal ended",
    ),
    BrokenCase(
        "ex-approval-list-newest-first",
        "deadline",
        "after_expiry_a_new_plan_can_be_submitted",
        "R7.2",
        "lists an approval created at",
    ),
    BrokenCase(
        "ex-configure-same-value-silent",
        "sessions",
        "takes_the_settings_it_already_has",
        "R7.2",
        "answered without a session/updated",
    ),
    BrokenCase(
        "ex-expiry-strictly-after-deadline",
        "deadline",
        "after_an_approval_without_a_permission_mode_was_refused",
        "R3.11",
        "the deadline passed but no expiry was announced",
    ),
    BrokenCase(
        "ex-supported-version-scalar",
        "handshake",
        "speaking_a_future_version_is_refused",
        "R7.1",
        "does not list version 9",
    ),
    BrokenCase(
        "ex-permission-ids-restart-at-one",
        "execution",
        "asked_after_a_restart_takes_no_answer_meant_for_one_asked_before",
        "P7",
        "expected the host to refuse",
    ),
    BrokenCase(
        "ex-turn-text-skips-blank-pieces",
        "sessions",
        "the_models_answer_reaches_the_user_exactly_as_the_model_gave_it",
        "P31",
        "the turn/text notifications, joined, read",
    ),
    BrokenCase(
        "ex-task-enabled-as-integer",
        "scheduled_plan",
        "new_task_without_a_project_is_reported_as_it_was_created",
        "P5",
        "broke the protocol v9 contract",
    ),
]
