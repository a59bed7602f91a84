"""Broken hosts: a held-out set (artifact files), written from the contract alone."""

from __future__ import annotations

import base64
import contextlib
import errno
import hashlib
import os
import re
import stat
from collections.abc import Callable
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from hosts.registry import BrokenCase, patch, variant

# What the submission being written is about: its title and the host clock at the
# SubmitPlan. Set around Approvals.submit; asyncio.to_thread carries it to the writer.
_SUBMITTING: ContextVar[tuple[str, int]] = ContextVar("_SUBMITTING", default=("", 0))

Create = Callable[[int], tuple[str, int | None]]
"""Given the open plan folder, the artifact's name and a descriptor to write it through
(None: the file is already there and is taken as it is)."""


def _remember_submission() -> None:
    """Make the title and the host clock of the submission visible to the writer."""
    from reference_host.approvals import Approvals
    from reference_host.storage import ApprovalRow, SessionRow

    original = Approvals.submit

    async def submit(
        self: Approvals, session: SessionRow, turn_id: str, args: dict[str, Any]
    ) -> ApprovalRow:
        title = args.get("title")
        token = _SUBMITTING.set((title if isinstance(title, str) else "", self.host.clock.now_ms()))
        try:
            return await original(self, session, turn_id, args)
        finally:
            _SUBMITTING.reset(token)

    patch(Approvals, "submit", submit)


def _write_with(root: str, content: bytes, fault: Callable[[str], bool], create: Create) -> Any:
    """The reference writer (validated root, no-follow folders, flushed file and folders),
    with the naming and the creation of the file itself left to ``create``."""
    from reference_host import artifacts
    from reference_host.errors import HostError
    from reference_host.workspace import validate_root

    root_path = validate_root(root)
    try:
        root_fd = os.open(root_path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise HostError("WORKSPACE_INVALID", f"cannot open workspace root: {exc}") from exc
    opened = [root_fd]
    try:
        pi_fd, pi_created = artifacts._open_plan_dir(root_fd, ".pi", ".pi")
        opened.append(pi_fd)
        plan_fd, plan_created = artifacts._open_plan_dir(pi_fd, "plan", ".pi/plan")
        opened.append(plan_fd)
        to_flush = [plan_fd, *([pi_fd] if plan_created else []), *([root_fd] if pi_created else [])]
        name, file_fd = create(plan_fd)
        if file_fd is not None:
            try:
                artifacts._write_all(file_fd, content, fault)
                artifacts._close(file_fd)
                file_fd = None
                for directory_fd in to_flush:
                    artifacts._flush_directory(directory_fd)
            except BaseException:
                if file_fd is not None:
                    with contextlib.suppress(OSError):
                        os.close(file_fd)
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=plan_fd)
                raise
    finally:
        for fd in opened:
            with contextlib.suppress(OSError):
                os.close(fd)
    digest = hashlib.sha256(content).hexdigest()
    return artifacts.Artifact(f".pi/plan/{name}", digest, len(content))


_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _create_failed(exc: OSError) -> Exception:
    from reference_host.errors import HostError

    return HostError("ARTIFACT_WRITE_FAILED", f"cannot create the artifact: {exc}")


def _patch_writer(make_create: Callable[[bytes], Create]) -> None:
    from reference_host import approvals

    def write_artifact(root: str, content: bytes, fault: Callable[[str], bool]) -> Any:
        return _write_with(root, content, fault, make_create(content))

    patch(approvals, "write_artifact", write_artifact)


# R2.4: every submission gets a new file, also two identical plans submitted at the same
# host-clock instant. Bug: the name is derived from the plan's content (its SHA-256), and
# a name that already exists is taken for a retried write of the same plan and reused, so
# a second identical plan's approval names the first one's file.
@variant("ho-af-content-addressed-name")
def content_addressed_name() -> None:
    def make_create(content: bytes) -> Create:
        def create(plan_fd: int) -> tuple[str, int | None]:
            name = f"plan-{hashlib.sha256(content).hexdigest()[:20]}.md"
            try:
                return name, os.open(name, _CREATE_FLAGS, 0o444, dir_fd=plan_fd)
            except FileExistsError:
                return name, None  # "already written by an earlier attempt"
            except OSError as exc:
                raise _create_failed(exc) from exc

        return create

    _patch_writer(make_create)


