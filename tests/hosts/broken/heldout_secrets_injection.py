"""Broken hosts: a held-out set (secrets and injection), written from the contract alone.

Each host differs from the reference host in one realistic mistake about what must stay
secret (the provider API key) or about text that reaches an interpreter (a shell line, a
SQL statement, a file name, a regular expression, a URL) or a path that must stay inside
the workspace.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import re
from pathlib import Path
from typing import Any

from hosts.registry import BrokenCase, patch, variant

_API_KEY_ENV = "OPENAI_API_KEY"


# P21 (implementing-a-host.md, "The model provider", "The API key"): "Never store it (not
# in host.db nor in any other file of the data directory)".
# Bug: the host remembers the provider credentials next to the default shell in the
# settings table the first time a turn calls the provider (meant for scheduled runs that
# might start without the variable), so host.db holds the key in clear text.
# Observed: a `settings` row `provider_api_key` whose value is the dummy key.
# Recipe: session/create with a provider, session/prompt, let the turn end; read every
# text column of host.db and look for the key.
@variant("sec-key-in-settings")
def key_in_settings() -> None:
    from reference_host.provider_client import AssistantReply
    from reference_host.storage import SessionRow
    from reference_host.turns import TurnRunner

    original = TurnRunner._ask_model

    async def ask_model(
        self: TurnRunner, session: SessionRow, turn_id: str, messages: list[dict[str, Any]]
    ) -> AssistantReply:
        key = os.environ.get(_API_KEY_ENV)
        if key and await self.host.storage.get_setting("provider_api_key") != key:
            await self.host.storage.set_setting("provider_api_key", key)
        return await original(self, session, turn_id, messages)

    patch(TurnRunner, "_ask_model", ask_model, wraps=True)


# P21 ("never send it in a protocol message") and P25 (a provider's HTTP error ends the
# turn failed with PROVIDER_ERROR).
# Bug: to make provider failures debuggable, the PROVIDER_ERROR message names the request
# that failed, with its headers, Authorization included. The key travels in turn/ended's
# error.message (and, for a scheduled run, in task/runFinished and
# scheduled_task_runs.error_message).
# Recipe: session/create with a provider, session/prompt, the provider answers 400; look
# for the key in turn/ended.
@variant("sec-key-in-provider-error")
def key_in_provider_error() -> None:
    import httpx

    from reference_host import provider_client

    original = provider_client._http_error

    async def http_error(response: httpx.Response) -> provider_client.ProviderError:
        error = await original(response)
        request = response.request
        headers = ", ".join(f"{name}: {value}" for name, value in request.headers.items())
        error.message = f"{error.message} (request {request.method} {request.url}; {headers})"
        error.args = (error.message,)
        return error

    patch(provider_client, "_http_error", http_error, wraps=True)


# P21: the key is sent "only to the provider, as `Authorization: Bearer <key>`".
# Bug: BrowserPreview builds its HTTP client with the same default headers as the provider
# client, so every page it fetches from a local server receives the API key.
# Observed: the page server on 127.0.0.1 sees `Authorization: Bearer <dummy key>`.
# Recipe: a turn whose model calls BrowserPreview on the harness's loopback page; inspect
# the headers of the request the page server received.
@variant("sec-key-sent-to-preview")
def key_sent_to_preview() -> None:
    import httpx

    from reference_host.errors import HostError
    from reference_host.tools import browser
    from reference_host.tools.base import ToolContext, validate_args

    async def run(self: browser.BrowserPreview, ctx: ToolContext, args: dict[str, Any]) -> str:
        args = validate_args(self.spec, args)
        url = browser._checked_url(args["url"])
        key = os.environ.get(_API_KEY_ENV)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        try:
            async with (
                asyncio.timeout(browser.TIMEOUT_SECONDS),
                httpx.AsyncClient(
                    timeout=browser.TIMEOUT_SECONDS,
                    follow_redirects=False,
                    trust_env=False,
                    headers=headers,
                ) as client,
            ):
                for _ in range(browser.MAX_REDIRECTS + 1):
                    async with client.stream("GET", url) as response:
                        if response.has_redirect_location:
                            location = response.headers["location"]
                            url = browser._checked_url(str(url.join(location)))
                            continue
                        text = await browser._capped_text(response)
                        return f"status: {response.status_code}\n\n{text}"
        except TimeoutError as exc:
            raise HostError(
                "TOOL_FAILED", f"BrowserPreview: {url} did not answer", {"url": str(url)}
            ) from exc
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise HostError(
                "TOOL_FAILED", f"BrowserPreview: fetching {url} failed: {exc}", {"url": str(url)}
            ) from exc
        raise HostError("TOOL_FAILED", "BrowserPreview: too many redirects", {"url": args["url"]})

    patch(browser.BrowserPreview, "run", run)


# implementing-a-host.md, "Sessions, turns and boundaries": a workspace root may hold
# `'`, `$`, `` ` ``, `&` ...; "Do not paste it into a shell command line"; and "Commands
# and shells": Bash runs "with the workspace as its working directory" (R7.3).
# Bug: the host runs `cd "<root>" || exit` in front of the command instead of setting the
# working directory of the shell: double quotes survive spaces and `'`, but `$`, a
# backquote or `"` in the root are expanded by the shell, so the command runs elsewhere or
# not at all.
# Observed: in a workspace named with `$` or a backquote, Bash `pwd` prints another folder
# (or cd fails with exit 1/2) instead of the root.
# Recipe: session/create on a root like `/tmp/ws $HOME`, a turn whose model calls Bash
# `pwd > here.txt` (or just `pwd`); compare the output with workspaceRoot.
@variant("sec-root-in-shell-line")
def root_in_shell_line() -> None:
    from reference_host import commands
    from reference_host.shells import Shell

    original = commands._spawn

    async def spawn(
        shell: Shell, command: str, cwd: str, command_id: str
    ) -> tuple[asyncio.subprocess.Process, list[int]]:
        line = f'cd "{cwd}" || exit\n{command}'
        return await original(shell, line, "/", command_id)

    patch(commands, "_spawn", spawn, wraps=True)


# P10 (Glob): "`*`, `?` and `[...]` match within one segment and never a `/`"; every
# other character matches itself, and Grep's `glob` "narrows the files as Glob's pattern
# does".
# Bug: the host turns each glob segment into a regular expression by replacing `*` and
# `?` but does not escape the rest, so `.`, `+`, `(`, `|`, `^`, `$`, `{` ... are read as
# regex syntax: `*.md` also matches `readme_md`, and `a+b.txt` or `notes(1).md` match
# nothing (not even themselves).
# Recipe: a workspace holding `notes(1).md`, `c++.txt` and `xmd`; Glob `*.md` and
# `notes(1).md`; the results list `xmd` and miss `notes(1).md`.
@variant("sec-glob-regex-unescaped")
def glob_regex_unescaped() -> None:
    from reference_host.tools import files

    def fnmatchcase(name: str, pattern: str) -> bool:
        translated = pattern.replace("*", "[^/]*").replace("?", "[^/]").replace("[!", "[^")
        try:
            return re.fullmatch(translated, name) is not None
        except re.error:
            return False

    patch(files, "fnmatchcase", fnmatchcase)


_TITLE: contextvars.ContextVar[str | None] = contextvars.ContextVar("sec_title", default=None)
"""The title of the SubmitPlan being written (per call: a context variable, no state)."""


# R2.3 (ADR §2 "The directory and filename are host-owned"; implementing-a-host.md "Plan
# artifacts": "Nothing in the input chooses the location: a title that looks like a path
# changes nothing ... so long as the file is one new `.md` file directly in `.pi/plan/`,
# whatever the title holds").
# Bug: the artifact name starts with a slug of the title that only lower-cases it and
# turns spaces into dashes; `/` and `..` stay, so a title `../../src/x` writes the
# artifact outside .pi/plan (into the project's src/), and a title `a/b` fails with
# ARTIFACT_WRITE_FAILED (no folder .pi/plan/a).
# Recipe: a Plan turn whose model calls SubmitPlan with title `../../escape` (or
# `docs/readme`); look for the artifact under .pi/plan/ and for a new file in the root.
@variant("sec-title-in-artifact-name")
def title_in_artifact_name() -> None:
    import time

    from reference_host import artifacts
    from reference_host.approvals import Approvals
    from reference_host.storage import ApprovalRow, SessionRow

    original_submit = Approvals.submit

    async def submit(
        self: Approvals, session: SessionRow, turn_id: str, args: dict[str, Any]
    ) -> ApprovalRow:
        token = _TITLE.set(str(args.get("title", "")))
        try:
            return await original_submit(self, session, turn_id, args)
        finally:
            _TITLE.reset(token)

    def unique_name() -> str:
        slug = (_TITLE.get() or "").strip().lower().replace(" ", "-")[:60] or "plan"
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        return f"{slug}-{stamp}-{os.urandom(6).hex()}.md"

    patch(Approvals, "submit", submit, wraps=True)
    patch(artifacts, "_unique_name", unique_name)


# P23 (implementing-a-host.md "BrowserPreview stays on this machine"): "A redirect names a
# new URL under the same rule: one that leaves loopback is refused the same way, without
# contacting it."
# Bug: the host checks the URL the model gave and then lets the HTTP client follow
# redirects by itself, so a loopback page that redirects to the machine's non-loopback
# address (or anywhere) is fetched; a redirect to a non-HTTP scheme fails as TOOL_FAILED
# instead of BROWSER_PREVIEW_REFUSED.
# Recipe: the loopback page answers 302 with Location http://<non-loopback address>/...;
# the model calls BrowserPreview on it; the non-loopback page is requested and the result
# is `ok`.
@variant("sec-preview-follows-redirects")
def preview_follows_redirects() -> None:
    import httpx

    from reference_host.errors import HostError
    from reference_host.tools import browser
    from reference_host.tools.base import ToolContext, validate_args

    async def run(self: browser.BrowserPreview, ctx: ToolContext, args: dict[str, Any]) -> str:
        args = validate_args(self.spec, args)
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
            raise HostError(
                "TOOL_FAILED", f"BrowserPreview: {url} did not answer", {"url": str(url)}
            ) from exc
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise HostError(
                "TOOL_FAILED", f"BrowserPreview: fetching {url} failed: {exc}", {"url": str(url)}
            ) from exc

    patch(browser.BrowserPreview, "run", run)


# P7 (implementing-a-host.md "Approval (§3)", permission modes): "A `requestId` names one
# question among all the host's sessions: two questions never share one, even when their
# models gave the calls the same id (call ids repeat across messages and sessions)".
# Bug: the request id is derived from the model's tool call id (`perm_<toolCallId>`), so
# two sessions whose models both call `call_1` ask two questions under one id: the second
# replaces the first among the open questions, the answer meant for session A resolves
# session B's call, and A's call waits for an answer that can no longer be given
# (permission/respond with its id resolves B's or gets PERMISSION_REQUEST_NOT_FOUND).
# Recipe: two sessions in `ask`, both models call Bash with id `call_1` at once; both
# permission/requested carry the same requestId; answer `deny` to the first: the second
# session's command is denied and the first still waits.
@variant("sec-permission-id-from-call-id")
def permission_id_from_call_id() -> None:
    from reference_host import permissions
    from reference_host.errors import HostError
    from reference_host.provider_client import ToolCall
    from reference_host.storage import SessionRow
    from reference_host.turns import TurnRunner

    async def require_permission(
        self: TurnRunner,
        session: SessionRow,
        turn_id: str,
        call: ToolCall,
        args: dict[str, Any],
        unattended: bool,
    ) -> None:
        if unattended:
            raise HostError(
                "PERMISSION_UNAVAILABLE",
                f"{call.name} needs a permission answer and this run is unattended",
            )
        broker = self.host.permissions
        request_id = f"perm_{call.call_id}"
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        broker._open[request_id] = permissions._Request(session.id, answer)
        self.host.notify(
            "permission/requested",
            {
                "sessionId": session.id,
                "turnId": turn_id,
                "requestId": request_id,
                "tool": call.name,
                "input": args,
            },
        )
        try:
            allowed = await answer
        finally:
            if (
                broker._open.get(request_id) is not None
                and broker._open[request_id].answer is answer
            ):
                del broker._open[request_id]
        if not allowed:
            raise HostError("PERMISSION_DENIED", f"the user denied {call.name}")

    patch(TurnRunner, "_require_permission", require_permission)


# R1.5 (ADR §1: "Write, Edit, plugin tools, and unknown tools remain host-denied";
# implementing-a-host.md "Planning": "a tool's name is matched exactly, letter case
# included (`read` and `WRITE` are tools you do not have)").
# Bug: the host looks tools up case-insensitively (to be lenient with models), but its
# Plan gate compares the name as the model spelt it with the denied names `Write`/`Edit`:
# in Plan, a call to `write` or `EDIT` passes the gate and runs Write/Edit (and, not
# being spelt `Write`, asks no permission); in any mode `read` runs Read instead of
# UNKNOWN_TOOL.
# Recipe: a Plan session in ask; the model calls `write` with {path: "x.txt", content:
# "y"}; the result is `ok` and x.txt exists (expected TOOL_DENIED or UNKNOWN_TOOL).
@variant("sec-plan-gate-case-loose")
def plan_gate_case_loose() -> None:
    from reference_host import turns
    from reference_host.errors import HostError
    from reference_host.permissions import needs_permission
    from reference_host.provider_client import ToolCall
    from reference_host.storage import SessionRow
    from reference_host.tools.base import validate_args
    from reference_host.tools.names import EDIT_TOOLS, PLUGIN_PREFIXES
    from reference_host.turns import CallOutcome, TurnRunner

    canonical = {name.lower(): name for name in turns._KNOWN}

    def gate(mode: str, name: str) -> HostError | None:
        if name.startswith(PLUGIN_PREFIXES):
            if mode == "plan":
                return HostError("TOOL_DENIED", f"{name} is a plugin tool; Plan denies them")
            return HostError("UNKNOWN_TOOL", f"no plugin provides {name}")
        tool = canonical.get(name.lower())
        if tool is None:
            return HostError("UNKNOWN_TOOL", f"the host has no tool named {name!r}")
        if mode == "plan" and name in EDIT_TOOLS:  # the only Agent tools Plan lacks
            return HostError("TOOL_DENIED", f"{name} is not available while planning")
        if tool == "SubmitPlan" and mode != "plan":
            return HostError("SUBMIT_PLAN_OUTSIDE_PLAN_TURN", "SubmitPlan is valid only in Plan")
        return None

    original = TurnRunner._run_call

    async def run_call(
        self: TurnRunner, session: SessionRow, turn_id: str, call: ToolCall, unattended: bool
    ) -> CallOutcome:
        refusal = gate(session.mode, call.name)
        if refusal is not None:
            return turns._failure(refusal)
        tool = canonical[call.name.lower()]
        if tool == call.name:
            return await original(self, session, turn_id, call, unattended)
        try:
            args = validate_args(turns._SPECS[tool], turns._arguments(call))
            if needs_permission(session.permission_mode, call.name):
                await self._require_permission(session, turn_id, call, args, unattended)
            return await self._dispatch(session, turn_id, tool, args)
        except HostError as error:
            return turns._failure(error)

    patch(turns, "_gate", gate)
    patch(TurnRunner, "_run_call", run_call, wraps=True)


# ADR §2 "The input title and question remain structured fields in plan_approvals";
# R2.6 and R1.8 (SubmitPlan takes any strings as title and question).
# Bug: the approval insert writes title and question into the SQL text as quoted
# literals instead of binding them; a title or question with an apostrophe ("Don't ...")
# breaks the statement, so the SubmitPlan fails with TOOL_FAILED and no approval, and a
# crafted one (`x', 'y') --`) changes what is stored.
# Recipe: a Plan turn whose model submits a plan titled "Don't break the build"; expected
# an approval with that title; observed a SubmitPlan error and no approval.
@variant("sec-sql-title-literal")
def sql_title_literal() -> None:
    from reference_host.storage import APPROVAL_COLUMNS, ApprovalRow, Storage

    async def insert_approval(self: Storage, row: ApprovalRow) -> None:
        values = list(row.__dict__.values())
        bound = values[:3] + values[5:]
        placeholders = ", ".join("?" for _ in range(len(values) - 5))
        sql = (
            f"INSERT INTO plan_approvals ({APPROVAL_COLUMNS}) VALUES (?, ?, ?, "
            f"'{row.title}', '{row.question}', {placeholders})"
        )
        async with self._writing:
            await self._conn.execute(sql, tuple(bound))

    patch(Storage, "insert_approval", insert_approval)


# R5.8 (implementing-a-host.md "Sessions, turns and boundaries"): "a tool never reads or
# writes another session's workspace, whatever the path: absolute, climbing out with
# `..`, or through a link inside the project".
# Bug: the containment check compares the resolved path with the root as strings
# (`startswith`), so a sibling folder whose name begins with the root's name
# (`/w/proj` and `/w/proj-b`, `/w/proj2`) counts as inside.
# Recipe: two sessions on `/w/proj` and `/w/proj-b`; the first session's model calls Read
# `../proj-b/secret.txt` (or the absolute path); the result is `ok` with the other
# project's text.
@variant("sec-path-prefix-compare")
def path_prefix_compare() -> None:
    from reference_host.errors import HostError
    from reference_host.tools import files

    def resolve_inside(root: Path, relative: str, *, must_exist: bool) -> Path:
        if "\0" in relative:
            raise HostError("INVALID_TOOL_INPUT", "path contains a NUL byte", {"path": relative})
        try:
            real_root = root.resolve(strict=True)
        except (OSError, RuntimeError) as exc:
            raise HostError("WORKSPACE_INVALID", f"workspace root: {exc}") from exc
        candidate = Path(relative)
        joined = candidate if candidate.is_absolute() else real_root / candidate
        try:
            resolved = joined.resolve(strict=False)
        except (OSError, RuntimeError) as exc:
            raise HostError(
                "INVALID_TOOL_INPUT", f"path {relative!r} cannot be resolved", {"path": relative}
            ) from exc
        if not str(resolved).startswith(str(real_root)):
            raise HostError("PATH_OUTSIDE_WORKSPACE", f"path {relative!r} is outside the workspace")
        if must_exist and not resolved.exists():
            raise HostError("FILE_NOT_FOUND", f"path {relative!r} does not exist")
        return resolved

    patch(files, "resolve_inside", resolve_inside)


# R5.8 ("... or through a link inside the project") and P12 ("however the path is spelt
# (`src/../.pi/plan/x.md`, a symlinked folder that leads into it)").
# Bug: paths are checked lexically (normpath of root + path) and never resolved, so a
# symlink inside the project that points out of it (or into .pi/plan) is followed by
# Read, Write and Edit.
# Recipe: a project holding `link -> /other/project`; the model calls Read
# `link/secret.txt` (or Write `link/new.txt`); the result is `ok` and the other project's
# file is read (or created).
@variant("sec-path-lexical-check")
def path_lexical_check() -> None:
    from reference_host import turns
    from reference_host.errors import HostError
    from reference_host.tools import files

    def resolve_inside(root: Path, relative: str, *, must_exist: bool) -> Path:
        if "\0" in relative:
            raise HostError("INVALID_TOOL_INPUT", "path contains a NUL byte", {"path": relative})
        base = os.path.normpath(root)
        joined = os.path.normpath(Path(base) / relative)
        if joined != base and not joined.startswith(base.rstrip("/") + "/"):
            raise HostError("PATH_OUTSIDE_WORKSPACE", f"path {relative!r} is outside the workspace")
        resolved = Path(joined)
        if must_exist and not resolved.exists():
            raise HostError("FILE_NOT_FOUND", f"path {relative!r} does not exist")
        return resolved

    patch(files, "resolve_inside", resolve_inside)
    patch(turns, "resolve_inside", resolve_inside)


# P27 (implementing-a-host.md "Tool inputs"): "a path holding a NUL character, which no
# file name can hold) gets `INVALID_TOOL_INPUT` (status `error`), does nothing".
# Bug: the host hands paths to the file system as C strings and cuts them at the first
# NUL, so `notes.md\u0000.png` reads (or writes) `notes.md`.
# Recipe: the model calls Read with path "README.md\u0000junk"; the result is `ok` with
# README.md's text instead of INVALID_TOOL_INPUT; Write with such a path creates the file.
@variant("sec-path-nul-truncated")
def path_nul_truncated() -> None:
    from reference_host import turns, workspace
    from reference_host.tools import files

    original = workspace.resolve_inside

    def resolve_inside(root: Path, relative: str, *, must_exist: bool) -> Path:
        return original(root, relative.split("\0", 1)[0], must_exist=must_exist)

    patch(files, "resolve_inside", resolve_inside, wraps=True)
    patch(turns, "resolve_inside", resolve_inside, wraps=True)


# P23 (implementing-a-host.md "BrowserPreview stays on this machine"): only loopback hosts
# (`localhost`, `127.0.0.0/8`, `::1`); "A URL on any other host, also an address of this
# machine's own network interface and the addresses that stand for every interface
# (`0.0.0.0`, `::`), is refused with `BROWSER_PREVIEW_REFUSED`".
# Bug: the host tells "local" from "remote" with `not ip.is_global`, so private,
# link-local, documentation and unspecified addresses (`0.0.0.0`, `::`, `10.x`,
# `192.168.x`, the machine's own interface address) are fetched as if they were loopback.
# Recipe: the model calls BrowserPreview on `http://<the machine's non-loopback
# address>:<port>/` (or `http://0.0.0.0:<port>/`); the result is `ok` and the page server
# on that address sees the request.
@variant("sec-preview-not-global")
def preview_not_global() -> None:
    import ipaddress

    from reference_host.tools import browser

    def is_loopback(host: str) -> bool:
        if host.lower() == "localhost":
            return True
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return not address.is_global

    patch(browser, "is_loopback", is_loopback)


# P13 (implementing-a-host.md "Plan artifacts", Integrity): "A symbolic link in the
# artifact's place counts as not a regular file wherever it leads, even to a copy of the
# recorded bytes: do not follow links in the plan folder when reading either"; ADR §2
# ("symlink ambiguity").
# Bug: the host opens `.pi` and `.pi/plan` without following links but opens the artifact
# file itself with a plain open, so an artifact replaced by a symlink to a file with the
# recorded bytes passes the check: artifact/read returns the bytes and approve starts the
# execution, where ARTIFACT_UNREADABLE is required.
# Recipe: submit a plan; copy its artifact elsewhere, replace the artifact by a symlink
# to the copy; artifact/read (and approval/approve) answer with success instead of
# ARTIFACT_UNREADABLE.
@variant("sec-artifact-read-follows-link")
def artifact_read_follows_link() -> None:
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


CASES = [
    BrokenCase(
        "sec-key-in-settings",
        "sessions",
        "receives_the_key_from_the_hosts_environment",
        "P21",
        "stored the provider API key in its data directory",
    ),
    BrokenCase(
        "sec-key-in-provider-error",
        "scheduled_plan",
        "run_whose_model_provider_answers_with_an_error",
        "P21",
        "the host sent the provider API key in a protocol message",
    ),
    BrokenCase(
        "sec-key-sent-to-preview",
        "sessions",
        "previewing_a_local_page_does_not_hand_it",
        "P21",
        "BrowserPreview sent the provider API key to the page",
    ),
    BrokenCase(
        "sec-root-in-shell-line",
        "plan_tools",
        "at_the_edge_of_the_tools_published_input_runs",
        "P27",
        "made no ran.txt",
    ),
    BrokenCase(
        "sec-glob-regex-unescaped",
        "plan_tools",
        "finds_exactly_the_files_it_names and signs",
        "P10",
        "after its Glob call the model was",
    ),
    BrokenCase(
        "sec-title-in-artifact-name",
        "artifact_integrity",
        "title_that_looks_like_a_path_does_not_move",
        "R2.3",
        "the submission wrote",
    ),
    BrokenCase(
        "sec-preview-follows-redirects",
        "plan_tools",
        "sends_the_preview_elsewhere_is_not_followed",
        "P23",
        "expected BROWSER_PREVIEW_REFUSED",
    ),
    BrokenCase(
        "sec-preview-not-global",
        "plan_tools",
        "sends_the_preview_elsewhere_is_not_followed",
        "P23",
        "expected BROWSER_PREVIEW_REFUSED",
    ),
    BrokenCase(
        "sec-permission-id-from-call-id",
        "isolation",
        "name_their_calls_alike",
        "P7",
        "permission questions carry the id",
    ),
    BrokenCase(
        "sec-plan-gate-case-loose",
        "plan_tools",
        "a_change_the_model_attempts_while_planning_is_refused and WRITE",
        "R1.5",
        "expected UNKNOWN_TOOL",
    ),
    BrokenCase(
        "sec-sql-title-literal",
        "artifact_integrity",
        "title_and_question_are_kept_exactly and quotes",
        "R2.6",
        "the host lists no approval for the session",
    ),
    BrokenCase(
        "sec-path-prefix-compare",
        "isolation",
        "reading_another_projects_file_is_refused and link",
        "R5.8",
        "the Read into the other project ran",
    ),
    BrokenCase(
        "sec-path-lexical-check",
        "isolation",
        "writing_into_another_project_is_refused and link",
        "R5.8",
        "the Write into the other project ran",
    ),
    BrokenCase(
        "sec-path-nul-truncated",
        "plan_tools",
        "published_input_is_refused and NUL",
        "P27",
        "expected INVALID_TOOL_INPUT",
    ),
    BrokenCase(
        "sec-artifact-read-follows-link",
        "artifact_integrity",
        "replaced_by_a_link_to_a_copy_of_itself",
        "P13",
        "expected the host to refuse",
    ),
]
