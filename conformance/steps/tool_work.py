"""Steps showing that the tools work (P10), that every call gets one result (P9), that a
model-supplied search cannot stall the host (P22), and that a page preview stays on the
loopback interface (P23)."""

from __future__ import annotations

import json
import re
import unicodedata
import uuid
from typing import Any, Final

import pytest
from pytest_bdd import given, parsers, then, when

from conformance.blame import blame, verifies
from conformance.capabilities import Unverified, require_output_room
from conformance.drivers import DUMMY_API_KEY
from conformance.loopback_page import LocalPage, network_address
from conformance.messages import (
    answer_to_call,
    message_text,
    messages_after_call,
    request_answering,
    request_text,
    unanswered_tool_messages,
)
from conformance.mock_provider import RecordedRequest, StallReply, TextReply
from conformance.steps.model import script_calls, tool_call
from conformance.steps.plan import check_one_result, check_refusal
from conformance.steps.requests import ANNOUNCEMENT_GRACE_S, granted
from conformance.steps.sessions import read_session, session_id, transcript_entries
from conformance.world import World, need

PLAN_TOOLS = sorted(
    ["Read", "Glob", "Grep", "BrowserPreview", "Bash", "EnterPlanMode", "SubmitPlan", "new_context"]
)
SLOW_SEARCH_S = 1.0
"""A search that took longer than this had time to hold up another session."""


def _turn_requests(world: World) -> list[RecordedRequest]:
    return world.provider.requests()[world.cursors.provider_turn :]


def _given_after(world: World, tool: str) -> tuple[str, RecordedRequest]:
    """The text the model was given after its ``tool`` call, and the request carrying it."""
    call_id = world.script.call_id(tool)
    request = request_answering(_turn_requests(world), call_id)
    assert request is not None, f"the model was never given the result of its {tool} call"
    text = "\n".join(message_text(m) for m in messages_after_call(request, call_id))
    return text, request


# -- arrangements -------------------------------------------------------------------------


@given(parsers.parse('a local web page that says "{text}"'))
def local_page(world: World, text: str, request: pytest.FixtureRequest) -> None:
    page = LocalPage(f"{text} {uuid.uuid4().hex[:12]}")
    request.addfinalizer(page.close)
    world.arranged.local_page = page


# Files at several depths, in a hidden folder, with the interesting line not first and
# text beyond ASCII: a search that holds to its one line, one segment, or ASCII shows.
_CODE_BASE: Final[dict[str, str | bytes]] = {
    "README.md": "Read me first\n",
    "docs/guide.md": "# Guide\nHow the cache works.\n",
    "src/cache.py": (
        "import os\ndef evict_oldest(): pass\n# caf\u00e9 au lait\n"
        "# alpha\u2028beta\u0085gamma\x0cdelta\n"  # one line: only LF ends a line
    ),
    "src/store.py": "def keep_all(): pass\n",
    "src/sub/deep.py": "def evict_deeply(): pass\n",
    ".github/ci.yml": "run: evict_in_ci\n",
    # names with signs a pattern turned into a regular expression would misread
    "notes(1).md": "A copy of the notes\n",
    "c++.txt": "Plus plus\n",
    "xmd": "Not markdown\n",
    "NOTES.MD": "Notes in capitals\n",  # a pattern matches letter case exactly
    "assets/logo.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00",  # a file, though not text
}


@given("the project holds a small code base")
def small_code_base(world: World) -> None:
    for relative, content in _CODE_BASE.items():
        target = world.workspace / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")


@given("a local web page that redirects to that page")
def redirecting_page(world: World, request: pytest.FixtureRequest) -> None:
    target = need(world.arranged.network_page, "web page on the network address")
    page = LocalPage(f"redirect {uuid.uuid4().hex[:12]}", redirect_to=target.url)
    request.addfinalizer(page.close)
    world.arranged.local_page = page


# where a page is served that BrowserPreview must not fetch, and the URL it is offered at
_NOT_LOOPBACK: Final = ("the machine's network address", "the address of every interface")


