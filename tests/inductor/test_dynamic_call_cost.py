"""The per-call path of compiled graphs (issue 23: a symbolic graph's call within 10% of a
static one's): the size binding of a wrapper compiled over symbolic sizes is one native call
(`bind_sizes`: the symbols read, every checked input's strides compared), kernel entries are
called natively (`launch`: no ctypes, no `data_ptr()` per buffer), and each keeps what the
Python lines checked: a changed input layout still runs per-size variants (counted), a
kernel's error still raises eager's exception. Both paths are tested: the native one and the
Python lines it replaces (where the extension is unavailable)."""
import copy

import pytest
import sympy
import torch

import inductor
from inductor.codegen import size_binding
from inductor.codegen.size_binding import InputLayoutChanged, symbol_binding
from inductor.runtime import fallbacks, native
from tests.inductor.symbolic_graphs import symbolic_graph

PER_SIZE = pytest.mark.expect_fallback("per_size", reason="another input layout runs "
                                       "per-size variants")


def gelu_softmax(x, weight, bias):
    y = torch.nn.functional.gelu(x * weight + bias)
    return (y.softmax(-1) * x).sum(-1) + y.amax(-1)


def _inputs(rows, width=16):
    generator = torch.Generator().manual_seed(rows * 100 + width)
    return [torch.randn(rows, width, generator=generator),
            torch.randn(width, generator=generator), torch.randn(width, generator=generator)]


@pytest.fixture(params=["native", "python"])
def binding(request, monkeypatch):
    """The native size binding and kernel launch, or the Python lines (extension absent)."""
    if request.param == "python":
        monkeypatch.setattr(native, "size_binding", lambda *_arguments: None)
        monkeypatch.setattr(native, "launcher", lambda: None)
    else:
        assert native.launcher() is not None, "the native helper did not build"
    return request.param


def _wrapper_text(compiled) -> str:
    return compiled.report.source.split("\n\ndef call(")[0]


def _compile_symbolic(function, inputs, dynamic):
    return inductor.compile_fx(symbolic_graph(function, inputs, dynamic), copy.deepcopy(inputs))


def _per_size_count(before) -> int:
    return sum(count for reason, count in fallbacks.since(before).items()
               if reason.startswith("per_size"))


def test_the_wrapper_binds_sizes_in_one_call_and_launches_natively(binding):
    compiled = _compile_symbolic(gelu_softmax, _inputs(3), [[0, 1], [0], [0]])
    text = _wrapper_text(compiled)
    if binding == "native":
        assert text.count("bind_sizes(") == 1 and ".shape[" not in text
        assert ".stride() !=" not in text and ".data_ptr()" not in text
        assert "status = launch(entry" in text
    else:
        assert ".shape[0]" in text and ".shape[1]" in text and "bind_sizes" not in text
        assert text.count(".stride() !=") == 3 and "launch(" not in text
    for rows, width in ((3, 16), (1, 16), (7, 33), (2, 1), (0, 5)):
        inputs = _inputs(rows, width)
        torch.testing.assert_close(compiled(*copy.deepcopy(inputs)), gelu_softmax(*inputs))


def test_a_static_graph_launches_natively_without_a_binding(binding):
    inputs = _inputs(4)
    compiled = inductor.compile_fx(torch.fx.symbolic_trace(gelu_softmax), copy.deepcopy(inputs))
    text = _wrapper_text(compiled)
    assert "bind_sizes" not in text and ".shape[" not in text
    assert ("launch(entry" in text) == (binding == "native")
    torch.testing.assert_close(compiled(*inputs), gelu_softmax(*inputs))


