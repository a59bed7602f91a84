"""Which tools each mode offers, by name; free of imports so that anything may use it."""

from __future__ import annotations

from typing import Final

PLAN_TOOL_NAMES: Final = (
    "Read",
    "Glob",
    "Grep",
    "BrowserPreview",
    "Bash",
    "EnterPlanMode",
    "SubmitPlan",
    "new_context",
)
"""§1: exactly what Plan offers the model."""

AGENT_TOOL_NAMES: Final = (
    "Read",
    "Glob",
    "Grep",
    "BrowserPreview",
    "Bash",
    "EnterPlanMode",
    "new_context",
    "Write",
    "Edit",
)

EDIT_TOOLS: Final = frozenset({"Write", "Edit"})
PLUGIN_PREFIXES: Final = ("mcp__", "plugin__")
