"""Broken hosts: a held-out set (paths and workspace roots), written from the contract alone."""

from __future__ import annotations

import errno
import os
import unicodedata
from dataclasses import replace
from pathlib import Path
from typing import Any

from hosts.registry import BrokenCase, patch, variant
from reference_host import approvals, commands, host, tasks, turns, workspace
from reference_host.errors import HostError
from reference_host.tasks import Tasks
from reference_host.tools import files
from reference_host.turns import TurnRunner


# Sessions / session/create (WORKSPACE_INVALID): the root must be an existing folder, but the
# host only checks that the path exists, so a regular file is accepted as a workspace root
# (its tools then fail later with WORKSPACE_INVALID).
@variant("root-file-accepted")
def _root_file_accepted() -> None:
    def validate_root(root: str) -> Path:
        path = Path(root)
        if not path.is_absolute() or not path.exists():
            return workspace.validate_root(root)
        return path

    patch(host, "validate_root", validate_root)


# Sessions / session/create (WORKSPACE_INVALID): a workspace root is an absolute path; the
# host checks only os.path.isdir, so a relative root naming a folder under the host's own
# working folder (".", "src") is accepted and stored as given.
@variant("relative-root-accepted")
def _relative_root_accepted() -> None:
    def validate_root(root: str) -> Path:
        if not Path(root).is_absolute() and Path(root).is_dir():
            return Path(root)
        return workspace.validate_root(root)

    patch(host, "validate_root", validate_root)


# P29 / task/create (WORKSPACE_INVALID): the task's workspaceRoot is validated only when the
# task runs, so task/create accepts a missing folder, a file or a relative path.
@variant("task-root-checked-at-run")
def _task_root_checked_at_run() -> None:
    patch(tasks, "validate_root", lambda root: Path(root))


# Sessions / §6 (workspaceRoot exactly as given): the session a task run creates is bound to
# the task's root canonicalised with realpath (symlinks resolved, a trailing slash dropped),
# so it reports and stores another string than the task's workspaceRoot.
@variant("task-run-session-root-resolved")
def _task_run_session_root_resolved() -> None:
    original = Tasks.run

    async def run(self: Tasks, row: dict[str, Any]) -> dict[str, Any]:
        row = dict(row)
        if row.get("workspace_root"):
            row["workspace_root"] = os.path.realpath(row["workspace_root"])
        return await original(self, row)

    patch(Tasks, "run", run)


# Sessions / R7.3 / C5 (a command's cwd is that same workspaceRoot string): the host passes
# the root around as a Path, so command/started's cwd and command_audit.cwd read
# str(Path(root)): a trailing slash, "//" or "/./" in the root is lost.
@variant("command-cwd-as-path-string")
def _command_cwd_as_path_string() -> None:
    original = TurnRunner._bash

    async def _bash(self: TurnRunner, session: Any, turn_id: str, args: dict[str, Any]) -> Any:
        if session.workspace_root is not None:
            session = replace(session, workspace_root=str(Path(session.workspace_root)))
        return await original(self, session, turn_id, args)

    patch(TurnRunner, "_bash", _bash)


# Sessions (do not paste the root into a shell command line) / R7.3: Bash prefixes the
# command with cd '<root>' &&, quoting the root in single quotes without escaping a quote
# inside it; a root holding "'" makes every command fail with a shell syntax error.
@variant("command-cwd-by-single-quoted-cd")
def _command_cwd_by_single_quoted_cd() -> None:
    original = commands._spawn

    async def _spawn(shell: Any, command: str, cwd: str, command_id: str) -> Any:
        return await original(shell, f"cd '{cwd}' && {command}", cwd, command_id)

    patch(commands, "_spawn", _spawn)


