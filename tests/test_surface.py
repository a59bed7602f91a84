"""The protocol surface of a run: what the transcript shows, and what the contract lacks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.surface import (
    SURFACE_FILE,
    Contract,
    Surface,
    append,
    gaps,
    main,
    observe,
    published,
    read,
)

SENT = [
    json.dumps({"jsonrpc": "2.0", "id": 1, "method": "session/get", "params": {}}),
    json.dumps({"jsonrpc": "2.0", "id": 2, "method": "task/delete", "params": {}}),
    "not json",
]
RECEIVED = [
    json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"session": {}}}),
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "error": {"code": -32003, "message": "x", "data": {"code": "TASK_NOT_FOUND"}},
        }
    ),
    json.dumps(
        {
            "jsonrpc": "2.0",
            "method": "turn/toolResult",
            "params": {"tool": "Read", "status": "ok", "error": None},
        }
    ),
    json.dumps(
        {
            "jsonrpc": "2.0",
            "method": "turn/toolResult",
            "params": {"tool": "Edit", "status": "error", "error": {"code": "EDIT_NO_MATCH"}},
        }
    ),
    json.dumps({"jsonrpc": "2.0", "method": "turn/toolCall", "params": {"tool": "Edit"}}),
    json.dumps({"jsonrpc": "2.0", "id": 9, "result": {"statusCode": "NOT_A_CODE"}}),
]


def test_a_transcript_shows_requests_codes_and_tools_that_worked() -> None:
    surface = observe(SENT, RECEIVED)
    assert surface.requests == {"session/get", "task/delete"}
    assert surface.notifications == {"turn/toolResult", "turn/toolCall"}
    assert surface.codes == {"TASK_NOT_FOUND", "EDIT_NO_MATCH"}
    assert surface.tools_ok == {"Read"}
    assert surface.tools_called == {"Edit"}


def test_gaps_name_what_was_never_exercised() -> None:
    contract = Contract(
        frozenset({"session/get", "task/delete", "task/list"}),
        frozenset({"turn/toolResult"}),
        frozenset({"TASK_NOT_FOUND", "INTERNAL_ERROR", "SESSION_BUSY"}),
        frozenset({"Read", "Edit"}),
    )
    found = gaps(observe(SENT, RECEIVED), contract)
    assert found.requests == ["task/list"]
    assert found.notifications == []
    assert found.codes == ["SESSION_BUSY"]  # INTERNAL_ERROR is excused
    assert found.tools == ["Edit"]  # called, but it never worked
    assert found


def test_the_command_fails_on_a_gap_and_reads_parallel_appends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    append(tmp_path, observe(SENT, RECEIVED))
    append(tmp_path, Surface(requests={"task/list"}))
    assert "task/list" in read(tmp_path).requests
    assert main([str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "never answered:" in out and "never worked:" in out


def test_a_surface_covering_the_contract_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    contract = published()
    whole = Surface(
        requests=set(contract.requests),
        notifications=set(contract.notifications),
        codes=set(contract.codes),
        tools_ok=set(contract.tools),
    )
    (tmp_path / SURFACE_FILE).write_text(whole.to_json() + "\n", encoding="utf-8")
    assert main([str(tmp_path)]) == 0
    assert "tools that worked: 10/10" in capsys.readouterr().out


def test_a_missing_report_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as stopped:
        main([str(tmp_path / "absent")])
    assert stopped.value.code == 2
