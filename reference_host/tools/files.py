"""Workspace file tools: Read, Glob, Grep, Write and Edit.

Grep uses the ``regex`` engine for its match timeout, and Grep and Glob work within a time
budget (GREP_BUDGET_S, GLOB_BUDGET_S): a model-supplied pattern cannot freeze the host.

Every path is workspace-relative (an absolute path must lie inside the root) and is resolved
with :func:`~reference_host.workspace.resolve_inside`, so no tool reads, lists or writes
anything whose real location is outside the session's workspace. Directories named ``.git``
are skipped when walking. Filesystem work runs in a worker thread. Failures raise
:class:`~reference_host.errors.HostError`: WORKSPACE_REQUIRED / WORKSPACE_INVALID for the
root, PATH_OUTSIDE_WORKSPACE for escapes, INVALID_TOOL_INPUT for bad arguments (a directory
where a file is needed, text that is not UTF-8), FILE_NOT_FOUND for a missing file,
EDIT_NO_MATCH for an Edit whose old_string is absent, TOOL_FAILED for other I/O errors.
"""

from __future__ import annotations

import asyncio
import os
import stat
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from reference_host.errors import HostError
from reference_host.provider_client import ToolSpec
from reference_host.tools.base import ToolContext, validate_args
from reference_host.tools.budget import Budget, run_within
from reference_host.workspace import require_root, resolve_inside

if TYPE_CHECKING:
    import regex

__all__ = ["GREP_MAX_MATCHES", "NO_MATCHES", "Edit", "Glob", "Grep", "Read", "Write"]

GREP_MAX_MATCHES: Final = 500
GREP_BUDGET_S = 3.0
"""Seconds one Grep may spend walking and searching; past it the call is TOOL_FAILED."""
GLOB_BUDGET_S = 3.0
"""Seconds one Glob may spend walking and matching."""
SEARCH_SLICE_S: Final = 1.0
"""The longest one line's search may take (a pattern that backtracks without end). The
``regex`` engine counts its timeout in the process's CPU time, which a loaded machine hands
out slowly, so in real time a runaway line can take longer than this."""
NO_MATCHES: Final = "(no matches)"
_SKIPPED_NAMES: Final = frozenset({".git"})
_BINARY_PROBE: Final = 8192


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


_PATH: Final = {"type": "string", "description": "Workspace-relative path of the file."}


def _io_error(relative: str, exc: OSError) -> HostError:
    reason = exc.strerror or str(exc)
    code = "FILE_NOT_FOUND" if isinstance(exc, FileNotFoundError) else "TOOL_FAILED"
    return HostError(code, f"{relative}: {reason}", {"path": relative})


def _split_lines(text: str) -> list[str]:
    """Lines split on ``\\n`` only, each keeping its terminator."""
    lines = text.split("\n")
    kept = [line + "\n" for line in lines[:-1]]
    if lines[-1]:
        kept.append(lines[-1])
    return kept


def _require_regular(path: Path, relative: str) -> None:
    if not path.is_file():
        raise HostError(
            "INVALID_TOOL_INPUT", f"{relative} is not a regular file", {"path": relative}
        )


def _glob_parts(pattern: str) -> list[str]:
    """The ``/``-separated segments of a workspace glob; escapes are PATH_OUTSIDE_WORKSPACE."""
    if pattern.startswith("/") or ".." in pattern.split("/"):
        raise HostError(
            "PATH_OUTSIDE_WORKSPACE",
            f"glob {pattern!r} reaches outside the workspace",
            {"pattern": pattern},
        )
    parts = [part for part in pattern.split("/") if part not in ("", ".")]
    if not parts:
        raise HostError("INVALID_TOOL_INPUT", f"glob {pattern!r} matches nothing")
    return parts


def _glob_match(pattern: list[str], path: list[str]) -> bool:
    """Whether path segments match glob segments; ``**`` spans zero or more segments."""
    # reachable[j]: pattern[:i] can match path[:j]
    reachable = [True] + [False] * len(path)
    for segment in pattern:
        if segment == "**":
            for j in range(1, len(path) + 1):
                reachable[j] = reachable[j] or reachable[j - 1]
        else:
            reachable = [False] + [
                reachable[j - 1] and fnmatchcase(path[j - 1], segment)
                for j in range(1, len(path) + 1)
            ]
    return reachable[-1]


def _workspace_files(root: Path, budget: Budget) -> list[tuple[str, Path]]:
    """(workspace-relative POSIX path, real path) of regular files inside ``root``, sorted.

    Symlinked directories are not descended; a symlinked file is listed only when its target
    is a regular file inside the root. TOOL_FAILED when ``budget`` runs out.
    """
    found: list[tuple[str, Path]] = []
    for directory, dirnames, filenames in os.walk(root):
        budget.check()
        dirnames[:] = [name for name in dirnames if name not in _SKIPPED_NAMES]
        base = Path(directory)
        for name in filenames:
            if name in _SKIPPED_NAMES:
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


