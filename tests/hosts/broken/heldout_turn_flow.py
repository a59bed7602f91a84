"""Broken hosts: a fourteenth held-out set (the flow of a turn and the execution), written
from the contract alone.

Six of these fourteen went uncaught at first; all are caught now: the execution of a
revised plan, a later turn remembering the execution, the Plan tools after an execution
enters Plan, and (a round later) a new context inside an execution, an execution shown
inactive once it entered Plan, and a cancelled turn's calls sent back unanswered.
"""

from __future__ import annotations

import contextvars
from dataclasses import replace
from typing import Any

from hosts.registry import BrokenCase, patch, rewrite_notifications, variant
from reference_host import approvals, turns
from reference_host.approvals import Approvals
from reference_host.errors import HostError
from reference_host.host import Host
from reference_host.storage import Storage
from reference_host.turns import TurnRunner

# The turn whose agent loop runs in the current task (set by _track_turns).
_CURRENT_TURN: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "heldout_turn_flow_turn", default=None
)


class _Turns:
    """What the patched host remembers about the turns it started (in this process)."""

    def __init__(self) -> None:
        self.kind: dict[str, str] = {}
        self.start_mode: dict[str, str] = {}
        self.plan_turn_of: dict[str, str | None] = {}  # execution turn -> approval's turn
        self.history_calls: dict[str, int] = {}


_TURNS = _Turns()


def _track_turns() -> None:
    """Record each turn's kind, starting mode and approval, and the running turn's id."""
    start = TurnRunner.start
    loop = TurnRunner._loop

    async def _start(
        self: TurnRunner,
        session: Any,
        kind: str,
        user_text: str,
        approval: Any = None,
        unattended: bool = False,
        on_end: Any = None,
    ) -> str:
        turn_id: str = await start(self, session, kind, user_text, approval, unattended, on_end)
        _TURNS.kind[turn_id] = kind
        _TURNS.start_mode[turn_id] = session.mode
        _TURNS.plan_turn_of[turn_id] = approval.turn_id if approval is not None else None
        return turn_id

    async def _loop(self: TurnRunner, session_id: str, turn_id: str, unattended: bool) -> None:
        _CURRENT_TURN.set(turn_id)
        await loop(self, session_id, turn_id, unattended)

    patch(TurnRunner, "start", _start)
    patch(TurnRunner, "_loop", _loop)


def _is_execution(turn_id: str | None) -> bool:
    return turn_id is not None and _TURNS.kind.get(turn_id) == "execution"


async def _history_without(
    runner: TurnRunner, session_id: str, drop: Any, reset: bool = True
) -> list[dict[str, Any]]:
    """The reference history, leaving out the transcript entries ``drop(turn_id)`` names;
    with ``reset`` False, context resets are ignored (everything since the start, without
    the summaries)."""
    entries = await runner.host.storage.transcript(session_id)
    contents = [content for _seq, turn, _role, content, _at in entries if not drop(turn)]
    start = 0
    if reset:
        start = max((i for i, c in enumerate(contents) if c.get("contextReset")), default=0)
    else:
        contents = [c for c in contents if not c.get("contextReset")]
    kept = [{k: v for k, v in c.items() if k != "contextReset"} for c in contents[start:]]
    return turns.answered_only(kept)


# -- the execution prompt and the execution's history ---------------------------------------


@variant("execution-prompt-from-first-plan")
def _execution_prompt_from_first_plan() -> None:
    # P15 (Execution and restart §4): the execution prompt carries the path and markdown of
    # the session's FIRST submitted plan (the host caches "the session's plan" at its first
    # SubmitPlan), so after a reject and a revision the approved plan's text never reaches
    # the model. The approval record itself is right.
    first: dict[str, tuple[str, bytes]] = {}
    submit = Approvals.submit
    prompt = approvals._execution_prompt

    async def _submit(self: Approvals, session: Any, turn_id: str, args: dict[str, Any]) -> Any:
        row = await submit(self, session, turn_id, args)
        first.setdefault(row.session_id, (row.artifact_path, str(args["markdown"]).encode()))
        return row

    def _prompt(row: Any, content: bytes) -> str:
        path, markdown = first.get(row.session_id, (row.artifact_path, content))
        return prompt(replace(row, artifact_path=path), markdown)

    patch(Approvals, "submit", _submit)
    patch(approvals, "_execution_prompt", _prompt)


