"""The ADR 0053 conformance harness: run the suite against any host and report."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("pi-adr0053-conformance")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"
