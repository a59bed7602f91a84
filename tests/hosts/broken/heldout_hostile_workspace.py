"""Broken hosts: a held-out set (a hostile or unusual workspace), written from the contract
alone."""

from __future__ import annotations

import errno
import os
import unicodedata
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hosts.registry import BrokenCase, patch, variant

if TYPE_CHECKING:
    import regex

    from reference_host.tools.budget import Budget


# P10 (Read gives the file's text as stored): Read decodes the file with "utf-8-sig", so
# that a file saved by a Windows editor does not start with a stray U+FEFF. The byte order
# mark is part of the stored text, and Read drops it.
# Observed: the tool message of a Read of a file that starts with EF BB BF lacks the
# U+FEFF the file holds (the rest is exact).
# Recipe: workspace file `bom.txt` = b"\xef\xbb\xbfhello\n"; Agent turn, model calls
# Read {"path": "bom.txt"}; the next provider request's tool message holds "hello\n" and
# no "\ufeff".
@variant("hw-read-strips-bom")
def read_strips_bom() -> None:
    from reference_host.tools import files
    from reference_host.workspace import resolve_inside

    def read(root: Path, relative: str, offset: int | None, limit: int | None) -> str:
        path = resolve_inside(root, relative, must_exist=True)
        files._require_regular(path, relative)
        try:
            text = path.read_bytes().decode("utf-8-sig", errors="replace")
        except OSError as exc:
            raise files._io_error(relative, exc) from exc
        if offset is None and limit is None:
            return text
        start = (offset or 1) - 1
        lines = files._split_lines(text)
        end = len(lines) if limit is None else start + limit
        return "".join(lines[start:end])

    patch(files.Read, "_read", staticmethod(read))


# P10 (Read: "With offset it starts at that line, counted from 1, and with limit it gives
# at most that many lines (fewer where the file ends first)"). Bug: the line splitter drops
# the piece after the last "\n" unconditionally (it assumes every file ends with a line
# end, so the last piece is always empty), so a file without a final line end loses its
# last line whenever offset or limit is given. A Read without them is exact.
# Observed: Read {"path": "f.txt", "offset": 3} of b"one\ntwo\nthree" gives "" instead of
# "three"; Read {"path": "f.txt", "limit": 5} gives "one\ntwo\n".
# Recipe: write f.txt without a final newline; model calls Read with offset 3 (or limit 5);
# the tool message misses "three".
@variant("hw-read-range-drops-unterminated-line")
def read_range_drops_unterminated_line() -> None:
    from reference_host.tools import files

    def split_lines(text: str) -> list[str]:
        return [line + "\n" for line in text.split("\n")[:-1]]

    patch(files, "_split_lines", split_lines)


def _grep_file_lines(
    relative: str,
    lines: list[tuple[int, str]],
    compiled: regex.Pattern[str],
    budget: Budget,
    out: list[str],
) -> bool:
    """Append the matching lines to ``out`` as the reference host does; False once capped."""
    from reference_host.tools import files

    for number, line in lines:
        if not files._search(compiled, line, budget):
            continue
        if len(out) == files.GREP_MAX_MATCHES:
            out.append(
                f"[results capped at {files.GREP_MAX_MATCHES} matches; narrow the pattern or glob]"
            )
            return False
        out.append(f"{relative}:{number}:{line}")
    return True


