"""How a scenario ended: classify what was raised, and build the failure record.

The verdicts (see DESIGN's table): a check the host broke is *failed*; a host that exited,
hung on a request or wrote lines that are not JSON is *errored*; a capability the host
did not declare makes the scenario *unverified*; a fault of the harness itself is a
*harness-error* and is never blamed on the host.
"""

from __future__ import annotations

import traceback
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from conformance.aftercheck import SCHEMA_REQUIREMENT, Problem
from conformance.blame import blamed_requirements
from conformance.capabilities import Unverified
from conformance.client import HarnessError, HostStoppedError, RpcError
from conformance.connection import WireRecord
from conformance.contract import Violation
from conformance.drivers import ExitInfo
from conformance.summary_model import (
    FailureKind,
    FailureRecord,
    HostExit,
    ProviderCall,
    ScenarioStatus,
    StepResult,
    WireLine,
)
from conformance.world import World

TRANSCRIPT_LINES = 60
PROVIDER_CALLS = 12
STDERR_TAIL = 4000
_LINE_LIMIT = 2000


@dataclass(frozen=True)
class Verdict:
    """The status of a scenario and, unless it passed, why."""

    status: ScenarioStatus
    kind: FailureKind | None = None
    message: str = ""
    detail: str = ""
    blamed: tuple[str, ...] = ()
    reason: str | None = None  # for unverified


def _split(text: str) -> tuple[str, str]:
    lines = text.strip().splitlines() or ["(no message)"]
    return lines[0], "\n".join(lines[1:]).strip()


def _exit_phrase(exit_info: ExitInfo | None) -> str:
    return f"the host {exit_info.describe()}" if exit_info else "the host stopped"


def _host_violations(violations: Sequence[Violation]) -> list[Violation]:
    return [v for v in violations if v.direction == "host-to-client"]


def _not_json(violations: Sequence[Violation]) -> list[Violation]:
    return [v for v in violations if v.reason.startswith("not ")]


def _blame(problems: Sequence[Problem], tags: Collection[str]) -> list[str]:
    """The requirements whole-scenario problems blame; an unnamed one blames the tags."""
    blamed: set[str] = set()
    for problem in problems:
        if problem.requirement:
            blamed.add(problem.requirement)
        else:
            blamed.update(blamed_requirements(None, None, tags))
    return sorted(blamed)


MESSAGE_LIMIT = 1_000  # characters of a verdict's one-line message
DETAIL_LIMIT = 20_000  # characters of its detail


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out: a host that
    echoes a frame-sized value must not turn one failure into megabytes of report."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


def classify(
    error: BaseException | None,
    step_function: object,
    tags: Collection[str],
    world: World | None,
    problems: Sequence[Problem] = (),
) -> Verdict:
    """The verdict for a scenario that raised ``error`` (None when its steps all passed),
    given the whole-scenario ``problems`` found after it ran."""
    verdict = _classify(error, step_function, tags, world, problems)
    return replace(
        verdict,
        message=clip(verdict.message, MESSAGE_LIMIT),
        detail=clip(verdict.detail, DETAIL_LIMIT),
    )


