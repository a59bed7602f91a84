"""Broken hosts: a held-out set (observability that changes behaviour), written from the
contract alone: logging, metrics, tracing and debug features added to a working host."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
import weakref
from pathlib import Path
from typing import Any, BinaryIO

from hosts.registry import BrokenCase, patch, variant

_log = logging.getLogger("reference_host.observability")


# Framing (implementing-a-host.md "Framing", P5; protocol.md "Framing": "Nothing but
# protocol lines is written to stdout"): stdout carries protocol lines and nothing else;
# stderr is for logs.
# Bug: to let an operator see problems "on the console", the host adds a second log handler
# for WARNING and above that writes to the process's stdout (the stream it already has), on
# top of the stderr handler. Nothing at INFO reaches it, so the preflight and the happy path
# stay clean; a warning does not: a client notification (a request without an id), a tool
# call that fails with an exception, a command whose output pipe stays open after it ended.
# A client would observe: a line such as "WARNING reference_host.rpc: ignoring client
# notification x" between the protocol lines.
# Recipe: initialize, then send {"jsonrpc":"2.0","method":"session/list","params":{}} (no
# id), then session/list with an id: a non-JSON line precedes the answer.
@variant("obs-warnings-to-stdout")
def warnings_to_stdout() -> None:
    from reference_host import server

    original = server._serve_on

    class ConsoleHandler(logging.Handler):
        def __init__(self, stream: BinaryIO) -> None:
            super().__init__(logging.WARNING)
            self.stream = stream
            self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

        def emit(self, record: logging.LogRecord) -> None:
            try:
                self.stream.write(self.format(record).encode("utf-8") + b"\n")
                self.stream.flush()
            except (OSError, ValueError):
                pass

    async def serve_on(
        args: Any, storage: Any, clock: Any, stdin: BinaryIO, stdout: BinaryIO
    ) -> int:
        console = ConsoleHandler(stdout)
        # this host's own records only (in-process, several hosts share the loggers)
        own_thread = threading.get_ident()
        console.addFilter(lambda record: record.thread == own_thread)
        logger = logging.getLogger("reference_host")
        logger.addHandler(console)
        try:
            return await original(args, storage, clock, stdin, stdout)
        finally:
            logger.removeHandler(console)

    patch(server, "_serve_on", serve_on, wraps=True)


async def _data_dir(host: Any) -> Path | None:
    """The folder of the host's database, as SQLite reports it."""
    async with host.storage._conn.execute("PRAGMA database_list") as cursor:
        rows = await cursor.fetchall()
    for _seq, name, file in rows:
        if name == "main" and file:
            return Path(file).parent
    return None


# P21 (implementing-a-host.md "The model provider", "The API key"): read OPENAI_API_KEY and
# send it only to the provider; "Never store it (not in host.db nor in any other file of the
# data directory)".
# Bug: when a provider call fails, the host appends a diagnostic line to
# `<data-dir>/provider-errors.log`, next to host.db, so that support can see which provider
# was reached; it formats the ProviderConfig with repr(), and that dataclass carries the
# api_key field. The happy path writes no log.
# A client would observe: after a turn that ended failed with PROVIDER_ERROR, the data
# directory holds provider-errors.log containing the dummy key.
# Recipe: create a session with a provider, prompt, let the provider answer HTTP 400; the turn
# ends failed with PROVIDER_ERROR; grep every file of DIR for the key.
@variant("obs-provider-error-log-keeps-key")
def provider_error_log_keeps_key() -> None:
    from reference_host import turns
    from reference_host.errors import HostError
    from reference_host.provider_client import ProviderConfig
    from reference_host.turns import TurnRunner

    original = TurnRunner._ask_model

    async def ask_model(
        self: TurnRunner, session: Any, turn_id: str, messages: list[dict[str, Any]]
    ) -> Any:
        try:
            return await original(self, session, turn_id, messages)
        except HostError as error:
            if error.code != "PROVIDER_ERROR":
                raise
            config = ProviderConfig(
                session.provider_base_url,
                session.model,
                os.environ.get(turns.API_KEY_ENV) or None,
            )
            folder = await _data_dir(self.host)
            if folder is not None:
                line = f"{self.host.clock.now_ms()} turn {turn_id}: {config!r}: {error.message}\n"

                def append() -> None:
                    with (folder / "provider-errors.log").open("a", encoding="utf-8") as log:
                        log.write(line)

                await asyncio.to_thread(append)
            raise

    patch(TurnRunner, "_ask_model", ask_model, wraps=True)


