"""Mutation campaign: how many unplanned bugs in the reference host the conformance suite catches.

Each mutant is one small change to one module of ``reference_host`` (mutmut's operators:
strings, numbers, comparisons, boolean operators, arguments, assignments, ...). It is
written into a private copy of the package, and the conformance suite is run through its
CLI against that copy, scoped to the feature areas that exercise the module:

    python -m conformance run --areas A,B --workers 1 -x -q --report DIR

Exit status 1 (a scenario failed or errored) or 3 (the host failed its preflight) means
the mutant was killed; 0 means it survived; anything else is recorded for investigation.

The default driver is ``hybrid``: the in-process driver first (fast), and every mutant
that survives it is run again with the subprocess driver, which alone can crash a host,
so the final verdict is always the subprocess driver's on survivors.

Results go to a JSON file that the next run resumes from. Survivors judged equivalent are
listed with a reason in ``scripts/mutation_equivalents.toml``; the score is killed over
non-equivalent mutants.

    python scripts/mutation_campaign.py [--modules approvals,state] [--sample N --seed S]
        [--jobs J] [--results mutation-results.json]
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from conformance.selection import any_of

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "reference_host"
EQUIVALENTS = ROOT / "scripts" / "mutation_equivalents.toml"
RESULTS_FORMAT = 1

KILLED, SURVIVED, TIMEOUT, INVESTIGATE = "killed", "survived", "timeout", "investigate"
_USAGE_ERROR = 2  # the CLI's exit status for arguments it cannot use

EVERY_AREA = (
    "approval",
    "artifact_integrity",
    "deadline",
    "execution",
    "handshake",
    "isolation",
    "migration",
    "plan_tools",
    "protocol_errors",
    "restart_interruption",
    "scheduled_plan",
    "sessions",
    "shell",
    "submit_plan",
    "turn_boundaries",
)


@dataclass(frozen=True)
class ModuleSpec:
    """A module under mutation and the feature areas that exercise it."""

    name: str
    path: str  # relative to the repository root
    areas: tuple[str, ...]


_PLAN_FLOW = ("approval", "artifact_integrity", "deadline", "execution", "submit_plan")
_TURNS = (
    *_PLAN_FLOW,
    "isolation",
    "plan_tools",
    "restart_interruption",
    "scheduled_plan",
    "sessions",  # provider errors and the prompt's first request are checked there
    "shell",
    "turn_boundaries",
)

MODULES: dict[str, ModuleSpec] = {
    spec.name: spec
    for spec in (
        ModuleSpec(
            "approvals",
            "reference_host/approvals.py",
            (*_PLAN_FLOW, "isolation", "restart_interruption", "turn_boundaries"),
        ),
        ModuleSpec("state", "reference_host/state.py", EVERY_AREA),
        ModuleSpec(
            "artifacts",
            "reference_host/artifacts.py",
            ("approval", "artifact_integrity", "execution", "restart_interruption", "submit_plan"),
        ),
        ModuleSpec("turns", "reference_host/turns.py", _TURNS),
        ModuleSpec("permissions", "reference_host/permissions.py", _TURNS),
        ModuleSpec("agent_tools", "reference_host/tools/agent_tools.py", _TURNS),
        ModuleSpec("tool_names", "reference_host/tools/names.py", _TURNS),
        ModuleSpec("storage", "reference_host/storage.py", EVERY_AREA),
        ModuleSpec("migration", "reference_host/migration.py", ("handshake", "migration")),
        ModuleSpec(
            "commands",
            "reference_host/commands.py",
            ("execution", "restart_interruption", "shell", "turn_boundaries"),
        ),
        ModuleSpec("tasks", "reference_host/tasks.py", ("scheduled_plan", "sessions")),
        ModuleSpec("shells", "reference_host/shells.py", ("sessions", "shell", "handshake")),
        # The modules below carry the wire, the provider and the tools rather than an ADR
        # clause of their own; every area reaches them.
        ModuleSpec("host", "reference_host/host.py", EVERY_AREA),
        ModuleSpec("provider_client", "reference_host/provider_client.py", _TURNS),
        ModuleSpec("files", "reference_host/tools/files.py", _TURNS),
        ModuleSpec("browser", "reference_host/tools/browser.py", ("plan_tools", "sessions")),
        ModuleSpec("rpc", "reference_host/rpc.py", EVERY_AREA),
        ModuleSpec("framing", "reference_host/framing.py", ("handshake", "protocol_errors")),
        ModuleSpec("jsontext", "reference_host/jsontext.py", EVERY_AREA),
        ModuleSpec("validation", "reference_host/validation.py", EVERY_AREA),
        ModuleSpec(
            "clock",
            "reference_host/clock.py",
            (
                "approval",
                "deadline",
                "execution",
                "restart_interruption",
                "scheduled_plan",
                "shell",
            ),
        ),
        ModuleSpec(
            "reaper", "reference_host/reaper.py", ("execution", "restart_interruption", "shell")
        ),
        ModuleSpec(
            "datadir",
            "reference_host/datadir.py",
            ("handshake", "migration", "restart_interruption"),
        ),
        ModuleSpec("workspace", "reference_host/workspace.py", (*_TURNS, "artifact_integrity")),
        ModuleSpec("budget", "reference_host/tools/budget.py", _TURNS),
    )
}


@dataclass(frozen=True)
class Mutant:
    """One first-order mutant: a module's whole source with one change applied."""

    id: str
    module: str
    path: str
    line: int
    function: str | None
    before: str
    after: str
    source: str

    def describe(self) -> dict[str, Any]:
        """The mutant without its source, for the results file."""
        info = asdict(self)
        del info["source"]
        return info


