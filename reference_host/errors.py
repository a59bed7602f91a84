"""Canonical host errors: a code from the published catalog plus a readable message."""

from __future__ import annotations

from typing import Any

from pi_contract import error_catalog


class HostError(Exception):
    """An error the host reports to the client with a canonical ``data.code``."""

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        if code not in error_catalog():
            raise ValueError(f"{code} is not in the published error catalog")
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details

    @property
    def jsonrpc_code(self) -> int:
        """The JSON-RPC integer code the catalog assigns to this canonical code."""
        return int(error_catalog()[self.code]["jsonrpcCode"])

    def to_data(self) -> dict[str, Any]:
        """The ``ErrorData`` object of protocol v9."""
        data: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            data["details"] = self.details
        return data


def tool_result_status(code: str) -> str | None:
    """The status ("denied" or "error") the catalog fixes for a tool result with ``code``,
    or None when the code cannot appear in a tool result."""
    status = error_catalog()[code].get("toolResultStatus")
    return str(status) if status is not None else None
