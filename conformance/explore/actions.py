"""The user actions the explorer performs on a host, each followed by the host settling.

Every action updates the model from what the user did, never from what the host said, and
adds one step to the sequence's story. Actions draw their details (which session, which
permission mode, how the model answers) from hypothesis, so that sequences shrink.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any, ClassVar, Final

from hypothesis import strategies as st

from conformance.client import HostClient, RpcError
from conformance.explore.checks import LOG_FILE, Checks
from conformance.explore.context import Answer, ExploreContext
from conformance.explore.invariants import broken
from conformance.explore.model import (
    APPROVAL_TTL_MS,
    PERMISSION_MODES,
    ModelApproval,
    ModelSession,
)
from conformance.explore.story import Story
from conformance.mock_provider import (
    ScriptedReply,
    ScriptedToolCall,
    StallReply,
    TextReply,
    ToolCallsReply,
)
from conformance.storage_inspector import StorageInspector

MAX_SESSIONS: Final = 3
PROJECTS: Final = ("A", "B")
MODEL_NAME: Final = "explorer-model"
TURN_EVENTS: Final = ("turn/ended", "permission/requested")
FINAL_EXECUTION: Final = ("completed", "interrupted")

_AFTER: Final = {
    "approved": "after it was approved",
    "rejected": "after it was rejected",
    "expired": "after it expired",
    "interrupted": "after it was interrupted",
    "pending": "after its deadline",
}


class Actions(Checks):
    """The actions, and the plumbing they share; the state machine provides the state."""

    context: ClassVar[ExploreContext]
    story: Story
    counter: int
    changed_since_restart: bool
    execution_turns: dict[str, str]

    def _start(self) -> None:
        self.host = self.context.driver.start(self.data_dir)
        self.client = HostClient(self.host, self.context.timeout)
        self.seen = 0
        self.client.initialize()
        self.model.now = int(self.client.request("conformance/clock/get", {})["now"])

    def _stop(self, crash: bool) -> None:
        host, client = self.host, self.client
        self.host = self.client = None
        if host is not None:
            if crash:
                host.crash()
            else:
                host.stop()
        if client is not None:
            client.close()
            self.retired_violations.extend(client.violations)
            self.retired_unmatched.extend(client.unmatched)
        self.provider.release_stalls()

    def _call(self, method: str, params: dict[str, Any]) -> Answer:
        try:
            return Answer(self.rpc.request(method, params), None)
        except RpcError as error:
            return Answer(None, error)

    def _next(self) -> int:
        self.counter += 1
        return self.counter

    def _sessions(self) -> list[ModelSession]:
        return list(self.model.sessions.values())

    def _draw_session(self, data: st.DataObject) -> ModelSession:
        sessions = self._sessions()
        return sessions[data.draw(st.integers(0, len(sessions) - 1), label="session")]

    def _draw_approval(self, data: st.DataObject, status: str | None = None) -> ModelApproval:
        """A plan (a pending one, or a decided one, as ``status`` asks), newest first."""
        candidates = [
            a
            for a in reversed(self.model.approvals.values())
            if status is None or (a.status == "pending") == (status == "pending")
        ]
        return candidates[data.draw(st.integers(0, len(candidates) - 1), label="plan")]

    def _pending(self) -> list[ModelApproval]:
        return [a for a in self.model.approvals.values() if a.status == "pending"]

    def _expect_refusal(
        self, answer: Answer, codes: frozenset[str], what: str, key: str = "state"
    ) -> None:
        if answer.error is None:
            raise broken(key, f"{what} was accepted: {answer.result}")
        if answer.code not in codes:
            expected = " or ".join(sorted(codes))
            raise broken("state", f"{what} was refused with {answer.code}, not {expected}")

    def _busy_codes(self, session: ModelSession) -> frozenset[str]:
        if self.model.pending(session.alias) is not None:
            return frozenset({"APPROVAL_PENDING"})
        return frozenset({"SESSION_BUSY"})

    def _finish_turn(self, turn_id: str, since: int, decision: str) -> dict[str, Any]:
        """Wait for the turn to end, answering every permission question on the way."""
        position = since
        while True:
            index, note = self.rpc.wait_for_any(
                TURN_EVENTS, lambda p: p.get("turnId") == turn_id, since=position
            )
            position = index + 1
            params: dict[str, Any] = note["params"]
            if note["method"] == "turn/ended":
                return params
            self.rpc.request(
                "permission/respond", {"requestId": params["requestId"], "decision": decision}
            )

    def _completed(self, ended: dict[str, Any], what: str) -> None:
        if ended["outcome"] != "completed":
            raise broken("state", f"{what} ended {ended['outcome']}: {ended.get('error')}")

    def _note_command(self, turn_id: str, since: int, token: str) -> None:
        for note in self.rpc.notifications("turn/toolResult", since):
            params = note["params"]
            if (
                params["turnId"] == turn_id
                and params["tool"] == "Bash"
                and params["status"] == "ok"
            ):
                self.commands_ok.add(token)

    def _command_reply(self, alias: str) -> tuple[str, tuple[ScriptedReply, ...]]:
        token = f"command-{self._next()}"
        self.commands[token] = alias
        call = ScriptedToolCall("Bash", {"command": f"printf '%s\\n' {token} >> {LOG_FILE}"})
        return token, (ToolCallsReply((call,)), TextReply("Done."))

    def _execution_end(self, approval: ModelApproval, since: int) -> str:
        """The final state the host announced for ``approval``'s execution."""
        found = self.rpc.wait_for(
            "execution/updated",
            lambda p: (
                p.get("executionId") == approval.execution_id
                and p.get("executionState") in FINAL_EXECUTION
            ),
            since=since,
        )
        return str(found["executionState"])

    # -- sessions -------------------------------------------------------------------------

    def create_session(self, data: st.DataObject) -> None:
        mode = data.draw(st.sampled_from(("plan", "agent")), label="mode")
        self._create_session(mode, data.draw(st.sampled_from(PROJECTS), label="project"))

    def _create_session(self, mode: str, project: str) -> None:
        alias = f"session {len(self.model.sessions) + 1}"
        self.story.add(f"the user creates {alias} for project {project} in {mode.title()} mode")
        provider = {"baseUrl": self.provider.base_url, "model": MODEL_NAME}
        params = {"workspaceRoot": str(self.projects[project]), "mode": mode, "provider": provider}
        session = self.rpc.request("session/create", params)["session"]
        if (session["mode"], session["permissionMode"]) != (mode, "ask"):
            raise broken(
                "state",
                f"a new {mode} session came back in {session['mode']} mode with permission "
                f"mode {session['permissionMode']} (ask is the default)",
            )
        self.model.sessions[alias] = ModelSession(
            alias, session["sessionId"], project, mode, "ask", MODEL_NAME
        )

    def configure(self, data: st.DataObject) -> None:
        session = self._draw_session(data)
        alias = session.alias
        change = data.draw(st.sampled_from(("plan", "agent", *PERMISSION_MODES, "model")))
        params: dict[str, Any]
        if change in ("plan", "agent"):
            params, verb = {"mode": change}, ("switch", "switches")
            what = f"{alias} to {change.title()} mode"
        elif change == "model":
            name = f"explorer-model-{self._next()}"
            params = {"provider": {"baseUrl": self.provider.base_url, "model": name}}
            verb, what = ("select", "selects"), f"another model for {alias}"
        else:
            params, verb = {"permissionMode": change}, ("set", "sets")
            what = f"the permission mode of {alias} to {change}"
        busy = self.model.busy(alias)
        answer = self._call("session/configure", {"sessionId": session.session_id, **params})
        if busy is not None:
            self.story.add(f"the user tries to {verb[0]} {what} while {busy}")
            self._expect_refusal(answer, self._busy_codes(session), f"a change while {busy}")
            return
        self.story.add(f"the user {verb[1]} {what}")
        if answer.result is None:
            raise broken("state", f"{alias} was idle, yet the change was refused: {answer.code}")
        session.mode = params.get("mode", session.mode)
        session.permission_mode = params.get("permissionMode", session.permission_mode)
        wire = answer.result["session"]
        if (wire["mode"], wire["permissionMode"]) != (session.mode, session.permission_mode):
            raise broken("state", f"after the change {alias} reads {wire}")

    # -- turns ----------------------------------------------------------------------------

    def ask_for_plan(self, data: st.DataObject) -> None:
        idle = [s for s in self._sessions() if self.model.busy(s.alias) is None]
        session = idle[data.draw(st.integers(0, len(idle) - 1), label="session")]
        lead = ""
        if session.mode != "plan":
            # The user goes back to Plan first, as the product's selector lets them.
            answer = self._call(
                "session/configure", {"sessionId": session.session_id, "mode": "plan"}
            )
            if answer.result is None:
                refused = f"idle {session.alias} could not switch to Plan mode: {answer.code}"
                raise broken("state", refused)
            session.mode = "plan"
            lead = f"the user switches {session.alias} to Plan mode, "
        self._submit(session, lead)

    def submit_outside_plan(self, data: st.DataObject) -> None:
        idle = [
            s for s in self._sessions() if self.model.busy(s.alias) is None and s.mode == "agent"
        ]
        session = idle[data.draw(st.integers(0, len(idle) - 1), label="session")]
        self._submit(session, "")

    def _submit(self, session: ModelSession, lead: str) -> None:
        title = f"Plan {self._next()}"
        markdown = f"# {title}\n\n1. Read the code.\n2. Append a line to {LOG_FILE}.\n"
        submit = ScriptedToolCall(
            "SubmitPlan", {"title": title, "markdown": markdown, "question": "Go ahead?"}
        )
        in_plan = session.mode == "plan"
        # Outside Plan the host refuses SubmitPlan and the turn goes on to a closing answer.
        script: tuple[ScriptedReply, ...] = (ToolCallsReply((submit,)),)
        if not in_plan:
            script += (TextReply("Understood."),)
        suffix = "" if in_plan else f" while {session.alias} is in Agent mode"
        asks = "asks" if not lead else "then asks"
        self.story.add(
            f"{lead or 'the user '}{asks} {session.alias} for a plan and the model submits "
            f'"{title}"{suffix}'.replace("the user then asks", "the user asks")
        )
        turn_id, since = self._prompt(session, script)
        self._completed(self._finish_turn(turn_id, since, "allow"), f"the turn of {session.alias}")
        if in_plan:
            self._register_plan(session, title, markdown)

    def prompt(self, data: st.DataObject) -> None:
        session = self._draw_session(data)
        reply = data.draw(st.sampled_from(("text", "command", "slow")), label="reply")
        if self._refused_prompt(session, f"prompt {session.alias}"):
            return
        token = ""
        decision = "allow"
        if reply == "text":
            script: tuple[ScriptedReply, ...] = (TextReply("I looked at the project."),)
            self.story.add(f"the user prompts {session.alias} and the model answers")
        elif reply == "command":
            decision = data.draw(st.sampled_from(("allow", "deny")), label="permission")
            token, script = self._command_reply(session.alias)
            self.story.add(
                f"the user prompts {session.alias} and the model runs a command that appends "
                f'"{token}" to {LOG_FILE} (the user would {decision} it)'
            )
        else:
            script = (StallReply(suffix="Done after a while."),)
            self.story.add(f"the user prompts {session.alias} and the model takes its time")
        turn_id, since = self._prompt(session, script)
        if reply == "slow":
            self.provider.wait_for_requests(self.expected_requests, self.context.timeout)
            session.active_turn = turn_id
            return
        self._completed(self._finish_turn(turn_id, since, decision), f"the turn of {session.alias}")
        if token:
            self._note_command(turn_id, since, token)

    def _refused_prompt(self, session: ModelSession, what: str) -> bool:
        busy = self.model.busy(session.alias)
        if busy is None:
            return False
        self.story.add(f"the user tries to {what} while {busy}")
        answer = self._call("session/prompt", {"sessionId": session.session_id, "text": "Go on."})
        self._expect_refusal(answer, self._busy_codes(session), f"a prompt while {busy}")
        return True

    def _prompt(self, session: ModelSession, script: tuple[ScriptedReply, ...]) -> tuple[str, int]:
        self.provider.enqueue(*script)
        since = self.rpc.mark()
        answer = self._call("session/prompt", {"sessionId": session.session_id, "text": "Go on."})
        if answer.result is None:
            raise broken(
                "state", f"{session.alias} was idle, yet a prompt was refused: {answer.code}"
            )
        turn_id = str(answer.result["turnId"])
        self.turn_owner[turn_id] = session.alias
        self.expected_requests += len(script)
        return turn_id, since

    def _register_plan(self, session: ModelSession, title: str, markdown: str) -> None:
        listed = self.rpc.request("approval/list", {"sessionId": session.session_id})["approvals"]
        new = [a for a in listed if a["approvalId"] not in self.model.approvals]
        if len(new) != 1:
            raise broken(
                "state",
                f'after the model submitted "{title}" in Plan mode {session.alias} lists '
                f"{len(new)} new plans",
            )
        wire = new[0]
        if wire["status"] != "pending" or wire["title"] != title:
            raise broken("state", f'the submitted plan "{title}" reads {wire}')
        if wire["createdAt"] != self.model.now:
            raise broken(
                "fixed-deadline",
                f'"{title}" was created at {wire["createdAt"]} while the host clock read '
                f"{self.model.now}",
            )
        if wire["expiresAt"] != wire["createdAt"] + APPROVAL_TTL_MS:
            lifetime = wire["expiresAt"] - wire["createdAt"]
            raise broken("fixed-deadline", f'"{title}" expires {lifetime} ms after its creation')
        approval = ModelApproval(
            approval_id=wire["approvalId"],
            session=session.alias,
            title=title,
            markdown=markdown,
            artifact_path=wire["artifact"]["path"],
            created_at=self.model.now,
        )
        self.model.approvals[approval.approval_id] = approval
        session.approvals.append(approval.approval_id)

    # -- decisions ------------------------------------------------------------------------

    def approve(self, data: st.DataObject) -> None:
        approval = self._draw_approval(data, "pending")
        mode = data.draw(st.sampled_from(PERMISSION_MODES), label="permission mode")
        reply = data.draw(st.sampled_from(("text", "slow", "command")), label="execution")
        decision = "allow"
        if reply == "command":
            decision = data.draw(st.sampled_from(("allow", "deny")), label="permission")
        self._approve(approval, mode, reply, decision)

    def approve_and_hold(self, data: st.DataObject) -> None:
        approval = self._draw_approval(data, "pending")
        mode = data.draw(st.sampled_from(PERMISSION_MODES), label="permission mode")
        self._approve(approval, mode, "held", "allow")

    def _approve(self, approval: ModelApproval, mode: str, reply: str, decision: str) -> None:
        session = self.model.sessions[approval.session]
        label = self.label(approval)
        params = {
            "sessionId": session.session_id,
            "approvalId": approval.approval_id,
            "permissionMode": mode,
        }
        refusals = self.model.decision_refusals(approval)
        if refusals is not None:
            self.story.add(
                f"the user tries to approve {label} with permission mode {mode} "
                f"{_AFTER[approval.status]}"
            )
            key = "fixed-deadline" if approval.status in ("pending", "expired") else "forward-only"
            answer = self._call("approval/approve", params)
            self._expect_refusal(answer, refusals, f"approving {label}", key)
            return
        token = ""
        script: tuple[ScriptedReply, ...] = ()
        if reply == "text":
            script, tail = (TextReply("The plan is done."),), "and the agent carries it out"
        elif reply == "command":
            token, script = self._command_reply(session.alias)
            tail = f'and the agent runs a command that appends "{token}" to {LOG_FILE}'
            tail += f" (the user would {decision} it)"
        elif reply == "slow":
            script = (StallReply(suffix="Done after a while."),)
            tail = "and the model takes its time with the execution"
        else:
            self.rpc.request("conformance/fault/arm", {"fault": "holdExecution"})
            tail = "and the host keeps the execution in its queue"
        self.story.add(f"the user approves {label} with permission mode {mode}, {tail}")
        self.provider.enqueue(*script)
        since = self.rpc.mark()
        answer = self._call("approval/approve", params)
        if answer.result is None:
            raise broken(
                "state",
                f"{label} was pending before its deadline, yet approving it was refused with "
                f"{answer.code}",
            )
        self.expected_requests += len(script)
        self._check_approved(approval, session, answer.result, mode)
        approval.status, approval.permission_mode = "approved", mode
        approval.execution_id = str(answer.result["approval"]["executionId"])
        approval.execution_state, approval.approved_by_user = "queued", True
        session.mode, session.permission_mode = "agent", mode
        if reply == "held":
            return
        started = self.rpc.wait_for(
            "turn/started", lambda p: p.get("approvalId") == approval.approval_id, since=since
        )
        if started["sessionId"] != session.session_id or started["kind"] != "execution":
            raise broken("isolation", f"the execution of {label} started as {started}")
        turn_id = str(started["turnId"])
        self.turn_owner[turn_id] = session.alias
        self.execution_turns[turn_id] = approval.approval_id
        if reply == "slow":
            self.provider.wait_for_requests(self.expected_requests, self.context.timeout)
            self.rpc.wait_for(
                "execution/updated",
                lambda p: (
                    p.get("executionId") == approval.execution_id
                    and p.get("executionState") == "running"
                ),
                since=since,
            )
            approval.execution_state = "running"
            session.active_turn = turn_id
            return
        self._completed(self._finish_turn(turn_id, since, decision), f"the execution of {label}")
        approval.execution_state = self._execution_end(approval, since)
        if approval.execution_state != "completed":
            raise broken("state", f"the completed execution of {label} ended interrupted")
        if token:
            self._note_command(turn_id, since, token)

    def _check_approved(
        self, approval: ModelApproval, session: ModelSession, result: dict[str, Any], mode: str
    ) -> None:
        wire, wire_session = result["approval"], result["session"]
        label = self.label(approval)
        if wire["permissionMode"] != mode:
            raise broken(
                "no-implicit-approval",
                f"{label} was approved with {mode}, but records {wire['permissionMode']}",
            )
        if wire["status"] != "approved" or not wire["executionId"]:
            raise broken("state", f"approving {label} answered {wire}")
        if wire["executionState"] not in ("queued", "running", "completed"):
            raise broken("state", f"approving {label} left its execution {wire['executionState']}")
        if (wire_session["mode"], wire_session["permissionMode"]) != ("agent", mode):
            raise broken(
                "state",
                f"after approving {label} with {mode}, {session.alias} is in "
                f"{wire_session['mode']} mode with {wire_session['permissionMode']}",
            )

    def reject(self, data: st.DataObject) -> None:
        self._reject(self._draw_approval(data, "pending"))

    def decide_again(self, data: st.DataObject) -> None:
        approval = self._draw_approval(data, "decided")
        if data.draw(st.booleans(), label="reject"):
            self._reject(approval)
        else:
            mode = data.draw(st.sampled_from(PERMISSION_MODES), label="permission mode")
            self._approve(approval, mode, "text", "allow")

    def _reject(self, approval: ModelApproval) -> None:
        session = self.model.sessions[approval.session]
        label = self.label(approval)
        params = {"sessionId": session.session_id, "approvalId": approval.approval_id}
        refusals = self.model.decision_refusals(approval)
        answer = self._call("approval/reject", params)
        if refusals is not None:
            self.story.add(f"the user tries to reject {label} {_AFTER[approval.status]}")
            key = "fixed-deadline" if approval.status in ("pending", "expired") else "forward-only"
            self._expect_refusal(answer, refusals, f"rejecting {label}", key)
            return
        self.story.add(f"the user rejects {label}")
        if answer.result is None:
            raise broken("state", f"{label} was pending, yet rejecting it failed: {answer.code}")
        wire = answer.result["approval"]
        if wire["status"] != "rejected" or wire["permissionMode"] or wire["executionId"]:
            raise broken("no-implicit-approval", f"rejecting {label} answered {wire}")
        approval.status = "rejected"

    def act_through_another_session(self, data: st.DataObject) -> None:
        approval = self._draw_approval(data)
        others = [s for s in self._sessions() if s.alias != approval.session]
        actor = others[data.draw(st.integers(0, len(others) - 1), label="other session")]
        action = data.draw(st.sampled_from(("approve", "reject", "open")), label="what")
        label = self.label(approval)
        params: dict[str, Any] = {"sessionId": actor.session_id, "approvalId": approval.approval_id}
        method = {
            "approve": "approval/approve",
            "reject": "approval/reject",
            "open": "approval/get",
        }
        if action == "approve":
            params["permissionMode"] = "auto"
            self.story.add(f"{actor.alias} tries to approve {label} with permission mode auto")
        else:
            self.story.add(f"{actor.alias} tries to {action} {label}")
        answer = self._call(method[action], params)
        if answer.error is None:
            raise broken("isolation", f"{actor.alias} could {action} {label}: {answer.result}")

    def reopen(self, data: st.DataObject) -> None:
        approval = self._draw_approval(data)
        session = self.model.sessions[approval.session]
        label = self.label(approval)
        self.story.add(f"the user opens {label} and its artifact again")
        params = {"sessionId": session.session_id, "approvalId": approval.approval_id}
        wire = self.rpc.request("approval/get", params)["approval"]
        if (wire["createdAt"], wire["expiresAt"]) != (approval.created_at, approval.expires_at):
            raise broken(
                "fixed-deadline",
                f"reopened, {label} shows created {wire['createdAt']} and expiring "
                f"{wire['expiresAt']}; it was created {approval.created_at} and expires "
                f"{approval.expires_at}",
            )
        answer = self._call("artifact/read", params)
        if answer.result is None:
            raise broken("artifact", f"the artifact of {label} could not be read: {answer.code}")
        content = base64.b64decode(answer.result["contentBase64"])
        expected = approval.markdown.encode("utf-8")
        if content != expected:
            raise broken("artifact", f"the artifact of {label} reads {content[:80]!r}")
        digest = hashlib.sha256(expected).hexdigest()
        if (answer.result["sha256"], answer.result["byteSize"]) != (digest, len(expected)):
            raise broken("artifact", f"the artifact of {label} is described as {answer.result}")

    # -- time -----------------------------------------------------------------------------

    def time_passes(self, data: st.DataObject) -> None:
        minutes = data.draw(st.sampled_from((1, 10, 29, 31)), label="minutes")
        self.story.add(f"{minutes} minutes pass" if minutes > 1 else "1 minute passes")
        now = int(self.rpc.request("conformance/clock/advance", {"ms": minutes * 60_000})["now"])
        self._clock_moved(self.model.now + minutes * 60_000, now)

    def clock_near_deadline(self, data: st.DataObject) -> None:
        pending = self._pending()
        approval = pending[data.draw(st.integers(0, len(pending) - 1), label="plan")]
        offset = data.draw(st.sampled_from((-1, 0, 1)), label="offset")
        where = {-1: "one millisecond before", 0: "exactly", 1: "one millisecond after"}[offset]
        self.story.add(f"the clock reaches {where} the deadline of {self.label(approval)}")
        target = approval.expires_at + offset
        now = int(self.rpc.request("conformance/clock/set", {"now": target})["now"])
        self._clock_moved(target, now)

    def _clock_moved(self, target: int, now: int) -> None:
        if now != target:
            raise broken("state", f"the host clock reads {now} after it was moved to {target}")
        self.model.now = now
        self.model.expire_due()

    # -- cancel and slow answers ----------------------------------------------------------

    def cancel(self, data: st.DataObject) -> None:
        busy = [s for s in self._sessions() if self.model.busy(s.alias)]
        busy.sort(key=lambda s: s.active_turn is None)  # running turns first
        session = busy[data.draw(st.integers(0, len(busy) - 1), label="session")]
        alias = session.alias
        since = self.rpc.mark()
        answer = self._call("session/cancel", {"sessionId": session.session_id})
        if self.model.pending(alias) is not None:
            self.story.add(f"the user tries to cancel {alias} while a plan awaits approval")
            self._expect_refusal(answer, frozenset({"APPROVAL_PENDING"}), "a cancel")
            return
        active = session.active_turn
        if active is None:
            self.story.add(f"the user cancels {alias}, whose approved plan waits in the queue")
            if answer.result is None or answer.result["turnId"] is not None:
                raise broken("state", f"cancelling {alias} without a turn answered {answer}")
            queued = self.model.executing(alias)
            if queued is not None:
                # Cancel concerns turns; a host may also interrupt the queued execution.
                params = {"sessionId": session.session_id, "approvalId": queued.approval_id}
                wire = self.rpc.request("approval/get", params)["approval"]
                if wire["executionState"] == "interrupted":
                    queued.execution_state = "interrupted"
            return
        self.story.add(f"the user cancels the running turn of {alias}")
        if answer.result is None or answer.result["turnId"] != active:
            raise broken("state", f"cancelling the running turn of {alias} answered {answer}")
        ended = self.rpc.wait_for("turn/ended", lambda p: p.get("turnId") == active, since=since)
        if ended["outcome"] != "cancelled":
            raise broken("state", f"the cancelled turn of {alias} ended {ended['outcome']}")
        session.active_turn = None
        approval_id = self.execution_turns.get(active)
        if approval_id is not None:
            approval = self.model.approvals[approval_id]
            approval.execution_state = "interrupted"
            try:
                found = self._execution_end(approval, since)
            except TimeoutError:
                found = "never announced as finished"
            if found != "interrupted":
                label = self.label(approval)
                raise broken("state", f"the cancelled execution of {label} is {found}")

    def model_finishes(self, data: st.DataObject) -> None:
        self.story.add("the model finishes its slow answers")
        since = self.rpc.mark()
        self.provider.release_stalls()
        for session in self._sessions():
            turn = session.active_turn
            if turn is None:
                continue
            self._completed(self._finish_turn(turn, since, "allow"), f"the turn of {session.alias}")
            session.active_turn = None
            approval_id = self.execution_turns.get(turn)
            if approval_id is not None:
                approval = self.model.approvals[approval_id]
                approval.execution_state = self._execution_end(approval, since)
                if approval.execution_state != "completed":
                    label = self.label(approval)
                    raise broken("state", f"the finished execution of {label} was interrupted")

    # -- restarts -------------------------------------------------------------------------

    def restart(self, data: st.DataObject) -> None:
        how = data.draw(st.sampled_from(("restarts", "crashes")), label="how")
        crash = how == "crashes" and self.context.can_crash
        self.story.add("the host crashes and starts again" if crash else "the host restarts")
        self.changed_since_restart = False
        self._stop(crash)
        self.host = self.context.driver.start(self.data_dir)
        self.client = HostClient(self.host, self.context.timeout)
        self.seen = 0
        self.client.initialize()
        # Recovery runs before the first answer (§4): storage must show it already.
        storage = StorageInspector(self.data_dir)
        for row in storage.rows("plan_approvals"):
            if row["status"] == "pending" or row["execution_state"] in ("queued", "running"):
                raise broken(
                    "recovery",
                    f"when the restarted host first answered, storage still held plan "
                    f"{row['title']!r} as {row['status']} with execution {row['execution_state']}",
                )
        active = [t["id"] for t in storage.rows("turns", "state = 'active'")]
        if active:
            raise broken(
                "recovery", f"when the restarted host first answered, turns {active} were active"
            )
        for approval in self.model.approvals.values():
            if approval.status == "pending" or approval.executing:
                self.interrupted_by_restart.add(approval.approval_id)
        self.model.interrupt_all()
        self.model.now = int(self.rpc.request("conformance/clock/get", {})["now"])
