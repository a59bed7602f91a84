"""Run the fuzzer against a host: schema-driven requests, then byte-level garbage.

One host serves the whole run. Before fuzzing, it is given something to be found: two
sessions in a temporary workspace, a plan awaiting approval and a scheduled task, whose
ids generated params often reuse. After every hostile request the host must answer as
the contract allows and keep serving (a follow-up ``shell/list`` answers). A host that
dies or hangs is recorded and replaced by a fresh one, and the fuzzing goes on.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import hypothesis
from hypothesis import HealthCheck, Phase, given

from conformance.client import HarnessError, HostClient, HostStoppedError, RpcError
from conformance.contract import ContractChecker, loads
from conformance.drivers import HostDriver, RunningHost
from conformance.fuzz.frames import describe, encode, request_line
from conformance.fuzz.oracle import (
    GARBAGE_CODES,
    Expected,
    answer_code,
    expected,
    line_needs_answer,
)
from conformance.fuzz.schemas import request_methods
from conformance.fuzz.strategies import VALID, Case, Places, cases, garbage
from conformance.mock_provider import MockProvider, ScriptedToolCall, TextReply, ToolCallsReply
from conformance.scratch import scratch_parent

CLOCK_METHODS: Final = ("conformance/clock/set", "conformance/clock/advance")
POOL_LIMIT: Final = 16
FORGET_EVERY: Final = 500  # requests after which the provider's recorded requests are dropped
PROBE_EVERY: Final = 10  # valid requests between two liveness probes
REDUCE_ATTEMPTS: Final = 24
FALLBACK: Final = TextReply("Fine.")
_EXCEPTION: Final = re.compile(r"\b\w*(Error|Exception)\b[:(]")


@dataclass(frozen=True)
class FuzzSettings:
    """The budget and the randomness of one fuzzing run."""

    examples: int = 200  # schema-driven requests
    frames: int = 100  # byte-level garbage lines
    seed: int | None = None  # None: hypothesis' derandomised, repeatable search
    timeout: float = 10.0  # longest wait for one answer, in seconds
    reduce: bool = True  # shorten each finding's frame before reporting it


@dataclass
class Finding:
    """A hostile frame the host answered wrongly, or did not survive."""

    category: str  # died, hung, internal-error, wrong-code, accepted-invalid, invalid-answer,
    # no-answer
    method: str  # the request method, or "(garbage)" for a line that is not a request
    kind: str  # how the params or the line were made
    expected: str
    got: str
    frame: bytes
    before: tuple[bytes, ...] = ()  # frames sent just before that the finding needs
    count: int = 1
    allowed: Expected | None = field(default=None, compare=False, repr=False)
    log: str = ""  # the end of the host's log when it happened

    @property
    def signature(self) -> tuple[str, str, str, str]:
        """What makes two findings the same finding."""
        return (self.category, self.method, self.kind, self.got.split(":", 1)[0])

    def reproducer(self) -> str:
        """The frames to send after ``initialize``, one per line, readable."""
        return "\n".join(describe(line) for line in (*self.before, self.frame))

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "category": self.category,
            "method": self.method,
            "kind": self.kind,
            "expected": self.expected,
            "got": self.got,
            "count": self.count,
            "reproducer": self.reproducer(),
            "log": self.log,
        }


@dataclass
class FuzzReport:
    """What was sent, what came back, and every finding."""

    requests: int = 0  # schema-driven requests sent
    garbage: int = 0  # byte-level garbage lines sent
    answers: int = 0  # responses to those frames
    probes: int = 0  # follow-up requests proving the host still serves
    deaths: int = 0
    hangs: int = 0
    invalid_answers: int = 0  # messages that broke the published schemas
    elapsed: float = 0.0
    coverage: dict[str, dict[str, Counter[str]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(Counter))
    )
    garbage_kinds: Counter[str] = field(default_factory=Counter)
    findings: dict[tuple[str, str, str, str], Finding] = field(default_factory=dict)

    @property
    def frames(self) -> int:
        """Hostile frames sent: requests and garbage lines."""
        return self.requests + self.garbage

    def add(self, finding: Finding) -> None:
        """Record a finding, once per signature."""
        known = self.findings.get(finding.signature)
        if known is None:
            self.findings[finding.signature] = finding
        else:
            known.count += 1

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready summary."""
        return {
            "frames": self.frames,
            "requests": self.requests,
            "garbage": self.garbage,
            "answers": self.answers,
            "probes": self.probes,
            "deaths": self.deaths,
            "hangs": self.hangs,
            "invalidAnswers": self.invalid_answers,
            "elapsedSeconds": round(self.elapsed, 1),
            "coverage": {
                method: {category: dict(counts) for category, counts in by_category.items()}
                for method, by_category in sorted(self.coverage.items())
            },
            "garbageKinds": dict(sorted(self.garbage_kinds.items())),
            "findings": [finding.to_json() for finding in self.findings.values()],
        }


