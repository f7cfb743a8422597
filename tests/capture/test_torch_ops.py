"""Corpus: torch functions, Tensor methods and attributes recorded into the graph — creation,
views, reductions, indexing and assignment, dtype and device conversions, in-place methods on
inputs (visible to the caller), random ops under a seed, metadata answered at trace time."""
import pytest
import torch
import torch.nn.functional as F

from tests.capture.differential import check

x4 = torch.randn(4)
m34 = torch.randn(3, 4)
cube = torch.randn(2, 3, 4)


@pytest.mark.parametrize("name", ["relu", "sigmoid", "tanh", "exp", "abs", "neg", "sin", "cos",
                                  "floor", "ceil", "sqrt", "rsqrt", "log1p", "erf", "sign",
                                  "reciprocal", "square", "trunc", "frac", "expm1"])
def test_unary_tensor_methods(name):
    check(lambda x: getattr(x.abs() + 0.1, name)(), m34)


@pytest.mark.parametrize("name", ["sum", "mean", "amax", "amin", "prod", "std", "var",
                                  "logsumexp", "norm", "argmax", "argmin", "all", "any"])
def test_reductions_with_dim_and_keepdim(name):
    def f(x):
        value = x if name not in ("all", "any") else x > 0
        return getattr(value, name)(dim=1), getattr(value, name)(dim=-1, keepdim=True)
    check(f, m34)


def test_full_reductions_and_topk_sort():
    def f(x):
        values, indices = x.topk(2, dim=-1)
        ordered, order = x.sort(dim=0, descending=True)
        return x.sum(), x.max(), values, indices, ordered, order, x.cumsum(1), x.median(dim=1)
    check(f, m34)


def test_creation_functions():
    def f(x):
        return (torch.zeros(2, 3), torch.ones_like(x), torch.full((2,), 7.0), torch.eye(3),
                torch.arange(0, 10, 3), torch.linspace(0, 1, 5), torch.empty(3).fill_(1.0),
                x.new_ones(2), x.new_tensor([1.0, 2.0]), torch.tensor([[1, 2], [3, 4]]),
                torch.zeros_like(x, dtype=torch.int64), torch.tril(torch.ones(3, 3)))
    check(f, m34)


def test_views_and_shape_functions():
    def f(x):
        return (x.view(-1), x.reshape(4, 6), x.permute(2, 0, 1), x.transpose(1, 2),
                x.unsqueeze(0).squeeze(0), x.flatten(1), x.unflatten(2, (2, 2)),
                x.expand(2, 2, 3, 4), x.movedim(0, -1), x.narrow(2, 1, 2), x.unbind(0),
                x.select(1, 0), x.contiguous().stride(), x.mT)
    check(f, cube)


def test_joining_and_splitting():
    def f(x, y):
        return (torch.cat([x, y]), torch.stack([x, y], dim=1), torch.hstack([x, y]),
                torch.split(x, [1, 2], dim=0), x.chunk(2, dim=1), torch.vstack((x, y)),
                torch.broadcast_tensors(x[:1], y))
    check(f, m34, m34 * 2)


def test_elementwise_with_broadcasting_and_scalars():
    def f(x, y):
        return (torch.add(x, y, alpha=2), torch.where(x > y, x, y), x.clamp(min=-0.5),
                torch.lerp(x, y, 0.3), x.masked_fill(x < 0, 0.0), torch.maximum(x, y),
                torch.pow(x.abs(), 1.5), x.addcmul(y, y, value=0.5), torch.atan2(x, y))
    check(f, m34, torch.randn(4))


def test_linear_algebra():
    def f(a, b):
        return (a @ b, torch.mm(a, b), torch.matmul(a.unsqueeze(0), b), torch.bmm(
            a.expand(2, 3, 4), b.expand(2, 4, 5)), torch.einsum("ij,jk->ik", a, b),
            torch.outer(a[0], b[:, 0]), a.T @ a, torch.baddbmm(torch.zeros(2, 3, 5),
                                                                 a.expand(2, 3, 4),
                                                                 b.expand(2, 4, 5)))
    check(f, m34, torch.randn(4, 5))


def test_functional_activations_and_losses():
    def f(x, target):
        return (F.silu(x), F.leaky_relu(x, 0.1), F.elu(x), F.softplus(x), F.hardtanh(x),
                F.log_softmax(x, dim=-1), F.mse_loss(x, target), F.l1_loss(x, target),
                F.cross_entropy(x, target.argmax(dim=1)), F.smooth_l1_loss(x, target),
                F.binary_cross_entropy_with_logits(x, target.sigmoid()))
    check(f, m34, torch.randn(3, 4))


def test_functional_layers():
    def f(images, weight):
        return (F.conv2d(images, weight, padding=1), F.max_pool2d(images, 2),
                F.avg_pool2d(images, 2), F.interpolate(images, scale_factor=2, mode="nearest"),
                F.pad(images, (1, 1)), F.adaptive_avg_pool2d(images, 1),
                F.batch_norm(images, None, None, training=True),
                F.group_norm(images, 1), F.unfold(images, 2))
    check(f, torch.randn(2, 3, 6, 6), torch.randn(4, 3, 3, 3))


def test_scaled_dot_product_attention():
    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True), \
            F.scaled_dot_product_attention(q, k, v, attn_mask=torch.ones(5, 5).bool())
    check(f, *(torch.randn(2, 2, 5, 8) for _ in range(3)))


def test_indexing_reads():
    def f(x, index, mask_rows):
        return (x[index], x[:, index[:2]], x[mask_rows], x.gather(1, index[:3, None]),
                x.index_select(0, index[:2]), x[[0, 2]], x[1:, -2:], x.take(index))
    check(f, m34, torch.tensor([2, 0, 1]), torch.tensor([True, False, True]),
          graphs=None, breaks=None)


