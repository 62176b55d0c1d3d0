"""Benchmarks of vertex-dispatch against a floor and a seed-style baseline.

Run ``python -m bench`` from the repository root; docs/performance.md says what is measured.
"""