# P21 ("never send it in a protocol message") and P25 (the turn ends failed with
# PROVIDER_ERROR in turn/ended's error).
# Bug: to make provider failures easier to diagnose, the PROVIDER_ERROR message names the
# provider configuration the call used, formatted with the dataclass's str(), which shows
# every field, the API key included. The code and the outcome are right.
# A client would observe: turn/ended's error.message (and, for a scheduled run,
# task/runFinished's error.message, lastRun and scheduled_task_runs.error_message) holds the
# dummy key.
# Recipe: session with a provider, prompt, provider answers HTTP 400; read turn/ended.error.
@variant("obs-provider-error-names-config")
def provider_error_names_config() -> None:
    from reference_host import turns
    from reference_host.errors import HostError
    from reference_host.provider_client import ProviderConfig, ProviderError
    from reference_host.turns import TurnRunner

    async def ask_model(
        self: TurnRunner, session: Any, turn_id: str, messages: list[dict[str, Any]]
    ) -> Any:
        if session.provider_base_url is None or session.model is None:
            raise HostError("PROVIDER_NOT_CONFIGURED", "the session has no model provider")
        config = ProviderConfig(
            session.provider_base_url,
            session.model,
            os.environ.get(turns.API_KEY_ENV) or None,
        )

        async def on_text(text: str) -> None:
            self.host.notify(
                "turn/text", {"sessionId": session.id, "turnId": turn_id, "text": text}
            )

        try:
            return await vars(turns)["complete"](
                self.host.http, config, messages, turns.offered_tools(session.mode), on_text
            )
        except ProviderError as error:
            raise HostError(
                "PROVIDER_ERROR",
                f"{error} (provider: {config})",
                {"kind": error.kind, "status": error.status},
            ) from error

    patch(TurnRunner, "_ask_model", ask_model)


# R2.1, R2.2 (ADR §2; implementing-a-host.md "Plan artifacts": "write the submitted
# markdown ... to a new file <workspaceRoot>/.pi/plan/<name>.md ..., and nothing else in
# the project"), and "the file is one new .md file directly in .pi/plan/".
# Bug: a debug aid. After each successful submission the host dumps what the model sent
# (title, question, the artifact's path, hash and size) to `.pi/plan/last-submission.json`,
# overwritten by each submission, to see what reached SubmitPlan.
# A client would observe: after a SubmitPlan, .pi/plan holds the artifact and a second file;
# a later Glob/Grep of the project lists it.
# Recipe: project session in Plan, the model calls SubmitPlan; list <root>/.pi/plan/ (and
# the project): one file more than the artifact.
@variant("obs-plan-submission-dump")
def plan_submission_dump() -> None:
    from reference_host.approvals import Approvals

    original = Approvals.submit

    async def submit(self: Approvals, session: Any, turn_id: str, args: dict[str, Any]) -> Any:
        row = await original(self, session, turn_id, args)
        dump = {
            "approvalId": row.id,
            "turnId": turn_id,
            "title": args.get("title"),
            "question": args.get("question"),
            "artifact": row.artifact_path,
            "sha256": row.artifact_sha256,
            "bytes": row.artifact_bytes,
        }
        target = Path(session.workspace_root) / ".pi" / "plan" / "last-submission.json"

        def write() -> None:
            try:
                target.write_text(json.dumps(dump, indent=2), encoding="utf-8")
            except OSError:
                _log.warning("could not write the submission dump %s", target)

        await asyncio.to_thread(write)
        return row

    patch(Approvals, "submit", submit, wraps=True)


