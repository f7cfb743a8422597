"""framejit benchmarks (never part of the test suite)."""
