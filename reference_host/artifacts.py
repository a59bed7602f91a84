"""Immutable plan artifacts: ``<workspaceRoot>/.pi/plan/<unique>.md`` (§2).

Every path component below the workspace root is opened relative to its parent's file
descriptor with ``O_NOFOLLOW``, so a symlinked ``.pi`` or ``.pi/plan`` is refused rather
than followed, and the file is created with ``O_EXCL`` so it never replaces anything.
File and folder are flushed before the caller commits the approval row.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reference_host.errors import HostError
from reference_host.workspace import validate_root

PLAN_DIR = (".pi", "plan")
READ_ONLY = 0o444
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

FaultCheck = Callable[[str], bool]
"""Answers whether a one-shot conformance fault is armed at a named point."""


@dataclass(frozen=True)
class Artifact:
    """What the approval row records about the file."""

    relative_path: str
    sha256: str
    byte_size: int


def encode_markdown(markdown: str) -> bytes:
    """The exact UTF-8 bytes of ``markdown``; a lone surrogate is refused."""
    try:
        return markdown.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise HostError(
            "INVALID_TOOL_INPUT",
            f"markdown is not valid Unicode (a lone surrogate at index {exc.start})",
        ) from exc


def _write_failed(what: str, exc: OSError) -> HostError:
    return HostError("ARTIFACT_WRITE_FAILED", f"{what} failed: {exc.strerror or exc}")


def _open_plan_dir(parent_fd: int, name: str, shown: str) -> tuple[int, bool]:
    """Open (creating it if needed) a folder of the plan path; the descriptor, and whether
    this call created it, which makes the parent's entry one to flush."""
    created = True
    try:
        os.mkdir(name, 0o755, dir_fd=parent_fd)
    except FileExistsError:
        created = False
    except FileNotFoundError as exc:  # the folder above was removed meanwhile
        raise HostError("WORKSPACE_INVALID", f"creating {shown}: the workspace is gone") from exc
    except OSError as exc:  # a read-only or full file system, no permission
        raise _write_failed(f"creating {shown}", exc) from exc
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd), created
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            raise HostError(
                "PLAN_PATH_UNSAFE",
                f"{shown} is a symlink or not a directory; the host does not follow it",
            ) from exc
        raise HostError("ARTIFACT_WRITE_FAILED", f"cannot open {shown}: {exc}") from exc


def _unique_name() -> str:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return f"plan-{stamp}-{os.urandom(6).hex()}.md"


