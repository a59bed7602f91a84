"""Broken hosts: a held-out set (reading the model provider's event stream and assembling
the answer from it), written from the contract alone.

Every variant replaces one piece of ``reference_host.provider_client`` (or, for the
assembled assistant message, ``reference_host.turns``) with a copy that differs in one
mistake. The copies keep the reference's checks and error kinds everywhere else.
"""

from __future__ import annotations

import json
from typing import Any

from hosts.registry import BrokenCase, patch, variant

# --------------------------------------------------------------------------------------
# Assembling tool calls
# --------------------------------------------------------------------------------------


# Contract (implementing-a-host.md, The model provider): "A streamed answer holding several
# tool calls may send their pieces interleaved: each piece names its call by `index`, and a
# call's arguments are its pieces joined in order." (P27: turn/toolCall's `input` is the
# call's arguments as the model sent them.)
# Bug: the accumulator stores a call's arguments the way it stores its name: each
# `function.arguments` piece replaces what came before instead of being appended, as if
# every delta carried the arguments so far.
# Observed: a call whose arguments arrive over several deltas is announced in
# turn/toolCall with only its last piece as `input` (raw text, not the object), and gets
# INVALID_TOOL_INPUT instead of running.
# Trigger: one tool call, `{"path": "a.txt"}` streamed as `{"pa`, `th": "a`, `.txt"}` in
# three chunks.
@variant("sse-args-replaced-per-piece")
def args_replaced_per_piece() -> None:
    from reference_host import provider_client as pc

    async def feed_delta(self: Any, delta: dict[str, Any], data: str) -> None:
        content = delta.get("content")
        if content is not None and not isinstance(content, str):
            raise pc._protocol("'delta.content' is not a string", data)
        if content:
            self.text.append(content)
            if self.on_text is not None:
                await self.on_text(content)
        tool_calls = delta.get("tool_calls")
        if tool_calls is None:
            return
        if not isinstance(tool_calls, list):
            raise pc._protocol("'delta.tool_calls' is not an array", data)
        for position, item in enumerate(tool_calls):
            if not isinstance(item, dict):
                raise pc._protocol("a tool call delta is not an object", data)
            index = item.get("index", position)
            function = item.get("function") or {}
            if not isinstance(index, int) or not isinstance(function, dict):
                raise pc._protocol("malformed tool call delta", data)
            call = self.calls.setdefault(index, pc._PartialCall())
            call_id, name, arguments = (
                item.get("id"),
                function.get("name"),
                function.get("arguments"),
            )
            for value in (call_id, name, arguments):
                if value is not None and not isinstance(value, str):
                    raise pc._protocol("tool call id/name/arguments is not a string", data)
            if call_id:
                call.call_id = call_id
            if name and name != call.name:
                call.name = name if not call.name else call.name + name
            if arguments:
                call.arguments = [arguments]  # the bug: replaces the pieces so far

    patch(pc._Accumulator, "_feed_delta", feed_delta)


# Contract (implementing-a-host.md, The model provider): "A streamed answer holding several
# tool calls may send their pieces interleaved: each piece names its call by `index`, and a
# call's arguments are its pieces joined in order."
# Bug: the accumulator ignores `index` and follows the common non-interleaved shape: a
# piece carrying a new `id` starts a new call, and every other piece belongs to the call
# started last. Calls streamed one after the other come out right.
# Observed: with interleaved pieces, the arguments of the first call are appended to the
# second call's (e.g. `{"path": "a.txt"}{"path": "b.txt"}`, raw text in turn/toolCall's
# `input` and INVALID_TOOL_INPUT), and the first call keeps no arguments (read as `{}`).
# Trigger: two calls, both opened (index 0, id, name; index 1, id, name) before any of
# their arguments, then argument pieces alternating index 0, 1, 0, 1.
@variant("sse-calls-follow-latest-id")
def calls_follow_latest_id() -> None:
    from reference_host import provider_client as pc

    async def feed_delta(self: Any, delta: dict[str, Any], data: str) -> None:
        content = delta.get("content")
        if content is not None and not isinstance(content, str):
            raise pc._protocol("'delta.content' is not a string", data)
        if content:
            self.text.append(content)
            if self.on_text is not None:
                await self.on_text(content)
        tool_calls = delta.get("tool_calls")
        if tool_calls is None:
            return
        if not isinstance(tool_calls, list):
            raise pc._protocol("'delta.tool_calls' is not an array", data)
        for item in tool_calls:
            if not isinstance(item, dict):
                raise pc._protocol("a tool call delta is not an object", data)
            function = item.get("function") or {}
            if not isinstance(function, dict):
                raise pc._protocol("malformed tool call delta", data)
            call_id, name, arguments = (
                item.get("id"),
                function.get("name"),
                function.get("arguments"),
            )
            for value in (call_id, name, arguments):
                if value is not None and not isinstance(value, str):
                    raise pc._protocol("tool call id/name/arguments is not a string", data)
            # the bug: a new id opens a new call; any other piece continues the latest one
            latest = self.calls[max(self.calls)] if self.calls else None
            if latest is None or (call_id and call_id != latest.call_id):
                latest = self.calls.setdefault(len(self.calls), pc._PartialCall())
            call = latest
            if call_id:
                call.call_id = call_id
            if name and name != call.name:
                call.name = name if not call.name else call.name + name
            if arguments:
                call.arguments.append(arguments)

    patch(pc._Accumulator, "_feed_delta", feed_delta)


