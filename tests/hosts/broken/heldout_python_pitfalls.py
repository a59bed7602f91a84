"""Broken hosts: a held-out set (Python's own pitfalls in a host written in Python), written
from the contract alone."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from hosts.registry import BrokenCase, patch, rewrite_notifications, variant

# -- truthiness where `is None` was meant ---------------------------------------------------


# P29 (docs "Scheduled tasks", "A task as given"): task/create, task/update and task/list
# answer the task with every field as the user gave it, and the scheduled_tasks row holds
# the same values; runAt is a Timestamp, and 0 is one (types.schema.json: minimum 0).
# Bug: the task's wire form writes `"runAt": row["run_at"] or None` (meant: "null when the
# task is off the schedule"), so a runAt of 0 is answered and listed as null while the row
# holds 0.
# Observe: task/create {runAt: 0, ...} answers runAt null; task/list too; scheduled_tasks.run_at
# is 0. Recipe: task/create with runAt 0 (or task/update runAt 0), compare the answer's runAt.
@variant("py-task-runat-zero-null")
def task_runat_zero_null() -> None:
    from reference_host.tasks import Tasks

    original = Tasks.wire

    async def wire(self: Tasks, row: dict[str, Any]) -> dict[str, Any]:
        task = await original(self, row)
        task["runAt"] = row["run_at"] or None  # the bug: 0 is taken for "no time"
        return task

    patch(Tasks, "wire", wire, wraps=True)


# R7.3 / docs "Commands and shells" (Output): command/exited's `signal` is null when the shell
# exited on its own, "then `exitCode` is its status"; command_audit holds what command/exited
# reported (C5).
# Bug: the notification is built with `"exitCode": result.exit_code or None` (meant: "null
# when a signal ended it"), so a command that succeeds (exit status 0) is announced with
# exitCode null and signal null; the audit row still says 0.
# Recipe: an Agent turn (auto) whose model calls Bash `true` (or `echo hi`); command/exited
# has exitCode null instead of 0, and command_audit.exit_code is 0.
@variant("py-exit-code-zero-null")
def exit_code_zero_null() -> None:
    def rewrite(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        if method == "command/exited":
            return {**params, "exitCode": params["exitCode"] or None}  # the bug: 0 -> null
        return params

    rewrite_notifications(rewrite)


# docs "Planning", new_context: "An empty `summary` is a reset like any other: the model is
# shown none of what came before" (R1.3 / P10).
# Bug: the handler guards the reset with `if args.get("summary"):` (meant: "if a summary was
# given"), so new_context with summary "" answers ok but writes no reset row: the next
# request of the turn, and later turns, still carry the whole earlier conversation.
# Recipe: turn 1 prompt "first" (model answers text); turn 2: the model calls new_context
# {summary: ""}, then answers; the request after the call, and turn 3's first request, still
# hold "first" and its answer.
@variant("py-empty-summary-no-reset")
def empty_summary_no_reset() -> None:
    from reference_host.turns import CallOutcome, TurnRunner

    original = TurnRunner._dispatch

    async def dispatch(
        self: TurnRunner, session: Any, turn_id: str, name: str, args: dict[str, Any]
    ) -> CallOutcome:
        if name == "new_context" and not args.get("summary"):  # the bug: "" is "no summary"
            return CallOutcome("ok", "A new context starts from the summary.")
        return await original(self, session, turn_id, name, args)

    patch(TurnRunner, "_dispatch", dispatch, wraps=True)


# -- `is` where `==` was meant ---------------------------------------------------------------


# P14 / R3.11 (docs "Approval", "At or after the deadline", "Expiry is eager"): an approval
# is expired from the moment the clock reaches expiresAt; an approve or reject that arrives
# at or after it gets PLAN_APPROVAL_TIMEOUT, and the host expires it by itself then.
# Bug: the deadline test is written `now > expires_at or now is expires_at`: two equal
# timestamps of 13 digits are different int objects, so at exactly expiresAt the approval
# is not expired; the timer that fires at that instant finds it "not yet expired" and is used
# up, so the approval is never expired eagerly (later moves do not fire it again), although
# an approve or reject after the deadline is still refused with PLAN_APPROVAL_TIMEOUT.
# Recipe: submit a plan, clock/set to exactly expiresAt: no approval/updated(expired), the
# approval reads pending; approval/approve at that instant succeeds (must be
# PLAN_APPROVAL_TIMEOUT).
@variant("py-expiry-is-identity")
def expiry_is_identity() -> None:
    from reference_host import approvals, state

    def is_expired(expires_at_ms: int, now_ms: int) -> bool:
        return now_ms > expires_at_ms or now_ms is expires_at_ms  # the bug: `is` on ints

    patch(state, "is_expired", is_expired)
    patch(approvals, "is_expired", is_expired)


# -- a set where the contract gives an order ----------------------------------------------


# R7.2 (docs "Sessions, turns and boundaries"): "`approval/list` lists a session's approvals
# oldest first: `createdAt` never decreases along the list."
# Bug: approval/list de-duplicates the rows by iterating a set of their ids, so the list comes
# in the set's (hash-randomised) order, not the query's.
# Recipe: in one session submit a plan, reject it, advance the clock, submit a second plan;
# approval/list (a few times) lists the newer one first about half the time.
@variant("py-approval-list-set-order")
def approval_list_set_order() -> None:
    from reference_host.approvals import approval_wire
    from reference_host.host import Host

    async def approval_list(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        rows = await self.storage.list_approvals(row.id)
        by_id = {a.id: a for a in rows}
        unique = {a.id for a in rows}  # the bug: a set has no order
        return {"approvals": [approval_wire(by_id[i]) for i in unique]}

    patch(Host, "approval_list", approval_list)


# -- a late-bound closure --------------------------------------------------------------------


# P10 (docs "Planning", "The tools work"): "When one message makes several calls, the tool
# message that answers a call (by its `tool_call_id`) carries that call's own result, never
# another call's, also for two calls of one tool."
# Bug: the calls of a message are collected as thunks `lambda: self._run_call(..., call, ...)`
# and awaited afterwards; the closure reads `call` late, so every call of a multi-call
# message runs the LAST call (its tool and arguments), and each result is the last call's.
# Recipe: an Agent turn whose model makes one message with Read a.txt and Read b.txt (two
# different files): both tool messages carry b.txt's text (and a Write + Read pair runs the
# Read twice, the Write never).
@variant("py-batch-late-binding")
def batch_late_binding() -> None:
    from reference_host.errors import HostError
    from reference_host.provider_client import ToolCall
    from reference_host.turns import CallOutcome, TurnRunner, _failure

    async def run_batch(
        self: TurnRunner,
        session: Any,
        turn_id: str,
        calls: tuple[ToolCall, ...],
        unattended: bool,
    ) -> list[CallOutcome]:
        for call in calls:
            self.host.notify(
                "turn/toolCall",
                {
                    "sessionId": session.id,
                    "turnId": turn_id,
                    "toolCallId": call.call_id,
                    "tool": call.name,
                    "input": _parse(call),
                },
            )
        outcomes: list[CallOutcome] = []
        try:
            if any(call.name == "SubmitPlan" for call in calls) and len(calls) > 1:
                refusal = HostError(
                    "SUBMIT_PLAN_NOT_ALONE",
                    "SubmitPlan must be the only tool call of its message; no call of it ran",
                )
                outcomes = [_failure(refusal) for _ in calls]
            else:
                runs: list[Callable[[], Any]] = []
                for call in calls:
                    # the flagged late-bound closure is the bug (B023): every thunk runs the
                    # last `call`
                    runs.append(lambda: self._run_call(session, turn_id, call, unattended))  # noqa: B023
                for run in runs:
                    outcomes.append(await run())
                    session = await self.host.require_session(session.id)
        except asyncio.CancelledError:
            cut = _failure(HostError("TURN_CANCELLED", "the turn was cancelled before it ran"))
            outcomes += [cut] * (len(calls) - len(outcomes))
            self._announce_results(session.id, turn_id, calls, outcomes)
            raise
        self._announce_results(session.id, turn_id, calls, outcomes)
        return outcomes

    def _parse(call: ToolCall) -> Any:
        from reference_host.turns import _parse_arguments

        return _parse_arguments(call)

    patch(TurnRunner, "_run_batch", run_batch)


# -- a generator consumed as if it were a collection ---------------------------------------


# R1.3 / P10 (docs "The model provider", "Sessions, turns and boundaries"): the conversation
# holds the model's calls and their results; "No call reaches a later request unanswered,
# whether its turn completed, was cancelled ... or was cut off by a restart while the call
# ran: leave such a call out of the history or answer it." The model is given what its calls
# produced in the messages that follow them.
# Bug: the set of answered call ids is built as a generator expression; each `in` test
# consumes it up to the match. While every call is answered in order this works; a call
# without a result (cut off by a restart while it ran) consumes the rest, so every LATER
# call and its result are dropped from the history as "unanswered".
# Recipe: turn 1: the model calls Bash that waits on a gate; restart the host (the call is cut
# off). Turn 2: the model calls Read a.txt, then answers (its second request still has the
# result: a turn keeps its own messages). Turn 3's first request, built from the history, has
# neither the Read call nor its result (the file's text is missing).
@variant("py-answered-ids-generator")
def answered_ids_generator() -> None:
    from reference_host import turns

    def answered_only(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # the bug: a generator, consumed by each `in` below
        answered = (str(m.get("tool_call_id")) for m in messages if m.get("role") == "tool")
        made: set[str] = set()
        kept: list[dict[str, Any]] = []
        for message in messages:
            calls = message.get("tool_calls") or []
            paired = [call for call in calls if str(call.get("id")) in answered]
            made.update(str(call.get("id")) for call in paired)
            if len(paired) != len(calls):
                message = {k: v for k, v in message.items() if k != "tool_calls"}
                if paired:
                    message["tool_calls"] = paired
                elif not message.get("content"):
                    continue
            if message.get("role") == "tool" and str(message.get("tool_call_id")) not in made:
                continue
            kept.append(message)
        return kept

    patch(turns, "answered_only", answered_only)


# -- a mutable default argument ---------------------------------------------------------------


# P25 / R7.2 (docs "The model provider", "Provider errors"): "an error is never carried over
# from an earlier turn or run"; P35 (docs "Scheduled tasks"): every task/run is a run of its
# own with its own runId, and two runs go on side by side.
# Bug: Tasks.run keeps the run record in a default argument
# `run: dict = {"error_code": None, "error_message": None}` and fills in id, task, session,
# startedAt and outcome; the one dict is shared by every run of the process (needs its own
# process: the default lives in the function, across host restarts in one process). A run
# after a refused or failed one answers `outcome: running` with the earlier run's error, and
# two runs side by side share one record: the first to finish is reported under the
# second's runId and the first stays `running` for good.
# Recipe: a Plan task, task/run (refused); task/update mode agent; task/run: the answer
# (outcome running) carries error PLAN_REQUIRES_INTERACTIVE_SESSION. Or: two task/run of one
# Agent task whose model waits; let the first finish: task/runFinished names the second runId.
@variant("py-task-run-mutable-default")
def task_run_mutable_default() -> None:
    from reference_host import tasks as tasks_module
    from reference_host.errors import HostError
    from reference_host.storage import SessionRow
    from reference_host.tasks import PLAN_REFUSAL, Tasks

    async def run(
        self: Tasks,
        row: dict[str, Any],
        run: dict[str, Any] = {"error_code": None, "error_message": None},  # noqa: B006 - the flagged mutable default is the bug
    ) -> dict[str, Any]:
        host = self.host
        run.update(
            id=host.new_id("run"),
            task_id=row["id"],
            session_id=None,
            started_at=host.clock.now_ms(),
            outcome="running",
        )
        if row["mode"] != "agent":
            refusal = HostError(
                PLAN_REFUSAL,
                "a Plan run needs an interactive session; change the task to Agent to run it "
                "unattended",
                {"taskId": row["id"]},
            )
            await self._finish(run, "refused", refusal)
            raise refusal
        if not row["provider_base_url"] or not row["model"]:
            failure = HostError("PROVIDER_NOT_CONFIGURED", "the task has no model provider")
            await self._finish(run, "failed", failure)
            raise failure
        now = host.clock.now_ms()
        session = SessionRow(
            id=host.new_id("ses"),
            workspace_root=row["workspace_root"],
            mode="agent",
            permission_mode=row["permission_mode"],
            provider_base_url=row["provider_base_url"],
            model=row["model"],
            shell_id=None,
            created_at=now,
            updated_at=now,
        )
        await host.storage.insert_session(session)
        run["session_id"] = session.id
        await host.storage.record_task_run(run)

        async def finished(outcome: str, error: HostError | None) -> None:
            await self._finish(run, "completed" if outcome == "completed" else "failed", error)

        await host.turns.start(
            session, "scheduled", row["prompt"], unattended=True, on_end=finished
        )
        wire = tasks_module._run_wire(run)
        assert wire is not None
        return wire

    patch(Tasks, "run", run)


# -- rounding where milliseconds are computed ------------------------------------------------


# C5 / docs "Conformance mode" and "Commands and shells": "a command times out when it
# reaches the command's start plus `timeout_ms`"; the timeout is the tool argument
# timeout_ms (1 to 3600000).
# Bug: the host keeps command timeouts in whole seconds, `round(timeout_ms / 1000) * 1000`:
# Python rounds half to even, so 2500 ms becomes 2000 (early), 1500 becomes 2000 (late),
# 1400 becomes 1000, and anything up to 500 ms becomes 0: the command times out as it starts.
# Recipe: Bash {command: "sleep 30", timeout_ms: 2500}; clock/advance 2000: the command is
# already timed out (command/exited timedOut true), it must still run until 2500. Or
# timeout_ms 1500 and advance 1500: it has not timed out.
@variant("py-timeout-round-seconds")
def timeout_round_seconds() -> None:
    from reference_host import commands, turns

    original = commands.run_command

    async def run_command(*, timeout_ms: int = commands.DEFAULT_TIMEOUT_MS, **kw: Any) -> Any:
        seconds = round(timeout_ms / 1000)  # the bug: round-half-even to whole seconds
        return await original(timeout_ms=seconds * 1000, **kw)

    patch(turns, "run_command", run_command, wraps=True)


# -- str methods without arguments ---------------------------------------------------------


# P10 (docs "Planning", Grep): each pattern is "matched against each line on its own ...
# Only LF ends a line (a CR just before it is not part of the line) ... a lone CR, U+2028,
# U+0085 or a form feed is a character inside a line", and Grep gives the matching line.
# Bug: Grep splits the file with `str.splitlines()`, which also ends lines at a lone CR, a
# form feed, a vertical tab, U+0085, U+2028, U+2029 (and the separators \x1c-\x1e): `^` and `$`
# anchor inside such a line, the match is reported as a piece of it, and line numbers after
# it shift.
# Recipe: a file holding "alpha\u2028beta\n" (or "x\fy\n"); Grep "^beta" must find nothing, the
# host reports `file:2:beta`; Grep "alpha.beta" must match line 1 and finds nothing.
@variant("py-grep-splitlines")
def grep_splitlines() -> None:
    from reference_host.tools import files
    from reference_host.tools.budget import Budget
    from reference_host.tools.files import Grep

    def grep(root: Path, compiled: Any, parts: list[str] | None, budget: Budget) -> str:
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
            for number, line in enumerate(text.splitlines(), start=1):  # the bug
                if not files._search(compiled, line, budget):
                    continue
                if len(out) == files.GREP_MAX_MATCHES:
                    out.append(
                        f"[results capped at {files.GREP_MAX_MATCHES} matches; "
                        "narrow the pattern or glob]"
                    )
                    return "\n".join(out)
                out.append(f"{relative}:{number}:{line}")
        return "\n".join(out) if out else files.NO_MATCHES

    patch(Grep, "_grep", staticmethod(grep))


# P31 (docs "Sessions, turns and boundaries"): "A prompt (`session/prompt`, a task's prompt)
# reaches the provider as the text of the last `user` message of the turn's first request,
# exactly as given: no wrapper around it, no whitespace trimmed".
# Bug: the unattended run tidies the task's prompt with `str.strip()` before it starts the
# turn (task/create and task/list still show the prompt as given).
# Recipe: task/create an Agent task with prompt "  run the report\n"; task/run: the first
# provider request's last user message is "run the report" (the blanks are gone).
@variant("py-task-prompt-stripped")
def task_prompt_stripped() -> None:
    from reference_host.tasks import Tasks

    original = Tasks.run

    async def run(self: Tasks, row: dict[str, Any]) -> dict[str, Any]:
        return await original(self, {**row, "prompt": row["prompt"].strip()})  # the bug

    patch(Tasks, "run", run, wraps=True)


# -- time: naive datetimes and floats --------------------------------------------------------


# P32 (docs "The command line", "Conformance mode"): under --conformance the host clock
# "starts at the system time when your process starts"; every time is epoch milliseconds, so
# the machine's time zone (the harness sets TZ to UTC+05:30) must change nothing.
# Bug: the starting time is read as `datetime.utcnow().timestamp()`: utcnow() is a naive
# datetime holding UTC wall time, and .timestamp() reads a naive datetime as LOCAL time, so
# under TZ=+05:30 the clock starts 5 h 30 min behind the system clock (every createdAt of a
# fresh host is 19,800,000 ms in the past).
# Recipe: start the host, conformance/clock/get: now is system time minus 19,800,000 ms;
# session/create's createdAt likewise.
@variant("py-utcnow-clock-start")
def utcnow_clock_start() -> None:
    from reference_host import server

    def wall_time_ms() -> int:
        # the bug: a naive UTC datetime read as local time (DTZ003 is not selected)
        return int(datetime.utcnow().timestamp() * 1000)

    patch(server, "wall_time_ms", wall_time_ms)


# P5 (docs "Framing"): "Every number of the protocol is an integer ... and is written as one:
# digits only, no fraction and no exponent (`1796668827433`, never `1796668827433.0`)";
# P33: without --conformance the host runs on the system clock.
# Bug: the production clock computes `time.time() * 1000 // 1`; floor division of a float is
# a float, so every timestamp a host started without --conformance reports (createdAt,
# startedAt, decidedAt, expiresAt) is written as `1796668827433.0`. SQLite stores the whole
# float as an integer, so only the wire shows it.
# Recipe: start the host without --conformance; session/create: createdAt is written with
# ".0"; task/create + the task coming due: task/runFinished's startedAt likewise.
@variant("py-system-clock-float")
def system_clock_float() -> None:
    from reference_host.clock import SystemClock

    def now_ms(self: SystemClock) -> int:
        # the bug: `//` on a float gives a float (mypy flags it: the flagged type is the bug)
        return time.time() * 1000 // 1  # type: ignore[return-value]

    patch(SystemClock, "now_ms", now_ms)


# -- an exception thrown into a generator ------------------------------------------------------


# R4.6 (docs "Execution and restart"): "Approve is one transaction ... all or nothing. A
# failed approval (the `approvalCommit` fault makes its transaction fail) is answered with
# `INTERNAL_ERROR`, leaves the approval pending and the session as it was".
# Bug: the transaction context manager commits in `finally:` around its `yield`, as if the
# body's exception did not reach the generator: an exception raised inside the `async with`
# still propagates, but what the body wrote is committed, not rolled back.
# Recipe: submit a plan; conformance/fault/arm approvalCommit; approval/approve {auto}: the
# answer is INTERNAL_ERROR, but plan_approvals reads approved/queued and the session row
# agent/auto (approval/get and session/get report them so), while no execution starts and
# session/get still names the approval as pendingApprovalId.
@variant("py-commit-in-finally")
def commit_in_finally() -> None:
    from reference_host.storage import Storage

    @asynccontextmanager
    async def transaction(self: Storage) -> AsyncIterator[Any]:
        async with self._writing:
            try:
                await self._conn.execute("BEGIN IMMEDIATE")
            except asyncio.CancelledError:
                with contextlib.suppress(sqlite3.OperationalError):
                    await self._conn.execute("ROLLBACK")
                raise
            try:
                yield self._conn
            finally:
                await self._conn.execute("COMMIT")  # the bug: committed on an exception too

    patch(Storage, "transaction", transaction)


CASES = [
    BrokenCase(
        "py-task-runat-zero-null",
        "scheduled_plan",
        "task_due_at_the_earliest_time_the_schedule_allows",
        "P29",
        "'runAt': (None, 0)",
    ),
    BrokenCase(
        "py-exit-code-zero-null",
        "shell",
        "output_arrives_while_the_command_is_still_running",
        "R7.3",
        "neither an exit status nor a signal",
    ),
    BrokenCase(
        "py-empty-summary-no-reset",
        "plan_tools",
        "new_context_with_an_empty_summary_still_replaces_the_conversation",
        "P10",
        "after the new context the model was still given",
    ),
    BrokenCase(
        "py-expiry-is-identity",
        "deadline",
        "still_expires_on_its_own_after_an_approval_without_a_permission_mode",
        "R3.11",
        "no expiry was announced",
    ),
    BrokenCase(
        "py-approval-list-set-order",
        "approval,deadline,migration,restart_interruption",
        # a set's order is a coin toss per scenario: enough scenarios that one loses it
        "listed_oldest_first or expires_at_its_own_deadline or "
        "after_expiry_a_new_plan_can_be_submitted or submitted_after_an_expiry_can_be_approved "
        "or earlier_approvals_are_kept or nothing_to_recover or "
        "new_database_has_the_published",
        "R7.2",
        "approval/list",
        or_reason="expected success, but the host refused",
    ),
    BrokenCase(
        "py-batch-late-binding",
        "plan_tools",
        "two_files_read_in_one_message_each_reach_the_model",
        "P10",
        "it should carry that call's file",
    ),
    BrokenCase(
        "py-answered-ids-generator",
        "restart_interruption",
        "restart_cut_a_messages_calls_short_a_later_turns_calls_still_reach",
        "R1.3",
        "does not carry the result",
    ),
    BrokenCase(
        "py-task-run-mutable-default",
        "scheduled_plan",
        "task_whose_run_failed_runs_again_when_asked",
        "R7.2",
        "an error is never carried over from an earlier run",
    ),
    BrokenCase(
        "py-timeout-round-seconds",
        "shell",
        "commands_timeout_counts_from_the_commands_own_start and 90500",
        "C5",
        "the command ended before its own timeout had run out",
    ),
    BrokenCase(
        "py-grep-splitlines",
        "plan_tools",
        "searching_the_project_matches_line_by_line and other_breaks",
        "P10",
        "after its Grep call the model was not given",
    ),
    BrokenCase(
        "py-task-prompt-stripped",
        "scheduled_plan",
        "tasks_prompt_reaches_the_model_exactly_as_the_user_gave_it",
        "P31",
        "the model was given the prompt",
    ),
    BrokenCase(
        "py-utcnow-clock-start",
        "restart_interruption",
        "restarted_hosts_clock_starts_at_the_present",
        "P32",
        "minutes from the system time",
    ),
    BrokenCase(
        "py-system-clock-float",
        "scheduled_plan",
        "outside_conformance_mode_a_task_runs_on_its_own",
        "P5",
        "is written with a fraction or an exponent",
    ),
    BrokenCase(
        "py-commit-in-finally",
        "approval",
        "failure_armed_twice_for_approving_fails_only_the_next_approval",
        "R4.6",
        "refused with APPROVAL_NOT_PENDING",
    ),
]
