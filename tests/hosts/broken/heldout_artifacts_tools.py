"""Broken hosts: a seventh held-out set (plan artifacts and the Plan tools), written from
the contract alone.

Six of these thirteen went uncaught at first; all are caught now. Four were searches the
fixtures never tried (a hidden folder, `*` across folders, `^` at a line that is not the
file's first, a pattern beyond ASCII): the contract now says how Glob and Grep match, and a
small code base varies each. The others were SubmitPlan arguments given as JSON text, and
a local page redirecting BrowserPreview off the machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from dataclasses import replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import httpx

from hosts.registry import BrokenCase, patch, rewrite_notifications, variant
from reference_host import approvals, artifacts, turns
from reference_host.errors import HostError
from reference_host.jsontext import JsonTextError, integral, loads
from reference_host.storage import ApprovalRow, Storage
from reference_host.tools import browser, files
from reference_host.tools.budget import Budget


@variant("double-encoded-arguments-accepted")
def _double_encoded_arguments_accepted() -> None:
    # R1.8 / P27: a call whose arguments are a JSON *string* that itself holds an object
    # ("\"{\\\"title\\\":...}\"") is not refused with INVALID_TOOL_INPUT: the host, lenient
    # with models that double-encode, parses the string a second time and runs the call
    # (a SubmitPlan given that way writes an artifact and creates an approval).
    original = turns._arguments

    def _arguments(call: Any) -> Any:
        value = original(call)
        if isinstance(value, str):
            with contextlib.suppress(JsonTextError, RecursionError):
                return integral(loads(value))
        return value

    patch(turns, "_arguments", _arguments)


@variant("artifact-starts-with-bom")
def _artifact_starts_with_bom() -> None:
    # R2.2 / R2.7: the artifact is written with Python's "utf-8-sig" codec, so the file
    # starts with a byte order mark the model never sent. The recorded SHA-256 and size
    # describe the file as written (BOM included), so approve and artifact/read still agree
    # with the record; only the bytes differ from the submitted markdown.
    def encode_markdown(markdown: str) -> bytes:
        try:
            return markdown.encode("utf-8-sig")
        except UnicodeEncodeError as exc:
            raise HostError(
                "INVALID_TOOL_INPUT",
                f"markdown is not valid Unicode (a lone surrogate at index {exc.start})",
            ) from exc

    patch(approvals, "encode_markdown", encode_markdown)


@variant("stores-absolute-artifact-path")
def _stores_absolute_artifact_path() -> None:
    # R2.11: the plan_approvals row records the artifact's absolute path (the writer's
    # return value), while the API relativises it against the workspace on the way out, so
    # every protocol message shows the correct ".pi/plan/<name>.md" and only the stored
    # artifact_path disagrees (R4.3: every field equals its row).
    insert = Storage.insert_approval
    get = Storage.get_approval
    listed = Storage.list_approvals
    marker = "/.pi/plan/"

    def relative(row: ApprovalRow | None) -> ApprovalRow | None:
        if row is None or row.artifact_path is None or marker not in row.artifact_path:
            return row
        tail = row.artifact_path.rsplit(marker, 1)[1]
        return replace(row, artifact_path=f".pi/plan/{tail}")

    async def insert_approval(self: Storage, row: ApprovalRow) -> None:
        session = await self.get_session(row.session_id)
        if session is not None and session.workspace_root and row.artifact_path:
            row = replace(row, artifact_path=str(Path(session.workspace_root) / row.artifact_path))
        await insert(self, row)

    async def get_approval(self: Storage, approval_id: str) -> ApprovalRow | None:
        return relative(await get(self, approval_id))

    async def list_approvals(self: Storage, session_id: str) -> list[ApprovalRow]:
        return [row for row in map(relative, await listed(self, session_id)) if row is not None]

    patch(Storage, "insert_approval", insert_approval)
    patch(Storage, "get_approval", get_approval)
    patch(Storage, "list_approvals", list_approvals)


@variant("follows-symlinked-plan-folder")
def _follows_symlinked_plan_folder() -> None:
    # R2.10 / R2.12: only `.pi` is opened without following symlinks; `.pi/plan` is opened
    # with a plain O_DIRECTORY, so a symlinked plan folder is followed (the artifact lands
    # wherever it points) instead of being refused with PLAN_PATH_UNSAFE.
    original = artifacts._open_plan_dir

    def _open_plan_dir(parent_fd: int, name: str, shown: str) -> tuple[int, bool]:
        if name != artifacts.PLAN_DIR[1]:
            return original(parent_fd, name, shown)
        created = True
        try:
            os.mkdir(name, 0o755, dir_fd=parent_fd)
        except FileExistsError:
            created = False
        except OSError as exc:
            raise HostError("ARTIFACT_WRITE_FAILED", f"creating {shown} failed: {exc}") from exc
        try:
            flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
            return os.open(name, flags, dir_fd=parent_fd), created
        except NotADirectoryError as exc:
            raise HostError("PLAN_PATH_UNSAFE", f"{shown} is not a directory") from exc
        except OSError as exc:
            raise HostError("ARTIFACT_WRITE_FAILED", f"cannot open {shown}: {exc}") from exc

    patch(artifacts, "_open_plan_dir", _open_plan_dir)


@variant("search-skips-hidden-folders")
def _search_skips_hidden_folders() -> None:
    # P10: the workspace walk of Glob and Grep prunes every folder whose name starts with a
    # dot (meant for .git, .venv, .cache), so files below `.pi/`, `.github/` or `.config/`
    # are never listed or searched, even by a pattern that names the folder
    # (`.github/*.yml`); Glob answers "(no matches)" for files that match.
    def _workspace_files(root: Path, budget: Budget) -> list[tuple[str, Path]]:
        found: list[tuple[str, Path]] = []
        for directory, dirnames, filenames in os.walk(root):
            budget.check()
            dirnames[:] = [name for name in dirnames if not name.startswith(".")]
            base = Path(directory)
            for name in filenames:
                if name == ".git":
                    continue
                budget.check()
                path = base / name
                try:
                    real = path.resolve(strict=True)
                    mode = real.stat().st_mode
                except (OSError, RuntimeError):
                    continue
                if real.is_relative_to(root) and (mode & 0o170000) == 0o100000:
                    found.append((path.relative_to(root).as_posix(), real))
        found.sort()
        return found

    patch(files, "_workspace_files", _workspace_files)


@variant("glob-star-crosses-folders")
def _glob_star_crosses_folders() -> None:
    # P10: globs are matched with fnmatch against the whole relative path, where `*` also
    # matches `/`: `*.py` lists `src/app.py` as well, and `src/*.py` lists files in
    # sub-folders of src. (A leading `**/` is special-cased so top-level files still match.)
    def _glob_match(pattern: list[str], path: list[str]) -> bool:
        text, joined = "/".join(pattern), "/".join(path)
        if fnmatchcase(joined, text):
            return True
        return text.startswith("**/") and fnmatchcase(joined, text[3:])

    patch(files, "_glob_match", _glob_match)


def _grep_variant(decode: Callable[[bytes], str], whole_file: bool) -> Callable[..., str]:
    """A Grep search like the reference's, decoding files with ``decode``; with
    ``whole_file`` the pattern runs once over the file's text (no MULTILINE) and each match
    is reported on the line where it starts."""

    def _grep(root: Path, compiled: Any, parts: list[str] | None, budget: Budget) -> str:
        out: list[str] = []
        for relative, real in files._workspace_files(root, budget):
            if parts is not None and not files._glob_match(parts, relative.split("/")):
                continue
            try:
                data = real.read_bytes()
            except OSError:
                continue
            if b"\0" in data[:8192]:
                continue
            text = decode(data)
            lines = text.split("\n")
            if whole_file:
                numbers: list[int] = []
                try:
                    timeout = min(budget.remaining(), files.SEARCH_SLICE_S)
                    for match in compiled.finditer(text, timeout=timeout, concurrent=True):
                        number = text.count("\n", 0, match.start()) + 1
                        if not numbers or numbers[-1] != number:
                            numbers.append(number)
                except TimeoutError as exc:
                    raise budget.exceeded() from exc
            else:
                numbers = [
                    number
                    for number, line in enumerate(lines, start=1)
                    if files._search(compiled, line.removesuffix("\r"), budget)
                ]
            for number in numbers:
                if len(out) == files.GREP_MAX_MATCHES:
                    out.append(f"[results capped at {files.GREP_MAX_MATCHES} matches]")
                    return "\n".join(out)
                out.append(f"{relative}:{number}:{lines[number - 1].removesuffix(chr(13))}")
        return "\n".join(out) if out else files.NO_MATCHES

    return _grep


@variant("grep-anchors-at-file-start")
def _grep_anchors_at_file_start() -> None:
    # P10: Grep runs the pattern over each file's whole text without MULTILINE and maps the
    # matches to lines, so `^` and `$` anchor at the start and end of the file: `^def ` finds
    # a definition only on a file's first line, and other matching lines are left out.
    search = _grep_variant(lambda data: data.decode("utf-8", errors="replace"), whole_file=True)
    patch(files.Grep, "_grep", staticmethod(search))


@variant("grep-in-locale-encoding")
def _grep_in_locale_encoding() -> None:
    # P10: Grep opens files in text mode with the platform's default encoding, which under
    # the C/POSIX locale of a CI machine is ASCII (errors replaced): every non-ASCII
    # character becomes U+FFFD, so a pattern with a non-ASCII letter ("café", "Größe") never
    # matches, and matching lines are shown with replacement characters. Read is unaffected.
    search = _grep_variant(lambda data: data.decode("ascii", errors="replace"), whole_file=False)
    patch(files.Grep, "_grep", staticmethod(search))


@variant("browser-preview-follows-redirects")
def _browser_preview_follows_redirects() -> None:
    # P23: only the URL the model gave is checked for a loopback host; the client follows
    # redirects by itself, so a loopback page that redirects to another host (the machine's
    # own network address, or anywhere) makes the host fetch that host's page.
    async def run(self: Any, ctx: Any, args: dict[str, Any]) -> str:
        args = browser.validate_args(self.spec, args)
        url = browser._checked_url(args["url"])
        try:
            async with (
                asyncio.timeout(browser.TIMEOUT_SECONDS),
                httpx.AsyncClient(
                    timeout=browser.TIMEOUT_SECONDS,
                    follow_redirects=True,
                    max_redirects=browser.MAX_REDIRECTS,
                    trust_env=False,
                ) as client,
                client.stream("GET", url) as response,
            ):
                text = await browser._capped_text(response)
                return f"status: {response.status_code}\n\n{text}"
        except TimeoutError as exc:
            raise HostError("TOOL_FAILED", f"BrowserPreview: {url} timed out") from exc
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            reason = str(exc) or type(exc).__name__
            raise HostError(
                "TOOL_FAILED", f"BrowserPreview: fetching {url} failed: {reason}"
            ) from exc

    patch(browser.BrowserPreview, "run", run)


@variant("invalid-input-reported-as-denied")
def _invalid_input_reported_as_denied() -> None:
    # P9 / P27 (Errors and tool results): a call refused for bad arguments is reported with
    # status "denied" ("the host refused it before running anything") instead of the
    # catalog's "error" for INVALID_TOOL_INPUT; the code and the model's message are right.
    original = turns._failure

    def _failure(error: HostError) -> Any:
        outcome = original(error)
        if outcome.error is not None and outcome.error.code == "INVALID_TOOL_INPUT":
            return replace(outcome, status="denied")
        return outcome

    patch(turns, "_failure", _failure)


@variant("unknown-tool-not-announced")
def _unknown_tool_not_announced() -> None:
    # P9: a call is announced with turn/toolCall only when the host has a tool of that name;
    # a call to an unknown tool (and a plugin tool, ExitPlanMode) gets its turn/toolResult
    # (UNKNOWN_TOOL / TOOL_DENIED) and reaches the model, but no turn/toolCall before it.
    known = turns._KNOWN

    def rewrite(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        if method == "turn/toolCall" and params.get("tool") not in known:
            return None
        return params

    rewrite_notifications(rewrite)


@variant("permission-names-plan-turn-in-execution")
def _permission_names_plan_turn_in_execution() -> None:
    # P7: a permission/requested raised inside the execution of an approved plan names the
    # approval's turn (the Plan turn that submitted it, carried in the execution's context)
    # instead of the execution turn the call belongs to. Prompt turns are right.
    plan_turn_of: dict[str, str] = {}  # approvalId -> the Plan turn that submitted it
    execution_of: dict[str, str] = {}  # execution turnId -> approvalId

    def rewrite(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        if method == "approval/updated":
            approval = params.get("approval") or {}
            if approval.get("turnId"):
                plan_turn_of[approval["approvalId"]] = approval["turnId"]
        elif method == "turn/started" and params.get("kind") == "execution":
            execution_of[params["turnId"]] = params.get("approvalId") or ""
        elif method == "permission/requested":
            approval_id = execution_of.get(params.get("turnId", ""))
            if approval_id and approval_id in plan_turn_of:
                return {**params, "turnId": plan_turn_of[approval_id]}
        return params

    rewrite_notifications(rewrite)


@variant("exit-plan-mode-denied-in-plan")
def _exit_plan_mode_denied_in_plan() -> None:
    # R1.9: the host keeps ExitPlanMode on its list of tools Plan forbids (next to Write and
    # Edit), so in a Plan turn a call to it is refused with TOOL_DENIED instead of
    # UNKNOWN_TOOL. It is never offered, and in Agent it is UNKNOWN_TOOL as required.
    original = turns._gate

    def _gate(mode: str, name: str) -> HostError | None:
        if mode == "plan" and name == "ExitPlanMode":
            return HostError("TOOL_DENIED", "ExitPlanMode is not available while planning")
        return original(mode, name)

    patch(turns, "_gate", _gate)


CASES = [
    BrokenCase(
        "double-encoded-arguments-accepted",
        "submit_plan",
        "one_JSON_text",
        "R1.8",
        "expected INVALID_TOOL_INPUT",
    ),
    BrokenCase(
        "artifact-starts-with-bom",
        "artifact_integrity",
        "byte_for_byte",
        "R2.7",
        "artifact bytes differ from the submitted markdown",
    ),
    BrokenCase(
        "stores-absolute-artifact-path",
        "artifact_integrity",
        "recorded_hash_and_size_match",
        "R2.11",
        "stored path",
    ),
    BrokenCase(
        "follows-symlinked-plan-folder",
        "artifact_integrity",
        "plan_folder_is_unsafe and symlink",
        "R2.12",
        "expected PLAN_PATH_UNSAFE",
    ),
    BrokenCase(
        "search-skips-hidden-folders",
        "plan_tools",
        "hidden",
        "P10",
        "was not given '.github/ci.yml'",
    ),
    BrokenCase(
        "glob-star-crosses-folders",
        "plan_tools",
        "exactly_the_files_it_names",
        "P10",
        "after its Glob call the model was given",
    ),
    BrokenCase(
        "grep-anchors-at-file-start",
        "plan_tools",
        "line_by_line and start",
        "P10",
        "was not given 'src/cache.py'",
    ),
    BrokenCase(
        "grep-in-locale-encoding",
        "plan_tools",
        "line_by_line and ASCII",
        "P10",
        "was not given 'src/cache.py'",
    ),
    BrokenCase(
        "browser-preview-follows-redirects",
        "plan_tools",
        "sends_the_preview_elsewhere",
        "P23",
        "expected BROWSER_PREVIEW_REFUSED",
    ),
    BrokenCase(
        "invalid-input-reported-as-denied",
        "plan_tools",
        "outside_the_tools_published_input",
        "P9",
        "has status 'denied'",
    ),
    BrokenCase(
        "unknown-tool-not-announced",
        "plan_tools",
        "every_call_of_a_message_gets",
        "P9",
        "was announced 0 times",
    ),
    BrokenCase(
        "permission-names-plan-turn-in-execution",
        "execution",
        "file_change_waits",
        "P7",
        "the question names turn",
    ),
    BrokenCase(
        "exit-plan-mode-denied-in-plan",
        "plan_tools",
        "call_to_exitplanmode and Plan",
        "R1.9",
        "expected UNKNOWN_TOOL",
    ),
]