def _changed_lines(original: str, mutated: str) -> tuple[int, str, str]:
    """First changed line number, and the changed lines before and after."""
    old, new = original.splitlines(), mutated.splitlines()
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            return i1 + 1, "\n".join(old[i1:i2]), "\n".join(new[j1:j2])
    return 0, "", ""


_TYPE_ALIAS = re.compile(r"\s*\w+(: TypeAlias)? = Literal\[")


def generate(spec: ModuleSpec, size: int | None = None, seed: int = 0) -> tuple[int, list[Mutant]]:
    """Mutants mutmut's operators make of the module: all of them, or a seeded sample.

    Returns how many mutations mutmut offers and the mutants chosen. The sample is drawn
    from mutmut's mutations in a seeded order before any is applied (applying one costs a
    full rewrite of the module), skipping those that change nothing that runs, until
    ``size`` are found. An id hashes the function, the changed lines and the text before
    them, not line numbers.
    """
    # mutmut is a development tool: imported here so that the rest of this file (used by a
    # unit test) does not need it. mutmut reads its config from the current directory.
    with contextlib.chdir(ROOT):
        import libcst
        from mutmut.mutation.file_mutation import create_mutations, deep_replace

        path = ROOT / spec.path
        code = path.read_text(encoding="utf-8")
        module, mutations, _, _ = create_mutations(spec.path, code)
        base = module.code
        order = list(range(len(mutations)))
        if size is not None:
            random.Random(f"{seed}:{spec.name}").shuffle(order)
        mutants: list[Mutant] = []
        seen: dict[str, int] = {}
        for index in order:
            if size is not None and len(mutants) >= size:
                break
            mutation = mutations[index]
            replaced = deep_replace(module, mutation.original_node, mutation.mutated_node)
            if not isinstance(replaced, libcst.Module):
                continue
            source = replaced.code
            if source == base:
                continue
            line, before, after = _changed_lines(base, source)
            if _TYPE_ALIAS.match(before):
                continue  # a typing-only alias: no mutant of it changes what runs
            function = mutation.contained_by_top_level_function
            named = getattr(function, "name", None)
            name = named.value if named is not None else None
            context = "\n".join(base.splitlines()[max(0, line - 4) : line - 1])
            digest = hashlib.sha1(
                f"{spec.path}\0{name}\0{context}\0{before}\0{after}".encode()
            ).hexdigest()[:10]
            seen[digest] = seen.get(digest, 0) + 1
            suffix = "" if seen[digest] == 1 else f"-{seen[digest]}"
            mutants.append(
                Mutant(
                    id=f"{spec.name}/{digest}{suffix}",
                    module=spec.name,
                    path=spec.path,
                    line=line,
                    function=name,
                    before=before,
                    after=after,
                    source=source,
                )
            )
    return len(mutations), sorted(mutants, key=lambda m: m.id)


