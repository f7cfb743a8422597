"""The size binding of a wrapper compiled over symbolic sizes (stage: codegen).

Input: a `GraphPlan`'s symbol bindings (symbol -> input position, "size", "stride" or "int",
dim) and its inputs' layouts. Output: the wrapper's first lines, which run once per call: each size
symbol read off its input, and each input with symbolic extents checked to have exactly the
strides the kernels index it with (as many dims, each stride equal to its expression of the
symbols); another layout raises `InputLayoutChanged` before any work, and the pipeline runs
per-size variants for that call (`size_variants.layout_fallback`).

Where `runtime/native.cpp` builds and every expected stride is a polynomial of the symbols
with integer coefficients (contiguous, channels-last, permuted layouts), that is one native
call, `s0, s1, = bind_sizes(binder, arg0, arg1)`; else Python lines (`s0 = arg0.shape[0]`,
`if arg0.stride() != (s1, 1): layout_changed()`). A symbol that is no input's size or stride
is an int argument's value (a SymInt placeholder, `SizeInput`): `s2 = arg2`, first. The
sweep function's wrapper (2 symbols, 3 inputs checked) spent 1.4 us on the Python lines
and 0.3 on the native call (2-core VM); the call keeps its last answer and returns that
tuple again while the sizes repeat (93 ns against 142 with a new tuple of new ints each
call; a builtin returning a 2-tuple: 67 ns).
"""
from __future__ import annotations

from typing import Callable, Optional

import sympy

from inductor.ir.nodes import ConstantBuffer


class InputLayoutChanged(Exception):
    """A call's input is laid out otherwise than a graph compiled over symbolic sizes
    assumed (its strides, as expressions of the sizes): raised before the call touches
    anything, so the caller can run a variant for it (`size_variants.layout_fallback`)."""


def _layout_changed():
    raise InputLayoutChanged()


def polynomial(expression, indices: dict) -> Optional[tuple]:
    """((coefficient, (symbol index, ...)), ...) of an expression of the size symbols, or
    None where it is not a polynomial of them with integer coefficients (floor division,
    modulo, symbols bound by no input)."""
    terms = []
    expanded = sympy.expand(sympy.sympify(expression))
    for monomial, coefficient in expanded.as_coefficients_dict().items():
        if not coefficient.is_Integer:
            return None
        factors = []
        for factor, power in monomial.as_powers_dict().items() if monomial != 1 else ():
            if factor not in indices or not (power.is_Integer and power > 0):
                return None
            factors += [indices[factor]] * int(power)
        terms.append((int(coefficient), tuple(factors)))
    return tuple(terms)


def symbol_binding(bindings: dict, checked: list) -> Optional[tuple]:
    """(bind_sizes, binder) reading `bindings` (symbol -> (input position, "size" or
    "stride", dim)) and checking the strides of each (position, layout) of `checked`
    natively (`runtime/native.py`), or None: the extension is unavailable, or a stride is no
    polynomial of the symbols."""
    from inductor.runtime import native
    indices = {symbol: index for index, symbol in enumerate(bindings)}
    checks = []
    for position, layout in checked:
        strides = [polynomial(stride, indices) for stride in layout.stride]
        if any(stride is None for stride in strides):
            return None
        checks.append((position, tuple(strides)))
    reads = [(position, 0 if kind == "size" else 1, dim)
             for position, kind, dim in bindings.values()]
    return native.size_binding(reads, checks, InputLayoutChanged)


def _checked_inputs(plan) -> list:
    """(position, layout) of the inputs whose kernels index them with symbolic strides."""
    return [(position, buffer.layout) for position, buffer in enumerate(plan.inputs)
            if not isinstance(buffer, ConstantBuffer) and buffer.layout is not None and
            not all(sympy.sympify(extent).is_Integer for extent in buffer.layout.size)]


def binding_lines(plan, names: list, sizes_text: Callable, namespace: dict) -> list:
    """The wrapper's binding lines for `plan` (inputs named `names`); `sizes_text` prints a
    stride tuple; globals the lines use are added to `namespace`. None for a static plan."""
    bindings = plan.symbol_bindings
    if not bindings:
        return []
    # a symbol no input size or stride is: an int input's value (a SymInt placeholder)
    values = [f"    {symbol.name} = {names[position]}"
              for symbol, (position, kind, _dim) in bindings.items() if kind == "int"]
    bindings = {symbol: binding for symbol, binding in bindings.items()
                if binding[1] != "int"}
    checked = _checked_inputs(plan)
    native = symbol_binding(bindings, checked) if bindings else None
    if native is not None:
        binder = f"binder{len(namespace)}"
        namespace["bind_sizes"], namespace[binder] = native
        count = max([position for position, _kind, _dim in bindings.values()] +
                    [position for position, _layout in checked]) + 1
        targets = "".join(f"{symbol.name}, " for symbol in bindings)
        return [f"    {targets}= bind_sizes({binder}, {', '.join(names[:count])})"] + values
    namespace["layout_changed"] = _layout_changed
    lines = list(values)    # (the stride checks may read these)
    for symbol, (position, kind, dim) in bindings.items():
        read = "shape" if kind == "size" else "stride()"
        lines.append(f"    {symbol.name} = {names[position]}.{read}[{dim}]")
    for position, layout in checked:
        # kernels index with these strides: another layout runs another variant
        lines.append(f"    if {names[position]}.stride() != {sizes_text(layout.stride)}:")
        lines.append("        layout_changed()")
    return lines
