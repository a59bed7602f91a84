"""Allowed variations found by a fairness audit: each takes one choice the contract leaves
to the host, which a check of the suite used to refuse (docs/decisions.md)."""

from __future__ import annotations

import asyncio
from typing import Any

from hosts.registry import AllowedCase, patch, variant
from reference_host import turns
from reference_host.errors import HostError
from reference_host.host import Host


@variant("output-in-halves")
def _output_in_halves() -> None:
    # How command output is cut into command/output notifications is the host's: at most
    # 16384 characters each, numbered by seq from 0. This host sends every piece it reads
    # as two notifications (its first half, then the rest), renumbering seq.
    original = Host.__init__

    def init(self: Host, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        notify = self.notify
        next_seq: dict[str, int] = {}

        def split(method: str, params: dict[str, Any]) -> None:
            if method != "command/output":
                notify(method, params)
                return
            text = params["text"]
            cut = len(text) // 2
            pieces = [text[:cut], text[cut:]] if cut else [text]
            for piece in pieces:
                seq = next_seq.get(params["commandId"], 0)
                next_seq[params["commandId"]] = seq + 1
                notify(method, {**params, "seq": seq, "text": piece})

        self.notify = split

    patch(Host, "__init__", init, wraps=True)


def _flat(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        content = "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    text = content if isinstance(content, str) else ""
    calls = message.get("tool_calls") or []
    if calls:
        named = ", ".join(f"{c['function']['name']}({c['function']['arguments']})" for c in calls)
        text = f"{text} [called {named}]".strip()
    return f"{message.get('role')}: {text}"


def _earlier_as_note(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    if not users:
        return messages
    last = users[-1]
    earlier = [m for m in messages[:last] if m.get("role") in ("user", "assistant", "tool")]
    if not earlier:
        return messages
    kept = [m for m in messages[:last] if m.get("role") not in ("user", "assistant", "tool")]
    note = {
        "role": "system",
        "content": "The conversation so far:\n" + "\n".join(_flat(m) for m in earlier),
    }
    return [*kept, note, *messages[last:]]


@variant("history-as-note")
def _history_as_note() -> None:
    # The conversation of earlier turns reaches the model as one system message holding
    # its text ("user: ...", "assistant: ..."), followed by the current turn as it is: the
    # prompt stays the last user message, exactly as given, and every request stays valid
    # Chat Completions. The model is shown the whole conversation (R1.3, R4.7), in a
    # form the contract does not fix.
    from hosts.registry import rewrite_provider_messages

    rewrite_provider_messages(_earlier_as_note)


@variant("late-approval-announcement")
def _late_approval_announcement() -> None:
    # The approval/updated that announces a new plan is sent half a second after the host
    # stored it (an outbox of its own), so it may come after the Plan turn's turn/ended
    # and after answers to later reads. The contract gives approval/updated no order with
    # turn/ended or with the responses of requests that change nothing ("Ordering"). A
    # later announcement of the same approval (a decision, whose answer must come after
    # it) sends the held one first, then itself.
    original = Host.__init__

    def init(self: Host, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        notify = self.notify
        held: dict[str, list[dict[str, Any]]] = {}

        def outbox(method: str, params: dict[str, Any]) -> None:
            if method == "approval/updated":
                approval_id = params["approval"]["approvalId"]
                for note in held.pop(approval_id, []):
                    notify(method, note)
                if params["approval"]["status"] == "pending":
                    held[approval_id] = [params]

                    def flush() -> None:
                        for note in held.pop(approval_id, []):
                            notify(method, note)

                    asyncio.get_running_loop().call_later(0.5, flush)
                    return
            notify(method, params)

        self.notify = outbox

    patch(Host, "__init__", init, wraps=True)


def _walk(root: Any, relative: str) -> Any:
    """Where ``relative`` leads the way the kernel walks a path: a ".." after a folder that
    does not exist leads nowhere (ENOENT). None then."""
    from pathlib import Path

    place = Path(root).resolve()
    for part in Path(relative).parts:
        if part in ("", "."):
            continue
        if part == "..":
            if not place.is_dir():
                return None
            place = place.parent
            continue
        place = place / part
        if place.exists() or place.is_symlink():
            place = place.resolve()
    return place


@variant("kernel-path-walk")
def _kernel_path_walk() -> None:
    # Paths are judged on where they really lead, walked as the kernel walks them: in
    # "src/../.pi/plan/x.md" the ".." of a folder "src" that does not exist leads nowhere,
    # so such a Write fails (TOOL_FAILED, "No such file or directory") and writes nothing,
    # as open(2) would. A path that does lead into the plan folder is TOOL_DENIED (P12).
    original = turns._refuse_plan_folder

    def refuse(root: Any, path: str) -> None:
        if ".." in path.replace("\\", "/").split("/") and _walk(root, path) is None:
            raise HostError("TOOL_FAILED", f"{path}: No such file or directory")
        original(root, path)

    patch(turns, "_refuse_plan_folder", refuse)


@variant("tiny-output-cap")
def _tiny_output_cap() -> None:
    # maxCommandOutputBytes is the host's to choose and announce; the schema's minimum is 1.
    from reference_host import commands
    from reference_host import host as host_module

    patch(commands, "OUTPUT_CAP_BYTES", 16)
    patch(host_module, "OUTPUT_CAP_BYTES", 16)


@variant("approval-ties-newest-first")
def _approval_ties_newest_first() -> None:
    # approval/list is "oldest first" by createdAt. Under the frozen conformance clock two
    # plans of one session are often created at the same millisecond; this host keeps its
    # approvals newest first and stable-sorts them by createdAt, so approvals created at
    # the same instant stay newest first among themselves.
    from reference_host.storage import Storage

    original = Storage.list_approvals

    async def list_approvals(self: Storage, session_id: str) -> Any:
        rows = list(reversed(await original(self, session_id)))
        return sorted(rows, key=lambda row: row.created_at)

    patch(Storage, "list_approvals", list_approvals)


CASES = [
    AllowedCase(
        "output-in-halves",
        "shell,restart_interruption",
        why="how command output is cut into command/output notifications is the host's (P20)",
    ),
    AllowedCase(
        "history-as-note",
        "sessions,plan_tools",
        why="earlier turns may reach the model in messages of any role and shape (R1.3)",
    ),
    AllowedCase(
        "late-approval-announcement",
        "approval,submit_plan,artifact_integrity",
        why="approval/updated has no fixed order with turn/ended or other answers",
    ),
    AllowedCase(
        "kernel-path-walk",
        "artifact_integrity",
        "cannot_write_into_the_plan_folder",
        why="a path is judged by where it really leads, walked as the kernel walks it (P12)",
    ),
    AllowedCase(
        "tiny-output-cap",
        "shell,plan_tools",
        why="the output cap is the host's to announce; checks needing more are unverified",
        alone="its cap leaves every check that needs more output unverified",
    ),
    AllowedCase(
        "approval-ties-newest-first",
        "approval,submit_plan",
        why="approval/list fixes no order among approvals created at the same instant",
    ),
]
