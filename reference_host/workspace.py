"""Workspace roots and safe paths inside them."""

from __future__ import annotations

from pathlib import Path

from reference_host.errors import HostError


def validate_root(root: str) -> Path:
    """An absolute, existing directory, or WORKSPACE_INVALID."""
    path = Path(root)
    if not path.is_absolute():
        raise HostError("WORKSPACE_INVALID", f"workspace root {root!r} is not an absolute path")
    if not path.exists():
        raise HostError("WORKSPACE_INVALID", f"workspace root {root!r} does not exist")
    if not path.is_dir():
        raise HostError("WORKSPACE_INVALID", f"workspace root {root!r} is not a directory")
    return path