def write_artifact(root: str, content: bytes, fault: FaultCheck) -> Artifact:
    """Create a new artifact holding exactly ``content``, flushed, and describe it.

    Blocking: call it on a worker thread.
    """
    root_path = validate_root(root)
    try:
        root_fd = os.open(root_path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise HostError("WORKSPACE_INVALID", f"cannot open workspace root: {exc}") from exc
    opened = [root_fd]
    digest = _Digest(content)
    try:
        pi_fd, pi_created = _open_plan_dir(root_fd, PLAN_DIR[0], ".pi")
        opened.append(pi_fd)
        plan_fd, plan_created = _open_plan_dir(pi_fd, PLAN_DIR[1], ".pi/plan")
        opened.append(plan_fd)
        # Only a folder that gained an entry needs flushing: the plan folder always does,
        # a parent only when this write created the folder below it.
        to_flush = [plan_fd, *([pi_fd] if plan_created else []), *([root_fd] if pi_created else [])]
        name, file_fd = _create_exclusive(plan_fd)
        try:
            _write_all(file_fd, content, fault)
            _close(file_fd)
            file_fd = -1
            for directory_fd in to_flush:
                _flush_directory(directory_fd)
        except BaseException:
            if file_fd != -1:
                with contextlib.suppress(OSError):
                    os.close(file_fd)
            with contextlib.suppress(OSError):  # no approval will name it
                os.unlink(name, dir_fd=plan_fd)
            raise
    finally:
        for fd in opened:
            with contextlib.suppress(OSError):
                os.close(fd)
    relative = "/".join((*PLAN_DIR, name))
    return Artifact(relative, digest.hexdigest(), len(content))


class _Digest:
    """SHA-256 of the content; for a large plan it is computed on a thread of its own while
    the file is written and flushed (hashlib releases the interpreter lock on large input)."""

    OVERLAP_FROM = 256 * 1024  # below this a thread costs more than the hash

    def __init__(self, content: bytes) -> None:
        self._hash = hashlib.sha256()
        self._thread: threading.Thread | None = None
        if len(content) < self.OVERLAP_FROM:
            self._hash.update(content)
        else:
            self._thread = threading.Thread(target=self._hash.update, args=(content,))
            self._thread.start()

    def hexdigest(self) -> str:
        if self._thread is not None:
            self._thread.join()
        return self._hash.hexdigest()


def _close(fd: int) -> None:
    """Close the written file; a late write error (e.g. on a network file system) shows here."""
    try:
        os.close(fd)
    except OSError as exc:
        raise _write_failed("closing the artifact", exc) from exc


def _flush_directory(fd: int) -> None:
    """Make the new entry durable: without it the file could vanish after a power loss."""
    try:
        os.fsync(fd)
    except OSError as exc:
        raise _write_failed("flushing the plan folder", exc) from exc


def _create_exclusive(plan_fd: int) -> tuple[str, int]:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(16):
        name = _unique_name()
        try:
            return name, os.open(name, flags, READ_ONLY, dir_fd=plan_fd)
        except FileExistsError:
            continue
        except OSError as exc:
            raise HostError("ARTIFACT_WRITE_FAILED", f"cannot create the artifact: {exc}") from exc
    raise HostError("ARTIFACT_WRITE_FAILED", "no unused artifact name could be found")


def _write_all(fd: int, content: bytes, fault: FaultCheck) -> None:
    try:
        if fault("artifactWrite"):
            raise OSError(errno.EIO, "injected artifact write failure")
        view = memoryview(content)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if fault("artifactFlush"):
            raise OSError(errno.EIO, "injected artifact flush failure")
        os.fsync(fd)
    except OSError as exc:
        raise HostError("ARTIFACT_WRITE_FAILED", f"writing the artifact failed: {exc}") from exc


def read_verified(root: str, relative_path: str, sha256: str, byte_size: int) -> bytes:
    """The artifact's bytes, only when they are exactly what was recorded.

    ARTIFACT_UNREADABLE when the file is missing, not a regular file, reached through a
    symlink or cannot be read; ARTIFACT_MODIFIED when its size or SHA-256 differs from the
    record. Blocking: call it on a worker thread.
    """
    content = read_artifact(root, relative_path, limit=byte_size + 1)
    if len(content) != byte_size or hashlib.sha256(content).hexdigest() != sha256:
        raise HostError(
            "ARTIFACT_MODIFIED",
            f"{relative_path} changed after it was submitted: its size or SHA-256 is not the "
            "recorded one",
            {"path": relative_path, "recordedSha256": sha256, "recordedByteSize": byte_size},
        )
    return content


def _plan_folder(root: str, relative_path: str) -> tuple[int, str]:
    """An open descriptor of the artifact's folder, reached without following symlinks, and
    the artifact's file name. OSError or ARTIFACT_UNREADABLE when there is no such folder."""
    parts = relative_path.split("/")
    if parts[:2] != list(PLAN_DIR) or len(parts) != 3:
        raise HostError("ARTIFACT_UNREADABLE", f"{relative_path!r} is not a plan artifact path")
    if not root or not Path(root).is_absolute():
        raise HostError("ARTIFACT_UNREADABLE", "the session has no usable workspace root")
    fd = os.open(Path(root), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:2]:
            next_fd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = next_fd
    except BaseException:
        os.close(fd)
        raise
    return fd, parts[2]


def read_artifact(root: str, relative_path: str, limit: int | None = None) -> bytes:
    """Read an artifact back (at most ``limit`` bytes) without following symlinks below the
    root; ARTIFACT_UNREADABLE unless it is a readable regular file."""
    fd: int | None = None
    try:
        fd, name = _plan_folder(root, relative_path)
        # O_NONBLOCK: a FIFO put in its place must not hang the host.
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        file_fd = os.open(name, flags, dir_fd=fd)
        with os.fdopen(file_fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(file_fd).st_mode):
                raise HostError("ARTIFACT_UNREADABLE", f"{relative_path} is not a regular file")
            return handle.read() if limit is None else handle.read(limit)
    except OSError as exc:
        raise HostError("ARTIFACT_UNREADABLE", f"cannot read {relative_path}: {exc}") from exc
    finally:
        if fd is not None:
            os.close(fd)


def discard_artifact(root: str, relative_path: str) -> None:
    """Remove an artifact that no approval will ever name (its row could not be committed).
    Best effort: a failure leaves an unreferenced file behind, nothing worse."""
    with contextlib.suppress(OSError, HostError):
        fd, name = _plan_folder(root, relative_path)
        try:
            os.unlink(name, dir_fd=fd)
            os.fsync(fd)
        finally:
            os.close(fd)
