"""Every Triton kernel of zoo models' AMP training graphs compiles for sm_90 without a GPU.

On demand (each model costs a CPU training step and hundreds of kernel compilations):
`FRAMEJIT_ZOO_GPU_COMPILE=opt,gpt2 pytest tests/triton/test_zoo_gpu_compile.py`; skipped
otherwise and where Triton lacks its NVIDIA backend. The graphs are those inductor receives
from `dynamo.jit(model)` under CPU autocast bfloat16, forward and backward, printed for a CUDA
target (`benchmarks/triton/zoo_gpu_compile.py`): it found OPT's scan over a scalar, which the
interpreter accepts and sm_90 rejects.
"""
import os

import pytest
import torch

MODELS = [name for name in os.environ.get("FRAMEJIT_ZOO_GPU_COMPILE", "").split(",") if name]

pytestmark = pytest.mark.skipif(not MODELS, reason="on demand: FRAMEJIT_ZOO_GPU_COMPILE=opt,...")


@pytest.fixture(scope="module", autouse=True)
def _needs_nvidia_backend():
    pytest.importorskip("triton.backends.nvidia")


@pytest.mark.parametrize("name", MODELS)
def test_zoo_training_kernels_compile_for_sm90(name):
    from benchmarks.triton.zoo_gpu_compile import check

    failures = check(name, batch=2, training=True, amp=torch.bfloat16)
    assert not failures, "\n".join(f"graph {failure.graph} {failure.kernel}: {failure.error}"
                                   f"\n{failure.text}" for failure in failures[:3])
