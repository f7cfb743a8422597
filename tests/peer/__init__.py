"""PyTorch's own test suites run against framejit (see docs/testing.md, "PyTorch's test suites").

Runners, not pytest modules: `python -m tests.peer.inductor_suite` and
`python -m tests.peer.dynamo_suite` read a snapshot of PyTorch's tests kept outside this
repository (`PEER_PYTORCH_DIR`), substitute framejit for torch's compiler, run every test with a
timeout in one process and classify each result (`tests/peer/classify.py`)."""
