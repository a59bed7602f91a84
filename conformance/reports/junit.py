"""JUnit XML for CI systems: one testsuite per feature, a classname per feature, and a
``requirement`` property on every test case."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import defaultdict

from conformance.summary_model import FailureRecord, ScenarioResult, Summary

_FAILED = {"failed"}
_ERRORED = {"errored", "harness-error"}
_SKIPPED = {"unverified", "not-run", "expected-failure"}


def failure_text(failure: FailureRecord) -> str:
    """The failure record as plain text: what a host team reads first, then the evidence."""
    lines = [failure.message]
    if failure.detail:
        lines.append(failure.detail)
    if failure.step is not None:
        lines.append(
            f"at step (line {failure.step.line}): {failure.step.keyword} {failure.step.text}"
        )
    if failure.blamed:
        lines.append("blamed on: " + ", ".join(failure.blamed))
    if failure.host_exit is not None and not failure.host_exit.running:
        how = (
            f"signal {failure.host_exit.signal}"
            if failure.host_exit.signal is not None
            else f"status {failure.host_exit.status}"
        )
        lines.append(f"host exit: {how}")
    if failure.violations:
        lines += ["", "protocol violations:", *failure.violations]
    if failure.transcript:
        lines += ["", "last protocol lines (> sent by the harness, < sent by the host):"]
        lines += [
            f"{'>' if w.direction == 'sent' else '<'} {w.at_s:8.3f}s {w.text}"
            for w in failure.transcript
        ]
    if failure.provider_requests:
        lines += ["", "provider requests:"]
        lines += [
            f"  {p.model} stream={p.stream} tools={','.join(p.tools) or '-'} "
            f"messages={p.messages} last={p.last_message}"
            + (f" [{p.flagged}]" if p.flagged else "")
            for p in failure.provider_requests
        ]
    if failure.stderr_tail:
        lines += ["", "host stderr (tail):", failure.stderr_tail]
    return "\n".join(lines)


def _case(parent: ET.Element, scenario: ScenarioResult) -> None:
    case = ET.SubElement(
        parent,
        "testcase",
        classname=scenario.feature_file.removesuffix(".feature"),
        name=scenario.title,
        file=f"features/{scenario.feature_file}",
        line=str(scenario.line),
        time=f"{scenario.duration_s:.3f}",
    )
    properties = ET.SubElement(case, "properties")
    ET.SubElement(properties, "property", name="scenario_id", value=scenario.id)
    ET.SubElement(properties, "property", name="status", value=scenario.status)
    for requirement in scenario.requirements:
        ET.SubElement(properties, "property", name="requirement", value=requirement)
    failure = scenario.failure
    if failure is not None:
        for requirement in failure.blamed:
            ET.SubElement(properties, "property", name="blamed", value=requirement)
    if scenario.status in _FAILED and failure is not None:
        node = ET.SubElement(case, "failure", message=failure.message, type=failure.kind)
        node.text = failure_text(failure)
    elif scenario.status in _ERRORED and failure is not None:
        node = ET.SubElement(case, "error", message=failure.message, type=failure.kind)
        node.text = failure_text(failure)
    elif scenario.status in _SKIPPED:
        reason = scenario.reason or scenario.status
        if scenario.status == "expected-failure" and failure is not None:
            reason = f"expected failure: {failure.message}"
        ET.SubElement(case, "skipped", message=f"{scenario.status}: {reason}")
    if failure is not None and failure.stderr_tail:
        ET.SubElement(case, "system-err").text = failure.stderr_tail


def _counts(scenarios: list[ScenarioResult]) -> dict[str, str]:
    return {
        "tests": str(len(scenarios)),
        "failures": str(sum(s.status in _FAILED for s in scenarios)),
        "errors": str(sum(s.status in _ERRORED for s in scenarios)),
        "skipped": str(sum(s.status in _SKIPPED for s in scenarios)),
        "time": f"{sum(s.duration_s for s in scenarios):.3f}",
    }


def render_junit(summary: Summary) -> str:
    """The whole junit.xml document."""
    by_feature: dict[str, list[ScenarioResult]] = defaultdict(list)
    for scenario in summary.scenarios:
        by_feature[scenario.feature_file].append(scenario)
    root = ET.Element("testsuites", {"name": "pi-conformance", **_counts(summary.scenarios)})
    for feature_file, scenarios in by_feature.items():
        suite = ET.SubElement(
            root,
            "testsuite",
            {"name": f"{feature_file}: {scenarios[0].feature}", **_counts(scenarios)},
        )
        properties = ET.SubElement(suite, "properties")
        ET.SubElement(properties, "property", name="host", value=summary.run.host)
        ET.SubElement(properties, "property", name="driver", value=summary.run.driver)
        for scenario in scenarios:
            _case(suite, scenario)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
