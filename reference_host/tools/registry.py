"""The file tools the reference host offers the model, by name."""

from __future__ import annotations

from typing import Final

from reference_host.tools.base import Tool
from reference_host.tools.browser import BrowserPreview
from reference_host.tools.files import Edit, Glob, Grep, Read, Write

__all__ = ["FILE_TOOLS", "by_name"]

FILE_TOOLS: Final[tuple[Tool, ...]] = (Read(), Glob(), Grep(), BrowserPreview(), Write(), Edit())


def by_name() -> dict[str, Tool]:
    """A fresh mapping from tool name to the tool in FILE_TOOLS."""
    return {tool.name: tool for tool in FILE_TOOLS}
