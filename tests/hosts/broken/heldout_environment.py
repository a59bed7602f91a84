"""Broken hosts: a held-out set (assumptions about the environment and the platform: a host
written and tested on one machine), written from the contract alone."""

from __future__ import annotations

import asyncio
import errno
import os
import unicodedata
import weakref
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from hosts.registry import BrokenCase, patch, variant


# P30 ("No project, no files"): in a session created without a workspaceRoot the file tools
# are refused with WORKSPACE_REQUIRED, "whatever path they are given (a full path
# included), also not relative to your process's own working folder".
# Bug: Read falls back to the host process's working directory when the session has no
# project (``root = ctx.workspace_root or Path.cwd()``), as it did on the developer's
# machine where the host was always started from the project folder.
# Observed: Read("README.md") in a project-less session returns the file of the host's own
# working folder (status ok); Read of an absolute path elsewhere is PATH_OUTSIDE_WORKSPACE
# (denied) instead of WORKSPACE_REQUIRED (error).
# Recipe: session/create {workspaceRoot: null, provider}; prompt; the model calls
# Read {"path": "<a file of the host's cwd>"} or Read {"path": "/abs/file"} -> expect
# turn/toolResult status error, error.code WORKSPACE_REQUIRED, and nothing read.
@variant("env-no-project-read-cwd")
def no_project_read_cwd() -> None:
    from reference_host.tools import files
    from reference_host.tools.base import ToolContext, validate_args
    from reference_host.workspace import require_root

    async def run(self: files.Read, ctx: ToolContext, args: dict[str, Any]) -> str:
        args = validate_args(self.spec, args)
        root = Path.cwd() if ctx.workspace_root is None else require_root(ctx.workspace_root)
        return await asyncio.to_thread(
            self._read, root, args["path"], args.get("offset"), args.get("limit")
        )

    patch(files.Read, "run", run)


# "Shutdown and crashes": "Do not clear the PI_CONFORMANCE_HOST_TOKEN environment variable
# from the commands you start."
# Bug: for reproducible commands the host starts every shell with a small fixed
# environment (PATH, HOME, LANG, TERM and its own command marker) instead of its own
# environment plus the marker, so the harness's token never reaches the commands.
# Observed: `echo "$PI_CONFORMANCE_HOST_TOKEN"` prints an empty line; after a SIGKILL of the
# host the harness cannot find the commands the crashed host left running by the token.
# Recipe: start the host with PI_CONFORMANCE_HOST_TOKEN=x in its environment; Bash
# {"command": "printf %s \"$PI_CONFORMANCE_HOST_TOKEN\""} -> expect command/output "x".
@variant("env-command-env-minimal")
def command_env_minimal() -> None:
    from reference_host import commands
    from reference_host.reaper import COMMAND_ENV, adopt_orphans
    from reference_host.shells import Shell

    def clean_environment(command_id: str) -> dict[str, str]:
        return {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": os.environ.get("HOME", "/"),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            COMMAND_ENV: command_id,
        }

    async def spawn(
        shell: Shell, command: str, cwd: str, command_id: str
    ) -> tuple[asyncio.subprocess.Process, list[int]]:
        adopt_orphans()
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
                env=clean_environment(command_id),
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


# P32 (Conformance mode): "Every timestamp your host reports (a ... transcript entry's
# createdAt ...) and the columns that store them is read from this clock."
# Bug: the turn runner stamps the messages it appends to the transcript (the model's
# messages and the tool results) with the wall clock (time.time()), as a host that was
# only ever run without --conformance would; the prompt row still takes the host clock.
# Observed: after conformance/clock/set to a day ahead, a prompt's assistant and tool rows
# in session/transcript (and transcript.created_at) carry today's system time, earlier
# than the prompt's row and than the clock.
# Recipe: clock/set now+86400000; session/prompt; wait for turn/ended; session/transcript
# -> every entry's createdAt equals the host clock (clock/get), not the system time.
@variant("env-transcript-wall-clock")
def transcript_wall_clock() -> None:
    from reference_host.clock import wall_time_ms
    from reference_host.storage import Storage

    original = Storage.append_transcript

    async def append_transcript(
        self: Storage,
        session_id: str,
        turn_id: str | None,
        role: str,
        content: dict[str, Any],
        at: int,
    ) -> None:
        await original(self, session_id, turn_id, role, content, wall_time_ms())

    patch(Storage, "append_transcript", append_transcript, wraps=True)


