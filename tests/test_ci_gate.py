"""The CI gate runs exactly the test command the README gives."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _setup_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Set-up on a fresh machine", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```sh\n(.*?)```", section, re.S)]


def test_the_readme_gives_two_set_up_commands() -> None:
    commands = _setup_commands()
    assert len(commands) == 2, commands
    assert all("\n" not in command for command in commands), commands
    assert "conformance run" in commands[0] and "tox" in commands[1], commands


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    gate = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert _setup_commands()[1] in gate, "the CI gate no longer runs the README's test command"
