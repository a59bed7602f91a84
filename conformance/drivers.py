"""Host drivers: start a host on a data dir and expose its protocol byte streams.

The subprocess driver runs any host command line. The in-process driver runs a Python
host's published ``serve(argv, stdin, stdout, stderr) -> int`` on a thread, speaking the
same bytes over OS pipes; it is faster and lets CI exercise the same suite twice.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, BinaryIO, Protocol, TextIO, cast, runtime_checkable

ServeFn = Callable[[Sequence[str], BinaryIO, BinaryIO, TextIO], int]

# The harness plays the model provider, so the host needs no real key; a recognisable
# dummy lets the harness check that the key is never stored or echoed.
DUMMY_API_KEY = "pi-conformance-dummy-key-not-a-secret"
_CONFORMANCE_FLAG = ("--conformance",)
# Every host runs in a time zone half an hour off any whole-hour zone (UTC+05:30, written
# the POSIX way so that no time zone database is needed): the contract's times are epoch
# milliseconds, so a host that reads local time where it means UTC shows it here, on any
# machine, as it would on a user's.
HOST_TIME_ZONE = "<+0530>-05:30"

HOST_ENTRY_POINT_GROUP = "pi_conformance.hosts"
DEFAULT_HOST_CMD = (sys.executable, "-m", "reference_host")
STOP_TIMEOUT = 15.0
IN_PROCESS_HOST_THREAD = "in-process-host"  # the name of the thread an in-process host runs in
_STDERR_LIMIT = 256 * 1024
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class ExitInfo:
    """Whether a host is still running and, if not, how it ended."""

    running: bool
    status: int | None = None
    signal: int | None = None

    def describe(self) -> str:
        """A phrase such as 'exited with status 3' or 'was killed by signal 9'."""
        if self.running:
            return "is still running"
        if self.signal is not None:
            return f"was killed by signal {self.signal}"
        if self.status is not None:
            return f"exited with status {self.status}"
        return "stopped"


class HostStartError(RuntimeError):
    """The host command could not be started at all (for example, it does not exist)."""


class RunningHost(Protocol):
    """A started host: its protocol streams, its logs, and how to stop it."""

    @property
    def to_host(self) -> BinaryIO:
        """The host's stdin."""
        ...

    @property
    def from_host(self) -> BinaryIO:
        """The host's stdout."""
        ...

    def stderr_text(self) -> str:
        """What the host wrote to stderr so far (the tail, when it was long)."""
        ...

    def stop(self, timeout: float = ..., *, leave_commands: bool = False) -> int | None:
        """Close stdin and wait (up to ``timeout`` s) for a clean exit; return its status.
        What its commands started is then ended, or, with ``leave_commands``, only by
        :meth:`end_leftovers` (to see whether the host ended it itself)."""
        ...

    def crash(self, *, leave_commands: bool = False) -> None:
        """Stop the host abruptly, with no chance to clean up. The commands it left running
        are ended at once, or, with ``leave_commands``, only by :meth:`end_leftovers`."""
        ...

    def end_leftovers(self) -> None:
        """End whatever a stopped host left running (nothing when there is none)."""
        ...

    @property
    def supports_crash(self) -> bool:
        """Whether :meth:`crash` is a real abrupt stop for this driver."""
        ...

    def exit_info(self) -> ExitInfo:
        """Whether the host still runs, and how it ended if not."""
        ...


@runtime_checkable
class ReportsExit(Protocol):
    """A running host that can tell whether, and how, its process ended."""

    def exit_status(self, timeout: float = 0.0) -> int | None:
        """The exit status once the host has ended (waiting up to ``timeout`` s), else None."""
        ...


class HostDriver(Protocol):
    """Starts hosts; one driver serves a whole test session."""

    name: str

    def start(
        self,
        data_dir: Path,
        extra_env: dict[str, str] | None = None,
        conformance: bool = True,
    ) -> RunningHost:
        """Start a host with ``--data-dir data_dir --conformance`` (without the flag when
        ``conformance`` is false: the host as it runs in production)."""
        ...