class Read:
    """Return a workspace file's text."""

    name: Final = "Read"
    spec: Final = ToolSpec(
        name="Read",
        description=(
            "Read a text file in the workspace and return its contents (UTF-8). "
            "Use offset (1-based first line) and limit (number of lines) to read part of it."
        ),
        parameters=_schema(
            {
                "path": _PATH,
                "offset": {"type": "integer", "minimum": 1, "description": "First line, 1-based."},
                "limit": {"type": "integer", "minimum": 1, "description": "Lines to return."},
            },
            ["path"],
        ),
    )

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        """The file text (invalid UTF-8 replaced), optionally only lines offset..offset+limit."""
        args = validate_args(self.spec, args)
        root = require_root(ctx.workspace_root)
        return await asyncio.to_thread(
            self._read, root, args["path"], args.get("offset"), args.get("limit")
        )

    @staticmethod
    def _read(root: Path, relative: str, offset: int | None, limit: int | None) -> str:
        path = resolve_inside(root, relative, must_exist=True)
        _require_regular(path, relative)
        try:
            text = path.read_bytes().decode("utf-8", errors="replace")
        except OSError as exc:
            raise _io_error(relative, exc) from exc
        if offset is None and limit is None:
            return text
        start = (offset or 1) - 1
        lines = _split_lines(text)
        end = len(lines) if limit is None else start + limit
        return "".join(lines[start:end])


class Glob:
    """List workspace files matching a glob."""

    name: Final = "Glob"
    spec: Final = ToolSpec(
        name="Glob",
        description=(
            "Find files in the workspace whose relative path matches a glob such as '**/*.py' "
            "('**' spans directories); returns the matching paths sorted, one per line."
        ),
        parameters=_schema(
            {"pattern": {"type": "string", "minLength": 1, "description": "Glob pattern."}},
            ["pattern"],
        ),
    )

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        """Matching workspace-relative paths, sorted, one per line, or ``(no matches)``."""
        args = validate_args(self.spec, args)
        root = require_root(ctx.workspace_root)
        parts = _glob_parts(args["pattern"])

        def glob(budget: Budget) -> list[str]:
            matches = []
            for relative, _ in _workspace_files(root, budget):
                budget.check()
                if _glob_match(parts, relative.split("/")):
                    matches.append(relative)
            return matches

        matches = await run_within(Budget("Glob", GLOB_BUDGET_S), glob)
        return "\n".join(matches) if matches else NO_MATCHES


class Grep:
    """Search workspace files for a regular expression."""

    name: Final = "Grep"
    spec: Final = ToolSpec(
        name="Grep",
        description=(
            "Search the workspace's text files for a regular expression (Python syntax), "
            "optionally only files matching a glob; returns 'path:line:text' for each match."
        ),
        parameters=_schema(
            {
                "pattern": {"type": "string", "minLength": 1, "description": "Regex to find."},
                "glob": {"type": "string", "minLength": 1, "description": "Only these files."},
            },
            ["pattern"],
        ),
    )

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        """``path:line:text`` lines in path order, at most GREP_MAX_MATCHES plus a note."""
        args = validate_args(self.spec, args)
        root = require_root(ctx.workspace_root)
        import regex  # only Grep needs it, and it costs a host start-up a tenth more

        try:
            compiled = regex.compile(args["pattern"])
        except (regex.error, OverflowError, RecursionError) as exc:
            raise HostError(
                "INVALID_TOOL_INPUT", f"Grep: pattern: invalid regular expression: {exc}"
            ) from exc
        glob = args.get("glob")
        parts = None if glob is None else _glob_parts(glob)
        budget = Budget("Grep", GREP_BUDGET_S)
        return await run_within(budget, lambda b: self._grep(root, compiled, parts, b))

    @staticmethod
    def _grep(
        root: Path, compiled: regex.Pattern[str], parts: list[str] | None, budget: Budget
    ) -> str:
        out: list[str] = []
        for relative, real in _workspace_files(root, budget):
            if parts is not None and not _glob_match(parts, relative.split("/")):
                continue
            try:
                data = real.read_bytes()
            except OSError:
                continue
            if b"\0" in data[:_BINARY_PROBE]:
                continue
            text = data.decode("utf-8", errors="replace")
            for number, line in enumerate(text.split("\n"), start=1):
                line = line.removesuffix("\r")
                if not _search(compiled, line, budget):
                    continue
                if len(out) == GREP_MAX_MATCHES:
                    out.append(
                        f"[results capped at {GREP_MAX_MATCHES} matches; "
                        "narrow the pattern or glob]"
                    )
                    return "\n".join(out)
                out.append(f"{relative}:{number}:{line}")
        return "\n".join(out) if out else NO_MATCHES


