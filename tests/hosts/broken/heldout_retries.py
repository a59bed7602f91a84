"""Broken hosts: a held-out set (retries, replays and at-least-once handling that do a
thing twice or answer the wrong request), written from the contract alone."""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Callable
from typing import Any

from hosts.registry import BrokenCase, patch, variant


def _canonical(value: Any) -> str:
    from reference_host.jsontext import dumps

    def sort(item: Any) -> Any:
        if isinstance(item, dict):
            return {key: sort(item[key]) for key in sorted(item)}
        if isinstance(item, list):
            return [sort(element) for element in item]
        return item

    return str(dumps(sort(value)))


# P25 (The model provider): a streamed answer that breaks off before [DONE] or carries an
# `error` event "ends the turn `failed` with `PROVIDER_ERROR` ...; it is not sent again".
# Bug: the author treats a dropped stream as a transient network failure and re-sends the
# same request once before giving up (the text streamed by the first attempt has already
# gone out as turn/text).
# Observed: a second, unscripted provider request with the same messages after a broken
# stream; the turn still ends failed with PROVIDER_ERROR once the retry fails too.
# Recipe: prompt; the provider streams a little text and closes the connection without
# [DONE] (or sends an error event); count the provider requests of the turn: 2, not 1.
@variant("retry-provider-stream-resend")
def provider_stream_resend() -> None:
    from reference_host import turns
    from reference_host.provider_client import ProviderError

    original: Any = vars(turns)["complete"]  # as the turn runner sees it now

    async def complete(client: Any, config: Any, messages: Any, *args: Any, **kw: Any) -> Any:
        try:
            return await original(client, config, messages, *args, **kw)
        except ProviderError as error:
            if error.kind != "stream":
                raise
            # the connection dropped mid-answer: try once more before failing the turn
            return await original(client, config, messages, *args, **kw)

    patch(turns, "complete", complete, wraps=True)


# R1.3 and The model provider ("an assistant message with `tool_calls` is followed directly
# by one `tool` message for each of its calls"): the transcript keeps the conversation,
# each message once.
# Bug: to make a retried step idempotent ("do not run a command twice"), the author
# journals a Bash call's result to the transcript as soon as the command has run; the
# step's own recording of its tool results then writes the same tool message again.
# Observed: session/transcript lists the Bash result twice (two `tool` rows with one
# tool_call_id); the next turn's first provider request answers the Bash call with two
# tool messages.
# Recipe: session with permissionMode auto and a POSIX shell; prompt; the model calls Bash
# `echo hi`, then answers text; read session/transcript (two tool rows), then prompt again
# and look at the first provider request's history.
@variant("retry-bash-result-journaled-twice")
def bash_result_journaled_twice() -> None:
    from reference_host.storage import SessionRow
    from reference_host.turns import CallOutcome, TurnRunner

    original = TurnRunner._run_call

    async def run_call(
        self: TurnRunner, session: SessionRow, turn_id: str, call: Any, unattended: bool
    ) -> CallOutcome:
        outcome = await original(self, session, turn_id, call, unattended)
        if call.name == "Bash" and outcome.status == "ok":
            message = {"role": "tool", "tool_call_id": call.call_id, "content": outcome.output}
            await self.host.storage.append_transcript(
                session.id, turn_id, "tool", message, self.host.clock.now_ms()
            )
        return outcome

    patch(TurnRunner, "_run_call", run_call, wraps=True)


_CHANGING_METHODS = frozenset(
    {
        "session/create",
        "session/configure",
        "session/prompt",
        "session/cancel",
        "approval/approve",
        "approval/reject",
        "permission/respond",
        "task/create",
        "task/update",
        "task/delete",
        "task/run",
        "shell/setDefault",
    }
)


