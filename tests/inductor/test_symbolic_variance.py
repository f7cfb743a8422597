"""var / std over symbolic sizes (issue 23): the divisor `n - correction` is a symbolic int
for `correction` 0 or 1 (also given as the float `1.0`, as `Tensor.std()` passes it), so the
graph compiles once for every size; found by the program fuzzer (inductor --dynamic true,
seed 5057: `TypeError: cannot promote a Add`, the graph then compiled per size). Other
corrections (0.5, or 2, which eager clamps at 0 for small n) go per size, with the reason."""
import pytest
import torch

import inductor
from tests.inductor.symbolic_graphs import symbolic_graph


@pytest.fixture(autouse=True)
def _raise_on_errors(tmp_path):
    saved = inductor.config.snapshot()
    inductor.config.update(cache_dir=str(tmp_path), fallback_on_error=False)
    yield
    inductor.config.update(**saved)


def _compiled(function, first):
    return inductor.compile_fx(symbolic_graph(function, [first], [[0, 1]]), [first.clone()])


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("correction", [0, 1, 1.0, None])
def test_variance_compiles_once_for_every_size(dtype, correction):
    def function(x):
        if correction is None:
            return x.unsqueeze(0).std(-1), x.var(0)
        return (torch.var(x, -1, correction=correction),
                torch.std_mean(x, 0, correction=correction)[0])

    generator = torch.Generator().manual_seed(0)
    first = torch.randn(5, 6, dtype=dtype, generator=generator)
    compiled = _compiled(function, first)
    for rows, columns in ((5, 6), (2, 3), (13, 7), (40, 2), (3, 97)):
        x = torch.randn(rows, columns, dtype=dtype, generator=generator)
        for mine, theirs in zip(compiled(x.clone()), function(x)):
            torch.testing.assert_close(mine, theirs, atol=0, rtol=1e-12 if dtype ==
                                       torch.float64 else 1e-6)
    assert compiled.report.size_variants == 0, compiled.report.size_reason


@pytest.mark.expect_fallback("per_size", reason="var/std with a correction other than 0 or 1")
@pytest.mark.parametrize("correction", [0.5, 2])
def test_other_corrections_compile_per_size_with_the_reason(correction):
    def function(x):
        return torch.var(x, -1, correction=correction)

    generator = torch.Generator().manual_seed(1)
    first = torch.randn(4, 5, dtype=torch.float64, generator=generator)
    compiled = _compiled(function, first)
    for rows, columns in ((4, 5), (3, 2), (6, 9)):
        x = torch.randn(rows, columns, dtype=torch.float64, generator=generator)
        torch.testing.assert_close(compiled(x.clone()), function(x), equal_nan=True)
    assert "correction" in (compiled.report.size_reason or ""), compiled.report.size_reason
