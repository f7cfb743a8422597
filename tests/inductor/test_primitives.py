"""The table of pointwise primitives (`inductor/ir/primitives.py`) and its consumers agree:
the `ops` vocabulary, both code generators (every primitive spelled in each or marked
unsupported there, nothing spelled that the table lacks), the C++ prelude's libm declarations,
the Triton interpreter's `libdevice` stand-ins and the float lowerings."""
from __future__ import annotations

import pathlib
import re

import pytest
import torch
import torch.fx

import inductor
from inductor.codegen import handler as shared_handler
from inductor.codegen.cpp import ops as cpp_ops
from inductor.codegen.cpp import source as cpp_source
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
        assert row.cpp is None or re.fullmatch(r"(__builtin_)?[a-z0-9]+|jit_[a-z0-9_]+",
                                               row.cpp), row.name
        assert row.triton is None or re.fullmatch(r"(tl|libdevice)\.[a-z0-9_]+|jit_[a-z0-9_]+",
                                                  row.triton), row.name
        assert not (row.cpp and row.cpp_missing), row.name
        assert not (row.triton and row.triton_missing), row.name
        assert row.operator is None or not (row.cpp or row.triton), row.name
        # a VML function falls back to the row's libm function where torch has no VML
        assert row.vml is None or (row.arity == 1 and row.cpp and
                                   re.fullmatch(r"[A-Z][a-z0-9]+", row.vml)), row.name


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


@pytest.mark.parametrize("row", [row for row in PRIMITIVES
                                 if row.cpp or row.triton or row.operator],
                         ids=lambda row: row.name)
def test_handlers_call_the_spelling_of_the_table(row):
    """A row's spelling is what the generated code calls (a method of a handler's own does
    not shadow it)."""
    dtype = torch.int32 if row.dtypes == INTEGER else torch.float64
    cpp_lines, scope = ["(none)"], _Scope()
    if not row.cpp_missing:
        getattr(cpp_ops.CppOpsHandler(cpp_lines, None, None, str), row.name)(
            *[cpp_ops.CppValue(f"a{i}", dtype) for i in range(row.arity)])
    getattr(triton_ops.TritonOpsHandler(scope), row.name)(
        *[triton_ops.TritonValue(f"a{i}", dtype) for i in range(row.arity)])
    for spelling, line in ((row.cpp, cpp_lines[-1]), (row.triton, scope.lines[-1])):
        if spelling:
            assert re.search(rf"(?<![\w.]){re.escape(spelling)}\(a0", line), line
        if row.operator:
            assert f"a0 {row.operator} a1" in line, line


def test_the_cpp_prelude_declares_every_libm_function_of_the_table():
    """Each libm function a row spells is declared once, `simd` (libmvec's vector variants)
    unless the row says `cpp_vector=False`; each `jit_*` overload is defined."""
    prelude = cpp_source.prelude()
    assert "JIT_MATH_DECLARATIONS" not in prelude
    for row in PRIMITIVES:
        if row.cpp and row.cpp.startswith("jit_"):
            assert re.search(rf"\b{row.cpp}\(", prelude), row.name
        elif row.cpp and not row.cpp.startswith("__builtin_"):
            kind = "" if row.cpp_vector else "SCALAR_"
            arity = {1: "UNARY", 2: "BINARY"}[row.arity]
            assert prelude.count(f"({row.cpp})") == 1, row.name
            assert f"JIT_MATH_{kind}{arity}({row.cpp})" in prelude, row.name


def _spelled_by_methods(handler_class) -> set:
    """The ops a handler class (or a base below `OpsHandler`) defines a method for."""
    names = set()
    for klass in handler_class.__mro__:
        if klass in (ir_ops.OpsHandler, object):
            break
        names |= {name for name in vars(klass) if name in ir_ops.OPERATIONS}
    return names


# The handlers' own texts of one-operand ops (no method, no table spelling)
OWN_TEXTS = {"cpp": set(cpp_ops.UNARY_TEXT),
             "triton": {name for name in ir_ops.UNARY
                        if triton_ops._special_unary(name, "a0", torch.float32) is not None}}
HANDLERS = {"cpp": cpp_ops.CppOpsHandler, "triton": triton_ops.TritonOpsHandler}


@pytest.mark.parametrize("column", ["cpp", "triton"])
def test_every_primitive_is_spelled_by_each_code_generator_or_marked_unsupported(column):
    """A primitive is spelled by its row (an operator, or this generator's function), by a
    method of the generator's handler, or by the handler's own text; else the row says why
    the generator cannot compute it. So a new primitive with a spelling in its row needs no
    other file of the code generators."""
    methods = _spelled_by_methods(HANDLERS[column])
    for row in PRIMITIVES:
        spelled = row.operator or getattr(row, column) or row.name in methods or \
            row.name in OWN_TEXTS[column]
        missing = getattr(row, f"{column}_missing")
        assert bool(spelled) != bool(missing), (row.name, "spelled and missing" if spelled
                                                else "neither spelled nor missing")


@pytest.mark.parametrize("column", ["cpp", "triton"])
def test_no_code_generator_spells_a_primitive_the_table_lacks(column):
    """Methods and own texts of pointwise ops name rows of the table (or `vml_*`, C++'s
    variants of table rows), never ops of their own; the shared base spells none by name."""
    pointwise = _spelled_by_methods(HANDLERS[column]) - set(ir_ops.SPECIAL)
    for name in pointwise | OWN_TEXTS[column]:
        assert name in BY_NAME, f"{column} spells {name!r}, which the table does not have"
    assert not _spelled_by_methods(shared_handler.KernelOpsHandler)
    for name in ir_ops.UNARY + ir_ops.BINARY + ir_ops.TERNARY:
        assert name in BY_NAME or name[len("vml_"):] in BY_NAME, name


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