# P1 (Framing, Request ids): "a client may use an id again once its request was answered:
# every request is served as it comes, never answered from an earlier one."
# Bug: an idempotency cache for changing requests, keyed by (id, method, params), so that a
# client re-sending a request whose answer it lost gets the first answer and nothing is done
# twice. A new request that happens to reuse an answered id with the same params is never
# served.
# Observed: e.g. `task/run` sent twice with the same id and taskId answers the first run
# again and starts no second run; a second `session/create` with the same id and params
# answers the first session; a repeated `session/prompt` answers the earlier turnId and
# starts no turn.
# Recipe: task/create (agent); task/run {taskId} with id 7; wait for task/runFinished;
# task/run {taskId} again with id 7: the answer's runId is the first run's, no new
# task/runFinished, no provider request.
@variant("retry-replay-cache-by-id")
def replay_cache_by_id() -> None:
    from reference_host.framing import Frame
    from reference_host.jsontext import JsonTextError, loads
    from reference_host.rpc import Dispatcher, Send

    answered: weakref.WeakKeyDictionary[Dispatcher, dict[str, dict[str, Any]]] = (
        weakref.WeakKeyDictionary()
    )
    cache: weakref.WeakKeyDictionary[Dispatcher, dict[tuple[str, str, str], dict[str, Any]]] = (
        weakref.WeakKeyDictionary()
    )
    original_init = Dispatcher.__init__
    original_handle = Dispatcher.handle

    def init(self: Dispatcher, send: Send) -> None:
        last: dict[str, dict[str, Any]] = {}
        answered[self] = last
        cache[self] = {}

        def recording(message: dict[str, Any]) -> None:
            if "id" in message and message["id"] is not None and "result" in message:
                last[_canonical(message["id"])] = message
            send(message)

        original_init(self, recording)

    async def handle(self: Dispatcher, frame: Frame) -> None:
        key: tuple[str, str, str] | None = None
        if isinstance(frame, bytes):
            try:
                message = loads(frame.decode("utf-8"))
            except (UnicodeDecodeError, JsonTextError, RecursionError):
                message = None
            if (
                isinstance(message, dict)
                and message.get("method") in _CHANGING_METHODS
                and isinstance(message.get("id"), int | str)
                and isinstance(message.get("params", {}), dict)
            ):
                key = (
                    _canonical(message["id"]),
                    str(message["method"]),
                    _canonical(message.get("params", {})),
                )
        seen = cache.get(self, {})
        if key is not None and key in seen:
            self._send(seen[key])  # the client retried: the first answer, nothing redone
            return
        answered.get(self, {}).pop(key[0] if key else "", None)
        await original_handle(self, frame)
        if key is not None:
            response = answered.get(self, {}).get(key[0])
            if response is not None:
                seen[key] = response

    patch(Dispatcher, "__init__", init, wraps=True)
    patch(Dispatcher, "handle", handle, wraps=True)


