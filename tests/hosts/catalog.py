"""Every variant module and every case, collected from ``broken/`` and ``allowed/``."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

from hosts import allowed, broken
from hosts.registry import COMPOSED, AllowedCase, BrokenCase, apply


def _modules(package: ModuleType) -> list[ModuleType]:
    return [
        importlib.import_module(f"{package.__name__}.{info.name}")
        for info in pkgutil.iter_modules(package.__path__)
    ]


def load_all() -> None:
    """Import every variant module, which registers its variants."""
    _modules(broken)
    _modules(allowed)


def load_defining(names: Iterable[str]) -> None:
    """Import only the variant modules whose source registers one of ``names`` (as
    ``@variant("name")``), or every module when a name is not found that way: a host
    process imports what it serves, not all the variants."""
    wanted = set(names)
    found: set[str] = set()
    for package in (broken, allowed):
        for info in pkgutil.iter_modules(package.__path__):
            source = (Path(package.__path__[0]) / f"{info.name}.py").read_text(encoding="utf-8")
            defined = {name for name in wanted if f'@variant("{name}")' in source}
            if defined:
                importlib.import_module(f"{package.__name__}.{info.name}")
                found |= defined
    if found != wanted:
        load_all()


def load_and_apply(names: str) -> None:
    """Import the modules of the variants ``names`` (one, or a composite joined by
    ``COMPOSED``) and apply them."""
    load_defining(names.split(COMPOSED))
    apply(names)


def broken_cases() -> list[BrokenCase]:
    """Every broken-host case of every area module."""
    return [case for module in _modules(broken) for case in getattr(module, "CASES", [])]


def allowed_cases() -> list[AllowedCase]:
    """Every allowed-variation case of every area module."""
    return [case for module in _modules(allowed) for case in getattr(module, "CASES", [])]
