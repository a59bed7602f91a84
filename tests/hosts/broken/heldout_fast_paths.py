"""Broken hosts: a held-out set (optimisations and fast paths gone wrong), written from the
contract alone.

Each host is the reference host with one later "make it faster" change that breaks a rare
case: a check skipped on the common path, a write deferred, a memo keyed too coarsely, a
list read only in part, a clean-up that only the usual path does, a buffer reused.
"""

from __future__ import annotations

import contextlib
import hashlib
import heapq
import os
import stat
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hosts.registry import BrokenCase, patch, variant

if TYPE_CHECKING:
    import aiosqlite
    import httpx

    from reference_host.artifacts import Artifact, FaultCheck
    from reference_host.commands import _Collector
    from reference_host.provider_client import _Accumulator
    from reference_host.storage import ApprovalRow, SessionRow
    from reference_host.turns import CallOutcome


# R5.9 / P34: "an approval is found, listed and decided only through its own session
# (APPROVAL_NOT_FOUND otherwise)"; a request naming an approval of another session "decides
# and reveals nothing" of it.
# Bug: approval lookups remember the approvals they have already matched to their session,
# and a remembered approval skips the ownership comparison on later lookups (the row is
# still read, the session still checked to exist). Once an approval has been read through
# its own session, any other session's id reaches it.
# Observed: approval/get, artifact/read, approval/reject (and approve) naming session B and
# session A's approval answer with A's approval (reject rejects it) instead of
# APPROVAL_NOT_FOUND.
# Recipe: sessions A and B; a Plan turn in A submits a plan; approval/get(A, apr) (ok);
# approval/get(B, apr) -> expected APPROVAL_NOT_FOUND, got the approval; approval/reject(B,
# apr) -> A's approval is rejected.
@variant("fast-approval-owner-remembered")
def approval_owner_remembered() -> None:
    from reference_host.approvals import Approvals
    from reference_host.errors import HostError

    matched: weakref.WeakKeyDictionary[Approvals, set[str]] = weakref.WeakKeyDictionary()

    async def require(self: Approvals, session_id: str, approval_id: str) -> ApprovalRow:
        known = matched.setdefault(self, set())
        await self.host.require_session(session_id)
        row = await self.host.storage.get_approval(approval_id)
        if row is not None and approval_id in known:
            return row  # matched to its session before: the comparison is skipped
        if row is None or row.session_id != session_id:
            raise HostError(
                "APPROVAL_NOT_FOUND", f"session {session_id!r} has no approval {approval_id!r}"
            )
        known.add(approval_id)
        return row

    patch(Approvals, "require", require)


# R5.3 / R5.7, and "Sessions, turns and boundaries": "naming a setting with the value the
# session already has is a change like any other and is accepted while idle"; while a turn
# runs it gets SESSION_BUSY, while a plan is pending APPROVAL_PENDING, and changes nothing.
# Bug: a session/configure whose every named setting already has the asked value "changes
# nothing", so it is answered at once from the stored row (the session/updated still sent)
# without the idle check and without a write.
# Observed: while a turn runs (or an approval is pending), session/configure naming the
# session's current mode (or permission mode, provider, shell) succeeds instead of
# SESSION_BUSY / APPROVAL_PENDING.
# Recipe: session in plan; a Plan turn submits a plan (approval pending); session/configure
# {mode: "plan"} -> expected APPROVAL_PENDING, got the session. Or, while a prompt's turn
# waits on the provider, session/configure {permissionMode: <current>} -> expected
# SESSION_BUSY.
@variant("fast-configure-unchanged-answered-early")
def configure_unchanged_answered_early() -> None:
    from reference_host.host import Host

    original = Host.session_configure

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        provider = (
            {"baseUrl": row.provider_base_url, "model": row.model}
            if row.provider_base_url is not None and row.model is not None
            else None
        )
        current = {
            "mode": row.mode,
            "permissionMode": row.permission_mode,
            "provider": provider,
            "shellId": row.shell_id,
        }
        named = {key: params[key] for key in current if key in params}
        if named and all(current[key] == value for key, value in named.items()):
            wire = self.session_wire(row)
            self.notify("session/updated", {"session": wire})
            return {"session": wire}
        return await original(self, params)

    patch(Host, "session_configure", session_configure, wraps=True)


