"""The mutation campaign (scripts/mutation_campaign.py): a slice of it, and its arithmetic.

The slice runs a few fixed mutants of the reference host through the campaign's own code
path (a private copy of the package, the mutant written into it, the area-scoped
conformance suite run through its CLI with the hybrid driver) and checks that each is
killed. Each run is narrowed with ``-k`` to the scenario known to kill it, so the slice
takes seconds, not the minutes of a campaign. One of the mutants stops the host from
starting: the harness's preflight rejects it (exit status 3), the campaign's other kind of
kill.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load_campaign() -> ModuleType:
    name = "mutation_campaign"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / "mutation_campaign.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


campaign = _load_campaign()

# module, text, its mutation, the area and the -k word of a scenario that kills it
SLICE = [
    pytest.param(
        "approvals",
        'question = _require_text(args, "question")',
        "question = _require_text(args, None)",
        "restart_interruption",
        "pending_approval_is_interrupted_when_the_host_restarts",
        1,
        id="approvals-argument",
    ),
    pytest.param(
        "tasks",
        'params["prompt"]',
        'params["XXpromptXX"]',
        "scheduled_plan",
        "plan_task_that_is_run_now_is_refused",
        1,
        id="tasks-param-name",
    ),
    pytest.param(
        "permissions",
        "self._open.get(request_id)",
        "self._open.get(None)",
        "execution",
        "with_ask_a_file_change_waits",
        1,
        id="permissions-lookup",
    ),
    pytest.param(
        "migration",
        '"settings",',
        '"XXsettingsXX",',
        "migration",
        "v8_database_is_upgraded_and_its_data_survives",
        1,
        id="migration-table-name",
    ),
    pytest.param(
        "storage",
        'schemas_dir() / "storage"',
        'schemas_dir() * "storage"',
        "handshake",
        None,
        3,
        id="storage-host-cannot-start",
    ),
]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    ws = campaign.Workspace(tmp_path_factory.mktemp("mutation"))
    where = ws.imported_from("reference_host.approvals")
    assert ws.dir in where.parents, f"the harness would import the host from {where}"
    yield ws
    ws.remove()


@pytest.mark.parametrize(("module", "old", "new", "area", "keyword", "exit_code"), SLICE)
def test_a_fixed_mutant_is_killed(
    workspace: object,
    module: str,
    old: str,
    new: str,
    area: str,
    keyword: str | None,
    exit_code: int,
) -> None:
    mutant = campaign.replacement(module, old, new)
    assert mutant.before.strip() and mutant.after.strip()
    started = time.monotonic()
    verdicts = campaign.judge(workspace, mutant, "hybrid", 30.0, areas=[area], keyword=keyword)
    final = verdicts[-1]
    assert final.outcome == campaign.KILLED, (final, time.monotonic() - started)
    assert final.exit_code == exit_code
    assert final.driver == "inprocess"  # killed before any subprocess re-check
    # the workspace got its module back
    copy = (workspace.dir / mutant.path).read_text(encoding="utf-8")  # type: ignore[attr-defined]
    assert copy == (ROOT / mutant.path).read_text(encoding="utf-8")


def test_the_unmutated_host_survives_the_same_runs(workspace: object) -> None:
    """The oracle's other half: the same narrowed runs pass the host as it is."""
    keywords = " or ".join(str(p.values[4]) for p in SLICE if p.values[4])
    areas = sorted({str(p.values[3]) for p in SLICE if p.values[4]})
    verdict = campaign.run_oracle(workspace, areas, "inprocess", keyword=keywords)
    assert verdict.outcome == campaign.SURVIVED, verdict
    assert verdict.failed == []


def test_a_replacement_must_name_one_place() -> None:
    with pytest.raises(ValueError, match="occurs 2 times"):
        campaign.replacement("approvals", '"byteSize": row.artifact_bytes,', '"x": 0,')
    with pytest.raises(ValueError, match="occurs 0 times"):
        campaign.replacement("approvals", "no such text anywhere", "x")


def _entry(module: str, n: int, outcome: str) -> dict[str, object]:
    return {"id": f"{module}/{n:010x}", "module": module, "outcome": outcome}