@PER_SIZE
@pytest.mark.parametrize("changed", ["transposed", "expanded", "sliced columns"])
def test_a_changed_input_layout_still_runs_per_size_variants(binding, changed):
    """The traced layout is contiguous: a transposed input, one broadcast along its rows
    (stride 0) and every other column of a wider tensor each fail the stride check and run
    per-size variants (counted); a storage offset alone does not."""
    def function(x):
        return x * 2 + 1
    compiled = _compile_symbolic(function, [torch.randn(4, 6)], [[0, 1]])
    before = fallbacks.fallbacks()
    offset = torch.randn(5, 6)[1:]
    torch.testing.assert_close(compiled(offset), function(offset))
    assert _per_size_count(before) == 0
    x = {"transposed": torch.randn(6, 4).t(), "expanded": torch.randn(1, 6).expand(4, 6),
         "sliced columns": torch.randn(4, 12)[:, ::2]}[changed]
    result = compiled(x)
    assert _per_size_count(before) > 0
    expected = function(x)
    assert result.shape == expected.shape and result.stride() == expected.stride()
    torch.testing.assert_close(result, expected)


def test_a_kernel_error_raises_through_the_launch(binding):
    def function(table, index):
        return torch.nn.functional.embedding(index, table) * 2
    table, index = torch.randn(5, 3), torch.tensor([0, 4, 2])
    compiled = inductor.compile_fx(torch.fx.symbolic_trace(function), [table, index])
    torch.testing.assert_close(compiled(table, index), function(table, index))
    bad = torch.tensor([0, 7, 1])
    with pytest.raises(IndexError):
        function(table, bad)
    with pytest.raises(IndexError):
        compiled(table, bad)


# -- the native binder against the Python lines it replaces ------------------------------------

def _binder(reads, checks):
    binding = native.size_binding(reads, checks, InputLayoutChanged)
    assert binding is not None, "the native helper did not build"
    return binding


def test_bind_sizes_reads_sizes_and_strides_and_checks_polynomial_strides():
    """Symbols: s0, s1, s2 the sizes of a 3-D input, s3 the stride of dim 0 of a second
    one; checked: the first contiguous (s1*s2, s2, 1), the second (s3, 1)."""
    s0, s1, s2, s3 = sympy.symbols("s0 s1 s2 s3", integer=True, positive=True)
    bindings = {s0: (0, "size", 0), s1: (0, "size", 1), s2: (0, "size", 2),
                s3: (1, "stride", 0)}
    layouts = [(0, type("Layout", (), {"stride": (s1 * s2, s2, 1)})),
               (1, type("Layout", (), {"stride": (s3, 1)}))]
    bind, binder = symbol_binding(bindings, layouts)
    x, y = torch.randn(2, 3, 4), torch.randn(5, 9)[:, :4]
    assert bind(binder, x, y) == (2, 3, 4, 9)
    for other in (x.transpose(1, 2).contiguous().transpose(1, 2), x[:, :, :2], x[:, ::2],
                  x.unsqueeze(0)):
        with pytest.raises(InputLayoutChanged):
            bind(binder, other, y)
    with pytest.raises(InputLayoutChanged):
        bind(binder, x, y.t().contiguous().t())
    with pytest.raises(IndexError):
        bind(binder, torch.randn(6), y)         # a size read past the input's dims
    with pytest.raises(TypeError):
        bind(binder, x, 3)
    with pytest.raises(TypeError):
        bind(binder, x)


def test_bind_sizes_reads_only_the_inputs_it_names():
    """Inputs neither read nor checked may be anything (as with the Python lines)."""
    bind, binder = _binder([(0, 0, 0)], [(2, (((1, ()),),))])
    assert bind(binder, torch.randn(3, 2), 5, torch.randn(4)) == (3,)
    with pytest.raises(InputLayoutChanged):
        bind(binder, torch.randn(3, 2), 5, torch.randn(4, 2)[:, 0])
    with pytest.raises(TypeError):
        bind(binder, torch.randn(3, 2), 5, 6)


