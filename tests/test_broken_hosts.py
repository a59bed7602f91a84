"""Every harness check must be able to fail: run scenarios against broken hosts.

Each case names a variant of ``tests/hosts/broken/``, the scenarios to run and the
requirement the suite must blame. Starting the harness costs more than most cases'
scenarios, so cases whose scenarios do not overlap share one ``pi-conformance`` run in a
subprocess, in which every scenario's hosts serve its own case's variant
(``hosts/batches.py``). A case is judged from its own scenarios only. Module-scoped pools
start every needed run up front and each test waits for its own; the runs of slow cases,
which mostly wait, have a pool of their own with more room.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest
from hosts.batches import Batch, plan_batches, subprocess_only_keyword
from hosts.catalog import broken_cases
from hosts.registry import BrokenCase
from hosts.runner import Run, run_suite

from conformance.aftercheck import SCHEMA_REQUIREMENT
from conformance.selection import any_of

CASES = broken_cases()
WORKERS = max(2, min(4, os.cpu_count() or 2))
RUNS_OF_FAST_CASES = 2 * WORKERS
# The runs of slow cases spend most of their time waiting for a reaction that never comes,
# so more of them share the cores, beside the runs of the fast cases.
WAITING_WORKERS = 2 * WORKERS
# A host that starts slowly on a loaded machine must not read as a hang; only the slow
# cases, which are caught by a wait that runs out, keep the default step timeout.
FAST_STEP_TIMEOUT = "30"
PATIENT = ("--timeout", FAST_STEP_TIMEOUT)  # the reference host, which never hangs
WAITED_OUT = 0.9  # of FAST_STEP_TIMEOUT: a scenario this long waited for a reaction in vain
CONTROL = "control"
CONTROL_CRASHES = "control of the scenarios that need a host process"


@dataclass(frozen=True)
class BatchRun:
    """A batch and the future of its run."""

    batch: Batch
    run: Future[Run]

    def scenarios_of(self, case: BrokenCase) -> list[dict[str, Any]]:
        """The case's own scenarios in the batch's summary."""
        own = self.batch.own[case.id]
        return [s for s in self.run.result().summary["scenarios"] if s["id"] in own]


def _control_selection() -> tuple[str, str]:
    areas = ",".join(sorted({a for case in CASES for a in case.areas.split(",")}))
    keyword = any_of([c.keyword for c in CASES])
    return areas, keyword


def _start(pool: ThreadPoolExecutor, batch: Batch, tmp: pytest.TempPathFactory) -> Future[Run]:
    extra = ["--no-preflight"]  # tests/test_preflight_hosts.py covers the preflight
    if not batch.slow:
        extra += ["--timeout", FAST_STEP_TIMEOUT]
    return pool.submit(
        run_suite,
        tmp.mktemp("batch") / "report",
        batch.areas,
        batch.keyword,
        extra=extra,
        variants=batch.variants,
        in_process=batch.in_process,
    )


@pytest.fixture(scope="module")
def runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, BatchRun | Future[Run]]]:
    """Start the runs the selected tests of this module need, longest first."""
    wanted = {item.name for item in request.session.items if item.module is sys.modules[__name__]}
    selected = [c for c in CASES if f"test_broken_host_is_rejected[{c.id}]" in wanted]
    with (
        ThreadPoolExecutor(max_workers=WORKERS) as pool,
        ThreadPoolExecutor(max_workers=WAITING_WORKERS) as waiting_pool,
    ):
        found: dict[str, BatchRun | Future[Run]] = {}
        if "test_the_selections_pass_against_the_reference_host" in wanted:
            # the longest run: first, and on two workers; in-process, where a scenario costs
            # a third of a host process's, and the scenarios that need one in a run of their own
            areas, keyword = _control_selection()
            report = tmp_path_factory.mktemp("run")
            found[CONTROL] = pool.submit(
                run_suite, report, areas, keyword, workers=2, extra=PATIENT, in_process=True
            )
            crash_only = subprocess_only_keyword(areas, keyword)
            if crash_only:
                found[CONTROL_CRASHES] = pool.submit(
                    run_suite, tmp_path_factory.mktemp("run"), areas, crash_only, extra=PATIENT
                )
        for batch in plan_batches(selected, RUNS_OF_FAST_CASES):
            batch_run = BatchRun(
                batch, _start(waiting_pool if batch.slow else pool, batch, tmp_path_factory)
            )
            found.update({case.id: batch_run for case in batch.cases})
        yield found
        for started in found.values():
            (started.run if isinstance(started, BatchRun) else started).cancel()


def _describe(scenarios: list[dict[str, Any]]) -> str:
    return "\n".join(
        f"  {s['id']}: {s['status']}"
        + (f" - {s['failure']['message']}" if s.get("failure") else "")
        for s in scenarios
    )


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_broken_host_is_rejected(runs: dict[str, BatchRun | Future[Run]], case: BrokenCase) -> None:
    batch_run = runs[case.id]
    assert isinstance(batch_run, BatchRun)
    mine = batch_run.scenarios_of(case)
    shown = _describe(mine)
    assert {s["id"] for s in mine} == batch_run.batch.own[case.id], f"{case.id}: not listed"
    not_run = [s for s in mine if s["status"] == "not-run"]
    assert not not_run, f"{case.id}: scenarios of the case did not run:\n{_describe(not_run)}"
    blaming = [
        s for s in mine if s["status"] == "failed" and case.requirement in s["failure"]["blamed"]
    ]
    assert blaming, f"the suite did not fail {case.id} on {case.requirement}:\n{shown}"
    texts = [f"{s['failure']['message']}\n{s['failure']['detail']}" for s in blaming]
    reasons = [reason for reason in (case.reason, case.or_reason) if reason]
    assert any(reason in text for text in texts for reason in reasons), (
        f"{case.id} failed, but not by the check that reports {' or '.join(reasons)!r}: {texts}"
    )
    # Caught by a check: not by a crash, a hang or a fault of the harness.
    broken = [s for s in mine if s["status"] in ("errored", "harness-error")]
    assert not broken, f"{case.id}:\n{_describe(broken)}"
    run = batch_run.run.result()
    assert run.status == 1, run.output
    assert run.requirement_status(case.requirement) == "failed", run.output
    if not case.slow:
        # A wait that runs out costs the whole step timeout; slow cases get the shorter
        # default one and share runs of their own, so a fast case must not need it.
        waited = [s for s in mine if s["duration_s"] >= WAITED_OUT * float(FAST_STEP_TIMEOUT)]
        assert not waited, f"{case.id} is caught only once a wait ran out: mark it slow\n{shown}"


def test_the_selections_pass_against_the_reference_host(
    runs: dict[str, BatchRun | Future[Run]],
) -> None:
    """Each case's scenarios pass unpatched, so their failure above is the variant's doing."""
    controls = [runs[name] for name in (CONTROL, CONTROL_CRASHES) if name in runs]
    assert all(isinstance(control, Future) for control in controls)
    done = [control.result() for control in controls if isinstance(control, Future)]
    for run in done:
        assert run.status == 0, run.output
        assert run.scenarios("passed"), run.output
        assert not run.scenarios("failed", "errored", "harness-error", "unverified"), run.output
    for case in CASES:
        if case.requirement == SCHEMA_REQUIREMENT:
            continue  # blamed for any schema violation, whatever the scenario's tags
        found = {run.requirement_status(case.requirement) for run in done}
        assert "passed" in found and found <= {"passed", "not-run"}, (
            f"{case.requirement} is {found} unpatched\n{done[0].output}"
        )
