"""Graphs with symbolic sizes: one static compile per concrete size, chosen per call.

Input: a torch-level FX graph whose placeholders carry symbolic sizes (dynamo's
`meta["example_value"]` or make_fx's `meta["val"]` fake tensors with `torch.SymInt` sizes or
strides, or SymInt placeholders whose example input is a Python int, as torch.compile hands
them), its example inputs, and the static compile (`pipeline.compile_fx`). Output:
`SizeVariants`, a callable taking the graph's inputs.

A compile for one set of sizes is only right for those sizes: before this module existed,
`compile_fx` traced such a graph with the first call's sizes and returned that size's answer
for every later size (a (9, 3) input summed as if it were (5, 3)). Each call's key is every
tensor input's sizes and strides and every int input's value; a key seen before runs its
compiled variant (one dict lookup), a new one compiles a static variant of the graph for it
(the SymInt placeholders replaced by their values, the symbolic metas dropped) through the
full pipeline, so the speed is the static compile's. At most `config.size_variant_limit`
variants per graph; later new keys run the graph as is (eager kernels).

Every variant compiled is counted (`fallbacks.record("per_size", ...)`) with the reason the
graph was not compiled once for all sizes: code generation with sizes as kernel arguments is
issue 23's open part (docs/inductor.md, "Symbolic sizes").
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import traceback
from typing import Callable, Optional, Sequence

import sympy
import torch
import torch.fx
import torch.utils._pytree as pytree

from inductor.codegen.expressions import index_text
from inductor.config import config
from inductor.graph_calls import hookless
from inductor.ir.symbols import NotSymbolic, from_shape_env
from inductor.runtime import fallbacks
from inductor.runtime.compiled_graph import CompiledGraph, GraphReport

log = logging.getLogger("framejit.inductor")

_META_KEYS = ("example_value", "val")
_TENSOR = torch.Tensor

PER_SIZE_REASON = ("symbolic sizes: compiled as one static variant per distinct input size "
                   "(kernels taking sizes as arguments are not generated yet)")


def per_size_reason(reason: str) -> str:
    """The per-size fallback's reason for a graph the symbolic path refused (`NotSymbolic`)."""
    return f"symbolic sizes: a static variant per size ({reason})"


@dataclasses.dataclass
class SymbolicSizes:
    """What a compile over symbolic sizes knows of them: example values (`hints`, for
    heuristics only) and how each symbol is read off a call's inputs (`bindings`)."""

    hints: dict
    bindings: dict


_INT_OF_A_SYMBOL = ("Cannot convert symbols to int", "Argument of Integer should be of numeric",
                    "Cannot convert expression to float",
                    "cannot determine truth value of Relational")


@contextlib.contextmanager
def int_sizes_not_symbolic():
    """Turn a stage's `int()` of a symbolic size (sympy's "Cannot convert symbols to int")
    into `NotSymbolic`, naming the site: a stage that still needs int sizes."""
    try:
        yield
    except (TypeError, RuntimeError) as error:
        if not any(message in str(error) for message in _INT_OF_A_SYMBOL):
            raise
        raise NotSymbolic(f"a stage needs an int size at {_inductor_site(error)}") from error


def _inductor_site(error: BaseException) -> str:
    """`file:function` of the innermost inductor frame the error passed through."""
    site = "an unknown place"
    while error is not None:
        for frame in traceback.extract_tb(error.__traceback__):
            if "/inductor/" in frame.filename:
                site = f"{frame.filename.split('/inductor/')[-1]}:{frame.name}"
        error = error.__cause__ or error.__context__
    return site


def symbol_hints(values: Sequence) -> dict:
    """{symbol: example value} for every symbol of the ShapeEnv behind `values` (fake
    tensors or SymInts): the contract's `GraphPlan.size_hints`, for heuristics only."""
    for value in values:
        numbers = [value] if isinstance(value, torch.SymInt) else \
            list(value.shape) + list(value.stride()) if isinstance(value, torch.Tensor) else []
        for number in numbers:
            if isinstance(number, torch.SymInt):
                environment = number.node.shape_env
                values = getattr(environment, "backed_var_to_val", None)
                if values is None:      # torch before 2.14
                    values = environment.var_to_val
                return {symbol: int(hint) for symbol, hint in values.items()}
    return {}


