"""Repros of code-generator findings, second set (tests/fuzz/graphs/FINDINGS.md classes 10,
11, 26-29 and the CUDA campaign at 9a472b4), on both CPU code generators (Triton under its
interpreter).

- Triton: a store at a constant (or once-read) index under a block mask (`scatter` of one
  element, `index_put` with one index, `index_fill`): the pointer must be a block of the
  mask's shape (`Mask argument cannot be block type if pointer argument is not a block`; 13
  of the 32 failing graphs of the H100 campaign). A load at a constant index under a mask
  over the rows of a persistent reduction was spread over the whole `[XBLOCK, RBLOCK]`
  block, and the row's result it fed could not be stored through a `[XBLOCK, 1]` pointer.
- Triton's interpreter typed a comparison like its operands: a compared scalar broadcast to
  a block became float32 lanes (`&`, `|` with a bool block: `ufunc 'bitwise_and' not
  supported`).
- C++: under a `cat` or `pad` mask the lanes outside the piece read 0 for every value; an
  integer division there raised ZeroDivisionError, and an index made from such values
  raised IndexError, though their results are thrown away.
- C++: `signbit` of a strided bfloat16 input crashed GCC 12 (`unrecognizable insn`, vectorising
  `__builtin_signbit`), and of an integer tensor did not compile.
- C++: GCC folds a float -> integer -> float round trip into `trunc`, which keeps the sign of
  zero (-fno-trapping-math): `y.to(torch.int64).to(torch.float32)` of -0.3 gave -0.0, and
  `x / y.to(torch.int64)` the wrong infinity.
- `index_add` of bools with `alpha`: torch's decomposition made `source * 2` int64, and the
  Triton backend's eager `index_put` for bools refused it (`Index put requires the source and
  destination dtypes match`); eager casts alpha to bool.
- Half types: eager's CPU kernels convert every operand to the common dtype, so a float32
  0-d tensor, a Python float or an integer tensor added to a bfloat16 tensor is rounded to
  bfloat16 first (except in `mul`, `div`, `floor_divide`, which read a scalar unrounded);
  the compiled graph used the unrounded value (seed 52316: 8 ulps off).
"""
import pytest
import torch
import torch.nn.functional as F

import inductor
from tests.fuzz.graphs.program import namespace_for, trace
from tests.inductor.conftest import check_same, compile_function

setitem = namespace_for("cpu", traced=True)["setitem"]   # a graph node, as dynamo records it


@pytest.fixture(params=["cpp", "triton"])
def cpu_backend(request, monkeypatch):
    monkeypatch.setattr(inductor.config, "cpu_backend", request.param)
    return request.param


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.int64,
                                   torch.bool], ids=str)
def test_scatter_of_one_element(cpu_backend, dtype):
    """Seed 50111 and the H100 seeds 637, 1240, 1992: one source element, one index."""
    def function(a1, a2, a3):
        return (torch.scatter(a1, 0, a2, a3),)
    a1 = torch.tensor([[1.5], [-2.0]]).to(dtype)
    check_same(function, a1, torch.tensor([[1]]), torch.tensor([[7.0]]).to(dtype))


def test_index_put_and_index_fill_of_one_index(cpu_backend):
    """H100 seeds 381, 445, 569, 1318 (`index_put_` with one index, value broadcast) and
    1477 (`index_fill_` of one index with a bool)."""
    def put(x, i, v):
        x.index_put_((i,), v, accumulate=False)
        return (x + 0,)
    check_same(put, torch.rand(4, 3), torch.tensor([2]), torch.tensor(5.0))
    check_same(put, torch.rand(12), torch.tensor([-3]), torch.tensor([5.0]))

    def fill(x, i):
        x.index_fill_(0, i, True)
        return (x * 1,)
    check_same(fill, torch.zeros(7, dtype=torch.int32), torch.tensor([4]))


def test_write_of_one_element_at_a_constant_index(cpu_backend):
    """An index computed from a loaded scalar, into an intermediate: `y[i] = v`."""
    def function(x, i, v):
        y = x * 2
        y.index_put_((i,), v)
        return (y,)
    check_same(function, torch.rand(5), torch.tensor([3]), torch.tensor([-1.0]))


def test_constant_index_load_under_a_row_mask_in_a_reduction(cpu_backend):
    """H100 seed 126: batch norm's running mean written back next to `x[1:1] = -1` (a load
    at index 0 under a row mask, in the kernel of the mean's reduction)."""
    def function(x, mean, var):
        out = F.batch_norm(x, mean, var, training=True, momentum=0.1)
        setitem(mean, (slice(1, 1, None),), -1)
        return (out,)
    inputs = [torch.rand(4, 2, dtype=torch.float64), torch.rand(2, dtype=torch.float64),
              torch.rand(2, dtype=torch.float64)]
    check_traced(function, *inputs)


