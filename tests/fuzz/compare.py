"""Comparing what one call did eagerly with what it did jitted.

Stage: checking. Input: two object graphs living in two namespaces (the eager run's and the
jitted run's: results, arguments after the call, globals, printed text). Output: the first
`Mismatch` (failure kind, path, detail) or None.

Objects are matched by structure, and identity is part of the structure: once an eager object
has been paired with a jitted one, every later occurrence must pair the same way (a result that
is the argument list in eager must be the argument list jitted; two results that are one tensor
in eager must be one tensor jitted). Tensors are paired by storage as well, so a result that
views an input eagerly must view the corresponding input jitted.
"""
from __future__ import annotations

import dataclasses
import math
import re
import types
from typing import Any, Optional

import torch

KINDS = {
    "internal_error": "the jitted call raised from inside the compiler where eager did not",
    "exception": "exception type or message differ (or only one side raised)",
    "traceback": "same exception, different frames or lines in the program",
    "result": "return value differs (structure, type, dtype, shape, values)",
    "requires_grad": "a tensor's requires_grad differs",
    "aliasing": "identity or storage sharing differs (objects, tensors, views of inputs)",
    "layout": "a tensor's strides or storage offset differ",
    "view": "whether a tensor is a view (`_base`) differs, or which tensor it views",
    "mutation": "an argument differs after the call",
    "globals": "a global, class attribute or module-object attribute differs after the call",
    "print": "printed output differs",
    "grad_mode": "torch.is_grad_enabled() differs after the call",
    "backward": "gradients (or the error of backward()) differ",
    "timeout": "the program did not finish in time",
    "crash": "the worker process died (segfault, abort, out of memory)",
}


@dataclasses.dataclass
class Mismatch:
    kind: str
    where: str
    detail: str

    def __str__(self) -> str:
        return f"[{self.kind}] {self.where}: {self.detail}"


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """How closely a backend's observable results must match eager's: numbers within
    rtol/atol; `node_names`: the autograd node names of printed tensors compared too (a
    backend that regenerates views of a compiled graph's outputs shows `AsStridedBackward0`
    or `ViewBackward0` where eager shows the op's; whether a node is there still counts)."""

    rtol: float
    atol: float
    node_names: bool = True


EXACT = Tolerance(0.0, 0.0)
TOLERANCES = {"eager": Tolerance(1.3e-6, 1e-5),
              "inductor": Tolerance(1e-4, 1e-4, node_names=False)}
_IMMUTABLE = (int, float, complex, str, bytes, bool, type(None), tuple, frozenset, range,
              torch.dtype, torch.device, torch.Size)


