"""Broken hosts: a held-out set (values the fixtures hold fixed), written from the contract
alone."""

from __future__ import annotations

import contextvars
import os
import weakref
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from hosts.registry import BrokenCase, patch, variant

_TITLE: contextvars.ContextVar[str] = contextvars.ContextVar("vf_title", default="")
_HOST_NOW: contextvars.ContextVar[int] = contextvars.ContextVar("vf_host_now", default=0)
_WIDTH = {"ask": 0, "accept-edits": 1, "auto": 2}


# R3.11 (also R3.6): after a reject the session stays in Plan with the permission mode it
# had. Bug: "reject never selects or grants an execution mode" is read as "reject drops the
# session back to the default mode": reject writes permission mode `ask` into the session
# (and announces it). Shows only for a session that was in accept-edits or auto before the
# decision.
@variant("vf-reject-resets-permission-mode")
def reject_resets_permission_mode() -> None:
    from reference_host.approvals import Approvals

    original = Approvals.reject

    async def reject(self: Approvals, session_id: str, approval_id: str) -> dict[str, Any]:
        result = await original(self, session_id, approval_id)
        host = self.host
        session = await host.require_session(session_id)
        if session.permission_mode != "ask":
            await host.storage.update_session(
                replace(session, permission_mode="ask", updated_at=host.clock.now_ms())
            )
            await host.publish_session(session_id)
        return result

    patch(Approvals, "reject", reject)


# R4.6 / C4: approve puts the session in Agent with exactly the permission mode the approve
# chose. Bug: approve "never narrows" the session's permission mode: it keeps the session's
# own mode when that one is wider than the chosen one (auto before, `ask` chosen -> auto).
# The approval row records the chosen mode; only the session is wrong. Shows only when the
# session was in a wider mode than the one chosen before the decision.
@variant("vf-approve-keeps-wider-mode")
def approve_keeps_wider_mode() -> None:
    from reference_host import approvals
    from reference_host.storage import SessionRow

    original = replace  # what approvals.py calls as ``replace``

    def widest(obj: Any, /, **changes: Any) -> Any:
        if isinstance(obj, SessionRow) and changes.get("mode") == "agent":
            chosen = changes.get("permission_mode", obj.permission_mode)
            if _WIDTH[obj.permission_mode] > _WIDTH[chosen]:
                changes["permission_mode"] = obj.permission_mode
        return original(obj, **changes)

    patch(approvals, "replace", widest)


# P7: under `ask` or `accept-edits` a Plan turn's Bash asks too. Bug: the host thinks a Plan
# turn under accept-edits has nothing to confirm (planning edits nothing) and treats it as
# auto: Bash in a Plan turn runs without a permission question when the mode is
# accept-edits. Under `ask` (the usual fixture) it still asks.
@variant("vf-plan-bash-unasked-under-accept-edits")
def plan_bash_unasked_under_accept_edits() -> None:
    from reference_host.turns import TurnRunner

    original = TurnRunner._run_call

    async def run_call(
        self: TurnRunner, session: Any, turn_id: str, call: Any, unattended: bool
    ) -> Any:
        if session.mode == "plan" and session.permission_mode == "accept-edits":
            session = replace(session, permission_mode="auto")
        return await original(self, session, turn_id, call, unattended)

    patch(TurnRunner, "_run_call", run_call)