# --------------------------------------------------------------------------------------
# Assembling the text
# --------------------------------------------------------------------------------------


# Contract (implementing-a-host.md, The model provider, P31): the turn reports the
# assistant's text in turn/text notifications whose texts, joined in order, are the
# model's full answer, "and so is the text the model writes beside its tool calls, before,
# between or after their pieces"; (Sessions, R1.3) the conversation holds "also the text it
# wrote beside its tool calls".
# Bug: the delta handler treats a delta as either text or tool calls: when a delta carries
# `tool_calls`, its `content` is never looked at. Text in deltas of its own is kept.
# Observed: the text of a chunk whose delta holds both `content` and `tool_calls` is missing
# from turn/text, from the assistant's transcript entry and from the next request.
# Trigger: a chunk `{"delta": {"content": "Reading it now.", "tool_calls": [{"index": 0,
# "id": "c1", "function": {"name": "Read", "arguments": "{...}"}}]}}`.
@variant("sse-content-beside-calls-in-delta-dropped")
def content_beside_calls_in_delta_dropped() -> None:
    from reference_host import provider_client as pc

    original = pc._Accumulator._feed_delta

    async def feed_delta(self: Any, delta: dict[str, Any], data: str) -> None:
        if delta.get("tool_calls") is not None:  # the bug: a tool-call delta has no text
            delta = {key: value for key, value in delta.items() if key != "content"}
        await original(self, delta, data)

    patch(pc._Accumulator, "_feed_delta", feed_delta, wraps=True)


# Contract (implementing-a-host.md, Sessions, turns and boundaries, R1.3): "The
# conversation holds the model's own words too, exactly as it gave them ..., also the text
# it wrote beside its tool calls"; (The model provider, P31) the text beside tool calls is
# part of the model's full answer.
# Bug: the assistant message built from the assembled reply follows the shape of the API's
# examples, `content: null` whenever there are `tool_calls`; the streamed text was sent as
# turn/text, but it is not stored with the message.
# Observed: session/transcript's assistant entry for a message with tool calls has
# `content: null`, and the next provider request's assistant message lacks the text; the
# turn/text notifications are right.
# Trigger: any answer with text and a tool call ("Let me look." then a Read call), then
# read the transcript or the next request.
@variant("sse-calls-message-loses-text")
def calls_message_loses_text() -> None:
    from reference_host import turns

    original = turns._assistant_message

    def assistant_message(reply: Any) -> dict[str, Any]:
        message = original(reply)
        if reply.tool_calls:
            message["content"] = None  # the bug
        return message

    patch(turns, "_assistant_message", assistant_message, wraps=True)


# Contract (implementing-a-host.md, The model provider, P31): turn/text notifications
# "whose texts, joined in order, are the model's full answer ...: a piece that is only
# whitespace is sent too".
# Bug: to spare the client empty-looking notifications, a text delta is forwarded as
# turn/text only when it holds something other than whitespace; it is still part of the
# stored answer.
# Observed: the turn/text texts joined miss the blank pieces (`"Hello"`, `" "`, `"world"`
# reads `"Helloworld"`), while the transcript keeps `"Hello world"`.
# Trigger: a stream whose content deltas include one that is only spaces or a newline.
@variant("sse-blank-text-not-sent")
def blank_text_not_sent() -> None:
    from reference_host import provider_client as pc

    original = pc._Accumulator._feed_delta

    async def feed_delta(self: Any, delta: dict[str, Any], data: str) -> None:
        content = delta.get("content")
        if isinstance(content, str) and content and not content.strip():
            self.text.append(content)  # kept in the answer, but not sent (the bug)
            delta = {key: value for key, value in delta.items() if key != "content"}
        await original(self, delta, data)

    patch(pc._Accumulator, "_feed_delta", feed_delta, wraps=True)


