"""Allowed variations (tools, storage and provider requests), written from the contract alone."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import re
import shutil
import threading
import time
import uuid
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

from hosts.registry import AllowedCase, patch, rewrite_provider_messages, variant


@variant("read-result-with-header")
def _read_result_with_header() -> None:
    # P10: "`Read` gives the file's text". The layout of the tool result is the host's
    # ("the host's own output format stays free", decisions.md). This host puts a one-line
    # header naming the file before the text, which follows unchanged.
    from reference_host.tools.files import Read

    run = Read.run

    async def run_with_header(self: Any, ctx: Any, args: dict[str, Any]) -> str:
        text = await run(self, ctx, args)
        return f"Contents of {args['path']}:\n{text}"

    patch(Read, "run", run_with_header)


@variant("refusals-without-codes")
def _refusals_without_codes() -> None:
    # P9: "the model is given the refusal and the turn goes on"; the canonical code goes in
    # turn/toolResult's `error.code`. What text the model reads is not fixed ("error and log
    # message texts" are the host's). This host tells the model in a plain sentence, without
    # the code; `error` in turn/toolResult keeps the code and the catalog status.
    from reference_host import turns

    def plain(error: Any) -> str:
        return f"The tool call was not carried out. Reason: {error.message}."

    patch(turns, "_error_text", plain)


@variant("bash-result-status-first")
def _bash_result_status_first() -> None:
    # P10: "`Bash` runs the command and gives its output"; R7.3: output is given to the
    # model "as the command wrote it: line ends are not translated". How the exit status is
    # shown around it is not stated. This host reports the status on a line of its own
    # before the output instead of after it.
    from reference_host.commands import CommandResult

    summary = CommandResult.summary

    def status_first(self: CommandResult) -> str:
        status = summary(self).rsplit("\n[", 1)[1].removesuffix("]")
        return f"[{status}]\n{self.output}"

    patch(CommandResult, "summary", status_first)


_TITLE: contextvars.ContextVar[str] = contextvars.ContextVar("fair_plan_title", default="")


@variant("artifact-names-from-title")
def _artifact_names_from_title() -> None:
    # §2: "a new file `<workspaceRoot>/.pi/plan/<name>.md` ... The name is yours; it must be
    # new for every submission" and "Nothing in the input chooses the location"; the schema
    # ArtifactRef.path is only `^\.pi/plan/[^/]+\.md$`. This host names the file after the
    # plan's title, reduced to lower-case ASCII letters and digits joined by '-', and adds
    # -2, -3, ... when the name is taken (created with O_EXCL, never replaced).
    from reference_host import artifacts
    from reference_host.approvals import Approvals
    from reference_host.errors import HostError

    submit = Approvals.submit

    async def submit_with_title(self: Any, session: Any, turn_id: str, args: Any) -> Any:
        title = args.get("title") if isinstance(args, dict) else None
        token = _TITLE.set(title if isinstance(title, str) else "")
        try:
            return await submit(self, session, turn_id, args)
        finally:
            _TITLE.reset(token)

    def create_named(plan_fd: int) -> tuple[str, int]:
        slug = "-".join(re.findall(r"[a-z0-9]+", _TITLE.get().lower()))[:48].strip("-") or "plan"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        for number in range(1, 100_000):
            name = f"{slug}.md" if number == 1 else f"{slug}-{number}.md"
            try:
                return name, os.open(name, flags, artifacts.READ_ONLY, dir_fd=plan_fd)
            except FileExistsError:
                continue
            except OSError as exc:
                raise HostError(
                    "ARTIFACT_WRITE_FAILED", f"cannot create the artifact: {exc}"
                ) from exc
        raise HostError("ARTIFACT_WRITE_FAILED", "no unused artifact name")

    patch(Approvals, "submit", submit_with_title)
    patch(artifacts, "_create_exclusive", create_named)


@variant("extra-settings-row")
def _extra_settings_row() -> None:
    # Storage: the structure must be exactly v10 ("Nothing may be missing and nothing
    # added"), but which rows `settings` holds besides `default_shell_id` is not stated.
    # This host keeps a setting of its own (`host_name`), written once when it creates a
    # new database; a later start changes nothing, and a migrated v8 file gets none.
    from reference_host.storage import Storage

    prepare = Storage._prepare_schema

    async def prepare_and_mark(self: Storage) -> None:
        new = await self.user_version() == 0
        await prepare(self)
        if new:
            async with self.transaction() as conn:
                await conn.execute(
                    "INSERT INTO settings (key, value) VALUES ('host_name', ?)",
                    ("fair-tools-storage-provider",),
                )

    patch(Storage, "_prepare_schema", prepare_and_mark)


@variant("log-file-in-data-dir")
def _log_file_in_data_dir() -> None:
    # "stderr is yours for logs"; the data directory holds `DIR/host.db`, and the contract
    # forbids leaving files behind only when the host refuses to start (P18) and forbids
    # storing the API key in any file there (P21). This host, once it has claimed the
    # directory and opened its database, also appends its log lines to `DIR/host.log`.
    from reference_host import server

    serve_on = server._serve_on

    async def serve_with_log_file(
        args: Any, storage: Any, clock: Any, stdin: Any, stdout: Any
    ) -> int:
        handler = logging.FileHandler(Path(args.data_dir) / "host.log", encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        me = threading.get_ident()
        handler.addFilter(lambda record: record.thread == me)
        logger = logging.getLogger("reference_host")
        logger.addHandler(handler)
        logger.info("host log opened in the data directory")
        try:
            return await serve_on(args, storage, clock, stdin, stdout)
        finally:
            logger.removeHandler(handler)
            handler.close()

    patch(server, "_serve_on", serve_with_log_file)


@variant("no-execution-turn-id-stored")
def _no_execution_turn_id_stored() -> None:
    # §4 lists what a plan_approvals row holds ("title and question as submitted, status,
    # permission_mode, execution_id and an execution_state"); `execution_turn_id` is in the
    # DDL but no rule names its value, and no protocol field reports it. This host leaves it
    # NULL in storage (it remembers the execution's turn in memory for its notifications).
    from reference_host.storage import Storage

    turns_of: dict[str, str] = {}
    write = Storage.write_approval
    get = Storage.get_approval

    async def write_without_turn(conn: Any, row: Any) -> None:
        if row.execution_turn_id is not None:
            turns_of[row.id] = row.execution_turn_id
        await write(conn, replace(row, execution_turn_id=None))

    async def get_with_turn(self: Storage, approval_id: str) -> Any:
        row = await get(self, approval_id)
        if row is not None and approval_id in turns_of:
            row = replace(row, execution_turn_id=turns_of[approval_id])
        return row

    patch(Storage, "write_approval", staticmethod(write_without_turn))
    patch(Storage, "get_approval", get_with_turn)


@variant("bookkeeping-times-on-wall-clock")
def _bookkeeping_times_on_wall_clock() -> None:
    # Under --conformance "Every deadline and timer is measured against" the host clock;
    # columns that are neither a deadline nor reported over the wire are not tied to it:
    # `sessions.updated_at`, `scheduled_tasks.updated_at`, `command_audit.started_at` and
    # `ended_at` (C5 names only "what `command/exited` reported", duration included). This
    # host stamps those with the system's real time.
    from reference_host.storage import Storage

    write_session = Storage.write_session
    update_task = Storage.update_task
    record_command = Storage.record_command

    def wall() -> int:
        return time.time_ns() // 1_000_000

    async def session_on_wall(conn: Any, session: Any) -> None:
        await write_session(conn, replace(session, updated_at=wall()))

    async def task_on_wall(self: Storage, task_id: str, changes: dict[str, Any]) -> None:
        if "updated_at" in changes:
            changes = {**changes, "updated_at": wall()}
        await update_task(self, task_id, changes)

    async def command_on_wall(self: Storage, values: dict[str, Any]) -> None:
        now = wall()
        values = {**values, "ended_at": now}
        values["started_at"] = now - int(values.get("duration_ms") or 0)
        await record_command(self, values)

    patch(Storage, "write_session", staticmethod(session_on_wall))
    patch(Storage, "update_task", task_on_wall)
    patch(Storage, "record_command", command_on_wall)


@variant("extra-request-parameters")
def _extra_request_parameters() -> None:
    # The model provider: the harness serves "an OpenAI-compatible Chat Completions
    # server"; a request fails only when it is unscripted or "not a valid Chat Completions
    # request", and the rules on validity are about messages. This host also sends request
    # parameters the API defines: temperature, tool_choice, parallel_tool_calls, user and
    # stream_options.
    from reference_host import turns

    complete = turns.complete

    class Client:
        def __init__(self, client: Any) -> None:
            self._client = client

        def stream(self, method: str, url: str, *, json: dict[str, Any], **kw: Any) -> Any:
            body = {**json, "temperature": 0.2, "user": "pi-host"}
            if body.get("tools"):
                body |= {"tool_choice": "auto", "parallel_tool_calls": True}
            if body.get("stream"):
                body["stream_options"] = {"include_usage": True}
            return self._client.stream(method, url, json=body, **kw)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._client, name)

    async def complete_with_parameters(client: Any, *args: Any, **kw: Any) -> Any:
        return await complete(Client(client), *args, **kw)

    patch(turns, "complete", complete_with_parameters)


@variant("tools-in-other-order")
def _tools_in_other_order() -> None:
    # R1.4: "Tools offered in Plan are exactly `Read`, `Glob`, ..." names a set, and
    # tools.schema.json names no order. This host offers the tools sorted by name, in
    # reverse, in every request.
    from reference_host import turns

    offered = turns.offered_tools

    def reversed_by_name(mode: str) -> list[Any]:
        return sorted(offered(mode), key=lambda spec: spec.name, reverse=True)

    patch(turns, "offered_tools", reversed_by_name)


@variant("developer-note-after-prompt")
def _developer_note_after_prompt() -> None:
    # P31: the prompt is "the text of the last `user` message of the turn's first request
    # ... and no user message after it (context of your own may go in other messages)";
    # `developer` is one of the roles a valid request may hold. This host ends every
    # provider request with a short developer message of its own (after the prompt, or
    # after the last tool message), never stored in the transcript.
    note = {
        "role": "developer",
        "content": "Host note: work only inside the session's workspace; be brief.",
    }
    rewrite_provider_messages(lambda messages: [*messages, dict(note)])


@variant("shell-paths-unresolved")
def _shell_paths_unresolved() -> None:
    # Commands and shells: `shell/list` gives "an absolute `path` to an executable ... the
    # `path` must be the program that runs (a symlink to it is fine)". This host announces
    # and runs each shell by the path PATH finds (`/usr/bin/sh`, a link to dash), not the
    # resolved target.
    from reference_host import shells

    known = ("sh", "bash", "dash", "zsh", "fish", "ksh", "pwsh")

    @cache
    def catalog() -> tuple[Any, ...]:
        found = []
        for name in known:
            location = shutil.which(name)
            if location is not None:
                found.append(shells.Shell(name, name, str(Path(location).absolute())))
        return tuple(found)

    patch(shells, "catalog", catalog)


@variant("output-coalesced")
def _output_coalesced() -> None:
    # R7.3/P20: output "streams while the command runs, as `command/output` notifications
    # numbered by `seq` ..., at most 16384 characters of text each"; how it is cut into
    # notifications is the host's (decisions.md: "how the host cuts output into
    # notifications is its own"). This host gathers a stream's output for up to 50 ms into
    # fewer, larger notifications (never past 16384 characters, stdout and stderr apart,
    # in the order written), and sends what it holds before `command/exited`.
    from reference_host.host import Host

    limit = 16384
    original = Host.__init__

    def init(self: Host, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        send = self.notify
        held: dict[str, dict[str, Any]] = {}  # commandId -> the notification being gathered
        seqs: dict[str, int] = {}
        timers: dict[str, asyncio.TimerHandle] = {}

        def flush(command_id: str) -> None:
            timer = timers.pop(command_id, None)
            if timer is not None:
                timer.cancel()
            pending = held.pop(command_id, None)
            if pending is not None:
                pending["seq"] = seqs.get(command_id, 0)
                seqs[command_id] = pending["seq"] + 1
                send("command/output", pending)

        def notify(method: str, params: dict[str, Any]) -> None:
            if method == "command/output":
                command_id = params["commandId"]
                pending = held.get(command_id)
                if pending is not None and (
                    pending["stream"] != params["stream"]
                    or len(pending["text"]) + len(params["text"]) > limit
                ):
                    flush(command_id)
                    pending = None
                if pending is None:
                    held[command_id] = {**params}
                    with contextlib.suppress(RuntimeError):
                        loop = asyncio.get_running_loop()
                        timers[command_id] = loop.call_later(0.05, flush, command_id)
                    if command_id not in timers:
                        flush(command_id)
                else:
                    pending["text"] += params["text"]
                return
            if method == "command/exited":
                flush(params["commandId"])
                seqs.pop(params["commandId"], None)
            send(method, params)

        self.notify = notify

    patch(Host, "__init__", init, wraps=True)


@variant("uuid-ids")
def _uuid_ids() -> None:
    # "identifiers' format (session, turn, approval, execution, command and shell ids)" is
    # the host's; the schema's Id is any string of 1 to 200 characters. This host makes
    # every id it creates (sessions, turns, approvals, executions, commands, permission
    # requests, tasks, runs) a bare UUID, with no prefix naming its kind.
    from reference_host import commands, host, ids, permissions

    def new_uuid(prefix: str) -> str:
        return str(uuid.uuid4())

    for module in (ids, host, commands, permissions):
        patch(module, "new_id", new_uuid)


_PINNED_SHELL: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "fair_pinned_shell", default=None
)


@variant("task-sessions-pin-default-shell")
def _task_sessions_pin_default_shell() -> None:
    # §6: "An Agent task runs as a new session bound to the task's workspace, its prompt
    # the task's prompt"; nothing says which shell that session records. `shellId: null`
    # is the state `session/configure` leaves after clearing a choice (R7.3), not a rule for
    # new sessions. This host gives a task's session the default shell of the moment as its
    # own `shellId` (reported and stored), so a later change of the default does not move it.
    from reference_host import tasks
    from reference_host.storage import SessionRow
    from reference_host.tasks import Tasks

    run = Tasks.run

    async def run_pinned(self: Tasks, row: dict[str, Any]) -> dict[str, Any]:
        token = _PINNED_SHELL.set(await self.host.default_shell_id())
        try:
            return await run(self, row)
        finally:
            _PINNED_SHELL.reset(token)

    def session_row(**fields: Any) -> SessionRow:
        if fields.get("shell_id") is None:
            fields["shell_id"] = _PINNED_SHELL.get()
        return SessionRow(**fields)

    patch(Tasks, "run", run_pinned)
    patch(tasks, "SessionRow", session_row)


@variant("assistant-without-null-content")
def _assistant_without_null_content() -> None:
    # The model provider: an assistant message "may add `name`, `tool_calls`, `refusal`"; in
    # Chat Completions its `content` may be left out when it has `tool_calls`. A transcript
    # row is "the entry's provider-format message". This host leaves `content` out of an
    # assistant message that has only tool calls (instead of `"content": null`), in the
    # requests and in the transcript alike.
    from reference_host import turns

    assistant = turns._assistant_message

    def without_null(reply: Any) -> dict[str, Any]:
        message = assistant(reply)
        if message.get("content") is None and message.get("tool_calls"):
            del message["content"]
        return message

    patch(turns, "_assistant_message", without_null)


@variant("glob-by-modification-time")
def _glob_by_modification_time() -> None:
    # P10: "`Glob` gives the workspace-relative paths of the files that match, and only
    # those"; no order is stated. This host lists the matches newest first (by modification
    # time, then by path), as some coding agents do.
    from reference_host.tools.files import NO_MATCHES, Glob

    run = Glob.run

    async def newest_first(self: Any, ctx: Any, args: dict[str, Any]) -> str:
        listed = await run(self, ctx, args)
        if listed == NO_MATCHES or ctx.workspace_root is None:
            return listed
        root = Path(ctx.workspace_root)

        def key(path: str) -> tuple[float, str]:
            with contextlib.suppress(OSError):
                return (-(root / path).stat().st_mtime, path)
            return (0.0, path)

        return "\n".join(sorted(listed.split("\n"), key=key))

    patch(Glob, "run", newest_first)


@variant("silent-write-and-edit")
def _silent_write_and_edit() -> None:
    # P10: Edit "replaces the one occurrence ... and the call's result is `ok` and reaches
    # the model"; what text a successful Write or Edit gives back is not stated. This host
    # answers a successful Write or Edit with an empty tool message (the status says ok).
    from reference_host.tools.files import Edit, Write

    for tool in (Write, Edit):
        run = tool.run

        async def silent(self: Any, ctx: Any, args: dict[str, Any], run: Any = run) -> str:
            await run(self, ctx, args)
            return ""

        patch(tool, "run", silent)


@variant("shell-display-names")
def _shell_display_names() -> None:
    # schemas/protocol-v9 `Shell.name` is a string with no constraint ("Clients and the
    # conformance suite pick a shell by kind; the id is the host's choice"). This host names
    # each shell for people: its program name and where it lives.
    from reference_host.shells import Shell

    to_wire = Shell.to_wire

    def display(self: Shell) -> dict[str, str]:
        return {**to_wire(self), "name": f"{self.name} shell at {self.path}"}

    patch(Shell, "to_wire", display)


@variant("no-truncation-notice")
def _no_truncation_notice() -> None:
    # P20: past `maxCommandOutputBytes` "you stream nothing more of it (a notice of your own
    # of at most 1 KiB is allowed) and report `truncated: true`". The notice is optional:
    # this host sends none, in the stream or in the tool result; `truncated` says it.
    from reference_host import commands

    patch(commands, "TRUNCATION_MARKER", "")


_STORAGE: contextvars.ContextVar[Any] = contextvars.ContextVar("fair_storage", default=None)


@variant("audit-row-at-start")
def _audit_row_at_start() -> None:
    # C5: "Every command is recorded in `command_audit` ... and what `command/exited`
    # reported"; when the row is first written is not stated. This host inserts the row
    # when the command starts (its end columns still empty) and completes it when the
    # command has exited, so a command under way is already on record.
    from reference_host import turns
    from reference_host.turns import TurnRunner

    bash = TurnRunner._bash
    run_command = turns.run_command

    async def bash_with_storage(self: TurnRunner, *args: Any, **kw: Any) -> Any:
        token = _STORAGE.set(self.host.storage)
        try:
            return await bash(self, *args, **kw)
        finally:
            _STORAGE.reset(token)

    async def run_recorded(**kw: Any) -> Any:
        storage = _STORAGE.get()
        started_at = kw["clock"].now_ms()
        writes: list[asyncio.Future[None]] = []

        def on_start(command_id: str) -> None:
            if storage is None:
                return
            row = {
                "id": command_id,
                "session_id": kw["session_id"],
                "turn_id": kw["turn_id"],
                "shell_id": kw["shell"].shell_id,
                "shell_path": kw["shell"].path,
                "command": kw["command"],
                "cwd": kw["cwd"],
                "started_at": started_at,
            }
            writes.append(asyncio.ensure_future(storage.record_command(row)))

        try:
            return await run_command(**kw, on_start=on_start)
        finally:
            for write in writes:  # the end is written after the start, never before it
                with contextlib.suppress(Exception):
                    await asyncio.shield(write)

    patch(TurnRunner, "_bash", bash_with_storage)
    patch(turns, "run_command", run_recorded)


@variant("commands-with-minimal-environment")
def _commands_with_minimal_environment() -> None:
    # Commands and shells: "Do not clear the `PI_CONFORMANCE_HOST_TOKEN` environment
    # variable from the commands you start" is the one rule on a command's environment.
    # This host starts each shell with a small environment of its own (PATH, HOME, USER,
    # LOGNAME, LANG, LC_*, TERM, TMPDIR, that token and its own marker), not a copy of its
    # whole environment; the OPENAI_API_KEY, for one, never reaches a command.
    from reference_host import commands

    kept = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "TERM", "TMPDIR")

    def environment(command_id: str) -> dict[str, str]:
        env = {
            name: value
            for name, value in os.environ.items()
            if name in kept or name.startswith("LC_") or name == "PI_CONFORMANCE_HOST_TOKEN"
        }
        env[commands.COMMAND_ENV] = command_id
        return env

    async def spawn(shell: Any, command: str, cwd: str, command_id: str) -> Any:
        # The reference host's _spawn, with the environment above.
        commands.adopt_orphans()
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        commands._spawning += 1
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
                env=environment(command_id),
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


@variant("bash-calls-side-by-side")
def _bash_calls_side_by_side() -> None:
    # P9 / C5: nothing orders the calls of one message. This host runs a message made only
    # of Bash calls side by side, each command timed from its own start, and reports the
    # results in the order of the calls.
    from reference_host import turns
    from reference_host.errors import HostError
    from reference_host.turns import TurnRunner

    run_batch = TurnRunner._run_batch

    async def side_by_side(
        self: TurnRunner, session: Any, turn_id: str, calls: Any, unattended: bool
    ) -> Any:
        if len(calls) < 2 or any(call.name != "Bash" for call in calls):
            return await run_batch(self, session, turn_id, calls, unattended)
        for call in calls:
            self.host.notify(
                "turn/toolCall",
                {
                    "sessionId": session.id,
                    "turnId": turn_id,
                    "toolCallId": call.call_id,
                    "tool": call.name,
                    "input": turns._parse_arguments(call),
                },
            )
        try:
            outcomes = list(
                await asyncio.gather(
                    *(self._run_call(session, turn_id, call, unattended) for call in calls)
                )
            )
        except asyncio.CancelledError:
            cut = turns._failure(HostError("TURN_CANCELLED", "the turn was cancelled"))
            self._announce_results(session.id, turn_id, calls, [cut] * len(calls))
            raise
        self._announce_results(session.id, turn_id, calls, outcomes)
        return outcomes

    patch(TurnRunner, "_run_batch", side_by_side)


CASES = [
    AllowedCase(
        "bash-calls-side-by-side",
        "shell,isolation",
        why="no rule orders the calls of one message; each command is timed from its own start",
    ),
    AllowedCase(
        "read-result-with-header",
        "plan_tools",
        "reading_a_file",
        why="how Read lays out the file's text around it is the host's (P10)",
    ),
    AllowedCase(
        "refusals-without-codes",
        "plan_tools",
        "refused",
        why="the words the model is given for a refusal are the host's; the code is reported",
    ),
    AllowedCase(
        "bash-result-status-first",
        "shell,plan_tools",
        "carriage_returns or command_the_model_runs_while_planning",
        why="where Bash puts the exit status in what the model is given is the host's",
    ),
    AllowedCase(
        "artifact-names-from-title",
        "artifact_integrity,submit_plan",
        why="artifact file names are the host's within .pi/plan/*.md",
    ),
    AllowedCase(
        "log-file-in-data-dir",
        "restart_interruption,migration",
        why="stderr is for logs; a log file in the data directory is not forbidden",
    ),
    AllowedCase(
        "bookkeeping-times-on-wall-clock",
        "sessions,scheduled_plan,shell",
        "audit or created or every_field or changes",
        why="columns the protocol never reports may follow the system clock",
    ),
    AllowedCase(
        "extra-request-parameters",
        "sessions",
        "prompt",
        why="a Chat Completions request may carry parameters of the host's choosing",
    ),
    AllowedCase(
        "tools-in-other-order",
        "plan_tools",
        "offered",
        why="the tools offered are a set; their order is the host's",
    ),
    AllowedCase(
        "developer-note-after-prompt",
        "sessions",
        "prompt",
        why="context of the host's own may follow the prompt in a message that is not the user's",
    ),
    AllowedCase(
        "uuid-ids",
        "sessions,approval,shell",
        why="the format of identifiers is the host's",
    ),
    AllowedCase(
        "output-coalesced",
        "shell,isolation",
        "output or commands_at_once",
        why="how output is cut into pieces of at most 16384 characters is the host's (P20)",
    ),
    AllowedCase(
        "no-truncation-notice",
        "shell",
        "cap",
        why="a notice past the output cap is allowed, not required (P20)",
    ),
    AllowedCase(
        "assistant-without-null-content",
        "plan_tools,sessions",
        "every_call or later_turn or earlier_answer",
        why="an assistant message with tool calls may leave out its content",
    ),
    AllowedCase(
        "glob-by-modification-time",
        "plan_tools",
        "looking_for_files",
        why="Glob's order is the host's (P10)",
    ),
    AllowedCase(
        "audit-row-at-start",
        "shell",
        "audit",
        why="when the command_audit row is first written is the host's (C5)",
    ),
]
