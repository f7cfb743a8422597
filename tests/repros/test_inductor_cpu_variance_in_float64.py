"""Program fuzzer, inductor seed 22856: `t1[1:2] = t1.std(-1, keepdim=True)` of float32 values
near 1e34 came back inf (and NaN one call later) where eager's is 1.2e34. Eager's CPU variance
kernels accumulate float32, float16 and bfloat16 in float64 (sum of squared deviations,
division, std's square root, mean) and round only the results; the compiled Welford pass
accumulated in float32 and its sum of squares overflowed. The normalizations keep eager's
float moments: a layer norm of the same values is NaN in eager and compiled."""
import pytest
import torch

import dynamo

HUGE = torch.tensor([[2.5e34, 1.2e34, 1.2e23, 2.8e29], [3.0e33, -2.0e34, 1.0, 4.5e30]])


def _moments(x):
    return (x.std(-1, keepdim=True), x.var(0), torch.var_mean(x, -1), torch.std_mean(x, 0),
            x.std(), x.var(correction=0))


def _written_std(x):
    t = x.clone()
    t[:, 1:2] = t.std(-1, keepdim=True)
    return t


def _same(actual, expected):
    for a, e in zip(torch.utils._pytree.tree_leaves(actual),
                    torch.utils._pytree.tree_leaves(expected)):
        assert a.dtype == e.dtype
        torch.testing.assert_close(a, e, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("scale", [1.0, 1e-3])
def test_variance_of_huge_values(code_generator, scale):
    """Exact, as eager: float64 sums rounded once to float32 (1.0: a float32 sum of squares
    overflows; 1e-3: it does not, and the float32 pass was an ulp off)."""
    x = HUGE * scale
    _same(dynamo.jit(_moments, backend=code_generator)(x), _moments(x))
    _same(dynamo.jit(_written_std, backend=code_generator)(x), _written_std(x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_variance_of_ordinary_values(code_generator, dtype):
    x = (torch.randn(6, 37, generator=torch.Generator().manual_seed(3)) * 3 + 100).to(dtype)
    _same(dynamo.jit(_moments, backend=code_generator)(x), _moments(x))


def test_normalizations_keep_float_moments():
    """Eager's layer and group norm kernels accumulate their moments in float: their
    decompositions trace no float64 value (a var_mean of float32 values)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from inductor.decompose import decomposition_table

    def norms(x):
        return (torch.nn.functional.layer_norm(x, (4,)),
                torch.nn.functional.group_norm(x[None], 1), torch.var_mean(x, 0))
    graph = make_fx(norms, decomposition_table=decomposition_table())(HUGE).graph
    computed_in = [node.args[0].meta["val"].dtype for node in graph.nodes
                   if node.target is torch.ops.aten.var_mean.correction]
    # the norms' var_means in float32, the user's in float64
    assert sorted(computed_in, key=str) == [torch.float32, torch.float32, torch.float64]
