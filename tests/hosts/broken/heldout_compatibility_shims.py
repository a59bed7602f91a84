"""Broken hosts: a held-out set (compatibility shims: a host that kept serving older clients
and older data, and lets the old behaviour leak into the new contract), written from the
contract alone."""

from __future__ import annotations

from typing import Any

from hosts.registry import BrokenCase, patch, variant

# ---------------------------------------------------------------------------------------
# Protocol: the handshake and the wire
# ---------------------------------------------------------------------------------------


# R7.1 (implementing-a-host.md, "The initialize handshake"): accept only
# `protocolVersion: 9`; any other value gets UNSUPPORTED_PROTOCOL_VERSION.
# Bug: to stay kind to 0.4.x renderers, which still send protocolVersion 8, the host
# treats 8 as 9 and opens the connection (answering protocolVersion 9).
# Observe: `initialize {"protocolVersion":8}` succeeds instead of being refused; a second
# initialize then gets ALREADY_INITIALIZED.
# Recipe: start the host; send initialize with protocolVersion 8; expect the error
# UNSUPPORTED_PROTOCOL_VERSION with details.supported == [9].
@variant("compat-accept-protocol-8")
def accept_protocol_8() -> None:
    from pi_contract import PROTOCOL_VERSION
    from reference_host.host import Host

    original = Host.initialize

    async def initialize(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("protocolVersion") == PROTOCOL_VERSION - 1:  # a 0.4.x client
            params = {**params, "protocolVersion": PROTOCOL_VERSION}
        return await original(self, params)

    patch(Host, "initialize", initialize, wraps=True)


# R7.1: a refused initialize carries `details.supported` listing what the host speaks:
# "exactly `[9]`, since every other version is refused".
# Bug: the host lists every version it "knows" (it can read v8 data, so it lists protocol
# 8 too): details.supported is [8, 9], although an initialize with 8 is refused as well.
# Observe: initialize with protocolVersion 7 (or 8, or 10) is refused with the right code,
# but error.data.details.supported == [8, 9].
# Recipe: initialize {"protocolVersion":10}; check error.data.details.supported == [9].
@variant("compat-supported-lists-8")
def supported_lists_8() -> None:
    from pi_contract import PROTOCOL_VERSION
    from reference_host.errors import HostError
    from reference_host.host import Host

    original = Host.initialize

    async def initialize(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        try:
            return await original(self, params)
        except HostError as error:
            if error.code != "UNSUPPORTED_PROTOCOL_VERSION":
                raise
            details = {
                **(error.details or {}),
                "supported": [PROTOCOL_VERSION - 1, PROTOCOL_VERSION],
            }
            raise HostError(error.code, error.message, details) from None

    patch(Host, "initialize", initialize, wraps=True)


# P5 / "Framing": every error response carries `error.data.code` from the catalog and
# "the numeric `error.code` the catalog lists for it" (PLAN_APPROVAL_TIMEOUT is -32023).
# Bug: the 0.4.x host had one number for "this approval can no longer be decided"
# (-32022); the numeric table kept it for PLAN_APPROVAL_TIMEOUT, so an approve or reject at
# or after the deadline answers data.code PLAN_APPROVAL_TIMEOUT with error.code -32022
# (APPROVAL_NOT_PENDING's number).
# Recipe: Plan turn submits a plan; clock/advance 30 minutes; approval/approve with
# permissionMode ask; expect error.code -32023 and data.code PLAN_APPROVAL_TIMEOUT.
@variant("compat-timeout-old-rpc-number")
def timeout_old_rpc_number() -> None:
    from reference_host.errors import HostError

    original: property = HostError.__dict__["jsonrpc_code"]
    legacy = {"PLAN_APPROVAL_TIMEOUT": -32022}

    def jsonrpc_code(self: HostError) -> int:
        if self.code in legacy:
            return legacy[self.code]
        return int(original.fget(self)) if original.fget is not None else -32603

    patch(HostError, "jsonrpc_code", property(jsonrpc_code))


# R1.10 / R3.3 (ADR §1, §3: "There is no ... request_changes action"; approve and reject
# are the only actions) and P3 (unknown methods get METHOD_NOT_FOUND).
# Bug: the v8 method `approval/requestChanges` is still answered for old renderers, mapped
# onto reject (as the storage migration maps changes_requested to rejected); its
# `feedback` member is accepted and dropped.
# Observe: `approval/requestChanges {"sessionId","approvalId","feedback":"..."}` rejects
# the pending approval instead of answering METHOD_NOT_FOUND and changing nothing.
# Recipe: submit a plan; call approval/requestChanges on it; expect METHOD_NOT_FOUND and
# approval/get still pending.
@variant("compat-request-changes-alias")
def request_changes_alias() -> None:
    from reference_host import rpc, validation
    from reference_host.host import Host
    from reference_host.rpc import Handler

    legacy_method = "approval/requestChanges"
    original_handlers = Host.handlers
    original_problem = validation.params_problem

    def handlers(self: Host) -> dict[str, Handler]:
        table = original_handlers(self)
        table[legacy_method] = self.approval_reject  # v8: request changes ends the proposal
        return table

    def params_problem(method: str, params: Any) -> str | None:
        if method == legacy_method:
            if isinstance(params, dict):
                params = {k: v for k, v in params.items() if k != "feedback"}
            return original_problem("approval/reject", params)
        return original_problem(method, params)

    patch(Host, "handlers", handlers, wraps=True)
    patch(rpc, "params_problem", params_problem, wraps=True)


# Closed objects (protocol.md "Framing": "an extra field from the host breaks the
# contract"; P5: every message conforms to schemas/protocol-v9; the Approval type has no
# other field).
# Bug: for 0.4.x renderers, which read the plan file from a flat `planPath`, every
# Approval the host sends also carries `planPath` beside `artifact` (only when the
# approval has an artifact).
# Observe: approval/updated, approval/get, approval/list, the approve and reject results
# carry an extra `planPath` member.
# Recipe: submit a plan; approval/get; validate the Approval against the schema.
@variant("compat-approval-plan-path-field")
def approval_plan_path_field() -> None:
    from reference_host import approvals, host
    from reference_host.storage import ApprovalRow

    original = approvals.approval_wire

    def approval_wire(row: ApprovalRow) -> dict[str, Any]:
        wire = original(row)
        if row.artifact_path is not None:
            wire["planPath"] = row.artifact_path  # the v8 field name, for old renderers
        return wire

    patch(approvals, "approval_wire", approval_wire, wraps=True)
    patch(host, "approval_wire", approval_wire, wraps=True)


# R3.5 (ADR §3: "Approve requires an explicit execution permission mode"; without one it
# is refused with INVALID_PARAMS and starts nothing).
# Bug: v8 approve had no permission mode; to keep old renderers working the host fills a
# missing permissionMode with the UI's default, ask, and approves.
# Observe: approval/approve {"sessionId","approvalId"} (no permissionMode) approves the
# plan, switches the session to Agent/ask and starts the execution.
# Recipe: submit a plan; approve without permissionMode; expect INVALID_PARAMS, approval
# still pending, no provider request.
@variant("compat-approve-default-ask")
def approve_default_ask() -> None:
    from reference_host import rpc, validation
    from reference_host.host import Host

    original_problem = validation.params_problem

    def params_problem(method: str, params: Any) -> str | None:
        if method == "approval/approve" and isinstance(params, dict):
            params = {"permissionMode": "ask", **params}
        return original_problem(method, params)

    async def approval_approve(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        return await self.approvals.approve(
            params["sessionId"], params["approvalId"], params.get("permissionMode", "ask")
        )

    patch(rpc, "params_problem", params_problem, wraps=True)
    patch(Host, "approval_approve", approval_approve)


# ---------------------------------------------------------------------------------------
# Storage: the v8 -> v10 migration
# ---------------------------------------------------------------------------------------


def _replace_in_copy(old: str, new: str) -> None:
    """Patch the migration's statement that copies v8 approvals as legacy rows."""
    from reference_host import migration

    statement = migration._COPY_LEGACY_APPROVALS
    assert old in statement, old
    patch(migration, "_COPY_LEGACY_APPROVALS", statement.replace(old, new, 1))


# P16 (implementing-a-host.md "Migrating from v8"; v8.sql: "a missing title, or
# proposal_json that is not JSON, gives ''").
# Bug: the migration keeps the 0.4.x card's fallback title: a v8 proposal without a title
# (or not JSON) becomes a legacy approval titled "Untitled plan" instead of "".
# Recipe: seed a v8 file with plan_approvals rows whose proposal_json is {"steps":[]} and
# 'not json'; start; approval/list: title must be "" (and plan_approvals.title '').
@variant("compat-legacy-untitled-title")
def legacy_untitled_title() -> None:
    _replace_in_copy(
        "coalesce(CAST(json_extract(proposal_json, '$.title') AS TEXT), '') ELSE '' END",
        "coalesce(CAST(json_extract(proposal_json, '$.title') AS TEXT), 'Untitled plan') "
        "ELSE 'Untitled plan' END",
    )


# P16: a legacy approval's "expiresAt is createdAt plus 30 minutes" (Timestamps are epoch
# milliseconds everywhere, P32).
# Bug: the migration adds the 0.4.x TTL constant, which counted seconds (1800), to a
# created_at in milliseconds: legacy approvals expire 1.8 seconds after creation.
# Recipe: seed a v8 file with any plan_approvals row (created_at C); start; approval/get:
# expiresAt must be C + 1800000 (and plan_approvals.expires_at the same).
@variant("compat-legacy-expiry-seconds")
def legacy_expiry_seconds() -> None:
    _replace_in_copy("created_at + 1800000", "created_at + 1800")


# P16: "decidedAt is kept (none for a pending row)"; changes_requested becomes rejected.
# Bug: the migration keeps decided_at only for the statuses v10 still has (approved and
# rejected); a changes_requested row, which v8 decided too, loses its decision time.
# Recipe: seed a v8 row status 'changes_requested', decided_at D; start; approval/get:
# status rejected, decidedAt must be D (it is null).
@variant("compat-legacy-changes-requested-undated")
def legacy_changes_requested_undated() -> None:
    _replace_in_copy(
        "CASE status WHEN 'pending' THEN NULL ELSE decided_at END",
        "CASE status WHEN 'approved' THEN decided_at WHEN 'rejected' THEN decided_at ELSE NULL END",
    )


# R7.5 (implementing-a-host.md "Storage": the migrated database has exactly the v10
# structure, "Nothing may be missing and nothing added: no other table").
# Bug: so that a downgrade to 0.4.x stays possible, the migration renames the v8
# plan_approvals table to plan_approvals_v8 instead of dropping it; the v10 table is
# complete beside it.
# Recipe: seed any v8 file; start; compare the schema with v10.sql: an extra table
# plan_approvals_v8 is there.
@variant("compat-keep-v8-approvals-table")
def keep_v8_approvals_table() -> None:
    from reference_host import migration

    original = migration.migration_statements

    def migration_statements(v10_statements: list[str]) -> list[str]:
        return [
            "ALTER TABLE plan_approvals RENAME TO plan_approvals_v8"
            if step == "DROP TABLE plan_approvals"
            else step
            for step in original(v10_statements)
        ]

    patch(migration, "migration_statements", migration_statements, wraps=True)


# ---------------------------------------------------------------------------------------
# Start-up recovery: old approvals treated as new ones
# ---------------------------------------------------------------------------------------

_RECOVER_EXECUTIONS = (
    "UPDATE plan_approvals SET execution_state = 'interrupted' "
    "WHERE execution_state IN ('queued', 'running')"
)
_RECOVER_TURNS = "UPDATE turns SET state = 'interrupted', ended_at = ? WHERE state = 'active'"
_RECOVER_RUNS = (
    "UPDATE scheduled_task_runs SET outcome = 'failed', error_code = 'TURN_INTERRUPTED', "
    "error_message = 'the host stopped before the run finished' WHERE outcome = 'running'"
)


# R4.10 (ADR §4; "Startup recovery": "finished work (... an earlier `interrupted`
# approval) stays exactly as it was"; "Storage": a restart that finds nothing to recover
# changes no stored value and no answer; P16: a legacy row from a v8 `pending` has no
# decidedAt).
# Bug: the recovery is written as the 0.4.x one was, "every approval that is not decided
# is (re)marked interrupted": it also matches rows already `interrupted`, so every start
# stamps them again with the new clock as decidedAt and TURN_INTERRUPTED, legacy rows
# migrated from v8 `pending` included.
# Recipe: submit a plan; restart (it is interrupted, decidedAt T1); clock/advance; restart
# again; approval/get: decidedAt must still be T1 (it reads the second start's clock).
# Or: seed a v8 `pending` row; start; approval/get: decidedAt must be null.
@variant("compat-recover-restamps-interrupted")
def recover_restamps_interrupted() -> None:
    from reference_host.storage import Storage

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self.transaction() as conn:
            approvals = await conn.execute(
                "UPDATE plan_approvals SET status = 'interrupted', "
                "status_code = 'TURN_INTERRUPTED', decided_at = ? "
                "WHERE status IN ('pending', 'interrupted')",
                (now,),
            )
            executions = await conn.execute(_RECOVER_EXECUTIONS)
            turns = await conn.execute(_RECOVER_TURNS, (now,))
            await conn.execute(_RECOVER_RUNS)
        return approvals.rowcount, executions.rowcount, turns.rowcount

    patch(Storage, "recover", recover)


# R3.10 / R3.12 (ADR §3: "the deadline never extends"; "Approval": reloads never move it,
# "and nor does the start-up recovery: an approval it interrupts keeps its `expiresAt`").
# Bug: as the 0.4.x host re-showed a card after a restart with a fresh 30 minutes, the
# recovery that interrupts a pending approval also restarts its deadline from the new
# process's clock.
# Recipe: submit a plan (expiresAt E); restart; approval/get: status interrupted,
# expiresAt must still be E (it is the restart's clock + 30 minutes).
@variant("compat-recover-restarts-deadline")
def recover_restarts_deadline() -> None:
    from reference_host.state import APPROVAL_TTL_MS
    from reference_host.storage import Storage

    async def recover(self: Storage, now: int) -> tuple[int, int, int]:
        async with self.transaction() as conn:
            approvals = await conn.execute(
                "UPDATE plan_approvals SET status = 'interrupted', "
                "status_code = 'TURN_INTERRUPTED', decided_at = ?, expires_at = ? "
                "WHERE status = 'pending'",
                (now, now + APPROVAL_TTL_MS),
            )
            executions = await conn.execute(_RECOVER_EXECUTIONS)
            turns = await conn.execute(_RECOVER_TURNS, (now,))
            await conn.execute(_RECOVER_RUNS)
        return approvals.rowcount, executions.rowcount, turns.rowcount

    patch(Storage, "recover", recover)


# P29 ("A task as given": task/create answers, lists and stores runAt as given) and
# "Framing": timestamps are epoch milliseconds everywhere.
# Bug: 0.4.x clients sent task times in seconds; the host still "repairs" a runAt that
# looks like seconds (below 10^11, i.e. before 1973 read as milliseconds) by multiplying
# it by 1000, in task/create and task/update.
# Recipe: task/create with runAt 1000000 (a valid Timestamp); the answer, task/list and
# scheduled_tasks.run_at must say 1000000 (they say 1000000000).
@variant("compat-task-runat-seconds")
def task_runat_seconds() -> None:
    from reference_host.tasks import Tasks

    seconds_limit = 10**11
    original_create = Tasks.create
    original_update = Tasks.update

    def repaired(params: dict[str, Any]) -> dict[str, Any]:
        run_at = params.get("runAt")
        if isinstance(run_at, int) and 0 <= run_at < seconds_limit:
            return {**params, "runAt": run_at * 1000}
        return params

    async def create(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        return await original_create(self, repaired(params))

    async def update(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        return await original_update(self, repaired(params))

    patch(Tasks, "create", create, wraps=True)
    patch(Tasks, "update", update, wraps=True)


CASES = [
    BrokenCase(
        "compat-accept-protocol-8",
        "handshake",
        "speaking_the_previous_version_is_refused",
        "R7.1",
        "expected the host to refuse",
    ),
    BrokenCase(
        "compat-supported-lists-8",
        "handshake",
        "speaking_a_future_version_is_refused",
        "R7.1",
        "details.supported lists [8, 9]",
    ),
    BrokenCase(
        "compat-timeout-old-rpc-number",
        "deadline",
        "an_expired_plan_stays_expired_when_the_clock_is_set_back",
        "P5",
        "broke the protocol v9 contract",
    ),
    BrokenCase(
        "compat-request-changes-alias",
        "approval",
        "there_is_no_way_to_ask_for_changes",
        "R1.10",
        "expected the host to refuse",
    ),
    BrokenCase(
        "compat-approval-plan-path-field",
        "artifact_integrity",
        "files_already_in_the_plan_folder_are_left_alone",
        "P5",
        "broke the protocol v9 contract",
    ),
    BrokenCase(
        "compat-approve-default-ask",
        "deadline",
        "after_an_approval_without_a_permission_mode_was_refused",
        "R3.5",
        "the host approved a plan without a mode",
    ),
    BrokenCase(
        "compat-legacy-untitled-title",
        "migration",
        "v8_approval_that_was_rejected_is_listed_as_rejected",
        "P16",
        "the legacy approval reads title 'Untitled plan'",
    ),
    BrokenCase(
        "compat-legacy-expiry-seconds",
        "migration",
        "rejected_with_no_decision_time_is_listed_as_rejected",
        "P16",
        "the legacy approval reads",
    ),
    BrokenCase(
        "compat-legacy-changes-requested-undated",
        "migration",
        "changes_requested_is_listed_as_rejected",
        "P16",
        "'decidedAt': None",
    ),
    BrokenCase(
        "compat-keep-v8-approvals-table",
        "migration",
        "migrated_database_has_the_published_v10_structure",
        "R7.5",
        "extra table plan_approvals_v8",
    ),
    BrokenCase(
        "compat-recover-restamps-interrupted",
        "restart_interruption",
        "second_restart_keeps_the_mode_the_user_chose_after_a_recovery",
        "R4.1",
        "a restart with nothing to recover changed stored values",
    ),
    BrokenCase(
        "compat-recover-restarts-deadline",
        "restart_interruption",
        "plan_made_between_two_restarts_is_interrupted_by_the_second",
        "R3.10",
        "the interrupted plan's deadline reads",
    ),
    BrokenCase(
        "compat-task-runat-seconds",
        "scheduled_plan",
        "quarter_of_an_hour_after_the_epoch_began",
        "P29",
        "reports other values",
    ),
]
