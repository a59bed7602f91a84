"""Serve protocol v9 as one variant of the reference host.

``python tests/hosts/serve.py VARIANT --data-dir DIR --conformance``, or in-process as
``--host-module hosts.serve:serve_variant`` with the variant named in ``PI_HOST_VARIANT``
(and ``tests/`` on ``PYTHONPATH``). ``serve.py from-env`` serves the variant named in
``PI_HOST_VARIANT`` (empty: the unpatched host); see ``hosts/variant_per_scenario.py``.
``VARIANT`` may name several variants joined by commas: a composite host applies them all.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO, TextIO

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hosts.catalog import load_all, load_defining
from hosts.registry import COMPOSED, FROM_ENV, VARIANT_VARIABLE, VARIANTS, apply
from reference_host.server import serve


def main(argv: list[str]) -> int:
    """Apply the named variant's patch and serve on stdio."""
    if argv and argv[0] == FROM_ENV:
        named = os.environ.get(VARIANT_VARIABLE, "")
        if not named:  # this scenario runs the unpatched host
            return serve(argv[1:], sys.stdin.buffer, sys.stdout.buffer, sys.stderr)
        argv = [named, *argv[1:]]
    if argv:
        load_defining(argv[0].split(COMPOSED))
    if not argv or not all(name in VARIANTS for name in argv[0].split(COMPOSED)):
        load_all()
        names = "|".join(sorted(VARIANTS))
        print(f"usage: serve.py {{{names}}}[,...] --data-dir DIR [--conformance]", file=sys.stderr)
        return 2
    apply(argv[0])
    return serve(argv[1:], sys.stdin.buffer, sys.stdout.buffer, sys.stderr)


_applied: list[str] = []


def serve_variant(argv: Sequence[str], stdin: BinaryIO, stdout: BinaryIO, stderr: TextIO) -> int:
    """The in-process ``serve`` of the variant (or composite) named in ``PI_HOST_VARIANT``,
    patched once."""
    name = os.environ.get(VARIANT_VARIABLE, "")
    if not _applied:
        load_defining(name.split(COMPOSED))
        apply(name)
        _applied.append(name)
    assert _applied == [name], f"this process already serves variant {_applied[0]!r}"
    return serve(argv, stdin, stdout, stderr)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
