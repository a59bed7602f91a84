"""Workspace roots and safe paths inside them."""

from __future__ import annotations

import stat
from pathlib import Path

from reference_host.errors import HostError


def validate_root(root: str) -> Path:
    """An absolute, existing directory, or WORKSPACE_INVALID."""
    path = Path(root)
    if not path.is_absolute():
        raise HostError("WORKSPACE_INVALID", f"workspace root {root!r} is not an absolute path")
    try:
        info = path.stat()
    except FileNotFoundError as exc:
        raise HostError("WORKSPACE_INVALID", f"workspace root {root!r} does not exist") from exc
    except (OSError, ValueError) as exc:  # too long, no permission, a NUL or a lone surrogate
        raise HostError("WORKSPACE_INVALID", f"workspace root {root!r}: {exc}") from exc
    if not stat.S_ISDIR(info.st_mode):
        raise HostError("WORKSPACE_INVALID", f"workspace root {root!r} is not a directory")
    return path


def require_root(ctx_root: Path | None) -> Path:
    """The session's workspace root, re-validated and fully resolved.

    WORKSPACE_REQUIRED for a session without a project; WORKSPACE_INVALID when the root is
    not an absolute path or is no longer an existing directory.
    """
    if ctx_root is None:
        raise HostError("WORKSPACE_REQUIRED", "this tool needs a session bound to a workspace")
    root = validate_root(str(ctx_root))
    try:
        return root.resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise HostError("WORKSPACE_INVALID", f"workspace root {str(root)!r}: {exc}") from exc


def resolve_inside(root: Path, relative: str, *, must_exist: bool) -> Path:
    """The real location of workspace path ``relative`` (symlinks resolved), inside ``root``.

    ``relative`` is workspace-relative; an absolute path is accepted only when it lies inside
    the root. PATH_OUTSIDE_WORKSPACE when the resolved location leaves the root (``..``, an
    absolute path elsewhere, or a symlink anywhere along the path, including a dangling final
    one, pointing outside). INVALID_TOOL_INPUT for an unusable path (NUL byte, symlink loop).
    FILE_NOT_FOUND when, with ``must_exist``, the path does not exist. WORKSPACE_INVALID when
    the root itself cannot be resolved.
    """
    if "\0" in relative:
        raise HostError("INVALID_TOOL_INPUT", "path contains a NUL byte", {"path": relative})
    try:
        real_root = root.resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise HostError("WORKSPACE_INVALID", f"workspace root {str(root)!r}: {exc}") from exc
    candidate = Path(relative)
    joined = candidate if candidate.is_absolute() else real_root / candidate
    try:
        resolved = joined.resolve(strict=False)
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop
        raise HostError(
            "INVALID_TOOL_INPUT", f"path {relative!r} cannot be resolved: {exc}", {"path": relative}
        ) from exc
    if not resolved.is_relative_to(real_root):
        raise HostError(
            "PATH_OUTSIDE_WORKSPACE",
            f"path {relative!r} is outside the workspace",
            {"path": relative},
        )
    if must_exist and not resolved.exists():
        raise HostError("FILE_NOT_FOUND", f"path {relative!r} does not exist", {"path": relative})
    return resolved
