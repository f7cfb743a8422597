"""The graph fuzzer's runner: one program compiled by `inductor.compile_fx` against eager.

Input: a `Program`, its seed, the CPU code generator ("cpp" or "triton", the latter run by
Triton's interpreter) and the device. Output: a `CaseResult` with every `Failure` found over
three calls: the example inputs, fresh values, and (where the program allows one) inputs
whose aliasing differs from the example's (distinct tensors made one, or shared ones made
distinct; same shapes, strides and dtypes). Compilation runs with `fallback_on_error` off, so
a compiler bug raises; a graph that runs as is for any reason but the documented ones (writes
into inputs that share memory or through views overlapping themselves or through `as_strided`
where the functional form cannot place the write, reading a tensor's value as a number) is an
"unexpected fallback".
"""
from __future__ import annotations

import contextlib
import dataclasses
import operator
import time
import warnings
from typing import Optional

import torch

import inductor
from tests.fuzz.graphs.compare import Failure, Outcome, compare, run, where_raised
from tests.fuzz.graphs.program import Program
from tests.fuzz.graphs.unread import without_unread_values

# Reasons `compile_fx` documents for running a graph as is (docs/inductor.md: writes the
# functional form cannot express).
EXPECTED_AS_IS = ("the graph writes into inputs that share memory",
                  "the graph writes through a view whose elements overlap in memory",
                  "an in-place op reads memory it writes through a view laid out otherwise",
                  "the graph reads a tensor's value as a Python number",
                  # writes through `as_strided` the functional form cannot place: into storage
                  # between an input's elements (seed 32108), or into an owner written before
                  # and laid out as the graph chooses (33544); docs/inductor.md
                  "the graph writes through `as_strided` into storage outside",
                  "the graph writes through `as_strided` (or `unfold`) into a tensor written")


@dataclasses.dataclass
class CaseResult:
    seed: int
    failures: list
    notes: list = dataclasses.field(default_factory=list)
    as_is: Optional[str] = None            # why the graph ran as is (expected reasons)
    fallback_ops: dict = dataclasses.field(default_factory=dict)
    seconds: float = 0.0
    nodes: int = 0


@contextlib.contextmanager
def compiler_settings(backend: str, cache_dir: Optional[str] = None):
    """`inductor.config` for fuzzing: errors raise, IR verified, the chosen CPU backend."""
    saved = inductor.config.snapshot()
    inductor.config.update(cpu_backend=backend, fallback_on_error=False, verify_ir=True)
    if cache_dir:
        inductor.config.cache_dir = cache_dir
    try:
        yield
    finally:
        inductor.config.update(**saved)


def check_program(program: Program, seed: int, backend: str = "cpp",
                  variants: bool = True) -> CaseResult:
    """Compile `program` and compare it with eager (see the module docstring)."""
    started = time.perf_counter()
    result = CaseResult(seed, [])
    with warnings.catch_warnings(), compiler_settings(backend):
        warnings.simplefilter("ignore")
        try:
            module = program.graph_module()
        except Exception as error:  # noqa: BLE001 (a generator bug, reported as such)
            result.failures.append(Failure("trace error", f"{type(error).__name__}: {error}"))
            return result
        result.nodes = sum(1 for node in module.graph.nodes if node.op == "call_function" or
                           node.op == "call_method")
        compiled = _compile(module, program, seed, result)
        if compiled is not None:
            calls = [("call 1", program, 0), ("call 2 (fresh inputs)", program, 1)]
            variant = aliasing_variant(program) if variants else None
            if variant is not None:
                calls.append(("aliasing variant", variant, 2))
            for name, version, call in calls:
                found = _check_call(compiled, version, seed, call, name)
                result.failures += [failure for failure in found if not failure.is_note]
                result.notes += [failure for failure in found if failure.is_note]
    result.seconds = time.perf_counter() - started
    return result


def _compile(module, program: Program, seed: int, result: CaseResult):
    try:
        compiled = inductor.compile_fx(module, program.inputs(0, seed))
    except Exception as error:  # noqa: BLE001 (every compiler error is a finding)
        result.failures.append(Failure("compile error", f"{type(error).__name__}: "
                                       f"{_message(error)}{where_raised(error)}"))
        return None
    report = compiled.report
    result.fallback_ops = dict(report.fallback_ops or {})
    if report.reason is not None:
        if any(reason in report.reason for reason in EXPECTED_AS_IS):
            result.as_is = report.reason
        else:
            result.failures.append(Failure("unexpected fallback", report.reason))
    return compiled


