"""The memo of pytest-bdd's step lookup answers as the lookup does, once per key."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from conformance import step_lookup


def test_each_step_is_looked_up_once_per_test_file_kind_and_text() -> None:
    calls: list[tuple[Path, str, str]] = []

    def find(step: Any, fixturemanager: Any, node: Any) -> list[str]:
        calls.append((node.path, step.type, step.name))
        return [f"{node.path.name}:{step.type}:{step.name}"]

    find_once = step_lookup.memoized(find)
    manager = object()
    here, there = SimpleNamespace(path=Path("a.py")), SimpleNamespace(path=Path("b.py"))
    given = SimpleNamespace(type="given", name="a connected client")
    then = SimpleNamespace(type="then", name="a connected client")
    answers = [
        find_once(step=given, fixturemanager=manager, node=here),
        find_once(step=given, fixturemanager=manager, node=here),
        find_once(step=then, fixturemanager=manager, node=here),
        find_once(step=given, fixturemanager=manager, node=there),
    ]
    assert [list(a) for a in answers] == [
        ["a.py:given:a connected client"],
        ["a.py:given:a connected client"],
        ["a.py:then:a connected client"],
        ["b.py:given:a connected client"],
    ]
    assert len(calls) == 3


def test_the_suite_process_uses_the_memo() -> None:
    step_lookup.install()
    step_lookup.install()  # a second call does not wrap the memo again
    installed = step_lookup._SCENARIO.find_fixturedefs_for_step
    assert hasattr(installed, "memoizes")
    assert not hasattr(installed.memoizes, "memoizes")
