"""Tests of plan gating (§1): the tools offered per mode and the host's own refusal."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reference_host.errors import HostError
from reference_host.turns import _gate, answered_only, offered_tools

PLAN_TOOLS = [
    "Read",
    "Glob",
    "Grep",
    "BrowserPreview",
    "Bash",
    "EnterPlanMode",
    "SubmitPlan",
    "new_context",
]
MODES = ("plan", "agent")
ALL_OFFERED = sorted({spec.name for mode in MODES for spec in offered_tools(mode)})


def names(mode: str) -> list[str]:
    return [spec.name for spec in offered_tools(mode)]


def gate_code(mode: str, name: str) -> str | None:
    refusal = _gate(mode, name)
    if refusal is None:
        return None
    assert isinstance(refusal, HostError)
    assert refusal.message
    return refusal.code


# -- offered tools ---------------------------------------------------------------------------


def test_plan_offers_exactly_the_plan_tools() -> None:
    offered = names("plan")
    assert sorted(offered) == sorted(PLAN_TOOLS)
    assert len(offered) == len(set(offered))


def test_agent_offers_no_submit_plan_and_no_exit_plan_mode() -> None:
    offered = names("agent")
    assert "SubmitPlan" not in offered
    assert "ExitPlanMode" not in offered
    assert len(offered) == len(set(offered))


def test_agent_offers_the_edit_tools_and_the_plan_tools_except_submit() -> None:
    offered = set(names("agent"))
    assert {"Write", "Edit"} <= offered
    assert set(PLAN_TOOLS) - {"SubmitPlan"} <= offered


@pytest.mark.parametrize("mode", MODES)
def test_offered_specs_are_well_formed(mode: str) -> None:
    for spec in offered_tools(mode):
        assert spec.description
        assert spec.parameters["type"] == "object"
        wire = spec.to_wire()
        assert wire["type"] == "function"
        assert wire["function"]["name"] == spec.name


def test_submit_plan_schema_is_exactly_title_markdown_question() -> None:
    (spec,) = [spec for spec in offered_tools("plan") if spec.name == "SubmitPlan"]
    assert set(spec.parameters["properties"]) == {"title", "markdown", "question"}
    assert sorted(spec.parameters["required"]) == ["markdown", "question", "title"]
    assert spec.parameters["additionalProperties"] is False


# -- the gate --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["Write", "Edit"])
def test_edit_tools_are_denied_in_plan(name: str) -> None:
    assert gate_code("plan", name) == "TOOL_DENIED"
    assert gate_code("agent", name) is None


@pytest.mark.parametrize("name", ["mcp__x", "plugin__x", "mcp__server__tool", "plugin__"])
def test_plugin_tools_are_denied_in_plan_and_unknown_in_agent(name: str) -> None:
    assert gate_code("plan", name) == "TOOL_DENIED"
    assert gate_code("agent", name) == "UNKNOWN_TOOL"


@pytest.mark.parametrize(
    "name", ["Nope", "ExitPlanMode", "CompactContext", "read", "", "Bash ", "submitplan"]
)
@pytest.mark.parametrize("mode", MODES)
def test_unknown_tools_are_unknown_in_both_modes(mode: str, name: str) -> None:
    assert gate_code(mode, name) == "UNKNOWN_TOOL"


def test_submit_plan_outside_plan_is_refused() -> None:
    assert gate_code("agent", "SubmitPlan") == "SUBMIT_PLAN_OUTSIDE_PLAN_TURN"
    assert gate_code("plan", "SubmitPlan") is None


@pytest.mark.parametrize("mode", MODES)
def test_every_offered_tool_passes_the_gate_in_its_mode(mode: str) -> None:
    for name in names(mode):
        assert gate_code(mode, name) is None, name


@given(mode=st.sampled_from(MODES), name=st.sampled_from(ALL_OFFERED))
def test_a_known_tool_passes_exactly_when_its_mode_offers_it(mode: str, name: str) -> None:
    code = gate_code(mode, name)
    if name in names(mode):
        assert code is None
    elif mode == "plan":
        assert code == "TOOL_DENIED"
    else:
        assert code == "SUBMIT_PLAN_OUTSIDE_PLAN_TURN"


@given(mode=st.sampled_from(MODES), name=st.text(max_size=40))
def test_arbitrary_names_are_refused_unless_offered(mode: str, name: str) -> None:
    code = gate_code(mode, name)
    if name.startswith(("mcp__", "plugin__")):
        assert code == ("TOOL_DENIED" if mode == "plan" else "UNKNOWN_TOOL")
    elif name not in ALL_OFFERED:
        assert code == "UNKNOWN_TOOL"
    else:
        assert (code is None) == (name in names(mode))


@given(
    mode=st.sampled_from(MODES),
    prefix=st.sampled_from(["mcp__", "plugin__"]),
    rest=st.text(max_size=30),
)
def test_any_plugin_name_is_never_allowed(mode: str, prefix: str, rest: str) -> None:
    assert gate_code(mode, prefix + rest) == ("TOOL_DENIED" if mode == "plan" else "UNKNOWN_TOOL")


# -- the history after new_context ---------------------------------------------------------


def test_a_context_reset_leaves_no_tool_result_without_its_call() -> None:
    # After new_context the history starts at the summary; the result of the call that
    # reset it (and of any call beside it) lost its assistant message and must go too.
    history = [
        {"role": "system", "content": "Summary."},
        {"role": "tool", "tool_call_id": "call_reset", "content": "A new context starts."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_read"}]},
        {"role": "tool", "tool_call_id": "call_read", "content": "text"},
        {"role": "assistant", "content": "Done."},
    ]
    assert answered_only(history) == [history[0], *history[2:]]


def test_a_call_no_result_answers_is_left_out_of_the_history() -> None:
    # A restart ended the turn while Bash ran: its call has no result. Chat Completions
    # refuses an assistant message whose calls are not all answered.
    history = [
        {"role": "user", "content": "Run it."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_bash"}]},
        {"role": "user", "content": "Again?"},
        {"role": "assistant", "content": "Both.", "tool_calls": [{"id": "a"}, {"id": "b"}]},
        {"role": "tool", "tool_call_id": "a", "content": "done"},
    ]
    assert answered_only(history) == [
        history[0],
        history[2],
        {"role": "assistant", "content": "Both.", "tool_calls": [{"id": "a"}]},
        history[4],
    ]
