"""The blocking client over real hosts: typed calls, the wire transcript, a host that exits.

The protocol logic itself is covered without threads in test_connection.py; these tests
check the transport and the typed surface against the reference host, in-process, and
against small real processes that stop on purpose.
"""

from __future__ import annotations

import inspect
import json
import sys
import textwrap
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance import protocol_models
from conformance.client import (
    TYPED_METHODS,
    HarnessError,
    HostClient,
    HostStoppedError,
    InvalidResultError,
    RpcError,
)
from conformance.drivers import InProcessDriver, ReportsExit, SubprocessDriver
from conformance.mock_provider import MockProvider, ScriptedToolCall, TextReply, ToolCallsReply
from conformance.protocol_models import ProviderConfig
from pi_contract import method_index

WAIT_S = 30.0


@pytest.fixture
def provider() -> Iterator[MockProvider]:
    with MockProvider() as running:
        yield running


@pytest.fixture
def client(tmp_path: Path) -> Iterator[HostClient]:
    host = InProcessDriver.load("reference").start(tmp_path / "data")
    connected = HostClient(host, WAIT_S)
    try:
        yield connected
    finally:
        host.stop()
        connected.close()
    assert connected.violations == [], [v.describe() for v in connected.violations]


def test_every_request_method_has_a_typed_call_returning_its_result_model() -> None:
    requests = {name for name, entry in method_index().items() if entry["kind"] == "request"}
    assert set(TYPED_METHODS) == requests
    for method, attribute in TYPED_METHODS.items():
        call = getattr(HostClient, attribute)
        hints = typing.get_type_hints(call)
        expected = getattr(protocol_models, method_index()[method]["result"])
        assert hints["return"] is expected, f"{attribute} returns {hints['return']}"


def test_a_misspelt_field_or_value_fails_type_checking(tmp_path: Path) -> None:
    api = pytest.importorskip("mypy.api")
    snippet = tmp_path / "snippet.py"
    snippet.write_text(
        textwrap.dedent(
            """
            from conformance.client import HostClient
            from conformance.protocol_models import ApprovalApproveParams

            def use(client: HostClient) -> None:
                client.approve("s", "a", "sometimes")
                ApprovalApproveParams(sessionId="s", approvalID="a", permissionMode="ask")
                client.approve("s", "a", "ask").approval.permisionMode
            """
        ),
        encoding="utf-8",
    )
    out, _err, status = api.run(
        ["--strict", "--no-incremental", "--cache-dir", str(tmp_path / "cache"), str(snippet)]
    )
    assert status == 1, out
    assert 'Argument 3 to "approve"' in out
    assert 'Unexpected keyword argument "approvalID"' in out
    assert 'has no attribute "permisionMode"' in out


def test_typed_calls_drive_the_reference_host(client: HostClient, tmp_path: Path) -> None:
    init = client.handshake()
    assert init.protocolVersion == 9 and init.capabilities.conformance
    workspace = tmp_path / "project"
    workspace.mkdir()

    created = client.create_session(str(workspace), mode="plan", permission_mode="auto")
    session_id = created.session.sessionId
    assert created.session.mode == "plan"
    assert client.get_session(session_id).session == created.session
    assert [s.sessionId for s in client.list_sessions().sessions] == [session_id]
    configured = client.configure_session(session_id, mode="agent", permission_mode="ask")
    assert (configured.session.mode, configured.session.permissionMode) == ("agent", "ask")
    assert client.cancel(session_id).turnId is None
    assert client.session_transcript(session_id).entries == []
    assert client.list_approvals(session_id).approvals == []

    shells = client.list_shells()
    if shells.shells:
        chosen = shells.shells[0].shellId
        assert client.set_default_shell(chosen).defaultShellId == chosen
        assert client.configure_session(session_id, shell_id=chosen).session.shellId == chosen
        assert client.configure_session(session_id, shell_id=None).session.shellId is None

    now = client.clock_set(1_700_000_000_000).now
    assert client.clock_advance(1500).now == now + 1500
    assert client.clock_get().now == now + 1500
    for fault in init.capabilities.faultInjection[:1]:
        client.arm_fault(fault)

    with pytest.raises(RpcError) as refused:
        client.respond_permission("no-such-request", "allow")
    assert refused.value.canonical == "PERMISSION_REQUEST_NOT_FOUND"