def test_one_element_gather_after_a_full_reduction(cpu_backend):
    """Seed 50757: the gather fused into the reduction's kernel."""
    def function(a0, a1):
        v3 = torch.eq(a0, a0.any([1, -2], keepdim=False))
        return (v3[a1, (a1.abs() % 6)].reshape((1, 1)),)
    check_same(function, torch.randint(-3, 3, (5, 6), dtype=torch.int16), torch.tensor([4]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool],
                         ids=str)
def test_logical_and_or_of_a_block_and_a_scalar(cpu_backend, dtype):
    """Seed 50410: `logical_and(a3, a2)` with a3 of one element."""
    def function(a2, a3):
        return (torch.logical_and(a3, a2), torch.logical_or(a2, a3), (a2 > 0) & (a3 > 0),
                (a3 < 0) | (a2 < 0), torch.where(a3 > 0, a2, a2 * 2) * (a3 != 0))
    a2 = torch.tensor([[-1.5], [0.0], [2.0], [0.5]]).reshape(1, 4, 1).to(dtype)
    for scalar in (1.0, 0.0, -2.0):
        check_same(function, a2, torch.tensor([scalar]).to(dtype))


INTEGER_DIVISIONS = {
    "floordiv": lambda a, b: a // b, "remainder": lambda a, b: a % b,
    "fmod": torch.fmod, "truncdiv": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
}


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8], ids=str)
@pytest.mark.parametrize("division", list(INTEGER_DIVISIONS))
def test_integer_division_under_a_cat_or_pad_mask(cpu_backend, division, dtype):
    """Seed 42791: no divisor is zero, yet the compiled graph raised ZeroDivisionError."""
    divide = INTEGER_DIVISIONS[division]

    def function(a, b, c):
        return F.pad(divide(a, b), [1, 1]), torch.cat([divide(a, b[:1]), c], 0)
    check_same(function, torch.tensor([5, -7, 9], dtype=dtype),
               torch.tensor([2, 3, -4], dtype=dtype), torch.tensor([1, 2], dtype=dtype))


def test_zero_divisor_inside_the_piece_still_raises(cpu_backend):
    def function(a, b):
        return (F.pad(a // b, [1, 1]),)
    compiled = compile_function(function, torch.tensor([5, 7]), torch.tensor([2, 3]))
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        function(torch.tensor([5, 7]), torch.tensor([2, 0]))
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        compiled(torch.tensor([5, 7]), torch.tensor([2, 0]))


def test_gather_under_a_pad_mask(cpu_backend):
    """Outside the piece the index reads 0 and `i - 2` wraps outside `x`: no IndexError."""
    check_same(lambda x, i: (F.pad(x[i - 2], [2, 2]),), torch.rand(1), torch.tensor([2, 2, 2]))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float64,
                                   torch.int32, torch.int8, torch.uint8, torch.bool], ids=str)
def test_signbit(cpu_backend, dtype):
    """Seed 44213: a (7, 8) bfloat16 input read with row stride 16. Values without NaN (a
    NaN's sign is no value: eager's own bfloat16 NaNs have either sign, by vector width)."""
    values = torch.tensor([1.0, -1.0, 0.0, -0.0, float("inf"), float("-inf"), 3.5, -2.25])
    base = (values if dtype.is_floating_point else values.nan_to_num().clamp(-8, 8))
    x = base.repeat(14).reshape(7, 16).to(dtype)[:, :8]
    check_same(lambda x: (torch.signbit(x), torch.signbit(x.flip(1)) & torch.signbit(x)), x)


@pytest.mark.parametrize("source", [torch.float32, torch.float64, torch.bfloat16], ids=str)
@pytest.mark.parametrize("integer", [torch.int64, torch.int32, torch.int16, torch.int8],
                         ids=str)
def test_float_to_integer_and_back_has_no_negative_zero(cpu_backend, source, integer):
    """Seed 44106; 64 lanes, so the C++ loop is vectorised."""
    def function(x, y):
        back = [y.to(integer).to(target) for target in (torch.float32, torch.float64,
                                                          torch.bfloat16)]
        return (*back, x / y.to(integer))
    y = torch.tensor([-0.3, 0.3, -0.9, -1.5, 2.7, -0.0, 0.0, -7.2] * 8).to(source)
    x = torch.tensor([1.0, -1.0] * 32).to(source)
    expected = function(x, y)
    actual = compile_function(function, x, y)(x, y)
    for want, got in zip(expected, actual):
        assert torch.equal(got, want) and torch.equal(got.signbit(), want.signbit()), (got, want)


