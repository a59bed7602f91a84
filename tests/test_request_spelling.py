"""The harness writes one request in each spelling JSON allows, and every spelling is the
same JSON value."""

from __future__ import annotations

import json

from conformance.request_spelling import SPELLINGS, spell, spelling_for

MESSAGE = {
    "jsonrpc": "2.0",
    "id": 7,
    "method": "approval/get",
    "params": {"sessionId": "ses_caf\u00e9", "approvalId": "apr_\U0001f680"},
}


def test_every_spelling_is_the_same_value() -> None:
    texts = [spell(MESSAGE, index) for index in range(len(SPELLINGS))]
    assert all(json.loads(text) == MESSAGE for text in texts)
    assert len(set(texts)) == len(SPELLINGS)


def test_each_spelling_differs_where_it_says() -> None:
    compact, spaced, reversed_escaped = (spell(MESSAGE, i) for i in range(len(SPELLINGS)))
    assert '"jsonrpc":"2.0"' in compact and "caf\u00e9" in compact
    assert '"jsonrpc": "2.0"' in spaced
    assert reversed_escaped.startswith('{"params":{"approvalId"')
    assert "\\u00E9" in reversed_escaped and "\\uD83D\\uDE80" in reversed_escaped
    assert reversed_escaped.isascii()


def test_ascii_only_escapes_in_every_spelling_and_carries_a_lone_surrogate() -> None:
    lone = {**MESSAGE, "params": {"sessionId": "a\ud800b", "approvalId": "x"}}
    for index in range(len(SPELLINGS)):
        text = spell(lone, index, ascii_only=True)
        assert text.isascii() and json.loads(text) == lone


def test_request_ids_spread_over_every_spelling_the_same_way_each_time() -> None:
    ids: list[object] = [*range(1, 7), "a", "b", "c", "d"]
    chosen = [spelling_for(request_id) for request_id in ids]
    assert chosen == [spelling_for(request_id) for request_id in ids]
    assert set(chosen) == set(range(len(SPELLINGS)))
