"""Broken hosts: a fifth held-out set (Plan mode and its tools, artifacts, the execution
prompt, the transcript, new_context, BrowserPreview), written from the contract alone.

Seven of these eight went uncaught at first. All are caught now: the three found first by
scenarios of the same round, the other five by scenarios written for them (the Plan tools
in every request after EnterPlanMode, two sessions of one project submitting at one
moment, the transcript after a new context, a second new context, and a preview of
0.0.0.0).
"""

from __future__ import annotations

import contextvars
import ipaddress
from dataclasses import replace
from typing import Any

from hosts.registry import BrokenCase, patch, variant
from reference_host import approvals, artifacts, turns
from reference_host.approvals import Approvals
from reference_host.errors import HostError
from reference_host.host import Host
from reference_host.tools import browser
from reference_host.turns import TurnRunner


@variant("plan-tools-only-right-after-enter")
def _plan_tools_only_right_after_enter() -> None:
    # R1.4 / P10: after EnterPlanMode in an Agent turn the request right after it offers the
    # Plan tools, but later requests of the same turn go back to the Agent tools (the host
    # computes the tool list from the turn's starting mode except for "the next request").
    entered: dict[str, int] = {}
    dispatch = TurnRunner._dispatch
    ask = TurnRunner._ask_model

    async def _dispatch(self: TurnRunner, session: Any, turn_id: str, name: str, args: Any) -> Any:
        if name == "EnterPlanMode":
            entered.setdefault(turn_id, 0)
        return await dispatch(self, session, turn_id, name, args)

    async def _ask_model(self: TurnRunner, session: Any, turn_id: str, messages: Any) -> Any:
        if turn_id in entered:
            entered[turn_id] += 1
            if entered[turn_id] > 1:
                session = replace(session, mode="agent")
        return await ask(self, session, turn_id, messages)

    patch(TurnRunner, "_dispatch", _dispatch)
    patch(TurnRunner, "_ask_model", _ask_model)


@variant("submit-plan-beside-refused-calls")
def _submit_plan_beside_refused_calls() -> None:
    # R1.6: a batch of SubmitPlan with calls the host refuses anyway (Write in Plan, an
    # unknown tool) is not treated as "not alone": the other calls get their own refusal
    # and the SubmitPlan runs.
    original = TurnRunner._run_batch

    async def _run_batch(
        self: TurnRunner, session: Any, turn_id: str, calls: Any, unattended: bool
    ) -> Any:
        plans = [c for c in calls if c.name == "SubmitPlan"]
        others = [c for c in calls if c.name != "SubmitPlan"]
        if (
            len(plans) == 1
            and others
            and all(turns._gate(session.mode, c.name) is not None for c in others)
        ):
            for call in calls:
                self.host.notify(
                    "turn/toolCall",
                    {
                        "sessionId": session.id,
                        "turnId": turn_id,
                        "toolCallId": call.call_id,
                        "tool": call.name,
                        "input": turns._parse_arguments(call),
                    },
                )
            outcomes = []
            for call in calls:
                outcomes.append(await self._run_call(session, turn_id, call, unattended))
            self._announce_results(session.id, turn_id, calls, outcomes)
            return outcomes
        return await original(self, session, turn_id, calls, unattended)

    patch(TurnRunner, "_run_batch", _run_batch)


_NAMING: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar(
    "probe_naming", default=None
)


@variant("artifact-name-per-session-counter")
def _artifact_name_per_session_counter() -> None:
    # R2.4: the artifact is named plan-<host clock ms>-<n>.md with n counting the session's
    # submissions: two sessions on the same project submitting at the same host-clock
    # instant pick the same name (the second is then refused, O_EXCL never replaces).
    counts: dict[str, int] = {}
    submit = Approvals.submit

    async def _submit(self: Approvals, session: Any, turn_id: str, args: Any) -> Any:
        counts[session.id] = counts.get(session.id, 0) + 1
        token = _NAMING.set((self.host.clock.now_ms(), counts[session.id]))
        try:
            return await submit(self, session, turn_id, args)
        finally:
            _NAMING.reset(token)

    original_name = artifacts._unique_name

    def _unique_name() -> str:
        naming = _NAMING.get()
        if naming is None:
            return original_name()
        return f"plan-{naming[0]}-{naming[1]}.md"

    patch(Approvals, "submit", _submit)
    patch(artifacts, "_unique_name", _unique_name)


