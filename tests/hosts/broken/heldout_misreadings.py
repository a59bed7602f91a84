"""Broken hosts: a held-out set (plausible misreadings of the published contract), written
from docs/implementing-a-host.md, docs/protocol.md and the schemas alone."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from hosts.registry import BrokenCase, patch, variant

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path
    from typing import BinaryIO

    from reference_host.approvals import Approvals
    from reference_host.host import Host
    from reference_host.permissions import PermissionBroker
    from reference_host.provider_client import AssistantReply
    from reference_host.storage import SessionRow
    from reference_host.tasks import Tasks
    from reference_host.turns import TurnRunner


# R1.4 / implementing-a-host.md "Planning (§1)": "Tools offered in Plan are exactly ...
# in every request of a Plan turn, not only its first. What you offer follows the
# session's mode as it is when you send the request"; and for EnterPlanMode: "the next
# provider request offers exactly the Plan tools".
# Reading taken: "the tools of a Plan turn" read as the tools of the turn's kind, fixed
# when the turn starts (the turn/started `mode`), so the tool list is computed once per
# turn. The text rules this out ("as it is when you send the request", "the next provider
# request offers exactly the Plan tools").
# Bug: an Agent turn whose model calls EnterPlanMode goes on offering the Agent tools
# (Write, Edit, no SubmitPlan) in its later requests; the host still gates the calls by
# the session's real mode.
# Client sees: the provider request after EnterPlanMode lists Write/Edit and lacks
# SubmitPlan. Recipe: Agent session; prompt; model calls EnterPlanMode; inspect the
# `tools` of the next provider request.
@variant("mis-tools-fixed-at-turn-start")
def tools_fixed_at_turn_start() -> None:
    from reference_host.state import Mode
    from reference_host.turns import TurnRunner

    original = TurnRunner._ask_model
    first_modes: WeakKeyDictionary[TurnRunner, dict[str, Mode]] = WeakKeyDictionary()

    async def ask_model(
        self: TurnRunner, session: SessionRow, turn_id: str, messages: list[dict[str, Any]]
    ) -> AssistantReply:
        mode = first_modes.setdefault(self, {}).setdefault(turn_id, session.mode)
        return await original(self, replace(session, mode=mode), turn_id, messages)

    patch(TurnRunner, "_ask_model", ask_model, wraps=True)


# P7: "A Plan turn is no exception: planning changes which tools are offered, not who
# consents, so under `ask` or `accept-edits` a Plan turn's `Bash` asks too."
# Reading taken: Plan is read-only planning, so its tools (Bash included) run without a
# permission question; only Agent turns ask. The text rules this out explicitly.
# Bug: in a Plan turn no permission/requested is sent; Bash runs at once.
# Client sees: under permissionMode ask, a Plan turn's Bash call produces command/started
# and a toolResult `ok` with no permission/requested before it. Recipe: session/create
# mode plan, permissionMode ask, a POSIX shell; prompt; model calls Bash `echo hi`;
# expect permission/requested (the host sends none).
@variant("mis-plan-bash-never-asks")
def plan_bash_never_asks() -> None:
    from reference_host.provider_client import ToolCall
    from reference_host.turns import TurnRunner

    original = TurnRunner._require_permission

    async def require_permission(
        self: TurnRunner,
        session: SessionRow,
        turn_id: str,
        call: ToolCall,
        args: dict[str, Any],
        unattended: bool,
    ) -> None:
        if session.mode == "plan":
            return  # planning reads; nothing to consent to
        await original(self, session, turn_id, call, args, unattended)

    patch(TurnRunner, "_require_permission", require_permission, wraps=True)


# P7: "An answer covers its one call: a later call asks again, in the same turn or
# another, also when it runs the very command or writes the very file allowed before."
# Reading taken: "allow" as an allow-this-action grant: the broker remembers each allowed
# (session, tool, input) and does not ask again for the identical call. The text rules
# this out explicitly.
# Bug: a second identical Bash (or Write) in the same session runs without a question.
# Client sees: only one permission/requested for two identical calls. Recipe: session
# permissionMode ask; model calls Bash `echo x`, client allows; next request the model
# calls Bash `echo x` again: no permission/requested, command/started follows at once.
@variant("mis-allow-remembered")
def allow_remembered() -> None:
    from reference_host.permissions import PermissionBroker

    original = PermissionBroker.ask
    granted: WeakKeyDictionary[PermissionBroker, set[tuple[str, str, str]]] = WeakKeyDictionary()

    async def ask(
        self: PermissionBroker, session_id: str, turn_id: str, tool: str, tool_input: Any
    ) -> bool:
        key = (session_id, tool, json.dumps(tool_input, sort_keys=True, default=str))
        allowed = granted.setdefault(self, set())
        if key in allowed:
            return True
        answer = await original(self, session_id, turn_id, tool, tool_input)
        if answer:
            allowed.add(key)
        return answer

    patch(PermissionBroker, "ask", ask, wraps=True)


# R4.4: "`statusCode` says why an approval ended without a decision, and nothing else: it
# is null while the approval is pending and once it is approved or rejected (also when its
# execution is later interrupted or fails)".
# Reading taken: statusCode as "the last error code of this checkpoint row" (its name),
# so an execution that ends interrupted records TURN_INTERRUPTED on the row, as the
# start-up recovery does for a pending approval. The text rules this out.
# Bug: when an execution turn is cancelled or fails, the approved approval gets
# statusCode TURN_INTERRUPTED (row and wire alike).
# Client sees: approval/get after a cancelled execution: status approved, executionState
# interrupted, statusCode "TURN_INTERRUPTED" (expected null). Recipe: Plan turn submits a
# plan; approve; during the execution turn session/cancel; approval/get.
@variant("mis-interrupted-execution-status-code")
def interrupted_execution_status_code() -> None:
    from reference_host import state
    from reference_host.approvals import Approvals, approval_wire
    from reference_host.state import ExecutionState

    async def execution_finished(self: Approvals, approval_id: str, final: ExecutionState) -> None:
        row = await self._execution(approval_id)
        assert row.execution_state is not None
        done = replace(row, execution_state=state.advance_execution(row.execution_state, final))
        if final == "interrupted":
            done = replace(done, status_code="TURN_INTERRUPTED")
        await self.host.storage.update_approval(done)
        self.host.set_activity(row.session_id, active_execution_id=None)
        self._notify_execution(done, row.execution_turn_id)
        self.host.notify("approval/updated", {"approval": approval_wire(done)})

    patch(Approvals, "execution_finished", execution_finished)


# R4.7: execution/updated's "`turnId` names the execution's turn ...: always once that
# turn has started (`running`, `completed`, and `interrupted` by a cancel, a failure or a
# restart after it started), and never another turn. Before that turn has started
# (`queued`, or `interrupted` while queued) it may be `null`".
# Reading taken: turnId as "the turn now running the execution": set while running, null
# once the turn has ended (completed or interrupted), as activeTurnId is. The text rules
# this out ("always once that turn has started ... completed").
# Client sees: execution/updated {executionState: completed, turnId: null}. Recipe:
# submit a plan; approve; let the execution turn finish; look at the completed
# execution/updated.
@variant("mis-execution-turnid-while-running")
def execution_turnid_while_running() -> None:
    from reference_host.approvals import Approvals
    from reference_host.storage import ApprovalRow

    def notify_execution(self: Approvals, row: ApprovalRow, turn_id: str | None) -> None:
        self.host.notify(
            "execution/updated",
            {
                "sessionId": row.session_id,
                "approvalId": row.id,
                "executionId": row.execution_id,
                "executionState": row.execution_state,
                "turnId": turn_id if row.execution_state == "running" else None,
            },
        )

    patch(Approvals, "_notify_execution", notify_execution)


# P29: "a task switched off and on again (`enabled` alone) keeps its `runAt` and runs
# when it comes due"; "A task with `enabled: false` does not run when its `runAt` comes
# due."
# Reading taken: the schedule is touched only by a `task/update` that names `runAt`;
# `enabled: false` cancels the timer, and `enabled: true` alone only flips the flag. The
# text rules this out explicitly.
# Bug: disable then enable (without runAt): task/list still shows runAt, but the task
# never fires.
# Client sees: no task/runFinished when the clock passes runAt. Recipe: task/create agent
# task runAt now+60s; task/update enabled false; task/update enabled true;
# conformance/clock/advance 120s; expect task/runFinished (none comes).
@variant("mis-reenable-task-drops-timer")
def reenable_task_drops_timer() -> None:
    from reference_host.tasks import Tasks

    async def update(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require(params["taskId"])
        columns = {
            "name": "name",
            "prompt": "prompt",
            "mode": "mode",
            "permissionMode": "permission_mode",
            "runAt": "run_at",
            "enabled": "enabled",
        }
        changes = {column: params[key] for key, column in columns.items() if key in params}
        if "provider" in params:
            changes["provider_base_url"] = params["provider"]["baseUrl"]
            changes["model"] = params["provider"]["model"]
        if "enabled" in changes:
            changes["enabled"] = int(changes["enabled"])
        changes["updated_at"] = self.host.clock.now_ms()
        await self.host.storage.update_task(row["id"], changes)
        updated = {**row, **changes}
        if "run_at" in changes:
            self._arm(row["id"], updated["run_at"] if updated["enabled"] else None)
        elif not updated["enabled"]:
            self._arm(row["id"], None)
        return {"task": await self.wire(updated)}

    patch(Tasks, "update", update)


# R5.7: "While a Plan approval is pending, approve and reject are the only controls the
# session accepts: a prompt, a configuration change or a cancel gets `APPROVAL_PENDING`."
# Reading taken: `session/cancel` "Cancels the active turn, if any ... Returns the
# cancelled turn's id, or null when idle": a session waiting on an approval has no active
# turn, so cancel is harmless and answers turnId null. The text rules this out (the cancel
# is named in R5.7 and APPROVAL_PENDING is in session/cancel's error list).
# Client sees: session/cancel answers {turnId: null} instead of APPROVAL_PENDING. Recipe:
# Plan turn submits a plan (turn ends); session/cancel.
@variant("mis-cancel-accepted-while-pending")
def cancel_accepted_while_pending() -> None:
    from reference_host.host import Host

    async def session_cancel(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        return {"turnId": await self.turns.cancel(row.id)}

    patch(Host, "session_cancel", session_cancel)


# R7.6 / "Commands and shells": "`shell/setDefault` ... It is no session's configuration:
# it is accepted also while sessions that follow the default have a turn under way (it
# has no `SESSION_BUSY`)."
# Reading taken: R5.4 ("a shell change ... is refused with SESSION_BUSY") applied to the
# sibling method: changing the default changes the shell of every session that follows
# it, so it is refused while such a session has a turn under way. The text rules this out.
# Client sees: shell/setDefault answers SESSION_BUSY (a code not in its error list).
# Recipe: session without shellId; prompt whose model calls Bash `cat .gate-x` (or waits
# for a permission answer); meanwhile shell/setDefault with a listed shell.
@variant("mis-set-default-busy")
def set_default_busy() -> None:
    from reference_host.errors import HostError
    from reference_host.host import Host

    original = Host.shell_set_default

    async def shell_set_default(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        for session in await self.storage.list_sessions():
            active = self.activity_of(session.id).active_turn_id
            if session.shell_id is None and active is not None:
                raise HostError(
                    "SESSION_BUSY",
                    f"session {session.id!r} follows the default shell and has a turn",
                    {"turnId": active},
                )
        return await original(self, params)

    patch(Host, "shell_set_default", shell_set_default, wraps=True)


# R7.2 / Ordering: "Every change of what `session/get` reports ... is announced by a
# `session/updated`"; "`session/configure`'s `session/updated` comes before its answer";
# P4: "naming a setting with the value the session already has is a change like any other
# and is accepted while idle".
# Reading taken: only a real change is announced; a configure that sets every named
# setting to the value it already had is accepted and answered, but nothing changed, so
# no session/updated is sent.
# AMBIGUOUS: R7.2 ties session/updated to a change of what session/get reports, and here
# nothing it reports changes; only "is a change like any other" (said of P4 acceptance)
# and the Ordering sentence suggest the notification is due. Tighten: "every accepted
# session/configure sends a session/updated before its answer, also when the values it
# names are the ones the session had".
# Client sees: a session/configure answer with no session/updated before it. Recipe:
# session/create mode agent; session/configure {mode: "agent"}.
@variant("mis-configure-unchanged-silent")
def configure_unchanged_silent() -> None:
    from reference_host import host as host_module
    from reference_host.host import Host
    from reference_host.state import ensure_idle_for

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        ensure_idle_for(self.activity_of(row.id), "configuration change")
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
        if replace(row, **changes) == row:
            return {"session": self.session_wire(row)}  # nothing changed: nothing to announce
        updated = replace(row, **changes, updated_at=self.clock.now_ms())
        await self.storage.update_session(updated)
        wire = self.session_wire(updated)
        self.notify("session/updated", {"session": wire})
        return {"session": wire}

    patch(Host, "session_configure", session_configure)


# P15: the execution prompt carries "the plan's full markdown ... byte for byte as
# submitted (line ends and Unicode form as they were)".
# Reading taken: the plan is text; the execution prompt is built from the artifact read
# as text, which (as a text-mode read does) turns CR LF and lone CR into LF. The text
# rules this out ("line ends ... as they were").
# Client sees: the first request of the execution turn holds the markdown with LF where
# the plan had CR LF. Recipe: SubmitPlan with markdown "a\r\nb\rc"; approve; inspect the
# execution turn's first provider request.
@variant("mis-execution-prompt-text-mode")
def execution_prompt_text_mode() -> None:
    from reference_host import approvals
    from reference_host.storage import ApprovalRow

    def execution_prompt(row: ApprovalRow, content: bytes) -> str:
        plan = content.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
        return (
            f'The user approved the plan "{row.title}" ({row.artifact_path}) with permission '
            f"mode {row.permission_mode}. Carry it out now.\n\n{plan}"
        )

    patch(approvals, "_execution_prompt", execution_prompt)


# P10: "`Read` ... With `offset` it starts at that line, counted from 1, and with `limit`
# it gives at most that many lines".
# Reading taken: `offset` as the number of lines to skip (as in many read APIs), so
# offset 1 starts at line 2. The text rules this out ("starts at that line, counted
# from 1").
# Client sees: Read {path, offset: 2, limit: 1} of "one\ntwo\nthree\n" gives "three".
# Recipe: a workspace file of three lines; model calls Read with offset 2, limit 1;
# inspect the tool message.
@variant("mis-read-offset-skips")
def read_offset_skips() -> None:
    from reference_host.tools import files

    original = files.Read._read

    def read(root: Path, relative: str, offset: int | None, limit: int | None) -> str:
        if offset is None:
            return original(root, relative, offset, limit)
        lines = files._split_lines(original(root, relative, None, None))
        end = len(lines) if limit is None else offset + limit
        return "".join(lines[offset:end])

    patch(files.Read, "_read", staticmethod(read), wraps=True)


# P10 new_context / R1.3: "After a second `new_context` the model is shown only the
# latest summary's side: nothing said before it, the turns between the two resets
# included."
# Reading taken: "`new_context` replaces the earlier conversation with its summary" read
# as "the history starts at the context reset", and the code finds the reset as the first
# one in the transcript. The text rules this out explicitly.
# Client sees: after a second new_context, the next request still carries the first
# summary and the turns between the two resets. Recipe: turn 1 calls new_context "S1";
# turn 2 says something, calls new_context "S2"; turn 3's first request must not hold S1
# or turn 2's prompt.
@variant("mis-history-from-first-reset")
def history_from_first_reset() -> None:
    from reference_host.turns import TurnRunner, answered_only

    async def history(self: TurnRunner, session_id: str) -> list[dict[str, Any]]:
        entries = await self.host.storage.transcript(session_id)
        contents = [content for _seq, _turn, _role, content, _at in entries]
        start = min((i for i, c in enumerate(contents) if c.get("contextReset")), default=0)
        kept = [{k: v for k, v in c.items() if k != "contextReset"} for c in contents[start:]]
        return answered_only(kept)

    patch(TurnRunner, "_history", history)


# P2: "announce the longest request line you accept in `capabilities.maxFrameBytes` (at
# least 65536 bytes, newline excluded). A line of exactly that length is served".
# Reading taken: the frame is the line as read, newline included, so the limit is applied
# to line + "\n": a line of exactly maxFrameBytes bytes is refused. The text rules this
# out ("newline excluded", "exactly that length is served").
# Client sees: FRAME_TOO_LARGE for a request line of exactly maxFrameBytes bytes. Recipe:
# initialize; pad a session/list request with whitespace to exactly maxFrameBytes bytes.
@variant("mis-frame-limit-counts-newline")
def frame_limit_counts_newline() -> None:
    from reference_host import framing, server

    original = framing.read_frames

    def read_frames(
        stream: BinaryIO, max_bytes: int = framing.DEFAULT_MAX_FRAME_BYTES
    ) -> Iterator[framing.Frame]:
        for frame in original(stream, max_bytes - 1):
            yield (
                framing.OversizedFrame(max_bytes)
                if isinstance(frame, framing.OversizedFrame)
                else frame
            )

    patch(server, "read_frames", read_frames, wraps=True)


# P6 / R7.1: "a refused `initialize` (another version) leaves the connection unopened, so
# the client may try again. A second `initialize` gets `ALREADY_INITIALIZED`".
# Reading taken: "a second initialize" as "any initialize after the first one received",
# so a retry after UNSUPPORTED_PROTOCOL_VERSION gets ALREADY_INITIALIZED (and the
# connection is never opened). The text rules this out.
# Client sees: initialize {protocolVersion: 8} -> UNSUPPORTED_PROTOCOL_VERSION; then
# initialize {protocolVersion: 9} -> ALREADY_INITIALIZED; session/list -> NOT_INITIALIZED.
@variant("mis-initialize-retry-refused")
def initialize_retry_refused() -> None:
    from reference_host.errors import HostError
    from reference_host.host import Host

    original = Host.initialize
    tried: WeakKeyDictionary[Host, bool] = WeakKeyDictionary()

    async def initialize(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        if tried.get(self):
            raise HostError("ALREADY_INITIALIZED", "initialize was already sent")
        tried[self] = True
        return await original(self, params)

    patch(Host, "initialize", initialize, wraps=True)


# P14: "an `expired` approval keeps answering both actions with `PLAN_APPROVAL_TIMEOUT`";
# the catalog: APPROVAL_NOT_PENDING "The approval was already approved, rejected or
# interrupted. (Acting on an approval at or after its expiresAt, whether still pending or
# already recorded as expired, gets PLAN_APPROVAL_TIMEOUT instead.)"
# Reading taken: PLAN_APPROVAL_TIMEOUT for the action that meets the deadline; once the
# expiry is recorded the approval is simply no longer pending, like any decided one. The
# text rules this out.
# Client sees: approval/approve of an approval whose expiry was already announced gets
# APPROVAL_NOT_PENDING. Recipe: submit a plan; clock/advance 30 min (approval/updated
# expired); approval/approve -> expect PLAN_APPROVAL_TIMEOUT.
@variant("mis-expired-answers-not-pending")
def expired_answers_not_pending() -> None:
    from reference_host import approvals
    from reference_host.errors import HostError
    from reference_host.state import ApprovalFacts, is_expired

    def ensure_decidable(approval: ApprovalFacts, now_ms: int) -> None:
        if approval.status == "pending" and is_expired(approval.expires_at, now_ms):
            raise HostError("PLAN_APPROVAL_TIMEOUT", "the approval's deadline has passed")
        if approval.status != "pending":
            raise HostError(
                "APPROVAL_NOT_PENDING",
                f"the approval is {approval.status}; only a pending approval can be decided",
                {"status": approval.status},
            )

    patch(approvals, "ensure_decidable", ensure_decidable)


CASES = [
    BrokenCase(
        "mis-tools-fixed-at-turn-start",
        "execution",
        "made_during_an_execution_still_waits",
        "R1.4",
        "after EnterPlanMode in the execution the host offered",
    ),
    BrokenCase(
        "mis-plan-bash-never-asks",
        "plan_tools",
        "runs_while_planning_waits_for_the_users_permission and ask",
        "P7",
        "Bash ran without asking for permission",
    ),
    BrokenCase(
        "mis-allow-remembered",
        "execution",
        "command_allowed_once_asks_again",
        "P7",
        "Bash ran without asking for permission",
    ),
    BrokenCase(
        "mis-interrupted-execution-status-code",
        "execution",
        "cancelled_as_soon_as_it_has_started_is_interrupted",
        "R4.4",
        "with statusCode 'TURN_INTERRUPTED'",
    ),
    BrokenCase(
        "mis-execution-turnid-while-running",
        "execution",
        "the_execution_starts_from_the_approved_plans_artifact",
        "R4.7",
        "completed with turnId None",
    ),
    BrokenCase(
        "mis-reenable-task-drops-timer",
        "scheduled_plan",
        "switched_off_and_on_again_runs_when_its_time",
        "P29",
        "the host announced no run of it",
    ),
    BrokenCase(
        "mis-cancel-accepted-while-pending",
        "turn_boundaries",
        "cancelling_while_a_plan_is_pending_is_refused",
        "R5.7",
        "expected the host to refuse",
    ),
    BrokenCase(
        "mis-set-default-busy",
        "shell",
        "default_shell_can_be_changed_while_a_session_that_follows",
        "R7.6",
        "shell/setDefault failed with SESSION_BUSY",
    ),
    BrokenCase(
        "mis-configure-unchanged-silent",
        "sessions",
        "idle_session_takes_the_settings_it_already_has",
        "R7.2",
        "answered without a session/updated",
    ),
    BrokenCase(
        "mis-execution-prompt-text-mode",
        "execution",
        "given_the_plans_text_exactly_as_submitted and lone",
        "P15",
        "the model was not given the plan's full content",
    ),
    BrokenCase(
        "mis-read-offset-skips",
        "plan_tools",
        "reading_part_of_a_file_gives_the_model_the_lines and middle",
        "P10",
        "after its Read call the model was not given",
    ),
    BrokenCase(
        "mis-history-from-first-reset",
        "plan_tools",
        "second_new_context_also_replaces",
        "P10",
        "in the later turn the model was still given",
    ),
    BrokenCase(
        "mis-frame-limit-counts-newline",
        "protocol_errors",
        "exactly_at_the_frame_limit_is_served",
        "P2",
        "bytes was refused",
    ),
    BrokenCase(
        "mis-initialize-retry-refused",
        "handshake",
        "client_speaking_a_future_version_is_refused",
        "R7.1",
        "initialize failed with ALREADY_INITIALIZED",
    ),
    BrokenCase(
        "mis-expired-answers-not-pending",
        "deadline",
        "rejecting_when_the_clock_shows_one_millisecond_after",
        "P14",
        "expected PLAN_APPROVAL_TIMEOUT",
    ),
]
