"""Allowed variations for the checks added with the held-out sets: each host takes a choice
the contract leaves open next to a rule a newer check enforces, so the check is proven to
hold the rule and nothing more."""

from __future__ import annotations

import json
import uuid
from typing import Any

from hosts.registry import AllowedCase, patch, variant
from reference_host import permissions, rpc, server, turns
from reference_host.errors import HostError
from reference_host.host import Host
from reference_host.tasks import Tasks
from reference_host.tools import files


@variant("lines-end-with-cr-lf")
def _lines_end_with_cr_lf() -> None:
    # P5: a line is compact JSON followed by a newline; a CR before the newline is
    # tolerated. This host ends every line it writes with CR LF.
    encode = server.encode

    def encode_with_cr(message: Any) -> bytes:
        return encode(message) + b"\r"

    patch(server, "encode", encode_with_cr)


@variant("permission-ids-are-uuids")
def _permission_ids_are_uuids() -> None:
    # P7: a requestId is an Id, "an opaque identifier chosen by the host", and names one
    # question among all sessions. This host gives each question a UUID, without a prefix.
    new_id = permissions.new_id

    def uuid_for_questions(prefix: str) -> str:
        if prefix != "perm":
            return new_id(prefix)
        return str(uuid.uuid4())

    patch(permissions, "new_id", uuid_for_questions)


@variant("lists-newest-first")
def _lists_newest_first() -> None:
    # session/list, task/list and shell/list fix no order (approval/list alone is oldest
    # first). This host lists sessions, tasks and shells newest or last first.
    session_list = Host.session_list
    shell_list = Host.shell_list
    task_list = Tasks.list

    async def sessions_reversed(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await session_list(self, params)
        return {**result, "sessions": result["sessions"][::-1]}

    async def shells_reversed(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await shell_list(self, params)
        return {**result, "shells": result["shells"][::-1]}

    async def tasks_reversed(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        result = await task_list(self, params)
        return {**result, "tasks": result["tasks"][::-1]}

    patch(Host, "session_list", sessions_reversed)
    patch(Host, "shell_list", shells_reversed)
    patch(Tasks, "list", tasks_reversed)


@variant("search-results-grouped-and-listed")
def _search_results_grouped_and_listed() -> None:
    # P10 asks Glob for the matching paths and Grep for each matching file's path with the
    # matching line; the layout is the host's. This host answers Glob with a JSON list and
    # Grep grouped by file (the path on a line of its own, then "number: line" below it),
    # and says "nothing found" when nothing matches.
    glob_run = files.Glob.run
    grep = files.Grep._grep

    async def glob_as_list(self: files.Glob, ctx: Any, args: dict[str, Any]) -> str:
        found = await glob_run(self, ctx, args)
        paths = [] if found == files.NO_MATCHES else found.split("\n")
        return json.dumps(paths) if paths else "nothing found"

    def grep_grouped(*args: Any) -> str:
        found = grep(*args)
        if found == files.NO_MATCHES:
            return "nothing found"
        grouped: list[str] = []
        for line in found.split("\n"):
            path, number, text = line.split(":", 2)
            if path not in grouped:
                grouped.append(path)
            grouped.append(f"  {number}: {text}")
        return "\n".join(grouped)

    patch(files.Glob, "run", glob_as_list)
    patch(files.Grep, "_grep", staticmethod(grep_grouped))


@variant("empty-arguments-refused")
def _empty_arguments_refused() -> None:
    # P27 lets a host read a tool call's empty arguments as {} or refuse them; this host
    # refuses them with INVALID_TOOL_INPUT, as text that is not a JSON object.
    original = turns._arguments

    def _arguments(call: Any) -> Any:
        if not call.arguments.strip():
            raise HostError("INVALID_TOOL_INPUT", f"{call.name}: the arguments are empty")
        return original(call)

    patch(turns, "_arguments", _arguments)


@variant("integral-floats-refused")
def _integral_floats_refused() -> None:
    # P4: "whole numbers only"; a whole number written with a fraction or an exponent
    # (1000.0, 1e3) may be taken as that number or refused with INVALID_PARAMS
    # (docs/decisions.md). This host decodes numbers into typed fields and refuses any
    # number written so.
    original = rpc.params_problem

    def _has_float(value: Any) -> bool:
        if isinstance(value, float):
            return True
        if isinstance(value, dict):
            return any(_has_float(item) for item in value.values())
        if isinstance(value, list):
            return any(_has_float(item) for item in value)
        return False

    def params_problem(method: str, params: Any) -> str | None:
        problem = original(method, params)
        if problem is None and _has_float(params):
            return "params: an integer field holds a number written as a float"
        return problem

    patch(rpc, "params_problem", params_problem)


CASES = [
    AllowedCase(
        "lines-end-with-cr-lf",
        "handshake,protocol_errors,sessions",
        why="a CR before a line's newline is tolerated (P5); every check reads the line alike",
    ),
    AllowedCase(
        "permission-ids-are-uuids",
        "isolation,approval,turn_boundaries",
        why="a permission requestId is any opaque Id that names one question (P7)",
    ),
    AllowedCase(
        "lists-newest-first",
        "sessions,scheduled_plan,shell,isolation",
        why="session/list, task/list and shell/list fix no order; only approval/list does",
    ),
    AllowedCase(
        "search-results-grouped-and-listed",
        "plan_tools,isolation",
        why="how Glob and Grep lay out what they found is the host's (P10)",
    ),
    AllowedCase(
        "empty-arguments-refused",
        "plan_tools",
        "empty_arguments or outside_the_tools_published_input",
        why="empty tool-call arguments may be read as {} or refused as invalid input (P27)",
    ),
    AllowedCase(
        "integral-floats-refused",
        "protocol_errors,handshake,scheduled_plan",
        why="a whole number written as 1000.0 or 1e3 may be taken or refused (P4)",
    ),
]
