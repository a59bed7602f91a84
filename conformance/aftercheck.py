"""Checks that hold for every scenario, made once it has run.

Whatever a scenario is about, its host must not break the protocol's schemas (P5), must
not store or echo the provider API key (P21), must send the model provider only the
requests the scenario scripted, each a valid Chat Completions request, and must not report
one record two ways (R7.2). These checks look
at everything the scenario produced: every host message of every host process, every
provider request, and the data directory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

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
