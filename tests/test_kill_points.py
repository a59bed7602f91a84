"""The kill-point campaign on a CI budget.

A fixed slice of ten kill points across every phase passes the reference host; the same
campaign, given each broken host's command line, reports the expected anomaly for every
run: recovery that leaves executions queued, an approve answered before it commits, a
replayed execution, an answer before recovery, and a command run again after the restart.
Hosts that take a freedom of the contract (whole provider replies, no fault points) pass.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hosts.catalog import load_all
from hosts.registry import VARIANTS

from conformance.killpoints import PHASES, Settings, run_campaign, summary

SERVE = Path(__file__).parent / "hosts" / "serve.py"
SLICE = Settings(runs=10, seed=20530, background=(0, 1))

BROKEN = [
    ("recovery-skips-executions", "execution-queued", "still-active"),
    ("approve-answers-before-commit", "execution-queued", "lost-write"),
    ("replays-queued-execution", "execution-queued", "replay"),
    ("answers-before-recovery", "execution-queued", "first-answer"),
    ("reruns-interrupted-command", "mid-command", "replay"),
]

ALLOWED = [
    ("non-streaming-provider", "plan-streaming"),
    ("no-fault-points", "execution-queued"),
]


def _variant(name: str, phase: str) -> Settings:
    """Two kill points of ``phase`` against a variant, started by its command line."""
    return Settings(
        runs=2,
        seed=53,
        phases=(phase,),
        host_cmd=(sys.executable, str(SERVE), name),
        background=(0, 0),
    )


def test_every_kill_point_variant_is_run_here() -> None:
    load_all()
    mine = {name for name, patch in VARIANTS.items() if patch.__module__.endswith(".killpoints")}
    assert mine, "no variant registered from hosts/broken/killpoints.py"
    assert mine <= {name for name, _phase, _kind in BROKEN}


def test_a_fixed_slice_across_every_phase_finds_no_anomaly() -> None:
    report = run_campaign(SLICE)
    assert {run.phase for run in report.results} == set(PHASES)
    assert not report.anomalous() and not report.errored(), summary(report, "the CI slice")


@pytest.mark.parametrize(("variant", "phase", "kind"), BROKEN, ids=[b[0] for b in BROKEN])
def test_the_campaign_catches_a_host_broken_across_a_crash(
    variant: str, phase: str, kind: str
) -> None:
    report = run_campaign(_variant(variant, phase))
    assert not report.errored(), summary(report, variant)
    for run in report.results:
        assert any(a.startswith(f"{kind}:") for a in run.anomalies), (run.variant, run.anomalies)


@pytest.mark.parametrize(("variant", "phase"), ALLOWED, ids=[a[0] for a in ALLOWED])
def test_a_host_taking_a_freedom_of_the_contract_is_not_flagged(variant: str, phase: str) -> None:
    report = run_campaign(_variant(variant, phase))
    assert not report.anomalous() and not report.errored(), summary(report, variant)