# P32 / "Commands and shells": "The per-call timeout is the tool argument timeout_ms ...
# Both run on the host clock, so under --conformance they fire when the harness moves it
# (set as well as advance)."
# Bug: the command's timeout is armed on the event loop (loop.call_later, real seconds)
# rather than on the host clock: it is computed from the host clock but then waits in
# wall time, as on a machine where the two never differ.
# Observed: a Bash call with timeout_ms 60000 whose command waits on a gate does not end
# when the clock is advanced by 60 s; it ends only after 60 real seconds (or never within
# the step timeout); a short timeout_ms fires with no clock move at all.
# Recipe: Bash {"command": "cat .gate-x", "timeout_ms": 60000}; on command/started,
# clock/advance 60000 -> expect command/exited timedOut true (signal set) before the
# advance's response, and the tool result COMMAND_TIMED_OUT.
@variant("env-command-timeout-real-time")
def command_timeout_real_time() -> None:
    from reference_host import turns
    from reference_host.clock import Clock, TimerCallback, TimerHandle, _Timer

    class LoopTimers(Clock):
        """The host clock's time, with timers that wait in real seconds."""

        def __init__(self, inner: Clock) -> None:
            super().__init__()
            self._inner = inner
            self._fired: set[asyncio.Task[None]] = set()

        def now_ms(self) -> int:
            return self._inner.now_ms()

        def call_at(self, due_ms: int, callback: TimerCallback) -> TimerHandle:
            timer = _Timer(due_ms, 0, callback)
            loop = asyncio.get_running_loop()

            async def run() -> None:
                await callback()

            def fire() -> None:
                if not timer.cancelled:
                    task = loop.create_task(run())
                    self._fired.add(task)
                    task.add_done_callback(self._fired.discard)

            loop.call_later(max(0.0, (due_ms - self.now_ms()) / 1000), fire)
            return TimerHandle(timer)

    original = vars(turns)["run_command"]

    async def run_command(*, clock: Clock, **kwargs: Any) -> Any:
        return await original(clock=LoopTimers(clock), **kwargs)

    patch(turns, "run_command", run_command, wraps=True)


