"""torch functions as values: calls become graph nodes, with a few exceptions.

Functions that answer from metadata or global state (`torch.is_tensor`, `torch.is_grad_enabled`,
`torch.get_default_dtype`, `torch.compiler.is_compiling`) fold to constants; functions with
effects on the process (seeding, global flags, I/O, synchronisation) break the graph; the
grad-mode and autocast context managers are handled in `dynamo.variables.contexts`.

A folded call that reads process state is a fact the trace consumed: the global-state guard
covers grad mode, inference mode, autocast, the default dtype, deterministic algorithms and the
matmul precision; any other call without tensor arguments whose result folds
(`torch.get_num_threads()`, `torch.initial_seed()`, `torch._C._get_cublas_allow_tf32()`,
`torch.get_autocast_dtype("cpu")` while autocast is off) is called again by the check
(`guarding.guard_call_result`), unless it is pure (`torch.finfo`) or constant for the process
(`torch.cuda.is_available()`).
"""
from __future__ import annotations

import types
from typing import Any

import torch

from dynamo.breaks import UNSUPPORTED_CALL, Unsupported
from dynamo.variables.base import NotConstant, Variable, variable
from dynamo.variables.constant import ConstantVariable
from dynamo.variables.contexts import AutocastContext
from dynamo.variables.tensor import TensorVariable
from guards.sources import AttrSource
from dynamo.variables.contexts import context_for_function
from dynamo.variables.exceptions import python_error
from dynamo.variables.functions import UserFunctionVariable
from dynamo.variables.guarding import guard_call_result
from dynamo.variables.lowering import lower
from dynamo.variables.symbolic_tensors import BUILDERS, tensor_from_symbols


def _compiling(*args, **kwargs) -> bool:
    return True


_FOLDED = {
    torch.is_tensor: lambda obj, /: isinstance(obj, torch.Tensor),  # torch's parameters
    torch.is_grad_enabled: torch.is_grad_enabled,
    torch.is_inference_mode_enabled: torch.is_inference_mode_enabled,
    torch.get_default_dtype: torch.get_default_dtype,
    torch.is_autocast_enabled: torch.is_autocast_enabled,
    torch.get_autocast_dtype: torch.get_autocast_dtype,
    torch.is_floating_point: lambda input: input.is_floating_point(),
    torch.is_complex: lambda input: input.is_complex(),
    torch.numel: lambda input: input.numel(),
    torch.compiler.is_compiling: _compiling,
    torch.compiler.is_dynamo_compiling: _compiling,
    torch.jit.is_scripting: lambda: False,
    torch.jit.is_tracing: lambda: False,
    torch._C._get_tracing_state: lambda: None,
    torch.are_deterministic_algorithms_enabled: torch.are_deterministic_algorithms_enabled,
    torch.get_float32_matmul_precision: torch.get_float32_matmul_precision,
    torch._utils.is_compiling: _compiling,
    torch.overrides.has_torch_function: lambda *args: False,
    torch.overrides.has_torch_function_unary: lambda *args: False,
    torch.overrides.has_torch_function_variadic: lambda *args: False,
    torch._C._has_torch_function: lambda *args: False,
    torch._C._has_torch_function_unary: lambda *args: False,
    torch._C._has_torch_function_variadic: lambda *args: False,
    torch._C._log_api_usage_once: lambda *args: None,  # usage telemetry: nothing to compile
}
for _name in ("is_compiling", "is_exporting"):
    if hasattr(torch.compiler, _name):
        _FOLDED[getattr(torch.compiler, _name)] = _compiling if _name == "is_compiling" \
            else (lambda: False)

_EFFECTS = {torch.manual_seed, torch.seed, torch.set_default_dtype, torch.set_grad_enabled,
            torch.use_deterministic_algorithms, torch.set_num_threads, torch.save, torch.load,
            torch.set_printoptions, torch.set_float32_matmul_precision, torch.set_rng_state,
            torch.get_rng_state, torch.cuda.synchronize, torch.set_default_device,
            torch.autograd.grad, torch.autograd.backward}