# §4 / R4.10, C8: before serving, one transaction marks "all prior queued or running
# execution states as interrupted", also an execution that never got a turn.
# Bug: most starts find nothing to recover, so the recovery first asks whether any approval
# is pending or any turn is active, and skips its transaction when neither is. An approved
# execution still queued (its turn never started) has status 'approved' and no turn, so it
# is missed.
# Observed: after a restart, an execution held in `queued` still reads executionState
# "queued" in approval/get, approval/list and plan_approvals, instead of "interrupted".
# Recipe: Plan turn submits a plan; conformance/fault/arm holdExecution; approval/approve
# (ask) -> queued; restart the host; approval/get -> expected executionState "interrupted",
# got "queued" (plan_approvals.execution_state too).
@variant("fast-recovery-skipped-when-idle")
def recovery_skipped_when_idle() -> None:
    from reference_host.storage import Storage

    original = Storage.recover

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self._conn.execute(
            "SELECT EXISTS (SELECT 1 FROM plan_approvals WHERE status = 'pending') "
            "OR EXISTS (SELECT 1 FROM turns WHERE state = 'active')"
        ) as cursor:
            found = await cursor.fetchone()
        if found is None or not found[0]:
            return 0, 0, 0  # nothing was left under way: no write at all
        return await original(self, now)

    patch(Storage, "recover", recover, wraps=True)


# R7.2: "The sessions row holds what session/get reports ... The suite reads both after
# every change"; R4.3 / "Shutdown and crashes": "A response or notification reports state
# you have already stored".
# Bug: configuration changes are small and frequent, so session/configure keeps the changed
# row in memory (reads see it) and writes it with the next transaction of the host, or when
# the host stops, instead of in a transaction of its own before answering.
# Observed: after session/configure answers (and sends session/updated), the sessions row
# still holds the old mode / permission mode / provider / shell until some other write
# happens; a crash before that loses the change.
# Recipe: session/create; session/configure {mode: "plan", permissionMode: "auto"}; read
# sessions in host.db -> expected mode plan, permission_mode auto; got agent, ask.
@variant("fast-configure-write-behind")
def configure_write_behind() -> None:
    from reference_host.host import Host
    from reference_host.state import ensure_idle_for
    from reference_host.storage import Storage

    unwritten: weakref.WeakKeyDictionary[Storage, dict[str, SessionRow]] = (
        weakref.WeakKeyDictionary()
    )
    original_transaction = Storage.transaction
    original_get = Storage.get_session
    original_list = Storage.list_sessions
    original_close = Storage.close

    @asynccontextmanager
    async def transaction(self: Storage) -> AsyncIterator[aiosqlite.Connection]:
        pending = unwritten.get(self, {})
        flushed = dict(pending)
        async with original_transaction(self) as conn:
            for row in flushed.values():
                await Storage.write_session(conn, row)
            yield conn
        for session_id, row in flushed.items():
            if pending.get(session_id) is row:
                del pending[session_id]

    async def get_session(self: Storage, session_id: str) -> SessionRow | None:
        held = unwritten.get(self, {}).get(session_id)
        return held if held is not None else await original_get(self, session_id)

    async def list_sessions(self: Storage) -> list[SessionRow]:
        held = unwritten.get(self, {})
        return [held.get(row.id, row) for row in await original_list(self)]

    async def close(self: Storage) -> None:
        if unwritten.get(self):
            async with self.transaction():
                pass  # writes what is held
        await original_close(self)

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        from reference_host.host import _require_shell

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
                _require_shell(params["shellId"])
            changes["shell_id"] = params["shellId"]
        updated = replace(row, **changes, updated_at=self.clock.now_ms())
        unwritten.setdefault(self.storage, {})[row.id] = updated  # written with the next one
        wire = self.session_wire(updated)
        self.notify("session/updated", {"session": wire})
        return {"session": wire}

    patch(Storage, "transaction", transaction, wraps=True)
    patch(Storage, "get_session", get_session, wraps=True)
    patch(Storage, "list_sessions", list_sessions, wraps=True)
    patch(Storage, "close", close, wraps=True)
    patch(Host, "session_configure", session_configure)