def symbol_bindings(values: Sequence) -> dict:
    """The contract's `GraphPlan.symbol_bindings` for placeholders' example `values`:
    {symbol: (input position, "size" | "stride" | "int", dim)}, each symbol bound by the
    first input size that is exactly it, else the first such stride, else a SymInt input."""
    import sympy
    found: dict = {}
    for kind in ("size", "stride", "int"):   # (sizes first: the native binder reads them)
        for position, value in enumerate(values):
            if isinstance(value, torch.SymInt) and kind == "int":
                numbers = [value]
            elif isinstance(value, torch.Tensor) and kind != "int":
                numbers = list(value.shape if kind == "size" else value.stride())
            else:
                continue
            for dim, number in enumerate(numbers):
                if isinstance(number, torch.SymInt) and \
                        isinstance(number.node.expr, sympy.Symbol):
                    found.setdefault(number.node.expr, (position, kind, dim))
    order = {"size": 0, "stride": 1, "int": 2}
    return dict(sorted(found.items(), key=lambda item: (order[item[1][1]], item[1][0],
                                                         item[1][2])))


def _is_symbolic(value) -> bool:
    """Whether a recorded example value (or a structure of them) has a symbolic size."""
    for leaf in pytree.tree_leaves(value):
        if isinstance(leaf, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return True
        if isinstance(leaf, torch.Tensor) and _tensor_is_symbolic(leaf):
            return True
    return False


def sizes_fixed(gm: torch.fx.GraphModule, example_inputs: Sequence) -> bool:
    """Whether every SymInt of `gm`'s recorded values and of `example_inputs` is one
    constant after the trace's replacements: the guards fixed every size (`x * weight` with
    a static parameter fixes x's symbols), so the graph serves one size and compiles static
    (not counted as a per-size fallback)."""
    values = list(example_inputs) + [node.meta[key] for node in gm.graph.nodes
                                     for key in _META_KEYS if key in node.meta]
    for leaf in pytree.tree_leaves(values):
        if isinstance(leaf, (torch.SymFloat, torch.SymBool)):
            return False
        numbers = [leaf] if isinstance(leaf, torch.SymInt) else \
            _numbers(leaf) if isinstance(leaf, torch.Tensor) else []
        if any(isinstance(number, torch.SymInt) and number.node.maybe_as_int() is None
               for number in numbers):
            return False
    return True


def _numbers(tensor: torch.Tensor) -> list:
    """A tensor's sizes, and strides and offset where it is strided."""
    numbers = list(tensor.shape)
    if tensor.layout == torch.strided:
        numbers += list(tensor.stride()) + [tensor.storage_offset()]
    return numbers


def _tensor_is_symbolic(tensor: torch.Tensor) -> bool:
    return any(isinstance(number, torch.SymInt) for number in _numbers(tensor))


def has_symbolic_sizes(gm: torch.fx.GraphModule, example_inputs: Sequence = ()) -> bool:
    """Whether `gm` was captured with symbolic sizes: a node's recorded example value has a
    SymInt (in its sizes, strides or offset, or as the value itself), or an example input
    is one."""
    if any(isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool))
           for value in example_inputs):
        return True
    for node in gm.graph.nodes:
        for key in _META_KEYS:
            if key in node.meta and _is_symbolic(node.meta[key]):
                return True
    return False


def size_key(inputs: Sequence) -> tuple:
    """What selects a call's variant: sizes and strides of each tensor, other values as
    they are (ints bound to SymInt placeholders)."""
    return tuple([(value.shape, value.stride()) if isinstance(value, _TENSOR) else value
                  for value in inputs])     # a list: a generator costs ~1 us more per call


def specialize(gm: torch.fx.GraphModule, inputs: Sequence) -> tuple:
    """(a static copy of `gm` for these inputs, the positions of the inputs it still takes).

    Placeholders given a non-tensor (a SymInt placeholder's int) become that constant in
    every use; recorded symbolic example values are dropped (the static pipeline records
    its own)."""
    graph = torch.fx.Graph()
    environment: dict = {}
    kept = []
    placeholders = iter(range(len(inputs)))
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            position = next(placeholders)
            value = inputs[position]
            if not isinstance(value, torch.Tensor):
                environment[node] = value.node.hint if isinstance(value, torch.SymInt) \
                    else value
                continue
            kept.append(position)
        copied = graph.node_copy(node, lambda argument: environment[argument])
        for key in _META_KEYS:
            if key in copied.meta and _is_symbolic(copied.meta[key]):
                del copied.meta[key]
        environment[node] = copied
    return torch.fx.GraphModule(gm, graph), tuple(kept)


