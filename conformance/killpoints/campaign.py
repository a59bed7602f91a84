"""One kill point, and a campaign of them.

A run starts the host (subprocess driver) on a fresh data dir, drives a seeded workload,
SIGKILLs the host at a point of one phase, restarts it on the same data dir and checks
it against the client's history (:mod:`conformance.killpoints.checks`). The
``mid-migration`` phase instead seeds a v8 database and kills the host during its start.
A run is reproduced from its phase and seed; where the kill lands within the phase is
real time, so a race may need a few runs to show again.
"""

from __future__ import annotations

import json
import random
import shutil
import signal
import sqlite3
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from conformance.client import HostClient, RpcError
from conformance.contract import ContractChecker
from conformance.drivers import DEFAULT_HOST_CMD, SubprocessDriver, SubprocessHost
from conformance.killpoints.checks import Checker, integrity, journal_lines, read_only
from conformance.killpoints.history import History
from conformance.killpoints.workload import PHASES, KillPoint, Workload
from conformance.mock_provider import MockProvider
from conformance.scratch import scratch_parent
from conformance.storage_inspector import DB_FILE
from conformance.storage_seed import seed_v8

SHOWN: Final = 5  # anomalies listed per run in the summary
V8_STATUS: Final = {"pending": "interrupted", "changes_requested": "rejected"}
V8_APPROVALS: Final = 20_000  # enough rows that the migration takes a while to copy
# The many v8 approvals belong to one session; they are checked in storage, since listing
# them over the protocol would take longer than the rest of the run.
BULK_SESSION: Final = "v8-session-bulk"
V8_TABLES: Final = ("sessions", "transcript", "settings", "scheduled_tasks")


@dataclass(frozen=True)
class Settings:
    """What a campaign runs and against which host."""

    runs: int = 210
    seed: int = 53
    phases: tuple[str, ...] = PHASES
    host_cmd: tuple[str, ...] = DEFAULT_HOST_CMD
    background: tuple[int, int] = (0, 4)
    timeout: float = 20.0
    single: tuple[str, int] | None = None  # one (phase, seed) to run again


@dataclass
class RunResult:
    """One kill point: where it was, and what the restarted host got wrong."""

    phase: str
    seed: int
    variant: str = ""
    anomalies: list[str] = field(default_factory=list)
    error: str | None = None
    operations: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "phase": self.phase,
            "seed": self.seed,
            "variant": self.variant,
            "anomalies": self.anomalies,
            "error": self.error,
            "seconds": round(self.seconds, 3),
        }


def run_seeds(settings: Settings) -> Iterator[tuple[str, int]]:
    """(phase, seed) of every run: the phases in turn, each run with its own seed."""
    if settings.single is not None:
        yield settings.single
        return
    master = random.Random(settings.seed)
    for index in range(settings.runs):
        yield settings.phases[index % len(settings.phases)], master.getrandbits(32)


# -- killing and restarting ---------------------------------------------------------------


def kill(host: SubprocessHost, client: HostClient) -> None:
    """SIGKILL the host; take in everything it wrote; end what it left behind."""
    host.process.send_signal(signal.SIGKILL)
    host.process.wait()
    client.close()  # the reader drains the output the host wrote before it died
    host.crash()


def start(
    driver: SubprocessDriver, data_dir: Path, checker: ContractChecker, timeout: float
) -> tuple[SubprocessHost, HostClient]:
    """A host on ``data_dir`` and its client (the handshake is the caller's)."""
    host = driver.start(data_dir)
    assert isinstance(host, SubprocessHost)
    return host, HostClient(host, timeout, checker=checker)


def stop(host: SubprocessHost, client: HostClient) -> None:
    """Stop a host cleanly (or, failing that, abruptly)."""
    host.stop()
    client.close()


# -- one run ------------------------------------------------------------------------------


