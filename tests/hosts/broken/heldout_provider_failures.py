"""Broken hosts: a held-out set (model provider failures), written from the contract alone."""

from __future__ import annotations

import asyncio
import contextvars
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from hosts.registry import BrokenCase, patch, variant

# Every variant imports the host's modules inside its patch, as the registry does: the
# catalog imports this module in processes that never serve a host.


# P25. A streamed answer that breaks off before [DONE] ends the turn `failed` with
# PROVIDER_ERROR and "is not sent again".
# Bug: a stream that broke before it delivered any text is taken for a transient network
# hiccup and the request is sent a second time (once); a cut after some text fails as it should.
@variant("hopf-empty-cut-retried")
def empty_cut_retried() -> None:
    from reference_host import turns
    from reference_host.provider_client import ProviderError
    from reference_host.provider_client import complete as original

    async def complete(
        client: Any,
        config: Any,
        messages: Any,
        tools: Any,
        on_text: Callable[[str], Awaitable[None]] | None = None,
        **kw: Any,
    ) -> Any:
        seen: list[str] = []

        async def noting(text: str) -> None:
            seen.append(text)
            if on_text is not None:
                await on_text(text)

        try:
            return await original(client, config, messages, tools, noting, **kw)
        except ProviderError as error:
            if error.kind != "stream" or seen:
                raise
            return await original(client, config, messages, tools, on_text, **kw)

    patch(turns, "complete", complete)


# P25. A `data` piece that is not JSON *or not a JSON object* ends the turn `failed` with
# PROVIDER_ERROR, also when [DONE] follows.
# Bug: only text that does not parse is an error; a piece that is valid JSON of another
# kind (`[]`, `42`, `"x"`, `null`) is skipped as a keep-alive, and the turn completes.
@variant("hopf-non-object-piece-skipped")
def non_object_piece_skipped() -> None:
    from reference_host import provider_client

    original = provider_client._Accumulator.feed

    async def feed(self: Any, data: str) -> None:
        try:
            chunk = json.loads(data)
        except ValueError:
            chunk = {}
        if not isinstance(chunk, dict):
            return
        await original(self, data)

    patch(provider_client._Accumulator, "feed", feed)


# P25. A streamed answer that ends without [DONE] (the body ended) ends the turn `failed`
# with PROVIDER_ERROR.
# Bug: a stream that already carried a `finish_reason` is read as complete when the body
# ends without [DONE]; only a stream cut before any finish_reason fails.
@variant("hopf-finish-reason-as-done")
def finish_reason_as_done() -> None:
    from reference_host import provider_client

    original = provider_client._read_events

    async def read_events(response: Any, acc: Any) -> bool:
        done = await original(response, acc)
        return done or acc.finish_reason is not None

    patch(provider_client, "_read_events", read_events)


# R4.5. An execution is `completed` when its turn completed and `interrupted` when it did
# not: cancelled, *failed* (a provider error) or cut off by a restart.
# Bug: only a cancelled execution turn is taken as interrupted; one that failed on the
# provider marks its execution `completed`.
@variant("hopf-failed-execution-completed")
def failed_execution_completed() -> None:
    from reference_host.turns import TurnRunner

    async def end(
        self: Any,
        session_id: str,
        turn_id: str,
        approval: Any,
        on_end: Any,
        outcome: str,
        error: Any,
    ) -> None:
        host = self.host
        await host.storage.end_turn(turn_id, outcome, host.clock.now_ms())
        if approval is not None:
            final = "interrupted" if outcome == "cancelled" else "completed"
            await host.approvals.execution_finished(approval.id, final)
        if on_end is not None:
            await on_end(outcome, error)
        host.set_activity(session_id, active_turn_id=None)
        host.notify(
            "turn/ended",
            {
                "sessionId": session_id,
                "turnId": turn_id,
                "outcome": outcome,
                "error": error.to_data() if error else None,
            },
        )
        await host.publish_session(session_id)

    patch(TurnRunner, "_end", end)


