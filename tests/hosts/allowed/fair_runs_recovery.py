"""Allowed variations (runs, recovery and commands), written from the contract alone."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import heapq
import os
import signal
import weakref
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from hosts.registry import AllowedCase, patch, variant
from reference_host import commands, reaper, server, turns
from reference_host.approvals import Approvals, approval_wire
from reference_host.clock import Clock
from reference_host.errors import HostError
from reference_host.host import Host
from reference_host.rpc import Dispatcher
from reference_host.state import is_expired
from reference_host.storage import Storage
from reference_host.tasks import Tasks

# -- restart recovery ------------------------------------------------------------------


async def _rows(storage: Storage, query: str) -> list[dict[str, Any]]:
    return await storage._dicts(query)


_Recovered = dict[str, list[dict[str, Any]]]
# What each storage's start-up recovery is about to change, until it is announced.
_RECOVERED: weakref.WeakKeyDictionary[Storage, _Recovered] = weakref.WeakKeyDictionary()


def _remember_recovery() -> None:
    """Keep, beside the storage, what the start-up recovery is about to change."""
    recover = Storage.recover

    async def recover_and_remember(self: Storage, now: int) -> tuple[int, int, int]:
        _RECOVERED[self] = {
            "approvals": await _rows(
                self,
                "SELECT id, session_id FROM plan_approvals "
                "WHERE status = 'pending' OR execution_state IN ('queued', 'running')",
            ),
            "turns": await _rows(self, "SELECT id, session_id FROM turns WHERE state = 'active'"),
            "runs": await _rows(
                self, "SELECT id FROM scheduled_task_runs WHERE outcome = 'running'"
            ),
        }
        return await recover(self, now)

    patch(Storage, "recover", recover_and_remember)


def _after_initialize(announce: Callable[[Host, _Recovered], Any]) -> None:
    """Run ``announce(host, recovered)`` just after the initialize answer has been sent."""
    _remember_recovery()
    initialize = Host.initialize

    async def initialize_then_announce(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await initialize(self, params)
        recovered = _RECOVERED.pop(self.storage, None)
        if recovered:
            # Scheduled now, it runs once the dispatcher has sent this answer.
            asyncio.get_running_loop().create_task(announce(self, recovered))
        return result

    patch(Host, "initialize", initialize_then_announce)


@variant("recovery-announced-after-initialize")
def _recovery_announced_after_initialize() -> None:
    # R7.2: "every change of an approval's status or execution state ... is announced by an
    # approval/updated carrying the approval as it now is"; the contract names no moment for
    # announcing what the start-up recovery changed, and allows "announcing a session or an
    # approval again when nothing changed". Once initialize has been answered, this host
    # announces each approval and execution its recovery interrupted, and their sessions.
    async def announce(host: Host, recovered: _Recovered) -> None:
        sessions: list[str] = []
        for item in recovered["approvals"]:
            row = await host.storage.get_approval(item["id"])
            if row is None:
                continue
            host.notify("approval/updated", {"approval": approval_wire(row)})
            if row.execution_id is not None and row.execution_state == "interrupted":
                host.notify(
                    "execution/updated",
                    {
                        "sessionId": row.session_id,
                        "approvalId": row.id,
                        "executionId": row.execution_id,
                        "executionState": "interrupted",
                        "turnId": row.execution_turn_id,
                    },
                )
            if row.session_id not in sessions:
                sessions.append(row.session_id)
        for session_id in sessions:
            await host.publish_session(session_id)

    _after_initialize(announce)


@variant("recovered-turns-announced-ended")
def _recovered_turns_announced_ended() -> None:
    # turn/ended's schema has the outcome "interrupted" and TURN_INTERRUPTED means "The turn
    # was interrupted by a host restart"; nothing says when (or whether) such an end is
    # announced. Once initialize has been answered, this host sends turn/ended
    # (interrupted, TURN_INTERRUPTED) for each turn its recovery ended.
    async def announce(host: Host, recovered: _Recovered) -> None:
        for turn in recovered["turns"]:
            host.notify(
                "turn/ended",
                {
                    "sessionId": turn["session_id"],
                    "turnId": turn["id"],
                    "outcome": "interrupted",
                    "error": {
                        "code": "TURN_INTERRUPTED",
                        "message": "the host stopped before the turn ended",
                    },
                },
            )

    _after_initialize(announce)


@variant("recovered-runs-announced-finished")
def _recovered_runs_announced_finished() -> None:
    # P28: a run cut short "is over. After the restart its record reads failed with
    # TURN_INTERRUPTED, in task/list's lastRun and in scheduled_task_runs"; the contract
    # neither asks for nor forbids a task/runFinished for it. Once initialize has been
    # answered, this host sends task/runFinished for each run its recovery failed.
    async def announce(host: Host, recovered: _Recovered) -> None:
        for item in recovered["runs"]:
            rows = await host.storage._dicts(
                "SELECT * FROM scheduled_task_runs WHERE id = ?", (item["id"],)
            )
            for run in rows:
                error = {"code": run["error_code"], "message": run["error_message"] or ""}
                host.notify(
                    "task/runFinished",
                    {
                        "run": {
                            "runId": run["id"],
                            "taskId": run["task_id"],
                            "sessionId": run["session_id"],
                            "startedAt": run["started_at"],
                            "outcome": run["outcome"],
                            "error": error if run["error_code"] else None,
                        }
                    },
                )

    _after_initialize(announce)


@variant("recovered-turns-without-end-time")
def _recovered_turns_without_end_time() -> None:
    # R4.11: recovery ends the turns left active: "each such turn's turns.state reads
    # interrupted". The contract says nothing of turns.ended_at (the protocol never
    # reports it). This host's recovery sets the state and leaves ended_at empty: it does
    # not know when the previous process stopped.
    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self.transaction() as conn:
            approvals = await conn.execute(
                "UPDATE plan_approvals SET status = 'interrupted', "
                "status_code = 'TURN_INTERRUPTED', decided_at = ? WHERE status = 'pending'",
                (now,),
            )
            executions = await conn.execute(
                "UPDATE plan_approvals SET execution_state = 'interrupted' "
                "WHERE execution_state IN ('queued', 'running')"
            )
            ended = await conn.execute(
                "UPDATE turns SET state = 'interrupted' WHERE state = 'active'"
            )
            await conn.execute(
                "UPDATE scheduled_task_runs SET outcome = 'failed', "
                "error_code = 'TURN_INTERRUPTED', "
                "error_message = 'the host stopped before the run finished' "
                "WHERE outcome = 'running'"
            )
        return approvals.rowcount, executions.rowcount, ended.rowcount

    patch(Storage, "recover", recover)


@variant("recovery-at-first-request")
def _recovery_at_first_request() -> None:
    # §4: "before you answer the first request after a start (initialize included), one
    # transaction marks ..."; the contract fixes the latest moment, not the earliest. This
    # host opens the database and checks it can write at start-up (so an unusable one is
    # still refused there, P18), and runs the recovery, then arms its task timers, when the
    # first line arrives, before answering it.
    async def open_only(data_dir: Any, clock: Any) -> Storage:
        storage = await Storage.open(data_dir)
        try:
            async with storage.transaction() as conn:
                await conn.execute("UPDATE settings SET value = value WHERE 0")
        except Exception as exc:
            await storage.close()
            raise HostError(
                "STORAGE_UNAVAILABLE", f"the database cannot be written: {exc}"
            ) from exc
        except BaseException:
            await storage.close()
            raise
        return storage

    schedule_all = Tasks.schedule_all
    init = Host.__init__
    handle = Dispatcher.handle

    async def later(self: Tasks) -> None:
        return None  # armed once the recovery has run

    # The host each dispatcher must recover before it handles its first line.
    recover_first: weakref.WeakKeyDictionary[Dispatcher, Host] = weakref.WeakKeyDictionary()

    def init_and_wait(self: Host, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        dispatcher = getattr(self.notify, "__self__", None)
        if isinstance(dispatcher, Dispatcher):
            recover_first[dispatcher] = self

    async def recover_then_handle(self: Dispatcher, frame: Any) -> None:
        host = recover_first.pop(self, None)
        if host is not None:
            await host.storage.recover(host.clock.now_ms())
            await schedule_all(host.tasks)
        await handle(self, frame)

    patch(server, "_open_and_recover", open_only)
    patch(Tasks, "schedule_all", later)
    patch(Host, "__init__", init_and_wait, wraps=True)
    patch(Dispatcher, "handle", recover_then_handle)


# -- timers and expiry -----------------------------------------------------------------


@variant("timers-fire-latest-first")
def _timers_fire_latest_first() -> None:
    # Ordering: "One move can make many timers due ... each of them fires in that move, in
    # an order of your choosing". This host collects every timer a move made due and fires
    # them latest first (approval expiries, task runs and command timeouts alike).
    async def fire_due(self: Clock) -> None:
        while True:
            due = []
            while self._timers and self._timers[0].due_ms <= self.now_ms():
                due.append(heapq.heappop(self._timers))
            if not due:
                break
            for timer in reversed(due):
                if not timer.cancelled:
                    await timer.callback()
        self._schedule_wakeup()

    patch(Clock, "fire_due", fire_due)


@variant("expiry-dated-at-deadline")
def _expiry_dated_at_deadline() -> None:
    # R4.4 dates decisions: "decidedAt is the host clock at the moment of the approve or
    # reject"; an expiry is no decision, and "an approval expires when the clock reaches
    # expiresAt". This host records an expired approval's decidedAt as its expiresAt, the
    # host-clock moment it expired, also when one clock move jumped well past it.
    async def expire(self: Approvals, approval_id: str) -> None:
        host = self.host
        row = await host.storage.get_approval(approval_id)
        if row is None or row.status != "pending":
            return
        if not is_expired(row.expires_at, host.clock.now_ms()):
            return
        expired = replace(
            row, status="expired", status_code="PLAN_APPROVAL_TIMEOUT", decided_at=row.expires_at
        )
        await host.storage.update_approval(expired)
        host.set_activity(row.session_id, pending_approval_id=None)
        host.notify("approval/updated", {"approval": approval_wire(expired)})
        await host.publish_session(row.session_id)

    patch(Approvals, "expire", expire)


# -- scheduled runs --------------------------------------------------------------------

_RUN: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "fair_runs_recovery_run", default=None
)


def _ids_inside_runs(choose: Callable[[str, dict[str, Any], Callable[[str], str]], str]) -> None:
    """Let ``choose(prefix, run_state, new_id)`` pick the ids a run asks for."""
    run = Tasks.run
    new_id = Host.new_id

    async def run_with_ids(self: Tasks, row: dict[str, Any]) -> dict[str, Any]:
        token = _RUN.set({"task_id": row["id"]})
        try:
            return await run(self, row)
        finally:
            _RUN.reset(token)

    def ids(prefix: str) -> str:
        state = _RUN.get()
        if state is None:
            return new_id(prefix)
        return choose(prefix, state, new_id)

    patch(Tasks, "run", run_with_ids)
    patch(Host, "new_id", staticmethod(ids))


@variant("run-ids-from-task-id")
def _run_ids_from_task_id() -> None:
    # TaskRun.runId is an Id, "an opaque identifier chosen by the host" (1 to 200
    # characters). This host names a run after its task: "<taskId>/run-<8 hex>", with as
    # much of the task id as the 200 characters leave room for.
    def choose(prefix: str, state: dict[str, Any], new_id: Callable[[str], str]) -> str:
        if prefix == "run":
            suffix = f"/run-{os.urandom(4).hex()}"
            return state["task_id"][: 200 - len(suffix)] + suffix
        return new_id(prefix)

    _ids_inside_runs(choose)


@variant("run-sessions-named-by-run")
def _run_sessions_named_by_run() -> None:
    # A run's session id is an Id "chosen by the host"; "identifiers' format (session, turn,
    # approval, execution, command and shell ids)" is the host's. This host gives a run's
    # new session the run's own id as its sessionId.
    def choose(prefix: str, state: dict[str, Any], new_id: Callable[[str], str]) -> str:
        if prefix == "run":
            state["run_id"] = new_id("run")
            return str(state["run_id"])
        if prefix == "ses" and state.get("run_id") and not state.get("named"):
            state["named"] = True
            return str(state["run_id"])
        return new_id(prefix)

    _ids_inside_runs(choose)


@variant("run-finished-after-turn-ended")
def _run_finished_after_turn_ended() -> None:
    # §6: "task/runFinished reports completed or failed, as the run's turn ended"; Ordering
    # names no order between a run's task/runFinished and its turn's turn/ended ("the order
    # of notifications and responses where Ordering names none" is the host's). This host
    # ends and announces the turn (turn/ended, session/updated) first, then the run.
    end = turns.TurnRunner._end

    async def end_turn_then_run(
        self: turns.TurnRunner,
        session_id: str,
        turn_id: str,
        approval: Any,
        on_end: Any,
        outcome: str,
        error: Any,
    ) -> None:
        await end(self, session_id, turn_id, approval, None, outcome, error)
        if on_end is not None:
            await on_end(outcome, error)

    patch(turns.TurnRunner, "_end", end_turn_then_run)


@variant("last-run-ties-by-end")
def _last_run_ties_by_end() -> None:
    # ScheduledTask.lastRun is a TaskRun; the contract does not say which run it is when two
    # runs of a task started at the same host-clock instant (P35 lets two runs go on side by
    # side, and the conformance clock stands still). This host breaks such ties towards the
    # run that ended last: it writes a run's row again when the run ends, so that row is
    # the newest of its instant (the order survives a restart).
    record = Storage.record_task_run

    async def record_task_run(self: Storage, run: dict[str, Any]) -> None:
        if run["outcome"] == "running":
            await record(self, run)
            return
        columns = ", ".join(run)
        async with self.transaction() as conn:
            await conn.execute("DELETE FROM scheduled_task_runs WHERE id = ?", (run["id"],))
            await conn.execute(
                f"INSERT INTO scheduled_task_runs ({columns}) VALUES ({', '.join('?' * len(run))})",
                tuple(run.values()),
            )

    patch(Storage, "record_task_run", record_task_run)


# -- commands --------------------------------------------------------------------------


def _relay_command_output(
    make: Callable[[Callable[[str, dict[str, Any]], None]], Callable[[str, dict[str, Any]], None]],
) -> None:
    """Give every command's notifications to ``make(notify)``'s relay instead of notify."""
    run_command = commands.run_command

    async def relayed(*, notify: Any, **kwargs: Any) -> Any:
        return await run_command(notify=make(notify), **kwargs)

    patch(turns, "run_command", relayed)


@variant("output-split-per-line")
def _output_split_per_line() -> None:
    # R7.3/P20: output streams as command/output pieces "numbered by seq from 0 ... at most
    # 16384 characters of text each"; how output is cut into pieces is not fixed. This host
    # sends one piece per line (each with its own line end), numbered without a gap.
    def make(
        notify: Callable[[str, dict[str, Any]], None],
    ) -> Callable[[str, dict[str, Any]], None]:
        seq = 0

        def relay(method: str, params: dict[str, Any]) -> None:
            nonlocal seq
            if method != "command/output":
                notify(method, params)
                return
            for line in params["text"].splitlines(keepends=True) or [params["text"]]:
                notify(method, {**params, "seq": seq, "text": line})
                seq += 1

        return relay

    _relay_command_output(make)


@variant("stderr-a-moment-later")
def _stderr_a_moment_later() -> None:
    # R7.3: output is streamed "stdout and stderr apart"; nothing orders a piece of one
    # stream against a piece of the other. This host reads stderr less often: its pieces go
    # out 50 ms after they were read (all of them before command/exited), so stderr written
    # before stdout may be announced after it.
    def make(
        notify: Callable[[str, dict[str, Any]], None],
    ) -> Callable[[str, dict[str, Any]], None]:
        seq = 0
        held: list[dict[str, Any]] = []
        timer: asyncio.TimerHandle | None = None

        def send(params: dict[str, Any]) -> None:
            nonlocal seq
            notify("command/output", {**params, "seq": seq})
            seq += 1

        def flush() -> None:
            nonlocal timer
            timer = None
            while held:
                send(held.pop(0))

        def relay(method: str, params: dict[str, Any]) -> None:
            nonlocal timer
            if method == "command/output" and params["stream"] == "stderr":
                held.append(params)
                if timer is None:
                    timer = asyncio.get_running_loop().call_later(0.05, flush)
                return
            if method == "command/exited":
                if timer is not None:
                    timer.cancel()
                flush()
            if method == "command/output":
                send(params)
                return
            notify(method, params)

        return relay

    _relay_command_output(make)


@variant("commands-with-extra-environment")
def _commands_with_extra_environment() -> None:
    # The contract asks only: "Do not clear the PI_CONFORMANCE_HOST_TOKEN environment
    # variable from the commands you start"; what else a command's environment holds is the
    # host's. This host adds TERM=dumb, NO_COLOR=1, PAGER=cat, GIT_PAGER=cat and
    # PI_WORKSPACE (the working folder) to every command's environment.
    async def spawn(
        shell: Any, command: str, cwd: str, command_id: str
    ) -> tuple[asyncio.subprocess.Process, list[int]]:
        reaper.adopt_orphans()
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        commands._spawning += 1
        extra = {"TERM": "dumb", "NO_COLOR": "1", "PAGER": "cat", "GIT_PAGER": "cat"}
        try:
            process = await asyncio.create_subprocess_exec(
                shell.path,
                "-c",
                command,
                cwd=cwd,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out_write,
                stderr=err_write,
                start_new_session=True,
                env={**os.environ, **extra, "PI_WORKSPACE": cwd, reaper.COMMAND_ENV: command_id},
            )
            commands._COMMANDS[process.pid] = command_id
        except BaseException:
            os.close(out_read)
            os.close(err_read)
            raise
        finally:
            commands._spawning -= 1
            os.close(out_write)
            os.close(err_write)
        return process, [out_read, err_read]

    patch(commands, "_spawn", spawn)


@variant("timeout-ends-with-sigterm-first")
def _timeout_ends_with_sigterm_first() -> None:
    # C5/P19: a timed-out command "was ended by your signal, so its signal is never null";
    # which signal is not fixed, only that every process ends, "ones that ignore SIGTERM"
    # included. On a timeout this host sends SIGTERM to the command's group, waits up to
    # half a second, then kills what is left (so a plain command reports signal 15).
    def expire_gently(flag: asyncio.Event, process: Any) -> Callable[[], Any]:
        async def expire() -> None:
            flag.set()
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGTERM)
            for _ in range(20):
                if process.returncode is not None:
                    return  # the supervisor ends whatever the command left behind
                await asyncio.sleep(0.025)
            commands._kill_group(process)

        return expire

    patch(commands, "_expire", expire_gently)


CASES = [
    AllowedCase(
        "recovery-announced-after-initialize",
        "restart_interruption,execution",
        why="the recovery's changes may be announced once a client is connected",
    ),
    AllowedCase(
        "recovered-turns-announced-ended",
        "restart_interruption",
        why="turn/ended of a turn the recovery ended may be sent",
    ),
    AllowedCase(
        "recovered-runs-announced-finished",
        "restart_interruption,scheduled_plan",
        why="task/runFinished of a run cut short may be sent",
    ),
    AllowedCase(
        "recovered-turns-without-end-time",
        "restart_interruption",
        why="turns.ended_at is not part of the contract",
    ),
    AllowedCase(
        "recovery-at-first-request",
        "restart_interruption,handshake",
        why="recovery runs before the first answer; earlier is not required",
    ),
    AllowedCase(
        "timers-fire-latest-first",
        "scheduled_plan,deadline",
        why="timers one clock move makes due fire in an order of the host's choosing",
    ),
    AllowedCase(
        "expiry-dated-at-deadline",
        "deadline,approval",
        why="a late timer may record its due time (decidedAt = expiresAt)",
    ),
    AllowedCase(
        "run-ids-from-task-id",
        "scheduled_plan",
        why="run ids are opaque",
    ),
    AllowedCase(
        "run-sessions-named-by-run",
        "scheduled_plan",
        why="session ids are opaque",
    ),
    AllowedCase(
        "run-finished-after-turn-ended",
        "scheduled_plan",
        why="task/runFinished and turn/ended have no published order",
    ),
    AllowedCase(
        "last-run-ties-by-end",
        "scheduled_plan",
        why="which of two runs started at one instant is lastRun is open",
    ),
    AllowedCase(
        "output-split-per-line",
        "shell",
        why="where output is cut into pieces is the host's",
    ),
    AllowedCase(
        "stderr-a-moment-later",
        "shell",
        why="stdout and stderr pieces have no order between them",
    ),
    AllowedCase(
        "commands-with-extra-environment",
        "shell",
        why="a command's environment beyond the host token is the host's",
    ),
    AllowedCase(
        "timeout-ends-with-sigterm-first",
        "shell",
        why="which signal ends a timed-out command is the host's",
    ),
]
