"""In-place reuse (schedule/in_place.py): a point-wise kernel writes over a buffer that dies
in it (a library call's result or a computed buffer) only where no element is read after it
is overwritten; every case matches eager."""
import re

import torch

import inductor
from tests.inductor.conftest import check_same, compile_function

functional = torch.nn.functional


def _bindings(compiled) -> list:
    """`bufA = bufB` lines of the wrapper: outputs bound to a dying buffer's tensor (a returned
    one as `unwritten(bufB)`, its version counter set back to 0)."""
    return re.findall(r"^    (buf\d+) = (?:unwritten\()?(buf\d+)\)?$", compiled.report.source,
                      re.MULTILINE)


def test_batch_norm_relu_after_a_product_writes_over_its_result():
    weight = torch.randn(64, 64)
    scale, shift = torch.rand(64) + 0.5, torch.randn(64)

    def function(x):
        return torch.relu(x @ weight * scale + shift) @ weight

    compiled = check_same(function, torch.randn(128, 64), atol=1e-4, rtol=1e-4)
    assert len(_bindings(compiled)) == 1


def test_convolution_batch_norm_relu_in_place():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16),
                                torch.nn.ReLU(), torch.nn.Conv2d(16, 16, 3, padding=1),
                                torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
                                torch.nn.Conv2d(16, 4, 1)).eval()
    x = torch.randn(4, 3, 24, 24)
    with torch.no_grad():
        compiled = compile_function(model, x)
        torch.testing.assert_close(compiled(x), model(x), atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(compiled(x), model(x), atol=1e-4, rtol=1e-4)
    assert len(_bindings(compiled)) == 2


def test_reads_at_other_elements_keep_a_fresh_buffer():
    weight = torch.randn(32, 32)

    def shifted(x):
        y = x @ weight
        return (y + y.flip(1)) @ weight     # reads y[i, 31 - j] while writing [i, j]

    def pooled(x):
        y = (x @ weight).reshape(1, 4, 8, 32)
        return functional.max_pool2d(torch.relu(y), 2).sum()

    def transposed(x):
        y = x @ weight
        return (y.t() * 2) @ weight         # a square transposed read: [j, i] for [i, j]

    for function in (shifted, pooled, transposed):
        compiled = check_same(function, torch.randn(32, 32), atol=1e-4, rtol=1e-4)
        assert _bindings(compiled) == [], function.__name__


def test_reductions_and_outputs_keep_fresh_buffers():
    weight = torch.randn(32, 32)

    def softmax(x):
        return torch.softmax(x @ weight, dim=-1) @ weight

    def returned(x):
        y = x @ weight
        return y, torch.relu(y)             # y is an output: never written over

    for function in (softmax, returned):
        compiled = check_same(function, torch.randn(32, 32), atol=1e-4, rtol=1e-4)
        assert _bindings(compiled) == [], function.__name__


def test_a_donor_viewed_by_an_eager_op_is_not_written(monkeypatch):
    """`as_strided` through an eager fallback may return a view of its input: that input's
    memory must stay untouched while the view lives."""
    monkeypatch.setattr(inductor.config, "fallback_ops", "aten.as_strided")
    weight = torch.randn(16, 16)

    def function(x):
        y = x @ weight
        view = torch.as_strided(y, (16, 8), (16, 1))
        return torch.relu(y) * 3, view * 1

    compiled = check_same(function, torch.randn(16, 16), atol=1e-4, rtol=1e-4)
    assert "aten.as_strided" in compiled.fallback_ops


def test_only_the_last_reader_writes_over_a_buffer():
    weight = torch.randn(32, 32)

    def function(x):
        y = x @ weight
        z = torch.relu(y) @ weight          # relu(y) must not overwrite y: read again below
        return z + y

    compiled = check_same(function, torch.randn(32, 32), atol=1e-4, rtol=1e-4)
    bindings = _bindings(compiled)
    assert len(bindings) == 1
    final = compiled.report.source.split("def call(")[0].strip().splitlines()[-1]
    assert bindings[0][0] in final       # the returned sum is the buffer written in place


def test_a_reshaped_result_is_written_over_in_its_own_shape():
    """convnext's GELU: the product's [B*H*W, C] result read as [B, H, W, C] is written over
    (same storage, different shape); the bound buffer has the GELU's shape."""
    weight = torch.randn(32, 48)
    back = torch.randn(48, 32)

    def function(x):
        y = (x.reshape(-1, 32) @ weight).reshape(2, 4, 4, 48)
        z = functional.gelu(y + 1.0)
        return z.reshape(-1, 48) @ back

    compiled = check_same(function, torch.randn(2, 4, 4, 32), atol=1e-4, rtol=1e-4)
    source = compiled.report.source
    assert re.search(r"^    buf\d+ = buf\d+\.view\(2, 4, 4, 48\)$", source, re.MULTILINE), source
    assert source.count("empty_strided(") == 0, source


def test_a_layer_norm_writes_over_its_input_row_by_row():
    """A row kernel (one reduction loop, then the stored loop) writes over the product's
    result it normalises; a softmax (two reduction loops) and a norm whose input is read
    again later keep fresh buffers."""
    weight, back = torch.randn(32, 48), torch.randn(48, 32)
    scale, shift = torch.randn(48), torch.randn(48)

    def norm(x):
        return functional.layer_norm(x @ weight, (48,), scale, shift) @ back

    def rms(x):
        y = x @ weight
        return (y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-6) * scale) @ back

    def softmax(x):
        return torch.softmax((x @ weight) * 2.0, dim=-1) @ back

    def read_again(x):
        y = x @ weight
        return functional.layer_norm(y, (48,), scale, shift) @ back + y @ back

    for function in (norm, rms):
        compiled = check_same(function, torch.randn(64, 32), atol=1e-4, rtol=1e-4)
        assert len(_bindings(compiled)) == 1, function.__name__
        assert "empty_strided(" not in compiled.report.source, function.__name__
    compiled = check_same(softmax, torch.randn(64, 32), atol=1e-4, rtol=1e-4)
    assert _bindings(compiled) == []
    compiled = check_same(read_again, torch.randn(64, 32), atol=1e-4, rtol=1e-4)
    assert compiled.report.source.count("empty_strided(") == 1     # the norm's output