# R2.5, R2.9: an existing artifact is never replaced. Bug: the name is the host clock in
# milliseconds; when that name exists the host assumes a stale leftover of a failed write
# and replaces it (unlink, create), so a second plan submitted at the same host-clock
# instant (the conformance clock stands still) replaces the first plan's file.
@variant("ho-af-same-instant-name-replaces")
def same_instant_name_replaces() -> None:
    _remember_submission()

    def make_create(content: bytes) -> Create:
        def create(plan_fd: int) -> tuple[str, int | None]:
            name = f"plan-{_SUBMITTING.get()[1]}.md"
            try:
                try:
                    return name, os.open(name, _CREATE_FLAGS, 0o444, dir_fd=plan_fd)
                except FileExistsError:
                    os.unlink(name, dir_fd=plan_fd)
                    return name, os.open(name, _CREATE_FLAGS, 0o444, dir_fd=plan_fd)
            except OSError as exc:
                raise _create_failed(exc) from exc

        return create

    _patch_writer(make_create)


# R2.3 (and R2.1): nothing in the input chooses the location; any title submits the plan.
# Bug: the file name is a slug of the title plus a random suffix, with no length cap: a
# title of more than about 240 bytes of UTF-8 (a long sentence, or 90 CJK letters) makes a
# name over the file system's 255-byte limit, and the submission fails with
# ARTIFACT_WRITE_FAILED instead of creating the approval.
@variant("ho-af-long-title-name")
def long_title_name() -> None:
    _remember_submission()

    def make_create(content: bytes) -> Create:
        def create(plan_fd: int) -> tuple[str, int | None]:
            slug = re.sub(r"[^\w]+", "-", _SUBMITTING.get()[0]).strip("-").lower() or "plan"
            for _ in range(16):
                name = f"{slug}-{os.urandom(4).hex()}.md"
                try:
                    return name, os.open(name, _CREATE_FLAGS, 0o444, dir_fd=plan_fd)
                except FileExistsError:
                    continue
                except OSError as exc:
                    raise _create_failed(exc) from exc
            raise _create_failed(OSError(errno.EEXIST, "no unused name"))

        return create

    _patch_writer(make_create)


def _patch_encoding(transform: Callable[[str], str]) -> None:
    from reference_host import approvals, artifacts

    def encode_markdown(markdown: str) -> bytes:
        return artifacts.encode_markdown(transform(markdown))

    patch(approvals, "encode_markdown", encode_markdown)


# R2.7: no line-ending change, Unicode normalisation or other change of the markdown.
# Bug: a byte order mark at the start of the markdown is dropped before writing ("editors
# add it, it is not content"); path, hash and size describe the file as written, so the
# record and the file agree and only the file against the submitted text shows it.
@variant("ho-af-bom-stripped")
def bom_stripped() -> None:
    _patch_encoding(lambda markdown: markdown.removeprefix("\ufeff"))


# R2.7: line ends are written as submitted. Bug: old-Mac line ends (a lone CR) are turned
# into LF; CR LF and LF stay. The record describes the file as written.
@variant("ho-af-lone-cr-translated")
def lone_cr_translated() -> None:
    _patch_encoding(lambda markdown: re.sub(r"\r(?!\n)", "\n", markdown))


# R1.8, P27 (and R2.2): SubmitPlan takes any string as markdown; what a tool accepts is
# the schema's, not the host's. Bug: markdown that is empty or blank space only is refused
# with INVALID_TOOL_INPUT ("a plan needs content"), so no artifact and no approval.
@variant("ho-af-blank-markdown-refused")
def blank_markdown_refused() -> None:
    from reference_host import approvals, artifacts
    from reference_host.errors import HostError

    def encode_markdown(markdown: str) -> bytes:
        if not markdown.strip():
            raise HostError("INVALID_TOOL_INPUT", "markdown holds no plan")
        return artifacts.encode_markdown(markdown)

    patch(approvals, "encode_markdown", encode_markdown)


def _patch_read_verified(read: Callable[[str, str, str, int], bytes]) -> None:
    from reference_host import approvals

    patch(approvals, "read_verified", read)


def _modified(relative_path: str) -> Exception:
    from reference_host.errors import HostError

    return HostError("ARTIFACT_MODIFIED", f"{relative_path} changed after it was submitted")


