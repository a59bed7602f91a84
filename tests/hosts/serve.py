"""Serve protocol v9 as one variant of the reference host.

``python tests/hosts/serve.py VARIANT --data-dir DIR --conformance``, or in-process as
``--host-module hosts.serve:serve_variant`` with the variant named in ``PI_HOST_VARIANT``
(and ``tests/`` on ``PYTHONPATH``). ``serve.py from-env`` serves the variant named in
``PI_HOST_VARIANT`` (empty: the unpatched host); see ``hosts/variant_per_scenario.py``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO, TextIO

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hosts.catalog import load_all
from hosts.registry import FROM_ENV, VARIANT_VARIABLE, VARIANTS
from reference_host.server import serve


def main(argv: list[str]) -> int:
    """Apply the named variant's patch and serve on stdio."""
    load_all()
    if argv and argv[0] == FROM_ENV:
        named = os.environ.get(VARIANT_VARIABLE, "")
        if not named:  # this scenario runs the unpatched host
            return serve(argv[1:], sys.stdin.buffer, sys.stdout.buffer, sys.stderr)
        argv = [named, *argv[1:]]
    if not argv or argv[0] not in VARIANTS:
        names = "|".join(sorted(VARIANTS))
        print(f"usage: serve.py {{{names}}} --data-dir DIR [--conformance]", file=sys.stderr)
        return 2
    VARIANTS[argv[0]]()
    return serve(argv[1:], sys.stdin.buffer, sys.stdout.buffer, sys.stderr)


_applied: list[str] = []


def serve_variant(argv: Sequence[str], stdin: BinaryIO, stdout: BinaryIO, stderr: TextIO) -> int:
    """The in-process ``serve`` of the variant named in ``PI_HOST_VARIANT``, patched once."""
    name = os.environ.get(VARIANT_VARIABLE, "")
    if not _applied:
        load_all()
        VARIANTS[name]()
        _applied.append(name)
    assert _applied == [name], f"this process already serves variant {_applied[0]!r}"
    return serve(argv, stdin, stdout, stderr)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
