"""The suite's pytest options, read once into a typed value, and shard selection."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

import pytest

DEFAULT_STEP_TIMEOUT = 10.0
DEFAULT_SCENARIO_TIMEOUT = 60.0
# the feature files pi-conformance run wants collected, comma-separated (see suite/)
FEATURES_ENV = "PI_CONFORMANCE_FEATURES"


@dataclass(frozen=True)
class RunOptions:
    """What the command line asked of the suite."""

    host_cmd: str | None
    host_module: str | None
    driver: str
    step_timeout: float
    scenario_timeout: float
    areas: frozenset[str] | None
    shard: tuple[int, int] | None
    require_full: bool
    chosen: frozenset[str] | None = None  # exact scenario ids, when pi-conformance selected
    left_out: dict[str, str] | None = None  # id -> why it is not run

    @property
    def crash_capable(self) -> bool:
        """Whether the driver can stop a host abruptly."""
        return self.driver == "subprocess"

    @property
    def host_label(self) -> str:
        """How reports name the host."""
        if self.host_module:
            return f"python host {self.host_module}"
        return self.host_cmd or "bundled reference host"

    @classmethod
    def from_config(cls, config: pytest.Config) -> RunOptions:
        """Read the options (cached on the config)."""
        cached: RunOptions | None = config.stash.get(_KEY, None)
        if cached is not None:
            return cached
        host_module = config.getoption("--host-module")
        driver = config.getoption("--driver") or ("inprocess" if host_module else "subprocess")
        areas = config.getoption("--conformance-areas")
        shard = config.getoption("--conformance-shard")
        chosen: frozenset[str] | None = None
        left_out: dict[str, str] | None = None
        select_file = config.getoption("--conformance-select")
        if select_file:
            data = json.loads(Path(select_file).read_text(encoding="utf-8"))
            chosen = frozenset(data["chosen"])
            left_out = dict(data["left_out"])
        options = cls(
            host_cmd=config.getoption("--host-cmd"),
            host_module=host_module,
            driver=driver,
            step_timeout=float(config.getoption("--step-timeout")),
            scenario_timeout=float(config.getoption("--scenario-timeout")),
            areas=frozenset(a.strip() for a in areas.split(",") if a.strip()) if areas else None,
            shard=parse_shard(shard) if shard else None,
            require_full=bool(config.getoption("--require-full")),
            chosen=chosen,
            left_out=left_out,
        )
        config.stash[_KEY] = options
        return options


_KEY = pytest.StashKey[RunOptions]()


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/4"`` → ``(2, 4)``; a ValueError names what is wrong."""
    index_text, _, total_text = text.partition("/")
    try:
        index, total = int(index_text), int(total_text)
    except ValueError:
        raise ValueError(f"{text!r} is not I/N (for example 1/4)") from None
    if total < 1 or not 1 <= index <= total:
        raise ValueError(f"{text!r}: I must be between 1 and N, and N at least 1")
    return index, total


@cache
def _durations() -> dict[str, float]:
    """Typical seconds per scenario id, shipped with the suite, for balanced shards."""
    text = resources.files("conformance.suite").joinpath("durations.json").read_text("utf-8")
    data: dict[str, float] = json.loads(text)
    return data


def _typical(durations: dict[str, float]) -> float:
    """The median shipped duration: what a scenario the file does not know is taken to cost."""
    return sorted(durations.values())[len(durations) // 2] if durations else 1.0


def longest_first(ids: Sequence[str]) -> list[str]:
    """``ids`` ordered by typical duration, longest first (ties by id).

    Parallel workers that take the longest scenarios first end together: the last
    scenario of the run is a short one, not a slow one that started when the others
    were already done.
    """
    durations = _durations()
    default = _typical(durations)
    return sorted(ids, key=lambda i: (-durations.get(i, default), i))


def shard_of(ids: Sequence[str], index: int, total: int) -> set[str]:
    """The ids of shard ``index`` of ``total``: deterministic, balanced by duration.

    Longest first, each scenario goes to the shard with the least time so far (ties by
    shard number), so the same selection always splits the same way.
    """
    durations = _durations()
    default = _typical(durations)
    loads = [0.0] * total
    chosen: set[str] = set()
    for scenario in longest_first(sorted(set(ids))):
        target = min(range(total), key=lambda k: (loads[k], k))
        loads[target] += durations.get(scenario, default)
        if target == index - 1:
            chosen.add(scenario)
    return chosen
