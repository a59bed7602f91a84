"""The generated protocol models are current and agree with the JSON Schema they come from."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from conformance import codegen, protocol_models
from pi_contract import method_index, schemas_dir

REGENERATE = "run `python -m conformance.codegen` to regenerate conformance/protocol_models.py"


@pytest.fixture(scope="module")
def generated() -> str:
    return codegen.generate()


def test_committed_models_are_up_to_date(generated: str) -> None:
    committed = codegen.DEFAULT_OUTPUT.read_bytes().decode("utf-8")
    assert committed == generated, f"conformance/protocol_models.py is stale: {REGENERATE}"


def test_check_mode_detects_schema_drift(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], generated: str
) -> None:
    schemas = tmp_path / "schemas"
    shutil.copytree(schemas_dir(), schemas)
    types_file = schemas / "protocol-v9" / "types.schema.json"
    types = json.loads(types_file.read_text(encoding="utf-8"))
    types["$defs"]["Shell"]["properties"]["addedByThisTest"] = {"type": "string"}
    types_file.write_text(json.dumps(types), encoding="utf-8")

    drifted = codegen.generate(schemas)
    assert drifted != generated
    assert "addedByThisTest" in drifted

    module = tmp_path / "protocol_models.py"
    module.write_text(drifted, encoding="utf-8")
    assert codegen.main(["--check", "--output", str(module)]) == 1
    assert "out of date" in capsys.readouterr().err
    module.write_text(generated, encoding="utf-8")
    assert codegen.main(["--check", "--output", str(module)]) == 0


def test_every_params_and_result_definition_has_a_model() -> None:
    names = {
        entry[key]
        for entry in method_index().values()
        for key in ("params", "result")
        if key in entry
    }
    for name in sorted(names):
        model = getattr(protocol_models, name, None)
        assert isinstance(model, type) and issubclass(model, BaseModel), name


def test_models_reject_what_the_schema_rejects() -> None:
    ok = protocol_models.ApprovalApproveParams(sessionId="s", approvalId="a", permissionMode="ask")
    assert ok.model_dump(mode="json", exclude_unset=True) == {
        "sessionId": "s",
        "approvalId": "a",
        "permissionMode": "ask",
    }
    with pytest.raises(ValidationError):
        protocol_models.ApprovalRejectParams.model_validate(
            {"sessionId": "s", "approvalId": "a", "feedback": "no"}
        )
    with pytest.raises(ValidationError):
        protocol_models.ApprovalApproveParams.model_validate(
            {"sessionId": "", "approvalId": "a", "permissionMode": "ask"}
        )
