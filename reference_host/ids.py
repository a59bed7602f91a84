"""Fresh opaque identifiers."""

from __future__ import annotations

import os


def new_id(prefix: str) -> str:
    """``<prefix>_`` followed by 128 random bits in hex."""
    return f"{prefix}_{os.urandom(16).hex()}"
