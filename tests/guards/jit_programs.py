"""Generated programs and call sequences for end-to-end guard properties through `dynamo.jit`.

A `Program` is a small function `program(x, s, xs, d)` assembled from statement templates that
specialise on what guards must protect: tensor dtype, shape, dim and requires_grad, a Python
scalar's truthiness, None-ness, type and value, container lengths and dict keys, module-level
globals, grad mode and autocast. A `Call` describes one call's arguments as specs plus the
global state around it. Both print as readable source when hypothesis shrinks a failure:

    Program('''
    def program(x, s, xs, d):
        y = x
        if s is None:
            y = y - 2
        return y
    ''')
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import math
from typing import Any, Optional

import torch
from hypothesis import strategies as st

from guard_oracle import same_guarded
from guard_strategies import SCALARS, TensorSpec, build, tensor_specs

STATEMENTS = (
    "y = y + 1",
    "y = y * 2",
    "y = y + y",
    "y = y.sum()",
    "y = y.reshape(-1)",
    "y = y.clone()",
    "y = y.t() if y.dim() == 2 else y",
    "if y.dim() > 0 and y.shape[0] > 2:\n    y = y * 3",
    "if y.dtype == torch.float32:\n    y = y - 1",
    "if y.requires_grad:\n    y = y * 1.5",
    "if s:\n    y = y + 1",
    "if s is None:\n    y = y - 2",
    "if isinstance(s, str):\n    y = y * len(s)",
    "if type(s) is int and -100 < s < 100:\n    y = y * s",
    "if type(s) is float and s == s and abs(s) < 1e6:\n    y = y + s",
    "for t in xs:\n    y = y + t.sum()",
    "y = y + len(xs)",
    "for key in d:\n    y = y + d[key].sum()",
    "if 'k' in d:\n    y = y - d['k'].sum()",
    "if FLAG:\n    y = y + 2",
    "y = y * SCALE",
)


@dataclasses.dataclass(frozen=True)
class Program:
    """A generated function of `x` (tensor), `s` (scalar), `xs` (sequence), `d` (dict)."""

    statements: tuple[str, ...]

    def source(self) -> str:
        body = ["y = x", *self.statements]
        lines = [line for statement in body for line in statement.splitlines()]
        return ("def program(x, s, xs, d):\n" + "".join(f"    {line}\n" for line in lines)
                + "    return y\n")

    def build(self):
        """A fresh function object (its own code object and globals) for this program."""
        namespace = {"torch": torch, "FLAG": False, "SCALE": 1.0}
        exec(compile(self.source(), "<generated program>", "exec"), namespace)
        return namespace["program"]

    def __repr__(self) -> str:
        return f"Program('''\n{self.source()}''')"

    def _repr_pretty_(self, printer, cycle) -> None:  # how hypothesis prints a failing case
        printer.text(repr(self))


programs = st.lists(st.sampled_from(STATEMENTS), min_size=1, max_size=4).map(
    lambda statements: Program(tuple(statements)))

# Tensors every generated statement accepts: no complex dtypes. Inference tensors and
# nn.Parameters stay in: guards must tell them apart from plain tensors.
plain_tensor_specs = tensor_specs().filter(lambda spec: not spec.dtype.is_complex)


@dataclasses.dataclass(frozen=True)
class Call:
    """One call: argument specs and the global state around it."""

    x: TensorSpec
    s: Any = None
    xs: tuple = ()
    xs_type: type = list
    d: tuple = ()
    flag: bool = False
    scale: float = 1.0
    grad: bool = True
    autocast: bool = False

    def arguments(self) -> tuple:
        """Fresh argument values (new tensors each time)."""
        xs = self.xs_type(build(list(self.xs)))
        return build(self.x), self.s, xs, {key: build(spec) for key, spec in self.d}

    @contextlib.contextmanager
    def state(self, function):
        """Set the program's globals, grad mode and autocast for the duration of the call."""
        function.__globals__.update(FLAG=self.flag, SCALE=self.scale)
        with torch.set_grad_enabled(self.grad):
            if self.autocast:
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    yield
            else:
                yield

    def same_class(self, other: "Call") -> bool:
        """Whether every guardable fact of the two calls agrees (then one entry serves both)."""
        mine, theirs = self.arguments(), other.arguments()
        return (same_guarded(mine, theirs)
                and (self.flag, self.grad, self.autocast) == (other.flag, other.grad,
                                                                other.autocast)
                and same_guarded(self.scale, other.scale))


@st.composite
def calls(draw) -> Call:
    """One call spec."""
    keys = st.sampled_from(["k", "a", "b"])
    return Call(
        x=draw(plain_tensor_specs),
        s=draw(SCALARS),
        xs=tuple(draw(st.lists(plain_tensor_specs, max_size=2))),
        xs_type=draw(st.sampled_from([list, tuple])),
        d=tuple(draw(st.dictionaries(keys, plain_tensor_specs, max_size=2)).items()),
        flag=draw(st.booleans()),
        scale=draw(st.sampled_from([1.0, 2.0, 0.5])),
        grad=draw(st.booleans()),
        autocast=draw(st.booleans()),
    )


@st.composite
def call_sequences(draw, pool_size: int = 3, max_length: int = 6) -> list[Call]:
    """A sequence of calls drawn from a small pool, so that calls repeat."""
    pool = draw(st.lists(calls(), min_size=1, max_size=pool_size))
    indices = draw(st.lists(st.integers(0, len(pool) - 1), min_size=1, max_size=max_length))
    return [pool[index] for index in indices]


def outcome(function, arguments: tuple) -> tuple[Any, Optional[BaseException], str]:
    """(result, exception, printed output) of one call."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        try:
            return function(*arguments), None, printed.getvalue()
        except Exception as error:  # compared with the other run
            return None, error, printed.getvalue()


def assert_same_outcome(expected: tuple, actual: tuple, where: str) -> None:
    """The jitted call's outcome equals the eager one (tensors: dtype, shape, values, grad)."""
    (result, error, printed), (jit_result, jit_error, jit_printed) = expected, actual
    if error is not None or jit_error is not None:
        assert type(jit_error) is type(error), f"{where}: eager raised {error!r}, jit {jit_error!r}"
        return
    assert jit_printed == printed, where
    assert_same_value(result, jit_result, where)


def assert_same_value(expected: Any, actual: Any, where: str) -> None:
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{where}: got {type(actual).__name__}"
        assert (actual.dtype, actual.shape, actual.requires_grad) == (
            expected.dtype, expected.shape, expected.requires_grad), where
        torch.testing.assert_close(actual, expected, equal_nan=True, rtol=0, atol=0,
                                   msg=lambda message: f"{where}: {message}")
        return
    assert type(actual) is type(expected), where
    if isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), where
        for index, (first, second) in enumerate(zip(expected, actual)):
            assert_same_value(first, second, f"{where}[{index}]")
    elif type(expected) is float and math.isnan(expected):
        assert math.isnan(actual), where
    else:
        assert actual == expected, where


def distinct_classes(sequence: list[Call]) -> int:
    """How many calls of `sequence` differ in some guardable fact from every earlier one."""
    representatives: list[Call] = []
    for call in sequence:
        if not any(call.same_class(known) for known in representatives):
            representatives.append(call)
    return len(representatives)