class Comparer:
    """Compares object graphs of two namespaces, remembering which objects were paired."""

    def __init__(self, tolerance: Tolerance, check_layout: bool = True):
        self.tolerance = tolerance
        self.check_layout = check_layout
        self.forward: dict = {}  # id(eager object) -> jitted object
        self.backward: dict = {}  # id(jitted object) -> eager object
        self.storages: dict = {}  # eager storage pointer -> jitted storage pointer
        self.storages_back: dict = {}
        self._alive: list = []

    def same(self, expected: Any, actual: Any, where: str) -> Optional[Mismatch]:
        if not isinstance(expected, _IMMUTABLE) or not isinstance(actual, _IMMUTABLE):
            paired = self.forward.get(id(expected))
            if paired is not None:
                if paired is actual:
                    return None
                return Mismatch("aliasing", where, "eager has the same object here as "
                                "elsewhere; jitted has a different one")
            if id(actual) in self.backward:
                return Mismatch("aliasing", where, "jitted has the same object here as "
                                "elsewhere; eager has a different one")
            self.forward[id(expected)] = actual
            self.backward[id(actual)] = expected
            self._alive += [expected, actual]
        return self._same(expected, actual, where)

    def _same(self, expected, actual, where) -> Optional[Mismatch]:
        if isinstance(expected, torch.Tensor) or isinstance(actual, torch.Tensor):
            return self._tensor(expected, actual, where)
        if type_name(expected) != type_name(actual):
            return Mismatch("result", where, f"type {type_name(actual)}, eager "
                            f"{type_name(expected)} ({short(actual)} vs {short(expected)})")
        if isinstance(expected, float):
            if not close(expected, actual, self.tolerance):
                return Mismatch("result", where, f"{actual!r} != eager {expected!r}")
            return None
        if isinstance(expected, (list, tuple)):
            return self._sequence(expected, actual, where)
        if isinstance(expected, dict):
            return self._dict(expected, actual, where)
        if isinstance(expected, (set, frozenset)):
            return None if expected == actual else Mismatch("result", where, f"{actual} != "
                                                                              f"{expected}")
        if isinstance(expected, torch.nn.Module):
            return self._module(expected, actual, where)
        if isinstance(expected, torch.optim.Optimizer):
            return self._optimizer(expected, actual, where)
        if isinstance(expected, BaseException):
            if str(expected) != str(actual):
                return Mismatch("result", where, f"{actual!r} != eager {expected!r}")
            return self._dict(_state(expected), _state(actual), where + ".__dict__")
        if isinstance(expected, (types.FunctionType, type, types.ModuleType,
                                 types.BuiltinFunctionType, types.MethodType)):
            return None  # compared by name (type_name)
        if hasattr(expected, "__dict__") and not isinstance(expected, types.GeneratorType):
            return self._dict(_state(expected), _state(actual), where + ".__dict__")
        if expected != actual:
            return Mismatch("result", where, f"{short(actual)} != eager {short(expected)}")
        return None

    def _sequence(self, expected, actual, where: str) -> Optional[Mismatch]:
        """A list or tuple: the same length, then item by item (the first mismatch)."""
        if len(expected) != len(actual):
            return Mismatch("result", where, f"length {len(actual)}, eager {len(expected)}")
        for index, (a, b) in enumerate(zip(expected, actual)):
            found = self.same(a, b, f"{where}[{index}]")
            if found:
                return found
        return None

    def _dict(self, expected: dict, actual: dict, where: str) -> Optional[Mismatch]:
        keys, other = list(dict.keys(expected)), list(dict.keys(actual))
        if keys != other:
            return Mismatch("result", where, f"keys {other}, eager {keys}")
        for key in keys:
            found = self.same(dict.__getitem__(expected, key), dict.__getitem__(actual, key),
                              f"{where}[{key!r}]")
            if found:
                return found
        return None

    def _module(self, expected, actual, where) -> Optional[Mismatch]:
        if expected.training != actual.training:
            return Mismatch("result", where + ".training", f"{actual.training}")
        for field in ("_parameters", "_buffers", "_modules"):
            found = self._dict(getattr(expected, field), getattr(actual, field),
                               f"{where}.{field}")
            if found:
                return found
        for key, param in expected._parameters.items():
            found = self._grad(param, actual._parameters[key], f"{where}.{key}.grad")
            if found:
                return found
        plain = {key: value for key, value in vars(expected).items() if not key.startswith("_")}
        other = {key: value for key, value in vars(actual).items() if not key.startswith("_")}
        return self._dict(plain, other, where + ".__dict__")

    def _grad(self, expected, actual, where) -> Optional[Mismatch]:
        """A parameter's `.grad`: None where eager's is, else dtype, shape and values (its
        identity and layout are not promised)."""
        if expected is None or actual is None:
            return None
        mine, theirs = expected.grad, actual.grad
        if (mine is None) != (theirs is None):
            return Mismatch("backward", where, f"{short(theirs)}, eager {short(mine)}")
        if mine is None:
            return None
        if mine.dtype != theirs.dtype or mine.shape != theirs.shape or \
                not values_close(mine, theirs, self.tolerance):
            return Mismatch("backward", where, f"jitted {tensor_text(theirs)}\n  eager  "
                            f"{tensor_text(mine)}")
        return None

    def _optimizer(self, expected, actual, where) -> Optional[Mismatch]:
        """A torch.optim optimizer: its param groups (options, params paired as objects), the
        state of each param (keys, then values) and the flag an LR scheduler reads."""
        if type(expected) is not type(actual):
            return Mismatch("result", where, f"type {type_name(actual)}")
        found = self.same(expected.param_groups, actual.param_groups, where + ".param_groups")
        if found:
            return found
        if len(expected.state) != len(actual.state):
            return Mismatch("result", where + ".state", f"{len(actual.state)} entries, eager "
                            f"{len(expected.state)}")
        params = zip([p for group in expected.param_groups for p in group["params"]],
                     [p for group in actual.param_groups for p in group["params"]])
        for index, (mine, theirs) in enumerate(params):
            state, other = expected.state.get(mine), actual.state.get(theirs)
            place = f"{where}.state[param {index}]"
            if (state is None) != (other is None):
                return Mismatch("result", place, f"{short(other)}, eager {short(state)}")
            if state is None:
                continue
            state, other = dict(sorted(state.items())), dict(sorted(other.items()))
            found = self._dict(state, other, place)
            if found:
                return found
        return self.same(getattr(expected, "_opt_called", None),
                         getattr(actual, "_opt_called", None), where + "._opt_called")

    def _tensor(self, expected, actual, where) -> Optional[Mismatch]:
        if not isinstance(actual, torch.Tensor) or not isinstance(expected, torch.Tensor):
            return Mismatch("result", where, f"{short(actual)} vs eager {short(expected)}")
        if type(expected) is not type(actual):
            return Mismatch("result", where, f"type {type(actual).__name__}, eager "
                            f"{type(expected).__name__}")
        if expected.dtype != actual.dtype or expected.shape != actual.shape:
            return Mismatch("result", where, f"{actual.dtype}{list(actual.shape)}, eager "
                            f"{expected.dtype}{list(expected.shape)}")
        if expected.requires_grad != actual.requires_grad:
            return Mismatch("requires_grad", where, f"requires_grad={actual.requires_grad}, "
                            f"eager {expected.requires_grad}")
        if expected.is_inference() != actual.is_inference():
            return Mismatch("result", where, f"is_inference() {actual.is_inference()}, eager "
                            f"{expected.is_inference()}")
        found = self._storage(expected, actual, where) or self._view(expected, actual, where)
        if found:
            return found
        if not values_close(expected, actual, self.tolerance):
            return Mismatch("result", where, f"values differ:\n  jitted {tensor_text(actual)}"
                            f"\n  eager  {tensor_text(expected)}")
        if self.check_layout and expected.numel() > 1 and \
                (_addressing(expected) != _addressing(actual) or
                 expected.storage_offset() != actual.storage_offset()):
            return Mismatch("layout", where, f"stride {actual.stride()} offset "
                            f"{actual.storage_offset()}, eager {expected.stride()} offset "
                            f"{expected.storage_offset()}")
        return None

    def _view(self, expected, actual, where) -> Optional[Mismatch]:
        """Whether the tensor is a view (`_base` set) and of what: eager's base is compared as
        any object, so where it is an argument or a result (compared before or after), the
        jitted base must be the object paired with it; an intermediate base is compared by
        dtype, shape, values and layout (`t1[1:]` returned with `t1` viewed a hidden buffer of
        another layout: issue 21). Compared with the layout (not for gradients)."""
        if not self.check_layout:
            return None
        mine, theirs = expected._base, actual._base
        if (mine is None) != (theirs is None):
            return Mismatch("view", where, f"jitted {'is' if theirs is not None else 'is no'}"
                            f" view, eager {'is' if mine is not None else 'is no'} view")
        if mine is None:
            return None
        found = self.same(mine, theirs, where + "._base")
        if found is not None and found.kind in ("aliasing", "layout", "result"):
            found.kind = "view"
        return found

    def _storage(self, expected, actual, where) -> Optional[Mismatch]:
        if expected.numel() == 0 or actual.numel() == 0:
            return None
        mine = expected.untyped_storage().data_ptr()
        theirs = actual.untyped_storage().data_ptr()
        paired = self.storages.get(mine)
        if paired is None and theirs in self.storages_back:
            return Mismatch("aliasing", where, "jitted shares storage with another tensor "
                            "compared before; eager does not")
        if paired is not None and paired != theirs:
            return Mismatch("aliasing", where, "eager shares storage with another tensor "
                            "compared before (a view or the same tensor); jitted does not")
        self.storages[mine] = theirs
        self.storages_back[theirs] = mine
        return None