class Target:
    """The host being fuzzed, its world (workspace, provider, ids) and its replacement."""

    def __init__(
        self, driver: HostDriver, provider: MockProvider, root: Path, timeout: float
    ) -> None:
        self.driver = driver
        self.provider = provider
        self.root = root
        self.timeout = timeout
        self.checker = ContractChecker()
        self.host: RunningHost | None = None
        self.client: HostClient | None = None
        self.generation = 0
        self.max_frame_bytes = 65536
        self.clock = 0
        self.places = Places(roots=[], base_url=provider.base_url)
        self.commit_fault_armed = False
        self.next_id = 0

    @property
    def rpc(self) -> HostClient:
        if self.client is None:
            raise HarnessError("the fuzzer has no connected host")
        return self.client

    def start(self) -> None:
        """A fresh host on a fresh data dir and workspace, with something to be found."""
        self.generation += 1
        base = self.root / f"host-{self.generation}"
        workspace = base / "workspace"
        (workspace / "sub").mkdir(parents=True)
        (workspace / "file.txt").write_text("a file, not a folder\n", encoding="utf-8")
        self.places.roots[:] = [
            str(workspace),
            str(workspace / "sub"),
            str(workspace / "missing"),
            str(workspace / "file.txt"),
            "relative/path",
        ]
        self.host = self.driver.start(base / "data")
        self.client = HostClient(self.host, self.timeout)
        handshake = self.client.initialize()
        self.max_frame_bytes = int(handshake["capabilities"]["maxFrameBytes"])
        self.commit_fault_armed = False
        self._furnish(workspace)

    def _furnish(self, workspace: Path) -> None:
        rpc = self.rpc
        provider = {"baseUrl": self.provider.base_url, "model": "fuzz-model"}
        plan = {"title": "Fuzz", "markdown": "# Fuzz\n", "question": "Go?"}
        self.provider.enqueue(ToolCallsReply((ScriptedToolCall("SubmitPlan", plan),)))
        sessions = [
            rpc.request(
                "session/create",
                {"workspaceRoot": str(workspace), "mode": mode, "provider": provider},
            )["session"]["sessionId"]
            for mode in ("plan", "agent")
        ]
        mark = rpc.mark()
        turn = rpc.request("session/prompt", {"sessionId": sessions[0], "text": "Plan."})["turnId"]
        rpc.wait_for("turn/ended", lambda p: p["turnId"] == turn, since=mark)
        approvals = [
            a["approvalId"]
            for a in rpc.request("approval/list", {"sessionId": sessions[0]})["approvals"]
        ]
        task = rpc.request(
            "task/create",
            {
                "name": "fuzz",
                "prompt": "Look around.",
                "mode": "agent",
                "workspaceRoot": str(workspace),
                "provider": provider,
            },
        )["task"]["taskId"]
        shells = [s["shellId"] for s in rpc.request("shell/list", {})["shells"]]
        self.places.pools = {
            "sessions": sessions,
            "approvals": approvals,
            "tasks": [task],
            "requests": [],
            "shells": shells,
        }
        self.clock = int(rpc.request("conformance/clock/get", {})["now"])

    def stop(self) -> None:
        """Stop the host (abruptly when it can be), keeping nothing."""
        host, client = self.host, self.client
        self.host = self.client = None
        if host is not None:
            if host.supports_crash:
                host.crash()
            else:
                host.stop(timeout=self.timeout)
        if client is not None:
            client.close()
        self.provider.release_stalls()

    def log_tail(self, lines: int = 2) -> str:
        """The host's last logged exception and last log lines, which often name the cause."""
        text = self.host.stderr_text() if self.host is not None else ""
        kept = [line.strip() for line in text.strip().splitlines() if line.strip()]
        causes = [line for line in kept if _EXCEPTION.search(line)]
        tail = kept[-lines:]
        if causes and causes[-1] not in tail:
            tail = [causes[-1], *tail]
        return " | ".join(tail)

    def forget_provider_requests(self) -> None:
        """The fuzzer never reads them back; a long campaign would keep every prompt."""
        self.provider.reset()
        self.provider.set_fallback(FALLBACK)

    def replace(self) -> None:
        """A dead or hung host gives way to a fresh one."""
        self.stop()
        self.start()

    def request_id(self) -> str:
        """A fresh id for a raw request."""
        self.next_id += 1
        return f"fuzz-{self.next_id}"

    def send(self, line: bytes) -> int:
        """Write one line; return the count of unsolicited answers before it."""
        before = len(self.rpc.unmatched)
        self.rpc.send_raw(line + b"\n")
        return before

    def answers_since(self, before: int, count: int, timeout: float) -> list[dict[str, Any]]:
        """At least ``count`` unsolicited answers from ``before`` on, if they come in time."""
        with contextlib.suppress(TimeoutError):
            self.rpc.wait_unmatched(before + count, timeout)
        return list(self.rpc.unmatched[before:])

    def probe(self) -> None:
        """The host still serves (raises HostStoppedError or TimeoutError otherwise).

        ``shell/list`` answers the same few entries however long the campaign has run;
        ``session/list`` would grow with every session the frames created, and checking
        its answer against the schema after every frame made long campaigns quadratic."""
        self.rpc.request("shell/list", {})

    def remember(self, result: dict[str, Any]) -> None:
        """Ids a result hands out become targets of later params."""
        pools = self.places.pools
        for key, pool, inner in (
            ("session", "sessions", "sessionId"),
            ("task", "tasks", "taskId"),
            ("approval", "approvals", "approvalId"),
        ):
            value = result.get(key)
            if isinstance(value, dict) and isinstance(value.get(inner), str):
                known = pools.setdefault(pool, [])
                if value[inner] not in known and len(known) < POOL_LIMIT:
                    known.append(value[inner])


