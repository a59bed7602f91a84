"""Property: through protocol v9, any submitted markdown is stored byte for byte (§2).

The reference host runs in-process behind the harness's own client, model provider and
storage inspector, exactly as the conformance suite sees it. One host per test; each
example plans in a fresh Plan session and rejects its approval afterwards.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from conformance.client import HostClient
from conformance.drivers import InProcessDriver
from conformance.mock_provider import MockProvider, ScriptedToolCall, TextReply, ToolCallsReply
from conformance.storage_inspector import StorageInspector

WAIT_S = 30.0
ONE_MIB = "step 12 \U0001f680  \r\n" * (1024 * 1024 // 16)  # 16 UTF-8 bytes a line
PIECES = (
    "\r\n",
    "\r",
    "\n",
    "\ufeff",
    "\x00",
    "   ",
    "trailing   \n",
    " \t \r\n",
    "\U0001f680",
    "\U0001d538",
    "\U00013000",
    "\U0010fffd",
    "",
)
MARKDOWN = st.one_of(
    st.text(),
    st.lists(
        st.one_of(
            st.sampled_from(PIECES),
            st.text(max_size=16),
            st.characters(min_codepoint=0x10000),
        ),
        max_size=24,
    ).map("".join),
)


@dataclass
class Planning:
    """One running reference host, its client, the model provider and the project."""

    client: HostClient
    provider: MockProvider
    workspace: Path
    storage: StorageInspector

    def submit(self, markdown: str) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
        """Plan in a fresh Plan session whose model submits ``markdown``.

        Return the SubmitPlan tool result, the approvals announced during the turn, and
        the session id.
        """
        session = self.client.request(
            "session/create",
            {
                "workspaceRoot": str(self.workspace),
                "mode": "plan",
                "provider": {"baseUrl": self.provider.base_url, "model": "mock-model"},
            },
        )["session"]
        call = ScriptedToolCall(
            "SubmitPlan", {"title": "Property", "markdown": markdown, "question": "Go ahead?"}
        )
        self.provider.enqueue(ToolCallsReply((call,), chunk_size=1 << 16))
        self.provider.set_fallback(TextReply("Done."))
        mark = self.client.mark()
        turn_id = self.client.request(
            "session/prompt", {"sessionId": session["sessionId"], "text": "Submit the plan."}
        )["turnId"]
        self.client.wait_for("turn/ended", lambda p: p["turnId"] == turn_id, since=mark)
        results = [
            n["params"]
            for n in self.client.notifications("turn/toolResult", mark)
            if n["params"]["tool"] == "SubmitPlan"
        ]
        assert len(results) == 1, results
        announced = [
            n["params"]["approval"] for n in self.client.notifications("approval/updated", mark)
        ]
        return results[0], announced, str(session["sessionId"])

    def reject(self, session_id: str, approval_id: str) -> None:
        """Reject the pending approval so nothing carries over to the next example."""
        self.client.request("approval/reject", {"sessionId": session_id, "approvalId": approval_id})

    def plan_files(self) -> list[str]:
        folder = self.workspace / ".pi" / "plan"
        return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


@contextmanager
def planning(tmp_path: Path) -> Iterator[Planning]:
    """Start the reference host in-process and open the protocol v9 connection."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    data_dir = tmp_path / "data"
    with MockProvider() as provider:
        host = InProcessDriver.load("reference").start(data_dir)
        client = HostClient(host, WAIT_S)
        try:
            client.initialize()
            yield Planning(client, provider, workspace.resolve(), StorageInspector(data_dir))
            assert not client.violations, [v.describe() for v in client.violations]
        finally:
            host.stop()
            client.close()


def test_any_markdown_is_stored_byte_for_byte(tmp_path: Path) -> None:
    with planning(tmp_path) as plan:

        @settings(max_examples=40, deadline=None)
        @given(markdown=MARKDOWN)
        @example(markdown="")
        @example(markdown=ONE_MIB)
        def stored_exactly(markdown: str) -> None:
            expected = markdown.encode("utf-8")
            result, announced, session_id = plan.submit(markdown)
            assert result["status"] == "ok", result
            assert len(announced) == 1, announced
            approval = announced[0]
            assert approval["status"] == "pending", approval
            try:
                artifact = approval["artifact"]
                content = (plan.workspace / artifact["path"]).read_bytes()
                assert content == expected
                digest = hashlib.sha256(content).hexdigest()
                assert (artifact["sha256"], artifact["byteSize"]) == (digest, len(content))
                rows = plan.storage.rows("plan_approvals", "id = ?", (approval["approvalId"],))
                assert len(rows) == 1, rows
                row = rows[0]
                assert row["artifact_path"] == artifact["path"]
                assert (row["artifact_sha256"], row["artifact_bytes"]) == (digest, len(content))
            finally:
                plan.reject(session_id, approval["approvalId"])

        stored_exactly()


def test_a_lone_surrogate_is_refused_and_creates_nothing(tmp_path: Path) -> None:
    with planning(tmp_path) as plan:
        result, announced, _session_id = plan.submit("a\ud800b")
        assert result["status"] in ("error", "denied"), result
        assert (result["error"] or {}).get("code") == "INVALID_TOOL_INPUT", result
        assert announced == []
        assert plan.storage.rows("plan_approvals") == []
        assert plan.plan_files() == []