# P10 (Grep: "Only LF ends a line (a CR just before it is not part of the line) ... a lone
# CR, U+2028, U+0085 or a form feed is a character inside a line"). Bug: Grep splits a
# file's text with str.splitlines(), which also breaks lines at a lone CR, a form feed,
# U+0085, U+2028 and U+2029 (and the other Unicode line boundaries). `^`/`$` then anchor
# inside a line, and the line numbers after such a character are too high.
# Observed: file `cr.txt` = b"alpha\rbeta\n"; Grep {"pattern": "^beta"} reports
# "cr.txt:2:beta" where no line matches (the reference answers "(no matches)"); Grep
# {"pattern": "alpha.beta"} finds nothing where "cr.txt:1:alpha\rbeta" is the match.
# Recipe: a file with a lone CR (or U+2028, or \f) inside a line; Grep for "^" + the text
# after it; the tool message reports a match (or the wrong line number).
@variant("hw-grep-splitlines")
def grep_splitlines() -> None:
    from reference_host.tools import files

    def grep(
        root: Path, compiled: regex.Pattern[str], parts: list[str] | None, budget: Budget
    ) -> str:
        out: list[str] = []
        for relative, real in files._workspace_files(root, budget):
            if parts is not None and not files._glob_match(parts, relative.split("/")):
                continue
            try:
                data = real.read_bytes()
            except OSError:
                continue
            if b"\0" in data[: files._BINARY_PROBE]:
                continue
            text = data.decode("utf-8", errors="replace")
            numbered = list(enumerate(text.splitlines(), start=1))
            if not _grep_file_lines(relative, numbered, compiled, budget, out):
                return "\n".join(out)
        return "\n".join(out) if out else files.NO_MATCHES

    patch(files.Grep, "_grep", staticmethod(grep))


# P10 (Grep: "matched against each line on its own"; each matching file's path "with the
# matching line"). Bug: Grep reads each file line by line with a bounded readline (8 KiB, as
# a fixed line buffer would), and numbers every piece it gets as a line: a line longer than
# 8 KiB is searched in pieces. A match that straddles a piece boundary is missed, `^`
# anchors at a piece boundary, the reported line is only a piece of it, and every later
# line number is too high.
# Observed: file `long.txt` = "a" * 8192 + "TAIL\nz\n"; Grep {"pattern": "^TAIL"} reports
# "long.txt:2:TAIL" (no line starts with TAIL); Grep {"pattern": "^z$"} reports line 3
# instead of line 2.
# Recipe: a minified file with one line over 8 KiB; Grep for text after the 8192nd byte or
# for the next line; compare line number and text.
@variant("hw-grep-long-line-pieces")
def grep_long_line_pieces() -> None:
    from reference_host.tools import files

    line_buffer = 8192

    def grep(
        root: Path, compiled: regex.Pattern[str], parts: list[str] | None, budget: Budget
    ) -> str:
        out: list[str] = []
        for relative, real in files._workspace_files(root, budget):
            if parts is not None and not files._glob_match(parts, relative.split("/")):
                continue
            try:
                with real.open("rb") as handle:
                    head = handle.read(files._BINARY_PROBE)
                    if b"\0" in head:
                        continue
                    handle.seek(0)
                    pieces = list(iter(lambda: handle.readline(line_buffer), b""))
            except OSError:
                continue
            numbered = [
                (number, piece.decode("utf-8", "replace").removesuffix("\n").removesuffix("\r"))
                for number, piece in enumerate(pieces, start=1)
            ]
            if not _grep_file_lines(relative, numbered, compiled, budget, out):
                return "\n".join(out)
        return "\n".join(out) if out else files.NO_MATCHES

    patch(files.Grep, "_grep", staticmethod(grep))


# P10 (Glob and Grep: "Files in hidden folders (`.github/`) count like any other; a `.git`
# folder you may leave out"). Bug: the shared workspace walker prunes every folder whose
# name starts with "." (the usual "skip .git, .venv, .cache ..." shortcut), so Glob and
# Grep never see files under `.github/`, `.config/` or `.pi/`. Hidden files at any level
# still count.
# Observed: with `.github/workflows/ci.yml`, Glob {"pattern": "**/*.yml"} answers
# "(no matches)"; Grep {"pattern": "runs-on"} too.
# Recipe: a file in a hidden folder; Glob "**/*" or Grep for its text; the file is missing.
@variant("hw-walk-skips-hidden-folders")
def walk_skips_hidden_folders() -> None:
    import stat

    from reference_host.tools import files

    def workspace_files(root: Path, budget: Budget) -> list[tuple[str, Path]]:
        found: list[tuple[str, Path]] = []
        for directory, dirnames, filenames in os.walk(root):
            budget.check()
            dirnames[:] = [name for name in dirnames if not name.startswith(".")]
            base = Path(directory)
            for name in filenames:
                if name in files._SKIPPED_NAMES:
                    continue
                budget.check()
                path = base / name
                try:
                    real = path.resolve(strict=True)
                    mode = real.stat().st_mode
                except (OSError, RuntimeError):
                    continue
                if real.is_relative_to(root) and stat.S_ISREG(mode):
                    found.append((path.relative_to(root).as_posix(), real))
        found.sort()
        return found

    patch(files, "_workspace_files", workspace_files)