class Fuzzer:
    """Sends cases and garbage to a target and judges every answer."""

    def __init__(self, target: Target, report: FuzzReport, timeout: float) -> None:
        self.target = target
        self.report = report
        self.timeout = timeout
        self.since_probe = 0
        self.outcome = ""  # how the last request was answered, for the coverage table

    # -- schema-driven requests -----------------------------------------------------------

    def run_case(self, case: Case) -> None:
        """Send one request and judge its answer and the host's health after it."""
        target, report = self.target, self.report
        if report.requests % FORGET_EVERY == FORGET_EVERY - 1:
            target.forget_provider_requests()
        line = case.line(target.request_id())
        allowed = expected(case, len(line), target.max_frame_bytes)
        report.requests += 1
        violations = len(target.rpc.violations)
        finding = self.judge_case(case, line, allowed)
        report.coverage[case.method][allowed.category][self.outcome] += 1
        if finding is None:
            finding = self._check_violations(case.method, case.kind, line, violations)
        if finding is not None:
            report.add(finding)

    def judge_case(self, case: Case, line: bytes, allowed: Expected) -> Finding | None:
        """The finding ``case`` makes, if any (the host is replaced when it went away)."""
        target = self.target

        def found(category: str, got: str, log: str = "") -> Finding:
            self.outcome = category
            finding = Finding(
                category, case.method, case.kind, allowed.describe(), got, line, (), 1, allowed
            )
            finding.log = log or target.log_tail()
            return finding

        try:
            before = target.send(line)
            answers = target.answers_since(before, 1, self.timeout)
            if not answers:
                target.probe()  # alive, yet silent: a frame without an answer
                self.report.probes += 1
                return found("no-answer", "no answer")
            self.report.answers += 1
            answer = answers[0]
            self.outcome = answer_code(answer) or "result"
            problem = self._judge_answer(case, answer, allowed)
            if case.method in CLOCK_METHODS:
                self._after_clock_move(case, line)
            if problem is not None:
                # The follow-up request proves the host still serves, and by its answer the
                # host's log about the failure has usually been read too.
                self.report.probes += 1
                target.probe()
                return found(*problem)
            self._maybe_probe(case)
        except HostStoppedError as stopped:
            self.report.deaths += 1
            log = target.log_tail()
            target.replace()
            return found("died", f"died: {stopped}", log)
        except TimeoutError:
            self.report.hangs += 1
            log = target.log_tail()
            target.replace()
            return found("hung", "hung: no answer to the follow-up request", log)
        return None

    def _judge_answer(
        self, case: Case, answer: dict[str, Any], allowed: Expected
    ) -> tuple[str, str] | None:
        raw = describe(str(answer).encode())
        violation = self.target.checker.check_incoming(answer, case.method, raw)
        if violation is not None:
            self.report.invalid_answers += 1
            return "invalid-answer", f"invalid-answer: {violation.describe()}"
        code = answer_code(answer)
        if code is None:
            self.target.remember(answer.get("result", {}))
            if case.method == "conformance/fault/arm" and isinstance(case.params, dict):
                self.target.commit_fault_armed |= case.params.get("fault") == "approvalCommit"
            return None if allowed.success else ("accepted-invalid", "a result")
        if code == "INTERNAL_ERROR":
            if case.method == "approval/approve" and self.target.commit_fault_armed:
                self.target.commit_fault_armed = False  # the armed fault fired, as asked
                return None
            return "internal-error", "INTERNAL_ERROR"
        if code not in allowed.codes:
            return "wrong-code", code
        return None

    def _maybe_probe(self, case: Case) -> None:
        self.since_probe += 1
        if case.kind != VALID or self.since_probe >= PROBE_EVERY:
            self.since_probe = 0
            self.report.probes += 1
            self.target.probe()

    def _after_clock_move(self, case: Case, line: bytes) -> None:
        """A clock move, even a refused one, must not break what comes next; then the clock
        is put back so that the rest of the run is not judged on its consequences."""
        target = self.target
        workspace = target.places.roots[0]
        self.report.probes += 1
        follow = request_line("fuzz-after-clock", "session/create", {"workspaceRoot": workspace})
        try:
            target.rpc.request("session/create", {"workspaceRoot": workspace})
        except RpcError as refused:
            if refused.canonical == "INTERNAL_ERROR":
                finding = Finding(
                    "internal-error",
                    "session/create",
                    f"after {case.method}",
                    "a result",
                    "INTERNAL_ERROR",
                    follow,
                    (line,),
                )
                finding.log = target.log_tail()
                self.report.add(finding)
        # A host that refuses to go back keeps its clock; the run goes on.
        with contextlib.suppress(RpcError):
            target.rpc.request("conformance/clock/set", {"now": target.clock})

    def _check_violations(self, method: str, kind: str, line: bytes, before: int) -> Finding | None:
        violations = self.target.rpc.violations if self.target.client is not None else []
        if len(violations) <= before:
            return None
        self.report.invalid_answers += len(violations) - before
        first = violations[before]
        return Finding(
            "invalid-answer",
            method,
            kind,
            "messages that follow the published schemas",
            f"invalid-answer: {first.describe()}",
            line,
        )

    # -- garbage --------------------------------------------------------------------------

    def run_garbage(self, kind: str, line: bytes) -> None:
        """Send one hostile line, then a request that must still be answered."""
        target, report = self.target, self.report
        report.garbage += 1
        report.garbage_kinds[kind] += 1
        needs = line_needs_answer(line)
        violations = len(target.rpc.violations)
        try:
            before = target.send(line)
            report.probes += 1
            target.probe()
            wanted = 1 if needs in ("error", "request") else 0
            answers = target.answers_since(before, wanted, self.timeout if wanted else 0.0)
        except (HostStoppedError, TimeoutError) as problem:
            died = isinstance(problem, HostStoppedError)
            report.deaths += died
            report.hangs += not died
            category = "died" if died else "hung"
            lost = Finding(category, "(garbage)", kind, "an error", f"{category}: {problem}", line)
            lost.log = target.log_tail()
            target.replace()
            report.add(lost)
            return
        report.answers += len(answers)
        finding = self._judge_garbage(kind, line, needs, answers)
        if finding is None:
            finding = self._check_violations("(garbage)", kind, line, violations)
        if finding is not None:
            report.add(finding)

    def _judge_garbage(
        self, kind: str, line: bytes, needs: str, answers: list[dict[str, Any]]
    ) -> Finding | None:
        codes = " or ".join(sorted(GARBAGE_CODES - {"METHOD_NOT_FOUND", "INVALID_PARAMS"}))
        if needs in ("error", "request") and not answers:
            return Finding("no-answer", "(garbage)", kind, codes, "no answer", line)
        if needs not in ("error", "optional") or not answers:
            return None
        code = answer_code(answers[0])
        if code == "INTERNAL_ERROR":
            return Finding("internal-error", "(garbage)", kind, codes, code, line)
        if code not in GARBAGE_CODES:
            return Finding("wrong-code", "(garbage)", kind, codes, str(code), line)
        return None