@given(parsers.parse('a web page on {place} that says "{text}"'))
def network_page(world: World, place: str, text: str, request: pytest.FixtureRequest) -> None:
    assert place in _NOT_LOOPBACK, f"no place called {place!r}"
    if place == _NOT_LOOPBACK[0]:
        address = network_address()
        if address is None:
            raise Unverified(
                "network-address",
                "this machine has no network address other than loopback, which the check "
                "that BrowserPreview refuses other hosts needs (P23)",
            )
    else:
        # 0.0.0.0 names no host; a client that connects to it reaches this machine's
        # listeners, and P23 lists only localhost, 127.0.0.0/8 and ::1 as loopback.
        address = "0.0.0.0"
    page = LocalPage(f"{text} {uuid.uuid4().hex[:12]}", address)
    request.addfinalizer(page.close)
    world.arranged.network_page = page


# -- P10: the tools at work ---------------------------------------------------------------


@then(
    parsers.re(
        r"the model was given (?P<wanted>\"[^\"]+\"(?: and \"[^\"]+\")*)"
        r"(?: but not (?P<unwanted>\"[^\"]+\"(?: and \"[^\"]+\")*))? after its (?P<tool>\w+) call"
    )
)
@verifies("P10")
def given_after_call(world: World, wanted: str, unwanted: str | None, tool: str) -> None:
    if tool == "Bash":  # each wanted text is a line the command printed
        require_output_room(
            world, sum(len(i.encode()) + 1 for i in re.findall(r'"([^"]+)"', wanted))
        )
    call_id = world.script.call_id(tool)
    result = check_one_result(world, call_id, tool)
    assert result["status"] == "ok", f"the {tool} call did not work: {result}"
    text, _ = _given_after(world, tool)
    for item in re.findall(r'"([^"]+)"', wanted):
        assert item in text, f"after its {tool} call the model was not given {item!r}: {text!r}"
    for item in re.findall(r'"([^"]+)"', unwanted or ""):
        assert item not in text, f"after its {tool} call the model was given {item!r}: {text!r}"


@then(parsers.parse('the model was given the byte order mark before "{text}" after its Read call'))
@verifies("P10")
def byte_order_mark_given(world: World, text: str) -> None:
    result = check_one_result(world, world.script.call_id("Read"), "Read")
    assert result["status"] == "ok", f"the Read call did not work: {result}"
    given, _ = _given_after(world, "Read")
    marked = "\ufeff" + text
    assert marked in given or json.dumps(marked)[1:-1] in given, (
        f"the file starts with a byte order mark (U+FEFF) before {text!r}; the model was given "
        f"{given[:200]!r}: Read gives the file's text as stored"
    )


@then("the model was given the file's name with its accent decomposed after its Glob call")
@verifies("P10")
def decomposed_name_given(world: World) -> None:
    name = need(world.arranged.decomposed_name, "file with a decomposed name")
    result = check_one_result(world, world.script.call_id("Glob"), "Glob")
    assert result["status"] == "ok", f"the Glob call did not work: {result}"
    given, _ = _given_after(world, "Glob")
    composed = unicodedata.normalize("NFC", name)
    forms = (name, json.dumps(name)[1:-1])
    assert any(form in given for form in forms), (
        f"Glob was given the file {name!r} (its accent decomposed) to find; the model was "
        f"given {given[:300]!r}: a path names the file as it is on disk, in its own "
        f"Unicode form{' (it was given composed)' if composed in given else ''}"
    )


@then("the model was given each file's text in the answer to its own call")
@verifies("P10")
def each_read_answered_alone(world: World) -> None:
    reads = [c for c in world.script.calls if c.tool == "Read"]
    texts = {
        c.call_id: (world.workspace / c.arguments["path"]).read_text("utf-8")
        for c in reads
        if isinstance(c.arguments, dict)
    }
    for call_id, own in texts.items():
        answer = answer_to_call(_turn_requests(world), call_id)
        assert answer is not None, f"no tool message answers the Read call {call_id}"
        others = [text for other, text in texts.items() if other != call_id]
        assert own.strip() in answer and not any(t.strip() in answer for t in others), (
            f"the tool message answering Read call {call_id} reads {answer!r}; it should "
            f"carry that call's file, {own!r}, and no other call's"
        )


