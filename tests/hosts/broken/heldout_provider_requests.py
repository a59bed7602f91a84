"""Broken hosts: a held-out set (the model provider's requests and stream), written from
the contract alone.

Eight of these thirteen went uncaught at first; six are caught now: tool calls streamed
interleaved, a stream that ends early or carries an error, a refused call left out of the
history, and a provider address ending in a slash. Open (docs/reliability.md):
provider-utf8-split-replaced (the mock cannot make a character's bytes arrive in two reads
without waiting) and stop-finish-ignores-tool-calls (the contract does not say what a
finish_reason other than tool_calls beside tool calls means).
"""

from __future__ import annotations

import json
from typing import Any

from hosts.registry import BrokenCase, patch, rewrite_provider_messages, variant
from reference_host import provider_client, turns
from reference_host.provider_client import AssistantReply
from reference_host.tools.agent_tools import PLAN_TOOL_NAMES, SUBMIT_PLAN
from reference_host.turns import TurnRunner

_CANCELLED_TEXT = "error TURN_CANCELLED: the turn was cancelled before it ran"


async def _turn_states(runner: TurnRunner, session_id: str) -> dict[str, str]:
    """turn id -> turns.state of every turn of the session."""
    conn = runner.host.storage._conn
    async with conn.execute(
        "SELECT id, state FROM turns WHERE session_id = ?", (session_id,)
    ) as cursor:
        return {row[0]: row[1] for row in await cursor.fetchall()}


