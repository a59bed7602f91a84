"""The suite is fair: hosts that differ only in ways the contract allows must pass.

The variants of ``tests/hosts/allowed/`` are composed into a few hosts, each taking many
freedoms at once (``hosts/composition.py``), and every composite runs the whole suite: in
process, which runs a scenario about three times faster than a host process of its own,
and the scenarios only a host process can take part in (a crash, a signal) in a second,
subprocess run. A scenario a composite fails is run again against each member alone: the
member that fails it alone is the one judged; a failure no member shows alone means two
members do not go together. A variant that announces less than the reference host (a
smaller output cap, no fault points) would leave the other members' scenarios unverified,
so it runs alone, on its own areas, and must see the scenarios that need what it left out
reported unverified, never failed.

``PI_ALLOWED_ALONE=1`` runs every variant alone on its own areas instead, the campaign
that ``docs/testing.md`` describes.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hosts.batches import scenario_count, subprocess_only_keyword
from hosts.catalog import allowed_cases
from hosts.composition import Composite, compose, every_area, keyword_for, replaced_by
from hosts.registry import AllowedCase
from hosts.runner import Run, run_suite

from conformance.scenarios import all_scenarios

CASES = allowed_cases()
ALONE_VARIABLE = "PI_ALLOWED_ALONE"
WORKERS = max(2, min(4, os.cpu_count() or 2))
# These hosts never hang, so a longer wait costs nothing when they pass; it keeps a loaded
# machine (several runs at once on two cores) from reading as a host that did not react.
PATIENT = ("--timeout", "30")
JUDGED = ("failed", "errored", "harness-error")


@dataclass
class Runs:
    """The started runs: each case's own (alone) or its composite's, and the composites."""

    own: dict[str, list[Future[Run]]] = field(default_factory=dict)  # case id -> runs
    composite_of: dict[str, Composite] = field(default_factory=dict)  # case id -> composite
    composites: dict[str, list[Future[Run]]] = field(default_factory=dict)  # name -> runs
    _alone: dict[tuple[str, frozenset[str]], list[Run]] = field(default_factory=dict)

    def runs_of(self, case: AllowedCase) -> list[Future[Run]]:
        """The runs that judge ``case``."""
        composite = self.composite_of.get(case.id)
        return self.own[case.id] if composite is None else self.composites[composite.name]

    def alone(self, variant: str, scenario_ids: frozenset[str], folder: Path) -> list[Run]:
        """Runs of ``scenario_ids`` against ``variant`` alone (kept for the next asker)."""
        key = (variant, scenario_ids)
        if key not in self._alone:
            self._alone[key] = _run_alone(variant, scenario_ids, folder)
        return self._alone[key]


def _run_alone(variant: str, scenario_ids: frozenset[str], folder: Path) -> list[Run]:
    chosen = [s for s in all_scenarios() if s.id in scenario_ids]
    areas = ",".join(sorted({s.area for s in chosen}))
    crash_only = {s.id for s in chosen if s.subprocess_only}
    runs = []
    for ids, in_process in ((scenario_ids - crash_only, True), (crash_only, False)):
        if ids:
            report = folder / f"alone-{len(runs)}"
            runs.append(
                run_suite(
                    report, areas, keyword_for(ids), variant, extra=PATIENT, in_process=in_process
                )
            )
    return runs


def _judged(runs: list[Run], only: frozenset[str] | None = None) -> list[dict[str, Any]]:
    return [s for run in runs for s in run.scenarios(*JUDGED) if only is None or s["id"] in only]


def _describe(scenarios: list[dict[str, Any]]) -> str:
    return "\n".join(f"  {s['id']}: {s['failure']['message']}" for s in scenarios)


def _start_alone(pool: ThreadPoolExecutor, case: AllowedCase, folder: Path) -> list[Future[Run]]:
    started = [
        pool.submit(
            run_suite,
            folder / "report",
            case.areas,
            case.keyword,
            case.variant,
            extra=PATIENT,
            in_process=True,
        )
    ]
    crash_only = subprocess_only_keyword(case.areas, case.keyword)
    if crash_only:
        started.append(
            pool.submit(
                run_suite,
                folder / "subprocess",
                case.areas,
                crash_only,
                case.variant,
                extra=PATIENT,
            )
        )
    return started


@pytest.fixture(scope="module")
def runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Runs]:
    """Start every run the selected tests need up front, the largest first."""
    wanted = {item.name for item in request.session.items if item.module is sys.modules[__name__]}
    selected = [c for c in CASES if f"test_allowed_variation_passes[{c.id}]" in wanted]
    everything_alone = os.environ.get(ALONE_VARIABLE) == "1"
    solo = [c for c in selected if everything_alone or c.alone]
    solo.sort(key=lambda c: -scenario_count(c.areas, c.keyword))
    together = [c for c in selected if c not in solo]
    found = Runs()
    areas = every_area()
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        if together:
            composites = compose(together, replaced_by([c.variant for c in together]))
            for composite in composites:
                folder = tmp_path_factory.mktemp("composite")
                found.composites[composite.name] = [
                    pool.submit(
                        run_suite,
                        folder / "report",
                        areas,
                        "",
                        composite.name,
                        extra=PATIENT,
                        in_process=True,
                    )
                ]
            for case in together:
                found.composite_of[case.id] = next(
                    c for c in composites if case.variant in c.members
                )
        for case in solo:
            found.own[case.id] = _start_alone(pool, case, tmp_path_factory.mktemp("allowed"))
        if together:  # the few scenarios that need a host process, last: they are short
            crash_only = subprocess_only_keyword(areas, "")
            for name, started in found.composites.items():
                folder = tmp_path_factory.mktemp("composite-subprocess")
                started.append(
                    pool.submit(
                        run_suite,
                        folder / "report",
                        areas,
                        crash_only,
                        name,
                        extra=PATIENT,
                    )
                )
        yield found
        for started in [*found.own.values(), *found.composites.values()]:
            for future in started:
                future.cancel()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_allowed_variation_passes(
    runs: Runs, case: AllowedCase, tmp_path_factory: pytest.TempPathFactory
) -> None:
    done = [future.result() for future in runs.runs_of(case)]
    for run in done:
        # every run judged something; a host short of what a scenario needs (a second
        # shell, say) may have had only scenarios it could not be judged on
        assert run.scenarios("passed") or run.scenarios("unverified"), run.output
    judged = _judged(done)
    composite = runs.composite_of.get(case.id)
    if composite is None:
        assert not judged and all(run.status == 0 for run in done), (
            f"{case.id} ({case.why}) was judged:\n{_describe(judged)}"
        )
        return
    if not judged:
        assert all(run.status == 0 for run in done), done[0].output
        return
    # The composite failed somewhere: this variant is judged by what it fails alone.
    failing = frozenset(s["id"] for s in judged)
    alone = runs.alone(case.variant, failing, tmp_path_factory.mktemp("alone"))
    fails_alone = _judged(alone, failing)
    assert not fails_alone, (
        f"{case.id} ({case.why}) fails alone what its composite failed:\n{_describe(fails_alone)}"
    )


def test_every_composite_passes_and_verifies_everything(
    runs: Runs, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A composite's failure that no member shows alone means two members do not go
    together; a scenario a composite leaves unverified hides the others' fairness there."""
    for name, started in runs.composites.items():
        done = [future.result() for future in started]
        unverified = [s for run in done for s in run.scenarios("unverified")]
        assert not unverified, (
            f"the composite {name} leaves scenarios unverified, so a member announces less "
            f"than the reference host: give it an AllowedCase(alone=...) reason\n"
            + "\n".join(f"  {s['id']}: {s['reason']}" for s in unverified)
        )
        judged = _judged(done)
        failing = frozenset(s["id"] for s in judged)
        unexplained = set(failing)
        for member in name.split(","):
            if not unexplained:
                break
            alone = runs.alone(member, failing, tmp_path_factory.mktemp("alone"))
            unexplained -= {s["id"] for s in _judged(alone, failing)}
        shown = [s for s in judged if s["id"] in unexplained]
        assert not shown, (
            f"every member of {name} passes these alone, yet together they fail them: two "
            f"members do not go together\n{_describe(shown)}"
        )