@then("the model was given each call's own result in the answer to that call")
@verifies("P10")
def each_call_answered_alone(world: World) -> None:
    expected: dict[str, str] = {}
    for call in world.script.calls:
        if not isinstance(call.arguments, dict):
            continue
        if call.tool == "Read":
            text = (world.workspace / call.arguments["path"]).read_text("utf-8")
            expected[call.call_id] = text.strip()
        elif call.tool == "Bash":
            expected[call.call_id] = call.arguments["command"].removeprefix("echo ").strip()
    assert len(expected) >= 2, f"the scenario scripted {len(expected)} calls to compare"
    require_output_room(world, max(len(t.encode()) + 1 for t in expected.values()))
    requests = _turn_requests(world)
    for call_id, own in expected.items():
        answer = answer_to_call(requests, call_id)
        assert answer is not None, f"no tool message answers the call {call_id}"
        others = [text for other, text in expected.items() if other != call_id]
        assert own in answer and not any(t in answer for t in others), (
            f"the tool message answering call {call_id} reads {answer!r}; it should carry "
            f"that call's own result, {own!r}, and no other call's"
        )


@then("each of the reads named alike was announced once and answered once")
@verifies("P9")
def reads_alike_announced(world: World) -> None:
    since = world.cursors.turn
    calls = [n["params"] for n in world.notifications("turn/toolCall", since)]
    results = [n["params"] for n in world.notifications("turn/toolResult", since)]
    paths = [c["input"].get("path") for c in calls if isinstance(c.get("input"), dict)]
    scripted = world.script.reads_named_alike
    assert paths == scripted, (
        f"the turn announced Read calls of {paths}: each call of each message is announced by "
        "its own turn/toolCall, also when an earlier message gave a call the same id"
    )
    assert len(results) == len(scripted) and all(r["status"] == "ok" for r in results), (
        f"the reads named alike got the results {results}; each gets exactly one"
    )


@then(parsers.parse('the model was given its own words "{text}" again with its {tool} call'))
@verifies("R1.3")
def own_words_kept(world: World, text: str, tool: str) -> None:
    call_id = world.script.call_id(tool)
    request = request_answering(_turn_requests(world), call_id)
    assert request is not None, f"the model was never given the result of its {tool} call"
    said = [
        message_text(m)
        for m in request.messages
        if m.get("role") == "assistant"
        and any(c.get("id") == call_id for c in m.get("tool_calls") or [])
    ]
    assert said, f"the request after the {tool} call does not repeat the call's message"
    assert text in said[0], (
        f"the model's words beside its {tool} call were dropped from the conversation: the "
        f"message that made the call reads {said[0]!r}"
    )


@then(parsers.parse('the user was shown the words "{text}" as the model said them'))
@verifies("P31")
def own_words_shown(world: World, text: str) -> None:
    turn = need(world.active_turn, "turn")
    shown = "".join(
        n["params"]["text"]
        for n in world.notifications("turn/text")
        if n["params"]["turnId"] == turn
    )
    assert text in shown, (
        f"the model wrote {text!r} beside its tool call, but the turn's turn/text pieces, "
        f"joined, read {shown!r}: the model's words beside its calls are part of its answer"
    )


@then("the local page was fetched")
@verifies("P10")
def page_fetched(world: World) -> None:
    page = need(world.arranged.local_page, "local web page")
    assert page.paths, "BrowserPreview did not fetch the local page"


@then("the page was asked for without the provider's key")
@verifies("P21")
def page_not_given_key(world: World) -> None:
    page = need(world.arranged.local_page, "local web page")
    assert page.paths, "BrowserPreview did not fetch the local page"
    for path, headers in zip(page.paths, page.headers, strict=True):
        carried = [name for name, value in headers.items() if DUMMY_API_KEY in value]
        assert DUMMY_API_KEY not in path and not carried, (
            f"BrowserPreview sent the provider API key to the page (in {carried or 'its URL'}): "
            "the key goes to the model provider only"
        )


