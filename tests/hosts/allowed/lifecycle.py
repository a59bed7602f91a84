"""Allowed variations: what the host chooses about storage, restarts, tasks and shells."""

from __future__ import annotations

import asyncio
import contextvars
from dataclasses import replace
from typing import Any

from hosts.registry import AllowedCase, patch, variant
from reference_host import commands, provider_client, shells, turns
from reference_host import host as host_module
from reference_host import storage as storage_module
from reference_host import tasks as tasks_module
from reference_host.state import ensure_idle_for
from reference_host.tasks import Tasks

# The structure of schemas/storage/v10.sql written another way: lower-case keywords, no
# quotes, other whitespace and comments, shell_id inline in sessions, table-level CHECKs
# and named constraints, a UNIQUE column spelled as a unique index, indexes with other
# names, and primary keys declared at the table level.
OTHER_SPELLING = """
create table SESSIONS(
    id text, workspace_root text,
    shell_id text, -- inline, not appended
    mode text not null default 'agent',
    permission_mode text not null default 'ask',
    provider_base_url text, model text,
    created_at integer not null, updated_at integer not null,
    primary key (id),
    constraint known_mode check(mode in ('agent','plan')),
    check(permission_mode in ('ask','accept-edits','auto'))
);
create table transcript(id integer primary key, session_id text not null
  references sessions, turn_id text, role text not null check (role in
  ('user','assistant','tool','system')), content text not null, created_at integer not null);
create index by_session on transcript(session_id,id);
create table settings(key text primary key, value text not null);
create table scheduled_tasks (
  id text primary key, name text not null, prompt text not null,
  mode text not null check (mode in ('agent','plan')), workspace_root text,
  provider_base_url text, model text,
  permission_mode text not null default 'ask'
    check (permission_mode in ('ask','accept-edits','auto')),
  run_at integer, enabled integer not null default 1 check (enabled in (0,1)),
  created_at integer not null, updated_at integer not null);
create table plan_approvals (
  id text primary key, session_id text not null references sessions(id), turn_id text,
  title text not null, question text not null, artifact_path text,
  artifact_sha256 text, artifact_bytes integer, legacy_proposal_json text,
  created_at integer not null, expires_at integer not null, status text not null,
  status_code text, decided_at integer, permission_mode text, execution_id text,
  execution_state text, execution_turn_id text,
  check (artifact_sha256 is null or (length(artifact_sha256) = 64
         and artifact_sha256 not glob '*[^0-9a-f]*')),
  check (artifact_bytes is null or artifact_bytes >= 0),
  check (status in ('pending','approved','rejected','expired','interrupted')),
  check (permission_mode is null or permission_mode in ('ask','accept-edits','auto')),
  check (execution_state is null
         or execution_state in ('queued','running','completed','interrupted')),
  check (legacy_proposal_json is not null or (turn_id is not null and artifact_path is not null
         and artifact_sha256 is not null and artifact_bytes is not null)),
  check (status = 'approved' or permission_mode is null),
  check ((execution_id is null) = (execution_state is null)),
  check (execution_id is null or permission_mode is not null));
create unique index one_execution_id on plan_approvals (execution_id);
create unique index one_pending on plan_approvals(session_id) where status='pending';
create unique index one_active on plan_approvals(session_id)
  where execution_state in ('queued','running');
create table turns (id text primary key, session_id text not null references sessions(id),
  kind text not null check (kind in ('prompt','execution','scheduled')),
  state text not null check (state in ('active','completed','failed','cancelled','interrupted')),
  started_at integer not null, ended_at integer);
create unique index active_turn on turns(session_id) where state = 'active';
create table command_audit (id text primary key, session_id text not null references sessions,
  turn_id text, shell_id text not null, shell_path text not null, command text not null,
  cwd text not null, started_at integer not null, ended_at integer, exit_code integer,
  signal integer, timed_out integer not null default 0 check (timed_out in (0,1)),
  cancelled integer not null default 0 check (cancelled in (0,1)),
  truncated integer not null default 0 check (truncated in (0,1)), duration_ms integer);
create table scheduled_task_runs (id text primary key, task_id text not null, session_id text,
  started_at integer not null,
  outcome text not null check (outcome in ('running','completed','failed','refused')),
  error_code text, error_message text);
create index runs_of_task on scheduled_task_runs (task_id, started_at);
pragma user_version = 10;
"""


