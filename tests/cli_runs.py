"""Run ``pi-conformance`` as a user does, and find every process a run left behind.

Each run carries a unique mark in its environment. Every process it starts inherits the
mark (pytest, its workers, the hosts and their commands), so a test can tell which
processes belong to its run even on a machine running other suites.
"""

from __future__ import annotations

import json
import os
import queue
import shlex
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import psutil

RUN_MARK = "PI_CONFORMANCE_TEST_RUN"
HOST_TOKEN = "PI_CONFORMANCE_HOST_TOKEN"
CLI = [sys.executable, "-u", "-m", "conformance"]


class CliRun:
    """A started ``python -m conformance`` process, read line by line as it runs."""

    def __init__(self, process: subprocess.Popen[str], mark: str) -> None:
        self.process = process
        self.mark = mark
        self.started = time.monotonic()
        self._lines: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self._arrivals: dict[str, queue.Queue[str | None]] = {
            "stdout": queue.Queue(),
            "stderr": queue.Queue(),
        }
        self._readers = [
            threading.Thread(target=self._pump, args=(process.stdout, "stdout"), daemon=True),
            threading.Thread(target=self._pump, args=(process.stderr, "stderr"), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _pump(self, stream: IO[str], name: str) -> None:
        for line in stream:
            self._lines[name].append(line)
            self._arrivals[name].put(line)
        self._arrivals[name].put(None)

    def wait_for_line(
        self, prefixes: tuple[str, ...], timeout: float, stream: str = "stdout"
    ) -> str:
        """The first line of ``stream`` from now on that starts with one of ``prefixes``."""
        arrivals = self._arrivals[stream]
        limit = time.monotonic() + timeout
        while (remaining := limit - time.monotonic()) > 0:
            try:
                line = arrivals.get(timeout=remaining)
            except queue.Empty:
                break
            if line is None:
                raise AssertionError(f"the command ended first:\n{self.finish(10).output}")
            if line.lstrip("\n").startswith(prefixes):
                return line
        self.process.kill()
        end_marked(self.mark)
        raise AssertionError(
            f"no {stream} line starting {prefixes} within {timeout} s: {self._lines}"
        )

    def finish(self, timeout: float) -> Finished:
        """Wait for the command to end; a command that does not end fails the test."""
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            end_marked(self.mark)
            raise AssertionError(
                f"the command did not end within {timeout} s\n"
                f"{''.join(self._lines['stdout'])}\n{''.join(self._lines['stderr'])}"
            ) from None
        ended = time.monotonic()
        for reader in self._readers:
            reader.join(timeout)
        return Finished(
            self.process.returncode,
            "".join(self._lines["stdout"]),
            "".join(self._lines["stderr"]),
            ended - self.started,
            ended,
        )


@dataclass(frozen=True)
class Finished:
    """How a command ended."""

    status: int
    stdout: str
    stderr: str
    seconds: float  # from start to end
    ended: float  # time.monotonic() when the process had ended

    @property
    def output(self) -> str:
        """Both streams, for assertion messages."""
        return f"status {self.status}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"


def start_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> CliRun:
    """Start ``python -m conformance ARGS`` with a fresh run mark."""
    mark = uuid.uuid4().hex
    process = subprocess.Popen(
        [*CLI, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {}), RUN_MARK: mark},
    )
    return CliRun(process, mark)


def marked_processes(mark: str) -> list[psutil.Process]:
    """Every living process whose environment carries ``mark``."""
    found: list[psutil.Process] = []
    for process in psutil.process_iter():
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                continue
            if process.environ().get(RUN_MARK) == mark:
                found.append(process)
        except psutil.Error:
            continue
    return found


def describe(processes: list[psutil.Process]) -> list[str]:
    """Command lines, for an assertion message."""
    described: list[str] = []
    for process in processes:
        try:
            host = " (a host)" if HOST_TOKEN in process.environ() else ""
            described.append(f"{process.pid}: {' '.join(process.cmdline())}{host}")
        except psutil.Error:
            described.append(str(process.pid))
    return described


def end_marked(mark: str) -> None:
    """Kill what a failed test's run left, so that one failure does not spoil the others."""
    for process in marked_processes(mark):
        try:
            process.kill()
        except psutil.Error:
            continue


def assert_nothing_left(mark: str) -> None:
    """No process of the run outlived it."""
    left = marked_processes(mark)
    if left:
        names = describe(left)
        end_marked(mark)
        raise AssertionError(f"the run left processes behind: {names}")


def write_script(folder: Path, name: str, body: str) -> Path:
    """A small Python program in ``folder``; returns its path."""
    path = folder / name
    path.write_text(textwrap.dedent(body).lstrip(), encoding="utf-8")
    return path


def host_cmd(script: Path) -> str:
    """A ``--host-cmd`` value running ``script`` with this interpreter."""
    return shlex.join([sys.executable, str(script)])


def summary(report: Path) -> dict[str, Any]:
    """The summary.json of a report folder."""
    data: dict[str, Any] = json.loads((report / "summary.json").read_text(encoding="utf-8"))
    return data