def replacement(module: str, old: str, new: str) -> Mutant:
    """A named mutant: ``old``, found exactly once in the module, replaced by ``new``.

    The CI slice uses these: they go through the same workspace and oracle as mutmut's
    mutants, but do not depend on mutmut or on the order of its mutations.
    """
    spec = MODULES[module]
    base = (ROOT / spec.path).read_text(encoding="utf-8")
    if base.count(old) != 1:
        raise ValueError(f"{spec.path}: {old!r} occurs {base.count(old)} times, not once")
    source = base.replace(old, new)
    line, before, after = _changed_lines(base, source)
    digest = hashlib.sha1(f"{spec.path}\0{old}\0{new}".encode()).hexdigest()[:10]
    return Mutant(f"{module}/{digest}", module, spec.path, line, None, before, after, source)


def reapply(entry: dict[str, Any]) -> Mutant:
    """A recorded mutant applied again to the module as it is now, under its old id.

    Its changed lines (``before``) are looked for in the current module; of several
    places, the one nearest the recorded line is taken. This lets ``--recheck`` judge a
    survivor again after the host or the suite changed, even where the change moved it.
    """
    spec = MODULES[entry["module"]]
    base = (ROOT / spec.path).read_text(encoding="utf-8")
    before, after = entry["before"], entry["after"]
    lines = base.splitlines(keepends=True)
    starts = [sum(len(x) for x in lines[:i]) for i in range(len(lines))]
    places = [i for i, at in enumerate(starts) if base.startswith(before, at)] if before else []
    if not places:
        raise ValueError(f"{spec.path} no longer holds {before.strip()[:60]!r}")
    index = min(places, key=lambda i: abs(i + 1 - int(entry["line"])))
    at = starts[index]
    source = base[:at] + after + base[at + len(before) :]
    if not after:  # a deleted line: mutmut's diff gave the lines without their end
        source = base[:at] + base[at + len(before) :].removeprefix("\n")
    return Mutant(
        entry["id"], spec.name, spec.path, index + 1, entry.get("function"), before, after, source
    )


# --- the oracle -------------------------------------------------------------------------


@dataclass
class Verdict:
    """What the conformance suite said about one mutant under one driver."""

    outcome: str
    exit_code: int | None
    seconds: float
    failed: list[str]
    driver: str
    skipped: list[str]


class Workspace:
    """A private copy of the reference host that one mutant at a time is written into.

    The harness is copied too and runs with this folder as its working directory and
    first on PYTHONPATH: pytest puts the folder above the suite's package first on
    ``sys.path``, so a harness run from the checkout would give the in-process driver the
    checkout's unmutated host. No bytecode is written: a mutant of the same size written
    within the same second as the previous one would otherwise be served from a stale
    cache.
    """

    COPIED = (PACKAGE, "conformance", "pi_contract", "schemas", "features")

    def __init__(self, base: Path) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="mutant-", dir=base))
        for name in self.COPIED:
            shutil.copytree(
                ROOT / name, self.dir / name, ignore=shutil.ignore_patterns("__pycache__")
            )

    @contextlib.contextmanager
    def applied(self, path: str, source: str) -> Iterator[None]:
        """The module at ``path`` holds ``source`` for the duration of the block."""
        target = self.dir / path
        original = target.read_bytes()
        target.write_text(source, encoding="utf-8")
        try:
            yield
        finally:
            target.write_bytes(original)

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(self.dir), *filter(None, [env.get("PYTHONPATH")])])
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        return env

    def imported_from(self, module: str) -> Path:
        """Where a Python started like the harness imports ``module`` from."""
        out = subprocess.run(
            [sys.executable, "-c", f"import {module}; print({module}.__file__)"],
            cwd=self.dir,
            env=self.env(),
            capture_output=True,
            text=True,
            check=True,
        )
        return Path(out.stdout.strip())

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


