"""``run``: check the arguments, preflight the host, run the suite, report.

``pi-conformance run`` supervises a pytest process (with xdist workers) rather than
running pytest in its own process, so that it stays in charge: it prints progress from
the records the run streams back, stops the run cleanly on Ctrl-C, SIGTERM or
``--max-time``, ends every process the run started, and writes the reports for what ran
even when the pytest process had to be killed.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, Any

from conformance.collector import (
    RECORDS_FILE,
    new_run_info,
    read_preflight,
    read_records,
    write_preflight,
    write_reports,
)
from conformance.commands.common import (
    AUTO_WORKERS,
    DEFAULT_UNSERVED_LIMIT,
    EXIT_HARNESS,
    EXIT_MAX_TIME,
    EXIT_OK,
    EXIT_PREFLIGHT,
    EXIT_REGRESSION,
    EXIT_SIGINT,
    EXIT_SIGTERM,
    UsageProblem,
    auto_workers,
    checked_areas,
    non_negative_count,
    positive_seconds,
    workers,
    writable_folder,
)
from conformance.drivers import DEFAULT_HOST_CMD, HostDriver, InProcessDriver, SubprocessDriver
from conformance.expectations import Expectations, ExpectationsError
from conformance.options import (
    DEFAULT_SCENARIO_TIMEOUT,
    DEFAULT_STEP_TIMEOUT,
    FEATURES_ENV,
    parse_shard,
)
from conformance.preflight import run_preflight
from conformance.processes import become_subreaper, descendants, kill_all, signal_group
from conformance.reports import REPORT_FILES, SUMMARY_FILE, load_summary
from conformance.reports.text import STATUS_LABEL, render_console, scenario_line
from conformance.requirements import active_catalog
from conformance.scenarios import all_scenarios
from conformance.scratch import scratch_parent
from conformance.selection import Selection, SelectionError, select
from conformance.summary_model import Preflight, RunInfo, ScenarioResult, Summary
from conformance.verdicts import INTERRUPTED_REASON, PREFLIGHT_REASON

GRACE_S = 3.0  # how long pytest may take to stop its scenarios' hosts before it is killed
_REPORT_FILES = (*REPORT_FILES, RECORDS_FILE)


def add_parsers(commands: Any) -> None:
    """Register ``run``."""
    run = commands.add_parser(
        "run",
        help="run the features against a host",
        description="Run the conformance suite against a host and write its reports. "
        "Options after -- go to pytest unchanged; pytest plugins installed beside the "
        "harness are not loaded unless named there with -p NAME.",
    )
    target = run.add_mutually_exclusive_group()
    target.add_argument(
        "--host-cmd",
        help="host command line; the harness appends --data-dir DIR --conformance "
        "(default: the bundled reference host)",
    )
    target.add_argument(
        "--host-module", help="run a Python host in-process: entry point name or module:function"
    )
    run.add_argument(
        "--driver",
        choices=("subprocess", "inprocess"),
        help="subprocess (default) or inprocess (default with --host-module: reference)",
    )
    run.add_argument("--report", type=Path, default=Path("conformance-report"), help="output dir")
    run.add_argument("--expectations", type=Path, help="TOML file of known failures")
    run.add_argument("--areas", help="comma-separated feature areas (see 'pi-conformance areas')")
    run.add_argument(
        "-k", dest="keyword", help="only scenarios whose id matches (pytest -k syntax)"
    )
    run.add_argument("--shard", help="run shard I of N, as I/N (balanced by duration)")
    run.add_argument(
        "--timeout",
        type=positive_seconds,
        default=DEFAULT_STEP_TIMEOUT,
        help=f"longest wait for one host reaction, in seconds (default {DEFAULT_STEP_TIMEOUT:g})",
    )
    run.add_argument(
        "--scenario-timeout",
        type=positive_seconds,
        default=DEFAULT_SCENARIO_TIMEOUT,
        help="longest time one scenario may take before its host is stopped "
        f"(default {DEFAULT_SCENARIO_TIMEOUT:g})",
    )
    run.add_argument("--max-time", type=positive_seconds, help="longest time for the whole run")
    run.add_argument(
        "-n",
        "--workers",
        type=workers,
        default=AUTO_WORKERS,
        help="N or auto (default: one per core, and one more with the inprocess driver)",
    )
    run.add_argument("-x", "--exitfirst", action="store_true", help="stop at the first failure")
    run.add_argument(
        "--unserved-limit",
        type=non_negative_count,
        default=DEFAULT_UNSERVED_LIMIT,
        metavar="N",
        help="stop once the first N scenarios to end all found the host not serving them "
        "(no answer to a request, the host gone, lines that are not JSON-RPC); 0 runs every "
        f"scenario (default {DEFAULT_UNSERVED_LIMIT})",
    )
    run.add_argument(
        "--require-full", action="store_true", help="count unverified scenarios as failures"
    )
    run.add_argument("--no-preflight", action="store_true", help="skip the host preflight")
    run.add_argument("--keep", action="store_true", help="keep the scenarios' temporary folders")
    run.add_argument(
        "--scratch-dir",
        type=Path,
        help="folder for the scenarios' temporary folders (default: a memory-backed file "
        "system when the machine has one, else the system's temporary folder)",
    )
    run.add_argument("-q", "--quiet", action="store_true", help="print only what did not pass")
    run.set_defaults(handler=run_command)


@dataclass
class Plan:
    """A run whose arguments were all checked."""

    driver: HostDriver
    driver_name: str
    host_label: str
    selection: Selection
    expectations: Expectations
    report_dir: Path
    areas: list[str] | None
    shard: str | None


def _check_host_cmd(command_line: str) -> SubprocessDriver:
    try:
        argv = shlex.split(command_line)
    except ValueError as problem:
        raise UsageProblem(
            f"--host-cmd: cannot split {command_line!r} into words ({str(problem).lower()}); "
            "quote it as a POSIX shell would"
        ) from None
    if not argv:
        raise UsageProblem("--host-cmd: the command line is empty; give the host's command")
    program = argv[0]
    if os.sep in program:
        if not Path(program).exists():
            raise UsageProblem(
                f"--host-cmd: {program!r} does not exist; the first word must be the host's "
                "executable"
            )
        if not Path(program).is_file() or not os.access(program, os.X_OK):
            raise UsageProblem(
                f"--host-cmd: {program!r} is not an executable file; make it executable or "
                "name its interpreter first (for example 'python3 host.py')"
            )
    elif shutil.which(program) is None:
        raise UsageProblem(
            f"--host-cmd: {program!r} was not found on PATH; give its path or a command on PATH"
        )
    return SubprocessDriver(tuple(argv))


def _check_host_module(name: str) -> InProcessDriver:
    try:
        return InProcessDriver.load(name)
    except (ImportError, AttributeError, LookupError, TypeError, ValueError) as problem:
        raise UsageProblem(
            f"--host-module: cannot load {name!r}: {problem}; give an entry point name of the "
            "pi_conformance.hosts group or module:function"
        ) from None


def check_arguments(args: argparse.Namespace) -> Plan:
    """Every argument, checked before any host starts; a problem is one line."""
    driver_name = args.driver or ("inprocess" if args.host_module else "subprocess")
    if args.host_cmd and driver_name == "inprocess":
        raise UsageProblem(
            "--driver inprocess runs a Python host: use --host-module, not --host-cmd"
        )
    if args.host_module and driver_name == "subprocess":
        raise UsageProblem("--driver subprocess runs a command line: use --host-cmd")
    driver: HostDriver
    if driver_name == "inprocess":
        driver = _check_host_module(args.host_module or "reference")
        label = f"python host {args.host_module or 'reference'}"
    elif args.host_cmd:
        driver = _check_host_cmd(args.host_cmd)
        label = args.host_cmd
    else:
        driver = SubprocessDriver(DEFAULT_HOST_CMD)
        label = "bundled reference host"
    wanted = checked_areas(args.areas)
    shard: tuple[int, int] | None = None
    if args.shard:
        try:
            shard = parse_shard(args.shard)
        except ValueError as problem:
            raise UsageProblem(f"--shard: {problem}") from None
    universe = all_scenarios()
    try:
        selection = select(universe, wanted, args.keyword, shard, driver_name == "subprocess")
    except SelectionError as problem:
        raise UsageProblem(str(problem)) from None
    if not selection.chosen:
        described = ", ".join(
            part
            for part in (
                f"--areas {args.areas}" if args.areas else "",
                f"-k {args.keyword!r}" if args.keyword else "",
                f"--shard {args.shard}" if args.shard else "",
                f"the {driver_name} driver",
            )
            if part
        )
        raise UsageProblem(f"no scenario matches the selection ({described})")
    try:
        expectations = Expectations.load(
            args.expectations, [s.id for s in universe], list(active_catalog())
        )
    except ExpectationsError as problem:
        raise UsageProblem(f"--expectations: {problem}") from None
    report_dir = writable_folder(args.report, "--report")
    if args.scratch_dir is not None:
        args.scratch_dir = writable_folder(
            args.scratch_dir, "--scratch-dir", "the scenarios' temporary folders"
        )
    if args.workers == AUTO_WORKERS:
        args.workers = auto_workers(driver_name)
    return Plan(driver, driver_name, label, selection, expectations, report_dir, wanted, args.shard)


class _Stopped(BaseException):
    """A signal, or --max-time, ended the run before the suite started.

    A BaseException, as KeyboardInterrupt is: it is raised by a signal handler wherever
    the main thread happens to be, and code that handles its own errors must not take it
    for one of them. Inside ``Thread.start`` in particular, an ``Exception`` raised just as
    the new thread began would have been taken for a failed start, leaving that thread to
    die with a traceback on the console.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


