"""The host's provider transport: plain http costs no TLS set-up, https verifies."""

from __future__ import annotations

import asyncio
import ssl

import httpx
import pytest
import trustme

from conformance.mock_provider import MockProvider, TextReply
from reference_host.provider_client import ProviderConfig, complete
from reference_host.provider_transport import ProviderTransport

MESSAGES = [{"role": "user", "content": "Say hello."}]


def test_a_plain_http_provider_is_reached_without_building_a_tls_pool() -> None:
    transport = ProviderTransport()

    async def main() -> str:
        async with httpx.AsyncClient(transport=transport) as client:
            config = ProviderConfig(base_url=provider.base_url, model="m", api_key=None)
            reply = await complete(client, config, MESSAGES, (), None, timeout=5.0)
            return reply.text

    with MockProvider() as provider:
        provider.enqueue(TextReply("Hello."))
        assert asyncio.run(main()) == "Hello."
    assert transport.schemes == ("http",)


def test_an_https_provider_must_present_a_trusted_certificate() -> None:
    authority = trustme.CA()  # trusted by nobody but the server that uses it
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(server_context)

    async def main() -> None:
        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=server_context)
        port = server.sockets[0].getsockname()[1]
        transport = ProviderTransport()
        try:
            async with httpx.AsyncClient(transport=transport) as client:
                with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                    await client.get(f"https://127.0.0.1:{port}/")
        finally:
            server.close()
        assert transport.schemes == ("https",)

    asyncio.run(main())