# Contract (implementing-a-host.md, The model provider, P31): the turn/text texts, joined
# in order, are the model's full answer; (R1.3) the conversation holds the model's words
# exactly as it gave them.
# Bug: once a choice carries a `finish_reason`, the chunk is taken to be the closing marker
# and its delta is not read (the implementer's provider always sent the finish reason in a
# chunk of its own, with an empty delta).
# Observed: when the last piece of text (or of a tool call) comes in the same chunk as
# `finish_reason`, it is missing from turn/text and the transcript (or the call is missing
# or incomplete).
# Trigger: `{"choices": [{"index": 0, "delta": {"content": " world"}, "finish_reason":
# "stop"}]}` as the last chunk before [DONE].
@variant("sse-finish-chunk-delta-skipped")
def finish_chunk_delta_skipped() -> None:
    from reference_host import provider_client as pc

    async def feed(self: Any, data: str) -> None:
        try:
            chunk = json.loads(data)
        except ValueError as exc:
            raise pc.ProviderError(
                f"provider sent an unparseable stream chunk: {data[:200]!r}", kind="protocol"
            ) from exc
        if not isinstance(chunk, dict):
            raise pc._protocol("stream chunk is not a JSON object", data)
        if "error" in chunk:
            raise pc.ProviderError(
                f"provider reported an error mid-stream: {pc._error_message(chunk) or data[:200]}",
                kind="stream",
            )
        choices = chunk.get("choices", [])
        if not isinstance(choices, list):
            raise pc._protocol("'choices' is not an array", data)
        for choice in choices:
            if not isinstance(choice, dict):
                raise pc._protocol("a choice is not an object", data)
            if choice.get("index", 0) != 0:
                continue
            finish = choice.get("finish_reason")
            if isinstance(finish, str):
                self.finish_reason = finish
                continue  # the bug: the closing chunk's delta is not read
            delta = choice.get("delta") or {}
            if not isinstance(delta, dict):
                raise pc._protocol("'delta' is not an object", data)
            await self._feed_delta(delta, data)

    patch(pc._Accumulator, "feed", feed)


# --------------------------------------------------------------------------------------
# How the stream ends, and failed streams
# --------------------------------------------------------------------------------------


# Contract (implementing-a-host.md, The model provider, P25): "A streamed answer ends with
# `[DONE]`. One that breaks off before it (the connection closed, or the body ended without
# `[DONE]`) ... ends the turn `failed` with `PROVIDER_ERROR`".
# Bug: the reader loops until the body ends and treats its end as the end of the answer;
# [DONE] stops the loop early but its absence is not checked.
# Observed: a stream whose body ends cleanly after some chunks, without [DONE], ends the
# turn `completed` with the text received (turns.state `completed`), instead of `failed`
# with PROVIDER_ERROR.
# Trigger: `data: {"choices": [{"index": 0, "delta": {"content": "Hel"}}]}` and then the
# end of the body (Content-Length or the last chunk of a chunked body), no [DONE].
@variant("sse-end-of-body-is-done")
def end_of_body_is_done() -> None:
    from reference_host import provider_client as pc

    original = pc._read_events

    async def read_events(response: Any, acc: Any) -> bool:
        await original(response, acc)
        return True  # the bug: whether [DONE] came is not looked at

    patch(pc, "_read_events", read_events, wraps=True)


# Contract (implementing-a-host.md, The model provider, P25): a streamed answer "that
# carries an `error` event ... ends the turn `failed` with `PROVIDER_ERROR`".
# Bug: the chunk handler reads only `choices`; a chunk `{"error": {...}}` has none, so it
# is passed over like a keep-alive.
# Observed: a stream that sends an error event and then [DONE] ends the turn `completed`
# (with the text before the error) instead of `failed` with PROVIDER_ERROR. (An error
# event that is the last thing before the body ends still fails the turn, for the missing
# [DONE].)
# Trigger: `data: {"error": {"message": "overloaded", "type": "server_error"}}` followed by
# `data: [DONE]`.
@variant("sse-error-event-passed-over")
def error_event_passed_over() -> None:
    from reference_host import provider_client as pc

    original = pc._Accumulator.feed

    async def feed(self: Any, data: str) -> None:
        try:
            chunk = json.loads(data)
        except ValueError:
            chunk = None
        if isinstance(chunk, dict) and "error" in chunk:
            return  # the bug: no choices, nothing to do
        await original(self, data)

    patch(pc._Accumulator, "feed", feed, wraps=True)