class _Live:
    """The harness runs under way, each in its own process group, ended if the campaign is."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.processes: set[subprocess.Popen[bytes]] = set()
        self.closed = False

    def start(self, argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        with self.lock:
            if self.closed:
                raise RuntimeError("the campaign is stopping")
            process = subprocess.Popen(argv, **kwargs)
            self.processes.add(process)
        return process

    def forget(self, process: subprocess.Popen[bytes]) -> None:
        with self.lock:
            self.processes.discard(process)

    def end_all(self) -> None:
        with self.lock:
            self.closed = True
            for process in self.processes:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)


_LIVE = _Live()


def run_oracle(
    workspace: Workspace,
    areas: Iterable[str],
    driver: str,
    *,
    keyword: str | None = None,
    scenario_timeout: float = 45.0,
    max_time: float = 900.0,
) -> Verdict:
    """Run the area-scoped conformance suite against the workspace's host."""
    report = workspace.dir / f"report-{driver}"
    shutil.rmtree(report, ignore_errors=True)
    argv = [
        sys.executable,
        "-m",
        "conformance",
        "run",
        "--driver",
        driver,
        "--areas",
        ",".join(areas),
        "--workers",
        "1",
        "-x",
        "-q",
        "--scenario-timeout",
        str(scenario_timeout),
        "--max-time",
        str(max_time),
        "--report",
        str(report),
    ]
    if keyword:
        argv += ["-k", keyword]
    started = time.monotonic()
    process = _LIVE.start(
        argv,
        cwd=workspace.dir,
        env=workspace.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        code: int | None = process.wait(timeout=max_time + 120)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        code = None
    finally:
        _LIVE.forget(process)
    seconds = round(time.monotonic() - started, 2)
    failed, skipped = _read_summary(report / "summary.json")
    if code is None or code == 124:  # ended by us, or by the harness's own --max-time
        outcome = TIMEOUT
    elif code in (1, 3):
        outcome = KILLED
    elif code == 0:
        outcome = SURVIVED
    else:
        outcome = INVESTIGATE
    return Verdict(outcome, code, seconds, failed, driver, skipped)


def _read_summary(summary: Path) -> tuple[list[str], list[str]]:
    """Scenarios that failed or errored ("status: id"), and those the driver left out.

    With ``--areas`` the summary still lists every scenario; those outside the areas say
    so. The in-process driver leaves out the scenarios that stop the host abruptly; their
    ids are returned flattened the way ``-k`` matches them (lower case, ``_`` for spaces,
    no punctuation), so that a subprocess run can take them up.
    """
    try:
        data = json.loads(summary.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return [], []
    scenarios = data.get("scenarios", [])
    areas = set(data.get("run", {}).get("areas") or ())
    failed = [
        f"{s['status']}: {s['id']}" for s in scenarios if s.get("status") in ("failed", "errored")
    ]
    skipped = [
        re.sub(r"\W", "", str(s["id"]).lower().replace(" ", "_"))
        for s in scenarios
        if s.get("status") == "not-run"
        and str(s.get("reason") or "").startswith("needs a driver")
        and (not areas or s.get("area") in areas)
    ]
    return failed, skipped


def judge(
    workspace: Workspace,
    mutant: Mutant,
    driver: str,
    scenario_timeout: float,
    *,
    areas: Sequence[str] | None = None,
    keyword: str | None = None,
) -> list[Verdict]:
    """Apply the mutant and run the oracle; ``hybrid`` confirms survivors in a subprocess.

    ``areas`` defaults to the module's; ``keyword`` narrows the run further (``-k``).
    """
    areas = MODULES[mutant.module].areas if areas is None else areas
    timeout = scenario_timeout
    with workspace.applied(mutant.path, mutant.source):
        if driver != "hybrid":
            return [run_oracle(workspace, areas, driver, keyword=keyword, scenario_timeout=timeout)]
        first = run_oracle(workspace, areas, "inprocess", keyword=keyword, scenario_timeout=timeout)
        if first.exit_code == _USAGE_ERROR:
            # A host module that no longer imports is an argument error to the in-process
            # CLI; started as a command, the same host fails its preflight, a verdict.
            again_all = run_oracle(
                workspace, areas, "subprocess", keyword=keyword, scenario_timeout=timeout
            )
            return [first, again_all]
        if first.outcome != SURVIVED or not first.skipped:
            return [first]
        # What the in-process driver could not run (it cannot crash its host) runs in a
        # subprocess, selected by the flattened ids that -k matches.
        again = any_of(first.skipped)
        if keyword:
            again = f"({keyword}) and ({again})"
        second = run_oracle(workspace, areas, "subprocess", keyword=again, scenario_timeout=timeout)
        return [first, second]


# --- the campaign -----------------------------------------------------------------------


def fingerprint() -> dict[str, str]:
    """Hashes of what a verdict depends on: the host under mutation and the suite."""

    def tree(*parts: str) -> str:
        digest = hashlib.sha256()
        for part in parts:
            for file in sorted((ROOT / part).rglob("*")):
                if file.is_file() and "__pycache__" not in file.parts:
                    digest.update(str(file.relative_to(ROOT)).encode() + b"\0")
                    digest.update(file.read_bytes())
        return digest.hexdigest()[:16]

    return {
        "reference_host": tree(PACKAGE),
        "suite": tree("features", "conformance", "schemas"),
    }


_MUTANT_ID = re.compile(r"[a-z_]+/[0-9a-f]{10}(-\d+)?")


def load_equivalents(path: Path = EQUIVALENTS) -> dict[str, str]:
    """Survivors judged equivalent: mutant id → one-line reason.

    The file has one table, ``[equivalent]``, of ``"module/hash" = "reason"``. An id of
    the wrong shape, an unknown module or an empty reason is an error: a typo must not
    quietly leave a survivor out of the score's denominator.
    """
    if not path.exists():
        return {}
    with path.open("rb") as fh:
        data = tomllib.load(fh)
    unknown = set(data) - {"equivalent"}
    if unknown:
        raise ValueError(f"{path.name}: unknown tables {sorted(unknown)}; only [equivalent]")
    found: dict[str, str] = {}
    for key, reason in data.get("equivalent", {}).items():
        if not _MUTANT_ID.fullmatch(key) or key.partition("/")[0] not in MODULES:
            raise ValueError(f"{path.name}: {key!r} is not a mutant id (module/hash)")
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError(f"{path.name}: {key!r} needs a one-line reason")
        found[key] = reason.strip()
    return found


class Results:
    """The campaign's JSON results file, written after every mutant.

    Every entry records the fingerprint of the host and the suite it was judged against.
    A run reuses only the entries whose fingerprint is the current one; the others are
    kept (and reported as stale) until the mutant is judged again, so a sharper suite can
    judge just the survivors again (``--recheck survived``).
    """

    def __init__(self, path: Path, config: dict[str, Any]) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.fingerprint = fingerprint()
        self.data: dict[str, Any] = {"format": RESULTS_FORMAT, "config": config, "mutants": {}}
        if path.exists():
            old = json.loads(path.read_text(encoding="utf-8"))
            if old.get("format") == RESULTS_FORMAT:
                self.data["mutants"] = old.get("mutants", {})
                for entry in self.data["mutants"].values():
                    # files written before entries carried their own fingerprint
                    entry.setdefault("fingerprint", old.get("fingerprint"))
            else:
                print(f"{path}: written in another format; starting afresh", file=sys.stderr)

    def current(self, mutant_id: str) -> bool:
        """Whether the mutant was judged against the current host and suite."""
        entry = self.data["mutants"].get(mutant_id)
        return entry is not None and entry.get("fingerprint") == self.fingerprint

    def entries(self, modules: Iterable[str]) -> list[dict[str, Any]]:
        wanted = set(modules)
        found = self.data["mutants"].values()
        return sorted((e for e in found if e["module"] in wanted), key=lambda e: e["id"])

    def outcome(self, mutant_id: str) -> str | None:
        entry = self.data["mutants"].get(mutant_id)
        return None if entry is None else str(entry["outcome"])

    def record(self, mutant: Mutant, verdicts: list[Verdict]) -> None:
        final = verdicts[-1]
        entry = {
            **mutant.describe(),
            "outcome": final.outcome,
            "fingerprint": self.fingerprint,
            "verdicts": [asdict(v) for v in verdicts],
        }
        with self.lock:
            self.data["mutants"][mutant.id] = entry
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True), encoding="utf-8")
            tmp.replace(self.path)


