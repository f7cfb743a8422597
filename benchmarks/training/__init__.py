"""Training benchmarks: step speed and peak memory against eager and torch.compile."""