def test_the_score_is_killed_over_non_equivalent_mutants() -> None:
    entries = [
        _entry("state", 1, "killed"),
        _entry("state", 2, "killed"),
        _entry("state", 3, "timeout"),
        _entry("state", 4, "survived"),
        _entry("state", 5, "survived"),  # equivalent
        _entry("state", 6, "investigate"),
        _entry("tasks", 7, "killed"),
        _entry("tasks", 8, "killed"),  # listed as equivalent, but killed: counts as killed
        _entry("shells", 9, "survived"),  # equivalent: nothing left to score
    ]
    equivalents = {"state/0000000005": "r", "tasks/0000000008": "r", "shells/0000000009": "r"}
    summary = campaign.score(entries, equivalents)
    state = summary["modules"]["state"]
    assert (state["killed"], state["timeout"], state["survived"]) == (2, 1, 1)
    assert (state["equivalent"], state["investigate"]) == (1, 1)
    assert state["score"] == round(3 / 5, 4)  # an unjudged run stays in the denominator
    assert summary["modules"]["tasks"]["score"] == 1.0
    assert summary["modules"]["shells"]["score"] is None
    total = summary["total"]
    assert (total["mutants"], total["equivalent"]) == (9, 2)
    assert total["score"] == round(5 / 7, 4)


def test_equivalents_are_read_and_checked(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text(
        '[equivalent]\n"state/0123456789" = "  dead code: never reached  "\n'
        '"tasks/abcdef0123-2" = "same value"\n',
        encoding="utf-8",
    )
    assert campaign.load_equivalents(good) == {
        "state/0123456789": "dead code: never reached",
        "tasks/abcdef0123-2": "same value",
    }
    assert campaign.load_equivalents(tmp_path / "missing.toml") == {}
    for text, problem in [
        ('[equivalent]\n"state/0123456789" = ""\n', "needs a one-line reason"),
        ('[equivalent]\n"nomodule/0123456789" = "x"\n', "is not a mutant id"),
        ('[equivalent]\n"state/12" = "x"\n', "is not a mutant id"),
        ('[equivalents]\n"state/0123456789" = "x"\n', "unknown tables"),
    ]:
        bad = tmp_path / "bad.toml"
        bad.write_text(text, encoding="utf-8")
        with pytest.raises(ValueError, match=problem):
            campaign.load_equivalents(bad)


def test_the_repository_equivalents_file_parses() -> None:
    equivalents = campaign.load_equivalents()
    assert all(reason for reason in equivalents.values())


def test_a_summary_gives_failures_and_the_scenarios_left_to_a_subprocess(tmp_path: Path) -> None:
    summary = tmp_path / "summary.json"
    crash = "needs a driver that can stop the host abruptly (subprocess)"
    outside = {"id": "shell.feature: C", "area": "shell", "status": "not-run", "reason": crash}
    summary.write_text(
        json.dumps(
            {
                "run": {"areas": ["approval", "restart_interruption"]},
                "scenarios": [
                    {"id": "approval.feature: A", "area": "approval", "status": "failed"},
                    {"id": "approval.feature: B", "area": "approval", "status": "passed"},
                    {
                        "id": "restart_interruption.feature: A crash, again (x)",
                        "area": "restart_interruption",
                        "status": "not-run",
                        "reason": crash,
                    },
                    outside,
                    {
                        "id": "deadline.feature: D",
                        "area": "deadline",
                        "status": "not-run",
                        "reason": "not in the selected areas",
                    },
                ],
            }
        ),
        encoding="utf-8",
    )
    failed, skipped = campaign._read_summary(summary)
    assert failed == ["failed: approval.feature: A"]
    assert skipped == ["restart_interruptionfeature_a_crash_again_x"]
    assert campaign._read_summary(tmp_path / "none.json") == ([], [])


def test_a_recorded_mutant_is_applied_again_to_the_current_module() -> None:
    mutant = campaign.replacement("tasks", 'params["prompt"]', 'params["XXpromptXX"]')
    again = campaign.reapply(mutant.describe())
    assert (again.id, again.source, again.line) == (mutant.id, mutant.source, mutant.line)
    # a line mutmut deleted: recorded with an empty "after"
    lines = mutant.before
    deleted = campaign.reapply({**mutant.describe(), "after": ""})
    original = (ROOT / mutant.path).read_text(encoding="utf-8")
    assert deleted.source == original.replace(lines + "\n", "", 1)
    with pytest.raises(ValueError, match="no longer holds"):
        campaign.reapply({**mutant.describe(), "before": "no such line"})
