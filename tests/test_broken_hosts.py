"""Every harness check must be able to fail: run scenarios against broken hosts.

Each case runs ``pi-conformance`` in a subprocess. The runs are independent, so a
module-scoped pool starts every selected run up front (longest first) and each test then
waits for its own run and reports its own verdict.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conformance.plugin import SCHEMA_REQUIREMENT

BROKEN = Path(__file__).with_name("broken_hosts.py")
WORKERS = max(2, min(4, os.cpu_count() or 2))
CONTROL = "control"

Run = tuple[int, dict[str, Any], str]


@dataclass(frozen=True)
class Case:
    """A broken variant, the scenarios to run, and the requirement that must fail."""

    variant: str
    areas: str
    keyword: str
    requirement: str
    reason: str  # part of the failed check's message: the right check caught the variant
    slow: bool = False  # caught only once a wait of the step timeout has run out
    label: str = ""  # tells apart two cases of one variant

    @property
    def id(self) -> str:
        """The test id."""
        return f"{self.variant}-{self.label}" if self.label else self.variant


CASES = [
    Case("accepts-protocol-8", "handshake", "previous_version", "R7.1", "to refuse"),
    Case(
        "schema-invalid-session",
        "sessions",
        "starts_in_agent_mode",
        "R7.14",
        "broke the protocol v9 schema",
    ),
    # §1: Plan gating
    Case(
        "offers-write-in-plan",
        "plan_tools",
        "offered_exactly_the_planning_tools",
        "R1.4",
        "the host offered",
    ),
    # The [Read] example only: in the [Bash] example the unchecked Bash call waits for a
    # permission answer, so the scenario fails by a timeout rather than by its check.
    Case(
        "accepts-submit-plan-beside-another-call",
        "submit_plan",
        "beside_another_call and Read",
        "R1.6",
        "a call of the batch ran",
    ),
    # §2: the artifact's bytes
    Case(
        "normalises-line-endings",
        "artifact_integrity",
        "byte_for_byte and CRLF",
        "R2.7",
        "artifact bytes differ from the submitted markdown",
    ),
    Case(
        "prepends-title",
        "artifact_integrity",
        "title_and_question_stay_out",
        "R2.7",
        "the host changed the markdown",
    ),
    # §2: one new file per submission, never followed through a symlink
    Case(
        "reuses-file-name",
        "artifact_integrity",
        "two_identical_submissions",
        "R2.4",
        "submissions share artifact paths",
    ),
    Case(
        "follows-symlinked-pi", "artifact_integrity", "symlink", "R2.12", "the SubmitPlan call ran"
    ),
    # §2: what the approval row records, and when it is committed
    Case(
        "records-wrong-hash",
        "artifact_integrity",
        "recorded_hash_and_size",
        "R2.11",
        "file hashes to",
    ),
    Case("records-wrong-size", "artifact_integrity", "recorded_hash_and_size", "R2.11", "file has"),
    Case(
        "commits-row-before-flush",
        "artifact_integrity",
        "failed_flush",
        "R2.10",
        "the host lists approvals",
    ),
    # §3: the deadline is fixed at creation, and only the host records the expiry
    Case(
        "extends-deadline-on-read",
        "deadline",
        "reading_the_approval_again",
        "R3.12",
        "the deadline moved",
        label="on-opening",
    ),
    Case(
        "extends-deadline-on-read",
        "deadline",
        "reloaded_client_sees_the_original_deadline",
        "R3.10",
        "the deadline moved",
        label="on-reload",
    ),
    Case(
        "approves-on-timeout",
        "deadline",
        "plan_expires_when_the_time_is_up",
        "R3.11",
        "no expiry was announced",
    ),
    # §3: reject grants nothing, approve needs an explicit mode
    Case(
        "reject-grants-mode",
        "approval",
        "rejecting_keeps_the_session_in_plan",
        "R3.6",
        "permission mode changed from ask to auto",
    ),
    Case(
        "reject-reports-mode",
        "approval",
        "rejecting_keeps_the_session_in_plan",
        "R3.6",
        "the approval selects permission mode auto",
    ),
    Case(
        "defaults-missing-permission-mode",
        "approval",
        "approving_without_a_permission_mode",
        "R3.5",
        "to refuse",
    ),
    # §4: approval is one transaction, decides once, and sets the chosen mode
    Case(
        "approves-in-two-commits",
        "approval",
        "failure_while_approving",
        "R4.6",
        "the session left Plan",
    ),
    Case(
        "double-approve",
        "approval",
        "two_approvals_sent_at_once",
        "R4.4",
        # The second approval gets past the host's checks; storage then refuses a second
        # active turn, so it fails with INTERNAL_ERROR instead of APPROVAL_NOT_PENDING.
        "the second approval failed with INTERNAL_ERROR",
    ),
    Case(
        "keeps-old-permission-mode",
        "approval",
        "approving_switches_the_session_to_agent and auto",
        "R4.6",
        "permission mode is ask",
    ),
    # Write runs without asking, so the wait for the permission question runs out first.
    Case(
        "ignores-permission-mode",
        "execution",
        "with_ask_a_file_change_waits",
        "C4",
        "Write ran without asking for permission",
        slow=True,
    ),
    # §5: a pending approval and an active turn block other controls
    Case(
        "prompt-while-pending",
        "turn_boundaries",
        "prompt_while_a_plan_is_pending",
        "R5.7",
        "to refuse",
    ),
    Case(
        "shell-change-during-turn",
        "turn_boundaries",
        "changing_the_shell_during_a_turn",
        "R5.4",
        "to refuse",
    ),
    # §4: restart recovery, before the first answer, interrupting without replay
    Case(
        "replays-queued-execution",
        "restart_interruption",
        "halfstreamed_answer and restarts",
        "R4.12",
        "the restarted host started turns of its own",
    ),
    # Storage is read right after initialize, the first answer: a pending approval, a
    # queued execution and an active turn must all be interrupted by then.
    Case(
        "answers-before-recovery",
        "restart_interruption",
        "pending_approval_is_interrupted and restarts",
        "R4.10",
        "storage still showed the approval pending",
        label="approval",
    ),
    Case(
        "answers-before-recovery",
        "restart_interruption",
        "still_in_the_queue and restarts",
        "R4.10",
        "storage still showed the execution queued",
        label="execution",
    ),
    Case(
        "answers-before-recovery",
        "restart_interruption",
        "plan_turn_in_progress and restarts",
        "R4.11",
        "turns were still active when the restarted host first answered",
        label="turn",
    ),
    Case(
        "interrupted-execution-back-to-plan",
        "restart_interruption",
        "still_in_the_queue and restarts",
        "R4.14",
        "the session is in plan mode",
    ),
    Case(
        "stores-boot-epoch",
        "restart_interruption",
        "stored_schema_is_the_published",
        "R4.1",
        "extra ['host_boots']",
    ),
    Case(
        "stores-boot-epoch-setting",
        "restart_interruption",
        "stored_schema_is_the_published",
        "R4.1",
        "settings hold ['boot_epoch']",
    ),
    # §7: the v8 -> v10 migration is one transaction and writes the version last
    Case(
        "migrates-outside-transaction",
        "migration",
        "conflicting_object",
        "R7.8",
        "the database file changed",
    ),
    Case(
        "writes-version-first",
        "migration",
        "conflicting_object",
        "R7.9",
        "PRAGMA user_version is 10",
    ),
    # §6: a scheduled Plan run is refused before any work
    Case(
        "calls-provider-before-refusing-plan-task",
        "scheduled_plan",
        "running_a_plan_task_now",
        "R6.2",
        "the host called the model 1 time(s)",
    ),
    Case(
        "writes-artifact-for-plan-task",
        "scheduled_plan",
        "running_a_plan_task_now",
        "R6.2",
        "artifacts were written",
    ),
    # §5, §7, Consequences: shells, and the end of everything a command started
    Case(
        "ignores-default-shell",
        "shell",
        "command_runs_in_the_default_shell",
        "R7.6",
        "the process ran /",
    ),
    # The command is reported ended while its background process lives on; the check
    # waits for that process to end, in vain.
    Case(
        "kills-only-direct-child",
        "shell",
        "cancelling_the_turn_ends_the_command",
        "C5",
        "is still alive after",
        slow=True,
        label="on-cancel",
    ),
    Case(
        "kills-only-direct-child",
        "shell",
        "command_that_times_out",
        "C5",
        "is still alive after",
        slow=True,
        label="on-timeout",
    ),
]


def run_suite(tmp_path: Path, areas: str, keyword: str, variant: str | None = None) -> Run:
    """Run pi-conformance on a variant (default: the unpatched reference host).

    Return the exit status, the summary and the console output.
    """
    host = ["--host-cmd", shlex.join([sys.executable, str(BROKEN), variant])] if variant else []
    report = tmp_path / "report"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "conformance.cli",
            "run",
            *host,
            "--report",
            str(report),
            "--areas",
            areas,
            "-k",
            keyword,
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    output = completed.stdout + completed.stderr
    summary_file = report / "summary.json"
    assert summary_file.exists(), (
        f"the run wrote no summary (status {completed.returncode})\n{output}"
    )
    summary = json.loads(summary_file.read_text(encoding="utf-8"))
    return completed.returncode, summary, output


def _control_selection() -> tuple[str, str]:
    areas = ",".join(sorted({case.areas for case in CASES}))
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
            key: pool.submit(run_suite, tmp_path_factory.mktemp("run"), areas, keyword, variant)
            for key, areas, keyword, variant in jobs
        }
        yield futures
        for future in futures.values():
            future.cancel()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_broken_host_is_rejected(runs: dict[str, Future[Run]], case: Case) -> None:
    status, summary, output = runs[case.id].result()
    assert status == 1, f"the suite passed a broken host ({case.id}):\n{output}"
    statuses = {r["id"]: r["status"] for r in summary["requirements"]}
    assert statuses[case.requirement] == "failed", (
        f"{case.id} should fail {case.requirement}; statuses: "
        f"{ {k: v for k, v in statuses.items() if v in ('failed', 'passed')} }\n{output}"
    )
    assert summary["regressions"], output
    # The check's own message, not the source lines pytest prints around it.
    messages = "\n".join(line for line in output.splitlines() if line.startswith("E "))
    assert case.reason in messages, (
        f"{case.id} failed, but not by the check that reports {case.reason!r}\n{output}"
    )
    # Caught by a check, not by a timeout, a stopped host or a harness error.
    for scenario in summary["scenarios"]:
        if scenario["outcome"] == "failed":
            assert scenario["message"].endswith("AssertionError"), (
                f"{scenario['nodeid']} failed by {scenario['message']}, not by a check\n{output}"
            )


def test_the_selections_pass_against_the_reference_host(runs: dict[str, Future[Run]]) -> None:
    """Each case's scenarios pass unpatched, so their failure above is the variant's doing."""
    status, summary, output = runs[CONTROL].result()
    assert status == 0, output
    passed = {s["nodeid"] for s in summary["scenarios"] if s["outcome"] == "passed"}
    assert len(passed) == len(summary["scenarios"]), output
    statuses = {r["id"]: r["status"] for r in summary["requirements"]}
    for case in CASES:
        if case.requirement == SCHEMA_REQUIREMENT:
            continue  # blamed for any schema violation, whatever the scenario's tags
        found = statuses[case.requirement]
        assert found == "passed", f"{case.requirement} is {found} unpatched\n{output}"
