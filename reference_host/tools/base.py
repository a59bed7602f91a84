"""What every model-facing tool shares: its context, its shape and argument validation."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from reference_host.errors import HostError
from reference_host.provider_client import ToolSpec
from reference_host.schema_subset import first_problem

__all__ = ["Tool", "ToolContext", "validate_args"]


@dataclass(frozen=True)
class ToolContext:
    """The session and turn a tool call runs in; ``workspace_root`` is None without a project."""

    session_id: str
    turn_id: str
    workspace_root: Path | None


class Tool(Protocol):
    """A tool offered to the model: ``run`` returns the text result or raises HostError."""

    @property
    def name(self) -> str: ...

    @property
    def spec(self) -> ToolSpec: ...

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> str: ...


def validate_args(spec: ToolSpec, args: Any) -> dict[str, Any]:
    """``args`` checked against ``spec.parameters`` (Draft 2020-12), or INVALID_TOOL_INPUT."""
    try:
        problem = first_problem(spec.parameters, args)
    except RecursionError:
        raise HostError("INVALID_TOOL_INPUT", f"{spec.name}: arguments nested too deeply") from None
    if problem is not None:
        field = "/".join(str(part) for part in problem.path) or "arguments"
        raise HostError(
            "INVALID_TOOL_INPUT",
            f"{spec.name}: {field}: {problem.message}",
            {"tool": spec.name, "field": field},
        )
    if not isinstance(args, dict):  # only reachable with a schema that is not an object schema
        raise HostError("INVALID_TOOL_INPUT", f"{spec.name}: arguments must be a JSON object")
    return args