def _message(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return " | ".join(lines[:3])[:400] if lines else ""


def _check_call(compiled, program: Program, seed: int, call: int, name: str) -> list:
    inputs = program.inputs(call, seed)
    predicted = fake_strides(program, inputs)
    with _one_thread_if(_share_memory(inputs)):
        expected = run(program.graph_module(), inputs)
        actual = run(compiled, program.inputs(call, seed))
    if expected.error is not None and actual.error is None and \
            _raises_only_in_dead_code(program, seed, call):
        return [Failure("note: eager raised in dead code", f"{type(expected.error).__name__}: "
                        f"{expected.error}"[:200], name)]

    def reference() -> Optional[Outcome]:
        try:
            with _default_dtype(torch.float64):
                return run(program.graph_module(float64=True),
                           program.inputs(call, seed, float64=True))
        except Exception:  # noqa: BLE001 (no reference: the plain tolerances decide)
            return None
    return compare(expected, actual, name, reference, predicted, low_precision(program))


def _share_memory(inputs) -> bool:
    """Whether two tensor inputs share memory, or one input's elements do (an expanded
    input). A graph writing into such memory is run as is (eager's kernels), and eager's
    multithreaded kernels then race: BatchNorm's running mean and variance as overlapping
    views of one tensor are written by the threads of one loop over the channels, and eager
    differs from itself from run to run (graph seed 14039 on a 16-thread host; 4743, a running
    variance `r.expand(5)`: 3 distinct results in 30 eager runs on 2 threads). Such calls
    compare one-threaded runs, where eager is deterministic."""
    tensors = [value for value in inputs if isinstance(value, torch.Tensor) and value.numel()]
    storages = [value.untyped_storage().data_ptr() for value in tensors]
    return len(storages) != len(set(storages)) or any(
        torch._debug_has_internal_overlap(value) != 0 for value in tensors)


@contextlib.contextmanager
def _one_thread_if(condition: bool):
    threads = torch.get_num_threads()
    if condition:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if condition:
            torch.set_num_threads(threads)


def _raises_only_in_dead_code(program: Program, seed: int, call: int) -> bool:
    """Whether eager runs without an error once the nodes nothing uses are gone, and then
    the values nothing reads (`unread.without_unread_values`)."""
    if run(_live_only(program.graph_module()), program.inputs(call, seed)).error is None:
        return True
    live = without_unread_values(_live_only(program.graph_module()),
                                 program.inputs(call, seed), _name, ALIASING_NAMES)
    return live is not None and \
        run(_live_only(live), program.inputs(call, seed)).error is None


def low_precision(program: Program) -> Optional[torch.dtype]:
    """The least precise floating type below float64 the program names or takes as input, if
    any: a float64 result computed from float32 values carries float32 rounding (seed 7976:
    the float64 sum of seven batch-normalised float32 values, exactly 0 in a float64 run, is
    1.8e-7 in eager and 4.0e-7 compiled, both a few float32 ulps of the terms), so it is
    compared with that type's tolerances."""
    names = program.source() + " ".join(root.dtype for root in program.roots)
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        if str(dtype).replace("torch.", "") in names:
            return dtype
    return None


# Ops whose result may share memory with their first argument (views, and conversions that
# return the tensor itself when nothing changes); a write into the result writes there too.
ALIASING_NAMES = {
    "view", "reshape", "permute", "transpose", "t", "expand", "expand_as", "getitem", "select",
    "unsqueeze", "squeeze", "as_strided", "narrow", "chunk", "split", "split_with_sizes",
    "unbind", "diagonal", "flatten", "unflatten", "movedim", "moveaxis", "swapaxes", "swapdims",
    "mT", "T", "H", "mH", "real", "imag", "unfold", "view_as", "reshape_as", "detach", "alias",
    "contiguous", "slice", "_unsafe_view", "ravel", "view_as_real", "view_as_complex", "to",
    "type", "type_as", "float", "double", "half", "bfloat16", "int", "long", "short", "char",
    "byte", "bool", "cpu", "cuda", "atleast_1d", "atleast_2d", "atleast_3d", "align_as"}


def _live_only(module):
    """The graph without nodes whose values nobody uses: an error eager raises only there
    (an integer division by zero nobody reads) is no compiler's to keep. A write (in-place
    op, `setitem`, `out=`, mutable ATen overload, batch norm in training) stays when it
    writes into an input's memory or into memory something live reads: its target traced
    back through aliasing ops (`ALIASING_NAMES`, in-place ops returning their target; an op
    that may copy counts as an alias, which keeps more), or a target it cannot name."""
    nodes = list(module.graph.nodes)
    live: set = {node for node in nodes if node.op in ("output", "placeholder")}
    changed = True
    while changed:
        changed = False
        live_roots = {_root(node) for node in live}
        for node in reversed(nodes):
            if node in live:
                continue
            targets = _written(node)
            if any(user in live for user in node.users) or (targets is not None and any(
                    target is None or target.op == "placeholder" or target in live_roots
                    for target in map(_root, targets))):
                live.add(node)
                live_roots.add(_root(node))
                changed = True
    for node in reversed(nodes):
        if node not in live:
            module.graph.erase_node(node)
    module.recompile()
    return module


def _root(node):
    """The node whose memory `node` may share: aliasing and in-place ops walked back."""
    while isinstance(node, torch.fx.Node) and node.op in ("call_method", "call_function") \
            and node.args and (_name(node) in ALIASING_NAMES or _in_place(node)):
        node = node.args[0]
    return node


def _in_place(node) -> bool:
    name = _name(node)
    return name.endswith("_") and not name.endswith("__")


def _written(node) -> Optional[list]:
    """What `node` writes into (None: nothing; a None item: something it cannot name)."""
    if node.op not in ("call_method", "call_function"):
        return None
    name, schema = _name(node), getattr(node.target, "_schema", None)
    targets = []
    if "out" in node.kwargs:
        out = node.kwargs["out"]
        targets += list(out) if isinstance(out, (list, tuple)) else [out]
    if schema is not None and schema.is_mutable:
        for position, argument in enumerate(schema.arguments):
            if argument.alias_info is not None and argument.alias_info.is_write:
                value = node.args[position] if position < len(node.args) else \
                    node.kwargs.get(argument.name)
                targets += list(value) if isinstance(value, (list, tuple)) else [value]
        targets = targets or [None]
    elif name == "batch_norm" and _training(node):   # running statistics
        positions = (1, 2) if node.target is torch.nn.functional.batch_norm else (3, 4)
        targets += [node.args[position] if position < len(node.args) else node.kwargs.get(key)
                    for position, key in zip(positions, ("running_mean", "running_var"))]
    elif _in_place(node) or node.target is operator.setitem or \
            node.kwargs.get("inplace") is True:
        targets.append(node.args[0] if node.args else node.kwargs.get("input", None))
    if not targets:
        return None
    return [target if isinstance(target, torch.fx.Node) else None for target in targets
            if target is not None] or [None]


def _training(node) -> bool:
    if node.kwargs.get("training") is not None:
        return node.kwargs["training"] is True
    return len(node.args) > 5 and node.args[5] is True


def _name(node) -> str:
    """The op's name: a method's, an attribute's (`x.mT`), an ATen overload's (`aten::view`
    for `aten.view.default`), a function's."""
    target = node.target
    if node.op == "call_method":
        return target
    if target is operator.getitem:
        return "getitem"
    if target is getattr and len(node.args) > 1 and isinstance(node.args[1], str):
        return node.args[1]
    schema = getattr(target, "_schema", None)
    if schema is not None:
        return schema.name.split("::")[-1]
    return getattr(target, "__name__", str(target)).split(".")[-1]


def fake_strides(program: Program, inputs: list) -> Optional[list]:
    """Per output, the strides torch's fake tensors give for the torch-level graph; None on
    the CPU, where the compiler reads eager's own from a run by eager's kernels
    (`inductor.config.eager_layout_run`): there every stride difference is a failure."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    if inductor.config.eager_layout_run and all(
            value.device.type == "cpu" for value in inputs if isinstance(value, torch.Tensor)):
        return None
    try:
        mode = FakeTensorMode(allow_non_fake_inputs=True)
        fakes = [mode.from_tensor(value) for value in inputs]
        with mode:
            outputs = program.graph_module()(*fakes)
    except Exception:  # noqa: BLE001 (no prediction: every stride difference counts)
        return None
    return [tuple(value.stride()) if isinstance(value, torch.Tensor) else None
            for value in outputs]


@contextlib.contextmanager
def _default_dtype(dtype: torch.dtype):
    saved = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(saved)


def aliasing_variant(program: Program) -> Optional[Program]:
    """The program with inputs aliased differently and laid out the same: arguments that
    share a root get roots of their own, or two arguments with identical roots and
    derivations become one tensor passed twice. None when neither applies."""
    variant = program.copy()
    seen: dict = {}
    changed = False
    for arg in variant.args:
        if arg.root in seen and seen[arg.root] != arg.name:
            variant.roots.append(dataclasses.replace(variant.roots[arg.root]))
            arg.root = len(variant.roots) - 1
            changed = True
        seen.setdefault(arg.root, arg.name)
    if changed:
        return variant
    by_spec: dict = {}
    for arg in variant.args:
        root = variant.roots[arg.root]
        key = (tuple(root.shape), root.dtype, root.kind, root.high, arg.derive)
        if key in by_spec:
            arg.root = by_spec[key]
            return variant
        by_spec[key] = arg.root
    return None
