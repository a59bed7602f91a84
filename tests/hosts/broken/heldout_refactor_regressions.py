"""Broken hosts: a held-out set (refactoring regressions: a correct host, tidied up),
written from the contract alone."""

from __future__ import annotations

import weakref
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from hosts.registry import BrokenCase, patch, variant

if TYPE_CHECKING:
    from reference_host.host import Host
    from reference_host.turns import TurnRunner


# R3.6 / implementing-a-host.md, Approval ("After a reject, and after an expiry (R3.11),
# the session stays in Plan with its permission mode"); ADR §3 ("Reject never selects or
# grants an execution mode").
# Refactor: approve and reject now share one "record the decision" helper that also writes
# the session back, with `permission_mode=mode or DEFAULT` ("ask", the UI's default);
# approve always passes the chosen mode, reject passes none, so the session's own mode is
# replaced by "ask".
# Observed: after a reject in a session whose permission mode is auto (or accept-edits), the
# session (session/updated, session/get, sessions row) reads permissionMode "ask"; it stays
# in Plan. A session already under "ask" shows nothing.
# Recipe: session/create {mode: plan, permissionMode: auto} -> prompt -> SubmitPlan ->
# approval/reject -> session/get: permissionMode "ask" instead of "auto".
@variant("ref-reject-resets-permission-mode")
def reject_resets_permission_mode() -> None:
    from reference_host.approvals import Approvals

    original = Approvals.reject

    async def reject(self: Approvals, session_id: str, approval_id: str) -> dict[str, Any]:
        answer = await original(self, session_id, approval_id)
        session = await self.host.require_session(session_id)
        now = self.host.clock.now_ms()
        await self.host.storage.update_session(
            replace(session, permission_mode="ask", updated_at=now)
        )
        await self.host.publish_session(session_id)
        return answer

    patch(Approvals, "reject", reject, wraps=True)


# implementing-a-host.md, Sessions ("naming a setting with the value the session already
# has is a change like any other: it is accepted while idle, refused while busy or pending,
# and announced with session/updated before its answer"), R5.3, R5.6, R5.7, R7.2.
# Refactor: a fast path "nothing changes, nothing to do" was added at the top of
# session/configure, before the busy check.
# Observed: a configure that names the session's current value gets no session/updated,
# and is answered with the session (not SESSION_BUSY / APPROVAL_PENDING) while a turn runs
# or a plan is pending.
# Recipe: session in agent/ask -> session/configure {mode: "agent"} -> no session/updated;
# or prompt (turn held open by the provider) -> session/configure {mode: <current>} ->
# answered with a result instead of SESSION_BUSY.
@variant("ref-configure-noop-fast-path")
def configure_noop_fast_path() -> None:
    from reference_host.host import Host

    original = Host.session_configure

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        provider = (
            {"baseUrl": row.provider_base_url, "model": row.model}
            if row.provider_base_url is not None and row.model is not None
            else None
        )
        current: dict[str, Any] = {
            "mode": row.mode,
            "permissionMode": row.permission_mode,
            "provider": provider,
            "shellId": row.shell_id,
        }
        named = [key for key in params if key != "sessionId"]
        if named and all(key in current and params[key] == current[key] for key in named):
            return {"session": self.session_wire(row)}
        return await original(self, params)

    patch(Host, "session_configure", session_configure, wraps=True)


# R7.2 / implementing-a-host.md, Approval ("every change of an approval's status or
# execution state (queued, running, completed, interrupted) is announced by an
# approval/updated carrying the approval as it now is").
# Refactor: approval/updated was coalesced with execution/updated on the execution path:
# "running" is transient and execution/updated already reports it, so only the final state
# is announced as approval/updated.
# Observed: after an approve, no approval/updated with executionState "running" arrives
# (execution/updated running does; approval/get reads running while the turn runs).
# Recipe: submit a plan -> approve (auto) -> provider holds the execution turn's request ->
# wait for approval/updated with executionState running: never comes.
@variant("ref-approval-updated-coalesced")
def approval_updated_coalesced() -> None:
    from reference_host import state
    from reference_host.approvals import Approvals

    async def execution_running(self: Approvals, approval_id: str, turn_id: str) -> None:
        row = await self._execution(approval_id)
        assert row.execution_state is not None
        running = replace(
            row,
            execution_state=state.advance_execution(row.execution_state, "running"),
            execution_turn_id=turn_id,
        )
        await self.host.storage.update_approval(running)
        self._notify_execution(running, turn_id)

    patch(Approvals, "execution_running", execution_running)