# P13: approve and artifact/read "check the file's bytes against its recorded SHA-256 and
# size, on every call: a read that matched does not vouch for a later one. Any change to
# the bytes ... also one of the same size (and the file's modification time put back) ...
# is ARTIFACT_MODIFIED".
# Bug: hashing a large plan on every read is slow, so a verified artifact is remembered with
# its file's (device, inode, size, mtime); while lstat shows the same four values the
# remembered bytes are returned without reading the file again.
# Observed: after one successful artifact/read, the file is overwritten in place with other
# bytes of the same size and its mtime put back: artifact/read returns the recorded bytes
# and approve succeeds (the execution starts) instead of ARTIFACT_MODIFIED.
# Recipe: Plan turn submits a plan; artifact/read (ok); chmod u+w, overwrite the file's bytes
# in place with as many other bytes, os.utime back to the old atime/mtime; artifact/read ->
# expected ARTIFACT_MODIFIED, got the old content; approval/approve -> expected
# ARTIFACT_MODIFIED, got approved.
@variant("fast-artifact-verified-by-stat")
def artifact_verified_by_stat() -> None:
    from reference_host.approvals import Approvals

    original = Approvals.verified_content
    verified: weakref.WeakKeyDictionary[
        Approvals, dict[tuple[str, str], tuple[tuple[int, int, int, int], str, bytes]]
    ] = weakref.WeakKeyDictionary()

    async def verified_content(self: Approvals, session: SessionRow, row: ApprovalRow) -> bytes:
        root, relative, recorded = session.workspace_root, row.artifact_path, row.artifact_sha256
        if root is None or relative is None or recorded is None:
            return await original(self, session, row)
        seen = verified.setdefault(self, {})
        key = (root, relative)
        signature: tuple[int, int, int, int] | None = None
        try:
            info = Path(root, relative).lstat()
        except (OSError, ValueError):
            info = None
        if info is not None and stat.S_ISREG(info.st_mode):
            signature = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
            hit = seen.get(key)
            if hit is not None and hit[0] == signature and hit[1] == recorded:
                return hit[2]  # unchanged since it was verified
        content = await original(self, session, row)
        if signature is not None:
            seen[key] = (signature, recorded, content)
        return content

    patch(Approvals, "verified_content", verified_content, wraps=True)


# §2 / R2.4, R2.5: "Each submission gets a unique file"; the name "must be new for every
# submission, also for two identical plans submitted at the same host-clock instant"; P13:
# "another file with the recorded hash and size (an identical plan submitted before) does
# not vouch for it".
# Bug: artifacts are immutable, so the store was made content-addressed: the file is named
# after the SHA-256 of its bytes, and when that file already exists (the same plan submitted
# before) it is taken as already written and reused.
# Observed: two submissions of byte-identical markdown (a resubmission after a reject, or two
# sessions of one project) get approvals whose artifact path is the same file; only one
# file exists under .pi/plan/.
# Recipe: Plan turn submits {markdown M}; approval/reject; a new Plan turn submits the same M;
# approval/list -> expected two different artifact paths (two files), got one path twice.
@variant("fast-artifact-content-addressed")
def artifact_content_addressed() -> None:
    from reference_host import approvals, artifacts
    from reference_host.errors import HostError
    from reference_host.workspace import validate_root

    def write_artifact(root: str, content: bytes, fault: FaultCheck) -> Artifact:
        sha256 = hashlib.sha256(content).hexdigest()
        name = f"plan-{sha256[:32]}.md"
        relative = "/".join((*artifacts.PLAN_DIR, name))
        root_path = validate_root(root)
        try:
            root_fd = os.open(root_path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise HostError("WORKSPACE_INVALID", f"cannot open workspace root: {exc}") from exc
        opened = [root_fd]
        try:
            pi_fd, pi_created = artifacts._open_plan_dir(root_fd, artifacts.PLAN_DIR[0], ".pi")
            opened.append(pi_fd)
            plan_fd, plan_created = artifacts._open_plan_dir(
                pi_fd, artifacts.PLAN_DIR[1], ".pi/plan"
            )
            opened.append(plan_fd)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            try:
                file_fd = os.open(name, flags, artifacts.READ_ONLY, dir_fd=plan_fd)
            except FileExistsError:
                return artifacts.Artifact(relative, sha256, len(content))  # already stored
            except OSError as exc:
                raise HostError(
                    "ARTIFACT_WRITE_FAILED", f"cannot create the artifact: {exc}"
                ) from exc
            to_flush = [
                plan_fd,
                *([pi_fd] if plan_created else []),
                *([root_fd] if pi_created else []),
            ]
            try:
                artifacts._write_all(file_fd, content, fault)
                artifacts._close(file_fd)
                file_fd = -1
                for directory_fd in to_flush:
                    artifacts._flush_directory(directory_fd)
            except BaseException:
                if file_fd != -1:
                    with contextlib.suppress(OSError):
                        os.close(file_fd)
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=plan_fd)
                raise
        finally:
            for fd in opened:
                with contextlib.suppress(OSError):
                    os.close(fd)
        return artifacts.Artifact(relative, sha256, len(content))

    patch(approvals, "write_artifact", write_artifact)