# Contract (implementing-a-host.md, The model provider, P25): a streamed answer "with a
# `data` piece that is not JSON or not a JSON object (also when `[DONE]` follows), ends the
# turn `failed` with `PROVIDER_ERROR`".
# Bug: a lenient reader: a `data` piece that does not parse as JSON is logged and skipped,
# so a stray line from a proxy cannot kill a turn. (A piece that parses to a non-object is
# still refused.)
# Observed: `data: this is not json` between good chunks, then [DONE], ends the turn
# `completed` with the text of the good chunks, instead of `failed` with PROVIDER_ERROR.
# Trigger: a stream with a `data` piece that is not JSON, followed by [DONE].
@variant("sse-unparseable-chunk-skipped")
def unparseable_chunk_skipped() -> None:
    from reference_host import provider_client as pc

    original = pc._Accumulator.feed

    async def feed(self: Any, data: str) -> None:
        try:
            json.loads(data)
        except ValueError:
            return  # the bug: skipped instead of failing the stream
        await original(self, data)

    patch(pc._Accumulator, "feed", feed, wraps=True)


# Contract: the stream ends with [DONE] and fails only as the contract lists
# (implementing-a-host.md, The model provider, P25: a break before [DONE], an `error`
# event, a `data` piece that is not JSON or not a JSON object); any other stream is an
# answer, and the turn reports it (P31). A chunk whose `choices` is empty (the usage-only
# chunk that OpenAI-compatible servers send before [DONE]) is a JSON object, none of these.
# Bug: the chunk check insists on a non-empty `choices` array (every chunk the implementer
# saw had one) and refuses any other chunk as malformed.
# Observed: a stream with a `{"choices": [], "usage": {...}}` chunk before [DONE] ends the
# turn `failed` with PROVIDER_ERROR instead of `completed` with its text.
# Trigger: the content chunks, a finish chunk, then `data: {"id": "x", "object":
# "chat.completion.chunk", "choices": [], "usage": {"prompt_tokens": 5,
# "completion_tokens": 2, "total_tokens": 7}}`, then [DONE].
@variant("sse-usage-chunk-refused")
def usage_chunk_refused() -> None:
    from reference_host import provider_client as pc

    original = pc._Accumulator.feed

    async def feed(self: Any, data: str) -> None:
        try:
            chunk = json.loads(data)
        except ValueError:
            chunk = None
        if isinstance(chunk, dict) and "error" not in chunk and chunk.get("choices") == []:
            raise pc._protocol("'choices' is empty", data)  # the bug
        await original(self, data)

    patch(pc._Accumulator, "feed", feed, wraps=True)


# --------------------------------------------------------------------------------------
# Server-sent event framing
#
# The provider is "an OpenAI-compatible Chat Completions server" streaming with
# `"stream": true` (implementing-a-host.md, The model provider): a text/event-stream whose
# framing is the server-sent events format (lines ended by LF, CR LF or CR; `:` comment
# lines; an event ends at a blank line and may hold several `data` lines, joined by LF).
# The framing bugs below make the host fail or mangle such a stream; the sentence they
# break is P31 (turn/text joined is the model's full answer; R1.3 the conversation holds
# it exactly as given) or P25 (only the listed streams end the turn failed).
# --------------------------------------------------------------------------------------


