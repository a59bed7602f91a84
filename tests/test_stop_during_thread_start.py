"""A stop signal that lands while the command starts a thread stops the command and
leaves the thread whole: nothing is printed from a thread that died half-started."""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from conformance.commands import run


def test_a_stop_while_a_thread_starts_leaves_the_thread_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unraisable: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    start_new_thread = threading._start_new_thread

    def start_then_signal(function: Any, args: Any) -> int:
        # the signal arrives just as the new thread exists, before start() has returned
        ident: int = start_new_thread(function, args)
        os.kill(os.getpid(), signal.SIGTERM)
        return ident

    monkeypatch.setattr(threading, "_start_new_thread", start_then_signal)
    ran = threading.Event()
    thread = threading.Thread(target=ran.set)
    previous = signal.signal(signal.SIGTERM, run._StopBeforeSuite(tmp_path))
    try:
        with pytest.raises(run._Stopped):
            thread.start()
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert ran.wait(10), "the thread never ran"
    thread.join(10)
    assert unraisable == []