def _real_type_error(function, values, keywords):
    try:
        function(*values, **keywords)
    except TypeError as error:
        raise python_error(TypeError, str(error)) from None
    raise Unsupported(UNSUPPORTED_CALL, f"{function.__name__}: arguments framejit cannot fold")


def _hashable(function) -> bool:
    """Whether `function` can be looked up in the tables (a pybind method object is not
    hashable: it simply is in none of them)."""
    try:
        hash(function)
    except TypeError:
        return False
    return True


@variable
class TorchFunctionVariable(Variable):
    """A function of the torch namespace (builtin ops and Python functions like F.gelu)."""

    value: Any
    is_real: bool = True

    def python_type(self) -> type:
        return type(self.value)

    def as_constant(self) -> Any:
        return self.value

    def describe(self) -> str:
        module = getattr(self.value, "__module__", None) or "torch"
        return f"{module}.{getattr(self.value, '__name__', self.value)}"

    def call(self, tx, args, kwargs) -> Variable:
        function = self.value
        if function is torch.jit.annotate and len(args) == 2 and not kwargs:
            return args[1]  # a type hint for TorchScript; eager returns the value itself
        folded = _FOLDED.get(function) if _hashable(function) else None
        if folded is not None:
            values, keywords = lower(tuple(args))[1], lower(dict(kwargs))[1]
            try:
                result = folded(*values, **keywords)
            except TypeError:  # arguments torch refuses too: its own message, raised in the trace
                result = _real_type_error(function, values, keywords)
            if function in _STATE_READERS and not keywords:
                guard_call_result(tx, function, tuple(values), result)
            return ConstantVariable(result)
        if _hashable(function) and function in _EFFECTS:
            raise Unsupported(UNSUPPORTED_CALL, f"{self.describe()}() changes process state")
        context = context_for_function(tx, function, args, kwargs)
        if context is not None:
            return context
        if _is_method_on_object(function, args):
            if isinstance(args[0], AutocastContext):  # modelled by its settings only
                raise Unsupported(UNSUPPORTED_CALL, f"{function.__qualname__} called on an "
                                  "autocast object made outside the compiled region (a "
                                  "block cut by a graph break is left eagerly)")
            return UserFunctionVariable(function, source=self.source).call(tx, args, kwargs)
        if any(_holds_tensor(arg) for arg in [*args, *kwargs.values()]):
            return tx.graph.call("call_function", function, tuple(args), dict(kwargs))
        if function in BUILDERS:  # torch.tensor([x.size(0)]): one graph for every size
            built = tensor_from_symbols(tx, function, tuple(args), dict(kwargs))
            if built is not None:
                return built
        if _sets_process_state(function):
            raise Unsupported(UNSUPPORTED_CALL, f"{self.describe()}() changes process state")
        constant = _fold_on_constants(function, args, kwargs)
        if constant is not None:
            return ConstantVariable(constant)
        result = tx.graph.call("call_function", function, tuple(args), dict(kwargs))
        if isinstance(result, ConstantVariable):
            return _fold_for_real(tx, function, args, kwargs, result)
        return result

    def getattr(self, tx, name: str) -> Variable:
        return tx.wrap(getattr(self.value, name),
                       None if self.source is None else AttrSource(self.source, name))


def _sets_process_state(function) -> bool:
    """A setter of process state (`torch._C._set_cudnn_enabled`, `torch.set_autocast_dtype`):
    run at trace time it would change the state once, never on the calls that hit the entry
    (and a guard calling it again would set it on every check): it breaks the graph."""
    name = getattr(function, "__name__", "") or ""
    return name.startswith(("set_", "_set_")) or name in _SETTER_NAMES


_SETTER_NAMES = {"manual_seed", "seed", "use_deterministic_algorithms", "empty_cache"}

