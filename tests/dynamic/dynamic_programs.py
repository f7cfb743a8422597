"""A small family of programs whose tensor sizes change between calls, and the differential
check of one call against eager (issue 23's dynamic-shape tests).

A `Program` is a function (or an `nn.Module`) with input templates: shapes over one changing
size `n` (`("n", 4)` is an `n x 4` tensor). `Program.arguments(n, seed)` builds one call's
arguments; `run_sweep` calls eager and the jitted copy with every size of a sweep and compares
each call's outcome: the returned values (dtype, shape, values, strides where a dimension has
more than one element, requires_grad), the arguments after the call (in-place writes), and
the raised exception's type.

The programs cover pointwise and broadcast ops, reductions over the changing dimension, views
and slices with sizes computed from `x.size(0)` / `x.shape[-1] // 2`, `torch.arange` of a size,
cat, matmul, softmax, layer norm, modules called on a changing batch, tensor constants, a
write through a boolean mask, a size carried across a graph break, loops over
`range(x.size(0))` and branches on a size (those two learn facts about the size: they
`specialise`, so their compile counts are not bounded by the dynamic-shape API's).
"""
from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any, Callable, Optional

import pytest
import torch
import torch.nn.functional as F

import dynamo

# inductor compiles a graph with symbolic sizes once on the C++ backend; a graph its symbolic
# path refuses (`NotSymbolic`: aliasing outputs, writes into inputs, a guard the decomposition
# adds, the Triton backend for now) gets one static variant per distinct size: a counted
# fallback of kind "per_size", allowed (not required) here.
PER_SIZE = pytest.mark.expect_fallback(
    "per_size", reason="inductor: one static variant per size of a graph with symbolic sizes "
    "the symbolic path refuses (NotSymbolic)")
BACKENDS = ("eager", pytest.param("inductor", marks=PER_SIZE))

# Sizes a sweep draws from besides hypothesis' own integers: 0 and 1 (torch specialises them),
# small ones, primes (no divisibility a guard could assume), powers of two, ~1000.
NOTABLE_SIZES = (0, 1, 2, 3, 4, 5, 7, 8, 11, 13, 16, 31, 64, 97, 257, 1009)


# -- the programs -------------------------------------------------------------------------------
def pointwise(x):
    return torch.sin(x) * 2 + x.exp() - 1


def broadcast(x, b):
    return x * b + b.sum(), x - x[:, :1]


def reductions(x):
    return x.sum(0), x.mean(0, keepdim=True), (x * x).sum(-1), x.amax(1), x.var(0)


def view_computed(x):
    return x.view(x.size(0), -1) * 2, x.reshape(-1, x.shape[-1]).sum(0)


def half_slice(x):
    return x[:, : x.shape[-1] // 2] + 1, x[:, x.shape[-1] // 2:].sum(1)


def arange_sized(x):
    rows = torch.arange(x.size(0))
    return rows * x.sum(1), torch.arange(x.size(0), dtype=x.dtype)[:, None] + x


def concatenate(x, y):
    return torch.cat([x, y * 2], 0), torch.cat([x, y], 1).relu()


def matmul(x, w):
    return x @ w, x.t() @ x, torch.mm(x, w).tanh()


def softmax(x):
    return torch.softmax(x, -1), torch.log_softmax(x * 2, 0)


def layer_norm(x, weight):
    return F.layer_norm(x, (x.shape[-1],)), F.layer_norm(x.t(), (2,), weight)


def range_loop(x):
    total = torch.zeros(x.shape[1:], dtype=x.dtype)
    for index in range(x.size(0)):
        total = total + x[index] * index
    return total


def size_branch(x):
    if x.size(0) > 4:
        return x * 2
    return x - 1


def write_inputs(x, y):
    x.add_(1)
    y.mul_(x)
    return x.sum(0)


def size_as_int(x):
    n = x.size(0)
    return x * n, n, x.new_full((2,), n % 5)


def trace_constants(x):
    # tensors the trace makes from Python values: lifted constants of the compiled graph
    return x * torch.tensor(1.5) + torch.tensor([1.0, 2.0, 3.0]).sum()


def mask_write(x, y):
    # a write through a boolean mask: the front end guards that the mask fits x
    x[y > 0] = -2.0
    return x * 2


def scatter_rows(x, y):
    # scatters over n: static indices (one negative) into n rows, n updates into static rows
    into = x.index_put((torch.tensor([0, -1, 0]),), torch.ones(3, 3), accumulate=True)
    onto = torch.zeros(8, 3).index_add(0, (y[:, 0].abs() * 3).long() % 8, y)
    return into, onto


def size_across_break(x):
    n = x.size(0)
    print(end="")   # a graph break (printing nothing): the next graph takes n as an int
    return x[: n // 2 + 1] * n, n + 1


def make_linear():
    return torch.nn.Linear(4, 3)


def make_conv1d():
    return torch.nn.Sequential(torch.nn.Conv1d(2, 3, 3, padding=1), torch.nn.ReLU())


def make_layer_norm():
    return torch.nn.LayerNorm(4)


def make_mlp():
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))


