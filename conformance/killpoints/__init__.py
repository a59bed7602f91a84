"""The kill-point campaign: SIGKILL a host across the ADR 0053 lifecycle, restart it,
and check it against the client's history.

``python -m conformance.killpoints --help`` runs it; ``docs/reliability.md`` has its figures.
"""

from conformance.killpoints.campaign import Report, RunResult, Settings, run_campaign, summary
from conformance.killpoints.workload import PHASES

__all__ = ["PHASES", "Report", "RunResult", "Settings", "run_campaign", "summary"]
