"""dynamo: frame capture for PyTorch programs (placeholder until the API lands)."""