def make_batch_norm():
    # training mode: the running statistics' unbiased variance scales by n / (n - 1), a float
    # of sizes the kernel computes per call (inductor/lower/size_floats.py)
    return torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.BatchNorm1d(6), torch.nn.ReLU())


@dataclasses.dataclass(frozen=True)
class Program:
    """`target` (a function, or a factory of an `nn.Module`) and its argument templates."""

    name: str
    target: Callable
    shapes: tuple  # one template per tensor argument: sizes, "n" the changing one
    specialises: bool = False  # learns a fact about n: may compile once per outcome
    module: bool = False  # target() makes the module to call
    max_size: int = 1024
    smallest: int = 0
    frames: int = 1  # frames compiled per entry (2 where a graph break splits it)

    def arguments(self, n: int, seed: int, grad: bool = False) -> tuple:
        generator = torch.Generator().manual_seed(seed)
        tensors = []
        for template in self.shapes:
            shape = tuple(n if size == "n" else size for size in template)
            value = torch.randn(shape, generator=generator)
            tensors.append(value.requires_grad_(grad))
        return tuple(tensors)

    def dynamic_dims(self) -> list:
        """(argument index, dimension) of every size that is n."""
        return [(index, dim) for index, template in enumerate(self.shapes)
                for dim, size in enumerate(template) if size == "n"]

    def pair(self) -> tuple:
        """(eager callable, the object to jit): one module and its copy, or the function."""
        if not self.module:
            return self.target, self.target
        torch.manual_seed(0)
        module = self.target()
        return module, copy.deepcopy(module)

    def __repr__(self) -> str:
        return f"Program({self.name})"


PROGRAMS = (
    Program("pointwise", pointwise, (("n", 3),)),
    Program("broadcast", broadcast, (("n", 4), (4,))),
    Program("reductions", reductions, (("n", 3),)),
    Program("view_computed", view_computed, (("n", 2, 3),)),
    # n // 2 is 1 for n = 2, 3: an intermediate size of 1 specialises (the 0/1 rule)
    Program("half_slice", half_slice, ((3, "n"),), specialises=True),
    Program("arange_sized", arange_sized, (("n", 3),)),
    Program("concatenate", concatenate, (("n", 3), ("n", 3))),
    Program("matmul", matmul, (("n", 4), (4, 3))),
    Program("softmax", softmax, ((2, "n"),)),
    Program("layer_norm", layer_norm, ((2, "n"), (2,))),
    Program("linear", make_linear, (("n", 4),), module=True),
    # the CPU convolution picks its backend (and output layout) by batch size: n < 16 is a
    # fact fake tensors learn from eager's own rule (torch's fake conv, _select_conv_backend)
    Program("conv1d", make_conv1d, (("n", 2, 9),), module=True, specialises=True),
    Program("conv1d_length", make_conv1d, ((2, 2, "n"),), module=True, smallest=1),
    Program("layer_norm_module", make_layer_norm, (("n", 4),), module=True),
    Program("mlp", make_mlp, (("n", 4),), module=True),
    Program("batch_norm_train", make_batch_norm, (("n", 4),), module=True),
    Program("write_inputs", write_inputs, (("n", 3), ("n", 3))),
    Program("range_loop", range_loop, (("n", 3),), specialises=True, max_size=24),
    Program("size_branch", size_branch, (("n", 3),), specialises=True),
    Program("size_as_int", size_as_int, (("n", 2),), specialises=True),
    Program("trace_constants", trace_constants, (("n", 3),)),
    Program("mask_write", mask_write, (("n", 3), ("n", 3))),
    Program("size_across_break", size_across_break, (("n", 2),), frames=2),
    Program("scatter_rows", scatter_rows, (("n", 3), ("n", 3)), smallest=1),
)
BY_NAME = {program.name: program for program in PROGRAMS}
GENERAL = tuple(program for program in PROGRAMS if not program.specialises)


# -- jitting ------------------------------------------------------------------------------------
MODES = {"auto": {"dynamic": None}, "true": {"dynamic": True}, "false": {"dynamic": False},
         "mark": {"dynamic": None}}  # "mark": mark_dynamic on every n before each call


