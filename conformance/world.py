"""Per-scenario state: the host under test, its client, the workspace and what happened.

The state steps share is typed: cursors into the host's notifications and the provider's
requests, what was submitted, what was seen at creation and after a restart. Cursors are
positions in the scenario's whole notification history, across host restarts, so a mark
taken before a restart still means "from here on" after it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from pydantic import BaseModel

from conformance.blame import blame
from conformance.client import HarnessError, HostClient, HostStoppedError, Predicate, RpcError
from conformance.connection import WireRecord
from conformance.contract import Violation
from conformance.drivers import ExitInfo, HostDriver, RunningHost
from conformance.mock_provider import MockProvider
from conformance.storage_inspector import StorageInspector

if TYPE_CHECKING:
    from conformance.loopback_page import LocalPage

T = TypeVar("T")
P = ParamSpec("P")

# How long a host that left a request unanswered gets to exit, once its input has closed,
# and again after SIGTERM (a host that answers gets the driver's own, longer, wait).
UNANSWERED_STOP_S = 2.0


def need(value: T | None, what: str) -> T:
    """``value``, or a harness error: a step ran before the step that provides ``what``."""
    if value is None:
        raise HarnessError(f"the scenario has no {what} yet: a step is missing before this one")
    return value


@dataclass
class Outcome:
    """The result of the last action a step performed: a result or a canonical error."""

    result: dict[str, Any] | None = None
    error: RpcError | None = None

    @classmethod
    def from_response(cls, method: str, response: dict[str, Any]) -> Outcome:
        """The outcome carried by a raw JSON-RPC response."""
        error = response.get("error")
        if isinstance(error, dict):
            data = error.get("data")
            return cls(
                error=RpcError(
                    method,
                    int(error.get("code", 0)),
                    str(error.get("message")),
                    data if isinstance(data, dict) else {},
                )
            )
        result = response.get("result")
        return cls(result=result if isinstance(result, dict) else {})

    def require_error(self) -> RpcError:
        """The error, or an assertion failure naming the unexpected success."""
        assert self.error is not None, f"expected the host to refuse, but it answered {self.result}"
        return self.error

    def require_result(self) -> dict[str, Any]:
        """The result, or an assertion failure naming the unexpected error."""
        assert self.error is None, f"expected success, but the host refused: {self.error}"
        assert self.result is not None
        return self.result


@dataclass
class Cursors:
    """Where the interesting part of the notification and provider histories starts."""

    turn: int = 0  # notifications, from the start of the last prompt, run or raw input
    approve: int = 0  # notifications, from the last approve
    provider_turn: int = 0  # provider requests, from the start of the last prompt or run
    provider_approve: int = 0  # provider requests, from the last approve
    provider_restart: int = 0  # provider requests, from the last restart
    restart: int = 0  # notifications, from the last restart
    decision: int = 0  # notifications, from the last reject or expiry of a plan
    provider_decision: int = 0  # provider requests, from the last reject or expiry of a plan


@dataclass(frozen=True)
class SubmittedPlan:
    """What the scripted model submitted through SubmitPlan."""

    title: str
    markdown: str
    question: str


@dataclass(frozen=True)
class ApprovalSnapshot:
    """An approval and its session, over the protocol and in storage, at one moment, with
    the positions of the notification and provider histories at that moment."""

    approval: dict[str, Any]
    row: dict[str, Any]
    session: dict[str, Any]
    session_row: dict[str, Any]
    notifications: int
    provider_requests: int


@dataclass
class PlanState:
    """The plan of the scenario and its approval as seen at different moments."""

    submitted: list[SubmittedPlan] = field(default_factory=list)
    approval: dict[str, Any] | None = None  # the approval the steps act on
    at_creation: dict[str, Any] | None = None  # the approval as first seen
    clock_at_creation: int | None = None
    reloaded: dict[str, Any] | None = None  # the approval a reloaded client read
    concurrent_responses: list[dict[str, Any]] = field(default_factory=list)
    permission_request: dict[str, Any] | None = None  # the question the steps answer
    questions_asked: list[dict[str, Any]] = field(default_factory=list)  # oldest first
    read_outcome: Outcome | None = None  # the last attempt to open the artifact
    turn_id: str | None = None  # the Plan turn the harness started for the approval
    prompt: str | None = None  # the user's text of that Plan turn
    clock_at_turn_start: int | None = None
    clock_at_decision: int | None = None  # the host clock when approve or reject was sent
    before_action: ApprovalSnapshot | None = None  # read back just before an action
    approved: dict[str, Any] | None = None  # the result of the last successful approve
    later_turn_id: str | None = None  # a prompt turn the harness started after the plan
    closing_scripted: bool = False  # the execution's last answer is already scripted
    earlier_approval: dict[str, Any] | None = None  # approved before the one acted on now


@dataclass
class RestartObservation:
    """What the first answers of a restarted host showed, and what came before them."""

    stored_at_first_answer: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    approvals: list[dict[str, Any]] = field(default_factory=list)
    session: dict[str, Any] | None = None
    # session alias -> its approvals, as the host listed them before and after the restart
    approvals_before: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    approvals_after: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    stored_before: dict[str, dict[str, tuple[Any, ...]]] = field(default_factory=dict)
    commands_before: dict[str, tuple[Any, ...]] | None = None  # command_audit at a crash
    answers_before: dict[str, Any] = field(default_factory=dict)  # read -> its result
    workspace_before: dict[str, str] = field(default_factory=dict)
    refused: list[Any] | None = None  # what a restarted host wrote before it stopped unasked


@dataclass
class SecondHost:
    """A second host process started on the data dir a live host holds."""

    lines: list[Any] = field(default_factory=list)  # every JSON value it wrote
    exit_status: int | None = None
    served: bool = False  # it answered initialize
    stderr: str = ""
    files_before: dict[str, str] = field(default_factory=dict)


@dataclass
class SeededDatabase:
    """A database the scenario arranged before the host started."""

    tables: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)
    digest: str | None = None
    refusal: str | None = None  # why the host stopped instead of serving
    files: dict[str, str] = field(default_factory=dict)  # the data dir's tree, by digest
    approvals: list[tuple[Any, ...]] = field(default_factory=list)  # seeded v8 approvals


@dataclass
class Arrangement:
    """Files and folders the scenario arranged on disk."""

    workspace_before: dict[str, str] = field(default_factory=dict)
    root_as_given: str | None = None  # the project's path as the session was given it
    neighbours: list[str] = field(default_factory=list)  # names next to the project folder
    outside: Path | None = None
    outside_note: str | None = None  # the text of a file outside any project
    other_project: Path | None = None
    other_secret: str | None = None  # text only the other project's file holds
    other_project_before: dict[str, str] = field(default_factory=dict)
    earlier_artifacts: dict[str, str] = field(default_factory=dict)
    local_page: LocalPage | None = None  # a page served on a loopback address
    network_page: LocalPage | None = None  # a page on this machine's non-loopback address
    artifact_bytes: bytes | None = None  # an artifact's bytes before the scenario changed it
    decomposed_name: str | None = None  # a file name whose accent is decomposed (NFD)


@dataclass(frozen=True)
class ScriptedCall:
    """A tool call the scripted model makes, by tool name and call id."""

    tool: str
    call_id: str
    arguments: dict[str, Any] | str = ""


@dataclass
class ModelScript:
    """The tool calls the scenario scripted, in order, so checks can find their results."""

    calls: list[ScriptedCall] = field(default_factory=list)
    earlier_conversation: list[str] = field(default_factory=list)  # texts of earlier turns
    other_conversation: list[str] = field(default_factory=list)  # the other session's
    prompt: str | None = None  # the last prompt typed exactly as a check compares it
    last_batch: list[ScriptedCall] = field(default_factory=list)  # calls of one message
    reads_named_alike: list[str] = field(default_factory=list)  # paths read under one call id
    answer: str | None = None  # the text answer a check compares with what the user was shown

    def call_id(self, tool: str) -> str:
        """The id of the last scripted call of ``tool``."""
        return need(self.last_call_id(tool), f"scripted {tool} call")

    def arguments(self, tool: str) -> dict[str, Any] | str:
        """The arguments of the last scripted call of ``tool``."""
        for call in reversed(self.calls):
            if call.tool == tool:
                return call.arguments
        raise HarnessError(f"the scenario has no scripted {tool} call yet")

    def last_call_id(self, tool: str) -> str | None:
        """The id of the last scripted call of ``tool``, if the scenario scripted one."""
        found = [c.call_id for c in self.calls if c.tool == tool]
        return found[-1] if found else None


@dataclass
class ConcurrentSearch:
    """What happened while a model-supplied search ran and another session was used."""

    call_id: str = ""
    other_error: str | None = None  # why the other session was not served, if it was not
    other_ended_first: bool = False  # the other session's turn ended before the search did
    search_seconds: float | None = None  # from the call to its result; None: no result
    result: dict[str, Any] | None = None  # the search's turn/toolResult


@dataclass
class WireExchange:
    """Raw lines the scenario wrote and what the host answered to them."""

    unmatched_mark: int = 0  # answers to raw lines are the unmatched responses from here on
    sent: list[Any] = field(default_factory=list)  # the ids of the raw requests, in order
    answers: list[dict[str, Any]] = field(default_factory=list)
    refusal: dict[str, Any] | None = None  # the JSON-RPC error object of the last refusal
    held_before: dict[str, Any] | None = None  # what the host held before a refused request
    reused_id: int | None = None  # an id the scenario sends again once it was answered


@dataclass
class SessionsState:
    """Sessions and turns as the harness made them, for checks that must not trust the
    host's own account (which session a turn belongs to, what a session looked like)."""

    turn_owner: dict[str, str] = field(default_factory=dict)  # turn id -> session id prompted
    turn_of: dict[str, str] = field(default_factory=dict)  # session alias -> its last turn id
    question_of: dict[str, str] = field(default_factory=dict)  # alias -> open permission id
    command_of: dict[str, str] = field(default_factory=dict)  # alias -> its running command
    folder_of: dict[str, str] = field(default_factory=dict)  # alias -> its command's folder
    # session id -> (index of its last session/updated, the session read) already compared
    announcement_judged: dict[str, tuple[int, str]] = field(default_factory=dict)
    configuration_before: dict[str, Any] | None = None  # session/get before a refused change
    session_before_change: dict[str, Any] | None = None  # session/get before an accepted one
    stored_before: dict[str, Any] | None = None  # its sessions row at the same moment
    changed_to: dict[str, Any] = field(default_factory=dict)  # the last accepted change
    changed_alias: str = "main"  # the session that change was made to
    changed_mark: int = 0  # where the notifications of that change start
    first_exchange: tuple[str, str] | None = None  # (user text, model answer)
    provider_mark: int = 0  # provider requests from the last prompt the steps sent
    earlier_turn: str | None = None  # the turn of a prompt sent before the scenario's
    concurrent_responses: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class CommandWatch:
    """The shells and the command a scenario watches."""

    turn_id: str | None = None  # the turn the command runs in
    shell: dict[str, Any] | None = None  # the catalog entry it should run in
    executable: str | None = None  # the program the shell process really was
    default_before: str | None = None  # the default shell id before the scenario changed it
    chosen_default: dict[str, Any] | None = None  # the shell the user made the default
    left_pids: list[int] | None = None  # what a command reported it left running
    ran_while_running: bool | None = None  # output seen before the command ended
    open_gates: list[int] = field(default_factory=list)  # pipe descriptors to close
    earlier_audit: list[dict[str, Any]] = field(default_factory=list)  # an earlier command's row
    second_command: str | None = None  # the second command of one message
    clock_at_prompt: int | None = None  # the host clock when the turn was prompted
    second_started_at: int | None = None  # the host clock when the second command started
    each_printed: int | None = None  # bytes each command of the turn printed
    gate: Path | None = None  # the pipe a command of the scenario waits on


