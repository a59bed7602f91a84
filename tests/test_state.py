"""Unit and property tests of the I/O-free session and approval state machine."""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from typing import get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pi_contract import error_catalog
from reference_host.errors import HostError
from reference_host.state import (
    APPROVAL_TTL_MS,
    Activity,
    ApprovalFacts,
    ApprovalStatus,
    ExecutionState,
    PermissionMode,
    advance_execution,
    approve,
    deadline_for,
    ensure_can_cancel,
    ensure_decidable,
    ensure_idle_for,
    is_expired,
    reject,
)

THIRTY_MINUTES_MS = 30 * 60 * 1000
T0 = 1_700_000_000_000

EXECUTION_STATES: tuple[ExecutionState, ...] = get_args(ExecutionState)
PERMISSION_MODES: tuple[PermissionMode, ...] = get_args(PermissionMode)
APPROVAL_STATUSES: tuple[ApprovalStatus, ...] = get_args(ApprovalStatus)

# The execution lifecycle of §4, written out independently of the module's table.
ALLOWED_TRANSITIONS: frozenset[tuple[str, str]] = frozenset(
    {
        ("queued", "running"),
        ("queued", "interrupted"),
        ("running", "completed"),
        ("running", "interrupted"),
    }
)

ids = st.one_of(st.none(), st.text(min_size=1, max_size=8))
times = st.integers(min_value=0, max_value=2**53)


def assert_host_error(excinfo: pytest.ExceptionInfo[HostError], code: str) -> HostError:
    error = excinfo.value
    assert error.code == code
    assert error.jsonrpc_code == error_catalog()[code]["jsonrpcCode"]
    assert error.to_data()["code"] == code
    return error


def pending(expires_at: int = T0 + THIRTY_MINUTES_MS) -> ApprovalFacts:
    return ApprovalFacts(status="pending", expires_at=expires_at)


# -- Activity / ensure_idle_for --------------------------------------------------------------


def test_default_activity_is_idle_and_accepted() -> None:
    activity = Activity()
    assert activity.idle
    ensure_idle_for(activity, "session/prompt")
    ensure_can_cancel(activity)


def test_pending_approval_refuses_with_approval_pending() -> None:
    with pytest.raises(HostError) as excinfo:
        ensure_idle_for(Activity(pending_approval_id="ap-1"), "session/configure")
    error = assert_host_error(excinfo, "APPROVAL_PENDING")
    assert error.details == {"approvalId": "ap-1"}
    assert "session/configure" in error.message


def test_pending_approval_wins_over_a_recorded_turn_and_execution() -> None:
    activity = Activity(
        active_turn_id="turn-1", pending_approval_id="ap-1", active_execution_id="ex-1"
    )
    with pytest.raises(HostError) as excinfo:
        ensure_idle_for(activity, "session/prompt")
    assert_host_error(excinfo, "APPROVAL_PENDING")


def test_active_turn_refuses_with_session_busy() -> None:
    with pytest.raises(HostError) as excinfo:
        ensure_idle_for(Activity(active_turn_id="turn-1"), "session/prompt")
    error = assert_host_error(excinfo, "SESSION_BUSY")
    assert error.details == {"turnId": "turn-1", "executionId": None}


def test_active_execution_refuses_with_session_busy() -> None:
    with pytest.raises(HostError) as excinfo:
        ensure_idle_for(Activity(active_execution_id="ex-1"), "session/configure")
    error = assert_host_error(excinfo, "SESSION_BUSY")
    assert error.details == {"turnId": None, "executionId": "ex-1"}


@given(turn=ids, approval=ids, execution=ids)
def test_ensure_idle_for_over_every_activity(
    turn: str | None, approval: str | None, execution: str | None
) -> None:
    activity = Activity(
        active_turn_id=turn, pending_approval_id=approval, active_execution_id=execution
    )
    assert activity.idle == (turn is None and approval is None and execution is None)
    if approval is not None:
        expected: str | None = "APPROVAL_PENDING"
    elif turn is not None or execution is not None:
        expected = "SESSION_BUSY"
    else:
        expected = None
    if expected is None:
        ensure_idle_for(activity, "anything")
    else:
        with pytest.raises(HostError) as excinfo:
            ensure_idle_for(activity, "anything")
        assert_host_error(excinfo, expected)


