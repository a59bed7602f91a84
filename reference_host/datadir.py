"""Claiming the data directory: one owner for the host's lifetime, a database that is safe to open.

The host takes an exclusive ``flock`` on the data directory itself, before it opens or
creates anything in it, and keeps it until it stops. A second host on the same directory
is refused with DATA_DIR_IN_USE and changes nothing. Locking the directory (rather than a
lock file) means a refused start creates no file, and no stale lock file can be left behind.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from pathlib import Path

from reference_host.errors import HostError

DB_FILE = "host.db"
_DB_COMPANIONS = ("", "-wal", "-shm", "-journal")


def _unavailable(data_dir: Path, reason: str) -> HostError:
    return HostError(
        "STORAGE_UNAVAILABLE",
        f"the data directory {str(data_dir)!r} cannot be used: {reason}",
        {"dataDir": str(data_dir)},
    )


class DataDirLock:
    """The host's exclusive hold on its data directory; released by :meth:`release`."""

    def __init__(self, data_dir: Path, fd: int) -> None:
        self.data_dir = data_dir
        self._fd: int | None = fd

    def release(self) -> None:
        """Give up the data directory (closing the descriptor drops the lock)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def claim(data_dir: Path) -> DataDirLock:
    """Create ``data_dir`` if it is missing, lock it, and check that its database can be
    opened in place. STORAGE_UNAVAILABLE or DATA_DIR_IN_USE, with nothing changed, otherwise.
    """
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        pass  # a regular file: refused below, as not a directory
    except OSError as exc:
        raise _unavailable(data_dir, exc.strerror or str(exc)) from exc
    try:
        fd = os.open(data_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        reason = "it is not a directory" if exc.errno == errno.ENOTDIR else exc.strerror
        raise _unavailable(data_dir, reason or str(exc)) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        os.close(fd)
        raise HostError(
            "DATA_DIR_IN_USE",
            f"another host process is using the data directory {str(data_dir)!r}",
            {"dataDir": str(data_dir)},
        ) from exc
    except OSError as exc:
        os.close(fd)
        raise _unavailable(data_dir, f"it cannot be locked: {exc.strerror}") from exc
    try:
        _check_files(data_dir, fd)
    except BaseException:
        os.close(fd)
        raise
    return DataDirLock(data_dir, fd)


def _check_files(data_dir: Path, dir_fd: int) -> None:
    """The database and its companions are regular files (not symlinks), or absent, and the
    directory is writable."""
    for suffix in _DB_COMPANIONS:
        name = DB_FILE + suffix
        try:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise _unavailable(data_dir, f"{name}: {exc.strerror}") from exc
        if stat.S_ISLNK(info.st_mode):
            raise _unavailable(data_dir, f"{name} is a symbolic link; the host does not follow it")
        if not stat.S_ISREG(info.st_mode):
            raise _unavailable(data_dir, f"{name} is not a regular file")
        # access() also answers right for root, immutable files and read-only mounts.
        if not os.access(name, os.R_OK | os.W_OK, dir_fd=dir_fd):
            raise _unavailable(data_dir, f"{name} is read-only")
    if not os.access(".", os.W_OK | os.X_OK, dir_fd=dir_fd):
        raise _unavailable(data_dir, "it is read-only")
