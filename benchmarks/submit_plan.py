"""Benchmark: the SubmitPlan critical path of the reference host against the raw floor.

The measured path is what the host does between accepting a SubmitPlan call and
announcing the approval, minus the announcement: the artifact written, flushed (file and
folders) and hashed on a worker thread, then the approval row committed through the
host's aiosqlite storage. It calls the host's own ``write_artifact`` and
``Storage.insert_approval``, the two steps of ``Approvals.submit`` that touch the disk.

The floor is the least any host must do: create the file, write it, fsync the file and
its folder, then commit one row in a SQLite database in WAL mode with
``synchronous = FULL`` (Python's sqlite3, on the calling thread).

    python -m benchmarks.submit_plan [--quick] [--rounds N] [--dir PATH]
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._measure import alternate_async, parser, writable_dir
from reference_host.artifacts import Artifact, write_artifact
from reference_host.storage import ApprovalRow, SessionRow, Storage

GOAL = 1.5
SIZES = {"1 KiB": 1024, "1 MiB": 1024 * 1024}


def _content(size: int) -> bytes:
    line = b"- step: change one thing, then check it.\n"
    return (line * (size // len(line) + 1))[:size]


def _no_fault(_point: str) -> bool:
    return False


class Floor:
    """File create + write + fsync (file and folder), then one WAL commit, synchronously."""

    def __init__(self, root: Path) -> None:
        self.folder = root / "floor-plans"
        self.folder.mkdir()
        self.db = sqlite3.connect(root / "floor.db", isolation_level=None)
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = FULL")
        self.db.execute("CREATE TABLE plans (id INTEGER PRIMARY KEY, path TEXT, size INTEGER)")
        self.count = 0
        self.stages: dict[str, list[float]] = {"file": [], "commit": []}

    def run(self, content: bytes) -> float:
        self.count += 1
        path = self.folder / f"plan-{self.count}.md"
        started = time.perf_counter()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
        try:
            view = memoryview(content)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        folder_fd = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(folder_fd)
        finally:
            os.close(folder_fd)
        self.stages["file"].append(time.perf_counter() - started)
        committing = time.perf_counter()
        self.db.execute("BEGIN IMMEDIATE")
        self.db.execute("INSERT INTO plans (path, size) VALUES (?, ?)", (str(path), len(content)))
        self.db.execute("COMMIT")
        self.stages["commit"].append(time.perf_counter() - committing)
        return time.perf_counter() - started

    def close(self) -> None:
        self.db.close()


class HostPath:
    """The reference host's artifact writer and approval insert, as ``submit`` runs them."""

    def __init__(self, storage: Storage, workspace: Path) -> None:
        self.storage = storage
        self.workspace = str(workspace)
        self.count = 0
        self.stages: dict[str, list[float]] = {"artifact": [], "thread hand-off": [], "row": []}

    def _write(self, content: bytes) -> tuple[Artifact, float]:
        started = time.perf_counter()
        artifact = write_artifact(self.workspace, content, _no_fault)
        return artifact, time.perf_counter() - started

    async def run(self, content: bytes) -> float:
        self.count += 1
        session_id = f"session-{self.count}"
        # One session per submission: a session holds at most one pending approval.
        await self.storage.insert_session(
            SessionRow(session_id, self.workspace, "plan", "ask", None, "m", None, 1, 1)
        )
        started = time.perf_counter()
        artifact, writing = await asyncio.to_thread(self._write, content)
        self.stages["artifact"].append(writing)
        self.stages["thread hand-off"].append(time.perf_counter() - started - writing)
        inserting = time.perf_counter()
        await self.storage.insert_approval(
            ApprovalRow(
                id=f"apr-{self.count}",
                session_id=session_id,
                turn_id=f"turn-{self.count}",
                title="Benchmark plan",
                question="Go ahead?",
                artifact_path=artifact.relative_path,
                artifact_sha256=artifact.sha256,
                artifact_bytes=artifact.byte_size,
                created_at=1,
                expires_at=1_800_001,
                status="pending",
                status_code=None,
                decided_at=None,
                permission_mode=None,
                execution_id=None,
                execution_state=None,
                execution_turn_id=None,
            )
        )
        self.stages["row"].append(time.perf_counter() - inserting)
        return time.perf_counter() - started


def _stages(host: dict[str, list[float]], floor: dict[str, list[float]], content: bytes) -> str:
    """Where the time goes: the median of each stage, and the hash the floor does not do."""
    hashing = []
    for _ in range(len(host["artifact"])):
        started = time.perf_counter()
        hashlib.sha256(content).hexdigest()
        hashing.append(time.perf_counter() - started)
    host_parts = [f"{name} {_ms(values)}" for name, values in host.items()]
    floor_parts = [f"{name} {_ms(values)}" for name, values in floor.items()]
    return (
        f"  stages: host {', '.join(host_parts)} (SHA-256 {_ms(hashing)} of the artifact); "
        f"floor {', '.join(floor_parts)}"
    )


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.2f} ms"


async def _main(root: Path, rounds: int) -> list[str]:
    workspace = root / "workspace"
    workspace.mkdir()
    storage = await Storage.open(root / "data")
    floor = Floor(root)
    host = HostPath(storage, workspace)
    lines = []
    try:
        for label, size in SIZES.items():
            content = _content(size)

            async def measured(c: bytes = content) -> float:
                return await host.run(c)

            async def reference(c: bytes = content) -> float:
                return floor.run(c)

            await measured()  # warm-up: first-use costs stay out of the figures
            await reference()
            comparison = await alternate_async(f"SubmitPlan {label}", measured, reference, rounds)
            lines.append(comparison.line("host", "floor", GOAL))
            lines.append(_stages(host.stages, floor.stages, content))
            for stages in (host.stages, floor.stages):
                for samples in stages.values():
                    samples.clear()
    finally:
        floor.close()
        await storage.close()
    return lines


def main(argv: list[str]) -> int:
    """Print the ratio of the host's SubmitPlan critical path to the floor, per size."""
    cli = parser(__doc__.splitlines()[0] if __doc__ else None)
    cli.add_argument("--dir", type=writable_dir, help="where to write (default: the temp folder)")
    args = cli.parse_args(argv)
    rounds = args.rounds or (10 if args.quick else 40)
    with tempfile.TemporaryDirectory(dir=args.dir) as scratch:
        for line in asyncio.run(_main(Path(scratch), rounds)):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
