"""JSON-RPC 2.0 dispatch for protocol v9, independent of how bytes travel."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from reference_host.errors import HostError
from reference_host.framing import Frame, OversizedFrame
from reference_host.jsontext import JsonTextError, dumps, integral, is_finite, loads
from reference_host.validation import params_problem

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], None]

log = logging.getLogger(__name__)


def encode(message: Mapping[str, Any]) -> bytes:
    """One compact UTF-8 JSON line, newline excluded; ValueError for NaN or infinity.

    Text holding a lone surrogate (echoed from a client) cannot be UTF-8; it is then
    written with ASCII escapes, which is still valid JSON.
    """
    try:
        return dumps(message).encode("utf-8")
    except UnicodeEncodeError:
        return dumps(message, ascii_only=True).encode("ascii")


def _error(request_id: Any, error: HostError) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": error.jsonrpc_code, "message": error.message, "data": error.to_data()},
    }


def _valid_id(value: Any) -> bool:
    if isinstance(value, str):
        return value != "" and value.isprintable() and _encodable(value)
    return isinstance(value, int) and not isinstance(value, bool)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class Dispatcher:
    """Turns request frames into handler calls and responses.

    Requests are handled one at a time in arrival order, which keeps the host's answers
    deterministic (two approvals sent back to back are decided in the order sent).
    """

    def __init__(self, send: Send) -> None:
        self._handlers: dict[str, Handler] = {}
        self._send = send
        self.initialized = False

    def register(self, handlers: Mapping[str, Handler]) -> None:
        """Add method handlers."""
        self._handlers.update(handlers)

    def notify(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification to the client (never one that is not valid JSON)."""
        if not is_finite(params):
            log.error("dropped %s: its params hold a number that is not JSON", method)
            return
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def handle(self, frame: Frame) -> None:
        """Process one frame and send its response, if it needs one."""
        if isinstance(frame, OversizedFrame):
            self._send(
                _error(
                    None,
                    HostError(
                        "FRAME_TOO_LARGE",
                        f"frame longer than {frame.limit} bytes was discarded",
                        {"maxFrameBytes": frame.limit},
                    ),
                )
            )
            return
        if not frame.strip():
            return  # blank lines between frames are ignored
        try:
            message = loads(frame.decode("utf-8"))
        except (UnicodeDecodeError, JsonTextError) as exc:
            self._send(_error(None, HostError("PARSE_ERROR", f"not valid UTF-8 JSON: {exc}")))
            return
        except RecursionError:
            self._send(_error(None, HostError("PARSE_ERROR", "JSON nested too deeply")))
            return
        request_id = message.get("id") if isinstance(message, dict) else None
        problem = self._envelope_problem(message)
        if problem is not None:
            reply_id = request_id if _valid_id(request_id) else None
            self._send(_error(reply_id, HostError("INVALID_REQUEST", problem)))
            return
        if "id" not in message:
            log.warning("ignoring client notification %s", message["method"])
            return
        try:
            result = await self._call(message["method"], message.get("params", {}))
        except HostError as error:
            self._send(_error(request_id, error))
            return
        except Exception:
            log.exception("internal error in %s", message["method"])
            failure = HostError("INTERNAL_ERROR", f"{message['method']} failed inside the host")
            self._send(_error(request_id, failure))
            return
        if not is_finite(result):
            log.error("%s produced a number that is not JSON", message["method"])
            failure = HostError("INTERNAL_ERROR", f"{message['method']} failed inside the host")
            self._send(_error(request_id, failure))
            return
        self._send({"jsonrpc": "2.0", "id": request_id, "result": result})

    @staticmethod
    def _envelope_problem(message: Any) -> str | None:
        if not isinstance(message, dict):
            return "a message must be a JSON object (batches are not supported)"
        if message.get("jsonrpc") != "2.0":
            return 'jsonrpc must be "2.0"'
        if not isinstance(message.get("method"), str) or not message["method"]:
            return "method must be a non-empty string"
        if "id" in message and not _valid_id(message["id"]):
            return "id must be an integer or a non-empty string"
        if "params" in message and not isinstance(message["params"], dict):
            return "params must be an object"
        extra = set(message) - {"jsonrpc", "id", "method", "params"}
        if extra:
            return f"unexpected envelope members: {sorted(extra)}"
        return None

    async def _call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method != "initialize" and not self.initialized:
            raise HostError("NOT_INITIALIZED", "send initialize first")
        handler = self._handlers.get(method)
        if handler is None:
            raise HostError("METHOD_NOT_FOUND", f"no method named {method!r}")
        problem = params_problem(method, params)
        if problem is not None:
            raise HostError("INVALID_PARAMS", problem)
        return await handler(integral(params))