class Campaign:
    """Runs kill points against one host command."""

    def __init__(self, settings: Settings, scratch: Path) -> None:
        self.settings = settings
        self.scratch = scratch
        self.driver = SubprocessDriver(settings.host_cmd)
        self.contract = ContractChecker()
        self._v8: Path | None = None
        self._startup_s: float | None = None

    def run(self, phase: str, seed: int) -> RunResult:
        """One kill point; harness trouble before the kill is reported as an error."""
        root = Path(tempfile.mkdtemp(prefix=f"{phase}-{seed}-", dir=self.scratch))
        result = RunResult(phase, seed)
        began = time.monotonic()
        try:
            if phase == "mid-migration":
                self._migration(root, seed, result)
            else:
                self._lifecycle(root, phase, seed, result)
        except Exception as exc:  # reported with the seed; the campaign goes on
            result.error = f"{type(exc).__name__}: {exc}"
        finally:
            result.seconds = time.monotonic() - began
            shutil.rmtree(root, ignore_errors=True)
        return result

    def _lifecycle(self, root: Path, phase: str, seed: int, result: RunResult) -> None:
        rng = random.Random(seed)
        data_dir, workspace = root / "data", root / "workspace"
        data_dir.mkdir()
        workspace.mkdir()
        history = History()
        with MockProvider() as provider:
            host, client = start(self.driver, data_dir, self.contract, self.settings.timeout)
            try:
                init = client.handshake()
                faults = frozenset(init.capabilities.faultInjection or ())
                work = Workload(client, provider, workspace, rng, history, faults, f"k{seed}")
                for _ in range(rng.randint(*self.settings.background)):
                    work.background()
                point: KillPoint = work.arrange(phase)
                result.variant = point.variant
                # The kill point itself: a random moment after the phase was reached.
                time.sleep(point.delay)
            except BaseException:
                kill(host, client)
                result.operations = [op.line() for op in history.operations]
                raise
            kill(host, client)
            point.settle(self.settings.timeout)
            result.variant = point.variant
            work.absorb_announcements()
            result.operations = [op.line() for op in history.operations]
            provider.wait_until_idle(self.settings.timeout)
            provider.turn_away_open_connections(self.settings.timeout)
            provider.reset()  # from here on, every provider request is the new host's
            at_kill = journal_lines(workspace)

            def finish(checker: Checker, sessions: dict[str, Any]) -> None:
                checker.fresh_prompt(point.target_session, sessions, f"after-kill-{seed}")
                checker.journal(at_kill, workspace)

            result.anomalies = self._restart_and_check(data_dir, provider, history, finish)

    def _restart_and_check(
        self,
        data_dir: Path,
        provider: MockProvider,
        history: History,
        finish: Callable[[Checker, dict[str, Any]], None],
        unlisted: frozenset[str] = frozenset(),
    ) -> list[str]:
        host, client = start(self.driver, data_dir, self.contract, self.settings.timeout)
        checker = Checker(client, provider, data_dir, history, unlisted)
        try:
            try:
                client.handshake()
            except Exception as exc:
                return [f"restart: the host did not come back: {exc}"]
            checker.first_answer()
            sessions = checker.sessions()
            approvals = checker.approvals(sessions)
            checker.artifacts(approvals, sessions)
            checker.settings()
            checker.tasks()
            checker.transcripts()
            checker.nothing_started("before any new prompt")
            finish(checker, sessions)
            checker.anomalies += integrity(data_dir)
        except (RpcError, AssertionError, TimeoutError) as exc:
            checker.flag("restart", f"a check's request failed: {exc}")
        finally:
            stop(host, client)
        checker.anomalies += [f"{a} (after a clean stop)" for a in integrity(data_dir)]
        return checker.anomalies

    # -- mid-migration ------------------------------------------------------------------

    def _v8_seed(self) -> Path:
        """A v8 database (the published DDL, seeded), built once per campaign."""
        if self._v8 is None:
            path = self.scratch / "v8-seed" / DB_FILE
            seed_v8(path, sessions=12, transcript_per_session=40)
            statuses = ("approved", "rejected", "pending", "changes_requested")
            with closing(sqlite3.connect(path)) as conn, conn:
                conn.execute(
                    "INSERT INTO sessions VALUES (?, '/projects/bulk', 'plan', 'ask', "
                    "'http://127.0.0.1:1/v1', 'old-model', 1, 2)",
                    (BULK_SESSION,),
                )
                conn.executemany(
                    "INSERT INTO plan_approvals VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        (f"v8-approval-{n}", BULK_SESSION,
                         json.dumps({"title": f"Proposal {n}"}), statuses[n % 4], None,
                         1_700_000_000_000 + n, None)
                        for n in range(V8_APPROVALS)
                    ),
                )  # fmt: skip
            self._v8 = path
        return self._v8

    def _startup_seconds(self) -> float:
        """How long the host takes from its start to its first answer on a v8 file."""
        if self._startup_s is None:
            data_dir = self.scratch / "calibration"
            data_dir.mkdir()
            shutil.copy(self._v8_seed(), data_dir / DB_FILE)
            began = time.monotonic()
            host, client = start(self.driver, data_dir, self.contract, self.settings.timeout)
            try:
                client.handshake()
                self._startup_s = time.monotonic() - began
            finally:
                stop(host, client)
                shutil.rmtree(data_dir, ignore_errors=True)
        return self._startup_s

    def _migration(self, root: Path, seed: int, result: RunResult) -> None:
        rng = random.Random(seed)
        seed_file = self._v8_seed()
        delay = self._startup_seconds() * rng.uniform(0.3, 1.0)
        data_dir = root / "data"
        data_dir.mkdir()
        shutil.copy(seed_file, data_dir / DB_FILE)
        host, client = start(self.driver, data_dir, self.contract, self.settings.timeout)
        # The kill point: a random moment of the start, the migration included.
        time.sleep(delay)
        kill(host, client)
        result.variant = _startup_stage(data_dir, root / "probe")
        with MockProvider() as provider:
            result.anomalies = self._restart_and_check(
                data_dir,
                provider,
                History(),
                lambda checker, _sessions: self._migrated(checker, seed_file, seed),
                frozenset({BULK_SESSION}),
            )

    def _migrated(self, checker: Checker, seed_file: Path, seed: int) -> None:
        """The v8 data survived the interrupted migration, mapped as P16 says."""
        with closing(sqlite3.connect(seed_file)) as before, read_only(checker.data_dir) as after:
            for table in V8_TABLES:
                columns = ", ".join(r[1] for r in before.execute(f"PRAGMA table_info({table})"))
                query = f"SELECT {columns} FROM {table} ORDER BY 1"
                if [tuple(r) for r in after.execute(query)] != before.execute(query).fetchall():
                    checker.flag("lost-write", f"the v8 {table} rows did not survive unchanged")
            old = dict(before.execute("SELECT id, status FROM plan_approvals").fetchall())
            new = dict(after.execute("SELECT id, status FROM plan_approvals").fetchall())
        wrong = [i for i, s in old.items() if new.get(i) != V8_STATUS.get(s, s)]
        if wrong:
            checker.flag("lost-write", f"{len(wrong)} v8 approvals read otherwise, e.g. {wrong[0]}")
        listed = {s["sessionId"] for s in checker.client.request("session/list")["sessions"]}
        missing = sorted(i for (i,) in _v8_ids(seed_file, "sessions") if i not in listed)
        if missing:
            checker.flag("lost-write", f"v8 sessions not listed: {missing}")
        tasks = {t["taskId"] for t in checker.client.request("task/list")["tasks"]}
        if not {i for (i,) in _v8_ids(seed_file, "scheduled_tasks")} <= tasks:
            checker.flag("lost-write", "the v8 scheduled task is not listed")
        checker.fresh_prompt(None, {}, f"after-kill-{seed}")


