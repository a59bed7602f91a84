"""Allowed variations: capabilities a host may leave out."""

from __future__ import annotations

from hosts.registry import AllowedCase, patch, variant
from reference_host import host as host_module


@variant("no-fault-points")
def _no_fault_points() -> None:
    # Fault points are optional: a host may offer none. Scenarios that need one become
    # unverified, never failed.
    patch(host_module, "FAULT_POINTS", ())


CASES = [
    AllowedCase(
        "no-fault-points",
        "approval,artifact_integrity,restart_interruption",
        why="fault injection points are optional capabilities",
    ),
]