def score(entries: Iterable[dict[str, Any]], equivalents: dict[str, str]) -> dict[str, Any]:
    """Per module and overall: the outcomes, and the score.

    score = killed / (mutants - equivalent). A timeout counts as killed (the suite noticed
    the mutant: it hung). A survivor listed in the equivalents file is left out of the
    denominator; a listed mutant that was killed is not equivalent and counts as killed.
    A run the harness could not judge (``investigate``) stays in the denominator: it is
    not counted as killed until someone looks at it.
    """
    keys = ("mutants", KILLED, TIMEOUT, SURVIVED, "equivalent", INVESTIGATE)
    table: dict[str, dict[str, Any]] = {}
    for entry in entries:
        row = table.setdefault(entry["module"], dict.fromkeys(keys, 0))
        row["mutants"] += 1
        outcome = entry["outcome"]
        if outcome == SURVIVED and entry["id"] in equivalents:
            row["equivalent"] += 1
        elif outcome in (KILLED, TIMEOUT, SURVIVED):
            row[outcome] += 1
        else:
            row[INVESTIGATE] += 1
    total: dict[str, Any] = {k: sum(r[k] for r in table.values()) for k in keys}
    for row in [*table.values(), total]:
        counted = row["mutants"] - row["equivalent"]
        caught = row[KILLED] + row[TIMEOUT]
        row["score"] = round(caught / counted, 4) if counted else None
    return {"modules": dict(sorted(table.items())), "total": total}