def test_wait_for_any_returns_the_first_of_several_methods(
    client: HostClient, tmp_path: Path
) -> None:
    client.handshake()
    session_id = client.create_session(str(tmp_path)).session.sessionId
    mark = client.mark()
    client.configure_session(session_id, mode="plan")
    client.configure_session(session_id, mode="agent")
    index, note = client.wait_for_any(
        ("turn/ended", "session/updated"),
        lambda params: params["session"]["mode"] == "agent",
        since=mark,
    )
    assert note["method"] == "session/updated" and index == mark + 1
    with pytest.raises(TimeoutError, match="turn/ended or turn/started"):
        client.wait_for_any(("turn/started", "turn/ended"), since=mark, timeout=0.2)


def test_typed_task_calls(client: HostClient, provider: MockProvider, tmp_path: Path) -> None:
    client.handshake()
    model = ProviderConfig(baseUrl=provider.base_url, model="mock-model")
    task = client.create_task("nightly", "Plan it.", "plan", str(tmp_path), model, run_at=None)
    task_id = task.task.taskId
    assert task.task.runAt is None
    assert [t.taskId for t in client.list_tasks().tasks] == [task_id]
    with pytest.raises(RpcError) as refused:
        client.run_task(task_id)
    assert refused.value.canonical == "PLAN_REQUIRES_INTERACTIVE_SESSION"
    updated = client.update_task(task_id, mode="agent", enabled=False)
    assert (updated.task.mode, updated.task.enabled) == ("agent", False)
    provider.set_fallback(TextReply("Done."))
    run = client.run_task(task_id).run
    assert run.taskId == task_id
    client.wait_for("task/runFinished", lambda p: p["run"]["runId"] == run.runId)
    client.delete_task(task_id)
    assert client.list_tasks().tasks == []


def test_typed_plan_approval_flow(
    client: HostClient, provider: MockProvider, tmp_path: Path
) -> None:
    client.handshake()
    model = ProviderConfig(baseUrl=provider.base_url, model="mock-model")
    session = client.create_session(str(tmp_path), mode="plan", provider=model).session
    plan = {"title": "Typed", "markdown": "# Steps\n", "question": "Go?"}
    provider.enqueue(ToolCallsReply((ScriptedToolCall("SubmitPlan", plan),)))
    provider.set_fallback(TextReply("Done."))
    mark = client.mark()
    turn = client.prompt(session.sessionId, "Plan it.")
    client.wait_for("turn/ended", lambda p: p["turnId"] == turn.turnId, since=mark)
    (pending,) = client.list_approvals(session.sessionId).approvals
    assert pending.status == "pending"

    artifact = client.read_artifact(session.sessionId, pending.approvalId)
    assert artifact.byteSize == len(b"# Steps\n")
    approved = client.approve(session.sessionId, pending.approvalId, "auto")
    assert approved.approval.status == "approved"
    assert approved.approval.permissionMode == "auto"
    assert approved.session.mode == "agent"
    fetched = client.get_approval(session.sessionId, pending.approvalId).approval
    assert fetched.executionId == approved.approval.executionId
    with pytest.raises(RpcError) as refused:
        client.reject(session.sessionId, pending.approvalId)
    assert refused.value.canonical == "APPROVAL_NOT_PENDING"


def test_invalid_params_are_the_harnesss_fault(client: HostClient) -> None:
    client.initialize()
    with pytest.raises(HarnessError, match="get_session"):
        client.get_session("")
    with pytest.raises(HarnessError, match="arm_fault"):
        client.arm_fault("everything")
    assert client.violations == []


def test_a_result_that_breaks_its_model_is_reported(client: HostClient) -> None:
    client.initialize()
    with pytest.raises(InvalidResultError, match="does not fit the published ClockResult"):
        client.call_typed("session/list", protocol_models.Empty(), protocol_models.ClockResult)


