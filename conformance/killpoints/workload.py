"""The seeded workload: a random history of acknowledged writes, then one kill phase.

Every operation goes through the blocking client's typed calls and is recorded in the
:class:`~conformance.killpoints.history.History`. The model is the harness's mock
provider, scripted per operation, so each provider request is one the workload expects.
Commands append a unique line to the workspace's journal file and then print it, so a
printed line is one the workspace certainly holds.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from random import Random
from typing import Any, Final, Generic, TypeVar

from pydantic import BaseModel

from conformance.client import HostClient, RpcError
from conformance.killpoints.history import History
from conformance.mock_provider import (
    MockProvider,
    ScriptedReply,
    ScriptedToolCall,
    StallReply,
    TextReply,
    ToolCallsReply,
)
from conformance.protocol_models import PermissionMode, ProviderConfig

R = TypeVar("R")

JOURNAL: Final = "journal.txt"
SHORTEST_DELAY_S: Final = 0.0002
MODEL: Final = "mock-model"
DEADLINE_MS: Final = 30 * 60 * 1000
PERMISSION_MODES: Final[tuple[PermissionMode, ...]] = ("ask", "accept-edits", "auto")
POSIX_SHELLS: Final = frozenset({"sh", "bash", "dash", "posix-sh"})

PHASES: Final = (
    "plan-streaming",
    "plan-submit",
    "approval-pending",
    "execution-queued",
    "execution-running",
    "mid-command",
    "mid-migration",
)
"""Where in the lifecycle a run kills the host (``mid-migration`` is arranged apart)."""


def dump(model: BaseModel) -> dict[str, Any]:
    """A result model as the JSON object the host sent."""
    return model.model_dump(mode="json")


class InFlight(Generic[R]):
    """A request sent just before the kill, on a thread of its own.

    Once the host is dead and its output drained, :meth:`settle` learns whether it was
    answered: an answer is acknowledged, no answer leaves the outcome uncertain.
    """

    def __init__(
        self,
        history: History,
        op: str,
        detail: str,
        send: Callable[[], R],
        on_answer: Callable[[R], None],
        on_refused: Callable[[RpcError], None] = lambda _error: None,
    ) -> None:
        self._history, self._op, self._detail = history, op, detail
        self._on_answer, self._on_refused = on_answer, on_refused
        self._answer: list[R] = []
        self._refusal: list[RpcError] = []
        self._thread = threading.Thread(target=self._send, args=(send,), daemon=True)
        self._thread.start()

    def _send(self, send: Callable[[], R]) -> None:
        try:
            self._answer.append(send())
        except RpcError as error:
            self._refusal.append(error)
        except Exception:  # the host died first: no answer, the outcome is uncertain
            return

    def settle(self, timeout: float) -> bool:
        """Record the answer, the refusal, or that none came; True when one came."""
        self._thread.join(timeout)
        if self._answer:
            self._history.record(self._op, self._detail, "ok", "answered before the kill")
            self._on_answer(self._answer[0])
        elif self._refusal:
            self._history.record(self._op, self._detail, "error", self._refusal[0].canonical)
            self._on_refused(self._refusal[0])
        else:
            self._history.record(self._op, self._detail, "unknown", "no answer before the kill")
            return False
        return True


@dataclass
class KillPoint:
    """Where the workload stands when the kill comes, and how long after it comes."""

    phase: str
    variant: str
    delay: float
    target_session: str | None = None
    in_flight: list[InFlight[Any]] = field(default_factory=list)
    observe: Callable[[], str] | None = None  # after the kill: what the host got to do

    def settle(self, timeout: float) -> None:
        """After the kill: settle the requests in flight and note how far the host got."""
        for request in self.in_flight:
            answered = request.settle(timeout)
            self.variant += ", answered" if answered else ", unanswered"
        if self.observe is not None:
            self.variant += f", {self.observe()}"


class Workload:
    """Drives one host through a seeded random history, then into one kill phase."""

    def __init__(
        self,
        client: HostClient,
        provider: MockProvider,
        workspace: Path,
        rng: Random,
        history: History,
        fault_points: frozenset[str],
        tag: str,
    ) -> None:
        self.client, self.provider, self.workspace = client, provider, workspace
        self.rng, self.history, self.fault_points, self.tag = rng, history, fault_points, tag
        self._numbers = itertools.count(1)
        self._interactive: list[str] = []
        shells = client.request("shell/list")["shells"]
        self.shells = [s["shellId"] for s in shells if _posix(s)]

    # -- helpers ------------------------------------------------------------------------

    def _next(self, what: str) -> str:
        return f"{self.tag}-{what}-{next(self._numbers)}"

    def call(self, op: str, detail: str, send: Callable[[], R]) -> R:
        """Send one request, record its outcome, return its result (or raise RpcError)."""
        try:
            result = send()
        except RpcError as error:
            self.history.record(op, detail, "error", error.canonical)
            raise
        self.history.record(op, detail, "ok")
        return result

    def spread(self, longest: float) -> float:
        """A kill delay of up to ``longest`` seconds, log-uniform from a fraction of a
        millisecond: a host acts within milliseconds, so short delays need their share."""
        return math.exp(self.rng.uniform(math.log(SHORTEST_DELAY_S), math.log(longest)))

    def provider_config(self) -> ProviderConfig:
        """The provider every session and task uses: the harness."""
        return ProviderConfig(baseUrl=self.provider.base_url, model=MODEL)

    def command(self, *lines: str, hold: bool = False) -> str:
        """A command appending each line to the journal, then printing it."""
        steps = [f"printf '%s\\n' {line} >> {JOURNAL} && echo {line}" for line in lines]
        self.history.lines_started.update(lines)
        # The short pause spreads a kill between the two lines; the long one is the
        # command still running when the kill comes.
        script = " && sleep 0.05 && ".join(steps)
        return script + (" && sleep 60" if hold else "")

    def script(self, *replies: ScriptedReply) -> None:
        """Script the model's next replies."""
        self.provider.enqueue(*replies)

    def bash(self, command: str) -> ToolCallsReply:
        """A model reply calling Bash once."""
        return ToolCallsReply((ScriptedToolCall("Bash", {"command": command}),))

    def wait_turn(self, turn_id: str, since: int) -> dict[str, Any]:
        """Wait for ``turn/ended`` of one turn."""
        return self.client.wait_for("turn/ended", lambda p: p["turnId"] == turn_id, since)

    # -- sessions -----------------------------------------------------------------------

    def create_session(self, mode: str, permission: PermissionMode) -> str:
        """A new interactive session bound to the workspace."""
        shell = self.rng.choice([None, *self.shells])
        result = self.call(
            "session/create",
            f"mode={mode} permission={permission} shell={shell}",
            lambda: self.client.create_session(
                str(self.workspace),
                mode="plan" if mode == "plan" else "agent",
                permission_mode=permission,
                provider=self.provider_config(),
                shell_id=shell,
            ),
        )
        facts = self.history.saw_session(dump(result.session))
        self._interactive.append(facts.session_id)
        return facts.session_id

    def configure(self, session_id: str, **changes: Any) -> None:
        """Change a session's configuration (mode, permission_mode, shell_id)."""
        detail = " ".join(f"{k}={v}" for k, v in changes.items())
        result = self.call(
            "session/configure",
            f"{session_id} {detail}",
            lambda: self.client.configure_session(session_id, **changes),
        )
        self.history.saw_session(dump(result.session))

    def session(self, mode: str, permission: PermissionMode | None = None) -> str:
        """An idle interactive session in ``mode`` (and ``permission``): reused or new."""
        if not self._interactive or self.rng.random() < 0.4:
            chosen = self.rng.choice(PERMISSION_MODES) if permission is None else permission
            return self.create_session(mode, chosen)
        session_id = self.rng.choice(self._interactive)
        have_mode, have_permission = self.history.sessions[session_id].mode
        changes: dict[str, Any] = {}
        if have_mode != mode:
            changes["mode"] = mode
        if permission is not None and have_permission != permission:
            changes["permission_mode"] = permission
        if changes:
            self.configure(session_id, **changes)
        return session_id

    def prompt(self, session_id: str, text: str) -> str:
        """A prompt; its text is acknowledged once the host answers with the turn."""
        result = self.call(
            "session/prompt", f"{session_id} {text!r}", lambda: self.client.prompt(session_id, text)
        )
        self.history.sessions[session_id].prompts.append(text)
        return result.turnId

    # -- plans --------------------------------------------------------------------------

    def submit_plan_reply(self) -> tuple[ToolCallsReply, bytes]:
        """A model reply submitting a new plan, and the plan's bytes."""
        title = self._next("plan")
        markdown = f"# {title}\n\n1. Append a line to {JOURNAL}.\n2. Report back.\n"
        args = {"title": title, "markdown": markdown, "question": "Shall I go ahead?"}
        reply = ToolCallsReply((ScriptedToolCall("SubmitPlan", args),), text="Here is my plan.")
        return reply, markdown.encode()

    def plan_until_pending(self, session_id: str) -> str:
        """A Plan turn that submits a plan; returns the pending approval's id."""
        reply, markdown = self.submit_plan_reply()
        self.script(reply)
        mark = self.client.mark()
        turn = self.prompt(session_id, self._next("plan-prompt"))
        note = self.client.wait_for(
            "approval/updated",
            lambda p: (
                p["approval"]["sessionId"] == session_id and p["approval"]["status"] == "pending"
            ),
            mark,
        )
        self.history.saw_approval(note["approval"], markdown)
        self.wait_turn(turn, mark)
        approval_id: str = note["approval"]["approvalId"]
        read = self.call(
            "approval/get", approval_id, lambda: self.client.get_approval(session_id, approval_id)
        )
        self.history.saw_approval(dump(read.approval))
        return approval_id

    def approve(self, session_id: str, approval_id: str, mode: PermissionMode) -> None:
        """Approve with ``mode``; the session and the approval are acknowledged."""
        result = self.call(
            "approval/approve",
            f"{approval_id} {mode}",
            lambda: self.client.approve(session_id, approval_id, mode),
        )
        self.history.saw_approval(dump(result.approval))
        self.history.saw_session(dump(result.session))

    def read_approval(self, session_id: str, approval_id: str) -> None:
        """Read an approval back; what it shows is acknowledged."""
        read = self.call(
            "approval/get", approval_id, lambda: self.client.get_approval(session_id, approval_id)
        )
        self.history.saw_approval(dump(read.approval))

    def advance_clock(self, ms: int) -> None:
        """Move the host clock; timers it makes due fire before the answer."""
        self.call("conformance/clock/advance", str(ms), lambda: self.client.clock_advance(ms))

    # -- background operations ----------------------------------------------------------

    def background(self) -> None:
        """One random operation of the history before the kill phase; it completes."""
        operations: list[Callable[[], None]] = [
            self.new_session,
            self.reconfigure,
            self.set_default_shell,
            self.agent_command_turn,
            self.plan_cycle,
            self.task_operation,
            self.move_clock,
        ]
        self.rng.choice(operations)()

    def new_session(self) -> None:
        """Create a session."""
        self.create_session(self.rng.choice(("agent", "plan")), self.rng.choice(PERMISSION_MODES))

    def reconfigure(self) -> None:
        """Change a session's permission mode and shell."""
        session_id = self.session(self.rng.choice(("agent", "plan")))
        shell = self.rng.choice([None, *self.shells])
        self.configure(
            session_id, permission_mode=self.rng.choice(PERMISSION_MODES), shell_id=shell
        )

    def set_default_shell(self) -> None:
        """Persist a default shell (§7)."""
        if not self.shells:
            return
        shell = self.rng.choice(self.shells)
        self.call("shell/setDefault", shell, lambda: self.client.set_default_shell(shell))
        self.history.default_shell = shell

    def agent_command_turn(self) -> None:
        """An Agent prompt whose model runs one command, to completion."""
        session_id = self.session("agent", "auto")
        line = self._next("line")
        self.script(self.bash(self.command(line)), TextReply("Done."))
        mark = self.client.mark()
        self.wait_turn(self.prompt(session_id, f"Append {line}."), mark)

    def plan_cycle(self) -> None:
        """Plan, submit, then approve (and execute), reject, or let the deadline pass."""
        session_id = self.session("plan")
        approval_id = self.plan_until_pending(session_id)
        decision = self.rng.choice(("approve", "reject", "expire"))
        if decision == "approve":
            line = self._next("line")
            self.script(self.bash(self.command(line)), TextReply("Done."))
            mark = self.client.mark()
            self.approve(session_id, approval_id, "auto")
            self.client.wait_for(
                "execution/updated",
                lambda p: (
                    p["approvalId"] == approval_id
                    and p["executionState"] in ("completed", "interrupted")
                ),
                mark,
            )
        elif decision == "reject":
            result = self.call(
                "approval/reject", approval_id, lambda: self.client.reject(session_id, approval_id)
            )
            self.history.saw_approval(dump(result.approval))
        else:
            self.advance_clock(DEADLINE_MS + 1000)
        self.read_approval(session_id, approval_id)

    def move_clock(self) -> None:
        """Move the clock a little (no timer is due)."""
        self.advance_clock(self.rng.randint(1, 60_000))

    # -- scheduled tasks ----------------------------------------------------------------

    def create_task(self, mode: str, *, run_at: int | None = None) -> str:
        """A scheduled task in the workspace."""
        name = self._next("task")
        result = self.call(
            "task/create",
            f"{name} mode={mode} runAt={run_at}",
            lambda: self.client.create_task(
                name,
                f"Append a line for {name}.",
                "plan" if mode == "plan" else "agent",
                str(self.workspace),
                self.provider_config(),
                permission_mode="auto",
                run_at=run_at,
            ),
        )
        self.history.saw_task(dump(result.task))
        return result.task.taskId

    def read_tasks(self) -> None:
        """Read every task back; what it shows is acknowledged."""
        listing = self.call("task/list", "", self.client.list_tasks)
        for task in listing.tasks:
            self.history.saw_task(dump(task))

    def run_task_session(self, task_id: str, run_session: str | None) -> None:
        """Acknowledge the session a task run created."""
        if run_session is not None:
            read = self.call(
                "session/get", run_session, lambda: self.client.get_session(run_session)
            )
            self.history.saw_session(dump(read.session))

    def task_operation(self) -> None:
        """Create, run, fire, rename or delete a scheduled task."""
        kind = self.rng.choice(("plan-now", "agent-now", "timed", "rename", "delete"))
        live = [t for t, facts in self.history.tasks.items() if not facts.deleted]
        if kind in ("rename", "delete") and live:
            task_id = self.rng.choice(live)
            if kind == "rename":
                name = self._next("renamed")
                result = self.call(
                    "task/update",
                    f"{task_id} name={name} enabled=False",
                    lambda: self.client.update_task(task_id, name=name, enabled=False),
                )
                self.history.saw_task(dump(result.task))
            else:
                self.call("task/delete", task_id, lambda: self.client.delete_task(task_id))
                self.history.tasks[task_id].deleted = True
            return
        if kind == "plan-now":
            task_id = self.create_task("plan")
            try:
                self.call("task/run", task_id, lambda: self.client.run_task(task_id))
            except RpcError as refusal:
                if refusal.canonical != "PLAN_REQUIRES_INTERACTIVE_SESSION":
                    raise
        elif kind == "agent-now":
            line = self._next("line")
            self.script(self.bash(self.command(line)), TextReply("Done."))
            task_id = self.create_task("agent")
            mark = self.client.mark()
            run = self.call("task/run", task_id, lambda: self.client.run_task(task_id)).run
            self.client.wait_for("task/runFinished", lambda p: p["run"]["runId"] == run.runId, mark)
            self.run_task_session(task_id, run.sessionId)
        else:
            mode = self.rng.choice(("agent", "plan"))
            if mode == "agent":
                line = self._next("line")
                self.script(self.bash(self.command(line)), TextReply("Done."))
            now = self.client.clock_get().now
            task_id = self.create_task(mode, run_at=now + 5 * 60 * 1000)
            mark = self.client.mark()
            self.advance_clock(5 * 60 * 1000)
            done = self.client.wait_for(
                "task/runFinished", lambda p: p["run"]["taskId"] == task_id, mark
            )
            self.run_task_session(task_id, done["run"]["sessionId"])
        self.read_tasks()

    # -- the kill phases ----------------------------------------------------------------

    def arrange(self, phase: str) -> KillPoint:
        """Bring the host into ``phase``; the kill comes ``delay`` seconds later."""
        arrange: dict[str, Callable[[], KillPoint]] = {
            "plan-streaming": self.plan_streaming,
            "plan-submit": self.plan_submit,
            "approval-pending": self.approval_pending,
            "execution-queued": self.execution_queued,
            "execution-running": self.execution_running,
            "mid-command": self.mid_command,
        }
        return arrange[phase]()

    def plan_streaming(self) -> KillPoint:
        """A Plan turn whose model is still streaming (or, for a host that asks for whole
        replies, still answering); or a prompt just sent."""
        session_id = self.session("plan")
        self.script(StallReply(prefix="Drafting the plan"))
        text = self._next("plan-prompt")
        if self.rng.random() < 0.5:
            before = len(self.provider.requests())
            mark = self.client.mark()
            turn = self.prompt(session_id, text)
            request = self.provider.wait_for_requests(before + 1, self.client.timeout)[before]
            variant = "awaiting a whole reply"  # streaming requests are the host's choice
            if request.stream:
                self.client.wait_for("turn/text", lambda p: p["turnId"] == turn, mark)
                variant = "streamed"
            return KillPoint("plan-streaming", variant, self.spread(0.04), session_id)

        def answered(_result: Any) -> None:
            self.history.sessions[session_id].prompts.append(text)

        in_flight = InFlight(
            self.history,
            "session/prompt",
            f"{session_id} {text!r}",
            lambda: self.client.prompt(session_id, text),
            answered,
        )
        delay = self.spread(0.06)
        return KillPoint("plan-streaming", "prompt-in-flight", delay, session_id, [in_flight])

    def plan_submit(self) -> KillPoint:
        """The model has answered with SubmitPlan: artifact, approval and turn end race the
        kill."""
        session_id = self.session("plan")
        reply, _markdown = self.submit_plan_reply()
        self.script(reply)
        before = len(self.provider.requests())
        mark = self.client.mark()
        self.prompt(session_id, self._next("plan-prompt"))
        self.provider.wait_for_requests(before + 1, self.client.timeout)

        def observe() -> str:
            announced = self.client.notifications("approval/updated", mark)
            return "approval announced" if announced else "no approval announced"

        return KillPoint("plan-submit", "submit", self.spread(0.08), session_id, observe=observe)

    def approval_pending(self) -> KillPoint:
        """A pending approval; an approve, a reject or the deadline may be in flight."""
        session_id = self.session("plan")
        approval_id = self.plan_until_pending(session_id)
        variant = self.rng.choice(("idle", "approve", "reject", "deadline"))
        point = KillPoint("approval-pending", variant, self.spread(0.05), session_id)
        history = self.history
        if variant == "approve":
            mode = self.rng.choice(PERMISSION_MODES)
            self.script(StallReply(prefix="Working"))
            history.approve_in_flight(session_id, approval_id, mode)

            def approved(result: Any) -> None:
                history.saw_approval(dump(result.approval))
                history.saw_session(dump(result.session))
                history.settled(session_id)

            def refused(_error: RpcError) -> None:
                history.approvals[approval_id].statuses = frozenset({"interrupted"})
                history.approvals[approval_id].executions = frozenset({None})
                history.settled(session_id)

            point.in_flight.append(
                InFlight(
                    history,
                    "approval/approve",
                    f"{approval_id} {mode}",
                    lambda: self.client.approve(session_id, approval_id, mode),
                    approved,
                    refused,
                )
            )
        elif variant == "reject":
            history.decision_in_flight(approval_id, "rejected")

            def rejected(result: Any) -> None:
                history.saw_approval(dump(result.approval))

            point.in_flight.append(
                InFlight(
                    history,
                    "approval/reject",
                    approval_id,
                    lambda: self.client.reject(session_id, approval_id),
                    rejected,
                )
            )
        elif variant == "deadline":
            history.decision_in_flight(approval_id, "expired")

            def expired(_result: Any) -> None:
                history.approvals[approval_id].statuses = frozenset({"expired"})

            point.in_flight.append(
                InFlight(
                    history,
                    "conformance/clock/advance",
                    str(DEADLINE_MS),
                    lambda: self.client.clock_advance(DEADLINE_MS),
                    expired,
                )
            )
        return point

    def execution_queued(self) -> KillPoint:
        """An approved execution held in the queue (``holdExecution``), when offered."""
        session_id = self.session("plan")
        approval_id = self.plan_until_pending(session_id)
        variant = "held"
        if "holdExecution" in self.fault_points:
            self.call(
                "conformance/fault/arm",
                "holdExecution",
                lambda: self.client.arm_fault("holdExecution"),
            )
        else:
            variant = "not-held"  # the kill races the start of the execution
            self.script(StallReply(prefix="Working"))
        self.approve(session_id, approval_id, self.rng.choice(PERMISSION_MODES))
        return KillPoint("execution-queued", variant, self.spread(0.05), session_id)

    def execution_running(self) -> KillPoint:
        """An execution turn waiting for the model's answer."""
        session_id = self.session("plan")
        approval_id = self.plan_until_pending(session_id)
        self.script(StallReply(prefix="Working on the plan"))
        before = len(self.provider.requests())
        self.approve(session_id, approval_id, self.rng.choice(PERMISSION_MODES))
        self.provider.wait_for_requests(before + 1, self.client.timeout)
        return KillPoint("execution-running", "model", self.spread(0.04), session_id)

    def mid_command(self) -> KillPoint:
        """A command that has appended a line and is still running, in a prompt's turn,
        an execution or a scheduled run."""
        variant = self.rng.choice(("prompt", "execution", "scheduled"))
        first, second = self._next("line"), self._next("line")
        reply = self.bash(self.command(first, second, hold=True))
        mark = self.client.mark()
        target: str | None
        if variant == "prompt":
            target = self.session("agent", "auto")
            self.script(reply)
            self.prompt(target, f"Append {first} and {second}.")
        elif variant == "execution":
            target = self.session("plan")
            approval_id = self.plan_until_pending(target)
            self.script(reply)
            mark = self.client.mark()
            self.approve(target, approval_id, "auto")
        else:
            self.script(reply)
            task_id = self.create_task("agent")
            mark = self.client.mark()
            run = self.call("task/run", task_id, lambda: self.client.run_task(task_id)).run
            target = run.sessionId
            self.run_task_session(task_id, target)
        self.client.wait_for("command/output", lambda p: first in p["text"], mark)
        return KillPoint("mid-command", variant, self.spread(0.1), target)

    # -- after the kill -------------------------------------------------------------------

    def absorb_announcements(self) -> None:
        """Take in what the dead host announced: approvals, executions, printed lines."""
        for note in self.client.notifications():
            params = note.get("params", {})
            if note["method"] == "approval/updated":
                self.history.announced_approval(params["approval"])
            elif note["method"] == "execution/updated":
                self.history.saw_execution(params["approvalId"], params["executionState"])
            elif note["method"] == "command/output":
                text = params["text"]
                printed = {line for line in self.history.lines_started if line in text}
                self.history.lines_acknowledged |= printed


def _posix(shell: dict[str, Any]) -> bool:
    """A shell the workload's commands run in: by announced kind, else by name."""
    kind = shell.get("kind")
    if isinstance(kind, str):
        return kind in ("posix-sh", "bash")
    return str(shell.get("shellId")) in POSIX_SHELLS or Path(str(shell["path"])).name in (
        POSIX_SHELLS
    )