class SizeVariants:
    """Runs the static variant compiled for a call's sizes (see the module docstring).

    `compile_static(gm, inputs, all_inputs)` compiles one static graph for the call's tensors
    `inputs` (`all_inputs`: every input of the call, SymInt placeholders' ints included);
    `specializer(gm, inputs)` makes it (`specialize`, or `specialize_aten` for ATen graphs);
    `report` is the shared `GraphReport`, whose `size_variants` counts the variants."""

    def __init__(self, gm: torch.fx.GraphModule, compile_static: Callable,
                 report: GraphReport, limit: int, specializer: Callable = specialize):
        self.gm = gm
        self.compile_static = compile_static
        self.specializer = specializer
        self.report = report
        self.limit = limit
        self.variants: dict = {}
        self.lock = threading.Lock()
        self.overflowed = False
        self.first_counted = True    # False: the guards fixed every size (`sizes_fixed`)

    def __call__(self, *inputs):
        key = size_key(inputs)
        variant = self.variants.get(key)
        if variant is None:
            variant = self._variant(key, inputs)
        return variant(*inputs)

    def dispatcher(self) -> Callable:
        """`self.__call__` as a closure (one Python call less per graph call)."""
        lookup, compile_variant, tensor = self.variants.get, self._variant, _TENSOR

        def run(*inputs):
            key = tuple([(value.shape, value.stride()) if isinstance(value, tensor) else value
                         for value in inputs])
            variant = lookup(key)
            if variant is None:
                variant = compile_variant(key, inputs)
            return variant(*inputs)
        run.variants = self
        return run

    def _variant(self, key: tuple, inputs: Sequence) -> Callable:
        with self.lock:
            variant = self.variants.get(key)
            if variant is not None:
                return variant
            if len(self.variants) >= self.limit:
                return self._as_is()
            static, kept = self.specializer(self.gm, inputs)
            if self.variants or self.first_counted:
                fallbacks.record("per_size", self.report.size_reason or PER_SIZE_REASON)
            log.info("compiling a static variant of a graph with symbolic sizes for %s", key)
            compiled = self.compile_static(static, [inputs[position] for position in kept],
                                           list(inputs))
            variant = _taking(compiled, kept, len(inputs))
            self.variants[key] = variant
            self.report.size_variants = len(self.variants)
            report = getattr(compiled, "report", None)
            if report is not None:
                self.report.kernel_count = report.kernel_count
                self.report.source = report.source
            return variant

    def _as_is(self) -> Callable:
        if not self.overflowed:
            self.overflowed = True
            reason = (f"symbolic sizes: more than config.size_variant_limit="
                      f"{self.limit} distinct input sizes; new sizes run as is")
            log.warning("a graph with symbolic sizes met %s; new sizes run through eager "
                        "kernels", reason)
            fallbacks.record("unsupported", reason)
        run = hookless(self.gm)
        if self.specializer is not specialize_aten:
            return run
        output = next(node for node in self.gm.graph.nodes if node.op == "output")
        if isinstance(output.args[0], (list, tuple)):
            return lambda *inputs: list(run(*inputs))
        return lambda *inputs: [run(*inputs)]   # compile_aten's results are a list


def _taking(compiled: CompiledGraph, kept: tuple, count: int) -> Callable:
    """`compiled` called with the tensors among a call's inputs (ints are constants of it)."""
    run = compiled.run if isinstance(compiled, CompiledGraph) else compiled
    if len(kept) == count:
        return run

    def call(*inputs):
        return run(*[inputs[position] for position in kept])
    return call


def concrete_inputs(example_inputs: Sequence) -> list:
    """The example inputs with SymInts as their values and fake tensors of symbolic sizes as
    real zero tensors of their sizes (the static compile of the first variant reads them)."""
    concrete = []
    for value in example_inputs:
        if isinstance(value, torch.SymInt):
            value = value.node.hint
        elif isinstance(value, torch.Tensor) and _tensor_is_symbolic(value):
            value = _zeros_like_hints(value)
        concrete.append(value)
    return concrete


