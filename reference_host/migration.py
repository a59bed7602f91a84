"""The storage v8 -> v10 migration (§7): one transaction, ``user_version = 10`` last.

The transcript table is left exactly as it is (no rebuild, no copy), so the migration's
cost does not grow with the transcript. Sessions gain a column in place. plan_approvals
changes shape, so it is rebuilt: its v8 rows are kept as legacy rows, pending ones marked
interrupted (their in-memory waiter died with the old host, §4). Every statement comes
from the published v10 DDL, so a migrated file has exactly the schema of a new one.
"""

from __future__ import annotations

import logging
import re

import aiosqlite

from reference_host.errors import HostError

log = logging.getLogger(__name__)

V8 = 8
V10 = 10
_TEMP_TABLE = "plan_approvals_v10"

_COPY_LEGACY_APPROVALS = f"""
INSERT INTO {_TEMP_TABLE} (
  id, session_id, turn_id, title, question, legacy_proposal_json,
  created_at, expires_at, status, decided_at
)
SELECT
  id,
  session_id,
  NULL,
  CASE WHEN json_valid(proposal_json)
       THEN coalesce(CAST(json_extract(proposal_json, '$.title') AS TEXT), '') ELSE '' END,
  '',
  json_object('proposal', proposal_json, 'feedback', feedback),
  created_at,
  created_at + 1800000,
  CASE status WHEN 'pending' THEN 'interrupted'
              WHEN 'changes_requested' THEN 'rejected'
              ELSE status END,
  CASE status WHEN 'pending' THEN NULL ELSE decided_at END
FROM plan_approvals
"""


def migration_statements(v10_statements: list[str]) -> list[str]:
    """The v8 -> v10 steps, in order, derived from the v10 DDL statements."""
    steps = ["ALTER TABLE sessions ADD COLUMN shell_id TEXT"]
    for statement in v10_statements:
        name = _created_object(statement)
        if name is None or statement.upper().startswith("PRAGMA"):
            continue
        if name in {
            "sessions",
            "transcript",
            "transcript_by_session",
            "settings",
            "scheduled_tasks",
        }:
            continue  # already in v8 and unchanged (sessions is altered above)
        if name == "plan_approvals":
            steps += [
                statement.replace('"plan_approvals"', _TEMP_TABLE, 1),
                _COPY_LEGACY_APPROVALS,
                "DROP TABLE plan_approvals",
                f"ALTER TABLE {_TEMP_TABLE} RENAME TO plan_approvals",
            ]
        else:
            steps.append(statement)
    steps.append(f"PRAGMA user_version = {V10}")  # last: a partial migration never reads as v10
    return steps


def _created_object(statement: str) -> str | None:
    match = re.match(
        r'CREATE\s+(?:UNIQUE\s+)?(?:TABLE|INDEX)\s+"?(\w+)"?', statement, flags=re.IGNORECASE
    )
    return match.group(1) if match else None


async def migrate_v8_to_v10(conn: aiosqlite.Connection, v10_statements: list[str]) -> None:
    """Run the migration in one transaction; on any failure roll back and raise."""
    log.info("migrating storage schema v8 to v10")
    await conn.execute("PRAGMA foreign_keys = OFF")
    await conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in migration_statements(v10_statements):
            await conn.execute(statement)
        await conn.execute("COMMIT")
    except BaseException as exc:
        await conn.execute("ROLLBACK")
        if isinstance(exc, aiosqlite.Error):
            raise HostError(
                "MIGRATION_FAILED",
                f"the v8 to v10 migration failed and was rolled back: {exc}",
            ) from exc
        raise
    log.info("storage schema migrated to v10")