# P10 ("The tools work"): "Read gives the file's text as stored: line ends (CR LF, a lone
# CR) are not translated and a byte order mark at its start stays".
# Bug: Read opens the file in text mode (open(path, encoding="utf-8")), whose universal
# newlines turn CR LF and a lone CR into LF; on the machine it was written on every file
# had LF line ends, so nothing showed.
# Observed: Read of a file "a\r\nb\rc\n" gives the model "a\nb\nc\n".
# Recipe: workspace file crlf.txt = b"one\r\ntwo\rthree\n"; the model calls
# Read {"path": "crlf.txt"} -> the tool message holds "one\r\ntwo\rthree".
@variant("env-read-universal-newlines")
def read_universal_newlines() -> None:
    from reference_host.tools import files
    from reference_host.workspace import resolve_inside

    def read(root: Path, relative: str, offset: int | None, limit: int | None) -> str:
        path = resolve_inside(root, relative, must_exist=True)
        files._require_regular(path, relative)
        try:
            with path.open(encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except OSError as exc:
            raise files._io_error(relative, exc) from exc
        if offset is None and limit is None:
            return text
        start = (offset or 1) - 1
        lines = files._split_lines(text)
        end = len(lines) if limit is None else start + limit
        return "".join(lines[start:end])

    patch(files.Read, "_read", staticmethod(read))


# P10 (Glob): "matching is case-sensitive (*.md is the top level's Markdown files ...)";
# Grep's glob "narrows the files as Glob's pattern does".
# Bug: the glob matcher lower-cases both the name and the pattern, written on a machine
# whose file system ignores case (macOS, Windows), where it made `*.md` find README.MD.
# Observed: Glob "*.md" lists NOTES.MD and Readme.Md too; Glob "src/*.py" lists SRC/x.PY.
# Recipe: workspace files a.md, B.MD; Glob {"pattern": "*.md"} -> exactly "a.md".
@variant("env-glob-case-insensitive")
def glob_case_insensitive() -> None:
    from reference_host.tools import files

    def match(name: str, pattern: str) -> bool:
        return fnmatchcase(name.lower(), pattern.lower())

    patch(files, "fnmatchcase", match)


# R7.3 / "Commands and shells": "Bash runs through the session's shell, or the persisted
# default ... command/started names the shell"; shell/list: "the path must be the program
# that runs".
# Bug: commands are started as `/bin/sh -c COMMAND` (what subprocess's shell=True does),
# whatever shell the session selected, on the assumption, true where it was written, that
# /bin/sh is bash. command/started and command_audit still name the selected shell.
# Observed: in a session whose shell is the bash shell, `echo "${BASH_VERSION:-none}"`
# prints "none" (here /bin/sh is dash) and `[[ 1 == 1 ]] && echo yes` fails; the process
# that runs the command is /bin/sh, not the announced path.
# Recipe: session/configure {shellId: <the kind bash shell>}; Bash
# {"command": "echo ${BASH_VERSION:-none}"} -> output is a bash version.
@variant("env-sh-c-ignores-shell")
def sh_c_ignores_shell() -> None:
    from reference_host import commands
    from reference_host.shells import Shell

    original = commands._spawn

    async def spawn(
        shell: Shell, command: str, cwd: str, command_id: str
    ) -> tuple[asyncio.subprocess.Process, list[int]]:
        return await original(replace(shell, path="/bin/sh"), command, cwd, command_id)

    patch(commands, "_spawn", spawn, wraps=True)


# P1 (Framing, malformed input): "a line that is not UTF-8 JSON gets PARSE_ERROR ... A line
# that is not valid UTF-8 is not read at all: its answer has "id": null."
# Bug: a request line that does not decode as UTF-8 is decoded again as Latin-1 (the
# legacy 8-bit encoding of the developer's terminal), so a client in a non-UTF-8 locale
# "still works": the line is served as if it were valid.
# Observed: {"jsonrpc":"2.0","id":7,"method":"session/get","params":{"sessionId":"s\xff"}}
# is answered under id 7 (SESSION_NOT_FOUND) instead of PARSE_ERROR with id null; a
# session/prompt whose text holds a Latin-1 byte (0xE9) starts a turn with "\u00e9".
# Recipe: send such a line -> expect PARSE_ERROR with "id": null, and no turn or change.
@variant("env-request-latin1-fallback")
def request_latin1_fallback() -> None:
    from reference_host.framing import Frame
    from reference_host.rpc import Dispatcher

    original = Dispatcher.handle

    async def handle(self: Dispatcher, frame: Frame) -> None:
        if isinstance(frame, bytes):
            try:
                frame.decode("utf-8")
            except UnicodeDecodeError:
                frame = frame.decode("latin-1").encode("utf-8")
        await original(self, frame)

    patch(Dispatcher, "handle", handle, wraps=True)


# P10 (Glob): "Glob gives the workspace-relative paths of the files that match ..., each
# named as it is on disk (a name's Unicode form included: a decomposed accent stays
# decomposed)".
# Bug: the workspace walk normalises every name to NFC, a habit from macOS, whose file
# system hands out decomposed names that then fail to compare with typed (composed) text.
# Observed: a file named "cafe\u0301.txt" (NFD) is listed by Glob as "caf\u00e9.txt" (NFC):
# a name that is not on disk (Read of it is FILE_NOT_FOUND).
# Recipe: workspace file "cafe\u0301.txt"; Glob {"pattern": "*.txt"} -> the tool message
# holds "cafe\u0301.txt" byte for byte.
@variant("env-glob-nfc-names")
def glob_nfc_names() -> None:
    from reference_host.tools import files
    from reference_host.tools.budget import Budget

    original = files._workspace_files

    def workspace_files(root: Path, budget: Budget) -> list[tuple[str, Path]]:
        found = original(root, budget)
        return sorted((unicodedata.normalize("NFC", name), real) for name, real in found)

    patch(files, "_workspace_files", workspace_files, wraps=True)


# P17 ("One owner"): "A second host started on a DIR that a live host holds refuses to
# start with DATA_DIR_IN_USE before it reads or writes anything (no recovery, no migration,
# no file created or changed), and the first host goes on serving, its pending approvals
# still pending." (Also R4.10: recovery marks the approvals of an *earlier* process.)
# Bug: the host checks the data directory, opens the database and runs its start-up
# recovery, and only then takes its lock: written on the assumption that it is the only
# process using the data directory, the lock was added last, around serving.
# Observed: a second host on a live host's DIR still refuses with DATA_DIR_IN_USE, but
# before that its recovery has marked the first host's pending approval `interrupted`
# (TURN_INTERRUPTED) in host.db; the first host's approval/get now reads differently
# from what it reported, and approving it fails or acts on an interrupted row.
# Recipe: host A: submit a plan (approval pending); start host B on the same DIR -> B
# answers DATA_DIR_IN_USE; then read plan_approvals (status must still be pending) and
# approve through host A (must succeed).
@variant("env-lock-after-recovery")
def lock_after_recovery() -> None:
    import argparse
    import importlib
    from typing import BinaryIO

    from reference_host import datadir, server
    from reference_host.clock import ManualClock, SystemClock, wall_time_ms
    from reference_host.errors import HostError

    def check_data_dir(data_dir: Path) -> None:
        """claim()'s checks, without the lock."""
        try:
            data_dir.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            pass
        except OSError as exc:
            raise datadir._unavailable(data_dir, exc.strerror or str(exc)) from exc
        try:
            fd = os.open(data_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            reason = "it is not a directory" if exc.errno == errno.ENOTDIR else exc.strerror
            raise datadir._unavailable(data_dir, reason or str(exc)) from exc
        try:
            datadir._check_files(data_dir, fd)
        finally:
            os.close(fd)

    async def serve(args: argparse.Namespace, stdin: BinaryIO, stdout: BinaryIO) -> int:
        try:
            check_data_dir(args.data_dir)
        except HostError as error:
            return server._refuse(error, stdout)
        loading = asyncio.ensure_future(asyncio.to_thread(importlib.import_module, server.HANDLERS))
        clock = ManualClock(wall_time_ms()) if args.conformance else SystemClock()
        try:
            storage = await server._open_and_recover(args.data_dir, clock)
        except HostError as error:
            await loading
            return server._refuse(error, stdout)
        try:
            lock = datadir.claim(args.data_dir)
        except HostError as error:
            await storage.close()
            await loading
            return server._refuse(error, stdout)
        try:
            await loading
            return await server._serve_on(args, storage, clock, stdin, stdout)
        finally:
            lock.release()

    patch(server, "_serve", serve)


# "Sessions, turns and boundaries": "A workspace root is any absolute path of an existing
# folder"; P29: "a root that session/create would refuse, relative, missing or not a
# folder, is refused with WORKSPACE_INVALID"; workspaceRoot is "reported exactly as given
# (no path resolution ...)".
# Bug: the root is passed through os.path.expanduser before it is checked, a convenience
# for roots typed as "~/project" on the developer's desktop; "~" and "~/x" are relative
# paths, resolved against the host's HOME.
# Observed: session/create {workspaceRoot: "~"} (or task/create with it) succeeds when
# HOME exists, instead of WORKSPACE_INVALID; the session reports "~" and its tools and
# artifacts work in $HOME (its commands fail: the working directory "~" does not exist).
# Recipe: session/create {"workspaceRoot": "~"} -> expect WORKSPACE_INVALID and no session.
@variant("env-root-expands-home")
def root_expands_home() -> None:
    from reference_host import artifacts, host, tasks, workspace

    original = workspace.validate_root

    def validate_root(root: str) -> Path:
        return original(os.path.expanduser(root))  # noqa: PTH111 - leaves ~nobody as it is

    for owner in (workspace, host, tasks, artifacts):
        patch(owner, "validate_root", validate_root, wraps=True)


# "Commands and shells": "Bash runs through the session's shell, or the persisted default,
# with the workspace as its working directory ... Both are the running session's own:
# another session's shell choice or working folder never carries over, also when the two
# share a shell or a workspace root"; "a command's cwd is that same workspaceRoot string".
# Bug: the host keeps one working directory for the process (as os.chdir would), set to the
# session's root whenever a turn starts, and starts commands there; with one session at a
# time, as on the developer's machine, it is always the right folder.
# Observed: session A's turn is waiting on the model; session B (another root) starts a
# turn; A's model then calls Bash `pwd`: it runs in B's root, and command/started's cwd
# names B's root (command_audit still names A's).
# Recipe: sessions A and B with different roots; prompt A (provider holds its answer);
# prompt B; release A's answer with Bash {"command": "pwd"} -> output and cwd are A's root.
# The per-host working directory lives in a WeakKeyDictionary keyed by the host's clock.
@variant("env-cwd-follows-last-turn")
def cwd_follows_last_turn() -> None:
    from reference_host import turns
    from reference_host.clock import Clock
    from reference_host.storage import SessionRow

    current: weakref.WeakKeyDictionary[Clock, str] = weakref.WeakKeyDictionary()
    original_start = turns.TurnRunner.start
    original_run = vars(turns)["run_command"]

    async def start(self: turns.TurnRunner, session: SessionRow, *args: Any, **kwargs: Any) -> str:
        if session.workspace_root is not None:
            current[self.host.clock] = session.workspace_root
        return await original_start(self, session, *args, **kwargs)

    async def run_command(*, clock: Clock, cwd: str, **kwargs: Any) -> Any:
        return await original_run(clock=clock, cwd=current.get(clock, cwd), **kwargs)

    patch(turns.TurnRunner, "start", start, wraps=True)
    patch(turns, "run_command", run_command, wraps=True)


# Protocol "Timestamps ... milliseconds since the Unix epoch (UTC)" and Ordering: "a timer
# is due once the clock is at or past its time ... A task runs when it reaches runAt"
# (P29, P32).
# Bug: the scheduler reads runAt as a naive local time and converts it to UTC with the
# machine's current UTC offset before arming the timer, so a task's timer is shifted by
# that offset; on a machine set to UTC (the developer's, and a CI runner's) it is zero.
# Observed: with TZ=Asia/Kolkata a task runs 5.5 hours early (its startedAt before its
# runAt); with TZ=America/New_York it runs 5 hours late. Under UTC nothing differs.
# Recipe: start the host with TZ=America/New_York; task/create {runAt: now+60000};
# clock/advance 60000 -> expect task/runFinished (it arrives only 5 h later).
@variant("env-task-runat-local-tz")
def task_runat_local_tz() -> None:
    from reference_host.tasks import Tasks

    original: Callable[[Tasks, str, int | None], None] = Tasks._arm

    def arm(self: Tasks, task_id: str, run_at: int | None) -> None:
        if run_at is not None:
            offset = datetime.now().astimezone().utcoffset()
            if offset is not None:
                run_at -= int(offset.total_seconds()) * 1000
        original(self, task_id, run_at)

    patch(Tasks, "_arm", arm, wraps=True)


# One host is no case: env-command-env-minimal (commands lose the host's token, which only
# the clean-up after a crash reads). env-task-runat-local-tz is one since the harness
# starts every host in UTC+05:30, whatever the machine's zone.
CASES = [
    BrokenCase(
        "env-task-runat-local-tz",
        "scheduled_plan",
        "does_not_run_a_millisecond_before_its_time",
        "P32",
        "the host sent turn/started for a millisecond before its runAt",
    ),
    BrokenCase(
        "env-no-project-read-cwd",
        "plan_tools",
        "file_tool_in_a_session_without_a_project_is_refused and Read",
        "P30",
        "expected WORKSPACE_REQUIRED",
    ),
    BrokenCase(
        "env-transcript-wall-clock",
        "sessions",
        "every_entry_of_the_conversation_carries_the_host_clocks_time",
        "P32",
        "but transcript entries read",
    ),
    BrokenCase(
        "env-command-timeout-real-time",
        "isolation",
        "leaves_another_sessions_command_timeout_armed and cancelling",
        "C5",
        "did not time out when the host clock passed its timeout",
        slow=True,
    ),
    BrokenCase(
        "env-read-universal-newlines",
        "plan_tools",
        "reading_a_file_gives_the_model_its_line_ends",
        "P10",
        "line end included",
    ),
    BrokenCase(
        "env-glob-case-insensitive",
        "plan_tools",
        "finds_exactly_the_files_it_names and signs",
        "P10",
        "after its Glob call the model was given 'NOTES.MD'",
    ),
    BrokenCase(
        "env-sh-c-ignores-shell",
        "shell",
        "runs_in_the_default_shell_when_that_is_the_bash",
        "R7.3",
        "the process ran",
    ),
    BrokenCase(
        "env-request-latin1-fallback",
        "protocol_errors",
        "a_line_that_is_not_utf8",
        "P1",
        "expected PARSE_ERROR",
    ),
    BrokenCase(
        "env-glob-nfc-names",
        "plan_tools",
        "decomposed_accent_as_it_is_on_disk",
        "P10",
        "it was given composed",
    ),
    BrokenCase(
        "env-lock-after-recovery",
        "restart_interruption",
        "second_host_on_the_same_data_directory_refuses",
        "P17",
        "the refused host changed the data directory",
    ),
    BrokenCase(
        "env-root-expands-home",
        "sessions",
        "relative_workspace_path_is_refused and tilde",
        "R2.8",
        "expected the host to refuse",
    ),
    BrokenCase(
        "env-cwd-follows-last-turn",
        "isolation",
        "each_run_them_in_their_own_project",
        "R5.8",
        "command ran in",
    ),
]