@variant("execution-history-skips-plan-turn")
def _execution_history_skips_plan_turn() -> None:
    # R4.7: the execution's first request carries the session's earlier messages but leaves
    # out the Plan turn that submitted the plan (its prompt, the SubmitPlan call and its
    # result), "since the plan is in the execution prompt anyway".
    _track_turns()

    async def _history(self: TurnRunner, session_id: str) -> list[dict[str, Any]]:
        current = _CURRENT_TURN.get()
        plan_turn = _TURNS.plan_turn_of.get(current) if _is_execution(current) else None
        return await _history_without(
            self, session_id, lambda turn: plan_turn is not None and turn == plan_turn
        )

    patch(TurnRunner, "_history", _history)


@variant("later-turns-forget-the-execution")
def _later_turns_forget_the_execution() -> None:
    # R1.3: the execution turn's messages are kept in the transcript but a later prompt of
    # the session is not shown them: the host builds a turn's history without the messages
    # of execution turns other than the running one.
    _track_turns()

    async def _history(self: TurnRunner, session_id: str) -> list[dict[str, Any]]:
        current = _CURRENT_TURN.get()
        return await _history_without(
            self, session_id, lambda turn: turn != current and _is_execution(turn)
        )

    patch(TurnRunner, "_history", _history)


@variant("new-context-ignored-in-execution")
def _new_context_ignored_in_execution() -> None:
    # P10 (new_context) / R4.7: inside an execution turn new_context is recorded (the
    # transcript holds the summary, later turns start from it) but the execution's own next
    # request goes on with the whole earlier conversation and no summary; prompt turns reset
    # as they should.
    _track_turns()
    history = TurnRunner._history

    async def _history(self: TurnRunner, session_id: str) -> list[dict[str, Any]]:
        current = _CURRENT_TURN.get()
        if current is None:
            return await history(self, session_id)
        calls = _TURNS.history_calls[current] = _TURNS.history_calls.get(current, 0) + 1
        if calls > 1 and _is_execution(current):
            return await _history_without(self, session_id, lambda turn: False, reset=False)
        return await history(self, session_id)

    patch(TurnRunner, "_history", _history)


# -- mode switches inside a turn ----------------------------------------------------------


@variant("submit-plan-checks-turn-start-mode")
def _submit_plan_checks_turn_start_mode() -> None:
    # P10 (EnterPlanMode) / R1.7: "the active Plan turn" is decided by the mode a prompt turn
    # STARTED in: after EnterPlanMode in an Agent prompt turn the Plan tools are offered, but
    # the SubmitPlan that follows is refused with SUBMIT_PLAN_OUTSIDE_PLAN_TURN.
    _track_turns()
    run_call = TurnRunner._run_call

    async def _run_call(
        self: TurnRunner, session: Any, turn_id: str, call: Any, unattended: bool
    ) -> Any:
        if (
            call.name == "SubmitPlan"
            and _TURNS.kind.get(turn_id) == "prompt"
            and _TURNS.start_mode.get(turn_id) != "plan"
        ):
            refusal = HostError("SUBMIT_PLAN_OUTSIDE_PLAN_TURN", "this turn is not a Plan turn")
            return turns._failure(refusal)
        return await run_call(self, session, turn_id, call, unattended)

    patch(TurnRunner, "_run_call", _run_call)


@variant("submit-plan-refused-in-execution-turn")
def _submit_plan_refused_in_execution_turn() -> None:
    # R4.9 (vs R1.7 "not in the execution of an approved plan"): an execution turn that
    # entered Plan with EnterPlanMode has its SubmitPlan refused with
    # SUBMIT_PLAN_OUTSIDE_PLAN_TURN, because the host refuses SubmitPlan in any execution turn.
    _track_turns()
    run_call = TurnRunner._run_call

    async def _run_call(
        self: TurnRunner, session: Any, turn_id: str, call: Any, unattended: bool
    ) -> Any:
        if call.name == "SubmitPlan" and _is_execution(turn_id):
            refusal = HostError(
                "SUBMIT_PLAN_OUTSIDE_PLAN_TURN", "SubmitPlan is not valid in an execution"
            )
            return turns._failure(refusal)
        return await run_call(self, session, turn_id, call, unattended)

    patch(TurnRunner, "_run_call", _run_call)


