"""Broken hosts: held-out mistakes, written from the contract alone, across its clauses."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
from dataclasses import replace
from typing import Any

from hosts.registry import BrokenCase, patch, variant
from pi_contract import error_catalog
from reference_host import artifacts, migration, shells, turns
from reference_host.approvals import Approvals
from reference_host.errors import HostError
from reference_host.host import Host
from reference_host.permissions import PermissionBroker
from reference_host.rpc import Dispatcher
from reference_host.storage import Storage
from reference_host.tasks import Tasks
from reference_host.turns import TurnRunner

# -- permissions --------------------------------------------------------------------------


@variant("remembers-permission-for-the-turn")
def _remembers_permission_for_the_turn() -> None:
    # Once the user allowed one call, the rest of the turn runs without asking again
    # ("the user already said yes to this turn").
    allowed: set[str] = set()
    original = TurnRunner._require_permission

    async def require(
        self: TurnRunner, session: Any, turn_id: str, call: Any, args: Any, unattended: bool
    ) -> None:
        if turn_id in allowed:
            return
        await original(self, session, turn_id, call, args, unattended)
        allowed.add(turn_id)

    patch(TurnRunner, "_require_permission", require)


@variant("permission-answer-falls-back")
def _permission_answer_falls_back() -> None:
    # An answer naming a request the host does not know answers the oldest open one.
    original = PermissionBroker.respond

    def respond(self: PermissionBroker, request_id: str, decision: str) -> None:
        if request_id not in self._open and self._open:
            request_id = next(iter(self._open))
        original(self, request_id, decision)

    patch(PermissionBroker, "respond", respond)


# -- scheduled tasks ----------------------------------------------------------------------


@variant("unattended-runs-in-ask")
def _unattended_runs_in_ask() -> None:
    # A task's run session is created with the default permission mode, not the task's.
    original = Tasks.run

    async def run(self: Tasks, row: dict[str, Any]) -> dict[str, Any]:
        return await original(self, {**row, "permission_mode": "ask"})

    patch(Tasks, "run", run)


@variant("last-run-ties-to-first")
def _last_run_ties_to_first() -> None:
    # lastRun is the newest run by start time, ties broken by insertion order ascending:
    # two runs at the same host-clock instant report the first one.
    async def last_task_run(self: Storage, task_id: str) -> dict[str, Any] | None:
        rows = await self._dicts(
            "SELECT * FROM scheduled_task_runs WHERE task_id = ? "
            "ORDER BY started_at DESC, rowid ASC LIMIT 1",
            (task_id,),
        )
        return rows[0] if rows else None

    patch(Storage, "last_task_run", last_task_run)


@variant("task-update-keeps-the-timer")
def _task_update_keeps_the_timer() -> None:
    # task/update stores the new runAt and enabled flag, but the timer stays as task/create
    # armed it: a moved task fires at its old time, a disabled one still fires.
    original = Tasks.update

    async def update(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        self._arm = lambda task_id, run_at: None  # type: ignore[method-assign]
        try:
            return await original(self, params)
        finally:
            del self._arm

    patch(Tasks, "update", update)


# -- deadline and the clock ---------------------------------------------------------------


@variant("single-expiry-timer")
def _single_expiry_timer() -> None:
    # The host keeps one expiry timer: each new submission, in any session, replaces it,
    # so an earlier pending approval only expires when it is next acted on.
    original = Approvals.submit
    current: list[Any] = []

    async def submit(self: Approvals, session: Any, turn_id: str, args: Any) -> Any:
        clock = self.host.clock
        real = clock.call_at
        armed: list[tuple[int, Any]] = []

        def call_at(due: int, callback: Any) -> Any:
            handle = real(due, callback)
            armed.append((due, handle))
            return handle

        clock.call_at = call_at  # type: ignore[method-assign]
        try:
            row = await original(self, session, turn_id, args)
        finally:
            del clock.call_at
        for due, handle in armed:
            if due == row.expires_at:
                for previous in current:
                    previous.cancel()
                current[:] = [handle]
        return row

    patch(Approvals, "submit", submit)


@variant("clock-set-fires-nothing")
def _clock_set_fires_nothing() -> None:
    # conformance/clock/set moves the clock but fires no timer (advance does).
    async def clock_set(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        clock = self._manual_clock()
        clock._now = params["now"]
        return {"now": clock.now_ms()}

    patch(Host, "clock_set", clock_set)


@variant("command-timeout-from-turn-start")
def _command_timeout_from_turn_start() -> None:
    # A command's timeout is counted from the start of its turn, not from its own start.
    started: dict[str, int] = {}
    original_start = Storage.start_turn
    original_run = turns.run_command

    async def start_turn(
        self: Storage, turn_id: str, session_id: str, kind: str, at: int, *rest: Any
    ) -> None:
        started[turn_id] = at
        await original_start(self, turn_id, session_id, kind, at, *rest)

    async def run_command(**kwargs: Any) -> Any:
        turn_id = kwargs.get("turn_id")
        if turn_id in started:
            elapsed = kwargs["clock"].now_ms() - started[turn_id]
            kwargs["timeout_ms"] = max(1, kwargs["timeout_ms"] - elapsed)
        return await original_run(**kwargs)

    patch(Storage, "start_turn", start_turn)
    patch(turns, "run_command", run_command)


# -- approval and execution ---------------------------------------------------------------


@variant("execution-active-host-wide")
def _execution_active_host_wide() -> None:
    # "Only one execution may be queued or running" is enforced for the whole host: an
    # approve in one session is refused while another session's execution runs.
    original = Approvals.approve

    async def approve(self: Approvals, session_id: str, approval_id: str, mode: Any) -> Any:
        for other, activity in self.host.activity.items():
            if other != session_id and activity.active_execution_id is not None:
                raise HostError("EXECUTION_ACTIVE", "another execution is queued or running")
        return await original(self, session_id, approval_id, mode)

    patch(Approvals, "approve", approve)


@variant("auto-revises-after-reject")
def _auto_revises_after_reject() -> None:
    # A rejection asks the model for a revised plan by itself, just after answering.
    original = Approvals.reject

    async def reject(self: Approvals, session_id: str, approval_id: str) -> dict[str, Any]:
        result = await original(self, session_id, approval_id)
        host = self.host

        async def revise() -> None:
            await asyncio.sleep(0.05)
            session = await host.require_session(session_id)
            with contextlib.suppress(HostError):
                await host.turns.start(session, "prompt", "The plan was rejected. Revise it.")

        asyncio.get_running_loop().create_task(revise())
        return result

    patch(Approvals, "reject", reject)


@variant("artifact-read-latest")
def _artifact_read_latest() -> None:
    # artifact/read opens the session's newest artifact, whichever approval it names.
    async def artifact_read(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        named = await self.approvals.require(params["sessionId"], params["approvalId"])
        rows = [r for r in await self.storage.list_approvals(named.session_id) if r.artifact_path]
        latest = rows[-1] if rows else named
        result = await self.approvals.read_artifact(latest)
        return {**result, "approvalId": named.id}

    patch(Host, "artifact_read", artifact_read)


# -- restart recovery ---------------------------------------------------------------------


@variant("recovery-resets-permission-mode")
def _recovery_resets_permission_mode() -> None:
    # To be safe, a session whose execution the restart interrupted is put back to ask.
    original = Storage.recover

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self.transaction() as conn:
            await conn.execute(
                "UPDATE sessions SET permission_mode = 'ask' WHERE id IN (SELECT session_id "
                "FROM plan_approvals WHERE execution_state IN ('queued', 'running'))"
            )
        return await original(self, now)

    patch(Storage, "recover", recover)


@variant("recovery-restamps-decided-at")
def _recovery_restamps_decided_at() -> None:
    # Interrupting an execution also stamps its approval's decidedAt with the restart time.
    original = Storage.recover

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self.transaction() as conn:
            await conn.execute(
                "UPDATE plan_approvals SET decided_at = ? "
                "WHERE execution_state IN ('queued', 'running')",
                (now,),
            )
        return await original(self, now)

    patch(Storage, "recover", recover)


# -- artifacts ----------------------------------------------------------------------------


@variant("artifact-counter-per-process")
def _artifact_counter_per_process() -> None:
    # Artifacts are numbered plan-1.md, plan-2.md, ... by a counter of the host process,
    # created without replacement and without retry: after a restart the counter starts
    # again at 1 and the next plan of a project fails to write.
    counter = itertools.count(1)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

    def create(plan_fd: int) -> tuple[str, int]:
        name = f"plan-{next(counter)}.md"
        try:
            return name, os.open(name, flags, artifacts.READ_ONLY, dir_fd=plan_fd)
        except OSError as exc:
            raise HostError("ARTIFACT_WRITE_FAILED", f"cannot create the artifact: {exc}") from exc

    patch(artifacts, "_create_exclusive", create)


# -- commands -----------------------------------------------------------------------------


@variant("output-seq-per-turn")
def _output_seq_per_turn() -> None:
    # command/output is numbered per turn: a turn's second command goes on from the first's.
    offsets: dict[str, int] = {}
    original = turns.run_command

    async def run_command(**kwargs: Any) -> Any:
        key = str(kwargs.get("turn_id"))
        notify = kwargs["notify"]

        def renumbering(method: str, params: dict[str, Any]) -> None:
            if method == "command/output":
                params = {**params, "seq": params["seq"] + offsets.get(key, 0)}
                offsets["_last"] = params["seq"]
            notify(method, params)

        kwargs["notify"] = renumbering
        offsets.pop("_last", None)
        try:
            return await original(**kwargs)
        finally:
            if "_last" in offsets:
                offsets[key] = offsets.pop("_last") + 1

    patch(turns, "run_command", run_command)


@variant("audit-records-default-shell")
def _audit_records_default_shell() -> None:
    # The command runs in the session's shell, but command_audit records the default one.
    original = turns._audit_row

    def audit_row(audit: dict[str, Any], result: Any, ended_at: int) -> dict[str, Any]:
        row = original(audit, result, ended_at)
        default = shells.fallback_default()
        if default is not None:
            row.update(shell_id=default.shell_id, shell_path=default.path)
        return row

    patch(turns, "_audit_row", audit_row)


# -- migration ----------------------------------------------------------------------------


@variant("migration-drops-feedback")
def _migration_drops_feedback() -> None:
    # The legacy row keeps the v8 proposal but not the feedback that came with it.
    text = migration._COPY_LEGACY_APPROVALS
    kept = "json_object('proposal', proposal_json, 'feedback', feedback)"
    assert kept in text, "the migration keeps the legacy proposal differently now"
    patch(
        migration,
        "_COPY_LEGACY_APPROVALS",
        text.replace(kept, "json_object('proposal', proposal_json)"),
    )


@variant("legacy-expiry-from-decision")
def _legacy_expiry_from_decision() -> None:
    # A decided legacy row's expiresAt is counted from its decision, not its creation.
    text = migration._COPY_LEGACY_APPROVALS
    expiry = "  created_at + 1800000,"
    assert expiry in text, "the migration computes the legacy expiry differently now"
    patch(
        migration,
        "_COPY_LEGACY_APPROVALS",
        text.replace(expiry, "  coalesce(decided_at, created_at) + 1800000,"),
    )


# -- wire ---------------------------------------------------------------------------------


@variant("numeric-string-ids-as-numbers")
def _numeric_string_ids_as_numbers() -> None:
    # A string id made of digits is answered as the number it spells (a loose id type).
    original = Dispatcher.__init__

    def init(self: Dispatcher, send: Any) -> None:
        def sending(message: dict[str, Any]) -> None:
            request_id = message.get("id")
            if isinstance(request_id, str) and request_id.isdigit():
                message = {**message, "id": int(request_id)}
            send(message)

        original(self, sending)

    patch(Dispatcher, "__init__", init)


# -- a second batch ------------------------------------------------------------------------


@variant("timeout-shares-the-not-pending-number")
def _timeout_shares_the_not_pending_number() -> None:
    # The host's own table of numeric codes was copied row by row: PLAN_APPROVAL_TIMEOUT
    # went out with APPROVAL_NOT_PENDING's number (data.code is right).
    original = HostError.jsonrpc_code.fget
    assert original is not None

    def jsonrpc_code(self: HostError) -> int:
        if self.code == "PLAN_APPROVAL_TIMEOUT":
            return int(error_catalog()["APPROVAL_NOT_PENDING"]["jsonrpcCode"])
        return int(original(self))

    patch(HostError, "jsonrpc_code", property(jsonrpc_code))


@variant("expiry-clears-every-session")
def _expiry_clears_every_session() -> None:
    # When an approval expires, the host forgets every session's pending approval, not only
    # the expired one's: another session's waiting plan is no longer named pending.
    original = Approvals.expire

    async def expire(self: Approvals, approval_id: str) -> None:
        before = await self.host.storage.get_approval(approval_id)
        await original(self, approval_id)
        after = await self.host.storage.get_approval(approval_id)
        if before is not None and after is not None and before.status != after.status:
            for session_id in list(self.host.activity):
                self.host.set_activity(session_id, pending_approval_id=None)

    patch(Approvals, "expire", expire)


@variant("recovery-skips-scheduled-turns")
def _recovery_skips_scheduled_turns() -> None:
    # Start-up recovery ends the prompt and execution turns a previous process left active,
    # but leaves scheduled runs' turns to "the scheduler", which never looks at them.
    original = Storage.recover

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self.transaction() as conn:
            cursor = await conn.execute(
                "SELECT id FROM turns WHERE state = 'active' AND kind = 'scheduled'"
            )
            kept = [row[0] for row in await cursor.fetchall()]
        result = await original(self, now)
        if kept:
            marks = ", ".join("?" for _ in kept)
            async with self.transaction() as conn:
                await conn.execute(
                    f"UPDATE turns SET state = 'active', ended_at = NULL WHERE id IN ({marks})",
                    kept,
                )
        return result

    patch(Storage, "recover", recover)


@variant("denial-remembered-for-the-turn")
def _denial_remembered_for_the_turn() -> None:
    # Once the user denied a call, later calls of the same tool in that turn are denied
    # without asking.
    denied: set[tuple[str, str]] = set()
    original = TurnRunner._require_permission

    async def require(
        self: TurnRunner, session: Any, turn_id: str, call: Any, args: Any, unattended: bool
    ) -> None:
        if (turn_id, call.name) in denied:
            raise HostError("PERMISSION_DENIED", f"the user denied {call.name} earlier")
        try:
            await original(self, session, turn_id, call, args, unattended)
        except HostError as error:
            if error.code == "PERMISSION_DENIED":
                denied.add((turn_id, call.name))
            raise

    patch(TurnRunner, "_require_permission", require)


@variant("turns-keep-the-created-model")
def _turns_keep_the_created_model() -> None:
    # The session's agent is built with the provider it was created with; a later change of
    # model is stored and reported, but the agent goes on asking for the first model.
    created: dict[str, str] = {}
    original_create = Host.session_create
    original_ask = TurnRunner._ask_model

    async def session_create(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await original_create(self, params)
        provider = result["session"]["provider"]
        if provider is not None:
            created[result["session"]["sessionId"]] = provider["model"]
        return result

    async def ask_model(self: TurnRunner, session: Any, turn_id: str, messages: Any) -> Any:
        if session.id in created:
            session = replace(session, model=created[session.id])
        return await original_ask(self, session, turn_id, messages)

    patch(Host, "session_create", session_create)
    patch(TurnRunner, "_ask_model", ask_model)


def _after_migration(*steps: str) -> None:
    original = migration.migration_statements

    def statements(v10_statements: list[str]) -> list[str]:
        found = original(v10_statements)
        return [*found[:-1], *steps, found[-1]]

    patch(migration, "migration_statements", statements)


@variant("migration-touches-sessions")
def _migration_touches_sessions() -> None:
    # Adding the shell column "updates" every session: updated_at becomes the migration time.
    _after_migration(
        "UPDATE sessions SET updated_at = CAST(strftime('%s', 'now') AS INTEGER) * 1000"
    )


@variant("migration-enables-tasks")
def _migration_enables_tasks() -> None:
    # The migration rewrites the scheduled tasks with the v10 defaults: all enabled.
    _after_migration("UPDATE scheduled_tasks SET enabled = 1")


@variant("task-runs-with-the-created-provider")
def _task_runs_with_the_created_provider() -> None:
    # task/update stores a new provider, but runs use the one the task was created with.
    created: dict[str, tuple[str, str]] = {}
    original_create = Tasks.create
    original_run = Tasks.run

    async def create(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        result = await original_create(self, params)
        provider = result["task"]["provider"]
        created[result["task"]["taskId"]] = (provider["baseUrl"], provider["model"])
        return result

    async def run(self: Tasks, row: dict[str, Any]) -> dict[str, Any]:
        if row["id"] in created:
            base_url, model = created[row["id"]]
            row = {**row, "provider_base_url": base_url, "model": model}
        return await original_run(self, row)

    patch(Tasks, "create", create)
    patch(Tasks, "run", run)


@variant("moved-task-keeps-earlier-time")
def _moved_task_keeps_earlier_time() -> None:
    # A task/update that moves runAt arms a timer for the new time and leaves the old one.
    def arm(self: Tasks, task_id: str, run_at: int | None) -> None:
        if run_at is not None:
            self._timers[task_id] = self.host.clock.call_at(run_at, lambda: self._fire(task_id))

    patch(Tasks, "_arm", arm)


@variant("tasks-forgotten-after-restart")
def _tasks_forgotten_after_restart() -> None:
    # Timers live in memory only: after a restart no task runs until it is changed again.
    async def schedule_all(self: Tasks) -> None:
        return None

    patch(Tasks, "schedule_all", schedule_all)


CASES = [
    BrokenCase(
        "moved-task-keeps-earlier-time",
        "scheduled_plan",
        "task_moved_to_a_later_time",
        "P29",
        "for the task at the time it was moved from",
    ),
    BrokenCase(
        "tasks-forgotten-after-restart",
        "scheduled_plan",
        "task_keeps_its_time_across_a_restart",
        "P29",
        "the task did not run when its time came",
    ),
    BrokenCase(
        "remembers-permission-for-the-turn",
        "execution",
        "also_after_an_earlier_one_was_allowed",
        "P7",
        "ran without asking, after an earlier call of the turn was answered",
    ),
    BrokenCase(
        "permission-answer-falls-back",
        "execution",
        "never_asked_leaves",
        "P7",
        "expected the host to refuse",
    ),
    BrokenCase(
        "unattended-runs-in-ask",
        "scheduled_plan",
        "needs_no_permission",
        "P8",
        "the Write call ended denied",
    ),
    BrokenCase(
        "last-run-ties-to-first",
        "scheduled_plan",
        "never_switches_a_refused",
        "R6.3",
        "after a second run the task's last run is",
    ),
    BrokenCase(
        "task-update-keeps-the-timer",
        "scheduled_plan",
        "agent_task_runs_when_its_time_comes",
        "R6.3",
        "no task/runFinished notification matched",
        slow=True,
    ),
    BrokenCase(
        "single-expiry-timer",
        "deadline",
        "its_own_deadline",
        "R3.11",
        "no expiry was announced",
    ),
    BrokenCase(
        "clock-set-fires-nothing",
        "deadline",
        "reloaded_client_sees_the_original_deadline",
        "R3.10",
        "the plan did not expire",
        slow=True,  # the expiry the check waits for never comes
    ),
    BrokenCase(
        "command-timeout-from-turn-start",
        "shell",
        "own_start",
        "C5",
        "the command ended before its own timeout had run out",
    ),
    BrokenCase(
        "execution-active-host-wide",
        "execution",
        "while_this_sessions_execution",
        "R4.9",
        "approving the other session's plan was refused with EXECUTION_ACTIVE",
    ),
    BrokenCase(
        "auto-revises-after-reject",
        "submit_plan",
        "starts_no_new_turn_by_itself",
        "C7",
        "the host started a turn nobody asked for",
    ),
    BrokenCase(
        "artifact-read-latest",
        "artifact_integrity",
        "opening_the_earlier_plan",
        "R3.2",
        "another plan's bytes",
    ),
    BrokenCase(
        "recovery-resets-permission-mode",
        "restart_interruption",
        "still_waiting_in_the_queue_is_interrupted_when_the_host_restarts",
        "R4.14",
        "after the restart the permission mode is ask",
    ),
    BrokenCase(
        "recovery-restamps-decided-at",
        "restart_interruption",
        "running_execution_is_interrupted_when_the_host_restarts",
        "R4.10",
        "recovery changed more than the execution state",
    ),
    BrokenCase(
        "artifact-counter-per-process",
        "restart_interruption",
        "the_user_can_ask_for_a_new_plan",
        "R4.13",
        "the new Plan turn ended",
        process="what it gets wrong lives in the host process, which an in-process restart keeps",
    ),
    BrokenCase(
        "output-seq-per-turn",
        "shell",
        "numbers_its_output_from_0",
        "P20",
        "each command numbers its own output from 0",
    ),
    BrokenCase(
        "audit-records-default-shell",
        "shell",
        "recorded_with_that_shell",
        "C5",
        "the audit row differs from the command",
    ),
    BrokenCase(
        "migration-drops-feedback",
        "migration",
        "was_v8_status_is_listed",
        "P16",
        "not the v8 proposal and its feedback",
    ),
    BrokenCase(
        "legacy-expiry-from-decision",
        "migration",
        "was_v8_status_is_listed",
        "P16",
        "the legacy approval reads",
    ),
    BrokenCase(
        "numeric-string-ids-as-numbers",
        "protocol_errors",
        "made_of_digits",
        "P1",
        "no answer carries the identifier '42'",
    ),
    BrokenCase(
        "timeout-shares-the-not-pending-number",
        "deadline",
        "expired_plan_cannot_be_approved_afterwards",
        "P5",
        "broke the protocol v9 contract",
    ),
    BrokenCase(
        "expiry-clears-every-session",
        "deadline",
        "its_own_deadline",
        "R3.11",
        "the other session no longer names its waiting plan as pending",
    ),
    BrokenCase(
        "recovery-skips-scheduled-turns",
        "scheduled_plan",
        "under_way and restarts",
        "R4.11",
        "turns were still active when the restarted host first answered",
    ),
    BrokenCase(
        "denial-remembered-for-the-turn",
        "execution",
        "also_after_an_earlier_one_was_denied",
        "P7",
        "ran without asking, after an earlier call of the turn was answered: denied",
    ),
    BrokenCase(
        "turns-keep-the-created-model",
        "sessions",
        "model_the_session_was_changed_to",
        "R5.6",
        "not 'another-model' the session was changed to",
    ),
    BrokenCase(
        "migration-touches-sessions",
        "migration",
        "data_survives",
        "R7.7",
        "sessions changed in the migration",
    ),
    BrokenCase(
        "migration-enables-tasks",
        "migration",
        "data_survives",
        "R7.7",
        "scheduled_tasks changed in the migration",
    ),
    BrokenCase(
        "task-runs-with-the-created-provider",
        "scheduled_plan",
        "another_model",
        "R6.3",
        "not 'another-model' the task was changed to",
    ),
]