# R3.10, R3.11, R3.12 (ADR §3: "an absolute 30-minute deadline from host creation ... the
# deadline never extends when the card is reopened"; "Expiry is eager": when the clock
# reaches expiresAt the host expires the approval by itself).
# Bug: the host tracks when the user last looked at a plan ("last seen", updated by
# artifact/read, the card's opener) for its activity log, and the expiry timer reuses it:
# opening the artifact re-arms the expiry 30 minutes after the read, and the original timer
# declines to expire an approval seen less than 30 minutes ago. expiresAt is still reported
# and stored unchanged, and an approve at or after it still gets PLAN_APPROVAL_TIMEOUT.
# A client would observe: once the artifact was opened, the clock reaching expiresAt sends
# no approval/updated; approval/get still reads pending after expiresAt and session/get still
# names it in pendingApprovalId, until 30 minutes after the read.
# Recipe: submit a plan at T; clock +10 min; artifact/read; clock to T+30 min; approval/get
# (expected expired with PLAN_APPROVAL_TIMEOUT, got pending).
@variant("obs-last-seen-delays-expiry")
def last_seen_delays_expiry() -> None:
    from reference_host.approvals import Approvals
    from reference_host.state import APPROVAL_TTL_MS

    last_seen: weakref.WeakKeyDictionary[Approvals, dict[str, int]] = weakref.WeakKeyDictionary()
    read_original = Approvals.read_artifact
    expire_original = Approvals.expire

    async def read_artifact(self: Approvals, row: Any) -> dict[str, Any]:
        result = await read_original(self, row)
        if row.status == "pending":
            now = self.host.clock.now_ms()
            last_seen.setdefault(self, {})[row.id] = now
            approval_id = row.id
            self.host.clock.call_at(now + APPROVAL_TTL_MS, lambda: self.expire(approval_id))
        return result

    async def expire(self: Approvals, approval_id: str) -> None:
        seen = last_seen.get(self, {}).get(approval_id)
        if seen is not None and self.host.clock.now_ms() < seen + APPROVAL_TTL_MS:
            return  # looked at recently: still active
        await expire_original(self, approval_id)

    patch(Approvals, "read_artifact", read_artifact, wraps=True)
    patch(Approvals, "expire", expire, wraps=True)


