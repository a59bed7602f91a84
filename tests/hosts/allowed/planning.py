"""Allowed variations: what the host chooses about plan artifacts, plan tools and the way it
talks to the model provider."""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from hosts.registry import AllowedCase, patch, rewrite_provider_messages, variant
from reference_host import approvals, artifacts, turns
from reference_host.errors import HostError

PLANNING_AREAS = "plan_tools,submit_plan,artifact_integrity"


@variant("other-artifact-names")
def _other_artifact_names() -> None:
    # The file name under .pi/plan/ is the host's choice (§2); only the folder, the .md
    # suffix and uniqueness are required.
    patch(artifacts, "_unique_name", lambda: f"{uuid.uuid4()}.md")


@variant("writable-artifacts")
def _writable_artifacts() -> None:
    # The artifact's file mode is the host's choice: immutability is judged by effect (the
    # agent cannot write into the plan folder, a changed file cannot be approved).
    patch(artifacts, "READ_ONLY", 0o644)


def _as_parts(message: Mapping[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    if isinstance(content, str):
        return {**message, "content": [{"type": "text", "text": content}]}
    return dict(message)


@variant("array-content-messages")
def _array_content_messages() -> None:
    # Chat Completions accepts a message's content as a string or as an array of text
    # parts; this host always sends the array form.
    rewrite_provider_messages(lambda messages: [_as_parts(m) for m in messages])


def _without_descriptions(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _without_descriptions(v) for k, v in schema.items() if k != "description"}
    return schema


@variant("terse-tool-definitions")
def _terse_tool_definitions() -> None:
    # How the tools are described to the model is the host's own wording: this host offers
    # every tool with its name as its description and no property descriptions. What each
    # tool accepts (P27) is unchanged.
    original = turns.offered_tools

    def offered_tools(mode: str) -> list[Any]:
        return [
            replace(spec, description=spec.name, parameters=_without_descriptions(spec.parameters))
            for spec in original(mode)
        ]

    patch(turns, "offered_tools", offered_tools)


@variant("keeps-partial-artifact-on-failure")
def _keeps_partial_artifact_on_failure() -> None:
    # A failed write must create no approval; whether a partly written file stays behind in
    # the plan folder is not part of the contract.
    original = approvals.write_artifact

    def write_artifact(root: str, content: bytes, fault: artifacts.FaultCheck) -> Any:
        try:
            return original(root, content, fault)
        except HostError as failure:
            if failure.code == "ARTIFACT_WRITE_FAILED":
                folder = Path(root, *artifacts.PLAN_DIR)
                if folder.is_dir() and not folder.is_symlink():
                    partial = folder / f"partial-{os.urandom(4).hex()}.md"
                    partial.write_bytes(content[: len(content) // 2])
            raise

    patch(approvals, "write_artifact", write_artifact)


@variant("new-context-keeps-the-current-prompt")
def _new_context_keeps_the_current_prompt() -> None:
    # After new_context the model sees the summary instead of the earlier conversation;
    # whether the prompt of the turn that reset the context stays with it is the host's
    # choice.
    original = turns.TurnRunner._history

    async def history(self: turns.TurnRunner, session_id: str) -> list[dict[str, Any]]:
        kept = await original(self, session_id)
        entries = await self.host.storage.transcript(session_id)
        contents = [content for _seq, _turn, _role, content, _at in entries]
        resets = [i for i, c in enumerate(contents) if c.get("contextReset")]
        if not resets:
            return kept
        prompts = [c for c in contents[: resets[-1]] if c.get("role") == "user"]
        return [kept[0], prompts[-1], *kept[1:]] if prompts else kept

    patch(turns.TurnRunner, "_history", history)


CASES = [
    AllowedCase(
        "other-artifact-names",
        "artifact_integrity,submit_plan,approval",
        why="the artifact's file name is host-owned",
    ),
    AllowedCase(
        "terse-tool-definitions",
        "plan_tools",
        "not runaway",
        why="the tools' descriptions are the host's wording; P27 judges what they accept",
    ),
    AllowedCase(
        "writable-artifacts",
        "artifact_integrity",
        why="the artifact's file mode is the host's choice",
    ),
    AllowedCase(
        "array-content-messages",
        PLANNING_AREAS,
        why="provider message content may be a string or an array of text parts",
    ),
    AllowedCase(
        "keeps-partial-artifact-on-failure",
        "artifact_integrity",
        "failed_write or failed_flush or cannot_be_written",
        why="a failed write must create no approval; a leftover partial file is allowed",
    ),
    AllowedCase(
        "new-context-keeps-the-current-prompt",
        "plan_tools",
        "new_context",
        why="only the earlier conversation must give way to the summary",
    ),
]
