"""Products with misaligned result rows (GPT-2's logits) on GPUs
(inductor/runtime/aligned_matmul.py): one Triton kernel (triton_product.py, through its
interpreter here and on the GPU when present), aligned row groups and column blocks each give
eager's values, and the lowering picks them for mm, addmm and linear layers. Checked on CPU
tensors with the GPU condition patched."""
import pytest
import torch
import torch.nn.functional as F

from inductor.runtime import aligned_matmul
from tests.inductor.conftest import check_same


@pytest.mark.parametrize("bias_shape", [None, (37,), (1, 37), (50, 37)])
@pytest.mark.parametrize("transposed", [False, True])
def test_column_blocks_give_the_product(monkeypatch, bias_shape, transposed):
    monkeypatch.setattr(aligned_matmul, "SCRATCH_BYTES", 50 * 8 * 4)   # blocks of 8 columns
    monkeypatch.setattr(aligned_matmul, "MIN_BLOCK_COLUMNS", 1)
    first = torch.randn(50, 24)
    second = torch.randn(37, 24).t() if transposed else torch.randn(24, 37)
    if bias_shape is None:
        result, expected = aligned_matmul.aligned_mm(first, second), first @ second
    else:
        bias = torch.randn(bias_shape)
        result = aligned_matmul.aligned_addmm(bias, first, second)
        expected = torch.addmm(bias, first, second)
    assert result.is_contiguous() and result.shape == (50, 37)
    torch.testing.assert_close(result, expected)


def test_blocks_are_whole_alignment_units():
    assert aligned_matmul._block_columns(2048, 50257, 2) == 8192      # GPT-2: 32 MB blocks
    assert aligned_matmul._block_columns(512, 50257, 2) == 32768
    assert aligned_matmul._block_columns(16384, 50257, 2) == 8192     # not narrower
    assert aligned_matmul._block_columns(1 << 20, 50257, 4) == 8192


def test_padded_rows_are_whole_16_byte_units():
    assert aligned_matmul.padded_row(50257, 2) == 50264
    assert aligned_matmul.padded_row(50257, 4) == 50260
    assert aligned_matmul.padded_row(64, 2) == 64
    assert aligned_matmul.wants_alignment(2048, 50257, 2, torch.device("cuda"))
    assert not aligned_matmul.wants_alignment(2048, 50264, 2, torch.device("cuda"))
    assert not aligned_matmul.wants_alignment(2048, 50257, 2, torch.device("cpu"))
    assert not aligned_matmul.wants_alignment(4, 50257, 2, torch.device("cuda"))


@pytest.fixture
def calls(monkeypatch):
    """The GPU condition on CPU tensors and small sizes; returns the block functions' calls."""
    monkeypatch.setattr(aligned_matmul, "wants_alignment",
                        lambda rows, columns, size, device: (columns * size) % 16 != 0)
    monkeypatch.setattr(aligned_matmul, "SCRATCH_BYTES", 4 * 64 * 4)
    made = []
    for name in ("aligned_mm", "aligned_addmm"):
        original = getattr(aligned_matmul, name)

        def counting(*arguments, original=original, name=name):
            made.append(name)
            return original(*arguments)
        monkeypatch.setattr(aligned_matmul, name, counting)
    return made


def test_linear_layers_with_odd_outputs_use_the_blocks(calls):
    def logits(x, weight, bias, other, more):
        return F.linear(x, weight), F.linear(x, other, bias), F.linear(x, more, bias).relu()

    inputs = (torch.randn(16, 32), torch.randn(37, 32), torch.randn(37), torch.randn(37, 32),
              torch.randn(37, 32))
    compiled = check_same(logits, *inputs)
    calls.clear()
    compiled(*inputs)
    # the bias-free product, the returned addmm, and the product whose bias fuses into relu
    assert sorted(calls) == ["aligned_addmm", "aligned_mm", "aligned_mm"]


