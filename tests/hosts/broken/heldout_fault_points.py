"""Broken hosts: a held-out set (fault points), written from the contract alone.

Six of these thirteen were caught from the start; all are caught now. The model submits
the plan again after a failed write or flush in the same Plan turn (the fault is used up,
and the turn goes on); an execution held back stays queued while another session plans and
the clock moves; a failed approval leaves the hold on the next execution armed (two faults
armed at once); and a write failure that fired before a restart does not fire after it.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import weakref
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from hosts.registry import BrokenCase, patch, variant
from reference_host import approvals, artifacts
from reference_host.approvals import Approvals, approval_wire
from reference_host.errors import HostError
from reference_host.host import Host
from reference_host.options import Faults
from reference_host.storage import ApprovalRow, Storage
from reference_host.turns import TurnRunner

log = logging.getLogger("reference_host.variant")


@variant("one-fault-armed-at-a-time")
def _one_fault_armed_at_a_time() -> None:
    # Fault points ("Arms a one-shot fault"; each point fires once, the next time it is
    # reached): the host keeps a single armed-fault slot, so arming a second point before
    # the first fired replaces it (approvalCommit then holdExecution: the approve succeeds,
    # and its execution is held).
    async def fault_arm(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        self.faults.armed = {params["fault"]}
        return {}

    patch(Host, "fault_arm", fault_arm)


@variant("flush-fault-stays-armed")
def _flush_fault_stays_armed() -> None:
    # Fault points / R2.10: the flush point tests the armed set ("artifactFlush" in armed)
    # instead of taking from it, so the fault never disarms: after the first failed flush
    # every later SubmitPlan, in any session, fails with ARTIFACT_WRITE_FAILED too.
    take = Faults.take

    def sticky_take(self: Faults, point: str) -> bool:
        if point == "artifactFlush":
            return point in self.armed
        return take(self, point)

    patch(Faults, "take", sticky_take)


def _write_as_the_reference_does(fd: int, content: bytes, fault: artifacts.FaultCheck) -> None:
    """The reference host's write of the artifact's bytes, before its flush."""
    try:
        if fault("artifactWrite"):
            raise OSError(errno.EIO, "injected artifact write failure")
        view = memoryview(content)
        while view:
            view = view[os.write(fd, view) :]
    except OSError as exc:
        raise HostError("ARTIFACT_WRITE_FAILED", f"writing the artifact failed: {exc}") from exc


@variant("flush-failure-only-logged")
def _flush_failure_only_logged() -> None:
    # R2.10 / R2.12: a failed fsync of the artifact is logged as a warning and ignored (the
    # bytes were written, after all): the approval row commits over an unflushed file and
    # the SubmitPlan is ok, where the contract wants ARTIFACT_WRITE_FAILED and no approval.
    def _write_all(fd: int, content: bytes, fault: artifacts.FaultCheck) -> None:
        _write_as_the_reference_does(fd, content, fault)
        try:
            if fault("artifactFlush"):
                raise OSError(errno.EIO, "injected artifact flush failure")
            os.fsync(fd)
        except OSError as exc:
            log.warning("fsync of the plan artifact failed, going on: %s", exc)

    patch(artifacts, "_write_all", _write_all)


@variant("flush-failure-is-tool-failed")
def _flush_failure_is_tool_failed() -> None:
    # R2.12 / P9: only the write is wrapped in the ARTIFACT_WRITE_FAILED handler; the fsync
    # after it is not, so a failed flush escapes as a plain OSError and the call reports the
    # catch-all TOOL_FAILED instead of ARTIFACT_WRITE_FAILED (no approval is created).
    def _write_all(fd: int, content: bytes, fault: artifacts.FaultCheck) -> None:
        _write_as_the_reference_does(fd, content, fault)
        if fault("artifactFlush"):
            raise OSError(errno.EIO, "injected artifact flush failure")
        os.fsync(fd)

    patch(artifacts, "_write_all", _write_all)


@variant("failed-write-recorded-as-interrupted")
def _failed_write_recorded_as_interrupted() -> None:
    # R2.12: the host reserves the approval row before it writes the artifact and, when the
    # write or flush fails, keeps the row as a record of the attempt (status interrupted,
    # statusCode ARTIFACT_WRITE_FAILED) instead of creating no approval at all: it shows in
    # approval/list and plan_approvals, naming a file that does not exist.
    submit = Approvals.submit

    async def recording_submit(
        self: Approvals, session: Any, turn_id: str, args: dict[str, Any]
    ) -> ApprovalRow:
        try:
            return await submit(self, session, turn_id, args)
        except HostError as error:
            if error.code != "ARTIFACT_WRITE_FAILED":
                raise
            host = self.host
            content = str(args["markdown"]).encode("utf-8", "surrogatepass")
            now = host.clock.now_ms()
            row = ApprovalRow(
                id=host.new_id("apr"),
                session_id=session.id,
                turn_id=turn_id,
                title=str(args["title"]),
                question=str(args["question"]),
                artifact_path=f".pi/plan/plan-{now}-{os.urandom(4).hex()}.md",
                artifact_sha256=hashlib.sha256(content).hexdigest(),
                artifact_bytes=len(content),
                created_at=now,
                expires_at=approvals.deadline_for(now),
                status="interrupted",
                status_code="ARTIFACT_WRITE_FAILED",
                decided_at=now,
                permission_mode=None,
                execution_id=None,
                execution_state=None,
                execution_turn_id=None,
            )
            await host.storage.insert_approval(row)
            host.notify("approval/updated", {"approval": approval_wire(row)})
            raise

    patch(Approvals, "submit", recording_submit)


@variant("plan-retry-refused-after-write-failure")
def _plan_retry_refused_after_write_failure() -> None:
    # R2.12 / P9 / R1.7: the host marks the turn "has submitted" just before it writes the
    # artifact (to keep a turn to one plan), and does not unmark it when the write or flush
    # fails: the model's retry in the same turn is refused SUBMIT_PLAN_OUTSIDE_PLAN_TURN,
    # although the failed call created nothing and the turn goes on.
    submit = Approvals.submit
    submitted: set[str] = set()

    async def guarded_submit(
        self: Approvals, session: Any, turn_id: str, args: dict[str, Any]
    ) -> ApprovalRow:
        if turn_id in submitted:
            raise HostError(
                "SUBMIT_PLAN_OUTSIDE_PLAN_TURN", "this turn has already submitted its plan"
            )
        try:
            return await submit(self, session, turn_id, args)
        except HostError as error:
            if error.code in ("ARTIFACT_WRITE_FAILED", "PLAN_PATH_UNSAFE"):
                submitted.add(turn_id)
            raise

    patch(Approvals, "submit", guarded_submit)


@variant("hold-consumed-by-prompt-turn")
def _hold_consumed_by_prompt_turn() -> None:
    # holdExecution ("the next approved execution stays queued"): the turn starter checks
    # `faults.take("holdExecution") and kind == "execution"` in that order, so any turn
    # started while the hold is armed (a prompt in another session, a task run) disarms it
    # and the approved execution armed for runs after all.
    start = TurnRunner.start

    async def starting(self: TurnRunner, session: Any, kind: str, *args: Any, **kw: Any) -> str:
        if kind != "execution":
            self.host.faults.take("holdExecution")
        return await start(self, session, kind, *args, **kw)

    patch(TurnRunner, "start", starting)


@variant("hold-taken-by-failed-approve")
def _hold_taken_by_failed_approve() -> None:
    # holdExecution / R4.6: the hold is taken when approval/approve starts, not when an
    # execution is actually queued, so an approve that fails (the approvalCommit fault,
    # ARTIFACT_MODIFIED, EXECUTION_ACTIVE) uses it up: the retried approve runs its execution.
    approve = Approvals.approve

    async def taking_approve(self: Approvals, session_id: str, approval_id: str, mode: Any) -> Any:
        faults = self.host.faults
        held = faults.take("holdExecution")
        if held:
            faults.armed.add("holdExecution")
        try:
            return await approve(self, session_id, approval_id, mode)
        except BaseException:
            if held:
                faults.armed.discard("holdExecution")
            raise

    patch(Approvals, "approve", taking_approve)


@variant("failed-approve-marks-decided")
def _failed_approve_marks_decided() -> None:
    # R4.6 / C6: an in-memory "already decided" guard (against a double approve) is set
    # just before the approve transaction and not cleared when it fails: after the
    # approvalCommit fault the approval reads pending, yet approving it again is refused
    # with APPROVAL_NOT_PENDING.
    approve = Approvals.approve
    decided: set[str] = set()

    async def guarded_approve(self: Approvals, session_id: str, approval_id: str, mode: Any) -> Any:
        if approval_id in decided:
            row = await self.require(session_id, approval_id)
            now = self.host.clock.now_ms()
            if row.status == "pending" and now < row.expires_at:
                raise HostError(
                    "APPROVAL_NOT_PENDING",
                    "the approval has already been decided",
                    {"status": "approved"},
                )
        try:
            result = await approve(self, session_id, approval_id, mode)
        except HostError as error:
            if error.code == "INTERNAL_ERROR":
                decided.add(approval_id)
            raise
        decided.add(approval_id)
        return result

    patch(Approvals, "approve", guarded_approve)


@variant("failed-approve-keeps-decided-at")
def _failed_approve_keeps_decided_at() -> None:
    # R4.6 / R4.4 / R4.3: the decision time is stamped on the row in its own statement
    # before the approve transaction, so after the approvalCommit fault the approval is
    # pending (rolled back) but carries a decidedAt, over the wire and in plan_approvals.
    approve = Approvals.approve

    async def stamping_approve(
        self: Approvals, session_id: str, approval_id: str, mode: Any
    ) -> Any:
        try:
            return await approve(self, session_id, approval_id, mode)
        except HostError as error:
            if error.code != "INTERNAL_ERROR":
                raise
            row = await self.host.storage.get_approval(approval_id)
            if row is not None and row.status == "pending":
                await self.host.storage.update_approval(
                    replace(row, decided_at=self.host.clock.now_ms())
                )
            raise

    patch(Approvals, "approve", stamping_approve)


@variant("commit-fault-skips-rollback")
def _commit_fault_skips_rollback() -> None:
    # R4.6 (host goes on serving): the transaction helper rolls back only on database
    # errors; the host's own HostError raised inside it (the approvalCommit fault) leaves
    # the transaction open: the host reads its own uncommitted "approved" row, and every
    # later write fails ("cannot start a transaction within a transaction").
    @asynccontextmanager
    async def transaction(self: Storage) -> Any:
        async with self._writing:
            await self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except HostError:
                raise
            except BaseException:
                await self._conn.execute("ROLLBACK")
                raise
            await self._conn.execute("COMMIT")

    patch(Storage, "transaction", transaction)


@variant("held-execution-starts-when-clock-moves")
def _held_execution_starts_when_clock_moves() -> None:
    # holdExecution (R4.10, R4.14, C8: "stays queued; its turn is not started"): the hold
    # is implemented as a postponement on the host clock, one millisecond ahead, so the
    # held execution starts its turn as soon as the harness sets or advances the clock.
    approve = Approvals.approve

    async def postponing_approve(
        self: Approvals, session_id: str, approval_id: str, mode: Any
    ) -> Any:
        host = self.host
        hold_armed = "holdExecution" in host.faults.armed
        result = await approve(self, session_id, approval_id, mode)
        if not hold_armed or "holdExecution" in host.faults.armed:
            return result

        async def release() -> None:
            row = await host.storage.get_approval(approval_id)
            if row is None or row.execution_state != "queued":
                return
            if host.activity_of(row.session_id).active_execution_id != row.execution_id:
                return
            try:
                session = await host.require_session(row.session_id)
                content = await self.verified_content(session, row)
                prompt = approvals._execution_prompt(row, content)
                await host.turns.start(session, "execution", prompt, row)
            except Exception:
                log.exception("the postponed execution %s did not start", row.execution_id)

        host.clock.call_at(host.clock.now_ms() + 1, release)
        return result

    patch(Approvals, "approve", postponing_approve)


# where each store's armed faults are saved, kept beside the store rather than on it
_FAULTS_FILE: weakref.WeakKeyDictionary[Storage, Path] = weakref.WeakKeyDictionary()


@variant("fired-fault-rearmed-on-restart")
def _fired_fault_rearmed_on_restart() -> None:
    # Fault points (fires once, then disarmed): armed faults are saved to a file in the data
    # directory so that a restarted host keeps them, but the file is written only when a
    # fault is armed: a fault that already fired is armed again by the next start.
    opened = Storage.open  # bound to Storage, which has no subclasses
    init = Host.__init__
    arm = Host.fault_arm

    async def open_storage(cls: type[Storage], data_dir: Path) -> Storage:
        storage = await opened(data_dir)
        _FAULTS_FILE[storage] = Path(data_dir) / "armed-faults.json"
        return storage

    def __init__(self: Host, storage: Storage, *args: Any, **kw: Any) -> None:
        init(self, storage, *args, **kw)
        saved = _FAULTS_FILE.get(storage)
        if self.options.conformance and saved is not None and saved.exists():
            self.faults.armed |= set(json.loads(saved.read_text(encoding="utf-8")))

    async def fault_arm(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await arm(self, params)
        saved = _FAULTS_FILE.get(self.storage)
        if saved is not None:
            saved.write_text(json.dumps(sorted(self.faults.armed)), encoding="utf-8")
        return result

    patch(Storage, "open", classmethod(open_storage))
    patch(Host, "__init__", __init__)
    patch(Host, "fault_arm", fault_arm)


CASES = [
    BrokenCase(
        "one-fault-armed-at-a-time",
        "approval",
        "failed_approval_leaves_the_next_execution_held_back",
        "R4.6",
        "the approve with the commit failure armed was answered ok",
    ),
    BrokenCase(
        "hold-taken-by-failed-approve",
        "approval",
        "failed_approval_leaves_the_next_execution_held_back",
        "C8",
        "a held execution stays queued until the host stops",
    ),
    BrokenCase(
        "fired-fault-rearmed-on-restart",
        "artifact_integrity",
        "write_failure_that_happened_before_a_restart",
        "R2.12",
        "one that fired before a restart does not fire again after it",
    ),
    BrokenCase(
        "flush-failure-only-logged",
        "artifact_integrity",
        "a_failed_flush_creates_no_approval",
        "R2.10",
        "the SubmitPlan call ran, expected ARTIFACT_WRITE_FAILED",
    ),
    BrokenCase(
        "flush-failure-is-tool-failed",
        "artifact_integrity",
        "a_failed_flush_creates_no_approval",
        "R2.10",
        "the SubmitPlan call was stopped with TOOL_FAILED",
    ),
    BrokenCase(
        "failed-write-recorded-as-interrupted",
        "artifact_integrity",
        "a_project_folder_that_cannot_be_written_to",
        "R2.12",
        "the host lists approvals",
    ),
    BrokenCase(
        "flush-fault-stays-armed",
        "artifact_integrity",
        "submits_the_plan_again_after",
        "R2.12",
        "once its fault has fired, a second SubmitPlan",
    ),
    BrokenCase(
        "plan-retry-refused-after-write-failure",
        "artifact_integrity",
        "submits_the_plan_again_after",
        "R2.12",
        "SUBMIT_PLAN_OUTSIDE_PLAN_TURN",
    ),
    BrokenCase(
        "hold-consumed-by-prompt-turn",
        "execution",
        "an_execution_held_back_stays_queued",
        "C8",
        "a held execution stays queued until the host stops",
    ),
    BrokenCase(
        "held-execution-starts-when-clock-moves",
        "execution",
        "an_execution_held_back_stays_queued",
        "C8",
        "a held execution stays queued until the host stops",
    ),
    BrokenCase(
        "failed-approve-marks-decided",
        "approval",
        "a_failure_while_approving_changes_nothing",
        "R4.6",
        "expected success, but the host refused",
    ),
    BrokenCase(
        "failed-approve-keeps-decided-at",
        "approval",
        "a_failure_while_approving_changes_nothing",
        "R4.6",
        "the approval changed",
    ),
    BrokenCase(
        "commit-fault-skips-rollback",
        "approval",
        "a_failure_while_approving_changes_nothing",
        "R4.3",
        "the stored approval disagrees with the protocol",
    ),
]
