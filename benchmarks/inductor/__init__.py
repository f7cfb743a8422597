"""Benchmarks of the inductor code generator against eager and torch.compile (never tests)."""
