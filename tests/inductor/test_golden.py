"""Golden tests of generated code: a pointwise chain, softmax, layer norm and a reduction over
a non-last dimension. The generated wrapper and C++ must equal the files in `golden/`
(review diffs there when the code generator changes; regenerate with JIT_UPDATE_GOLDEN=1),
and the kernel counts are the fusion contract: a pointwise chain is one kernel, softmax and
layer norm one each, results match eager."""
import os
import pathlib

import pytest
import torch

from tests.inductor.conftest import compile_function

GOLDEN = pathlib.Path(__file__).parent / "golden"
UPDATE = os.environ.get("JIT_UPDATE_GOLDEN") == "1"


def chain(x, y):
    return torch.sigmoid(torch.relu(x * 2 + y) * 3 - 1)


def softmax(x):
    return torch.softmax(x, dim=-1)


def layer_norm(x, weight, bias):
    return torch.nn.functional.layer_norm(x, (256,), weight, bias)


def sum_dim0(x):
    return x.sum(0)


CASES = {
    "pointwise_chain": (chain, lambda: (torch.randn(64, 256), torch.randn(64, 256)), 1),
    "softmax": (softmax, lambda: (torch.randn(64, 1000),), 1),
    "layer_norm": (layer_norm, lambda: (torch.randn(64, 256), torch.randn(256),
                                        torch.randn(256)), 1),
    "sum_dim0": (sum_dim0, lambda: (torch.randn(300, 256),), 1),
}


def _normalised(source: str) -> str:
    """Wrapper globals are numbered by insertion order; keep the text stable but readable."""
    return source.rstrip() + "\n"


@pytest.mark.parametrize("name", list(CASES))
def test_generated_code_matches_golden(name, fixed_machine_settings):
    function, make_inputs, kernels = CASES[name]
    torch.manual_seed(0)
    inputs = make_inputs()
    compiled = compile_function(function, *inputs)
    torch.testing.assert_close(compiled(*inputs), function(*inputs), atol=1e-5, rtol=1e-5)
    assert compiled.kernel_count == kernels
    assert compiled.fallback_ops == {}
    source = _normalised(compiled.report.source)
    path = GOLDEN / f"{name}.txt"
    if UPDATE or not path.exists():
        path.write_text(source)
    assert source == path.read_text(), f"generated code for {name} changed; see {path}"


def test_softmax_reads_each_row_in_one_kernel_and_stores_no_temporaries(
        fixed_machine_settings):
    compiled = compile_function(softmax, torch.randn(8, 1000))
    source = compiled.report.source
    assert source.count("empty_strided(") == 1  # only the output is allocated
    assert source.count("static void kernel") == 1


def test_reduction_over_non_last_dimension_vectorises_across_outputs(fixed_machine_settings):
    source = compile_function(sum_dim0, torch.randn(300, 256)).report.source
    assert "x0_block" in source and "#pragma omp simd" in source
