"""Schema-driven fuzzing of any host: params from the published schemas, hostile
mutations of them and byte-level garbage, each answer judged against the contract."""

from conformance.fuzz.runner import Finding, FuzzReport, FuzzSettings, fuzz

__all__ = ["Finding", "FuzzReport", "FuzzSettings", "fuzz"]
