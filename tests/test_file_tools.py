"""Tests of the model-facing file tools and BrowserPreview on real files and a loopback server."""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from reference_host.errors import HostError
from reference_host.tools.base import Tool, ToolContext, validate_args
from reference_host.tools.browser import MAX_BODY_BYTES, BrowserPreview, is_loopback
from reference_host.tools.files import GREP_MAX_MATCHES, NO_MATCHES, Edit, Glob, Grep, Read, Write
from reference_host.tools.registry import FILE_TOOLS, by_name
from reference_host.workspace import require_root, resolve_inside

# --- helpers -------------------------------------------------------------------------------


def ctx_for(root: Path | None) -> ToolContext:
    return ToolContext(session_id="s1", turn_id="t1", workspace_root=root)


def call(tool: Tool, root: Path | None, **args: Any) -> str:
    return asyncio.run(tool.run(ctx_for(root), args))


def error_of(tool: Tool, root: Path | None, **args: Any) -> HostError:
    with pytest.raises(HostError) as caught:
        call(tool, root, **args)
    return caught.value


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.txt").write_text("top secret\n")
    return out


def snapshot(directory: Path) -> dict[str, bytes]:
    return {
        p.relative_to(directory).as_posix(): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


# --- network observation: a process-wide audit hook, recording only while armed -------------

_net_events: list[tuple[str, tuple[Any, ...]]] | None = None


def _audit(event: str, args: tuple[Any, ...]) -> None:
    recording = _net_events
    if recording is not None and event in ("socket.connect", "socket.getaddrinfo"):
        recording.append((event, args))


sys.addaudithook(_audit)


@contextmanager
def network_events() -> Iterator[list[tuple[str, tuple[Any, ...]]]]:
    global _net_events
    events: list[tuple[str, tuple[Any, ...]]] = []
    _net_events = events
    try:
        yield events
    finally:
        _net_events = None


def contacted_hosts(events: list[tuple[str, tuple[Any, ...]]]) -> set[str]:
    hosts: set[str] = set()
    for event, args in events:
        if event == "socket.getaddrinfo":
            hosts.add(str(args[0]))
        elif isinstance(args[1], tuple):
            hosts.add(str(args[1][0]))
    return hosts


# --- loopback server ---------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        routes = {
            "/hello": (200, "text/html; charset=utf-8", "<h1>héllo</h1>".encode()),
            "/missing": (404, "text/plain", b"not here"),
            "/big": (200, "text/plain", b"x" * (MAX_BODY_BYTES + 5000)),
        }
        if self.path == "/to-hello":
            self._redirect("/hello")
        elif self.path == "/to-outside":
            self._redirect("http://10.0.0.1/hello")
        elif self.path == "/to-example":
            self._redirect("http://example.com/")
        elif self.path == "/loop":
            self._redirect("/loop")
        else:
            status, ctype, body = routes.get(self.path, (404, "text/plain", b"?"))
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def _redirect(self, location: str) -> None:
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


# --- registry and argument validation ----------------------------------------------------------


def test_registry_names_and_schemas() -> None:
    assert [tool.name for tool in FILE_TOOLS] == [
        "Read",
        "Glob",
        "Grep",
        "BrowserPreview",
        "Write",
        "Edit",
    ]
    tools = by_name()
    assert set(tools) == {"Read", "Glob", "Grep", "BrowserPreview", "Write", "Edit"}
    for name, tool in tools.items():
        assert tool.spec.name == name
        assert tool.spec.parameters["additionalProperties"] is False
        assert tool.spec.description


def test_validate_args_names_the_field(ws: Path) -> None:
    read = Read()
    with pytest.raises(HostError) as caught:
        validate_args(read.spec, {"path": "a", "offset": "x"})
    assert caught.value.code == "INVALID_TOOL_INPUT"
    assert "offset" in caught.value.message
    with pytest.raises(HostError) as caught:
        validate_args(read.spec, {"path": "a", "bogus": 1})
    assert "bogus" in caught.value.message
    with pytest.raises(HostError) as caught:
        validate_args(read.spec, ["a"])
    assert caught.value.code == "INVALID_TOOL_INPUT"
    assert error_of(read, ws).code == "INVALID_TOOL_INPUT"
    assert "path" in error_of(read, ws).message
    assert error_of(Edit(), ws, path="a", old_string="x", new_string=1).code == (
        "INVALID_TOOL_INPUT"
    )


