"""Per-scenario state: the host under test, its client, the workspace and what happened."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.client import HostClient, RpcError
from conformance.contract import Violation
from conformance.drivers import HostDriver, RunningHost
from conformance.mock_provider import MockProvider
from conformance.storage_inspector import StorageInspector


@dataclass
class Outcome:
    """The result of the last action a step performed: a result or a canonical error."""

    result: dict[str, Any] | None = None
    error: RpcError | None = None

    @classmethod
    def from_response(cls, method: str, response: dict[str, Any]) -> Outcome:
        """The outcome carried by a raw JSON-RPC response."""
        error = response.get("error")
        if isinstance(error, dict):
            data = error.get("data")
            return cls(
                error=RpcError(
                    method,
                    int(error.get("code", 0)),
                    str(error.get("message")),
                    data if isinstance(data, dict) else {},
                )
            )
        result = response.get("result")
        return cls(result=result if isinstance(result, dict) else {})

    def require_error(self) -> RpcError:
        """The error, or an assertion failure naming the unexpected success."""
        assert self.error is not None, f"expected the host to refuse, but it answered {self.result}"
        return self.error

    def require_result(self) -> dict[str, Any]:
        """The result, or an assertion failure naming the unexpected error."""
        assert self.error is None, f"expected success, but the host refused: {self.error}"
        assert self.result is not None
        return self.result


@dataclass
class World:
    """Everything one scenario works with. Created fresh for every scenario."""

    driver: HostDriver
    data_dir: Path
    workspace: Path
    timeout: float
    provider: MockProvider
    host: RunningHost | None = None
    client: HostClient | None = None
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    outcome: Outcome = field(default_factory=Outcome)
    retired_violations: list[Violation] = field(default_factory=list)
    retired_messages: list[Any] = field(default_factory=list)
    stderr_log: list[str] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)

    # -- host lifecycle -----------------------------------------------------------------

    def start_host(self) -> RunningHost:
        """Start a host on this scenario's data dir (stopping none: call stop first)."""
        assert self.host is None, "a host is already running"
        self.host = self.driver.start(self.data_dir)
        self.client = HostClient(self.host, self.timeout)
        return self.host

    def stop_host(self, crash: bool = False) -> int | None:
        """Stop the host (cleanly, or abruptly with ``crash``) and keep its logs."""
        if self.host is None:
            return None
        status: int | None = None
        if crash:
            self.host.crash()
        else:
            status = self.host.stop()
        if self.client is not None:
            self.client.close()
            self.retired_violations.extend(self.client.violations)
            self.retired_messages.extend(self.client.received)
        self.stderr_log.append(self.host.stderr_text())
        self.host = None
        self.client = None
        return status

    @property
    def rpc(self) -> HostClient:
        """The connected client."""
        assert self.client is not None, "no host is running"
        return self.client

    def connect(self) -> dict[str, Any]:
        """Start a host if needed and perform the v9 handshake."""
        if self.host is None:
            self.start_host()
        return self.rpc.initialize()

    def attempt(self, method: str, params: dict[str, Any] | None = None) -> Outcome:
        """Send a request and record its result or canonical error as the outcome."""
        try:
            self.outcome = Outcome(result=self.rpc.request(method, params))
        except RpcError as error:
            self.outcome = Outcome(error=error)
        return self.outcome

    # -- observations -------------------------------------------------------------------

    def violations(self) -> list[Violation]:
        """Every contract violation seen in this scenario, across restarts."""
        live = self.client.violations if self.client is not None else []
        return [*self.retired_violations, *live]

    def host_messages(self) -> list[Any]:
        """Every message any host process of this scenario sent, in order."""
        live = self.client.received if self.client is not None else []
        return [*self.retired_messages, *live]

    def restart(self, crash: bool = False) -> dict[str, Any]:
        """Stop the host (abruptly with ``crash``), start a new one on the same data dir,
        and open the connection."""
        self.stop_host(crash=crash)
        self.provider.release_stalls()
        self.start_host()
        return self.rpc.initialize()

    def stderr(self) -> str:
        """All host stderr of this scenario."""
        live = [self.host.stderr_text()] if self.host is not None else []
        return "\n".join([*self.stderr_log, *live])

    def storage(self) -> StorageInspector:
        """A read-only view of the host's database."""
        return StorageInspector(self.data_dir)

    def close(self) -> None:
        """Stop everything this scenario started."""
        with contextlib.suppress(Exception):
            self.stop_host()
