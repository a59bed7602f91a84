"""Which requirement a failed check blames, and how a scenario's end is classified.

The classification tests run a real host in-process: the reference host behind a small
wrapper that misbehaves in one way (a banner line, a message off the contract, an exit
at once), so the violations and exits are the client's own observations.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import BinaryIO, TextIO, cast

import pytest

from conformance import aftercheck
from conformance.aftercheck import SCHEMA_REQUIREMENT, problems
from conformance.blame import (
    CheckFailed,
    blame,
    blamed_requirements,
    declared_requirements,
    verifies,
)
from conformance.capabilities import Unverified
from conformance.client import HarnessError, HostStoppedError
from conformance.connection import RpcError
from conformance.drivers import TOKEN_VARIABLE, InProcessDriver, ServeFn
from conformance.failures import DETAIL_LIMIT, MESSAGE_LIMIT, classify, failure_record
from conformance.mock_provider import MockProvider
from conformance.world import World
from reference_host.server import serve as reference_serve

TAGS = ["R4.10", "R4.11", "area:restart_interruption"]
WAIT_S = 10.0


@verifies("R4.11")
def step_checking_recovery() -> None:
    """A step whose checks verify R4.11."""


def step_declaring_nothing() -> None:
    """A step without a declaration."""


# -- blame ------------------------------------------------------------------------------


def test_verifies_declares_the_requirements_of_a_step() -> None:
    assert declared_requirements(step_checking_recovery) == ("R4.11",)
    assert declared_requirements(step_declaring_nothing) == ()


@pytest.mark.parametrize("ids", [(), ("R4",), ("4.10",), ("R4.10", "area:x")])
def test_verifies_and_blame_accept_only_requirement_ids(ids: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="not requirement IDs"):
        verifies(*ids)
    with pytest.raises(ValueError, match="not requirement IDs"), blame(*ids):
        pass


def test_blame_turns_a_failed_assertion_into_a_check_of_its_requirements() -> None:
    with pytest.raises(CheckFailed) as failed, blame("R2.11"):
        raise AssertionError("byteSize is 12, the file has 13 bytes")
    assert failed.value.requirements == ("R2.11",)
    assert str(failed.value) == "byteSize is 12, the file has 13 bytes"


def test_the_innermost_blame_wins_and_other_errors_pass_through() -> None:
    with pytest.raises(CheckFailed) as failed, blame("R2.1"), blame("R2.11"):
        raise AssertionError("inner")
    assert failed.value.requirements == ("R2.11",)
    with pytest.raises(KeyError), blame("R2.1"):
        raise KeyError("not a check")


def test_a_checks_own_ids_come_before_the_steps_declaration() -> None:
    failure = CheckFailed("x", ["R4.10"])
    assert blamed_requirements(failure, step_checking_recovery, TAGS) == ["R4.10"]
    assert blamed_requirements(AssertionError("x"), step_checking_recovery, TAGS) == ["R4.11"]


def test_declared_ids_are_kept_to_the_scenarios_tags_when_they_overlap() -> None:
    failure = CheckFailed("x", ["R4.10", "R7.4"])
    assert blamed_requirements(failure, None, TAGS) == ["R4.10"]
    assert blamed_requirements(CheckFailed("x", ["R7.4"]), None, TAGS) == ["R7.4"]


def test_with_nothing_declared_the_scenarios_requirement_tags_are_blamed() -> None:
    assert blamed_requirements(AssertionError("x"), step_declaring_nothing, TAGS) == [
        "R4.10",
        "R4.11",
    ]


# -- classification -------------------------------------------------------------------------


def _after(prefix: bytes) -> ServeFn:
    """The reference host, writing ``prefix`` to stdout before it starts serving."""

    def serve(argv: Sequence[str], stdin: BinaryIO, stdout: BinaryIO, stderr: TextIO) -> int:
        stdout.write(prefix)
        stdout.flush()
        return reference_serve(argv, stdin, stdout, stderr)

    return serve


def _exits_at_once(argv: Sequence[str], stdin: BinaryIO, stdout: BinaryIO, stderr: TextIO) -> int:
    stderr.write("cannot open the database\n")
    return 3


@pytest.fixture(scope="module")
def provider() -> Iterator[MockProvider]:
    with MockProvider() as mock:
        yield mock


@pytest.fixture
def make_world(
    tmp_path: Path, provider: MockProvider, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., World]]:
    """A World for an in-process host; the environment the driver sets is restored."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv(TOKEN_VARIABLE, raising=False)
    worlds: list[World] = []

    def make(serve: ServeFn = reference_serve) -> World:
        world = World(
            driver=InProcessDriver(serve),
            data_dir=tmp_path / f"data{len(worlds)}",
            workspace=tmp_path,
            timeout=WAIT_S,
            provider=provider,
            deadline_s=60.0,
        )
        worlds.append(world)
        return world

    yield make
    for world in worlds:
        world.close()


