"""A memo for pytest-bdd's step lookup, which otherwise dominates the harness's own CPU.

For every step of every scenario, pytest-bdd walks all of the session's fixtures (some
600 here, most of them step definitions), asks pytest which are visible to the test and
tries each one's parser on the step's text. The answer depends only on the step's kind
and text and on where the test is defined, and no step definition is added once the
run has started, so it is computed once per (test file, kind, text) and reused. Measured
in-process, the lookup was about a third of the pytest process's main thread.

A text seen for the first time no longer walks every fixture either: the step
definitions visible from a test file are listed once, with pytest-bdd's own helpers, and
only their parsers are tried. A pytest-bdd without those helpers gets the plain memo.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

Lookup = Callable[..., Iterable[Any]]
# by import path: the package's own ``scenario`` attribute is a function of that name
_SCENARIO = importlib.import_module("pytest_bdd.scenario")
_ATTRIBUTE = "find_fixturedefs_for_step"
_HELPERS = ("get_fixture_names", "getfixturedefs", "step_function_context_registry")
# pytest-bdd's own lookup, as imported, before install() replaces it
ORIGINAL: Lookup | None = getattr(_SCENARIO, _ATTRIBUTE, None)


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


class _VisibleSteps:
    """pytest-bdd's lookup over the step definitions visible from a test file, listed once.

    It yields what pytest-bdd's own loop yields, in the same order: the fixture
    definitions visible to the node whose step function has the step's kind (or none)
    and whose parser matches the step's text.
    """

    def __init__(
        self, names: Callable[..., Iterable[str]], defs: Callable[..., Any], registry: Any
    ) -> None:
        self._names = names
        self._defs = defs
        self._registry = registry
        self._visible: dict[tuple[int, Path], tuple[tuple[Any, Any], ...]] = {}

    def _listed(self, fixturemanager: Any, node: Any) -> tuple[tuple[Any, Any], ...]:
        key = (id(fixturemanager), node.path)
        listed = self._visible.get(key)
        if listed is None:
            found = []
            for name in self._names(fixturemanager=fixturemanager):
                for fixturedef in self._defs(fixturemanager, name, node) or []:
                    context = self._registry.get(fixturedef.func)
                    if context is not None:
                        found.append((fixturedef, context))
            listed = self._visible[key] = tuple(found)
        return listed

    def __call__(self, step: Any, fixturemanager: Any, node: Any) -> Iterator[Any]:
        for fixturedef, context in self._listed(fixturemanager, node):
            if context.type is not None and context.type != step.type:
                continue
            if context.parser.is_matching(step.name):
                yield fixturedef


def memoized(find: Lookup) -> Lookup:
    """``find`` with its answers kept per (fixture manager, test file, step kind, text)."""
    return _Memo(find)


def install() -> None:
    """Memoize pytest-bdd's lookup, once; a pytest-bdd without it runs unchanged."""
    find = getattr(_SCENARIO, _ATTRIBUTE, None)
    if find is None or isinstance(find, _Memo):
        return
    if all(hasattr(_SCENARIO, helper) for helper in _HELPERS):
        find = _VisibleSteps(
            _SCENARIO.get_fixture_names,
            _SCENARIO.getfixturedefs,
            _SCENARIO.step_function_context_registry,
        )
    setattr(_SCENARIO, _ATTRIBUTE, memoized(find))
