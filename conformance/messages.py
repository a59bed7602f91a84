"""Reading the Chat Completions messages a host sent to the model provider.

A message's ``content`` may be a string, an array of parts (``{"type": "text", "text":
...}``) or null (an assistant message that only calls tools); the contract allows every
form, so every step that reads provider messages goes through :func:`message_text`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from conformance.mock_provider import RecordedRequest

__all__ = [
    "calls_in",
    "message_text",
    "messages_after_call",
    "request_answering",
    "request_text",
    "unanswered_tool_messages",
]


def message_text(message: dict[str, Any]) -> str:
    """The text of one message: its string content, or its text parts joined by newlines."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        ]
        return "\n".join(parts)
    return ""


def request_text(request: RecordedRequest, roles: Iterable[str] | None = None) -> str:
    """Every message text of ``request`` (optionally only of ``roles``), one per line."""
    wanted = None if roles is None else set(roles)
    return "\n".join(
        message_text(m) for m in request.messages if wanted is None or m.get("role") in wanted
    )


def calls_in(message: dict[str, Any]) -> list[str]:
    """The tool call ids an assistant message made."""
    calls = message.get("tool_calls")
    if message.get("role") != "assistant" or not isinstance(calls, list):
        return []
    return [str(c.get("id")) for c in calls if isinstance(c, dict)]


def request_answering(requests: Sequence[RecordedRequest], call_id: str) -> RecordedRequest | None:
    """The first request whose messages carry the assistant message that made ``call_id``
    (the request that gives the model the call's result)."""
    for request in requests:
        if any(call_id in calls_in(m) for m in request.messages):
            return request
    return None


def messages_after_call(request: RecordedRequest, call_id: str) -> list[dict[str, Any]]:
    """The messages of ``request`` that follow the assistant message that made ``call_id``."""
    for index, message in enumerate(request.messages):
        if call_id in calls_in(message):
            return request.messages[index + 1 :]
    return []


def answer_to_call(requests: Sequence[RecordedRequest], call_id: str) -> str | None:
    """The text of the tool message that answers ``call_id`` (by its ``tool_call_id``) in
    the first request that carries the call; None when no such message was sent."""
    request = request_answering(requests, call_id)
    for message in request.messages if request is not None else []:
        if message.get("role") == "tool" and str(message.get("tool_call_id")) == call_id:
            return message_text(message)
    return None


def unanswered_tool_messages(request: RecordedRequest) -> list[dict[str, Any]]:
    """Tool messages that answer no tool call of an earlier assistant message: a request
    holding one is not a valid Chat Completions request."""
    made: set[str] = set()
    orphans: list[dict[str, Any]] = []
    for message in request.messages:
        made.update(calls_in(message))
        if message.get("role") == "tool" and str(message.get("tool_call_id")) not in made:
            orphans.append(message)
    return orphans


def unanswered_calls(request: RecordedRequest) -> list[str]:
    """Ids of tool calls that an assistant message of ``request`` made and no tool message
    answers: a request holding one is not a valid Chat Completions request."""
    made: list[str] = []
    answered: set[str] = set()
    for message in request.messages:
        made.extend(calls_in(message))
        if message.get("role") == "tool":
            answered.add(str(message.get("tool_call_id")))
    return [call for call in made if call not in answered]