# P10 (Glob "gives the workspace-relative paths of the files that match"; Grep "each
# matching file's path"), and the contract's "do not change its Unicode form" for paths.
# Bug: the walker normalises every file and folder name to NFC (so that a pattern typed
# with a precomposed "é" also finds a file a Mac saved in decomposed form), and reports
# the normalised name. A file whose name is in NFD is then reported under a path that does
# not exist: a Read of the path Glob gave fails with FILE_NOT_FOUND.
# Observed: workspace file "cafe\u0301.md" (NFD); Glob {"pattern": "*.md"} gives
# "caf\u00e9.md".
# Recipe: create a file with a decomposed accent; Glob "*.md"; the tool message's path is
# not the bytes of the file's name (and Read of it is FILE_NOT_FOUND).
@variant("hw-walk-nfc-names")
def walk_nfc_names() -> None:
    from reference_host.tools import files

    original = files._workspace_files

    def workspace_files(root: Path, budget: Budget) -> list[tuple[str, Path]]:
        found = [
            (unicodedata.normalize("NFC", relative), real)
            for relative, real in original(root, budget)
        ]
        found.sort()
        return found

    patch(files, "_workspace_files", workspace_files, wraps=True)


# R5.8 ("a tool never reads or writes another session's workspace, whatever the path:
# absolute, climbing out with `..`, or through a link inside the project"). Bug: the
# "inside the workspace" test compares the resolved path with the resolved root as
# strings (startswith), so a sibling folder whose name begins with the root's name
# (`/w/proj` and `/w/proj-b`) counts as inside.
# Observed: session A on /w/proj, session B on /w/proj-b holding secret.txt; in A, Read
# {"path": "../proj-b/secret.txt"} (or the absolute path, or a link proj/leak ->
# ../proj-b/secret.txt) is `ok` and the secret reaches the model; a Write there changes
# B's file. The reference refuses with PATH_OUTSIDE_WORKSPACE.
# Recipe: two workspaces, the second's name the first's plus a suffix; Read/Write across.
@variant("hw-inside-check-string-prefix")
def inside_check_string_prefix() -> None:
    from reference_host import turns, workspace
    from reference_host.errors import HostError
    from reference_host.tools import files

    def resolve_inside(root: Path, relative: str, *, must_exist: bool) -> Path:
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
        except (OSError, RuntimeError) as exc:
            raise HostError(
                "INVALID_TOOL_INPUT",
                f"path {relative!r} cannot be resolved: {exc}",
                {"path": relative},
            ) from exc
        if not str(resolved).startswith(str(real_root)):
            raise HostError(
                "PATH_OUTSIDE_WORKSPACE",
                f"path {relative!r} is outside the workspace",
                {"path": relative},
            )
        if must_exist and not resolved.exists():
            raise HostError(
                "FILE_NOT_FOUND", f"path {relative!r} does not exist", {"path": relative}
            )
        return resolved

    patch(workspace, "resolve_inside", resolve_inside)
    patch(files, "resolve_inside", resolve_inside)
    patch(turns, "resolve_inside", resolve_inside)


