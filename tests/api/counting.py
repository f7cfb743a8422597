"""A test backend for the API tests (tests/api/test_disable.py, test_stance.py): like
`dynamo.CountingBackend` it records each graph compiled, and it also counts each run of a
compiled graph (`runs`), which shows whether a cached entry served a call."""


class Counting:
    """A backend recording each graph compiled (`graphs`) and each run of one (`runs`)."""

    def __init__(self):
        self.graphs, self.runs = [], 0

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)

        def run(*args):
            self.runs += 1
            return gm(*args)
        return run

    def ops(self) -> set:
        return {str(node.target) for gm in self.graphs for node in gm.graph.nodes
                if node.op in ("call_function", "call_method")}
