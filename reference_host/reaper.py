"""Ending every process a command started, and reaping what the host inherits.

A command's shell runs in its own process group, but what it starts may leave the group
(``setsid``) or lose its parent (a double fork). So each command's processes also carry a
marker in their environment, ``PI_HOST_COMMAND=<command id>``, inherited by everything
they start; ending a command kills its group, every descendant of its shell, and every
process that carries its marker, until none is left.

When the host owns its process (it serves on the main thread), it also becomes a child
subreaper (Linux ``PR_SET_CHILD_SUBREAPER``): orphans of its commands are re-parented to the
host rather than to init, so the host can reap them. Without /proc (not Linux) only the
process group is ended.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Final

__all__ = ["COMMAND_ENV", "adopt_orphans", "end_command", "reap_orphans", "set_subreaper"]

COMMAND_ENV: Final = "PI_HOST_COMMAND"
_PROC: Final = Path("/proc")
_PR_SET_CHILD_SUBREAPER: Final = 36
_PR_GET_CHILD_SUBREAPER: Final = 37
_MAX_ROUNDS: Final = 64
"""Kill rounds before giving up on a process tree that keeps forking."""

log = logging.getLogger(__name__)
_subreaping = False
"""Whether this host made its process a subreaper (and so reaps the orphans it inherits)."""
_adopting: bool | None = None
"""Whether :func:`adopt_orphans` decided to make this process a subreaper (None: not yet)."""


def set_subreaper(enabled: bool) -> bool:
    """Make this process a child subreaper (or stop being one); return the previous state.
    False (and nothing changes) where the platform does not support it."""
    global _subreaping
    if not sys.platform.startswith("linux"):
        return False
    import ctypes  # only for the first command: it is slow to import

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        previous = ctypes.c_int(0)
        if libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(previous), 0, 0, 0) != 0:
            return False
        if libc.prctl(_PR_SET_CHILD_SUBREAPER, int(enabled), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    _subreaping = enabled
    return bool(previous.value)


def adopt_orphans() -> None:
    """Become a subreaper once, if this host owns its process (serves on the main thread);
    a host running inside another program (on a thread) leaves that process alone."""
    global _adopting
    if _adopting is None:
        _adopting = threading.current_thread() is threading.main_thread()
        if _adopting:
            set_subreaper(True)


def _table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state letter) of every process, from /proc."""
    table: dict[int, tuple[int, str]] = {}
    with contextlib.suppress(OSError):
        for entry in os.scandir(_PROC):
            if not entry.name.isdigit():
                continue
            try:
                fields = (_PROC / entry.name / "stat").read_bytes().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            table[int(entry.name)] = (int(fields[1]), fields[0].decode("ascii", "replace"))
    return table


def _carries(pid: int, needle: bytes) -> bool:
    try:
        return needle in (_PROC / str(pid) / "environ").read_bytes().split(b"\0")
    except OSError:
        return False


def _descends(pid: int, ancestor: int, table: dict[int, tuple[int, str]]) -> bool:
    seen = 0
    while pid in table and seen < len(table):
        pid = table[pid][0]
        if pid == ancestor:
            return True
        seen += 1
    return False


def end_command(shell_pid: int, command_id: str, shell_alive: bool) -> None:
    """SIGKILL the command's process group and every process it started, wherever it went.

    ``shell_alive`` says the shell is not yet reaped, so its pid still names it and its
    descendants can be found through it. Killed children of the host are reaped.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(shell_pid, signal.SIGKILL)
    if not _PROC.is_dir():
        return
    needle = f"{COMMAND_ENV}={command_id}".encode()
    me = os.getpid()
    killed: set[int] = set()
    for _ in range(_MAX_ROUNDS):
        table = _table()
        targets = {
            pid
            for pid, (_parent, state) in table.items()
            if pid not in killed
            and pid not in (me, shell_pid)
            and state not in ("Z", "X")
            and ((shell_alive and _descends(pid, shell_pid, table)) or _carries(pid, needle))
        }
        if not targets:
            break
        for pid in targets:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        killed |= targets
    else:
        log.warning("command %s: processes still appear after %d rounds", command_id, _MAX_ROUNDS)
    ours = [pid for pid in killed if table.get(pid, (0, ""))[0] == me]
    if ours:
        _reap_in_background(ours)


def reap_orphans(keep: set[int]) -> None:
    """Reap zombie children of the host other than ``keep`` (the shells asyncio waits for).

    Only for a host that made its own process a subreaper: then its only children are its
    shells and the orphans it inherited.
    """
    if not _subreaping:
        return
    me = os.getpid()
    for pid, (parent, state) in _table().items():
        if parent == me and state == "Z" and pid not in keep:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


def _reap_in_background(pids: list[int]) -> None:
    """Wait for killed children on a thread: a SIGKILLed process dies soon, not at once."""

    def reap() -> None:
        for pid in pids:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)

    threading.Thread(target=reap, name="reaper", daemon=True).start()