# R4.7 / implementing-a-host.md, Execution ("execution/updated ... Its turnId names the
# execution's turn ... always once that turn has started (running, completed, and
# interrupted ...), and never another turn").
# Refactor: the row's `execution_turn_id` was renamed in the notification helper's caller to
# `turn_id`, which on an approval row is the Plan turn that submitted it.
# Observed: execution/updated "completed" (or "interrupted" after a cancel) carries the Plan
# turn's id; the "running" one carries the execution turn's id.
# Recipe: submit a plan -> approve -> execution turn answers with text -> execution/updated
# completed: turnId is the Plan turn, not the `turn/started` kind execution.
@variant("ref-execution-turnid-from-plan-turn")
def execution_turnid_from_plan_turn() -> None:
    from reference_host import state
    from reference_host.approvals import Approvals, approval_wire
    from reference_host.state import ExecutionState

    async def execution_finished(self: Approvals, approval_id: str, final: ExecutionState) -> None:
        row = await self._execution(approval_id)
        assert row.execution_state is not None
        done = replace(row, execution_state=state.advance_execution(row.execution_state, final))
        await self.host.storage.update_approval(done)
        self.host.set_activity(row.session_id, active_execution_id=None)
        self._notify_execution(done, row.turn_id)
        self.host.notify("approval/updated", {"approval": approval_wire(done)})

    patch(Approvals, "execution_finished", execution_finished)


