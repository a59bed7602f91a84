"""The generated protocol reference is current, complete and readable."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conformance import docgen
from pi_contract import error_catalog, method_index, schemas_dir

REGENERATE = "run `python -m conformance.docgen` to regenerate docs/protocol.md"


@pytest.fixture(scope="module")
def rendered() -> str:
    return docgen.render_protocol_reference()


def _section(text: str, heading: str) -> str:
    """The body of one `### heading` section."""
    start = text.index(f"### {heading}\n")
    end = text.find("\n### ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _row(section: str, field: str) -> str:
    return next(line for line in section.splitlines() if line.startswith(f"| `{field}` |"))


def test_committed_reference_is_up_to_date(rendered: str) -> None:
    committed = docgen.DEFAULT_OUTPUT.read_bytes().decode("utf-8")
    assert committed == rendered, f"docs/protocol.md is stale: {REGENERATE}"


def test_check_mode_passes_on_the_committed_reference() -> None:
    assert docgen.main(["--check"]) == 0


def test_render_is_deterministic(rendered: str) -> None:
    assert docgen.render_protocol_reference() == rendered


def test_check_mode_detects_schema_drift(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schemas = tmp_path / "schemas"
    shutil.copytree(schemas_dir(), schemas)
    index_file = schemas / "protocol-v9" / "methods.json"
    index = json.loads(index_file.read_text(encoding="utf-8"))
    index["methods"]["session/get"]["summary"] = "Reads one session, changed by this test."
    index_file.write_text(json.dumps(index), encoding="utf-8")

    before = docgen.render_protocol_reference()
    after = docgen.render_protocol_reference(schemas)
    assert after != before
    assert "changed by this test" in after

    page = tmp_path / "protocol.md"
    page.write_text(after, encoding="utf-8")
    assert docgen.main(["--check", "--output", str(page)]) == 1
    assert "out of date" in capsys.readouterr().err
    assert docgen.main(["--output", str(page)]) == 0
    assert docgen.main(["--check", "--output", str(page)]) == 0


def test_check_mode_reports_a_missing_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert docgen.main(["--check", "--output", str(tmp_path / "absent.md")]) == 1
    assert "missing" in capsys.readouterr().err


@pytest.mark.parametrize("method", sorted(method_index()))
def test_every_method_has_a_section(rendered: str, method: str) -> None:
    assert f"### `{method}`\n" in rendered
    assert method_index()[method]["summary"] in rendered


@pytest.mark.parametrize("code", sorted(error_catalog()))
def test_every_error_code_is_in_the_catalog_table(rendered: str, code: str) -> None:
    anchor = "error-" + code.lower().replace("_", "-")
    assert f'<a id="{anchor}"></a>`{code}`' in rendered


def test_method_error_codes_link_to_the_catalog(rendered: str) -> None:
    section = _section(rendered, "`approval/approve`")
    assert "[`PLAN_APPROVAL_TIMEOUT`](#error-plan-approval-timeout)" in section


def test_requests_are_grouped_by_namespace_before_notifications(rendered: str) -> None:
    order = [
        "### `initialize`",
        "### `session/create`",
        "### `approval/approve`",
        "### `artifact/read`",
        "### `permission/respond`",
        "### `shell/list`",
        "### `task/run`",
        "### `conformance/clock/advance`",
        "## Notifications",
        "### `turn/started`",
        "## Types",
        "## Error codes",
        "## Storage schema v10",
    ]
    positions = [rendered.index(marker) for marker in order]
    assert positions == sorted(positions)


def test_enum_reference_renders_its_values(rendered: str) -> None:
    row = _row(_section(rendered, "`approval/approve`"), "permissionMode")
    assert '`"ask"` \\| `"accept-edits"` \\| `"auto"`' in row
    assert "| yes |" in row


def test_object_references_nullables_and_arrays_are_readable(rendered: str) -> None:
    assert "[`Session`](#type-session)" in _row(_section(rendered, "`session/get`"), "session")
    provider = _row(_section(rendered, "Session"), "provider")
    assert "[`ProviderConfig`](#type-providerconfig) \\| `null`" in provider
    approvals = _row(_section(rendered, "`approval/list`"), "approvals")
    assert "array of [`Approval`](#type-approval)" in approvals


def test_types_section_lists_shared_types_only(rendered: str) -> None:
    types = rendered[rendered.index("## Types") : rendered.index("## Error codes")]
    for name in ("Approval", "Session", "ArtifactRef", "PermissionMode", "SessionRef"):
        assert f"\n### {name}\n" in types
    assert "\n### ApprovalApproveParams\n" not in types
    assert "\n### SessionResult\n" not in types


def test_storage_ddl_is_embedded(rendered: str) -> None:
    ddl = (schemas_dir() / "storage" / "v10.sql").read_text(encoding="utf-8").rstrip("\n")
    assert f"```sql\n{ddl}\n```" in rendered
