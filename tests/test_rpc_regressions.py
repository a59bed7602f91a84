"""Regression tests for fixed bugs in the dispatcher, the encoder and storage opening."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from pi_contract import error_catalog, load_json
from reference_host.errors import HostError
from reference_host.rpc import Dispatcher, encode
from reference_host.storage import DB_FILE, Storage

CATALOG = error_catalog()
SESSION_LIST = b'{"jsonrpc":"2.0","id":7,"method":"session/list","params":{}}'


@cache
def error_response_validator() -> Draft202012Validator:
    registry: Registry[Any] = Registry()
    for name in ("protocol-v9/envelope.schema.json", "protocol-v9/types.schema.json"):
        contents = load_json(name)
        registry = registry.with_resource(contents["$id"], Resource.from_contents(contents))
    envelope_id = load_json("protocol-v9/envelope.schema.json")["$id"]
    return Draft202012Validator({"$ref": f"{envelope_id}#/$defs/ErrorResponse"}, registry=registry)


def feed(*frames: bytes) -> tuple[list[dict[str, Any]], list[str]]:
    """Handle ``frames`` with a fresh initialized dispatcher; return (sent, handled methods)."""
    sent: list[dict[str, Any]] = []
    handled: list[str] = []
    dispatcher = Dispatcher(sent.append)
    dispatcher.initialized = True

    async def session_list(params: dict[str, Any]) -> dict[str, Any]:
        handled.append("session/list")
        return {"sessions": []}

    dispatcher.register({"session/list": session_list})

    async def run() -> None:
        for frame in frames:
            await dispatcher.handle(frame)

    asyncio.run(run())
    return sent, handled


def wire(message: dict[str, Any]) -> dict[str, Any]:
    """Encode as the host would and parse back as a client would (strict UTF-8)."""
    raw = encode(message)
    assert b"\n" not in raw
    return json.loads(raw.decode("utf-8", errors="strict"))


def assert_error(message: dict[str, Any], code: str, request_id: Any) -> None:
    parsed = wire(message)
    assert list(error_response_validator().iter_errors(parsed)) == []
    assert parsed["id"] == request_id
    assert parsed["error"]["data"]["code"] == code
    assert parsed["error"]["code"] == CATALOG[code]["jsonrpcCode"]


# -- deeply nested JSON ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "frame", [b"[" * 100_000, b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 100_000]
)
def test_deeply_nested_frame_is_a_parse_error_and_serving_continues(frame: bytes) -> None:
    sent, handled = feed(frame, SESSION_LIST, SESSION_LIST)
    assert len(sent) == 3
    assert_error(sent[0], "PARSE_ERROR", None)
    assert sent[1] == {"jsonrpc": "2.0", "id": 7, "result": {"sessions": []}}
    assert sent[2] == sent[1]
    assert handled == ["session/list", "session/list"]


# -- lone surrogates -------------------------------------------------------------------------


@pytest.mark.parametrize("escaped", ["\\ud800", "\\udfff", "a\\ud800b", "\\ude00\\ud83d"])
def test_request_id_with_a_lone_surrogate_is_invalid_with_null_id(escaped: str) -> None:
    frame = ('{"jsonrpc":"2.0","id":"' + escaped + '","method":"session/list"}').encode()
    sent, handled = feed(frame, SESSION_LIST)
    assert len(sent) == 2
    assert sent[0]["id"] is None
    assert_error(sent[0], "INVALID_REQUEST", None)
    assert handled == ["session/list"]
    assert sent[1]["id"] == 7


def test_request_id_with_a_valid_surrogate_pair_is_echoed() -> None:
    sent, _ = feed(b'{"jsonrpc":"2.0","id":"\\ud83d\\ude00","method":"session/list"}')
    (response,) = sent
    assert response["id"] == "\U0001f600"
    assert wire(response)["result"] == {"sessions": []}


def test_unknown_method_with_a_lone_surrogate_is_answered_with_valid_json() -> None:
    sent, handled = feed(b'{"jsonrpc":"2.0","id":3,"method":"x\\ud800"}')
    (response,) = sent
    assert_error(response, "METHOD_NOT_FOUND", 3)
    assert handled == []


@pytest.mark.parametrize("text", ["\ud800", "ok \udfff ✓", "\ude00\ud83d", "é\ud800\n"])
def test_encode_with_a_lone_surrogate_gives_valid_utf8_json(text: str) -> None:
    message = {"jsonrpc": "2.0", "method": "turn/text", "params": {"text": text, "n": [1, "é"]}}
    raw = encode(message)
    assert b"\n" not in raw
    decoded = raw.decode("utf-8", errors="strict")
    assert json.loads(decoded) == message


def test_host_error_carrying_a_lone_surrogate_encodes() -> None:
    error = HostError("UNKNOWN_TOOL", "no tool \ud800", {"tool": "\ud800"})
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": error.jsonrpc_code, "message": error.message, "data": error.to_data()},
    }
    assert json.loads(encode(message).decode("utf-8")) == message


# -- storage: refuse before switching to WAL -------------------------------------------------


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_rollback_journal_database_of_an_unsupported_version_stays_byte_identical(
    tmp_path: Path,
) -> None:
    db = tmp_path / DB_FILE
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        conn.execute("INSERT INTO notes (body) VALUES ('keep me')")
        conn.execute("PRAGMA user_version = 9")
    finally:
        conn.close()
    before = sha256(db)
    entries = sorted(path.name for path in tmp_path.iterdir())
    assert entries == [DB_FILE]

    async def open_it() -> None:
        storage = await Storage.open(tmp_path)
        await storage.close()

    with pytest.raises(HostError) as caught:
        asyncio.run(open_it())
    assert caught.value.code == "STORAGE_SCHEMA_UNSUPPORTED"
    assert caught.value.details == {"userVersion": 9}
    assert sha256(db) == before
    assert sorted(path.name for path in tmp_path.iterdir()) == entries
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
        assert conn.execute("PRAGMA user_version").fetchone() == (9,)
        assert conn.execute("SELECT body FROM notes").fetchall() == [("keep me",)]
    finally:
        conn.close()
