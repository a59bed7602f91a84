"""Steps that script the model provider (the harness plays the model).

The harness scripts exactly the replies a host legitimately needs and no fallback: after a
tool call the host gives the model the result and asks again, so every scripted call that
does not end the turn is followed by the model's closing answer. A host that asks once
more than that finds no scripted reply, and the scenario fails.
"""

from __future__ import annotations

import itertools
import json
from typing import Any, Final

from pytest_bdd import given, parsers

from conformance.mock_provider import ScriptedToolCall, TextReply, ToolCallsReply
from conformance.steps.requests import granted
from conformance.world import ScriptedCall, SubmittedPlan, World, need

DEFAULT_QUESTION = "Shall I go ahead?"
CLOSING_ANSWER = "That is all I needed."

MARKDOWN_SAMPLES: dict[str, str] = {
    "CRLF line endings": "# Plan\r\n\r\n1. First step\r\n2. Second step\r\n",
    "lone CR line endings": "# Plan\r1. First step\r2. Second step\r",
    "mixed line endings": "# Plan\n1. One\r\n2. Two\r3. Three",
    "byte order mark": "\ufeff# Plan\n\nStarts with a byte order mark.\n",
    "NUL character": "# Plan\n\nBefore\x00after.\n",
    "characters outside the BMP": (
        "# Plan \U0001f680\n\nMath: \U0001d538\U0001d539 and \U00013000.\n"
    ),
    "decomposed accents": "# Plan\n\nCafe\u0301 and re\u0301sume\u0301.\n",
    "trailing spaces": "# Plan   \n\nLine with trailing spaces   \n   \n",
    "no final newline": "# Plan\n\nNo newline at the end",
    "empty": "",
    "1 MiB": "# Large plan\n" + ("0123456789abcdef" * 64 + "\n") * 1024,
}

_CALL_NUMBERS = itertools.count(1)


def default_markdown(title: str) -> str:
    """The plan body used when a scenario does not care about the exact text."""
    return f"# {title}\n\n1. Read the code.\n2. Make the change.\n"


def submit_plan_call(
    title: str, markdown: str, question: str = DEFAULT_QUESTION
) -> ScriptedToolCall:
    """A SubmitPlan tool call with exactly the three published fields.

    The members of a JSON object have no order: a plan whose title has an odd length
    lists them the other way round, so a host that reads them by position shows."""
    fields = {"title": title, "markdown": markdown, "question": question}
    if len(title) % 2:
        fields = dict(reversed(fields.items()))
    return ScriptedToolCall("SubmitPlan", fields)


def script_plan(world: World, title: str, markdown: str, question: str = DEFAULT_QUESTION) -> None:
    """Script one SubmitPlan answer and remember what was submitted. A plan the host
    accepts ends the turn, so nothing follows it in the script."""
    call = _tracked(world, submit_plan_call(title, markdown, question))
    world.provider.enqueue(ToolCallsReply((call,)))
    world.plan.submitted.append(SubmittedPlan(title, markdown, question))


def tool_call(world: World, tool: str, arguments: dict[str, Any] | str) -> ScriptedToolCall:
    """A call with a fresh id the checks can follow."""
    return _tracked(world, ScriptedToolCall(tool, arguments))


def script_calls(
    world: World, *calls: ScriptedToolCall, answer: str | None = CLOSING_ANSWER
) -> None:
    """One assistant message making ``calls``, then (unless ``answer`` is None) the answer
    the model gives once it has their results."""
    world.provider.enqueue(ToolCallsReply(calls))
    tracked = {c.call_id: c for c in world.script.calls}
    world.script.last_batch = [tracked[c.call_id] for c in calls if c.call_id in tracked]
    if answer is not None:
        world.provider.enqueue(TextReply(answer))


# Calls of these tools carry ids with symbols and a character beyond ASCII, as some
# providers' ids do; the others keep plain ones.
_SYMBOL_IDS: Final = frozenset({"Read", "Write", "SubmitPlan"})


