"""BrowserPreview: fetch a loopback URL (a local dev server) and return its text.

Only ``http``/``https`` URLs whose host is ``localhost``, an address in 127.0.0.0/8, or
``::1`` (also IPv4-mapped ``::ffff:127.x.x.x``) are fetched; anything else raises
BROWSER_PREVIEW_REFUSED before any name lookup or connection. Redirects are followed by hand
(at most MAX_REDIRECTS, always with GET) and every hop is checked the same way, so a
redirect to a non-loopback host is refused without contacting it. Environment proxies are
ignored. A URL that cannot be parsed raises INVALID_TOOL_INPUT. A connection failure, the
10-second overall timeout or too many redirects raise TOOL_FAILED with the reason: the URL
was a loopback URL, so it is not a refusal, but fetching it failed.
"""

from __future__ import annotations

import asyncio
import codecs
import ipaddress
from typing import Any, Final

import httpx

from reference_host.errors import HostError
from reference_host.provider_client import ToolSpec
from reference_host.tools.base import ToolContext, validate_args

__all__ = ["MAX_BODY_BYTES", "MAX_REDIRECTS", "TIMEOUT_SECONDS", "BrowserPreview", "is_loopback"]

TIMEOUT_SECONDS: Final = 10.0
MAX_REDIRECTS: Final = 10
MAX_BODY_BYTES: Final = 64 * 1024


def is_loopback(host: str) -> bool:
    """Whether ``host`` (as httpx parses it, no brackets) is ``localhost`` or a loopback IP."""
    if host.lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def _checked_url(text: str) -> httpx.URL:
    """``text`` parsed, or INVALID_TOOL_INPUT; BROWSER_PREVIEW_REFUSED unless loopback HTTP."""
    try:
        url = httpx.URL(text)
    except httpx.InvalidURL as exc:
        raise HostError("INVALID_TOOL_INPUT", f"BrowserPreview: url: {exc}", {"url": text}) from exc
    if url.scheme not in ("http", "https") or not is_loopback(url.host):
        raise HostError(
            "BROWSER_PREVIEW_REFUSED",
            f"BrowserPreview only fetches http(s) URLs on a loopback host, not {text!r}",
            {"url": text},
        )
    return url


async def _capped_text(response: httpx.Response) -> str:
    """The decoded body, cut at MAX_BODY_BYTES with a marker when longer."""
    data = bytearray()
    async for chunk in response.aiter_bytes():
        data += chunk
        if len(data) > MAX_BODY_BYTES:
            break
    truncated = len(data) > MAX_BODY_BYTES
    encoding = response.charset_encoding or "utf-8"
    try:
        decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
    except LookupError:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    text = decoder.decode(bytes(data[:MAX_BODY_BYTES]), final=not truncated)
    if truncated:
        text += f"\n\n[truncated: only the first {MAX_BODY_BYTES} bytes are shown]"
    return text


class BrowserPreview:
    """Fetch a page from a local (loopback) server."""

    name: Final = "BrowserPreview"
    spec: Final = ToolSpec(
        name="BrowserPreview",
        description=(
            "Fetch a page from a server on this machine (localhost, 127.0.0.0/8 or ::1) and "
            "return its HTTP status and text; other hosts are refused."
        ),
        parameters={
            "type": "object",
            "properties": {
                "url": {
                    "type": "string",
                    "minLength": 1,
                    "description": "An http(s) URL on a loopback host.",
                }
            },
            "required": ["url"],
            "additionalProperties": False,
        },
    )

    async def run(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        """``status: <code>`` then a blank line and the body text (at most 64 KiB)."""
        args = validate_args(self.spec, args)
        url = _checked_url(args["url"])
        try:
            async with (
                asyncio.timeout(TIMEOUT_SECONDS),
                httpx.AsyncClient(
                    timeout=TIMEOUT_SECONDS, follow_redirects=False, trust_env=False
                ) as client,
            ):
                for _ in range(MAX_REDIRECTS + 1):
                    async with client.stream("GET", url) as response:
                        if response.has_redirect_location:
                            url = _checked_url(str(url.join(response.headers["location"])))
                            continue
                        text = await _capped_text(response)
                        return f"status: {response.status_code}\n\n{text}"
        except TimeoutError as exc:
            raise HostError(
                "TOOL_FAILED",
                f"BrowserPreview: {url} did not answer within {TIMEOUT_SECONDS:g} s",
                {"url": str(url)},
            ) from exc
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            reason = str(exc) or type(exc).__name__
            raise HostError(
                "TOOL_FAILED",
                f"BrowserPreview: fetching {url} failed: {reason}",
                {"url": str(url)},
            ) from exc
        raise HostError(
            "TOOL_FAILED",
            f"BrowserPreview: more than {MAX_REDIRECTS} redirects starting at {args['url']}",
            {"url": args["url"]},
        )