def fuzz(driver: HostDriver, settings: FuzzSettings) -> FuzzReport:
    """Fuzz ``driver``'s host; the report holds the counts and every finding."""
    started = time.monotonic()
    report = FuzzReport()
    with (
        MockProvider() as provider,
        tempfile.TemporaryDirectory(prefix="pi-fuzz-", dir=scratch_parent()) as tmp,
    ):
        provider.set_fallback(FALLBACK)  # any turn the fuzzing starts just ends
        target = Target(driver, provider, Path(tmp), settings.timeout)
        target.start()
        fuzzer = Fuzzer(target, report, settings.timeout)
        try:

            @given(case=cases(tuple(request_methods()), target.places))
            def requests(case: Case) -> None:
                fuzzer.run_case(case)

            @given(item=garbage(target.max_frame_bytes))
            def lines(item: tuple[str, bytes]) -> None:
                fuzzer.run_garbage(*item)

            _run(requests, settings, settings.examples)
            if settings.frames:
                _run(lines, settings, settings.frames)
            if settings.reduce:
                # Reduction traffic is not part of the campaign's counts.
                reducer = Fuzzer(target, FuzzReport(), settings.timeout)
                for finding in list(report.findings.values()):
                    _reduce(finding, reducer)
        finally:
            target.stop()
            shutil.rmtree(tmp, ignore_errors=True)
    report.elapsed = time.monotonic() - started
    return report