# ADR §2 ("creates the file without replacement ... A path escape, symlink ambiguity ...
# creates no approval"), R2.10 and the contract's "create the file ... without following
# symlinks in `.pi` or `.pi/plan` ... a symlink ... is PLAN_PATH_UNSAFE". Bug: the host
# opens `.pi/plan`, the folder it owns, with O_NOFOLLOW, but opens `.pi` (which projects
# also use for their own settings) with ordinary flags, so a `.pi` that is a symlink is
# followed.
# Observed: `.pi` -> `elsewhere/` (a folder inside or outside the project); SubmitPlan is
# `ok`, an approval is pending and the artifact is written to elsewhere/plan/<name>.md;
# the reference answers PLAN_PATH_UNSAFE and creates no approval.
# Recipe: ln -s some-folder <root>/.pi; Plan turn, SubmitPlan; check the tool result code,
# approval/list (empty) and that nothing was written under some-folder.
@variant("hw-dot-pi-link-followed")
def dot_pi_link_followed() -> None:
    from reference_host import artifacts
    from reference_host.errors import HostError

    def open_plan_dir(parent_fd: int, name: str, shown: str) -> tuple[int, bool]:
        created = True
        try:
            os.mkdir(name, 0o755, dir_fd=parent_fd)
        except FileExistsError:
            created = False
        except FileNotFoundError as exc:
            raise HostError(
                "WORKSPACE_INVALID", f"creating {shown}: the workspace is gone"
            ) from exc
        except OSError as exc:
            raise artifacts._write_failed(f"creating {shown}", exc) from exc
        flags = artifacts._DIR_FLAGS
        if name == artifacts.PLAN_DIR[0]:  # only the plan folder itself is host-owned
            flags &= ~os.O_NOFOLLOW
        try:
            return os.open(name, flags, dir_fd=parent_fd), created
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                raise HostError(
                    "PLAN_PATH_UNSAFE",
                    f"{shown} is a symlink or not a directory; the host does not follow it",
                ) from exc
            raise HostError("ARTIFACT_WRITE_FAILED", f"cannot open {shown}: {exc}") from exc

    patch(artifacts, "_open_plan_dir", open_plan_dir)


# Contract, Plan artifacts: "A path escape, a symlink or a `.pi`/`.pi/plan` that is not a
# folder is PLAN_PATH_UNSAFE; a write or flush that fails ... is ARTIFACT_WRITE_FAILED"
# (R2.12, error catalog PLAN_PATH_UNSAFE: ".pi/plan is not a directory"). Bug: the host
# checks for a symlink (lstat) and refuses it as unsafe, but treats any other failure to
# open the folder, "not a directory" (ENOTDIR) included, as one more I/O failure. No
# approval is created either way; only the code is wrong.
# Observed: `.pi/plan` (or `.pi`) is a regular file; SubmitPlan's tool result is `error`
# with ARTIFACT_WRITE_FAILED instead of PLAN_PATH_UNSAFE.
# Recipe: mkdir .pi && touch .pi/plan; Plan turn, SubmitPlan; read the tool result code.
@variant("hw-plan-not-dir-write-failed")
def plan_not_dir_write_failed() -> None:
    import stat

    from reference_host import artifacts
    from reference_host.errors import HostError

    def open_plan_dir(parent_fd: int, name: str, shown: str) -> tuple[int, bool]:
        created = True
        try:
            os.mkdir(name, 0o755, dir_fd=parent_fd)
        except FileExistsError:
            created = False
        except FileNotFoundError as exc:
            raise HostError(
                "WORKSPACE_INVALID", f"creating {shown}: the workspace is gone"
            ) from exc
        except OSError as exc:
            raise artifacts._write_failed(f"creating {shown}", exc) from exc
        try:
            if stat.S_ISLNK(os.lstat(name, dir_fd=parent_fd).st_mode):
                raise HostError(
                    "PLAN_PATH_UNSAFE", f"{shown} is a symlink; the host does not follow it"
                )
            return os.open(name, artifacts._DIR_FLAGS, dir_fd=parent_fd), created
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # replaced by a link since the lstat
                raise HostError(
                    "PLAN_PATH_UNSAFE", f"{shown} is a symlink; the host does not follow it"
                ) from exc
            raise HostError("ARTIFACT_WRITE_FAILED", f"cannot open {shown}: {exc}") from exc

    patch(artifacts, "_open_plan_dir", open_plan_dir)