def test_bind_sizes_returns_its_last_answer_again_for_the_same_sizes():
    """Calls binding the values of the last call get its tuple again (no new tuple, no new
    ints: large sizes are not cached ints); other values, a new tuple with the new values,
    also after a call that raised."""
    bind, binder = _binder([(0, 0, 0), (0, 0, 1)], [(0, (((1, (1,)),), ((1, ()),)))])
    first = bind(binder, torch.randn(3, 1000))
    assert first == (3, 1000) and bind(binder, torch.randn(3, 1000)) is first
    other = bind(binder, torch.randn(5, 1000))
    assert other == (5, 1000) and other is not first
    with pytest.raises(InputLayoutChanged):
        bind(binder, torch.randn(1000, 3).t())
    assert bind(binder, torch.randn(3, 1000)) == (3, 1000)
    assert bind(binder, torch.randn(5, 1000)) == (5, 1000)
    assert bind(binder, torch.randn(5, 999)) == (5, 999)


def test_bind_sizes_treats_an_overflowing_stride_as_another_layout():
    bind, binder = _binder([(0, 0, 0), (0, 0, 1)],
                           [(0, (((2 ** 62, (0, 1)),), ((1, ()),)))])
    x = torch.randn(4, 8)
    with pytest.raises(InputLayoutChanged):
        bind(binder, x)


def test_strides_that_are_no_polynomial_keep_the_python_lines():
    s0 = sympy.Symbol("s0", integer=True, positive=True)
    layout = type("Layout", (), {"stride": (sympy.floor(s0 / 2), 1)})
    assert symbol_binding({s0: (0, "size", 0)}, [(0, layout)]) is None
    assert size_binding.polynomial(3 * s0 ** 2 + s0 + 4, {s0: 0}) is not None
    assert sorted(size_binding.polynomial(3 * s0 ** 2 + s0 + 4, {s0: 0})) == \
        [(1, (0,)), (3, (0, 0)), (4, ())]
    other = sympy.Symbol("s9", integer=True, positive=True)
    assert size_binding.polynomial(s0 * other, {s0: 0}) is None   # bound by no input


# -- the Triton launcher's per-call dispatch over symbolic sizes ------------------------------

class _RecordingLauncher:
    def __init__(self, spec, calls):
        self.spec, self.calls, self.choice, self.candidates = spec, calls, None, [None]
        self.tuned_here = False

    def _call(self, *arguments):
        self.calls.append((self.spec.xnumel, self.spec.rnumel, arguments))

    def compile_tasks(self):
        return {}


def _sized_launcher(calls: list):
    import types

    from inductor.codegen.triton.kernel import LaunchSpec
    from inductor.ir.symbols import FloorDiv
    from inductor.runtime import triton_sizes
    s0, s1 = sympy.symbols("s0 s1", integer=True, positive=True)
    spec = LaunchSpec("reduction", FloorDiv(s0 + 1, 2) * s1, rnumel=s1 * 3,
                      strategy="persistent")
    source = types.SimpleNamespace(plan_name="kernel0", spec=spec, size_symbols=["s0", "s1"],
                                   arguments=["buf0", "buf1", "buf2"])
    return triton_sizes.SizedLauncher(
        source, lambda bucket_spec: _RecordingLauncher(bucket_spec, calls), {"s0": 9, "s1": 4})


SIZED_CALLS = ((0, 3), (3, 0), (1, 1), (9, 4), (10, 4), (17, 5), (1031, 2), (2, 97))


def test_the_generated_sized_dispatch_does_what_its_steps_do():
    """`SizedLauncher.dispatch` (one generated frame: extents, empty grid, bucket, the
    bucket's launcher) against `_dispatch_steps` (the steps it replaced), sizes from 0 up,
    a floor division in an extent, several buckets."""
    generated, stepwise = [], []
    first, second = _sized_launcher(generated), _sized_launcher(stepwise)
    assert first.dispatch.__name__ == "dispatch"
    for s0, s1 in SIZED_CALLS:
        first("a", "b", "c", s0, s1)
        second._dispatch_steps("a", "b", "c", s0, s1)
    nonempty = [(s0, s1) for s0, s1 in SIZED_CALLS if (s0 + 1) // 2 * s1 > 0]
    assert generated == stepwise and len(generated) == len(nonempty) == 6
    assert generated[1] == (32, 16, ("a", "b", "c", 9, 4, 20, 1, 12))   # buckets, extents
    assert sorted(first.launchers) == sorted(second.launchers) and len(first.launchers) > 3