def test_indexing_with_python_ints_and_slices_only():
    check(lambda x: (x[0, 1], x[:, ::2], x[-1], x[None, :, None, 0], x[1:2, ...]), cube)


def test_setitem_and_scatter_on_new_tensors():
    def f(x):
        y = torch.zeros(3, 4)
        y[0] = x[0]
        y[1:, 1] = 5.0
        y[x > 0] = 1.0
        z = torch.zeros(3, 4).scatter_(1, torch.tensor([[0], [1], [2]]), 2.0)
        w = torch.zeros(5).index_add_(0, torch.tensor([0, 0, 4]), torch.ones(3))
        return y, z, w
    check(f, m34)


@pytest.mark.parametrize("method", ["add_", "mul_", "zero_", "clamp_", "relu_", "copy_",
                                    "fill_", "div_", "sub_", "exp_"])
def test_inplace_methods_on_inputs_are_visible(method):
    def f(x, y):
        operation = getattr(x, method)
        if method in ("zero_", "relu_", "exp_"):
            operation()
        elif method == "clamp_":
            operation(-0.1, 0.1)
        elif method in ("copy_",):
            operation(y)
        else:
            operation(2.0 if method in ("fill_", "div_") else y)
        return x * 1
    check(f, m34.clone(), torch.randn(3, 4))


def test_inplace_setitem_on_input():
    def f(x):
        x[0] = 0.0
        x[:, -1] += 1.0
        return x.sum()
    check(f, m34.clone())


def test_out_variant_writes_argument():
    def f(x, out):
        torch.add(x, 1, out=out)
        return out * 2
    check(f, x4, torch.empty(4))


def test_dtype_and_device_conversions():
    def f(x):
        return (x.to(torch.float64), x.double(), x.half().float(), x.int(), x.long(), x.bool(),
                x.to(dtype=torch.bfloat16), x.type(torch.float64), x.cpu(), x.to("cpu"),
                x.to(x), x.float().type_as(x.double()))
    check(f, m34)


def test_metadata_answered_at_trace_time():
    def f(x):
        return (x.shape, x.size(), x.size(-1), x.dim(), x.ndim, x.numel(), x.dtype, x.device,
                x.is_contiguous(), x.element_size(), x.stride(), x.storage_offset(),
                x.is_floating_point(), x.requires_grad, x.layout, x.is_cuda, len(x),
                x.mT.is_contiguous(), x.nelement())
    check(f, cube)


def test_requires_grad_propagation_and_detach():
    def f(x, w):
        y = x * w
        return y, y.detach(), y.requires_grad, y.detach().requires_grad, w.is_leaf
    check(f, x4, torch.randn(4, requires_grad=True))


def test_random_ops_under_the_same_seed():
    def f(x):
        return x + torch.randn(4), torch.rand_like(x), torch.randint(0, 10, (3,)), \
            F.dropout(x, 0.5, training=True), torch.bernoulli(torch.full((4,), 0.5)), \
            torch.randperm(5), torch.multinomial(torch.ones(4), 2)
    check(f, x4)


def test_torch_functions_folded_on_metadata():
    def f(x):
        out = x
        if torch.is_tensor(x) and torch.is_floating_point(x) and torch.numel(x) == 4:
            out = out * 2
        if torch.is_grad_enabled():
            out = out + 1
        return out, torch.get_default_dtype(), torch.promote_types(torch.int32, x.dtype), \
            torch.broadcast_shapes((1, 4), (3, 1))
    check(f, x4)


def test_tensor_properties_that_compute():
    check(lambda x: (x.T, x.mT, x.real, x.H if x.dim() == 2 else x), m34)


def test_complex_tensors():
    def f(x):
        z = torch.complex(x, x * 2)
        return z.abs(), z.angle(), torch.view_as_real(z), z.conj().imag
    check(f, x4)


def test_integer_and_boolean_tensor_ops():
    def f(x):
        return (x // 2, x % 3, x.bitwise_and(6), x.float().mean(), (x > 2).sum(),
                torch.logical_and(x > 1, x < 5), x.bitwise_not())
    check(f, torch.arange(8))


def test_tensor_method_chains_with_keyword_arguments():
    def f(x):
        return x.softmax(dim=-1).log().mean(dim=(0, 1), keepdim=False).sub(other=1.0,
                                                                          alpha=2)
    check(f, cube)


def test_torch_function_objects_from_namespaces():
    def f(x):
        linalg = torch.linalg
        special = torch.special
        return linalg.vector_norm(x, dim=-1), special.expit(x), torch.fft.rfft(x).abs(), \
            torch.nn.functional.normalize(x, dim=0)
    check(f, m34)


def test_item_and_tolist_read_values_outside_the_graph():
    """Documented current behaviour: reading a tensor's value into Python breaks the graph;
    results and printed output still match eager."""
    def f(x):
        scale = x.sum().item()
        return x * scale, x.tolist()
    check(f, x4, graphs=None, breaks=None)


def test_data_dependent_output_shapes_match_eager():
    """Documented current behaviour: ops whose output shape depends on values (nonzero,
    boolean masks, bincount, unique) break the graph."""
    def f(x):
        return x.nonzero(), x[x > 0], torch.bincount(x.long().abs()), x.unique()
    check(f, torch.tensor([1.0, -2.0, 0.0, 3.0, 1.0]), graphs=None, breaks=None)


def test_data_dependent_branch_matches_eager():
    """Documented current behaviour: a branch on a tensor's value breaks the graph."""
    def f(x):
        if x.sum() > 0:
            return x + 1
        return x - 1
    check(f, x4, graphs=None, breaks=None)
    check(f, -x4.abs(), graphs=None, breaks=None)
