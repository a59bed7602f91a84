"""Allowed variations around the rules the latest round added to the contract (a zone of
UTC+05:30, the structure compared after every scenario, numbers written as digits, the
approval pending while its Plan turn ends, a plan file saved anew, a task that has run for
its time), and the checks the suite gained with them, written from the contract alone."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import time
import weakref
from dataclasses import replace
from typing import Any

from hosts.registry import AllowedCase, patch, variant
from reference_host import artifacts, commands, ids, permissions, server, turns
from reference_host import host as host_module
from reference_host.approvals import Approvals, approval_wire
from reference_host.clock import wall_time_ms
from reference_host.errors import HostError
from reference_host.host import Host
from reference_host.provider_client import AssistantReply
from reference_host.storage import SessionRow, Storage
from reference_host.tasks import Tasks
from reference_host.tools import browser, files
from reference_host.tools.base import ToolContext
from reference_host.turns import TurnRunner

# -- the machine's time zone: bookkeeping and messages -------------------------------------


@variant("fl-bookkeeping-on-system-clock")
def _bookkeeping_on_system_clock() -> None:
    # Conformance mode: "bookkeeping columns the protocol never reports (`updated_at`, the
    # times of `command_audit`) may follow the system clock", and P32 only asks that the
    # time zone change nothing (epoch milliseconds are the same in every zone). This host
    # writes `sessions.updated_at`, `scheduled_tasks.updated_at` and command_audit's
    # `started_at`/`ended_at` from the system clock (epoch ms, UTC), not the host clock.
    insert_session = Storage.insert_session
    write_session = Storage.write_session
    insert_task = Storage.insert_task
    update_task = Storage.update_task
    record_command = Storage.record_command

    async def inserting(self: Storage, session: SessionRow) -> None:
        await insert_session(self, replace(session, updated_at=wall_time_ms()))

    async def writing(conn: Any, session: SessionRow) -> None:
        await write_session(conn, replace(session, updated_at=wall_time_ms()))

    async def inserting_task(self: Storage, task: dict[str, Any]) -> None:
        await insert_task(self, {**task, "updated_at": wall_time_ms()})

    async def updating_task(self: Storage, task_id: str, changes: dict[str, Any]) -> None:
        if "updated_at" in changes:
            changes = {**changes, "updated_at": wall_time_ms()}
        await update_task(self, task_id, changes)

    async def recording(self: Storage, values: dict[str, Any]) -> None:
        now = wall_time_ms()
        values = {
            **values,
            **{column: now for column in ("started_at", "ended_at") if column in values},
        }
        await record_command(self, values)

    patch(Storage, "insert_session", inserting, wraps=True)
    patch(Storage, "write_session", staticmethod(writing), wraps=True)
    patch(Storage, "insert_task", inserting_task, wraps=True)
    patch(Storage, "update_task", updating_task, wraps=True)
    patch(Storage, "record_command", recording, wraps=True)


@variant("fl-messages-quote-local-time-and-decimals")
def _messages_quote_local_time_and_decimals() -> None:
    # "error and log message texts" are the host's (What the suite does not require); P5's
    # digits rule is about the protocol's numbers, not about text inside a string. This host
    # ends every error message with the machine's local time (read in its zone, +05:30)
    # and figures written with a fraction and an exponent: the JSON numbers stay integers.
    init = HostError.__init__

    def initialising(
        self: HostError, code: str, message: str, details: dict[str, Any] | None = None
    ) -> None:
        local = time.strftime("%Y-%m-%d %H:%M:%S %z", time.localtime())
        stamp = f"{time.time():.3f}"
        init(self, code, f"{message} [local {local}; at {stamp} s; budget 1.5e3 ms, v9.0]", details)

    patch(HostError, "__init__", initialising, wraps=True)


# -- identifiers written as digits ---------------------------------------------------------


@variant("fl-digit-string-ids")
def _digit_string_ids() -> None:
    # "identifiers' format (session, turn, approval, execution, command and shell ids)" is
    # the host's, and `Id` is any string of 1 to 200 characters. This host's ids are strings
    # of digits only (the nanosecond time of its start, a counter, random digits), such as
    # "17966688274330001000042": strings on the wire, never numbers, so P5 does not touch
    # them. The boot time keeps them apart across restarts (a permission requestId too).
    boot = time.time_ns()
    counter = itertools.count(1)

    def new_id(prefix: str) -> str:
        return f"{boot}{next(counter):09d}{int.from_bytes(os.urandom(6), 'big'):015d}"

    for module in (ids, host_module, permissions, commands):
        patch(module, "new_id", new_id)


# -- the approval: expiry, reads, the Plan turn that submitted it, the artifact -------------


@variant("fl-expiry-announced-again-later")
def _expiry_announced_again_later() -> None:
    # An expiry is announced before the clock move's answer (Ordering), and "announcing a
    # session or an approval again when nothing changed" is the host's (`approval/updated`
    # and `session/updated` "carry the record as it now is"). This host announces an
    # expired approval and its session once more, as they then are, on the next pass of its
    # event loop, after the clock call was answered.
    expire = Approvals.expire

    async def expiring(self: Approvals, approval_id: str) -> None:
        before = await self.host.storage.get_approval(approval_id)
        await expire(self, approval_id)
        if before is None or before.status != "pending":
            return
        host = self.host

        async def again() -> None:
            with contextlib.suppress(Exception):
                row = await host.storage.get_approval(approval_id)
                if row is not None and row.status == "expired":
                    host.notify("approval/updated", {"approval": approval_wire(row)})
                    await host.publish_session(row.session_id)

        loop = asyncio.get_running_loop()
        loop.call_soon(lambda: _keep(host, loop.create_task(again())))

    patch(Approvals, "expire", expiring, wraps=True)


_BACKGROUND: weakref.WeakKeyDictionary[Any, set[asyncio.Task[Any]]] = weakref.WeakKeyDictionary()


def _keep(owner: Any, task: asyncio.Task[Any]) -> None:
    """Hold a fire-and-forget task until it is done (the event loop keeps weak refs)."""
    tasks = _BACKGROUND.setdefault(owner, set())
    tasks.add(task)
    task.add_done_callback(tasks.discard)


@variant("fl-approval-announced-on-read")
def _approval_announced_on_read() -> None:
    # The same freedom ("announcing ... an approval again when nothing changed"): this host
    # announces the approval with `approval/updated`, as it now is, before it answers every
    # `approval/get` and `artifact/read` of it.
    approval_get = Host.approval_get
    artifact_read = Host.artifact_read

    async def getting(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await approval_get(self, params)
        self.notify("approval/updated", {"approval": result["approval"]})
        return result

    async def reading(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await artifact_read(self, params)
        row = await self.storage.get_approval(params["approvalId"])
        if row is not None:
            self.notify("approval/updated", {"approval": approval_wire(row)})
        return result

    patch(Host, "approval_get", getting, wraps=True)
    patch(Host, "artifact_read", reading, wraps=True)


PLAN_TURN_END_DELAY_S = 0.15


@variant("fl-plan-turn-ends-slowly-pending-first")
def _plan_turn_ends_slowly_pending_first() -> None:
    # "The approval is pending from its `approval/updated` on, also while the Plan turn that
    # submitted it is still ending: a cancel then gets `APPROVAL_PENDING` too, and that turn
    # still ends `completed`"; how long a turn takes to end is not stated. This host takes
    # 150 ms to end the Plan turn that submitted a plan (the plan already pending), and
    # answers APPROVAL_PENDING (not SESSION_BUSY) to a prompt, change or cancel meanwhile;
    # an approve or reject waits for the turn to end.
    end = TurnRunner._end

    async def slowly(
        self: TurnRunner,
        session_id: str,
        turn_id: str,
        approval: Any,
        on_end: Any,
        outcome: str,
        error: HostError | None,
    ) -> None:
        activity = self.host.activity_of(session_id)
        if activity.pending_approval_id is not None and activity.active_turn_id == turn_id:
            await asyncio.sleep(PLAN_TURN_END_DELAY_S)
        await end(self, session_id, turn_id, approval, on_end, outcome, error)

    patch(TurnRunner, "_end", slowly, wraps=True)


@variant("fl-artifact-owner-writable")
def _artifact_owner_writable() -> None:
    # Plan artifacts: "The file mode is yours (the reference host makes them read-only);
    # immutability is judged by effect." This host creates each artifact with mode 0644.
    # Approve and artifact/read still check the bytes on every call (P13).
    patch(artifacts, "READ_ONLY", 0o644)


# -- a turn: EnterPlanMode's announcement, an answer with no text -------------------------

_MODE_CHANGED: weakref.WeakKeyDictionary[Host, set[str]] = weakref.WeakKeyDictionary()


@variant("fl-plan-mode-announced-after-its-result")
def _plan_mode_announced_after_its_result() -> None:
    # Ordering: "A change made during a turn (`EnterPlanMode` switching the session to Plan)
    # is announced when it is made, while the turn still runs, not only once the turn has
    # ended"; its place among the call's `turn/toolResult` is not named ("the order of
    # notifications ... where Ordering names none" is the host's). This host stores the mode
    # at the call and announces the session once the calls of that message have their
    # results, before it asks the model again.
    run_batch = TurnRunner._run_batch

    async def entering(self: Host, session: SessionRow) -> None:
        await self.storage.update_session(
            replace(session, mode="plan", updated_at=self.clock.now_ms())
        )
        _MODE_CHANGED.setdefault(self, set()).add(session.id)

    async def batch(self: TurnRunner, session: SessionRow, *args: Any, **kwargs: Any) -> Any:
        try:
            return await run_batch(self, session, *args, **kwargs)
        finally:
            changed = _MODE_CHANGED.get(self.host, set())
            if session.id in changed:
                changed.discard(session.id)
                await self.host.publish_session(session.id)

    patch(Host, "enter_plan_mode", entering)
    patch(TurnRunner, "_run_batch", batch, wraps=True)


@variant("fl-textless-answer-kept-as-empty-text")
def _textless_answer_kept_as_empty_text() -> None:
    # The conversation holds "the model's own words too, exactly as it gave them"; Chat
    # Completions takes an assistant message whose `content` is "" as well as null, and the
    # contract fixes neither for an answer without text. This host keeps such an answer
    # (with or without tool calls) with `content: ""`, in `transcript` and in later
    # provider requests alike.
    assistant_message = turns._assistant_message

    def message(reply: AssistantReply) -> dict[str, Any]:
        built = assistant_message(reply)
        if built.get("content") is None:
            built["content"] = ""
        return built

    patch(turns, "_assistant_message", message, wraps=True)


@variant("fl-textless-answer-announced-empty")
def _textless_answer_announced_empty() -> None:
    # P31: "the turn reports the assistant's text in `turn/text` notifications whose texts,
    # joined in order, are the model's full answer"; `TurnTextParams.text` is any string. For
    # an answer with no text this host still sends one `turn/text` with "" (the pieces
    # joined are still the full answer, "").
    ask_model = TurnRunner._ask_model

    async def asking(
        self: TurnRunner, session: SessionRow, turn_id: str, messages: list[dict[str, Any]]
    ) -> AssistantReply:
        reply = await ask_model(self, session, turn_id, messages)
        if not reply.text:
            self.host.notify("turn/text", {"sessionId": session.id, "turnId": turn_id, "text": ""})
        return reply

    patch(TurnRunner, "_ask_model", asking, wraps=True)


# -- commands and tools -----------------------------------------------------------------


@variant("fl-default-timeout-one-hour")
def _default_timeout_one_hour() -> None:
    # "The per-call timeout is the tool argument `timeout_ms`; the default is yours", and
    # the schema allows up to one hour. This host's default is that hour (3,600,000 ms) on
    # its host clock.
    init = Host.__init__

    def initialising(self: Host, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        patch(self.options, "command_timeout_ms", 3_600_000)

    patch(Host, "__init__", initialising, wraps=True)


@variant("fl-glob-json-list")
def _glob_json_list() -> None:
    # P10: `Glob` "gives the workspace-relative paths of the files that match, and only
    # those, each named as it is on disk"; the layout of the list is not fixed (the
    # reference's one path a line is its own). This host gives a JSON array of the paths
    # (`["a.md","b.bin"]`, names unescaped), and `[]` when nothing matches.
    glob = files.Glob.run

    async def listing(self: files.Glob, ctx: ToolContext, args: dict[str, Any]) -> str:
        text = await glob(self, ctx, args)
        paths = [] if text == files.NO_MATCHES else text.split("\n")
        return json.dumps(paths, ensure_ascii=False)

    patch(files.Glob, "run", listing, wraps=True)


@variant("fl-browser-preview-labelled")
def _browser_preview_labelled() -> None:
    # P10: `BrowserPreview` "fetches the loopback URL ... and gives the page's text"; the
    # layout around that text is not fixed (the reference's `status: <code>` line is its
    # own). This host heads the page's text with the URL asked for and the status, in
    # lines of its own, and closes it with an end line: `url: http://localhost:.../`,
    # `HTTP 200`, a blank line, the text, `-- end of page --`.
    run = browser.BrowserPreview.run

    async def labelled(self: browser.BrowserPreview, ctx: ToolContext, args: dict[str, Any]) -> str:
        text = await run(self, ctx, args)
        status, _, body = text.partition("\n\n")
        code = status.removeprefix("status: ")
        return f"url: {args.get('url')}\nHTTP {code}\n\n{body}\n-- end of page --"

    patch(browser.BrowserPreview, "run", labelled, wraps=True)


# -- scheduled tasks: has run for its time ----------------------------------------------------

FIRED_KEY = "fl.task-ran-for."
_FIRED: weakref.WeakKeyDictionary[Tasks, dict[str, int]] = weakref.WeakKeyDictionary()


@variant("fl-task-ran-recorded-in-settings")
def _task_ran_recorded_in_settings() -> None:
    # P29: "Once a task has run at its `runAt`, whether it still reads that time or `null`
    # is yours; either way it has run for that time ... Only a new `runAt` (or `task/run`)
    # runs it again", and `settings` may hold "rows under keys of your own (in the
    # migration or later)". This host keeps `runAt` when a task fires and records that it
    # ran for that time in a `settings` row of its own (`fl.task-ran-for.<taskId>`), read
    # back at every start; a `task/update` naming `runAt` forgets the record.
    schedule_all = Tasks.schedule_all
    arm = Tasks._arm
    update = Tasks.update
    delete = Tasks.delete

    def fired(tasks: Tasks) -> dict[str, int]:
        return _FIRED.setdefault(tasks, {})

    async def scheduling(self: Tasks) -> None:
        storage = self.host.storage
        async with storage._conn.execute(
            "SELECT key, value FROM settings WHERE key LIKE 'fl.task-ran-for.%'"
        ) as cursor:
            for key, value in await cursor.fetchall():
                if value:
                    fired(self)[str(key)[len(FIRED_KEY) :]] = int(value)
        await schedule_all(self)

    def arming(self: Tasks, task_id: str, run_at: int | None) -> None:
        if run_at is not None and fired(self).get(task_id) == run_at:
            run_at = None
        arm(self, task_id, run_at)

    async def firing(self: Tasks, task_id: str) -> None:
        self._timers.pop(task_id, None)
        row = await self.host.storage.get_task(task_id)
        if row is None or not row["enabled"] or row["run_at"] is None:
            return
        if fired(self).get(task_id) == row["run_at"]:
            return
        fired(self)[task_id] = row["run_at"]
        await self.host.storage.set_setting(FIRED_KEY + task_id, str(row["run_at"]))
        with contextlib.suppress(HostError):  # already recorded and announced as refused
            await self.run(row)

    async def updating(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        task_id = params["taskId"]
        known = await self.host.storage.get_task(task_id) is not None
        if "runAt" in params and known and fired(self).pop(task_id, None) is not None:
            await self.host.storage.set_setting(FIRED_KEY + task_id, "")
        return await update(self, params)

    async def deleting(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        result = await delete(self, params)
        if fired(self).pop(params["taskId"], None) is not None:
            await self.host.storage.set_setting(FIRED_KEY + params["taskId"], "")
        return result

    patch(Tasks, "schedule_all", scheduling, wraps=True)
    patch(Tasks, "_arm", arming, wraps=True)
    patch(Tasks, "_fire", firing)
    patch(Tasks, "update", updating, wraps=True)
    patch(Tasks, "delete", deleting, wraps=True)


# -- the database: rows of its own, a header field ------------------------------------------

COUNTER_KEY = "fl.sessions-created"


@variant("fl-counter-in-settings")
def _counter_in_settings() -> None:
    # Storage: no table "your host adds later (a counter, a log table)"; but "You may add
    # `settings` rows under keys of your own (in the migration or later)". This host keeps
    # its counter of created sessions in a settings row (`fl.sessions-created`), written in
    # the session/create that counts.
    session_create = Host.session_create

    async def creating(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await session_create(self, params)
        count = int(await self.storage.get_setting(COUNTER_KEY) or "0")
        await self.storage.set_setting(COUNTER_KEY, str(count + 1))
        return result

    patch(Host, "session_create", creating, wraps=True)


APPLICATION_ID = 0x50493533


@variant("fl-application-id")
def _application_id() -> None:
    # Storage: the structure compared is "every table, every column ..., every foreign key
    # ..., every index ..., and every `CHECK`"; nothing may be added: "no other table,
    # column, index, view or trigger". The database header's `application_id` is none of
    # these. This host stamps it on a database it creates (once, when it creates it).
    prepare = Storage._prepare_schema

    async def preparing(self: Storage) -> None:
        new = await self.user_version() == 0 and await self._is_empty()
        await prepare(self)
        if new:
            await self._conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            await self._conn.commit()

    patch(Storage, "_prepare_schema", preparing, wraps=True)


# -- the wire: member order and escapes ---------------------------------------------------


def _reversed_members(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _reversed_members(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [_reversed_members(item) for item in value]
    return value


@variant("fl-wire-members-reversed-ascii")
def _wire_members_reversed_ascii() -> None:
    # Framing: "Each message is one compact JSON object in UTF-8": an object's members have
    # no order in JSON (the host itself must read "an object's members in any order"), and
    # ASCII with `\u` escapes is UTF-8 and the same JSON value. This host writes every
    # object's members in reverse order (`{"result":...,"id":1,"jsonrpc":"2.0"}`) and every
    # non-ASCII character as a `\u` escape; numbers stay digits (P5).
    def encode(message: Any) -> bytes:
        text = json.dumps(
            _reversed_members(message), ensure_ascii=True, separators=(",", ":"), allow_nan=False
        )
        return text.encode("ascii")

    patch(server, "encode", encode)


CASES = [
    AllowedCase(
        "fl-bookkeeping-on-system-clock",
        "sessions,scheduled_plan,shell,restart_interruption,migration",
        why="updated_at and command_audit times may follow the system clock",
    ),
    AllowedCase(
        "fl-messages-quote-local-time-and-decimals",
        "protocol_errors,handshake,deadline,scheduled_plan,plan_tools",
        why="error message texts are the host's: local time and decimals inside strings",
    ),
    AllowedCase(
        "fl-digit-string-ids",
        "sessions,approval,execution,shell,scheduled_plan,handshake",
        why="identifiers' format is the host's: ids of digits only, sent as strings",
    ),
    AllowedCase(
        "fl-expiry-announced-again-later",
        "deadline,approval",
        why="an expired approval and its session announced again after the clock answer",
    ),
    AllowedCase(
        "fl-approval-announced-on-read",
        "approval,artifact_integrity,deadline",
        why="an approval announced again, unchanged, before each approval/get, artifact/read",
    ),
    AllowedCase(
        "fl-plan-turn-ends-slowly-pending-first",
        "submit_plan,turn_boundaries,approval",
        why="the submitting Plan turn takes 150 ms to end; APPROVAL_PENDING meanwhile",
    ),
    AllowedCase(
        "fl-artifact-owner-writable",
        "artifact_integrity,submit_plan",
        why="the artifact's file mode is the host's (0644)",
    ),
    AllowedCase(
        "fl-plan-mode-announced-after-its-result",
        "plan_tools,execution,turn_boundaries",
        why="EnterPlanMode's session/updated after the call's toolResult, before the model",
    ),
    AllowedCase(
        "fl-textless-answer-kept-as-empty-text",
        "sessions,plan_tools,migration",
        why="an answer without text kept with content '' rather than null",
    ),
    AllowedCase(
        "fl-textless-answer-announced-empty",
        "sessions,turn_boundaries,plan_tools",
        why="an answer without text announced by one empty turn/text",
    ),
    AllowedCase(
        "fl-default-timeout-one-hour",
        "shell,plan_tools",
        why="the default command timeout is the host's: one hour",
    ),
    AllowedCase(
        "fl-glob-json-list",
        "plan_tools,isolation",
        why="Glob's paths given as a JSON array",
    ),
    AllowedCase(
        "fl-browser-preview-labelled",
        "plan_tools,isolation",
        why="BrowserPreview's page text headed by the URL and status, closed by an end line",
    ),
    AllowedCase(
        "fl-task-ran-recorded-in-settings",
        "scheduled_plan,restart_interruption",
        why="runAt kept after a run; 'has run for that time' kept in a settings row",
    ),
    AllowedCase(
        "fl-counter-in-settings",
        "sessions,migration,restart_interruption",
        why="a host's own counter kept in a settings row, not in a table of its own",
    ),
    AllowedCase(
        "fl-application-id",
        "migration,restart_interruption,sessions",
        why="the database header's application_id is not part of the compared structure",
    ),
    AllowedCase(
        "fl-wire-members-reversed-ascii",
        "handshake,protocol_errors,sessions,plan_tools",
        why="JSON members in reverse order and non-ASCII written as \\u escapes",
    ),
]
