"""Serve protocol v9 as one variant of the reference host.

``python tests/hosts/serve.py VARIANT --data-dir DIR --conformance``, or in-process as
``--host-module hosts.serve:serve_variant`` with the variant named in ``PI_HOST_VARIANT``
(and ``tests/`` on ``PYTHONPATH``). ``serve.py from-env`` serves the variant named in
``PI_HOST_VARIANT`` (empty: the unpatched host); see ``hosts/variant_per_scenario.py``.
``VARIANT`` may name several variants joined by commas: a composite host applies them all.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO, TextIO

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import reference_host
from conformance.drivers import IN_PROCESS_HOST_THREAD
from hosts.catalog import load_all, load_and_apply, load_defining
from hosts.registry import COMPOSED, FROM_ENV, VARIANT_VARIABLE, VARIANTS, apply, undo_all
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
    apply(argv[0])  # its modules were loaded above
    return serve(argv[1:], sys.stdin.buffer, sys.stdout.buffer, sys.stderr)


_applied: list[str] = []


def serve_variant(argv: Sequence[str], stdin: BinaryIO, stdout: BinaryIO, stderr: TextIO) -> int:
    """The in-process ``serve`` of the variant (or composite) named in ``PI_HOST_VARIANT``,
    patched once."""
    name = os.environ.get(VARIANT_VARIABLE, "")
    if not _applied:
        load_and_apply(name)
        _applied.append(name)
    assert _applied == [name], f"this process already serves variant {_applied[0]!r}"
    return serve(argv, stdin, stdout, stderr)


_serving = [""]  # the variant the hosts of this process serve now ("": none)
_pristine: dict[str, int] = {}  # what the reference host's modules hold, unpatched


def serve_scenario_variant(
    argv: Sequence[str], stdin: BinaryIO, stdout: BinaryIO, stderr: TextIO
) -> int:
    """The in-process ``serve`` of the variant named in ``PI_HOST_VARIANT`` now: a new name
    (the next scenario's, ``hosts/variant_per_scenario.py``) undoes the variant before it,
    checks that it left nothing behind, and applies the new one."""
    name = os.environ.get(VARIANT_VARIABLE, "")
    if name != _serving[0]:
        alive = [
            t
            for t in threading.enumerate()
            if t.name == IN_PROCESS_HOST_THREAD and t is not threading.current_thread()
        ]
        if alive:
            raise RuntimeError(f"a host of {_serving[0]!r} still runs: its variant stays")
        undo_all()
        _check_nothing_left(_serving[0])
        _serving[0] = name
        if name:
            load_and_apply(name)
    return serve(argv, stdin, stdout, stderr)


def _check_nothing_left(variant: str) -> None:
    """Fail when ``variant`` changed the reference host other than through ``patch``."""
    if not _pristine:  # the baseline covers every module, not only those loaded so far
        for module in pkgutil.walk_packages(reference_host.__path__, "reference_host."):
            if not module.name.endswith(".__main__"):
                importlib.import_module(module.name)
    now = _fingerprint()
    changed = sorted(key for key, held in _pristine.items() if now.get(key, held) != held)
    if changed:
        raise RuntimeError(f"variant {variant!r} changed {changed} outside registry.patch")
    for key, held in now.items():
        _pristine.setdefault(key, held)


# Constants a module or class holds (named in capitals, as a limit or a default is): a
# variant that assigns one bypassed registry.patch. Other names hold state a run changes
# (a count of commands starting, a cache), and containers change in place.
_CONSTANT_TYPES = (int, float, str, bytes, tuple, frozenset, type(None))


def _held_by_code(name: str, value: object) -> bool:
    if callable(value) or isinstance(value, (staticmethod, classmethod, property)):
        return True
    return isinstance(value, _CONSTANT_TYPES) and name.isupper()


def _fingerprint() -> dict[str, int]:
    """The identity of every function, class, method and constant the reference host's
    modules and classes hold: what variants replace (its data, such as caches, changes as
    it runs)."""
    found: dict[str, int] = {}
    for module_name, module in list(sys.modules.items()):
        if module_name.split(".")[0] != "reference_host":
            continue
        for attribute, value in list(vars(module).items()):
            if _held_by_code(attribute, value):
                found[f"{module_name}.{attribute}"] = id(value)
            if isinstance(value, type) and value.__module__ == module_name:
                for member, held in list(vars(value).items()):
                    if _held_by_code(member, held):
                        found[f"{module_name}:{value.__qualname__}.{member}"] = id(held)
    return found


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
