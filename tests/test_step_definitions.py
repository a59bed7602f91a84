"""Every step text is defined once: a second definition silently replaces the first."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from conformance.blame import CheckFailed, blame
from conformance.client import HarnessError, RpcError
from conformance.protocol_models import ClientInfo, SessionCancelResult, ShellListResult
from conformance.steps.requests import granted, permission_mode, plain
from conformance.world import World

STEPS = Path(__file__).resolve().parent.parent / "conformance" / "steps"


def _step_texts(module: Path) -> list[tuple[str, str]]:
    """(keyword, text) of every step decorator in ``module``."""
    found: list[tuple[str, str]] = []
    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            continue
        if node.func.id not in {"given", "when", "then"} or not node.args:
            continue
        first = node.args[0]
        if isinstance(first, ast.Call) and first.args:  # parsers.parse("...")
            first = first.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            found.append((node.func.id, first.value))
    return found


def test_no_step_text_is_defined_twice() -> None:
    where: dict[tuple[str, str], list[str]] = defaultdict(list)
    for module in sorted(STEPS.glob("*.py")):
        for step in _step_texts(module):
            where[step].append(module.name)
    assert len(where) > 100, "the scan found too few steps to be reading the step modules"
    twice = {f"{k} {t!r}": files for (k, t), files in where.items() if len(files) > 1}
    assert not twice, f"step texts defined more than once: {twice}"


# -- the typed requests the steps make --------------------------------------------------------


def _refusal() -> RpcError:
    return RpcError("approval/approve", -32000, "not pending", {"code": "APPROVAL_NOT_PENDING"})


def test_a_granted_request_returns_its_typed_result() -> None:
    assert granted(lambda first, second: first + second, 2, second=3) == 5


def test_a_refused_request_is_a_failed_check_blamed_like_the_step() -> None:
    def refuse() -> None:
        raise _refusal()

    with pytest.raises(CheckFailed) as failed, blame("R4.4"):
        granted(refuse)
    assert failed.value.requirements == ()  # not the block's R4.4: the step's own
    assert "refused a request the scenario needed" in str(failed.value)
    assert "APPROVAL_NOT_PENDING" in str(failed.value)


def test_a_typed_attempt_records_the_result_as_sent_or_the_refusal() -> None:
    world = World(driver=None, data_dir=Path(), workspace=Path(), timeout=1, provider=None)  # type: ignore[arg-type]
    sent: dict[str, Any] = {"turnId": None}
    outcome = world.attempt_typed(SessionCancelResult.model_validate, sent)
    assert outcome.result == sent and world.outcome is outcome

    def refuse() -> SessionCancelResult:
        raise _refusal()

    assert world.attempt_typed(refuse).require_error().canonical == "APPROVAL_NOT_PENDING"


def test_plain_gives_back_the_fields_the_host_sent() -> None:
    sent: dict[str, Any] = {"shells": [], "defaultShellId": None}
    assert plain(ShellListResult.model_validate(sent)) == sent
    assert plain(ClientInfo(name="x")) == {"name": "x"}  # an unset default stays out


def test_a_permission_mode_the_protocol_lacks_is_a_harness_error() -> None:
    assert permission_mode("accept-edits") == "accept-edits"
    with pytest.raises(HarnessError):
        permission_mode("everything")
