"""Collects scenario records on the controlling pytest process and writes the reports.

Each record is appended to ``records.jsonl`` as soon as its scenario finishes (and sent
to ``pi-conformance`` through a pipe when it asked for events), so an interrupted run
still leaves what it did behind; at the end of the session every report is written from
the same :class:`~conformance.summary_model.Summary`.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

import pytest

from conformance import __version__
from conformance.expectations import Expectations, ExpectationsError
from conformance.options import RunOptions
from conformance.reports import write_all
from conformance.requirements import active_catalog
from conformance.runtime_records import clear_stop, note_stop, record_of
from conformance.scenarios import all_scenarios
from conformance.summary_model import HostIdentity, Preflight, RunInfo, ScenarioResult
from conformance.verdicts import DESELECTED_REASON, INTERRUPTED_REASON, build_summary, complete

RECORDS_FILE = "records.jsonl"
_FAILS_IN_PYTEST = frozenset({"failed", "errored", "harness-error"})  # what -x counts
# A scenario whose host did not serve it: no answer to a request, the host gone, or lines
# that are not JSON-RPC. When the first scenarios of a run all end so, the rest would too.
UNSERVED_KINDS = frozenset({"host-hung", "host-stopped", "invalid-protocol"})
_SERVED = frozenset({"passed", "failed", "unverified"})


@dataclass
class ResultCollector:
    """A pytest plugin object on the controlling process."""

    report_dir: Path
    run: RunInfo
    expectations: Expectations
    preflight: Preflight | None = None
    crash_capable: bool = True
    events: IO[str] | None = None
    reasons: dict[str, str] = field(default_factory=dict)
    results: dict[str, ScenarioResult] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    unserved_limit: int = 0  # stop once this many first scenarios were not served (0: never)
    stopped_unserved: str | None = None  # why the run stopped early, once it has
    _unserved: int = 0
    _served: bool = False
    _session: pytest.Session | None = None
    _records: IO[str] | None = None

    @classmethod
    def from_config(cls, config: pytest.Config) -> ResultCollector:
        """Build from the command line; a bad expectations file is a usage error."""
        options = RunOptions.from_config(config)
        report_dir = Path(str(config.getoption("--conformance-report")))
        expectations_file = config.getoption("--conformance-expectations")
        try:
            expectations = Expectations.load(
                Path(expectations_file) if expectations_file else None,
                [s.id for s in all_scenarios()],
                list(active_catalog()),
            )
        except ExpectationsError as problem:
            raise pytest.UsageError(f"--expectations: {problem}") from None
        preflight_file = config.getoption("--conformance-preflight")
        preflight, identity = None, None
        if preflight_file:
            preflight, identity = read_preflight(Path(preflight_file))
        numprocesses = getattr(config.option, "numprocesses", None)
        run = new_run_info(
            options.host_label,
            options.driver,
            workers=numprocesses if isinstance(numprocesses, int) and numprocesses > 0 else 1,
            shard=config.getoption("--conformance-shard"),
            areas=sorted(options.areas) if options.areas else None,
            keyword=config.getoption("--conformance-keyword")
            or config.getoption("keyword")
            or None,
            require_full=options.require_full,
            identity=identity,
        )
        events_fd = config.getoption("--conformance-events-fd")
        events = os.fdopen(events_fd, "w", encoding="utf-8") if events_fd is not None else None
        return cls(
            report_dir=report_dir,
            run=run,
            expectations=expectations,
            preflight=preflight,
            crash_capable=options.crash_capable,
            events=events,
            reasons=options.left_out or {},
            unserved_limit=int(config.getoption("--conformance-unserved-limit") or 0),
        )

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Start a fresh records file."""
        self._session = session
        self.report_dir.mkdir(parents=True, exist_ok=True)
        clear_stop(self.report_dir)  # a note an earlier run left
        self._records = (self.report_dir / RECORDS_FILE).open("w", encoding="utf-8")

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Keep the first record of each scenario and write it out at once."""
        record = record_of(report)
        if record is None or record.id in self.results:
            return
        self.results[record.id] = record
        line = record.model_dump_json() + "\n"
        for stream in (self._records, self.events):
            if stream is not None:
                with contextlib.suppress(OSError, ValueError):
                    stream.write(line)
                    stream.flush()
        self._watch_service(record)

    def _watch_service(self, record: ScenarioResult) -> None:
        """Stop the run when its first ``unserved_limit`` scenarios to end all found the
        host not serving them: every other scenario would wait out its timeouts the same
        way, and one diagnosis tells the host team more than hundreds of them."""
        if self._served or self.stopped_unserved or not self.unserved_limit:
            return
        if record.status in _SERVED:
            self._served = True
            return
        failure = record.failure
        if record.status != "errored" or failure is None or failure.kind not in UNSERVED_KINDS:
            return
        self._unserved += 1
        if self._unserved < self.unserved_limit:
            return
        self.stopped_unserved = (
            f"the run stopped: its first {self._unserved} scenarios to end all found the host "
            f"not serving them (the last: {failure.message}); --unserved-limit 0 runs every "
            "scenario"
        )
        # Workers already hold the scenarios xdist handed them: the note stops those, the
        # session's flag the rest.
        note_stop(self.report_dir, self.stopped_unserved)
        if self._session is not None:
            self._session.shouldstop = self.stopped_unserved

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """Freeze what the run leaves: the process then exits without a last walk of it
        (as each worker does, see :mod:`conformance.runtime`)."""
        gc.freeze()

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Write every report for what ran; the rest is not-run."""
        missing_reason = None
        maxfail = int(session.config.getoption("maxfail", 0) or 0)
        failing = sum(r.status in _FAILS_IN_PYTEST for r in self.results.values())
        # -x under xdist ends the session as interrupted, but nobody interrupted it.
        stopped_early = maxfail > 0 and failing >= maxfail
        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED and not stopped_early
        if self.stopped_unserved:
            missing_reason, interrupted = self.stopped_unserved, False
            clear_stop(self.report_dir)
        elif stopped_early:
            missing_reason = f"the run stopped after {failing} failing scenario(s) (-x)"
        elif interrupted:
            missing_reason = INTERRUPTED_REASON
        write_reports(
            self.report_dir,
            list(self.results.values()),
            self.run.model_copy(
                update={
                    "duration_s": round(time.monotonic() - self.started, 3),
                    "interrupted": interrupted,
                }
            ),
            self.expectations,
            self.preflight,
            self.crash_capable,
            missing_reason,
            self.reasons,
        )
        for stream in (self._records, self.events):
            if stream is not None:
                with contextlib.suppress(OSError, ValueError):
                    stream.close()