def print_score(summary: dict[str, Any]) -> None:
    head = ("module", "mutants", "killed", "timeout", "survived", "equiv", "unjudged", "score")
    print(f"{head[0]:<14}" + "".join(f"{h:>9}" for h in head[1:]))
    rows = [*summary["modules"].items(), ("TOTAL", summary["total"])]
    for name, row in rows:
        pct = "-" if row["score"] is None else f"{100 * row['score']:.1f}%"
        cells = [row[k] for k in ("mutants", KILLED, TIMEOUT, SURVIVED, "equivalent")]
        cells += [row[INVESTIGATE], pct]
        print(f"{name:<14}" + "".join(f"{c:>9}" for c in cells))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--modules",
        default=",".join(MODULES),
        help=f"comma-separated, from: {', '.join(MODULES)}",
    )
    parser.add_argument("--sample", type=int, help="at most N mutants per module")
    parser.add_argument("--seed", type=int, default=53)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--driver", choices=("hybrid", "inprocess", "subprocess"), default="hybrid")
    parser.add_argument("--scenario-timeout", type=float, default=45.0)
    parser.add_argument("--results", type=Path, default=ROOT / "mutation-results.json")
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    parser.add_argument("--score-only", action="store_true", help="print the score and stop")
    parser.add_argument(
        "--recheck",
        choices=(SURVIVED, TIMEOUT, INVESTIGATE),
        help="judge again only the mutants whose last outcome was this one (and those never "
        "judged), for example the survivors after the suite was sharpened; other results, "
        "even stale ones, are kept",
    )
    parser.add_argument(
        "--ids", help="with --recheck: only these mutant ids (comma-separated)", default=""
    )
    parser.add_argument("--json", type=Path, help="also write the score table to this file")
    args = parser.parse_args(argv)

    names = [n.strip() for n in args.modules.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODULES]
    if unknown:
        parser.error(f"unknown modules: {', '.join(unknown)}")
    config = {"modules": names, "sample": args.sample, "seed": args.seed, "driver": args.driver}
    results = Results(args.results, config)
    equivalents = load_equivalents()

    if args.recheck:
        todo = []
        only = {i.strip() for i in args.ids.split(",") if i.strip()}
        for entry in results.entries(names):
            if entry["outcome"] != args.recheck or (only and entry["id"] not in only):
                continue
            try:
                todo.append(reapply(entry))
            except ValueError as exc:
                print(f"{entry['id']}: cannot be applied again ({exc})", file=sys.stderr)
        chosen_ids: set[str] | None = None
    elif not args.score_only or args.list:
        chosen: list[Mutant] = []
        for name in names:
            offered, picked = generate(MODULES[name], args.sample, args.seed)
            print(f"{name}: {offered} mutations offered, {len(picked)} chosen", file=sys.stderr)
            chosen += picked
        if args.list:
            for m in chosen:
                print(f"{m.id}  {m.path}:{m.line}  {m.before.strip()!r} -> {m.after.strip()!r}")
            return 0
        todo = [m for m in chosen if not results.current(m.id)]
        chosen_ids = {m.id for m in chosen}
    else:
        todo, chosen_ids = [], None
    # interleaved modules: a campaign stopped early still has a sample of each
    random.Random(args.seed).shuffle(todo)
    if not args.score_only and todo:
        _run(todo, results, args.jobs, args.driver, args.scenario_timeout)

    # The score covers every result of the chosen modules in the file: the file is the
    # campaign, so a module edited since (which changes its sample) keeps its figures.
    entries = results.entries(names)
    summary = score(entries, equivalents)
    summary["config"] = config
    summary["stale"] = sum(not results.current(e["id"]) for e in entries)
    summary["not_judged"] = (
        0 if chosen_ids is None else len(chosen_ids - {e["id"] for e in entries})
    )
    print_score(summary)
    if summary["stale"]:
        print(f"{summary['stale']} result(s) were judged against an earlier host or suite")
    if summary["not_judged"]:
        print(f"{summary['not_judged']} chosen mutant(s) not judged yet")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    survivors = sorted(
        (e for e in entries if e["outcome"] == SURVIVED and e["id"] not in equivalents),
        key=lambda e: e["id"],
    )
    for e in survivors:
        print(f"survived {e['id']}  {e['path']}:{e['line']}  {e['after'].strip()}")
    return 0