# §6 / P25. A run whose turn failed on the provider is `failed` with the turn's error
# (PROVIDER_ERROR) "in task/runFinished, lastRun and scheduled_task_runs (outcome,
# error_code) alike".
# Bug: the run row is written before the error is copied onto it; the notification carries
# the error, but the stored row and `task/list`'s lastRun read `failed` with error null.
@variant("hopf-failed-run-error-unstored")
def failed_run_error_unstored() -> None:
    from reference_host import tasks

    original = tasks.Tasks._finish

    async def finish(self: Any, run: dict[str, Any], outcome: str, error: Any) -> None:
        if outcome != "failed" or error is None or run["session_id"] is None:
            await original(self, run, outcome, error)
            return
        run.update(outcome=outcome, error_code=None, error_message=None)
        await self.host.storage.record_task_run(run)
        announced = {**run, "error_code": error.code, "error_message": error.message}
        self.host.notify("task/runFinished", {"run": tasks._run_wire(announced)})

    patch(tasks.Tasks, "_finish", finish)


# P25. After a provider failure "the session is idle afterwards and takes the next prompt".
# Bug: a broken stream (not an HTTP error) opens a circuit breaker for that provider
# (base URL and model) for 30 s of wall time: the next turn's request fails at once with
# PROVIDER_ERROR, never sent. A second failure is handled as if it were the first's echo.
@variant("hopf-breaker-after-cut")
def breaker_after_cut() -> None:
    from reference_host import turns
    from reference_host.provider_client import ProviderError
    from reference_host.provider_client import complete as original

    open_until: dict[tuple[str, str], float] = {}

    async def complete(client: Any, config: Any, *args: Any, **kw: Any) -> Any:
        key = (config.base_url, config.model)
        if open_until.get(key, 0.0) > time.monotonic():
            raise ProviderError("the provider failed a moment ago; not asking again", kind="http")
        try:
            return await original(client, config, *args, **kw)
        except ProviderError as error:
            if error.kind in ("stream", "protocol"):
                open_until[key] = time.monotonic() + 30.0
            raise

    patch(turns, "complete", complete)


# R1.3. "Nor is a turn that failed (a provider error, P25) undone: its prompt, the model's
# messages and the results of the calls it made stay in the conversation and the
# transcript."
# Bug: the transcript keeps them, but the history sent in later turns leaves out the
# assistant messages and tool results of a failed turn (only its prompt stays).
@variant("hopf-failed-turn-forgotten")
def failed_turn_forgotten() -> None:
    from reference_host import turns

    async def history(self: Any, session_id: str) -> list[dict[str, Any]]:
        storage = self.host.storage
        async with storage._conn.execute(
            "SELECT id FROM turns WHERE session_id = ? AND state = 'failed'", (session_id,)
        ) as cursor:
            failed = {row[0] for row in await cursor.fetchall()}
        entries = await storage.transcript(session_id)
        contents = [
            content
            for _seq, turn, role, content, _at in entries
            if role == "user" or turn not in failed
        ]
        start = max((i for i, c in enumerate(contents) if c.get("contextReset")), default=0)
        kept = [{k: v for k, v in c.items() if k != "contextReset"} for c in contents[start:]]
        return turns.answered_only(kept)

    patch(turns.TurnRunner, "_history", history)


# R1.3. A failed turn is not undone: "a mode EnterPlanMode switched to stays".
# Bug: a turn that failed on the provider rolls back the mode switch its EnterPlanMode made
# (the session goes back to Agent before turn/ended); a completed or cancelled turn keeps it.
@variant("hopf-failure-reverts-plan-mode")
def failure_reverts_plan_mode() -> None:
    from reference_host.turns import TurnRunner

    started_in: dict[str, str] = {}
    original_start = TurnRunner.start
    original_end = TurnRunner._end

    async def start(
        self: Any, session: Any, kind: str, user_text: str, *args: Any, **kw: Any
    ) -> str:
        turn_id = await original_start(self, session, kind, user_text, *args, **kw)
        started_in[turn_id] = session.mode
        return turn_id

    async def end(
        self: Any,
        session_id: str,
        turn_id: str,
        approval: Any,
        on_end: Any,
        outcome: str,
        error: Any,
    ) -> None:
        before = started_in.pop(turn_id, None)
        if outcome == "failed" and before is not None:
            host = self.host
            session = await host.require_session(session_id)
            if session.mode != before:
                await host.storage.update_session(
                    replace(session, mode=before, updated_at=host.clock.now_ms())
                )
        await original_end(self, session_id, turn_id, approval, on_end, outcome, error)

    patch(TurnRunner, "start", start)
    patch(TurnRunner, "_end", end)