# P13: approve and artifact/read check the bytes against the recorded SHA-256 and size,
# also a change of the same size. Bug: to save hashing big files, an artifact of 1 MiB or
# more is checked by its size only; a same-size change of a large plan goes unnoticed.
@variant("ho-af-large-size-only-check")
def large_size_only_check() -> None:
    from reference_host import artifacts

    def read_verified(root: str, relative_path: str, sha256: str, byte_size: int) -> bytes:
        if byte_size < 1024 * 1024:
            return artifacts.read_verified(root, relative_path, sha256, byte_size)
        content = artifacts.read_artifact(root, relative_path, limit=byte_size + 1)
        if len(content) != byte_size:
            raise _modified(relative_path)
        return content

    _patch_read_verified(read_verified)


# P13: any change to the bytes is ARTIFACT_MODIFIED; artifact/read never returns bytes
# that disagree with the record. Bug (off by one): the check reads at most the recorded
# size, so bytes appended to the file are never read and an extended file passes.
@variant("ho-af-read-limit-off-by-one")
def read_limit_off_by_one() -> None:
    from reference_host import artifacts

    def read_verified(root: str, relative_path: str, sha256: str, byte_size: int) -> bytes:
        content = artifacts.read_artifact(root, relative_path, limit=byte_size)
        if len(content) != byte_size or hashlib.sha256(content).hexdigest() != sha256:
            raise _modified(relative_path)
        return content

    _patch_read_verified(read_verified)


# P13: the check runs on every call: a read that matched does not vouch for a later one.
# Bug: a verified artifact is cached with its size and modification time; a later call
# whose stat shows the same size and mtime is answered from the cache without reading the
# file, so a same-size change whose mtime was put back (or that fell in the same tick of
# the file system's clock) is served as the old bytes and approved.
@variant("ho-af-verify-cache-by-stat")
def verify_cache_by_stat() -> None:
    from reference_host import artifacts

    cache: dict[tuple[str, str], tuple[int, int, bytes]] = {}

    def read_verified(root: str, relative_path: str, sha256: str, byte_size: int) -> bytes:
        key = (root, relative_path)
        try:
            info = (Path(root) / relative_path).lstat()
        except OSError:
            info = None
        if info is not None and stat.S_ISREG(info.st_mode):
            hit = cache.get(key)
            if hit is not None and hit[:2] == (info.st_size, info.st_mtime_ns):
                return hit[2]
        content = artifacts.read_verified(root, relative_path, sha256, byte_size)
        if info is not None and stat.S_ISREG(info.st_mode):
            cache[key] = (info.st_size, info.st_mtime_ns, content)
        return content

    _patch_read_verified(read_verified)


# P13: the bytes checked are the approval's own file's; another file with the recorded
# hash and size (an identical plan submitted before) does not vouch for it. Bug: the host
# keeps a content index, SHA-256 -> the first artifact written with it, and opens
# artifacts through it; for a second identical plan it reads the first plan's file, so
# the second file can be changed or removed and still be approved.
@variant("ho-af-path-by-hash")
def path_by_hash() -> None:
    from reference_host import approvals, artifacts

    index: dict[tuple[str, str], str] = {}

    def write_artifact(root: str, content: bytes, fault: Callable[[str], bool]) -> Any:
        written = artifacts.write_artifact(root, content, fault)
        index.setdefault((root, written.sha256), written.relative_path)
        return written

    def read_verified(root: str, relative_path: str, sha256: str, byte_size: int) -> bytes:
        where = index.get((root, sha256), relative_path)
        return artifacts.read_verified(root, where, sha256, byte_size)

    patch(approvals, "write_artifact", write_artifact)
    _patch_read_verified(read_verified)


# P13: a symbolic link in the artifact's place is not a regular file wherever it leads,
# even to a copy of the recorded bytes: ARTIFACT_UNREADABLE. Bug: the folders are opened
# without following links, but the file itself is opened without O_NOFOLLOW, so a link to
# a copy of the plan passes the check.
@variant("ho-af-final-symlink-followed")
def final_symlink_followed() -> None:
    from reference_host import artifacts
    from reference_host.errors import HostError

    def read_artifact(root: str, relative_path: str, limit: int | None = None) -> bytes:
        fd: int | None = None
        try:
            fd, name = artifacts._plan_folder(root, relative_path)
            file_fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
            with os.fdopen(file_fd, "rb") as handle:
                if not stat.S_ISREG(os.fstat(file_fd).st_mode):
                    raise HostError("ARTIFACT_UNREADABLE", f"{relative_path} is not a file")
                return handle.read() if limit is None else handle.read(limit)
        except OSError as exc:
            raise HostError("ARTIFACT_UNREADABLE", f"cannot read {relative_path}: {exc}") from exc
        finally:
            if fd is not None:
                os.close(fd)

    patch(artifacts, "read_artifact", read_artifact)


