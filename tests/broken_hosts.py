"""Deliberately broken variants of the reference host, to prove the suite's checks can fail.

Run as ``python tests/broken_hosts.py VARIANT --data-dir DIR --conformance``. Each variant
patches one behaviour of the reference host so that it breaks one clause, then serves
protocol v9 exactly like ``python -m reference_host``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from reference_host import approvals, artifacts, turns
from reference_host.approvals import Approvals
from reference_host.errors import HostError
from reference_host.host import Host
from reference_host.server import serve
from reference_host.storage import ApprovalRow, Storage

Patch = Callable[[], None]
VARIANTS: dict[str, Patch] = {}


def variant(name: str) -> Callable[[Patch], Patch]:
    """Register a patch under ``name``."""

    def register(patch: Patch) -> Patch:
        VARIANTS[name] = patch
        return patch

    return register


@variant("accepts-protocol-8")
def _accepts_protocol_8() -> None:
    original = Host.initialize

    async def initialize(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        return await original(self, {**params, "protocolVersion": 9})

    Host.initialize = initialize  # type: ignore[method-assign]


@variant("schema-invalid-session")
def _schema_invalid_session() -> None:
    original = Host.session_wire

    def session_wire(self: Host, row: Any) -> dict[str, Any]:
        wire = original(self, row)
        wire["createdAt"] = "2026-01-01T00:00:00Z"  # the contract says epoch milliseconds
        return wire

    Host.session_wire = session_wire  # type: ignore[method-assign]


# -- §2: the artifact's bytes -------------------------------------------------------------


@variant("normalises-line-endings")
def _normalises_line_endings() -> None:
    # Hash and size are computed by write_artifact on these bytes, so they stay consistent
    # with the file: only a comparison with the submitted bytes can notice.
    original = approvals.encode_markdown  # type: ignore[attr-defined]

    def encode_markdown(markdown: str) -> bytes:
        return original(markdown.replace("\r\n", "\n").replace("\r", "\n"))

    approvals.encode_markdown = encode_markdown  # type: ignore[attr-defined]


@variant("prepends-title")
def _prepends_title() -> None:
    original = Approvals.submit

    async def submit(
        self: Approvals, session: Any, turn_id: str, args: dict[str, Any]
    ) -> ApprovalRow:
        wrapped = f"# {args['title']}\n\n{args['markdown']}"
        return await original(self, session, turn_id, {**args, "markdown": wrapped})

    Approvals.submit = submit  # type: ignore[method-assign]


# -- §2: where the artifact goes ----------------------------------------------------------


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


# -- §1: Plan gating ----------------------------------------------------------------------


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

    turns.TurnRunner._run_batch = run_batch  # type: ignore[method-assign]


# -- §2: what the approval records --------------------------------------------------------


def _store_altered(alter: Callable[[ApprovalRow], ApprovalRow]) -> None:
    original = Storage.insert_approval

    async def insert_approval(self: Storage, row: ApprovalRow) -> None:
        await original(self, alter(row))

    Storage.insert_approval = insert_approval  # type: ignore[method-assign]


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
    original_write = approvals.write_artifact  # type: ignore[attr-defined]
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

    approvals.write_artifact = write_artifact  # type: ignore[attr-defined]
    Storage.insert_approval = insert_approval  # type: ignore[method-assign]


def main(argv: list[str]) -> int:
    """Apply the named variant's patch and serve on stdio."""
    if not argv or argv[0] not in VARIANTS:
        print(
            f"usage: broken_hosts.py {{{'|'.join(sorted(VARIANTS))}}} --data-dir DIR",
            file=sys.stderr,
        )
        return 2
    VARIANTS[argv[0]]()
    return serve(argv[1:], sys.stdin.buffer, sys.stdout.buffer, sys.stderr)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
