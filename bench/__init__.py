"""Benchmarks of vertex-dispatch against a floor and a seed-style baseline (issue 7).

Run ``python -m bench`` from the repository root; docs/performance.md says what is measured.
"""