def _addressing(tensor: torch.Tensor) -> list:
    """(size, stride) of the dimensions longer than one: a stride of an extent-one dimension
    addresses nothing (eager's (1, 4) product has strides (4, 1), a buffer of ours (0, 1):
    inductor seed 4326), as the graph fuzzer compares them."""
    return [(size, stride) for size, stride in zip(tensor.shape, tensor.stride()) if size != 1]


def _state(value) -> dict:
    return dict(vars(value)) if hasattr(value, "__dict__") else {}


def type_name(value) -> str:
    kind = type(value)
    return kind.__qualname__ if kind.__module__ in ("builtins", "torch") or \
        kind.__module__.startswith("fuzzprog") else f"{kind.__module__}.{kind.__qualname__}"


def close(expected: float, actual: float, tolerance: Tolerance) -> bool:
    if math.isnan(expected) and math.isnan(actual):
        return True
    return math.isclose(expected, actual, rel_tol=tolerance.rtol, abs_tol=tolerance.atol) or \
        expected == actual


def values_close(expected: torch.Tensor, actual: torch.Tensor, tolerance: Tolerance) -> bool:
    a, b = expected.detach(), actual.detach()
    if a.is_floating_point() or a.is_complex():
        return torch.allclose(b.double(), a.double(), rtol=tolerance.rtol, atol=tolerance.atol,
                              equal_nan=True)
    return torch.equal(a, b)


