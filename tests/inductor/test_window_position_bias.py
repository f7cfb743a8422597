"""Swin's relative position bias on the CPU: `table[index]` (one bias per head and pair of
positions in a window) is added to the attention scores of every window. The gather is
realized once (`GATHER_REALIZE_RATIO`) instead of inlined into the softmax, where its index
load, range check and scattered load ran again for every window, in each of the softmax's
passes (docs/performance-notes.md, Swin-T). Values are compared with eager; the structure
is read from the generated C++.
"""
import pytest
import torch

from tests.inductor.conftest import check_same

WINDOW = 7


def relative_position_index(window: int) -> torch.Tensor:
    """torchvision's index of the bias table for each pair of positions in a window."""
    coordinates = torch.stack(torch.meshgrid(torch.arange(window), torch.arange(window),
                                             indexing="ij")).flatten(1)
    relative = (coordinates[:, :, None] - coordinates[:, None, :]).permute(1, 2, 0)
    relative = relative + (window - 1)
    return (relative[:, :, 0] * (2 * window - 1) + relative[:, :, 1]).flatten()


def window_softmax(scores, table, index):
    """Scores `[windows, heads, N, N]` plus the gathered bias, then softmax (as in
    torchvision's shifted_window_attention)."""
    positions = scores.shape[-1]
    bias = table[index].view(positions, positions, -1).permute(2, 0, 1).contiguous()
    return torch.softmax(scores + bias.unsqueeze(0), dim=-1)


def _inputs(windows=16, heads=3, window=WINDOW):
    torch.manual_seed(0)
    positions = window * window
    return (torch.randn(windows, heads, positions, positions),
            torch.randn((2 * window - 1) ** 2, heads), relative_position_index(window))


def _kernels(source: str) -> list:
    kernels = source.split("call.with_argument_list = call_with_argument_list")[-1]
    return kernels.split("static void kernel")[1:]


def test_bias_is_gathered_once_not_per_window():
    compiled = check_same(window_softmax, *_inputs())
    kernels = _kernels(compiled.report.source)
    softmax = [text for text in kernels if "exp" in text]
    gathers = [text for text in kernels if "jit_wrap_index" in text]
    assert softmax and gathers, compiled.report.source
    # Before: the softmax kernel (loops over the 16 windows) gathered the bias itself.
    for text in softmax:
        assert "jit_wrap_index" not in text, text
    for text in gathers:
        assert "< 16;" not in text, text


@pytest.mark.parametrize("windows, heads, window", [(1, 2, 7), (4, 12, 7), (3, 5, 3)])
def test_window_softmax_matches_eager(windows, heads, window):
    check_same(window_softmax, *_inputs(windows, heads, window))


def test_out_of_range_index_still_raises():
    scores, table, index = _inputs(windows=4)
    index = index.clone()
    index[5] = table.shape[0] + 3
    with pytest.raises(IndexError):
        window_softmax(scores, table, index)
    from tests.inductor.conftest import compile_function
    compiled = compile_function(window_softmax, scores, table, index)
    with pytest.raises(IndexError):
        compiled(scores, table, index)


def test_swin_block_matches_eager():
    swin = pytest.importorskip("torchvision.models.swin_transformer")
    torch.manual_seed(0)
    block = swin.SwinTransformerBlock(96, 3, [7, 7], [3, 3]).eval()
    x = torch.randn(1, 28, 28, 96)
    import dynamo
    with torch.no_grad():
        expected = block(x)
        actual = dynamo.jit(block, backend="inductor")(x)
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)
