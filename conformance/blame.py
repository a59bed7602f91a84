"""Which requirement a failed check blames.

A step definition declares the requirements its checks verify with :func:`verifies`; a
check inside a step can name its own with :func:`blame`. When a check fails, only those
requirements are reported failed, not every tag of the scenario: a wrong ``byteSize`` is
blamed on the clause about recorded sizes, not on the clauses the scenario also touches.
A step that declares nothing blames the scenario's tags.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from typing import TypeVar

from conformance.requirements import REQUIREMENT_TAG

F = TypeVar("F", bound=Callable[..., object])

_ATTRIBUTE = "__pi_verifies__"


class CheckFailed(AssertionError):
    """A check failed; ``requirements`` are the IDs it verifies."""

    def __init__(self, message: str, requirements: Collection[str]) -> None:
        super().__init__(message)
        self.requirements = tuple(requirements)


def _validated(ids: tuple[str, ...]) -> tuple[str, ...]:
    bad = [i for i in ids if not REQUIREMENT_TAG.match(i)]
    if bad or not ids:
        raise ValueError(f"not requirement IDs: {bad or 'none given'}")
    return ids


def verifies(*requirement_ids: str) -> Callable[[F], F]:
    """Declare the requirements a step's checks verify (place it under the step decorator)."""
    ids = _validated(requirement_ids)

    def mark(function: F) -> F:
        setattr(function, _ATTRIBUTE, ids)
        return function

    return mark


def declared_requirements(function: object) -> tuple[str, ...]:
    """What :func:`verifies` declared for a step function (empty when nothing)."""
    found = getattr(function, _ATTRIBUTE, ())
    return tuple(found) if isinstance(found, tuple) else ()


@contextmanager
def blame(*requirement_ids: str) -> Iterator[None]:
    """Blame the checks inside the block on ``requirement_ids``."""
    ids = _validated(requirement_ids)
    try:
        yield
    except CheckFailed:
        raise
    except AssertionError as failure:
        raise CheckFailed(str(failure), ids) from failure


def blamed_requirements(
    failure: BaseException | None, step_function: object, scenario_tags: Collection[str]
) -> list[str]:
    """The requirements a failed check is counted against.

    The check's own IDs come first (a :class:`CheckFailed`, then the step's declaration),
    kept to those the scenario is tagged with when they overlap; with nothing declared the
    scenario's tags are blamed.
    """
    declared: tuple[str, ...] = ()
    if isinstance(failure, CheckFailed):
        declared = failure.requirements
    if not declared:
        declared = declared_requirements(step_function)
    tags = [t for t in scenario_tags if REQUIREMENT_TAG.match(t)]
    if not declared:
        return sorted(set(tags))
    overlap = [i for i in declared if i in tags]
    return sorted(set(overlap or declared))