def _classify(
    error: BaseException | None,
    step_function: object,
    tags: Collection[str],
    world: World | None,
    problems: Sequence[Problem],
) -> Verdict:
    violations = _host_violations(world.violations()) if world is not None else []
    exit_info = world.last_exit() if world is not None else None
    if isinstance(error, Unverified):
        return Verdict("unverified", reason=error.reason)
    if world is not None and world.aborted.is_set():
        return Verdict(
            "errored",
            "deadline",
            "the scenario ran out of time and the harness stopped the host",
            f"its deadline is {world.deadline_s:g} s",
        )
    if error is None:
        if not problems:
            return Verdict("passed")
        return Verdict(
            "failed",
            "check",
            problems[0].message,
            "\n".join(f"{p.message}: {p.detail}" for p in problems),
            tuple(_blame(problems, tags)),
        )
    garbled = _not_json(violations)
    if isinstance(error, HostStoppedError):
        first, rest = _split(str(error))
        phrase = _exit_phrase(exit_info)
        message = first if first.startswith(phrase) else f"{phrase}: {first}"
        return Verdict("errored", "host-stopped", message, rest)
    if isinstance(error, HarnessError):
        first, rest = _split(str(error))
        return Verdict("harness-error", "harness", first, rest)
    if isinstance(error, TimeoutError):
        first, rest = _split(str(error) or "a wait timed out")
        if garbled:
            return Verdict(
                "errored",
                "invalid-protocol",
                "the host wrote a line that is not JSON-RPC while the harness waited: "
                + garbled[0].message[:200],
                first,
            )
        if world is not None and world.host is not None and exit_info and not exit_info.running:
            # The wait ran out because the live host went away: that is what to report first.
            phrase = _exit_phrase(exit_info)
            first = first.replace(f"before {phrase}", "before it stopped")
            return Verdict("errored", "host-stopped", f"{phrase}: {first}", rest)
        if first.startswith("no response to"):
            return Verdict("errored", "host-hung", f"the host hung: {first}", rest)
        blamed = blamed_requirements(None, step_function, tags)
        return Verdict("failed", "check", first, rest, tuple(blamed))
    if isinstance(error, AssertionError | RpcError):
        first, rest = _split(str(error))
        if isinstance(error, RpcError):
            first = f"the host refused a request the scenario needed: {first}"
        blamed = blamed_requirements(error, step_function, tags)
        if problems:
            blamed = sorted({*blamed, *_blame(problems, tags)})
            rest = "\n".join([rest, *(f"{p.message}: {p.detail}" for p in problems)]).strip()
        return Verdict("failed", "check", first, rest, tuple(blamed))
    described = "".join(traceback.format_exception_only(type(error), error)).strip()
    frames = traceback.extract_tb(error.__traceback__)[-3:]
    where = "; ".join(f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno} in {f.name}" for f in frames)
    missing = _host_made_file(error, world)
    if missing is not None:
        # The harness reads files the host should have made or kept (an artifact, a file a
        # command or a tool wrote); one that is not there is the host's failure.
        blamed = blamed_requirements(None, step_function, tags)
        return Verdict(
            "failed",
            "check",
            f"{missing} could not be read: {getattr(error, 'strerror', None) or error}",
            f"{described} ({where})",
            tuple(blamed),
        )
    if violations:
        # The steps rely on schema-valid answers; when the host sent one that is not, what
        # broke in the harness afterwards is a consequence, and the host is to blame.
        blamed = sorted({SCHEMA_REQUIREMENT, *_blame(problems, tags)})
        return Verdict(
            "failed",
            "check",
            f"the host broke the published schema: {violations[0].describe()}",
            f"the scenario could not go on: {described} ({where})",
            tuple(blamed),
        )
    return Verdict("harness-error", "harness", f"the harness failed: {described}", where)


def _host_made_file(error: BaseException, world: World | None) -> str | None:
    """The project or data-directory path (as the report shows it) that ``error`` failed
    to read, when it is a file the host is responsible for; None otherwise."""
    if world is None or not isinstance(error, FileNotFoundError | NotADirectoryError):
        return None
    if not isinstance(error.filename, str):
        return None
    path = Path(error.filename)
    for root, label in (
        (world.workspace, "the project's"),
        (world.data_dir, "the data directory's"),
    ):
        if path.is_relative_to(root):
            return f"{label} {path.relative_to(root).as_posix() or '.'}"
    return None


def _wire_line(entry: WireRecord, offset: float) -> WireLine:
    text = entry.text
    if len(text) > _LINE_LIMIT:
        text = f"{text[: _LINE_LIMIT // 2]} … [{entry.size} bytes] … {text[-200:]}"
    direction: Literal["sent", "received"] = (
        "sent" if entry.direction == "client-to-host" else "received"
    )
    return WireLine(direction=direction, at_s=round(entry.elapsed + offset, 3), text=text)


def _provider_call(request: Any) -> ProviderCall:
    messages = list(getattr(request, "messages", []) or [])
    last = messages[-1] if messages else {}
    content = last.get("content") if isinstance(last, dict) else None
    text = content if isinstance(content, str) else str(content)
    flagged = (
        "malformed"
        if getattr(request, "malformed", False)
        else "unscripted"
        if getattr(request, "unscripted", False)
        else None
    )
    return ProviderCall(
        model=getattr(request, "model", None),
        stream=bool(getattr(request, "stream", False)),
        tools=list(getattr(request, "tool_names", ())),
        messages=len(messages),
        last_message=f"{last.get('role', '?') if isinstance(last, dict) else '?'}: {text[:300]}",
        flagged=flagged,
    )


def failure_record(
    verdict: Verdict, step: StepResult | None, world: World | None
) -> FailureRecord | None:
    """The record of a failed, errored or harness-broken scenario (None otherwise)."""
    if verdict.kind is None:
        return None
    transcript: list[WireLine] = []
    provider: list[ProviderCall] = []
    stderr = ""
    host_exit: HostExit | None = None
    violations: list[str] = []
    if world is not None:
        transcript = [_wire_line(entry, offset) for entry, offset in world.transcript()]
        provider = [_provider_call(r) for r in world.provider.requests()]
        stderr = world.stderr()[-STDERR_TAIL:]
        exit_info = world.last_exit()
        if exit_info is not None:
            host_exit = HostExit(
                running=exit_info.running, status=exit_info.status, signal=exit_info.signal
            )
        violations = [v.describe() for v in world.violations()]
    return FailureRecord(
        kind=verdict.kind,
        message=verdict.message,
        detail=verdict.detail,
        step=step,
        blamed=list(verdict.blamed),
        host_exit=host_exit,
        stderr_tail=stderr,
        transcript=transcript[-TRANSCRIPT_LINES:],
        provider_requests=provider[-PROVIDER_CALLS:],
        violations=violations,
    )