@dataclass
class TaskState:
    """The scheduled task of the scenario and its last run."""

    task: dict[str, Any] | None = None
    run: dict[str, Any] | None = None
    expected: dict[str, Any] | None = None  # every field the user gave the task, as sent
    earlier_run_at: int | None = None  # the time the task was due before it was moved
    created_at: int | None = None  # the task's createdAt as first listed
    other_task_id: str | None = None  # a second task
    run_sessions: list[str] = field(default_factory=list)  # the sessions runs were given
    latest_run_at: int | None = None  # when the last of several tasks is due
    many: list[dict[str, Any]] = field(default_factory=list)  # several tasks, as answered
    first_run: dict[str, Any] | None = None  # a run still under way when another began


@dataclass
class World:
    """Everything one scenario works with. Created fresh for every scenario."""

    driver: HostDriver
    data_dir: Path
    workspace: Path
    timeout: float
    provider: MockProvider
    host: RunningHost | None = None
    client: HostClient | None = None
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    outcome: Outcome = field(default_factory=Outcome)
    handshake: dict[str, Any] | None = None
    cursors: Cursors = field(default_factory=Cursors)
    plan: PlanState = field(default_factory=PlanState)
    restart_seen: RestartObservation = field(default_factory=RestartObservation)
    seeded: SeededDatabase = field(default_factory=SeededDatabase)
    arranged: Arrangement = field(default_factory=Arrangement)
    tasks: TaskState = field(default_factory=TaskState)
    # Two reports of one record that disagreed (session/list against session/get, an
    # announcement against approval/get): judged once the steps have run, so a step's own
    # check of the same fault is the one that speaks first.
    disagreements: list[str] = field(default_factory=list)
    wire: WireExchange = field(default_factory=WireExchange)
    boundary: SessionsState = field(default_factory=SessionsState)
    script: ModelScript = field(default_factory=ModelScript)
    search: ConcurrentSearch = field(default_factory=ConcurrentSearch)
    second_host: SecondHost | None = None
    commands: CommandWatch = field(default_factory=CommandWatch)
    active_turn: str | None = None
    last_turn_end: dict[str, Any] | None = None
    raw_frames_sent: int = 0
    retired_violations: list[Violation] = field(default_factory=list)
    retired_messages: list[Any] = field(default_factory=list)
    retired_notifications: list[dict[str, Any]] = field(default_factory=list)
    retired_transcript: list[tuple[WireRecord, float]] = field(default_factory=list)
    client_offset: float = 0.0  # seconds from the scenario's start to the live client's
    stderr_log: list[str] = field(default_factory=list)
    exits: list[ExitInfo] = field(default_factory=list)
    started_at: float = field(default_factory=time.monotonic)
    deadline_s: float = 0.0
    aborted: threading.Event = field(default_factory=threading.Event)
    hosts_with_leftovers: list[RunningHost] = field(default_factory=list)  # their commands run on

    # -- host lifecycle -----------------------------------------------------------------

    def start_host(self, create_data_dir: bool = True, conformance: bool = True) -> RunningHost:
        """Start a host on this scenario's data dir (stopping none: call stop first).

        The harness creates the data dir first, unless the scenario arranged it itself
        (``create_data_dir=False``, for a data dir that is deliberately not a folder).
        Without ``conformance`` the host starts as in production: no ``--conformance``.
        """
        assert self.host is None, "a host is already running"
        if create_data_dir:
            self.data_dir.mkdir(parents=True, exist_ok=True)
        self.host = self.driver.start(self.data_dir, conformance=conformance)
        self.client = HostClient(self.host, self.timeout)
        self.client_offset = time.monotonic() - self.started_at
        return self.host

    def stop_host(self, crash: bool = False, leave_commands: bool = False) -> int | None:
        """Stop the host (cleanly, or abruptly with ``crash``) and keep its logs; with
        ``leave_commands`` what its commands started goes on until :meth:`end_leftovers`
        (unless the host ended it itself)."""
        if self.host is None:
            return None
        status: int | None = None
        if crash:
            self.host.crash(leave_commands=leave_commands)
        elif self.client is not None and self.client.unanswered:
            # A host that left a request unanswered for the whole step timeout is unlikely
            # to heed its input closing: its scenario has failed, so it gets a short while.
            status = self.host.stop(UNANSWERED_STOP_S, leave_commands=leave_commands)
        else:
            status = self.host.stop(leave_commands=leave_commands)
        if leave_commands:
            self.hosts_with_leftovers.append(self.host)
        if self.client is not None:
            self.client.close()
            self.retired_violations.extend(self.client.violations)
            self.retired_messages.extend(self.client.received)
            self.retired_notifications.extend(self.client.notifications())
            offset = self.client_offset
            self.retired_transcript.extend((line, offset) for line in self.client.transcript())
        self.stderr_log.append(self.host.stderr_text())
        self.exits.append(_exit_of(self.host))
        self.host = None
        self.client = None
        return status

    def abort(self) -> None:
        """Stop the host at once because the scenario ran out of time."""
        self.aborted.set()
        if self.host is not None:
            with contextlib.suppress(Exception):
                if self.host.supports_crash:
                    self.host.crash()
                else:
                    self.host.stop()

    @property
    def rpc(self) -> HostClient:
        """The connected client."""
        assert self.client is not None, "no host is running"
        return self.client

    def connect(self) -> dict[str, Any]:
        """Start a host if needed and perform the v9 handshake."""
        if self.host is None:
            self.start_host()
        self.handshake = self.rpc.initialize()
        return self.handshake

    def attempt(self, method: str, params: dict[str, Any] | None = None) -> Outcome:
        """Send a request and record its result or canonical error as the outcome."""
        try:
            self.outcome = Outcome(result=self.rpc.request(method, params))
        except RpcError as error:
            self.outcome = Outcome(error=error)
        return self.outcome

    def attempt_typed(
        self, call: Callable[P, BaseModel], /, *args: P.args, **kwargs: P.kwargs
    ) -> Outcome:
        """Make a typed request (``world.attempt_typed(world.rpc.cancel, session)``) and
        record its outcome: its result as the JSON the host sent, or its canonical error."""
        try:
            answer = call(*args, **kwargs)
        except RpcError as error:
            self.outcome = Outcome(error=error)
        else:
            self.outcome = Outcome(result=answer.model_dump(mode="json", exclude_unset=True))
        return self.outcome

    def restart(self, crash: bool = False, conformance: bool = True) -> dict[str, Any]:
        """Stop the host (abruptly with ``crash``), start a new one on the same data dir
        (without ``--conformance`` unless ``conformance``), and open the connection."""
        self.stop_host(crash=crash)
        self.provider.release_stalls()
        self.start_host(conformance=conformance)
        try:
            self.handshake = self.rpc.initialize()
        except HostStoppedError as stopped:
            details = [(m.get("error") or {}).get("data") or {} for m in self.rpc.unmatched]
            if any(data.get("code") == "DATA_DIR_IN_USE" for data in details):
                with blame("P17"):
                    raise AssertionError(
                        f"the host started on the data directory after the last one "
                        f"{'crashed' if crash else 'stopped'} refused it as in use "
                        "(DATA_DIR_IN_USE): a host's hold on its data directory ends with "
                        "its process"
                    ) from stopped
            raise
        return self.handshake

    def end_leftovers(self) -> None:
        """End the commands that hosts crashed with ``leave_commands`` left running."""
        while self.hosts_with_leftovers:
            self.hosts_with_leftovers.pop().end_leftovers()

    def capabilities(self) -> dict[str, Any]:
        """The capabilities the host announced in its last handshake."""
        assert self.handshake is not None, "the client has not opened the connection"
        capabilities: dict[str, Any] = self.handshake["capabilities"]
        return capabilities

    # -- notifications across restarts ----------------------------------------------------

    def disagree(self, message: str) -> None:
        """Record that two reports of one record disagreed (judged after the steps)."""
        if message not in self.disagreements:
            self.disagreements.append(message)

    def mark(self) -> int:
        """A cursor: notifications from now on have an index >= this value."""
        live = self.client.mark() if self.client is not None else 0
        return len(self.retired_notifications) + live

    def clock_reached(self, moment: int) -> int | None:
        """How many notifications had arrived when the live host answered the first clock
        move that took its clock to ``moment`` or past it (a :meth:`mark`); None if none did."""
        if self.client is None:
            return None
        for now, mark in self.client.clock_moves:
            if now >= moment:
                return len(self.retired_notifications) + mark
        return None

    def clock_when(self, index: int, before: int) -> int:
        """The host clock when notification ``index`` arrived: what the live host answered to
        the last clock move it had answered by then, or ``before`` if none."""
        reading = before
        if self.client is not None:
            for now, mark in self.client.clock_moves:
                if len(self.retired_notifications) + mark <= index:
                    reading = now
        return reading

    def notifications(self, method: str | None = None, since: int = 0) -> list[dict[str, Any]]:
        """Notifications of every host process of this scenario from ``since`` on."""
        live = self.client.notifications() if self.client is not None else []
        found = [*self.retired_notifications, *live][since:]
        return [n for n in found if method is None or n["method"] == method]

    def tool_results(self, turn_id: str, since: int = 0) -> list[dict[str, Any]]:
        """The ``turn/toolResult`` params the turn ``turn_id`` announced from ``since`` on."""
        return [
            n["params"]
            for n in self.notifications("turn/toolResult", since)
            if n["params"]["turnId"] == turn_id
        ]

    def wait_for(
        self,
        method: str,
        predicate: Predicate = lambda _params: True,
        since: int = 0,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Wait for a notification from ``since`` on; earlier hosts' notifications count."""
        for note in self.notifications(method, since):
            if predicate(note.get("params", {})):
                params: dict[str, Any] = note.get("params", {})
                return params
        live_since = max(0, since - len(self.retired_notifications))
        return self.rpc.wait_for(method, predicate, since=live_since, timeout=timeout)

    def wait_for_any(
        self,
        methods: Collection[str],
        predicate: Predicate = lambda _params: True,
        since: int = 0,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """The first notification from ``since`` on of one of ``methods`` whose params
        satisfy ``predicate``, waited for as :meth:`wait_for` does; the whole message."""
        for note in self.notifications(None, since):
            if note["method"] in methods and predicate(note.get("params", {})):
                return note
        live_since = max(0, since - len(self.retired_notifications))
        _, found = self.rpc.wait_for_any(methods, predicate, since=live_since, timeout=timeout)
        return found

    # -- observations -------------------------------------------------------------------

    def violations(self) -> list[Violation]:
        """Every contract violation seen in this scenario, across restarts."""
        live = self.client.violations if self.client is not None else []
        return [*self.retired_violations, *live]

    def host_messages(self) -> list[Any]:
        """Every message any host process of this scenario sent, in order."""
        live = self.client.received if self.client is not None else []
        return [*self.retired_messages, *live]

    def transcript(self) -> list[tuple[WireRecord, float]]:
        """Every protocol line of this scenario, both directions, across restarts, each
        with the offset of its connection from the scenario's start."""
        live: list[tuple[WireRecord, float]] = []
        if self.client is not None:
            live = [(line, self.client_offset) for line in self.client.transcript()]
        return [*self.retired_transcript, *live]

    def stderr(self) -> str:
        """All host stderr of this scenario."""
        live = [self.host.stderr_text()] if self.host is not None else []
        return "\n".join([*self.stderr_log, *live])

    def last_exit(self) -> ExitInfo | None:
        """How the current host (or the last one) ended, as the driver reports it."""
        if self.host is not None:
            return _exit_of(self.host)
        return self.exits[-1] if self.exits else None

    def storage(self) -> StorageInspector:
        """A read-only view of the host's database."""
        return StorageInspector(self.data_dir)

    def close(self) -> None:
        """Stop everything this scenario started."""
        with contextlib.suppress(Exception):
            self.stop_host()
        with contextlib.suppress(Exception):
            self.end_leftovers()


def _exit_of(host: RunningHost) -> ExitInfo:
    return host.exit_info()