# R3.2: artifact/read returns the bytes as contentBase64 in the standard base64 of
# RFC 4648. Bug: the URL-safe alphabet was used (a helper shared with ids), so every "+"
# and "/" of the encoding comes out as "-" and "_"; plain short text often encodes the same.
@variant("ho-af-urlsafe-base64")
def urlsafe_base64() -> None:
    from reference_host.approvals import Approvals
    from reference_host.storage import ApprovalRow

    original = Approvals.read_artifact

    async def read_artifact(self: Approvals, row: ApprovalRow) -> dict[str, Any]:
        result = await original(self, row)
        raw = base64.b64decode(result["contentBase64"])
        return {**result, "contentBase64": base64.urlsafe_b64encode(raw).decode("ascii")}

    patch(Approvals, "read_artifact", read_artifact)


# R5.9 (with R3.2): an approval is found and read only through its own session
# (APPROVAL_NOT_FOUND otherwise). Bug: artifact/read checks that the named session exists
# and then looks the approval up by its id alone, so a client of one session reads another
# session's plan (approval/get, approve and reject still check the owner).
@variant("ho-af-artifact-read-any-session")
def artifact_read_any_session() -> None:
    from reference_host.errors import HostError
    from reference_host.host import Host

    async def artifact_read(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        await self.require_session(params["sessionId"])
        row = await self.storage.get_approval(params["approvalId"])
        if row is None:
            raise HostError("APPROVAL_NOT_FOUND", f"no approval {params['approvalId']!r}")
        return await self.approvals.read_artifact(row)

    patch(Host, "artifact_read", artifact_read)


# C2 (with R3.11, R4.8): after a reload, session/list's pendingApprovalId names the waiting
# approval; an earlier approval's deadline never touches a later one. Bug: the expiry timer
# clears the session's pending-approval pointer before it checks that its own approval is
# still pending; when an earlier plan (rejected, then revised) reaches its deadline while
# the revision waits, the session reads pendingApprovalId null, the reloaded client finds
# no pending approval, and a prompt is accepted although a plan waits.
@variant("ho-af-stale-timer-clears-pending")
def stale_timer_clears_pending() -> None:
    from dataclasses import replace

    from reference_host.approvals import TIMEOUT_CODE, Approvals, approval_wire
    from reference_host.state import is_expired

    async def expire(self: Approvals, approval_id: str) -> None:
        host = self.host
        row = await host.storage.get_approval(approval_id)
        if row is None or not is_expired(row.expires_at, host.clock.now_ms()):
            return
        host.set_activity(row.session_id, pending_approval_id=None)
        if row.status != "pending":
            return
        expired = replace(
            row, status="expired", status_code=TIMEOUT_CODE, decided_at=host.clock.now_ms()
        )
        await host.storage.update_approval(expired)
        host.notify("approval/updated", {"approval": approval_wire(expired)})
        await host.publish_session(row.session_id)

    patch(Approvals, "expire", expire)


# R2.8: the workspace root is validated first; a root that no longer exists is
# WORKSPACE_INVALID and is never recreated. Bug: a missing root is taken for a project
# checkout not made yet and created (with .pi/plan below it) before the plan is written.
@variant("ho-af-recreate-missing-root")
def recreate_missing_root() -> None:
    from reference_host import approvals, artifacts

    def write_artifact(root: str, content: bytes, fault: Callable[[str], bool]) -> Any:
        path = Path(root)
        if path.is_absolute() and not path.exists() and not path.is_symlink():
            path.mkdir(parents=True, exist_ok=True)
        return artifacts.write_artifact(root, content, fault)

    patch(approvals, "write_artifact", write_artifact)


_CHUNK = 64 * 1024


def _chunked_sha256(content: bytes) -> str:
    """SHA-256 fed in 64 KiB chunks; the loop stops at the last whole chunk (the bug)."""
    digest = hashlib.sha256()
    view = memoryview(content)
    position = 0
    while position + _CHUNK <= len(view):
        digest.update(view[position : position + _CHUNK])
        position += _CHUNK
    if position == 0:
        digest.update(view)  # a small plan: one piece
    return digest.hexdigest()


# R2.11, C1: the recorded SHA-256 (over the wire and in plan_approvals) is the file's.
# Bug: the hash is fed in 64 KiB chunks and the final partial chunk is left out, for plans
# over 64 KiB whose size is not a multiple of it. The same function checks the file on
# approve and artifact/read, so the host agrees with itself; only a client hashing the
# bytes sees that the recorded hash is not the file's.
@variant("ho-af-large-hash-drops-tail")
def large_hash_drops_tail() -> None:
    from dataclasses import replace

    from reference_host import approvals, artifacts

    def write_artifact(root: str, content: bytes, fault: Callable[[str], bool]) -> Any:
        written = artifacts.write_artifact(root, content, fault)
        return replace(written, sha256=_chunked_sha256(content))

    def read_verified(root: str, relative_path: str, sha256: str, byte_size: int) -> bytes:
        content = artifacts.read_artifact(root, relative_path, limit=byte_size + 1)
        if len(content) != byte_size or _chunked_sha256(content) != sha256:
            raise _modified(relative_path)
        return content

    patch(approvals, "write_artifact", write_artifact)
    _patch_read_verified(read_verified)


CASES = [
    BrokenCase(
        "ho-af-content-addressed-name",
        "artifact_integrity",
        "two_identical_submissions_at_the_same_moment",
        "R2.4",
        "submissions share artifact paths",
    ),
    BrokenCase(
        "ho-af-same-instant-name-replaces",
        "artifact_integrity",
        "two_identical_submissions_at_the_same_moment",
        "R2.4",
        "submissions share artifact paths",
    ),
    BrokenCase(
        "ho-af-long-title-name",
        "artifact_integrity",
        "title_and_question_are_kept_exactly_as and characters",
        "R2.6",
        "the host lists no approval for the session",
    ),
    BrokenCase(
        "ho-af-bom-stripped",
        "artifact_integrity",
        "markdown_is_stored_byte_for_byte_sample and order",
        "R2.1",
        "artifact bytes differ from the submitted markdown",
    ),
    BrokenCase(
        "ho-af-lone-cr-translated",
        "execution",
        "the_execution_is_given_the_plans_text and endings",
        "P15",
        "the model was not given the plan's full content, exactly as submitted",
    ),
    BrokenCase(
        "ho-af-blank-markdown-refused",
        "artifact_integrity",
        "markdown_is_stored_byte_for_byte_sample and empty",
        "R2.1",
        "the host lists no approval for the session",
    ),
    BrokenCase(
        "ho-af-large-size-only-check",
        "artifact_integrity",
        "a_large_plan_file_changed_in_its",
        "P13",
        "expected the host to refuse, but it answered",
    ),
    BrokenCase(
        "ho-af-read-limit-off-by-one",
        "artifact_integrity",
        "a_plan_file_change_on_disk_after and extended",
        "P13",
        "expected the host to refuse, but it answered",
    ),
    BrokenCase(
        "ho-af-verify-cache-by-stat",
        "artifact_integrity",
        "a_plan_opened_before_its_file_changed and modification",
        "P13",
        "opening the plan returned the",
    ),
    BrokenCase(
        "ho-af-path-by-hash",
        "artifact_integrity",
        "a_revision_whose_file_was_change_is and changed",
        "P13",
        "expected the host to refuse, but it answered",
    ),
    BrokenCase(
        "ho-af-final-symlink-followed",
        "artifact_integrity",
        "a_plan_file_change_on_disk_after and replaced",
        "P13",
        "expected the host to refuse, but it answered",
    ),
    BrokenCase(
        "ho-af-urlsafe-base64",
        "artifact_integrity",
        "opening_the_artifact_returns_the_files_exact and order",
        "R3.2",
        "contentBase64 is not standard base64",
    ),
    BrokenCase(
        "ho-af-artifact-read-any-session",
        "isolation",
        "a_plan_cannot_be_done_through_another and open",
        "R5.9",
        "expected the host to refuse, but it answered",
    ),
    BrokenCase(
        "ho-af-stale-timer-clears-pending",
        "deadline",
        "a_plan_submitted_after_a_rejected_one and still_waits",
        "R3.8",
        "the session names the pending approval",
    ),
    BrokenCase(
        "ho-af-recreate-missing-root",
        "artifact_integrity",
        "a_project_folder_that_disappeared_is_refused",
        "R2.12",
        "the SubmitPlan call ran, expected WORKSPACE_INVALID",
    ),
    BrokenCase(
        "ho-af-large-hash-drops-tail",
        "artifact_integrity",
        "markdown_is_stored_byte_for_byte_sample and MiB",
        "R2.11",
        "stored SHA-256",
    ),
]
