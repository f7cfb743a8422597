"""torch's Python dispatcher for tracing, with ATen's own results where torch's Python kernels
alias differently (used by the stages that trace: "decompose" over symbolic sizes and the
training path's functionalization).

Input: nothing (a context manager). Output: within it, `enable_python_dispatcher()` (which the
traces need: C++ composite kernels want concrete ints, and FakeTensor answers sizes through
it) with `aten.matmul` answered as ATen's kernel answers it. torch's Python `matmul`
(`torch._decomp.decompositions.matmul`, a `py_impl` of its CompositeImplicitAutograd key)
returns views where ATen's kernel returns a tensor of its own: `squeeze(mm(v[None], w), 0)`
for a 1-D `v` where ATen squeezes in place (`squeeze_`), and `bmm(...).view(shape)` for
batched products where ATen takes `_unsafe_view`. A trace that met those views took eager's
fresh output for a view of a hidden (1, n) or (b, n, p) intermediate (issue 23: the program
fuzzer's seed 5084, `matmul(x[..., -2], w)` under `dynamic=True`). `F.linear` of a 1-D input
and `@` reach the same kernel.

The kernel swap is process-wide while the context is open (py_kernels are per operator);
nested entries keep the outer one's.
"""
from __future__ import annotations

import contextlib

import torch
from torch._C import DispatchKey
from torch._decomp import decompositions
from torch._dispatch.python import enable_python_dispatcher
from torch.fx.experimental.symbolic_shapes import guard_or_false, guard_or_true

aten = torch.ops.aten
_KEY = DispatchKey.CompositeImplicitAutograd


# Composite ops whose Python kernels draw other random numbers than ATen's C++ composite:
# torch's Python `dropout` calls `native_dropout`, whose decomposition compares `rand_like`
# with p, where ATen's CPU `dropout` fills `bernoulli_(1 - p)`: a training-mode Dropout traced
# with symbolic sizes dropped other elements than eager's (tests/repros/
# test_p42_exit_on_graph_error.py under every size dynamic). Within the symbolic inference
# trace (`aten_composites=True`) their Python kernels are set aside: ATen's C++ composite
# runs, as in a static trace. The training path's traces keep torch's Python `dropout`: its
# `native_dropout` is the op the training runtime draws eager's mask for
# (tests/training/test_semantics.py::test_dropout_of_a_transposed_input_draws_eager_mask).
_ATEN_COMPOSITES = (aten.dropout.default,)
_COMPOSITE_KEYS = (DispatchKey.CompositeImplicitAutograd, DispatchKey.Autograd)


@contextlib.contextmanager
def aten_python_dispatcher(aten_composites: bool = False):
    """`enable_python_dispatcher()` with `aten.matmul` returning ATen's kernel's aliasing
    and, with `aten_composites`, `_ATEN_COMPOSITES` running ATen's C++ composites (module
    docstring)."""
    overload = aten.matmul.default
    python_matmul = overload.py_kernels.get(_KEY)
    swap = python_matmul is not None and not getattr(python_matmul, "_aten_aliasing", False)
    if swap:
        overload.py_kernels[_KEY] = _with_aten_aliasing(python_matmul)
        overload._dispatch_cache.clear()
    set_aside = [(composite, key, composite.py_kernels.pop(key))
                 for composite in (_ATEN_COMPOSITES if aten_composites else ())
                 for key in _COMPOSITE_KEYS if key in composite.py_kernels]
    for composite, _, _ in set_aside:
        composite._dispatch_cache.clear()
    try:
        with enable_python_dispatcher():
            yield
    finally:
        if swap:
            overload.py_kernels[_KEY] = python_matmul
            overload._dispatch_cache.clear()
        for composite, key, kernel in set_aside:
            composite.py_kernels[key] = kernel
            composite._dispatch_cache.clear()


def _with_aten_aliasing(python_matmul):
    """torch's Python `matmul` returning a tensor of its own wherever ATen's kernel does."""
    def matmul(tensor1, tensor2):
        if tensor1.dim() == 1 and tensor2.dim() == 2:
            # ATen: `tensor1.unsqueeze(0).mm(tensor2).squeeze_(0)`
            return torch.mm(tensor1.unsqueeze(0), tensor2).squeeze_(0)
        result = python_matmul(tensor1, tensor2)
        if result._base is not None and max(tensor1.dim(), tensor2.dim()) >= 3 and \
                not _folds(tensor1, tensor2):
            # the batched branch: ATen's `_unsafe_view(bmm(...), shape)`, torch's `.view`
            return aten._unsafe_view(result, result.shape)
        return result
    matmul._aten_aliasing = True
    return matmul


def _folds(tensor1, tensor2) -> bool:
    """Whether torch's Python `matmul` (as ATen's) takes the folding branch for these
    operands (where both return the same aliasing: `_unsafe_view`, or the transposed fold's
    `.contiguous()`), directly or through the squeeze of a one-wide batch that requires grad
    (its recursion folds), with the decomposition's own size tests."""
    if decompositions.should_fold(tensor1, tensor2, False):
        return True
    if tensor1.dim() != 3 or tensor2.dim() != 3:
        return False
    batch1, batch2 = tensor1.shape[0], tensor2.shape[0]
    return guard_or_true(batch1 != batch2) and (
        (guard_or_false(batch1 == 1) and tensor1.requires_grad)
        or (guard_or_false(batch2 == 1) and tensor2.requires_grad))