class _TailBuffer(io.TextIOBase):
    """A thread-safe text sink keeping the last part of what was written."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parts: list[str] = []
        self._size = 0

    def write(self, text: str) -> int:
        with self._lock:
            self._parts.append(text)
            self._size += len(text)
            while self._size > _STDERR_LIMIT and len(self._parts) > 1:
                self._size -= len(self._parts.pop(0))
        return len(text)

    def writable(self) -> bool:
        return True

    def text(self) -> str:
        with self._lock:
            return "".join(self._parts)


class _PipeReader(io.RawIOBase):
    """The read end of a pipe, read in large chunks.

    An unbuffered file's readline reads one byte per system call (a 1 MiB line cost
    seconds); a buffered reader's close waits for a read blocked in another thread (a hung
    host would hang the harness). This reader has neither problem: close just closes the
    descriptor.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = bytearray()

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def _read_chunk(self) -> bytes:
        if self.closed:  # the descriptor's number may already belong to another file
            raise ValueError("read from a closed pipe")
        return os.read(self._fd, _CHUNK)

    def readinto(self, target: Any) -> int:
        view = memoryview(target).cast("B")
        if not self._buffer:
            self._buffer += self._read_chunk()
        count = min(len(view), len(self._buffer))
        view[:count] = self._buffer[:count]
        del self._buffer[:count]
        return count

    def readline(self, size: int | None = -1) -> bytes:
        limit = size if size is not None and size >= 0 else None
        searched = 0
        while (end := self._buffer.find(b"\n", searched)) < 0:
            searched = len(self._buffer)
            chunk = b"" if limit is not None and searched >= limit else self._read_chunk()
            if not chunk:
                end = searched - 1
                break
            self._buffer += chunk
        if limit is not None:
            end = min(end, limit - 1)
        line = bytes(self._buffer[: end + 1])
        del self._buffer[: end + 1]
        return line

    def close(self) -> None:
        if not self.closed:
            os.close(self._fd)
        super().close()


TOKEN_VARIABLE = "PI_CONFORMANCE_HOST_TOKEN"


# psutil's process start times count from the boot time, which Linux gives in whole
# seconds, and the wall clock may be stepped meanwhile; a minute of slack still passes over
# the long-lived processes that make up most of a busy machine
START_TIME_SLACK_S = 60.0


def _processes_with_token(token: str, since: float) -> list[int]:
    """PIDs whose environment carries ``token`` (through psutil: Linux and macOS).

    Only processes started after ``since`` (a :func:`time.time`, taken before the token
    was handed out) can carry it, so older ones are passed over without reading their
    environment: on a busy CI machine that is most of them.
    """
    import psutil  # only when a host is stopped: it is slow to import

    found: list[int] = []
    for process in psutil.process_iter():
        try:
            if process.create_time() < since - START_TIME_SLACK_S:
                continue
            if process.environ().get(TOKEN_VARIABLE) == token:
                found.append(process.pid)
        except psutil.Error:
            continue  # gone, a zombie, or another user's
    return found


class SubprocessHost:
    """A host running as a child process.

    Every process the host starts inherits a unique token in its environment, so that
    after a crash the harness can end the commands the dead host left behind.
    """

    supports_crash = True

    def __init__(
        self,
        command: Sequence[str],
        data_dir: Path,
        env: dict[str, str],
        conformance: bool = True,
    ) -> None:
        self._stderr = _TailBuffer()
        self._started = time.time()
        self._token = uuid.uuid4().hex
        env = {**env, TOKEN_VARIABLE: self._token}
        argv = [*command, "--data-dir", str(data_dir), *(_CONFORMANCE_FLAG if conformance else ())]
        try:
            self.process = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            raise HostStartError(
                f"cannot start the host command {shlex.join(command)!r}: {exc.strerror}"
            ) from exc
        assert self.process.stderr is not None
        self._drain = threading.Thread(
            target=self._pump_stderr, args=(self.process.stderr,), daemon=True
        )
        self._drain.start()

    def _pump_stderr(self, stream: BinaryIO) -> None:
        for line in iter(stream.readline, b""):
            self._stderr.write(line.decode("utf-8", "replace"))

    @property
    def to_host(self) -> BinaryIO:
        assert self.process.stdin is not None
        return cast(BinaryIO, self.process.stdin)

    @property
    def from_host(self) -> BinaryIO:
        assert self.process.stdout is not None
        return cast(BinaryIO, self.process.stdout)

    def stderr_text(self) -> str:
        return self._stderr.text()

    def exit_info(self) -> ExitInfo:
        code = self.process.poll()
        if code is None:
            return ExitInfo(running=True)
        return ExitInfo(False, signal=-code) if code < 0 else ExitInfo(False, status=code)

    def exit_status(self, timeout: float = 0.0) -> int | None:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, timeout: float = STOP_TIMEOUT, *, leave_commands: bool = False) -> int | None:
        with contextlib.suppress(OSError, ValueError):
            self.to_host.close()
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            return None
        finally:
            if not leave_commands:
                self._reap_group()

    def crash(self, *, leave_commands: bool = False) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        if not leave_commands:
            self._reap_group()

    def end_leftovers(self) -> None:
        self._reap_group()

    def _reap_group(self) -> None:
        # Children the host left behind (shell commands) must not outlive the scenario.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        for pid in _processes_with_token(self._token, self._started):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        self._drain.join(timeout=STOP_TIMEOUT)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