def test_a_clean_scenario_passes(make_world) -> None:
    world = make_world()
    world.connect()
    assert classify(None, None, TAGS, world, problems(world)).status == "passed"


def test_a_message_off_the_contract_fails_a_clean_scenario_blamed_on_p5(make_world) -> None:
    world = make_world(_after(b'{"jsonrpc":"2.0","method":"made/up","params":{}}\n'))
    world.connect()
    verdict = classify(None, step_checking_recovery, TAGS, world, problems(world))
    assert (verdict.status, verdict.kind) == ("failed", "check")
    assert verdict.blamed == (SCHEMA_REQUIREMENT,)
    assert "broke the protocol v9 contract" in verdict.message
    assert "made/up" in verdict.detail


def test_a_failed_check_with_messages_off_the_contract_also_blames_p5(make_world) -> None:
    world = make_world(_after(b'{"jsonrpc":"2.0","method":"made/up","params":{}}\n'))
    world.connect()
    verdict = classify(
        AssertionError("no artifact"), step_checking_recovery, TAGS, world, problems(world)
    )
    assert verdict.status == "failed"
    assert verdict.blamed == ("P5", "R4.11")
    assert "made/up" in verdict.detail


def test_lines_that_are_not_json_and_a_timeout_make_the_scenario_errored(make_world) -> None:
    world = make_world(_after(b"Starting my host 1.0\n"))
    world.connect()
    error = TimeoutError("no turn/ended notification matched before 10 s passed")
    verdict = classify(error, step_checking_recovery, TAGS, world, problems(world))
    assert (verdict.status, verdict.kind, verdict.blamed) == ("errored", "invalid-protocol", ())
    assert "not JSON-RPC" in verdict.message
    assert "Starting my host 1.0" in verdict.message


def test_a_host_that_exited_is_errored_and_says_how(make_world) -> None:
    world = make_world(_exits_at_once)
    with pytest.raises(HostStoppedError) as stopped:
        world.connect()
    verdict = classify(stopped.value, step_checking_recovery, TAGS, world, problems(world))
    assert (verdict.status, verdict.kind, verdict.blamed) == ("errored", "host-stopped", ())
    assert verdict.message.startswith("the host exited with status 3")
    assert verdict.message.count("status 3") == 1, verdict.message
    record = failure_record(verdict, None, world)
    assert record is not None
    assert record.host_exit is not None and record.host_exit.status == 3
    assert "cannot open the database" in record.stderr_tail
    assert [line.direction for line in record.transcript] == ["sent"]


def test_a_request_without_an_answer_is_a_hung_host() -> None:
    verdict = classify(TimeoutError("no response to session/list within 10 s"), None, TAGS, None)
    assert (verdict.status, verdict.kind) == ("errored", "host-hung")
    assert verdict.message == "the host hung: no response to session/list within 10 s"


def test_waiting_in_vain_for_a_notification_is_a_failed_check() -> None:
    error = TimeoutError("no turn/ended notification matched before 10 s passed")
    verdict = classify(error, step_checking_recovery, TAGS, None)
    assert (verdict.status, verdict.kind, verdict.blamed) == ("failed", "check", ("R4.11",))


def test_a_failed_assertion_is_a_failed_check_with_its_message_split() -> None:
    error = AssertionError("the approval is still pending\nexpected: interrupted")
    verdict = classify(error, step_declaring_nothing, TAGS, None)
    assert (verdict.status, verdict.kind) == ("failed", "check")
    assert verdict.message == "the approval is still pending"
    assert verdict.detail == "expected: interrupted"
    assert verdict.blamed == ("R4.10", "R4.11")


def test_a_huge_message_is_cut_to_size_and_says_how_much_was_left_out() -> None:
    # a host that echoes a frame-sized value must not make one failure megabytes long
    echoed = "\u00e9" * 70_000
    error = AssertionError(f"expected an error, got {echoed}\n{echoed}")
    verdict = classify(error, step_declaring_nothing, TAGS, None)
    assert verdict.message.startswith("expected an error, got \u00e9")
    assert len(verdict.message) < MESSAGE_LIMIT + 50
    assert verdict.message.endswith(
        f"({len('expected an error, got ') + 70_000 - MESSAGE_LIMIT} more characters)"
    )
    assert len(verdict.detail) < DETAIL_LIMIT + 50
    short = classify(AssertionError("short\ndetail"), step_declaring_nothing, TAGS, None)
    assert (short.message, short.detail) == ("short", "detail")