# P31. The texts of `turn/text`, joined in order, are the model's full answer, "and so is
# the text the model writes beside its tool calls".
# Bug: once a tool-call piece has arrived in the stream, later content pieces are kept for
# the assistant message but no longer announced in turn/text (text sent before the first
# tool-call piece, or in the same piece, is announced).
@variant("hopf-text-after-call-unannounced")
def text_after_call_unannounced() -> None:
    from reference_host import provider_client

    original = provider_client._Accumulator._feed_delta

    async def feed_delta(self: Any, delta: dict[str, Any], data: str) -> None:
        if not self.calls or self.on_text is None:
            await original(self, delta, data)
            return
        saved, self.on_text = self.on_text, None
        try:
            await original(self, delta, data)
        finally:
            self.on_text = saved

    patch(provider_client._Accumulator, "_feed_delta", feed_delta)


# P32 (conformance clock). "Waiting on the model provider is not one of these timers: the
# suite moves the clock by minutes while a provider request is open ... so a provider
# timeout, if you keep one, runs on real time."
# Bug: the host's 60 s provider timeout is armed on the host clock: a clock move of a minute
# or more while a request is open fails the turn with PROVIDER_ERROR.
@variant("hopf-provider-timeout-host-clock")
def provider_timeout_host_clock() -> None:
    from reference_host.errors import HostError
    from reference_host.turns import TurnRunner

    original = TurnRunner._ask_model

    async def ask_model(self: Any, session: Any, turn_id: str, messages: Any) -> Any:
        clock = self.host.clock
        inner = asyncio.ensure_future(original(self, session, turn_id, messages))
        expired: list[bool] = []

        async def fire() -> None:
            if not inner.done():
                expired.append(True)
                inner.cancel()

        handle = clock.call_at(clock.now_ms() + 60_000, fire)
        try:
            return await inner
        except asyncio.CancelledError:
            this = asyncio.current_task()
            if expired and this is not None and not this.cancelling():
                raise HostError(
                    "PROVIDER_ERROR", "the provider did not answer within 60 s"
                ) from None
            raise
        finally:
            handle.cancel()

    patch(TurnRunner, "_ask_model", ask_model)


# R3.9. The deadline is createdAt + 30 minutes, createdAt being the clock at the SubmitPlan,
# "however long the Plan turn ran before".
# Bug: the deadline is counted from when the provider request that brought the SubmitPlan
# call was sent (the model's "answer time"), so a slow provider (the clock moved while the
# request was open) shortens it; createdAt itself is right.
_REQUEST_SENT: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "hopf_request_sent", default=None
)


@variant("hopf-deadline-from-request")
def deadline_from_request() -> None:
    from reference_host import approvals, state
    from reference_host.turns import TurnRunner

    original_ask = TurnRunner._ask_model
    original_deadline = state.deadline_for

    async def ask_model(self: Any, session: Any, turn_id: str, messages: Any) -> Any:
        _REQUEST_SENT.set(self.host.clock.now_ms())
        return await original_ask(self, session, turn_id, messages)

    def deadline_for(created_at_ms: int) -> int:
        sent = _REQUEST_SENT.get()
        return original_deadline(created_at_ms if sent is None else sent)

    patch(TurnRunner, "_ask_model", ask_model)
    patch(approvals, "deadline_for", deadline_for)


# P27 / P9. A call whose arguments are not JSON gets INVALID_TOOL_INPUT, "does nothing, and
# the turn goes on"; every other call of the batch gets its own result.
# Bug: a call with unparseable arguments marks the whole assistant message as garbled: the
# calls after it in the same batch are not run and get INVALID_TOOL_INPUT too.
_GARBLED: contextvars.ContextVar[list[bool] | None] = contextvars.ContextVar(
    "hopf_garbled", default=None
)


