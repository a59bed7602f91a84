"""Broken hosts for the explorer and the fuzzer: bugs that only show after a sequence of
steps, or only for some malformed params."""

from __future__ import annotations

from typing import Any

from hosts.registry import patch, variant
from reference_host import rpc
from reference_host.approvals import Approvals
from reference_host.storage import Storage
from reference_host.validation import params_problem


@variant("recovery-interrupts-finished-work")
def _recovery_interrupts_finished_work() -> None:
    # Recovery interrupts every execution it finds, also those that had completed: a final
    # state is reopened by a restart.
    original = Storage.recover

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        counts = await original(self, now)
        async with self.transaction() as conn:
            await conn.execute(
                "UPDATE plan_approvals SET execution_state = 'interrupted' "
                "WHERE execution_state = 'completed'"
            )
        return counts

    patch(Storage, "recover", recover)


@variant("cancel-leaves-execution-running")
def _cancel_leaves_execution_running() -> None:
    # A cancelled execution turn ends, but its execution is never finished: it stays
    # running, and the session stays busy with it.
    original = Approvals.execution_finished

    async def execution_finished(self: Approvals, approval_id: str, final: Any) -> None:
        if final == "interrupted":
            return
        await original(self, approval_id, final)

    patch(Approvals, "execution_finished", execution_finished)


@variant("internal-error-on-malformed-ids")
def _internal_error_on_malformed_ids() -> None:
    # The params of the approval methods are not checked against the schema: a missing or
    # mistyped id reaches the handler, which fails with INTERNAL_ERROR.
    def problem(method: str, params: Any) -> str | None:
        if method.startswith("approval/") and isinstance(params, dict):
            return None
        return params_problem(method, params)

    patch(rpc, "params_problem", problem)


@variant("replaces-lone-surrogates")
def _replaces_lone_surrogates() -> None:
    # Like Go's encoding/json, the host reads a lone surrogate as U+FFFD instead of refusing
    # the request: "plan\udfff" names a task "plan\ufffd" that does not exist.
    original = rpc.loads

    def replaced(value: Any) -> Any:
        if isinstance(value, str):
            return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        if isinstance(value, dict):
            return {replaced(k): replaced(v) for k, v in value.items()}
        if isinstance(value, list):
            return [replaced(item) for item in value]
        return value

    patch(rpc, "loads", lambda text: replaced(original(text)))