@then("the model was given the page's text after its BrowserPreview call")
@verifies("P10")
def given_page(world: World) -> None:
    page = need(world.arranged.local_page, "local web page")
    result = check_one_result(world, world.script.call_id("BrowserPreview"), "BrowserPreview")
    assert result["status"] == "ok", f"the BrowserPreview call did not work: {result}"
    text, _ = _given_after(world, "BrowserPreview")
    assert page.text in text, f"the model was not given the page's text: {text[:300]!r}"


@then("the preview by the name localhost was not refused as leaving the machine")
@verifies("P23")
def localhost_not_refused(world: World) -> None:
    # The page is served on 127.0.0.1; where this machine's localhost names ::1 first, a
    # host that tries only the first address fails to connect, which is not this rule's
    # concern. What P23 rules out is refusing the name.
    page = need(world.arranged.local_page, "local web page")
    result = check_one_result(world, world.script.call_id("BrowserPreview"), "BrowserPreview")
    code = (result.get("error") or {}).get("code")
    assert code != "BROWSER_PREVIEW_REFUSED", (
        f"the preview of {page.text!r} at localhost was refused as leaving the machine: "
        "localhost is a loopback name (P23)"
    )
    if result["status"] == "ok":
        text, _ = _given_after(world, "BrowserPreview")
        assert page.text in text, f"the model was not given the page's text: {text[:300]!r}"


@then(parsers.parse("the {tool} call worked and the model was given its result"))
@verifies("P10")
def call_worked(world: World, tool: str) -> None:
    call_id = world.script.call_id(tool)
    result = check_one_result(world, call_id, tool)
    assert result["status"] == "ok", f"the {tool} call did not work: {result}"
    answering = request_answering(_turn_requests(world), call_id)
    assert answering is not None, f"the model was never given the result of its {tool} call"


_CRLF_LINES: Final = (b"one", "caf\u00e9 \u20ac".encode(), b"two", b"three\rfour")
# Each line ends in CR LF; one holds a lone CR and one characters of several bytes before
# the line an edit changes, so that a tool that tidies line ends or counts in bytes shows.


@given(parsers.parse('the project has a file "{path}" whose lines end in CR LF'))
def crlf_file(world: World, path: str) -> None:
    target = world.workspace / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(b"".join(line + b"\r\n" for line in _CRLF_LINES))


@then(parsers.parse('the model was given every line of "{path}" with its own line end'))
@verifies("P10")
def read_keeps_line_ends(world: World, path: str) -> None:
    result = check_one_result(world, world.script.call_id("Read"), "Read")
    assert result["status"] == "ok", f"the Read call did not work: {result}"
    text, _ = _given_after(world, "Read")
    for line in _CRLF_LINES:
        expected = line.decode() + "\r\n"
        escaped = json.dumps(expected, ensure_ascii=False)[1:-1]  # a result given as JSON
        assert expected in text or escaped in text, (
            f"after its Read call the model was not given the line {expected!r} of {path}, "
            f"line end included: {text!r}; Read gives the file's text as it is stored"
        )


@then(
    parsers.parse(
        'the project file "{path}" still ends its lines in CR LF, with "{old}" changed to "{new}"'
    )
)
@verifies("P10")
def crlf_kept(world: World, path: str, old: str, new: str) -> None:
    lines = [new.encode() if line == old.encode() else line for line in _CRLF_LINES]
    expected = b"".join(line + b"\r\n" for line in lines)
    content = (world.workspace / path).read_bytes()
    assert content == expected, (
        f"{path} holds {content!r}; only {old!r} was to change: {expected!r}"
    )


@then(parsers.parse('the project file "{path}" now reads "{text}"'))
@verifies("P10")
def file_reads(world: World, path: str, text: str) -> None:
    target = world.workspace / path
    assert target.is_file(), f"{path} is no longer a file in the project"
    expected = (text + "\n").encode()  # a line, as the project's files are arranged
    content = target.read_bytes()
    assert content == expected, f"{path} holds {content!r}, expected {expected!r}"


# -- P23: a page preview stays on loopback --------------------------------------------------


@then("the page on the network address was never requested")
@verifies("P23")
def network_page_untouched(world: World) -> None:
    page = need(world.arranged.network_page, "web page on the network address")
    assert not page.paths, f"BrowserPreview fetched {page.url}: requests for {page.paths}"