def _tracked(world: World, call: ScriptedToolCall) -> ScriptedToolCall:
    number = next(_CALL_NUMBERS)
    call_id = f"call_{call.name.lower()}_{number}"
    if call.name in _SYMBOL_IDS:  # the id is the model's to choose, passed on unchanged (P9)
        call_id = f"call:{call.name}.{number}/a+b=c|\u00e9"
    world.script.calls.append(ScriptedCall(call.name, call_id, call.arguments))
    return ScriptedToolCall(call.name, call.arguments, call_id)


# -- plans --------------------------------------------------------------------------------


@given(parsers.parse('the model will submit a plan titled "{title}"'))
def model_submits(world: World, title: str) -> None:
    script_plan(world, title, default_markdown(title))


@given(parsers.parse('the model will submit a plan titled "{title}" with other steps'))
def model_submits_other_steps(world: World, title: str) -> None:
    script_plan(world, title, default_markdown(title) + "3. Check the change twice.\n")


@given(
    parsers.parse(
        'the model will submit a plan titled "{title}" asking "{question}" with this markdown:'
    )
)
def model_submits_markdown(world: World, title: str, question: str, docstring: str) -> None:
    script_plan(world, title, docstring + "\n", question)


@given(parsers.parse("the model will submit a plan whose markdown has {sample}"))
def model_submits_sample(world: World, sample: str) -> None:
    assert sample in MARKDOWN_SAMPLES, f"no markdown sample called {sample!r}"
    script_plan(world, "Sample plan", MARKDOWN_SAMPLES[sample])


# Title and question pairs a host could be tempted to tidy: each must come back as sent.
TITLE_AND_QUESTION_SAMPLES: dict[str, tuple[str, str]] = {
    "surrounding spaces": ("  Add a cache  ", " Shall I go ahead? "),
    "line breaks": ("Add a cache\n", "Shall I go ahead?\r\nOr wait?\n"),
    "tabs and runs of spaces": ("Add\ta  cache", "Shall\t\tI   go ahead?"),
    "characters outside the BMP": ("Cache \U0001f680", "Go ahead? \U0001d11e"),
    "decomposed accents": ("Cafe\u0301 menu", "Re\u0301sume\u0301 now?"),
    "nothing at all": ("", ""),
    # the quotes and signs text pasted into SQL, a shell line or a file name would break on
    "quotes and signs": ("Don't break the build", "x', 'y') -- \"$HOME\" `id`; go?"),
    # a hundred characters, three bytes each: longer than a file name may be
    "a hundred characters of another script": (
        "計画を立てる" * 17,
        "この計画で進めてもよいですか",
    ),
    # longer than a field of 255 characters
    "hundreds of characters": (
        " ".join(f"step {n} of the cache rollout;" for n in range(1, 13)),
        "Shall I go ahead with every one of these steps? " * 7,
    ),
}


@given(parsers.parse("the model will submit a plan whose title and question have {sample}"))
def model_submits_title_sample(world: World, sample: str) -> None:
    assert sample in TITLE_AND_QUESTION_SAMPLES, f"no title and question called {sample!r}"
    title, question = TITLE_AND_QUESTION_SAMPLES[sample]
    script_plan(world, title, default_markdown("Sample plan"), question)


@given(parsers.parse("the model will submit a plan with the input {arguments}"))
def model_submits_raw(world: World, arguments: str) -> None:
    script_calls(world, tool_call(world, "SubmitPlan", arguments))


@given("the model will submit a plan whose fields come as one JSON text")
def model_submits_json_text(world: World) -> None:
    # a JSON string that holds the object: arguments are parsed once (P27)
    fields = json.dumps({"title": "T", "markdown": "# M", "question": "Q"})
    script_calls(world, tool_call(world, "SubmitPlan", json.dumps(fields)))