# Execution and restart (§4): "`execution/updated` reports every change of the execution
# state that follows the approve, once per change (never twice for the same state)"; What
# the suite does not require: "an `execution/updated` is sent once per state".
# Bug: "at least once" delivery of the execution state: whenever the host announces an
# approval that has an execution, it re-sends the last execution/updated it sent for that
# execution if the approval still shows that state, so a client that missed it resyncs.
# execution/updated(running) and execution/updated(completed) each arrive twice.
# Recipe: Plan session; model submits a plan; approve (auto); the execution turn answers
# text; count execution/updated notifications per executionState: running 2, completed 2.
@variant("retry-execution-updated-resent")
def execution_updated_resent() -> None:
    from reference_host.host import Host

    original = Host.__init__

    def init(self: Host, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        send = self.notify
        last: dict[str, dict[str, Any]] = {}  # executionId -> its last execution/updated

        def at_least_once(method: str, params: dict[str, Any]) -> None:
            send(method, params)
            if method == "execution/updated":
                last[str(params["executionId"])] = dict(params)
            elif method == "approval/updated":
                approval = params["approval"]
                previous = last.get(str(approval.get("executionId")))
                if previous and previous["executionState"] == approval.get("executionState"):
                    send("execution/updated", previous)

        self.notify = at_least_once

    patch(Host, "__init__", init, wraps=True)


# R4.4, C6 (Approval §3, "A decided approval stays decided"): "approve and reject of an
# approval that is `approved`, `rejected` or `interrupted` get `APPROVAL_NOT_PENDING` and
# change nothing".
# Bug: reject is made idempotent for client retries: a reject of an approval that is
# already rejected answers success with the rejected approval instead of an error.
# Observed: the second approval/reject answers {"approval": {... "status": "rejected"}}
# rather than APPROVAL_NOT_PENDING (stored row unchanged).
# Recipe: Plan session; model submits a plan; approval/reject; approval/reject again with
# the same approvalId: expect error APPROVAL_NOT_PENDING.
@variant("retry-reject-idempotent")
def reject_idempotent() -> None:
    from reference_host.approvals import Approvals, approval_wire

    original = Approvals.reject

    async def reject(self: Approvals, session_id: str, approval_id: str) -> dict[str, Any]:
        row = await self.require(session_id, approval_id)
        if row.status == "rejected":
            return {"approval": approval_wire(row)}  # a retried reject: same answer
        return await original(self, session_id, approval_id)

    patch(Approvals, "reject", reject, wraps=True)


# P28 ("A run cut short ... is never resumed or run again on its own") and P29 ("Once a
# task has run at its runAt ... the clock reaching the time again (set back, or a restarted
# host's fresh clock, which starts before it) does not run it again").
# Bug: a due task's "ran" mark (clearing its runAt) is written only once its run has
# finished, so that a run that fails to start is retried at the next start. A run cut
# short by a restart leaves the task unmarked: the restarted host re-arms it, and the
# task runs a second time when the clock reaches its runAt again. (Manual task/run is
# unaffected.)
# Recipe: task/create (agent, runAt = now + 60 s); clock/advance 60 s: the run starts and
# its provider request is held open; stop the host and start it again (same DIR); advance
# the clock past runAt: a second run (new session, second provider request) starts.
@variant("retry-task-mark-after-run")
def task_mark_after_run() -> None:
    import contextlib

    from reference_host.errors import HostError
    from reference_host.tasks import Tasks

    fired: weakref.WeakKeyDictionary[Tasks, dict[str, int | None]] = weakref.WeakKeyDictionary()
    original_finish = Tasks._finish

    async def fire(self: Tasks, task_id: str) -> None:
        self._timers.pop(task_id, None)
        row = await self.host.storage.get_task(task_id)
        if row is None or not row["enabled"]:
            return
        fired.setdefault(self, {})[task_id] = row["run_at"]
        with contextlib.suppress(HostError):  # already recorded and announced as refused
            await self.run(row)

    async def finish(
        self: Tasks, run: dict[str, Any], outcome: str, error: HostError | None
    ) -> None:
        await original_finish(self, run, outcome, error)
        pending = fired.get(self, {})
        task_id = str(run["task_id"])
        if task_id in pending:
            run_at = pending.pop(task_id)
            row = await self.host.storage.get_task(task_id)
            if row is not None and row["run_at"] == run_at:
                await self.host.storage.update_task(task_id, {"run_at": None})

    patch(Tasks, "_fire", fire)
    patch(Tasks, "_finish", finish, wraps=True)


# R2.12, R2.10 (Plan artifacts §2): "a write or flush that fails, for whatever reason ...,
# is `ARTIFACT_WRITE_FAILED`. Either way no approval and no execution is created"; Fault
# points: `artifactWrite` / `artifactFlush` make writing / flushing the artifact fail.
# Bug: the artifact write is retried once on ARTIFACT_WRITE_FAILED (treated as a transient
# I/O error), into a new file; the retry succeeds, so a failed write is hidden and the
# submission creates an approval.
# Observed: with artifactWrite (or artifactFlush) armed, SubmitPlan's turn/toolResult is
# `ok` and an approval is pending, instead of `error` ARTIFACT_WRITE_FAILED and no
# approval; the Plan turn ends after that call.
# Recipe: conformance/fault/arm artifactWrite; Plan session; the model calls SubmitPlan;
# expect toolResult error ARTIFACT_WRITE_FAILED, approval/list empty, and a second model
# request in the same turn.
@variant("retry-artifact-write-retried")
def artifact_write_retried() -> None:
    from reference_host import approvals
    from reference_host.artifacts import Artifact, FaultCheck
    from reference_host.errors import HostError

    original: Callable[[str, bytes, FaultCheck], Artifact] = vars(approvals)["write_artifact"]

    def write_artifact(root: str, content: bytes, fault: FaultCheck) -> Artifact:
        try:
            return original(root, content, fault)
        except HostError as error:
            if error.code != "ARTIFACT_WRITE_FAILED":
                raise
            return original(root, content, fault)  # once more, under a new name

    patch(approvals, "write_artifact", write_artifact, wraps=True)


# P7 (Permission modes): "A second answer to the same question, an answer to an id never
# asked, or one to the question of a turn that has ended ... gets
# `PERMISSION_REQUEST_NOT_FOUND` and changes nothing."
# Bug: permission/respond is made idempotent for client retries: a repeat of the answer
# already given to a question (same requestId, same decision) answers {} instead of an
# error. (A different decision, or an unknown id, is still refused.)
# Recipe: session in ask mode; the model calls Write; permission/requested; respond allow;
# respond allow again with the same requestId: expect PERMISSION_REQUEST_NOT_FOUND, get {}.
@variant("retry-permission-respond-idempotent")
def permission_respond_idempotent() -> None:
    from reference_host.permissions import PermissionBroker

    answered: weakref.WeakKeyDictionary[PermissionBroker, dict[str, str]] = (
        weakref.WeakKeyDictionary()
    )
    original = PermissionBroker.respond

    def respond(self: PermissionBroker, request_id: str, decision: str) -> None:
        given = answered.setdefault(self, {})
        if given.get(request_id) == decision:
            return  # the client retried its answer: already applied
        original(self, request_id, decision)
        given[request_id] = decision

    patch(PermissionBroker, "respond", respond, wraps=True)


# P7 (Permission modes): "An answer covers its one call: a later call asks again, in the
# same turn or another, also when it runs the very command or writes the very file allowed
# before."
# Bug: so that a retried step does not ask the user twice, an `allow` is remembered for
# the rest of the turn, keyed by tool and input: a later call of the same tool with the
# same input in that turn runs without asking.
# Observed: in one turn, two messages each calling Bash `echo hi` (ask mode): one
# permission/requested only; the second call runs (`ok`) without a question.
# Recipe: ask-mode session; the model calls Bash {"command": "echo hi"}; allow; the model
# calls Bash {"command": "echo hi"} again in its next message: expect a second
# permission/requested.
@variant("retry-permission-allow-remembered")
def permission_allow_remembered() -> None:
    from reference_host.permissions import PermissionBroker

    allowed: weakref.WeakKeyDictionary[PermissionBroker, set[tuple[str, str, str, str]]] = (
        weakref.WeakKeyDictionary()
    )
    original = PermissionBroker.ask

    async def ask(
        self: PermissionBroker, session_id: str, turn_id: str, tool: str, tool_input: Any
    ) -> bool:
        key = (session_id, turn_id, tool, _canonical(tool_input))
        remembered = allowed.setdefault(self, set())
        if key in remembered:
            return True
        decision = await original(self, session_id, turn_id, tool, tool_input)
        if decision:
            remembered.add(key)
        return decision

    patch(PermissionBroker, "ask", ask, wraps=True)


# P7 (Permission modes): "A `requestId` names one question among all the host's sessions:
# two questions never share one, even when their models gave the calls the same id (call
# ids repeat across messages and sessions)", and a second answer to an answered question
# gets PERMISSION_REQUEST_NOT_FOUND.
# Bug: the question's id is derived from the session and the tool call id, so that a step
# retried for the same call re-asks under the same id and a client's answer still
# applies. A later call that reuses a call id (a provider that numbers each message's
# calls from one) is asked under the id of an earlier, answered question: a client's stale
# second answer to the first question answers the new one.
# Recipe: ask-mode session; the model calls Bash with id call_1; permission/requested R;
# allow; the next message calls Bash with id call_1 again: its permission/requested
# carries R again (expect a new id), and permission/respond R deny is accepted.
@variant("retry-permission-id-from-call")
def permission_id_from_call() -> None:
    import asyncio

    from reference_host.errors import HostError
    from reference_host.permissions import PermissionBroker, _Request
    from reference_host.provider_client import ToolCall
    from reference_host.storage import SessionRow
    from reference_host.turns import TurnRunner

    async def ask_as(
        broker: PermissionBroker,
        request_id: str,
        session_id: str,
        turn_id: str,
        tool: str,
        tool_input: Any,
    ) -> bool:
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        broker._open[request_id] = _Request(session_id, answer)
        broker._notify(
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
            broker._open.pop(request_id, None)

    async def require_permission(
        self: TurnRunner,
        session: SessionRow,
        turn_id: str,
        call: ToolCall,
        args: dict[str, Any],
        unattended: bool,
    ) -> None:
        if unattended:
            raise HostError(
                "PERMISSION_UNAVAILABLE",
                f"{call.name} needs a permission answer and this run is unattended",
            )
        digest = hashlib.sha256(f"{session.id}\0{call.call_id}".encode()).hexdigest()[:32]
        allowed = await ask_as(
            self.host.permissions, f"perm_{digest}", session.id, turn_id, call.name, args
        )
        if not allowed:
            raise HostError("PERMISSION_DENIED", f"the user denied {call.name}")

    patch(TurnRunner, "_require_permission", require_permission)


# R4.10 (Startup recovery): "That is all it changes: finished work (a `completed`
# execution, a `rejected`, `expired` or earlier `interrupted` approval) stays exactly as it
# was"; Storage, No boot epoch: "a restart that finds nothing to recover changes no stored
# value and no answer"; P16: a legacy row migrated from v8 `pending` keeps no decidedAt.
# Bug: the recovery is written to be safe to re-run ("make sure every approval that was
# not decided reads interrupted"), selecting `status IN ('pending', 'interrupted')`; every
# start re-stamps the decidedAt (and statusCode) of approvals an earlier start already
# interrupted, and of legacy rows migrated from v8 `pending`.
# Recipe: Plan session; model submits a plan; restart (decidedAt = t1); restart again with
# the clock elsewhere: approval/get shows decidedAt = t2 != t1 (the plan_approvals row too).
# Or: start on a v8 file holding a `pending` plan_approvals row: its decidedAt is not null.
@variant("retry-recovery-restamps-interrupted")
def recovery_restamps_interrupted() -> None:
    from reference_host.storage import Storage

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self.transaction() as conn:
            approvals = await conn.execute(
                "UPDATE plan_approvals SET status = 'interrupted', "
                "status_code = 'TURN_INTERRUPTED', decided_at = ? "
                "WHERE status IN ('pending', 'interrupted')",
                (now,),
            )
            executions = await conn.execute(
                "UPDATE plan_approvals SET execution_state = 'interrupted' "
                "WHERE execution_state IN ('queued', 'running')"
            )
            turns = await conn.execute(
                "UPDATE turns SET state = 'interrupted', ended_at = ? WHERE state = 'active'",
                (now,),
            )
            await conn.execute(
                "UPDATE scheduled_task_runs SET outcome = 'failed', "
                "error_code = 'TURN_INTERRUPTED', "
                "error_message = 'the host stopped before the run finished' "
                "WHERE outcome = 'running'"
            )
        return approvals.rowcount, executions.rowcount, turns.rowcount

    patch(Storage, "recover", recover)


# R5.1 (Sessions, turns and boundaries §5): "While a turn ... is active ..., a second prompt
# ... is refused with `SESSION_BUSY` and changes nothing"; P1: "every request is served as
# it comes, never answered from an earlier one".
# Bug: a prompt with the same text as the session's still-running turn's prompt is taken
# for a client retry of that prompt and answered with the running turn's id instead of
# SESSION_BUSY (a different text is still refused).
# Recipe: session; prompt "hello" (the provider holds its answer); prompt "hello" again:
# expect SESSION_BUSY, get {"turnId": <the running turn>}.
@variant("retry-prompt-dedupe-running")
def prompt_dedupe_running() -> None:
    from reference_host.host import Host

    prompts: weakref.WeakKeyDictionary[Host, dict[str, tuple[str, str]]] = (
        weakref.WeakKeyDictionary()
    )
    original = Host.session_prompt

    async def session_prompt(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        seen = prompts.setdefault(self, {})
        earlier = seen.get(str(params["sessionId"]))
        active = self.activity_of(str(params["sessionId"]))
        if (
            earlier is not None
            and active.active_turn_id == earlier[0]
            and active.pending_approval_id is None
            and earlier[1] == params["text"]
        ):
            return {"turnId": earlier[0]}  # the client re-sent its prompt
        result = await original(self, params)
        seen[str(params["sessionId"])] = (str(result["turnId"]), str(params["text"]))
        return result

    patch(Host, "session_prompt", session_prompt, wraps=True)


# P35 (Scheduled tasks §6): "Every `task/run` runs the task at once, as a run of its own
# with its own `runId` and session, also while an earlier run of the same task is still
# under way: it never answers with the earlier run, and the two runs go on side by side."
# Bug: task/run is made idempotent: while the task's latest run is still `running`, a
# task/run answers that run (the client probably retried) instead of starting another.
# Recipe: task/create (agent); task/run (its provider request held open); task/run again:
# expect a new runId and a second session and provider request; get the first run.
@variant("retry-task-run-joins-running")
def task_run_joins_running() -> None:
    from reference_host.tasks import Tasks, _run_wire

    original = Tasks.run_now

    async def run_now(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require(params["taskId"])
        latest = await self.host.storage.last_task_run(row["id"])
        if latest is not None and latest["outcome"] == "running":
            return {"run": _run_wire(latest)}  # already running: the same run
        return await original(self, params)

    patch(Tasks, "run_now", run_now, wraps=True)


CASES = [
    BrokenCase(
        "retry-provider-stream-resend",
        "sessions",
        "model_answer_that_breaks_off_ends_the_turn_as_failed and connection",
        "P25",
        "asked the provider 2 times",
    ),
    BrokenCase(
        "retry-bash-result-journaled-twice",
        "shell",
        "command_in_the_sessions_second_turn_is_recorded_under_that_turn",
        "C5",
        "ended without starting the model's command",
    ),
    BrokenCase(
        "retry-replay-cache-by-id",
        "protocol_errors",
        "creates_something_sent_again_under_its_identifier",
        "P1",
        "both requests were answered with session",
    ),
    BrokenCase(
        "retry-execution-updated-resent",
        "execution",
        "same_agent_carries_out_the_plan_with_the_conversation",
        "R4.5",
        "the execution was announced as",
    ),
    BrokenCase(
        "retry-reject-idempotent",
        "approval",
        "rejected_plan_cannot_be_rejected_again_afterwards",
        "R4.4",
        "expected the host to refuse",
    ),
    BrokenCase(
        "retry-task-mark-after-run",
        "scheduled_plan",
        "restart_cut_short_does_not_run_again",
        "P29",
        "ran again when the restarted host's clock reached its time",
    ),
    BrokenCase(
        "retry-artifact-write-retried",
        "artifact_integrity",
        "failed_write_creates_no_approval",
        "R2.12",
        "expected ARTIFACT_WRITE_FAILED",
    ),
    BrokenCase(
        "retry-permission-respond-idempotent",
        "execution",
        "allowed_permission_question_cannot_be_answered_again_with_the_same_answer",
        "P7",
        "expected the host to refuse",
    ),
    BrokenCase(
        "retry-permission-allow-remembered",
        "execution",
        "same_file_change_asks_again_later_in_the_same_turn",
        "P7",
        "ran without asking",
    ),
    BrokenCase(
        "retry-permission-id-from-call",
        "execution",
        "call_whose_id_the_model_gives_again_gets_a_question_of_its_own",
        "P7",
        "of the question answered before it",
    ),
    BrokenCase(
        "retry-recovery-restamps-interrupted",
        "restart_interruption",
        "interrupted_by_an_earlier_restart_is_left_as_it_was",
        "R4.10",
        "recovery changed a finished plan",
    ),
    BrokenCase(
        "retry-prompt-dedupe-running",
        "turn_boundaries",
        "same_prompt_sent_again_during_its_turn_is_refused",
        "R5.1",
        "expected the host to refuse",
    ),
    BrokenCase(
        "retry-task-run-joins-running",
        "scheduled_plan",
        "task_run_again_while_its_first_run_is_under_way_starts_a_second_run",
        "P35",
        "instead of starting one",
    ),
]