# §3 / R3.11: "Each approval expires at its own deadline ... an earlier approval's deadline
# never expires a later one of the same session, nor takes it out of its session's
# pendingApprovalId"; R3.9: the deadline is createdAt + 30 minutes.
# Bug: only one approval can be pending per session, so the expiry timer was made the
# session's: when it fires it expires whatever approval the session has pending, trusting
# the timer for the deadline. The timer of a rejected approval is never disarmed, so it
# expires the session's next plan early.
# Observed: a revision submitted after a reject expires at the first approval's deadline
# (status expired, PLAN_APPROVAL_TIMEOUT, pendingApprovalId null) although its own expiresAt
# is still ahead.
# Recipe: Plan turn submits A1 at T; approval/reject A1; clock +10 min; a new Plan turn
# submits A2 (expiresAt T+40 min); clock set to T+30 min -> expected A2 pending, got A2
# expired with decidedAt T+30 min.
@variant("fast-expiry-timer-per-session")
def expiry_timer_per_session() -> None:
    from reference_host.approvals import TIMEOUT_CODE, Approvals, approval_wire

    async def expire(self: Approvals, approval_id: str) -> None:
        host = self.host
        armed_for = await host.storage.get_approval(approval_id)
        if armed_for is None:
            return
        pending_id = host.activity_of(armed_for.session_id).pending_approval_id
        if pending_id is None:
            return
        row = await host.storage.get_approval(pending_id)
        if row is None or row.status != "pending":
            return
        expired = replace(
            row, status="expired", status_code=TIMEOUT_CODE, decided_at=host.clock.now_ms()
        )
        await host.storage.update_approval(expired)
        host.set_activity(row.session_id, pending_approval_id=None)
        host.notify("approval/updated", {"approval": approval_wire(expired)})
        await host.publish_session(row.session_id)

    patch(Approvals, "expire", expire)


# R7.3 / R7.6: Bash runs "through the session's shell, or the persisted default";
# "shellId: null clears the session's own choice: from then on ... its commands run in the
# default shell"; shell/setDefault "is accepted also while sessions that follow the default
# have a turn under way".
# Bug: resolving the shell reads settings on every Bash call, so the resolved shell is
# memoised per (session, session.shellId). A session that follows the default (shellId
# null) keeps the default it first resolved after shell/setDefault changes it.
# Observed: after shell/setDefault, a session with shellId null still runs its commands in
# the old default: command/started.shellId and command_audit.shell_id/shell_path name it.
# Recipe: session (shellId null) runs Bash (default sh); shell/setDefault {shellId: "bash"};
# the next Bash call in the same session -> expected command/started shellId "bash", got
# "sh" (and the process is sh).
@variant("fast-default-shell-memoised")
def default_shell_memoised() -> None:
    from reference_host.turns import TurnRunner

    original = TurnRunner._bash
    resolved: weakref.WeakKeyDictionary[TurnRunner, dict[tuple[str, str | None], str]] = (
        weakref.WeakKeyDictionary()
    )

    async def _bash(
        self: TurnRunner, session: SessionRow, turn_id: str, args: dict[str, Any]
    ) -> CallOutcome:
        memo = resolved.setdefault(self, {})
        key = (session.id, session.shell_id)
        shell_id = memo.get(key)
        if shell_id is None:
            shell_id = session.shell_id or await self.host.default_shell_id()
            if shell_id is not None:
                memo[key] = shell_id
        return await original(self, replace(session, shell_id=shell_id), turn_id, args)

    patch(TurnRunner, "_bash", _bash, wraps=True)


