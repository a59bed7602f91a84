"""What the subcommands share: exit statuses and argument checks that fail in one line."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from conformance.scenarios import areas

EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_USAGE = 2
EXIT_PREFLIGHT = 3
EXIT_HARNESS = 4
EXIT_MAX_TIME = 124
EXIT_SIGINT = 130
EXIT_SIGTERM = 143


class UsageProblem(ValueError):
    """A bad argument: the message names the option, what is wrong and what is valid."""


def positive_seconds(text: str) -> float:
    """argparse type: a positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number; give a positive number of seconds"
        ) from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not positive; give a positive number of seconds"
        )
    return value


def non_negative_count(text: str) -> int:
    """argparse type: a whole number of at least 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a whole number; give 0 or more"
        ) from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative; give 0 or more")
    return value


DEFAULT_UNSERVED_LIMIT = 5  # ``pi-conformance run --unserved-limit``

AUTO_WORKERS = 0  # what ``-n auto`` parses to; :func:`auto_workers` resolves it per driver


def auto_workers(driver_name: str) -> int:
    """The workers ``-n auto`` means: one per core (at least 2), one more in-process.

    An in-process worker runs its host and the harness under one interpreter lock, so it
    uses at most one core, and that core idles while the host waits on a timer or the
    disk; a third worker on two cores fills those gaps (docs/performance.md).
    """
    cores = max(2, os.cpu_count() or 2)
    return cores + 1 if driver_name == "inprocess" else cores


def workers(text: str) -> int:
    """argparse type: a positive worker count, or 'auto' (:data:`AUTO_WORKERS`)."""
    if text == "auto":
        return AUTO_WORKERS
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number; give a number of workers of at least 1, or 'auto'"
        ) from None
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r} is too few; give a number of workers of at least 1, or 'auto'"
        )
    return value


def writable_folder(path: Path, option: str, purpose: str = "the reports") -> Path:
    """Create ``path`` if needed and prove a file can be written in it."""
    resolved = path.expanduser().resolve()
    if resolved.exists() and not resolved.is_dir():
        raise UsageProblem(f"{option}: {str(path)!r} is a file; give a folder for {purpose}")
    try:
        resolved.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=resolved, prefix=".pi-write-check-"):
            pass
    except NotADirectoryError:
        raise UsageProblem(
            f"{option}: cannot create {str(path)!r}: a folder on its path is a file; "
            "give a folder that can be created and written"
        ) from None
    except OSError as problem:
        reason = problem.strerror or str(problem)
        raise UsageProblem(
            f"{option}: cannot write {purpose} into {str(path)!r}: {reason}; "
            "give a folder that can be created and written"
        ) from None
    return resolved


def checked_areas(text: str | None) -> list[str] | None:
    """The areas of an ``--areas`` value (None when not given); unknown areas are refused."""
    if text is None:
        return None
    known = areas()
    wanted = [a.strip() for a in text.split(",") if a.strip()]
    unknown = [a for a in wanted if a not in known]
    if unknown or not wanted:
        raise UsageProblem(
            f"--areas: unknown area(s) {', '.join(unknown) or '(none given)'}; "
            f"known areas: {', '.join(known)}"
        )
    return wanted
