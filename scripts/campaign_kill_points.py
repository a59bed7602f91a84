"""The kill-point campaign: at least 200 SIGKILLs across the plan lifecycle of one host.

Each run drives a seeded workload (sessions, Plan prompts with a scripted SubmitPlan,
approve and reject, clock moves, Agent commands that append to a workspace file,
scheduled tasks), SIGKILLs the host in one phase (Plan turn streaming, SubmitPlan,
pending approval, queued or running execution, mid-command, mid-migration), restarts it
on the same data dir and checks it against the client's history. The figures go into
docs/reliability.md.

    python scripts/campaign_kill_points.py [--host-cmd CMD] [--runs N] [--seed S]
        [--phase PHASE ...] [--run-seed SEED] [--json FILE] [-v]
"""

from __future__ import annotations

import sys

from conformance.killpoints.__main__ import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
