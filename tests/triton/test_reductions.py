"""Every reduction form of the Triton backend against eager: whole rows in registers
(persistent), rows looped over in blocks, rows split over programs (partials + combine),
reductions whose reads walk the rows (a sum over the first dimension), Welford variance,
argmax/argmin with NaN and ties, multi-stage kernels (softmax, layer norm)."""
import pytest
import torch

from tests.triton.conftest import DEVICES, check_same, compile_function, kernel_source


def reductions(x):
    """Many independent reductions of one input over its last dimension (one stage of one
    kernel, so a split applies to all of them)."""
    return (x.sum(-1), x.mean(-1), x.amax(-1), x.amin(-1), x.argmax(-1), x.argmin(-1),
            torch.var(x, -1), torch.std(x, -1, correction=0), (x > 0.5).any(-1),
            (x > -3).all(-1), (x * 0.01 + 1).prod(-1))


def dependent_reductions(x):
    """Reductions reading other reductions of the same row (two stages)."""
    return torch.logsumexp(x, -1), (x - x.mean(-1, keepdim=True)).abs().amax(-1)


def first_dimension(x):
    return (x.sum(0), x.amax(0), x.argmin(0), torch.var(x, 0), (x > 1.5).any(0))


STRATEGIES = {
    # name: (shape, persistent limit, marker in the generated source)
    "persistent": ((37, 100), 16384, None),
    "looped": ((37, 100), 16, "for roffset"),
    "split": ((3, 5000), 16384, "triton_partial_"),
}


def with_special_values(x: torch.Tensor) -> torch.Tensor:
    """Ties and a NaN in some rows, so argmax/argmin tie-breaks and NaN handling matter."""
    x = x.clone()
    x[0, 3] = x[0, 7] = x[0].max() + 1
    x[1, 5] = float("nan")
    x[2, 1] = x[2, 9] = x[2].min() - 1
    return x


def compare_each(function, x, atol=1e-4, rtol=1e-4):
    compiled = compile_function(function, x)
    actual, expected = compiled(x), function(x)
    for position, (got, want) in enumerate(zip(actual, expected)):
        torch.testing.assert_close(got, want, atol=atol, rtol=rtol, equal_nan=True,
                                   msg=lambda message: f"output {position}: {message}")
    return compiled


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_reductions_over_rows(device, strategy, settings):
    x, source = reductions_by_strategy(STRATEGIES[strategy], device, settings)
    if strategy == "persistent":
        assert "for roffset" not in source


def reductions_by_strategy(case, device, settings):
    """`reductions` and `dependent_reductions` against eager for one (shape, persistent limit,
    marker) case, the marker in the generated source; returns (input, source)."""
    shape, limit, marker = case
    settings.triton_persistent_limit = limit
    x = with_special_values(torch.randn(shape, device=device))
    source = kernel_source(compare_each(reductions, x))
    if marker:
        assert marker in source
    compare_each(dependent_reductions, x)
    return x, source


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(40, 48), (300, 64), (3000, 5)])
def test_reductions_over_the_first_dimension(device, shape):
    x = torch.randn(shape, device=device)
    x[3, 0] = float("nan")
    compare_each(first_dimension, x)


@pytest.mark.parametrize("device", DEVICES)
def test_full_reduction_splits_and_is_deterministic(device):
    x = torch.randn(50000, device=device)
    compiled = compile_function(lambda t: (t.sum(), t.var(), t.argmax()), x)
    first = compiled(x)
    assert "triton_partial_" in kernel_source(compiled)
    torch.testing.assert_close(first[0], x.sum(), rtol=1e-5, atol=1e-3)
    torch.testing.assert_close(first[1], x.var(), rtol=1e-5, atol=1e-5)
    assert int(first[2]) == int(x.argmax())
    again = compiled(x)
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.int64, torch.int32])
def test_reduction_dtypes(device, dtype, settings):
    settings.triton_persistent_limit = 64
    if dtype.is_floating_point:
        x = torch.randn(9, 130, device=device, dtype=dtype)
        function = (lambda t: (t.sum(-1), t.amax(-1), t.argmin(-1), t.mean(-1),
                               torch.var(t, -1)))
    else:
        x = torch.randint(-50, 50, (9, 130), device=device, dtype=dtype)
        function = (lambda t: (t.sum(-1), t.amax(-1), t.argmin(-1), t.prod(-1) % 97,
                               (t > 40).any(-1)))
    atol = 2e-2 if dtype == torch.bfloat16 else 1e-6
    compare_each(function, x, atol=atol, rtol=atol)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("limit", [16384, 32])
def test_softmax_and_layer_norm_are_one_kernel(device, limit, settings):
    settings.triton_persistent_limit = limit
    x = torch.randn(20, 200, device=device)
    weight, bias = torch.randn(200, device=device), torch.randn(200, device=device)
    softmax = check_same(lambda t: torch.softmax(t * 2, -1), x, atol=1e-6, rtol=1e-5)
    if limit < 200:   # looped: the sum of exponentials joins the max's loop (online softmax)
        assert kernel_source(softmax).count("for roffset") == 2
    norm = check_same(lambda t, w, b: torch.nn.functional.layer_norm(t, (200,), w, b),
                      x, weight, bias, atol=1e-5, rtol=1e-5)
    assert softmax.report.kernel_count == 1 and norm.report.kernel_count == 1


@pytest.mark.parametrize("device", DEVICES)
def test_reduction_with_pointwise_prologue_and_epilogue(device):
    def function(x, y):
        total = (x * y + 1).sum(-1, keepdim=True)
        return torch.relu(x - total / 7) * 2, total

    check_same(function, torch.randn(33, 70, device=device), torch.randn(33, 70, device=device),
               atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_reduction_over_several_dimensions(device):
    x = torch.randn(6, 7, 8, 9, device=device)
    check_same(lambda t: (t.sum((1, 3)), t.amax((0, 2)), t.permute(0, 2, 1, 3).mean((2, 3))),
               x, atol=1e-4, rtol=1e-4)


EVEN = {
    # name: (shape, persistent limit, marker): every extent a power of two or a multiple of
    # 1024, so the kernels are printed without the masks of those axes
    "persistent": ((32, 256), 16384, None),
    "looped": ((24, 3072), 16, "for roffset"),
    "split": ((4, 65536), 16384, "triton_partial_"),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("strategy", list(EVEN))
def test_rows_that_divide_into_blocks_drop_the_row_mask(device, strategy, settings):
    """The row mask is left out where every block divides the row (a mask always true still
    cost a tenth of an H100's bandwidth on a first-dimension sum); the reductions whose update
    selects (argmax, Welford) keep theirs, and every result matches eager, NaNs and ties
    included. 3072 is no power of two: the tuner's blocks are cut to divisors of it."""
    x, source = reductions_by_strategy(EVEN[strategy], device, settings)
    loads = [line for line in source.splitlines() if "tl.load(pointer" in line]
    assert loads and not any("rmask" in line for line in loads), loads
    compare_each(first_dimension, x.t().contiguous() if strategy != "split" else x[:, :4096])