@variant("artifact-read-any-session")
def _artifact_read_any_session() -> None:
    # R5.9: artifact/read finds the approval by its id alone; another session's id reads it.
    async def artifact_read(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        await self.require_session(params["sessionId"])
        row = await self.storage.get_approval(params["approvalId"])
        if row is None:
            raise HostError("APPROVAL_NOT_FOUND", "no such approval")
        return await self.approvals.read_artifact(row)

    patch(Host, "artifact_read", artifact_read)


@variant("execution-prompt-strips-plan")
def _execution_prompt_strips_plan() -> None:
    # P15: the execution prompt carries the plan with its surrounding whitespace trimmed.
    def _execution_prompt(row: Any, content: bytes) -> str:
        plan = content.decode("utf-8").strip()
        return (
            f'The user approved the plan "{row.title}" ({row.artifact_path}) with permission '
            f"mode {row.permission_mode}. Carry it out now.\n\n{plan}"
        )

    patch(approvals, "_execution_prompt", _execution_prompt)


@variant("transcript-from-last-reset")
def _transcript_from_last_reset() -> None:
    # R1.3 / R7.7: session/transcript reports the entries from the last new_context on,
    # as the provider sees them; the transcript table keeps every row.
    async def session_transcript(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        rows = await self.storage.transcript(row.id)
        start = max(
            (i for i, r in enumerate(rows) if isinstance(r[3], dict) and r[3].get("contextReset")),
            default=0,
        )
        entries = [
            {"seq": seq, "turnId": turn, "role": role, "content": content, "createdAt": at}
            for seq, turn, role, content, at in rows[start:]
        ]
        return {"entries": entries}

    patch(Host, "session_transcript", session_transcript)


@variant("new-context-first-reset-wins")
def _new_context_first_reset_wins() -> None:
    # P10 new_context: history is read from the session's first context reset, not its
    # last: after a second new_context the messages between the two resets come back.
    async def _history(self: TurnRunner, session_id: str) -> list[dict[str, Any]]:
        entries = await self.host.storage.transcript(session_id)
        contents = [content for _seq, _turn, _role, content, _at in entries]
        start = min((i for i, c in enumerate(contents) if c.get("contextReset")), default=0)
        kept = [{k: v for k, v in c.items() if k != "contextReset"} for c in contents[start:]]
        return turns.answered_only(kept)

    patch(TurnRunner, "_history", _history)


@variant("browser-preview-unspecified-address")
def _browser_preview_unspecified_address() -> None:
    # P23: 0.0.0.0 / :: ("this host") are taken as loopback and fetched.
    original = browser.is_loopback

    def is_loopback(host: str) -> bool:
        try:
            if ipaddress.ip_address(host).is_unspecified:
                return True
        except ValueError:
            pass
        return original(host)

    patch(browser, "is_loopback", is_loopback)


CASES = [
    BrokenCase(
        "artifact-read-any-session",
        "isolation",
        "through_another_session and opened",
        "R5.9",
        "expected the host to refuse",
    ),
    BrokenCase(
        "submit-plan-beside-refused-calls",
        "submit_plan",
        "beside_another_call and Write",
        "R1.6",
        "expected SUBMIT_PLAN_NOT_ALONE",
    ),
    BrokenCase(
        "execution-prompt-strips-plan",
        "execution",
        "artifact_and_content",
        "P15",
        "the model was not given the plan's full content, exactly as submitted",
    ),
    BrokenCase(
        "plan-tools-only-right-after-enter",
        "plan_tools",
        "turns_it_into_a_plan_turn",
        "P10",
        "after EnterPlanMode offered",
    ),
    BrokenCase(
        "artifact-name-per-session-counter",
        "artifact_integrity",
        "two_sessions_of_one_project",
        "R2.4",
        "submission made no approval",
    ),
    BrokenCase(
        "transcript-from-last-reset",
        "plan_tools",
        "keeps_the_earlier_conversation",
        "R1.3",
        "session/transcript reports",
    ),
    BrokenCase(
        "new-context-first-reset-wins",
        "plan_tools",
        "second_new_context",
        "P10",
        "the model was still given",
    ),
    BrokenCase(
        "browser-preview-unspecified-address",
        "plan_tools",
        "not_on_the_loopback and every",
        "P23",
        "expected BROWSER_PREVIEW_REFUSED",
    ),
]
