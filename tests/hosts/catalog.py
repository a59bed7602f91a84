"""Every variant module and every case, collected from ``broken/`` and ``allowed/``."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from hosts import allowed, broken
from hosts.registry import AllowedCase, BrokenCase


def _modules(package: ModuleType) -> list[ModuleType]:
    return [
        importlib.import_module(f"{package.__name__}.{info.name}")
        for info in pkgutil.iter_modules(package.__path__)
    ]


def load_all() -> None:
    """Import every variant module, which registers its variants."""
    _modules(broken)
    _modules(allowed)


def broken_cases() -> list[BrokenCase]:
    """Every broken-host case of every area module."""
    return [case for module in _modules(broken) for case in getattr(module, "CASES", [])]


def allowed_cases() -> list[AllowedCase]:
    """Every allowed-variation case of every area module."""
    return [case for module in _modules(allowed) for case in getattr(module, "CASES", [])]