def _v8_ids(path: Path, table: str) -> list[tuple[str]]:
    with closing(sqlite3.connect(path)) as conn:
        return [(str(r[0]),) for r in conn.execute(f"SELECT id FROM {table}")]


def _startup_stage(data_dir: Path, probe: Path) -> str:
    """Where the start was when the kill came, judged on a copy of the files (opening
    the copy rolls a hot journal back, as the restarted host will)."""
    journal = data_dir / f"{DB_FILE}-journal"
    if journal.exists() and journal.stat().st_size > 0:
        return "inside the migration"
    probe.mkdir()
    for companion in ("", "-wal"):
        source = data_dir / f"{DB_FILE}{companion}"
        if source.exists():
            shutil.copy(source, probe / source.name)
    with closing(sqlite3.connect(probe / DB_FILE)) as conn:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    return "before the migration" if version == 8 else "after the migration"


# -- the campaign ---------------------------------------------------------------------------


@dataclass
class Report:
    """Every run of a campaign."""

    settings: Settings
    results: list[RunResult]
    seconds: float

    def anomalous(self) -> list[RunResult]:
        """Runs with an anomaly."""
        return [r for r in self.results if r.anomalies]

    def errored(self) -> list[RunResult]:
        """Runs that did not reach their kill point."""
        return [r for r in self.results if r.error is not None]

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "seed": self.settings.seed,
            "runs": len(self.results),
            "seconds": round(self.seconds, 1),
            "results": [r.to_json() for r in self.results],
        }


