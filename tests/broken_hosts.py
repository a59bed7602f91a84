"""Deliberately broken variants of the reference host, to prove the suite's checks can fail.

Run as ``python tests/broken_hosts.py VARIANT --data-dir DIR --conformance``. Each variant
patches one behaviour of the reference host so that it breaks one clause, then serves
protocol v9 exactly like ``python -m reference_host``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from reference_host.host import Host
from reference_host.server import serve

Patch = Callable[[], None]
VARIANTS: dict[str, Patch] = {}


def variant(name: str) -> Callable[[Patch], Patch]:
    """Register a patch under ``name``."""

    def register(patch: Patch) -> Patch:
        VARIANTS[name] = patch
        return patch

    return register


@variant("accepts-protocol-8")
def _accepts_protocol_8() -> None:
    original = Host.initialize

    async def initialize(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        return await original(self, {**params, "protocolVersion": 9})

    Host.initialize = initialize  # type: ignore[method-assign]


@variant("schema-invalid-session")
def _schema_invalid_session() -> None:
    original = Host.session_wire

    def session_wire(self: Host, row: Any) -> dict[str, Any]:
        wire = original(self, row)
        wire["createdAt"] = "2026-01-01T00:00:00Z"  # the contract says epoch milliseconds
        return wire

    Host.session_wire = session_wire  # type: ignore[method-assign]


def main(argv: list[str]) -> int:
    """Apply the named variant's patch and serve on stdio."""
    if not argv or argv[0] not in VARIANTS:
        print(
            f"usage: broken_hosts.py {{{'|'.join(sorted(VARIANTS))}}} --data-dir DIR",
            file=sys.stderr,
        )
        return 2
    VARIANTS[argv[0]]()
    return serve(argv[1:], sys.stdin.buffer, sys.stdout.buffer, sys.stderr)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