# R1.4: the tools offered in Plan are exactly the Plan tools, in every request of a Plan
# turn. Bug: the host keeps the "mode the tools follow" in a per-session cache that
# session/configure, EnterPlanMode and approve update, but session/create seeds it with the
# default (agent) instead of the mode given: a session created in Plan (not switched to
# it) is offered the Agent tools until its mode is changed once. The host's own gate still
# reads the stored mode, so Write stays denied and SubmitPlan still works.
@variant("vf-created-plan-offered-agent-tools")
def created_plan_offered_agent_tools() -> None:
    from reference_host.approvals import Approvals
    from reference_host.host import Host
    from reference_host.turns import TurnRunner

    seeded_agent: set[str] = set()
    create, configure = Host.session_create, Host.session_configure
    enter, approve = Host.enter_plan_mode, Approvals.approve
    ask_model = TurnRunner._ask_model

    async def session_create(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await create(self, params)
        seeded_agent.add(result["session"]["sessionId"])
        return result

    async def session_configure(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        result = await configure(self, params)
        if "mode" in params:
            seeded_agent.discard(params["sessionId"])
        return result

    async def enter_plan_mode(self: Host, session: Any) -> None:
        seeded_agent.discard(session.id)
        await enter(self, session)

    async def approve_(
        self: Approvals, session_id: str, approval_id: str, mode: Any
    ) -> dict[str, Any]:
        seeded_agent.discard(session_id)
        return await approve(self, session_id, approval_id, mode)

    async def ask(self: TurnRunner, session: Any, turn_id: str, messages: Any) -> Any:
        if session.id in seeded_agent:
            session = replace(session, mode="agent")
        return await ask_model(self, session, turn_id, messages)

    patch(Host, "session_create", session_create)
    patch(Host, "session_configure", session_configure)
    patch(Host, "enter_plan_mode", enter_plan_mode)
    patch(Approvals, "approve", approve_)
    patch(TurnRunner, "_ask_model", ask)


# R5.9 workspace rule (a root is an opaque path; never pasted into a shell command line) and
# P10 (Bash runs the command): the host starts the shell as `cd "<root>" && <command>`.
# Double quotes cover spaces, so the usual roots work; a root holding `$`, a backquote, `"`
# or `\` is expanded by the shell, the cd fails and the command never runs. The announced
# command and the audit row are unchanged.
@variant("vf-bash-cd-double-quoted-root")
def bash_cd_double_quoted_root() -> None:
    from reference_host import commands

    original = commands._spawn

    async def spawn(shell: Any, command: str, cwd: str, command_id: str) -> Any:
        return await original(shell, f'cd "{cwd}" && {command}', cwd, command_id)

    patch(commands, "_spawn", spawn)


# C5: the command_audit row holds the working directory, which is the workspaceRoot string
# exactly as given ("a command's cwd is that same workspaceRoot string"; no path resolution).
# Bug: the audit writes the resolved path (os.path.realpath), as a "canonical" cwd; it
# differs only for a root reached through a symbolic link (or holding `..`).
@variant("vf-audit-cwd-resolved")
def audit_cwd_resolved() -> None:
    from reference_host import turns

    original = turns._audit_row

    def audit_row(audit: dict[str, Any], result: Any, ended_at: int) -> dict[str, Any]:
        row = original(audit, result, ended_at)
        return {**row, "cwd": os.path.realpath(row["cwd"])}

    patch(turns, "_audit_row", audit_row)


# R2.1 / R2.3: a submission in a project-bound session writes a new artifact, whatever its
# title (nothing in the input chooses the location). Bug: the artifact name is a slug of the
# title cut to 120 characters (not bytes) plus a random suffix: a long non-ASCII title
# gives a name over the file system's 255-byte limit and SubmitPlan fails with
# ARTIFACT_WRITE_FAILED, creating no approval. ASCII titles of any length still work.
@variant("vf-title-slug-name-too-long")
def title_slug_name_too_long() -> None:
    from reference_host import artifacts
    from reference_host.approvals import Approvals

    original = Approvals.submit

    async def submit(self: Approvals, session: Any, turn_id: str, args: dict[str, Any]) -> Any:
        _TITLE.set(str(args.get("title", "")))
        return await original(self, session, turn_id, args)

    def unique_name() -> str:
        slug = "".join(c if c.isalnum() else "-" for c in _TITLE.get())[:120].strip("-")
        return f"{slug or 'plan'}-{os.urandom(6).hex()}.md"

    patch(Approvals, "submit", submit)
    patch(artifacts, "_unique_name", unique_name)


# C1 / R4.3: the approval's `artifact` object carries the recorded path, SHA-256 and byte
# size, equal to its row. Bug: the wire form tests the artifact fields for truthiness, so an
# empty plan (markdown "", byteSize 0) is reported with `artifact: null`, as if it were a
# legacy approval, although the row holds the file.
@variant("vf-empty-plan-artifact-null")
def empty_plan_artifact_null() -> None:
    from reference_host import approvals

    def artifact_wire(row: Any) -> dict[str, Any] | None:
        if not (row.artifact_path and row.artifact_sha256 and row.artifact_bytes):
            return None
        return {
            "path": row.artifact_path,
            "sha256": row.artifact_sha256,
            "byteSize": row.artifact_bytes,
        }

    patch(approvals, "_artifact_wire", artifact_wire)


# R2.6: the approval holds the title and the question as submitted. Bug: an empty question
# (a forgotten case: "the card needs something to ask") is stored and reported as a default
# question. Any non-empty question is kept.
@variant("vf-empty-question-defaulted")
def empty_question_defaulted() -> None:
    from reference_host import approvals

    original = approvals._require_text

    def require_text(args: dict[str, Any], field: str) -> str:
        value = original(args, field)
        if field == "question" and value == "":
            return "Do you approve this plan?"
        return value

    patch(approvals, "_require_text", require_text)


# R2.6: the title is kept as submitted. Bug: the title is trimmed of surrounding blank space
# (newlines, spaces, tabs) before it is stored and reported; a title without surrounding
# blanks is unchanged.
@variant("vf-title-trimmed")
def title_trimmed() -> None:
    from reference_host import approvals

    original = approvals._require_text

    def require_text(args: dict[str, Any], field: str) -> str:
        value = original(args, field)
        return value.strip() if field == "title" else value

    patch(approvals, "_require_text", require_text)


# R2.1 (with P32: the host clock may be set anywhere up to 8.64e15 ms less 30 minutes):
# SubmitPlan writes the artifact and creates the approval. Bug: the artifact name carries a
# calendar stamp of the *host* clock made with datetime, which stops at year 9999: once the
# clock is set past 9999-12-31 the name cannot be made and every SubmitPlan fails
# (TOOL_FAILED), creating no approval. At today's dates it works.
@variant("vf-artifact-name-host-clock-stamp")
def artifact_name_host_clock_stamp() -> None:
    from reference_host import artifacts
    from reference_host.approvals import Approvals

    original = Approvals.submit

    async def submit(self: Approvals, session: Any, turn_id: str, args: dict[str, Any]) -> Any:
        _HOST_NOW.set(self.host.clock.now_ms())
        return await original(self, session, turn_id, args)

    def unique_name() -> str:
        stamp = datetime.fromtimestamp(_HOST_NOW.get() / 1000, tz=UTC)
        return f"plan-{stamp:%Y%m%dT%H%M%S}-{os.urandom(6).hex()}.md"

    patch(Approvals, "submit", submit)
    patch(artifacts, "_unique_name", unique_name)


# R7.6 / R7.3: shell/setDefault persists the default, and a session without a shell of its
# own runs its commands in the default shell. Bug: Bash reads the default through a cache
# filled the first time a command needs it; shell/setDefault writes the setting (and
# shell/list reports it) but does not refresh the cache, so after a command already ran in
# this process, a changed default is not used until a restart.
@variant("vf-default-shell-cached")
def default_shell_cached() -> None:
    from reference_host import shells
    from reference_host.host import DEFAULT_SHELL_KEY, Host

    original = Host.default_shell_id
    cache: weakref.WeakKeyDictionary[Host, str | None] = weakref.WeakKeyDictionary()

    async def default_shell_id(self: Host) -> str | None:
        if self not in cache:
            cache[self] = await original(self)
        return cache[self]

    async def shell_list(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "shells": [shell.to_wire() for shell in shells.catalog()],
            "defaultShellId": await original(self),
        }

    async def set_default(self: Host, params: dict[str, Any]) -> dict[str, Any]:
        shell = shells.find(params["shellId"])
        if shell is None:
            from reference_host.errors import HostError

            raise HostError("SHELL_NOT_FOUND", f"no shell {params['shellId']!r}")
        await self.storage.set_setting(DEFAULT_SHELL_KEY, shell.shell_id)
        return {"defaultShellId": shell.shell_id}

    patch(Host, "default_shell_id", default_shell_id)
    patch(Host, "shell_list", shell_list)
    patch(Host, "shell_set_default", set_default)


# P29: a task/update that changes runAt replaces the earlier time; the task runs at the new
# time only. Bug: the update re-arms the timer in an if/elif: when `enabled` is given, it
# re-arms from the stored row (the old runAt) and the `runAt` branch is skipped. An update
# giving both `enabled: true` and a new `runAt` answers and stores the new time but the task
# runs at the old one (and not at the new one). Either field alone works.
@variant("vf-task-update-enabled-keeps-old-runat")
def task_update_enabled_keeps_old_runat() -> None:
    from reference_host.tasks import Tasks

    original = Tasks.update

    async def update(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        before = await self.require(params["taskId"])
        result = await original(self, params)
        if "enabled" in params and "runAt" in params:
            self._arm(before["id"], before["run_at"] if params["enabled"] else None)
        return result

    patch(Tasks, "update", update)


CASES = [
    BrokenCase(
        "vf-reject-resets-permission-mode",
        "submit_plan",
        "rejecting_a_plan_leaves_the_sessions_permission and accept",
        "R3.6",
        "the session's permission mode changed from accept-edits to ask",
    ),
    BrokenCase(
        "vf-approve-keeps-wider-mode",
        "execution",
        "a_plan_approved_with_ask_asks_before",
        "P7",
        "Bash ran without asking for permission",
    ),
    BrokenCase(
        "vf-plan-bash-unasked-under-accept-edits",
        "plan_tools",
        "a_command_the_model_runs_while_planning and accept",
        "P7",
        "Bash ran without asking for permission",
    ),
    BrokenCase(
        "vf-created-plan-offered-agent-tools",
        "plan_tools",
        "the_model_is_offered_exactly_the_planning",
        "R1.4",
        "the host offered",
    ),
    BrokenCase(
        "vf-bash-cd-double-quoted-root",
        "shell",
        "a_command_runs_in_the_default_shell and POSIX",
        "R7.3",
        "no command/output notification matched before 10.0 s passed",
        slow=True,
    ),
    BrokenCase(
        "vf-audit-cwd-resolved",
        "shell",
        "a_command_runs_in_the_projects_path",
        "C5",
        "the audit row differs from the command",
    ),
    BrokenCase(
        "vf-title-slug-name-too-long",
        "artifact_integrity",
        "title_and_question_are_kept_exactly_as and script",
        "R2.6",
        "the host lists no approval for the session",
    ),
    BrokenCase(
        "vf-empty-plan-artifact-null",
        "artifact_integrity",
        "markdown_is_stored_byte_for_byte_sample and empty",
        "C1",
        "reports the artifact None",
    ),
    BrokenCase(
        "vf-empty-question-defaulted",
        "artifact_integrity",
        "title_and_question_are_kept_exactly_as and nothing",
        "R2.6",
        "the plan_approvals row holds title ''",
    ),
    BrokenCase(
        "vf-title-trimmed",
        "artifact_integrity",
        "title_and_question_are_kept_exactly_as and breaks",
        "R2.6",
        "the plan_approvals row holds title 'Add a cache'",
    ),
    BrokenCase(
        "vf-artifact-name-host-clock-stamp",
        "submit_plan",
        "a_plan_is_taken_when_the_host",
        "R2.1",
        "the Plan turn ended",
    ),
    BrokenCase(
        "vf-default-shell-cached",
        "shell",
        "a_session_without_a_shell_of_its",
        "R7.3",
        "the command was announced in dash, not in bash",
    ),
    BrokenCase(
        "vf-task-update-enabled-keeps-old-runat",
        "scheduled_plan",
        "a_task_moved_and_switched_on_in",
        "P29",
        "the host sent turn/started for the task at the time it was moved from",
    ),
]