def _run(test: Any, settings: FuzzSettings, examples: int) -> None:
    configured = hypothesis.settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=settings.seed is None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        verbosity=hypothesis.Verbosity.quiet,
    )(test)
    if settings.seed is not None:
        configured = hypothesis.seed(settings.seed)(configured)
    configured()


def _reduce(finding: Finding, fuzzer: Fuzzer) -> None:
    """Shorten a finding's frame while the host keeps failing the same way."""
    if finding.method == "(garbage)" or finding.before or finding.allowed is None:
        return
    attempts = 0
    improved = True
    while improved and attempts < REDUCE_ATTEMPTS:
        improved = False
        for smaller in _smaller_frames(finding.frame):
            attempts += 1
            if _fails_alike(finding, smaller, fuzzer):
                improved = True
                break
            if attempts >= REDUCE_ATTEMPTS:
                break


def _fails_alike(finding: Finding, frame: bytes, fuzzer: Fuzzer) -> bool:
    """Send ``frame``; keep it as the reproducer if the host fails the same way."""
    assert finding.allowed is not None
    case = Case(finding.method, finding.kind, None)
    got = fuzzer.judge_case(case, frame, finding.allowed)
    if got is not None and got.signature == finding.signature:
        finding.frame = frame
        return True
    return False


def _smaller_frames(frame: bytes) -> list[bytes]:
    """Frames one step smaller: a params member left out, or a long run halved."""
    smaller: list[bytes] = []
    try:
        message = loads(frame)
    except (ValueError, RecursionError):
        message = None
    if isinstance(message, dict) and isinstance(message.get("params"), dict):
        for key in message["params"]:
            params = {k: v for k, v in message["params"].items() if k != key}
            smaller.append(encode({**message, "params": params}).encode("utf-8"))
    for opening, closing in ((b"9", b""), (b"x", b""), (b"[", b"]")):
        longest = _longest_run(frame, opening)
        if longest >= 16:
            half = longest // 2
            shorter = frame.replace(opening * longest, opening * half, 1)
            if closing:
                shorter = shorter.replace(closing * longest, closing * half, 1)
            smaller.append(shorter)
    return smaller


def _longest_run(frame: bytes, token: bytes) -> int:
    """The length of the longest run of the one-byte ``token`` in ``frame``."""
    best = current = 0
    value = token[0]
    for byte in frame:
        current = current + 1 if byte == value else 0
        best = max(best, current)
    return best
