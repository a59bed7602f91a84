"""Every step text is defined once: a second definition silently replaces the first."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

STEPS = Path(__file__).resolve().parent.parent / "conformance" / "steps"


def _step_texts(module: Path) -> list[tuple[str, str]]:
    """(keyword, text) of every step decorator in ``module``."""
    found: list[tuple[str, str]] = []
    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            continue
        if node.func.id not in {"given", "when", "then"} or not node.args:
            continue
        first = node.args[0]
        if isinstance(first, ast.Call) and first.args:  # parsers.parse("...")
            first = first.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            found.append((node.func.id, first.value))
    return found


def test_no_step_text_is_defined_twice() -> None:
    where: dict[tuple[str, str], list[str]] = defaultdict(list)
    for module in sorted(STEPS.glob("*.py")):
        for step in _step_texts(module):
            where[step].append(module.name)
    assert len(where) > 100, "the scan found too few steps to be reading the step modules"
    twice = {f"{k} {t!r}": files for (k, t), files in where.items() if len(files) > 1}
    assert not twice, f"step texts defined more than once: {twice}"