# P10 (Glob and Grep give workspace-relative paths): the host walks the root string as given
# and cuts each path after len(root) + 1 characters; for a root ending in "/" every reported
# path loses its first character ("src/a.py" becomes "rc/a.py").
@variant("search-paths-cut-after-root")
def _search_paths_cut_after_root() -> None:
    import contextvars

    given: contextvars.ContextVar[str | None] = contextvars.ContextVar("given", default=None)
    dispatch = TurnRunner._dispatch
    walk = files._workspace_files

    async def _dispatch(self: TurnRunner, session: Any, turn_id: str, name: str, args: Any) -> Any:
        token = given.set(session.workspace_root)
        try:
            return await dispatch(self, session, turn_id, name, args)
        finally:
            given.reset(token)

    def _workspace_files(root: Path, budget: Any) -> list[tuple[str, Path]]:
        found = walk(root, budget)
        raw = given.get()
        if not raw:
            return found
        joined = raw if raw.endswith("/") else raw + "/"  # what os.walk(raw) yields
        return [((joined + rel)[len(raw) + 1 :], real) for rel, real in found]

    patch(TurnRunner, "_dispatch", _dispatch)
    patch(files, "_workspace_files", _workspace_files)


# P10 (Glob gives the workspace-relative paths of the files that match): the host globs
# from the pattern's literal leading folders and reports paths relative to that folder, so
# "src/*.py" answers "a.py" instead of "src/a.py".
@variant("glob-paths-relative-to-pattern-folder")
def _glob_paths_relative_to_pattern_folder() -> None:
    original = files.Glob.run

    async def run(self: files.Glob, ctx: Any, args: dict[str, Any]) -> str:
        output = await original(self, ctx, args)
        pattern = args.get("pattern") if isinstance(args, dict) else None
        if not isinstance(pattern, str) or output == files.NO_MATCHES:
            return output
        segments = [part for part in pattern.split("/") if part not in ("", ".")]
        base: list[str] = []
        for part in segments[:-1]:
            if part == "**" or any(c in part for c in "*?["):
                break
            base.append(part)
        if not base:
            return output
        prefix = "/".join(base) + "/"
        return "\n".join(line.removeprefix(prefix) for line in output.split("\n"))

    patch(files.Glob, "run", run)


# P10 (Grep's glob narrows the files as Glob's pattern does): a glob without "/" is matched
# against each file's base name, ripgrep style, so "*.md" also picks Markdown files in
# sub-folders.
@variant("grep-glob-matches-basename")
def _grep_glob_matches_basename() -> None:
    original = files.Grep._grep

    def _grep(root: Path, compiled: Any, parts: list[str] | None, budget: Any) -> str:
        if parts is not None and len(parts) == 1 and parts[0] != "**":
            parts = ["**", *parts]
        return original(root, compiled, parts, budget)

    patch(files.Grep, "_grep", staticmethod(_grep))


# P12 / R5.8 (a path is judged by where it leads): any tool path holding a ".." segment is
# refused as PATH_OUTSIDE_WORKSPACE before it is resolved, so "src/../.pi/plan/x.md" gets
# PATH_OUTSIDE_WORKSPACE, not TOOL_DENIED, and "src/../README.md" cannot be read.
@variant("dotdot-segments-refused")
def _dotdot_segments_refused() -> None:
    original = workspace.resolve_inside

    def resolve_inside(root: Path, relative: str, *, must_exist: bool) -> Path:
        if ".." in Path(relative).parts:
            raise HostError(
                "PATH_OUTSIDE_WORKSPACE", f"path {relative!r} climbs with ..", {"path": relative}
            )
        return original(root, relative, must_exist=must_exist)

    patch(files, "resolve_inside", resolve_inside)
    patch(turns, "resolve_inside", resolve_inside)


# P12 (the model's Write and Edit into .pi/plan are refused, however the path is spelt): the
# guard compares the resolved target with <root>/.pi/plan built from the root as given,
# unresolved; when the root is reached through a symlink the two never match and Write
# creates files in the plan folder.
@variant("plan-guard-misses-linked-root")
def _plan_guard_misses_linked_root() -> None:
    def _refuse_plan_folder(root: Path, path: str) -> None:
        target = turns.resolve_inside(root, path, must_exist=False)
        plan_folder = root / ".pi" / "plan"
        if target == plan_folder or target.is_relative_to(plan_folder):
            raise HostError("TOOL_DENIED", "plan artifacts are immutable; write somewhere else")

    patch(turns, "_refuse_plan_folder", _refuse_plan_folder)