@given(parsers.parse("the model will submit two plans in one message"))
def model_submits_two(world: World) -> None:
    first = tool_call(world, "SubmitPlan", _plan_arguments("First of two"))
    second = tool_call(world, "SubmitPlan", _plan_arguments("Second of two"))
    script_calls(world, first, second)


@given(parsers.re(r"the model will submit a plan together with an? (?P<tool>\w+) call"))
def model_submits_with_other(world: World, tool: str) -> None:
    other = tool_call(world, tool, _default_arguments(tool))
    plan = tool_call(world, "SubmitPlan", _plan_arguments("Mixed batch"))
    script_calls(world, other, plan)


@given(parsers.re(r"the model will submit a plan followed by an? (?P<tool>\w+) call"))
def model_submits_before_other(world: World, tool: str) -> None:
    plan = tool_call(world, "SubmitPlan", _plan_arguments("Mixed batch"))
    other = tool_call(world, tool, _default_arguments(tool))
    script_calls(world, plan, other)


def _plan_arguments(title: str) -> dict[str, str]:
    return {"title": title, "markdown": default_markdown(title), "question": DEFAULT_QUESTION}


# -- other tools --------------------------------------------------------------------------


@given(parsers.re(r'the model will call (?P<tool>\w+) on "(?P<path>[^"]+)"'))
def model_calls_on_path(world: World, tool: str, path: str) -> None:
    script_calls(world, tool_call(world, tool, _default_arguments(tool, path)))


@given(parsers.parse('the model will call Write on "{first}" and afterwards on "{second}"'))
def model_writes_twice(world: World, first: str, second: str) -> None:
    """Two Write calls in two messages of one turn, then the closing answer."""
    script_calls(world, tool_call(world, "Write", _default_arguments("Write", first)), answer=None)
    script_calls(world, tool_call(world, "Write", _default_arguments("Write", second)))


@given(parsers.parse('the model will call Write on "{path}" twice, giving both calls one id'))
def model_writes_twice_one_id(world: World, path: str) -> None:
    """The same Write in two messages of one turn under one call id (ids repeat across
    messages), then the closing answer."""
    once = tool_call(world, "Write", _default_arguments("Write", path))
    script_calls(world, once, answer=None)
    script_calls(world, ScriptedToolCall("Write", once.arguments, once.call_id))


@given(parsers.parse('the model will call Write on "{first}" and on "{second}" in one message'))
def model_writes_twice_at_once(world: World, first: str, second: str) -> None:
    """Two Write calls in one assistant message, then the closing answer."""
    script_calls(
        world,
        tool_call(world, "Write", _default_arguments("Write", first)),
        tool_call(world, "Write", _default_arguments("Write", second)),
    )


@given(parsers.re(r"the model will try to (?P<tool>write|edit) the plan artifact"))
def model_tampers(world: World, tool: str) -> None:
    session = world.sessions["main"]["sessionId"]
    approvals = granted(world.rpc.list_approvals, session).approvals
    assert approvals, "no plan artifact exists yet"
    artifact = approvals[-1].artifact
    assert artifact is not None, f"approval {approvals[-1].approvalId} has no plan artifact"
    path = artifact.path
    name = tool.capitalize()
    arguments = _default_arguments(name, path)
    if name == "Edit":
        first_line = (world.workspace / path).read_text(encoding="utf-8").splitlines()[0]
        arguments = {"path": path, "old_string": first_line, "new_string": "# Tampered"}
    script_calls(world, tool_call(world, name, arguments))


@given(parsers.parse('the model will say "{text}" while reading "{path}", then answer'))
def model_speaks_and_reads(world: World, text: str, path: str) -> None:
    call = tool_call(world, "Read", {"path": path})
    world.provider.enqueue(ToolCallsReply((call,), text=text))
    world.provider.enqueue(TextReply(CLOSING_ANSWER))


@given(parsers.parse('the model will begin reading "{path}" and then say "{text}"'))
def model_reads_then_speaks(world: World, path: str, text: str) -> None:
    call = tool_call(world, "Read", {"path": path})
    world.provider.enqueue(ToolCallsReply((call,), text_after=text))
    world.provider.enqueue(TextReply(CLOSING_ANSWER))