def run_campaign(
    settings: Settings, progress: Callable[[RunResult], None] = lambda _r: None
) -> Report:
    """Run every kill point of ``settings``."""
    began = time.monotonic()
    results: list[RunResult] = []
    with tempfile.TemporaryDirectory(prefix="kill-points-", dir=scratch_parent()) as scratch:
        campaign = Campaign(settings, Path(scratch))
        for phase, seed in run_seeds(settings):
            result = campaign.run(phase, seed)
            results.append(result)
            progress(result)
    return Report(settings, results, time.monotonic() - began)


def summary(report: Report, command: str) -> str:
    """The figures: runs and kill points per phase, anomalies and errors with their seeds."""
    killed = [r for r in report.results if r.error is None]
    lines = [
        f"Command: `{command}` ({report.seconds / 60:.1f} min)",
        "",
        "| phase | kill points | where the kill came | anomalies | errored |",
        "| --- | ---: | --- | ---: | ---: |",
    ]
    for phase in report.settings.phases:
        runs = [r for r in killed if r.phase == phase]
        variants = Counter(r.variant for r in runs)
        where = ", ".join(f"{name} {count}" for name, count in sorted(variants.items()))
        anomalies = sum(1 for r in runs if r.anomalies)
        errors = sum(1 for r in report.results if r.phase == phase and r.error is not None)
        lines.append(f"| {phase} | {len(runs)} | {where} | {anomalies} | {errors} |")
    anomalous = report.anomalous()
    lines += [
        f"| **all** | **{len(killed)}** | | **{len(anomalous)}** | **{len(report.errored())}** |",
        "",
    ]
    kinds = Counter(a.split(":", 1)[0] for r in anomalous for a in r.anomalies)
    if kinds:
        lines.append("Anomalies by kind: " + ", ".join(f"{k} {n}" for k, n in kinds.items()))
    for run in anomalous:
        shown = "; ".join(run.anomalies[:SHOWN])
        more = f" (and {len(run.anomalies) - SHOWN} more)" if len(run.anomalies) > SHOWN else ""
        lines.append(f"- {run.phase} ({run.variant}), seed {run.seed}: {shown}{more}")
        lines.append(f"  reproduce: {reproduce(report.settings, run)}")
    for run in report.errored():
        lines.append(f"- errored: {run.phase}, seed {run.seed}: {run.error}")
        lines.append(f"  reproduce: {reproduce(report.settings, run)}")
    return "\n".join(lines)


def reproduce(settings: Settings, run: RunResult) -> str:
    """The command that runs one kill point again."""
    host = (
        ""
        if settings.host_cmd == DEFAULT_HOST_CMD
        else f" --host-cmd {' '.join(settings.host_cmd)!r}"
    )
    return f"python -m conformance.killpoints --phase {run.phase} --run-seed {run.seed}{host} -v"
