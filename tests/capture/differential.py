"""The differential check: a function run eagerly and through `dynamo.jit` must agree.

`check(fn, *args, graphs=N)` runs `fn` eagerly and jitted (twice: compile, then cache hit) on
deep copies of the arguments and compares results, mutated arguments, the globals `fn` refers
to (reset to the same starting values before each run), printed output, raised exceptions,
grad mode after the call and the number of graphs compiled. An `nn.Module` passed as `fn` is deep-copied too: the eager
and the jitted copy must end in the same state (parameters, buffers, plain attributes).
"""
from __future__ import annotations

import contextlib
import copy
import io
from typing import Any, Callable, Optional

import torch

import dynamo


def assert_same(expected: Any, actual: Any, path: str = "result", _seen=None) -> None:
    """Structural equality; tensors compared with assert_close (dtype, shape, values).
    Cycles are followed once."""
    seen = set() if _seen is None else _seen
    if (id(expected), id(actual)) in seen:
        return
    seen.add((id(expected), id(actual)))
    _assert_same(expected, actual, path, seen)


def _assert_same(expected: Any, actual: Any, path: str, seen: set) -> None:
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{path}: expected a tensor, got {actual!r}"
        torch.testing.assert_close(actual, expected, msg=lambda m: f"{path}: {m}",
                                   equal_nan=True)
        assert actual.requires_grad == expected.requires_grad, f"{path}: requires_grad"
        return
    assert type(actual) is type(expected), \
        f"{path}: expected {type(expected).__name__}, got {type(actual).__name__}"
    if isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != {len(expected)}"
        for index, (a, b) in enumerate(zip(expected, actual)):
            assert_same(a, b, f"{path}[{index}]", seen)
    elif isinstance(expected, dict):
        keys = list(dict.keys(expected))
        assert list(dict.keys(actual)) == keys, \
            f"{path}: keys {list(dict.keys(actual))} != {keys}"
        for key in keys:
            assert_same(dict.__getitem__(expected, key), dict.__getitem__(actual, key),
                        f"{path}[{key!r}]", seen)
        if hasattr(expected, "__dict__"):  # dict subclasses (ModelOutput) carry attributes
            assert_same(vars(expected), vars(actual), f"{path}.__dict__", seen)
    elif isinstance(expected, (set, frozenset)):
        assert expected == actual, f"{path}: {actual!r} != {expected!r}"
    elif isinstance(expected, torch.nn.Module):
        assert_same(dict(expected.state_dict()), dict(actual.state_dict()), f"{path}.state_dict",
                    seen)
        assert_same(_plain_attributes(expected), _plain_attributes(actual), f"{path}.__dict__",
                    seen)
    elif _has_state(expected):
        assert type(actual) is type(expected), f"{path}: type {type(actual).__name__}"
        assert_same(_state(expected), _state(actual), f"{path}.<state>", seen)
    else:
        assert expected == actual or (expected != expected and actual != actual), \
            f"{path}: {actual!r} != {expected!r}"


def _has_state(value: Any) -> bool:
    """Plain objects compared by their attributes (functions, classes and modules by
    identity)."""
    import types
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, types.MethodType,
                          types.ModuleType, type)):
        return False
    return hasattr(value, "__dict__") or bool(_slots(type(value)))


def _slots(kind: type) -> list:
    return [name for klass in kind.__mro__ for name in getattr(klass, "__slots__", ())
            if name not in ("__dict__", "__weakref__")]


def _state(value: Any) -> dict:
    state = dict(vars(value)) if hasattr(value, "__dict__") else {}
    for name in _slots(type(value)):
        state[name] = getattr(value, name, "<unset>")
    return state


def _plain_attributes(module: torch.nn.Module) -> dict:
    """A module's data attributes (numbers, strings, tensors, containers; not callables)."""
    return {name: value for name, value in vars(module).items()
            if not name.startswith("_") and not callable(value)}


def _run(fn: Callable, args, kwargs):
    """(result, exception, printed output, grad mode after the call); grad mode is put back
    to what it was before, so that one run cannot change the next one's."""
    output = io.StringIO()
    grad_before = torch.is_grad_enabled()
    with contextlib.redirect_stdout(output):
        try:
            result, error = fn(*args, **kwargs), None
        except Exception as raised:  # compared with the other run
            result, error = None, raised
    grad_after = torch.is_grad_enabled()
    torch.set_grad_enabled(grad_before)
    return result, error, output.getvalue(), grad_after