def write_reports(
    report_dir: Path,
    results: list[ScenarioResult],
    run: RunInfo,
    expectations: Expectations,
    preflight: Preflight | None,
    crash_capable: bool,
    missing_reason: str | None = None,
    reasons: dict[str, str] | None = None,
) -> None:
    """Complete the results with not-run scenarios and write every report format."""
    everything = complete(
        results,
        all_scenarios(),
        missing_reason or DESELECTED_REASON,
        crash_capable=crash_capable,
        reasons=reasons,
    )
    summary = build_summary(everything, run, expectations, preflight)
    write_all(summary, report_dir)


def new_run_info(
    host: str,
    driver: str,
    *,
    workers: int = 1,
    shard: str | None = None,
    areas: list[str] | None = None,
    keyword: str | None = None,
    require_full: bool = False,
    identity: HostIdentity | None = None,
) -> RunInfo:
    """Run metadata, started now."""
    return RunInfo(
        host=host,
        driver=driver,
        harness_version=__version__,
        started_at=datetime.now(UTC).isoformat(timespec="milliseconds"),
        duration_s=0.0,
        workers=workers,
        shard=shard,
        areas=areas,
        keyword=keyword,
        require_full=require_full,
        host_identity=identity,
    )


def write_preflight(path: Path, preflight: Preflight, identity: HostIdentity | None) -> None:
    """Hand the preflight's verdict to the pytest run."""
    data = {
        "preflight": preflight.model_dump(mode="json"),
        "identity": identity.model_dump(mode="json") if identity else None,
    }
    path.write_text(json.dumps(data), encoding="utf-8")


def read_preflight(path: Path) -> tuple[Preflight, HostIdentity | None]:
    """What :func:`write_preflight` wrote."""
    data = json.loads(path.read_text(encoding="utf-8"))
    identity = data.get("identity")
    return (
        Preflight.model_validate(data["preflight"]),
        HostIdentity.model_validate(identity) if identity else None,
    )


def read_records(path: Path) -> list[ScenarioResult]:
    """The records a (possibly interrupted) run wrote, skipping a torn last line."""
    found: list[ScenarioResult] = []
    if not path.exists():
        return found
    for line in path.read_text(encoding="utf-8").splitlines():
        with contextlib.suppress(ValueError):
            found.append(ScenarioResult.model_validate(json.loads(line)))
    return found
