"""Benchmarks of the reference host and the harness; each prints ratios (docs/performance.md)."""
