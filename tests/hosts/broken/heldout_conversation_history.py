"""Broken hosts: a held-out set (the conversation sent to the model), written from the
contract alone."""

from __future__ import annotations

import asyncio
import json
import weakref
from typing import Any

from hosts.registry import BrokenCase, patch, variant
from reference_host import turns
from reference_host.errors import HostError
from reference_host.host import Host
from reference_host.turns import TurnRunner

# the turns each runner has seen, kept beside the runner rather than on it
_RESET_TURNS: weakref.WeakKeyDictionary[TurnRunner, set[str]] = weakref.WeakKeyDictionary()
_OWN_TURNS: weakref.WeakKeyDictionary[TurnRunner, set[str]] = weakref.WeakKeyDictionary()


def _plain(entries: list[Any], keep: Any = None) -> list[dict[str, Any]]:
    """Transcript entries as provider messages, from the last reset on (as the reference)."""
    picked = [e for e in entries if keep is None or keep(e)]
    contents = [content for _seq, _turn, _role, content, _at in picked]
    start = max((i for i, c in enumerate(contents) if c.get("contextReset")), default=0)
    return [{k: v for k, v in c.items() if k != "contextReset"} for c in contents[start:]]


# P31: turn/text carries the model's full answer. The host holds a reply's text back until it
# knows the reply holds no tool calls, and drops the text the model wrote beside its calls.
@variant("text-beside-tool-calls-not-announced")
def _text_beside_tool_calls_not_announced() -> None:
    original = turns.complete

    async def complete(
        client: Any, config: Any, messages: Any, tools: Any, on_text: Any = None, **kw: Any
    ) -> Any:
        held: list[str] = []

        async def hold(text: str) -> None:
            held.append(text)

        reply = await original(client, config, messages, tools, hold, **kw)
        if on_text is not None and not reply.tool_calls:
            for text in held:
                await on_text(text)
        return reply

    patch(turns, "complete", complete)


# P9: each tool call is announced by turn/toolCall before it runs. The host announces a call
# only once it has run (or was refused), right before the batch's results.
@variant("tool-call-announced-after-it-ran")
def _tool_call_announced_after_it_ran() -> None:
    async def _run_batch(
        self: TurnRunner, session: Any, turn_id: str, calls: Any, unattended: bool
    ) -> list[Any]:
        def announce(call: Any) -> None:
            self.host.notify(
                "turn/toolCall",
                {
                    "sessionId": session.id,
                    "turnId": turn_id,
                    "toolCallId": call.call_id,
                    "tool": call.name,
                    "input": turns._parse_arguments(call),
                },
            )

        outcomes: list[Any] = []
        if any(call.name == "SubmitPlan" for call in calls) and len(calls) > 1:
            refusal = HostError("SUBMIT_PLAN_NOT_ALONE", "SubmitPlan must be the only call")
            for call in calls:
                announce(call)
            outcomes = [turns._failure(refusal) for _ in calls]
        else:
            try:
                for call in calls:
                    outcome = await self._run_call(session, turn_id, call, unattended)
                    announce(call)
                    outcomes.append(outcome)
                    session = await self.host.require_session(session.id)
            except asyncio.CancelledError:
                for call in calls[len(outcomes) :]:
                    announce(call)
                cut = turns._failure(HostError("TURN_CANCELLED", "the turn was cancelled"))
                outcomes += [cut] * (len(calls) - len(outcomes))
                self._announce_results(session.id, turn_id, calls, outcomes)
                raise
        self._announce_results(session.id, turn_id, calls, outcomes)
        return outcomes

    patch(TurnRunner, "_run_batch", _run_batch)


