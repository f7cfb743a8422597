"""The table of pointwise primitives (`inductor/ir/primitives.py`) and its consumers agree:
the `ops` vocabulary, both code generators, the C++ prelude's libm declarations, the Triton
interpreter's `libdevice` stand-ins and the float lowerings."""
from __future__ import annotations

import pathlib
import re

import pytest
import torch
import torch.fx

import inductor
from inductor.codegen.cpp import ops as cpp_ops
from inductor.codegen.triton import ops as triton_ops
from inductor.ir import ops as ir_ops
from inductor.ir.primitives import BOOL, BY_NAME, FLOAT, INTEGER, PRIMITIVES, SAME
from inductor.lower.registry import lowering_for
from inductor.runtime import triton_interpret

aten = torch.ops.aten
PACKAGE = pathlib.Path(inductor.__file__).parent


class _Scope:
    """The little of a Triton kernel scope that arithmetic needs."""

    interpret = False
    extents = None

    def __init__(self):
        self.lines = []

    def add_line(self, line):
        self.lines.append(line)

    def define(self, name, text):
        pass

    def check(self, condition, code, predicate):
        self.lines.append(f"check {condition}")


def _operand_dtype(row) -> torch.dtype:
    return torch.int32 if row.dtypes == INTEGER else torch.float32


def _cpp(row):
    handler = cpp_ops.CppOpsHandler([], lambda name: torch.float32, lambda name, index: None,
                                    str)
    values = [cpp_ops.CppValue(f"a{i}", _operand_dtype(row)) for i in range(row.arity)]
    return getattr(handler, row.name)(*values)


def _triton(row):
    handler = triton_ops.TritonOpsHandler(_Scope())
    values = [triton_ops.TritonValue(f"a{i}", _operand_dtype(row)) for i in range(row.arity)]
    return getattr(handler, row.name)(*values)


def test_rows_are_well_formed():
    for row in PRIMITIVES:
        assert row.arity in (1, 2, 3) and row.dtypes in (FLOAT, SAME, BOOL, INTEGER), row
        assert callable(row.reference), row.name
        assert row.cpp is None or re.fullmatch(r"(__builtin_)?[a-z0-9]+", row.cpp), row.name
        assert row.triton is None or re.fullmatch(r"(tl|libdevice)\.[a-z0-9_]+|jit_[a-z0-9_]+",
                                                  row.triton), row.name
        assert not (row.cpp and row.cpp_missing), row.name


def test_vocabulary_derives_from_the_table():
    for arity, names in ((1, ir_ops.UNARY), (2, ir_ops.BINARY), (3, ir_ops.TERNARY)):
        expected = tuple(row.name for row in PRIMITIVES if row.arity == arity)
        assert tuple(name for name in names if not name.startswith("vml_")) == expected
    assert all(row.name in ir_ops.OPERATIONS for row in PRIMITIVES)


@pytest.mark.parametrize("row", PRIMITIVES, ids=lambda row: row.name)
def test_both_handlers_compute_every_primitive_or_say_why_not(row):
    expected_dtype = torch.bool if row.dtypes == BOOL else _operand_dtype(row)
    if row.cpp_missing:
        with pytest.raises(NotImplementedError, match=re.escape(row.cpp_missing)):
            _cpp(row)
    else:
        assert _cpp(row).dtype == expected_dtype
    assert _triton(row).dtype == expected_dtype


@pytest.mark.parametrize("row", [row for row in PRIMITIVES if row.cpp or row.triton],
                         ids=lambda row: row.name)
def test_handlers_call_the_spelling_of_the_table(row):
    """A row's spelling is what the generated code calls (a method of a handler's own does
    not shadow it)."""
    if row.cpp:
        handler_lines = []
        handler = cpp_ops.CppOpsHandler(handler_lines, None, None, str)
        getattr(handler, row.name)(*[cpp_ops.CppValue(f"a{i}", torch.float64)
                                     for i in range(row.arity)])
        assert f"= {row.cpp}(a0" in handler_lines[-1]
    if row.triton:
        scope = _Scope()
        getattr(triton_ops.TritonOpsHandler(scope), row.name)(
            *[triton_ops.TritonValue(f"a{i}", torch.float64) for i in range(row.arity)])
        assert f"= {row.triton}(a0" in scope.lines[-1]


def test_the_cpp_prelude_declares_every_libm_function_of_the_table():
    prelude = (PACKAGE / "codegen" / "cpp" / "prelude.h").read_text()
    for row in PRIMITIVES:
        if row.cpp and not row.cpp.startswith("__builtin_"):
            declared = f"JIT_MATH_UNARY({row.cpp})" in prelude or \
                f"float {row.cpp}f(float) noexcept; double {row.cpp}(double) noexcept;" in prelude
            assert declared, row.name


def test_the_triton_interpreter_has_every_libdevice_function_generated_code_calls():
    stand_ins = set(vars(triton_interpret.libdevice_on_cpu))
    for row in PRIMITIVES:
        if row.triton and row.triton.startswith("libdevice."):
            assert row.triton[len("libdevice."):] in stand_ins, row.name
    for path in (PACKAGE / "codegen" / "triton").glob("*.py"):
        for name in re.findall(r"libdevice\.([a-z0-9_]+)\(", path.read_text()):
            assert name in stand_ins, f"{path.name} calls libdevice.{name}"


def test_float_functions_lower_from_their_aten_op():
    for row in PRIMITIVES:
        if row.arity == 1 and row.dtypes == FLOAT:
            packet = getattr(aten, row.name)
            assert (lowering_for(packet.default) is not None) == row.lowered, row.name


def test_erfinv_is_missing_from_cpp_for_a_reason():
    """The drift the table made explicit: Triton spells erfinv (libdevice has it), C++ cannot
    (glibc has none), and no ATen op lowers to it."""
    row = BY_NAME["erfinv"]
    assert row.cpp is None and row.cpp_missing and not row.lowered
    assert row.triton == "libdevice.erfinv"


@pytest.mark.parametrize("backend", ["cpp", "triton"])
@pytest.mark.parametrize("dtype", [torch.int32, torch.uint8, torch.bool], ids=str)
def test_isinf_of_integers_compiles(backend, dtype):
    """C++ printed `jit_abs(x) == jit_inf(x)` for any dtype: no integer overload, a build
    error, and the graph ran through eager kernels (found by sweeping the primitives the
    integer sweep left out)."""
    saved = inductor.config.cpu_backend
    inductor.config.cpu_backend = backend
    try:
        x = torch.tensor([0, 1, 7, 100]).to(dtype)
        graph = torch.fx.symbolic_trace(lambda x: torch.isinf(x) | torch.isnan(x))
        compiled = inductor.compile_fx(graph, [x])
        assert compiled.report.reason is None and compiled.report.kernel_count == 1
        result = compiled(x)
        result = result[0] if isinstance(result, (tuple, list)) else result
        assert torch.equal(result, torch.isinf(x) | torch.isnan(x))
    finally:
        inductor.config.cpu_backend = saved
