"""``python -m reference_host --data-dir DIR [--conformance]``."""

from __future__ import annotations

import sys

from reference_host.server import serve


def main() -> int:
    """Serve protocol v9 on this process's stdin and stdout."""
    return serve(sys.argv[1:], sys.stdin.buffer, sys.stdout.buffer, sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