# --- Read --------------------------------------------------------------------------------------


def test_read_whole_and_ranges(ws: Path) -> None:
    (ws / "a.txt").write_bytes(b"one\r\ntwo\nthree\nfour")
    assert call(Read(), ws, path="a.txt") == "one\r\ntwo\nthree\nfour"
    assert call(Read(), ws, path="a.txt", offset=2, limit=2) == "two\nthree\n"
    assert call(Read(), ws, path="a.txt", offset=4) == "four"
    assert call(Read(), ws, path="a.txt", limit=1) == "one\r\n"
    assert call(Read(), ws, path="a.txt", offset=9) == ""
    assert call(Read(), ws, path=str(ws / "a.txt")) == "one\r\ntwo\nthree\nfour"


def test_read_replaces_invalid_utf8_and_reports_missing(ws: Path) -> None:
    (ws / "bad.bin").write_bytes(b"ok \xff\xfe end")
    assert call(Read(), ws, path="bad.bin") == "ok \ufffd\ufffd end"
    assert error_of(Read(), ws, path="nope.txt").code == "FILE_NOT_FOUND"
    (ws / "d").mkdir()
    assert error_of(Read(), ws, path="d").code == "INVALID_TOOL_INPUT"


# --- Glob --------------------------------------------------------------------------------------


def test_glob_matches_sorted_relative_paths(ws: Path, outside: Path) -> None:
    for rel in ["b.py", "a.py", "pkg/x.py", "pkg/deep/y.py", "pkg/z.txt", ".git/hook.py"]:
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text("")
    (outside / "leak.py").write_text("")
    (ws / "linkdir").symlink_to(outside, target_is_directory=True)
    (ws / "linked.py").symlink_to(outside / "leak.py")
    (ws / "inner.py").symlink_to(ws / "a.py")
    assert call(Glob(), ws, pattern="**/*.py").splitlines() == [
        "a.py",
        "b.py",
        "inner.py",
        "pkg/deep/y.py",
        "pkg/x.py",
    ]
    assert call(Glob(), ws, pattern="*.py").splitlines() == ["a.py", "b.py", "inner.py"]
    assert call(Glob(), ws, pattern="pkg/*").splitlines() == ["pkg/x.py", "pkg/z.txt"]
    assert call(Glob(), ws, pattern="pkg/**/y.py") == "pkg/deep/y.py"
    assert call(Glob(), ws, pattern="*.rs") == NO_MATCHES


def test_glob_patterns_reaching_outside_are_refused(ws: Path) -> None:
    assert error_of(Glob(), ws, pattern="../*").code == "PATH_OUTSIDE_WORKSPACE"
    assert error_of(Glob(), ws, pattern="/etc/*").code == "PATH_OUTSIDE_WORKSPACE"


# --- Grep --------------------------------------------------------------------------------------


def test_grep_finds_lines_with_glob_filter(ws: Path, outside: Path) -> None:
    (ws / "src").mkdir()
    (ws / "src" / "m.py").write_bytes(b"import os\r\nTODO: fix\nx = 1\n")
    (ws / "notes.md").write_text("TODO later\n")
    (ws / "blob.bin").write_bytes(b"TODO\0\0")
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("TODO\n")
    (outside / "o.txt").write_text("TODO outside\n")
    (ws / "link.txt").symlink_to(outside / "o.txt")
    assert call(Grep(), ws, pattern=r"TODO").splitlines() == [
        "notes.md:1:TODO later",
        "src/m.py:2:TODO: fix",
    ]
    assert call(Grep(), ws, pattern=r"^TODO", glob="**/*.py") == "src/m.py:2:TODO: fix"
    assert call(Grep(), ws, pattern="import", glob="*.py") == NO_MATCHES
    assert call(Grep(), ws, pattern=r"os$") == "src/m.py:1:import os"


def test_grep_invalid_regex_and_cap(ws: Path) -> None:
    err = error_of(Grep(), ws, pattern="(unclosed")
    assert err.code == "INVALID_TOOL_INPUT"
    assert "regular expression" in err.message
    (ws / "many.txt").write_text("hit\n" * (GREP_MAX_MATCHES + 100))
    lines = call(Grep(), ws, pattern="hit").splitlines()
    assert len(lines) == GREP_MAX_MATCHES + 1
    assert lines[0] == "many.txt:1:hit"
    assert lines[GREP_MAX_MATCHES - 1] == f"many.txt:{GREP_MAX_MATCHES}:hit"
    assert "capped" in lines[-1]