@then("the model was not given that page's text")
@verifies("P23")
def network_text_withheld(world: World) -> None:
    page = need(world.arranged.network_page, "web page on the network address")
    for sent in _turn_requests(world):
        assert page.text not in request_text(sent), "the model was given the page's text"


@then("after the switch the model was offered exactly the planning tools, every time it was asked")
@verifies("P10")
def plan_tools_after_switch(world: World) -> None:
    result = check_one_result(world, world.script.call_id("EnterPlanMode"), "EnterPlanMode")
    assert result["status"] == "ok", f"the EnterPlanMode call did not work: {result}"
    requests = _turn_requests(world)
    assert requests and "SubmitPlan" not in requests[0].tool_names, (
        f"the Agent turn started with the Plan tools: {requests[0].tool_names if requests else []}"
    )
    _, after = _given_after(world, "EnterPlanMode")
    later = requests[requests.index(after) :]
    assert len(later) >= 2, "the model was not asked again after its first call in Plan"
    for number, request in enumerate(later, start=1):
        assert sorted(request.tool_names) == PLAN_TOOLS, (
            f"request {number} after EnterPlanMode offered {sorted(request.tool_names)}, "
            f"expected {PLAN_TOOLS}"
        )


@given("the model will switch to planning and then take its time to answer")
def model_switches_then_thinks(world: World) -> None:
    script_calls(world, tool_call(world, "EnterPlanMode", {}), answer=None)
    world.provider.enqueue(StallReply(suffix="I will plan this first."))


@when("the user sends a prompt and the model is still answering after the switch")
def prompt_while_model_thinks(world: World) -> None:
    world.cursors.turn = world.mark()
    world.cursors.provider_turn = len(world.provider.requests())
    world.active_turn = granted(world.rpc.prompt, session_id(world), "Plan the change.").turnId
    # the second request is the one the model holds: the switch was made before it
    world.provider.wait_for_requests(world.cursors.provider_turn + 2, world.timeout)


@then("the session was announced in Plan mode while the model was still answering")
@verifies("R7.2")
def switch_announced_in_turn(world: World) -> None:
    turn_id = need(world.active_turn, "the turn")
    own = session_id(world)

    def in_plan(params: dict[str, Any]) -> bool:
        session = params["session"]
        return bool(
            session["sessionId"] == own
            and session["mode"] == "plan"
            and session["activeTurnId"] == turn_id
        )

    try:
        # made before the held request: an announcement still on its way is waited for briefly
        world.wait_for(
            "session/updated", in_plan, since=world.cursors.turn, timeout=ANNOUNCEMENT_GRACE_S
        )
    except TimeoutError:
        shown = [
            (n["params"]["session"]["mode"], n["params"]["session"]["activeTurnId"])
            for n in world.notifications("session/updated", world.cursors.turn)
            if n["params"]["session"]["sessionId"] == own
        ]
        raise AssertionError(
            f"no session/updated showed the session in Plan while turn {turn_id} went on "
            f"(the model was asked again after EnterPlanMode and is still answering); the "
            f"session was announced as (mode, activeTurnId) {shown}: a change made during "
            "a turn is announced when it is made"
        ) from None
    finally:
        world.provider.release_stalls()
    world.wait_for("turn/ended", lambda p: p["turnId"] == turn_id, since=world.cursors.turn)


@given("the model will start a new context with an empty summary and then answer")
def model_resets_to_nothing(world: World) -> None:
    script_calls(world, tool_call(world, "new_context", {"summary": ""}))


@then("after the new context the model saw the summary and none of the earlier conversation")
@verifies("P10")
def summary_after_reset(world: World) -> None:
    result = check_one_result(world, world.script.call_id("new_context"), "new_context")
    assert result["status"] == "ok", f"the new_context call did not work: {result}"
    requests = _turn_requests(world)
    assert len(requests) >= 2, "the model was not asked again after its new_context call"
    _check_reset(world, requests[-1], "after the new context")