def test_the_transcript_holds_every_line_both_ways(client: HostClient) -> None:
    client.initialize()
    client.send_raw(b"{this is not json\n")
    client.wait_unmatched(1)
    records = client.transcript()
    assert [r.direction for r in records] == [
        "client-to-host",
        "host-to-client",
        "client-to-host",
        "host-to-client",
    ]
    assert json.loads(records[0].text)["method"] == "initialize"
    assert records[2].text == "{this is not json"
    assert "PARSE_ERROR" in records[3].text
    elapsed = [r.elapsed for r in records]
    assert elapsed == sorted(elapsed) and elapsed[0] >= 0


def test_requests_written_together_get_their_own_responses(client: HostClient) -> None:
    client.initialize()
    messages = [
        {"jsonrpc": "2.0", "id": client.next_id(), "method": "session/list", "params": {}}
        for _ in range(3)
    ]
    responses = client.call_together(messages)
    assert [r["id"] for r in responses] == [m["id"] for m in messages]


# -- hosts that stop ----------------------------------------------------------------------


def _script_host(tmp_path: Path, body: str) -> SubprocessDriver:
    script = tmp_path / "host.py"
    script.write_text(textwrap.dedent(body), encoding="utf-8")
    return SubprocessDriver((sys.executable, str(script)))


def test_a_host_that_refuses_to_start_is_reported_as_exited(tmp_path: Path) -> None:
    driver = _script_host(
        tmp_path,
        """
        import sys
        sys.stdout.write('{"jsonrpc":"2.0","id":null,"error":{"code":-32080,'
                         '"message":"no","data":{"code":"STORAGE_SCHEMA_UNSUPPORTED",'
                         '"message":"no"}}}\\n')
        sys.stdout.flush()
        sys.exit(4)
        """,
    )
    host = driver.start(tmp_path / "data")
    client = HostClient(host, WAIT_S)
    try:
        with pytest.raises(HostStoppedError, match="exited with status 4") as stopped:
            client.initialize()
        assert stopped.value.exit_status == 4
        assert [m["error"]["data"]["code"] for m in client.unmatched] == [
            "STORAGE_SCHEMA_UNSUPPORTED"
        ]
        assert client.violations == []
    finally:
        host.stop()
        client.close()


def test_a_host_that_exits_mid_request_is_reported_as_exited(tmp_path: Path) -> None:
    driver = _script_host(
        tmp_path,
        """
        import sys
        sys.stdin.readline()
        sys.exit(3)
        """,
    )
    host = driver.start(tmp_path / "data")
    client = HostClient(host, WAIT_S)
    try:
        with pytest.raises(HostStoppedError, match="exited with status 3 before answering"):
            client.request("session/list", {})
        with pytest.raises(TimeoutError, match="before the host exited with status 3"):
            client.wait_for("turn/ended")
        with pytest.raises(HostStoppedError, match="status 3 before it could receive raw bytes"):
            client.send_raw(b"{}\n")
    finally:
        host.stop()
        client.close()


def test_a_host_that_only_closes_its_output_is_not_called_exited(tmp_path: Path) -> None:
    driver = _script_host(
        tmp_path,
        """
        import os, sys
        sys.stdin.readline()
        os.close(1)
        sys.stdin.read()
        """,
    )
    host = driver.start(tmp_path / "data")
    client = HostClient(host, WAIT_S, exit_status=lambda _timeout: None)
    try:
        with pytest.raises(HostStoppedError, match="closed its output before answering") as err:
            client.request("session/list", {})
        assert err.value.exit_status is None
    finally:
        host.stop()
        client.close()


def test_the_exit_status_hook_reports_a_finished_process(tmp_path: Path) -> None:
    host = _script_host(tmp_path, "import sys; sys.exit(7)").start(tmp_path / "data")
    assert isinstance(host, ReportsExit)
    assert host.exit_status(WAIT_S) == 7
    host.stop()


def test_the_client_signature_kept_its_public_calls() -> None:
    for name in (
        "request",
        "call",
        "call_message",
        "call_together",
        "send_raw",
        "next_id",
        "initialize",
        "mark",
        "notifications",
        "wait_for",
        "wait_for_any",
        "wait_unmatched",
        "close",
        "transcript",
    ):
        assert callable(getattr(HostClient, name)), name
    assert "check" in inspect.signature(HostClient.call_message).parameters
