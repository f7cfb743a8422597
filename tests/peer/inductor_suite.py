"""PyTorch's inductor test templates against framejit's inductor (peer suite, stage: backend).

Input: a PyTorch snapshot's `test/inductor/test_torchinductor.py` (`--snapshot` or
`PEER_PYTORCH_DIR`, kept outside this repository). Output: one JSON line per test (`--out`)
and a summary. The templates' `check_model` compiles through torch's capture front end
(`torch._dynamo.optimize(compile_fx_wrapper)`) with the module-level `compile_fx`; the adapter
binds that name, and `torch._inductor.compile_fx.compile_fx` (what `torch.compile`'s default
backend and `optimize("inductor")` import when called), to framejit's `inductor.compile_fx`,
so every graph of the suite is compiled by framejit. Tests run on the CPU device
(`CommonTemplate` copied onto a CPU class, plus the `SweepInputs2` grid and `TestFull`), with
`PEER_CPU_BACKEND=cpp` (C++/OpenMP, the default) or `PEER_CPU_BACKEND=triton` (Triton kernels
under TRITON_INTERPRET=1; the templates then skip what torch's own Triton-CPU backend lacks,
unless `PEER_TRITON_SKIPS=0`).

    PEER_PYTORCH_DIR=/work/scratch/peer-suites/pytorch \\
        .venv/bin/python -m tests.peer.inductor_suite --out results.jsonl --resume
"""
import collections
import importlib.util
import inspect
import os
import sys
import traceback

from tests.peer import classify, runner

TEMPLATE_FILE = os.path.join("test", "inductor", "test_torchinductor.py")
# CPU-only test classes of the file besides the templates (GPUTests, TritonCodeGenTests,
# RNNTest and NanCheckerTest need a GPU)
CPU_CLASSES = ("TestFull",)


class GraphStats:
    """Counts what framejit's inductor did with the graphs of one test."""

    def __init__(self):
        self.current = None

    def begin(self):
        self.current = collections.Counter()
        self.fallbacks = collections.Counter()
        self.reasons = []
        self.error = None

    def record_error(self, error: BaseException):
        """An exception raised inside compile_fx (torch's capture reports it as 'Backend
        compiler exception' and strips its frames: keep where framejit raised it)."""
        if self.error is None:
            self.error = error_summary(error)

    def record(self, compiled):
        report = getattr(compiled, "report", None)
        if report is None:
            self.current["training"] += 1
            return
        if report.reason:
            self.current["as_is"] += 1
            self.reasons.append(report.reason[:160])
        else:
            self.current["compiled"] += 1
            self.current["kernels"] += report.kernel_count
            if "@triton.jit" in report.source:
                self.current["triton"] += 1  # graphs whose kernels are Triton's
            self.fallbacks.update(report.fallback_ops)

    def end(self):
        stats = dict(self.current)
        if self.fallbacks:
            stats["fallback_ops"] = dict(self.fallbacks)
        if self.reasons:
            stats["as_is_reasons"] = sorted(set(self.reasons))
        if self.error:
            stats["backend_error"], stats["backend_where"] = self.error
        return stats


def error_summary(error: BaseException):
    """(type: message, innermost framejit frame) of an exception raised in compile_fx."""
    frames = [frame for frame in traceback.extract_tb(error.__traceback__)
              if os.path.abspath(frame.filename).startswith(classify.FRAMEJIT_PACKAGES)]
    where = "(outside framejit's packages)"
    if frames:
        frame = frames[-1]
        where = f"{os.path.basename(frame.filename)}:{frame.lineno} {frame.name}: {frame.line}"
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:300] if text else ''}", where


