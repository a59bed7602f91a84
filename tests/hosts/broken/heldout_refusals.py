"""Broken hosts: a sixth held-out set (the migration, refusals to start, framing, ids,
notifications), written from the contract alone.

Three of these eight went uncaught at first; all three are caught now (the rejection's
announcement compared with approval/get, a frame padded with characters of several bytes,
and the expiry's place before the answer to the clock move that made it due).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any, BinaryIO

from hosts.registry import BrokenCase, patch, rewrite_notifications, variant
from reference_host import framing, migration, server
from reference_host.approvals import Approvals
from reference_host.rpc import Dispatcher

# -- v8 -> v10 migration (P16) --------------------------------------------------------------


@variant("legacy-changes-requested-undecided")
def _legacy_changes_requested_undecided() -> None:
    # Only rows that v8 marked approved or rejected were "decided"; a changes_requested
    # row loses its decided_at (P16: "decidedAt is kept (none for a pending row)").
    old = "CASE status WHEN 'pending' THEN NULL ELSE decided_at END"
    new = "CASE WHEN status IN ('approved', 'rejected') THEN decided_at ELSE NULL END"
    assert old in migration._COPY_LEGACY_APPROVALS
    patch(migration, "_COPY_LEGACY_APPROVALS", migration._COPY_LEGACY_APPROVALS.replace(old, new))


@variant("legacy-nonstring-title-empty")
def _legacy_nonstring_title_empty() -> None:
    # Only a string title is read; a number or object title becomes "" instead of its JSON
    # text (v8.sql: "a value that is not a string is taken as its JSON text").
    old = "coalesce(CAST(json_extract(proposal_json, '$.title') AS TEXT), '')"
    new = (
        "CASE WHEN json_type(proposal_json, '$.title') = 'text'"
        " THEN json_extract(proposal_json, '$.title') ELSE '' END"
    )
    assert old in migration._COPY_LEGACY_APPROVALS
    patch(migration, "_COPY_LEGACY_APPROVALS", migration._COPY_LEGACY_APPROVALS.replace(old, new))


# -- refusing to start (P18) ----------------------------------------------------------------


@variant("migration-failed-internal-number")
def _migration_failed_internal_number() -> None:
    # A failed migration is reported with the generic internal-error number, data.code right.
    original = server._startup_error

    def startup_error(error: Any) -> dict[str, Any]:
        message = original(error)
        if error.code == "MIGRATION_FAILED":
            message["error"]["code"] = -32603
        return message

    patch(server, "_startup_error", startup_error)


@variant("in-use-refusal-twice")
def _in_use_refusal_twice() -> None:
    # DATA_DIR_IN_USE is written once by the lock layer and once more by the entry point.
    original = server._refuse

    def refuse(error: Any, stdout: BinaryIO) -> int:
        if error.code == "DATA_DIR_IN_USE":
            original(error, stdout)
        return original(error, stdout)

    patch(server, "_refuse", refuse)


# -- framing (P2) and ids (P1) --------------------------------------------------------------


@variant("frame-limit-in-characters")
def _frame_limit_in_characters() -> None:
    # The limit is applied to the decoded line's characters, not its bytes: a line of
    # multi-byte characters longer than maxFrameBytes bytes is served.
    def read_frames(
        stream: BinaryIO, max_bytes: int = framing.DEFAULT_MAX_FRAME_BYTES
    ) -> Iterator[Any]:
        for frame in framing.read_frames(stream, 4 * max_bytes + 4):
            if (
                isinstance(frame, framing.OversizedFrame)
                or len(frame.decode("utf-8", "replace")) > max_bytes
            ):
                yield framing.OversizedFrame(max_bytes)
            else:
                yield frame

    patch(server, "read_frames", read_frames)


@variant("wide-ids-as-strings")
def _wide_ids_as_strings() -> None:
    # Ids are kept in a 32-bit slot; an integer id outside it is echoed as its decimal text.
    original = Dispatcher.__init__

    def init(self: Dispatcher, send: Any) -> None:
        def sending(message: dict[str, Any]) -> None:
            rid = message.get("id")
            wide = (
                isinstance(rid, int) and not isinstance(rid, bool) and not -(2**31) <= rid < 2**31
            )
            if "method" not in message and wide:
                message = {**message, "id": str(rid)}
            send(message)

        original(self, sending)

    patch(Dispatcher, "__init__", init)


# -- notifications ---------------------------------------------------------------------------


@variant("reject-notice-without-decided-at")
def _reject_notice_without_decided_at() -> None:
    # The approval/updated announcing a reject is built before the decision time is set.
    def rewrite(method: str, params: dict[str, Any]) -> dict[str, Any]:
        approval = params.get("approval")
        if method == "approval/updated" and approval and approval["status"] == "rejected":
            return {**params, "approval": {**approval, "decidedAt": None}}
        return params

    rewrite_notifications(rewrite)


@variant("expiry-notice-after-clock-answer")
def _expiry_notice_after_clock_answer() -> None:
    # The expiry's approval/updated goes through a notification queue flushed a moment
    # later, so it arrives after the response of the clock call that made it due.
    original = Approvals.expire

    async def expire(self: Approvals, approval_id: str) -> None:
        host = self.host
        notify = host.notify
        held: list[tuple[str, dict[str, Any]]] = []

        def holding(method: str, params: dict[str, Any]) -> None:
            if method == "approval/updated":
                held.append((method, params))
            else:
                notify(method, params)

        host.notify = holding
        try:
            await original(self, approval_id)
        finally:
            host.notify = notify
        loop = asyncio.get_running_loop()
        for method, params in held:
            loop.call_later(0.3, notify, method, params)

    patch(Approvals, "expire", expire)


CASES = [
    BrokenCase(
        "legacy-changes-requested-undecided",
        "migration",
        "v8_approval_that_was and changes_requested",
        "P16",
        "the legacy approval reads",
    ),
    BrokenCase(
        "legacy-nonstring-title-empty",
        "migration",
        "v8_approval_that_was and approved",
        "P16",
        "the legacy approval reads title ''",
    ),
    BrokenCase(
        "migration-failed-internal-number",
        "migration",
        "migration_that_fails",
        "P5",
        "broke the protocol v9 contract",
    ),
    BrokenCase(
        "in-use-refusal-twice",
        "restart_interruption",
        "second_host_on_the_same_data_directory",
        "P17",
        "['DATA_DIR_IN_USE', 'DATA_DIR_IN_USE']",
    ),
    BrokenCase(
        "wide-ids-as-strings",
        "protocol_errors",
        "identifier_the_client_chose and largest",
        "P1",
        "no answer carries the identifier 9007199254740991",
    ),
    BrokenCase(
        "reject-notice-without-decided-at",
        "approval",
        "rejecting_keeps_the_session_in_plan",
        "R7.2",
        "the rejection was announced with {'decidedAt': None}",
    ),
    BrokenCase(
        "frame-limit-in-characters",
        "protocol_errors",
        "one_byte_over_the_frame_limit and several",
        "P2",
        "expected an error response",
    ),
    BrokenCase(
        "expiry-notice-after-clock-answer",
        "deadline",
        "expires_when_the_time_is_up",
        "P32",
        "the expiry was announced after the answer to the clock move",
    ),
]
