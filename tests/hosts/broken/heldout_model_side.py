"""Broken hosts: a held-out set (the model's side varied: every shape a provider may
legitimately give an answer, which the host must handle as it handles the usual one),
written from the contract alone."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from hosts.registry import BrokenCase, patch, variant


# P31 (implementing-a-host.md, The model provider): "the turn reports the assistant's text
# in `turn/text` notifications whose texts, joined in order, are the model's full answer:
# a piece that is only whitespace is sent too".
# Bug: the stream reader skips content deltas that are only whitespace (taking them for
# keep-alive noise), so a piece such as "\n\n" or " " between two words is neither sent as
# `turn/text` nor kept in the assistant's text.
# A client sees the joined `turn/text` lack the blank pieces ("Hello" + "world" instead of
# "Hello", " ", "world"); the transcript and the next request lose them too.
# Trigger: a streamed answer whose text arrives as pieces, one of them whitespace only.
@variant("ms-whitespace-piece-dropped")
def whitespace_piece_dropped() -> None:
    from reference_host import provider_client as pc

    original = pc._Accumulator._feed_delta

    async def feed_delta(self: pc._Accumulator, delta: dict[str, Any], data: str) -> None:
        content = delta.get("content")
        if isinstance(content, str) and content and not content.strip():
            delta = {k: v for k, v in delta.items() if k != "content"}
        await original(self, delta, data)

    patch(pc._Accumulator, "_feed_delta", feed_delta)


# R1.3 / R5.9 (Sessions, turns and boundaries): "The conversation holds the model's own
# words too, exactly as it gave them (blank space and control characters included)".
# Bug: the assistant message the host stores and sends back is built from the answer's
# text with surrounding whitespace stripped (a tidy-up meant for display); `turn/text` is
# still streamed as received.
# A client sees `session/transcript`'s assistant entry read "Done." where the model said
# "\n  Done.\n"; the next turn's request carries the stripped text.
# Trigger: an answer whose text starts or ends with blank space or a newline, then a
# second turn (or a tool call, so the next request of the same turn shows it).
@variant("ms-assistant-text-stripped")
def assistant_text_stripped() -> None:
    from reference_host import turns
    from reference_host.provider_client import AssistantReply

    original = turns._assistant_message

    def assistant_message(reply: AssistantReply) -> dict[str, Any]:
        message = original(reply)
        message["content"] = reply.text.strip() or None
        return message

    patch(turns, "_assistant_message", assistant_message)


# P31: "... and so is the text the model writes beside its tool calls, before, between or
# after their pieces"; "one delta may carry text beside a tool call's piece".
# Bug: the stream reader assumes a model writes its text first and its tool calls last,
# so once the first tool-call piece has arrived it ignores every further content delta.
# A client sees no `turn/text` for the text written between or after the calls, and the
# stored assistant message lacks it.
# Trigger: a streamed answer: a tool-call piece, then a content delta ("I will now...").
@variant("ms-text-after-call-dropped")
def text_after_call_dropped() -> None:
    from reference_host import provider_client as pc

    original = pc._Accumulator._feed_delta

    async def feed_delta(self: pc._Accumulator, delta: dict[str, Any], data: str) -> None:
        if self.calls and "content" in delta:
            delta = {k: v for k, v in delta.items() if k != "content"}
        await original(self, delta, data)

    patch(pc._Accumulator, "_feed_delta", feed_delta)


# Stream framing clause (The model provider): "the chunk that carries `finish_reason` may
# carry a last piece too".
# Bug: the stream reader treats the chunk carrying `finish_reason` as a pure end marker:
# it records the reason and skips that chunk's delta.
# A client sees the answer's last text piece missing from `turn/text` (and the
# transcript), or a tool call's arguments cut short (INVALID_TOOL_INPUT) when its last
# argument piece rides on the finishing chunk.
# Trigger: a streamed answer whose final chunk has both `finish_reason` and a
# `delta.content` (or a `delta.tool_calls` piece).
@variant("ms-finish-chunk-delta-skipped")
def finish_chunk_delta_skipped() -> None:
    from reference_host import provider_client as pc

    original = pc._Accumulator.feed

    async def feed(self: pc._Accumulator, data: str) -> None:
        try:
            chunk = json.loads(data)
        except ValueError:
            chunk = None
        choices = chunk.get("choices") if isinstance(chunk, dict) else None
        if isinstance(chunk, dict) and "error" not in chunk and isinstance(choices, list):
            # a choice that finishes is read as the end marker: its reason is kept, its
            # delta is not
            for choice in choices:
                if isinstance(choice, dict) and isinstance(choice.get("finish_reason"), str):
                    choice["delta"] = {}
            data = json.dumps(chunk)
        await original(self, data)

    patch(pc._Accumulator, "feed", feed)


# Interleaved tool calls (The model provider): "A streamed answer holding several tool
# calls may send their pieces interleaved: each piece names its call by `index`, and a
# call's arguments are its pieces joined in order."
# Bug: the stream reader assembles tool calls by arrival: a piece carrying a new `id`
# starts a new call and a piece without one continues the call started last, ignoring
# `index`.
# A client sees, for two calls whose pieces interleave, the second call's arguments
# spliced with the rest of the first's (INVALID_TOOL_INPUT or the wrong file) and the first
# call's arguments cut short.
# Trigger: one streamed answer: call 0's first piece (id, name, half the arguments), call
# 1's first piece, then call 0's second piece, then call 1's second piece.
@variant("ms-calls-by-arrival")
def calls_by_arrival() -> None:
    from reference_host import provider_client as pc

    original = pc._Accumulator._feed_delta

    async def feed_delta(self: pc._Accumulator, delta: dict[str, Any], data: str) -> None:
        items = delta.get("tool_calls")
        if isinstance(items, list):
            renumbered: list[Any] = []
            for item in items:
                if not isinstance(item, dict):
                    renumbered.append(item)
                    continue
                last = max(self.calls, default=None)
                call_id = item.get("id")
                if last is None or (call_id and call_id != self.calls[last].call_id):
                    slot = 0 if last is None else last + 1
                    self.calls.setdefault(slot, pc._PartialCall())
                else:
                    slot = last
                renumbered.append({**item, "index": slot})
            delta = {**delta, "tool_calls": renumbered}
        await original(self, delta, data)

    patch(pc._Accumulator, "_feed_delta", feed_delta)


# P9 (Errors and tool results): "Both notifications name the call by `toolCallId`, which
# is the `id` the model gave the call in its `tool_calls`, unchanged"; (The model provider)
# "An assistant message you send back to the provider keeps the ids the model gave its
# `tool_calls`, and each `tool` message's `tool_call_id` is that id."
# Bug: call ids are sanitised to [A-Za-z0-9_-] (a rule some providers impose, carried
# over from another integration) as the answer is read.
# A client sees `turn/toolCall` and `turn/toolResult` name "call_1_x" for the model's
# "call:1.x"; the next request's assistant message and tool message carry the changed id.
# Trigger: a tool call whose id holds a symbol (":", ".", "/", "+", "=", "|").
@variant("ms-call-id-sanitised")
def call_id_sanitised() -> None:
    from dataclasses import replace

    from reference_host import provider_client as pc

    original = pc._Accumulator.reply

    def reply(self: pc._Accumulator) -> pc.AssistantReply:
        answer = original(self)
        calls = tuple(
            replace(call, call_id=re.sub(r"[^A-Za-z0-9_-]", "_", call.call_id))
            for call in answer.tool_calls
        )
        return replace(answer, tool_calls=calls)

    patch(pc._Accumulator, "reply", reply)


# R1.3 (The model provider): "A call id is unique only within its message: a model may give
# a call in a later message the id of an earlier one (some providers number each
# message's calls from one), and each call still reaches later requests with its own
# result".
# Bug: the history a turn starts from is rebuilt from the transcript with the tool results
# looked up by call id in one dict, so when two messages of the conversation used the same
# id, both calls are answered with the later call's result.
# A client (the provider) sees, in the next turn's first request, the earlier call's tool
# message carry the later call's output.
# Trigger: turn 1: message 1 calls Read a.txt as "call_1", message 2 calls Read b.txt as
# "call_1", then a final answer; turn 2: its first request answers both with b.txt's text.
@variant("ms-reused-id-last-result")
def reused_id_last_result() -> None:
    from reference_host import turns

    def answered_only(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        results = {str(m.get("tool_call_id")): m for m in messages if m.get("role") == "tool"}
        kept: list[dict[str, Any]] = []
        for message in messages:
            if message.get("role") == "tool":
                continue
            calls = message.get("tool_calls") or []
            paired = [call for call in calls if str(call.get("id")) in results]
            if len(paired) != len(calls):
                message = {k: v for k, v in message.items() if k != "tool_calls"}
                if paired:
                    message["tool_calls"] = paired
                elif not message.get("content"):
                    continue
            kept.append(message)
            kept.extend(results[str(call.get("id"))] for call in paired)
        return kept

    patch(turns, "answered_only", answered_only)


# P10 (Planning, the tools work): "When one message makes several calls, the tool message
# that answers a call (by its `tool_call_id`) carries that call's own result, never
# another call's, also for two calls of one tool".
# Bug: the results of a batch are gathered by tool name before the tool messages are
# written, so of two calls of one tool both answers carry the last one's output
# (`turn/toolResult` is announced per call and stays right).
# A client (the provider) sees, in the next request, the tool messages of Read a.txt and
# Read b.txt both hold b.txt's text.
# Trigger: one assistant message with two calls of Read (or Bash, Grep) on different
# inputs, then a second request.
@variant("ms-batch-results-by-tool")
def batch_results_by_tool() -> None:
    from reference_host.provider_client import ToolCall
    from reference_host.storage import SessionRow
    from reference_host.turns import CallOutcome, TurnRunner

    original = TurnRunner._run_batch

    async def run_batch(
        self: TurnRunner,
        session: SessionRow,
        turn_id: str,
        calls: tuple[ToolCall, ...],
        unattended: bool,
    ) -> list[CallOutcome]:
        outcomes = await original(self, session, turn_id, calls, unattended)
        by_tool = {call.name: result for call, result in zip(calls, outcomes, strict=True)}
        return [by_tool[call.name] for call in calls]

    patch(TurnRunner, "_run_batch", run_batch)


# P27 (Tool inputs): "arguments that are not a JSON object, such as a JSON string that
# holds one: arguments are parsed once ... get `INVALID_TOOL_INPUT` (status `error`), does
# nothing"; R1.8 for SubmitPlan ("a JSON string that holds the object").
# Bug: to tolerate providers that double-encode arguments, the host parses arguments that
# decode to a string a second time.
# A client sees a call whose arguments are "\"{\\\"path\\\":\\\"a.txt\\\"}\"" run (status
# ok, the file read or written, a SubmitPlan creating an approval) instead of
# INVALID_TOOL_INPUT; `turn/toolCall`'s input shows the object instead of the string.
# Trigger: a tool call whose arguments are a JSON string holding a valid input object.
@variant("ms-args-parsed-twice")
def args_parsed_twice() -> None:
    from reference_host import turns
    from reference_host.jsontext import JsonTextError, integral, loads
    from reference_host.provider_client import ToolCall

    original = turns._arguments

    def arguments(call: ToolCall) -> Any:
        value = original(call)
        if isinstance(value, str):
            try:
                return integral(loads(value))
            except (JsonTextError, RecursionError):
                return value
        return value

    patch(turns, "_arguments", arguments)


# P27 (Tool inputs): only "text holding a lone surrogate, an escaped `\ud800` without its
# pair" is INVALID_TOOL_INPUT; (Framing, P4) "an escaped surrogate pair, `\ud83d\ude00`,
# is one character, as JSON defines it, and is accepted".
# Bug: the host screens the raw argument text for escaped surrogates before parsing
# (json.loads lets lone ones through) and refuses every escaped high surrogate, paired or
# not.
# A client sees a Write/SubmitPlan whose content holds an emoji written as the escape pair
# refused with INVALID_TOOL_INPUT, while the same emoji as raw UTF-8 is accepted.
# Trigger: a tool call whose arguments spell a non-BMP character as "\ud83d\ude00".
@variant("ms-surrogate-pair-refused")
def surrogate_pair_refused() -> None:
    from reference_host import turns
    from reference_host.errors import HostError
    from reference_host.provider_client import ToolCall

    original = turns._arguments
    escaped_surrogate = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}")

    def arguments(call: ToolCall) -> Any:
        if escaped_surrogate.search(call.arguments):
            raise HostError(
                "INVALID_TOOL_INPUT", f"{call.name}: the arguments hold a surrogate escape"
            )
        return original(call)

    patch(turns, "_arguments", arguments)


# P7 (Permission modes): "A `requestId` names one question among all the host's sessions:
# two questions never share one, even when their models gave the calls the same id (call
# ids repeat across messages and sessions), and a question asked after a restart never
# has the id of one asked before it"; "A second answer to the same question ... gets
# `PERMISSION_REQUEST_NOT_FOUND` and changes nothing."
# Bug: the permission question's requestId is derived from the tool call's id
# ("perm-" + toolCallId), which looked unique.
# A client sees two questions with one requestId when two calls share an id: a repeated
# answer to the first question answers the second, and of two sessions waiting at once
# only the later question can be answered.
# Trigger: under `ask`, two messages (or two sessions) whose Bash/Write calls share an id.
@variant("ms-request-id-from-call-id")
def request_id_from_call_id() -> None:
    from reference_host import permissions
    from reference_host.errors import HostError
    from reference_host.provider_client import ToolCall
    from reference_host.storage import SessionRow
    from reference_host.turns import TurnRunner

    async def require_permission(
        self: TurnRunner,
        session: SessionRow,
        turn_id: str,
        call: ToolCall,
        args: dict[str, Any],
        unattended: bool,
    ) -> None:
        if unattended:
            raise HostError(
                "PERMISSION_UNAVAILABLE",
                f"{call.name} needs a permission answer and this run is unattended",
            )
        broker = self.host.permissions
        request_id = f"perm-{call.call_id}"
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        broker._open[request_id] = permissions._Request(session.id, answer)
        broker._notify(
            "permission/requested",
            {
                "sessionId": session.id,
                "turnId": turn_id,
                "requestId": request_id,
                "tool": call.name,
                "input": args,
            },
        )
        try:
            allowed = await answer
        finally:
            broker._open.pop(request_id, None)
        if not allowed:
            raise HostError("PERMISSION_DENIED", f"the user denied {call.name}")

    patch(TurnRunner, "_require_permission", require_permission)


# P9 (Errors and tool results): "Each tool call the model made is announced by one
# `turn/toolCall` before it runs (or is refused), and gets exactly one
# `turn/toolResult`".
# Bug: the turn loop runs tool calls only when the answer's finish_reason is
# "tool_calls"; any other reason ("stop", which some providers send with calls, or
# "length") is taken as the model's final answer and its calls are dropped.
# A client sees no `turn/toolCall`/`turn/toolResult` for those calls and the turn end
# `completed` at once; the tool never runs (a SubmitPlan creates no approval).
# Trigger: a streamed answer with a tool call whose finishing chunk says
# `finish_reason: "stop"`.
@variant("ms-calls-need-tool-calls-finish")
def calls_need_tool_calls_finish() -> None:
    from dataclasses import replace

    from reference_host import turns
    from reference_host.provider_client import AssistantReply

    original = vars(turns)["complete"]

    async def complete(*args: Any, **kwargs: Any) -> AssistantReply:
        answer: AssistantReply = await original(*args, **kwargs)
        if answer.tool_calls and answer.finish_reason != "tool_calls":
            return replace(answer, tool_calls=())
        return answer

    patch(turns, "complete", complete, wraps=True)


# P31 (The model provider): "Streaming (`"stream": true`) and single-response requests are
# both served; the choice is yours. Message `content` may be a string or an array of text
# parts. Either way the turn reports the assistant's text in `turn/text` notifications
# whose texts, joined in order, are the model's full answer".
# Bug: this host asks for single responses ("stream": false, a choice the contract
# allows) and, when the answer's content is an array of text parts, joins the parts'
# texts with a newline, as if each part were a paragraph.
# A client sees `turn/text` (and the transcript) read "Hello\nworld" for the parts
# "Hello" and "world"; a string content is reported right.
# Trigger: a single-response answer whose `message.content` is an array of two or more
# text parts.
@variant("ms-parts-joined-by-newline")
def parts_joined_by_newline() -> None:
    import httpx

    from reference_host import provider_client as pc
    from reference_host import turns

    def content_text(content: Any) -> str:
        if content is None:
            return ""
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            texts = [
                part["text"]
                for part in content
                if isinstance(part, dict) and isinstance(part.get("text"), str)
            ]
            return "\n".join(texts)
        raise pc.ProviderError("message content is neither text nor parts", kind="protocol")

    def tool_calls(message: Mapping[str, Any]) -> tuple[pc.ToolCall, ...]:
        items = message.get("tool_calls") or []
        if not isinstance(items, list):
            raise pc.ProviderError("'tool_calls' is not an array", kind="protocol")
        calls: list[pc.ToolCall] = []
        for index, item in enumerate(items):
            function = item.get("function") if isinstance(item, dict) else None
            if not isinstance(item, dict) or not isinstance(function, dict):
                raise pc.ProviderError("malformed tool call", kind="protocol")
            name, arguments, call_id = (
                function.get("name"),
                function.get("arguments", ""),
                item.get("id"),
            )
            if not isinstance(name, str) or not name:
                raise pc.ProviderError("a tool call has no function name", kind="protocol")
            if not isinstance(arguments, str) or not isinstance(call_id, str | None):
                raise pc.ProviderError("tool call id/arguments is not a string", kind="protocol")
            calls.append(pc.ToolCall(call_id or f"call_{index}", name, arguments))
        return tuple(calls)

    async def complete(
        client: httpx.AsyncClient,
        config: pc.ProviderConfig,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[pc.ToolSpec],
        on_text: Callable[[str], Awaitable[None]] | None = None,
        *,
        timeout: float = 60.0,  # noqa: ASYNC109 - as the streaming client's
    ) -> pc.AssistantReply:
        body: dict[str, Any] = {
            "model": config.model,
            "messages": [dict(message) for message in messages],
            "stream": False,
        }
        if tools:
            body["tools"] = [tool.to_wire() for tool in tools]
        headers = {"Accept": "application/json"}
        if config.api_key:
            headers["Authorization"] = f"Bearer {config.api_key}"
        url = config.base_url.rstrip("/") + "/chat/completions"
        try:
            async with client.stream(
                "POST", url, json=body, headers=headers, timeout=httpx.Timeout(timeout)
            ) as response:
                if not response.is_success:
                    raise await pc._http_error(response)
                raw = await response.aread()
        except httpx.TimeoutException as exc:
            raise pc.ProviderError(f"provider call timed out ({exc})", kind="timeout") from exc
        except httpx.HTTPError as exc:
            raise pc.ProviderError(f"provider request failed: {exc}", kind="http") from exc
        try:
            answer = json.loads(raw)
        except ValueError as exc:
            raise pc.ProviderError("the provider's answer is not JSON", kind="protocol") from exc
        if not isinstance(answer, dict) or "error" in answer:
            detail = pc._error_message(answer) or "not a completion"
            raise pc.ProviderError(f"provider reported an error: {detail}", kind="protocol")
        choices = answer.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise pc.ProviderError("the answer has no choice", kind="protocol")
        message = choices[0].get("message")
        if not isinstance(message, dict):
            raise pc.ProviderError("the choice has no message", kind="protocol")
        text = content_text(message.get("content"))
        calls = tool_calls(message)
        if text and on_text is not None:
            await on_text(text)
        finish = choices[0].get("finish_reason")
        return pc.AssistantReply(text, calls, finish if isinstance(finish, str) else None)

    patch(turns, "complete", complete)


# Stream framing clause (The model provider): "the bytes arrive in pieces of any size, a
# character's UTF-8 bytes split between two of them"; P31 (the model's full answer) and
# P27 (a tool call's input as the model sent it).
# Bug: the stream reader decodes each network read to text on its own (replacing what
# does not decode) before it splits lines, so a raw UTF-8 character (é, 😀, a CJK letter)
# whose bytes straddle two reads becomes U+FFFD replacement characters.
# A client sees "caf\ufffd\ufffd" in `turn/text` (and the transcript) where the model wrote
# "café", or a tool call's raw UTF-8 argument written to a file with U+FFFD in it.
# Trigger: a streamed answer written in raw (unescaped) UTF-8, delivered in pieces that
# cut a multi-byte character.
@variant("ms-utf8-split-replaced")
def utf8_split_replaced() -> None:
    from collections.abc import AsyncIterable, AsyncIterator

    from reference_host import provider_client, sse

    async def sse_lines(pieces: AsyncIterable[bytes]) -> AsyncIterator[str]:
        splitter = sse.LineSplitter()
        async for piece in pieces:
            text = piece.decode("utf-8", "replace")
            for line in splitter.feed(text.encode("utf-8")):
                yield line
        for line in splitter.flush():
            yield line

    patch(provider_client, "sse_lines", sse_lines)


# R1.5 (Planning): "Any other tool you do not have gets `UNKNOWN_TOOL`"; R1.9: a call to
# `ExitPlanMode` "gets `UNKNOWN_TOOL`"; (Framing) names on the wire are case-sensitive.
# Bug: to tolerate models that change a tool name's case, the host matches the name of a
# call to its tools without regard to case ("read", "BASH", "submitplan" run as Read,
# Bash, SubmitPlan).
# A client sees a call to "read" (a tool the host does not have) come back `ok` with the
# file's text, announced as `turn/toolResult` of tool "Read", instead of `denied` with
# UNKNOWN_TOOL.
# Trigger: a tool call whose name is a known tool's name in another case.
@variant("ms-tool-name-any-case")
def tool_name_any_case() -> None:
    from dataclasses import replace

    from reference_host import provider_client as pc
    from reference_host import turns

    original = pc._Accumulator.reply
    known = {name.lower(): name for name in turns._KNOWN}

    def reply(self: pc._Accumulator) -> pc.AssistantReply:
        answer = original(self)
        calls = tuple(
            replace(call, name=known.get(call.name.lower(), call.name))
            for call in answer.tool_calls
        )
        return replace(answer, tool_calls=calls)

    patch(pc._Accumulator, "reply", reply)


CASES = [
    BrokenCase(
        "ms-whitespace-piece-dropped",
        "sessions",
        "exactly_as_the_model_gave_it",
        "P31",
        "the turn/text notifications, joined, read",
    ),
    BrokenCase(
        "ms-assistant-text-stripped",
        "sessions",
        "earlier_answer_exactly",
        "R1.3",
        "did not give the model its earlier answer",
    ),
    BrokenCase(
        "ms-text-after-call-dropped",
        "sessions",
        "begun_a_tool_call",
        "P31",
        "beside its tool call",
    ),
    BrokenCase(
        "ms-finish-chunk-delta-skipped",
        "sessions",
        "beyond_ascii",
        "P31",
        "the turn/text notifications, joined, read",
    ),
    BrokenCase(
        "ms-calls-by-arrival",
        "plan_tools",
        "two_files_read_in_one_message",
        "P10",
        "the tool message answering Read call",
    ),
    BrokenCase(
        "ms-call-id-sanitised",
        "plan_tools",
        "two_files_read_in_one_message",
        "P10",
        "no tool message answers the Read call",
    ),
    BrokenCase(
        "ms-reused-id-last-result",
        "sessions",
        "keeps_its_own_result",
        "R1.3",
        "the last request did not carry",
    ),
    BrokenCase(
        "ms-batch-results-by-tool",
        "plan_tools",
        "two_files_read_in_one_message",
        "P10",
        "the tool message answering Read call",
    ),
    BrokenCase(
        "ms-args-parsed-twice",
        "submit_plan",
        "one_json_text",
        "R1.8",
        "expected INVALID_TOOL_INPUT",
    ),
    BrokenCase(
        "ms-surrogate-pair-refused",
        "artifact_integrity",
        "outside_the_bmp",
        "R2.1",
        "the host lists no approval",
    ),
    BrokenCase(
        "ms-request-id-from-call-id",
        "isolation",
        "name_their_calls_alike",
        "P7",
        "both sessions' permission questions carry the id",
    ),
    BrokenCase(
        "ms-calls-need-tool-calls-finish",
        "sessions",
        "beside_its_tool_calls_stays",
        "R1.3",
        "the model was never given the result of its Read call",
    ),
    BrokenCase(
        "ms-parts-joined-by-newline",
        "sessions",
        "beyond_ascii",
        "P31",
        "the turn/text notifications, joined, read",
    ),
    BrokenCase(
        "ms-utf8-split-replaced",
        "sessions",
        "beyond_ascii",
        "P31",
        "the turn/text notifications, joined, read",
    ),
    BrokenCase(
        "ms-tool-name-any-case",
        "plan_tools",
        "attempts_while_planning",
        "R1.5",
        "expected UNKNOWN_TOOL",
    ),
]
