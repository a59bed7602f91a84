"""The invariants, checked after every step through the protocol, storage and the projects.

Each check compares what the host reports, announces and stores with the explorer's model,
which knows only what the user did. Where the contract allows several outcomes, any is
accepted; where it allows an answer to trail the notification the explorer waited for,
the check waits a little before judging.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from conformance.client import HarnessError, HostClient
from conformance.contract import Violation
from conformance.drivers import RunningHost
from conformance.explore.invariants import broken
from conformance.explore.model import (
    Model,
    ModelApproval,
    ModelSession,
    execution_moves_forward,
    status_moves_forward,
)
from conformance.mock_provider import MockProvider
from conformance.storage_inspector import StorageInspector

LOG_FILE: Final = "explorer.log"
ACTIVITY: Final = ("activeTurnId", "pendingApprovalId", "activeExecutionId")
SETTLE_S: Final = 2.0  # how long a session's activity may trail the event the explorer saw


@dataclass(frozen=True)
class Facts:
    """The fields of an approval the invariants judge, from the wire or from storage."""

    status: str
    status_code: str | None
    execution_state: str | None
    permission_mode: str | None
    created_at: int
    expires_at: int

    @classmethod
    def of_wire(cls, wire: dict[str, Any]) -> Facts:
        """From a protocol ``Approval``."""
        return cls(
            wire["status"],
            wire["statusCode"],
            wire["executionState"],
            wire["permissionMode"],
            wire["createdAt"],
            wire["expiresAt"],
        )

    @classmethod
    def of_row(cls, row: dict[str, Any]) -> Facts:
        """From a ``plan_approvals`` row."""
        return cls(
            row["status"],
            row["status_code"],
            row["execution_state"],
            row["permission_mode"],
            row["created_at"],
            row["expires_at"],
        )


class Checks:
    """The invariant checks; the explorer's state machine provides the state they read."""

    model: Model
    host: RunningHost | None
    client: HostClient | None
    data_dir: Path
    projects: dict[str, Path]
    provider: MockProvider
    retired_violations: list[Violation]
    retired_unmatched: list[dict[str, Any]]
    expected_requests: int
    seen: int
    turn_owner: dict[str, str]
    command_owner: dict[str, str]
    commands: dict[str, str]
    commands_ok: set[str]
    interrupted_by_restart: set[str]
    seen_wire: dict[str, tuple[str, str | None]]
    seen_stored: dict[str, tuple[str, str | None]]
    seen_notified: dict[str, tuple[str, str | None]]
    seen_execution: dict[str, str | None]

    @property
    def rpc(self) -> HostClient:
        """The connected client."""
        if self.client is None:
            raise HarnessError("the explorer has no connected host")
        return self.client

    def label(self, approval: ModelApproval) -> str:
        """How the scenario names a plan."""
        return f'the plan "{approval.title}" of {approval.session}'

    def check_all(self) -> None:
        """Every invariant, in an order where the first failure is the most telling."""
        self._check_alive()
        self._check_notifications()
        self._check_provider()
        self._check_sessions()
        self._check_approvals()
        self._check_storage()
        self._check_projects()

    # -- the host and the wire -------------------------------------------------------------

    def _check_alive(self) -> None:
        if self.host is None:
            raise HarnessError("no host is running")
        info = self.host.exit_info()
        if not info.running:
            raise broken("alive", f"the host {info.describe()}")
        violations = [*self.retired_violations, *self.rpc.violations]
        if violations:
            raise broken("contract", violations[0].describe())
        unmatched = [*self.retired_unmatched, *self.rpc.unmatched]
        if unmatched:
            raise broken("contract", f"the host sent a response to no request: {unmatched[0]}")

    def _named_session(self, method: str, session_id: Any) -> ModelSession:
        session = self.model.session_by_id(str(session_id))
        if session is None:
            raise broken("isolation", f"a {method} notification names an unknown session")
        return session

    def _check_notifications(self) -> None:
        notes = self.rpc.notifications(since=self.seen)
        self.seen += len(notes)
        for note in notes:
            method: str = note["method"]
            params: dict[str, Any] = note.get("params", {})
            if method == "session/updated":
                self._named_session(method, params["session"]["sessionId"])
            elif method == "approval/updated":
                self._check_approval_note(params["approval"])
            elif method != "task/runFinished":
                self._check_session_note(method, params)

    def _check_session_note(self, method: str, params: dict[str, Any]) -> None:
        named = self._named_session(method, params.get("sessionId"))
        turn = params.get("turnId")
        if turn is not None:
            owner = self.turn_owner.get(turn)
            if owner is None:
                raise broken("no-replay", f"the host sent {method} for a turn nobody started")
            if owner != named.alias:
                raise broken("isolation", f"{method} of a turn of {owner} names {named.alias}")
        approval_id = params.get("approvalId")
        if approval_id is not None:
            approval = self.model.approvals.get(approval_id)
            if approval is None or approval.session != named.alias:
                raise broken("isolation", f"{method} names {named.alias} with {params}")
        if method == "execution/updated":
            approval_id = str(approval_id)
            before, after = self.seen_execution.get(approval_id), params.get("executionState")
            if not execution_moves_forward(before, after):
                raise broken("forward-only", f"an execution was announced {before}, then {after}")
            self.seen_execution[approval_id] = after
        command = params.get("commandId")
        if command is not None:
            owner = self.command_owner.setdefault(command, named.alias)
            if owner != named.alias:
                raise broken("isolation", f"{method} of a command of {owner} names {named.alias}")

    def _check_approval_note(self, wire: dict[str, Any]) -> None:
        named = self._named_session("approval/updated", wire["sessionId"])
        approval = self.model.approvals.get(wire["approvalId"])
        if approval is None:
            raise broken("state", f"the host announced a plan nobody submitted: {wire}")
        if approval.session != named.alias:
            raise broken("isolation", f"{self.label(approval)} was announced for {named.alias}")
        self._judge_transition(approval, wire["status"], wire["executionState"], "announced")
        if wire["status"] == "approved" and not approval.approved_by_user:
            raise broken("no-implicit-approval", f"{self.label(approval)} was announced approved")

    def _check_provider(self) -> None:
        requests = self.provider.requests()
        count = len(requests)
        if count > self.expected_requests or any(r.unscripted for r in requests):
            last = requests[-1].messages[-1] if requests and requests[-1].messages else {}
            raise broken(
                "no-replay",
                f"the model was called {count} times while the user's actions needed "
                f"{self.expected_requests}; the last call ended with {str(last)[:200]}",
            )
        if count < self.expected_requests:
            raise broken(
                "state",
                f"the model was called {count} times while the user's actions needed "
                f"{self.expected_requests}",
            )

    # -- sessions --------------------------------------------------------------------------

    def _check_sessions(self) -> None:
        listed = {s["sessionId"]: s for s in self.rpc.request("session/list", {})["sessions"]}
        for session in self.model.sessions.values():
            wire = listed.pop(session.session_id, None)
            if wire is None:
                raise broken("state", f"{session.alias} is not listed any more")
            if (wire["mode"], wire["permissionMode"]) != (session.mode, session.permission_mode):
                restarted = any(a in self.interrupted_by_restart for a in session.approvals)
                raise broken(
                    "recovery" if restarted else "state",
                    f"{session.alias} is in {wire['mode']} mode with {wire['permissionMode']}; "
                    f"it should be in {session.mode} mode with {session.permission_mode}",
                )
            expected = self._activity(session)
            if any(wire[name] != expected[name] for name in ACTIVITY):
                self._settle_activity(session, expected)
        if listed:
            raise broken("state", f"the host lists sessions nobody created: {sorted(listed)}")

    def _activity(self, session: ModelSession) -> dict[str, str | None]:
        pending = self.model.pending(session.alias)
        executing = self.model.executing(session.alias)
        return {
            "activeTurnId": session.active_turn,
            "pendingApprovalId": pending.approval_id if pending else None,
            "activeExecutionId": executing.execution_id if executing else None,
        }

    def _settle_activity(self, session: ModelSession, expected: dict[str, str | None]) -> None:
        def settled(params: dict[str, Any]) -> bool:
            wire = params["session"]
            return wire["sessionId"] == session.session_id and all(
                wire[name] == expected[name] for name in ACTIVITY
            )

        with contextlib.suppress(TimeoutError):
            self.rpc.wait_for("session/updated", settled, timeout=SETTLE_S)
        wire = self.rpc.request("session/get", {"sessionId": session.session_id})["session"]
        found = {name: wire[name] for name in ACTIVITY}
        if found != expected:
            raise broken("state", f"{session.alias} shows {found}; it should show {expected}")

    # -- approvals -------------------------------------------------------------------------

    def _check_approvals(self) -> None:
        for session in self.model.sessions.values():
            listed = self.rpc.request("approval/list", {"sessionId": session.session_id})
            wires: list[dict[str, Any]] = listed["approvals"]
            pending = [a for a in wires if a["status"] == "pending"]
            if len(pending) > 1:
                raise broken("one-pending", f"{session.alias} lists {len(pending)} pending plans")
            active = [a for a in wires if a["executionState"] in ("queued", "running")]
            if len(active) > 1:
                raise broken(
                    "one-execution", f"{session.alias} lists {len(active)} active executions"
                )
            for wire in wires:
                approval = self._known(wire["approvalId"], wire["status"])
                if approval.session != session.alias or wire["sessionId"] != session.session_id:
                    raise broken(
                        "isolation", f"{session.alias} lists {self.label(approval)}: {wire}"
                    )
                self._judge(approval, Facts.of_wire(wire), "reported")
            listed_ids = {w["approvalId"] for w in wires}
            for approval_id in session.approvals:
                if approval_id not in listed_ids:
                    label = self.label(self.model.approvals[approval_id])
                    raise broken("state", f"{label} is not listed any more")

    def _known(self, approval_id: str, status: str) -> ModelApproval:
        approval = self.model.approvals.get(approval_id)
        if approval is None:
            key = "no-implicit-approval" if status == "approved" else "state"
            raise broken(key, f"the host holds a {status} plan nobody submitted ({approval_id})")
        return approval

    def _judge(self, approval: ModelApproval, facts: Facts, source: str) -> None:
        label = self.label(approval)
        self._judge_transition(approval, facts.status, facts.execution_state, source)
        if facts.status == "approved" and not approval.approved_by_user:
            raise broken("no-implicit-approval", f"{label} is {source} approved")
        if facts.permission_mode != approval.permission_mode:
            raise broken(
                "no-implicit-approval",
                f"{label} is {source} with permission mode {facts.permission_mode}; the user "
                f"chose {approval.permission_mode}",
            )
        if (facts.created_at, facts.expires_at) != (approval.created_at, approval.expires_at):
            raise broken(
                "fixed-deadline",
                f"{label} is {source} as created {facts.created_at} and expiring "
                f"{facts.expires_at}; it was created {approval.created_at} and expires "
                f"{approval.expires_at}",
            )
        restarted = approval.approval_id in self.interrupted_by_restart
        if facts.status != approval.status:
            if approval.status == "expired":
                key = "fixed-deadline"
            else:
                key = "recovery" if restarted else "state"
            raise broken(key, f"{label} is {source} {facts.status}; it should be {approval.status}")
        if facts.execution_state != approval.execution_state:
            raise broken(
                "recovery" if restarted else "state",
                f"the execution of {label} is {source} {facts.execution_state}; it should be "
                f"{approval.execution_state}",
            )
        if approval.status == "expired" and facts.status_code != "PLAN_APPROVAL_TIMEOUT":
            raise broken("fixed-deadline", f"{label} expired with code {facts.status_code}")

    def _judge_transition(
        self, approval: ModelApproval, status: str, execution: str | None, source: str
    ) -> None:
        seen = {"reported": self.seen_wire, "stored": self.seen_stored}.get(
            source, self.seen_notified
        )
        before = seen.get(approval.approval_id, ("pending", None))
        label = self.label(approval)
        if not status_moves_forward(before[0], status):
            raise broken("forward-only", f"{label} was {source} {before[0]}, then {status}")
        if not execution_moves_forward(before[1], execution):
            raise broken(
                "forward-only",
                f"the execution of {label} was {source} {before[1]}, then {execution}",
            )
        seen[approval.approval_id] = (status, execution)

    # -- storage ---------------------------------------------------------------------------

    def _check_storage(self) -> None:
        storage = StorageInspector(self.data_dir)
        rows = storage.rows("plan_approvals")
        per_session: Counter[tuple[str, str]] = Counter()
        for row in rows:
            if row["status"] == "pending":
                per_session[(row["session_id"], "pending")] += 1
            if row["execution_state"] in ("queued", "running"):
                per_session[(row["session_id"], "executing")] += 1
        for (session_id, kind), count in per_session.items():
            if count > 1:
                key = "one-pending" if kind == "pending" else "one-execution"
                raise broken(key, f"storage holds {count} {kind} plans for session {session_id}")
        for row in rows:
            approval = self._known(row["id"], row["status"])
            owner = self.model.sessions[approval.session]
            if row["session_id"] != owner.session_id:
                raise broken("isolation", f"storage files {self.label(approval)} elsewhere")
            self._judge(approval, Facts.of_row(row), "stored")
        for row in storage.rows("sessions"):
            session = self.model.session_by_id(row["id"])
            if session is None:
                raise broken("state", f"storage holds a session nobody created: {row['id']}")
            if (row["mode"], row["permission_mode"]) != (session.mode, session.permission_mode):
                raise broken(
                    "state",
                    f"storage holds {session.alias} in {row['mode']} mode with "
                    f"{row['permission_mode']}; it should be {session.mode}, "
                    f"{session.permission_mode}",
                )
        active = Counter(t["session_id"] for t in storage.rows("turns", "state = 'active'"))
        for session_id, count in active.items():
            if count > 1:
                raise broken("state", f"storage holds {count} active turns for {session_id}")

    # -- the projects ----------------------------------------------------------------------

    def _check_projects(self) -> None:
        expected: dict[tuple[str, str], ModelApproval] = {
            (self.model.sessions[a.session].project, a.artifact_path): a
            for a in self.model.approvals.values()
        }
        for (project, path), approval in expected.items():
            try:
                content = (self.projects[project] / path).read_bytes()
            except OSError as problem:
                raise broken(
                    "artifact", f"the artifact of {self.label(approval)} is gone: {problem}"
                ) from problem
            if content != approval.markdown.encode("utf-8"):
                raise broken("artifact", f"the artifact of {self.label(approval)} changed")
        for project, folder in self.projects.items():
            plan_folder = folder / ".pi" / "plan"
            names = sorted(p.name for p in plan_folder.iterdir()) if plan_folder.is_dir() else []
            for name in names:
                path = f".pi/plan/{name}"
                if (project, path) not in expected:
                    elsewhere = any(q == path for (_p, q) in expected)
                    raise broken(
                        "isolation" if elsewhere else "state",
                        f"project {project} holds a plan file nobody expects: {path}",
                    )
            self._check_log(project, folder / LOG_FILE)

    def _check_log(self, project: str, log: Path) -> None:
        lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
        counts = Counter(lines)
        for token, count in counts.items():
            owner = self.commands.get(token)
            if owner is None:
                raise broken("no-replay", f"{LOG_FILE} of project {project} holds {token!r}")
            if self.model.sessions[owner].project != project:
                raise broken("isolation", f"a command of {owner} wrote into project {project}")
            if count > 1:
                raise broken(
                    "no-replay", f"{token} appears {count} times in {LOG_FILE} of project {project}"
                )
        for token in self.commands_ok:
            owner = self.commands[token]
            if self.model.sessions[owner].project == project and token not in counts:
                raise broken("state", f"a command reported success but {token} is not in the log")
