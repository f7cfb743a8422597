"""PyTorch's dynamo function tests against framejit's capture (peer suite, stage: capture).

Input: a PyTorch snapshot's `test/dynamo/test_functions.py` (`--snapshot` or
`PEER_PYTORCH_DIR`, kept outside this repository). Output: one JSON line per test (`--out`)
and a summary. The adapter maps the suite's entry points onto `dynamo.jit`:

  torch._dynamo.testing.standard_test (every `make_test`)
      -> `standard_test` below: the function eagerly and through
         `dynamo.jit(fn, backend=dynamo.CountingBackend(), fullgraph=True)` on two input sets,
         twice each, compared with torch's `same`; then the frame count (a torch._dynamo
         design figure; a mismatch is classified `excluded`, rule dynamo-counts)
  torch.compile / torch._dynamo.optimize / optimize_assert
      -> dynamo.jit(fn, backend=..., fullgraph=nopython); "eager" and "aot_eager" map to
         framejit's backends of those names, "inductor" (and the default) to framejit's
         inductor, callables (CompileCounter, ...) are passed as they are
  torch._dynamo.reset -> also dynamo.reset

    PEER_PYTORCH_DIR=/work/scratch/peer-suites/pytorch \\
        .venv/bin/python -m tests.peer.dynamo_suite --out results.jsonl --resume
"""
import importlib.util
import inspect
import os
import sys

from tests.peer import runner
from tests.peer.inductor_suite import install_shims

FUNCTIONS_FILE = os.path.join("test", "dynamo", "test_functions.py")
# PEER_FULLGRAPH=0: every capture may break the graph (values are still compared), so the
# programs framejit refuses under fullgraph=True are checked for values too.
FULLGRAPH = os.environ.get("PEER_FULLGRAPH", "1") != "0"
BACKEND_NAMES = {"eager": "eager", "aot_eager": "aot_eager", "inductor": "inductor",
                 None: "inductor"}


class NoStats:
    def begin(self):
        pass

    def end(self):
        return {}


def _backend(backend):
    if isinstance(backend, str) or backend is None:
        if backend not in BACKEND_NAMES:
            raise NotImplementedError(f"peer adapter: no framejit backend for {backend!r}")
        return BACKEND_NAMES[backend]
    return backend


def _jit_decorator(backend=None, fullgraph=False, dynamic=None):
    import dynamo

    def wrap(fn):
        return dynamo.jit(fn, backend=_backend(backend), fullgraph=fullgraph and FULLGRAPH,
                          dynamic=dynamic or None)

    return wrap


def framejit_compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor",
                     mode=None, options=None, disable=False):
    """torch.compile's signature, compiled by dynamo.jit."""
    if disable:
        return model if model is not None else (lambda fn: fn)
    wrap = _jit_decorator(backend, fullgraph, dynamic)
    return wrap if model is None else wrap(model)


def framejit_optimize(backend="inductor", *, nopython=False, dynamic=None, **ignored):
    """torch._dynamo.optimize's signature (guard_fail_fn and the like are not mapped)."""
    unmapped = sorted(name for name, value in ignored.items() if value not in (None, False))
    if unmapped:
        raise NotImplementedError(f"peer adapter: optimize() arguments not mapped: {unmapped}")
    return _jit_decorator(backend, nopython, dynamic)


def framejit_optimize_assert(backend="inductor", **kwargs):
    return framejit_optimize(backend, nopython=True, **kwargs)


def standard_test(self, fn, nargs, expected_ops=None, expected_ops_dynamic=None,
                  expected_frame_count=1):
    """torch._dynamo.testing.standard_test's contract on dynamo.jit: values first."""
    import dynamo
    import torch
    from torch._dynamo.utils import same

    counter = dynamo.CountingBackend()
    args1 = [torch.randn(10, 10) for _ in range(nargs)]
    args2 = [torch.randn(10, 10) for _ in range(nargs)]
    correct1 = fn(*args1)
    correct2 = fn(*args2)
    dynamo.reset()
    opt_fn = dynamo.jit(fn, backend=counter, fullgraph=FULLGRAPH)
    val1a = opt_fn(*args1)
    val2a = opt_fn(*args2)
    val1b = opt_fn(*args1)
    val2b = opt_fn(*args2)
    dynamo.reset()
    self.assertTrue(same(val1a, correct1))
    self.assertTrue(same(val1b, correct1))
    self.assertTrue(same(val2a, correct2))
    self.assertTrue(same(val2b, correct2))
    self.assertEqual(counter.frame_count, expected_frame_count)  # dynamo-counts


def substitute_capture():
    """Bind torch's capture entry points, as the suite reaches them, to dynamo.jit."""
    import dynamo
    import torch
    import torch._dynamo.testing as dynamo_testing
    from tests.peer.inductor_suite import substitute_compiler
    import types

    torch_reset = torch._dynamo.reset

    def reset():
        torch_reset()
        dynamo.reset()

    torch.compile = framejit_compile
    torch._dynamo.optimize = framejit_optimize
    torch._dynamo.optimize_assert = framejit_optimize_assert
    torch._dynamo.reset = reset
    dynamo_testing.standard_test = standard_test
    dynamo_testing.reset = reset
    dynamo_testing.optimize_assert = framejit_optimize_assert
    # CompileCounterWithBackend("inductor") looks torch's inductor up: make it framejit's.
    substitute_compiler(types.SimpleNamespace(), NoStats())
    dynamo.config.suppress_errors = False


def load_functions(snapshot: str):
    path = os.path.join(snapshot, FUNCTIONS_FILE)
    folder = os.path.dirname(path)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location("test_functions", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["test_functions"] = module
    spec.loader.exec_module(module)
    return module, path


def _source(fn) -> str:
    try:
        return inspect.getsource(inspect.unwrap(fn))
    except (OSError, TypeError):
        return ""


def collect(module):
    """(id, bound method, source) for every TestCase class the snapshot defines."""
    import unittest
    tests = []
    for class_name, cls in sorted(vars(module).items()):
        if not (isinstance(cls, type) and issubclass(cls, unittest.TestCase)
                and cls.__module__ == module.__name__):
            continue
        cls.setUpClass()
        for name in sorted(dir(cls)):
            if name.startswith("test_") and callable(getattr(cls, name)):
                fn = getattr(cls, name)
                tests.append((f"{class_name}.{name}", getattr(cls(name), name), _source(fn)))
    return tests


def main(argv=None):
    args = runner.parse_args(__doc__.splitlines()[0], argv)
    if args.summary_only:
        print(runner.summary(args.out))
        return
    import torch  # noqa: F401
    install_shims()
    substitute_capture()
    module, path = load_functions(args.snapshot)
    runner.run_all(collect(module), path, args, NoStats(), adapter_file=__file__)
    print(runner.summary(args.out))


if __name__ == "__main__":
    main()
