"""Generate ``conformance/protocol_models.py`` from ``schemas/protocol-v9/types.schema.json``.

The JSON Schema is the single source of truth; the pydantic models are derived from it
with datamodel-code-generator and checked in, so a misspelt field in the harness fails
type checking. ``tests/test_protocol_models.py`` fails when the checked-in module differs
from a fresh generation. Run ``python -m conformance.codegen`` after changing the schema.

The generator's output changes between its minor releases, so the dev dependency is held
to one minor series; raising it means regenerating in the same commit. The module is
excluded from ruff because its layout belongs to the generator, not to us.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from conformance.docgen import write_or_check
from pi_contract import schemas_dir

__all__ = ["DEFAULT_OUTPUT", "GENERATOR_OPTIONS", "generate", "main"]

DEFAULT_OUTPUT: Final = Path(__file__).resolve().parent / "protocol_models.py"
COMMAND: Final = "python -m conformance.codegen"
SOURCE: Final = "protocol-v9/types.schema.json"

GENERATOR_OPTIONS: Final = (
    "--input-file-type=jsonschema",
    "--output-model-type=pydantic_v2.BaseModel",
    "--target-python-version=3.11",
    "--disable-timestamp",
    "--formatters=builtin",
    # Plain types with Field constraints (not con* types), enums as Literal strings and
    # aliases instead of root models: what mypy checks and what steps write naturally.
    "--field-constraints",
    "--enum-field-as-literal=all",
    "--use-type-alias",
    "--use-annotated",
    "--use-standard-collections",
    "--use-union-operator",
    "--use-double-quotes",
    "--use-schema-description",
    "--type-mappings=string+uri=string",
    "--class-name=ProtocolTypes",
)

_HEADER: Final = f'''"""Protocol v9 types as pydantic models, generated from schemas/{SOURCE}.

Do not edit: run `{COMMAND}` to regenerate after changing the schema.
"""

'''


def generate(schemas: Path | None = None) -> str:
    """The module text generated from ``schemas`` (default: the published schemas)."""
    source = (schemas or schemas_dir()) / SOURCE
    completed = subprocess.run(
        [sys.executable, "-m", "datamodel_code_generator", f"--input={source}", *GENERATOR_OPTIONS],
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(
            f"datamodel-code-generator failed ({completed.returncode}):\n{completed.stderr}"
        )
    return _HEADER + completed.stdout


def main(argv: Sequence[str] | None = None) -> int:
    """Write the models, or with ``--check`` verify the checked-in module is current."""
    parser = argparse.ArgumentParser(
        prog=COMMAND, description=f"Generate pydantic models from schemas/{SOURCE}."
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="exit 1 if the file differs from a fresh generation; write nothing",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=DEFAULT_OUTPUT,
        help=f"Python module to write or check (default: {DEFAULT_OUTPUT})",
    )
    args = parser.parse_args(argv)
    return write_or_check(args.output, generate(), f"schemas/{SOURCE}", COMMAND, args.check)


if __name__ == "__main__":
    sys.exit(main())