# R2.1 / R2.8 (symlinks are refused only in .pi and .pi/plan; a root is any existing folder):
# the host opens the workspace root itself with O_NOFOLLOW, so SubmitPlan in a session whose
# root is a symlink to a folder fails with PLAN_PATH_UNSAFE and no approval is created.
@variant("plan-refused-under-linked-root")
def _plan_refused_under_linked_root() -> None:
    original = approvals.write_artifact

    def write_artifact(root: str, content: bytes, fault: Any) -> Any:
        workspace.validate_root(root)
        try:
            fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise HostError(
                    "PLAN_PATH_UNSAFE", "the workspace root is a symlink; not followed"
                ) from exc
        else:
            os.close(fd)
        return original(root, content, fault)

    patch(approvals, "write_artifact", write_artifact)


# Sessions ("do not change its Unicode form") / P10: the file tools normalise the root to
# NFC before opening it (as a macOS-minded host would); a root named in decomposed form
# then does not exist on Linux and Read, Glob, Grep, Write and Edit fail WORKSPACE_INVALID.
@variant("tools-open-nfc-root")
def _tools_open_nfc_root() -> None:
    original = files.require_root

    def require_root(ctx_root: Path | None) -> Path:
        if ctx_root is not None:
            ctx_root = Path(unicodedata.normalize("NFC", str(ctx_root)))
        return original(ctx_root)

    patch(files, "require_root", require_root)


# plan-guard-misses-linked-root is kept without a case: its plan-folder guard compares the
# wrong paths, but the write it lets through is still refused further on, so no client sees
# a difference.
CASES = [
    BrokenCase(
        "command-cwd-as-path-string",
        "shell",
        "a_command_runs_in_the_projects_path_exactly",
        "C5",
        "the audit row differs from the command",
    ),
    BrokenCase(
        "command-cwd-by-single-quoted-cd",
        "shell",
        "output_past_the_announced_cap_is_cut_there",
        "P20",
        "output past the cap was not marked truncated",
    ),
    BrokenCase(
        "dotdot-segments-refused",
        "artifact_integrity",
        "the_agent_cannot_write_into_the_plan_folder",
        "P12",
        "the Write call was stopped with PATH_OUTSIDE_WORKSPACE",
    ),
    BrokenCase(
        "glob-paths-relative-to-pattern-folder",
        "plan_tools",
        "looking_for_files_by_pattern_finds_exactly_the",
        "P10",
        "after its Glob call the model was not given",
    ),
    BrokenCase(
        "grep-glob-matches-basename",
        "plan_tools",
        "searching_only_the_files_a_pattern_names",
        "P10",
        "after its Grep call the model was given",
    ),
    BrokenCase(
        "plan-refused-under-linked-root",
        "artifact_integrity",
        "a_project_reached_through_a_link_takes_its",
        "R2.1",
        "the host lists no approval for the session",
    ),
    BrokenCase(
        "relative-root-accepted",
        "sessions",
        "a_relative_workspace_path_is_refused",
        "R2.8",
        "expected the host to refuse, but it answered",
    ),
    BrokenCase(
        "root-file-accepted",
        "sessions",
        "a_workspace_that_is_a_file_is_refused",
        "R2.8",
        "expected the host to refuse, but it answered",
    ),
    BrokenCase(
        "search-paths-cut-after-root",
        "plan_tools",
        "files_are_named_from_the_project_also_when",
        "P10",
        "after its Glob call the model was not given",
    ),
    BrokenCase(
        "task-root-checked-at-run",
        "scheduled_plan",
        "a_task_for_a_project_that_is_not",
        "P29",
        "expected the host to refuse, but it answered",
    ),
    BrokenCase(
        "task-run-session-root-resolved",
        "scheduled_plan",
        "a_run_works_in_the_project_exactly_as",
        "P29",
        "the task names the project",
    ),
    BrokenCase(
        "tools-open-nfc-root",
        "plan_tools",
        "searching_the_project_matches_line_by_line",
        "P10",
        "the Grep call did not work",
    ),
]
