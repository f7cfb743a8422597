"""The attention backward kernels' library calls get `grad_out` laid out like `out` (their
CUDA kernels read both with one set of strides; see inductor/lower/attention.py). Lowered on
fake CUDA tensors: the layouts are decided at lowering time, so no GPU is needed."""
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

from inductor.ir.nodes import ExternKernel
from inductor.lower import lower

aten = torch.ops.aten
BATCH, HEADS, SEQUENCE, WIDTH = 2, 4, 16, 8


def _heads_view(mode, dtype):
    """(batch, heads, sequence, width) over (batch, sequence, heads, width) memory: the
    layout of q, k, v and out after a transformer's transpose."""
    with mode:
        return torch.empty(BATCH, SEQUENCE, HEADS, WIDTH, device="cuda",
                           dtype=dtype).transpose(1, 2)


def _lowered(name, call):
    mode = FakeTensorMode()
    tangent = None
    with mode:
        tangent = torch.empty(BATCH, HEADS, SEQUENCE, WIDTH, device="cuda")  # contiguous
        logsumexp = torch.empty(BATCH, HEADS, SEQUENCE, device="cuda")
        seed = torch.empty((), dtype=torch.int64, device="cuda")
        offset = torch.empty((), dtype=torch.int64, device="cuda")
    q, k, v, out = (_heads_view(mode, torch.bfloat16) for _ in range(4))

    def backward(tangent, q, k, v, out, logsumexp, seed, offset):
        return call(tangent.to(torch.bfloat16), q, k, v, out, logsumexp, seed, offset)

    inputs = [tangent, q, k, v, out, logsumexp, seed, offset]
    with mode:
        gm = make_fx(backward, tracing_mode="real")(*inputs)
    graph = lower(gm, inputs)
    calls = [buffer for buffer in graph.buffers if isinstance(buffer, ExternKernel)]
    assert [str(call.kernel.overloadpacket) for call in calls] == [f"aten.{name}"]
    return calls[0], out


def _efficient(grad, q, k, v, out, logsumexp, seed, offset):
    return aten._scaled_dot_product_efficient_attention_backward(
        grad, q, k, v, None, out, logsumexp, seed, offset, 0.0, [True, True, True, False],
        False)


def _flash(grad, q, k, v, out, logsumexp, seed, offset):
    return aten._scaled_dot_product_flash_attention_backward(
        grad, q, k, v, out, logsumexp, None, None, SEQUENCE, SEQUENCE, 0.0, False, seed,
        offset)


@pytest.mark.parametrize("name,call", [
    ("_scaled_dot_product_efficient_attention_backward", _efficient),
    ("_scaled_dot_product_flash_attention_backward", _flash)])
def test_grad_out_takes_the_strides_of_out(name, call):
    kernel, out = _lowered(name, call)
    grad_out = kernel.inputs[0]
    assert [int(s) for s in grad_out.layout.stride] == list(out.stride())
    assert list(out.stride()) != list(torch.empty(BATCH, HEADS, SEQUENCE, WIDTH).stride())