# Bug: the reader splits each network read into lines on its own (each read is assumed to
# end at a line end), so it keeps no partial line between reads; the bytes are decoded
# correctly across reads (httpx's text decoder).
# Observed: an event whose bytes reach the host in two reads, split inside a line, fails
# the turn with PROVIDER_ERROR (the first half is handed to the JSON parser, the second is
# read as an unknown field) instead of completing it with the text.
# Trigger: the provider writes `data: {"choices": [{"index": 0, "delta": {"content": "Hel`,
# flushes, waits a little, then writes `lo"}}]}\n\n`.
@variant("sse-partial-line-per-read")
def partial_line_per_read() -> None:
    from reference_host import provider_client as pc

    async def read_events(response: Any, acc: Any) -> bool:
        data_lines: list[str] = []
        async for text in response.aiter_text():
            for line in text.splitlines():  # the bug: the read's last line may be partial
                if not line:
                    if data_lines:
                        data, data_lines = "\n".join(data_lines), []
                        if data.strip() == pc._DONE:
                            return True
                        await acc.feed(data)
                    continue
                if line.startswith(":"):
                    continue
                name, _, value = line.partition(":")
                if name == "data":
                    data_lines.append(value.removeprefix(" "))
        if data_lines:
            data = "\n".join(data_lines)
            if data.strip() == pc._DONE:
                return True
            await acc.feed(data)
        return False

    patch(pc, "_read_events", read_events)


# Bug: the reader decodes each network read as UTF-8 on its own (with replacement, so a bad
# byte cannot kill a turn) and then splits lines across reads correctly.
# Observed: a non-ASCII character whose UTF-8 bytes are split between two reads reaches
# turn/text and the transcript as U+FFFD replacement characters (`"caf\ufffd\ufffd"`
# instead of `"café"`); the turn completes.
# Trigger: a chunk written unescaped (`{"content": "café"}` as UTF-8, not `\u00e9`), its
# bytes flushed in two writes split inside the two bytes of `é`, with a pause between.
@variant("sse-utf8-decoded-per-read")
def utf8_decoded_per_read() -> None:
    from httpx._decoders import LineDecoder

    from reference_host import provider_client as pc

    async def read_events(response: Any, acc: Any) -> bool:
        lines = LineDecoder()
        data_lines: list[str] = []

        async def on_line(line: str) -> bool:
            nonlocal data_lines
            line = line.rstrip("\r")
            if not line:
                if data_lines:
                    data, data_lines = "\n".join(data_lines), []
                    if data.strip() == pc._DONE:
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
            text = piece.decode("utf-8", "replace")  # the bug: one read at a time
            for line in lines.decode(text):
                if await on_line(line):
                    return True
        for line in lines.flush():
            if await on_line(line):
                return True
        if data_lines:
            data = "\n".join(data_lines)
            if data.strip() == pc._DONE:
                return True
            await acc.feed(data)
        return False

    patch(pc, "_read_events", read_events)


# Bug: the reader splits the body on LF itself and tests for the blank line that ends an
# event with `line.strip()`, so CR LF framing dispatches events and the JSON parser
# ignores the CR left at the end of each `data` value; but it recognises the end marker
# only when the value is exactly `[DONE]`.
# Observed: with CR LF line ends, `data: [DONE]\r\n` leaves `[DONE]\r`, which is handed to
# the JSON parser: the turn ends `failed` with PROVIDER_ERROR instead of `completed`
# (turn/text was sent in full before).
# Trigger: any answer whose lines end with CR LF (`data: {...}\r\n\r\n ... data:
# [DONE]\r\n\r\n`).
@variant("sse-crlf-done-not-recognised")
def crlf_done_not_recognised() -> None:
    from reference_host import provider_client as pc

    async def read_events(response: Any, acc: Any) -> bool:
        data_lines: list[str] = []
        buffer = ""

        async def on_line(line: str) -> bool:
            nonlocal data_lines
            if not line.strip():
                if data_lines:
                    data, data_lines = "\n".join(data_lines), []
                    if data == pc._DONE:  # the bug: `[DONE]\r` is not the marker
                        return True
                    await acc.feed(data)
                return False
            if line.startswith(":"):
                return False
            name, _, value = line.partition(":")
            if name == "data":
                data_lines.append(value.removeprefix(" "))
            return False

        async for text in response.aiter_text():
            buffer += text
            *complete, buffer = buffer.split("\n")
            for line in complete:
                if await on_line(line):
                    return True
        if buffer and await on_line(buffer):
            return True
        if data_lines:
            data = "\n".join(data_lines)
            if data == pc._DONE:
                return True
            await acc.feed(data)
        return False

    patch(pc, "_read_events", read_events)