@variant("hopf-bad-json-poisons-batch")
def bad_json_poisons_batch() -> None:
    from reference_host import turns
    from reference_host.errors import HostError

    original_batch = turns.TurnRunner._run_batch
    original_call = turns.TurnRunner._run_call

    async def run_batch(
        self: Any, session: Any, turn_id: str, calls: tuple[Any, ...], *a: Any
    ) -> Any:
        token = _GARBLED.set([False])
        try:
            return await original_batch(self, session, turn_id, calls, *a)
        finally:
            _GARBLED.reset(token)

    async def run_call(self: Any, session: Any, turn_id: str, call: Any, *a: Any) -> Any:
        garbled = _GARBLED.get()
        if garbled is not None and garbled[0]:
            return turns._failure(
                HostError("INVALID_TOOL_INPUT", "an earlier call of this message was garbled")
            )
        try:
            turns._arguments(call)
        except HostError:
            if garbled is not None:
                garbled[0] = True
        return await original_call(self, session, turn_id, call, *a)

    patch(turns.TurnRunner, "_run_batch", run_batch)
    patch(turns.TurnRunner, "_run_call", run_call)


# R5.1. A cancel ends the turn with outcome `cancelled` (also in storage).
# Bug: a cancel that arrives while the provider request is still open is seen by the
# provider code as a stream that was closed under it: the turn ends `failed` with
# PROVIDER_ERROR. A cancel during a tool call or a permission question ends it `cancelled`.
@variant("hopf-cancel-in-request-fails")
def cancel_in_request_fails() -> None:
    from reference_host.errors import HostError
    from reference_host.turns import TurnRunner

    original = TurnRunner._ask_model

    async def ask_model(self: Any, session: Any, turn_id: str, messages: Any) -> Any:
        try:
            return await original(self, session, turn_id, messages)
        except asyncio.CancelledError:
            if self.stopping:
                raise
            raise HostError(
                "PROVIDER_ERROR", "the provider stream was closed before [DONE]"
            ) from None

    patch(TurnRunner, "_ask_model", ask_model)


CASES = [
    BrokenCase(
        "hopf-empty-cut-retried",
        "sessions",
        "a_model_answer_that_breaks_off_ends and before",
        "P25",
        "the host asked the provider 2 times, expected once",
    ),
    BrokenCase(
        "hopf-non-object-piece-skipped",
        "sessions",
        "a_model_answer_that_breaks_off_ends and object",
        "P25",
        "the turn ended completed with None, expected failed with PROVIDER_ERRO",
    ),
    BrokenCase(
        "hopf-finish-reason-as-done",
        "sessions",
        "a_model_answer_that_breaks_off_ends and without",
        "P25",
        "the turn ended completed with None, expected failed with PROVIDER_ERRO",
    ),
    BrokenCase(
        "hopf-failed-execution-completed",
        "execution",
        "an_execution_whose_turn_fails_is_interrupted",
        "R4.5",
        "the execution was announced as",
    ),
    BrokenCase(
        "hopf-failed-run-error-unstored",
        "scheduled_plan",
        "a_run_whose_model_provider_answers_with",
        "P25",
        "the failed run reads",
    ),
    BrokenCase(
        "hopf-breaker-after-cut",
        "sessions",
        "after_a_model_answer_that_broke_off and carry",
        "P25",
        "the turn ended failed",
    ),
    BrokenCase(
        "hopf-failed-turn-forgotten",
        "sessions",
        "the_turn_after_a_failed_one_shows",
        "R1.3",
        "the next turn's request does not carry the result",
    ),
    BrokenCase(
        "hopf-failure-reverts-plan-mode",
        "plan_tools",
        "a_turn_that_entered_plan_mode_and",
        "P10",
        "the session is in agent mode",
    ),
    BrokenCase(
        "hopf-text-after-call-unannounced",
        "sessions",
        "what_the_model_says_once_it_has",
        "P31",
        "the model wrote 'I will sum it up next.' beside its tool call",
    ),
    BrokenCase(
        "hopf-provider-timeout-host-clock",
        "deadline",
        "the_deadline_is_30_minutes_after_the",
        "R3.9",
        "the Plan turn ended",
    ),
    BrokenCase(
        "hopf-deadline-from-request",
        "deadline",
        "the_deadline_is_30_minutes_after_the",
        "R3.9",
        "the deadline is",
    ),
    BrokenCase(
        "hopf-bad-json-poisons-batch",
        "plan_tools",
        "a_call_whose_input_cannot_be_read",
        "P10",
        "the tool message answering Read call",
    ),
    BrokenCase(
        "hopf-cancel-in-request-fails",
        "execution",
        "an_execution_whose_turn_is_cancelled_is",
        "R4.5",
        "the cancelled execution turn ended",
    ),
]
