"""Every harness check must be able to fail: run scenarios against broken hosts.

Each case runs ``pi-conformance`` in a subprocess against one variant of
``tests/hosts/broken/``. The runs are independent, so a module-scoped pool starts every
selected run up front (longest first) and each test then waits for its own run.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import pytest
from hosts.catalog import broken_cases
from hosts.registry import BrokenCase
from hosts.runner import Run, run_suite

from conformance.aftercheck import SCHEMA_REQUIREMENT

CASES = broken_cases()
WORKERS = max(2, min(4, os.cpu_count() or 2))
CONTROL = "control"


def _control_selection() -> tuple[str, str]:
    areas = ",".join(sorted({a for case in CASES for a in case.areas.split(",")}))
    keyword = " or ".join(f"({keyword})" for keyword in sorted({c.keyword for c in CASES}))
    return areas, keyword


@pytest.fixture(scope="module")
def runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Future[Run]]]:
    """Start the suite runs of every selected test of this module, longest first."""
    wanted = {item.name for item in request.session.items if item.module is sys.modules[__name__]}
    jobs: list[tuple[str, str, str, str | None]] = []
    if "test_the_selections_pass_against_the_reference_host" in wanted:
        jobs.append((CONTROL, *_control_selection(), None))
    selected = [c for c in CASES if f"test_broken_host_is_rejected[{c.id}]" in wanted]
    for case in sorted(selected, key=lambda c: not c.slow):
        jobs.append((case.id, case.areas, case.keyword, case.variant))
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        futures = {
            key: pool.submit(
                run_suite,
                tmp_path_factory.mktemp("run"),
                areas,
                keyword,
                variant,
                # A broken host starts well: its preflight would prove nothing and costs
                # a host start per case (tests/test_preflight_hosts.py covers preflight).
                extra=() if variant is None else ("--no-preflight",),
            )
            for key, areas, keyword, variant in jobs
        }
        yield futures
        for future in futures.values():
            future.cancel()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_broken_host_is_rejected(runs: dict[str, Future[Run]], case: BrokenCase) -> None:
    run = runs[case.id].result()
    assert run.status == 1, f"the suite passed a broken host ({case.id}):\n{run.output}"
    found = run.requirement_status(case.requirement)
    assert found == "failed", f"{case.id} should fail {case.requirement}, got {found}\n{run.output}"
    failed = run.scenarios("failed")
    blaming = [s for s in failed if case.requirement in s["failure"]["blamed"]]
    assert blaming, f"no failure blames {case.requirement}\n{run.output}"
    texts = [f"{s['failure']['message']}\n{s['failure']['detail']}" for s in blaming]
    assert any(case.reason in text for text in texts), (
        f"{case.id} failed, but not by the check that reports {case.reason!r}: {texts}"
    )
    # Caught by a check: not by a crash, a hang or a fault of the harness.
    assert not run.scenarios("errored", "harness-error"), run.output


def test_the_selections_pass_against_the_reference_host(runs: dict[str, Future[Run]]) -> None:
    """Each case's scenarios pass unpatched, so their failure above is the variant's doing."""
    run = runs[CONTROL].result()
    assert run.status == 0, run.output
    assert run.scenarios("passed"), run.output
    assert not run.scenarios("failed", "errored", "harness-error", "unverified"), run.output
    for case in CASES:
        if case.requirement == SCHEMA_REQUIREMENT:
            continue  # blamed for any schema violation, whatever the scenario's tags
        found = run.requirement_status(case.requirement)
        assert found == "passed", f"{case.requirement} is {found} unpatched\n{run.output}"