@given(
    parsers.parse(
        'the model will read "{path}" in one message with a call whose input cannot be read'
    )
)
def model_reads_beside_unreadable_call(world: World, path: str) -> None:
    unreadable = tool_call(world, "Read", '{"path": ')
    script_calls(world, unreadable, tool_call(world, "Read", {"path": path}))


@given(parsers.parse("the model will call {tool} with empty arguments"))
def model_calls_without_arguments(world: World, tool: str) -> None:
    # some providers send "" for a tool without parameters (P27 leaves the reading open)
    script_calls(world, tool_call(world, tool, ""))


@given(parsers.parse("the model will call {tool} with the input {arguments}"))
def model_calls_with_input(world: World, tool: str, arguments: str) -> None:
    script_calls(world, tool_call(world, tool, arguments))


@given(parsers.re(r"the model will call (?P<tool>\w+)$"))
def model_calls(world: World, tool: str) -> None:
    script_calls(world, tool_call(world, tool, _default_arguments(tool)))


@given(parsers.parse('the model will run the command "{command}"'))
def model_runs_command(world: World, command: str) -> None:
    script_calls(world, tool_call(world, "Bash", {"command": command}))


@given("the model will run a script of several lines that writes ran.txt")
def model_runs_script(world: World) -> None:
    script = "set -e\necho ran > ran.txt\n\nif [ -f ran.txt ]; then\n  echo done\nfi\n"
    script_calls(world, tool_call(world, "Bash", {"command": script}))


@given(parsers.parse('the model will answer "{text}"'))
def model_answers(world: World, text: str) -> None:
    world.provider.enqueue(TextReply(text))


# -- the planning tools at work (P10) -----------------------------------------------------


@given(parsers.parse('the model will read "{path}" and then answer'))
def model_reads(world: World, path: str) -> None:
    script_calls(world, tool_call(world, "Read", {"path": path}))


@given(
    parsers.parse(
        'the model will read "{path}" from line {offset:d}, {limit:d} lines at most, '
        "and then answer"
    )
)
def model_reads_part(world: World, path: str, offset: int, limit: int) -> None:
    script_calls(world, tool_call(world, "Read", {"path": path, "offset": offset, "limit": limit}))


@given(parsers.parse('the model will read "{first}" and "{second}" in one message'))
def model_reads_two_at_once(world: World, first: str, second: str) -> None:
    script_calls(
        world, tool_call(world, "Read", {"path": first}), tool_call(world, "Read", {"path": second})
    )


@given(parsers.parse('the model will look for files matching "{pattern}" and then answer'))
def model_globs(world: World, pattern: str) -> None:
    script_calls(world, tool_call(world, "Glob", {"pattern": pattern}))


@given(parsers.parse('the model will search the project for "{pattern}" and then answer'))
def model_greps(world: World, pattern: str) -> None:
    script_calls(world, tool_call(world, "Grep", {"pattern": pattern}))


@given(
    parsers.parse(
        'the model will search the project for "{pattern}" in files matching "{glob}" '
        "and then answer"
    )
)
def model_greps_some_files(world: World, pattern: str, glob: str) -> None:
    script_calls(world, tool_call(world, "Grep", {"pattern": pattern, "glob": glob}))


@given("the model will preview the local page and then answer")
def model_previews(world: World) -> None:
    page = need(world.arranged.local_page, "local web page")
    script_calls(world, tool_call(world, "BrowserPreview", {"url": page.url}))


@given("the model will preview the local page by the name localhost and then answer")
def model_previews_by_name(world: World) -> None:
    page = need(world.arranged.local_page, "local web page")
    url = page.url.replace(f"//{page.host}:", "//localhost:", 1)
    script_calls(world, tool_call(world, "BrowserPreview", {"url": url}))


