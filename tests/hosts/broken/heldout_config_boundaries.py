"""Broken hosts: a held-out set (session configuration boundaries), written from the
contract alone.

Five of these twelve were caught from the start (a refused change announced, a change
while an approved plan is queued, a cleared shell announced as the old one, SESSION_BUSY
instead of APPROVAL_PENDING, a model change while a plan is pending). The other seven are
caught now: a permission-mode change while a turn waits for a permission answer, a
scheduled run's session taking changes and one run holding back every other session, a
configure naming the values the session already has, the default shell refused while a
session that follows it is busy, a refused change applied once the turn ended, and
another session of the same workspace root holding back an idle session.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from hosts.registry import BrokenCase, patch, variant
from reference_host import host as host_module
from reference_host.errors import HostError
from reference_host.host import Host
from reference_host.state import Activity, ensure_idle_for
from reference_host.storage import SessionRow
from reference_host.turns import TurnRunner

Guard = Callable[[Host, SessionRow, dict[str, Any]], Awaitable[None]]
Announce = Callable[[Host, SessionRow, SessionRow, dict[str, Any]], dict[str, Any]]


def _changes(params: dict[str, Any]) -> dict[str, Any]:
    """The session columns a session/configure names, as the reference host reads them."""
    changes: dict[str, Any] = {}
    if "mode" in params:
        changes["mode"] = params["mode"]
    if "permissionMode" in params:
        changes["permission_mode"] = params["permissionMode"]
    if "provider" in params:
        changes["provider_base_url"] = params["provider"]["baseUrl"]
        changes["model"] = params["provider"]["model"]
    if "shellId" in params:
        if params["shellId"] is not None:
            host_module._require_shell(params["shellId"])
        changes["shell_id"] = params["shellId"]
    return changes


async def _reference_guard(host: Host, row: SessionRow, params: dict[str, Any]) -> None:
    ensure_idle_for(host.activity_of(row.id), "configuration change")


def _configure(guard: Guard = _reference_guard, announce: Announce | None = None) -> None:
    """The reference session/configure with its idle check (and, optionally, the session it
    announces) replaced."""

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        await guard(self, row, params)
        changes = _changes(params)
        updated = replace(row, **changes, updated_at=self.clock.now_ms())
        await self.storage.update_session(updated)
        wire = self.session_wire(updated)
        announced = announce(self, row, updated, changes) if announce else wire
        self.notify("session/updated", {"session": announced})
        return {"session": wire}

    patch(Host, "session_configure", session_configure)


def _track_turn_kinds() -> dict[str, str]:
    """turn id -> kind of every turn started, filled as turns start."""
    kinds: dict[str, str] = {}
    start = TurnRunner.start

    async def tracked(self: TurnRunner, session: Any, kind: str, *args: Any, **kw: Any) -> str:
        turn_id = await start(self, session, kind, *args, **kw)
        kinds[turn_id] = kind
        return turn_id

    patch(TurnRunner, "start", tracked)
    return kinds


def _busy(what: str, activity: Activity) -> HostError:
    return HostError(
        "SESSION_BUSY",
        f"{what} refused: the session has an active turn",
        {"turnId": activity.active_turn_id, "executionId": activity.active_execution_id},
    )


# R5.3 / R5.1: a turn waiting for a permission answer is active, yet the host lets a
# configure that changes only the permission mode through (so that the user can "switch to
# auto" instead of answering); every other change is still refused while the turn waits.
@variant("permission-mode-change-while-asking")
def _permission_mode_change_while_asking() -> None:
    async def guard(host: Host, row: SessionRow, params: dict[str, Any]) -> None:
        asking = any(
            request.session_id == row.id and not request.answer.done()
            for request in host.permissions._open.values()
        )
        if asking and set(params) == {"sessionId", "permissionMode"}:
            return
        ensure_idle_for(host.activity_of(row.id), "configuration change")

    _configure(guard)


# R7.2 / R5.3: the host announces the requested configuration (a session/updated carrying
# the new values) before it checks that the session is idle; the refusal then stores
# nothing, so the last session/updated disagrees with session/get until the next change.
@variant("refused-configure-announced")
def _refused_configure_announced() -> None:
    async def guard(host: Host, row: SessionRow, params: dict[str, Any]) -> None:
        wished = replace(row, **_changes(params), updated_at=host.clock.now_ms())
        host.notify("session/updated", {"session": host.session_wire(wished)})
        ensure_idle_for(host.activity_of(row.id), "configuration change")

    _configure(guard)


# R5.3 / R5.9: one scheduled run under way makes the host refuse configuration of every
# session (it keeps "an unattended run is active" as one host-wide flag), also of idle
# sessions that have nothing to do with the task.
@variant("scheduled-run-blocks-every-session")
def _scheduled_run_blocks_every_session() -> None:
    kinds = _track_turn_kinds()

    async def guard(host: Host, row: SessionRow, params: dict[str, Any]) -> None:
        ensure_idle_for(host.activity_of(row.id), "configuration change")
        for session_id, activity in list(host.activity.items()):
            if kinds.get(activity.active_turn_id or "") == "scheduled":
                raise HostError(
                    "SESSION_BUSY",
                    "configuration change refused: a scheduled run is under way",
                    {"sessionId": session_id, "turnId": activity.active_turn_id},
                )

    _configure(guard)


# R5.3: the session of a scheduled run accepts a mode, provider, permission-mode or shell
# change while the run's turn is still under way (the host checks only interactive turns:
# "nobody is attending that session").
@variant("scheduled-run-session-configurable")
def _scheduled_run_session_configurable() -> None:
    kinds = _track_turn_kinds()

    async def guard(host: Host, row: SessionRow, params: dict[str, Any]) -> None:
        activity = host.activity_of(row.id)
        if kinds.get(activity.active_turn_id or "") == "scheduled":
            return
        ensure_idle_for(activity, "configuration change")

    _configure(guard)


# R5.3 / R4.5: an approved execution that is still queued (its turn not yet started)
# does not make the session busy for configuration: the host checks only for an active
# turn and a pending approval, so a change lands between approve and the execution turn.
@variant("configure-while-queued")
def _configure_while_queued() -> None:
    async def guard(host: Host, row: SessionRow, params: dict[str, Any]) -> None:
        activity = host.activity_of(row.id)
        ensure_idle_for(replace(activity, active_execution_id=None), "configuration change")

    _configure(guard)


# P4 / R5.6: "a session/configure that names nothing to change" is read as "changes
# nothing": an idle session asked for the mode, permission mode, provider or shell it
# already has gets INVALID_PARAMS instead of the (unchanged) session.
@variant("same-value-configure-refused")
def _same_value_configure_refused() -> None:
    async def guard(host: Host, row: SessionRow, params: dict[str, Any]) -> None:
        ensure_idle_for(host.activity_of(row.id), "configuration change")
        changes = _changes(params)
        if all(getattr(row, column) == value for column, value in changes.items()):
            raise HostError("INVALID_PARAMS", "session/configure names nothing to change")

    _configure(guard)


# R7.6 / methods.json (shell/setDefault errors): the host refuses to change its default
# shell with SESSION_BUSY while a session that follows the default (no shell of its own)
# has a turn under way, applying R5.4 to the host-wide setting; shell/setDefault has no
# such error and nothing in the contract ties it to a session's activity.
@variant("set-default-refused-while-busy")
def _set_default_refused_while_busy() -> None:
    original = Host.shell_set_default

    async def shell_set_default(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        for session_id, activity in list(self.activity.items()):
            if activity.active_turn_id is None:
                continue
            row = await self.storage.get_session(session_id)
            if row is not None and row.shell_id is None:
                raise _busy("default shell change", activity)
        return await original(self, params)

    patch(Host, "shell_set_default", shell_set_default)


# R7.2 / R7.3: the session/updated of a configure is built by merging the non-null values
# of the request into the old session, so `shellId: null` (clear the session's own shell)
# is announced with the old shell while the answer, session/get and the row read null.
@variant("cleared-shell-announced-as-old")
def _cleared_shell_announced_as_old() -> None:
    def announce(
        host: Host, old: SessionRow, new: SessionRow, changes: dict[str, Any]
    ) -> dict[str, Any]:
        merged = replace(old, **{k: v for k, v in changes.items() if v is not None})
        return host.session_wire(merged)

    _configure(announce=announce)


# R5.3 / R5.6: a configure refused with SESSION_BUSY is remembered and applied (stored and
# announced) as soon as the session is idle again, although the client was told it was
# refused and changed nothing.
@variant("refused-configure-applied-later")
def _refused_configure_applied_later() -> None:
    deferred: dict[str, dict[str, Any]] = {}
    configure = Host.session_configure
    set_activity = Host.set_activity
    background: set[asyncio.Task[Any]] = set()

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        try:
            return await configure(self, params)
        except HostError as error:
            if error.code == "SESSION_BUSY":
                deferred[params["sessionId"]] = {**deferred.get(params["sessionId"], {}), **params}
            raise

    async def apply(host: Host, params: dict[str, Any]) -> None:
        with contextlib.suppress(HostError):  # e.g. busy again by now
            await configure(host, params)

    def set_activity_(self: Host, session_id: str, **changes: str | None) -> None:
        set_activity(self, session_id, **changes)
        if self.activity_of(session_id).idle and session_id in deferred:
            task = asyncio.get_running_loop().create_task(apply(self, deferred.pop(session_id)))
            background.add(task)
            task.add_done_callback(background.discard)

    patch(Host, "session_configure", session_configure)
    patch(Host, "set_activity", set_activity_)


# R5.7: a configuration change while a plan approval is pending is refused, but with
# SESSION_BUSY (the host's configure has one "not idle" check) instead of APPROVAL_PENDING;
# prompts and cancels still get APPROVAL_PENDING.
@variant("configure-pending-as-busy")
def _configure_pending_as_busy() -> None:
    async def guard(host: Host, row: SessionRow, params: dict[str, Any]) -> None:
        activity = host.activity_of(row.id)
        if not activity.idle:
            raise _busy("configuration change", activity)

    _configure(guard)


# R5.7: while a plan approval is pending, a configure that changes only the provider (the
# model that will run the execution) is accepted; mode, permission mode and shell changes
# are still refused with APPROVAL_PENDING.
@variant("model-change-while-pending")
def _model_change_while_pending() -> None:
    async def guard(host: Host, row: SessionRow, params: dict[str, Any]) -> None:
        activity = host.activity_of(row.id)
        if set(params) == {"sessionId", "provider"} and activity.pending_approval_id:
            ensure_idle_for(replace(activity, pending_approval_id=None), "provider change")
            return
        ensure_idle_for(activity, "configuration change")

    _configure(guard)


# R5.3 / R5.9: the idle check looks at every session of the same workspace root (one agent
# per project folder), so configuring an idle session is refused with SESSION_BUSY while
# another session of that root has a turn under way.
@variant("busy-by-workspace-root")
def _busy_by_workspace_root() -> None:
    async def guard(host: Host, row: SessionRow, params: dict[str, Any]) -> None:
        ensure_idle_for(host.activity_of(row.id), "configuration change")
        if row.workspace_root is None:
            return
        for session_id, activity in list(host.activity.items()):
            if session_id == row.id or activity.active_turn_id is None:
                continue
            other = await host.storage.get_session(session_id)
            if other is not None and other.workspace_root == row.workspace_root:
                raise _busy("configuration change", activity)

    _configure(guard)


CASES = [
    BrokenCase(
        "permission-mode-change-while-asking",
        "turn_boundaries",
        "permission_answer_is_refused and permission",
        "R5.3",
        "expected the host to refuse",
    ),
    BrokenCase(
        "refused-configure-announced",
        "turn_boundaries",
        "changing_the_shell_during_a_turn",
        "R7.2",
        "two reports of one record disagreed",
    ),
    BrokenCase(
        "scheduled-run-blocks-every-session",
        "turn_boundaries",
        "takes_a_change_while and scheduled",
        "R5.9",
        "expected success, but the host refused",
    ),
    BrokenCase(
        "scheduled-run-session-configurable",
        "turn_boundaries",
        "scheduled_runs_session",
        "R5.3",
        "expected the host to refuse",
    ),
    BrokenCase(
        "configure-while-queued",
        "turn_boundaries",
        "changing_the_configuration_while_an_approved_plan",
        "R5.6",
        "expected the host to refuse",
    ),
    BrokenCase(
        "same-value-configure-refused",
        "sessions",
        "settings_it_already_has",
        "R5.6",
        "expected success, but the host refused",
    ),
    BrokenCase(
        "set-default-refused-while-busy",
        "shell",
        "follows_it_is_busy",
        "R7.6",
        "expected success, but the host refused",
    ),
    BrokenCase(
        "cleared-shell-announced-as-old",
        "shell",
        "shell_of_its_own_is_cleared",
        "R7.2",
        "two reports of one record disagreed",
    ),
    BrokenCase(
        "refused-configure-applied-later",
        "turn_boundaries",
        "not_applied_when_the_turn_ends",
        "R5.6",
        "the refused change took effect",
    ),
    BrokenCase(
        "configure-pending-as-busy",
        "turn_boundaries",
        "while_a_plan_is_pending and mode",
        "R5.7",
        "expected APPROVAL_PENDING",
    ),
    BrokenCase(
        "model-change-while-pending",
        "turn_boundaries",
        "while_a_plan_is_pending and model",
        "R5.7",
        "expected the host to refuse",
    ),
    BrokenCase(
        "busy-by-workspace-root",
        "turn_boundaries",
        "takes_a_change_while and another",
        "R5.9",
        "expected success, but the host refused",
    ),
]
