"""After a host stops, the harness finds what it left behind by the token in its
environment; processes older than the host are passed over without being read."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest

from conformance import drivers


@pytest.fixture
def token_holder() -> Iterator[tuple[str, float, subprocess.Popen[bytes]]]:
    """A sleeping process whose environment carries a fresh token, and when it started."""
    token = uuid.uuid4().hex
    started = time.time()
    process = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        env={**os.environ, drivers.TOKEN_VARIABLE: token},
    )
    try:
        yield token, started, process
    finally:
        process.kill()
        process.wait()


def test_a_process_started_after_the_host_is_found(
    token_holder: tuple[str, float, subprocess.Popen[bytes]],
) -> None:
    token, started, process = token_holder
    assert drivers._processes_with_token(token, started) == [process.pid]


def test_another_token_finds_nothing(
    token_holder: tuple[str, float, subprocess.Popen[bytes]],
) -> None:
    _, started, _ = token_holder
    assert drivers._processes_with_token(uuid.uuid4().hex, started) == []


def test_processes_older_than_the_host_are_not_read(
    token_holder: tuple[str, float, subprocess.Popen[bytes]],
) -> None:
    token, started, _ = token_holder
    later = started + drivers.START_TIME_SLACK_S + 60  # as if the host had started a minute on
    assert drivers._processes_with_token(token, later) == []
