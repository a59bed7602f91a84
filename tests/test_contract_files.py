"""The published contract files are valid and consistent with each other."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from conformance import summary_model
from pi_contract import error_catalog, load_json, method_index, schemas_dir

SCHEMA_FILES = sorted(schemas_dir().rglob("*.schema.json"))


def test_there_are_schema_files() -> None:
    names = {path.name for path in SCHEMA_FILES}
    assert {"types.schema.json", "envelope.schema.json", "error-codes.schema.json"} <= names


@pytest.mark.parametrize("path", SCHEMA_FILES, ids=lambda p: p.name)
def test_schema_is_valid_against_the_2020_12_metaschema(path: Path) -> None:
    schema = json.loads(path.read_text(encoding="utf-8"))
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize(
    ("data", "schema"),
    [
        ("protocol-v9/methods.json", "method-index.schema.json"),
        ("error-codes.json", "error-codes.schema.json"),
    ],
)
def test_data_file_matches_its_schema(data: str, schema: str) -> None:
    Draft202012Validator(load_json(schema)).validate(load_json(data))


def test_every_referenced_definition_exists() -> None:
    definitions = load_json("protocol-v9/types.schema.json")["$defs"]
    for name, entry in method_index().items():
        assert entry["params"] in definitions, f"{name} params"
        if entry["kind"] == "request":
            assert entry["result"] in definitions, f"{name} result"


def test_internal_refs_resolve() -> None:
    types = load_json("protocol-v9/types.schema.json")
    text = json.dumps(types)
    for target in re.findall(r'"#/\$defs/([A-Za-z]+)"', text):
        assert target in types["$defs"], target


def test_every_error_a_method_names_is_in_the_catalog() -> None:
    catalog = error_catalog()
    for name, entry in method_index().items():
        for code in entry.get("errors", []):
            assert code in catalog, f"{name} names unknown error {code}"


def test_error_codes_are_unique_and_the_adr_codes_exist() -> None:
    codes = [entry["code"] for entry in load_json("error-codes.json")["codes"]]
    assert len(codes) == len(set(codes))
    assert {"PLAN_APPROVAL_TIMEOUT", "PLAN_REQUIRES_INTERACTIVE_SESSION"} <= set(codes)


def test_submit_plan_input_is_exactly_title_markdown_question() -> None:
    schema = load_json("protocol-v9/types.schema.json")["$defs"]["SubmitPlanInput"]
    validator = Draft202012Validator(schema)
    assert validator.is_valid({"title": "t", "markdown": "m", "question": "q"})
    assert not validator.is_valid({"title": "t", "markdown": "m"})
    assert not validator.is_valid({"title": "t", "markdown": "m", "question": "q", "steps": []})
    assert not validator.is_valid({"title": "t", "markdown": 1, "question": "q"})


def _params_validator(definition: str) -> Draft202012Validator:
    types = load_json("protocol-v9/types.schema.json")
    return Draft202012Validator({**types, "$ref": f"#/$defs/{definition}"})


def test_reject_carries_no_mode_and_no_feedback() -> None:
    validator = _params_validator("ApprovalRejectParams")
    assert validator.is_valid({"sessionId": "s", "approvalId": "a"})
    assert not validator.is_valid({"sessionId": "s", "approvalId": "a", "feedback": "x"})
    assert not validator.is_valid({"sessionId": "s", "approvalId": "a", "permissionMode": "ask"})


@pytest.mark.parametrize("mode", ["ask", "accept-edits", "auto"])
def test_approve_accepts_the_three_modes(mode: str) -> None:
    assert _params_validator("ApprovalApproveParams").is_valid(
        {"sessionId": "s", "approvalId": "a", "permissionMode": mode}
    )


@pytest.mark.parametrize("mode", [None, "", "default", "ASK", "acceptEdits"])
def test_approve_requires_a_known_mode(mode: str | None) -> None:
    params = {"sessionId": "s", "approvalId": "a"}
    if mode is not None:
        params["permissionMode"] = mode
    assert not _params_validator("ApprovalApproveParams").is_valid(params)


def test_no_request_changes_method_exists() -> None:
    names = set(method_index())
    assert not {n for n in names if "change" in n.lower() or "exitplan" in n.lower()}


@pytest.mark.parametrize("version", ["v8", "v10"])
def test_storage_ddl_executes_and_sets_its_version(version: str) -> None:
    conn = sqlite3.connect(":memory:")
    conn.executescript((schemas_dir() / "storage" / f"{version}.sql").read_text("utf-8"))
    assert conn.execute("PRAGMA user_version").fetchone()[0] == int(version[1:])


def test_summary_schema_is_generated_from_the_models() -> None:
    committed = (schemas_dir() / summary_model.SCHEMA_FILE).read_text(encoding="utf-8")
    assert committed == summary_model.render_schema(), (
        "schemas/conformance-summary.schema.json is stale: "
        "run python -m conformance.summary_model schemas"
    )


def test_reference_host_tools_match_the_published_tool_schemas() -> None:
    from reference_host.turns import _SPECS

    published = load_json("tools.schema.json")["$defs"]
    assert set(published) == set(_SPECS)
    for name, spec in _SPECS.items():
        assert spec.parameters == published[name], f"{name} drifted from tools.schema.json"


def test_plan_and_agent_tool_sets_are_published() -> None:
    description = load_json("tools.schema.json")["description"]
    for tool in ("Read", "Glob", "Grep", "BrowserPreview", "Bash", "EnterPlanMode", "SubmitPlan"):
        assert tool in description
