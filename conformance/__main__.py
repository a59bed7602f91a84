"""``python -m conformance``: the same as the ``pi-conformance`` command."""

import sys

from conformance.cli import main

sys.exit(main())
