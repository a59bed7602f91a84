"""The explorer's state machine: user actions on a host through protocol v9.

Every step is synchronous and uses the blocking client. A step picks one action among
those that apply now (weighted towards the plan checkpoint: plans, decisions, the clock,
restarts), performs it (:mod:`conformance.explore.actions`), waits for the host to settle,
and updates the model from what the user did. After every step
:mod:`conformance.explore.checks` compares the host with the model.

One hypothesis rule picks the action, rather than one rule per action, because hypothesis
switches rules off at random per sequence; with a dozen rules most short sequences would
never reach an approval.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from hypothesis import strategies as st
from hypothesis.control import current_build_context
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from conformance.client import HarnessError, HostClient, HostStoppedError, RpcError
from conformance.contract import Violation
from conformance.drivers import RunningHost
from conformance.explore.actions import MAX_SESSIONS, PROJECTS, Actions
from conformance.explore.context import ExploreContext, OutOfTimeError
from conformance.explore.invariants import InvariantBrokenError, broken
from conformance.explore.model import Model
from conformance.explore.story import Story

__all__ = ["ExploreContext", "Explorer", "OutOfTimeError"]


def _judged(action: Callable[..., None]) -> Callable[..., None]:
    """Turn what a step ran into into an invariant failure, and remember the story."""

    @functools.wraps(action)
    def run(self: Explorer, *args: Any, **kwargs: Any) -> None:
        try:
            action(self, *args, **kwargs)
        except InvariantBrokenError as seen:
            self.context.record(self.story, seen)
            raise
        except HarnessError:
            raise
        except (HostStoppedError, TimeoutError, RpcError) as problem:
            failure = _as_failure(problem, self.host)
            self.context.record(self.story, failure)
            raise failure from problem

    return run


def _as_failure(problem: Exception, host: RunningHost | None) -> InvariantBrokenError:
    if isinstance(problem, RpcError):
        return broken("state", f"the host refused unexpectedly: {problem}")
    what = str(problem)
    if isinstance(problem, TimeoutError):
        what = f"the host did not react in time: {problem}"
    return broken("alive", what + _stderr_tail(host))


def _stderr_tail(host: RunningHost | None, lines: int = 3) -> str:
    """The end of the host's log, which usually says why it stopped or hung."""
    text = host.stderr_text().strip() if host is not None else ""
    return f" (its log ends: {' | '.join(text.splitlines()[-lines:])})" if text else ""


class Explorer(Actions, RuleBasedStateMachine):
    """Drives one host through a random sequence of user actions; a subclass sets context."""

    def __init__(self) -> None:
        super().__init__()
        context = self.context
        if context.out_of_time() and not current_build_context().is_final:
            raise OutOfTimeError
        context.examples += 1
        context.provider.reset()
        self.provider = context.provider
        self.root = Path(tempfile.mkdtemp(prefix="example-", dir=context.temp_root)).resolve()
        self.data_dir = self.root / "data"
        self.data_dir.mkdir()
        self.projects = {name: self.root / f"project-{name.lower()}" for name in PROJECTS}
        for folder in self.projects.values():
            folder.mkdir()
        self.story = Story()
        self.model = Model()
        self.host: RunningHost | None = None
        self.client: HostClient | None = None
        self.retired_violations: list[Violation] = []
        self.retired_unmatched: list[dict[str, Any]] = []
        self.expected_requests = 0
        self.seen = 0  # notifications of the live client already checked
        self.turn_owner: dict[str, str] = {}  # turn id -> session alias, from the user's side
        self.execution_turns: dict[str, str] = {}  # turn id -> approval id
        self.command_owner: dict[str, str] = {}  # command id -> session alias
        self.commands: dict[str, str] = {}  # log token -> session alias that asked for it
        self.commands_ok: set[str] = set()
        self.interrupted_by_restart: set[str] = set()
        self.seen_wire: dict[str, tuple[str, str | None]] = {}
        self.seen_stored: dict[str, tuple[str, str | None]] = {}
        self.seen_notified: dict[str, tuple[str, str | None]] = {}
        self.seen_execution: dict[str, str | None] = {}
        self.counter = 0
        self.changed_since_restart = False
        try:
            self._start()
        except (HostStoppedError, TimeoutError, RpcError) as problem:
            failure = _as_failure(problem, self.host)
            failure = broken(failure.key, f"the host did not start: {failure.detail}")
            context.record(self.story, failure)
            self.teardown()  # hypothesis tears down only machines it could build
            raise failure from problem

    # -- hypothesis' entry points ---------------------------------------------------------

    @initialize(mode=st.sampled_from(("plan", "agent")))
    @_judged
    def first_session(self, mode: str) -> None:
        self.context.steps += 1
        self._create_session(mode, PROJECTS[0])

    @rule(data=st.data())
    @_judged
    def user_acts(self, data: st.DataObject) -> None:
        name = data.draw(
            st.sampled_from(ACTION_NAMES).filter(lambda name: _APPLIES[name](self)),
            label="action",
        )
        self.context.steps += 1
        if name != "restart":
            self.changed_since_restart = True
        getattr(self, name)(data)

    @invariant()
    @_judged
    def invariants_hold(self) -> None:
        self.check_all()

    def teardown(self) -> None:
        try:
            self._stop(crash=False)
        except (OSError, HostStoppedError):
            pass  # the sequence is over; a host that cannot stop cleanly was reported already
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    # -- plumbing -------------------------------------------------------------------------


def _idle(explorer: Explorer) -> bool:
    return any(explorer.model.busy(alias) is None for alias in explorer.model.sessions)


def _decided(explorer: Explorer) -> bool:
    return any(a.status != "pending" for a in explorer.model.approvals.values())


def _busy(explorer: Explorer) -> bool:
    return any(explorer.model.busy(alias) for alias in explorer.model.sessions)


def _pending(explorer: Explorer) -> bool:
    return bool(explorer._pending())


# Each action, how often it is picked and when it applies. Hypothesis leans towards the
# first entries, and so does shrinking, so the plan checkpoint comes first. Names are drawn
# from a fixed list, so a step keeps its meaning when shrinking removes the steps before it.
ACTIONS: Final[tuple[tuple[str, int, Callable[[Explorer], bool]], ...]] = (
    ("approve", 10, _pending),
    ("ask_for_plan", 6, _idle),
    (
        "submit_outside_plan",
        1,
        lambda e: any(e.model.busy(s.alias) is None and s.mode == "agent" for s in e._sessions()),
    ),
    ("prompt", 3, lambda e: True),
    ("reject", 2, _pending),
    ("clock_near_deadline", 2, _pending),
    ("time_passes", 2, _pending),
    ("restart", 3, lambda e: e.changed_since_restart),
    ("model_finishes", 2, lambda e: any(s.active_turn for s in e.model.sessions.values())),
    ("cancel", 3, _busy),
    ("configure", 2, lambda e: True),
    ("decide_again", 1, _decided),
    ("reopen", 1, lambda e: bool(e.model.approvals)),
    ("create_session", 1, lambda e: len(e.model.sessions) < MAX_SESSIONS),
    (
        "act_through_another_session",
        1,
        lambda e: len(e.model.sessions) >= 2 and bool(e.model.approvals),
    ),
    ("approve_and_hold", 1, lambda e: _pending(e) and "holdExecution" in e.context.fault_points),
)
ACTION_NAMES: Final = tuple(name for name, weight, _applies in ACTIONS for _ in range(weight))
_APPLIES: Final = {name: applies for name, _weight, applies in ACTIONS}