# R1.3 / Storage (session/transcript reports each row, in id order): session/transcript shows
# the readable conversation only and leaves out the tool rows the table holds.
@variant("transcript-hides-tool-rows")
def _transcript_hides_tool_rows() -> None:
    original = Host.session_transcript

    async def session_transcript(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await original(self, params)
        return {"entries": [e for e in result["entries"] if e["role"] != "tool"]}

    patch(Host, "session_transcript", session_transcript)


# R1.3 / P10 (every row in id order): session/transcript sorts the rows by their createdAt
# (then id), which differs from id order once the host clock was set back between turns.
@variant("transcript-ordered-by-created-at")
def _transcript_ordered_by_created_at() -> None:
    original = Host.session_transcript

    async def session_transcript(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await original(self, params)
        entries = sorted(result["entries"], key=lambda e: (e["createdAt"], e["seq"]))
        return {"entries": entries}

    patch(Host, "session_transcript", session_transcript)


# R5.9 / P10 (new_context; each session has its own conversation): the reset point is taken
# host-wide, the latest new_context of any session, so a reset in one session also hides the
# earlier turns of every other session from the model.
@variant("context-reset-host-wide")
def _context_reset_host_wide() -> None:
    async def _history(self: TurnRunner, session_id: str) -> list[dict[str, Any]]:
        storage = self.host.storage
        entries = await storage.transcript(session_id)
        async with storage._conn.execute("SELECT id, content FROM transcript") as cursor:
            rows = await cursor.fetchall()
        last = max((r[0] for r in rows if json.loads(r[1]).get("contextReset")), default=0)
        return turns.answered_only(_plain(entries, lambda e: e[0] >= last))

    patch(TurnRunner, "_history", _history)


# P10 / R1.3 (new_context: the first request of later turns carries the summary and none of
# the earlier messages): the reset point is remembered in memory only, so after a restart the
# model is shown the whole conversation from before the summary again.
@variant("new-context-forgotten-after-restart")
def _new_context_forgotten_after_restart() -> None:
    dispatch = TurnRunner._dispatch

    def seen(runner: TurnRunner) -> set[str]:
        return _RESET_TURNS.setdefault(runner, set())

    async def _dispatch(self: TurnRunner, session: Any, turn_id: str, name: str, args: Any) -> Any:
        if name == "new_context":
            seen(self).add(turn_id)
        return await dispatch(self, session, turn_id, name, args)

    async def _history(self: TurnRunner, session_id: str) -> list[dict[str, Any]]:
        entries = await self.host.storage.transcript(session_id)
        known = seen(self)
        kept = [
            (seq, turn, role, content, at)
            if turn in known or not content.get("contextReset")
            else (seq, turn, role, {k: v for k, v in content.items() if k != "contextReset"}, at)
            for seq, turn, role, content, at in entries
        ]
        return turns.answered_only(_plain(kept))

    patch(TurnRunner, "_dispatch", _dispatch)
    patch(TurnRunner, "_history", _history)


# R1.3 (the conversation is shown to the model in the next turn): the host keeps each
# session's conversation in memory as it goes; after a restart the model is shown only what
# was said since the start (the transcript still holds everything).
@variant("history-lost-on-restart")
def _history_lost_on_restart() -> None:
    loop = TurnRunner._loop
    history = TurnRunner._history

    def mine(runner: TurnRunner) -> set[str]:
        return _OWN_TURNS.setdefault(runner, set())

    async def _loop(self: TurnRunner, session_id: str, turn_id: str, unattended: bool) -> None:
        mine(self).add(turn_id)
        await loop(self, session_id, turn_id, unattended)

    async def _history(self: TurnRunner, session_id: str) -> list[dict[str, Any]]:
        entries = await self.host.storage.transcript(session_id)
        own = mine(self)
        if all(turn in own for _seq, turn, _role, _content, _at in entries):
            return await history(self, session_id)
        return turns.answered_only(_plain(entries, lambda e: e[1] in own))

    patch(TurnRunner, "_loop", _loop)
    patch(TurnRunner, "_history", _history)


# P10 (new_context: every request stays valid Chat Completions, a tool message only after the
# assistant message that made its call): the host cuts the history at the summary and drops
# calls left without a result, but keeps the new_context call's own result, now orphaned.
@variant("new-context-result-left-orphaned")
def _new_context_result_left_orphaned() -> None:
    def answered_only(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        answered = {str(m.get("tool_call_id")) for m in messages if m.get("role") == "tool"}
        kept: list[dict[str, Any]] = []
        for message in messages:
            calls = message.get("tool_calls") or []
            paired = [call for call in calls if str(call.get("id")) in answered]
            if len(paired) != len(calls):
                message = {k: v for k, v in message.items() if k != "tool_calls"}
                if paired:
                    message["tool_calls"] = paired
                elif not message.get("content"):
                    continue
            kept.append(message)
        return kept

    patch(turns, "answered_only", answered_only)


# R1.3 / P11 (the transcript holds the whole conversation; later turns carry the Plan turn):
# when a call ends the turn (a successful SubmitPlan) the host returns at once and never
# records that batch's tool results, so the SubmitPlan result is missing from the transcript
# and the execution's history drops the SubmitPlan call.
@variant("submit-plan-result-not-recorded")
def _submit_plan_result_not_recorded() -> None:
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
            if any(result.ends_turn for result in outcomes):
                return
            for call, result in zip(reply.tool_calls, outcomes, strict=True):
                message = {"role": "tool", "tool_call_id": call.call_id, "content": result.output}
                await host.storage.append_transcript(
                    session_id, turn_id, "tool", message, host.clock.now_ms()
                )
                messages.append(message)
            if any(call.name == "new_context" for call in reply.tool_calls):
                messages = await self._history(session_id)
        raise HostError("PROVIDER_ERROR", "the model did not finish")

    patch(TurnRunner, "_loop", _loop)


# R1.3 / P25 (the session's conversation is shown in the next turn; a provider error ends
# only that turn): the host treats a failed turn as if it never happened and leaves its
# prompt, answers and tool results out of later requests.
@variant("failed-turn-left-out-of-history")
def _failed_turn_left_out_of_history() -> None:
    async def _history(self: TurnRunner, session_id: str) -> list[dict[str, Any]]:
        storage = self.host.storage
        entries = await storage.transcript(session_id)
        async with storage._conn.execute(
            "SELECT id FROM turns WHERE session_id = ? AND state = 'failed'", (session_id,)
        ) as cursor:
            failed = {row[0] for row in await cursor.fetchall()}
        return turns.answered_only(_plain(entries, lambda e: e[1] not in failed))

    patch(TurnRunner, "_history", _history)


# The model provider / R1.3 (each tool message's tool_call_id is the call's id; the model is
# shown what was said): the host rebuilds the history by putting after each call the result
# stored under its id, looked up in one map for the whole conversation, so when the model
# reuses a call id in a later turn the earlier call is shown the later call's result.
@variant("history-pairs-results-by-call-id")
def _history_pairs_results_by_call_id() -> None:
    history = TurnRunner._history

    async def _history(self: TurnRunner, session_id: str) -> list[dict[str, Any]]:
        messages = await history(self, session_id)
        results = {str(m.get("tool_call_id")): m for m in messages if m.get("role") == "tool"}
        rebuilt: list[dict[str, Any]] = []
        for message in messages:
            if message.get("role") == "tool":
                continue
            rebuilt.append(message)
            for call in message.get("tool_calls") or []:
                rebuilt.append(results[str(call.get("id"))])
        return rebuilt

    patch(TurnRunner, "_history", _history)


# R1.3 (the next turn is shown the session's conversation): the host keeps a sliding window of
# the last 32 messages (cut at a user message so the request stays valid), so a long
# conversation loses its beginning without any new_context.
@variant("history-window-of-32-messages")
def _history_window_of_32_messages() -> None:
    history = TurnRunner._history

    async def _history(self: TurnRunner, session_id: str) -> list[dict[str, Any]]:
        messages = await history(self, session_id)
        if len(messages) <= 32:
            return messages
        first = len(messages) - 32
        start = next(i for i in range(first, len(messages)) if messages[i]["role"] == "user")
        return messages[start:]

    patch(TurnRunner, "_history", _history)


# The model provider (a valid request holds only what Chat Completions defines): the host
# keeps the stream's `index` in each tool call of the assistant message it stores and sends
# back, as the deltas carried it.
@variant("tool-calls-keep-stream-index")
def _tool_calls_keep_stream_index() -> None:
    original = turns._assistant_message

    def _assistant_message(reply: Any) -> dict[str, Any]:
        message = original(reply)
        if "tool_calls" in message:
            message["tool_calls"] = [
                {"index": i, **call} for i, call in enumerate(message["tool_calls"])
            ]
        return message

    patch(turns, "_assistant_message", _assistant_message)


# Kept without a case: submit-plan-result-not-recorded (the contract does not say that the
# SubmitPlan call and its result must reach the execution's request).
CASES = [
    BrokenCase(
        "history-pairs-results-by-call-id",
        "sessions",
        "names_two_reads_alike",
        "R1.3",
        "the last request did not carry 'the first file holds apples'",
    ),
    BrokenCase(
        "context-reset-host-wide",
        "isolation",
        "a_new_context_in_one_session_leaves_another",
        "R5.9",
        "from its own conversation after a new context",
    ),
    BrokenCase(
        "failed-turn-left-out-of-history",
        "sessions",
        "a_turn_that_failed_stays_in_the_conversation",
        "R1.3",
        "the last request did not carry",
    ),
    BrokenCase(
        "history-lost-on-restart",
        "sessions",
        "after_a_restart_the_model_is_still_shown",
        "R1.3",
        "the last request did not carry",
    ),
    BrokenCase(
        "history-window-of-32-messages",
        "sessions",
        "a_long_conversation_reaches_the_model_whole",
        "R1.3",
        "the last request did not carry",
    ),
    BrokenCase(
        "new-context-forgotten-after-restart",
        "plan_tools",
        "after_a_restart_later_turns_still_carry_the",
        "P10",
        "in the later turn the model was still given",
    ),
    BrokenCase(
        "new-context-result-left-orphaned",
        "plan_tools",
        "starting_a_new_context_replaces_the_conversation",
        "P10",
        "is not valid Chat Completions",
    ),
    BrokenCase(
        "text-beside-tool-calls-not-announced",
        "sessions",
        "what_the_model_says_beside_its_tool_calls_is",
        "P31",
        "beside its tool call",
    ),
    BrokenCase(
        "tool-call-announced-after-it-ran",
        "execution",
        "with_ask_a_file_change_waits_for_the",
        "P9",
        "before any turn/toolCall of",
    ),
    BrokenCase(
        "tool-calls-keep-stream-index",
        "plan_tools",
        "the_model_is_offered_exactly_the_planning_tools",
        "R1.4",
        "is not a Chat Completions tool call",
    ),
    BrokenCase(
        "transcript-hides-tool-rows",
        "plan_tools",
        "a_new_context_keeps_the_earlier_conversation_in",
        "R1.3",
        "the transcript table holds",
    ),
    BrokenCase(
        "transcript-ordered-by-created-at",
        "sessions",
        "a_conversation_keeps_its_order_when_the_clock",
        "R1.3",
        "seq does not increase from entry to entry",
    ),
]
