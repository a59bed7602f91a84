"""A real web page on 127.0.0.1 for BrowserPreview to fetch, counting the requests it gets."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["LocalPage"]


class LocalPage:
    """Serves ``text`` as an HTML page at :attr:`url` until :meth:`close`."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.paths: list[str] = []
        page = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                page.paths.append(self.path)
                body = f"<html><body><p>{page.text}</p></body></html>".encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="local-page", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        """The page's address."""
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}/preview/index.html"

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
