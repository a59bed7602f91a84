"""Broken hosts: a held-out set (listing and reading), written from the contract alone.

Eight of these thirteen were caught from the start; all are caught now: approval/list
for a session the host never made (P34, a new rule: SESSION_NOT_FOUND for reads as for
changes), a task listed, then changed an hour later (the list shows the change and the
task keeps its createdAt, P29), a transcript whose seq repeats (R1.3: seq grows from
entry to entry), and plans made either side of the moment the clock's count of
milliseconds gains a digit (R7.2: oldest first, compared as numbers).
"""

from __future__ import annotations

from typing import Any

from hosts.registry import BrokenCase, patch, variant
from reference_host.approvals import Approvals, approval_wire
from reference_host.host import Host
from reference_host.storage import Storage
from reference_host.tasks import Tasks


@variant("approval-list-sorted-as-text")
def _approval_list_sorted_as_text() -> None:
    # R7.2: approval/list is oldest first, but the host sorts the entries in memory by
    # createdAt compared as text (a default string sort), so an approval created after
    # the clock passed a power of ten (999999999999 -> 1000000000000) is listed first.
    async def approval_list(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        rows = sorted(await self.storage.list_approvals(row.id), key=lambda a: str(a.created_at))
        return {"approvals": [approval_wire(a) for a in rows]}

    patch(Host, "approval_list", approval_list)


@variant("empty-task-list-as-null")
def _empty_task_list_as_null() -> None:
    # P5 (schemas: TaskListResult.tasks is an array): with no task at all the host answers
    # task/list with "tasks": null (an unset list, as a Go nil slice is marshalled).
    async def task_list(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        tasks = [await self.wire(row) for row in await self.host.storage.list_tasks()]
        return {"tasks": tasks or None}

    patch(Tasks, "list", task_list)


@variant("approval-list-unknown-session-empty")
def _approval_list_unknown_session_empty() -> None:
    # methods.json approval/list errors + error-codes.json SESSION_NOT_FOUND ("No session
    # has that id"): the host selects approvals by session id without checking that the
    # session exists, so a session id it never issued gets an empty list, not an error.
    async def approval_list(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        rows = await self.storage.list_approvals(params["sessionId"])
        return {"approvals": [approval_wire(a) for a in rows]}

    patch(Host, "approval_list", approval_list)


@variant("transcript-drops-null-members")
def _transcript_drops_null_members() -> None:
    # R1.3 / R7.7: session/transcript reports each row's content as its stored JSON text
    # parsed; the host leaves out members whose value is null (an "omitempty" encoder), so
    # an assistant message of tool calls without text loses its "content": null.
    async def session_transcript(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        entries = [
            {
                "seq": seq,
                "turnId": turn,
                "role": role,
                "content": {k: v for k, v in content.items() if v is not None},
                "createdAt": at,
            }
            for seq, turn, role, content, at in await self.storage.transcript(row.id)
        ]
        return {"entries": entries}

    patch(Host, "session_transcript", session_transcript)


@variant("disabled-task-listed-without-run-at")
def _disabled_task_listed_without_run_at() -> None:
    # P29: a task is answered and listed with every field as given; the host reports
    # runAt as "the next run", so a task with enabled: false reads runAt: null (the row
    # keeps the time, and switching it on again still runs it then).
    wire = Tasks.wire

    async def task_wire(self: Tasks, row: dict[str, Any]) -> dict[str, Any]:
        task = await wire(self, row)
        if not task["enabled"]:
            task["runAt"] = None
        return task

    patch(Tasks, "wire", task_wire)


@variant("task-update-restamps-created-at")
def _task_update_restamps_created_at() -> None:
    # P29: fields a task/update leaves out keep their values; the host writes the whole
    # record back as a new one (INSERT OR REPLACE) and createdAt becomes the update's
    # time, in the answer, in task/list and in the scheduled_tasks row alike.
    update = Tasks.update

    async def task_update(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        result = await update(self, params)
        now = self.host.clock.now_ms()
        await self.host.storage.update_task(params["taskId"], {"created_at": now})
        result["task"]["createdAt"] = now
        return result

    patch(Tasks, "update", task_update)


@variant("approval-list-without-question")
def _approval_list_without_question() -> None:
    # R7.2: approval/list, approval/get and approval/updated report the same record; the
    # list is built from a summary query without the question column, so each list entry
    # reads question "" while approval/get and the notifications carry the question.
    async def approval_list(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        entries = [approval_wire(a) for a in await self.storage.list_approvals(row.id)]
        return {"approvals": [{**entry, "question": ""} for entry in entries]}

    patch(Host, "approval_list", approval_list)


@variant("session-get-resolves-default-shell")
def _session_get_resolves_default_shell() -> None:
    # R7.3 / R7.2: a session without a shell of its own reads shellId: null; session/get
    # and session/list report the shell it would run in (the default shell's id) instead,
    # while the create and configure answers, session/updated and the row say null.
    async def resolved(self: Host, wire: dict[str, Any]) -> dict[str, Any]:
        if wire["shellId"] is None:
            return {**wire, "shellId": await self.default_shell_id()}
        return wire

    async def session_get(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        return {"session": await resolved(self, self.session_wire(row))}

    async def session_list(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        rows = await self.storage.list_sessions()
        return {"sessions": [await resolved(self, self.session_wire(row)) for row in rows]}

    patch(Host, "session_get", session_get)
    patch(Host, "session_list", session_list)


@variant("artifact-base64-url-alphabet")
def _artifact_base64_url_alphabet() -> None:
    # R3.2: artifact/read gives the bytes in the standard base64 of RFC 4648; the host
    # uses the URL-safe alphabet ("-" and "_" for "+" and "/"), which differs only for
    # content whose encoding holds those two characters.
    read_artifact = Approvals.read_artifact

    async def read(self: Approvals, row: Any) -> dict[str, Any]:
        result = await read_artifact(self, row)
        result["contentBase64"] = result["contentBase64"].translate(str.maketrans("+/", "-_"))
        return result

    patch(Approvals, "read_artifact", read)


@variant("task-list-cached-until-create")
def _task_list_cached_until_create() -> None:
    # P29: task/list reports each task as the last create or update answered it; the host
    # caches the task rows for task/list and refreshes the cache on task/create and
    # task/delete only, so a task/update shows in task/list only after the next create,
    # delete or restart (each task's lastRun is still read afresh).
    cache: dict[int, list[dict[str, Any]]] = {}
    create, delete = Tasks.create, Tasks.delete

    async def task_list(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        if id(self) not in cache:
            cache[id(self)] = await self.host.storage.list_tasks()
        return {"tasks": [await self.wire(row) for row in cache[id(self)]]}

    async def task_create(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        cache.pop(id(self), None)
        return await create(self, params)

    async def task_delete(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        cache.pop(id(self), None)
        return await delete(self, params)

    patch(Tasks, "list", task_list)
    patch(Tasks, "create", task_create)
    patch(Tasks, "delete", task_delete)


@variant("transcript-seq-from-created-at")
def _transcript_seq_from_created_at() -> None:
    # R1.3 (session/transcript's seq is the row id or another increasing whole number):
    # the host reports each entry's createdAt as its seq, so entries written at one
    # instant of the host clock (the conformance clock stands still) share one seq.
    async def session_transcript(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        entries = [
            {"seq": at, "turnId": turn, "role": role, "content": content, "createdAt": at}
            for _seq, turn, role, content, at in await self.storage.transcript(row.id)
        ]
        return {"entries": entries}

    patch(Host, "session_transcript", session_transcript)


@variant("session-list-skips-projectless")
def _session_list_skips_projectless() -> None:
    # R7.2: session/list lists every session exactly as session/get reports it; the host
    # lists sessions project by project, so a session created without a workspaceRoot is
    # left out of session/list (session/get still finds it).
    async def session_list(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        rows = await self.storage.list_sessions()
        return {"sessions": [self.session_wire(r) for r in rows if r.workspace_root is not None]}

    patch(Host, "session_list", session_list)


@variant("last-run-skips-refused")
def _last_run_skips_refused() -> None:
    # R6.1 / R6.2: a refused Plan run is reported by task/runFinished and shown as the task's
    # lastRun; the host's lastRun is "the last run that ran", so a refused run is skipped
    # and task/list shows the run before it (or null when the task never ran).
    async def last_task_run(self: Storage, task_id: str) -> dict[str, Any] | None:
        rows = await self._dicts(
            "SELECT * FROM scheduled_task_runs WHERE task_id = ? AND outcome != 'refused' "
            "ORDER BY started_at DESC, rowid DESC LIMIT 1",
            (task_id,),
        )
        return rows[0] if rows else None

    patch(Storage, "last_task_run", last_task_run)


CASES = [
    BrokenCase(
        "approval-list-sorted-as-text",
        "approval",
        "either_side_of_a_round_clock_reading",
        "R7.2",
        "oldest first, the titles are",
    ),
    BrokenCase(
        "approval-list-unknown-session-empty",
        "sessions",
        "a_request_for_a_session_the_host_does_not",
        "P34",
        "expected the host to refuse, but it answered",
    ),
    BrokenCase(
        "task-update-restamps-created-at",
        "scheduled_plan",
        "a_task_changed_an_hour_after_it_was",
        "P29",
        "'createdAt'",
    ),
    BrokenCase(
        "task-list-cached-until-create",
        "scheduled_plan",
        "a_task_changed_an_hour_after_it_was",
        "P29",
        "task/list reports other values",
    ),
    BrokenCase(
        "transcript-seq-from-created-at",
        "sessions",
        "switching_to_plan_keeps_the_agent_and_its",
        "R1.3",
        "seq does not increase from entry to entry",
    ),
    BrokenCase(
        "empty-task-list-as-null",
        "handshake",
        "nothing_is_served_before_the_connection_is_opened",
        "P5",
        "does not fit the published TaskListResult",
    ),
    BrokenCase(
        "transcript-drops-null-members",
        "plan_tools",
        "a_new_context_keeps_the_earlier_conversation_in",
        "R1.3",
        "session/transcript reports 7 entries",
    ),
    BrokenCase(
        "disabled-task-listed-without-run-at",
        "scheduled_plan",
        "a_task_due_at_the_earliest_time_the",
        "P29",
        "the host's answer reports other values",
    ),
    BrokenCase(
        "approval-list-without-question",
        "approval",
        "the_pending_approval_shows_its_title_question_artifact",
        "R3.1",
        "approval/list and approval/get disagree",
    ),
    BrokenCase(
        "session-get-resolves-default-shell",
        "approval",
        "the_pending_approval_shows_its_title_question_artifact",
        "R7.2",
        "two reports of one record disagreed",
    ),
    BrokenCase(
        "artifact-base64-url-alphabet",
        "artifact_integrity",
        "opening_the_artifact_returns_the_files_exact_bytes",
        "R3.2",
        "contentBase64 is not standard base64",
    ),
    BrokenCase(
        "session-list-skips-projectless",
        "sessions",
        "a_session_without_a_project",
        "R7.2",
        "two reports of one record disagreed",
    ),
    BrokenCase(
        "last-run-skips-refused",
        "scheduled_plan",
        "a_plan_task_that_starts_is_refused_before",
        "R6.1",
        "last run reads None",
    ),
]
