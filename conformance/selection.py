"""Which scenarios a run executes: areas, a keyword expression and a shard.

``pi-conformance`` computes the selection itself, from the Gherkin files, before any host
starts; the pytest run then executes exactly those scenario ids.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from _pytest.mark.expression import Expression

from conformance.options import shard_of
from conformance.scenarios import ScenarioInfo
from conformance.verdicts import NOT_EXPRESSIBLE_REASON


class SelectionError(ValueError):
    """A selection option is malformed; the message names the option."""


@dataclass(frozen=True)
class Selection:
    """The scenarios chosen to run, and those left out with the reason."""

    chosen: list[ScenarioInfo]
    left_out: dict[str, str]


def any_of(terms: Sequence[str]) -> str:
    """A ``-k`` expression true where any of ``terms`` is (each a word or an expression).

    pytest's parser nests every ``or`` one level deeper than the last, so a flat chain of a
    thousand terms is too deep to compile; halves nested in parentheses stay shallow."""
    unique = sorted(set(terms))
    if not unique:
        return ""

    def nested(low: int, high: int) -> str:
        if high - low == 1:
            return f"({unique[low]})"
        middle = (low + high) // 2
        return f"({nested(low, middle)} or {nested(middle, high)})"

    return nested(0, len(unique))


def compile_keyword(keyword: str) -> Expression:
    """Compile a ``-k`` expression (pytest syntax: words with and, or, not, parentheses)."""
    try:
        return Expression.compile(keyword)
    except SyntaxError as problem:
        raise SelectionError(
            f"-k: {keyword!r} is not a valid expression ({problem.msg}); use words joined by "
            "and, or, not and parentheses, as pytest -k does"
        ) from None


def _matches(expression: Expression, scenario: ScenarioInfo) -> bool:
    haystack = f"{scenario.id} {scenario.area} {' '.join(scenario.tags)}".lower()
    # Also match the names pytest shows (test function and example), as pytest -k does.
    flat = re.sub(r"\W", "", haystack.replace(" ", "_"))
    pytest_name = scenario.test_name.lower()

    def matcher(word: str, /, **_kwargs: str | int | bool | None) -> bool:
        needle = word.lower()
        return needle in haystack or needle in flat or needle in pytest_name

    return bool(expression.evaluate(matcher))


def select(
    universe: Sequence[ScenarioInfo],
    areas: Sequence[str] | None = None,
    keyword: str | None = None,
    shard: tuple[int, int] | None = None,
    crash_capable: bool = True,
) -> Selection:
    """Apply the options in order: driver, areas, keyword, shard."""
    expression = compile_keyword(keyword) if keyword else None
    left_out: dict[str, str] = {}
    chosen: list[ScenarioInfo] = []
    for scenario in universe:
        if scenario.subprocess_only and not crash_capable:
            left_out[scenario.id] = NOT_EXPRESSIBLE_REASON
        elif areas is not None and scenario.area not in areas:
            left_out[scenario.id] = "not in the selected areas"
        elif expression is not None and not _matches(expression, scenario):
            left_out[scenario.id] = "does not match -k"
        else:
            chosen.append(scenario)
    if shard is not None:
        wanted = shard_of([s.id for s in chosen], *shard)
        for scenario in chosen:
            if scenario.id not in wanted:
                left_out[scenario.id] = f"in another shard than {shard[0]}/{shard[1]}"
        chosen = [s for s in chosen if s.id in wanted]
    return Selection(chosen, left_out)