def install_shims():
    """Names the snapshot imports that the installed torch (2.14.1) no longer has."""
    import torch._inductor.compile_fx as peer_compile_fx
    from torch.testing._internal import common_utils, triton_utils

    def complex_memory_overlap(*args, **kwargs):
        raise NotImplementedError("complex_memory_overlap is not in the installed torch")

    if not hasattr(peer_compile_fx, "complex_memory_overlap"):
        peer_compile_fx.complex_memory_overlap = complex_memory_overlap
    if not hasattr(common_utils, "disable_translation_validation_if_dynamic_shapes"):
        common_utils.disable_translation_validation_if_dynamic_shapes = lambda fn: fn
    if not hasattr(triton_utils, "requires_cuda"):
        import unittest
        import torch
        triton_utils.requires_cuda = unittest.skipUnless(torch.cuda.is_available(),
                                                         "requires cuda")


def substitute_compiler(module, stats):
    """Bind torch's inductor entry points, as the suite reaches them, to framejit's."""
    import torch._inductor.compile_fx as peer_compile_fx
    import inductor

    def framejit_compile_fx(gm, example_inputs, **ignored):
        try:
            compiled = inductor.compile_fx(gm, example_inputs)
        except BaseException as error:
            if hasattr(stats, "record_error"):
                stats.record_error(error)
            raise
        stats.record(compiled)
        return compiled

    module.compile_fx = framejit_compile_fx
    peer_compile_fx.compile_fx = framejit_compile_fx
    inductor.config.fallback_on_error = False


def load_templates(snapshot: str):
    path = os.path.join(snapshot, TEMPLATE_FILE)
    for folder in (os.path.dirname(path), os.path.join(snapshot, "test")):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location("test_torchinductor", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["test_torchinductor"] = module
    spec.loader.exec_module(module)
    return module, path


def _source(fn) -> str:
    try:
        return inspect.getsource(inspect.unwrap(fn))
    except (OSError, TypeError):
        return ""


def cpu_tests(module):
    """(id, bound method, source) for the CPU copies of CommonTemplate and the sweep."""
    class CpuTests(module.TestCase):
        common = module.check_model
        device = "cpu"

    class SweepInputsCpuTest(module.SweepInputs2, module.TestCase):
        gen = module.InputGen(10, "cpu")

    SweepInputsCpuTest.populate()
    tests = []
    for name, fn in sorted(vars(module.CommonTemplate).items()):
        if name.startswith("test_") and callable(fn):
            setattr(CpuTests, f"{name}_cpu", fn)
            tests.append((CpuTests, f"{name}_cpu", _source(fn)))
    for name, fn in sorted(vars(SweepInputsCpuTest).items()):
        if name.startswith("test_") and callable(fn):
            tests.append((SweepInputsCpuTest, name, _source(module.SweepInputs2.gen_template)))
    CpuTests.setUpClass()
    SweepInputsCpuTest.setUpClass()
    for cls in [getattr(module, name) for name in CPU_CLASSES if hasattr(module, name)]:
        cls.setUpClass()
        tests += [(cls, name, _source(fn)) for name, fn in sorted(vars(cls).items())
                  if name.startswith("test_") and callable(fn)]
    return [(f"{cls.__name__}.{name}", getattr(cls(name), name), source)
            for cls, name, source in tests]


def main(argv=None):
    args = runner.parse_args(__doc__.splitlines()[0], argv)
    if args.summary_only:
        print(runner.summary(args.out))
        return
    backend = os.environ.get("PEER_CPU_BACKEND", "cpp")
    if backend == "triton":
        os.environ["TRITON_INTERPRET"] = "1"
    import torch
    import inductor
    install_shims()
    stats = GraphStats()
    module, path = load_templates(args.snapshot)
    substitute_compiler(module, stats)
    if backend == "triton":
        inductor.config.cpu_backend = "triton"
        if os.environ.get("PEER_TRITON_SKIPS", "1") != "0":
            # the templates skip what torch's Triton-CPU backend lacks when this is set;
            # PEER_TRITON_SKIPS=0 runs those tests on framejit's Triton kernels too
            torch._inductor.config.cpu_backend = "triton"
    runner.run_all(cpu_tests(module), path, args, stats)
    print(runner.summary(args.out))


if __name__ == "__main__":
    main()