def test_aligned_rows_keep_the_plain_library_call(calls):
    check_same(lambda x, weight: F.linear(x, weight), torch.randn(16, 32), torch.randn(40, 32))
    assert calls == []


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_logits_match_eager():
    from tests.inductor.conftest import compile_function
    x = torch.randn(256, 64, device="cuda", dtype=torch.bfloat16)
    weight = torch.randn(50257, 64, device="cuda", dtype=torch.bfloat16)
    compiled = compile_function(lambda x, weight: F.linear(x, weight), x, weight)
    result = compiled(x, weight)
    result = result[0] if isinstance(result, (list, tuple)) else result
    assert result.is_contiguous()
    torch.testing.assert_close(result, F.linear(x, weight))


@pytest.mark.parametrize("columns", [37, 38, 44])
@pytest.mark.parametrize("bias_shape", [None, "row", "full"])
def test_row_groups_write_the_contiguous_result(columns, bias_shape):
    """Aligned row groups (every 8th bf16 row from its first aligned column) plus the first
    and last 16 bytes of every row give the product; a row-major right operand (whose
    columns cannot be offset and stay aligned) is declined."""
    first = torch.randn(50, 24).bfloat16()
    weight = torch.randn(columns, 24).bfloat16()
    bias = None if bias_shape is None else \
        torch.randn(columns if bias_shape == "row" else (50, columns)).bfloat16()
    result = aligned_matmul._row_groups(bias, first, weight.t())
    expected = first @ weight.t() if bias is None else torch.addmm(bias, first, weight.t())
    assert result.is_contiguous() and result.shape == (50, columns)
    torch.testing.assert_close(result, expected)
    assert aligned_matmul._row_groups(bias, first, weight.t().contiguous()) is None


@pytest.mark.parametrize("bias_shape", [None, "row", "full"])
def test_triton_product_kernel_in_the_interpreter(bias_shape):
    """The one-kernel product (inductor/runtime/triton_product.py) with masked edges, a
    K that is not a whole number of blocks, and both bias forms, through Triton's
    interpreter on CPU tensors."""
    pytest.importorskip("triton")
    from inductor.runtime import triton_product
    first = torch.randn(150, 72)
    weight = torch.randn(263, 72)
    bias = None if bias_shape is None else \
        torch.randn(263 if bias_shape == "row" else (150, 263))
    result = torch.empty(150, 263)
    triton_product.product_into(result, first, weight.t(), bias)
    expected = first @ weight.t() if bias is None else torch.addmm(bias, first, weight.t())
    torch.testing.assert_close(result, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("with_bias", [False, True])
def test_gpu_triton_product_matches_the_library(with_bias):
    x = torch.randn(512, 256, device="cuda", dtype=torch.bfloat16)
    weight = torch.randn(5003, 256, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(5003, device="cuda", dtype=torch.bfloat16) if with_bias else None
    result = aligned_matmul.aligned_addmm(bias, x, weight.t()) if with_bias else \
        aligned_matmul.aligned_mm(x, weight.t())
    again = aligned_matmul.aligned_addmm(bias, x, weight.t()) if with_bias else \
        aligned_matmul.aligned_mm(x, weight.t())     # the compiled launcher's path
    expected = F.linear(x.float(), weight.float(), None if bias is None else bias.float())
    assert result.is_contiguous()
    torch.testing.assert_close(result.float(), expected, rtol=2e-2, atol=2e-2)
    assert torch.equal(result, again)


def test_products_fall_back_to_the_library_where_no_triton_configuration_runs(monkeypatch):
    """A GPU where no tile configuration compiles: the product comes from the aligned library
    ways, and the failed tuning is remembered (the GPU checks patched on CPU tensors)."""
    from inductor.runtime import triton_product
    tried = []

    def failing(*arguments):
        tried.append(1)
        raise RuntimeError("out of resources")
    monkeypatch.setattr(triton_product, "_launch", failing)
    monkeypatch.setattr(triton_product, "_CHOSEN", {})
    first, weight = torch.randn(50, 24).bfloat16(), torch.randn(37, 24).bfloat16()
    with monkeypatch.context() as patched:
        patched.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
        result = aligned_matmul.aligned_mm(first, weight.t())
        assert len(tried) == len(triton_product.CONFIGS)
        again = aligned_matmul.aligned_mm(first, weight.t())
        assert len(tried) == len(triton_product.CONFIGS)       # not tuned again
    torch.testing.assert_close(result, first @ weight.t())
    torch.testing.assert_close(again, result)
