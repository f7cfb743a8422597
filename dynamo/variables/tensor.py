"""Tensors: an FX node plus a fake example value (shape, dtype, device, strides, grad).

Metadata (sizes, dtype, device, `dim()`, `is_contiguous()`...) is answered from the example at
trace time; the tensor guards on the frame's inputs make that sound. Facts those guards do not
cover are guarded where they are read (`dynamo.variables.guarding`): `storage_offset()` and
`is_pinned()` (of the input, or of every input sharing a computed view's storage), `is_leaf`
of an input that requires grad, and Python attributes set on an input (`x.tag`). Everything
else becomes a node.
"""
from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx

from dynamo.breaks import SCALAR_OUT, TENSOR_BRANCH, UNSUPPORTED_OBJECT, Unsupported
from dynamo.variables.base import NotConstant, Variable, variable
from dynamo.variables.constant import ConstantVariable
from dynamo.variables.containers import TupleVariable
from dynamo.variables.exceptions import python_error
from dynamo.variables.guarding import tensor_fact, tensor_instance_attribute, tensor_is_leaf
from dynamo.variables.symbolic import is_symbolic

# Attributes answered from the fake example (static shapes).
_METADATA_ATTRIBUTES = {"shape", "dtype", "device", "ndim", "requires_grad", "is_cuda", "layout",
                        "is_sparse", "is_quantized", "is_meta", "is_nested", "is_mps", "is_cpu",
                        "itemsize", "nbytes", "is_complex_"}
_METADATA_METHODS = {"size", "dim", "stride", "numel", "nelement", "is_contiguous",
                     "is_floating_point", "is_complex", "element_size", "get_device", "ndimension",
                     "is_signed", "is_inference", "has_names"}
# Facts of the storage: not covered by the tensor guard, guarded where read.
_STORAGE_METHODS = {"storage_offset", "is_pinned"}
# Attributes that compute a new tensor.
_TENSOR_ATTRIBUTES = {"T", "mT", "H", "mH", "real", "imag"}
# Methods that read values out of the tensor into Python.
_SCALAR_METHODS = {"item", "tolist", "numpy", "__bool__", "__int__", "__float__", "__index__",
                   "__array__"}
# Methods with effects the graph cannot hold.
_UNSUPPORTED_METHODS = {"backward", "register_hook", "retain_grad", "data_ptr", "untyped_storage",
                        "storage", "share_memory_", "pin_memory", "record_stream", "cpu_",
                        "set_", "resize_", "__setstate__", "__reduce_ex__"}


@variable
class TensorVariable(Variable):
    node: torch.fx.Node
    example: torch.Tensor  # a fake tensor

    def python_type(self) -> type:
        if self.source is not None and isinstance(self.example, torch.nn.Parameter):
            return torch.nn.Parameter
        return torch.Tensor

    def describe(self) -> str:
        if self.source is not None:
            return f"tensor {self.source.name()}"
        return f"the tensor from {_operation_name(self.node)}"

    def getattr(self, tx, name: str) -> Variable:
        if name in _METADATA_ATTRIBUTES:
            if name == "shape":
                return size_variable(tx, self, self.example.shape)
            return ConstantVariable(getattr(self.example, name))
        if name == "is_leaf":
            return ConstantVariable(tensor_is_leaf(tx, self))
        if name in _TENSOR_ATTRIBUTES:
            return tx.graph.call("call_function", getattr, (self, name), {})
        if name in ("grad", "data", "grad_fn", "_base", "_version"):
            raise Unsupported(UNSUPPORTED_OBJECT, f"reading tensor.{name}")
        if not hasattr(torch.Tensor, name):
            return self._instance_attribute(tx, name)
        return TensorMethodVariable(self, name)

    def _instance_attribute(self, tx, name: str) -> Variable:
        """A Python attribute set on an input tensor (`x.tag = 5`), read and guarded; absent,
        AttributeError as in eager code (caught by `getattr(x, name, default)`)."""
        present, value = tensor_instance_attribute(tx, self, name)
        if present:
            from guards.sources import AttrSource
            return tx.wrap(value, AttrSource(self.source, name))
        raise python_error(AttributeError, f"'Tensor' object has no attribute '{name}'")

    def has_attribute(self, tx, name: str) -> bool:
        if hasattr(torch.Tensor, name):
            return True
        return tensor_instance_attribute(tx, self, name)[0]

    def call_method(self, tx, name: str, args, kwargs) -> Variable:
        return call_tensor_method(tx, self, name, args, kwargs)

    def truth(self, tx) -> bool:
        raise Unsupported(TENSOR_BRANCH, f"`if` on the value of {self.describe()}")

    def iterate(self, tx) -> list[Variable]:
        if self.example.dim() == 0:
            raise Unsupported(UNSUPPORTED_OBJECT, "iterating over a 0-d tensor")
        return [tx.graph.call("call_function", operator.getitem, (self, index), {})
                for index in range(self.example.shape[0])]

    def as_constant(self) -> Any:
        raise NotConstant("a tensor")


