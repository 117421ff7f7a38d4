"""Benchmarks with budgets, run on demand (never part of the test suite)."""
