"""Allowed variations (refusals, failures and artifacts), written from the contract alone."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import errno
import json
import os
import re
import time
import unicodedata
import weakref
from pathlib import Path
from typing import Any

from hosts.registry import AllowedCase, patch, variant

# Quotations below are from docs/implementing-a-host.md ("the contract") unless they name
# another file. Every variant patches the reference host once, in its own process.


# -- which error when several apply ---------------------------------------------------------


# "a prompt or change while the Plan turn that submitted a plan has not yet ended
# (`SESSION_BUSY` or `APPROVAL_PENDING`)" is listed under "What the suite does not require".
# The reference host answers APPROVAL_PENDING as soon as the approval exists; this host says
# the session is still busy (SESSION_BUSY) until the turn that submitted the plan has ended.
# A pending approval alone (the turn has ended) still gets APPROVAL_PENDING (R5.7).
@variant("rf-busy-before-pending")
def busy_before_pending() -> None:
    from reference_host import host as host_module
    from reference_host.errors import HostError
    from reference_host.state import Activity

    original = host_module.ensure_idle_for

    def ensure_idle_for(activity: Activity, what: str) -> None:
        if activity.pending_approval_id is not None and activity.active_turn_id is not None:
            raise HostError(
                "SESSION_BUSY",
                f"{what} refused: the turn that submitted the plan has not ended yet",
                {"turnId": activity.active_turn_id},
            )
        original(activity, what)

    patch(host_module, "ensure_idle_for", ensure_idle_for)


# "which rule answers a request that breaks two the contract does not order: an unknown
# session together with an unknown approval or shell" (and P34: "an `approval/get` may
# answer `APPROVAL_NOT_FOUND` instead"). This host looks the approval up first: an approval
# id that no session has is APPROVAL_NOT_FOUND, whatever the session id says. An approval
# that exists is still checked against its session as before (SESSION_NOT_FOUND first).
@variant("rf-approval-lookup-first")
def approval_lookup_first() -> None:
    from reference_host.approvals import Approvals
    from reference_host.errors import HostError
    from reference_host.storage import ApprovalRow

    original = Approvals.require

    async def require(self: Approvals, session_id: str, approval_id: str) -> ApprovalRow:
        if await self.host.storage.get_approval(approval_id) is None:
            raise HostError("APPROVAL_NOT_FOUND", f"there is no approval {approval_id!r}")
        return await original(self, session_id, approval_id)

    patch(Approvals, "require", require)


# Same sentence, "an unknown session together with an unknown approval or shell": a
# `session/configure` naming an unknown session and an unknown shell gets SHELL_NOT_FOUND
# here (the reference host answers SESSION_NOT_FOUND). Only when the session is unknown: a
# known session keeps the reference order (busy, pending, then the shell).
@variant("rf-shell-before-unknown-session")
def shell_before_unknown_session() -> None:
    from reference_host import host as host_module
    from reference_host.host import Host

    original = Host.session_configure

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        shell_id = params.get("shellId")
        if shell_id is not None and await self.storage.get_session(params["sessionId"]) is None:
            host_module._require_shell(shell_id)
        return await original(self, params)

    patch(Host, "session_configure", session_configure)


# "an invalid workspace root together with an unknown shell" is listed as unordered. This
# host's `session/create` checks the shell first (SHELL_NOT_FOUND); the reference host
# checks the root first (WORKSPACE_INVALID).
@variant("rf-shell-before-workspace")
def shell_before_workspace() -> None:
    from reference_host import host as host_module
    from reference_host.host import Host

    original = Host.session_create

    async def session_create(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("shellId") is not None:
            host_module._require_shell(params["shellId"])
        return await original(self, params)

    patch(Host, "session_create", session_create)


# "an approve of a decided or expired approval whose artifact has changed since (its
# state's code or the artifact's)". This host checks the artifact's bytes first on every
# approve, so a decided or expired approval whose file changed answers ARTIFACT_MODIFIED
# or ARTIFACT_UNREADABLE; the reference host answers APPROVAL_NOT_PENDING or
# PLAN_APPROVAL_TIMEOUT. A pending approval keeps the reference order (its deadline first).
@variant("rf-artifact-check-before-state")
def artifact_check_before_state() -> None:
    from reference_host.approvals import Approvals
    from reference_host.state import PermissionMode

    original = Approvals.approve

    async def approve(
        self: Approvals, session_id: str, approval_id: str, mode: PermissionMode
    ) -> dict[str, Any]:
        row = await self.require(session_id, approval_id)
        if row.status != "pending" and row.artifact_path is not None:
            session = await self.host.require_session(session_id)
            await self.verified_content(session, row)
        return await original(self, session_id, approval_id, mode)

    patch(Approvals, "approve", approve)


# "inside a tool call, the mode gate, the input check and the permission question (a Write
# in Plan with bad arguments, an unattended Bash with bad input)" are unordered. This host
# checks a known tool's input before its mode gate: a Write in Plan with bad arguments is
# INVALID_TOOL_INPUT here (TOOL_DENIED in the reference host). Unknown and plugin tools
# have no input shape and are refused as before.
@variant("rf-input-check-before-gate")
def input_check_before_gate() -> None:
    from reference_host import turns
    from reference_host.errors import HostError
    from reference_host.provider_client import ToolCall
    from reference_host.storage import SessionRow
    from reference_host.tools.base import validate_args

    original = turns.TurnRunner._run_call

    async def run_call(
        self: turns.TurnRunner,
        session: SessionRow,
        turn_id: str,
        call: ToolCall,
        unattended: bool,
    ) -> turns.CallOutcome:
        spec = turns._SPECS.get(call.name)
        if spec is not None:
            try:
                validate_args(spec, turns._arguments(call))
            except HostError as error:
                return turns._failure(error)
        return await original(self, session, turn_id, call, unattended)

    patch(turns.TurnRunner, "_run_call", run_call)


# Same sentence, "an unattended Bash with bad input": in an unattended run this host refuses
# a call that would need a permission answer with PERMISSION_UNAVAILABLE before it reads the
# call's input (the reference host checks the input first). Attended turns are unchanged.
@variant("rf-permission-before-input-unattended")
def permission_before_input_unattended() -> None:
    from reference_host import turns
    from reference_host.errors import HostError
    from reference_host.permissions import needs_permission
    from reference_host.provider_client import ToolCall
    from reference_host.storage import SessionRow

    original = turns.TurnRunner._run_call

    async def run_call(
        self: turns.TurnRunner,
        session: SessionRow,
        turn_id: str,
        call: ToolCall,
        unattended: bool,
    ) -> turns.CallOutcome:
        if (
            unattended
            and turns._gate(session.mode, call.name) is None
            and needs_permission(session.permission_mode, call.name)
        ):
            refusal = HostError(
                "PERMISSION_UNAVAILABLE", f"{call.name} would need a user's answer; none is here"
            )
            return turns._failure(refusal)
        return await original(self, session, turn_id, call, unattended)

    patch(turns.TurnRunner, "_run_call", run_call)


# -- error messages and data ----------------------------------------------------------------

_FRENCH = {
    "SESSION_BUSY": "la session est occupée",
    "APPROVAL_PENDING": "un plan attend une décision",
    "APPROVAL_NOT_PENDING": "ce plan a déjà été décidé",
    "PLAN_APPROVAL_TIMEOUT": "le délai de 30 minutes est dépassé",
    "PROVIDER_ERROR": "le fournisseur du modèle a échoué",
    "ARTIFACT_MODIFIED": "le fichier du plan a été modifié",
    "ARTIFACT_UNREADABLE": "le fichier du plan est illisible",
}


def _rewrite_host_errors(message: Any, details: Any) -> None:
    """Give every HostError the message ``message(code, original)`` and the details
    ``details(code, original)`` (None: no details)."""
    from reference_host.errors import HostError

    original = HostError.__init__

    def init(self: HostError, code: str, text: str, extra: dict[str, Any] | None = None) -> None:
        original(self, code, text, extra)
        self.message = message(code, text)
        self.args = (self.message,)
        self.details = details(code, extra)

    patch(HostError, "__init__", init)


# "error and log message texts" are listed under "What the suite does not require", and
# protocol.md: "Clients should branch on `error.data.code`, never on `error.message`". This
# host words every error message in French (non-ASCII text), never repeating the reference
# host's English, in responses, tool results, `turn/ended` and task runs alike. Details are
# kept as they are.
@variant("rf-french-error-messages")
def french_error_messages() -> None:
    def message(code: str, _text: str) -> str:
        reason = _FRENCH.get(code, "la demande n'a pas abouti")
        return f"Échec ({code.lower().replace('_', ' ')}) : {reason}."

    _rewrite_host_errors(message, lambda _code, extra: extra)


# `ErrorData.details` is "Optional machine-readable context" (types.schema.json); the only
# detail the contract asks for is `details.supported` of UNSUPPORTED_PROTOCOL_VERSION. This
# host sends no `details` on any other error, and terse messages (the code alone).
@variant("rf-bare-error-data")
def bare_error_data() -> None:
    def details(code: str, extra: dict[str, Any] | None) -> dict[str, Any] | None:
        if code == "UNSUPPORTED_PROTOCOL_VERSION" and extra:
            return {"supported": extra["supported"]}
        return None

    _rewrite_host_errors(lambda code, _text: code, details)


# Same freedom the other way: "`details` ... Optional machine-readable context" is an open
# object. This host adds its own keys to every error's details (whether a retry may help,
# the error's category and a documentation hint), besides the reference host's keys.
@variant("rf-rich-error-details")
def rich_error_details() -> None:
    transient = {"SESSION_BUSY", "EXECUTION_ACTIVE", "PROVIDER_ERROR", "DATA_DIR_IN_USE"}

    def details(code: str, extra: dict[str, Any] | None) -> dict[str, Any]:
        return {
            **(extra or {}),
            "retryable": code in transient,
            "category": code.split("_")[0].lower(),
            "help": f"https://example.invalid/errors/{code.lower()}",
        }

    _rewrite_host_errors(lambda _code, text: text, details)


# -- provider failures ----------------------------------------------------------------------


# P25 fixes only the code: "the turn ends `failed` with `PROVIDER_ERROR` in `turn/ended`'s
# `error`", and "error and log message texts" are free. This host words a provider failure
# its own way and reports other details (the HTTP status under `httpStatus`, the failure's
# phase), in `turn/ended` and a failed run's `lastRun`/`scheduled_task_runs` alike.
@variant("rf-provider-error-wording")
def provider_error_wording() -> None:
    from reference_host import turns
    from reference_host.errors import HostError
    from reference_host.provider_client import AssistantReply, ProviderError
    from reference_host.storage import SessionRow

    original = turns.TurnRunner._ask_model

    async def ask_model(
        self: turns.TurnRunner, session: SessionRow, turn_id: str, messages: list[dict[str, Any]]
    ) -> AssistantReply:
        try:
            return await original(self, session, turn_id, messages)
        except HostError as error:
            cause = error.__cause__
            if error.code != "PROVIDER_ERROR" or not isinstance(cause, ProviderError):
                raise
            phase = {"http": "request", "stream": "response", "timeout": "waiting"}
            details: dict[str, Any] = {"phase": phase.get(cause.kind, "decoding")}
            if cause.status is not None:
                details["httpStatus"] = cause.status
            raise HostError(
                "PROVIDER_ERROR",
                f"The model at {session.provider_base_url} could not answer this turn.",
                details,
            ) from cause

    patch(turns.TurnRunner, "_ask_model", ask_model)


# "Whether you retry a `429` or a `5xx` is yours; the suite does not send them." This host
# sends a request again (at most three more times, with a short real-time back-off) when
# the provider answers 429, 500, 502, 503 or 504 before any of the answer arrived. A 400 and
# a broken stream are not retried ("it is not sent again").
@variant("rf-provider-retry-transient")
def provider_retry_transient() -> None:
    from reference_host import turns
    from reference_host.provider_client import AssistantReply, ProviderError

    original = turns.complete
    transient = {429, 500, 502, 503, 504}

    async def complete(*args: Any, **kwargs: Any) -> AssistantReply:
        for attempt in range(3):
            try:
                return await original(*args, **kwargs)
            except ProviderError as error:
                if error.kind != "http" or error.status not in transient:
                    raise
                await asyncio.sleep(0.2 * 2**attempt)
        return await original(*args, **kwargs)

    patch(turns, "complete", complete)


# "transcript rows you write yourself (the execution prompt, a `new_context` summary, a
# `system` or `developer` note that a turn failed) and which turn, if any, they name". This
# host records a `system` note when a turn fails (a provider error among others), naming no
# turn; it stays in the conversation the model is shown later, as a system message after
# the failed turn's messages. The prompt, the model's messages and the tool results stay.
@variant("rf-failure-note-in-transcript")
def failure_note_in_transcript() -> None:
    from reference_host import turns
    from reference_host.errors import HostError
    from reference_host.ports import TurnEnded
    from reference_host.storage import ApprovalRow

    original = turns.TurnRunner._end

    async def end(
        self: turns.TurnRunner,
        session_id: str,
        turn_id: str,
        approval: ApprovalRow | None,
        on_end: TurnEnded | None,
        outcome: str,
        error: HostError | None,
    ) -> None:
        if outcome == "failed" and error is not None:
            note = {
                "role": "system",
                "content": f"Note: the previous turn failed ({error.code}); it was not finished.",
            }
            await self.host.storage.append_transcript(
                session_id, None, "system", note, self.host.clock.now_ms()
            )
        await original(self, session_id, turn_id, approval, on_end, outcome, error)

    patch(turns.TurnRunner, "_end", end)


# P24: "Either refuse the `session/prompt` with `PROVIDER_NOT_CONFIGURED`, starting no turn,
# or accept it and end its turn `failed` with `PROVIDER_NOT_CONFIGURED` in `turn/ended`'s
# `error`; the choice is yours." The reference host refuses; this host accepts the prompt
# and its turn fails without reaching any provider.
@variant("rf-no-provider-turn-fails")
def no_provider_turn_fails() -> None:
    from reference_host import host as host_module
    from reference_host.host import Host

    async def session_prompt(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        host_module.ensure_idle_for(self.activity_of(row.id), "a new prompt")
        turn_id = await self.turns.start(row, "prompt", params["text"])
        return {"turnId": turn_id}

    patch(Host, "session_prompt", session_prompt)


# -- busy sessions ----------------------------------------------------------------------------


# "An approve of the new plan that arrives before the earlier execution has ended either
# waits until it has, or is refused with `EXECUTION_ACTIVE` (the approval stays pending and
# can be approved once it has ended)", also listed under "What the suite does not require".
# The reference host waits for the turn that submitted the plan; this host refuses at once
# while an execution is still active, for a pending approval before its deadline (a decided
# or expired one still gets APPROVAL_NOT_PENDING / PLAN_APPROVAL_TIMEOUT).
@variant("rf-approve-refused-while-execution-ends")
def approve_refused_while_execution_ends() -> None:
    from reference_host.approvals import Approvals
    from reference_host.errors import HostError
    from reference_host.state import PermissionMode, is_expired

    original = Approvals.approve

    async def approve(
        self: Approvals, session_id: str, approval_id: str, mode: PermissionMode
    ) -> dict[str, Any]:
        row = await self.require(session_id, approval_id)
        active = self.host.activity_of(session_id).active_execution_id
        now = self.host.clock.now_ms()
        if active is not None and row.status == "pending" and not is_expired(row.expires_at, now):
            raise HostError(
                "EXECUTION_ACTIVE",
                "the earlier execution has not ended yet; approve again once it has",
                {"executionId": active},
            )
        return await original(self, session_id, approval_id, mode)

    patch(Approvals, "approve", approve)


# -- artifact files -----------------------------------------------------------------------------

_NAME_HINT: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "rf_name_hint", default=None
)
"""What a naming variant knows of the submission being written (asyncio.to_thread copies
the context into the worker thread that writes the artifact)."""


def _with_name_hint(hint: Any) -> None:
    """Wrap Approvals.submit so that ``await hint(approvals, session, args)`` is in
    ``_NAME_HINT`` while the artifact is written; ``hint`` may return an ``after`` coroutine
    function, awaited with the new approval once it is recorded."""
    from reference_host.approvals import Approvals
    from reference_host.storage import ApprovalRow, SessionRow

    original = Approvals.submit

    async def submit(
        self: Approvals, session: SessionRow, turn_id: str, args: dict[str, Any]
    ) -> ApprovalRow:
        info = await hint(self, session, args)
        token = _NAME_HINT.set(info)
        try:
            row = await original(self, session, turn_id, args)
        finally:
            _NAME_HINT.reset(token)
        after = info.get("after")
        if after is not None:
            await after(row)
        return row

    patch(Approvals, "submit", submit)


# "The name is yours; it must be new for every submission, also for two identical plans
# submitted at the same host-clock instant (R2.4)", "artifact file names" (What the suite
# does not require) and "`settings` rows under keys of your own". This host numbers its
# plans: `.pi/plan/plan-000001.md`, `plan-000002.md`, ... from a counter kept in `settings`
# under its own key, bumped once an approval records the file (a number never names two
# files: a name already taken gets a suffix, and the file is created without replacement).
@variant("rf-artifact-numbered-names")
def artifact_numbered_names() -> None:
    from reference_host import artifacts
    from reference_host.approvals import Approvals
    from reference_host.storage import ApprovalRow, SessionRow

    key = "rf.plan_artifact_counter"

    async def hint(approvals: Approvals, _session: SessionRow, _args: dict[str, Any]) -> Any:
        storage = approvals.host.storage
        number = int(await storage.get_setting(key) or "0") + 1

        async def after(_row: ApprovalRow) -> None:
            await storage.set_setting(key, str(number))

        return {"number": number, "attempt": [0], "after": after}

    def unique_name() -> str:
        info = _NAME_HINT.get()
        if info is None:
            return f"plan-{os.urandom(6).hex()}.md"
        info["attempt"][0] += 1
        attempt = info["attempt"][0]
        suffix = "" if attempt == 1 else f"-{attempt}"
        return f"plan-{info['number']:06d}{suffix}.md"

    patch(artifacts, "_unique_name", unique_name)
    _with_name_hint(hint)


# Same freedom ("artifact file names"): a readable name made from the title's words, kept
# in their own script (spaces and non-ASCII letters included), then the UTC time and a
# random tag, e.g. `.pi/plan/Rename the parser 2026-07-31 12.00.00 3fa2c1.md`. The ArtifactRef
# pattern `^\.pi/plan/[^/]+\.md$` allows any name without a `/`. Only letters, digits,
# spaces and hyphens of the title are kept, so the title never chooses the location
# (R2.3: "a title that looks like a path changes nothing"). UNSURE: R2.3 could be read as
# "the title has no part in the name at all"; this host reads it as "in the location".
@variant("rf-artifact-title-names")
def artifact_title_names() -> None:
    from reference_host import artifacts
    from reference_host.approvals import Approvals
    from reference_host.storage import SessionRow

    async def hint(approvals: Approvals, _session: SessionRow, args: dict[str, Any]) -> Any:
        title = args.get("title") if isinstance(args.get("title"), str) else ""
        return {"title": title}

    def words(title: str) -> str:
        kept = "".join(
            ch if ch.isalnum() or ch in " -" else " "
            for ch in unicodedata.normalize("NFC", title)
            if ch.isprintable()
        )
        text = re.sub(r"\s+", " ", kept).strip(" -")[:48].strip(" -")
        return text or "Plan"

    def unique_name() -> str:
        info = _NAME_HINT.get() or {}
        stamp = time.strftime("%Y-%m-%d %H.%M.%S", time.gmtime())
        return f"{words(info.get('title', ''))} {stamp} {os.urandom(3).hex()}.md"

    patch(artifacts, "_unique_name", unique_name)
    _with_name_hint(hint)


# "the artifact's file mode" (What the suite does not require; "The file mode is yours (the
# reference host makes them read-only); immutability is judged by effect"). This host
# writes artifacts owner-writable (0600) and creates `.pi` and `.pi/plan` private (0700)
# instead of 0444 and 0755. It still never changes a file it wrote.
@variant("rf-artifact-private-modes")
def artifact_private_modes() -> None:
    from reference_host import artifacts
    from reference_host.errors import HostError

    def open_plan_dir(parent_fd: int, name: str, shown: str) -> tuple[int, bool]:
        created = True
        try:
            os.mkdir(name, 0o700, dir_fd=parent_fd)
        except FileExistsError:
            created = False
        except FileNotFoundError as exc:
            raise HostError("WORKSPACE_INVALID", f"creating {shown}: no workspace") from exc
        except OSError as exc:
            raise artifacts._write_failed(f"creating {shown}", exc) from exc
        try:
            return os.open(name, artifacts._DIR_FLAGS, dir_fd=parent_fd), created
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                raise HostError("PLAN_PATH_UNSAFE", f"{shown} is not a plain folder") from exc
            raise HostError("ARTIFACT_WRITE_FAILED", f"cannot open {shown}: {exc}") from exc

    patch(artifacts, "READ_ONLY", 0o600)
    patch(artifacts, "_open_plan_dir", open_plan_dir)


def _write_artifact_variant(*, keep_partial: bool, via_temp: bool) -> Any:
    """A write_artifact like the reference host's, that may leave a failed write's file in
    place (``keep_partial``) or write a hidden temporary file and link it into place
    without replacement (``via_temp``)."""
    from reference_host import artifacts
    from reference_host.errors import HostError
    from reference_host.workspace import validate_root

    def create(plan_fd: int, name: str) -> int:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            return os.open(name, flags, artifacts.READ_ONLY, dir_fd=plan_fd)
        except OSError as exc:
            raise HostError("ARTIFACT_WRITE_FAILED", f"cannot create {name}: {exc}") from exc

    def write(fd: int, content: bytes, fault: artifacts.FaultCheck) -> None:
        try:
            if fault("artifactWrite"):
                if keep_partial:  # a write that stopped half way
                    os.write(fd, content[: len(content) // 2])
                raise OSError(errno.EIO, "injected artifact write failure")
            view = memoryview(content)
            while view:
                view = view[os.write(fd, view) :]
            if fault("artifactFlush"):
                raise OSError(errno.EIO, "injected artifact flush failure")
            os.fsync(fd)
        except OSError as exc:
            raise HostError("ARTIFACT_WRITE_FAILED", f"the artifact write failed: {exc}") from exc

    def place(plan_fd: int, temp: str) -> str:
        """Link the written temporary file under a new unique name; never replaces."""
        for _ in range(16):
            name = artifacts._unique_name()
            try:
                os.link(temp, name, src_dir_fd=plan_fd, dst_dir_fd=plan_fd, follow_symlinks=False)
            except FileExistsError:
                continue
            except OSError as exc:
                raise HostError(
                    "ARTIFACT_WRITE_FAILED", f"cannot place the artifact: {exc}"
                ) from exc
            return name
        raise HostError("ARTIFACT_WRITE_FAILED", "no unused artifact name could be found")

    def write_artifact(
        root: str, content: bytes, fault: artifacts.FaultCheck
    ) -> artifacts.Artifact:
        root_path = validate_root(root)
        try:
            root_fd = os.open(root_path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise HostError("WORKSPACE_INVALID", f"cannot open the workspace: {exc}") from exc
        opened = [root_fd]
        digest = artifacts._Digest(content)
        try:
            pi_fd, pi_created = artifacts._open_plan_dir(root_fd, ".pi", ".pi")
            opened.append(pi_fd)
            plan_fd, plan_created = artifacts._open_plan_dir(pi_fd, "plan", ".pi/plan")
            opened.append(plan_fd)
            parents = [*([pi_fd] if plan_created else []), *([root_fd] if pi_created else [])]
            if via_temp:
                written = f".writing-{os.getpid()}-{os.urandom(8).hex()}.tmp"
                file_fd = create(plan_fd, written)
            else:
                written, file_fd = artifacts._create_exclusive(plan_fd)
            name = written
            try:
                try:
                    write(file_fd, content, fault)
                finally:
                    fd, file_fd = file_fd, -1
                    artifacts._close(fd)
                if via_temp:
                    name = place(plan_fd, written)
                    os.unlink(written, dir_fd=plan_fd)
                for directory_fd in [plan_fd, *parents]:
                    artifacts._flush_directory(directory_fd)
            except BaseException:
                if via_temp or not keep_partial:
                    with contextlib.suppress(OSError):
                        os.unlink(written, dir_fd=plan_fd)
                raise
        finally:
            for fd in opened:
                with contextlib.suppress(OSError):
                    os.close(fd)
        return artifacts.Artifact(f".pi/plan/{name}", digest.hexdigest(), len(content))

    return write_artifact


# "whether a partly written artifact remains after a failed write (no approval may)" and
# §2: "Either way no approval and no execution is created (R2.12); whether a partly written
# file remains is yours." This host leaves what a failed write wrote in place (half the
# bytes when the write fails, all of them when the flush fails); no approval names it, and
# the next SubmitPlan writes a new file.
@variant("rf-artifact-keep-failed-write")
def artifact_keep_failed_write() -> None:
    from reference_host import approvals

    patch(approvals, "write_artifact", _write_artifact_variant(keep_partial=True, via_temp=False))


# §2: "create the file without replacement and without following symlinks in `.pi` or
# `.pi/plan`, and flush the bytes (file, then folders) before the approval row commits";
# how the file comes to be is not fixed. This host writes a hidden temporary file in
# `.pi/plan`, flushes it, links it under its unique name (link(2) never replaces), removes
# the temporary name and flushes the folder: the artifact appears whole or not at all.
@variant("rf-artifact-temp-then-link")
def artifact_temp_then_link() -> None:
    from reference_host import approvals

    patch(approvals, "write_artifact", _write_artifact_variant(keep_partial=False, via_temp=True))


def _append(path: Path, line: str) -> None:
    """Append one line to a file of the data directory."""
    with path.open("a", encoding="utf-8") as journal:
        journal.write(line)


# The data directory holds `host.db` ("your database is `DIR/host.db`"); nothing forbids
# other files there while the host runs (a lock file is named as enough for P17, and P21
# forbids storing the API key "in any other file of the data directory", which presumes
# there may be some). §2 forbids extra files only in the project ("and nothing else in the
# project"). This host keeps a journal of the artifacts it wrote, `DIR/plan-artifacts.jsonl`
# (one JSON line per approval: id, session, path, SHA-256, size, creation time).
@variant("rf-datadir-artifact-journal")
def datadir_artifact_journal() -> None:
    from reference_host.approvals import Approvals
    from reference_host.storage import ApprovalRow, SessionRow, Storage

    open_storage = Storage.open
    data_dirs: weakref.WeakKeyDictionary[Storage, Path] = weakref.WeakKeyDictionary()

    async def opened(cls: type[Storage], data_dir: Path) -> Storage:
        storage = await open_storage(data_dir)
        data_dirs[storage] = data_dir
        return storage

    patch(Storage, "open", classmethod(opened))
    original = Approvals.submit

    async def submit(
        self: Approvals, session: SessionRow, turn_id: str, args: dict[str, Any]
    ) -> ApprovalRow:
        row = await original(self, session, turn_id, args)
        data_dir = data_dirs.get(self.host.storage)
        if data_dir is not None:
            entry = {
                "approvalId": row.id,
                "sessionId": row.session_id,
                "path": row.artifact_path,
                "sha256": row.artifact_sha256,
                "byteSize": row.artifact_bytes,
                "createdAt": row.created_at,
            }
            line = json.dumps(entry, separators=(",", ":")) + "\n"
            await asyncio.to_thread(_append, Path(data_dir) / "plan-artifacts.jsonl", line)
        return row

    patch(Approvals, "submit", submit)


CASES = [
    AllowedCase(
        "rf-busy-before-pending",
        "submit_plan,turn_boundaries,approval",
        why="SESSION_BUSY or APPROVAL_PENDING while the Plan turn that submitted has not ended",
    ),
    AllowedCase(
        "rf-approval-lookup-first",
        "approval,sessions,isolation",
        why="which of an unknown session and an unknown approval answers first is open",
    ),
    AllowedCase(
        "rf-shell-before-unknown-session",
        "protocol_errors,sessions,shell",
        why="an unknown session together with an unknown shell: either code",
    ),
    AllowedCase(
        "rf-shell-before-workspace",
        "protocol_errors,sessions,shell",
        why="an invalid workspace root together with an unknown shell: either code",
    ),
    AllowedCase(
        "rf-artifact-check-before-state",
        "approval,artifact_integrity,deadline",
        why="a decided approval whose artifact changed: its state's code or the artifact's",
    ),
    AllowedCase(
        "rf-input-check-before-gate",
        "isolation,plan_tools,submit_plan",
        why="inside a tool call, the input check may come before the mode gate",
    ),
    AllowedCase(
        "rf-permission-before-input-unattended",
        "plan_tools,scheduled_plan",
        why="an unattended Bash with bad input: either refusal",
    ),
    AllowedCase(
        "rf-french-error-messages",
        "protocol_errors,sessions,approval",
        why="error message texts are the host's",
    ),
    AllowedCase(
        "rf-bare-error-data",
        "protocol_errors,sessions,approval",
        why="error data beyond the code and what the catalog requires is the host's",
    ),
    AllowedCase(
        "rf-rich-error-details",
        "protocol_errors,execution,approval",
        why="extra keys in an error's details are allowed",
    ),
    AllowedCase(
        "rf-provider-error-wording",
        "execution,scheduled_plan,sessions,turn_boundaries",
        why="how a provider failure is worded is the host's",
    ),
    AllowedCase(
        "rf-provider-retry-transient",
        "sessions,turn_boundaries",
        why="retrying a provider's 429 or 5xx is allowed",
    ),
    AllowedCase(
        "rf-failure-note-in-transcript",
        "execution,scheduled_plan,sessions,turn_boundaries",
        why="transcript rows of the host's own",
    ),
    AllowedCase(
        "rf-no-provider-turn-fails",
        "sessions,turn_boundaries",
        why="a prompt without a provider may start a turn that fails with PROVIDER_NOT_CONFIGURED",
    ),
    AllowedCase(
        "rf-approve-refused-while-execution-ends",
        "approval,execution",
        why="an approve while the earlier execution is ending may be refused with EXECUTION_ACTIVE",
    ),
    AllowedCase(
        "rf-artifact-numbered-names",
        "approval,artifact_integrity,execution,isolation,plan_tools,submit_plan",
        why="artifact file names are the host's",
    ),
    AllowedCase(
        "rf-artifact-title-names",
        "approval,artifact_integrity,execution,isolation,plan_tools,submit_plan",
        why="artifact file names are the host's, as long as the title chooses no folder",
    ),
    AllowedCase(
        "rf-artifact-private-modes",
        "artifact_integrity,plan_tools,submit_plan",
        why="the artifact's file mode is the host's",
    ),
    AllowedCase(
        "rf-artifact-keep-failed-write",
        "artifact_integrity,plan_tools,submit_plan",
        why="a partly written artifact may remain after a failed write",
    ),
    AllowedCase(
        "rf-artifact-temp-then-link",
        "artifact_integrity,submit_plan",
        why="how the file is created exclusively is the host's",
    ),
    AllowedCase(
        "rf-datadir-artifact-journal",
        "artifact_integrity,restart_interruption,submit_plan",
        why="files of the host's own in its data directory",
    ),
]
