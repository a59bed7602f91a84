"""The benchmarks refuse a bad argument in one line with status 2, before they measure."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("benchmarks.submit_plan", "--dir", "{missing}"), "is not an existing folder"),
        (("benchmarks.submit_plan", "--dir", "{file}"), "is not an existing folder"),
        (("benchmarks.submit_plan", "--rounds", "0"), "'0' is less than 1"),
        (("benchmarks.startup", "--rounds", "many"), "'many' is not a whole number"),
        (("benchmarks.recovery", "--rows", "-5"), "'-5' is less than 1"),
        (("benchmarks.migration", "--rows", "1e6"), "'1e6' is not a whole number"),
        (("benchmarks.harness_overhead", "--areas", "nowhere"), "unknown area(s) nowhere"),
    ],
    ids=[
        "dir-missing",
        "dir-is-file",
        "rounds-zero",
        "rounds-word",
        "rows-negative",
        "rows-float",
        "unknown-area",
    ],
)
def test_bad_argument_is_refused(tmp_path: Path, args: tuple[str, ...], says: str) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("x", encoding="utf-8")
    filled = [a.format(missing=tmp_path / "missing", file=a_file) for a in args]
    finished = _run(*filled)
    assert finished.returncode == 2, finished.stderr
    assert says in finished.stderr
    assert "Traceback" not in finished.stderr
    assert finished.stdout == ""
