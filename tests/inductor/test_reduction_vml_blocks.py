"""A reduction whose summands call VML (codegen/cpp/vml_blocks.py): the lane loop is blocked
with the loop over its lane blocks, one VML call per 512 positions (it was one per lane
block of 64: logsumexp along 1024 x 1024 took 2.15 ms against eager's 1.93). Values are
eager's bits where the reduction is exact (amax, argmax of VML's exp and log), close for
sums; row lengths cover 16 lanes (100), whole chunks (1024), a partial chunk and a tail
(3001), one long row with float sums flushed into double (2**20 + 5); lane updates that are
not plain statements (argmax's selects) and indirect loads (an index check) keep the lane
loop blocked on its own."""
import pytest
import torch

from inductor.runtime.build import vml_library
from tests.inductor.conftest import check_same, compile_function

needs_vml = pytest.mark.skipif(vml_library() is None,
                               reason="torch has no MKL VML here (the C++ kernels use libmvec)")


def _values(rows: int, columns: int) -> torch.Tensor:
    x = torch.randn(rows, columns, generator=torch.Generator().manual_seed(columns)) * 4
    x[0, :3] = torch.tensor([float("nan"), float("inf"), -float("inf")])[:columns]
    return x


def exp_amax(x):
    return torch.exp(x).amax(1)


def log_amin(x):
    return torch.log(x.abs() + 1).amin(1)


def exp_argmax(x):
    return torch.exp(x).argmax(1)


def logsumexp(x):
    return torch.logsumexp(x, 1)


def exp_sum_all(x):
    return torch.exp(x * 0.01).sum()


def gathered_exp_amax(x, index):
    return torch.exp(x[index]).amax(1)


@needs_vml
@pytest.mark.parametrize("columns", [100, 1024, 3001])
@pytest.mark.parametrize("function", [exp_amax, log_amin, exp_argmax],
                         ids=lambda f: f.__name__)
def test_exact_reductions_of_vml_values(function, columns):
    check_same(function, _values(6, columns), atol=0, rtol=0)


@needs_vml
@pytest.mark.parametrize("columns", [100, 1024, 3001])
def test_logsumexp(columns):
    check_same(logsumexp, _values(6, columns), atol=1e-5, rtol=1e-6)


@needs_vml
def test_long_sum_flushed_into_double():
    check_same(exp_sum_all, torch.randn(2 ** 20 + 5, generator=torch.Generator().manual_seed(3)),
               atol=0, rtol=1e-6)


@needs_vml
def test_index_checked_loads():
    x = _values(50, 1031)
    index = torch.tensor([3, 0, 49, 7, 3])
    check_same(gathered_exp_amax, x, index, atol=0, rtol=0)
    with pytest.raises(IndexError):
        compile_function(gathered_exp_amax, x, index)(x, torch.tensor([3, 50]))


@needs_vml
def test_one_vml_call_per_512_positions():
    """The lane blocks run inside the loop of VML blocks (fails when the lane loop is blocked
    alone: `y0_vml < y0_block + 64`)."""
    source = compile_function(logsumexp, _values(4, 1024)).report.source
    assert "for (int64_t y0_block = y0_vml; y0_block < y0_vml_end; y0_block += 64)" in source
    assert "y0_vml < y0_block + 64" not in source, source
