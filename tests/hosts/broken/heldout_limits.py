"""Broken hosts: a held-out set (limits and boundaries), written from the contract alone.

Caught, each by the scenario its case names: a session list cut at 20 sessions; a clock set
or moved to exactly its last allowed moment refused; output that crosses the output cap
inside one read streamed whole; a task due more than 2^31 ms ahead run at the next clock
move; runAt 0 taken as null; a provider on port 0 refused; a Bash timeout of exactly one
hour refused; a plan title cut at 255 characters; only the first of two due tasks run; a
deadline compared in whole seconds; and (once its wait for the next answer runs out) the
line after an oversized one swallowed. ``integral-floats-refused`` was moved to the allowed
hosts: the contract lets a host refuse a whole number written as 1000.0 or 1e3.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, BinaryIO

from hosts.registry import BrokenCase, patch, variant
from reference_host import approvals, commands, framing, host, server, state, turns, validation
from reference_host.errors import HostError
from reference_host.host import Host
from reference_host.tasks import Tasks

ONE_HOUR_MS = 3_600_000
NODE_TIMER_MAX_MS = 2**31 - 1
SESSION_PAGE = 20


@variant("session-list-first-page")
def _session_list_first_page() -> None:
    # R7.2: session/list lists every session. This host reads the sessions with a default
    # page size (the oldest 20) and, having no paging in protocol v9 to offer the rest,
    # silently leaves out every session after the twentieth.
    original = Host.session_list

    async def session_list(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await original(self, params)
        return {"sessions": result["sessions"][:SESSION_PAGE]}

    patch(Host, "session_list", session_list)


@variant("clock-ceiling-exclusive")
def _clock_ceiling_exclusive() -> None:
    # P4 / ClockSetParams, ClockAdvanceParams: the clock may reach 8.64e15 ms less 30
    # minutes itself; this host refuses a set or advance that lands exactly on that value
    # (``>=`` where ``>`` was meant).
    ceiling = host.CLOCK_MAX

    def _within_clock_range(now: int) -> int:
        if now >= ceiling:
            raise HostError(
                "INVALID_PARAMS", f"the clock must stay below {ceiling}", {"max": ceiling}
            )
        return now

    patch(host, "_within_clock_range", _within_clock_range)


@variant("oversize-by-one-eats-next-line")
def _oversize_by_one_eats_next_line() -> None:
    # P2: a line longer than maxFrameBytes gets FRAME_TOO_LARGE and the host keeps serving.
    # When the line is exactly one byte too long, the skip starts one byte past what was
    # read, so it consumes the newline and then the whole next request, which goes
    # unanswered.
    def read_frames(
        stream: BinaryIO, max_bytes: int = framing.DEFAULT_MAX_FRAME_BYTES
    ) -> Iterator[framing.Frame]:
        while True:
            line = stream.readline(max_bytes + 1)
            if not line:
                return
            if line.endswith(b"\n"):
                yield line[:-1]
            elif len(line) <= max_bytes:
                yield line
            else:
                yield framing.OversizedFrame(max_bytes)
                stream.read(1)  # "the line goes on past the limit": drop that byte
                while True:
                    rest = stream.readline(65536)
                    if not rest or rest.endswith(b"\n"):
                        break

    patch(server, "read_frames", read_frames)


@variant("cap-checked-before-each-chunk")
def _cap_checked_before_each_chunk() -> None:
    # P20: past maxCommandOutputBytes nothing more is streamed. This host checks the cap
    # before each read from the pipe and streams the read that crosses it whole (up to
    # 4 KiB past the cap), then marks the output truncated.
    cap = commands.OUTPUT_CAP_BYTES

    class _Collector(commands._Collector):
        def keep(self, data: bytes) -> bytes:
            if len(self.kept) >= cap:
                if data:
                    self.truncated = True
                return b""
            self.kept += data
            if len(self.kept) > cap:
                self.truncated = True
            return data

    patch(commands, "_Collector", _Collector)


@variant("far-run-at-fires-at-once")
def _far_run_at_fires_at_once() -> None:
    # P29: a task runs when the host clock reaches its runAt. This host arms its timer with
    # a delay held in a signed 32-bit millisecond count (as setTimeout does): a runAt more
    # than about 24.8 days ahead overflows and the task runs at the next clock move.
    arm = Tasks._arm

    def _arm(self: Tasks, task_id: str, run_at: int | None) -> None:
        now = self.host.clock.now_ms()
        if run_at is not None and run_at - now > NODE_TIMER_MAX_MS:
            run_at = now
        arm(self, task_id, run_at)

    patch(Tasks, "_arm", _arm)


@variant("one-jump-runs-only-the-first-due-task")
def _one_jump_runs_only_the_first_due_task() -> None:
    # P29: every enabled task whose runAt comes due runs. This scheduler wakes for the
    # earliest due time only: when one clock move passes the times of two tasks with
    # different runAt, it runs the tasks due at the earliest of them and re-arms after the
    # new clock, so the later one is never run (tasks at the same instant all run).
    fire = Tasks._fire
    swept: dict[int, int] = {}  # clock value of a timer sweep -> the runAt it ran

    async def _fire(self: Tasks, task_id: str) -> None:
        now = self.host.clock.now_ms()
        row = await self.host.storage.get_task(task_id)
        run_at = row["run_at"] if row is not None else None
        if run_at is not None:
            first = swept.setdefault(now, run_at)
            if first != run_at:
                self._timers.pop(task_id, None)
                return
        await fire(self, task_id)

    patch(Tasks, "_fire", _fire)


@variant("run-at-zero-as-null")
def _run_at_zero_as_null() -> None:
    # P29 / Timestamp (minimum 0): a task is answered, listed and stored with runAt as
    # given. This host reads runAt with a truthiness test, so runAt 0 (the first valid
    # Timestamp) becomes null: answered, listed and stored as null, never run.
    create = Tasks.create
    update = Tasks.update

    def _falsy_run_at(params: dict[str, Any]) -> dict[str, Any]:
        if "runAt" in params:
            return {**params, "runAt": params["runAt"] or None}
        return params

    async def _create(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        return await create(self, _falsy_run_at(params))

    async def _update(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        return await update(self, _falsy_run_at(params))

    patch(Tasks, "create", _create)
    patch(Tasks, "update", _update)


@variant("port-zero-refused")
def _port_zero_refused() -> None:
    # P4 / ProviderConfig.baseUrl: a port from 0 to 65535 is valid. This host checks the
    # range 1-65535 (port 0 "is not a real port") and refuses a baseUrl with port 0 with
    # INVALID_PARAMS.
    original = validation._provider_problem

    def _provider_problem(params: Any) -> str | None:
        problem = original(params)
        if problem is not None:
            return problem
        provider = params.get("provider") if isinstance(params, dict) else None
        if isinstance(provider, dict) and isinstance(provider.get("baseUrl"), str):
            from urllib.parse import urlsplit

            if urlsplit(provider["baseUrl"]).port == 0:
                return "params/provider/baseUrl: the port must be 1-65535"
        return None

    patch(validation, "_provider_problem", _provider_problem)


@variant("deadline-compared-in-rounded-seconds")
def _deadline_compared_in_rounded_seconds() -> None:
    # P14: one millisecond before expiresAt the plan can still be approved. This host
    # compares the deadline in whole seconds, rounding both times to the nearest second, so
    # an approve or reject in the last half second before expiresAt gets
    # PLAN_APPROVAL_TIMEOUT and the approval ends expired early.
    def is_expired(expires_at_ms: int, now_ms: int) -> bool:
        return (now_ms + 500) // 1000 >= (expires_at_ms + 500) // 1000

    patch(state, "is_expired", is_expired)
    patch(approvals, "is_expired", is_expired)


@variant("timeout-limit-exclusive")
def _timeout_limit_exclusive() -> None:
    # P27 / tools.schema.json Bash.timeout_ms (maximum 3600000): a timeout of exactly one
    # hour is valid. This host refuses timeout_ms of one hour or more (``>=``) with
    # INVALID_TOOL_INPUT.
    original = turns.validate_args

    def validate_args(spec: Any, args: Any) -> dict[str, Any]:
        checked = original(spec, args)
        if spec.name == "Bash" and checked.get("timeout_ms", 0) >= ONE_HOUR_MS:
            raise HostError(
                "INVALID_TOOL_INPUT",
                "Bash: timeout_ms must be less than one hour",
                {"tool": "Bash", "field": "timeout_ms"},
            )
        return checked

    patch(turns, "validate_args", validate_args)


@variant("title-cut-at-255")
def _title_cut_at_255() -> None:
    # R2.6 / R4.3: the approval holds the SubmitPlan title as submitted. This host keeps
    # titles in a 255-character field and cuts a longer title to its first 255 characters,
    # over the wire and in storage alike (the question and the artifact are untouched).
    original = approvals._require_text

    def _require_text(args: dict[str, Any], field: str) -> str:
        text = original(args, field)
        return text[:255] if field == "title" else text

    patch(approvals, "_require_text", _require_text)


CASES = [
    BrokenCase(
        "session-list-first-page",
        "sessions",
        "every_session_is_listed",
        "R7.2",
        "of the 25 sessions the user created",
    ),
    BrokenCase(
        "clock-ceiling-exclusive",
        "protocol_errors",
        "edge_of_the_published_range and moment",
        "P4",
        "refused a request the schema allows",
    ),
    BrokenCase(
        "cap-checked-before-each-chunk",
        "shell",
        "inside_one_piece",
        "P20",
        "past the announced cap",
    ),
    BrokenCase(
        "far-run-at-fires-at-once",
        "scheduled_plan",
        "weeks_ahead",
        "P29",
        "for the task due weeks ahead",
    ),
    BrokenCase(
        "run-at-zero-as-null",
        "scheduled_plan",
        "earliest_time",
        "P29",
        "'runAt': (None, 0)",
    ),
    BrokenCase(
        "port-zero-refused",
        "protocol_errors",
        "edge_of_the_published_range and zero",
        "P4",
        "refused a request the schema allows",
    ),
    BrokenCase(
        "timeout-limit-exclusive",
        "plan_tools",
        "edge_of_the_tools_published_input",
        "P27",
        "its input is one the published shape allows",
    ),
    BrokenCase(
        "title-cut-at-255",
        "artifact_integrity",
        "kept_exactly_as_submitted and hundreds",
        "R2.6",
        "the plan_approvals row holds title",
    ),
    BrokenCase(
        "one-jump-runs-only-the-first-due-task",
        "scheduled_plan",
        "tasks_due_at_different_times_all_run_after",
        "P29",
        "enabled tasks that came due",
    ),
    BrokenCase(
        "deadline-compared-in-rounded-seconds",
        "deadline",
        "one_millisecond_before_the_deadline_the_plan_can",
        "R4.6",
        "the approval is expired",
    ),
    BrokenCase(
        "oversize-by-one-eats-next-line",
        "protocol_errors",
        "one_byte_over_the_frame_limit",
        "P2",
        "the host answered nothing to the next request",
        slow=True,
    ),
]
