"""Drive the system's headless Chromium through the DevTools protocol, over a pipe.

Chromium started with ``--remote-debugging-pipe`` reads protocol commands from its file
descriptor 3 and writes answers and events to descriptor 4, each message a JSON text
ended by a NUL byte. That needs no port, no network and no driver binary: only the
``chromium`` package. The tests use it to load a report as a reader would, click on it
with real mouse events and take screenshots.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import queue
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

CHROMIUM_NAMES = ("chromium", "chromium-browser")
INSTALL_HINT = "install it with: apt-get install -y chromium (as .ci/run does)"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--remote-debugging-pipe",
)
TIMEOUT_S = 30.0
# A cold Chromium on a busy CI machine can take longer than that to answer its first command.
STARTUP_TIMEOUT_S = 120.0


def find_chromium() -> str | None:
    """The Chromium executable on PATH, if any."""
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


class BrowserError(RuntimeError):
    """Chromium answered a command with an error, or not in time."""


class Chromium:
    """One headless Chromium process with one page attached."""

    def __init__(self, executable: str, profile: Path, width: int = 1280, height: int = 900):
        commands_read, self._commands = os.pipe()  # we write, Chromium reads fd 3
        self._answers, answers_write = os.pipe()  # Chromium writes fd 4, we read

        def remap() -> None:  # runs in the child, before exec
            # Move both ends out of the way first, so neither lands on the other's place.
            high_in = fcntl.fcntl(commands_read, fcntl.F_DUPFD_CLOEXEC, 10)
            high_out = fcntl.fcntl(answers_write, fcntl.F_DUPFD_CLOEXEC, 10)
            os.dup2(high_in, 3)  # inheritable: Chromium reads its commands here
            os.dup2(high_out, 4)  # and writes its answers here

        self.process = subprocess.Popen(
            [
                executable,
                *FLAGS,
                f"--user-data-dir={profile}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # Every other descriptor of this process is close-on-exec (PEP 446), so
            # keeping descriptors open leaks nothing but the two just placed.
            close_fds=False,
            preexec_fn=remap,
        )
        os.close(commands_read)
        os.close(answers_write)
        self._next_id = 0
        self._pending: dict[int, queue.Queue[dict[str, Any]]] = {}
        self._events: queue.Queue[dict[str, Any]] = queue.Queue()
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        self.session = self._attach_page()

    # -- the pipe ---------------------------------------------------------------------

    def _read(self) -> None:
        buffer = b""
        with os.fdopen(self._answers, "rb", buffering=0) as answers:
            while chunk := answers.read(65536):
                buffer += chunk
                *messages, buffer = buffer.split(b"\0")
                for raw in messages:
                    message = json.loads(raw)
                    if "id" in message:
                        with self._lock:
                            waiter = self._pending.pop(message["id"], None)
                        if waiter is not None:
                            waiter.put(message)
                    else:
                        self._events.put(message)

    def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        page: bool = True,
        timeout: float = TIMEOUT_S,
    ) -> Any:
        """Send one command (to the page by default) and wait for its answer."""
        answer: queue.Queue[dict[str, Any]] = queue.Queue(maxsize=1)
        with self._lock:
            self._next_id += 1
            message: dict[str, Any] = {"id": self._next_id, "method": method}
            self._pending[self._next_id] = answer
        message["params"] = params or {}
        if page:
            message["sessionId"] = self.session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        try:
            reply = answer.get(timeout=timeout)
        except queue.Empty:
            raise BrowserError(f"no answer to {method} within {timeout:g} s") from None
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def wait_event(self, method: str) -> dict[str, Any]:
        """The next event called ``method`` of the page (others are dropped)."""
        while True:
            try:
                event = self._events.get(timeout=TIMEOUT_S)
            except queue.Empty:
                raise BrowserError(f"no {method} event within {TIMEOUT_S:g} s") from None
            if event.get("method") == method and event.get("sessionId") == self.session:
                return event.get("params", {})

    def _attach_page(self) -> str:
        targets = self.call("Target.getTargets", page=False, timeout=STARTUP_TIMEOUT_S)[
            "targetInfos"
        ]
        pages = [t for t in targets if t["type"] == "page"]
        target = (
            pages[0]["targetId"]
            if pages
            else self.call("Target.createTarget", {"url": "about:blank"}, page=False)["targetId"]
        )
        attached = self.call(
            "Target.attachToTarget", {"targetId": target, "flatten": True}, page=False
        )
        return str(attached["sessionId"])

    # -- what a test does ---------------------------------------------------------------

    def open(self, url: str) -> None:
        """Load ``url`` and wait until its load event."""
        self.call("Page.enable")
        self.call("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression!r} threw: {result['exceptionDetails']}")
        return result["result"].get("value")

    def click(self, selector: str) -> None:
        """Click the middle of the element, with the mouse, as a reader would."""
        box = self.evaluate(
            f"""(() => {{
                const el = document.querySelector({json.dumps(selector)});
                if (!el) return null;
                el.scrollIntoView({{block: "center"}});
                const r = el.getClientRects()[0];  // the first line of a wrapped link
                if (!r) return null;
                return {{x: r.left + Math.min(r.width / 2, 40), y: r.top + r.height / 2}};
            }})()"""
        )
        if box is None:
            raise BrowserError(f"nothing visible on the page matches {selector!r}")
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": box["x"], "y": box["y"], "button": "left", "clickCount": 1},
            )

    def screenshot(self, target: Path) -> Path:
        """Save a PNG of the viewport."""
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        target.write_bytes(base64.b64decode(data))
        return target

    def close(self) -> None:
        """Close the browser and wait for it to exit."""
        with contextlib.suppress(BrowserError, OSError):
            self.call("Browser.close", page=False)
        try:
            self.process.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        finally:
            os.close(self._commands)
