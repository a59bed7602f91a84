"""A host that stops in the middle of a scenario is reported as stopped, exit status first.

The variants exit on purpose (tests/hosts/broken/wire.py): one while the harness waits for
the answer to a request, one while it waits for a notification. Either way the scenario is
``errored`` (never ``failed``, which would blame a requirement for a crash), its failure
kind is ``host-stopped``, and its message leads with the exit status.
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import pytest
from hosts.runner import run_suite

from conformance.drivers import STOP_TIMEOUT, SubprocessDriver
from conformance.mock_provider import MockProvider
from conformance.world import World

CASES = [
    ("exits-on-prompt", "turn_boundaries", "second_prompt_during_a_turn", 7),
    ("exits-mid-turn", "sessions", "receives_the_key", 9),
]


@pytest.mark.parametrize(("variant", "areas", "keyword", "status"), CASES)
def test_a_host_that_exits_is_reported_as_stopped(
    tmp_path: Path, variant: str, areas: str, keyword: str, status: int
) -> None:
    # The exit is seen at once; the longer step timeout only keeps a host that starts slowly
    # on a loaded machine from reading as one that never answered the preflight.
    run = run_suite(tmp_path / "report", areas, keyword, variant, extra=("--timeout", "30"))
    assert run.status == 1, run.output
    errored = run.scenarios("errored")
    assert errored, f"expected an errored scenario:\n{run.output}"
    assert not run.scenarios("failed", "harness-error"), run.output
    for scenario in errored:
        failure = scenario["failure"]
        assert failure["kind"] == "host-stopped", failure
        assert failure["message"].startswith(f"the host exited with status {status}"), failure
        assert failure["message"].count(f"status {status}") == 1, failure["message"]
        assert failure["host_exit"]["status"] == status, failure
        assert failure["blamed"] == [], failure
        assert failure["transcript"], "the failure record carries no wire transcript"


_ANSWERS_ONLY_THE_HANDSHAKE = """
import json, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # it heeds neither its input nor SIGTERM
for line in sys.stdin:
    request = json.loads(line)
    if request["method"] != "initialize":
        break
    result = {"protocolVersion": 9, "storageSchemaVersion": 10,
              "hostInfo": {"name": "hung", "version": "0"}, "capabilities": {}}
    print(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}), flush=True)
while True:
    time.sleep(60)
"""


def test_a_host_that_left_a_request_unanswered_is_stopped_without_the_long_waits(
    tmp_path: Path,
) -> None:
    """Its input closing and SIGTERM each get UNANSWERED_STOP_S, not the driver's 15 s: a
    run against a hung host reaches its diagnosis in seconds, not minutes."""
    script = tmp_path / "hung.py"
    script.write_text(_ANSWERS_ONLY_THE_HANDSHAKE, encoding="utf-8")
    with MockProvider() as provider:
        world = World(
            driver=SubprocessDriver((sys.executable, str(script))),
            data_dir=tmp_path / "data",
            workspace=tmp_path,
            timeout=0.5,
            provider=provider,
            deadline_s=60.0,
        )
        world.connect()
        with pytest.raises(TimeoutError, match="no response to session/list"):
            world.rpc.request("session/list", {})
        started = time.monotonic()
        world.stop_host()
        took = time.monotonic() - started
    assert world.exits[-1].signal == signal.SIGKILL, world.exits
    assert took < STOP_TIMEOUT, f"stopping the hung host took {took:.1f} s"