# P12 ("the model's Write and Edit into `.pi/plan/` are refused with TOOL_DENIED ... however
# the path is spelt (`src/../.pi/plan/x.md`, a symlinked folder that leads into it)"), C10.
# Bug: the guard normalises the path lexically (os.path.normpath, which handles `..`) and
# compares it with `<root>/.pi/plan`, but does not resolve links; a folder link that leads
# into the plan folder passes the guard, and the Write itself follows the link.
# Observed: `notes` -> `.pi/plan` inside the project; Agent turn (auto), Write {"path":
# "notes/x.md", ...} is `ok` and creates .pi/plan/x.md; an Edit of "notes/<artifact>.md"
# through the link changes an artifact (then approve gives ARTIFACT_MODIFIED).
# Recipe: after a plan was submitted, ln -s .pi/plan notes; Write notes/new.md or Edit
# notes/<artifact name>; expect TOOL_DENIED and the plan folder unchanged.
@variant("hw-plan-guard-lexical")
def plan_guard_lexical() -> None:
    from reference_host import turns
    from reference_host.errors import HostError
    from reference_host.workspace import resolve_inside

    def refuse_plan_folder(root: Path, path: str) -> None:
        resolve_inside(root, path, must_exist=False)  # escapes are refused as before
        real_root = root.resolve()
        target = Path(os.path.normpath(real_root / path))
        plan_folder = real_root / ".pi" / "plan"
        if target == plan_folder or target.is_relative_to(plan_folder):
            raise HostError("TOOL_DENIED", "plan artifacts are immutable; write somewhere else")

    patch(turns, "_refuse_plan_folder", refuse_plan_folder)


# P10 (Edit: "afterwards the file holds exactly the edited text, every other byte as it
# was"). Bug: Edit reads the file as text with Python's default newline handling
# (universal newlines), which turns every CR LF and lone CR into LF, and writes the result
# back: an Edit of a CRLF file rewrites every line end of the file, not only the edited
# text. An `old_string` holding "\r\n" is not found (EDIT_NO_MATCH).
# Observed: crlf.txt = b"one\r\ntwo\r\nthree\r\n"; Edit old_string "two" new_string "2"
# leaves b"one\n2\nthree\n" instead of b"one\r\n2\r\nthree\r\n".
# Recipe: a CRLF (or CR-only) file; Agent turn in auto, Edit one word; compare the bytes.
@variant("hw-edit-universal-newlines")
def edit_universal_newlines() -> None:
    from reference_host.errors import HostError
    from reference_host.tools import files
    from reference_host.workspace import resolve_inside

    def edit(root: Path, relative: str, old: str, new: str, replace_all: bool) -> str:
        path = resolve_inside(root, relative, must_exist=True)
        files._require_regular(path, relative)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise files._io_error(relative, exc) from exc
        except UnicodeDecodeError as exc:
            raise HostError(
                "INVALID_TOOL_INPUT", f"{relative} is not valid UTF-8", {"path": relative}
            ) from exc
        count = text.count(old)
        if count == 0:
            raise HostError(
                "EDIT_NO_MATCH", f"Edit: old_string not found in {relative}", {"path": relative}
            )
        if count > 1 and not replace_all:
            raise HostError(
                "INVALID_TOOL_INPUT",
                f"Edit: old_string occurs {count} times in {relative}; "
                "add context to make it unique or set replace_all",
                {"path": relative, "occurrences": count},
            )
        files._write_exact(root, relative, text.replace(old, new).encode("utf-8"))
        noun = "occurrence" if count == 1 else "occurrences"
        return f"Replaced {count} {noun} in {relative}"

    patch(files.Edit, "_edit", staticmethod(edit))


