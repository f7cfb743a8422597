"""Graph fuzzer seed 5275 (CUDA campaign at fb48edd; also on the Triton interpreter): an index
expression that the kernel's extents turn into a constant (a write into an empty slice,
`a2[3:3:3, 2:9:2].fill_(3).div_(empty)`, indexes through symbols of size-0/size-1 loops) was
printed as `(0).to(tl.int64)`: no Triton tensor ("'int' object has no attribute 'to'" on the
interpreter, a CompilationError of the `&` that used it on CUDA). Constants are `tl.full`."""
import torch

import inductor
from tests.inductor.conftest import check_same


def test_index_that_prints_as_a_constant(monkeypatch):
    monkeypatch.setattr(inductor.config, "cpu_backend", "triton")

    def function(a1, a2, a5):
        view = a2[3:3:3, 2:9:2]
        view.fill_(3)
        view.div_(a5)
        return (a1 * 1, a2 * 1)
    generator = torch.Generator().manual_seed(0)
    compiled = check_same(function, torch.randn(6, generator=generator),
                          torch.randn(3, 8, generator=generator).half(),
                          torch.empty(0, 3, dtype=torch.float16))
    assert compiled.report.reason is None, compiled.report.reason