# R1.3 / implementing-a-host.md, The model provider ("A call id is unique only within its
# message: a model may give a call in a later message the id of an earlier one ..., and
# each call still reaches later requests with its own result").
# Refactor: the history's call/result pairing loop was rewritten around a dict
# {tool_call_id: result} built in one comprehension; with a repeated id the last result
# wins, so the earlier call is sent with the later call's result.
# Observed: in the next turn's first request the earlier call's tool message holds the later
# call's output (both carry the same content).
# Recipe: turn 1: model calls Read(a.txt) as id "call_1", then in its next message
# Read(b.txt) again as "call_1", then ends; prompt again -> the request's first "call_1"
# tool message holds b.txt's text, not a.txt's.
@variant("ref-history-pairs-by-call-id")
def history_pairs_by_call_id() -> None:
    from reference_host import turns

    def answered_only(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        results = {str(m.get("tool_call_id")): m for m in messages if m.get("role") == "tool"}
        kept: list[dict[str, Any]] = []
        for message in messages:
            if message.get("role") == "tool":
                continue  # re-attached after the call that made it
            calls = message.get("tool_calls") or []
            paired = [call for call in calls if str(call.get("id")) in results]
            if len(paired) != len(calls):
                message = {k: v for k, v in message.items() if k != "tool_calls"}
                if paired:
                    message["tool_calls"] = paired
                elif not message.get("content"):
                    continue
            kept.append(message)
            kept.extend(results[str(call.get("id"))] for call in paired)
        return kept

    patch(turns, "answered_only", answered_only)


# P12 / C10 ("the model's Write and Edit into .pi/plan/ are refused with TOOL_DENIED, in
# any mode and any turn, for existing artifacts and new files alike").
# Refactor: the plan-folder guard was moved next to the Write path's own checks, and the
# tool-name set it was keyed on shrank to Write: Edit no longer reaches it.
# Observed: an Agent turn under auto (or accept-edits) can Edit an existing artifact: the
# call is ok and the artifact's bytes change (a later approve/artifact/read then reports
# ARTIFACT_MODIFIED).
# Recipe: submit a plan and reject it (or complete its execution) -> Agent, auto -> model
# Edit(.pi/plan/<name>.md, old_string, new_string) -> status ok instead of TOOL_DENIED.
@variant("ref-edit-plan-folder-unguarded")
def edit_plan_folder_unguarded() -> None:
    from reference_host import turns

    patch(turns, "EDIT_TOOLS", frozenset({"Write"}))


# P29 ("task/create and task/update answer the task with every field as the user gave it
# (...; fields a task/update leaves out keep their values ...)").
# Refactor: create and update now build their columns through one helper that applies
# create's defaults; update passes only what it was given, so an omitted permissionMode
# falls back to create's default "ask".
# Observed: a task created with permissionMode "auto" reads "ask" after a task/update that
# names only `name` (answer, task/list and the scheduled_tasks row alike).
# Recipe: task/create {permissionMode: "auto", ...} -> task/update {taskId, name: "x"} ->
# task.permissionMode is "ask".
@variant("ref-task-update-defaults")
def task_update_defaults() -> None:
    from reference_host.tasks import Tasks

    original = Tasks.update

    async def update(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        return await original(self, {"permissionMode": "ask", **params})

    patch(Tasks, "update", update, wraps=True)


# P8 / P7 ("A run's session is a session like any other ... Once the run has ended, the
# user may prompt that session, and its turns are attended: its permission mode asks as in
# any session; only the run's own turn is unattended").
# Refactor: "unattended" moved from the turn to the session: the turn starter remembers the
# sessions a scheduled run created and starts every later turn there unattended.
# Observed: after a run ended, a prompt in the run's session whose model calls Bash under
# ask gets PERMISSION_UNAVAILABLE (denied) without any permission/requested.
# Recipe: task/create (agent, ask) -> task/run -> run completes -> session/prompt in the
# run's session -> model calls Bash -> expect permission/requested; gets a denied result.
_UNATTENDED: weakref.WeakKeyDictionary[TurnRunner, set[str]] = weakref.WeakKeyDictionary()


@variant("ref-task-session-stays-unattended")
def task_session_stays_unattended() -> None:
    from reference_host.turns import TurnRunner

    original = TurnRunner.start

    async def start(
        self: TurnRunner, session: Any, kind: str, user_text: str, *args: Any, **kwargs: Any
    ) -> str:
        sessions = _UNATTENDED.setdefault(self, set())
        if kwargs.get("unattended"):
            sessions.add(session.id)
        elif session.id in sessions:
            kwargs["unattended"] = True
        return await original(self, session, kind, user_text, *args, **kwargs)

    patch(TurnRunner, "start", start, wraps=True)


# R1.4 / implementing-a-host.md, Planning ("What you offer follows the session's mode as it
# is when you send the request"; EnterPlanMode: "the next provider request offers exactly
# the Plan tools").
# Refactor: the offered tool list was cached per turn (computed from the mode the turn
# started in) to avoid rebuilding it on every step.
# Observed: after EnterPlanMode in an Agent turn the next request still offers the Agent
# tools (Write, Edit; no SubmitPlan), though the session reads plan and a SubmitPlan call
# is still accepted by the host.
# Recipe: Agent session -> prompt -> model calls EnterPlanMode -> inspect the turn's second
# provider request's `tools`: Agent set instead of the Plan set.
_TURN_MODES: weakref.WeakKeyDictionary[TurnRunner, dict[str, str]] = weakref.WeakKeyDictionary()


@variant("ref-tools-cached-per-turn")
def tools_cached_per_turn() -> None:
    from reference_host.turns import TurnRunner

    original = TurnRunner._ask_model

    async def ask_model(
        self: TurnRunner, session: Any, turn_id: str, messages: list[dict[str, Any]]
    ) -> Any:
        modes = _TURN_MODES.setdefault(self, {})
        mode = modes.setdefault(turn_id, session.mode)
        return await original(self, replace(session, mode=mode), turn_id, messages)

    patch(TurnRunner, "_ask_model", ask_model, wraps=True)


# R7.3 / P20 ("command/output notifications numbered by seq from 0 across both streams
# (each command counts its own pieces ... with no gap and no number used twice), stdout and
# stderr apart").
# Refactor: the output pump was split into one object per stream, each with its own piece
# counter.
# Observed: a command writing to both streams sends stdout pieces 0, 1, ... and stderr
# pieces 0, 1, ...: a seq number used twice within one command.
# Recipe: Bash `echo out; echo err >&2` -> command/output pieces: seq 0 (stdout) and seq 0
# (stderr).
@variant("ref-output-seq-per-stream")
def output_seq_per_stream() -> None:
    from reference_host import turns

    original: Any = turns.__dict__["run_command"]  # as turns calls it, wrappers included

    async def run_command(*, notify: Any, **kwargs: Any) -> Any:
        counters: dict[tuple[str, str], int] = {}

        def per_stream(method: str, params: dict[str, Any]) -> None:
            if method == "command/output":
                key = (str(params["commandId"]), str(params["stream"]))
                seq = counters.get(key, 0)
                counters[key] = seq + 1
                params = {**params, "seq": seq}
            notify(method, params)

        return await original(notify=per_stream, **kwargs)

    patch(turns, "run_command", run_command, wraps=True)


# R7.6 ("shell/list always names a defaultShellId"; "shell/setDefault persists the
# default ...") and implementing-a-host.md, Commands ("Bash runs through the session's
# shell, or the persisted default").
# Refactor: the default shell lookup was cached on the host after its first read (it hits
# the settings table on every Bash call); shell/setDefault writes the setting behind the
# cache.
# Observed: after shell/list (or a Bash call) and then shell/setDefault to another shell,
# shell/list still names the old default and Bash in a session without its own shell runs
# in the old one, until the host restarts (then the persisted value shows).
# Recipe: shell/list -> shell/setDefault {bash id} -> shell/list: defaultShellId unchanged.
_DEFAULT_SHELL: weakref.WeakKeyDictionary[Host, str | None] = weakref.WeakKeyDictionary()


@variant("ref-default-shell-cached")
def default_shell_cached() -> None:
    from reference_host.host import Host

    original = Host.default_shell_id

    async def default_shell_id(self: Host) -> str | None:
        if self not in _DEFAULT_SHELL:
            _DEFAULT_SHELL[self] = await original(self)
        return _DEFAULT_SHELL[self]

    patch(Host, "default_shell_id", default_shell_id, wraps=True)


# P13 ("approve and artifact/read check the file's bytes against its recorded SHA-256 and
# size, on every call: a read that matched does not vouch for a later one").
# Refactor: the verified bytes were memoised per approval (the artifact is immutable, so
# a second hash looked redundant).
# Observed: once artifact/read succeeded, a change to the artifact's bytes is no longer
# noticed: the next artifact/read returns the old bytes and approve approves (instead of
# ARTIFACT_MODIFIED / ARTIFACT_UNREADABLE) and runs the old plan.
# Recipe: submit a plan -> artifact/read (ok) -> overwrite the artifact file -> approve ->
# approved instead of ARTIFACT_MODIFIED.
@variant("ref-artifact-verified-memo")
def artifact_verified_memo() -> None:
    from reference_host.approvals import Approvals
    from reference_host.storage import ApprovalRow, SessionRow

    original = Approvals.verified_content
    memo: weakref.WeakKeyDictionary[Approvals, dict[str, bytes]] = weakref.WeakKeyDictionary()

    async def verified_content(self: Approvals, session: SessionRow, row: ApprovalRow) -> bytes:
        seen = memo.setdefault(self, {})
        if row.id not in seen:
            seen[row.id] = await original(self, session, row)
        return seen[row.id]

    patch(Approvals, "verified_content", verified_content, wraps=True)


# R4.10 / ADR §4 ("marks ... all prior queued or running execution states as interrupted";
# implementing-a-host.md: "(its approval stays approved, every other field as it was)";
# R4.4: "decidedAt is the host clock at the moment of the approve or reject").
# Refactor: the recovery's two UPDATEs on plan_approvals were merged into one statement with
# CASE expressions per column; `decided_at = ?` was carried over from the pending branch
# without its CASE, so it is written for every row the statement touches.
# Observed: after a restart, an approved approval whose execution was queued or running
# reads executionState "interrupted" and status "approved" as it should, but its decidedAt
# is the restarted host's clock instead of the moment of the approve (over the wire and in
# the row).
# Recipe: arm holdExecution -> submit a plan -> approve (note decidedAt) -> move the clock or
# wait -> restart the host -> approval/get: decidedAt changed.
@variant("ref-recovery-merged-update")
def recovery_merged_update() -> None:
    from reference_host.storage import Storage

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self.transaction() as conn:
            pending = await conn.execute(
                "SELECT count(*) FROM plan_approvals WHERE status = 'pending'"
            )
            counted = await pending.fetchone()
            approvals = await conn.execute(
                "UPDATE plan_approvals SET "
                "status = CASE WHEN status = 'pending' THEN 'interrupted' ELSE status END, "
                "status_code = CASE WHEN status = 'pending' THEN 'TURN_INTERRUPTED' "
                "ELSE status_code END, "
                "decided_at = ?, "
                "execution_state = CASE WHEN execution_state IN ('queued', 'running') "
                "THEN 'interrupted' ELSE execution_state END "
                "WHERE status = 'pending' OR execution_state IN ('queued', 'running')",
                (now,),
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
        interrupted = int(counted[0]) if counted is not None else 0
        return interrupted, approvals.rowcount - interrupted, turns.rowcount

    patch(Storage, "recover", recover)


CASES = [
    BrokenCase(
        "ref-reject-resets-permission-mode",
        "submit_plan",
        "rejecting_a_plan_leaves_the_sessions_permission_mode",
        "R3.6",
        "permission mode changed from",
    ),
    BrokenCase(
        "ref-configure-noop-fast-path",
        "turn_boundaries",
        "changing_the_mode_to_the_same_one_while_a_plan_is_pending",
        "R5.7",
        "expected the host to refuse",
    ),
    BrokenCase(
        "ref-approval-updated-coalesced",
        "execution",
        "an_approved_plan_is_queued_runs_and_completes",
        "R7.2",
        "the last approval/updated of approval",
    ),
    BrokenCase(
        "ref-execution-turnid-from-plan-turn",
        "execution",
        "starts_from_the_approved_plans_artifact_and_content",
        "R4.7",
        "the execution's turn is",
    ),
    BrokenCase(
        "ref-history-pairs-by-call-id",
        "sessions",
        "each_read_keeps_its_own_result_when_the_model_names_two_reads_alike",
        "R1.3",
        "the last request did not carry",
    ),
    BrokenCase(
        "ref-edit-plan-folder-unguarded",
        "artifact_integrity",
        "cannot_write_into_the_plan_folder and edit_the_plan_artifact",
        "P12",
        "the Edit call ran, expected TOOL_DENIED",
    ),
    BrokenCase(
        "ref-task-update-defaults",
        "scheduled_plan",
        "runs_when_its_time_comes_while_a_plan_of_its_project_awaits_approval",
        "P29",
        "the fields an update leaves out keep their values",
    ),
    BrokenCase(
        "ref-task-session-stays-unattended",
        "scheduled_plan",
        "once_its_run_has_ended_the_session_a_run_created_asks_its_user",
        "P8",
        "ran or was refused without asking the user",
    ),
    BrokenCase(
        "ref-tools-cached-per-turn",
        "execution",
        "still_waits_for_the_user_once_that_execution_ended",
        "R1.4",
        "after EnterPlanMode in the execution the host offered",
    ),
    BrokenCase(
        "ref-output-seq-per-stream",
        "shell",
        "command_run_in_a_plan_turn_is_recorded_for_audit",
        "P20",
        "is numbered [0, 0]",
    ),
    BrokenCase(
        "ref-default-shell-cached",
        "shell",
        "uses_the_default_whatever_another_session_of_its_project_chose",
        "R7.6",
        "the command was announced in sh, not in dash",
    ),
    BrokenCase(
        "ref-artifact-verified-memo",
        "artifact_integrity",
        "plan_opened_before_its_file_changed_is_not_approved",
        "P13",
        "expected the host to refuse",
    ),
    BrokenCase(
        "ref-recovery-merged-update",
        "restart_interruption",
        "answer_the_model_was_still_giving_is_not_asked_for_again",
        "R4.10",
        "recovery changed more than the execution state",
    ),
]