def check(fn: Callable, *args, graphs: Optional[int] = 1, breaks: Optional[int] = 0,
          calls: int = 2, backend=None, **kwargs):
    """Compare eager and jitted runs of `fn(*args, **kwargs)`; returns the counting backend.

    `graphs`: the number of graphs compiled; `breaks`: the number of graph breaks and frames
    left to run eagerly (None: not checked)."""
    counting = dynamo.CountingBackend(backend or dynamo.backends.lookup_backend("eager"))
    eager_fn, jit_fn = fn, fn
    if isinstance(fn, torch.nn.Module):
        eager_fn, jit_fn = copy.deepcopy(fn), copy.deepcopy(fn)
    jitted = dynamo.jit(jit_fn, backend=counting)
    shared = _Globals(fn)
    try:
        for call in range(calls):
            eager_args, jit_args = copy.deepcopy((args, kwargs)), copy.deepcopy((args, kwargs))
            shared.reset()
            torch.manual_seed(call)
            expected = _run(eager_fn, *eager_args)
            eager_globals = shared.take()
            shared.reset()
            torch.manual_seed(call)
            actual = _run(jitted, *jit_args)
            _compare(expected, actual, eager_args, jit_args, call)
            assert_same(eager_globals, shared.take(), f"call {call} globals")
            if eager_fn is not fn:
                assert_same(eager_fn, jit_fn, f"call {call} module")
    finally:
        shared.restore()
    if graphs is not None:
        assert counting.frame_count == graphs, \
            f"expected {graphs} graphs, compiled {counting.frame_count}"
    if breaks is not None:
        found = break_reasons(jitted)
        assert len(found) == breaks, f"expected {breaks} graph breaks, got {found}"
    return counting


def break_reasons(jitted) -> list[str]:
    """Graph breaks and eager fallbacks recorded while compiling `jitted`'s frames."""
    driver = getattr(jitted, "_framejit_driver", None)
    reasons = []
    for record in getattr(driver, "records", ()):
        for item in getattr(record, "breaks", ()):
            reasons.append(f"{getattr(item, 'location', '')}: {getattr(item, 'detail', item)}")
        failure = getattr(record, "failure", None)
        if failure is not None and not getattr(record, "breaks", ()):
            reasons.append(str(failure))
    return reasons


def _compare(expected, actual, eager_args, jit_args, call: int) -> None:
    (result, error, printed, grad), (jit_result, jit_error, jit_printed, jit_grad) = \
        expected, actual
    where = f"call {call}"
    assert jit_grad == grad, f"{where}: grad mode after the call {jit_grad}, eager {grad}"
    if error is not None or jit_error is not None:
        assert type(jit_error) is type(error), f"{where}: raised {jit_error!r}, eager {error!r}"
        assert str(jit_error) == str(error), f"{where}: message {jit_error} != {error}"
    else:
        assert_same(result, jit_result, f"{where} result")
    assert_same(eager_args, jit_args, f"{where} arguments after the call")
    assert printed == jit_printed, f"{where}: printed {jit_printed!r}, eager {printed!r}"


class _Globals:
    """The data globals `fn` names (not modules, functions or classes): every run starts from
    copies of their values at the start of the check, and their end values are compared."""

    def __init__(self, fn: Callable):
        function = getattr(fn, "forward", fn)
        function = getattr(function, "__func__", function)
        self.namespace = getattr(function, "__globals__", {})
        code = getattr(function, "__code__", None)
        names = _names_used(code) if code is not None else set()
        self.initial = {name: self.namespace[name] for name in sorted(names)
                        if name in self.namespace and _is_data(self.namespace[name])}

    def reset(self) -> None:
        for name, value in self.initial.items():
            self.namespace[name] = copy.deepcopy(value)

    def take(self) -> dict:
        return {name: self.namespace.get(name, "<deleted>") for name in self.initial}

    def restore(self) -> None:
        self.namespace.update(self.initial)


def _names_used(code) -> set:
    names = set(code.co_names)
    for constant in code.co_consts:
        if hasattr(constant, "co_names"):
            names |= _names_used(constant)
    return names


def _is_data(value: Any) -> bool:
    import types
    return not isinstance(value, (types.ModuleType, types.FunctionType, type,
                                  types.BuiltinFunctionType, torch.nn.Module)) and \
        not callable(value)
