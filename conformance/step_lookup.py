"""A memo for pytest-bdd's step lookup, which otherwise dominates the harness's own CPU.

For every step of every scenario, pytest-bdd walks all of the session's fixtures (some
600 here, most of them step definitions), asks pytest which are visible to the test and
tries each one's parser on the step's text. The answer depends only on the step's kind
and text and on where the test is defined, and no step definition is added once the
run has started, so it is computed once per (test file, kind, text) and reused. Measured
in-process, the lookup was about a third of the pytest process's main thread.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

Lookup = Callable[..., Iterable[Any]]
# by import path: the package's own ``scenario`` attribute is a function of that name
_SCENARIO = importlib.import_module("pytest_bdd.scenario")
_ATTRIBUTE = "find_fixturedefs_for_step"


class _Memo:
    """``find`` with its answers kept per (fixture manager, test file, step kind, text)."""

    def __init__(self, find: Lookup) -> None:
        self.memoizes = find
        self._answers: dict[tuple[int, Path, str | None, str], tuple[Any, ...]] = {}

    def __call__(self, step: Any, fixturemanager: Any, node: Any) -> tuple[Any, ...]:
        key = (id(fixturemanager), node.path, step.type, step.name)
        found = self._answers.get(key)
        if found is None:
            found = self._answers[key] = tuple(
                self.memoizes(step=step, fixturemanager=fixturemanager, node=node)
            )
        return found


def memoized(find: Lookup) -> Lookup:
    """``find`` with its answers kept per (fixture manager, test file, step kind, text)."""
    return _Memo(find)


def install() -> None:
    """Memoize pytest-bdd's lookup, once; a pytest-bdd without it runs unchanged."""
    find = getattr(_SCENARIO, _ATTRIBUTE, None)
    if find is not None and not isinstance(find, _Memo):
        setattr(_SCENARIO, _ATTRIBUTE, memoized(find))
