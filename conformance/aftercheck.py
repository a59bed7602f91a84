"""Checks that hold for every scenario, made once it has run.

Whatever a scenario is about, its host must not break the protocol's schemas (P5), must
not store or echo the provider API key (P21), must send the model provider only the
requests the scenario scripted, each a valid Chat Completions request, must not report
one record two ways (R7.2), and must announce each command's output inside its session
and before its end (R5.9, R7.3). These checks look
at everything the scenario produced: every host message of every host process, every
provider request, and the data directory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance.drivers import DUMMY_API_KEY
from conformance.world import World

SCHEMA_REQUIREMENT = "P5"
KEY_REQUIREMENT = "P21"
VIEWS_REQUIREMENT = "R7.2"
_KEY = DUMMY_API_KEY.encode()


@dataclass(frozen=True)
class Problem:
    """A broken whole-scenario rule: what to say and whom to blame (an empty requirement
    blames the scenario's own tags)."""

    message: str
    detail: str
    requirement: str


def _files_with_key(data_dir: Path) -> list[str]:
    found: list[str] = []
    if not data_dir.is_dir():
        return found
    for path in sorted(data_dir.rglob("*")):
        if path.is_file() and not path.is_symlink():
            try:
                if _KEY in path.read_bytes():
                    found.append(path.name)
            except OSError:
                continue
    return found


OUTPUT_REQUIREMENT = "R7.3"
ISOLATION_REQUIREMENT = "R5.9"


def _command_problems(notes: list[dict[str, Any]]) -> list[Problem]:
    """Each command's output and end name the session its start named, and no output of a
    command follows its command/exited (R7.3: output streams while it runs, then it ends)."""
    found: list[Problem] = []
    owner: dict[str, Any] = {}
    exited: set[str] = set()
    for note in notes:
        method, params = note["method"], note.get("params", {})
        if method not in ("command/started", "command/output", "command/exited"):
            continue
        command = params.get("commandId")
        if method == "command/started":
            owner[command] = params.get("sessionId")
            continue
        if command in owner and params.get("sessionId") != owner[command]:
            found.append(
                Problem(
                    f"{method} of command {command} names session {params.get('sessionId')}; "
                    f"its command/started named {owner[command]}",
                    "every notification names the session of the turn it reports",
                    ISOLATION_REQUIREMENT,
                )
            )
        if method == "command/output" and command in exited:
            found.append(
                Problem(
                    f"command/output of command {command} came after its command/exited",
                    "a command's output streams while it runs; its command/exited comes last",
                    OUTPUT_REQUIREMENT,
                )
            )
        if method == "command/exited":
            exited.add(command)
    return found[:1]


TOOL_INPUT_REQUIREMENT = "P27"


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _tool_call_problems(world: World) -> list[Problem]:
    """turn/toolCall announces a call's input as the model sent it: the object it gave, or,
    when its arguments are not JSON, their raw text (TurnToolCallParams.input)."""
    scripted = {call.call_id: call.arguments for call in world.script.calls}
    for note in world.notifications("turn/toolCall"):
        params = note.get("params", {})
        arguments = scripted.get(params.get("toolCallId"))
        if arguments is None:
            continue
        if isinstance(arguments, str):
            if not arguments.strip():
                continue  # empty arguments may be read as {} (P27)
            try:
                json.loads(arguments, parse_constant=_no_constants)
                continue  # JSON text: how a host reads odd numbers is not judged here
            except ValueError:
                expected: Any = arguments
        else:
            expected = arguments
        if params.get("input") != expected:
            return [
                Problem(
                    f"turn/toolCall announced the {params.get('tool')} call's input as "
                    f"{str(params.get('input'))[:200]!r}; the model sent "
                    f"{str(expected)[:200]!r}",
                    "the input is announced as the model sent it: parsed when it is JSON, "
                    "otherwise as its raw text",
                    TOOL_INPUT_REQUIREMENT,
                )
            ]
    return []


def problems(world: World) -> list[Problem]:
    """Every whole-scenario rule the host broke."""
    found: list[Problem] = []
    host_violations = [v for v in world.violations() if v.direction == "host-to-client"]
    if host_violations:
        found.append(
            Problem(
                f"{len(host_violations)} message(s) from the host broke the protocol v9 contract",
                "\n".join(v.describe() for v in host_violations),
                SCHEMA_REQUIREMENT,
            )
        )
    echoed = [line.text for line, _ in world.transcript() if line.direction == "host-to-client"]
    leaked = [text for text in echoed if DUMMY_API_KEY in text]
    if leaked:
        found.append(
            Problem(
                "the host sent the provider API key in a protocol message",
                leaked[0][:500],
                KEY_REQUIREMENT,
            )
        )
    unexpected = world.provider.unexpected_requests()
    if unexpected:
        malformed = [r for r in unexpected if r.malformed]
        kind = "malformed" if malformed else "unscripted"
        lines = [
            f"{'malformed' if r.malformed else 'unscripted'} request to {r.path}: "
            f"{r.raw_body[:300].decode('utf-8', 'replace')}"
            for r in unexpected
        ]
        found.append(
            Problem(
                f"the host sent the model provider {len(unexpected)} {kind} request(s) "
                "the scenario did not expect",
                "\n".join(lines),
                "",
            )
        )
    if world.disagreements:
        found.append(
            Problem(
                "two reports of one record disagreed: " + world.disagreements[0],
                "\n".join(world.disagreements),
                VIEWS_REQUIREMENT,
            )
        )
    found.extend(_command_problems(world.notifications()))
    found.extend(_tool_call_problems(world))
    stored = _files_with_key(world.data_dir)
    if stored:
        found.append(
            Problem(
                "the host stored the provider API key in its data directory",
                f"found in {', '.join(stored)}",
                KEY_REQUIREMENT,
            )
        )
    return found