def counting_backend(backend: str) -> dynamo.CountingBackend:
    """A counting backend around `backend` ("eager" or "inductor")."""
    return dynamo.CountingBackend(dynamo.backends.lookup_backend(backend))


def jit(target, backend: str, mode: str):
    """(jitted target, its counting backend), after dropping every compiled entry."""
    dynamo.reset()
    counting = counting_backend(backend)
    return dynamo.jit(target, backend=counting, **MODES[mode]), counting


def mark(program: Program, arguments: tuple) -> None:
    """`dynamo.mark_dynamic` on every dimension of `arguments` that is n."""
    for index, dim in program.dynamic_dims():
        dynamo.mark_dynamic(arguments[index], dim)


# -- the differential check ---------------------------------------------------------------------
@dataclasses.dataclass
class Outcome:
    value: Any
    error: Optional[BaseException]
    arguments: tuple


def outcome(function: Callable, arguments: tuple) -> Outcome:
    try:
        return Outcome(function(*arguments), None, arguments)
    except Exception as error:  # compared with the other side
        return Outcome(None, error, arguments)


def assert_same_outcome(expected: Outcome, actual: Outcome, where: str) -> None:
    if expected.error is not None or actual.error is not None:
        assert type(actual.error) is type(expected.error), \
            f"{where}: jitted raised {actual.error!r}, eager {expected.error!r}"
    else:
        assert_same_value(expected.value, actual.value, f"{where}: result")
    assert_same_value(expected.arguments, actual.arguments, f"{where}: arguments after")


def assert_same_value(expected: Any, actual: Any, where: str) -> None:
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{where}: {actual!r} is not a tensor"
        assert actual.dtype == expected.dtype, f"{where}: dtype {actual.dtype}, eager " \
            f"{expected.dtype}"
        assert actual.shape == expected.shape, f"{where}: shape {tuple(actual.shape)}, eager " \
            f"{tuple(expected.shape)}"
        assert actual.requires_grad == expected.requires_grad, f"{where}: requires_grad"
        assert observable_strides(actual) == observable_strides(expected), \
            f"{where}: strides {actual.stride()}, eager {expected.stride()}"
        torch.testing.assert_close(actual.detach(), expected.detach(), equal_nan=True,
                                   msg=lambda text: f"{where}: {text}")
    elif isinstance(expected, (tuple, list)):
        assert type(actual) is type(expected) and len(actual) == len(expected), \
            f"{where}: {actual!r} vs eager {expected!r}"
        for index, (first, second) in enumerate(zip(expected, actual)):
            assert_same_value(first, second, f"{where}[{index}]")
    elif isinstance(expected, float) and math.isnan(expected):
        assert isinstance(actual, float) and math.isnan(actual), f"{where}: {actual!r}"
    else:
        assert type(actual) is type(expected) and actual == expected, \
            f"{where}: {actual!r}, eager {expected!r}"


def observable_strides(tensor: torch.Tensor) -> tuple:
    """Strides of the dimensions with more than one element (the others address nothing)."""
    if tensor.numel() <= 1:
        return ()
    return tuple(stride for size, stride in zip(tensor.shape, tensor.stride()) if size > 1)


def run_sweep(program: Program, sizes: list, backend: str, mode: str,
              grads: Optional[list] = None) -> dynamo.CountingBackend:
    """Call eager and the jitted program with every size of `sizes` (the same seed per call
    on both sides) and compare each call; returns the counting backend."""
    eager, target = program.pair()
    jitted, counting = jit(target, backend, mode)
    for index, n in enumerate(sizes):
        grad = bool(grads and grads[index % len(grads)])
        expected = outcome(eager, program.arguments(n, index, grad))
        arguments = program.arguments(n, index, grad)
        if mode == "mark":
            mark(program, arguments)
        actual = outcome(jitted, arguments)
        assert_same_outcome(expected, actual, f"{program.name}, call {index} (n={n}, "
                            f"sizes {sizes}, {backend}, dynamic {mode})")
    return counting


def bounded_entries(sizes: list, mode: str) -> int:
    """The most compiles the dynamic-shape API allows for a sweep of a program that learns
    nothing about n: one per size of 0 or 1 (specialised), plus one (dynamic=True,
    mark_dynamic) or two (automatic dynamic: the first compile specialises) for the rest;
    dynamic=False: one per size."""
    distinct = set(sizes)
    special = len(distinct & {0, 1})
    general = len(distinct - {0, 1})
    if mode == "false":
        return len(distinct)
    allowed = {"true": 1, "mark": 1, "auto": 2}[mode]
    return special + min(general, allowed)
