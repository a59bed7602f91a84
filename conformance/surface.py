"""The protocol surface a run exercised: methods, notifications, error codes and tools.

After every scenario the runtime appends what its wire transcript shows to
``surface.jsonl`` in the report folder. ``python -m conformance.surface REPORT`` adds the
lines up and lists every request method, notification, canonical error code and tool of
the published contract that no scenario exercised; it exits 1 when something is missing
that is not excused below. A tool counts as exercised only when some call of it
succeeded, an error code only when a host sent it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from pi_contract import schemas_dir

SURFACE_FILE = "surface.jsonl"

# Codes a correct host never has reason to send in a scenario, each with why.
EXCUSED_CODES: dict[str, str] = {
    "INTERNAL_ERROR": "a host's own failure; a correct host has none to report",
    "FAULT_NOT_SUPPORTED": "the harness arms only the fault points a host announced",
    "EXECUTION_ACTIVE": "a host may make an approve wait for the ending execution instead",
    "DATA_DIR_IN_USE": "sent by a second host that refuses to start, not over the connection",
}


@dataclass
class Surface:
    """What one or more scenarios exercised."""

    requests: set[str] = field(default_factory=set)  # methods the client sent and got answered
    notifications: set[str] = field(default_factory=set)
    codes: set[str] = field(default_factory=set)  # canonical codes the host sent
    tools_ok: set[str] = field(default_factory=set)  # tools with a successful result
    tools_called: set[str] = field(default_factory=set)

    def add(self, other: Surface) -> None:
        """Add another surface to this one."""
        self.requests |= other.requests
        self.notifications |= other.notifications
        self.codes |= other.codes
        self.tools_ok |= other.tools_ok
        self.tools_called |= other.tools_called

    def to_json(self) -> str:
        """One line of ``surface.jsonl``."""
        return json.dumps({key: sorted(value) for key, value in self.__dict__.items()})

    @classmethod
    def from_json(cls, line: str) -> Surface:
        """Read one line of ``surface.jsonl``."""
        data = json.loads(line)
        return cls(**{key: set(data.get(key, [])) for key in cls().__dict__})


@dataclass(frozen=True)
class Contract:
    """The names the published contract defines."""

    requests: frozenset[str]
    notifications: frozenset[str]
    codes: frozenset[str]
    tools: frozenset[str]


@cache
def published() -> Contract:
    """Read the method index, the error catalog and the tool schemas."""
    root = schemas_dir()
    methods = json.loads((root / "protocol-v9" / "methods.json").read_text(encoding="utf-8"))
    by_kind: dict[str, set[str]] = {"request": set(), "notification": set()}
    for name, entry in methods["methods"].items():
        by_kind.setdefault(entry["kind"], set()).add(name)
    catalog = json.loads((root / "error-codes.json").read_text(encoding="utf-8"))
    tools = json.loads((root / "tools.schema.json").read_text(encoding="utf-8"))
    return Contract(
        frozenset(by_kind["request"]),
        frozenset(by_kind["notification"]),
        frozenset(entry["code"] for entry in catalog["codes"]),
        frozenset(tools["$defs"]),
    )


def _codes_in(value: Any) -> Iterator[str]:
    """Every string under a ``code`` or ``statusCode`` key, at any depth."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("code", "statusCode") and isinstance(item, str):
                yield item
            else:
                yield from _codes_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from _codes_in(item)


def observe(sent: Iterable[str], received: Iterable[str]) -> Surface:
    """The surface of one scenario, from the lines it sent and the lines it received."""
    surface = Surface()
    asked: dict[Any, str] = {}
    for line in sent:
        message = _parse(line)
        if message is not None and isinstance(message.get("method"), str) and "id" in message:
            asked[json.dumps(message["id"])] = message["method"]
    known_codes = published().codes
    for line in received:
        message = _parse(line)
        if message is None:
            continue
        surface.codes.update(c for c in _codes_in(message) if c in known_codes)
        method = message.get("method")
        if isinstance(method, str):
            surface.notifications.add(method)
            params = message.get("params")
            if isinstance(params, dict) and isinstance(params.get("tool"), str):
                if method == "turn/toolCall":
                    surface.tools_called.add(params["tool"])
                elif method == "turn/toolResult" and params.get("status") == "ok":
                    surface.tools_ok.add(params["tool"])
        elif "id" in message and json.dumps(message["id"]) in asked:
            surface.requests.add(asked[json.dumps(message["id"])])
    return surface


def _parse(line: str) -> dict[str, Any] | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def append(report_dir: Path, surface: Surface) -> None:
    """Append one scenario's surface; one write, so parallel workers do not interleave."""
    report_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(report_dir / SURFACE_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (surface.to_json() + "\n").encode("utf-8"))
    finally:
        os.close(fd)


def read(report_dir: Path) -> Surface:
    """The surface of every scenario of a run."""
    total = Surface()
    for line in (report_dir / SURFACE_FILE).read_text(encoding="utf-8").splitlines():
        if line.strip():
            total.add(Surface.from_json(line))
    return total


@dataclass(frozen=True)
class Gaps:
    """What the contract defines and no scenario exercised."""

    requests: list[str]
    notifications: list[str]
    codes: list[str]
    tools: list[str]

    def __bool__(self) -> bool:
        return bool(self.requests or self.notifications or self.codes or self.tools)


def gaps(surface: Surface, contract: Contract | None = None) -> Gaps:
    """Compare a run's surface with the contract."""
    wanted = contract or published()
    return Gaps(
        sorted(wanted.requests - surface.requests),
        sorted(wanted.notifications - surface.notifications),
        sorted(wanted.codes - surface.codes - EXCUSED_CODES.keys()),
        sorted(wanted.tools - surface.tools_ok),
    )


def render(found: Gaps, contract: Contract | None = None) -> str:
    """A short account of the gaps, or of full coverage."""
    wanted = contract or published()
    lines = [
        f"request methods answered: {len(wanted.requests) - len(found.requests)}"
        f"/{len(wanted.requests)}",
        f"notifications received: {len(wanted.notifications) - len(found.notifications)}"
        f"/{len(wanted.notifications)}",
        f"error codes sent by the host: {len(wanted.codes) - len(found.codes)}"
        f"/{len(wanted.codes)} ({len(EXCUSED_CODES)} excused: {', '.join(sorted(EXCUSED_CODES))})",
        f"tools that worked: {len(wanted.tools) - len(found.tools)}/{len(wanted.tools)}",
    ]
    for label, names in (
        ("never answered", found.requests),
        ("never received", found.notifications),
        ("never sent", found.codes),
        ("never worked", found.tools),
    ):
        if names:
            lines.append(f"{label}: {', '.join(names)}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m conformance.surface REPORT``: exit 1 when the run left a gap."""
    parser = argparse.ArgumentParser(
        prog="python -m conformance.surface",
        description="List what the contract defines and a run's scenarios never exercised.",
    )
    parser.add_argument("report", type=Path, help="the report folder of a pi-conformance run")
    args = parser.parse_args(argv)
    source = args.report / SURFACE_FILE
    if not source.is_file():
        parser.exit(2, f"{parser.prog}: {source} does not exist; run the suite first\n")
    found = gaps(read(args.report))
    print(render(found))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