def _from_last_reset(contents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    start = max((i for i, c in enumerate(contents) if c.get("contextReset")), default=0)
    return [{k: v for k, v in c.items() if k != "contextReset"} for c in contents[start:]]


@variant("tool-call-deltas-by-arrival")
def _tool_call_deltas_by_arrival() -> None:
    # P9 / P27 (The model provider: streamed tool calls): argument fragments are appended to
    # the call most recently opened (the last delta that carried an id) instead of the call
    # their `index` names, so two calls streamed interleaved get each other's arguments.
    original = provider_client._Accumulator._feed_delta

    async def _feed_delta(self: Any, delta: dict[str, Any], data: str) -> None:
        items = delta.get("tool_calls")
        if not isinstance(items, list):
            await original(self, delta, data)
            return
        await original(self, {k: v for k, v in delta.items() if k != "tool_calls"}, data)
        for position, item in enumerate(items):
            if not isinstance(item, dict):
                raise provider_client._protocol("a tool call delta is not an object", data)
            function = item.get("function") or {}
            if item.get("id"):
                index = item.get("index", position)
                self._latest = index
            else:
                index = getattr(self, "_latest", item.get("index", position))
            call = self.calls.setdefault(index, provider_client._PartialCall())
            if item.get("id"):
                call.call_id = item["id"]
            if function.get("name") and not call.name:
                call.name = function["name"]
            if function.get("arguments"):
                call.arguments.append(function["arguments"])

    patch(provider_client._Accumulator, "_feed_delta", _feed_delta)


@variant("provider-utf8-split-replaced")
def _provider_utf8_split_replaced() -> None:
    # P31 (The model provider: turn/text joined is the model's full answer): the event
    # stream is decoded network chunk by network chunk, with invalid bytes replaced, so a
    # character whose UTF-8 bytes arrive in two chunks becomes U+FFFD (in turn/text, in the
    # transcript and in the next request).
    async def _read_events(response: Any, acc: Any) -> bool:
        data_lines: list[str] = []
        pending = ""

        async def line_done(line: str) -> bool:
            nonlocal data_lines
            line = line.rstrip("\r")
            if not line:
                if data_lines:
                    data, data_lines = "\n".join(data_lines), []
                    if data.strip() == provider_client._DONE:
                        return True
                    await acc.feed(data)
                return False
            if line.startswith(":"):
                return False
            name, _, value = line.partition(":")
            if name == "data":
                data_lines.append(value.removeprefix(" "))
            return False

        async for piece in response.aiter_bytes():
            pending += piece.decode("utf-8", "replace")
            *lines, pending = pending.split("\n")
            for line in lines:
                if await line_done(line):
                    return True
        if pending and await line_done(pending):
            return True
        return await line_done("")

    patch(provider_client, "_read_events", _read_events)


@variant("stop-finish-ignores-tool-calls")
def _stop_finish_ignores_tool_calls() -> None:
    # P9 (Errors and tool results: each tool call the model made is announced and gets one
    # result): the host decides by `finish_reason` whether the model is done, so tool calls
    # streamed in a message whose finish_reason is "stop" (or "length") are never announced
    # or run, and the turn ends completed with only the text.
    ask = TurnRunner._ask_model

    async def _ask_model(self: TurnRunner, session: Any, turn_id: str, messages: Any) -> Any:
        reply = await ask(self, session, turn_id, messages)
        if reply.tool_calls and reply.finish_reason in ("stop", "length"):
            return AssistantReply(reply.text, (), reply.finish_reason)
        return reply

    patch(TurnRunner, "_ask_model", _ask_model)


@variant("truncated-stream-completes")
def _truncated_stream_completes() -> None:
    # P25 / PROVIDER_ERROR ("HTTP error, broken stream or timeout"): a stream that ends
    # without `data: [DONE]` (the connection closed mid-answer) is taken as a complete
    # answer, so the turn ends completed with the partial text instead of failed.
    original = provider_client._read_events

    async def _read_events(response: Any, acc: Any) -> bool:
        await original(response, acc)
        return True

    patch(provider_client, "_read_events", _read_events)


@variant("mid-stream-error-ignored")
def _mid_stream_error_ignored() -> None:
    # P25 / PROVIDER_ERROR: an `{"error": ...}` event inside a 200 event stream is skipped
    # like a chunk without choices, so the provider's failure ends the turn completed (with
    # whatever came before it) instead of failed with PROVIDER_ERROR.
    original = provider_client._Accumulator.feed

    async def feed(self: Any, data: str) -> None:
        try:
            chunk = json.loads(data)
        except ValueError:
            chunk = None
        if isinstance(chunk, dict) and "error" in chunk and "choices" not in chunk:
            return
        await original(self, data)

    patch(provider_client._Accumulator, "feed", feed)


@variant("unanswered-call-after-restart-sent")
def _unanswered_call_after_restart_sent() -> None:
    # The model provider (pairing: "a call that never got its result (a restart ended the
    # turn while it ran) must not reach a later request unanswered"): the host answers the
    # calls of a cancelled turn with TURN_CANCELLED when it loads the history, but keeps
    # the calls of a turn a restart cut off as they are, unanswered.
    async def _history(self: TurnRunner, session_id: str) -> list[dict[str, Any]]:
        states = await _turn_states(self, session_id)
        entries = await self.host.storage.transcript(session_id)
        contents: list[dict[str, Any]] = []
        for index, (_seq, turn, _role, content, _at) in enumerate(entries):
            contents.append(content)
            calls = content.get("tool_calls") or []
            if not calls or states.get(turn) != "cancelled":
                continue
            answered = {
                str(e[3].get("tool_call_id")) for e in entries[index + 1 :] if e[2] == "tool"
            }
            for call in calls:
                if str(call.get("id")) not in answered:
                    contents.append(
                        {"role": "tool", "tool_call_id": call["id"], "content": _CANCELLED_TEXT}
                    )
        kept = _from_last_reset(contents)
        made: set[str] = set()
        result: list[dict[str, Any]] = []
        for message in kept:  # drops only results whose call is not in the history
            made.update(str(call.get("id")) for call in message.get("tool_calls") or [])
            if message.get("role") == "tool" and str(message.get("tool_call_id")) not in made:
                continue
            result.append(message)
        return result

    patch(TurnRunner, "_history", _history)


@variant("history-skips-cancelled-turns")
def _history_skips_cancelled_turns() -> None:
    # R1.3 (Sessions, turns and boundaries: "a cancel stops the turn, it does not undo
    # it"): the transcript keeps a cancelled turn, but the history sent to the provider in
    # later turns leaves out every message of a turn that ended cancelled, its prompt too.
    async def _history(self: TurnRunner, session_id: str) -> list[dict[str, Any]]:
        states = await _turn_states(self, session_id)
        entries = await self.host.storage.transcript(session_id)
        contents = [c for _s, turn, _r, c, _a in entries if states.get(turn) != "cancelled"]
        return turns.answered_only(_from_last_reset(contents))

    patch(TurnRunner, "_history", _history)


@variant("refused-calls-left-out-of-history")
def _refused_calls_left_out_of_history() -> None:
    # P9 ("a refused or failed call does not end the turn: the model is given the result"):
    # calls the host refuses by policy before running anything (UNKNOWN_TOOL, TOOL_DENIED)
    # are announced in turn/toolResult but filtered out of the provider history: neither the
    # call in the assistant message nor its tool message reaches the model.
    refused = ("error UNKNOWN_TOOL:", "error TOOL_DENIED:")

    def rewrite(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        dropped = {
            str(m.get("tool_call_id"))
            for m in messages
            if m.get("role") == "tool" and str(m.get("content", "")).startswith(refused)
        }
        if not dropped:
            return messages
        kept: list[dict[str, Any]] = []
        for message in messages:
            if message.get("role") == "tool" and str(message.get("tool_call_id")) in dropped:
                continue
            calls = message.get("tool_calls")
            if calls:
                left = [c for c in calls if str(c.get("id")) not in dropped]
                message = {k: v for k, v in message.items() if k != "tool_calls"}
                if left:
                    message["tool_calls"] = left
                elif not message.get("content"):
                    continue
            kept.append(message)
        return kept

    rewrite_provider_messages(rewrite)


@variant("agent-offers-submit-plan")
def _agent_offers_submit_plan() -> None:
    # tools.schema.json / R1.7 (Agent offers Read, Glob, Grep, BrowserPreview, Bash,
    # EnterPlanMode, new_context, Write and Edit): Agent requests offer SubmitPlan as well,
    # so the model may submit right after EnterPlanMode (the call itself is still refused
    # with SUBMIT_PLAN_OUTSIDE_PLAN_TURN in Agent).
    original = turns.offered_tools

    def offered_tools(mode: str) -> list[Any]:
        tools = original(mode)
        return tools if mode == "plan" else [*tools, SUBMIT_PLAN]

    patch(turns, "offered_tools", offered_tools)


@variant("plan-omits-new-context")
def _plan_omits_new_context() -> None:
    # R1.4 (Tools offered in Plan are exactly Read, Glob, Grep, BrowserPreview, Bash,
    # EnterPlanMode, SubmitPlan and new_context): Plan requests leave out new_context (the
    # implementer treats a context reset as an Agent action); a call to it still works.
    original = turns.offered_tools

    def offered_tools(mode: str) -> list[Any]:
        tools = original(mode)
        return [t for t in tools if t.name != "new_context"] if mode == "plan" else tools

    assert "new_context" in PLAN_TOOL_NAMES
    patch(turns, "offered_tools", offered_tools)


@variant("new-context-waits-for-next-turn")
def _new_context_waits_for_next_turn() -> None:
    # P10 new_context ("the next request of the turn, and the first request of later turns,
    # carry the summary and none of the messages of earlier turns"): the reset is stored and
    # applied from the next turn on, but the rest of the turn that called new_context goes
    # on with the whole earlier conversation and no summary.
    async def _loop(self: TurnRunner, session_id: str, turn_id: str, unattended: bool) -> None:
        host = self.host
        messages = await self._history(session_id)
        for _ in range(turns.MAX_STEPS):
            session = await host.require_session(session_id)
            reply = await self._ask_model(session, turn_id, messages)
            assistant = turns._assistant_message(reply)
            await host.storage.append_transcript(
                session_id, turn_id, "assistant", assistant, host.clock.now_ms()
            )
            messages.append(assistant)
            if not reply.tool_calls:
                return
            outcomes = await self._run_batch(session, turn_id, reply.tool_calls, unattended)
            for call, result in zip(reply.tool_calls, outcomes, strict=True):
                message = {"role": "tool", "tool_call_id": call.call_id, "content": result.output}
                await host.storage.append_transcript(
                    session_id, turn_id, "tool", message, host.clock.now_ms()
                )
                messages.append(message)
            if any(result.ends_turn for result in outcomes):
                return
        raise turns.HostError("PROVIDER_ERROR", "the model did not finish in time")

    patch(TurnRunner, "_loop", _loop)


@variant("task-prompt-prefixed")
def _task_prompt_prefixed() -> None:
    # P31 ("a prompt (session/prompt, a task's prompt) reaches the provider ... exactly as
    # given: no wrapper around it"): a scheduled run's prompt is sent with a note in front
    # of it in the same user message; prompts of session/prompt are sent as given.
    scheduled: set[str] = set()
    start = TurnRunner.start
    ask = TurnRunner._ask_model

    async def _start(self: TurnRunner, session: Any, kind: str, *args: Any, **kw: Any) -> str:
        turn_id = await start(self, session, kind, *args, **kw)
        if kind == "scheduled":
            scheduled.add(turn_id)
        return turn_id

    async def _ask_model(self: TurnRunner, session: Any, turn_id: str, messages: Any) -> Any:
        if turn_id in scheduled:
            sent = [dict(m) for m in messages]
            for message in reversed(sent):
                if message.get("role") == "user" and isinstance(message.get("content"), str):
                    message["content"] = f"[Scheduled task run] {message['content']}"
                    break
            messages = sent
        return await ask(self, session, turn_id, messages)

    patch(TurnRunner, "start", _start)
    patch(TurnRunner, "_ask_model", _ask_model)


@variant("double-slash-after-base-url")
def _double_slash_after_base_url() -> None:
    # The model provider ("send your Chat Completions requests to that base URL"): the
    # request URL is the baseUrl with "/chat/completions" appended as is, so a baseUrl
    # ending in "/" (http://127.0.0.1:PORT/v1/) is sent to ".../v1//chat/completions".
    complete = turns.complete

    class _Client:
        def __init__(self, client: Any, base_url: str) -> None:
            self._client = client
            self._base_url = base_url

        def stream(self, method: str, url: str, **kw: Any) -> Any:
            return self._client.stream(method, self._base_url + "/chat/completions", **kw)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._client, name)

    async def _complete(client: Any, config: Any, *args: Any, **kw: Any) -> Any:
        return await complete(_Client(client, config.base_url), config, *args, **kw)

    patch(turns, "complete", _complete)


CASES = [
    BrokenCase(
        "unanswered-call-after-restart-sent",
        "restart_interruption",
        "a_message_whose_calls_a_restart_cut_short",
        "C3",
        "the new turn ended",
    ),
    BrokenCase(
        "history-skips-cancelled-turns",
        "plan_tools",
        "after_a_cancelled_one_answers_every_call",
        "R1.3",
        "the later turn's request lacks the cancelled turn's prompt",
    ),
    BrokenCase(
        "agent-offers-submit-plan",
        "execution",
        "the_same_agent_carries_out_the_plan_with",
        "R4.7",
        "the execution was not run by the agent in Agent mode",
    ),
    BrokenCase(
        "plan-omits-new-context",
        "plan_tools",
        "offered_exactly_the_planning_tools_also_after",
        "R1.4",
        "expected",
    ),
    BrokenCase(
        "new-context-waits-for-next-turn",
        "plan_tools",
        "starting_a_new_context_replaces_the_conversation",
        "P10",
        "after the new context the model was not given the summary",
    ),
    BrokenCase(
        "task-prompt-prefixed",
        "scheduled_plan",
        "an_agent_task_runs_when_its_time_comes",
        "R6.3",
        "the run asked the model",
    ),
    BrokenCase(
        "truncated-stream-completes",
        "sessions",
        "a_model_answer_that_breaks_off_ends_the",
        "P25",
        "expected failed with PROVIDER_ERROR",
    ),
    BrokenCase(
        "mid-stream-error-ignored",
        "sessions",
        "a_model_answer_that_breaks_off_ends_the",
        "P25",
        "expected failed with PROVIDER_ERROR",
    ),
    BrokenCase(
        "tool-call-deltas-by-arrival",
        "plan_tools",
        "every_call_of_a_message_gets_exactly_one",
        "P27",
        "the Read call failed",
    ),
    BrokenCase(
        "refused-calls-left-out-of-history",
        "plan_tools",
        "a_call_to_exitplanmode_is_refused_as_an",
        "P9",
        "the model was never given the result of its refused",
    ),
    BrokenCase(
        "double-slash-after-base-url",
        "sessions",
        "a_provider_address_that_ends_with_a_slash",
        "P24",
        "the turn ended failed",
    ),
]
