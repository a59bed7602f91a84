"""Process entry: wires stdio, storage, clock and handlers, then serves until EOF.

``serve`` is the published in-process signature: the harness's in-process driver calls it
on a thread with in-memory pipes, exactly as ``python -m reference_host`` calls it with the
real stdio.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import logging
import signal
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from reference_host.clock import Clock, ManualClock, SystemClock, wall_time_ms
from reference_host.datadir import claim
from reference_host.errors import HostError
from reference_host.framing import DEFAULT_MAX_FRAME_BYTES, Frame, read_frames
from reference_host.options import HostOptions
from reference_host.rpc import Dispatcher, encode
from reference_host.storage import Storage

HANDLERS = "reference_host.host"
EXIT_OK = 0
EXIT_USAGE = 2
EXIT_STORAGE = 3


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="reference_host", description=__doc__)
    parser.add_argument("--data-dir", required=True, type=Path, help="folder of host.db")
    parser.add_argument(
        "--conformance", action="store_true", help="serve conformance/* controls (test only)"
    )
    parser.add_argument(
        "--max-frame-bytes", type=int, default=DEFAULT_MAX_FRAME_BYTES, help=argparse.SUPPRESS
    )
    parser.add_argument("--log-level", default="INFO", help="stderr log level")
    return parser.parse_args(list(argv))


def serve(argv: Sequence[str], stdin: BinaryIO, stdout: BinaryIO, stderr: TextIO) -> int:
    """Run one host on the given streams until stdin ends; return the exit status."""
    try:
        args = _parse(argv)
    except SystemExit as exc:
        return int(exc.code or 0) if isinstance(exc.code, int) else EXIT_USAGE
    handler = logging.StreamHandler(stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("reference_host")
    logger.addHandler(handler)
    logger.setLevel(args.log_level.upper())
    try:
        return asyncio.run(_serve(args, stdin, stdout))
    finally:
        logger.removeHandler(handler)


def _startup_error(error: HostError) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": error.jsonrpc_code, "message": error.message, "data": error.to_data()},
    }


def _refuse(error: HostError, stdout: BinaryIO) -> int:
    """Report a start-up failure and return the exit status."""
    logging.getLogger("reference_host").error("not serving: %s: %s", error.code, error.message)
    # The canonical code also goes to stdout as a JSON-RPC error, so a client waiting for
    # the handshake learns why the host will never serve.
    with contextlib.suppress(OSError, ValueError):
        stdout.write(encode(_startup_error(error)) + b"\n")
        stdout.flush()
    return EXIT_STORAGE


async def _serve(args: argparse.Namespace, stdin: BinaryIO, stdout: BinaryIO) -> int:
    try:
        lock = claim(args.data_dir)
    except HostError as error:
        return _refuse(error, stdout)
    try:
        # The handlers are loaded on a worker thread while the database is opened: creating
        # a database mostly waits for the disk, and loading code mostly does not.
        loading = asyncio.ensure_future(asyncio.to_thread(importlib.import_module, HANDLERS))
        clock: Clock = ManualClock(wall_time_ms()) if args.conformance else SystemClock()
        try:
            storage = await _open_and_recover(args.data_dir, clock)
        except HostError as error:
            return _refuse(error, stdout)
        await loading
        return await _serve_on(args, storage, clock, stdin, stdout)
    finally:
        lock.release()


async def _open_and_recover(data_dir: Path, clock: Clock) -> Storage:
    """Open the database, then run the start-up recovery (§4) before anything is served."""
    storage = await Storage.open(data_dir)
    try:
        interrupted = await storage.recover(clock.now_ms())
    except sqlite3.Error as exc:
        await storage.close()
        raise HostError("STORAGE_UNAVAILABLE", f"the start-up recovery failed: {exc}") from exc
    except BaseException:
        await storage.close()
        raise
    log = logging.getLogger("reference_host")
    log.info("recovery: interrupted %d approvals, %d executions, %d turns", *interrupted)
    return storage


async def _serve_on(
    args: argparse.Namespace, storage: Storage, clock: Clock, stdin: BinaryIO, stdout: BinaryIO
) -> int:
    from reference_host.host import Host  # loaded meanwhile by _serve

    log = logging.getLogger("reference_host")
    loop = asyncio.get_running_loop()
    frames: asyncio.Queue[Frame | None] = asyncio.Queue()  # None marks end of input

    def send(message: dict[str, Any]) -> None:
        try:
            line = encode(message) + b"\n"
        except ValueError:  # the dispatcher checks first; this is the last line of defence
            log.exception("a message that is not valid JSON was not sent")
            return
        try:
            stdout.write(line)
            stdout.flush()
        except (ValueError, OSError):  # ValueError: the stream was closed
            frames.put_nowait(None)

    options = HostOptions(conformance=args.conformance, max_frame_bytes=args.max_frame_bytes)
    dispatcher = Dispatcher(send)
    host = Host(storage, clock, options, dispatcher.notify)
    dispatcher.register(host.handlers())
    await host.tasks.schedule_all()
    host.on_initialized = lambda: setattr(dispatcher, "initialized", True)

    def pump() -> None:
        try:
            for frame in read_frames(stdin, args.max_frame_bytes):
                loop.call_soon_threadsafe(frames.put_nowait, frame)
        except (OSError, ValueError):
            pass  # the stream was closed under us: treat as end of input
        with contextlib.suppress(RuntimeError):  # the loop may already be closed
            loop.call_soon_threadsafe(frames.put_nowait, None)

    threading.Thread(target=pump, name="stdin-reader", daemon=True).start()
    if threading.current_thread() is threading.main_thread():
        loop.add_signal_handler(signal.SIGTERM, frames.put_nowait, None)
    log.info("serving protocol v9 (conformance=%s)", args.conformance)
    try:
        while (frame := await frames.get()) is not None:
            await dispatcher.handle(frame)
    finally:
        await host.close()
        clock.close()
        await storage.close()
    log.info("stopped")
    return EXIT_OK