# Contract, Sessions: "`workspaceRoot` and `provider` are reported exactly as given (no
# path resolution ...), and a command's `cwd` is that same `workspaceRoot` string" (R7.2,
# R7.3). Bug: the command runner canonicalises the working folder (os.path.realpath, so
# the shell's PWD has no `..` or link in it) and reports that canonical path in
# `command/started`; the command_audit row still records the session's root as given.
# With an ordinary root nothing differs.
# Observed: session created on "/tmp/x/link-to-ws" (a symlink), "/tmp/x/ws/" (trailing
# slash) or "/tmp/x/a/../ws"; Bash "true" -> command/started.cwd is "/tmp/x/ws", not the
# workspaceRoot string.
# Recipe: create the session through a link, `..` or a trailing slash; run any Bash
# command; compare command/started.cwd with session.workspaceRoot (and with
# command_audit.cwd).
@variant("hw-command-cwd-canonical")
def command_cwd_canonical() -> None:
    from reference_host import turns

    original: Callable[..., Awaitable[Any]] = vars(turns)["run_command"]

    async def run_command(*, cwd: str, **kwargs: Any) -> Any:
        return await original(cwd=os.path.realpath(cwd), **kwargs)

    patch(turns, "run_command", run_command, wraps=True)


# P13 ("approve and artifact/read check the file's bytes against its recorded SHA-256 and
# size, on every call: a read that matched does not vouch for a later one. Any change to
# the bytes ... also one of the same size (and the file's modification time put back) ...
# is ARTIFACT_MODIFIED"). Bug: to spare re-hashing a large plan on every artifact/read, the
# host remembers, per approval, the (size, mtime) of the file it last verified together with
# its bytes, and skips the check when a fresh stat shows the same size and mtime. A change
# made in place that keeps the size and puts the mtime back goes unseen: artifact/read
# returns the old bytes (not the file's) and approve approves the changed plan. The cache
# lives on the Approvals instance, so a restart forgets it.
# Observed: artifact/read (ok); overwrite one byte of the artifact in place, os.utime back
# to the old times; artifact/read answers the original bytes and approve succeeds, where
# the reference answers ARTIFACT_MODIFIED to both.
# Recipe: submit a plan; artifact/read; chmod u+w, rewrite one byte in place, restore
# mtime; artifact/read or approval/approve -> expect ARTIFACT_MODIFIED.
@variant("hw-artifact-stat-cache")
def artifact_stat_cache() -> None:
    import asyncio
    import weakref

    from reference_host.approvals import Approvals
    from reference_host.storage import ApprovalRow, SessionRow

    verified: weakref.WeakKeyDictionary[Approvals, dict[str, tuple[int, int, bytes]]] = (
        weakref.WeakKeyDictionary()
    )
    original = Approvals.verified_content

    def stamp(root: str, relative: str) -> tuple[int, int] | None:
        try:
            info = (Path(root) / relative).lstat()
        except OSError:
            return None
        return info.st_size, info.st_mtime_ns

    async def verified_content(self: Approvals, session: SessionRow, row: ApprovalRow) -> bytes:
        cache = verified.setdefault(self, {})
        now = None
        if session.workspace_root is not None and row.artifact_path is not None:
            now = await asyncio.to_thread(stamp, session.workspace_root, row.artifact_path)
        hit = cache.get(row.id)
        if now is not None and hit is not None and (hit[0], hit[1]) == now:
            return hit[2]
        content = await original(self, session, row)
        if now is not None:
            cache[row.id] = (now[0], now[1], content)
        return content

    patch(Approvals, "verified_content", verified_content, wraps=True)


