"""Where a run keeps its temporary folders: each scenario's data directory and workspace.

A host under test flushes its plan files and commits its database with ``fsync``; on a
disk that is most of the wait in a short scenario, and no check can observe it: the suite
stops hosts with signals, never by cutting the power, so what a host flushed and what it
merely wrote read back the same. Unless told otherwise, a run therefore works in a
memory-backed file system (a ``tmpfs``) when the machine has one with room to spare and
that allows running programs from it, and in the system's temporary folder otherwise.
Setting ``TMPDIR``, or giving ``--scratch-dir``, chooses the folder instead.
"""

from __future__ import annotations

import os
from pathlib import Path

MEMORY_MOUNT = Path("/dev/shm")
MOUNTS_TABLE = Path("/proc/self/mounts")
MIN_FREE_BYTES = 1 << 30  # a run keeps the folders of failed scenarios; leave room for many


def _mount_type(mount_point: Path, table: Path) -> str | None:
    """The file-system type mounted at ``mount_point``, from ``table`` (None if not mounted)."""
    try:
        lines = table.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    found: str | None = None
    for line in lines:
        fields = line.split()
        if len(fields) >= 3 and fields[1] == str(mount_point):
            found = fields[2]  # the last mount on a point is the one in effect
    return found


def memory_folder(mount_point: Path = MEMORY_MOUNT, table: Path = MOUNTS_TABLE) -> Path | None:
    """A writable memory-backed folder with room and without ``noexec``, else None."""
    if _mount_type(mount_point, table) != "tmpfs":
        return None
    try:
        stats = os.statvfs(mount_point)
    except OSError:
        return None
    if stats.f_flag & (os.ST_RDONLY | os.ST_NOEXEC):
        return None
    if stats.f_bavail * stats.f_frsize < MIN_FREE_BYTES:
        return None
    if not os.access(mount_point, os.W_OK | os.X_OK):
        return None
    return mount_point


def scratch_parent(explicit: Path | None = None) -> Path | None:
    """The folder a run's scratch folder goes in; None means the system's temporary folder.

    ``explicit`` (``--scratch-dir``) wins; then ``TMPDIR`` when it is set; then a
    memory-backed folder when the machine has a suitable one.
    """
    if explicit is not None:
        return explicit
    if os.environ.get("TMPDIR"):
        return None
    return memory_folder()
