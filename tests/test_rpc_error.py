"""A host's error response travels as an exception through any context manager."""

from __future__ import annotations

import contextlib

import pytest

from conformance.connection import RpcError


def test_an_rpc_error_passes_through_a_context_manager() -> None:
    @contextlib.contextmanager
    def around() -> object:
        yield

    with pytest.raises(RpcError) as raised, around():
        raise RpcError("session/prompt", -32020, "busy", {"code": "SESSION_BUSY"})
    assert raised.value.canonical == "SESSION_BUSY"
