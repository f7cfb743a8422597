"""Repros of the 20,000-graph CPU campaign (torch 2.11): an `as_strided` whose value the graph
never reads made a graph that writes its input run as is ("the graph reads, through
`as_strided`, storage around a tensor it writes"), on both CPU code generators.

- Dead: `torch.as_strided(a2, ...)` (seed 3540), `a2.unfold(...)` read only by a dead op
  (12389), an `as_strided` read only by a dead `expand_as` (13797), before or after a write
  into `a2`.
- Returned, so rebuilt by the wrapper as a view of the input after the call: `v =
  torch.as_strided(a2, [2], [3], 253); a2.index_fill_(...)` (19093, 5952): eager's `v` shows
  the write; the graph's own value of `v` is never read.
"""
import pytest
import torch

import inductor
from tests.inductor.conftest import check_same


@pytest.fixture(params=["cpp", "triton"])
def cpu_backend(request, monkeypatch):
    monkeypatch.setattr(inductor.config, "cpu_backend", request.param)
    return request.param


def _compiled_whole(function, *inputs):
    compiled = check_same(function, *inputs)
    assert compiled.report.reason is None, compiled.report.reason


def _gapped_input():
    return torch.randint(0, 2, (7, 2, 6, 12), generator=torch.Generator().manual_seed(0)).to(
        torch.uint8)[:, :, :, ::2]


def test_dead_as_strided_of_a_written_input(cpu_backend):
    """Seed 3540."""
    def function(a2, a3, a4):
        torch.as_strided(a2, [4], [5], 269)
        a2.scatter_(3, a3, a4)
        return (a2 * 1,)
    index = torch.tensor([[[[3, 5], [2, 1]]], [[[4, 1], [2, 4]]]])
    source = torch.tensor([[[[8, 14], [2, 5]]], [[[2, 0], [2, 3]]]], dtype=torch.uint8)
    _compiled_whole(function, _gapped_input(), index, source)


def test_unfold_read_by_dead_code(cpu_backend):
    """Seeds 12389 (unfold, a dead logical_and) and 13797 (a dead expand_as)."""
    def function(a2, a3, a4):
        v0 = a2.unfold(1, 5, 2)
        a2[0:0:2, 6:6, 0:].neg_()
        torch.logical_and(v0, a3)
        a2.add_(1)
        v1 = torch.as_strided(a2, [2, 3, 1], [5, 3, 2], 1)
        v1.expand_as(a4)
        return (a2 + 0,)
    _compiled_whole(function, torch.randn(4, 9, 3), torch.ones(1), torch.ones(2, 3, 4))


@pytest.mark.parametrize("offset", [0, 5, 17])
def test_returned_as_strided_of_an_input_written_after(cpu_backend, offset):
    """Seeds 19093 and 5952: the view is an output; the write comes after it."""
    def function(a2, a5):
        v1 = torch.as_strided(a2, [2, 2], [3, 4], offset)
        a2.index_fill_(1, a5, 0)
        return (v1, a2.sum())
    base = torch.randn(4, 12)
    _compiled_whole(function, base[:, ::2], torch.tensor([1, 3]))
    _compiled_whole(function, base[1:].t(), torch.tensor([0]))