@then("the model again saw the summary and none of the conversation before it")
@verifies("P10")
def summary_in_later_turn(world: World) -> None:
    requests = _turn_requests(world)
    assert requests, "the host made no request to the model in the later turn"
    _check_reset(world, requests[0], "in the later turn")


@then("the execution's first request carried the summary and none of the conversation before it")
@verifies("P10")
def summary_in_execution(world: World) -> None:
    first = world.cursors.provider_approve
    requests = world.provider.wait_for_requests(first + 1, world.timeout)
    _check_reset(world, requests[first], "in the execution's first request")


@then("the session's transcript still holds the earlier conversation")
@verifies("R1.3")
def transcript_keeps_conversation(world: World) -> None:
    entries = transcript_entries(world, session_id(world))
    read = [(e.turnId, e.role, e.content, e.createdAt) for e in entries]
    rows = world.storage().rows("transcript", "session_id = ?", (session_id(world),))
    stored = [(r["turn_id"], r["role"], json.loads(r["content"]), r["created_at"]) for r in rows]
    assert read == stored, (
        f"session/transcript reports {len(read)} entries, the transcript table holds "
        f"{len(stored)} rows for the session; they are to be the same, in id order"
    )
    text = json.dumps([e.content for e in entries], ensure_ascii=False)
    for earlier in world.script.earlier_conversation:
        assert earlier in text, f"after the new context the transcript lost {earlier!r}"


def _check_reset(world: World, request: RecordedRequest, when: str) -> None:
    arguments = world.script.arguments("new_context")
    summary = str(arguments["summary"]) if isinstance(arguments, dict) else arguments
    text = request_text(request)
    assert summary in text, f"{when} the model was not given the summary: {text[:300]!r}"
    for earlier in world.script.earlier_conversation:
        assert earlier not in text, f"{when} the model was still given {earlier!r}"
    orphans = unanswered_tool_messages(request)
    assert not orphans, (
        f"{when} the request is not valid Chat Completions: tool messages answer no call of "
        f"an earlier assistant message: {orphans}"
    )


@then(
    parsers.parse(
        "the {tool} call was taken as one without arguments or refused as invalid input, "
        "and the session is in the mode that says which"
    )
)
@verifies("P27")
def empty_arguments_either_way(world: World, tool: str) -> None:
    result = check_one_result(world, world.script.call_id(tool), tool)
    mode = read_session(world)["mode"]
    if result["status"] == "ok":
        assert mode == "plan", (
            f"the {tool} call with empty arguments worked, yet the session is {mode}"
        )
    else:
        check_refusal(result, tool, "INVALID_TOOL_INPUT")
        assert mode == "agent", f"the {tool} call was refused, yet the session is {mode}"
    ended = need(world.last_turn_end, "the turn's end")
    assert ended["outcome"] == "completed", (
        f"after the {tool} call with empty arguments the turn ended {ended['outcome']}: the "
        "turn goes on after a tool call either way"
    )


@then(parsers.parse('the {tool} call ran and made "{path}"'))
@verifies("P27")
def edge_input_ran(world: World, tool: str, path: str) -> None:
    result = check_one_result(world, world.script.call_id(tool), tool)
    assert result["status"] == "ok", (
        f"the {tool} call ended {result['status']} with {result.get('error')}, but its input "
        "is one the published shape allows: a tool takes every input its schema accepts, "
        "up to its limits"
    )
    assert (world.workspace / path).exists(), f"the {tool} call reported ok but made no {path}"


# -- P9: one result per call --------------------------------------------------------------


@then(parsers.parse("every call of that message got exactly one result: {outcomes}"))
@verifies("P9")
def one_result_each(world: World, outcomes: str) -> None:
    expected = [o.strip() for o in outcomes.replace(" and ", ", ").split(",")]
    batch = world.script.last_batch
    assert len(batch) == len(expected), f"the scenario scripted {len(batch)} calls"
    announced = [n["params"] for n in world.notifications("turn/toolCall", world.cursors.turn)]
    for call, outcome in zip(batch, expected, strict=True):
        calls = [a for a in announced if a["toolCallId"] == call.call_id]
        assert len(calls) == 1, f"the {call.tool} call was announced {len(calls)} times"
        result = check_one_result(world, call.call_id, call.tool)
        if outcome == "ok":
            assert result["status"] == "ok", f"the {call.tool} call failed: {result}"
        else:
            check_refusal(result, call.tool, outcome)
    ended = need(world.last_turn_end, "finished turn")
    assert ended["outcome"] == "completed", f"the turn ended {ended}"


