"""A bad argument is refused in one line, with status 2, before any host starts.

Each case runs ``python -m conformance`` as a user would. The host command of every case
is a program that leaves a marker file when it starts, so a case also proves that the
refusal came before any host was started; the run's mark in the environment shows that
it left no process behind. The cases are independent, so a module-scoped pool starts
them all at once and each test waits for its own.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_runs import Finished, assert_nothing_left, host_cmd, start_cli, write_script

MARKER_VARIABLE = "PI_TEST_HOST_STARTED_MARKER"
WAIT_S = 60


@dataclass(frozen=True)
class Case:
    """One refused command line: ``args`` builds it from the case's folder; the message
    must contain every one of ``says``."""

    id: str
    args: Callable[[Path], list[str]]
    says: tuple[str, ...]
    command: str = "run"


def _file(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return str(path)


CASES = [
    Case(
        "areas-typo",
        lambda d: ["--areas", "handshak"],
        ("--areas", "unknown area(s) handshak", "known areas:", "handshake, isolation"),
    ),
    Case(
        "keyword-syntax",
        lambda d: ["-k", "handshake and"],
        ("-k", "'handshake and' is not a valid expression", "and, or, not and parentheses"),
    ),
    Case(
        "keyword-matches-nothing",
        lambda d: ["-k", "nothing_is_called_this"],
        ("no scenario matches the selection", "-k 'nothing_is_called_this'"),
    ),
    Case(
        "area-and-keyword-match-nothing",
        lambda d: ["--areas", "handshake", "-k", "migration"],
        ("no scenario matches the selection", "--areas handshake", "-k 'migration'"),
    ),
    Case(
        "expectations-missing",
        lambda d: ["--expectations", str(d / "absent.toml")],
        ("--expectations", "absent.toml does not exist"),
    ),
    Case(
        "expectations-not-toml",
        lambda d: ["--expectations", _file(d, "x.toml", "scenarios = [unclosed\n")],
        ("--expectations", "x.toml is not valid TOML", "line 1"),
    ),
    Case(
        "expectations-unknown-table",
        lambda d: ["--expectations", _file(d, "x.toml", "[expected_failure]\nscenarios = []\n")],
        ("--expectations", "unknown table(s) or key(s) ['expected_failure']", "one table"),
    ),
    Case(
        "expectations-unknown-scenario",
        lambda d: [
            "--expectations",
            _file(d, "x.toml", '[expected_failures]\nscenarios = ["test_"]\n'),
        ],
        ("--expectations", "unknown scenario id(s) ['test_']", "pi-conformance scenarios"),
    ),
    Case(
        "expectations-unknown-requirement",
        lambda d: [
            "--expectations",
            _file(d, "x.toml", '[expected_failures]\nrequirements = ["R4.10", "R99.1"]\n'),
        ],
        ("--expectations", "unknown requirement ID(s) ['R99.1']", "pi-conformance requirements"),
    ),
    Case(
        "report-under-a-file",
        lambda d: ["--report", str(Path(_file(d, "plain", "")) / "report")],
        ("--report", "a folder on its path is a file", "give a folder"),
    ),
    Case(
        "report-is-a-file",
        lambda d: ["--report", _file(d, "plain", "")],
        ("--report", "is a file", "give a folder"),
    ),
    Case(
        "scratch-dir-is-a-file",
        lambda d: ["--scratch-dir", _file(d, "plain", "")],
        ("--scratch-dir", "is a file", "give a folder for the scenarios' temporary folders"),
    ),
    Case(
        "scratch-dir-under-a-file",
        lambda d: ["--scratch-dir", str(Path(_file(d, "plain", "")) / "scratch")],
        ("--scratch-dir", "a folder on its path is a file", "give a folder"),
    ),
    Case(
        "host-module-not-importable",
        lambda d: ["--host-module", "no_such_host_module:serve"],
        ("--host-module", "No module named 'no_such_host_module'", "module:function"),
    ),
    Case(
        "host-module-not-callable",
        lambda d: ["--host-module", "marker_host_module:NOT_CALLABLE"],
        ("--host-module", "does not name a callable serve function", "module:function"),
    ),
    Case(
        "host-cmd-missing-executable",
        lambda d: ["--host-cmd", f"{d / 'absent-host'} --verbose"],
        ("--host-cmd", "absent-host' does not exist", "the host's executable"),
    ),
    Case(
        "host-cmd-not-executable",
        lambda d: ["--host-cmd", _file(d, "host.sh", "#!/bin/sh\n")],
        ("--host-cmd", "is not an executable file", "name its interpreter first"),
    ),
    Case(
        "host-cmd-unbalanced-quotes",
        lambda d: ["--host-cmd", "my-host --name 'unclosed"],
        ("--host-cmd", "no closing quotation", "quote it as a POSIX shell would"),
    ),
    Case(
        "host-cmd-not-on-path",
        lambda d: ["--host-cmd", "no-such-host-command-on-path --serve"],
        ("--host-cmd", "'no-such-host-command-on-path' was not found on PATH"),
    ),
    Case(
        "timeout-negative",
        lambda d: ["--timeout", "-3"],
        ("argument --timeout", "'-3' is not positive", "a positive number of seconds"),
    ),
    Case(
        "timeout-zero",
        lambda d: ["--timeout", "0"],
        ("argument --timeout", "'0' is not positive", "a positive number of seconds"),
    ),
    Case(
        "timeout-not-a-number",
        lambda d: ["--timeout", "abc"],
        ("argument --timeout", "'abc' is not a number", "a positive number of seconds"),
    ),
    Case(
        "scenario-timeout-zero",
        lambda d: ["--scenario-timeout", "0"],
        ("argument --scenario-timeout", "'0' is not positive", "a positive number of seconds"),
    ),
    Case(
        "max-time-negative",
        lambda d: ["--max-time", "-1"],
        ("argument --max-time", "'-1' is not positive", "a positive number of seconds"),
    ),
    Case(
        "workers-zero",
        lambda d: ["--workers", "0"],
        ("argument -n/--workers", "'0' is too few", "at least 1, or 'auto'"),
    ),
    Case(
        "shard-beyond-total",
        lambda d: ["--shard", "3/2"],
        ("--shard", "'3/2'", "I must be between 1 and N"),
    ),
    Case(
        "driver-inprocess-with-host-cmd",
        lambda d: ["--driver", "inprocess", "--host-cmd", "x"],
        ("--driver inprocess runs a Python host", "use --host-module, not --host-cmd"),
    ),
    Case(
        "unknown-option",
        lambda d: ["--colour", "always"],
        (
            "pi-conformance run: unrecognized arguments: --colour always",
            "see 'pi-conformance run --help'",
        ),
    ),
    Case(
        "no-command",
        lambda d: [],
        ("the following arguments are required: COMMAND", "pi-conformance --help"),
        command="",
    ),
    Case(
        "scenarios-areas-typo",
        lambda d: ["--areas", "handshake,aproval"],
        ("--areas", "unknown area(s) aproval", "known areas:", "approval"),
        command="scenarios",
    ),
    Case(
        "merge-missing-report",
        lambda d: [str(d / "absent-report")],
        ("absent-report does not exist", "report folders or their summary.json"),
        command="merge",
    ),
    Case(
        "merge-foreign-file",
        lambda d: [_file(d, "summary.json", '{"tests": 3, "failures": 0}\n')],
        ("not a pi-conformance summary.json (format 2)", "run: field required"),
        command="merge",
    ),
]


def _command_line(case: Case, folder: Path, marker_host: Path) -> list[str]:
    args = case.args(folder)
    if case.command != "run":
        return [case.command, *args] if case.command else args
    if not {"--host-cmd", "--host-module", "--driver"} & set(args):
        args = ["--host-cmd", host_cmd(marker_host), *args]
    if "--report" not in args:
        args = ["--report", str(folder / "report"), *args]
    return ["run", "--workers", "1", *args]


def _refuse(case: Case, folder: Path, marker_host: Path) -> tuple[Finished, Path]:
    folder.mkdir()
    marker = folder / "host-started"
    run = start_cli(
        *_command_line(case, folder, marker_host),
        cwd=folder,
        env={
            MARKER_VARIABLE: str(marker),
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(marker_host.parent), os.environ.get("PYTHONPATH")])
            ),
        },
    )
    finished = run.finish(WAIT_S)
    assert_nothing_left(run.mark)
    return finished, marker


@pytest.fixture(scope="module")
def refusals(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Future[tuple[Finished, Path]]]]:
    """Start every selected case at once."""
    base = tmp_path_factory.mktemp("arguments")
    marker_host = write_script(
        base,
        "marker_host.py",
        f"""
        import os, pathlib
        pathlib.Path(os.environ["{MARKER_VARIABLE}"]).write_text("started")
        """,
    )
    write_script(
        base,
        "marker_host_module.py",
        f"""
        import os, pathlib
        NOT_CALLABLE = 42

        def serve(argv, stdin, stdout, stderr):
            pathlib.Path(os.environ["{MARKER_VARIABLE}"]).write_text("started")
            return 1
        """,
    )
    wanted = {item.name for item in request.session.items if item.module is sys.modules[__name__]}
    selected = [c for c in CASES if f"test_a_bad_argument_is_refused_in_one_line[{c.id}]" in wanted]
    with ThreadPoolExecutor(max_workers=max(2, min(6, (os.cpu_count() or 2) * 2))) as pool:
        futures = {c.id: pool.submit(_refuse, c, base / c.id, marker_host) for c in selected}
        yield futures
        for future in futures.values():
            future.cancel()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_bad_argument_is_refused_in_one_line(
    refusals: dict[str, Future[tuple[Finished, Path]]], case: Case
) -> None:
    finished, marker = refusals[case.id].result()
    assert finished.status == 2, finished.output
    assert "Traceback" not in finished.stderr, finished.output
    lines = finished.stderr.splitlines()
    assert len(lines) == 1, f"expected one line on stderr:\n{finished.output}"
    assert lines[0].startswith("pi-conformance"), finished.output
    for part in case.says:
        assert part in lines[0], f"{part!r} is missing from: {lines[0]}"
    assert finished.stdout == "", finished.output
    assert not marker.exists(), "a host was started before the arguments were checked"


def test_the_marker_host_would_have_been_noticed(tmp_path: Path) -> None:
    """The cases above prove no host started only if the marker host leaves its marker."""
    marker_host = write_script(
        tmp_path,
        "marker_host.py",
        f"""
        import os, pathlib
        pathlib.Path(os.environ["{MARKER_VARIABLE}"]).write_text("started")
        """,
    )
    marker = tmp_path / "host-started"
    run = start_cli(
        "run",
        "--host-cmd",
        host_cmd(marker_host),
        "--report",
        str(tmp_path / "report"),
        "--areas",
        "handshake",
        env={MARKER_VARIABLE: str(marker)},
    )
    finished = run.finish(WAIT_S)
    assert finished.status == 3, finished.output  # the marker host fails the preflight
    assert marker.exists(), finished.output
    assert_nothing_left(run.mark)
