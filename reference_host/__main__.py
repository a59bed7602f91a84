"""``python -m reference_host --data-dir DIR [--conformance]``."""

from __future__ import annotations

import contextlib
import os
import sys

from reference_host.server import serve


def main() -> int:
    """Serve protocol v9 on this process's stdin and stdout."""
    return serve(sys.argv[1:], sys.stdin.buffer, sys.stdout.buffer, sys.stderr)


def run() -> None:
    """Serve, then exit at once: the stdin reader thread may still be blocked in a read
    (after SIGTERM), and a normal interpreter shutdown would wait on its buffer lock."""
    status = main()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # the reader may have gone away
            stream.flush()
    os._exit(status)


if __name__ == "__main__":
    run()
