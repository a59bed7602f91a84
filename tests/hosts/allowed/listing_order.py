"""An allowed variation of list order: the contract fixes the order of `approval/list`
only (oldest first), so a host may list sessions, tasks and shells in any order, and
approvals created at one instant in either order, differently at every call."""

from __future__ import annotations

import random
import weakref
from collections.abc import Awaitable, Callable
from itertools import groupby
from typing import Any

from hosts.registry import AllowedCase, patch, variant
from reference_host.storage import ApprovalRow, SessionRow, Storage

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


def _shuffled(handler: Handler, key: str, ties: str | None = None) -> Handler:
    async def listed(params: dict[str, Any]) -> dict[str, Any]:
        answer = await handler(params)
        items = list(answer[key])
        if ties is None:
            random.shuffle(items)
        else:  # keep the published order, shuffle only items that tie on it
            groups = [list(g) for _, g in groupby(items, key=lambda item: item[ties])]
            for group in groups:
                random.shuffle(group)
            items = [item for group in groups for item in group]
        return {**answer, key: items}

    return listed


@variant("lists-in-any-order")
def _lists_in_any_order() -> None:
    from reference_host.host import Host

    original = Host.handlers

    def handlers(self: Host) -> dict[str, Any]:
        table = original(self)
        table["session/list"] = _shuffled(table["session/list"], "sessions")
        table["task/list"] = _shuffled(table["task/list"], "tasks")
        table["shell/list"] = _shuffled(table["shell/list"], "shells")
        table["approval/list"] = _shuffled(table["approval/list"], "approvals", "createdAt")
        return table

    patch(Host, "handlers", handlers)


@variant("session-list-reordered-after-restart")
def _session_list_reordered_after_restart() -> None:
    # Written as a broken host from a rule the contract never stated (that a restart keeps
    # the order of session/list). This host keeps its sessions in a registry it fills at
    # start-up "most recent first" and appends new ones to, so a restart reorders the list:
    # the same sessions, each as it was, which is all R4.2 asks.
    born: weakref.WeakKeyDictionary[Storage, list[str]] = weakref.WeakKeyDictionary()
    original_insert = Storage.insert_session
    original_list = Storage.list_sessions

    async def insert_session(self: Storage, session: SessionRow) -> None:
        await original_insert(self, session)
        born.setdefault(self, []).append(session.id)

    async def list_sessions(self: Storage) -> list[SessionRow]:
        rows = await original_list(self)
        here = born.get(self, [])
        loaded = [row for row in rows if row.id not in here]
        loaded.sort(key=lambda row: (row.created_at, row.id), reverse=True)
        return loaded + [row for row in rows if row.id in here]

    patch(Storage, "insert_session", insert_session)
    patch(Storage, "list_sessions", list_sessions)


@variant("approval-ties-reversed-after-restart")
def _approval_ties_reversed_after_restart() -> None:
    # Written as a broken host from a rule the contract never stated. Approvals loaded after
    # a restart are read newest first and reversed, so two created at one host-clock instant
    # swap places; the list is still oldest first by createdAt, which is the published order.
    born: weakref.WeakKeyDictionary[Storage, set[str]] = weakref.WeakKeyDictionary()
    original_insert = Storage.insert_approval
    original_list = Storage.list_approvals

    async def insert_approval(self: Storage, row: ApprovalRow) -> None:
        await original_insert(self, row)
        born.setdefault(self, set()).add(row.id)

    async def list_approvals(self: Storage, session_id: str) -> list[ApprovalRow]:
        rows = await original_list(self, session_id)
        here = born.get(self, set())
        if all(row.id in here for row in rows):
            return rows
        return sorted(reversed(rows), key=lambda row: row.created_at)

    patch(Storage, "insert_approval", insert_approval)
    patch(Storage, "list_approvals", list_approvals)


CASES = [
    AllowedCase(
        "session-list-reordered-after-restart",
        "restart_interruption",
        "a_restart_with_nothing_to_recover_changes_no",
        why="session/list has no published order; a restart may list the same sessions otherwise",
    ),
    AllowedCase(
        "approval-ties-reversed-after-restart",
        "restart_interruption",
        "a_restart_with_nothing_to_recover_changes_no",
        why="approvals created at one instant may come in either order in approval/list",
    ),
    AllowedCase(
        "lists-in-any-order",
        "sessions,scheduled_plan,shell,approval,restart_interruption,protocol_errors,isolation",
        why="only approval/list has a published order (oldest first); ties and other lists are "
        "the host's to order",
    ),
]