@given(parsers.parse('the model will run a command that prints "{text}" and then answer'))
def model_prints(world: World, text: str) -> None:
    script_calls(world, tool_call(world, "Bash", {"command": f"echo {text}"}))


@given(
    parsers.parse(
        'the model will run a command that prints "{text}" and read "{path}" in one message'
    )
)
def model_prints_and_reads(world: World, text: str, path: str) -> None:
    script_calls(
        world,
        tool_call(world, "Bash", {"command": f"echo {text}"}),
        tool_call(world, "Read", {"path": path}),
    )


@given(parsers.parse('the model will read "{path}" and then submit a plan titled "{title}"'))
def model_reads_then_submits(world: World, path: str, title: str) -> None:
    script_calls(world, tool_call(world, "Read", {"path": path}), answer=None)
    script_plan(world, title, default_markdown(title))


@given(
    parsers.parse(
        'the model will switch to planning, read "{path}" and then submit a plan titled "{title}"'
    )
)
def model_enters_plan_mode_and_reads(world: World, path: str, title: str) -> None:
    script_calls(world, tool_call(world, "EnterPlanMode", {}), answer=None)
    script_calls(world, tool_call(world, "Read", {"path": path}), answer=None)
    script_plan(world, title, default_markdown(title))


@given(
    parsers.parse('the model will start a new context summarised as "{summary}" and then answer')
)
def model_resets_context(world: World, summary: str) -> None:
    script_calls(world, tool_call(world, "new_context", {"summary": summary}))


@given(
    parsers.parse(
        'the model will start a new context summarised as "{summary}" {order} files in one '
        "message and then answer"
    )
)
def model_resets_context_beside_a_search(world: World, summary: str, order: str) -> None:
    reset = tool_call(world, "new_context", {"summary": summary})
    search = tool_call(world, "Glob", {"pattern": "*"})
    calls = {"before looking for": (reset, search), "after looking for": (search, reset)}
    assert order in calls, f"no order called {order!r}"
    script_calls(world, *calls[order])


@given(
    parsers.parse(
        'the model will read "{present}", read "{missing}" and call {unknown} in one message, '
        "then answer"
    )
)
def model_mixed_batch(world: World, present: str, missing: str, unknown: str) -> None:
    script_calls(
        world,
        tool_call(world, "Read", {"path": present}),
        tool_call(world, "Read", {"path": missing}),
        tool_call(world, unknown, {"path": present}),
    )


@given(parsers.parse('the model will edit "{path}" replacing "{old}" and then answer'))
def model_edits_text(world: World, path: str, old: str) -> None:
    arguments = {"path": path, "old_string": old, "new_string": "replaced"}
    script_calls(world, tool_call(world, "Edit", arguments))


@given(parsers.parse('the model will change "{old}" to "{new}" in "{path}" and then answer'))
def model_changes_text(world: World, old: str, new: str, path: str) -> None:
    arguments = {"path": path, "old_string": old, "new_string": new}
    script_calls(world, tool_call(world, "Edit", arguments))


@given("the model will preview that page and then answer")
def model_previews_network_page(world: World) -> None:
    page = need(world.arranged.network_page, "web page on the network address")
    script_calls(world, tool_call(world, "BrowserPreview", {"url": page.url}))


@given(parsers.parse('the model will write "{path}" and then answer'))
def model_writes(world: World, path: str) -> None:
    script_calls(world, tool_call(world, "Write", _default_arguments("Write", path)))


def _default_arguments(tool: str, path: str = "notes.txt") -> dict[str, Any]:
    arguments: dict[str, dict[str, Any]] = {
        "Write": {"path": path, "content": "written by the model\n"},
        "Edit": {"path": path, "old_string": "original", "new_string": "edited"},
        "Read": {"path": path},
        "Glob": {"pattern": "**/*"},
        "Grep": {"pattern": "original"},
        "Bash": {"command": "echo hello"},
        "new_context": {"summary": "Earlier work summarised."},
    }
    return arguments.get(tool, {"path": path})
