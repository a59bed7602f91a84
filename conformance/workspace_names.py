"""The name of each scenario's workspace folder, varied across the suite.

The contract lets a session's workspace root be any absolute path of an existing folder,
so a host must not depend on a plain name: spaces, non-ASCII letters, shell and URI
metacharacters all occur in real project paths, and a name may be in either Unicode
normal form (macOS writes decomposed names). Each scenario gets one of the names below,
chosen from a hash of its id: the same scenario always runs with the same name (a failure
reproduces), and the suite as a whole runs every host on all of them.
"""

from __future__ import annotations

import hashlib

WORKSPACE_NAMES = (
    "workspace",
    "my project",
    "projet été ✓",
    "it's $HOME & `co`",
    "100%25 #1 ?q=a;b",
    "cafe\u0301 notes",  # decomposed: an e and a combining accent, which NFC would merge
)


def workspace_name_for(scenario_id: str) -> str:
    """The workspace folder name of the scenario ``scenario_id``."""
    digest = hashlib.sha256(scenario_id.encode("utf-8")).digest()
    return WORKSPACE_NAMES[int.from_bytes(digest[:4], "big") % len(WORKSPACE_NAMES)]