def _run(todo: list[Mutant], results: Results, jobs: int, driver: str, timeout: float) -> None:
    base = Path(tempfile.mkdtemp(prefix="mutation-campaign-"))
    pool = [Workspace(base) for _ in range(max(1, jobs))]
    try:
        for ws in pool:
            where = ws.imported_from(f"{PACKAGE}.approvals")
            if ws.dir not in where.parents:
                raise SystemExit(f"the harness would import {PACKAGE} from {where}, not the copy")
        free: list[Workspace] = list(pool)
        free_lock = threading.Lock()
        counter = {"n": 0}
        started = time.monotonic()
        stopping = threading.Event()

        def one(mutant: Mutant) -> None:
            if stopping.is_set():
                return
            with free_lock:
                ws = free.pop()
            try:
                verdicts = judge(ws, mutant, driver, timeout)
            finally:
                with free_lock:
                    free.append(ws)
            if stopping.is_set():
                return  # its harness run was ended with the campaign: no verdict
            results.record(mutant, verdicts)
            with free_lock:
                counter["n"] += 1
                n = counter["n"]
            final = verdicts[-1]
            elapsed = time.monotonic() - started
            print(
                f"[{n}/{len(todo)} {elapsed:.0f}s] {final.outcome:<9} {mutant.id} "
                f"({sum(v.seconds for v in verdicts):.0f}s)",
                file=sys.stderr,
                flush=True,
            )

        def stop(signum: int, _frame: object) -> None:
            raise SystemExit(128 + signum)

        signal.signal(signal.SIGTERM, stop)
        executor = ThreadPoolExecutor(max_workers=len(pool))
        try:
            list(executor.map(one, todo))
        finally:
            stopping.set()
            _LIVE.end_all()
            executor.shutdown(wait=True, cancel_futures=True)
    finally:
        for ws in pool:
            ws.remove()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
