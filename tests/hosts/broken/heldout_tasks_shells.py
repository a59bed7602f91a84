"""Broken hosts: a held-out set (scheduled tasks, shells and restart), written from the
contract alone.

Nine of these twelve went uncaught at first; all nine are caught now, each by a scenario
added for it: two tasks due at the same moment, a task switched off and on again, a
refused Plan task that must stay switched on, an Agent run whose provider fails, a task
taken off the schedule with `runAt: null`, a shell exiting with a status above 128, output
of two-byte characters just over the cap in bytes, output holding carriage returns, and a
restart with pending approvals in two sessions (the scenario with "another session has a
plan awaiting approval" had only one approval pending: the other session's, the newest, the
one this recovery does interrupt). The other three (a refused run not recorded, the default
shell under another settings key, an audit row with an id of its own) were caught by the
scenarios that existed; their cases name those.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from hosts.registry import BrokenCase, patch, rewrite_notifications, variant
from reference_host import commands, host, turns
from reference_host.commands import CommandResult
from reference_host.errors import HostError
from reference_host.ids import new_id
from reference_host.options import OUTPUT_CAP_BYTES
from reference_host.storage import Storage
from reference_host.tasks import PLAN_REFUSAL, Tasks
from reference_host.turns import TurnRunner

# -- scheduled tasks (§6) -----------------------------------------------------------------


# §6 / P29: the host keeps one timer per due instant (a map from runAt to the task to run);
# a second task created for the same runAt replaces the first one's entry, so of two tasks
# due at the same moment only the one scheduled last runs.
@variant("same-time-tasks-run-once")
def _same_time_tasks_run_once() -> None:
    def _arm(self: Tasks, task_id: str, run_at: int | None) -> None:
        by_due: dict[int, tuple[str, Any]] = self.__dict__.setdefault("_by_due", {})
        previous = self._timers.pop(task_id, None)
        if previous is not None:
            previous.cancel()
        if run_at is None:
            return
        earlier = by_due.get(run_at)
        if earlier is not None:  # the slot is taken: the new task replaces it
            earlier[1].cancel()
            self._timers.pop(earlier[0], None)
        handle = self.host.clock.call_at(run_at, lambda: self._fire(task_id))
        self._timers[task_id] = handle
        by_due[run_at] = (task_id, handle)

    patch(Tasks, "_arm", _arm)


# P29: task/update reads its optional fields with "if value is not None", so an explicit
# `runAt: null` (take the task off the schedule) is taken for a field left out: the answer
# and the row keep the old time, and the task still runs when that time comes.
@variant("update-ignores-null-run-at")
def _update_ignores_null_run_at() -> None:
    original = Tasks.update

    async def update(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        return await original(self, {k: v for k, v in params.items() if v is not None})

    patch(Tasks, "update", update)


# P29: the timer is (re)armed only when a task/update names runAt; switching a task off
# cancels its timer, but switching it back on with `enabled: true` alone arms nothing, so
# the re-enabled task (reported enabled, its runAt still ahead) never runs.
@variant("reenabled-task-not-armed")
def _reenabled_task_not_armed() -> None:
    original = Tasks.update

    async def update(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        before = await self.require(params["taskId"])
        answer = await original(self, params)
        if not before["enabled"] and "runAt" not in params:
            self._arm(before["id"], None)  # the timer was dropped when it was switched off
        return answer

    patch(Tasks, "update", update)


# R6.3 / P29: after refusing a Plan task the host switches the task off (enabled = 0) so
# that it is not refused again and again; the user did not ask for it, task/list now
# reports `enabled: false`, and a later runAt no longer gives the refusal it should.
@variant("refused-task-disabled")
def _refused_task_disabled() -> None:
    original = Tasks.run

    async def run(self: Tasks, row: dict[str, Any]) -> dict[str, Any]:
        try:
            return await original(self, row)
        except HostError as error:
            if error.code == PLAN_REFUSAL:
                await self.host.storage.update_task(row["id"], {"enabled": 0})
                self._arm(row["id"], None)
            raise

    patch(Tasks, "run", run)


# R6.1 / R6.2: a refused Plan run is answered and announced in task/runFinished, but never
# written to scheduled_task_runs (nothing "ran"): task/list's lastRun does not show the
# refusal (null, or the run before it).
@variant("refused-run-not-recorded")
def _refused_run_not_recorded() -> None:
    original = Tasks._finish

    async def _finish(
        self: Tasks, run: dict[str, Any], outcome: str, error: HostError | None
    ) -> None:
        if outcome != "refused":
            await original(self, run, outcome, error)
            return
        run.update(outcome=outcome, error_code=error.code if error else None)
        run.update(error_message=error.message if error else None)
        self.host.notify(
            "task/runFinished",
            {
                "run": {
                    "runId": run["id"],
                    "taskId": run["task_id"],
                    "sessionId": run["session_id"],
                    "startedAt": run["started_at"],
                    "outcome": "refused",
                    "error": error.to_data() if error else None,
                }
            },
        )

    patch(Tasks, "_finish", _finish)


# §6 / P25: the unattended run is counted as failed only when its turn was cancelled; a
# turn that ended `failed` (the provider answered with an HTTP error) is reported as a
# `completed` run, without error, in task/runFinished, lastRun and scheduled_task_runs.
@variant("provider-error-run-completed")
def _provider_error_run_completed() -> None:
    original = TurnRunner.start

    async def start(
        self: TurnRunner,
        session: Any,
        kind: str,
        user_text: str,
        approval: Any = None,
        unattended: bool = False,
        on_end: Any = None,
    ) -> str:
        if kind == "scheduled" and on_end is not None:
            inner = on_end

            async def on_end(outcome: str, error: HostError | None) -> None:
                if outcome == "failed":
                    await inner("completed", None)
                else:
                    await inner(outcome, error)

        return await original(self, session, kind, user_text, approval, unattended, on_end)

    patch(TurnRunner, "start", start)


# -- commands and shells ------------------------------------------------------------------


def _rewrite_command_results(
    exited: Callable[[dict[str, Any]], dict[str, Any]],
    result: Callable[[CommandResult], CommandResult],
) -> None:
    """Change how a command's end is reported, alike in command/exited, the tool result
    and the command_audit row (the host's one wrong idea, applied everywhere)."""
    original = commands._supervise

    async def _supervise(*args: Any, **kwargs: Any) -> CommandResult:
        notify = kwargs["notify"]

        def rewritten(method: str, params: dict[str, Any]) -> None:
            notify(method, exited(params) if method == "command/exited" else params)

        kwargs["notify"] = rewritten
        try:
            return result(await original(*args, **kwargs))
        except commands.CommandCancelledError as cancelled:
            raise commands.CommandCancelledError(result(cancelled.result)) from None

    patch(commands, "_supervise", _supervise)


# R7.3: the host reads the shell's status the way a shell prints `$?`: a status above 128
# is taken as "killed by signal status - 128". A command that ends with `exit 130` (or any
# status from 129 to 255) on its own is reported with `signal: 2` and `exitCode: null`.
@variant("high-exit-status-as-signal")
def _high_exit_status_as_signal() -> None:
    def split(code: int | None, sig: int | None) -> tuple[int | None, int | None]:
        if sig is None and code is not None and code > 128:
            return None, code - 128
        return code, sig

    def exited(params: dict[str, Any]) -> dict[str, Any]:
        code, sig = split(params["exitCode"], params["signal"])
        return {**params, "exitCode": code, "signal": sig}

    def result(outcome: CommandResult) -> CommandResult:
        code, sig = split(outcome.exit_code, outcome.signal)
        return dataclasses.replace(outcome, exit_code=code, signal=sig)

    _rewrite_command_results(exited, result)


# P20: the output cap is counted in decoded characters, not bytes: a command whose output
# is non-ASCII streams up to maxCommandOutputBytes characters (two to four times as many
# bytes) before it is truncated, and output just over the cap in bytes is not truncated.
@variant("cap-counts-characters")
def _cap_counts_characters() -> None:
    def keep(self: Any, data: bytes) -> bytes:
        used = self.__dict__.get("chars", 0)
        room = max(OUTPUT_CAP_BYTES - used, 0)
        cut, count = len(data), 0
        for index, byte in enumerate(data):
            if byte & 0xC0 != 0x80:  # a character starts here
                if count == room:
                    cut = index
                    break
                count += 1
        if cut < len(data):
            self.truncated = True
        self.chars = used + count
        part = data[:cut]
        self.kept += part
        return part

    patch(commands._Collector, "keep", keep)


# R7.3 / P20 / P10: the host reads the command's pipes as text with universal newlines
# (as a text-mode file does), so a CR LF in the output is streamed, and given to the
# model, as LF, and a lone CR as LF too: the output is not what the command printed.
@variant("output-newlines-translated")
def _output_newlines_translated() -> None:
    def translate(text: str) -> str:
        return text.replace("\r\n", "\n").replace("\r", "\n")

    def rewrite(method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "command/output":
            return {**params, "text": translate(params["text"])}
        return params

    rewrite_notifications(rewrite)
    original = commands._Collector.text
    patch(commands._Collector, "text", lambda self: translate(original(self)))


# R7.6: shell/setDefault persists the default in settings, but under the key
# `defaultShellId` (the protocol's field name) instead of `default_shell_id`; the host
# reads its own key back, so shell/list and a restart look right, but the row is not the
# one the storage contract names.
@variant("default-shell-under-camel-key")
def _default_shell_under_camel_key() -> None:
    patch(host, "DEFAULT_SHELL_KEY", "defaultShellId")


# C5: the command_audit row gets an id of its own (the audit log's key), not the commandId
# that command/started and command/exited announced, so no audit row can be found by the
# command's id.
@variant("audit-row-own-id")
def _audit_row_own_id() -> None:
    original = turns._audit_row

    def _audit_row(audit: dict[str, Any], result: CommandResult, ended_at: int) -> dict[str, Any]:
        return {**original(audit, result, ended_at), "id": new_id("audit")}

    patch(turns, "_audit_row", _audit_row)


# -- startup recovery (§4) ----------------------------------------------------------------


# R4.10 / R4.13: the recovery reads "at most one pending approval" (R4.8) as host-wide and
# interrupts only the newest pending approval; a pending approval of another session
# stays `pending` in storage and on the wire after the restart, with nothing to expire it.
@variant("recovery-interrupts-one-approval")
def _recovery_interrupts_one_approval() -> None:
    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self.transaction() as conn:
            approvals = await conn.execute(
                "UPDATE plan_approvals SET status = 'interrupted', "
                "status_code = 'TURN_INTERRUPTED', decided_at = ? WHERE id = ("
                "SELECT id FROM plan_approvals WHERE status = 'pending' "
                "ORDER BY created_at DESC, rowid DESC LIMIT 1)",
                (now,),
            )
            executions = await conn.execute(
                "UPDATE plan_approvals SET execution_state = 'interrupted' "
                "WHERE execution_state IN ('queued', 'running')"
            )
            ended = await conn.execute(
                "UPDATE turns SET state = 'interrupted', ended_at = ? WHERE state = 'active'",
                (now,),
            )
            await conn.execute(
                "UPDATE scheduled_task_runs SET outcome = 'failed', "
                "error_code = 'TURN_INTERRUPTED', "
                "error_message = 'the host stopped before the run finished' "
                "WHERE outcome = 'running'"
            )
        return approvals.rowcount, executions.rowcount, ended.rowcount

    patch(Storage, "recover", recover)


CASES = [
    BrokenCase(
        "same-time-tasks-run-once",
        "scheduled_plan",
        "two_tasks_due_at_the_same_time",
        "P29",
        "enabled tasks that came due",
    ),
    BrokenCase(
        "update-ignores-null-run-at",
        "scheduled_plan",
        "taken_off_the_schedule",
        "P29",
        "the host's answer reports other values (reported, given): {'runAt'",
    ),
    BrokenCase(
        "reenabled-task-not-armed",
        "scheduled_plan",
        "switched_off_and_on_again",
        "P29",
        "the task did not run when its time came",
    ),
    BrokenCase(
        "refused-task-disabled",
        "scheduled_plan",
        "refused_task_stays_switched_on",
        "P29",
        "after its refused run task/list reports the task enabled: False",
    ),
    BrokenCase(
        "refused-run-not-recorded",
        "scheduled_plan",
        "plan_task_that_is_run_now_is_refused",
        "R6.1",
        "the task's last run reads None",
    ),
    BrokenCase(
        "provider-error-run-completed",
        "scheduled_plan",
        "model_provider_answers_with_an_error",
        "P25",
        "task/runFinished reports the run completed",
    ),
    BrokenCase(
        "high-exit-status-as-signal",
        "shell",
        "exits_with_status",
        "R7.3",
        "the command ended with (exit code, signal) (None, 2)",
    ),
    BrokenCase(
        "cap-counts-characters",
        "shell",
        "several_bytes_is_cut_at_the_cap",
        "P20",
        "but the output was not marked truncated",
    ),
    BrokenCase(
        "output-newlines-translated",
        "shell",
        "carriage_returns",
        "P20",
        "output is streamed as the command wrote it, line ends included",
    ),
    BrokenCase(
        "default-shell-under-camel-key",
        "shell",
        "default_shell_survives_a_restart",
        "R7.6",
        "settings hold default_shell_id = nothing",
    ),
    BrokenCase(
        "audit-row-own-id",
        "shell",
        "command_that_exits_is_recorded_for_audit",
        "C5",
        "command_audit holds 0 rows",
    ),
    BrokenCase(
        "recovery-interrupts-one-approval",
        "restart_interruption",
        "pending_approvals_of_every_session_are_interrupted_when_the_host_restarts",
        "R4.10",
        "the pending plan of the first session reads ('pending', None)",
    ),
]