@dataclass
class SubprocessDriver:
    """Runs ``command --data-dir DIR --conformance`` for each host."""

    command: Sequence[str] = DEFAULT_HOST_CMD
    name: str = "subprocess"

    @classmethod
    def from_command_line(cls, command_line: str) -> SubprocessDriver:
        """Build from a shell-style command line such as ``"my-host --verbose"``."""
        return cls(tuple(shlex.split(command_line)))

    def start(
        self,
        data_dir: Path,
        extra_env: dict[str, str] | None = None,
        conformance: bool = True,
    ) -> RunningHost:
        env = {
            **os.environ,
            "OPENAI_API_KEY": DUMMY_API_KEY,
            "TZ": HOST_TIME_ZONE,
            **(extra_env or {}),
        }
        return SubprocessHost(self.command, data_dir, env, conformance)


class InProcessHost:
    """A Python host's ``serve`` running on a thread of this process."""

    supports_crash = False

    def __init__(self, serve: ServeFn, data_dir: Path, conformance: bool = True) -> None:
        self._stderr = _TailBuffer()
        # Commands the host starts inherit this process's environment; the token lets
        # stop() end any that escaped the host's own cleanup.
        self._started = time.time()
        self._token = uuid.uuid4().hex
        os.environ[TOKEN_VARIABLE] = self._token
        host_in, self._to_host_fd = os.pipe()
        self._from_host_fd, host_out = os.pipe()
        self._to_host = os.fdopen(self._to_host_fd, "wb", buffering=0)
        self._from_host = cast(BinaryIO, _PipeReader(self._from_host_fd))
        self.returncode: int | None = None
        argv = ["--data-dir", str(data_dir), *(_CONFORMANCE_FLAG if conformance else ())]

        def run() -> None:
            with os.fdopen(host_in, "rb") as stdin, os.fdopen(host_out, "wb") as stdout:
                try:
                    self.returncode = serve(argv, stdin, stdout, cast(TextIO, self._stderr))
                except BaseException as exc:  # reported as the host's failure, not ours
                    self._stderr.write(f"serve() raised {exc!r}\n")
                    self.returncode = -1

        self._thread = threading.Thread(target=run, name=IN_PROCESS_HOST_THREAD, daemon=True)
        self._thread.start()

    @property
    def to_host(self) -> BinaryIO:
        return self._to_host

    @property
    def from_host(self) -> BinaryIO:
        return self._from_host

    def stderr_text(self) -> str:
        return self._stderr.text()

    def exit_info(self) -> ExitInfo:
        if self._thread.is_alive():
            return ExitInfo(running=True)
        return ExitInfo(False, status=self.returncode)

    def exit_status(self, timeout: float = 0.0) -> int | None:
        self._thread.join(timeout)
        return None if self._thread.is_alive() else self.returncode

    def stop(self, timeout: float = STOP_TIMEOUT, *, leave_commands: bool = False) -> int | None:
        with contextlib.suppress(OSError):
            self._to_host.close()
        self._thread.join(timeout)
        if not leave_commands:
            self.end_leftovers()
        if self._thread.is_alive():
            return None
        return self.returncode

    def crash(self, *, leave_commands: bool = False) -> None:
        raise NotImplementedByDriverError("the in-process driver cannot stop a host abruptly")

    def end_leftovers(self) -> None:
        for pid in _processes_with_token(self._token, self._started):
            if pid != os.getpid():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)


class NotImplementedByDriverError(RuntimeError):
    """The scenario needs something this driver cannot express."""


@dataclass
class InProcessDriver:
    """Runs a Python host's published ``serve`` function in this process."""

    serve: ServeFn
    name: str = "inprocess"

    @classmethod
    def load(cls, name: str) -> InProcessDriver:
        """Load ``serve`` from an entry point name or a ``module:function`` path."""
        if ":" in name:
            module_name, _, attribute = name.partition(":")
            serve = getattr(importlib.import_module(module_name), attribute)
        else:
            matches = entry_points(group=HOST_ENTRY_POINT_GROUP, name=name)
            if not matches:
                raise LookupError(
                    f"no host named {name!r} in entry point group {HOST_ENTRY_POINT_GROUP}"
                )
            serve = next(iter(matches)).load()
        if not callable(serve):
            raise TypeError(f"{name!r} does not name a callable serve function")
        return cls(serve)

    def start(
        self,
        data_dir: Path,
        extra_env: dict[str, str] | None = None,
        conformance: bool = True,
    ) -> RunningHost:
        if extra_env:
            raise NotImplementedByDriverError("the in-process driver cannot set host env vars")
        # The host shares this process's environment; it gets the same dummy key and
        # time zone (the harness itself reads no local time).
        os.environ["OPENAI_API_KEY"] = DUMMY_API_KEY
        if os.environ.get("TZ") != HOST_TIME_ZONE:
            os.environ["TZ"] = HOST_TIME_ZONE
            time.tzset()
        return InProcessHost(self.serve, data_dir, conformance)
