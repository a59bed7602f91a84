"""A third-party host's first run: the common ways to be broken get one diagnosis, fast.

Each case is a small fake host written into the test's folder and run through
``python -m conformance run`` as a user would. The run must end with status 3 (2 for a
command that does not exist) within 15 s on default timeouts, print one diagnosis that
says what happened, write reports in which every scenario is not-run, and leave nothing
running. The cases mostly wait on the host, so a module-scoped pool runs them at once.
"""

from __future__ import annotations

import os
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_runs import Finished, assert_nothing_left, host_cmd, start_cli, summary, write_script

from conformance.scenarios import all_scenarios
from conformance.verdicts import PREFLIGHT_REASON

VERDICT_WITHIN_S = 15.0  # with the default timeouts
REFERENCE_HOST = """
import os, sys
os.execv(sys.executable, [sys.executable, "-m", "reference_host", *sys.argv[1:]])
"""


@dataclass(frozen=True)
class BadHost:
    """A fake host, what the diagnosis line must say, and what else stderr must show."""

    id: str
    command: Callable[[Path], str]
    diagnosis: tuple[str, ...]
    shows: tuple[str, ...] = ()
    status: int = 3


def _script(name: str, body: str) -> Callable[[Path], str]:
    return lambda folder: host_cmd(write_script(folder, name, body))


HOSTS = [
    BadHost(
        "hangs-on-initialize",
        _script("hangs.py", "import time\ntime.sleep(1000)\n"),
        ("the host did not answer initialize within 10 s",),
    ),
    BadHost(
        "does-not-exit-when-stdin-closes",
        _script(
            "lingers.py",
            """
            import subprocess, sys, time
            # Serve through the reference host, but keep running after the input ends.
            host = subprocess.Popen(
                [sys.executable, "-m", "reference_host", *sys.argv[1:]], stdin=subprocess.PIPE
            )
            for line in sys.stdin.buffer:
                host.stdin.write(line)
                host.stdin.flush()
            time.sleep(1000)
            """,
        ),
        ("the host did not exit within 5 s after its input ended", "stdin reaches end of file"),
    ),
    BadHost(
        "exits-at-once",
        lambda folder: "false",
        ("the host exited with status 1 before answering initialize",),
    ),
    BadHost(
        "prints-a-banner-on-stdout",
        _script("banner.py", "print('Welcome to my host 1.0', flush=True)" + REFERENCE_HOST),
        ("the host wrote a line on stdout that is not JSON-RPC", "write logs to stderr"),
        ("the line: 'Welcome to my host 1.0'",),
    ),
    BadHost(
        "speaks-protocol-8",
        _script(
            "version8.py",
            """
            import json, sys
            for line in sys.stdin:
                request = json.loads(line)
                answer = {"protocolVersion": 8, "hostInfo": {"name": "old", "version": "1"}}
                print(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": answer}),
                      flush=True)
            """,
        ),
        ("the host answered initialize with protocolVersion 8", "protocol v9"),
        ('"protocolVersion": 8',),
    ),
    BadHost(
        "refuses-to-start",
        _script(
            "refuses.py",
            """
            import json, sys
            print("cannot lock the data directory", file=sys.stderr)
            error = {"code": -32000, "message": "the data directory is in use",
                     "data": {"code": "DATA_DIR_IN_USE"}}
            print(json.dumps({"jsonrpc": "2.0", "id": None, "error": error}), flush=True)
            sys.exit(7)
            """,
        ),
        ("the host refused to start", "DATA_DIR_IN_USE", "and exited with status 7"),
        ('the line: \'{"jsonrpc"', "cannot lock the data directory"),
    ),
    BadHost(
        # a held-out host (tests/hosts/broken/heldout_client_side.py) that looks for the
        # compact "jsonrpc":"2.0" in the raw line: the preflight's request is spaced
        "reads-only-compact-requests",
        _script(
            "compact_only.py",
            f"""
            import os, sys
            serve = {str(Path(__file__).resolve().parent / "hosts" / "serve.py")!r}
            variant = "cs-jsonrpc-raw-text-match"
            os.execv(sys.executable, [sys.executable, serve, variant, *sys.argv[1:]])
            """,
        ),
        ("the host refused initialize for protocol version 9: INVALID_REQUEST",),
    ),
    BadHost(
        "command-not-found",
        lambda folder: "no-such-conformance-host --serve",
        ("--host-cmd", "'no-such-conformance-host' was not found on PATH"),
        status=2,
    ),
]


@dataclass(frozen=True)
class FirstRun:
    """How the command ended, and how long the host took to get its verdict."""

    finished: Finished
    report: Path
    verdict_s: float


def _first_run(host: BadHost, folder: Path) -> FirstRun:
    folder.mkdir()
    report = folder / "report"
    run = start_cli(
        "run", "--host-cmd", host.command(folder), "--report", str(report), "--workers", "1"
    )
    # The verdict is timed from the host's start: the harness's own start-up before it is
    # the same for every host, and only slow on a machine that is busy with other work.
    started = run.started
    if host.status == 3:
        run.wait_for_line(("preflight: starting",), 60)
        started = time.monotonic()
    finished = run.finish(60)
    assert_nothing_left(run.mark)
    return FirstRun(finished, report, finished.ended - started)


@pytest.fixture(scope="module")
def first_runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Future[FirstRun]]]:
    """Start the selected cases, the slowest first, a few at a time."""
    base = tmp_path_factory.mktemp("preflight")
    wanted = {item.name for item in request.session.items if item.module is sys.modules[__name__]}
    selected = [h for h in HOSTS if f"test_a_broken_host_gets_one_diagnosis[{h.id}]" in wanted]
    with ThreadPoolExecutor(max_workers=max(3, os.cpu_count() or 2)) as pool:
        futures = {h.id: pool.submit(_first_run, h, base / h.id) for h in selected}
        yield futures
        for future in futures.values():
            future.cancel()


@pytest.mark.parametrize("host", HOSTS, ids=[h.id for h in HOSTS])
def test_a_broken_host_gets_one_diagnosis(
    first_runs: dict[str, Future[FirstRun]], host: BadHost
) -> None:
    first = first_runs[host.id].result()
    finished, report = first.finished, first.report
    assert finished.status == host.status, finished.output
    assert first.verdict_s <= VERDICT_WITHIN_S, f"{first.verdict_s:.1f} s\n{finished.output}"
    assert "Traceback" not in finished.stderr, finished.output
    if host.status == 2:
        [line] = finished.stderr.splitlines()
        assert all(part in line for part in host.diagnosis), finished.output
        assert not report.exists() or not (report / "summary.json").exists()
        return
    diagnoses = [line for line in finished.stderr.splitlines() if "preflight failed" in line]
    assert len(diagnoses) == 1, finished.output
    assert diagnoses[0].startswith("preflight failed: "), finished.output
    for part in host.diagnosis:
        assert part in diagnoses[0], f"{part!r} is missing from: {diagnoses[0]}"
    for part in host.shows:
        assert part in finished.stderr, f"{part!r} is missing from:\n{finished.stderr}"
    data = summary(report)
    assert data["preflight"]["ok"] is False
    assert data["preflight"]["diagnosis"] in diagnoses[0]
    assert len(data["scenarios"]) == len(all_scenarios())
    assert {(s["status"], s["reason"]) for s in data["scenarios"]} == {
        ("not-run", PREFLIGHT_REASON)
    }
    assert data["regressions"] == []
    junit = ET.parse(report / "junit.xml").getroot()
    assert len(junit.findall(".//testcase")) == len(all_scenarios())
    assert len(junit.findall(".//testcase/skipped")) == len(all_scenarios())
