"""Broken hosts: a held-out set (hardening that overreaches), written from the contract alone.

Each host protects more than the contract allows (refuses, normalises, sanitises, redacts
or caps what the contract says passes through) and so breaks one stated requirement.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, BinaryIO

from hosts.registry import BrokenCase, patch, variant

# C0 and C1 control characters other than tab and line feed, and ANSI escape sequences.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _terminal_safe(text: str) -> str:
    return _CONTROLS.sub("", _ANSI.sub("", text))


# "A workspace root is any absolute path of an existing folder ... it may hold spaces,
# non-ASCII letters and characters a shell or a URI reads specially (', $, `, &, %, #, ?, ;).
# Do not paste it into a shell command line, do not change its Unicode form, do not refuse it
# for its characters." (implementing-a-host.md, Sessions; R5.8 / R7.3 cwd; P29 for tasks)
# Bug: to rule out shell injection through the working directory, session/create and
# task/create refuse a root holding a shell metacharacter with WORKSPACE_INVALID.
# Observed: session/create {"workspaceRoot": "/tmp/it's $HOME"} (an existing folder) answers
# WORKSPACE_INVALID; a root with only spaces or non-ASCII letters still works.
# Recipe: mkdir "/tmp/a;b"; session/create with it -> expect a session, get an error.
@variant("hard-root-shell-chars-refused")
def root_shell_chars_refused() -> None:
    from reference_host import host as host_module
    from reference_host import tasks as tasks_module
    from reference_host.errors import HostError
    from reference_host.workspace import validate_root

    unsafe = set("'\"`$;&|<>\\")

    def checked_root(root: str) -> Path:
        if any(char in unsafe for char in root):
            raise HostError(
                "WORKSPACE_INVALID", f"workspace root {root!r} holds a shell metacharacter"
            )
        return validate_root(root)

    patch(host_module, "validate_root", checked_root)
    patch(tasks_module, "validate_root", checked_root)


# "workspaceRoot and provider are reported exactly as given (no path resolution ...)" and
# "do not change its Unicode form" (Sessions, R7.2); a command's cwd is that same string.
# Bug: the storage layer stores workspace roots in NFC "to avoid two spellings of one
# folder". session/create's answer still echoes the root as given (built from the row before
# it was stored), but session/get, session/list and sessions.workspace_root hold the NFC
# form, and tools and commands use it, which on Linux names another (missing) folder.
# Recipe: mkdir a folder whose name is decomposed ("cafe\u0301"); session/create with it;
# session/get -> workspaceRoot is "caf\u00e9"; a Bash call fails / its cwd differs.
@variant("hard-root-stored-nfc")
def root_stored_nfc() -> None:
    from reference_host.storage import SessionRow, Storage

    original = Storage.insert_session

    async def insert_session(self: Storage, row: SessionRow) -> None:
        if row.workspace_root is not None:
            row = replace(row, workspace_root=unicodedata.normalize("NFC", row.workspace_root))
        await original(self, row)

    patch(Storage, "insert_session", insert_session, wraps=True)


# ADR §2 / R2.7: "host-core does not ... normalize line endings, or add any other wrapper to
# markdown"; R2.2 the artifact holds the submitted Markdown bytes unchanged (and P15: the
# execution prompt carries them byte for byte).
# Bug: the artifact writer converts CR LF to LF "so plans diff cleanly on every platform";
# the SHA-256 and byte size recorded are those of the converted bytes, so the integrity
# check passes and the file is self-consistent, only not what was submitted.
# Recipe: Plan turn, SubmitPlan {"markdown": "# P\r\n\r\nstep\r\n", ...}; artifact/read ->
# contentBase64 decodes to "# P\n\nstep\n" and byteSize is 3 short.
@variant("hard-artifact-crlf-to-lf")
def artifact_crlf_to_lf() -> None:
    from reference_host import approvals
    from reference_host.artifacts import encode_markdown

    def encode(markdown: str) -> bytes:
        return encode_markdown(markdown.replace("\r\n", "\n"))

    patch(approvals, "encode_markdown", encode)


# R2.6 / R4.3: the plan_approvals row holds "title and question as submitted"; the approval
# object carries them (R3.1), and approval/get equals the row.
# Bug: title and question are made "terminal safe" before they are stored: ANSI escape
# sequences and control characters (other than tab and line feed) are removed, so a card
# cannot be spoofed. A title with a CR, a BEL or "\u001b[1m" comes back without it.
# Recipe: SubmitPlan {"title": "Fix\u001b[31m it\r", "question": "Go?\u0007", ...};
# approval/get -> title "Fix it", question "Go?"; plan_approvals.title the same.
@variant("hard-title-sanitised")
def title_sanitised() -> None:
    from reference_host import approvals

    original = approvals._require_text

    def require_text(args: dict[str, Any], field: str) -> str:
        return _terminal_safe(original(args, field))

    patch(approvals, "_require_text", require_text, wraps=True)


# P31: "A prompt ... reaches the provider as the text of the last user message of the
# turn's first request, exactly as given: no wrapper around it, no whitespace trimmed ...
# A prompt of blank space only is a prompt like any other." (also R1.3: the transcript
# keeps the prompt).
# Bug: session/prompt strips the text's surrounding blank space before starting the turn
# (a blank-only prompt becomes ""). Task prompts are not touched.
# Recipe: session/prompt {"text": "  hello\n"}; the provider's request ends with the user
# message "hello"; session/transcript's user entry reads "hello".
@variant("hard-prompt-trimmed")
def prompt_trimmed() -> None:
    from reference_host.host import Host

    original = Host.session_prompt

    async def session_prompt(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        return await original(self, {**params, "text": params["text"].strip()})

    patch(Host, "session_prompt", session_prompt, wraps=True)


# R7.3 / P20: "Output is streamed, and given to the model, as the command wrote it: line
# ends are not translated (a CR LF and a lone CR stay as they are)."
# Bug: command output is normalised for display: CR LF and a lone CR become LF, in every
# command/output piece and in the tool result the model is given. seq numbering and the
# byte count for truncation are unchanged.
# Recipe: Bash `printf 'a\r\nb\rc'`; the command/output texts join to "a\nb\nc" (and the
# tool message carries the same), not "a\r\nb\rc".
@variant("hard-output-line-ends-normalised")
def output_line_ends_normalised() -> None:
    from reference_host import turns
    from reference_host.commands import CommandResult, run_command

    def normalised(text: str) -> str:
        return text.replace("\r\n", "\n").replace("\r", "\n")

    async def run(**kwargs: Any) -> CommandResult:
        send = kwargs["notify"]

        def notify(method: str, params: dict[str, Any]) -> None:
            if method == "command/output":
                params = {**params, "text": normalised(params["text"])}
            send(method, params)

        result = await run_command(**{**kwargs, "notify": notify})
        return replace(result, output=normalised(result.output))

    patch(turns, "run_command", run)


# R1.3: "The conversation holds the model's own words too, exactly as it gave them (blank
# space and control characters included), also the text it wrote beside its tool calls";
# session/transcript and the transcript table keep it, and the next turn's request carries it.
# Bug: the assistant message is sanitised (ANSI escapes and control characters other than
# tab and LF removed) before it is stored; turn/text still streams the raw words, so the
# live view is right and the transcript and later requests are not.
# Recipe: the model answers "ok\u0007 \u001b[2Kdone\r"; session/transcript's assistant
# entry reads "ok done"; the next prompt's request carries the same altered text.
@variant("hard-model-words-sanitised")
def model_words_sanitised() -> None:
    from reference_host import turns
    from reference_host.provider_client import AssistantReply

    original = turns._assistant_message

    def assistant_message(reply: AssistantReply) -> dict[str, Any]:
        message = original(reply)
        if isinstance(message.get("content"), str):
            message["content"] = _terminal_safe(message["content"]) or None
        return message

    patch(turns, "_assistant_message", assistant_message, wraps=True)


# P10: "Read gives the file's text as stored" (the tool works: what it returns reaches the
# model whole).
# Bug: Read redacts values that look like secrets ("API_KEY=...", "password: ...",
# "token = ...") before the text goes to the provider, so credentials in a project are
# never sent to a model. Grep and Bash are not filtered.
# Recipe: a workspace file "config.env" holding "DB_PASSWORD=hunter2\nname=x\n"; Read it;
# the tool message carries "DB_PASSWORD=[REDACTED]".
@variant("hard-read-redacts-secrets")
def read_redacts_secrets() -> None:
    from reference_host.tools.files import Read

    secret = re.compile(
        r"(?im)^([ \t]*[\w.-]*(?:api[_-]?key|secret|token|passw(?:or)?d)[\w.-]*[ \t]*[:=][ \t]*)"
        r"(\S[^\r\n]*)"
    )
    original = Read._read

    def read(root: Path, relative: str, offset: int | None, limit: int | None) -> str:
        return secret.sub(r"\1[REDACTED]", original(root, relative, offset, limit))

    patch(Read, "_read", staticmethod(read))


# P2: "announce the longest request line you accept in capabilities.maxFrameBytes ... A line
# of exactly that length is served; a longer one gets FRAME_TOO_LARGE".
# Bug: the reader sizes its buffer to maxFrameBytes with the newline counted in it, so the
# longest line it serves is one byte shorter than announced: a line of exactly
# maxFrameBytes bytes gets FRAME_TOO_LARGE (reporting the announced limit).
# Recipe: initialize; send a valid request padded (whitespace, or a long string) to exactly
# capabilities.maxFrameBytes bytes -> FRAME_TOO_LARGE instead of its answer.
@variant("hard-frame-limit-counts-newline")
def frame_limit_counts_newline() -> None:
    from reference_host import server
    from reference_host.framing import (
        DEFAULT_MAX_FRAME_BYTES,
        Frame,
        OversizedFrame,
        read_frames,
    )

    def frames(stream: BinaryIO, max_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> Iterator[Frame]:
        for frame in read_frames(stream, max_bytes - 1):
            yield OversizedFrame(max_bytes) if isinstance(frame, OversizedFrame) else frame

    patch(server, "read_frames", frames)


# P13: "A symbolic link in the artifact's place counts as not a regular file wherever it
# leads, even to a copy of the recorded bytes: do not follow links in the plan folder when
# reading either (§2 rules out symlink ambiguity)" -> ARTIFACT_UNREADABLE, approval pending.
# Bug: the artifact reader "hardens" by canonicalising the path (realpath) and checking that
# it stays inside the workspace, instead of opening without following links: a link in the
# artifact's place that leads to a file inside the project with the recorded bytes passes,
# and approve / artifact/read succeed. A link out of the project is still refused.
# Recipe: SubmitPlan; copy the artifact to <root>/copy.md; replace the artifact with a
# symlink to copy.md; approval/approve -> approved (expected ARTIFACT_UNREADABLE).
@variant("hard-artifact-read-resolves-links")
def artifact_read_resolves_links() -> None:
    from reference_host import artifacts
    from reference_host.errors import HostError

    def read_artifact(root: str, relative_path: str, limit: int | None = None) -> bytes:
        parts = relative_path.split("/")
        if parts[:2] != list(artifacts.PLAN_DIR) or len(parts) != 3:
            raise HostError("ARTIFACT_UNREADABLE", f"{relative_path!r} is not a plan artifact path")
        if not root or not Path(root).is_absolute():
            raise HostError("ARTIFACT_UNREADABLE", "the session has no usable workspace root")
        try:
            real_root = Path(root).resolve(strict=True)
            real = (real_root / relative_path).resolve(strict=True)
            if not real.is_relative_to(real_root) or not real.is_file():
                raise HostError("ARTIFACT_UNREADABLE", f"{relative_path} is not a regular file")
            with real.open("rb") as handle:
                return handle.read() if limit is None else handle.read(limit)
        except (OSError, RuntimeError) as exc:
            raise HostError("ARTIFACT_UNREADABLE", f"cannot read {relative_path}: {exc}") from exc

    patch(artifacts, "read_artifact", read_artifact)


# P13: "Any change to the bytes ... is ARTIFACT_MODIFIED; a missing file or one that is not a
# regular file is ARTIFACT_UNREADABLE" (catalog: two codes, error-codes.json).
# Bug: so as not to tell a tamperer whether the check noticed the change, a failed integrity
# check is reported as the generic ARTIFACT_UNREADABLE (approve and artifact/read alike);
# the approval still stays pending, as it should.
# Recipe: SubmitPlan; append a byte to the artifact file; artifact/read and
# approval/approve -> ARTIFACT_UNREADABLE (expected ARTIFACT_MODIFIED).
@variant("hard-artifact-modified-vague")
def artifact_modified_vague() -> None:
    from reference_host import approvals
    from reference_host.artifacts import read_verified
    from reference_host.errors import HostError

    def verified(root: str, relative_path: str, sha256: str, byte_size: int) -> bytes:
        try:
            return read_verified(root, relative_path, sha256, byte_size)
        except HostError as error:
            if error.code == "ARTIFACT_MODIFIED":
                raise HostError(
                    "ARTIFACT_UNREADABLE", f"{relative_path} failed its integrity check"
                ) from error
            raise

    patch(approvals, "read_verified", verified)


# C5 / P27: "The per-call timeout is the tool argument timeout_ms" (tools.schema.json allows
# up to 3,600,000 ms, one hour), counted on the host clock from the command's own start.
# Bug: a safety ceiling clamps every command's timeout to 10 minutes, so a command given a
# longer timeout_ms is killed (timedOut: true, COMMAND_TIMED_OUT) at 10 minutes.
# Recipe: Bash {"command": "<wait on a gate>", "timeout_ms": 1800000}; after
# command/started, conformance/clock/advance 660000 -> command/exited timedOut: true
# (expected: still running until 30 minutes).
@variant("hard-command-timeout-ceiling")
def command_timeout_ceiling() -> None:
    from reference_host import turns
    from reference_host.commands import CommandResult, run_command

    ceiling_ms = 600_000

    async def run(**kwargs: Any) -> CommandResult:
        timeout = kwargs.get("timeout_ms")
        if isinstance(timeout, int) and timeout > ceiling_ms:
            kwargs = {**kwargs, "timeout_ms": ceiling_ms}
        return await run_command(**kwargs)

    patch(turns, "run_command", run)


# P10: Glob and Grep: "Files in hidden folders (.github/) count like any other; a .git
# folder you may leave out."
# Bug: the workspace walk skips every hidden folder (.env.d, .ssh, .aws ...) so a search can
# never surface credentials; hidden files at any level are still listed, .pi/plan too is
# skipped.
# Recipe: write ".github/workflows/ci.yml" holding "name: ci"; Glob "**/*.yml" -> (no
# matches); Grep "name" -> no line of it.
@variant("hard-search-skips-hidden-folders")
def search_skips_hidden_folders() -> None:
    from reference_host.tools import files
    from reference_host.tools.budget import Budget

    original = files._workspace_files

    def workspace_files(root: Path, budget: Budget) -> list[tuple[str, Path]]:
        return [
            (relative, real)
            for relative, real in original(root, budget)
            if not any(part.startswith(".") for part in relative.split("/")[:-1])
        ]

    patch(files, "_workspace_files", workspace_files, wraps=True)


# P23: BrowserPreview "fetches only http and https URLs whose host is a loopback address
# (localhost, 127.0.0.0/8, ::1)" (and the tool works, P10).
# Bug: against DNS rebinding, only loopback IP literals are trusted: a URL naming the host
# "localhost" is refused with BROWSER_PREVIEW_REFUSED before any connection.
# Recipe: BrowserPreview {"url": "http://localhost:<port>/page"} on the harness's page ->
# status denied, BROWSER_PREVIEW_REFUSED, and the page is never requested.
@variant("hard-browser-refuses-localhost-name")
def browser_refuses_localhost_name() -> None:
    from reference_host.tools import browser

    original = browser.is_loopback

    def is_loopback(host: str) -> bool:
        return host.lower() != "localhost" and original(host)

    patch(browser, "is_loopback", is_loopback, wraps=True)


CASES = [
    BrokenCase(
        "hard-root-shell-chars-refused",
        "isolation",
        "plan_cannot_be_opened_through_another_session",
        "R5.9",
        "WORKSPACE_INVALID",
    ),
    BrokenCase(
        "hard-root-stored-nfc",
        "submit_plan",
        "submitting_a_plan_ends_the_turn",
        "P11",
        "SubmitPlan results",
    ),
    BrokenCase(
        "hard-artifact-crlf-to-lf",
        "artifact_integrity",
        "markdown_is_stored_byte_for_byte and mixed_line_endings",
        "R2.7",
        "artifact bytes differ from the submitted markdown",
    ),
    BrokenCase(
        "hard-title-sanitised",
        "artifact_integrity",
        "title_and_question_are_kept_exactly_as_submitted and line_breaks",
        "R2.6",
        "the plan_approvals row holds title",
    ),
    BrokenCase(
        "hard-prompt-trimmed",
        "sessions",
        "prompt_in_plan_mode_reaches_the_model_as_the_last_thing",
        "P31",
        "the model was given the prompt",
    ),
    BrokenCase(
        "hard-output-line-ends-normalised",
        "shell",
        "carriage_returns_in_the_output_arrive_as_the_command_printed_them",
        "P20",
        "output is streamed as the command wrote it",
    ),
    BrokenCase(
        "hard-model-words-sanitised",
        "sessions",
        "later_turn_gives_the_model_its_earlier_answer_exactly",
        "R1.3",
        "did not give the model its earlier answer as it gave it",
    ),
    BrokenCase(
        "hard-read-redacts-secrets",
        "plan_tools",
        "seems_to_hold_secrets",
        "P10",
        "after its Read call the model was not given",
    ),
    BrokenCase(
        "hard-frame-limit-counts-newline",
        "protocol_errors",
        "request_exactly_at_the_frame_limit_is_served",
        "P2",
        "was refused",
    ),
    BrokenCase(
        "hard-artifact-read-resolves-links",
        "artifact_integrity",
        "replaced_by_a_link_to_a_copy_of_itself",
        "P13",
        "expected the host to refuse",
    ),
    BrokenCase(
        "hard-artifact-modified-vague",
        "artifact_integrity",
        "plan_file_changed_on_disk_after_submission_is_not_approved",
        "P13",
        "answered with ARTIFACT_UNREADABLE, not ARTIFACT_MODIFIED",
    ),
    BrokenCase(
        "hard-command-timeout-ceiling",
        "shell",
        "timeout_counts_from_the_commands_own_start and 3600000",
        "C5",
        "the command ended before its own timeout had run out",
    ),
    BrokenCase(
        "hard-search-skips-hidden-folders",
        "plan_tools",
        "finds_exactly_the_files_it_names and hidden_folder",
        "P10",
        "after its Glob call the model was not given",
    ),
    BrokenCase(
        "hard-browser-refuses-localhost-name",
        "plan_tools",
        "by_the_name_localhost_is_not_refused",
        "P23",
        "localhost is a loopback name",
    ),
]
