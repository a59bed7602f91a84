"""Serve protocol v9 as one variant of the reference host.

``python tests/hosts/serve.py VARIANT --data-dir DIR --conformance``
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hosts.catalog import load_all
from hosts.registry import VARIANTS
from reference_host.server import serve


def main(argv: list[str]) -> int:
    """Apply the named variant's patch and serve on stdio."""
    load_all()
    if not argv or argv[0] not in VARIANTS:
        names = "|".join(sorted(VARIANTS))
        print(f"usage: serve.py {{{names}}} --data-dir DIR [--conformance]", file=sys.stderr)
        return 2
    VARIANTS[argv[0]]()
    return serve(argv[1:], sys.stdin.buffer, sys.stdout.buffer, sys.stderr)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