# Bug: a blank line always dispatches an event, also when the event had no `data` line:
# the empty data is handed to the JSON parser.
# Observed: a keep-alive comment event (`: keep-alive` and a blank line), or an extra blank
# line between events, fails the turn with PROVIDER_ERROR instead of being ignored.
# Trigger: `: keep-alive\n\n` (or `: OPENROUTER PROCESSING\n\n`) before or between the
# content chunks.
@variant("sse-empty-event-parsed")
def empty_event_parsed() -> None:
    from reference_host import provider_client as pc

    async def read_events(response: Any, acc: Any) -> bool:
        data_lines: list[str] = []
        async for line in response.aiter_lines():
            line = line.rstrip("\r")
            if not line:
                data, data_lines = "\n".join(data_lines), []  # the bug: even with no data
                if data.strip() == pc._DONE:
                    return True
                await acc.feed(data)
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            if name == "data":
                data_lines.append(value.removeprefix(" "))
        if data_lines:
            data = "\n".join(data_lines)
            if data.strip() == pc._DONE:
                return True
            await acc.feed(data)
        return False

    patch(pc, "_read_events", read_events)


# Bug: each `data` line is handed to the JSON parser as it is read, as if an event could
# hold only one; the blank line that ends an event is not waited for.
# Observed: an event whose JSON is spread over several `data` lines fails the turn with
# PROVIDER_ERROR (each line alone is not JSON) instead of being read as one chunk.
# Trigger: `data: {"choices": [{"index": 0,\ndata: "delta": {"content": "Hi"}}]}\n\n`.
@variant("sse-data-line-is-event")
def data_line_is_event() -> None:
    from reference_host import provider_client as pc

    async def read_events(response: Any, acc: Any) -> bool:
        async for line in response.aiter_lines():
            line = line.rstrip("\r")
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            if name == "data":
                data = value.removeprefix(" ")  # the bug: one line, one event
                if data.strip() == pc._DONE:
                    return True
                await acc.feed(data)
        return False

    patch(pc, "_read_events", read_events)


CASES = [
    BrokenCase(
        "sse-args-replaced-per-piece",
        "plan_tools",
        "two_files_read_in_one_message",
        "P10",
        "the tool message answering Read call",
    ),
    BrokenCase(
        "sse-calls-follow-latest-id",
        "plan_tools",
        "two_files_read_in_one_message",
        "P10",
        "the tool message answering Read call",
    ),
    BrokenCase(
        "sse-content-beside-calls-in-delta-dropped",
        "sessions",
        "beside_its_tool_calls_is_shown",
        "P31",
        "beside its tool call",
    ),
    BrokenCase(
        "sse-calls-message-loses-text",
        "sessions",
        "beside_its_tool_calls_stays",
        "R1.3",
        "the model's words beside its Read call were dropped",
    ),
    BrokenCase(
        "sse-blank-text-not-sent",
        "sessions",
        "exactly_as_the_model_gave_it",
        "P31",
        "the turn/text notifications, joined, read",
    ),
    BrokenCase(
        "sse-finish-chunk-delta-skipped",
        "sessions",
        "beyond_ascii",
        "P31",
        "the turn/text notifications, joined, read",
    ),
    BrokenCase(
        "sse-end-of-body-is-done",
        "sessions",
        "breaks_off",
        "P25",
        "expected failed with PROVIDER_ERROR",
    ),
    BrokenCase(
        "sse-error-event-passed-over",
        "sessions",
        "breaks_off",
        "P25",
        "expected failed with PROVIDER_ERROR",
    ),
    BrokenCase(
        "sse-unparseable-chunk-skipped",
        "sessions",
        "breaks_off",
        "P25",
        "expected failed with PROVIDER_ERROR",
    ),
    BrokenCase(
        "sse-usage-chunk-refused",
        "sessions",
        "beyond_ascii",
        "P31",
        "the turn ended failed",
    ),
    BrokenCase(
        "sse-partial-line-per-read",
        "sessions",
        "beyond_ascii",
        "P31",
        "the turn ended failed",
    ),
    BrokenCase(
        "sse-utf8-decoded-per-read",
        "sessions",
        "beyond_ascii",
        "P31",
        "the turn ended failed",
    ),
    BrokenCase(
        "sse-crlf-done-not-recognised",
        "sessions",
        "beyond_ascii",
        "P31",
        "the turn ended failed",
    ),
    BrokenCase(
        "sse-empty-event-parsed",
        "sessions",
        "beyond_ascii",
        "P31",
        "the turn ended failed",
    ),
    BrokenCase(
        "sse-data-line-is-event",
        "sessions",
        "beyond_ascii",
        "P31",
        "the turn ended failed",
    ),
]
