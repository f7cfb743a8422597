"""Python numbers computed from symbolic sizes (`x.size(0)`, `x.shape[-1] // 2`, `x.numel()`):
an FX node plus its symbolic example (a `torch.SymInt`, `SymFloat` or `SymBool`).

Input: a size read or an arithmetic on sizes met by the interpreter. Output: a variable that
stays a node of the graph while it is used by tensor operations and by arithmetic and
comparisons of other such values, so one graph serves every size. Anything else that needs
the Python value (`range(n)`, `[0] * n`, a call into Python code that is not traced, a value
rebuilt into a container after a graph break) specialises it: `as_constant()` asks the symbol's
`ShapeEnv`, which records the fact (`s0 == 5`) as a guard. Truth tests record the relation they
decided (`s0 > 4`). See `dynamo.shapes`.
"""
from __future__ import annotations

import operator
from typing import Any, Optional

import torch
import torch.fx

from dynamo.variables.base import Variable, variable
from dynamo.variables.constant import ConstantVariable, specialise

SYMBOLIC_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)

# Operations kept in the graph when every operand is a symbolic value or a number.
GRAPH_OPERATIONS = frozenset({
    operator.add, operator.sub, operator.mul, operator.floordiv, operator.truediv,
    operator.mod, operator.pow, operator.neg, operator.pos, operator.abs, operator.lt,
    operator.le, operator.gt, operator.ge, operator.eq, operator.ne})


def is_symbolic(value: Any) -> bool:
    """A symbolic number whose value is not fixed by what the trace learned."""
    return isinstance(value, SYMBOLIC_TYPES) and not value.node.expr.is_number


@variable
class SymbolicVariable(Variable):
    node: torch.fx.Node
    example: Any  # a torch.SymInt, SymFloat or SymBool

    def python_type(self) -> type:
        return {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}[
            type(self.example)]

    def as_constant(self) -> Any:
        return specialise(self.example)

    def is_constant(self) -> bool:
        return False    # a question, not a use: asking must not specialise the value

    def truth(self, tx) -> bool:
        return bool(self.example)

    def describe(self) -> str:
        if self.source is not None:
            return self.source.name()
        return f"a {self.python_type().__name__} computed from tensor sizes"

    def getattr(self, tx, name: str) -> Variable:
        return ConstantVariable(self.as_constant()).getattr(tx, name)

    def call_method(self, tx, name: str, args, kwargs) -> Variable:
        return ConstantVariable(self.as_constant()).call_method(tx, name, args, kwargs)

    def rebuild(self, plan) -> str:
        """After the graph: the frame's own int, or the graph returns the value (one graph
        serves every size)."""
        if self.node.op == "placeholder":
            return plan.source(self.source)
        return plan.output(self)


def graph_operation(tx, function, operands) -> Optional[Variable]:
    """`function(*operands)` as a graph node when it is arithmetic or a comparison of symbolic
    values and numbers; None when the operands must be specialised instead."""
    if function not in GRAPH_OPERATIONS:
        return None
    for value in operands:
        if isinstance(value, SymbolicVariable):
            continue
        if not isinstance(value, ConstantVariable) or type(value.value) not in (int, float,
                                                                                 bool):
            return None
    return tx.graph.call("call_function", function, tuple(operands), {})
