"""Steps that script the model provider (the harness plays the model)."""

from __future__ import annotations

from typing import Any

from pytest_bdd import given, parsers

from conformance.mock_provider import ScriptedToolCall, TextReply, ToolCallsReply
from conformance.world import SubmittedPlan, World

DEFAULT_QUESTION = "Shall I go ahead?"

MARKDOWN_SAMPLES: dict[str, str] = {
    "CRLF line endings": "# Plan\r\n\r\n1. First step\r\n2. Second step\r\n",
    "lone CR line endings": "# Plan\r1. First step\r2. Second step\r",
    "mixed line endings": "# Plan\n1. One\r\n2. Two\r3. Three",
    "byte order mark": "\ufeff# Plan\n\nStarts with a byte order mark.\n",
    "NUL character": "# Plan\n\nBefore\x00after.\n",
    "characters outside the BMP": (
        "# Plan \U0001f680\n\nMath: \U0001d538\U0001d539 and \U00013000.\n"
    ),
    "trailing spaces": "# Plan   \n\nLine with trailing spaces   \n   \n",
    "no final newline": "# Plan\n\nNo newline at the end",
    "empty": "",
    "1 MiB": "# Large plan\n" + ("0123456789abcdef" * 64 + "\n") * 1024,
}


def default_markdown(title: str) -> str:
    """The plan body used when a scenario does not care about the exact text."""
    return f"# {title}\n\n1. Read the code.\n2. Make the change.\n"


def submit_plan_call(
    title: str, markdown: str, question: str = DEFAULT_QUESTION
) -> ScriptedToolCall:
    """A SubmitPlan tool call with exactly the three published fields."""
    return ScriptedToolCall(
        "SubmitPlan", {"title": title, "markdown": markdown, "question": question}
    )


def script_plan(world: World, title: str, markdown: str, question: str = DEFAULT_QUESTION) -> None:
    """Script one SubmitPlan answer and remember what was submitted."""
    world.provider.enqueue(ToolCallsReply((submit_plan_call(title, markdown, question),)))
    world.plan.submitted.append(SubmittedPlan(title, markdown, question))


@given(parsers.parse('the model will submit a plan titled "{title}"'))
def model_submits(world: World, title: str) -> None:
    script_plan(world, title, default_markdown(title))


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


@given(parsers.parse("the model will submit a plan with the input {arguments}"))
def model_submits_raw(world: World, arguments: str) -> None:
    world.provider.enqueue(ToolCallsReply((ScriptedToolCall("SubmitPlan", arguments),)))


@given(parsers.re(r"the model will submit a plan together with an? (?P<tool>\w+) call"))
def model_submits_with_other(world: World, tool: str) -> None:
    other = ScriptedToolCall(tool, _default_arguments(tool))
    plan = submit_plan_call("Mixed batch", default_markdown("Mixed batch"))
    world.provider.enqueue(ToolCallsReply((other, plan)))


@given(parsers.re(r'the model will call (?P<tool>\w+) on "(?P<path>[^"]+)"'))
def model_calls_on_path(world: World, tool: str, path: str) -> None:
    world.provider.enqueue(
        ToolCallsReply((ScriptedToolCall(tool, _default_arguments(tool, path)),))
    )


@given(parsers.re(r"the model will try to (?P<tool>write|edit) the plan artifact"))
def model_tampers(world: World, tool: str) -> None:
    approvals = world.rpc.request(
        "approval/list", {"sessionId": world.sessions["main"]["sessionId"]}
    )["approvals"]
    assert approvals, "no plan artifact exists yet"
    path = approvals[-1]["artifact"]["path"]
    name = tool.capitalize()
    arguments = _default_arguments(name, path)
    if name == "Edit":
        first_line = (world.workspace / path).read_text(encoding="utf-8").splitlines()[0]
        arguments = {"path": path, "old_string": first_line, "new_string": "# Tampered"}
    world.provider.enqueue(ToolCallsReply((ScriptedToolCall(name, arguments),)))


@given(parsers.re(r"the model will call (?P<tool>\w+)"))
def model_calls(world: World, tool: str) -> None:
    world.provider.enqueue(ToolCallsReply((ScriptedToolCall(tool, _default_arguments(tool)),)))


@given(parsers.parse('the model will run the command "{command}"'))
def model_runs_command(world: World, command: str) -> None:
    world.provider.enqueue(ToolCallsReply((ScriptedToolCall("Bash", {"command": command}),)))


@given(parsers.parse('the model will answer "{text}"'))
def model_answers(world: World, text: str) -> None:
    world.provider.enqueue(TextReply(text))


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