_STATE_READERS = {torch.is_autocast_enabled, torch.get_autocast_dtype}
"""Folded readers of state the global-state guard covers only in part (other devices, the
autocast dtype while autocast is off)."""


def _is_method_on_object(function, args) -> bool:
    """A Python method of a torch class called on an object (`torch.no_grad().__exit__(None,
    None, None)`, `GradScaler.update(scaler)`, `Normal.log_prob(d, x)`): traced into like any
    method, so that what it does to the object and to torch's state (`set_grad_enabled(
    self.prev)`) is recorded. Without a tensor argument it was folded: it ran at trace time
    only and its effects were missing from every call that hit the entry (program fuzzer P18);
    with one, the object could not be a graph node's argument."""
    return isinstance(function, types.FunctionType) and "." in function.__qualname__ \
        and bool(args) and not isinstance(args[0], ConstantVariable) \
        and not _holds_tensor(args[0])  # Tensor's own Python methods stay nodes


def _fold_for_real(tx, function, args, kwargs, traced: ConstantVariable) -> Variable:
    """A call without tensor arguments that returned no tensor: its result folds. The trace ran
    it under the fake-tensor mode, whose presence some readers see
    (`torch._C._len_torch_dispatch_stack()`), so it is run again outside it, and the check calls
    it again on every call (`guarding.guard_call_result`)."""
    try:
        arguments = tuple(arg.as_constant() for arg in args)
        keywords = {key: value.as_constant() for key, value in kwargs.items()}
    except NotConstant:
        return traced  # not repeatable from constants: it rests on its (guarded) arguments
    value = function(*arguments, **keywords)
    guard_call_result(tx, function, arguments, value, keywords)
    return ConstantVariable(value)


def _holds_tensor(value: Variable) -> bool:
    if isinstance(value, TensorVariable):
        return True
    items = getattr(value, "items", None)
    if isinstance(items, (list, tuple)):
        return any(_holds_tensor(item) for item in items)
    if isinstance(items, dict):
        return any(_holds_tensor(item) for item in items.values())
    return False


_CONSTANT_RESULTS = (torch.finfo, torch.iinfo, torch.promote_types, torch.result_type,
                     torch.can_cast, torch.broadcast_shapes)


def _fold_on_constants(function, args, kwargs):
    """Pure non-tensor torch helpers (torch.finfo, promote_types...) fold at trace time."""
    if function not in _CONSTANT_RESULTS:
        return None
    try:
        values = [arg.as_constant() for arg in args]
        keywords = {key: value.as_constant() for key, value in kwargs.items()}
    except NotConstant:
        return None
    return function(*values, **keywords)


def _is_bound_python_method(value: Any) -> bool:
    """`obj.method` of a Python class: the call is the function's with `obj` first (below)."""
    return isinstance(value, types.MethodType) and \
        isinstance(value.__func__, types.FunctionType) and \
        not isinstance(value.__self__, (types.ModuleType, type))


def is_torch_function(value: Any) -> bool:
    """Callables the tracer records as graph nodes instead of tracing into."""
    if isinstance(value, type) or _is_bound_python_method(value) or \
            isinstance(value, torch.utils._contextlib._DecoratorContextManager):
        return False  # grad-mode objects are traced through torch's own methods
    module = getattr(value, "__module__", None) or ""
    if (module == "torch" or module.startswith("torch.")) and \
            not module.startswith(("torch.nn.modules", "torch.utils", "torch._dynamo",
                                   "torch.autograd.function", "torch.optim")):
        # torch.optim's functions are Python over lists of tensors: traced into (as a node,
        # `torch.optim.sgd.sgd` could not even be named again by FX's generated code)
        return callable(value)
    qualname = getattr(value, "__qualname__", "")
    return type(value).__name__ in ("builtin_function_or_method", "method_descriptor") and \
        (qualname.startswith("_TensorBase.") or qualname.startswith("TensorBase.")
         or getattr(value, "__self__", None) is torch._C._VariableFunctions)
