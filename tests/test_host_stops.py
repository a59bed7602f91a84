"""A host that stops in the middle of a scenario is reported as stopped, exit status first.

The variants exit on purpose (tests/hosts/broken/wire.py): one while the harness waits for
the answer to a request, one while it waits for a notification. Either way the scenario is
``errored`` (never ``failed``, which would blame a requirement for a crash), its failure
kind is ``host-stopped``, and its message leads with the exit status.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hosts.runner import run_suite

CASES = [
    ("exits-on-prompt", "turn_boundaries", "second_prompt_during_a_turn", 7),
    ("exits-mid-turn", "sessions", "receives_the_key", 9),
]


@pytest.mark.parametrize(("variant", "areas", "keyword", "status"), CASES)
def test_a_host_that_exits_is_reported_as_stopped(
    tmp_path: Path, variant: str, areas: str, keyword: str, status: int
) -> None:
    # The exit is seen at once; the longer step timeout only keeps a host that starts slowly
    # on a loaded machine from reading as one that never answered the preflight.
    run = run_suite(tmp_path / "report", areas, keyword, variant, extra=("--timeout", "30"))
    assert run.status == 1, run.output
    errored = run.scenarios("errored")
    assert errored, f"expected an errored scenario:\n{run.output}"
    assert not run.scenarios("failed", "harness-error"), run.output
    for scenario in errored:
        failure = scenario["failure"]
        assert failure["kind"] == "host-stopped", failure
        assert failure["message"].startswith(f"the host exited with status {status}"), failure
        assert failure["message"].count(f"status {status}") == 1, failure["message"]
        assert failure["host_exit"]["status"] == status, failure
        assert failure["blamed"] == [], failure
        assert failure["transcript"], "the failure record carries no wire transcript"