# -- ensure_can_cancel -----------------------------------------------------------------------


def test_cancel_refused_while_an_approval_is_pending() -> None:
    with pytest.raises(HostError) as excinfo:
        ensure_can_cancel(Activity(active_turn_id="t", pending_approval_id="ap-9"))
    error = assert_host_error(excinfo, "APPROVAL_PENDING")
    assert error.details == {"approvalId": "ap-9"}


@pytest.mark.parametrize(
    "activity",
    [
        Activity(),
        Activity(active_turn_id="turn-1"),
        Activity(active_execution_id="ex-1"),
        Activity(active_turn_id="turn-1", active_execution_id="ex-1"),
    ],
)
def test_cancel_allowed_without_a_pending_approval(activity: Activity) -> None:
    assert ensure_can_cancel(activity) is None


# -- deadlines -------------------------------------------------------------------------------


def test_ttl_is_thirty_minutes() -> None:
    assert APPROVAL_TTL_MS == 1_800_000
    assert deadline_for(T0) == T0 + 1_800_000
    assert deadline_for(0) == 1_800_000


@given(created=times)
def test_deadline_is_created_plus_thirty_minutes_exactly(created: int) -> None:
    assert deadline_for(created) - created == THIRTY_MINUTES_MS


def test_is_expired_boundaries() -> None:
    deadline = deadline_for(T0)
    assert not is_expired(deadline, T0)
    assert not is_expired(deadline, deadline - 1)
    assert is_expired(deadline, deadline)
    assert is_expired(deadline, deadline + 1)


@given(expires_at=times, now=times)
def test_is_expired_is_now_at_or_after_deadline(expires_at: int, now: int) -> None:
    assert is_expired(expires_at, now) == (now >= expires_at)


# -- ensure_decidable ------------------------------------------------------------------------


def test_pending_before_deadline_is_decidable() -> None:
    approval = pending()
    assert ensure_decidable(approval, T0) is None
    assert ensure_decidable(approval, approval.expires_at - 1) is None


@pytest.mark.parametrize("offset", [0, 1, THIRTY_MINUTES_MS])
def test_pending_past_deadline_times_out(offset: int) -> None:
    approval = pending()
    with pytest.raises(HostError) as excinfo:
        ensure_decidable(approval, approval.expires_at + offset)
    assert_host_error(excinfo, "PLAN_APPROVAL_TIMEOUT")


def test_expired_status_times_out_even_before_the_deadline() -> None:
    approval = ApprovalFacts(status="expired", expires_at=T0 + THIRTY_MINUTES_MS)
    with pytest.raises(HostError) as excinfo:
        ensure_decidable(approval, T0)
    assert_host_error(excinfo, "PLAN_APPROVAL_TIMEOUT")


@pytest.mark.parametrize("status", ["approved", "rejected", "interrupted"])
@pytest.mark.parametrize("now", [T0, T0 + THIRTY_MINUTES_MS, T0 + 2 * THIRTY_MINUTES_MS])
def test_decided_statuses_are_not_pending(status: ApprovalStatus, now: int) -> None:
    approval = ApprovalFacts(status=status, expires_at=T0 + THIRTY_MINUTES_MS)
    with pytest.raises(HostError) as excinfo:
        ensure_decidable(approval, now)
    error = assert_host_error(excinfo, "APPROVAL_NOT_PENDING")
    assert error.details == {"status": status}


@given(status=st.sampled_from(APPROVAL_STATUSES), expires_at=times, now=times)
def test_ensure_decidable_over_every_status_and_time(
    status: ApprovalStatus, expires_at: int, now: int
) -> None:
    approval = ApprovalFacts(status=status, expires_at=expires_at)
    if status == "pending" and now < expires_at:
        ensure_decidable(approval, now)
        return
    if status == "expired" or status == "pending":
        expected = "PLAN_APPROVAL_TIMEOUT"
    else:
        expected = "APPROVAL_NOT_PENDING"
    with pytest.raises(HostError) as excinfo:
        ensure_decidable(approval, now)
    assert_host_error(excinfo, expected)


