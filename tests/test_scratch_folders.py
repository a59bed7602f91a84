"""A run removes the scenarios' temporary folders, unless it is asked to keep them."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from cli_runs import start_cli

from reference_host.storage import DB_FILE

ONE_SCENARIO = ("-k", "pending and title and question")  # one scenario that passes


def _kept_after_a_run(tmp_path: Path, *options: str) -> Path:
    """Run one passing scenario with ``--keep`` and ``options``; the folder it kept."""
    run = start_cli(
        "run", "--driver", "inprocess", "--report", str(tmp_path / "r"), "-q", "--keep",
        *options, *ONE_SCENARIO,
    )  # fmt: skip
    done = run.finish(120)
    assert done.status == 0, done.output
    found = re.search(r"temporary folders kept in (\S+)", done.stdout)
    assert found, done.output
    return Path(found.group(1))


def test_keep_leaves_every_scenario_folder_with_its_data(tmp_path: Path) -> None:
    kept = _kept_after_a_run(tmp_path)
    try:
        databases = list((kept / "scenarios").rglob(DB_FILE))
        assert databases, sorted(str(p) for p in kept.rglob("*"))
    finally:
        shutil.rmtree(kept, ignore_errors=True)


def test_without_keep_nothing_is_left_in_the_temporary_folder(tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    run = start_cli(
        "run", "--driver", "inprocess", "--report", str(tmp_path / "r"), "-q", *ONE_SCENARIO,
        env={"TMPDIR": str(scratch)},
    )  # fmt: skip
    done = run.finish(120)
    assert done.status == 0, done.output
    assert "kept in" not in done.stdout
    assert sorted(p.name for p in scratch.iterdir()) == []


def test_scratch_dir_holds_the_scenario_folders(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"  # created by the run
    kept = _kept_after_a_run(tmp_path, "--scratch-dir", str(scratch))
    assert kept.parent == scratch.resolve()
    assert list((kept / "scenarios").rglob(DB_FILE)), sorted(str(p) for p in kept.rglob("*"))
