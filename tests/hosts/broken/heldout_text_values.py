"""Broken hosts: a held-out set (text values carried through), written from the contract
alone.

Thirteen of these fourteen went uncaught at first. Eleven are caught now: the fixtures vary the
values they had held fixed (CR LF and a lone CR in a file that is read and edited, letters
of several bytes before an edit, a line holding U+2028, U+0085 and a form feed, control
characters and trailing blanks in answers and command output, SubmitPlan members in
another order, a prompt sent with JSON escapes, an empty summary, a strict base64 read). Open
(docs/reliability.md): grep-omits-long-lines and preview-without-charset-as-latin1 (the
contract does not say whether a long line may be shortened or which charset a page without
one has). task-name-trimmed is caught since the task fixture's name keeps its blanks.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from hosts.registry import BrokenCase, patch, rewrite_notifications, variant
from reference_host import approvals, commands, rpc, turns
from reference_host.approvals import Approvals
from reference_host.errors import HostError
from reference_host.jsontext import loads
from reference_host.tasks import Tasks
from reference_host.tools import browser, files
from reference_host.turns import CallOutcome, TurnRunner


def _grep_with(
    lines: Callable[[str], list[str]], shown: Callable[[str], str]
) -> Callable[..., str]:
    """The reference Grep's walk, with its own way of cutting a file into lines and of
    showing a matching line."""

    def _grep(root: Path, compiled: Any, parts: list[str] | None, budget: Any) -> str:
        out: list[str] = []
        for relative, real in files._workspace_files(root, budget):
            if parts is not None and not files._glob_match(parts, relative.split("/")):
                continue
            try:
                data = real.read_bytes()
            except OSError:
                continue
            if b"\0" in data[: files._BINARY_PROBE]:
                continue
            text = data.decode("utf-8", errors="replace")
            for number, line in enumerate(lines(text), start=1):
                if not files._search(compiled, line, budget):
                    continue
                if len(out) == files.GREP_MAX_MATCHES:
                    out.append(f"[results capped at {files.GREP_MAX_MATCHES} matches]")
                    return "\n".join(out)
                out.append(f"{relative}:{number}:{shown(line)}")
        return "\n".join(out) if out else files.NO_MATCHES

    return _grep


def _reference_lines(text: str) -> list[str]:
    return [line.removesuffix("\r") for line in text.split("\n")]


# P10 (Read gives the file's text): Read opens the file in text mode with universal
# newlines (Python's read_text), so a CR LF or a lone CR reaches the model as a plain LF.
@variant("read-universal-newlines")
def _read_universal_newlines() -> None:
    def _read(root: Path, relative: str, offset: int | None, limit: int | None) -> str:
        path = files.resolve_inside(root, relative, must_exist=True)
        files._require_regular(path, relative)
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise files._io_error(relative, exc) from exc
        if offset is None and limit is None:
            return text
        start = (offset or 1) - 1
        lines = files._split_lines(text)
        end = len(lines) if limit is None else start + limit
        return "".join(lines[start:end])

    patch(files.Read, "_read", staticmethod(_read))


# P10 (Grep matches each line on its own, without its newline): the host cuts files into
# lines with str.splitlines(), so U+2028, U+2029, U+0085, a form feed or a lone CR also end
# a line: a match across one is missed, `$` anchors before it and the line is shown cut.
@variant("grep-splits-unicode-line-breaks")
def _grep_splits_unicode_line_breaks() -> None:
    patch(files.Grep, "_grep", staticmethod(_grep_with(str.splitlines, lambda line: line)))


# P10 (Grep gives each matching file's path with the matching line): like some search
# tools, the host leaves out the text of a matching line longer than 1000 characters and
# shows a placeholder instead (a minified file, a very long single line).
@variant("grep-omits-long-lines")
def _grep_omits_long_lines() -> None:
    def shown(line: str) -> str:
        return line if len(line) <= 1000 else f"[matching line of {len(line)} characters omitted]"

    patch(files.Grep, "_grep", staticmethod(_grep_with(_reference_lines, shown)))


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


# P31 (turn/text texts, joined in order, are the model's full answer): the host strips
# C0 control characters (ESC, NUL, BEL...; tab, LF and CR kept) from streamed text so that
# a terminal client is safe; the transcript and the provider history keep the full text.
@variant("text-control-chars-stripped")
def _text_control_chars_stripped() -> None:
    def rewrite(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        if method != "turn/text":
            return params
        text = _CONTROL.sub("", params["text"])
        return {**params, "text": text} if text else None

    rewrite_notifications(rewrite)


# R7.3 / P20 (output is given to the model as the command wrote it): the tool result the
# model gets trims trailing whitespace of the output (a final newline, CR LF, spaces)
# before the status line; the streamed command/output is untouched.
@variant("tool-output-rstripped-for-model")
def _tool_output_rstripped_for_model() -> None:
    summary = commands.CommandResult.summary

    def rstripped(self: commands.CommandResult) -> str:
        return summary(replace(self, output=self.output.rstrip()))

    patch(commands.CommandResult, "summary", rstripped)


# R2.6 (title stored as submitted) / R4.3: a title is shown on one line, so the host folds
# every CR LF, CR or LF in the SubmitPlan title into a space, in the approval it announces,
# answers and stores alike (the question is kept as given).
@variant("title-newlines-collapsed")
def _title_newlines_collapsed() -> None:
    require_text = approvals._require_text

    def _require_text(args: dict[str, Any], field: str) -> str:
        value = require_text(args, field)
        return re.sub(r"\r\n|\r|\n", " ", value) if field == "title" else value

    patch(approvals, "_require_text", _require_text)


# R1.8 / R2.6 (SubmitPlan takes title, markdown and question as separate fields): the host
# reads the three values in the order the model wrote them (as title, markdown, question),
# so arguments whose keys come in another order mix up title, plan and question.
@variant("submit-plan-fields-by-position")
def _submit_plan_fields_by_position() -> None:
    submit = Approvals.submit

    async def by_position(self: Approvals, session: Any, turn_id: str, args: dict[str, Any]) -> Any:
        title, markdown, question = list(args.values())
        positional = {"title": title, "markdown": markdown, "question": question}
        return await submit(self, session, turn_id, positional)

    patch(Approvals, "submit", by_position)


# P10 (BrowserPreview gives the page's text): a page served without a charset in its
# Content-Type is decoded as ISO-8859-1, the old HTTP/1.1 default for text/*, so the
# UTF-8 text of such a page reaches the model as mojibake (é becomes Ã©).
@variant("preview-without-charset-as-latin1")
def _preview_without_charset_as_latin1() -> None:
    capped_text = browser._capped_text

    async def _capped_text(response: Any) -> str:
        if response.charset_encoding is not None:
            return await capped_text(response)
        data = bytearray()
        async for chunk in response.aiter_bytes():
            data += chunk
            if len(data) > browser.MAX_BODY_BYTES:
                break
        text = bytes(data[: browser.MAX_BODY_BYTES]).decode("iso-8859-1")
        if len(data) > browser.MAX_BODY_BYTES:
            text += f"\n\n[truncated: only the first {browser.MAX_BODY_BYTES} bytes are shown]"
        return text

    patch(browser, "_capped_text", _capped_text)


_ESCAPED_PAIR = re.compile(r"(?<!\\)(\\u[dD][89abAB][0-9a-fA-F]{2})(\\u[dD][c-fC-F][0-9a-fA-F]{2})")


# P4 (only a string holding a lone surrogate is INVALID_PARAMS): the host's JSON reader
# decodes every \uXXXX escape on its own, so an astral character a client sends escaped as
# a surrogate pair (\ud83d\ude00, what ensure_ascii writers send) becomes two lone
# surrogates, and the request is refused with INVALID_PARAMS.
@variant("escaped-surrogate-pairs-refused")
def _escaped_surrogate_pairs_refused() -> None:
    def split_pairs(text: str) -> Any:
        return loads(_ESCAPED_PAIR.sub(r"\1\\u200b\2", text))

    patch(rpc, "loads", split_pairs)


# P10 (Edit: the file holds exactly the edited text, every other byte as it was): to keep
# the other bytes untouched, the host splices the raw bytes, but at the character offset
# it found old_string at in the decoded text: after any non-ASCII character before the
# match, the replacement lands too early and cuts other text.
@variant("edit-char-offsets-on-bytes")
def _edit_char_offsets_on_bytes() -> None:
    edit = files.Edit._edit

    def _edit(root: Path, relative: str, old: str, new: str, replace_all: bool) -> str:
        if replace_all:
            return edit(root, relative, old, new, replace_all)
        path = files.resolve_inside(root, relative, must_exist=True)
        files._require_regular(path, relative)
        try:
            raw = path.read_bytes()
            text = raw.decode("utf-8")
        except OSError as exc:
            raise files._io_error(relative, exc) from exc
        except UnicodeDecodeError as exc:
            raise HostError("INVALID_TOOL_INPUT", f"{relative} is not valid UTF-8") from exc
        if text.count(old) != 1:
            return edit(root, relative, old, new, replace_all)
        at = text.find(old)
        spliced = raw[:at] + new.encode("utf-8") + raw[at + len(old.encode("utf-8")) :]
        files._write_exact(root, relative, spliced)
        return f"Replaced 1 occurrence in {relative}"

    patch(files.Edit, "_edit", staticmethod(_edit))


# P10 (new_context replaces the earlier conversation with its summary; the schema allows an
# empty summary): the host checks the summary for truthiness, so new_context with "" is
# answered ok but resets nothing: the next request still carries the earlier turns.
@variant("empty-summary-no-reset")
def _empty_summary_no_reset() -> None:
    dispatch = TurnRunner._dispatch

    async def _dispatch(
        self: TurnRunner, session: Any, turn_id: str, name: str, args: Any
    ) -> CallOutcome:
        if name == "new_context" and not args.get("summary"):
            return CallOutcome("ok", "Nothing to carry over; the context stays as it is.")
        return await dispatch(self, session, turn_id, name, args)

    patch(TurnRunner, "_dispatch", _dispatch)


# R3.2 (artifact/read returns the file's exact bytes, base64-encoded): the host encodes with
# MIME base64 (Python's base64.encodebytes), which breaks the text into lines of 76
# characters, each ending with a newline.
@variant("artifact-base64-with-line-breaks")
def _artifact_base64_with_line_breaks() -> None:
    read = Approvals.read_artifact

    async def read_artifact(self: Approvals, row: Any) -> dict[str, Any]:
        result = await read(self, row)
        content = base64.b64decode(result["contentBase64"])
        return {**result, "contentBase64": base64.encodebytes(content).decode("ascii")}

    patch(Approvals, "read_artifact", read_artifact)


# P29 (task/create and task/update answer, list and store every field as the user gave
# it): the host trims leading and trailing whitespace from a task's name, as form fields
# are often trimmed, in the answer, in task/list and in the scheduled_tasks row.
@variant("task-name-trimmed")
def _task_name_trimmed() -> None:
    create, update = Tasks.create, Tasks.update

    def trimmed(params: dict[str, Any]) -> dict[str, Any]:
        return {**params, "name": params["name"].strip()} if "name" in params else params

    async def _create(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        return await create(self, trimmed(params))

    async def _update(self: Tasks, params: dict[str, Any]) -> dict[str, Any]:
        return await update(self, trimmed(params))

    patch(Tasks, "create", _create)
    patch(Tasks, "update", _update)


# R1.3 (the conversation holds the model's own words; session/transcript and later
# requests carry them): the host trims the assistant's text before it keeps it, so leading
# or trailing whitespace (a final newline, an indented code block's first line) is lost
# from the transcript and from the history the model is shown; turn/text is untouched.
@variant("assistant-text-trimmed-in-history")
def _assistant_text_trimmed_in_history() -> None:
    assistant_message = turns._assistant_message

    def _assistant_message(reply: Any) -> dict[str, Any]:
        return assistant_message(replace(reply, text=reply.text.strip()))

    patch(turns, "_assistant_message", _assistant_message)


CASES = [
    BrokenCase(
        "title-newlines-collapsed",
        "artifact_integrity",
        "kept_exactly_as_submitted",
        "R2.6",
        "the plan_approvals row holds title",
    ),
    BrokenCase(
        "read-universal-newlines",
        "plan_tools",
        "reading_a_file_gives_the_model_its_line",
        "P10",
        "after its Read call the model was not given the line",
    ),
    BrokenCase(
        "grep-splits-unicode-line-breaks",
        "plan_tools",
        "matches_line_by_line",
        "P10",
        "after its Grep call the model was not given",
    ),
    BrokenCase(
        "text-control-chars-stripped",
        "sessions",
        "the_models_answer_reaches_the_user_exactly_as",
        "P31",
        "the turn/text notifications, joined, read",
    ),
    BrokenCase(
        "tool-output-rstripped-for-model",
        "shell",
        "carriage_returns_in_the_output_arrive_as_the",
        "P10",
        "the command printed",
    ),
    BrokenCase(
        "submit-plan-fields-by-position",
        "artifact_integrity",
        "title_and_question_stay_out_of_the_file",
        "R2.6",
        "the plan_approvals row holds title",
    ),
    BrokenCase(
        "escaped-surrogate-pairs-refused",
        "sessions",
        "a_prompt_whose_characters_come_escaped_reaches_the",
        "P31",
        "the prompt was refused",
    ),
    BrokenCase(
        "edit-char-offsets-on-bytes",
        "plan_tools",
        "editing_a_file_keeps_every_byte_the_edit",
        "P10",
        "notes.txt holds b",
    ),
    BrokenCase(
        "empty-summary-no-reset",
        "plan_tools",
        "a_new_context_with_an_empty_summary_still",
        "P10",
        "after the new context the model was still given",
    ),
    BrokenCase(
        "artifact-base64-with-line-breaks",
        "artifact_integrity",
        "after_a_revision_opening_the_earlier_plan_returns",
        "R3.2",
        "contentBase64 is not standard base64",
    ),
    BrokenCase(
        "assistant-text-trimmed-in-history",
        "sessions",
        "a_later_turn_gives_the_model_its_earlier",
        "R1.3",
        "did not give the model its earlier answer",
    ),
    BrokenCase(
        "task-name-trimmed",
        "scheduled_plan",
        "a_new_task_is_reported_as_it_was_created",
        "P29",
        "the host's answer reports other values",
    ),
]
