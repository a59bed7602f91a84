"""Broken hosts: planning."""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from hosts.registry import BrokenCase, patch, variant
from reference_host import approvals, artifacts, turns
from reference_host.approvals import Approvals
from reference_host.errors import HostError
from reference_host.storage import ApprovalRow, Storage


@variant("normalises-line-endings")
def _normalises_line_endings() -> None:
    # Hash and size are computed by write_artifact on these bytes, so they stay consistent
    # with the file: only a comparison with the submitted bytes can notice.
    original = approvals.encode_markdown

    def encode_markdown(markdown: str) -> bytes:
        return original(markdown.replace("\r\n", "\n").replace("\r", "\n"))

    patch(approvals, "encode_markdown", encode_markdown)


@variant("prepends-title")
def _prepends_title() -> None:
    original = Approvals.submit

    async def submit(
        self: Approvals, session: Any, turn_id: str, args: dict[str, Any]
    ) -> ApprovalRow:
        wrapped = f"# {args['title']}\n\n{args['markdown']}"
        return await original(self, session, turn_id, {**args, "markdown": wrapped})

    patch(Approvals, "submit", submit)


@variant("reuses-file-name")
def _reuses_file_name() -> None:
    def create_truncating(plan_fd: int) -> tuple[str, int]:
        name = "plan.md"
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        # The earlier artifact is read-only: make it writable so that it is overwritten.
        with contextlib.suppress(FileNotFoundError):
            os.chmod(name, 0o644, dir_fd=plan_fd)
        return name, os.open(name, flags, artifacts.READ_ONLY, dir_fd=plan_fd)

    assert hasattr(artifacts, "_create_exclusive"), "nothing to patch"
    artifacts._create_exclusive = create_truncating


@variant("follows-symlinked-pi")
def _follows_symlinked_pi() -> None:
    assert hasattr(artifacts, "_DIR_FLAGS"), "nothing to patch"
    artifacts._DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC  # no O_NOFOLLOW


@variant("offers-write-in-plan")
def _offers_write_in_plan() -> None:
    original = turns.offered_tools

    def offered_tools(mode: str) -> list[Any]:
        offered = original(mode)
        if mode == "plan":
            offered.append(turns._SPECS["Write"])
        return offered

    turns.offered_tools = offered_tools


@variant("accepts-submit-plan-beside-another-call")
def _accepts_submit_plan_beside_another_call() -> None:
    # Running each call as a batch of its own never meets the SubmitPlan-alone check.
    original = turns.TurnRunner._run_batch

    async def run_batch(
        self: turns.TurnRunner, session: Any, turn_id: str, calls: tuple[Any, ...], unattended: bool
    ) -> list[turns.CallOutcome]:
        outcomes: list[turns.CallOutcome] = []
        for call in calls:
            session = await self.host.require_session(session.id)
            outcomes += await original(self, session, turn_id, (call,), unattended)
        return outcomes

    patch(turns.TurnRunner, "_run_batch", run_batch)


def _store_altered(alter: Callable[[ApprovalRow], ApprovalRow]) -> None:
    original = Storage.insert_approval

    async def insert_approval(self: Storage, row: ApprovalRow) -> None:
        await original(self, alter(row))

    patch(Storage, "insert_approval", insert_approval)


WRONG_SHA256 = hashlib.sha256(b"not the artifact").hexdigest()


@variant("records-wrong-hash")
def _records_wrong_hash() -> None:
    _store_altered(lambda row: replace(row, artifact_sha256=WRONG_SHA256))


@variant("records-wrong-size")
def _records_wrong_size() -> None:
    _store_altered(lambda row: replace(row, artifact_bytes=(row.artifact_bytes or 0) + 1))


@variant("commits-row-before-flush")
def _commits_row_before_flush() -> None:
    # The flush (and its injected failure) happens only after the row is committed, so a
    # failed flush is reported but leaves the committed approval row behind.
    unflushed: dict[str, Path] = {}
    original_write = approvals.write_artifact
    original_insert = Storage.insert_approval

    def write_artifact(root: str, content: bytes, fault: artifacts.FaultCheck) -> Any:
        flush_fails = fault("artifactFlush")
        artifact = original_write(root, content, fault)
        if flush_fails:
            unflushed[artifact.relative_path] = Path(root, artifact.relative_path)
        return artifact

    async def insert_approval(self: Storage, row: ApprovalRow) -> None:
        await original_insert(self, row)
        path = unflushed.pop(row.artifact_path or "", None)
        if path is not None:
            path.unlink()
            raise HostError("ARTIFACT_WRITE_FAILED", "injected artifact flush failure")

    patch(approvals, "write_artifact", write_artifact)
    patch(Storage, "insert_approval", insert_approval)


CASES = [
    BrokenCase(
        "offers-write-in-plan",
        "plan_tools",
        "offered_exactly_the_planning_tools",
        "R1.4",
        "the host offered",
    ),
    # The [Read] example only: in the [Bash] example the unchecked Bash call waits for a
    # permission answer, so the scenario fails by a timeout rather than by its check.
    BrokenCase(
        "accepts-submit-plan-beside-another-call",
        "submit_plan",
        "beside_another_call and Read",
        "R1.6",
        "a call of the batch ran",
    ),
    BrokenCase(
        "normalises-line-endings",
        "artifact_integrity",
        "byte_for_byte and CRLF",
        "R2.7",
        "artifact bytes differ from the submitted markdown",
    ),
    BrokenCase(
        "prepends-title",
        "artifact_integrity",
        "title_and_question_stay_out",
        "R2.7",
        "the host changed the markdown",
    ),
    BrokenCase(
        "reuses-file-name",
        "artifact_integrity",
        "two_identical_submissions",
        "R2.4",
        "submissions share artifact paths",
    ),
    BrokenCase(
        "follows-symlinked-pi", "artifact_integrity", "symlink", "R2.12", "the SubmitPlan call ran"
    ),
    BrokenCase(
        "records-wrong-hash",
        "artifact_integrity",
        "recorded_hash_and_size",
        "R2.11",
        "file hashes to",
    ),
    BrokenCase(
        "records-wrong-size", "artifact_integrity", "recorded_hash_and_size", "R2.11", "file has"
    ),
    BrokenCase(
        "commits-row-before-flush",
        "artifact_integrity",
        "failed_flush",
        "R2.10",
        "the host lists approvals",
    ),
]
