"""The explorer's model of ADR 0053, its invariants and its scenarios, without a host."""

from __future__ import annotations

import pytest

from conformance.explore.invariants import INVARIANTS, InvariantBrokenError, broken
from conformance.explore.model import (
    APPROVAL_TTL_MS,
    Model,
    ModelApproval,
    ModelSession,
    execution_moves_forward,
    status_moves_forward,
)
from conformance.explore.story import Story


@pytest.mark.parametrize("final", ["approved", "rejected", "expired", "interrupted"])
def test_a_pending_approval_moves_to_each_final_status_and_stays_there(final: str) -> None:
    assert status_moves_forward("pending", final)
    assert status_moves_forward(final, final)
    assert not status_moves_forward(final, "pending")
    for other in ("approved", "rejected", "expired", "interrupted"):
        if other != final:
            assert not status_moves_forward(final, other)


def test_executions_move_forward_only() -> None:
    assert execution_moves_forward(None, "queued")
    assert execution_moves_forward("queued", "running")
    assert execution_moves_forward("queued", "interrupted")  # §4 and C8
    assert execution_moves_forward("queued", "completed")  # running went unobserved
    assert execution_moves_forward("running", "completed")
    assert execution_moves_forward("running", "interrupted")
    assert not execution_moves_forward("completed", "interrupted")
    assert not execution_moves_forward("interrupted", "running")
    assert not execution_moves_forward("running", "queued")
    assert not execution_moves_forward("queued", None)
    assert not execution_moves_forward("queued", "paused")


def _model_with_plan(now: int = 1_000) -> tuple[Model, ModelApproval]:
    model = Model(now=now)
    session = ModelSession("session 1", "s1", "A", "plan", "ask")
    model.sessions[session.alias] = session
    approval = ModelApproval("a1", session.alias, "Plan 1", "# Plan\n", ".pi/plan/a.md", now)
    model.approvals[approval.approval_id] = approval
    session.approvals.append(approval.approval_id)
    return model, approval


def test_the_deadline_is_thirty_minutes_after_creation_and_expiry_is_at_it() -> None:
    model, approval = _model_with_plan()
    assert approval.expires_at == 1_000 + APPROVAL_TTL_MS
    model.now = approval.expires_at - 1
    assert model.expire_due() == [] and model.decision_refusals(approval) is None
    assert model.busy("session 1") == "a plan awaits approval"
    model.now = approval.expires_at
    assert model.expire_due() == [approval]
    assert (approval.status, approval.status_code) == ("expired", "PLAN_APPROVAL_TIMEOUT")
    # An expired approval keeps answering with the timeout code, never "not pending" (P14).
    assert model.decision_refusals(approval) == {"PLAN_APPROVAL_TIMEOUT"}
    assert model.busy("session 1") is None


def test_a_plan_decided_before_its_deadline_stays_not_pending_after_it() -> None:
    model, approval = _model_with_plan()
    approval.status = "rejected"
    model.now = approval.expires_at
    assert model.decision_refusals(approval) == {"APPROVAL_NOT_PENDING"}


def test_a_decided_plan_is_refused_as_not_pending() -> None:
    model, approval = _model_with_plan()
    approval.status = "rejected"
    assert model.decision_refusals(approval) == {"APPROVAL_NOT_PENDING"}


def test_a_restart_interrupts_pending_and_unfinished_work_only() -> None:
    model, pending = _model_with_plan()
    done = ModelApproval("a2", "session 1", "Plan 2", "#\n", ".pi/plan/b.md", 0, "approved")
    done.execution_state = "completed"
    running = ModelApproval("a3", "session 1", "Plan 3", "#\n", ".pi/plan/c.md", 0, "approved")
    running.execution_state = "running"
    for approval in (done, running):
        model.approvals[approval.approval_id] = approval
    model.sessions["session 1"].active_turn = "t1"
    model.interrupt_all()
    assert pending.status == "interrupted"
    assert (done.status, done.execution_state) == ("approved", "completed")
    assert (running.status, running.execution_state) == ("approved", "interrupted")
    assert model.sessions["session 1"].active_turn is None


def test_every_invariant_has_its_own_failure_type() -> None:
    kinds = {type(broken(key, "detail")) for key in INVARIANTS}
    assert len(kinds) == len(INVARIANTS)
    failure = broken("fixed-deadline", "the deadline moved")
    assert isinstance(failure, InvariantBrokenError) and isinstance(failure, AssertionError)
    assert failure.statement == INVARIANTS["fixed-deadline"]
    assert "the deadline moved" in str(failure)


def test_a_story_reads_as_a_scenario() -> None:
    story = Story()
    story.add("the user creates session 1 for project A in Plan mode")
    story.add("1 minute passes")
    text = story.render("The host breaks: x", "x holds", "it did not\n  at all", "a note")
    assert text.splitlines() == [
        "Scenario: The host breaks: x",
        "  # a note",
        "  Given a freshly started host with an empty data directory",
        "  And two empty projects, A and B",
        "  When the user creates session 1 for project A in Plan mode",
        "  And 1 minute passes",
        "  Then x holds",
        "  But it did not at all",
    ]
