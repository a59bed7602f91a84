"""The HTTP transport that reaches model providers, with TLS set up only when needed."""

from __future__ import annotations

import httpx


class ProviderTransport(httpx.AsyncBaseTransport):
    """Sends ``http`` requests through a plain connection pool and ``https`` requests
    through a certificate-verifying one, each built on first use.

    Building a verifying pool loads the CA bundle, tens of milliseconds of CPU; a host
    whose providers all speak plain ``http`` (a model server on the same machine, the
    conformance suite's mock provider) never pays for it. Environment proxies are ignored.
    """

    def __init__(self) -> None:
        self._pools: dict[str, httpx.AsyncHTTPTransport] = {}

    def _pool(self, scheme: str) -> httpx.AsyncHTTPTransport:
        if scheme not in self._pools:
            # A plain-http pool never negotiates TLS, so it needs no certificates; every
            # other scheme verifies (or is refused by httpx as unsupported).
            self._pools[scheme] = httpx.AsyncHTTPTransport(verify=scheme != "http", trust_env=False)
        return self._pools[scheme]

    @property
    def schemes(self) -> tuple[str, ...]:
        """The schemes whose pool has been built, in order of first use."""
        return tuple(self._pools)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` through the pool of its scheme."""
        return await self._pool(request.url.scheme).handle_async_request(request)

    async def aclose(self) -> None:
        """Close every pool built so far."""
        for pool in self._pools.values():
            await pool.aclose()