def _search(compiled: regex.Pattern[str], line: str, budget: Budget) -> bool:
    """Whether ``compiled`` matches in ``line``; TOOL_FAILED when the budget runs out.

    One search may take at most SEARCH_SLICE_S, so that a cancelled call releases its
    worker thread soon; the GIL is released meanwhile, so the host keeps serving.
    """
    budget.check()
    try:
        timeout = min(budget.remaining(), SEARCH_SLICE_S)
        return compiled.search(line, timeout=timeout, concurrent=True) is not None
    except TimeoutError as exc:
        raise budget.exceeded() from exc


def _encode(tool: str, field: str, text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise HostError(
            "INVALID_TOOL_INPUT", f"{tool}: {field}: not valid Unicode ({exc.reason})"
        ) from exc


def _write_exact(root: Path, relative: str, data: bytes) -> None:
    """Write ``data`` to the workspace file, creating parent directories inside the root.

    The target is re-resolved after the directories are made and opened without following
    a final symlink, so nothing is written through a link that leaves the workspace.
    """
    path = resolve_inside(root, relative, must_exist=False)
    if path.exists() and not path.is_file():
        raise HostError(
            "INVALID_TOOL_INPUT", f"{relative} is not a regular file", {"path": relative}
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path = resolve_inside(root, relative, must_exist=False)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o666)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
    except OSError as exc:
        raise _io_error(relative, exc) from exc


class Write:
    """Create or overwrite a workspace file."""

    name: Final = "Write"
    spec: Final = ToolSpec(
        name="Write",
        description=(
            "Create or overwrite a file in the workspace with exactly the given content "
            "(UTF-8), creating missing parent directories."
        ),
        parameters=_schema(
            {"path": _PATH, "content": {"type": "string", "description": "The whole file."}},
            ["path", "content"],
        ),
    )

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        """Writes the content's UTF-8 bytes unchanged; returns a one-line confirmation."""
        args = validate_args(self.spec, args)
        root = require_root(ctx.workspace_root)
        data = _encode("Write", "content", args["content"])
        await asyncio.to_thread(_write_exact, root, args["path"], data)
        return f"Wrote {len(data)} bytes to {args['path']}"


class Edit:
    """Replace text in a workspace file."""

    name: Final = "Edit"
    spec: Final = ToolSpec(
        name="Edit",
        description=(
            "Replace old_string with new_string in a workspace file; old_string must occur "
            "exactly once unless replace_all is true."
        ),
        parameters=_schema(
            {
                "path": _PATH,
                "old_string": {"type": "string", "minLength": 1, "description": "Text to find."},
                "new_string": {"type": "string", "description": "Replacement text."},
                "replace_all": {"type": "boolean", "description": "Replace every occurrence."},
            },
            ["path", "old_string", "new_string"],
        ),
    )

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        """Rewrites the file with the replacement, every other byte unchanged.

        EDIT_NO_MATCH when old_string is absent; INVALID_TOOL_INPUT when it occurs more
        than once without replace_all, or the file is not valid UTF-8.
        """
        args = validate_args(self.spec, args)
        root = require_root(ctx.workspace_root)
        old = args["old_string"]
        new = args["new_string"]
        _encode("Edit", "old_string", old)
        _encode("Edit", "new_string", new)
        return await asyncio.to_thread(
            self._edit, root, args["path"], old, new, bool(args.get("replace_all", False))
        )

    @staticmethod
    def _edit(root: Path, relative: str, old: str, new: str, replace_all: bool) -> str:
        path = resolve_inside(root, relative, must_exist=True)
        _require_regular(path, relative)
        try:
            text = path.read_bytes().decode("utf-8")
        except OSError as exc:
            raise _io_error(relative, exc) from exc
        except UnicodeDecodeError as exc:
            raise HostError(
                "INVALID_TOOL_INPUT", f"{relative} is not valid UTF-8", {"path": relative}
            ) from exc
        count = text.count(old)
        if count == 0:
            raise HostError(
                "EDIT_NO_MATCH",
                f"Edit: old_string not found in {relative}",
                {"path": relative},
            )
        if count > 1 and not replace_all:
            raise HostError(
                "INVALID_TOOL_INPUT",
                f"Edit: old_string occurs {count} times in {relative}; "
                "add context to make it unique or set replace_all",
                {"path": relative, "occurrences": count},
            )
        _write_exact(root, relative, text.replace(old, new).encode("utf-8"))
        noun = "occurrence" if count == 1 else "occurrences"
        return f"Replaced {count} {noun} in {relative}"
