"""A small blocking client for the reference host, for the host's own tests.

It starts the host in-process (``serve`` on a thread, real OS pipes) or as a subprocess,
parses every line the host writes with a strict JSON parser (no NaN, no Infinity), and lets
a test send requests and wait for notifications with a bounded timeout.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from reference_host.server import serve

WAIT_S = 30.0
HOST_CMD = (sys.executable, "-m", "reference_host")


def strict_loads(line: bytes) -> Any:
    """Parse one line as the JSON standard allows it, and nothing more."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(line.decode("utf-8", errors="strict"), parse_constant=refuse)


class RpcError(Exception):
    """An error response; ``code`` is its canonical ``data.code``."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error.get("message", ""))
        self.error = error
        self.code: str = error.get("data", {}).get("code", "")


class HostConnection:
    """Reads every line from the host; sends requests and waits for answers."""

    def __init__(self, to_host: BinaryIO, from_host: BinaryIO) -> None:
        self._to_host = to_host
        self._from_host = from_host
        self._cond = threading.Condition()
        self.messages: list[dict[str, Any]] = []
        self.bad_lines: list[bytes] = []
        self.closed = False
        self._next_id = 1
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in iter(self._from_host.readline, b""):
            try:
                message = strict_loads(line.rstrip(b"\n"))
            except ValueError:
                with self._cond:
                    self.bad_lines.append(line)
                    self._cond.notify_all()
                continue
            with self._cond:
                self.messages.append(message)
                self._cond.notify_all()
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    def send_line(self, line: bytes) -> None:
        """Write raw bytes followed by a newline."""
        self._to_host.write(line + b"\n")
        self._to_host.flush()

    def send(self, method: str, params: dict[str, Any] | None = None) -> int:
        """Send a request; return its id."""
        request_id = self._next_id
        self._next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send_line(json.dumps(message).encode())
        return request_id

    def wait(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = WAIT_S
    ) -> dict[str, Any]:
        """The first message (in arrival order) that satisfies ``predicate``."""
        with self._cond:
            seen = 0
            while True:
                for message in self.messages[seen:]:
                    if predicate(message):
                        return message
                seen = len(self.messages)
                if self.closed:
                    raise AssertionError("the host closed its output before the awaited message")
                if not self._cond.wait(timeout):
                    raise AssertionError(f"no awaited message within {timeout} s")

    def answer(self, request_id: int, timeout: float = WAIT_S) -> dict[str, Any]:
        """The response to ``request_id``."""
        return self.wait(lambda m: m.get("id") == request_id and "method" not in m, timeout)

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a request and return its result, or raise :class:`RpcError`."""
        response = self.answer(self.send(method, {} if params is None else params))
        if "error" in response:
            raise RpcError(response["error"])
        result: dict[str, Any] = response["result"]
        return result

    def refused(self, method: str, params: dict[str, Any]) -> str:
        """Send a request that must fail; return its canonical code."""
        response = self.answer(self.send(method, params))
        assert "error" in response, response
        code: str = response["error"]["data"]["code"]
        return code

    def notifications(self, method: str) -> list[dict[str, Any]]:
        """The params of every ``method`` notification so far."""
        with self._cond:
            return [m["params"] for m in self.messages if m.get("method") == method]

    def notified(
        self,
        method: str,
        predicate: Callable[[dict[str, Any]], bool] = lambda _: True,
        timeout: float = WAIT_S,
    ) -> dict[str, Any]:
        """Wait for a ``method`` notification whose params satisfy ``predicate``."""
        message = self.wait(lambda m: m.get("method") == method and predicate(m["params"]), timeout)
        params: dict[str, Any] = message["params"]
        return params

    def initialize(self) -> dict[str, Any]:
        """The handshake."""
        return self.request("initialize", {"protocolVersion": 9})


class InProcessHost(HostConnection):
    """The reference host's ``serve`` on a thread of this process."""

    def __init__(self, data_dir: Path, *flags: str) -> None:
        host_in, to_host = os.pipe()
        from_host, host_out = os.pipe()
        self.returncode: int | None = None
        argv = ["--data-dir", str(data_dir), *flags]

        self.log = io.StringIO()

        def run() -> None:
            with os.fdopen(host_in, "rb") as stdin, os.fdopen(host_out, "wb") as stdout:
                self.returncode = serve(argv, stdin, stdout, self.log)

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        super().__init__(os.fdopen(to_host, "wb", buffering=0), os.fdopen(from_host, "rb"))

    def stop(self) -> int | None:
        """Close the host's input and wait for ``serve`` to return."""
        with contextlib.suppress(OSError):
            self._to_host.close()
        self._thread.join(WAIT_S)
        assert not self._thread.is_alive(), "serve() did not return after end of input"
        return self.returncode


class SubprocessHost(HostConnection):
    """The reference host as a child process."""

    def __init__(self, data_dir: Path, *flags: str, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            [*HOST_CMD, "--data-dir", str(data_dir), *flags],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        super().__init__(self.process.stdin, self.process.stdout)

    def stop(self) -> int:
        """Close the host's input and wait for it to exit."""
        with contextlib.suppress(OSError):
            self._to_host.close()
        return self.process.wait(WAIT_S)

    def stderr_text(self) -> str:
        """Everything the host logged (only after it exited)."""
        assert self.process.stderr is not None
        return self.process.stderr.read().decode("utf-8", "replace")
