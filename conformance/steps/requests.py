"""Requests the planning steps need the host to grant."""

from __future__ import annotations

from typing import Any

from conformance.client import RpcError
from conformance.world import World


def request(world: World, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """Send a request the scenario needs; a refusal is a failed check, blamed like the
    step that needed it (never an error of the harness)."""
    try:
        return world.rpc.request(method, params)
    except RpcError as refused:
        raise AssertionError(f"the host refused a request the scenario needed: {refused}") from None