# -- approve / reject ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", PERMISSION_MODES)
def test_approve_sets_mode_and_queues_a_new_execution(mode: PermissionMode) -> None:
    before = pending()
    after = approve(before, mode, "ex-42")
    assert after == ApprovalFacts(
        status="approved",
        expires_at=before.expires_at,
        permission_mode=mode,
        execution_id="ex-42",
        execution_state="queued",
    )
    # The input is a frozen value and stays untouched.
    assert before == pending()
    with pytest.raises(FrozenInstanceError):
        after.status = "pending"  # type: ignore[misc]


def test_reject_is_rejected_without_mode_or_execution() -> None:
    before = pending()
    after = reject(before)
    assert after.status == "rejected"
    assert after.permission_mode is None
    assert after.execution_id is None
    assert after.execution_state is None
    assert after.expires_at == before.expires_at
    assert before.status == "pending"


@given(expires_at=times)
def test_reject_never_selects_a_mode_or_execution(expires_at: int) -> None:
    after = reject(pending(expires_at))
    assert after == ApprovalFacts(status="rejected", expires_at=expires_at)


def test_a_rejected_approval_can_no_longer_be_decided() -> None:
    rejected = reject(pending())
    with pytest.raises(HostError) as excinfo:
        ensure_decidable(rejected, T0)
    assert_host_error(excinfo, "APPROVAL_NOT_PENDING")


def test_an_approved_approval_can_no_longer_be_decided() -> None:
    approved = approve(pending(), "ask", "ex-1")
    with pytest.raises(HostError) as excinfo:
        ensure_decidable(approved, T0)
    assert_host_error(excinfo, "APPROVAL_NOT_PENDING")


# -- advance_execution -----------------------------------------------------------------------


def test_transition_table_covers_the_lifecycle() -> None:
    assert advance_execution("queued", "running") == "running"
    assert advance_execution("running", "completed") == "completed"
    assert advance_execution("queued", "interrupted") == "interrupted"
    assert advance_execution("running", "interrupted") == "interrupted"


@pytest.mark.parametrize(
    ("current", "target"),
    [
        ("queued", "queued"),
        ("queued", "completed"),
        ("running", "queued"),
        ("running", "running"),
        ("completed", "running"),
        ("completed", "interrupted"),
        ("interrupted", "running"),
        ("interrupted", "completed"),
    ],
)
def test_forbidden_transitions_raise(current: ExecutionState, target: ExecutionState) -> None:
    with pytest.raises(ValueError, match=f"from {current} to {target}"):
        advance_execution(current, target)


@given(
    current=st.sampled_from(EXECUTION_STATES),
    target=st.sampled_from(EXECUTION_STATES),
)
def test_advance_execution_matches_the_table(
    current: ExecutionState, target: ExecutionState
) -> None:
    if (current, target) in ALLOWED_TRANSITIONS:
        assert advance_execution(current, target) == target
    else:
        with pytest.raises(ValueError):
            advance_execution(current, target)


def test_every_pair_is_classified_as_the_table_says() -> None:
    allowed = set()
    for current in EXECUTION_STATES:
        for target in EXECUTION_STATES:
            try:
                advance_execution(current, target)
            except ValueError:
                continue
            allowed.add((current, target))
    assert allowed == ALLOWED_TRANSITIONS
    assert len(EXECUTION_STATES) == 4


@given(path=st.lists(st.sampled_from(EXECUTION_STATES), max_size=6))
def test_terminal_states_stay_terminal(path: list[ExecutionState]) -> None:
    state: ExecutionState = "queued"
    for target in path:
        try:
            state = advance_execution(state, target)
        except ValueError:
            continue
    if state in ("completed", "interrupted"):
        for target in EXECUTION_STATES:
            with pytest.raises(ValueError):
                advance_execution(state, target)