class _Blank:
    """A tensor's sizes, strides, dtype, device and `requires_grad`, without its memory."""
    __slots__ = ("size", "stride", "dtype", "device", "requires_grad")

    def __init__(self, tensor: torch.Tensor):
        def hint(number):
            return number.node.hint if isinstance(number, torch.SymInt) else number
        self.size = [hint(size) for size in tensor.shape]
        self.stride = [hint(stride) for stride in tensor.stride()]
        self.dtype, self.device = tensor.dtype, tensor.device
        self.requires_grad = tensor.requires_grad

    def zeros(self) -> torch.Tensor:
        with torch.utils._python_dispatch._disable_current_modes():
            zeros = torch.empty_strided(self.size, self.stride, dtype=self.dtype,
                                        device=self.device).zero_()
        return zeros.requires_grad_(self.requires_grad)


def blank_inputs(example_inputs: Sequence) -> list:
    """`concrete_inputs` for a compile made later (per-size variants on first need), holding
    none of the caller's tensors: each tensor as a `_Blank` that `filled` turns into zeros
    of its sizes and strides. Held in a compiled graph, the first call's own tensors (a batch,
    an input the caller dropped) stayed alive as long as the graph (a leak eager has not:
    tests/repros/test_inductor_p31_saved_tensors_held.py under every size dynamic)."""
    return [_Blank(value) if isinstance(value, torch.Tensor) else
            value.node.hint if isinstance(value, torch.SymInt) else value
            for value in example_inputs]


def filled(blanks: Sequence) -> list:
    """The example inputs `blank_inputs` described: zero tensors for its blanks."""
    return [value.zeros() if isinstance(value, _Blank) else value for value in blanks]


def _zeros_like_hints(fake: torch.Tensor) -> torch.Tensor:
    def hint(number):
        return number.node.hint if isinstance(number, torch.SymInt) else number
    with torch.utils._python_dispatch._disable_current_modes():
        return torch.empty_strided([hint(size) for size in fake.shape],
                                   [hint(stride) for stride in fake.stride()],
                                   dtype=fake.dtype, device=fake.device).zero_()


def specialize_aten(gm: torch.fx.GraphModule, inputs: Sequence) -> tuple:
    """`specialize` for an ATen graph (`compile_aten`'s input, e.g. inductor.autograd's
    symbolic forward and backward): the static copy traced again by make_fx on static fakes
    of `inputs`, so every node's `meta["val"]` has this call's sizes and the graph's size
    arithmetic (`aten.sym_size.int`, `operator.mul` on sizes) folds into constants."""
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch._subclasses.fake_tensor import FakeTensorMode

    from inductor.decompose import fake_inputs_for
    static, kept = specialize(gm, inputs)
    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    fakes = fake_inputs_for([inputs[position] for position in kept], fake_mode)
    grad_before = torch.is_grad_enabled()
    try:
        with fake_mode:
            retraced = make_fx(lambda *values: static.forward(*values),
                               tracing_mode="real")(*fakes)
    finally:
        torch._C._set_grad_enabled(grad_before)
    return retraced, kept


def bind_symbols(gm: torch.fx.GraphModule, inputs: Sequence) -> dict:
    """The contract's binding of the graph's symbols to a call's values: for each free
    symbol, the first (input position, dim) whose recorded size is exactly that symbol, or
    the value of a SymInt placeholder that is one."""
    import sympy
    binding: dict = {}
    placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
    for node, value in zip(placeholders, inputs):
        example = next((node.meta[key] for key in _META_KEYS if key in node.meta), None)
        if isinstance(example, torch.SymInt):
            symbol = example.node.expr
            if isinstance(symbol, sympy.Symbol) and not isinstance(value, torch.Tensor):
                binding.setdefault(symbol, int(value))
        elif isinstance(example, torch.Tensor) and isinstance(value, torch.Tensor):
            for size, actual in zip(example.shape, value.shape):
                if isinstance(size, torch.SymInt) and isinstance(size.node.expr, sympy.Symbol):
                    binding.setdefault(size.node.expr, int(actual))
    return binding


def evaluated(values, binding: dict):
    """`values` (a structure of ints and SymInts) with every SymInt evaluated under
    `binding`; a SymInt over an unbound symbol raises `KeyError`."""
    def number(value):
        if not isinstance(value, torch.SymInt):
            return value
        expr = value.node.expr
        missing = expr.free_symbols - set(binding)
        if missing:
            raise KeyError(f"symbols {sorted(map(str, missing))} are bound by no input size")
        return int(expr.xreplace(binding))
    return pytree.tree_map(number, values)


