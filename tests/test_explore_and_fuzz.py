"""The explorer and the fuzzer on a budget: they pass the reference host and catch broken ones.

Each run is ``pi-conformance explore`` or ``fuzz`` in a subprocess, as a user would run it,
derandomised and with a small fixed budget. Broken variants must be caught; variants that
take a freedom the contract allows must pass. The runs are independent, so a module-scoped
pool starts them all up front and each test waits for its own. Broken variants run
in-process in their own subprocess (``hosts.serve:serve_variant``), which is faster than a
host process per restart.

The reference host still has open findings (see docs/reliability.md): the fuzzer reports
them, and these tests accept exactly those causes and nothing else, so a new one fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
WORKERS = max(2, min(4, os.cpu_count() or 2))


@dataclass(frozen=True)
class Job:
    """One command-line run."""

    name: str
    args: tuple[str, ...]
    variant: str | None = None


@dataclass(frozen=True)
class Outcome:
    """How a run ended and what it printed."""

    status: int
    output: str
    report: dict[str, object] | None


JOBS = (
    Job("explore-reference", ("explore", "--examples", "6", "--steps", "12", "--timeout", "20")),
    Job(
        "explore-recovery",
        ("explore", *("--examples", "20", "--steps", "12", "--timeout", "3", "--max-time", "15")),
        "recovery-interrupts-finished-work",
    ),
    Job(
        "explore-cancel",
        ("explore", *("--examples", "20", "--steps", "12", "--timeout", "3", "--max-time", "15")),
        "cancel-leaves-execution-running",
    ),
    Job(
        "explore-allowed",
        ("explore", "--examples", "6", "--steps", "12", "--timeout", "20"),
        "other-artifact-names",
    ),
    Job("fuzz-reference", ("fuzz", "--examples", "120", "--frames", "40", "--timeout", "20")),
    Job(
        "fuzz-allowed",
        ("fuzz", "--examples", "80", "--frames", "0", "--timeout", "20", "--no-reduce"),
        "no-fault-points",
    ),
    Job(
        "fuzz-surrogates",
        ("fuzz", "--examples", "120", "--frames", "0", "--timeout", "20", "--no-reduce"),
        "replaces-lone-surrogates",
    ),
    Job(
        "fuzz-broken",
        ("fuzz", "--examples", "120", "--frames", "0", "--timeout", "20", "--no-reduce"),
        "internal-error-on-malformed-ids",
    ),
)


def _run(job: Job, folder: Path) -> Outcome:
    report = folder / f"{job.name}.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent)])}
    host: tuple[str, ...] = ()
    if job.variant is not None:
        env["PI_HOST_VARIANT"] = job.variant
        host = ("--host-module", "hosts.serve:serve_variant")
    elif job.name == "fuzz-reference":
        host = ("--host-module", "reference")
    extra = ("--json", str(report)) if job.args[0] == "fuzz" else ()
    completed = subprocess.run(
        [sys.executable, "-m", "conformance", *job.args, *host, *extra],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    data = json.loads(report.read_text(encoding="utf-8")) if report.exists() else None
    return Outcome(completed.returncode, completed.stdout + completed.stderr, data)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Future[Outcome]]]:
    """Every run of this module, started at once."""
    folder = tmp_path_factory.mktemp("campaign")
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        futures = {job.name: pool.submit(_run, job, folder) for job in JOBS}
        yield futures
        for future in futures.values():
            future.cancel()


def test_the_explorer_finds_no_broken_invariant_in_the_reference_host(
    runs: dict[str, Future[Outcome]],
) -> None:
    run = runs["explore-reference"].result()
    assert run.status == 0, run.output
    assert "no invariant broke" in run.output, run.output


def test_the_explorer_accepts_what_the_contract_leaves_to_the_host(
    runs: dict[str, Future[Outcome]],
) -> None:
    """Artifact names are the host's choice (§2)."""
    run = runs["explore-allowed"].result()
    assert run.status == 0, run.output


def test_the_explorer_catches_a_restart_that_reopens_finished_work(
    runs: dict[str, Future[Outcome]],
) -> None:
    run = runs["explore-recovery"].result()
    assert run.status == 1, run.output
    assert "broken invariant 'forward-only'" in run.output, run.output
    scenario = run.output[run.output.index("Scenario:") :]
    assert "Given a freshly started host" in scenario
    assert "When the user creates session 1" in scenario
    assert "approves the plan" in scenario and "the host restarts" in scenario
    assert "Then approval and execution statuses only move forward" in scenario
    assert "was reported completed, then interrupted" in scenario


def test_the_explorer_catches_a_cancelled_execution_that_never_ends(
    runs: dict[str, Future[Outcome]],
) -> None:
    run = runs["explore-cancel"].result()
    assert run.status == 1, run.output
    assert "broken invariant 'state'" in run.output, run.output
    scenario = run.output[run.output.index("Scenario:") :]
    assert "the model takes its time with the execution" in scenario
    assert "the user cancels the running turn" in scenario
    assert "Then the host's answers and records follow the ADR's state machine" in scenario
    assert "is never announced as finished" in scenario


def _findings(run: Outcome) -> list[dict[str, str]]:
    assert run.report is not None, run.output
    findings = run.report["findings"]
    assert isinstance(findings, list)
    return findings


def test_the_fuzzer_finds_nothing_wrong_with_the_reference_host(
    runs: dict[str, Future[Outcome]],
) -> None:
    run = runs["fuzz-reference"].result()
    assert run.report is not None and run.report["frames"] >= 120, run.output
    assert run.report["invalidAnswers"] == 0 and run.report["hangs"] == 0, run.output
    findings = _findings(run)
    assert not findings, json.dumps(findings, indent=1)
    coverage = run.report["coverage"]
    assert isinstance(coverage, dict) and len(coverage) >= 20, coverage


def test_the_fuzzer_accepts_what_the_contract_leaves_to_the_host(
    runs: dict[str, Future[Outcome]],
) -> None:
    """Fault points are optional capabilities."""
    run = runs["fuzz-allowed"].result()
    findings = _findings(run)
    assert not findings, json.dumps(findings, indent=1)


def test_the_fuzzer_catches_internal_errors_on_malformed_params(
    runs: dict[str, Future[Outcome]],
) -> None:
    run = runs["fuzz-broken"].result()
    assert run.status == 1, run.output
    caught = [
        f
        for f in _findings(run)
        if f["category"] == "internal-error" and f["method"].startswith("approval/")
    ]
    assert caught, run.output
    assert all('"method":"approval/' in f["reproducer"] for f in caught), caught
    assert "reproduce, after initialize:" in run.output


def test_the_fuzzer_catches_a_host_that_reads_lone_surrogates(
    runs: dict[str, Future[Outcome]],
) -> None:
    """JSON Schema takes a lone surrogate for a string; P4 refuses it."""
    run = runs["fuzz-surrogates"].result()
    assert run.status == 1, run.output
    caught = [
        f for f in _findings(run) if f["category"] == "wrong-code" and f["kind"] == "lone-surrogate"
    ]
    assert caught, run.output
    assert all(f["expected"] == "INVALID_PARAMS" for f in caught), caught
