"""Requests the steps need the host to grant, and what their typed results look like raw."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Final, ParamSpec, TypeVar, cast, get_args

from pydantic import BaseModel

from conformance.blame import CheckFailed
from conformance.client import HarnessError, RpcError
from conformance.protocol_models import PermissionMode, ProviderConfig
from conformance.world import World

T = TypeVar("T")
P = ParamSpec("P")


def sent_together(world: World, method: str, params: Sequence[BaseModel]) -> list[dict[str, Any]]:
    """Requests of ``method``, one per params, written in one go; their responses in order."""
    messages = [
        {
            "jsonrpc": "2.0",
            "id": world.rpc.next_id(),
            "method": method,
            "params": each.model_dump(mode="json"),
        }
        for each in params
    ]
    return world.rpc.call_together(messages)


def granted(call: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """Make a typed request the scenario needs: ``granted(world.rpc.approve, session, ...)``
    (or ``granted(lambda: ...)``).

    A refusal is a failed check, blamed like the step that needed it (never an error of
    the harness), also inside a :func:`~conformance.blame.blame` block: the block blames
    its own checks, not the requests they need. A result that does not fit its model is
    the host's failure too.
    """
    try:
        return call(*args, **kwargs)
    except RpcError as refused:
        message = f"the host refused a request the scenario needed: {refused}"
        raise CheckFailed(message, ()) from None


def field_differences(
    seen: dict[str, Any], held: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The fields where two reports of one record differ: ``seen``'s values, ``held``'s."""
    keys = sorted(k for k in seen.keys() | held.keys() if seen.get(k) != held.get(k))
    return {k: seen.get(k) for k in keys}, {k: held.get(k) for k in keys}


ANNOUNCEMENT_GRACE_S: Final = 2.0  # for an announcement already on its way


def announced_alike(
    world: World, method: str, key: str, record: dict[str, Any], last: int, label: str
) -> bool:
    """Whether ``record`` (as a read reported it) is what the ``method`` notification at
    index ``last`` announced under ``key``, or one announced after it (briefly waited
    for); a disagreement is recorded for judging after the steps (R7.2)."""
    try:
        world.wait_for(method, lambda p: p[key] == record, since=last, timeout=ANNOUNCEMENT_GRACE_S)
        return True
    except TimeoutError:
        shown, held = field_differences(world.notifications()[last]["params"][key], record)
        world.disagree(
            f"the last {method} of {label} shows {shown}; a read shows {held}: a change was "
            "announced with a stale record or not at all"
        )
        return False


def announcement_agrees(
    world: World, method: str, key: str, record: dict[str, Any], mark: int
) -> None:
    """The record a read reported (``key``: ``session`` or ``approval``) is the one the live
    host's last ``method`` of that record before the read announced, or one announced after
    it (every change is announced with the record as it then is, R7.2). ``mark`` is where
    the notifications stood before the read; an announcement still on its way is waited
    for, briefly, and each is judged once. Announcements of an earlier host process do not
    count: what the start-up recovery changed need not be announced."""
    wanted = record[f"{key}Id"]
    notes = world.notifications()
    first_live = len(world.retired_notifications)
    last = next(
        (
            i
            for i in range(min(mark, len(notes)) - 1, first_live - 1, -1)
            if notes[i]["method"] == method and notes[i]["params"][key][f"{key}Id"] == wanted
        ),
        None,
    )
    if last is None:
        return
    judged = (last, json.dumps(record, sort_keys=True))
    if world.boundary.announcement_judged.get(wanted) == judged:
        return
    announced_alike(world, method, key, record, last, f"{key} {wanted}")
    world.boundary.announcement_judged[wanted] = judged


STABLE_READS: Final = 3


def read_stably(
    world: World,
    key: str,
    get: Callable[[], dict[str, Any]],
    listed: Callable[[], list[dict[str, Any]]],
) -> dict[str, Any]:
    """A record (``key``: ``session`` or ``approval``) read between two ``<key>/get``, and,
    when those agree, compared with its entry in the ``<key>/list`` read in between and
    with its last announcement (R7.2; while an execution moves on, the record may change
    between the reads). Disagreements are recorded for judging after the steps."""
    for _ in range(STABLE_READS):
        mark = world.mark()
        first = get()
        wanted = first[f"{key}Id"]
        entries = [entry for entry in listed() if entry[f"{key}Id"] == wanted]
        again = get()
        if first != again:
            continue
        announcement_agrees(world, f"{key}/updated", key, first, mark)
        if len(entries) != 1:
            world.disagree(f"{key}/list shows the {key} {wanted} {len(entries)} times")
        else:
            listed_values, got_values = field_differences(entries[0], first)
            if listed_values:
                world.disagree(
                    f"{key}/list shows the {key} with {listed_values}; {key}/get with "
                    f"{got_values} ({wanted})"
                )
        return first
    return again


def plain(model: BaseModel) -> dict[str, Any]:
    """A typed result as the JSON the host sent: the fields it gave, none defaulted."""
    return model.model_dump(mode="json", exclude_unset=True)


def mock_provider(world: World, model: str = "mock-model") -> ProviderConfig:
    """The scenario's mock model provider, as a session or task names it."""
    return ProviderConfig(baseUrl=world.provider.base_url, model=model)


PERMISSION_MODES: Final[tuple[str, ...]] = get_args(get_args(PermissionMode.__value__)[0])


def permission_mode(name: str) -> PermissionMode:
    """A permission mode a feature names; one the protocol lacks is the harness's fault
    (a step that sends an unknown mode on purpose sends it raw)."""
    if name not in PERMISSION_MODES:
        raise HarnessError(f"{name!r} is not a permission mode of protocol v9")
    return cast("PermissionMode", name)


LIST_IDS: Final = {
    "sessions": "sessionId",
    "tasks": "taskId",
    "shells": "shellId",
    "approvals": "approvalId",
}


def listing(answer: dict[str, Any]) -> dict[str, Any]:
    """A list answer with its items in id order, for comparing two reads of it.

    The contract publishes no order for `session/list`, `task/list` and `shell/list`, and
    lets approvals created at one instant tie; two reads of the same state may list their
    items in different orders.
    """
    ordered = dict(answer)
    for key, id_key in LIST_IDS.items():
        items = answer.get(key)
        if isinstance(items, list):
            ordered[key] = sorted(items, key=lambda item: str(item.get(id_key)))
    return ordered