def test_a_refused_request_the_scenario_needed_is_a_failed_check() -> None:
    error = RpcError("session/create", -32602, "bad root", {"code": "INVALID_PARAMS"})
    verdict = classify(error, step_checking_recovery, TAGS, None)
    assert (verdict.status, verdict.blamed) == ("failed", ("R4.11",))
    assert verdict.message == (
        "the host refused a request the scenario needed: "
        "session/create failed with INVALID_PARAMS: bad root"
    )


def test_a_missing_capability_makes_the_scenario_unverified() -> None:
    error = Unverified("fault:artifactWrite", "the host does not declare artifactWrite")
    verdict = classify(error, step_checking_recovery, TAGS, None)
    assert (verdict.status, verdict.kind) == ("unverified", None)
    assert verdict.reason == "the host does not declare artifactWrite"


def test_a_scenario_out_of_time_is_errored_whatever_was_raised(make_world) -> None:
    world = make_world()
    world.connect()
    world.abort()
    verdict = classify(AssertionError("late"), step_checking_recovery, TAGS, world, problems(world))
    assert (verdict.status, verdict.kind) == ("errored", "deadline")
    assert "ran out of time" in verdict.message


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (HarnessError("the scenario has no session yet"), "the scenario has no session yet"),
        (KeyError("approvalId"), "the harness failed: KeyError: 'approvalId'"),
    ],
    ids=["harness-error", "unexpected-exception"],
)
def test_faults_of_the_harness_are_never_blamed_on_the_host(
    error: BaseException, message: str
) -> None:
    verdict = classify(error, step_checking_recovery, TAGS, None)
    assert (verdict.status, verdict.kind, verdict.blamed) == ("harness-error", "harness", ())
    assert verdict.message == message


def test_a_harness_fault_after_an_answer_off_the_schema_is_blamed_on_the_host(make_world) -> None:
    """A step that trips over a field the host left out is the host's failure, not the
    harness's: the answer broke the schema first."""
    world = make_world(_after(b'{"jsonrpc":"2.0","method":"made/up","params":{}}\n'))
    world.connect()
    verdict = classify(KeyError("taskId"), step_checking_recovery, TAGS, world, problems(world))
    assert (verdict.status, verdict.kind) == ("failed", "check")
    assert SCHEMA_REQUIREMENT in verdict.blamed
    assert verdict.message.startswith("the host broke the published schema")
    assert "made/up" in verdict.message
    assert "KeyError: 'taskId'" in verdict.detail


def test_a_harness_fault_with_a_clean_host_stays_a_harness_error(make_world) -> None:
    world = make_world()
    world.connect()
    verdict = classify(KeyError("taskId"), step_checking_recovery, TAGS, world, problems(world))
    assert (verdict.status, verdict.kind, verdict.blamed) == ("harness-error", "harness", ())


def test_a_file_the_host_should_have_made_that_is_missing_is_a_failed_check(make_world) -> None:
    world = make_world()
    world.connect()
    missing = world.workspace / "log.txt"
    error = FileNotFoundError(2, "No such file or directory", str(missing))
    verdict = classify(error, step_checking_recovery, TAGS, world, problems(world))
    assert (verdict.status, verdict.kind) == ("failed", "check")
    assert verdict.message == "the project's log.txt could not be read: No such file or directory"
    assert verdict.blamed == ("R4.11",)


def test_a_missing_file_outside_the_project_stays_a_harness_error(make_world) -> None:
    world = make_world()
    world.connect()
    error = FileNotFoundError(2, "No such file or directory", "/nonexistent/harness/file")
    verdict = classify(error, step_checking_recovery, TAGS, world, problems(world))
    assert (verdict.status, verdict.kind) == ("harness-error", "harness")


@pytest.mark.parametrize(
    ("raised", "blamed"),
    [
        (AssertionError("the host created no database at DIR/host.db"), "R7.4"),
        (sqlite3.DatabaseError("file is not a database"), "R7.4"),
        (HarnessError("the harness built a bad request"), None),
        (KeyError("params"), None),
    ],
)
def test_after_checks_that_cannot_run_never_stop_the_run(
    raised: Exception, blamed: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database the checks cannot read fails the scenario on R7.4; any other failure of
    a check is a harness error of this scenario alone; neither escapes."""

    def broken(world: object) -> list[aftercheck.Problem]:
        raise raised

    monkeypatch.setattr(aftercheck, "problems", broken)
    found, error = aftercheck.checked(cast(World, object()))
    if blamed is not None:
        assert error is None and [p.requirement for p in found] == [blamed]
        assert str(raised) in found[0].detail
    else:
        assert found == [] and isinstance(error, HarnessError)
        assert classify(error, None, TAGS, None, found).status == "harness-error"
