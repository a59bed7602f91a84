"""Broken hosts that assume a workspace path is plain: no spaces, only ASCII, nothing a
shell or a URI would read specially. The suite varies each scenario's workspace name
(`conformance/workspace_names.py`), so these are caught wherever the name is not plain."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from typing import Any

from hosts.registry import BrokenCase, patch, variant
from reference_host import commands
from reference_host import host as host_module
from reference_host.errors import HostError
from reference_host.shells import Shell


@variant("command-cwd-by-unquoted-cd")
def _command_cwd_by_unquoted_cd() -> None:
    # Commands start in the workspace by a `cd` the host writes into the command line,
    # without quoting the path.
    original = commands._spawn

    async def spawn(shell: Shell, command: str, cwd: Path, command_id: str) -> Any:
        return await original(shell, f"cd {cwd} && {command}", Path("/"), command_id)

    patch(commands, "_spawn", spawn)


@variant("workspace-root-normalized-to-nfd")
def _workspace_root_normalized_to_nfd() -> None:
    # The host stores and reports the workspace root in Unicode normal form D, as some
    # file systems spell names; on this one the decomposed name is another folder.
    original = host_module.Host.session_create

    async def session_create(self: host_module.Host, params: dict[str, Any]) -> dict[str, Any]:
        root = params.get("workspaceRoot")
        if isinstance(root, str):
            params = {**params, "workspaceRoot": unicodedata.normalize("NFD", root)}
        return await original(self, params)

    patch(host_module.Host, "session_create", session_create)


_PLAIN_PATH = re.compile(r"[A-Za-z0-9_./-]+")


@variant("refuses-unusual-workspace-names")
def _refuses_unusual_workspace_names() -> None:
    # "Safe" paths only: a workspace root with a space, a non-ASCII letter or punctuation
    # is refused as invalid.
    original = host_module.validate_root

    def validate_root(root: str) -> Path:
        if not _PLAIN_PATH.fullmatch(root):
            raise HostError("WORKSPACE_INVALID", f"workspace root {root!r} has unsafe characters")
        return original(root)

    patch(host_module, "validate_root", validate_root)


CASES = [
    BrokenCase(
        "command-cwd-by-unquoted-cd",
        "plan_tools",
        "a_tool_call_at_the_edge_of_the_tools_published_input",
        "P27",
        "made no ran.txt",
    ),
    BrokenCase(
        "workspace-root-normalized-to-nfd",
        "plan_tools",
        "reading_a_file_gives_the_model_its_text",
        "P10",
        "WORKSPACE_INVALID",
    ),
    BrokenCase(
        "refuses-unusual-workspace-names",
        "sessions",
        "new_session_starts_in_agent_mode",
        "R1.2",
        "WORKSPACE_INVALID",
    ),
]
