"""Start the host once before any scenario and diagnose the common first-run problems.

A host that cannot be started, exits at once, prints a banner on stdout, never answers
``initialize``, speaks another protocol version or does not stop when its input ends
would fail every scenario the same way; the preflight says so once, in one sentence,
with the exit status and the tail of the host's stderr.
"""

from __future__ import annotations

import json
import queue
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance.contract import ContractChecker
from conformance.drivers import ExitInfo, HostDriver, HostStartError, RunningHost
from conformance.summary_model import HostExit, HostIdentity, Preflight
from pi_contract import PROTOCOL_VERSION

STDERR_TAIL = 2000
EXIT_GRACE_S = 5.0
REFUSAL_EXIT_S = 2.0
_EOF = None


@dataclass(frozen=True)
class PreflightResult:
    """The preflight's verdict and, when it passed, who the host says it is."""

    preflight: Preflight
    identity: HostIdentity | None


def _reader(host: RunningHost, lines: queue.Queue[bytes | None]) -> None:
    try:
        for line in iter(host.from_host.readline, b""):
            lines.put(line)
    except (OSError, ValueError):
        pass
    lines.put(_EOF)


def _exit(info: ExitInfo | None) -> HostExit | None:
    if info is None:
        return None
    return HostExit(running=info.running, status=info.status, signal=info.signal)


class _Probe:
    def __init__(self, host: RunningHost, timeout: float) -> None:
        self.host = host
        self.deadline = time.monotonic() + timeout
        self.timeout = timeout
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        threading.Thread(target=_reader, args=(host, self.lines), daemon=True).start()

    def next_line(self) -> bytes | str | None:
        """A line, None at end of output, or 'timeout'."""
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            return "timeout"
        try:
            return self.lines.get(timeout=remaining)
        except queue.Empty:
            return "timeout"


def _describe_exit(host: RunningHost) -> str:
    info = host.exit_info()
    if info.running:
        return "closed its output"
    return info.describe()


def _check_initialize(response: dict[str, Any]) -> str | None:
    """A diagnosis for a wrong initialize answer, or None when it is right."""
    if "error" in response:
        error = response["error"]
        code = (error.get("data") or {}).get("code") if isinstance(error, dict) else None
        return f"the host refused initialize for protocol version {PROTOCOL_VERSION}: {code}"
    result = response.get("result")
    if not isinstance(result, dict):
        return "the host answered initialize without a result object"
    if result.get("protocolVersion") != PROTOCOL_VERSION:
        return (
            f"the host answered initialize with protocolVersion "
            f"{result.get('protocolVersion')!r}; this suite tests protocol v{PROTOCOL_VERSION}"
        )
    violation = ContractChecker().check_incoming(response, "initialize", json.dumps(response))
    if violation is not None:
        return f"the host's initialize answer breaks the published schema: {violation.describe()}"
    return None


def run_preflight(
    driver: HostDriver, timeout: float, parent: Path | None = None
) -> PreflightResult:
    """Start the host once on an empty data dir (a temporary folder in ``parent``), say
    hello, and stop it."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pi-preflight-", dir=parent) as scratch:
        data_dir = Path(scratch) / "data"
        data_dir.mkdir()
        try:
            host = driver.start(data_dir)
        except HostStartError as problem:
            return _failed(str(problem), "", None, None, started)
        try:
            return _probe(host, timeout, started)
        finally:
            if host.supports_crash:
                host.crash()
            else:
                host.stop(EXIT_GRACE_S)


def _probe(host: RunningHost, timeout: float, started: float) -> PreflightResult:
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": PROTOCOL_VERSION, "clientInfo": {"name": "pi-preflight"}},
    }
    try:
        host.to_host.write(json.dumps(request).encode() + b"\n")
        host.to_host.flush()
    except (OSError, ValueError):
        pass  # the host already exited; the reader reports how
    probe = _Probe(host, timeout)
    while True:
        line = probe.next_line()
        if line == "timeout":
            return _failed(
                f"the host did not answer initialize within {timeout:g} s",
                "",
                host,
                None,
                started,
            )
        if line is None:
            host.stop(EXIT_GRACE_S)
            return _failed(
                f"the host {_describe_exit(host)} before answering initialize",
                "",
                host,
                None,
                started,
            )
        assert isinstance(line, bytes)
        text = line.decode("utf-8", "replace").rstrip("\n")
        if not text.strip():
            continue
        try:
            message = json.loads(text)
        except ValueError:
            message = None
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return _failed(
                "the host wrote a line on stdout that is not JSON-RPC; stdout carries protocol "
                "lines only (write logs to stderr)",
                f"the line: {text[:300]!r}",
                host,
                None,
                started,
            )
        if "method" in message:
            continue  # a notification before the answer is allowed
        if message.get("id") is None and "error" in message:
            error = message["error"] if isinstance(message["error"], dict) else {}
            code = (error.get("data") or {}).get("code")
            # A refusing host exits at once; say how, so a zero status is caught too.
            exited = host.stop(REFUSAL_EXIT_S) is not None
            how = _describe_exit(host) if exited else f"did not exit within {REFUSAL_EXIT_S:g} s"
            return _failed(
                f"the host refused to start ({code}: {error.get('message')}) and {how}",
                f"the line: {text[:300]!r}",
                host,
                None,
                started,
            )
        if message.get("id") != 1:
            continue
        diagnosis = _check_initialize(message)
        if diagnosis is not None:
            return _failed(diagnosis, f"the answer: {text[:500]}", host, None, started)
        return _finish(host, message["result"], started)


def _finish(host: RunningHost, result: dict[str, Any], started: float) -> PreflightResult:
    info = result.get("hostInfo", {})
    identity = HostIdentity(
        name=str(info.get("name", "?")),
        version=str(info.get("version", "?")),
        capabilities=dict(result.get("capabilities", {})),
    )
    stop_started = time.monotonic()
    status = host.stop(EXIT_GRACE_S)
    if status is None or time.monotonic() - stop_started > EXIT_GRACE_S:
        return _failed(
            f"the host did not exit within {EXIT_GRACE_S:g} s after its input ended; "
            "it must exit when stdin reaches end of file",
            "",
            host,
            identity,
            started,
            HostExit(running=True),  # until the harness ended it
        )
    return PreflightResult(
        Preflight(ok=True, duration_s=round(time.monotonic() - started, 3)), identity
    )


def _failed(
    diagnosis: str,
    detail: str,
    host: RunningHost | None,
    identity: HostIdentity | None,
    started: float,
    host_exit: HostExit | None = None,
) -> PreflightResult:
    if host_exit is None and host is not None:
        host_exit = _exit(host.exit_info())
    return PreflightResult(
        Preflight(
            ok=False,
            diagnosis=diagnosis,
            detail=detail,
            host_exit=host_exit,
            stderr_tail=host.stderr_text()[-STDERR_TAIL:] if host is not None else "",
            duration_s=round(time.monotonic() - started, 3),
        ),
        identity,
    )
