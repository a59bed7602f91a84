"""Tools whose effect is on the host itself (plan submission, mode, context) and Bash.

Their specs live here; the turn runner carries out their effects, because they change
session and approval state rather than the workspace.
"""

from __future__ import annotations

from typing import Final

from reference_host.provider_client import ToolSpec
from reference_host.tools.names import (
    AGENT_TOOL_NAMES,
    EDIT_TOOLS,
    PLAN_TOOL_NAMES,
    PLUGIN_PREFIXES,
)

__all__ = [
    "AGENT_TOOL_NAMES",
    "BASH",
    "EDIT_TOOLS",
    "ENTER_PLAN_MODE",
    "NEW_CONTEXT",
    "PLAN_TOOL_NAMES",
    "PLUGIN_PREFIXES",
    "SUBMIT_PLAN",
]

SUBMIT_PLAN: Final = ToolSpec(
    name="SubmitPlan",
    description=(
        "Submit the finished plan for the user's approval. Call it alone, as the only tool "
        "call of your message. The markdown is saved unchanged as the plan artifact."
    ),
    parameters={
        "type": "object",
        "properties": {
            "title": {"type": "string", "description": "Short title of the plan."},
            "markdown": {"type": "string", "description": "The whole plan, in Markdown."},
            "question": {"type": "string", "description": "What the user is asked to decide."},
        },
        "required": ["title", "markdown", "question"],
        "additionalProperties": False,
    },
)

ENTER_PLAN_MODE: Final = ToolSpec(
    name="EnterPlanMode",
    description="Switch this session to Plan mode to investigate and propose a plan.",
    parameters={"type": "object", "properties": {}, "additionalProperties": False},
)

NEW_CONTEXT: Final = ToolSpec(
    name="new_context",
    description=(
        "Start a fresh context: later requests carry only your summary and what follows it."
    ),
    parameters={
        "type": "object",
        "properties": {"summary": {"type": "string", "description": "What to carry over."}},
        "required": ["summary"],
        "additionalProperties": False,
    },
)

BASH: Final = ToolSpec(
    name="Bash",
    description=(
        "Run a command with the session's shell in the workspace. Output streams to the user."
    ),
    parameters={
        "type": "object",
        "properties": {
            "command": {"type": "string", "minLength": 1},
            "timeout_ms": {"type": "integer", "minimum": 1, "maximum": 3_600_000},
        },
        "required": ["command"],
        "additionalProperties": False,
    },
)
