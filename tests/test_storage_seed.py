"""Every database the suite seeds is one a real host could have written."""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from conformance.storage_seed import (
    LEGACY_APPROVALS,
    foreign_key_problems,
    seed_other_version,
    seed_v8,
    seed_v10,
    transcript_ids,
)

SEEDS: dict[str, Callable[[Path], None]] = {
    "v8, one session": lambda p: seed_v8(p, 1, 40),
    "v8, two sessions": lambda p: seed_v8(p, 2, 40),
    "v8, three sessions": lambda p: seed_v8(p, 3, 40),
    "v8, no session": lambda p: seed_v8(p, 0, 0),
    **{
        f"v8, a {status} approval": (lambda p, a=approval: seed_v8(p, 2, 6, (a,)))
        for status, approval in LEGACY_APPROVALS.items()
    },
    "v7": lambda p: seed_other_version(p, 7),
    "v11": lambda p: seed_other_version(p, 11),
    "v10": seed_v10,
}


@pytest.mark.parametrize("seed", SEEDS.values(), ids=SEEDS.keys())
def test_every_seed_keeps_its_foreign_keys(seed: Callable[[Path], None], tmp_path: Path) -> None:
    path = tmp_path / "host.db"
    seed(path)
    assert foreign_key_problems(path) == []
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_transcript_ids_have_gaps_and_interleave_sessions() -> None:
    rows = transcript_ids(3, 10)
    ids = [row_id for row_id, _session, _index in rows]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert ids[0] != 1 and any(b - a > 1 for a, b in itertools.pairwise(ids))
    assert [session for _id, session, _index in rows[:3]] == [0, 1, 2]


def test_legacy_titles_follow_the_published_mapping() -> None:
    titles = {status: a.legacy_title for status, a in LEGACY_APPROVALS.items()}
    assert titles == {
        "pending": "Cache the index",
        "approved": "42",
        "rejected": "",
        "changes_requested": "",
        "rejected with no decision time": 'Say "café" twice',
    }
    # that title is stored with JSON escapes, as Python's json.dumps writes it by default
    assert '\\"caf\\u00e9\\"' in LEGACY_APPROVALS["rejected with no decision time"].proposal_json