_STOP_SIGNALS: dict[int, str] = {
    signal.SIGINT: "SIGINT",
    signal.SIGTERM: "SIGTERM",
    signal.SIGALRM: "max-time",  # --max-time is an interval timer
}
_EXIT_FOR_STOP = {"SIGINT": EXIT_SIGINT, "SIGTERM": EXIT_SIGTERM, "max-time": EXIT_MAX_TIME}


def _describe_stop(reason: str) -> str:
    return "--max-time ran out" if reason == "max-time" else reason


@dataclass
class _StopBeforeSuite:
    """The signal handler until the suite starts: the first signal stops the run (its
    reports are still written); a second ends the command at once."""

    scratch: Path
    reason: str | None = None

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        reason = _STOP_SIGNALS[signum]
        if self.reason is None:
            self.reason = reason
            raise _Stopped(reason)
        if reason != "max-time":
            kill_all()
            shutil.rmtree(self.scratch, ignore_errors=True)
            os._exit(_EXIT_FOR_STOP[self.reason])


def _handle_stop_signals(handler: Any) -> None:
    for signum in _STOP_SIGNALS:
        signal.signal(signum, handler)


def run_command(args: argparse.Namespace) -> int:
    """The whole ``run`` command."""
    plan = check_arguments(args)
    if not args.host_cmd and not args.host_module:
        print(f"testing the bundled reference host ({plan.driver_name} driver)")
    for name in _REPORT_FILES:
        (plan.report_dir / name).unlink(missing_ok=True)
    # Hosts run in sessions of their own: adopting orphans keeps them findable to the end.
    become_subreaper()
    scratch = Path(tempfile.mkdtemp(prefix="pi-conformance-", dir=scratch_parent(args.scratch_dir)))
    _handle_stop_signals(_StopBeforeSuite(scratch))
    if args.max_time:
        signal.setitimer(signal.ITIMER_REAL, args.max_time)  # the whole run, preflight too
    try:
        return _run(args, plan, scratch)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        _handle_stop_signals(signal.SIG_DFL)
        kill_all()
        if args.keep:
            print(f"temporary folders kept in {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def _run(args: argparse.Namespace, plan: Plan, scratch: Path) -> int:
    run_info = new_run_info(
        plan.host_label,
        plan.driver_name,
        workers=args.workers,
        shard=plan.shard,
        areas=plan.areas,
        keyword=args.keyword,
        require_full=args.require_full,
    )
    preflight_file: Path | None = None
    try:
        if not args.no_preflight:
            print(f"preflight: starting {plan.host_label}", flush=True)
            # In the run's own scratch folder: a second signal removes that folder whole
            # before it ends the command at once, wherever the preflight had got to.
            result = run_preflight(plan.driver, args.timeout, scratch)
            run_info = run_info.model_copy(update={"host_identity": result.identity})
            if not result.preflight.ok:
                return _preflight_failed(result.preflight, plan, run_info)
            identity = result.identity
            print(
                f"preflight: {identity.name if identity else 'the host'} "
                f"{identity.version if identity else ''} answered protocol v9 "
                f"in {result.preflight.duration_s:.2f} s"
            )
            preflight_file = scratch / "preflight.json"
            write_preflight(preflight_file, result.preflight, result.identity)
        select_file = scratch / "selection.json"
        select_file.write_text(
            json.dumps(
                {
                    "chosen": [s.id for s in plan.selection.chosen],
                    "left_out": plan.selection.left_out,
                }
            ),
            encoding="utf-8",
        )
        supervisor = Supervisor(args, plan, scratch, preflight_file, select_file)
        supervisor.start()  # from its first line on, signals stop the supervised run
    except _Stopped as stop:
        return _stopped_before_suite(stop.reason, plan, run_info)
    return supervisor.finish(run_info)


def _preflight_failed(preflight: Preflight, plan: Plan, run_info: RunInfo) -> int:
    """Reports for a host that failed the preflight: every scenario is not-run."""
    write_reports(
        plan.report_dir,
        [],
        run_info.model_copy(update={"duration_s": preflight.duration_s}),
        plan.expectations,
        preflight,
        plan.driver_name == "subprocess",
        PREFLIGHT_REASON,
    )
    _print_preflight_failure(preflight.diagnosis or "", preflight)
    print(f"\nreports: {plan.report_dir}")
    return EXIT_PREFLIGHT


def _stopped_before_suite(reason: str, plan: Plan, run_info: RunInfo) -> int:
    """Reports for a run stopped before any scenario: everything is not-run."""
    write_reports(
        plan.report_dir,
        [],
        run_info.model_copy(update={"interrupted": True}),
        plan.expectations,
        None,
        plan.driver_name == "subprocess",
        INTERRUPTED_REASON,
        plan.selection.left_out,
    )
    print(f"\n{_describe_stop(reason)} before the suite started: no scenario ran", file=sys.stderr)
    print(f"reports: {plan.report_dir}")
    return _EXIT_FOR_STOP[reason]


def _print_preflight_failure(diagnosis: str, preflight: Preflight) -> None:
    print(f"preflight failed: {diagnosis}", file=sys.stderr)
    if preflight.detail:
        print(f"  {preflight.detail}", file=sys.stderr)
    exit_info = preflight.host_exit
    if exit_info is not None and not exit_info.running:
        how = (
            f"killed by signal {exit_info.signal}"
            if exit_info.signal is not None
            else f"exited with status {exit_info.status}"
        )
        if how not in diagnosis:
            print(f"  the host {how}", file=sys.stderr)
    if preflight.stderr_tail.strip():
        print("  host stderr (tail):", file=sys.stderr)
        for line in preflight.stderr_tail.strip().splitlines()[-15:]:
            print(f"    {line}", file=sys.stderr)
    print("no scenario was run; every scenario is reported not-run", file=sys.stderr)


@dataclass
class Supervisor:
    """Runs the pytest process and stays in charge of it."""

    args: argparse.Namespace
    plan: Plan
    scratch: Path
    preflight_file: Path | None
    select_file: Path
    child: subprocess.Popen[bytes] | None = None
    stop_reason: str | None = None  # "SIGINT", "SIGTERM" or "max-time"
    received: list[ScenarioResult] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _progress_shown: bool = False
    _kill_timer: threading.Timer | None = None

    def pytest_argv(self, events_fd: int) -> list[str]:
        """The command line of the pytest process."""
        suite = Path(__file__).resolve().parent.parent / "suite"
        argv = [
            sys.executable,
            "-m",
            "pytest",
            str(suite),
            "--rootdir",
            str(suite),
            "-c",
            str(suite / "pytest.ini"),
            # Plugins are named, not discovered (PYTEST_DISABLE_PLUGIN_AUTOLOAD): other
            # plugins installed beside the harness (typeguard's, anyio's, hypothesis's,
            # whose session-end import alone can take seconds) cost every process of the
            # run their import and add nothing to it. Name one with -- -p NAME.
            "-p",
            "pytest_bdd.plugin",
            "-p",
            "conformance.plugin",
            "-p",
            "no:cacheprovider",
            # collecting every object after each test finds nothing the reports use
            "-p",
            "no:unraisableexception",
            "-q",
            # pytest's short and long tracebacks parse the failing test's source with ast,
            # whose C state Python 3.11 shares between threads; with an in-process host at
            # work on another thread, a failure report once ended the run with "AST
            # constructor recursion depth mismatch". Native tracebacks read lines only.
            "--tb=native",
            "--basetemp",
            str(self.scratch / "scenarios"),
            # a passed scenario's folders go at its teardown, on its worker, rather than
            # all together after the last scenario (a third of a second for a full run)
            "-o",
            f"tmp_path_retention_policy={'all' if self.args.keep else 'failed'}",
            "--conformance-report",
            str(self.plan.report_dir),
            "--conformance-select",
            str(self.select_file),
            "--conformance-events-fd",
            str(events_fd),
            "--step-timeout",
            str(self.args.timeout),
            "--scenario-timeout",
            str(self.args.scenario_timeout),
            "--driver",
            self.plan.driver_name,
        ]
        if self.args.host_cmd:
            argv += ["--host-cmd", self.args.host_cmd]
        if self.args.host_module:
            argv += ["--host-module", self.args.host_module]
        if self.args.expectations:
            argv += ["--conformance-expectations", str(self.args.expectations.resolve())]
        if self.plan.areas:
            argv += ["--conformance-areas", ",".join(self.plan.areas)]
        if self.plan.shard:
            argv += ["--conformance-shard", self.plan.shard]
        if self.args.keyword:
            argv += ["--conformance-keyword", self.args.keyword]
        if self.preflight_file is not None:
            argv += ["--conformance-preflight", str(self.preflight_file)]
        if self.args.require_full:
            argv.append("--require-full")
        if self.args.exitfirst:
            argv.append("-x")
        argv += ["--conformance-unserved-limit", str(self.args.unserved_limit)]
        worker_count = min(self.args.workers, len(self.plan.selection.chosen))
        if worker_count > 1:
            argv += ["-p", "xdist.plugin", "-n", str(worker_count), "--dist", "worksteal"]
        return [*argv, *self.args.pytest_args]

    def start(self) -> None:
        """Start pytest in its own process group, with a pipe for its records."""
        _handle_stop_signals(self._on_signal)
        read_fd, write_fd = os.pipe()
        log = (self.plan.report_dir / "pytest-output.txt").open("wb")
        # Collecting only the feature files of the chosen scenarios saves most of pytest's
        # start-up on a small selection; the summary still lists every scenario.
        features = sorted({s.feature_file for s in self.plan.selection.chosen})
        self.child = subprocess.Popen(
            self.pytest_argv(write_fd),
            env={
                **os.environ,
                FEATURES_ENV: ",".join(features),
                "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            },
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            pass_fds=(write_fd,),
            process_group=0,
        )
        os.close(write_fd)
        log.close()
        threading.Thread(target=self._read_events, args=(read_fd,), daemon=True).start()
        if self.stop_reason is not None:  # stopped while pytest was being started
            self._stop(self.stop_reason)

    # -- progress -----------------------------------------------------------------------

    def _read_events(self, read_fd: int) -> None:
        total = len(self.plan.selection.chosen)
        with os.fdopen(read_fd, "r", encoding="utf-8") as events:
            for line in events:
                try:
                    result = ScenarioResult.model_validate_json(line)
                except ValueError:
                    continue
                with self._lock:
                    self.received.append(result)
                    self._show(result, total)

    def _show(self, result: ScenarioResult, total: int) -> None:
        out: IO[str] = sys.stdout
        tty = out.isatty()
        if tty and self._progress_shown:
            out.write("\r\x1b[K")
        if not self.args.quiet or result.status != "passed":
            out.write(scenario_line(result) + "\n")
        if tty:
            counts: dict[str, int] = {}
            for seen in self.received:
                counts[seen.status] = counts.get(seen.status, 0) + 1
            done = ", ".join(f"{n} {STATUS_LABEL[s].lower()}" for s, n in sorted(counts.items()))
            elapsed = time.monotonic() - self.started
            out.write(f"[{len(self.received)}/{total}] {done}  {elapsed:.0f} s")
            self._progress_shown = True
        out.flush()

    # -- stopping -----------------------------------------------------------------------

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        reason = _STOP_SIGNALS[signum]
        if self.stop_reason is None:
            self._stop(reason)
            print(
                f"\n{_describe_stop(reason)}: stopping the run (Ctrl-C again to stop at once)",
                file=sys.stderr,
                flush=True,
            )
        elif reason != "max-time":
            self.kill_everything()
            print(f"{reason} again: ended every process at once", file=sys.stderr, flush=True)

    def _stop(self, reason: str) -> None:
        """Ask pytest to stop, so that each scenario stops its host; kill everything if it
        has not stopped within the grace period."""
        self.stop_reason = reason
        if self.child is not None and self.child.poll() is None:
            signal_group(self.child.pid, signal.SIGINT)
            self._kill_timer = threading.Timer(GRACE_S, self.kill_everything)
            self._kill_timer.daemon = True
            self._kill_timer.start()

    def kill_everything(self) -> None:
        """SIGKILL pytest's process group and every process the run started."""
        snapshot = descendants()
        if self.child is not None:
            signal_group(self.child.pid, signal.SIGKILL)
        kill_all(snapshot)

    # -- the end ------------------------------------------------------------------------

    def finish(self, run_info: Any) -> int:
        """Wait for pytest, clean up, make sure the reports exist, print and decide."""
        assert self.child is not None
        status = self.child.wait()
        signal.setitimer(signal.ITIMER_REAL, 0)
        _handle_stop_signals(signal.SIG_DFL)  # from here on a signal ends at once
        if self._kill_timer is not None:
            self._kill_timer.cancel()
        leftovers = kill_all()
        summary_file = self.plan.report_dir / SUMMARY_FILE
        if self.stop_reason is not None or not summary_file.exists():
            # A stopped pytest may have been killed half-way through writing its reports;
            # every record reached records.jsonl as its scenario ended.
            self._write_from_records(run_info)
        with self._lock:
            if self._progress_shown and sys.stdout.isatty():
                sys.stdout.write("\r\x1b[K")
        try:
            summary = load_summary(summary_file)
        except (OSError, ValueError) as problem:
            print(f"pi-conformance: the run left no usable report ({problem})", file=sys.stderr)
            self._print_output_tail()
            return EXIT_HARNESS
        print()
        print(render_console(summary, verbose=not self.args.quiet))
        if leftovers and self.stop_reason is None:
            print(f"note: ended what the run left behind: {'; '.join(leftovers)}", file=sys.stderr)
        print(f"\nreports: {self.plan.report_dir} ({', '.join(REPORT_FILES)})")
        return self._exit_status(summary, status)

    def _write_from_records(self, run_info: Any) -> None:
        records = read_records(self.plan.report_dir / RECORDS_FILE)
        interrupted = self.stop_reason is not None
        preflight = None
        if self.preflight_file is not None:
            preflight, _ = read_preflight(self.preflight_file)
        write_reports(
            self.plan.report_dir,
            records,
            run_info.model_copy(
                update={
                    "duration_s": round(time.monotonic() - self.started, 3),
                    "interrupted": interrupted,
                }
            ),
            self.plan.expectations,
            preflight,
            self.plan.driver_name == "subprocess",
            INTERRUPTED_REASON if interrupted else "the pytest run ended before this scenario",
            self.plan.selection.left_out,
        )

    def _print_output_tail(self) -> None:
        output = self.plan.report_dir / "pytest-output.txt"
        if output.exists():
            tail = output.read_text(encoding="utf-8", errors="replace").splitlines()[-30:]
            print("\n".join(tail), file=sys.stderr)

    def _exit_status(self, summary: Summary, pytest_status: int) -> int:
        if self.stop_reason == "SIGINT":
            return EXIT_SIGINT
        if self.stop_reason == "SIGTERM":
            return EXIT_SIGTERM
        if self.stop_reason == "max-time":
            print("--max-time ran out: the scenarios it did not reach are not-run", file=sys.stderr)
            return EXIT_MAX_TIME
        if summary.regressions:
            return EXIT_REGRESSION
        if summary.harness_errors or pytest_status not in (0, 1):
            if pytest_status not in (0, 1) and not summary.harness_errors:
                print(f"pytest ended with status {pytest_status}:", file=sys.stderr)
                self._print_output_tail()
            return EXIT_HARNESS
        return EXIT_OK
