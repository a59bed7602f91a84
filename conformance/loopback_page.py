"""A real web page for BrowserPreview to fetch, counting the requests it gets.

It is served on 127.0.0.1, or on this machine's own network address (not loopback) for the
check that BrowserPreview refuses every host but loopback.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["LocalPage", "network_address"]

# Addresses only used to pick the interface of a route; a UDP "connect" sends no packet.
_ROUTE_PROBES = (("192.0.2.1", 9), ("198.51.100.1", 9), ("10.255.255.254", 9))


def network_address() -> str | None:
    """An IPv4 address of this machine that is not loopback, or None when it has none."""
    candidates: list[str] = []
    for probe in _ROUTE_PROBES:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            try:
                udp.connect(probe)
            except OSError:
                continue
            candidates.append(str(udp.getsockname()[0]))
    with contextlib.suppress(OSError):
        candidates.append(socket.gethostbyname(socket.gethostname()))
    for candidate in candidates:
        address = ipaddress.ip_address(candidate)
        if not (address.is_loopback or address.is_unspecified):
            return candidate
    return None


class LocalPage:
    """Serves ``text`` as an HTML page at :attr:`url`, on ``host``, until :meth:`close`;
    with ``redirect_to``, answers every request with a redirect there instead."""

    def __init__(self, text: str, host: str = "127.0.0.1", redirect_to: str | None = None) -> None:
        self.text = text
        self.host = host
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []  # each request's headers, in order
        page = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                page.paths.append(self.path)
                page.headers.append(dict(self.headers.items()))
                if redirect_to is not None:
                    self.send_response(302)
                    self.send_header("Location", redirect_to)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = f"<html><body><p>{page.text}</p></body></html>".encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return

        self._server = ThreadingHTTPServer((host, 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="local-page", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        """The page's address."""
        port = self._server.server_address[1]
        return f"http://{self.host}:{port}/preview/index.html"

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
