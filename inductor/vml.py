"""Stage "decompose" (VML): the user's float transcendentals marked as eager's MKL VML calls.

Input: the arguments of a user-level `aten.exp`, `aten.cos`, ... (or their in-place forms)
while `make_fx` traces with the decomposition table. Output: `framejit.vml(x, "exp")` nodes,
which the lowering turns into `ops.vml_exp` (the C++ backend calls VML for it), or
NotImplemented (the op stays as it is).

Eager's CPU kernels for these ops on float32 and float64 (`IMPLEMENT_COMPLEX_KERNEL` and its
kin in `aten/src/ATen/native/cpu/UnaryOpsKernel.cpp`) call `at::vml::v<op>`, which is MKL's
vector math library (`vmsExp`, `vmdLn`, ... in `libtorch_cpu.so`, mode `VML_HA |
VML_FTZDAZ_OFF | VML_ERRMODE_IGNORE`) wherever torch is built with MKL. glibc's libmvec,
which the C++ kernels otherwise use, differs from it by an ulp on about half of the values
(exp 51%, log 42%, cos 27%), and an ulp grew to 4e-4 through later ops (program fuzzer seed
23912, graph fuzzer seeds 5415 and 3007). Only the ops the user calls go through VML: a
decomposition's own `exp` (softmax, log_softmax, ...) stands for a kernel with its own math
in eager, so inside another decomposition (`decomp_layers > 1`) nothing is marked. float16
and bfloat16 (eager converts to float and uses its own vectorised code) are left alone.
"""
from __future__ import annotations

import functools
import threading

import torch
from torch.fx.experimental.proxy_tensor import get_proxy_mode

from inductor.config import config
from inductor.ir.ops import VML_FUNCTIONS

aten = torch.ops.aten

_library = torch.library.Library("framejit", "FRAGMENT")
_library.define("vml(Tensor self, str name) -> Tensor", tags=(torch.Tag.pointwise,))


def _vml(x, name):
    """Eagerly (and on fake tensors): eager's op itself, which is the VML call."""
    return getattr(aten, name).default(x)


_library.impl("vml", _vml, "CompositeExplicitAutograd")
VML = torch.ops.framejit.vml.default


# Ops whose eager kernel is made of the ATen ops their decomposition calls, so the exp and log
# inside are eager's VML calls (ReduceOps.cpp's logsumexp: `(self - maxes).exp_()`, a sum,
# `log_()`, measured equal bit for bit): their decomposition does not count as one.
_COMPOSED_IN_EAGER = (aten.logsumexp.default,)
_state = threading.local()


def _transparent(decomposition):
    @functools.wraps(decomposition)
    def decompose(*args, **kwargs):
        _state.transparent = getattr(_state, "transparent", 0) + 1
        try:
            return decomposition(*args, **kwargs)
        finally:
            _state.transparent -= 1
    return decompose


def _marked(x, name: str) -> bool:
    """Whether `x`'s op is the user's and eager computes it through VML (an op the config
    runs eagerly, `fallback_ops`, stays as it is: eager's kernel is VML already; none with
    `config.eager_transcendentals` off)."""
    if not config.eager_transcendentals or not isinstance(x, torch.Tensor) or \
            x.device.type != "cpu" or \
            x.dtype not in (torch.float32, torch.float64) or \
            f"aten.{name}" in {op.strip() for op in config.fallback_ops.split(",")}:
        return False
    mode = get_proxy_mode()
    layers = getattr(mode, "decomp_layers", 1) if mode is not None else 0
    return layers - getattr(_state, "transparent", 0) <= 1


def _functional(name: str):
    def decompose(x):
        return VML(x, name) if _marked(x, name) else NotImplemented
    return decompose


def _in_place(name: str):
    def decompose(x):
        return x.copy_(VML(x, name)) if _marked(x, name) else NotImplemented
    return decompose


def add_to(table: dict) -> None:
    """Enter the decompositions into `table` (they replace none of its entries)."""
    for name in VML_FUNCTIONS:
        for overload, make in ((getattr(aten, name).default, _functional),
                               (getattr(aten, name + "_").default, _in_place)):
            assert overload not in table, overload
            table[overload] = make(name)
    for overload in _COMPOSED_IN_EAGER:
        if overload in table:
            table[overload] = _transparent(table[overload])
