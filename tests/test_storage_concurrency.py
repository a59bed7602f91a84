"""Two sessions writing at the same moment share the host's one database connection."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from reference_host.storage import SessionRow, Storage

T0 = 1_700_000_000_000


def _session(session_id: str) -> SessionRow:
    return SessionRow(
        id=session_id,
        workspace_root=None,
        mode="agent",
        permission_mode="ask",
        provider_base_url=None,
        model=None,
        shell_id=None,
        created_at=T0,
        updated_at=T0,
    )


def test_concurrent_writes_of_two_sessions_all_commit(tmp_path: Path) -> None:
    async def run() -> list[tuple[int, str | None, str, object, int]]:
        storage = await Storage.open(tmp_path)
        try:
            for session_id in ("s-1", "s-2"):
                await storage.insert_session(_session(session_id))
            writes = [
                storage.append_transcript(sid, None, "user", {"content": f"{sid} {n}"}, T0 + n)
                for n in range(20)
                for sid in ("s-1", "s-2")
            ]
            await asyncio.gather(*writes)
            return [*await storage.transcript("s-1"), *await storage.transcript("s-2")]
        finally:
            await storage.close()

    entries = asyncio.run(run())
    assert len(entries) == 40


def test_a_write_cancelled_while_its_transaction_begins_leaves_none_open(tmp_path: Path) -> None:
    """A turn cancelled while its write waits for BEGIN (the statement still runs on the
    connection's thread) must not leave the connection inside a transaction: every later
    write would fail with "cannot start a transaction within a transaction"."""

    async def run() -> list[str]:
        storage = await Storage.open(tmp_path)
        try:
            cancelled = asyncio.create_task(storage.insert_session(_session("s-cut")))
            await asyncio.sleep(0)  # the task now waits for BEGIN IMMEDIATE to return
            cancelled.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await cancelled
            await storage.insert_session(_session("s-next"))
            return [row.id for row in await storage.list_sessions()]
        finally:
            await storage.close()

    assert asyncio.run(run()) == ["s-next"]
