"""An allowed variation of list order: the contract fixes the order of `approval/list`
only (oldest first), so a host may list sessions, tasks and shells in any order, and
approvals created at one instant in either order, differently at every call."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from itertools import groupby
from typing import Any

from hosts.registry import AllowedCase, patch, variant

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


CASES = [
    AllowedCase(
        "lists-in-any-order",
        "sessions,scheduled_plan,shell,approval,restart_interruption,protocol_errors,isolation",
        why="only approval/list has a published order (oldest first); ties and other lists are "
        "the host's to order",
    ),
]
