"""Broken hosts: a held-out set (state keyed on the wrong thing, stale caches), written
from the contract alone.

Five of these twelve were caught from the start. Six more are caught now: a plan opened
once and then changed on disk is refused when opened again (P13); the model of a session
changed after its first turn reaches the next request (R5.6); two tasks of one name both
run (P29, a sentence now says names need not be unique); and two sessions of one project
keep their own plan deadlines (R3.11), their own models and their own running turns
(R5.9). permission-id-is-the-call-id is caught since a scenario has two sessions' models
give their calls one id at once (P7: a requestId names one question among all sessions).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
from dataclasses import replace
from typing import Any

from hosts.registry import BrokenCase, patch, variant
from reference_host import commands, ids, turns
from reference_host.approvals import Approvals
from reference_host.host import Host
from reference_host.permissions import PermissionBroker, _Request
from reference_host.storage import SessionRow, Storage
from reference_host.tasks import Tasks
from reference_host.turns import TurnRunner


def _digest(*parts: object) -> str:
    return hashlib.sha256("\0".join(str(p) for p in parts).encode()).hexdigest()[:24]


# R5.9 / R5.1: the running turn's task is kept under the session's workspace root (the
# "project's running turn"); with two sessions of one project, cancelling one cancels the
# other's turn (or nothing, when the other's turn already ended).
@variant("turn-tasks-keyed-by-workspace-root")
def _turn_tasks_keyed_by_workspace_root() -> None:
    roots: dict[str, str] = {}
    start = TurnRunner.start

    def key(session_id: str) -> str:
        return roots.get(session_id, session_id)

    async def _start(self: TurnRunner, session: SessionRow, *args: Any, **kwargs: Any) -> str:
        roots[session.id] = session.workspace_root or session.id
        turn_id = await start(self, session, *args, **kwargs)
        task = self.tasks.pop(session.id, None)
        if task is not None:
            self.tasks[key(session.id)] = task
        return turn_id

    async def cancel(self: TurnRunner, session_id: str) -> str | None:
        task = self.tasks.get(key(session_id))
        turn_id = self.host.activity_of(session_id).active_turn_id
        if task is None or task.done():
            return None
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return turn_id

    async def settle(self: TurnRunner, session_id: str, turn_id: str | None) -> None:
        task = self.tasks.get(key(session_id))
        if turn_id is None or self.host.activity_of(session_id).active_turn_id != turn_id:
            return
        if task is not None and task is not asyncio.current_task():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(task)

    patch(TurnRunner, "start", _start)
    patch(TurnRunner, "cancel", cancel)
    patch(TurnRunner, "settle", settle)


_CALL_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("call_id", default=None)


# P7: a permission question's requestId is the tool call's id. Call ids are unique only
# within one message (and two sessions' models may both say "call_1"), so a later question
# reuses an earlier one's id: a second answer to the first question answers the new one,
# and two sessions asking at once overwrite each other's open question.
@variant("permission-id-is-the-call-id")
def _permission_id_is_the_call_id() -> None:
    require = TurnRunner._require_permission

    async def _require_permission(
        self: TurnRunner, session: Any, turn_id: str, call: Any, args: Any, unattended: bool
    ) -> None:
        token = _CALL_ID.set(call.call_id)
        try:
            await require(self, session, turn_id, call, args, unattended)
        finally:
            _CALL_ID.reset(token)

    async def ask(
        self: PermissionBroker, session_id: str, turn_id: str, tool: str, tool_input: Any
    ) -> bool:
        request_id = f"perm_{_CALL_ID.get() or ids.new_id('x')}"
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._open[request_id] = _Request(session_id, answer)
        self._notify(
            "permission/requested",
            {
                "sessionId": session_id,
                "turnId": turn_id,
                "requestId": request_id,
                "tool": tool,
                "input": tool_input,
            },
        )
        try:
            return await answer
        finally:
            if self._open.get(request_id) is not None and self._open[request_id].answer is answer:
                self._open.pop(request_id, None)

    patch(TurnRunner, "_require_permission", _require_permission)
    patch(PermissionBroker, "ask", ask)


_SUBMITTING: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar(
    "submitting", default=None
)


# R1.11 / C7: the approval id is derived from the session and the plan's title (an
# idempotency key for SubmitPlan), so a revision that keeps the title after a reject or an
# expiry collides with the earlier approval and the SubmitPlan fails instead of creating a
# new approval.
@variant("approval-id-from-title")
def _approval_id_from_title() -> None:
    submit = Approvals.submit
    plain = Host.new_id

    async def _submit(self: Approvals, session: SessionRow, turn_id: str, args: Any) -> Any:
        token = _SUBMITTING.set((session.id, str(args.get("title"))))
        try:
            return await submit(self, session, turn_id, args)
        finally:
            _SUBMITTING.reset(token)

    def new_id(prefix: str) -> str:
        keyed = _SUBMITTING.get()
        if prefix == "apr" and keyed is not None:
            return f"apr_{_digest(*keyed)}"
        return plain(prefix)

    patch(Approvals, "submit", _submit)
    patch(Host, "new_id", staticmethod(new_id))


_TASK_NAME: contextvars.ContextVar[str | None] = contextvars.ContextVar("task_name", default=None)


# P29: the schedule keeps one timer per task *name*; arming a second task of the same name
# (or deleting it, or moving it) cancels the first one's timer, so of two tasks with one
# name only the one armed last runs when both come due.
@variant("task-timers-keyed-by-name")
def _task_timers_keyed_by_name() -> None:
    names: dict[str, str] = {}
    create, update, delete, schedule_all = (
        Tasks.create,
        Tasks.update,
        Tasks.delete,
        Tasks.schedule_all,
    )

    def _arm(self: Tasks, task_id: str, run_at: int | None) -> None:
        key = _TASK_NAME.get() or names.get(task_id, task_id)
        previous = self._timers.pop(key, None)
        if previous is not None:
            previous.cancel()
        if run_at is not None:
            self._timers[key] = self.host.clock.call_at(run_at, lambda: self._fire(task_id))

    async def _create(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        token = _TASK_NAME.set(params["name"])
        try:
            result = await create(self, params)
        finally:
            _TASK_NAME.reset(token)
        names[result["task"]["taskId"]] = params["name"]
        return result

    async def _update(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.host.storage.get_task(params["taskId"])
        name = params.get("name", row["name"] if row else None)
        token = _TASK_NAME.set(name)
        try:
            result = await update(self, params)
        finally:
            _TASK_NAME.reset(token)
        names[params["taskId"]] = result["task"]["name"]
        return result

    async def _delete(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.host.storage.get_task(params["taskId"])
        token = _TASK_NAME.set(row["name"] if row else None)
        try:
            return await delete(self, params)
        finally:
            _TASK_NAME.reset(token)

    async def _schedule_all(self: Tasks) -> None:
        for row in await self.host.storage.list_tasks():
            names[row["id"]] = row["name"]
        await schedule_all(self)

    patch(Tasks, "_arm", _arm)
    patch(Tasks, "create", _create)
    patch(Tasks, "update", _update)
    patch(Tasks, "delete", _delete)
    patch(Tasks, "schedule_all", _schedule_all)


_COMMAND_KEY: contextvars.ContextVar[tuple[str, int] | None] = contextvars.ContextVar(
    "command_key", default=None
)


# C5 / P20: the commandId is derived from the command text and the host clock at its start,
# so identical commands started at one host-clock instant (two sessions, or twice in one
# turn while the clock stands still) share one id: one command_audit row for both, and
# their notifications cannot be told apart.
@variant("command-id-from-text-and-time")
def _command_id_from_text_and_time() -> None:
    run = turns.run_command
    plain = commands.new_id

    async def run_command(**kwargs: Any) -> Any:
        token = _COMMAND_KEY.set((kwargs["command"], kwargs["clock"].now_ms()))
        try:
            return await run(**kwargs)
        finally:
            _COMMAND_KEY.reset(token)

    def new_id(prefix: str) -> str:
        keyed = _COMMAND_KEY.get()
        if prefix == "cmd" and keyed is not None:
            return f"cmd_{_digest(*keyed)}"
        return plain(prefix)

    patch(turns, "run_command", run_command)
    patch(commands, "new_id", new_id)


# R5.9 / provider: the provider is remembered per workspace root (the "project's model",
# refreshed whenever a session of that root is created or configured with one), so of two
# sessions of one project with different providers, both talk to the one set last.
@variant("provider-per-workspace-root")
def _provider_per_workspace_root() -> None:
    by_root: dict[str, tuple[str, str]] = {}
    create, configure, ask = Host.session_create, Host.session_configure, TurnRunner._ask_model

    def remember(session: dict[str, Any]) -> None:
        if session["workspaceRoot"] is not None and session["provider"] is not None:
            provider = session["provider"]
            by_root[session["workspaceRoot"]] = (provider["baseUrl"], provider["model"])

    async def session_create(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await create(self, params)
        remember(result["session"])
        return result

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await configure(self, params)
        if "provider" in params:
            remember(result["session"])
        return result

    async def _ask_model(self: TurnRunner, session: SessionRow, turn_id: str, messages: Any) -> Any:
        known = by_root.get(session.workspace_root or "")
        if known is not None and session.provider_base_url is not None:
            session = replace(session, provider_base_url=known[0], model=known[1])
        return await ask(self, session, turn_id, messages)

    patch(Host, "session_create", session_create)
    patch(Host, "session_configure", session_configure)
    patch(TurnRunner, "_ask_model", _ask_model)


# Provider (Sessions receive their provider): one client configuration is kept per base
# URL, built on first use with the model of that moment; a later session (or a configure)
# naming the same base URL with another model still sends the first model.
@variant("provider-config-per-base-url")
def _provider_config_per_base_url() -> None:
    made: dict[str, Any] = {}
    config = turns.ProviderConfig

    def provider_config(base_url: str, model: str, api_key: str | None = None) -> Any:
        if base_url not in made:
            made[base_url] = config(base_url, model, api_key)
        return made[base_url]

    patch(turns, "ProviderConfig", provider_config)


# R7.6: shell/list's answer is computed once per process and kept (the shell catalog does
# not change while the host runs); shell/setDefault persists the new default and commands
# use it, but shell/list keeps naming the old defaultShellId until the host restarts.
@variant("shell-list-cached")
def _shell_list_cached() -> None:
    original = Host.shell_list

    async def shell_list(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        cached = self.__dict__.get("_shell_list_answer")
        if cached is None:
            cached = await original(self, params)
            self.__dict__["_shell_list_answer"] = cached
        return {"shells": list(cached["shells"]), "defaultShellId": cached["defaultShellId"]}

    patch(Host, "shell_list", shell_list)


_TURN_SESSION: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "turn_session", default=None
)


# R4.14 / R1.3: turn ids are the session id and a per-session counter held in memory; after
# a restart the counter starts again at 1, so the first new turn of a session that already
# had one collides with the stored turn and the prompt fails.
@variant("turn-ids-count-per-session-from-start")
def _turn_ids_count_per_session_from_start() -> None:
    counters: dict[str, int] = {}
    start = TurnRunner.start
    plain = Host.new_id

    async def _start(self: TurnRunner, session: SessionRow, *args: Any, **kwargs: Any) -> str:
        token = _TURN_SESSION.set(session.id)
        try:
            return await start(self, session, *args, **kwargs)
        finally:
            _TURN_SESSION.reset(token)

    def new_id(prefix: str) -> str:
        session_id = _TURN_SESSION.get()
        if prefix == "turn" and session_id is not None:
            counters[session_id] = counters.get(session_id, 0) + 1
            return f"turn_{session_id}_{counters[session_id]}"
        return plain(prefix)

    patch(TurnRunner, "start", _start)
    patch(Host, "new_id", staticmethod(new_id))


# P13: artifact/read keeps the verified answer of the first read of each approval and
# serves it again; a change to the file after that first read goes unnoticed by
# artifact/read (approve still re-checks the file).
@variant("artifact-read-memoised")
def _artifact_read_memoised() -> None:
    read = Approvals.read_artifact
    memo: dict[str, dict[str, Any]] = {}

    async def read_artifact(self: Approvals, row: Any) -> dict[str, Any]:
        if row.id not in memo:
            memo[row.id] = await read(self, row)
        return dict(memo[row.id])

    patch(Approvals, "read_artifact", read_artifact)


_SESSIONS: dict[str, SessionRow] = {}


# R7.2 / C4: session records are cached in memory on first read and refreshed by the
# host's session update (configure, EnterPlanMode), but the approve transaction writes the
# session through another path that does not refresh it, so after approve the session
# still reads as Plan with its old permission mode (and the execution runs from that).
@variant("session-cache-misses-approve")
def _session_cache_misses_approve() -> None:
    update = Storage.update_session

    async def require_session(self: Host, session_id: str) -> SessionRow:
        cached = _SESSIONS.get(session_id)
        if cached is not None:
            return cached
        from reference_host.errors import HostError

        row = await self.storage.get_session(session_id)
        if row is None:
            raise HostError("SESSION_NOT_FOUND", f"no session {session_id!r}")
        _SESSIONS[session_id] = row
        return row

    async def update_session(self: Storage, session: SessionRow) -> None:
        await update(self, session)
        _SESSIONS[session.id] = session

    patch(Host, "require_session", require_session)
    patch(Storage, "update_session", update_session)


_ON_DEMAND: contextvars.ContextVar[bool] = contextvars.ContextVar("on_demand", default=False)


# R3.11: one expiry timer is kept per workspace root (the project's pending plan); a plan
# submitted in another session of the same project replaces the timer of the first one,
# which then expires only when someone approves or rejects it after its deadline.
@variant("expiry-timer-per-workspace-root")
def _expiry_timer_per_workspace_root() -> None:
    latest: dict[str, str] = {}
    submit, expire, decidable = Approvals.submit, Approvals.expire, Approvals._ensure_decidable

    async def _submit(self: Approvals, session: SessionRow, turn_id: str, args: Any) -> Any:
        row = await submit(self, session, turn_id, args)
        latest[session.workspace_root or session.id] = row.id
        return row

    async def _expire(self: Approvals, approval_id: str) -> None:
        if not _ON_DEMAND.get():
            row = await self.host.storage.get_approval(approval_id)
            if row is not None:
                session = await self.host.storage.get_session(row.session_id)
                root = session.workspace_root if session and session.workspace_root else None
                if root is not None and latest.get(root, approval_id) != approval_id:
                    return  # its timer was replaced
        await expire(self, approval_id)

    async def _ensure_decidable(self: Approvals, row: Any) -> None:
        token = _ON_DEMAND.set(True)
        try:
            await decidable(self, row)
        finally:
            _ON_DEMAND.reset(token)

    patch(Approvals, "submit", _submit)
    patch(Approvals, "expire", _expire)
    patch(Approvals, "_ensure_decidable", _ensure_decidable)


CASES = [
    BrokenCase(
        "permission-id-is-the-call-id",
        "isolation",
        "name_their_calls_alike",
        "R5.9",
        "both sessions' permission questions carry the id",
    ),
    BrokenCase(
        "approval-id-from-title",
        "artifact_integrity",
        "two_identical_submissions_at_the_same_moment",
        "R2.4",
        "2 plans were submitted, the host lists 1",
    ),
    BrokenCase(
        "command-id-from-text-and-time",
        "shell",
        "without_a_shell_of_its_own_follows",
        "R7.3",
        "came after its command/exited",
    ),
    BrokenCase(
        "shell-list-cached",
        "shell",
        "default_shell_can_be_changed_while",
        "R7.6",
        "the default shell is sh, not the chosen",
    ),
    BrokenCase(
        "turn-ids-count-per-session-from-start",
        "restart_interruption",
        "after_the_restart_the_user_can_ask",
        "R4.13",
        "the host refused a request the scenario needed",
        process="what it gets wrong lives in the host process, which an in-process restart keeps",
    ),
    BrokenCase(
        "session-cache-misses-approve",
        "approval",
        "approving_with_ask_switches",
        "R7.2",
        "the session is in plan mode",
    ),
    BrokenCase(
        "artifact-read-memoised",
        "artifact_integrity",
        "plan_opened_before_its_file_changed",
        "P13",
        "which the file no longer holds",
    ),
    BrokenCase(
        "provider-config-per-base-url",
        "sessions",
        "next_turn_asks_for_the_model_the_session_was_changed_to",
        "R5.6",
        "the turn asked the provider for the model 'mock-model'",
    ),
    BrokenCase(
        "task-timers-keyed-by-name",
        "scheduled_plan",
        "two_tasks_of_one_name_due_at_the_same_time",
        "P29",
        "enabled tasks that came due",
    ),
    BrokenCase(
        "expiry-timer-per-workspace-root",
        "deadline",
        "two_plans_of_one_project_waiting_at_once",
        "R3.11",
        "at its deadline the first session's plan reads pending",
    ),
    BrokenCase(
        "provider-per-workspace-root",
        "isolation",
        "asks_for_its_own_model_when_another_session",
        "R5.9",
        "asked the provider for the model 'another-model', not its own",
    ),
    BrokenCase(
        "turn-tasks-keyed-by-workspace-root",
        "isolation",
        "cancelling_one_of_two_sessions_of_a_project",
        "R5.9",
        "is no longer the session's active turn",
    ),
]