@variant("enter-plan-clears-active-execution")
def _enter_plan_clears_active_execution() -> None:
    # R4.5 / C4: EnterPlanMode inside an execution turn clears the session's
    # activeExecutionId (the host ties "executing" to Agent mode), although the execution is
    # still running until its turn ends.
    enter = Host.enter_plan_mode

    async def _enter(self: Host, session: Any) -> None:
        self.set_activity(session.id, active_execution_id=None)
        await enter(self, session)

    patch(Host, "enter_plan_mode", _enter)


@variant("execution-ending-in-plan-interrupted")
def _execution_ending_in_plan_interrupted() -> None:
    # R4.9 / R4.5: an execution whose turn completed after entering Plan (and submitting a
    # new plan) is recorded `interrupted` instead of `completed`: the host judges the
    # execution by the mode the session ended in, not by the turn's outcome.
    finished = Approvals.execution_finished

    async def _finished(self: Approvals, approval_id: str, final: Any) -> None:
        row = await self.host.storage.get_approval(approval_id)
        if final == "completed" and row is not None:
            session = await self.host.storage.get_session(row.session_id)
            if session is not None and session.mode == "plan":
                final = "interrupted"
        await finished(self, approval_id, final)

    patch(Approvals, "execution_finished", _finished)


@variant("execution-end-restores-agent")
def _execution_end_restores_agent() -> None:
    # R4.9 ("its execution ends with its turn, in whatever mode the turn ended"): when an
    # execution turn that entered Plan ends, the host puts the session back in Agent (stored
    # and announced), although the turn ended in Plan with a new plan pending.
    finished = Approvals.execution_finished

    async def _finished(self: Approvals, approval_id: str, final: Any) -> None:
        await finished(self, approval_id, final)
        row = await self.host.storage.get_approval(approval_id)
        if row is None:
            return
        session = await self.host.storage.get_session(row.session_id)
        if session is not None and session.mode == "plan":
            now = self.host.clock.now_ms()
            await self.host.storage.update_session(replace(session, mode="agent", updated_at=now))
            await self.host.publish_session(session.id)

    patch(Approvals, "execution_finished", _finished)


# -- what turns leave behind ---------------------------------------------------------------


@variant("execution-turn-not-active-turn")
def _execution_turn_not_active_turn() -> None:
    # Sessions, turns and boundaries (activeTurnId names "its running turn (prompt, execution
    # or scheduled run)") / R7.2: while an execution turn runs, the session reports
    # activeTurnId null (the host shows only activeExecutionId for it); prompt turns are
    # reported.
    wire = Host.session_wire

    def _session_wire(self: Host, row: Any) -> dict[str, Any]:
        shown: dict[str, Any] = wire(self, row)
        if self.activity_of(row.id).active_execution_id is not None:
            shown = {**shown, "activeTurnId": None}
        return shown

    patch(Host, "session_wire", _session_wire)


@variant("cancelled-calls-sent-unanswered")
def _cancelled_calls_sent_unanswered() -> None:
    # The model provider (tool calls paired with tool messages) / R1.3: the host leaves out
    # calls that never got a result only for turns a restart interrupted; the calls of a
    # turn CANCELLED while they ran stay in the history, so the next turn's request has an
    # assistant message whose tool_calls no tool message answers.
    cancelled: set[str] = set()
    end_turn = Storage.end_turn

    async def _end_turn(self: Storage, turn_id: str, state: str, at: int) -> None:
        if state == "cancelled":
            cancelled.add(turn_id)
        await end_turn(self, turn_id, state, at)

    async def _history(self: TurnRunner, session_id: str) -> list[dict[str, Any]]:
        entries = await self.host.storage.transcript(session_id)
        contents = [(turn, content) for _seq, turn, _role, content, _at in entries]
        start = max((i for i, (_t, c) in enumerate(contents) if c.get("contextReset")), default=0)
        kept = [
            (turn, {k: v for k, v in c.items() if k != "contextReset"})
            for turn, c in contents[start:]
        ]
        answered = {str(m.get("tool_call_id")) for _t, m in kept if m.get("role") == "tool"}
        made: set[str] = set()
        out: list[dict[str, Any]] = []
        for turn, message in kept:
            calls = message.get("tool_calls") or []
            if turn in cancelled and calls:
                made.update(str(call.get("id")) for call in calls)
                out.append(message)
                continue
            paired = [call for call in calls if str(call.get("id")) in answered]
            made.update(str(call.get("id")) for call in paired)
            if len(paired) != len(calls):
                message = {k: v for k, v in message.items() if k != "tool_calls"}
                if paired:
                    message["tool_calls"] = paired
                elif not message.get("content"):
                    continue
            if message.get("role") == "tool" and str(message.get("tool_call_id")) not in made:
                continue
            out.append(message)
        return out

    patch(Storage, "end_turn", _end_turn)
    patch(TurnRunner, "_history", _history)


