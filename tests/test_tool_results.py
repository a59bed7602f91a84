"""Every tool call gets exactly one tool result, whose status the error catalog fixes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hostkit import InProcessHost

from conformance.mock_provider import MockProvider, ScriptedToolCall, TextReply, ToolCallsReply
from pi_contract import error_catalog
from reference_host.errors import HostError, tool_result_status
from reference_host.tools import files

DENIED = {
    "TOOL_DENIED",
    "UNKNOWN_TOOL",
    "SUBMIT_PLAN_NOT_ALONE",
    "SUBMIT_PLAN_OUTSIDE_PLAN_TURN",
    "PERMISSION_DENIED",
    "PERMISSION_UNAVAILABLE",
    "PATH_OUTSIDE_WORKSPACE",
    "BROWSER_PREVIEW_REFUSED",
}
ERROR = {
    "INVALID_TOOL_INPUT",
    "PLAN_PATH_UNSAFE",
    "ARTIFACT_WRITE_FAILED",
    "WORKSPACE_REQUIRED",
    "WORKSPACE_INVALID",  # a SubmitPlan into a project folder that is gone
    "FILE_NOT_FOUND",
    "EDIT_NO_MATCH",
    "TOOL_FAILED",
    "COMMAND_TIMED_OUT",
    "TURN_CANCELLED",
}
NEW_CODES = (
    "ARTIFACT_MODIFIED",
    "DATA_DIR_IN_USE",
    "STORAGE_UNAVAILABLE",
    "FILE_NOT_FOUND",
    "EDIT_NO_MATCH",
    "TOOL_FAILED",
)


def test_the_catalog_fixes_the_status_of_every_tool_result_code() -> None:
    statuses = {
        code: entry["toolResultStatus"]
        for code, entry in error_catalog().items()
        if "toolResultStatus" in entry
    }
    assert statuses == {code: "denied" for code in DENIED} | {code: "error" for code in ERROR}


def test_new_codes_have_json_rpc_codes_of_their_own() -> None:
    catalog = error_catalog()
    numbers = Counter(int(entry["jsonrpcCode"]) for entry in catalog.values())
    for code in NEW_CODES:
        assert code in catalog
        assert numbers[int(catalog[code]["jsonrpcCode"])] == 1, code


def test_approval_not_pending_no_longer_covers_expiry() -> None:
    meaning = error_catalog()["APPROVAL_NOT_PENDING"]["meaning"]
    assert "expired" not in meaning.split("(")[0]
    assert "PLAN_APPROVAL_TIMEOUT" in meaning


def test_a_code_outside_the_tool_result_table_is_reported_as_tool_failed() -> None:
    assert tool_result_status("PATH_OUTSIDE_WORKSPACE") == "denied"
    assert tool_result_status("FILE_NOT_FOUND") == "error"
    assert tool_result_status("SHELL_NOT_FOUND") is None
    with pytest.raises(ValueError):
        HostError("NOT_A_CODE", "x")


# -- through a running host ------------------------------------------------------------------


@pytest.fixture
def provider() -> Iterator[MockProvider]:
    with MockProvider() as running:
        yield running


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "a.txt").write_text("alpha\n")
    return root


def start(tmp_path: Path, provider: MockProvider, workspace: Path) -> tuple[InProcessHost, str]:
    host = InProcessHost(tmp_path / "data")
    host.initialize()
    session = host.request(
        "session/create",
        {
            "workspaceRoot": str(workspace),
            "permissionMode": "auto",
            "provider": {"baseUrl": provider.base_url, "model": "m"},
        },
    )["session"]
    return host, session["sessionId"]


def one_result_per_call(host: InProcessHost) -> dict[str, dict[str, Any]]:
    calls = [c["toolCallId"] for c in host.notifications("turn/toolCall")]
    results = [r["toolCallId"] for r in host.notifications("turn/toolResult")]
    assert sorted(results) == sorted(calls), (calls, results)
    assert len(set(results)) == len(results)
    return {r["toolCallId"]: r for r in host.notifications("turn/toolResult")}


CASES = [
    (ScriptedToolCall("Read", {"path": "missing.txt"}, "c1"), "error", "FILE_NOT_FOUND"),
    (
        ScriptedToolCall("Edit", {"path": "a.txt", "old_string": "zz", "new_string": "y"}, "c1"),
        "error",
        "EDIT_NO_MATCH",
    ),
    (ScriptedToolCall("Read", {"path": "../outside"}, "c1"), "denied", "PATH_OUTSIDE_WORKSPACE"),
    (ScriptedToolCall("Teleport", {}, "c1"), "denied", "UNKNOWN_TOOL"),
    (
        ScriptedToolCall("BrowserPreview", {"url": "http://example.com/"}, "c1"),
        "denied",
        "BROWSER_PREVIEW_REFUSED",
    ),
]


@pytest.mark.parametrize(("call", "status", "code"), CASES, ids=[c[2] for c in CASES])
def test_tool_results_take_their_status_from_the_catalog(
    tmp_path: Path,
    provider: MockProvider,
    workspace: Path,
    call: ScriptedToolCall,
    status: str,
    code: str,
) -> None:
    provider.enqueue(ToolCallsReply((call,)), TextReply("done"))
    host, session = start(tmp_path, provider, workspace)
    try:
        host.request("session/prompt", {"sessionId": session, "text": "go"})
        host.notified("turn/ended")
        result = one_result_per_call(host)["c1"]
        assert (result["status"], result["error"]["code"]) == (status, code)
    finally:
        host.stop()


def test_a_failure_inside_a_tool_is_tool_failed_and_the_turn_goes_on(
    tmp_path: Path, provider: MockProvider, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_args: Any) -> str:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(files.Read, "_read", staticmethod(broken))
    provider.enqueue(
        ToolCallsReply((ScriptedToolCall("Read", {"path": "a.txt"}, "c1"),)), TextReply("done")
    )
    host, session = start(tmp_path, provider, workspace)
    try:
        host.request("session/prompt", {"sessionId": session, "text": "go"})
        ended = host.notified("turn/ended")
        result = one_result_per_call(host)["c1"]
        assert (result["status"], result["error"]["code"]) == ("error", "TOOL_FAILED")
        assert ended["outcome"] == "completed"
    finally:
        host.stop()


def test_cancelling_mid_batch_gives_every_call_of_the_batch_its_result(
    tmp_path: Path, provider: MockProvider, workspace: Path
) -> None:
    batch = (
        ScriptedToolCall("Bash", {"command": "echo started; sleep 1000"}, "c1"),
        ScriptedToolCall("Read", {"path": "a.txt"}, "c2"),
    )
    provider.enqueue(ToolCallsReply(batch))
    host, session = start(tmp_path, provider, workspace)
    try:
        host.request("session/prompt", {"sessionId": session, "text": "go"})
        host.notified("command/output", lambda p: "started" in p["text"])
        host.request("session/cancel", {"sessionId": session})
        ended = host.notified("turn/ended")
        assert ended["outcome"] == "cancelled"
        results = one_result_per_call(host)
        for call_id in ("c1", "c2"):
            assert (results[call_id]["status"], results[call_id]["error"]["code"]) == (
                "error",
                "TURN_CANCELLED",
            )
        methods = [m.get("method") for m in host.messages]
        assert max(i for i, m in enumerate(methods) if m == "turn/toolResult") < methods.index(
            "turn/ended"
        )
    finally:
        host.stop()