# -- P22: a runaway search ----------------------------------------------------------------


def _arrival(world: World, method: str, match: dict[str, str]) -> float | None:
    """When (seconds into the scenario) the host's first ``method`` notification whose
    params hold ``match`` arrived."""
    for line, offset in world.transcript():
        if line.direction != "host-to-client" or f'"{method}"' not in line.text:
            continue
        try:
            message = json.loads(line.text)
        except ValueError:
            continue
        params = message.get("params") if isinstance(message, dict) else None
        if (
            message.get("method") == method
            and isinstance(params, dict)
            and all(params.get(k) == v for k, v in match.items())
        ):
            return float(line.elapsed) + offset
    return None


@when("the user sends a prompt and uses the other session while the search runs")
def search_while_other_session_works(world: World) -> None:
    seen = world.search
    seen.call_id = world.script.call_id("Grep")
    world.provider.enqueue(TextReply("The other session's answer."))
    world.cursors.turn = world.mark()
    world.cursors.provider_turn = len(world.provider.requests())
    turn_id = granted(world.rpc.prompt, session_id(world), "Search the project.").turnId
    world.active_turn = turn_id
    world.wait_for("turn/toolCall", lambda p: p["toolCallId"] == seen.call_id, world.cursors.turn)
    other = session_id(world, "other")
    mark = world.mark()
    try:
        other_turn = granted(world.rpc.prompt, other, "Meanwhile, a quick question.").turnId
        world.wait_for("turn/ended", lambda p: p["turnId"] == other_turn, since=mark)
    except (TimeoutError, AssertionError) as stalled:
        seen.other_error = str(stalled)
    else:
        done = world.notifications("turn/toolResult", world.cursors.turn)
        seen.other_ended_first = not any(n["params"]["toolCallId"] == seen.call_id for n in done)
    try:
        seen.result = world.wait_for(
            "turn/toolResult", lambda p: p["toolCallId"] == seen.call_id, world.cursors.turn
        )
        world.last_turn_end = world.wait_for(
            "turn/ended", lambda p: p["turnId"] == turn_id, world.cursors.turn
        )
    except TimeoutError:
        return
    started = _arrival(world, "turn/toolCall", {"toolCallId": seen.call_id})
    finished = _arrival(world, "turn/toolResult", {"toolCallId": seen.call_id})
    if started is not None and finished is not None:
        seen.search_seconds = finished - started


@then("the other session was served while the search ran")
@verifies("P22")
def other_served(world: World) -> None:
    seen = world.search
    assert seen.other_error is None, (
        f"the other session was not served while the search ran: {seen.other_error}"
    )
    took = seen.search_seconds
    if took is not None and took > SLOW_SEARCH_S:
        assert seen.other_ended_first, (
            f"the other session was served only after the {took:.1f} s search had ended"
        )


@then("the search ended with the matching file or with TOOL_FAILED")
@verifies("P22")
def search_ended(world: World) -> None:
    seen = world.search
    result = seen.result
    limit = world.timeout
    assert result is not None, f"the search did not end within {limit:g} s"
    assert seen.search_seconds is None or seen.search_seconds <= limit, (
        f"the search took {seen.search_seconds:.1f} s, more than {limit:g} s"
    )
    if result["status"] == "ok":
        text, _ = _given_after(world, "Grep")
        assert "match.txt" in text, (
            f"the search reported success without the matching file: {text[:300]!r}"
        )
    else:
        check_refusal(result, "Grep", "TOOL_FAILED")
    with blame("P9"):
        assert len([r for r in _results(world) if r["toolCallId"] == seen.call_id]) == 1


def _results(world: World) -> list[dict[str, Any]]:
    return [n["params"] for n in world.notifications("turn/toolResult")]
