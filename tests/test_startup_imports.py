"""Nothing the first answer does not need is imported on the way to it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SLOW_AND_UNNEEDED = ("httpx", "jsonschema", "referencing", "regex", "psutil")

PROBE = """
import io, json, sys
from reference_host.server import serve
request = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":9}}\\n'
out = io.BytesIO()
serve(["--data-dir", sys.argv[1]], io.BytesIO(request), out, io.StringIO())
print(json.dumps({"answer": out.getvalue().decode(), "modules": sorted(sys.modules)}))
"""


def test_the_first_answer_loads_no_provider_client_nor_general_validator(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path / "data")],
        capture_output=True,
        check=True,
        timeout=60,
    )
    report = json.loads(completed.stdout)
    assert '"result"' in report["answer"], report["answer"]
    loaded = {name.split(".")[0] for name in report["modules"]}
    assert loaded.isdisjoint(SLOW_AND_UNNEEDED), sorted(loaded & set(SLOW_AND_UNNEEDED))


GREP_PROBE = """
import asyncio, sys
from pathlib import Path
import reference_host.turns
from reference_host.tools.base import ToolContext
from reference_host.tools.registry import by_name
before = "regex" in sys.modules
root = Path(sys.argv[1])
root.mkdir()
(root / "notes.txt").write_text("alpha\\nbeta\\n")
context = ToolContext("ses", "turn", root)
found = asyncio.run(by_name()["Grep"].run(context, {"pattern": "be.a"}))
print(before, "regex" in sys.modules, found)
"""


def test_the_regular_expression_engine_loads_with_the_first_search_only(tmp_path: Path) -> None:
    """A turn that never searches does not pay for the regex module (about a tenth of a
    host start-up); Grep loads it when it runs."""
    completed = subprocess.run(
        [sys.executable, "-c", GREP_PROBE, str(tmp_path / "root")],
        capture_output=True,
        check=True,
        timeout=60,
        text=True,
    )
    assert completed.stdout.split() == ["False", "True", "notes.txt:2:beta"], completed
