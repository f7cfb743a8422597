"""Golden files of generated Triton (as printed for an H100-sized CUDA target): a pointwise
chain, a transpose (2-D tile), softmax with rows in registers and looped (online softmax),
layer norm (rows in registers and looped: the mean reads the variance's Welford pass), a
sum over the first dimension (outer-contiguous), a full sum and a full var_mean (split). Each
file holds the kernel plans with their tiling, then the kernels (prelude left out). Review
diffs there when the code generator changes; regenerate with JIT_UPDATE_GOLDEN=1."""
import os
import pathlib

import pytest
import torch

from inductor.codegen.triton.prelude import PRELUDE
from tests.triton.conftest import gpu_module

GOLDEN = pathlib.Path(__file__).parent / "golden"
UPDATE = os.environ.get("JIT_UPDATE_GOLDEN") == "1"

CASES = {
    "pointwise_chain": (lambda x, y: torch.sigmoid(torch.relu(x * 2 + y) * 3 - 1),
                        lambda: (torch.randn(64, 256), torch.randn(64, 256)), {}),
    "transpose": (lambda x: x.t().contiguous() * 2, lambda: (torch.randn(300, 256),), {}),
    "softmax_persistent": (lambda x: torch.softmax(x, -1),
                           lambda: (torch.randn(64, 1000, dtype=torch.bfloat16),), {}),
    "softmax_online": (lambda x: torch.softmax(x, -1), lambda: (torch.randn(64, 1000),),
                       {"persistent_limit": 256}),
    "layer_norm": (lambda x, w, b: torch.nn.functional.layer_norm(x, (256,), w, b),
                   lambda: (torch.randn(64, 256), torch.randn(256), torch.randn(256)), {}),
    "layer_norm_looped": (lambda x, w, b: torch.nn.functional.layer_norm(x, (1000,), w, b),
                          lambda: (torch.randn(64, 1000), torch.randn(1000), torch.randn(1000)),
                          {"persistent_limit": 256}),
    "var_mean_split": (lambda x: torch.var_mean(x), lambda: (torch.randn(1 << 20),), {}),
    "sum_dim0": (lambda x: x.sum(0), lambda: (torch.randn(3000, 256),), {}),
    "sum_split": (lambda x: x.sum(), lambda: (torch.randn(1 << 20),), {}),
    "combo_independent": (lambda a, b, c: (a * 2, b + 1, torch.sigmoid(c)),
                          lambda: (torch.randn(100), torch.randn(64, 48), torch.randn(5000)),
                          {"combine": True}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_generated_triton_matches_golden(name):
    function, make_inputs, options = CASES[name]
    module, _dtype_of, plan = gpu_module(function, *make_inputs(), **options)
    text = plan.describe() + "\n\n" + module.text.replace(PRELUDE, "").strip() + "\n"
    path = GOLDEN / f"{name}.txt"
    if UPDATE or not path.exists():
        path.write_text(text)
    assert text == path.read_text(), f"generated Triton for {name} changed; see {path}"