def tensor_text(value: torch.Tensor) -> str:
    return str(value.detach().flatten()[:12].tolist())


def short(value, limit: int = 80) -> str:
    text = repr(value) if not isinstance(value, torch.Tensor) else \
        f"tensor{list(value.shape)}"
    return text if len(text) <= limit else text[:limit] + "..."


_NUMBER = re.compile(r"-?\d+\.\d*(?:e[-+]?\d+)?|-?\d+(?:e[-+]?\d+)|nan|-?inf")


def _printed_close(x: str, y: str, tolerance: Tolerance) -> bool:
    """Printed numbers agree within the tolerance plus one unit of the last printed digit (a
    value a hair away from a rounding boundary prints differently)."""
    if x == y:
        return True
    digits = x.split(".")[1].split("e")[0] if "." in x else ""
    unit = 10.0 ** -len(digits) if digits and "e" not in x else 0.0
    a, b = float(x), float(y)
    return close(a, b, tolerance) or abs(a - b) <= 1.01 * unit + tolerance.atol


_COMPILED_NODE = "grad_fn=<CompiledFunctionBackward>"
_GRAD_FN = re.compile(r"grad_fn=<\w+>")
_ANY_NODE = "grad_fn=<node>"
# torch's repr puts the `grad_fn=` suffix on a line of its own where it does not fit: a
# compiled node's longer name wraps where eager's op name did not (or the other way round)
_WRAPPED_NODE = re.compile(r",\n *grad_fn=<node>")


# torch's own saved-tensor check, for an op run eagerly that saved a compiled graph's output
# or an input a compiled graph wrote, names framejit's node (docs/graph-breaks.md, by design,
# as torch.compile: FINDINGS.md P31, seeds 23579, 17747)
_FRAMEJIT_NODE = re.compile(
    r"(, which is output \d+ of )(?:CompiledFunction|CompiledFunctionBackward|"
    r"torch::autograd::CopyBackwards),")
_EAGER_NODE = re.compile(r"(, which is output \d+ of )[\w:]+,")


def backward_errors_differ(expected: Optional[str], actual: Optional[str]) -> bool:
    """Whether the errors of backward() differ: equal texts, or texts that differ only where
    torch's own check names a node of framejit's (`_FRAMEJIT_NODE`) and eager's an op's."""
    if expected == actual:
        return False
    if expected is None or actual is None or not _FRAMEJIT_NODE.search(actual):
        return True
    return _FRAMEJIT_NODE.sub(r"\1<node>,", actual) != _EAGER_NODE.sub(r"\1<node>,", expected)


def printed_differ(expected: str, actual: str, tolerance: Tolerance) -> Optional[str]:
    """None if the printed texts agree (numbers with a decimal point within tolerance). A
    tensor printed with the autograd node of a compiled training graph shows that node's
    name where eager shows the op's (docs/graph-breaks.md, by design): names are not
    compared then, nor on a backend whose tolerance says so, nor whether the names' lengths
    put the node on a line of its own (a missing node still differs)."""
    if expected == actual:
        return None
    if _COMPILED_NODE in actual or not tolerance.node_names:
        expected, actual = (_WRAPPED_NODE.sub(", " + _ANY_NODE, _GRAD_FN.sub(_ANY_NODE, text))
                            for text in (expected, actual))
    a_parts, b_parts = _NUMBER.split(expected), _NUMBER.split(actual)
    a_nums, b_nums = _NUMBER.findall(expected), _NUMBER.findall(actual)
    if a_parts == b_parts and len(a_nums) == len(b_nums):
        if all(_printed_close(x, y, tolerance) for x, y in zip(a_nums, b_nums)):
            return None
    for index, (x, y) in enumerate(zip(expected.splitlines(), actual.splitlines())):
        if x != y:
            return f"line {index + 1}: jitted {y!r}, eager {x!r}"
    return f"jitted printed {len(actual.splitlines())} lines, eager " \
           f"{len(expected.splitlines())}: jitted {actual[-200:]!r}, eager {expected[-200:]!r}"
