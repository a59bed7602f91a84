"""The expectations file: known failures a CI owner accepts for now.

```toml
[expected_failures]
requirements = ["R4.10"]   # excuses only failures blamed on R4.10
scenarios = ["approval.feature: Two approvals sent at once: exactly one wins"]
```

Entries are exact: a scenario entry is a stable scenario id, a requirement entry a
requirement ID of the catalog. A requirement entry excuses a failed scenario only when
every requirement its failure blames is listed, so it cannot hide a regression elsewhere
in a scenario that touches several clauses.
"""

from __future__ import annotations

import tomllib
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

_TOP = "expected_failures"
_KEYS = {"scenarios", "requirements"}


class ExpectationsError(ValueError):
    """The expectations file cannot be used; the message says why in one line."""


@dataclass(frozen=True)
class Expectations:
    """Known failures: exact scenario ids and requirement IDs."""

    scenarios: frozenset[str] = frozenset()
    requirements: frozenset[str] = frozenset()

    @classmethod
    def load(
        cls,
        path: Path | None,
        known_scenarios: Collection[str],
        known_requirements: Collection[str],
    ) -> Expectations:
        """Read and validate a file; every entry must name something that exists."""
        if path is None:
            return cls()
        try:
            with path.open("rb") as handle:
                data = tomllib.load(handle)
        except FileNotFoundError as exc:
            raise ExpectationsError(f"{path} does not exist") from exc
        except OSError as exc:
            raise ExpectationsError(f"{path} cannot be read: {exc.strerror}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ExpectationsError(f"{path} is not valid TOML: {exc}") from exc
        extra = set(data) - {_TOP}
        if extra:
            raise ExpectationsError(
                f"{path}: unknown table(s) or key(s) {sorted(extra)}; "
                f"the file holds one table, [{_TOP}]"
            )
        table = data.get(_TOP, {})
        if not isinstance(table, dict):
            raise ExpectationsError(f"{path}: {_TOP} must be a table, [{_TOP}]")
        if set(table) - _KEYS:
            raise ExpectationsError(
                f"{path}: unknown key(s) {sorted(set(table) - _KEYS)} in [{_TOP}]; "
                "it takes only 'scenarios' and 'requirements' lists"
            )
        scenarios = _strings(path, table, "scenarios")
        requirements = _strings(path, table, "requirements")
        unknown_scenarios = sorted(set(scenarios) - set(known_scenarios))
        if unknown_scenarios:
            raise ExpectationsError(
                f"{path}: unknown scenario id(s) {unknown_scenarios}; "
                "list them with 'pi-conformance scenarios'"
            )
        unknown_requirements = sorted(set(requirements) - set(known_requirements))
        if unknown_requirements:
            raise ExpectationsError(
                f"{path}: unknown requirement ID(s) {unknown_requirements}; "
                "list them with 'pi-conformance requirements'"
            )
        return cls(frozenset(scenarios), frozenset(requirements))

    def excuses(self, scenario_id: str, blamed: Collection[str]) -> bool:
        """Whether a failure of this scenario, blaming ``blamed``, was expected."""
        if scenario_id in self.scenarios:
            return True
        return bool(blamed) and set(blamed) <= self.requirements

    @property
    def empty(self) -> bool:
        """True when nothing is expected to fail."""
        return not self.scenarios and not self.requirements


def _strings(path: Path, table: dict[str, object], key: str) -> list[str]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ExpectationsError(f"{path}: '{key}' must be a list of strings")
    return list(value)
