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


def test_the_listed_lookup_finds_what_pytest_bdds_own_loop_finds(monkeypatch: Any) -> None:
    """Same definitions in the same order: kind, kind-less steps, parsers, visibility."""

    class Parser:
        def __init__(self, text: str) -> None:
            self.text = text

        def is_matching(self, name: str) -> bool:
            return name.startswith(self.text)

    def context(kind: str | None, text: str) -> Any:
        return SimpleNamespace(type=kind, parser=Parser(text))

    funcs = {name: (lambda: None) for name in ("g1", "g2", "w1", "any", "plain", "hidden")}
    registry = {
        funcs["g1"]: context("given", "a connected"),
        funcs["g2"]: context("given", "a connected client"),
        funcs["w1"]: context("when", "a connected"),
        funcs["any"]: context(None, "a"),
        funcs["hidden"]: context("given", "a"),
    }
    visible = {"g1", "g2", "w1", "any", "plain"}  # "plain" is a fixture but not a step

    def names(fixturemanager: Any) -> list[str]:
        return [*funcs, "unknown"]

    def defs(fixturemanager: Any, name: str, node: Any) -> list[Any] | None:
        if name not in visible or name == "unknown":
            return None
        return [SimpleNamespace(func=funcs[name], name=name)]

    monkeypatch.setattr(step_lookup._SCENARIO, "get_fixture_names", names)
    monkeypatch.setattr(step_lookup._SCENARIO, "getfixturedefs", defs)
    monkeypatch.setattr(step_lookup._SCENARIO, "step_function_context_registry", registry)
    assert step_lookup.ORIGINAL is not None
    listed = step_lookup._VisibleSteps(names, defs, registry)
    node = SimpleNamespace(path=Path("a.py"), nodeid="a.py::t")
    for kind in ("given", "when", "then"):
        for text in ("a connected client", "a connected host", "another", "b"):
            step = SimpleNamespace(type=kind, name=text)
            own = [d.name for d in step_lookup.ORIGINAL(step=step, fixturemanager=1, node=node)]
            ours = [d.name for d in listed(step=step, fixturemanager=1, node=node)]
            assert ours == own, (kind, text)
    first = SimpleNamespace(type="given", name="a connected client")
    assert [d.name for d in listed(step=first, fixturemanager=1, node=node)] == [
        "g1",
        "g2",
        "any",
    ]


def test_the_installed_memo_lists_the_visible_steps_when_pytest_bdd_has_the_helpers() -> None:
    step_lookup.install()
    installed = step_lookup._SCENARIO.find_fixturedefs_for_step
    assert isinstance(installed.memoizes, step_lookup._VisibleSteps)