@variant("schema-other-spelling")
def _schema_other_spelling() -> None:
    # The storage contract is the structure of v10.sql, not its text: a new database is
    # created from DDL written differently. (The v8 migration keeps the published text.)
    published = storage_module.v10_ddl
    migrate = storage_module.migrate_v8_to_v10

    async def migrate_published(conn, _statements):
        await migrate(conn, storage_module._statements(published()))

    patch(storage_module, "v10_ddl", lambda: OTHER_SPELLING)
    patch(storage_module, "migrate_v8_to_v10", migrate_published)


class _Held:
    """Notifications held back while a task/run request is being answered."""

    def __init__(self) -> None:
        self.open = True
        self.notes: list[tuple[str, dict[str, Any]]] = []


_HOLD: contextvars.ContextVar[_Held | None] = contextvars.ContextVar("hold", default=None)


@variant("run-finished-after-response")
def _run_finished_after_response() -> None:
    # No order of task/runFinished and the task/run response is published: this host
    # announces the end of a refused run only after it has answered task/run.
    run_now = Tasks.run_now
    finish = Tasks._finish

    async def run_now_later(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        held = _Held()
        token = _HOLD.set(held)
        try:
            return await run_now(self, params)
        finally:
            _HOLD.reset(token)
            held.open = False
            loop = asyncio.get_running_loop()
            for method, note in held.notes:
                loop.call_later(0.05, self.host.notify, method, note)

    async def finish_later(self: Tasks, run: dict[str, Any], outcome: str, error: Any) -> None:
        held = _HOLD.get()
        if held is None or not held.open:
            await finish(self, run, outcome, error)
            return
        run.update(
            outcome=outcome,
            error_code=error.code if error else None,
            error_message=error.message if error else None,
        )
        await self.host.storage.record_task_run(run)
        held.notes.append(("task/runFinished", {"run": tasks_module._run_wire(run)}))

    patch(Tasks, "run_now", run_now_later)
    patch(Tasks, "_finish", finish_later)


OTHER_SHELL_IDS = {"sh": "posix-default", "dash": "dash-0.5", "bash": "gnu-bash-5"}


@variant("other-shell-ids")
def _other_shell_ids() -> None:
    # Shell ids are the host's choice: this host names its shells otherwise, and its path
    # for the POSIX shell is the unresolved /bin/sh-style one. Scenarios pick shells by kind.
    listed = shells.catalog()

    def catalog() -> tuple[shells.Shell, ...]:
        return tuple(
            replace(shell, shell_id=OTHER_SHELL_IDS.get(shell.name, f"shell-{shell.name}"))
            for shell in listed
        )

    def fallback_default() -> shells.Shell | None:
        return next(iter(catalog()), None)

    patch(shells, "catalog", catalog)
    patch(shells, "fallback_default", fallback_default)


@variant("shells-without-kinds")
def _shells_without_kinds() -> None:
    # A shell's kind is optional knowledge: a host that calls every shell "other" gets the
    # scenarios that need a POSIX or a bash shell unverified, never failed.
    patch(shells.Shell, "kind", property(lambda _self: "other"))


@variant("other-first-default-shell")
def _other_first_default_shell() -> None:
    # Before any shell/setDefault the default is the last shell of the catalog, not sh.
    patch(shells, "fallback_default", lambda: shells.catalog()[-1] if shells.catalog() else None)


@variant("other-output-cap")
def _other_output_cap() -> None:
    # The output cap is the host's to choose, and to announce.
    patch(commands, "OUTPUT_CAP_BYTES", 100_000)
    patch(host_module, "OUTPUT_CAP_BYTES", 100_000)


async def _complete_whole(
    client: Any,
    config: provider_client.ProviderConfig,
    messages: Any,
    tools: Any,
    on_text: Any = None,
    *,
    timeout: float = 60.0,  # noqa: ASYNC109 - as the published complete()
) -> provider_client.AssistantReply:
    """One Chat Completions call without streaming: the whole answer in one response."""
    body: dict[str, Any] = {
        "model": config.model,
        "messages": [dict(m) for m in messages],
        "stream": False,
    }
    if tools:
        body["tools"] = [tool.to_wire() for tool in tools]
    headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
    url = config.base_url.rstrip("/") + "/chat/completions"
    try:
        response = await client.post(url, json=body, headers=headers, timeout=timeout)
    except Exception as exc:
        raise provider_client.ProviderError(f"provider request failed: {exc}", kind="http") from exc
    if response.status_code != 200:
        raise provider_client.ProviderError(
            f"provider returned HTTP {response.status_code}",
            kind="http",
            status=response.status_code,
        )
    try:  # an answer that is not the JSON of a whole completion is the provider's failure
        choice = response.json()["choices"][0]
        message = choice["message"]
        content = message.get("content") or ""
        # content may be a string or an array of text parts, joined in order
        text = content if isinstance(content, str) else "".join(p["text"] for p in content)
        calls = tuple(
            provider_client.ToolCall(c["id"], c["function"]["name"], c["function"]["arguments"])
            for c in message.get("tool_calls") or []
        )
    except (ValueError, LookupError, TypeError, AttributeError) as exc:
        raise provider_client.ProviderError(
            f"provider answer is not a completion: {exc}", kind="protocol"
        ) from exc
    if text and on_text is not None:
        await on_text(text)
    return provider_client.AssistantReply(text, calls, choice.get("finish_reason"))


@variant("non-streaming-provider")
def _non_streaming_provider() -> None:
    # Streaming the model's answer is allowed, not required: this host asks for whole
    # answers, so nothing is streamed while the model is still answering.
    patch(turns, "complete", _complete_whole)


@variant("prompt-without-provider-fails-its-turn")
def _prompt_without_provider_fails_its_turn() -> None:
    # A prompt to a session without a provider is accepted; its turn ends failed with
    # PROVIDER_NOT_CONFIGURED before any provider request.
    async def session_prompt(self: host_module.Host, params: dict[str, Any]) -> dict[str, Any]:
        row = await self.require_session(params["sessionId"])
        ensure_idle_for(self.activity_of(row.id), "a new prompt")
        return {"turnId": await self.turns.start(row, "prompt", params["text"])}

    patch(host_module.Host, "session_prompt", session_prompt)


@variant("migration-adds-a-setting")
def _migration_adds_a_setting() -> None:
    # R7.7 keeps the v8 settings as they were; a host may keep settings of its own beside
    # them. This host records, in the migration's transaction, the version it migrated from.
    from reference_host import migration

    original = migration.migration_statements

    def statements(v10_statements: list[str]) -> list[str]:
        steps = original(v10_statements)
        record = "INSERT INTO settings (key, value) VALUES ('host.migrated_from', '8')"
        return [*steps[:-1], record, steps[-1]]  # user_version stays last

    patch(migration, "migration_statements", statements)


CASES = [
    AllowedCase(
        "migration-adds-a-setting",
        "migration,handshake",
        why="the seeded settings survive; the contract does not forbid a key of the host's own",
    ),
    AllowedCase(
        "prompt-without-provider-fails-its-turn",
        "sessions",
        "model_provider",
        why="a prompt without a provider may be refused or start a turn that fails",
    ),
    AllowedCase(
        "schema-other-spelling",
        "restart_interruption,migration,handshake",
        why="the storage schema is compared by structure, not by its SQL text",
    ),
    AllowedCase(
        "run-finished-after-response",
        "scheduled_plan",
        why="task/runFinished may come before or after the task/run response",
    ),
    AllowedCase(
        "other-shell-ids",
        "shell",
        why="shell ids are the host's; scenarios pick shells by kind",
    ),
    AllowedCase(
        "shells-without-kinds",
        "shell",
        why="a host need not offer a POSIX or a bash shell: those scenarios are unverified",
        alone="it leaves every scenario that needs a POSIX or a bash shell unverified",
    ),
    AllowedCase(
        "other-first-default-shell",
        "shell",
        why="until the user chooses a default shell, which one it is is the host's choice",
    ),
    AllowedCase(
        "other-output-cap",
        "shell",
        why="the output cap is the host's choice, checked against what it announces",
    ),
    AllowedCase(
        "non-streaming-provider",
        "restart_interruption,scheduled_plan",
        why="asking the model for whole answers, without streaming, is allowed",
    ),
]