# P13 (implementing-a-host.md "Integrity": a changed artifact is ARTIFACT_MODIFIED, a missing
# one ARTIFACT_UNREADABLE; "artifact/read never returns bytes that disagree with the
# record"), P5 (every message conforms to the schemas: ArtifactReadResult's fields are
# required), and "A request is answered with its result or with one of the codes ... lists".
# Bug: a tracing span around artifact/read records the outcome code and the duration; its
# except clause records the HostError's code but does not re-raise it, so the handler falls
# through and answers with the empty result it started with.
# A client would observe: artifact/read of a modified or deleted artifact (or of an unknown
# approval) answers {"result":{}} instead of the error; a good artifact reads normally.
# Recipe: submit a plan, change one byte of the artifact, artifact/read: expected error
# ARTIFACT_MODIFIED, got an empty result.
@variant("obs-artifact-read-span-swallows")
def artifact_read_span_swallows() -> None:
    from reference_host.errors import HostError
    from reference_host.host import Host

    original = Host.artifact_read

    async def artifact_read(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        started = time.monotonic()
        outcome = "ok"
        result: dict[str, Any] = {}
        try:
            result = await original(self, params)
        except HostError as error:
            outcome = error.code
        finally:
            _log.debug("artifact/read %s in %.1f ms", outcome, (time.monotonic() - started) * 1000)
        return result

    patch(Host, "artifact_read", artifact_read, wraps=True)


# P3 (implementing-a-host.md "Framing": "Unknown methods get METHOD_NOT_FOUND (P3). Method
# names are case-sensitive.").
# Bug: per-method request counters are labelled by a normalised (lower-cased) method name so
# that "session/list" and "Session/List" count together, and the dispatcher then looks the
# handler up by the counter's canonical label instead of by the name as sent.
# A client would observe: "Session/List", "SESSION/GET" or "approval/GET" are answered as
# the published method instead of METHOD_NOT_FOUND.
# Recipe: initialize; send {"method":"Session/List","params":{}}: expected METHOD_NOT_FOUND,
# got {"sessions":[...]}.
@variant("obs-method-metrics-casefold")
def method_metrics_casefold() -> None:
    from reference_host import rpc
    from reference_host.errors import HostError
    from reference_host.jsontext import integral
    from reference_host.rpc import Dispatcher

    counters: weakref.WeakKeyDictionary[Dispatcher, dict[str, int]] = weakref.WeakKeyDictionary()

    async def call(self: Dispatcher, method: str, params: dict[str, Any]) -> dict[str, Any]:
        labels = {name.lower(): name for name in self._handlers}
        label = labels.get(method.lower(), method)
        counts = counters.setdefault(self, {})
        counts[label] = counts.get(label, 0) + 1
        if label != "initialize" and not self.initialized:
            raise HostError("NOT_INITIALIZED", "send initialize first")
        handler = self._handlers.get(label)
        if handler is None:
            raise HostError("METHOD_NOT_FOUND", f"no method named {method!r}")
        problem = vars(rpc)["params_problem"](label, params)
        if problem is not None:
            raise HostError("INVALID_PARAMS", problem)
        return await handler(integral(params))

    patch(Dispatcher, "_call", call)


# P5 (every message conforms to schemas/protocol-v9: TaskRun is a closed object,
# "an extra field from the host breaks the contract"); R7.2 (task/runFinished, lastRun and
# the run record report the same run).
# Bug: run timing for the scheduler's metrics: task/runFinished carries the run's duration
# (`durationMs`, host clock) beside the TaskRun fields; task/run's answer and task/list's
# lastRun do not have it.
# A client would observe: task/runFinished.params.run has a member durationMs that the
# TaskRun schema does not define.
# Recipe: create an Agent task (or a Plan task: a refused run also finishes), task/run,
# validate task/runFinished against TaskRunFinishedParams.
@variant("obs-run-finished-duration")
def run_finished_duration() -> None:
    from reference_host import tasks as tasks_module
    from reference_host.errors import HostError
    from reference_host.tasks import Tasks

    async def finish(
        self: Tasks, run: dict[str, Any], outcome: str, error: HostError | None
    ) -> None:
        run.update(
            outcome=outcome,
            error_code=error.code if error else None,
            error_message=error.message if error else None,
        )
        await self.host.storage.record_task_run(run)
        wire = tasks_module._run_wire(run)
        assert wire is not None
        wire["durationMs"] = self.host.clock.now_ms() - run["started_at"]
        self.host.notify("task/runFinished", {"run": wire})

    patch(Tasks, "_finish", finish)


# R7.5 (implementing-a-host.md "Storage": the database has the structure of v10.sql;
# "Nothing may be missing and nothing added: no other table, column, index, view or
# trigger"), R7.4.
# Bug: a metric of timed-out commands, kept in the host's database in a small table created
# on first use (CREATE TABLE IF NOT EXISTS) the first time a command times out. A database
# where no command ever timed out has exactly the v10 structure.
# A client would observe: after a Bash call that timed out, host.db has an extra table
# host_metrics (with a row timed_out_commands = 1).
# Recipe: a Bash call with timeout_ms: 1000 running `sleep 30`; clock +1 s; the command
# exits timedOut; compare host.db's structure with v10.sql.
@variant("obs-timeout-metrics-table")
def timeout_metrics_table() -> None:
    from reference_host.turns import TurnRunner

    original = TurnRunner._audit

    async def audit(self: TurnRunner, values: dict[str, Any], result: Any) -> None:
        await original(self, values, result)
        if result.timed_out:
            async with self.host.storage.transaction() as conn:
                await conn.execute(
                    "CREATE TABLE IF NOT EXISTS host_metrics "
                    "(name TEXT PRIMARY KEY, value INTEGER NOT NULL)"
                )
                await conn.execute(
                    "INSERT INTO host_metrics (name, value) VALUES ('timed_out_commands', 1) "
                    "ON CONFLICT (name) DO UPDATE SET value = value + 1"
                )

    patch(TurnRunner, "_audit", audit, wraps=True)


# R4.4 (implementing-a-host.md "Approval": "statusCode says why an approval ended without a
# decision, and nothing else: it is null while the approval is pending and once it is
# approved or rejected"), R4.3 (the wire and plan_approvals agree), P13 (a refused approve
# leaves the approval pending "and nothing else changes").
# Bug: for support, the host records the last error an approve met on the approval row
# itself, in status_code (the only error column the row has): an approve refused with
# ARTIFACT_MODIFIED or ARTIFACT_UNREADABLE leaves the row pending with status_code set; a
# later reject keeps it.
# A client would observe: after an approve refused for a changed artifact, approval/get and
# plan_approvals show status pending with statusCode ARTIFACT_MODIFIED; after a reject,
# rejected with statusCode ARTIFACT_MODIFIED.
# Recipe: submit a plan, change the artifact, approve (ARTIFACT_MODIFIED), approval/get:
# expected statusCode null.
@variant("obs-approve-error-in-status-code")
def approve_error_in_status_code() -> None:
    from dataclasses import replace

    from reference_host.approvals import Approvals
    from reference_host.errors import HostError

    original = Approvals.approve

    async def approve(self: Approvals, session_id: str, approval_id: str, mode: Any) -> Any:
        try:
            return await original(self, session_id, approval_id, mode)
        except HostError as error:
            if error.code in ("ARTIFACT_MODIFIED", "ARTIFACT_UNREADABLE"):
                row = await self.host.storage.get_approval(approval_id)
                if row is not None and row.status == "pending":
                    await self.host.storage.update_approval(replace(row, status_code=error.code))
            raise

    patch(Approvals, "approve", approve, wraps=True)


# R4.1, R4.2 (ADR §4: the boot epoch "is not serialized in the database";
# implementing-a-host.md "No boot epoch": "a restart that finds nothing to recover changes no
# stored value and no answer. The suite reads every stored row ... before and after such a
# restart, and they must be the same").
# Bug: start-up diagnostics. After the recovery, the host counts its starts and notes the
# time of the last one in settings (`host_start_count`, `host_last_start_ms`), to see in a
# support bundle how often it was restarted. The keys are the host's own (allowed), but every
# start changes them.
# A client would observe: settings rows that differ before and after a restart that had
# nothing to recover.
# Recipe: start, create a session, stop cleanly; dump every table; start again, initialize;
# dump again: settings differ.
@variant("obs-boot-counter-setting")
def boot_counter_setting() -> None:
    from reference_host import server

    original = server._open_and_recover

    async def open_and_recover(data_dir: Path, clock: Any) -> Any:
        storage = await original(data_dir, clock)
        count = await storage.get_setting("host_start_count")
        await storage.set_setting("host_start_count", str(int(count or 0) + 1))
        await storage.set_setting("host_last_start_ms", str(clock.now_ms()))
        return storage

    patch(server, "_open_and_recover", open_and_recover, wraps=True)


# Ordering (implementing-a-host.md: "an approve's approval/updated and session/updated (a
# reject's approval/updated) come before its answer"; "When conformance/clock/set or advance
# makes a timer due, its notifications come before the clock call's response"), R7.2, C4.
# Bug: session/updated is emitted through a tracing helper that takes the emission off the
# request path (loop.call_soon), so the "publish" span measures only the read of the session.
# The notification still goes out, with the right content, but one loop tick later: after
# the response of the request that made the change.
# A client would observe: approval/approve's answer arrives before its session/updated; an
# expiry fired by conformance/clock/advance: the clock response before the session/updated
# that clears pendingApprovalId. session/configure (which notifies directly) is unaffected.
# Recipe: submit a plan, approval/approve with permissionMode auto; read the lines in order:
# the response precedes session/updated (mode agent).
@variant("obs-session-updated-off-path")
def session_updated_off_path() -> None:
    from reference_host.host import Host

    async def publish_session(self: Host, session_id: str) -> dict[str, Any]:
        started = time.monotonic()
        wire = self.session_wire(await self.require_session(session_id))
        asyncio.get_running_loop().call_soon(self.notify, "session/updated", {"session": wire})
        _log.debug("publish %s in %.1f ms", session_id, (time.monotonic() - started) * 1000)
        return wire

    patch(Host, "publish_session", publish_session)


# R1.3 (the conversation is kept and sent to the model; session/transcript reports each
# row's content, "the entry's provider-format message") and implementing-a-host.md "The
# model provider": "A valid request holds only messages Chat Completions defines ... an
# assistant message may add name, tool_calls, refusal. A message with any other property is
# refused with HTTP 400"; "The calls an answer makes are made whatever its finish_reason
# reads (some providers end an answer with calls in stop)".
# Bug: a debug annotation. When the model makes tool calls but ends the answer with a
# finish_reason other than "tool_calls" (an unusual provider), the host notes it on the
# stored assistant message (`finish_reason`) to find such answers later. The message is
# stored and sent back to the provider with that property.
# A client would observe: the next provider request holds an assistant message with a
# property Chat Completions does not define (the provider refuses it: the turn fails with
# PROVIDER_ERROR), and session/transcript shows it in content.
# Recipe: Agent session, the model answers a Read call with finish_reason "stop"; the
# follow-up request carries the assistant message with "finish_reason":"stop".
@variant("obs-odd-finish-reason-noted")
def odd_finish_reason_noted() -> None:
    from reference_host import turns

    original = turns._assistant_message

    def assistant_message(reply: Any) -> dict[str, Any]:
        message = original(reply)
        if reply.tool_calls and reply.finish_reason not in (None, "tool_calls"):
            message["finish_reason"] = reply.finish_reason
        return message

    patch(turns, "_assistant_message", assistant_message, wraps=True)


CASES = [
    BrokenCase(
        "obs-warnings-to-stdout",
        "shell",
        "whose_project_folder_is_gone_gets_an_error_result",
        "P5",
        "broke the protocol v9 contract",
    ),
    BrokenCase(
        "obs-provider-error-log-keeps-key",
        "sessions",
        "answer_that_breaks_off_ends_the_turn_as_failed and without_its_last_piece",
        "P21",
        "the host stored the provider API key in its data directory",
    ),
    BrokenCase(
        "obs-provider-error-names-config",
        "sessions",
        "answer_that_breaks_off_ends_the_turn_as_failed and without_its_last_piece",
        "P21",
        "the host sent the provider API key in a protocol message",
    ),
    BrokenCase(
        "obs-plan-submission-dump",
        "submit_plan",
        "a_prompt_while_a_plan_is_pending_is_refused",
        "R5.2",
        "last-submission.json",
    ),
    BrokenCase(
        "obs-last-seen-delays-expiry",
        "deadline",
        "opening_the_plan_again_does_not_move_the_deadline",
        "R3.12",
        "the plan did not expire",
        slow=True,
    ),
    BrokenCase(
        "obs-artifact-read-span-swallows",
        "artifact_integrity",
        "plan_file_extended_on_disk_after_submission_is_not_approved",
        "P13",
        "does not fit the published ArtifactReadResult",
    ),
    BrokenCase(
        "obs-method-metrics-casefold",
        "protocol_errors",
        "a_published_method_spelt_in_other_case",
        "P3",
        "expected the host to refuse",
    ),
    BrokenCase(
        "obs-run-finished-duration",
        "scheduled_plan",
        "plan_task_that_is_run_now_is_refused_before_any_work",
        "P5",
        "broke the protocol v9 contract",
    ),
    BrokenCase(
        "obs-timeout-metrics-table",
        "shell",
        "command_that_times_out_is_recorded_for_audit",
        "R7.5",
        "extra table host_metrics",
    ),
    BrokenCase(
        "obs-approve-error-in-status-code",
        "artifact_integrity",
        "plan_opened_before_its_file_changed_is_not_approved",
        "R4.4",
        "is reported pending with statusCode",
    ),
    BrokenCase(
        "obs-boot-counter-setting",
        "restart_interruption",
        "second_restart_after_a_recovery_changes_nothing_stored",
        "R4.1",
        "a restart with nothing to recover changed stored values",
    ),
    BrokenCase(
        "obs-session-updated-off-path",
        "deadline",
        "expires_when_the_time_is_up_with_nobody_looking",
        "P32",
        "announced without its pending approval only after the answer",
    ),
    BrokenCase(
        "obs-odd-finish-reason-noted",
        "artifact_integrity",
        "symlinked_pi_folder_is_not_followed",
        "R2.12",
        "malformed request",
    ),
]
