"""Command-line options that shape the host, and the one-shot conformance faults."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

DEFAULT_MAX_FRAME_BYTES: Final = 8 * 1024 * 1024
DEFAULT_COMMAND_TIMEOUT_MS: Final = 120_000
OUTPUT_CAP_BYTES: Final = 256 * 1024
"""The output one command may keep and stream, both streams together (announced to clients)."""
FAULT_POINTS: Final = ("artifactWrite", "artifactFlush", "approvalCommit", "holdExecution")


@dataclass
class HostOptions:
    """Command-line options that shape the host's behaviour."""

    conformance: bool = False
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    command_timeout_ms: int = DEFAULT_COMMAND_TIMEOUT_MS


@dataclass
class Faults:
    """One-shot faults armed through ``conformance/fault/arm``."""

    armed: set[str] = field(default_factory=set)

    def take(self, point: str) -> bool:
        """True (once) when ``point`` was armed."""
        if point in self.armed:
            self.armed.discard(point)
            return True
        return False
