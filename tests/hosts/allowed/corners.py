"""Allowed variations: corners of the contract that earlier rounds left open and this one
settled as the host's choice."""

from __future__ import annotations

from hosts.registry import AllowedCase, patch, variant
from reference_host import migration
from reference_host.errors import HostError
from reference_host.ports import TurnEnded
from reference_host.provider_client import ToolCall
from reference_host.storage import ApprovalRow, SessionRow
from reference_host.turns import CallOutcome, TurnRunner, _failure


# "rows you write yourself" (docs/implementing-a-host.md, What the suite does not require):
# a failed turn leaves a note of its own in the conversation, in the system role, so the
# model learns in the next turn why its last answer stopped.
@variant("failed-turn-noted-in-transcript")
def _failed_turn_noted_in_transcript() -> None:
    end = TurnRunner._end

    async def noting_end(
        self: TurnRunner,
        session_id: str,
        turn_id: str,
        approval: ApprovalRow | None,
        on_end: TurnEnded | None,
        outcome: str,
        error: HostError | None,
    ) -> None:
        if outcome == "failed" and error is not None:
            note = {"role": "system", "content": f"The last turn failed ({error.code})."}
            await self.host.storage.append_transcript(
                session_id, turn_id, "system", note, self.host.clock.now_ms()
            )
        await end(self, session_id, turn_id, approval, on_end, outcome, error)

    patch(TurnRunner, "_end", noting_end)


# "whether you let the run's model plan ... or refuse the calls ... is yours"
# (docs/implementing-a-host.md, Scheduled tasks): an unattended run may not enter Plan.
@variant("unattended-run-refuses-planning")
def _unattended_run_refuses_planning() -> None:
    run_call = TurnRunner._run_call

    async def refusing_call(
        self: TurnRunner, session: SessionRow, turn_id: str, call: ToolCall, unattended: bool
    ) -> CallOutcome:
        if unattended and call.name == "EnterPlanMode":
            return _failure(
                HostError("PLAN_REQUIRES_INTERACTIVE_SESSION", "nobody attends this run")
            )
        return await run_call(self, session, turn_id, call, unattended)

    patch(TurnRunner, "_run_call", refusing_call)


# A v8 pending row becomes interrupted; the contract leaves the statusCode of such a legacy
# row open. This host gives it TURN_INTERRUPTED, like an approval its recovery interrupts.
@variant("legacy-interrupted-with-code")
def _legacy_interrupted_with_code() -> None:
    copy = migration._COPY_LEGACY_APPROVALS
    columns, decided = "status, decided_at\n)", "  CASE status WHEN 'pending' THEN NULL"
    assert columns in copy and decided in copy
    copy = copy.replace(columns, "status, status_code, decided_at\n)").replace(
        decided,
        "  CASE status WHEN 'pending' THEN 'TURN_INTERRUPTED' END,\n" + decided,
    )
    patch(migration, "_COPY_LEGACY_APPROVALS", copy)


CASES = [
    AllowedCase(
        "failed-turn-noted-in-transcript",
        "sessions,turn_boundaries,scheduled_plan,execution",
        why="a host may write transcript rows of its own; only the turn's own rows must stay",
    ),
    AllowedCase(
        "unattended-run-refuses-planning",
        "scheduled_plan",
        why="a run's model may plan or be refused; the run never approves a plan either way",
    ),
    AllowedCase(
        "legacy-interrupted-with-code",
        "migration",
        why="the statusCode of a v8 pending approval the migration marks interrupted is open",
    ),
]
