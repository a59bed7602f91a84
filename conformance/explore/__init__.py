"""A model-based explorer: random user action sequences against any host, ADR invariants
checked after every step, and a failure told as the shortest scenario that shows it."""

from conformance.explore.invariants import INVARIANTS, InvariantBrokenError
from conformance.explore.runner import (
    ExploreFailure,
    ExploreResult,
    ExploreSettings,
    explore,
)

__all__ = [
    "INVARIANTS",
    "ExploreFailure",
    "ExploreResult",
    "ExploreSettings",
    "InvariantBrokenError",
    "explore",
]