# P7 ("a denied call does nothing (not even the folders a Write would have made)"), P8
# (an unattended call that needs an answer "does nothing"). Bug: before it asks, the host
# prepares a Write's target: it resolves the path and creates the missing parent folders,
# so that the location it checks (and would show in the question) is final and no link can
# appear in between. A Write the user denies, or that an unattended run refuses with
# PERMISSION_UNAVAILABLE, leaves those empty folders behind; the file itself is not written.
# Observed: session in `ask`; Write {"path": "new/deep/dir/f.txt", ...}; permission/requested
# arrives while new/deep/dir already exists; deny -> PERMISSION_DENIED, but new/deep/dir
# stays in the workspace.
# Recipe: Agent turn under ask, Write into folders that do not exist; deny; list the
# workspace (expect no new folder).
@variant("hw-write-folders-before-ask")
def write_folders_before_ask() -> None:
    import contextlib

    from reference_host.errors import HostError
    from reference_host.storage import SessionRow
    from reference_host.turns import TurnRunner
    from reference_host.workspace import require_root, resolve_inside

    original = TurnRunner._require_permission

    def prepare(workspace_root: str, relative: str) -> None:
        with contextlib.suppress(HostError, OSError):
            root = require_root(Path(workspace_root))
            target = resolve_inside(root, relative, must_exist=False)
            target.parent.mkdir(parents=True, exist_ok=True)

    async def require_permission(
        self: TurnRunner,
        session: SessionRow,
        turn_id: str,
        call: Any,
        args: dict[str, Any],
        unattended: bool,
    ) -> None:
        if call.name == "Write" and session.workspace_root is not None:
            import asyncio

            await asyncio.to_thread(prepare, session.workspace_root, str(args["path"]))
        await original(self, session, turn_id, call, args, unattended)

    patch(TurnRunner, "_require_permission", require_permission, wraps=True)


# P13 ("A symbolic link in the artifact's place counts as not a regular file wherever it
# leads, even to a copy of the recorded bytes: do not follow links in the plan folder when
# reading either"), ADR §2 ("symlink ambiguity"). Bug: the artifact reader reaches the
# plan folder without following links, but opens the artifact itself with ordinary flags
# and checks "regular file" with fstat on the opened descriptor, which describes the link's
# target. An artifact replaced by a link to a file holding the recorded bytes passes.
# Observed: submit a plan; copy the artifact to copy.md, replace the artifact with a link
# to ../../copy.md; artifact/read answers the bytes and approve approves, where the
# reference answers ARTIFACT_UNREADABLE.
# Recipe: as above; artifact/read and approval/approve -> expect ARTIFACT_UNREADABLE and the
# approval still pending.
@variant("hw-artifact-link-followed")
def artifact_link_followed() -> None:
    import stat

    from reference_host import artifacts
    from reference_host.errors import HostError

    def read_artifact(root: str, relative_path: str, limit: int | None = None) -> bytes:
        fd: int | None = None
        try:
            fd, name = artifacts._plan_folder(root, relative_path)
            file_fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
            with os.fdopen(file_fd, "rb") as handle:
                if not stat.S_ISREG(os.fstat(file_fd).st_mode):
                    raise HostError("ARTIFACT_UNREADABLE", f"{relative_path} is not a regular file")
                return handle.read() if limit is None else handle.read(limit)
        except OSError as exc:
            raise HostError("ARTIFACT_UNREADABLE", f"cannot read {relative_path}: {exc}") from exc
        finally:
            if fd is not None:
                os.close(fd)

    patch(artifacts, "read_artifact", read_artifact)


# Errors and tool results: "anything else that goes wrong inside a tool (an I/O error ...)
# is TOOL_FAILED"; PERMISSION_DENIED (status `denied`) is the user's answer to a question
# (P7, P9). Bug: the file tools map the operating system's EACCES/EPERM ("Permission
# denied") to the canonical PERMISSION_DENIED, so a Read of a file without read permission,
# or a Write/Edit of a read-only file or into a read-only folder, is reported `denied` with
# PERMISSION_DENIED as if the user had refused, instead of `error` with TOOL_FAILED.
# Observed (host not running as root): chmod 000 secret.txt; Read {"path": "secret.txt"}
# -> turn/toolResult status "denied", error.code PERMISSION_DENIED.
# Recipe: a file without read permission (or a read-only file for Write in auto); call the
# tool; expect status error / TOOL_FAILED.
@variant("hw-eacces-permission-denied")
def eacces_permission_denied() -> None:
    from reference_host.errors import HostError
    from reference_host.tools import files

    def io_error(relative: str, exc: OSError) -> HostError:
        reason = exc.strerror or str(exc)
        if isinstance(exc, FileNotFoundError):
            code = "FILE_NOT_FOUND"
        elif isinstance(exc, PermissionError):
            code = "PERMISSION_DENIED"
        else:
            code = "TOOL_FAILED"
        return HostError(code, f"{relative}: {reason}", {"path": relative})

    patch(files, "_io_error", io_error)


