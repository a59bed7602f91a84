"""Every requirement is proven able to fail: some broken host is rejected and blamed on it.

``tests/test_broken_hosts.py`` proves each case; this test proves the cases cover the whole
catalog, the way the tag test proves every requirement has a scenario. A requirement added
without a broken host fails here.
"""

from __future__ import annotations

from hosts.catalog import broken_cases, load_all
from hosts.registry import VARIANTS

from conformance.requirements import active_catalog, sort_key


def test_every_active_requirement_has_a_broken_host_blamed_on_it() -> None:
    covered = {case.requirement for case in broken_cases()}
    missing = sorted(set(active_catalog()) - covered, key=sort_key)
    assert not missing, f"requirements no broken host is blamed on: {missing}"


def test_every_case_names_a_known_variant_and_requirement() -> None:
    load_all()
    known = set(active_catalog())
    for case in broken_cases():
        assert case.variant in VARIANTS, case
        assert case.requirement in known, case