def _operation_name(node: torch.fx.Node) -> str:
    """How the operation that made a tensor reads to the user: `x.max()`, `torch.cat(...)`."""
    target = node.target
    if node.op == "call_method":
        return f"`.{target}()`"
    name = getattr(target, "__name__", str(target))
    module = getattr(target, "__module__", "") or ""
    if module.startswith("torch"):
        return f"`torch.{name}(...)`"
    return f"`{_OPERATORS.get(name, name)}`"


_OPERATORS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//",
              "matmul": "@", "gt": ">", "lt": "<", "ge": ">=", "le": "<=", "eq": "==",
              "ne": "!=", "getitem": "[...]", "neg": "unary -", "pow": "**", "mod": "%"}


def size_variable(tx, tensor: TensorVariable, size) -> Variable:
    """`tensor.shape`: a constant, or a `torch.Size` whose symbolic entries are graph nodes."""
    if not any(is_symbolic(entry) for entry in size):
        return ConstantVariable(torch.Size(size))
    items = tuple(tx.graph.call("call_method", "size", (tensor, dim), {})
                  if is_symbolic(entry) else ConstantVariable(entry)
                  for dim, entry in enumerate(size))
    return TupleVariable(items, torch.Size)


@variable
class TensorMethodVariable(Variable):
    """`tensor.method`, not yet called."""

    owner: TensorVariable
    name: str

    def call(self, tx, args, kwargs) -> Variable:
        return call_tensor_method(tx, self.owner, self.name, args, kwargs)

    def describe(self) -> str:
        return f"{self.owner.describe()}.{self.name}"

    def rebuild(self, plan) -> str:
        return f"{plan.reconstruct(self.owner)}.{self.name}"


def call_tensor_method(tx, tensor: TensorVariable, name: str, args, kwargs) -> Variable:
    if name in _STORAGE_METHODS and not args and not kwargs:
        return ConstantVariable(tensor_fact(tx, tensor, name))
    if name in _METADATA_METHODS:
        # here, not at the top: variables.lowering imports this module (a cycle)
        from dynamo.variables.lowering import lower
        values = lower(tuple(args))[1]
        keywords = lower(dict(kwargs))[1]
        result = getattr(tensor.example, name)(*values, **keywords)
        if isinstance(result, torch.Size):
            return size_variable(tx, tensor, result)
        if is_symbolic(result):  # x.size(0), x.numel(): a node, so the graph serves any size
            return tx.graph.call("call_method", name, (tensor, *args), dict(kwargs))
        return ConstantVariable(tuple(result) if isinstance(result, list) else result)
    if name in _SCALAR_METHODS:
        raise Unsupported(SCALAR_OUT, f"{tensor.describe()}.{name}()")
    if name in _UNSUPPORTED_METHODS:
        raise Unsupported(UNSUPPORTED_OBJECT, f"tensor.{name}() inside a compiled region")
    if name == "type" and not args and not kwargs:
        return ConstantVariable(tensor.example.type())
    if name in ("requires_grad_",):
        raise Unsupported(UNSUPPORTED_OBJECT, "changing requires_grad inside a compiled region")
    return tx.graph.call("call_method", name, (tensor, *args), dict(kwargs))
