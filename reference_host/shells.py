"""The shell catalog: the shells present on this machine, each with a stable id."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

_KNOWN = ("sh", "bash", "dash", "zsh", "fish", "ksh", "pwsh")
_KINDS = {"sh": "posix-sh", "dash": "posix-sh", "ksh": "posix-sh", "bash": "bash"}
"""What each shell speaks, as announced in ``Shell.kind``; the rest are "other"."""


@dataclass(frozen=True)
class Shell:
    """One shell of the catalog."""

    shell_id: str
    name: str
    path: str

    @property
    def kind(self) -> str:
        """posix-sh, bash or other."""
        return _KINDS.get(self.name, "other")

    def to_wire(self) -> dict[str, str]:
        """The protocol ``Shell`` object."""
        return {"shellId": self.shell_id, "name": self.name, "path": self.path, "kind": self.kind}


@cache
def catalog() -> tuple[Shell, ...]:
    """Every known shell found on PATH, in a fixed order."""
    import shutil  # only when the catalog is first needed: it is slow to import

    found: list[Shell] = []
    for name in _KNOWN:
        location = shutil.which(name)
        if location is not None:
            found.append(Shell(name, name, str(Path(location).resolve())))
    return tuple(found)


def find(shell_id: str) -> Shell | None:
    """The catalog entry with ``shell_id``, or None."""
    return next((shell for shell in catalog() if shell.shell_id == shell_id), None)


def fallback_default() -> Shell | None:
    """The shell used when no default was persisted: sh when present, else the first."""
    return find("sh") or (catalog()[0] if catalog() else None)