# P35: "Every task/run runs the task at once, as a run of its own with its own runId and
# session, also while an earlier run of the same task is still under way: it never answers
# with the earlier run, and the two runs go on side by side."
# Bug: task/run was made idempotent against double clicks: when the task's newest run still
# reads `running`, the request is answered with that run and nothing is started.
# Observed: a second task/run while the first run's turn waits on the provider answers with
# the first run's runId and sessionId; no second session, turn or provider request.
# Recipe: task/create (agent, provider that holds its answer); task/run -> run R1; task/run
# again before R1 ends -> expected a new runId and sessionId, got R1 again.
@variant("fast-task-run-joins-running")
def task_run_joins_running() -> None:
    from reference_host.tasks import Tasks, _run_wire

    async def run_now(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require(params["taskId"])
        last = await self.host.storage.last_task_run(row["id"])
        if last is not None and last["outcome"] == "running":
            return {"run": _run_wire(last)}
        return {"run": await self.run(row)}

    patch(Tasks, "run_now", run_now)


# P10 (new_context): "An empty summary is a reset like any other: the model is shown none of
# what came before"; R1.3: the next request of the turn and later turns carry the summary
# and none of the earlier messages.
# Bug: an empty summary has nothing to carry over, and an empty system message seemed
# useless, so the reset row is written only when the summary is not empty; the call still
# answers ok.
# Observed: after new_context {summary: ""}, the next provider request (same turn, and the
# next turn's first) still carries the earlier turns' messages.
# Recipe: prompt "remember X" (model answers); prompt 2: model calls new_context
# {summary: ""}; its next request -> expected no "remember X" message, got it.
@variant("fast-empty-summary-keeps-context")
def empty_summary_keeps_context() -> None:
    from reference_host.turns import CallOutcome, TurnRunner

    original = TurnRunner._dispatch

    async def _dispatch(
        self: TurnRunner, session: SessionRow, turn_id: str, name: str, args: dict[str, Any]
    ) -> CallOutcome:
        if name == "new_context" and not args.get("summary"):
            return CallOutcome("ok", "A new context starts from the summary.")
        return await original(self, session, turn_id, name, args)

    patch(TurnRunner, "_dispatch", _dispatch, wraps=True)


# "Conformance mode" (P32) and "Ordering": "When set or advance makes a timer due, the timer
# fires before the response is sent"; "One move can make many timers due ... each of them
# fires in that move"; R3.11 (eager expiry), P29 (a task runs when its runAt comes due).
# Bug: the loop over due timers stops when it meets a cancelled one (`break` where
# `continue` was meant). A cancelled timer is left in the heap by every finished command
# (its timeout timer) and every task/update or task/delete of a task with a runAt, so the
# timers due after it do not fire in that move, only at the next clock move.
# Observed: after a Bash command ran (its timeout timer cancelled at start + timeout), a
# clock move past an approval's expiresAt answers before the approval expires: approval/get
# still reads pending; likewise a task due in that move sends no task/runFinished before
# the clock response.
# Recipe: task T1 runAt now+5 min; task/update T1 runAt now+20 min; task T2 runAt now+10 min;
# conformance/clock/advance 15 min -> expected T2's run (task/runFinished) before the
# answer; got nothing until the next clock move.
@variant("fast-timers-stop-at-cancelled")
def timers_stop_at_cancelled() -> None:
    from reference_host.clock import Clock

    async def fire_due(self: Clock) -> None:
        while self._timers and self._timers[0].due_ms <= self.now_ms():
            timer = heapq.heappop(self._timers)
            if timer.cancelled:
                break
            await timer.callback()
        self._schedule_wakeup()

    patch(Clock, "fire_due", fire_due)


# P25: "A streamed answer ends with [DONE]. One that breaks off before it (the connection
# closed, or the body ended without [DONE]), one that carries an error event, and one with
# a data piece that is not JSON or not a JSON object (also when [DONE] follows), ends the
# turn failed with PROVIDER_ERROR".
# Bug: to save the wait for [DONE], the stream reader stops at the first chunk that carries
# a finish_reason (that chunk is still read whole) and takes the answer as complete.
# Observed: an answer whose chunk with finish_reason is followed by an error event, a piece
# that is not JSON, or the end of the body without [DONE] completes the turn (turn/ended
# completed, error null) instead of failing it with PROVIDER_ERROR.
# Recipe: prompt; the provider streams "hi", then a chunk with finish_reason "stop", then
# closes without [DONE] (or sends `data: {"error":...}`) -> expected turn/ended failed
# PROVIDER_ERROR, got completed.
@variant("fast-stream-ends-at-finish-reason")
def stream_ends_at_finish_reason() -> None:
    from reference_host import provider_client
    from reference_host.sse import sse_lines

    done = provider_client._DONE

    async def _read_events(response: httpx.Response, acc: _Accumulator) -> bool:
        data_lines: list[str] = []
        async for line in sse_lines(response.aiter_bytes()):
            if not line:
                if data_lines:
                    data, data_lines = "\n".join(data_lines), []
                    if data.strip() == done:
                        return True
                    await acc.feed(data)
                    if acc.finish_reason is not None:
                        return True  # the model has finished: no need to wait for [DONE]
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            if name == "data":
                data_lines.append(value.removeprefix(" "))
        if data_lines:
            data = "\n".join(data_lines)
            if data.strip() == done:
                return True
            await acc.feed(data)
            if acc.finish_reason is not None:
                return True
        return False

    patch(provider_client, "_read_events", _read_events)


# P7: "A second answer to the same question, an answer to an id never asked, or one to the
# question of a turn that has ended (a cancelled one included) gets
# PERMISSION_REQUEST_NOT_FOUND and changes nothing."
# Bug: the open question is taken off the table by permission/respond (one dict pop) instead
# of in a `finally` of the waiting call, and an answer to a question nobody waits for any
# more is dropped silently. A question whose turn was cancelled stays on the table.
# Observed: after session/cancel ends a turn that waited on a permission question,
# permission/respond on that requestId answers {} instead of PERMISSION_REQUEST_NOT_FOUND (a
# second answer then gets PERMISSION_REQUEST_NOT_FOUND).
# Recipe: session (ask); prompt; model calls Bash -> permission/requested R; session/cancel;
# turn/ended cancelled; permission/respond {requestId: R, decision: "allow"} -> expected
# PERMISSION_REQUEST_NOT_FOUND, got {}.
@variant("fast-permission-cleared-on-answer-only")
def permission_cleared_on_answer_only() -> None:
    import asyncio

    from reference_host.errors import HostError
    from reference_host.ids import new_id
    from reference_host.permissions import PermissionBroker, _Request

    async def ask(
        self: PermissionBroker, session_id: str, turn_id: str, tool: str, tool_input: Any
    ) -> bool:
        request_id = new_id("perm")
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._open[request_id] = _Request(session_id, answer)
        self._notify(
            "permission/requested",
            {
                "sessionId": session_id,
                "turnId": turn_id,
                "requestId": request_id,
                "tool": tool,
                "input": tool_input,
            },
        )
        return await answer  # respond() takes the request off the table

    def respond(self: PermissionBroker, request_id: str, decision: str) -> None:
        request = self._open.pop(request_id, None)
        if request is None:
            raise HostError(
                "PERMISSION_REQUEST_NOT_FOUND", f"no open permission request {request_id!r}"
            )
        if not request.answer.done():  # nobody waits any more: nothing to resolve
            request.answer.set_result(decision == "allow")

    patch(PermissionBroker, "ask", ask)
    patch(PermissionBroker, "respond", respond)


# R7.3 / P20: command/output is "numbered by seq from 0 across both streams (each command
# counts its own pieces, also while other commands run, with no gap and no number used
# twice)", and each command's own output counts toward its cap.
# Bug: the output buffer is allocated once per turn and reused by the turn's next command;
# reusing it empties the kept bytes and the truncation flag but not the piece counter.
# Observed: the second command of a turn numbers its first command/output piece where the
# first command stopped (seq 1, 2, ...) instead of 0.
# Recipe: session (auto); prompt; the model calls Bash "echo one", then (next message) Bash
# "echo two" -> expected the second command's first command/output seq 0, got 1.
# (The per-turn buffer lives in a context variable set inside the turn's own task: nothing
# of it outlives the turn or the host.)
@variant("fast-output-buffer-per-turn")
def output_buffer_per_turn() -> None:
    from reference_host import commands
    from reference_host.turns import TurnRunner

    turn_buffer: ContextVar[list[_Collector] | None] = ContextVar(
        "fast_output_buffer", default=None
    )
    fresh = commands._Collector
    original_loop = TurnRunner._loop

    def collector() -> _Collector:
        held = turn_buffer.get()
        if held is None:
            return fresh()
        if not held:
            held.append(fresh())
            return held[0]
        buffer = held[0]
        buffer.kept = bytearray()
        buffer.truncated = False
        return buffer

    async def _loop(self: TurnRunner, session_id: str, turn_id: str, unattended: bool) -> None:
        turn_buffer.set([])  # in the turn's own task: its commands share one buffer
        await original_loop(self, session_id, turn_id, unattended)

    patch(commands, "_Collector", collector)
    patch(TurnRunner, "_loop", _loop, wraps=True)


CASES = [
    BrokenCase(
        "fast-approval-owner-remembered",
        "isolation",
        "own_session_has_read_and_opened and read",
        "R5.9",
        "expected the host to refuse",
    ),
    BrokenCase(
        "fast-configure-unchanged-answered-early",
        "turn_boundaries",
        "to_the_same_one_during_a_turn_is_refused",
        "R5.3",
        "expected the host to refuse",
    ),
    BrokenCase(
        "fast-recovery-skipped-when-idle",
        "restart_interruption",
        "still_waiting_in_the_queue_is_interrupted_when_the_host",
        "C8",
        "storage showed the execution queued, not interrupted",
    ),
    BrokenCase(
        "fast-configure-write-behind",
        "turn_boundaries",
        "once_the_plan_is_rejected_the_session_takes_changes",
        "R5.7",
        "the stored mode is 'plan'",
    ),
    BrokenCase(
        "fast-artifact-verified-by-stat",
        "artifact_integrity",
        "opened_before_its_file_changed_is_refused_when_opened_again and modification",
        "P13",
        "each read checks the file as it is now",
    ),
    BrokenCase(
        "fast-artifact-content-addressed",
        "artifact_integrity",
        "two_identical_submissions_at_the_same_moment",
        "R2.4",
        "submissions share artifact paths",
    ),
    BrokenCase(
        "fast-expiry-timer-per-session",
        "deadline",
        "submitted_after_a_rejected_one_still_waits",
        "R3.9",
        "each plan expires at its own deadline",
    ),
    BrokenCase(
        "fast-default-shell-memoised",
        "shell",
        "without_a_shell_of_its_own_follows_a_change_of_the_default",
        "R7.6",
        "the command was announced in dash, not in bash",
    ),
    BrokenCase(
        "fast-task-run-joins-running",
        "scheduled_plan",
        "run_again_while_its_first_run_is_under_way_starts",
        "P35",
        "instead of starting one",
    ),
    BrokenCase(
        "fast-empty-summary-keeps-context",
        "plan_tools",
        "new_context_with_an_empty_summary_still_replaces",
        "P10",
        "after the new context the model was still given",
    ),
    BrokenCase(
        "fast-timers-stop-at-cancelled",
        "scheduled_plan",
        "switched_off_and_on_again_runs_when_its_time",
        "P29",
        "the host announced no run of it",
    ),
    BrokenCase(
        "fast-stream-ends-at-finish-reason",
        "sessions",
        "model_answer_that_breaks_off_ends_the_turn_as_failed and finish",
        "P25",
        "expected failed with PROVIDER_ERROR",
    ),
    BrokenCase(
        "fast-permission-cleared-on-answer-only",
        "turn_boundaries",
        "question_of_a_cancelled_turn_can_no_longer_be_answered",
        "P7",
        "expected the host to refuse",
    ),
    BrokenCase(
        "fast-output-buffer-per-turn",
        "shell",
        "each_command_of_a_turn_numbers_its_output_from",
        "P20",
        "each command numbers its own output from 0",
    ),
]