# --- Write and Edit ----------------------------------------------------------------------------


def test_write_exact_bytes_and_parent_dirs(ws: Path) -> None:
    content = "line one\r\nline two\nünï\r\n"
    result = call(Write(), ws, path="new/dir/f.txt", content=content)
    assert (ws / "new" / "dir" / "f.txt").read_bytes() == content.encode()
    assert "new/dir/f.txt" in result
    call(Write(), ws, path="new/dir/f.txt", content="")
    assert (ws / "new" / "dir" / "f.txt").read_bytes() == b""
    call(Write(), ws, path=str(ws / "abs.txt"), content="a")
    assert (ws / "abs.txt").read_bytes() == b"a"
    assert error_of(Write(), ws, path="new", content="x").code == "INVALID_TOOL_INPUT"
    assert error_of(Write(), ws, path="x.txt", content="\ud800").code == "INVALID_TOOL_INPUT"


def test_write_through_symlink_inside_workspace_is_allowed(ws: Path) -> None:
    (ws / "real.txt").write_text("old")
    (ws / "alias.txt").symlink_to(ws / "real.txt")
    call(Write(), ws, path="alias.txt", content="new")
    assert (ws / "real.txt").read_text() == "new"
    assert (ws / "alias.txt").is_symlink()


def test_edit_unique_replace_all_and_ambiguity(ws: Path) -> None:
    path = ws / "e.txt"
    path.write_bytes(b"alpha\r\nbeta\r\nalpha\r\n")
    err = error_of(Edit(), ws, path="e.txt", old_string="alpha", new_string="A")
    assert err.code == "INVALID_TOOL_INPUT"
    assert "2 times" in err.message
    assert path.read_bytes() == b"alpha\r\nbeta\r\nalpha\r\n"
    call(Edit(), ws, path="e.txt", old_string="beta", new_string="B\nb")
    assert path.read_bytes() == b"alpha\r\nB\nb\r\nalpha\r\n"
    result = call(Edit(), ws, path="e.txt", old_string="alpha", new_string="Ω", replace_all=True)
    assert "2 occurrences" in result
    assert path.read_bytes() == "Ω\r\nB\nb\r\nΩ\r\n".encode()
    assert error_of(Edit(), ws, path="e.txt", old_string="zzz", new_string="y").code == (
        "EDIT_NO_MATCH"
    )
    assert error_of(Edit(), ws, path="none.txt", old_string="a", new_string="b").code == (
        "FILE_NOT_FOUND"
    )
    (ws / "latin1.txt").write_bytes(b"caf\xe9")
    assert error_of(Edit(), ws, path="latin1.txt", old_string="caf", new_string="x").code == (
        "INVALID_TOOL_INPUT"
    )
    assert (ws / "latin1.txt").read_bytes() == b"caf\xe9"


# --- escapes -----------------------------------------------------------------------------------


def test_path_escapes_are_refused_and_nothing_is_written_outside(
    ws: Path, outside: Path, tmp_path: Path
) -> None:
    (ws / "escape").symlink_to(outside, target_is_directory=True)
    (ws / "secret-link.txt").symlink_to(outside / "secret.txt")
    (ws / "dangling.txt").symlink_to(outside / "created-by-link.txt")
    before = snapshot(outside)
    existing_outside = [
        "../outside/secret.txt",
        str(outside / "secret.txt"),
        "escape/secret.txt",
        "secret-link.txt",
    ]
    new_outside = ["../x", "sub/../../x", str(tmp_path / "x"), "escape/new.txt", "dangling.txt"]
    for rel in existing_outside + new_outside:
        assert error_of(Write(), ws, path=rel, content="pwned").code == "PATH_OUTSIDE_WORKSPACE"
        assert error_of(Read(), ws, path=rel).code == "PATH_OUTSIDE_WORKSPACE"
    for rel in existing_outside:
        err = error_of(Edit(), ws, path=rel, old_string="top", new_string="pwned")
        assert err.code == "PATH_OUTSIDE_WORKSPACE"
    assert snapshot(outside) == before
    assert not (tmp_path / "x").exists()
    assert not (ws / "sub").exists()


