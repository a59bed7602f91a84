"""Ending every process a run started, even those that left their parent's group.

``pi-conformance`` becomes a child subreaper (Linux), so a host orphaned by a killed
pytest worker is re-parented to it rather than to init, and can still be found among its
descendants and ended. Elsewhere the descendants are found while their parents live.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys

import psutil

_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Adopt orphaned descendants (Linux only); True when it took effect."""
    if not sys.platform.startswith("linux"):
        return False
    # The C library is already loaded into the interpreter: CDLL(None) finds prctl there
    # without find_library, which runs ldconfig in a subprocess.
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return False
    return bool(prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)


def _alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def descendants() -> list[psutil.Process]:
    """Every living descendant of this process (adopted zombies are reaped on the way)."""
    try:
        found = psutil.Process().children(recursive=True)
    except psutil.Error:
        return []
    zombies = [p for p in found if not _alive(p)]
    psutil.wait_procs(zombies, timeout=0.1)
    return [p for p in found if p not in zombies]


def signal_group(pgid: int, signum: int) -> None:
    """Send ``signum`` to a process group that may already be gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def describe(processes: list[psutil.Process]) -> str:
    """``'sleep (pid 12), sh (pid 13)'`` for a log line."""
    names: list[str] = []
    for process in processes:
        try:
            names.append(f"{' '.join(process.cmdline()[:3]) or process.name()} (pid {process.pid})")
        except psutil.Error:
            names.append(f"pid {process.pid}")
    return ", ".join(names)


def kill_all(extra: list[psutil.Process] | None = None, timeout: float = 3.0) -> list[str]:
    """SIGKILL every descendant (and ``extra``), reap them; return what was ended."""
    victims = {p.pid: p for p in [*(extra or []), *descendants()]}
    ended = describe(list(victims.values()))
    for process in victims.values():
        with contextlib.suppress(psutil.Error):
            process.send_signal(signal.SIGKILL)
    psutil.wait_procs(list(victims.values()), timeout=timeout)
    # Whatever was adopted while we were killing (a grandchild re-parented to us).
    late = [p for p in descendants() if p.pid not in victims]
    for process in late:
        with contextlib.suppress(psutil.Error):
            process.send_signal(signal.SIGKILL)
    psutil.wait_procs(late, timeout=timeout)
    late_names = describe(late)
    return [name for name in (ended, late_names) if name]