# hw-eacces-permission-denied is no case: it is caught only by a run whose hosts cannot
# read a file its mode forbids, and the suite's runs here are root's (docs/reliability.md).
CASES = [
    BrokenCase(
        "hw-read-strips-bom",
        "plan_tools",
        "starts_with_a_byte_order_mark",
        "P10",
        "Read gives the file's text as stored",
    ),
    BrokenCase(
        "hw-read-range-drops-unterminated-line",
        "plan_tools",
        "reading_from_a_last_line_without_a_line_end",
        "P10",
        "after its Read call the model was not given",
    ),
    BrokenCase(
        "hw-grep-splitlines",
        "plan_tools",
        "matches_line_by_line and other and breaks",
        "P10",
        "after its Grep call the model was not given",
    ),
    BrokenCase(
        "hw-grep-long-line-pieces",
        "plan_tools",
        "line_far_longer_than_a_read_buffer",
        "P10",
        "after its Grep call the model was not given 'long.txt'",
    ),
    BrokenCase(
        "hw-walk-skips-hidden-folders",
        "plan_tools",
        "matches_line_by_line and hidden",
        "P10",
        "after its Grep call the model was not given '.github/ci.yml'",
    ),
    BrokenCase(
        "hw-walk-nfc-names",
        "plan_tools",
        "decomposed_accent_as_it_is_on_disk",
        "P10",
        "it was given composed",
    ),
    BrokenCase(
        "hw-inside-check-string-prefix",
        "isolation",
        "writing_into_another_project_is_refused and link",
        "R5.8",
        "the Write into the other project ran",
    ),
    BrokenCase(
        "hw-dot-pi-link-followed",
        "artifact_integrity",
        "a_symlinked_pi_folder_is_not_followed",
        "R2.12",
        "the host wrote outside",
    ),
    BrokenCase(
        "hw-plan-not-dir-write-failed",
        "artifact_integrity",
        "plan_folder_is_unsafe and regular",
        "R2.12",
        "expected PLAN_PATH_UNSAFE",
    ),
    BrokenCase(
        "hw-plan-guard-lexical",
        "artifact_integrity",
        "cannot_write_into_the_plan_folder and linked",
        "P12",
        "the Write call ran, expected TOOL_DENIED",
    ),
    BrokenCase(
        "hw-edit-universal-newlines",
        "plan_tools",
        "editing_a_file_keeps_every_byte",
        "P10",
        "only 'two' was to change",
    ),
    BrokenCase(
        "hw-command-cwd-canonical",
        "shell",
        "runs_in_the_projects_path_exactly_as_the_session",
        "C5",
        "command/started names cwd",
    ),
    BrokenCase(
        "hw-artifact-stat-cache",
        "artifact_integrity",
        "opened_before_its_file_changed_is_refused_when_opened_again and modification",
        "P13",
        "which the file no longer holds",
    ),
    BrokenCase(
        "hw-write-folders-before-ask",
        "execution",
        "a_file_change_the_user_denied_leaves_no_folder",
        "P7",
        "drafts exists",
    ),
    BrokenCase(
        "hw-artifact-link-followed",
        "artifact_integrity",
        "replaced_by_a_link_to_a_copy_of_itself",
        "P13",
        "expected the host to refuse",
    ),
]
