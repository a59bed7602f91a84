"""The reference host as a process: flags, clean shutdown, and conformance-only methods."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

HOST = [sys.executable, "-m", "reference_host"]


def start(tmp_path: Path, *flags: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*HOST, "--data-dir", str(tmp_path / "data"), *flags],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def exchange(process: subprocess.Popen[bytes], *messages: dict[str, Any]) -> list[dict[str, Any]]:
    assert process.stdin is not None and process.stdout is not None
    for message in messages:
        process.stdin.write(json.dumps(message).encode() + b"\n")
    process.stdin.flush()
    return [json.loads(process.stdout.readline()) for _ in messages]


def initialize() -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 9}}


def test_end_of_input_stops_the_host_cleanly(tmp_path: Path) -> None:
    process = start(tmp_path)
    exchange(process, initialize())
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr.decode()
    assert (tmp_path / "data" / "host.db").exists()


def test_sigterm_stops_the_host_cleanly(tmp_path: Path) -> None:
    process = start(tmp_path)
    exchange(process, initialize())  # serving: the signal handler is installed
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0
    assert process.stderr is not None
    assert b"stopped" in process.stderr.read()


def test_conformance_methods_exist_only_with_the_flag(tmp_path: Path) -> None:
    clock = {"jsonrpc": "2.0", "id": 2, "method": "conformance/clock/get", "params": {}}
    without = start(tmp_path)
    answers = exchange(without, initialize(), clock)
    without.communicate(timeout=30)
    assert answers[0]["result"]["capabilities"]["conformance"] is False
    assert answers[1]["error"]["data"]["code"] == "METHOD_NOT_FOUND"

    with_flag = start(tmp_path, "--conformance")
    answers = exchange(with_flag, initialize(), clock)
    with_flag.communicate(timeout=30)
    assert answers[0]["result"]["capabilities"]["conformance"] is True
    assert isinstance(answers[1]["result"]["now"], int)


def test_a_missing_data_dir_flag_is_a_usage_error(tmp_path: Path) -> None:
    completed = subprocess.run(HOST, capture_output=True, timeout=30, check=False)
    assert completed.returncode == 2
    assert b"--data-dir" in completed.stderr
    assert completed.stdout == b""