def test_resolve_inside_and_require_root(ws: Path, outside: Path) -> None:
    assert resolve_inside(ws, "a/b.txt", must_exist=False) == ws.resolve() / "a" / "b.txt"
    assert resolve_inside(ws, "", must_exist=True) == ws.resolve()
    with pytest.raises(HostError) as caught:
        resolve_inside(ws, "a/b.txt", must_exist=True)
    assert caught.value.code == "FILE_NOT_FOUND"
    (ws / "loop").symlink_to(ws / "loop")
    with pytest.raises(HostError) as caught:
        resolve_inside(ws, "loop", must_exist=False)
    assert caught.value.code == "INVALID_TOOL_INPUT"
    # A root reached through a symlink still works, and paths under the alias are inside.
    alias = outside / "ws-alias"
    alias.symlink_to(ws, target_is_directory=True)
    assert require_root(alias) == ws.resolve()
    assert resolve_inside(alias, str(alias / "f"), must_exist=False) == ws.resolve() / "f"
    with pytest.raises(HostError) as caught:
        require_root(Path("relative/root"))
    assert caught.value.code == "WORKSPACE_INVALID"


def test_session_without_workspace_and_vanished_root(ws: Path) -> None:
    calls: list[tuple[Tool, dict[str, Any]]] = [
        (Read(), {"path": "a"}),
        (Glob(), {"pattern": "*"}),
        (Grep(), {"pattern": "x"}),
        (Write(), {"path": "a", "content": ""}),
        (Edit(), {"path": "a", "old_string": "x", "new_string": "y"}),
    ]
    for tool, args in calls:
        assert error_of(tool, None, **args).code == "WORKSPACE_REQUIRED"
    ws.rmdir()
    assert error_of(Read(), ws, path="a").code == "WORKSPACE_INVALID"
    assert error_of(Write(), ws, path="a", content="x").code == "WORKSPACE_INVALID"
    assert not ws.exists()


# --- BrowserPreview ----------------------------------------------------------------------------


def test_is_loopback() -> None:
    for host in ["localhost", "LOCALHOST", "127.0.0.1", "127.9.8.7", "::1", "::ffff:127.0.0.1"]:
        assert is_loopback(host), host
    for host in ["example.com", "10.0.0.1", "0.0.0.0", "::", "localhost.example.com", "127.1"]:
        assert not is_loopback(host), host


def test_browser_preview_fetches_loopback(server: str) -> None:
    assert call(BrowserPreview(), None, url=f"{server}/hello") == "status: 200\n\n<h1>héllo</h1>"
    assert call(BrowserPreview(), None, url=f"{server}/missing") == "status: 404\n\nnot here"
    assert call(BrowserPreview(), None, url=f"{server}/to-hello").startswith("status: 200\n\n<h1>")
    port = server.rsplit(":", 1)[1]
    assert call(BrowserPreview(), None, url=f"http://localhost:{port}/hello").startswith(
        "status: 200"
    )


def test_browser_preview_truncates(server: str) -> None:
    text = call(BrowserPreview(), None, url=f"{server}/big")
    head, _, body = text.partition("\n\n")
    assert head == "status: 200"
    assert body.startswith("x" * MAX_BODY_BYTES + "\n\n[truncated")


@pytest.mark.parametrize(
    "url", ["http://example.com/", "http://10.0.0.1/", "https://10.0.0.1:8443/x", "file:///etc"]
)
def test_browser_preview_refuses_before_connecting(url: str) -> None:
    with network_events() as events:
        err = error_of(BrowserPreview(), None, url=url)
    assert err.code == "BROWSER_PREVIEW_REFUSED"
    assert events == []


@pytest.mark.parametrize("path", ["/to-outside", "/to-example"])
def test_browser_preview_refuses_redirect_off_loopback(server: str, path: str) -> None:
    with network_events() as events:
        err = error_of(BrowserPreview(), None, url=f"{server}{path}")
    assert err.code == "BROWSER_PREVIEW_REFUSED"
    assert contacted_hosts(events) == {"127.0.0.1"}


def test_browser_preview_connection_failures(server: str) -> None:
    err = error_of(BrowserPreview(), None, url=f"{server}/loop")
    assert err.code == "TOOL_FAILED"
    assert "redirects" in err.message
    # A loopback port with nothing listening: bind one, then close it.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free_port = probe.getsockname()[1]
    err = error_of(BrowserPreview(), None, url=f"http://127.0.0.1:{free_port}/")
    assert err.code == "TOOL_FAILED"
    assert error_of(BrowserPreview(), None, url="http://[::1/").code == "INVALID_TOOL_INPUT"
