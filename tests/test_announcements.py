"""What the host announces: shell kinds, its output cap, and migrated v8 approvals as they are."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hostkit import InProcessHost
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from conformance.storage_seed import seed_v8
from pi_contract import load_json, schemas_dir
from reference_host import commands

TYPES = load_json("protocol-v9/types.schema.json")


@cache
def validator(definition: str) -> Draft202012Validator:
    registry: Registry[Any] = Registry().with_resource(TYPES["$id"], Resource.from_contents(TYPES))
    return Draft202012Validator({"$ref": f"{TYPES['$id']}#/$defs/{definition}"}, registry=registry)


def assert_fits(definition: str, value: Any) -> None:
    errors = [
        f"{list(e.absolute_path)}: {e.message}" for e in validator(definition).iter_errors(value)
    ]
    assert errors == [], errors


@pytest.fixture
def host(tmp_path: Path) -> Any:
    running = InProcessHost(tmp_path / "data")
    yield running
    running.stop()


def test_every_shell_has_a_kind(host: InProcessHost) -> None:
    host.initialize()
    listed = host.request("shell/list")
    assert_fits("ShellListResult", listed)
    kinds = {shell["shellId"]: shell["kind"] for shell in listed["shells"]}
    assert set(kinds.values()) <= {"posix-sh", "bash", "other"}
    assert kinds.get("sh") == "posix-sh"
    if "bash" in kinds:
        assert kinds["bash"] == "bash"
    assert "kind" in TYPES["$defs"]["Shell"]["required"]


def test_initialize_announces_the_command_output_cap(host: InProcessHost) -> None:
    result = host.initialize()
    assert_fits("InitializeResult", result)
    assert result["capabilities"]["maxCommandOutputBytes"] == commands.OUTPUT_CAP_BYTES
    assert (
        "maxCommandOutputBytes"
        in TYPES["$defs"]["InitializeResult"]["properties"]["capabilities"]["required"]
    )


def test_migrated_v8_approvals_have_no_turn_and_no_artifact(tmp_path: Path) -> None:
    data = tmp_path / "data"
    seed_v8(data / "host.db", sessions=2, transcript_per_session=2)
    host = InProcessHost(data)
    try:
        host.initialize()
        listed = host.request("approval/list", {"sessionId": "v8-session-1"})
        assert_fits("ApprovalListResult", listed)
        by_id = {a["approvalId"]: a for a in listed["approvals"]}
        assert set(by_id) == {"old-pending", "old-changes"}
        for approval in by_id.values():
            assert approval["turnId"] is None
            assert approval["artifact"] is None
            assert approval["question"] == ""
        assert by_id["old-pending"]["status"] == "interrupted"
        assert by_id["old-pending"]["title"] == "Old proposal"
        assert by_id["old-changes"]["status"] == "rejected"
        got = host.request(
            "approval/get", {"sessionId": "v8-session-1", "approvalId": "old-changes"}
        )
        assert_fits("ApprovalResult", got)
        refused = {"sessionId": "v8-session-1", "approvalId": "old-changes"}
        assert host.refused("artifact/read", refused) == "ARTIFACT_UNREADABLE"
    finally:
        host.stop()


def test_the_v8_proposal_layout_is_published() -> None:
    ddl = (schemas_dir() / "storage" / "v8.sql").read_text(encoding="utf-8")
    comments = "\n".join(line for line in ddl.splitlines() if line.lstrip().startswith("--"))
    assert re.search(r"proposal_json", comments)
    assert '"title"' in comments
