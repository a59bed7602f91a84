"""What a restarted host must show after a kill, judged against the client's history.

Each finding is an anomaly of one kind:

- ``first-answer``: storage still held pending, queued, running or active work when the
  restarted host answered its first request (§4: recovery comes before serving);
- ``still-active``: the restarted host shows such work, or a session still busy;
- ``lost-write``: an acknowledged write is missing or reads otherwise;
- ``inconsistent``: an uncertain approve left half its effect (§4: one transaction);
- ``artifact``: an approval whose artifact file is missing or differs from its record (§2);
- ``replay``: a provider request, a turn or a command the restarted host started on its
  own, or a workspace line written twice or after the kill;
- ``integrity``: ``PRAGMA integrity_check`` or ``foreign_key_check`` failed;
- ``restart``: the host did not come back, or refused a check's request.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sqlite3
from collections import Counter
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, Final

from conformance.client import HostClient, RpcError
from conformance.killpoints.history import STABLE_TASK_FIELDS, History
from conformance.killpoints.workload import JOURNAL, MODEL
from conformance.mock_provider import MockProvider, TextReply
from conformance.protocol_models import ProviderConfig
from conformance.storage_inspector import DB_FILE

BUSY_FIELDS: Final = ("activeTurnId", "pendingApprovalId", "activeExecutionId")


@contextmanager
def read_only(data_dir: Path) -> Iterator[sqlite3.Connection]:
    """The host database opened read-only (the host may be running; WAL lets us read)."""
    uri = f"{(data_dir / DB_FILE).resolve().as_uri()}?mode=ro"
    with closing(sqlite3.connect(uri, uri=True, timeout=10)) as conn:
        conn.row_factory = sqlite3.Row
        yield conn


def integrity(data_dir: Path) -> list[str]:
    """Anomalies of ``PRAGMA integrity_check`` and ``PRAGMA foreign_key_check``."""
    found: list[str] = []
    with read_only(data_dir) as conn:
        result = [row[0] for row in conn.execute("PRAGMA integrity_check")]
        if result != ["ok"]:
            found.append(f"integrity: integrity_check says {result[:5]}")
        broken = [tuple(row) for row in conn.execute("PRAGMA foreign_key_check")]
        if broken:
            found.append(f"integrity: foreign_key_check lists {broken[:5]}")
    return found


def journal_lines(workspace: Path) -> list[str]:
    """The lines commands appended to the workspace journal."""
    path = workspace / JOURNAL
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


class Checker:
    """Checks one restarted host; every finding is added to :attr:`anomalies`."""

    def __init__(
        self,
        client: HostClient,
        provider: MockProvider,
        data_dir: Path,
        history: History,
        unlisted: frozenset[str] = frozenset(),
    ) -> None:
        self.client, self.provider, self.data_dir, self.history = (
            client,
            provider,
            data_dir,
            history,
        )
        self.unlisted = unlisted  # sessions whose many approvals are checked in storage
        self.anomalies: list[str] = []

    def flag(self, kind: str, message: str) -> None:
        """Record one anomaly."""
        self.anomalies.append(f"{kind}: {message}")

    # -- the first answer ---------------------------------------------------------------

    def first_answer(self) -> None:
        """Storage, read right after the first answer, holds nothing pending or active."""
        queries = {
            "approvals still pending": "SELECT id FROM plan_approvals WHERE status = 'pending'",
            "executions still queued or running": "SELECT id FROM plan_approvals "
            "WHERE execution_state IN ('queued', 'running')",
            "turns still active": "SELECT id FROM turns WHERE state = 'active'",
        }
        with read_only(self.data_dir) as conn:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version != 10:
                self.flag("first-answer", f"storage reads user_version {version}, not 10")
                return
            for what, query in queries.items():
                ids = [row[0] for row in conn.execute(query)]
                if ids:
                    self.flag("first-answer", f"{what} when the host first answered: {ids}")

    # -- acknowledged state -------------------------------------------------------------

    def sessions(self) -> dict[str, dict[str, Any]]:
        """Every acknowledged session is there, idle, configured as acknowledged."""
        listed = {s["sessionId"]: s for s in self.client.request("session/list")["sessions"]}
        for session in listed.values():
            busy = {k: session[k] for k in BUSY_FIELDS if session.get(k) is not None}
            if busy:
                self.flag("still-active", f"session {session['sessionId']} is busy: {busy}")
        for facts in self.history.sessions.values():
            found = listed.get(facts.session_id)
            if found is None:
                self.flag("lost-write", f"session {facts.session_id} is gone")
                continue
            for name, value in (
                ("workspaceRoot", facts.workspace_root),
                ("provider", facts.provider),
                ("shellId", facts.shell_id),
            ):
                if found[name] != value:
                    self.flag(
                        "lost-write",
                        f"session {facts.session_id} has {name} {found[name]!r}, "
                        f"acknowledged {value!r}",
                    )
        return listed

    def approvals(self, sessions: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
        """Every acknowledged approval reads as §4 maps it; nothing is pending or queued."""
        listed: dict[str, dict[str, Any]] = {}
        for session_id in sessions.keys() - self.unlisted:
            for approval in self.client.request("approval/list", {"sessionId": session_id})[
                "approvals"
            ]:
                listed[approval["approvalId"]] = approval
        for approval in listed.values():
            if approval["status"] == "pending":
                self.flag("still-active", f"approval {approval['approvalId']} is pending")
            if approval["executionState"] in ("queued", "running"):
                self.flag(
                    "still-active",
                    f"execution of {approval['approvalId']} is {approval['executionState']}",
                )
        for facts in self.history.approvals.values():
            found = listed.get(facts.approval_id)
            if found is None:
                self.flag("lost-write", f"approval {facts.approval_id} is gone")
                continue
            status, execution = found["status"], found["executionState"]
            if status not in facts.statuses or execution not in facts.executions:
                self.flag(
                    "lost-write",
                    f"approval {facts.approval_id} reads {status}/{execution}; the history "
                    f"allows {sorted(facts.statuses)}/{sorted(map(str, facts.executions))}",
                )
            if status == "approved" and facts.execution_id not in (None, found["executionId"]):
                self.flag(
                    "lost-write",
                    f"approval {facts.approval_id} has execution {found['executionId']}, "
                    f"acknowledged {facts.execution_id}",
                )
            if status == "approved" and facts.permission_mode not in (
                None,
                found["permissionMode"],
            ):
                self.flag(
                    "lost-write",
                    f"approval {facts.approval_id} has permission mode "
                    f"{found['permissionMode']}, acknowledged {facts.permission_mode}",
                )
        self._modes(sessions, listed)
        return list(listed.values())

    def _modes(self, sessions: dict[str, dict[str, Any]], approvals: dict[str, Any]) -> None:
        """A session's mode is the acknowledged one, or what an uncertain approve set, in
        step with that approval's status."""
        for facts in self.history.sessions.values():
            found = sessions.get(facts.session_id)
            if found is None:
                continue
            have = (found["mode"], found["permissionMode"])
            if facts.pending_approve is None:
                if have != facts.mode:
                    self.flag(
                        "lost-write",
                        f"session {facts.session_id} is {have}, acknowledged {facts.mode}",
                    )
                continue
            approval_id, approved_mode = facts.pending_approve
            status = approvals.get(approval_id, {}).get("status")
            want = approved_mode if status == "approved" else facts.mode
            if have != want:
                self.flag(
                    "inconsistent",
                    f"session {facts.session_id} is {have} while approval {approval_id} "
                    f"is {status}: approve was not one transaction",
                )

    def artifacts(self, approvals: list[dict[str, Any]], sessions: dict[str, Any]) -> None:
        """Every approval's artifact is on disk as recorded; acknowledged ones read back."""
        for approval in approvals:
            artifact = approval.get("artifact")
            session = sessions.get(approval["sessionId"], {})
            if not artifact or not artifact["path"] or not session.get("workspaceRoot"):
                continue
            path = Path(session["workspaceRoot"]) / artifact["path"]
            name = f"approval {approval['approvalId']}'s artifact {artifact['path']}"
            if not path.is_file():
                self.flag("artifact", f"{name} is missing")
                continue
            data = path.read_bytes()
            if hashlib.sha256(data).hexdigest() != artifact["sha256"]:
                self.flag("artifact", f"{name} differs from its recorded SHA-256")
            if len(data) != artifact["byteSize"]:
                self.flag(
                    "artifact", f"{name} has {len(data)} bytes, recorded {artifact['byteSize']}"
                )
            facts = self.history.approvals.get(approval["approvalId"])
            if facts is not None and facts.markdown is not None and data != facts.markdown:
                self.flag("artifact", f"{name} is not the submitted markdown")
            if facts is None:
                continue
            try:
                read = self.client.read_artifact(approval["sessionId"], approval["approvalId"])
            except RpcError as error:
                self.flag("artifact", f"{name} cannot be read back: {error.canonical}")
                continue
            if base64.b64decode(read.contentBase64) != data:
                self.flag("artifact", f"{name} reads back other bytes")

    def settings(self) -> None:
        """The acknowledged default shell is still the default (§7)."""
        wanted = self.history.default_shell
        if wanted is None:
            return
        found = self.client.request("shell/list")["defaultShellId"]
        if found != wanted:
            self.flag("lost-write", f"the default shell is {found!r}, acknowledged {wanted!r}")

    def tasks(self) -> None:
        """Acknowledged tasks are there as acknowledged, finished runs included; deleted
        ones are gone. (How a run the kill cut short reads afterwards is the host's choice:
        the contract ends its turn, and says nothing of the run's outcome.)"""
        listed = {t["taskId"]: t for t in self.client.request("task/list")["tasks"]}
        for facts in self.history.tasks.values():
            found = listed.get(facts.task_id)
            if facts.deleted:
                if found is not None:
                    self.flag("lost-write", f"deleted task {facts.task_id} is back")
                continue
            if found is None:
                self.flag("lost-write", f"task {facts.task_id} is gone")
                continue
            for name in (*STABLE_TASK_FIELDS, "runAt"):
                if found[name] != facts.fields[name]:
                    self.flag(
                        "lost-write",
                        f"task {facts.task_id} has {name} {found[name]!r}, "
                        f"acknowledged {facts.fields[name]!r}",
                    )
            known = facts.last_run
            if known is not None and known["outcome"] != "running":
                run = found.get("lastRun") or {}
                if (run.get("runId"), run.get("outcome")) != (known["runId"], known["outcome"]):
                    self.flag(
                        "lost-write",
                        f"task {facts.task_id}'s last run reads {run or None}, "
                        f"acknowledged {known['runId']} {known['outcome']}",
                    )

    def transcripts(self) -> None:
        """Every acknowledged prompt is in its session's transcript."""
        for facts in self.history.sessions.values():
            if not facts.prompts:
                continue
            entries = self.client.request("session/transcript", {"sessionId": facts.session_id})
            text = json.dumps(entries["entries"], ensure_ascii=False)
            for prompt in facts.prompts:
                if prompt not in text:
                    self.flag(
                        "lost-write",
                        f"acknowledged prompt {prompt!r} is not in {facts.session_id}'s transcript",
                    )

    # -- nothing replayed ---------------------------------------------------------------

    def nothing_started(self, what: str) -> None:
        """No provider request, turn or command from the restarted host on its own."""
        requests = self.provider.requests()
        if requests:
            self.flag("replay", f"{len(requests)} provider request(s) {what}")
        for method in ("turn/started", "command/started", "execution/updated"):
            notes = self.client.notifications(method)
            if notes:
                self.flag("replay", f"{len(notes)} {method} notification(s) {what}")

    def fresh_prompt(self, session_id: str | None, sessions: dict[str, Any], marker: str) -> None:
        """A new prompt works and is the only provider request since the restart."""
        session = sessions.get(session_id or "")
        if session is None or session.get("provider") is None:
            config = ProviderConfig(baseUrl=self.provider.base_url, model=MODEL)
            created = self.client.create_session(None, provider=config)
            session = created.session.model_dump(mode="json")
        self.provider.enqueue(TextReply("Fresh answer."))
        mark = self.client.mark()
        turn = self.client.prompt(session["sessionId"], marker).turnId
        ended = self.client.wait_for("turn/ended", lambda p: p["turnId"] == turn, mark)
        if ended["outcome"] != "completed":
            self.flag("restart", f"a new prompt after the restart ended {ended['outcome']}")
        started = self.client.notifications("turn/started", mark)
        if started and started[0]["params"]["mode"] != session["mode"]:
            self.flag(
                "restart",
                f"the new turn ran in {started[0]['params']['mode']}, the session is "
                f"{session['mode']}",
            )
        # The new turn's requests all carry its prompt; any other request is the restarted
        # host's own work. (How many requests one turn makes is the host's business.)
        requests = self.provider.requests()
        others = [r for r in requests if marker not in json.dumps(r.messages)]
        if others:
            self.flag(
                "replay",
                f"{len(others)} provider request(s) after the restart without the new prompt",
            )
        if len(others) == len(requests):
            self.flag("restart", "the new prompt reached the provider in no request")

    def journal(self, at_kill: list[str], workspace: Path) -> None:
        """Each command's line is there at most once (exactly once when it was printed),
        and nothing was appended after the kill."""
        lines = journal_lines(workspace)
        if lines != at_kill:
            self.flag("replay", f"the journal changed after the kill: {lines[len(at_kill) :]}")
        for line, count in Counter(lines).items():
            if count > 1:
                self.flag("replay", f"line {line} is in the journal {count} times")
        missing = sorted(self.history.lines_acknowledged - set(lines))
        if missing:
            self.flag("lost-write", f"printed lines missing from the journal: {missing}")