def test_a_member_that_breaks_the_contract_fails_its_composite_and_alone(
    tmp_path: Path,
) -> None:
    """The composite route can fail, and its attribution names the member at fault: a
    broken variant composed with an allowed one."""
    keyword = "after_expiry_a_new_plan_can_be_submitted"
    composite = "approval-list-newest-first,lists-in-any-order"
    run = run_suite(tmp_path / "composite", "deadline", keyword, composite, in_process=True)
    failed = frozenset(s["id"] for s in run.scenarios("failed"))
    assert run.status == 1 and failed, run.output
    broken = _judged(_run_alone("approval-list-newest-first", failed, tmp_path / "broken"))
    allowed = _judged(_run_alone("lists-in-any-order", failed, tmp_path / "allowed"))
    assert {s["id"] for s in broken} == failed and not allowed, (broken, allowed)


def test_a_host_without_fault_points_is_unverified_not_failed(tmp_path: Path) -> None:
    run = run_suite(tmp_path / "report", "approval", "failure_while_approving", "no-fault-points")
    unverified = run.scenarios("unverified")
    assert unverified, run.output
    assert all("approvalCommit" in (s["reason"] or "") for s in unverified), unverified
    assert run.requirement_status("R4.6") in ("passed", "unverified"), run.output
    assert run.status == 0, run.output


def test_an_in_process_run_serves_the_variant_it_names(tmp_path: Path) -> None:
    """The in-process runs above prove something only if their host is the variant: the same
    route fails a broken one."""
    run = run_suite(
        tmp_path / "report",
        "deadline",
        "after_expiry_a_new_plan_can_be_submitted",
        "approval-list-newest-first",
        in_process=True,
    )
    failed = run.scenarios("failed")
    assert run.status == 1 and failed, run.output
    assert all("R7.2" in s["failure"]["blamed"] for s in failed), failed
    assert run.summary["run"]["driver"] == "inprocess", run.summary["run"]