def compile_per_size(gm: torch.fx.GraphModule, example_inputs: Sequence,
                     compile_static: Callable, reason: Optional[str] = None,
                     specializer: Callable = specialize,
                     first_counted: bool = True) -> CompiledGraph:
    """A `CompiledGraph` over `SizeVariants` of `gm`, the first variant compiled now (for
    `example_inputs`) so that compile errors surface here; counted as a `per_size` fallback
    unless `first_counted` is False (then only variants after the first are)."""
    report = GraphReport(size_reason=reason or PER_SIZE_REASON)
    variants = SizeVariants(gm, compile_static, report, config.size_variant_limit,
                            specializer)
    variants.first_counted = first_counted
    variants._variant(size_key(example_inputs), list(example_inputs))
    return CompiledGraph(variants.dispatcher(), report)


def _size_expression(number):
    """A size, stride or offset as an expression `index_text` prints: torch's Python `%` and
    `//` (`(-s) % 8` of a padded view) through `symbols.from_shape_env`, which keeps their
    value under the printer's truncating operators; NotSymbolic where it cannot."""
    if not isinstance(number, torch.SymInt):
        return sympy.Integer(number)
    return from_shape_env(number.node.expr)   # NotSymbolic where it cannot


def alias_geometry(aliases: list, bindings: dict) -> Optional[Callable]:
    """For a graph compiled once over symbolic sizes whose outputs view an input or another
    output (`aliasing.OutputAlias`, whose sizes, strides and offset may be SymInts): a
    function of a call's arguments (lifted constants, then inputs) returning {output
    position: (size, stride, offset from the base)} for this call, the symbols read off the
    arguments as the wrapper binds them (`bindings`: `symbol_bindings`); None where every
    alias is static. A symbol no input binds raises `NotSymbolic`."""
    entries, used = [], set()
    for position, alias in enumerate(aliases):
        if alias is None or alias.same_object:
            continue
        numbers = [*alias.size, *alias.stride, alias.storage_offset]
        if not any(isinstance(number, torch.SymInt) for number in numbers):
            continue
        texts = []
        for number in numbers:
            expr = _size_expression(number)
            used |= expr.free_symbols
            texts.append(str(int(expr)) if expr.is_Integer else
                         index_text(sympy.expand(expr), "//"))
        rank = len(alias.size)
        entries.append(f"{position}: (({''.join(text + ', ' for text in texts[:rank])}), "
                       f"({''.join(text + ', ' for text in texts[rank:2 * rank])}), "
                       f"{texts[-1]})")
    if not entries:
        return None
    missing = used - set(bindings)
    if missing:
        raise NotSymbolic(f"an output view's geometry uses sizes {sorted(map(str, missing))} "
                          "bound by no input size")
    lines = ["def geometry(arguments):"]
    for symbol, (position, kind, dim) in bindings.items():
        if symbol in used:
            read = {"size": f".shape[{dim}]", "stride": f".stride()[{dim}]", "int": ""}[kind]
            lines.append(f"    {symbol.name} = arguments[{position}]{read}")
    lines.append(f"    return {{{', '.join(entries)}}}")
    namespace: dict = {}
    exec(compile("\n".join(lines) + "\n", "<framejit alias geometry>", "exec"), namespace)
    return namespace["geometry"]


def layout_fallback(variants: Callable) -> Callable:
    """`fallback(arguments)`: the call for inputs laid out otherwise than traced, run by
    per-size variants (`variants()`, made on first need) with the boxed convention."""
    made: list = []

    def fallback(arguments: list):
        if not made:
            made.append(variants())
        return made[0].with_argument_list(arguments)
    return fallback


def with_layout_fallback(run: Callable, variants: Callable) -> Callable:
    """`run`, or where a call's input strides are not the traced ones (the wrapper's
    `InputLayoutChanged`, raised before any work), per-size variants made on first need.
    (`_wrap_observable_behaviour` catches it in its own frame: a frame less per call.)"""
    from inductor.codegen.wrapper import InputLayoutChanged
    fallback = layout_fallback(variants)

    def call(*inputs):
        try:
            return run(*inputs)
        except InputLayoutChanged:
            return fallback(list(inputs))

    def call_with_argument_list(arguments: list):
        try:
            return run.with_argument_list(arguments)
        except InputLayoutChanged:
            return fallback(arguments)
    call.with_argument_list = call_with_argument_list
    return call