@variant("failed-turn-stored-interrupted")
def _failed_turn_stored_interrupted() -> None:
    # P25 (the `turns` row of a provider error has state `failed`): the host stores a failed
    # turn as `interrupted` (its word for "did not finish"), while turn/ended says `failed`.
    end_turn = Storage.end_turn

    async def _end_turn(self: Storage, turn_id: str, state: str, at: int) -> None:
        await end_turn(self, turn_id, "interrupted" if state == "failed" else state, at)

    patch(Storage, "end_turn", _end_turn)


@variant("execution-keeps-agent-tools-after-enter")
def _execution_keeps_agent_tools_after_enter() -> None:
    # R1.4 / P10 (EnterPlanMode: "the next provider request offers exactly the Plan tools"),
    # read against R4.7 ("its provider requests offer the Agent tools"): an execution turn
    # always offers the Agent tools, also after its EnterPlanMode; the calls themselves are
    # still gated by the session's mode, so its SubmitPlan works.
    _track_turns()
    ask = TurnRunner._ask_model

    async def _ask_model(self: TurnRunner, session: Any, turn_id: str, messages: Any) -> Any:
        if _is_execution(turn_id):
            session = replace(session, mode="agent")
        return await ask(self, session, turn_id, messages)

    patch(TurnRunner, "_ask_model", _ask_model)


@variant("execution-announced-as-prompt-turn")
def _execution_announced_as_prompt_turn() -> None:
    # R4.7 ("a turn/started of kind execution ... naming the approval and the execution"):
    # the execution's turn/started names the approval and the execution but says kind
    # `prompt` (the host's one turn/started builder defaults the kind); storage says
    # `execution`.
    def rewrite(method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "turn/started" and params.get("executionId") is not None:
            return {**params, "kind": "prompt"}
        return params

    rewrite_notifications(rewrite)


CASES = [
    BrokenCase(
        "execution-prompt-from-first-plan",
        "execution",
        "revised_plan_starts",
        "P15",
        "the model was not told the artifact path",
    ),
    BrokenCase(
        "later-turns-forget-the-execution",
        "execution",
        "remembers_what_the_execution",
        "R1.3",
        "does not carry what the model said",
    ),
    BrokenCase(
        "execution-keeps-agent-tools-after-enter",
        "execution",
        "still_waits_for_the_user_once",
        "R1.4",
        "after EnterPlanMode in the execution",
    ),
    BrokenCase(
        "execution-history-skips-plan-turn",
        "execution",
        "same_agent_carries_out",
        "R4.7",
        "lacks the Plan conversation",
    ),
    BrokenCase(
        "submit-plan-checks-turn-start-mode",
        "plan_tools",
        "turns_it_into_a_plan_turn",
        "P10",
        "no approval",
    ),
    BrokenCase(
        "execution-ending-in-plan-interrupted",
        "execution",
        "still_waits_for_the_user_once",
        "R4.5",
        "an execution is completed when its turn completed",
    ),
    BrokenCase(
        "execution-end-restores-agent",
        "execution",
        "still_waits_for_the_user_once",
        "R3.8",
        "the session is in agent mode",
    ),
    BrokenCase(
        "failed-turn-stored-interrupted",
        "sessions",
        "provider_error_ends_the_turn",
        "P25",
        "the turn is stored as",
    ),
    BrokenCase(
        "new-context-ignored-in-execution",
        "execution",
        "new_context_during_the_execution",
        "P10",
        "after the new context the model was not given",
    ),
    BrokenCase(
        "enter-plan-clears-active-execution",
        "execution",
        "made_during_an_execution_still_waits",
        "R7.2",
        "was still at work",
    ),
    BrokenCase(
        "cancelled-calls-sent-unanswered",
        "plan_tools",
        "after_a_cancelled_one_answers_every_call",
        "P9",
        "without a tool message answering them",
    ),
]