def test_division_of_a_written_input_by_an_integer_view(cpu_backend):
    """Seed 44106 minimized: the written input came back with the wrong infinities."""
    def function(a1, a2):
        a1.view(-1).div_(a2.nan_to_num(0.0).clamp(-100, 100).to(torch.int64))
        return (a1,)
    check_same(function, torch.tensor([[1.0, -1.0, 2.0], [0.5, -3.0, 4.0]]),
               torch.tensor([-0.3, 0.2, 5.0, -0.7, float("nan"), 2.0]))


@pytest.mark.parametrize("alpha", [2, 0, True, -1])
def test_index_add_of_bools_with_alpha(cpu_backend, alpha):
    """Seed 50382; H100 seed 835 (`expected scalar type Long but found Bool`)."""
    def function(a1, a2, a3):
        out = a1.index_add(2, a2, a3, alpha=alpha)
        a1.index_add_(0, a2[:1], a3[:1, :, :1].expand(1, 2, 5), alpha=alpha)
        return (out,)
    generator = torch.Generator().manual_seed(0)
    a1 = torch.rand(4, 2, 5, generator=generator) < 0.3
    a3 = torch.rand(4, 2, 3, generator=generator) < 0.5
    check_same(function, a1, torch.tensor([1, 1, 3]), a3)


SCALAR_OPS = {
    "add": torch.add, "sub": torch.sub, "rsub": torch.rsub, "mul": torch.mul,
    "div": torch.div, "floor_divide": torch.floor_divide, "pow": lambda a, s: a.abs() ** s,
    "fmod": torch.fmod, "remainder": torch.remainder, "atan2": torch.atan2,
    "hypot": torch.hypot, "maximum": torch.maximum, "eq": torch.eq, "lt": torch.lt,
    "trunc": lambda a, s: torch.div(a, s, rounding_mode="trunc"),
    "lerp": lambda a, s: torch.lerp(a, a * 2, s),
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("operation", list(SCALAR_OPS))
def test_half_type_op_with_an_operand_of_another_dtype(cpu_backend, operation, dtype):
    """Seed 52316: `(a0 + a6).sum(0)` with a0 bfloat16, a6 a float32 0-d tensor."""
    op = SCALAR_OPS[operation]
    generator = torch.Generator().manual_seed(0)
    a = (torch.randn(256, generator=generator) * 4).to(dtype)
    a[:8] = torch.tensor(-1.391248345375061).to(dtype)
    s = torch.tensor(-1.391248345375061)
    functions = [lambda a, s: (op(a, s),), lambda a, s: (op(a, s.double()),)]
    if operation not in ("atan2", "hypot", "maximum", "lerp"):
        functions.append(lambda a, s: (op(a, -1.391248345375061),))
    for function in functions:
        expected = function(a, s)
        actual = compile_function(function, a, s)(a, s)
        assert torch.equal(actual[0], expected[0]), operation
    if operation in ("add", "mul", "eq"):
        count = torch.full((256,), 257)
        check_same(lambda a, c: (op(a, c),), a, count)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("operation", list(SCALAR_OPS))
def test_half_type_op_with_an_operand_of_another_dtype_on_cuda(operation, dtype):
    """CUDA's kernels read a Python-number scalar of add, sub, mul, div unrounded and round
    a 0-d CUDA tensor (measured on an H100)."""
    op = SCALAR_OPS[operation]
    generator = torch.Generator().manual_seed(0)
    a = (torch.randn(4096, generator=generator) * 4).to(dtype).cuda()
    s = torch.tensor(-1.391248345375061, device="cuda")
    functions = [lambda a, s: (op(a, s),), lambda a, s: (op(a, s.double()),)]
    if operation not in ("atan2", "hypot", "maximum", "lerp"):
        functions.append(lambda a, s: (op(a, -1.391248345375061),))
    for function in functions:
        assert torch.equal(compile_function(function, a, s)(a, s)[0], function(a, s)[0])


def check_traced(function, *inputs):
    """`check_same` for a function using `setitem`, traced as the graph fuzzer does."""
    eager_inputs = [value.clone() for value in inputs]
    compiled_inputs = [value.clone() for value in inputs]
    compiled = inductor.compile_fx(trace(function), [value.clone() for value in inputs])
    torch.testing.assert_close(compiled(*compiled_inputs), function(*eager_inputs),
                               equal_nan=True)
    torch.testing.assert_close(compiled_inputs, eager_inputs, equal_nan=True)
