"""Broken hosts: a ninth held-out set (sessions, turns and the provider), written from the
contract alone.

Eight of these sixteen went uncaught at first, and one more was caught only by accident;
all but one are caught now (a turn waiting on a permission answer still holds the
session, every session/updated compared with session/get, two sessions of one project
keeping their conversations apart, a blank prompt, a provider address with a trailing
slash, the model's words beside its tool calls, a Plan turn's prompt as the last user
message, and tool results before the cancelled turn's end). shutdown-waits-for-turns is
kept without a case: a host that lingers after SIGTERM while a turn runs only makes the
run slow (docs/reliability.md).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from typing import Any

from hosts.registry import BrokenCase, patch, rewrite_notifications, variant
from reference_host import host as host_module
from reference_host import shells, turns
from reference_host.errors import HostError
from reference_host.host import Host
from reference_host.permissions import PermissionBroker
from reference_host.provider_client import ProviderError
from reference_host.state import Activity, ensure_idle_for
from reference_host.turns import TurnRunner, answered_only


@variant("one-turn-per-host")
def _one_turn_per_host() -> None:
    # R5.1 / R5.9: "one active turn" is enforced host-wide: a prompt in one session is
    # refused with SESSION_BUSY while a turn runs in any other session.
    original = Host.session_prompt

    async def session_prompt(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        await self.require_session(params["sessionId"])
        for session_id, activity in self.activity.items():
            if session_id != params["sessionId"] and activity.active_turn_id is not None:
                raise HostError(
                    "SESSION_BUSY",
                    "a new prompt refused: a turn is running",
                    {"turnId": activity.active_turn_id, "executionId": None},
                )
        return await original(self, params)

    patch(Host, "session_prompt", session_prompt)


@variant("idle-while-asking-permission")
def _idle_while_asking_permission() -> None:
    # R5.1 / R5.3: the busy check knows "running" and "idle" only; a turn that is paused on
    # a permission question counts as idle, so a prompt or a configuration change (mode,
    # permission mode, provider, shell) sent while the question waits is not refused with
    # SESSION_BUSY.
    waiting: set[str] = set()
    ask = PermissionBroker.ask

    async def asking(
        self: PermissionBroker, session_id: str, turn_id: str, tool: str, tool_input: Any
    ) -> bool:
        waiting.add(turn_id)
        try:
            return await ask(self, session_id, turn_id, tool, tool_input)
        finally:
            waiting.discard(turn_id)

    def ensure_idle(activity: Activity, what: str) -> None:
        if activity.active_turn_id in waiting and activity.pending_approval_id is None:
            return
        ensure_idle_for(activity, what)

    patch(PermissionBroker, "ask", asking)
    patch(host_module, "ensure_idle_for", ensure_idle)


@variant("configure-announces-old-session")
def _configure_announces_old_session() -> None:
    # R7.2: the session/updated that a session/configure sends is built from the row as it
    # was read before the change, so it disagrees with the answer and with session/get.
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
            if params["shellId"] is not None and shells.find(params["shellId"]) is None:
                raise HostError("SHELL_NOT_FOUND", f"no shell {params['shellId']!r}")
            changes["shell_id"] = params["shellId"]
        updated = replace(row, **changes, updated_at=self.clock.now_ms())
        await self.storage.update_session(updated)
        self.notify("session/updated", {"session": self.session_wire(row)})
        return {"session": self.session_wire(updated)}

    patch(Host, "session_configure", session_configure)


@variant("turn-end-announces-busy-session")
def _turn_end_announces_busy_session() -> None:
    # R7.2 / R5.1: at the end of a turn the session is published before its active turn is
    # cleared, so the last session/updated still names the ended turn as activeTurnId
    # while session/get and session/list say null.
    ended: dict[str, str] = {}

    def rewrite(method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "turn/ended":
            ended[params["sessionId"]] = params["turnId"]
        elif method == "session/updated":
            session = params["session"]
            turn_id = ended.pop(session["sessionId"], None)
            if turn_id is not None and session["activeTurnId"] is None:
                return {"session": {**session, "activeTurnId": turn_id}}
        return params

    rewrite_notifications(rewrite)


@variant("history-per-workspace")
def _history_per_workspace() -> None:
    # R5.9 / R1.3: the conversation is kept per project instead of per session: a turn's
    # provider request carries the messages of every session bound to the same workspace
    # root, in the order they were written.
    original = TurnRunner._history

    async def _history(self: TurnRunner, session_id: str) -> list[dict[str, Any]]:
        storage = self.host.storage
        own = await storage.get_session(session_id)
        if own is None or own.workspace_root is None:
            return await original(self, session_id)
        entries: list[tuple[int, Any]] = []
        for other in await storage.list_sessions():
            if other.workspace_root == own.workspace_root:
                entries += [(seq, c) for seq, _t, _r, c, _a in await storage.transcript(other.id)]
        contents = [content for _seq, content in sorted(entries, key=lambda e: e[0])]
        start = max((i for i, c in enumerate(contents) if c.get("contextReset")), default=0)
        kept = [{k: v for k, v in c.items() if k != "contextReset"} for c in contents[start:]]
        return answered_only(kept)

    patch(TurnRunner, "_history", _history)


@variant("plan-reminder-as-user-message")
def _plan_reminder_as_user_message() -> None:
    # P31: every provider request of a Plan turn ends with a reminder of the host's own, sent
    # as a user message after the prompt (the prompt is no longer the last user message).
    ask = TurnRunner._ask_model
    reminder = (
        "<system-reminder>Plan mode is active. Do not change any file; when the plan is "
        "ready, call SubmitPlan with a title, the plan as markdown and a question."
        "</system-reminder>"
    )

    async def _ask_model(
        self: TurnRunner, session: Any, turn_id: str, messages: list[dict[str, Any]]
    ) -> Any:
        if session.mode == "plan":
            messages = [*messages, {"role": "user", "content": reminder}]
        return await ask(self, session, turn_id, messages)

    patch(TurnRunner, "_ask_model", _ask_model)


@variant("context-marker-sent-to-provider")
def _context_marker_sent_to_provider() -> None:
    # The model provider: the host's own bookkeeping property on the stored summary message
    # of a new_context ("contextReset") is not stripped before the history is sent, so the
    # request carries a message property Chat Completions does not define.
    async def _history(self: TurnRunner, session_id: str) -> list[dict[str, Any]]:
        entries = await self.host.storage.transcript(session_id)
        contents = [content for _seq, _turn, _role, content, _at in entries]
        start = max((i for i, c in enumerate(contents) if c.get("contextReset")), default=0)
        return answered_only([dict(c) for c in contents[start:]])

    patch(TurnRunner, "_history", _history)


@variant("retries-client-errors")
def _retries_client_errors() -> None:
    # P25: a provider request that fails with an HTTP error status is sent once more before
    # the turn fails, whatever the status (a 400 included).
    original = turns.complete

    async def complete(client: Any, config: Any, messages: Any, *args: Any, **kw: Any) -> Any:
        try:
            return await original(client, config, messages, *args, **kw)
        except ProviderError as error:
            if error.kind != "http" or error.status is None:
                raise
            await asyncio.sleep(0.2)
            return await original(client, config, messages, *args, **kw)

    patch(turns, "complete", complete)


@variant("cancel-during-provider-call-fails")
def _cancel_during_provider_call_fails() -> None:
    # R5.1: a cancel that arrives while the turn waits on the provider closes the HTTP
    # stream; the broken stream is reported like any provider failure, so the turn ends
    # failed with PROVIDER_ERROR instead of cancelled.
    ask = TurnRunner._ask_model

    async def _ask_model(
        self: TurnRunner, session: Any, turn_id: str, messages: list[dict[str, Any]]
    ) -> Any:
        try:
            return await ask(self, session, turn_id, messages)
        except asyncio.CancelledError:
            if self.stopping:
                raise
            raise HostError(
                "PROVIDER_ERROR", "provider stream broke: connection closed", {"kind": "stream"}
            ) from None

    patch(TurnRunner, "_ask_model", _ask_model)


@variant("cancel-results-after-turn-ended")
def _cancel_results_after_turn_ended() -> None:
    # Ordering / P9: a cancelled turn's turn/ended is sent first; the results of the calls
    # it cut short (turn/toolResult with TURN_CANCELLED, command/exited with cancelled)
    # follow it instead of coming before it.
    init = Host.__init__

    def __init__(self: Host, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        notify = self.notify
        command_turns: dict[str, str] = {}
        held: dict[str, list[tuple[str, dict[str, Any]]]] = {}

        def reordered(method: str, params: dict[str, Any]) -> None:
            if method == "command/started":
                command_turns[params["commandId"]] = params["turnId"]
            turn_id = None
            if (
                method == "turn/toolResult"
                and (params.get("error") or {}).get("code") == "TURN_CANCELLED"
            ):
                turn_id = params["turnId"]
            elif method == "command/exited" and params.get("cancelled"):
                turn_id = command_turns.get(params["commandId"])
            if turn_id is not None:
                held.setdefault(turn_id, []).append((method, params))
                return
            notify(method, params)
            if method == "turn/ended":
                for later in held.pop(params["turnId"], []):
                    notify(*later)

        self.notify = reordered

    patch(Host, "__init__", __init__)


@variant("shutdown-records-turns-cancelled")
def _shutdown_records_turns_cancelled() -> None:
    # R4.11 / Shutdown: on a clean stop (end of stdin, SIGTERM) the host cancels its running
    # turns through the ordinary cancel path, which records them as cancelled; the next
    # start's recovery then finds no active turn, and the turn never reads interrupted.
    async def shutdown(self: TurnRunner) -> None:
        for task in list(self.tasks.values()):
            task.cancel()
        for task in list(self.tasks.values()):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self.stopping = True

    patch(TurnRunner, "shutdown", shutdown)


@variant("refuses-blank-prompt")
def _refuses_blank_prompt() -> None:
    # P4 / P31: a prompt of whitespace only (" ", "\n", "\r\n") is refused with
    # INVALID_PARAMS, though the schema accepts any non-empty text.
    original = Host.session_prompt

    async def session_prompt(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        if not params["text"].strip():
            raise HostError("INVALID_PARAMS", "text: the prompt is empty")
        return await original(self, params)

    patch(Host, "session_prompt", session_prompt)


@variant("provider-url-normalised")
def _provider_url_normalised() -> None:
    # §5 Sessions (R7.2): a provider's baseUrl is stored and reported without its trailing
    # slash ("http://127.0.0.1:8080/v1/" becomes ".../v1"), not exactly as given.
    def trimmed(params: dict[str, Any]) -> dict[str, Any]:
        provider = params.get("provider")
        if not provider:
            return params
        return {**params, "provider": {**provider, "baseUrl": provider["baseUrl"].rstrip("/")}}

    create, configure = Host.session_create, Host.session_configure

    async def session_create(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        return await create(self, trimmed(params))

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        return await configure(self, trimmed(params))

    patch(Host, "session_create", session_create)
    patch(Host, "session_configure", session_configure)


@variant("assistant-text-dropped-beside-tool-calls")
def _assistant_text_dropped_beside_tool_calls() -> None:
    # R1.3: an assistant message that calls tools is kept with its calls only; the text the
    # model wrote beside them (streamed to the client in turn/text) is missing from the
    # conversation the model is shown later and from the transcript.
    original = turns._assistant_message

    def _assistant_message(reply: Any) -> dict[str, Any]:
        message = original(reply)
        if message.get("tool_calls"):
            message["content"] = None
        return message

    patch(turns, "_assistant_message", _assistant_message)


@variant("tool-results-after-cancelled-turn")
def _tool_results_after_cancelled_turn() -> None:
    # Ordering / P9: session/cancel ends the running command (its command/exited comes in
    # order) and announces turn/ended itself; the turn's task then unwinds and reports the
    # calls it cut short (turn/toolResult with TURN_CANCELLED) after that turn/ended.
    init = Host.__init__

    def __init__(self: Host, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        notify = self.notify
        held: dict[str, list[dict[str, Any]]] = {}

        def reordered(method: str, params: dict[str, Any]) -> None:
            error = params.get("error") or {}
            if method == "turn/toolResult" and error.get("code") == "TURN_CANCELLED":
                held.setdefault(params["turnId"], []).append(params)
                return
            notify(method, params)
            if method == "turn/ended":
                for later in held.pop(params["turnId"], []):
                    notify("turn/toolResult", later)

        self.notify = reordered

    patch(Host, "__init__", __init__)


@variant("shutdown-waits-for-turns")
def _shutdown_waits_for_turns() -> None:
    # Shutdown and crashes: at end of stdin or SIGTERM the host first lets its running turns
    # finish (a grace period of 30 seconds) and only then stops, so a host whose turn waits
    # on the model does not exit within 5 seconds.
    original = TurnRunner.shutdown

    async def shutdown(self: TurnRunner) -> None:
        running = [task for task in self.tasks.values() if not task.done()]
        if running:
            await asyncio.wait(running, timeout=30)
        await original(self)

    patch(TurnRunner, "shutdown", shutdown)


CASES = [
    BrokenCase(
        "one-turn-per-host",
        "isolation",
        "answering_at_once",
        "R5.9",
        "SESSION_BUSY",
    ),
    BrokenCase(
        "idle-while-asking-permission",
        "turn_boundaries",
        "waiting_for_a_permission_answer",
        "R5.1",
        "expected SESSION_BUSY",
    ),
    BrokenCase(
        "configure-announces-old-session",
        "sessions",
        "idle_session_switches_to_plan",
        "R7.2",
        "the last session/updated of session",
    ),
    BrokenCase(
        "turn-end-announces-busy-session",
        "sessions",
        "provider_error_ends_the_turn",
        "R7.2",
        "the last session/updated of session",
    ),
    BrokenCase(
        "history-per-workspace",
        "isolation",
        "keep_their_conversations_apart",
        "R5.9",
        "from the first session's conversation",
    ),
    BrokenCase(
        "plan-reminder-as-user-message",
        "sessions",
        "in_plan_mode_reaches",
        "P31",
        "the model was given the prompt",
    ),
    BrokenCase(
        "context-marker-sent-to-provider",
        "plan_tools",
        "replaces_the_conversation_with_its_summary",
        "P10",
        "malformed request",
    ),
    BrokenCase(
        "retries-client-errors",
        "sessions",
        "provider_error_ends_the_turn",
        "P25",
        "asked the provider 2 times",
    ),
    BrokenCase(
        "cancel-during-provider-call-fails",
        "turn_boundaries",
        "cancelling_a_turn_ends_it",
        "R5.1",
        "ended failed",
    ),
    BrokenCase(
        "cancel-results-after-turn-ended",
        "shell",
        "left_in_the_background and cancelled",
        "P19",
        "were announced in the order",
    ),
    BrokenCase(
        "tool-results-after-cancelled-turn",
        "plan_tools",
        "cancelled_message",
        "P9",
        "came after its turn's turn/ended",
    ),
    BrokenCase(
        "shutdown-records-turns-cancelled",
        "restart_interruption",
        "running_execution_is_interrupted_when",
        "R4.11",
        "no turn was recorded as interrupted",
    ),
    BrokenCase(
        "refuses-blank-prompt",
        "sessions",
        "exactly_as_the_user_typed_it and blank",
        "P31",
        "INVALID_PARAMS",
    ),
    BrokenCase(
        "provider-url-normalised",
        "sessions",
        "idle_session_takes_a_new and provider",
        "R5.6",
        "the host reports provider",
    ),
    BrokenCase(
        "assistant-text-dropped-beside-tool-calls",
        "sessions",
        "beside_its_tool_calls",
        "R1.3",
        "were dropped from the conversation",
    ),
]
