"""Programmatic dependent launch (`config.triton_programmatic_launch`): on Hopper GPUs every
generated function first waits for the kernels before it (`gdc_wait`, before any memory
access) and is launched with `launch_pdl`, so the GPU may schedule it while its predecessor
drains. Results equal plain launches', in the default mode and inside CUDA graphs. Printing
and the support check are tested on the CPU; the launches need a GPU of capability 9.0+."""
import pytest
import torch

from inductor.codegen.triton import source as triton_source
from inductor.config import config
from inductor.runtime import triton_build
from inductor.runtime.triton_launch import programmatic_steps
from inductor.schedule.plans import KernelPlan
from tests.triton.conftest import check_same, compile_function, gpu_module

hopper = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0),
    reason="needs a GPU of compute capability 9.0 or later")


def several_kernels(x, index, source):
    return (x.sum(0), torch.softmax(x, -1), x.t().contiguous() + 1,
            torch.zeros_like(x).scatter_add(0, index, source) * 2)


def inputs(device="cpu"):
    x = torch.randn(4096, 64, device=device)
    return x, torch.randint(0, 4096, (8, 64), device=device), torch.randn(8, 64, device=device)


def test_every_function_waits_first_when_printed_for_programmatic_launch():
    waiting, _, _ = gpu_module(several_kernels, *inputs(), wait_for_prior=True)
    plain, _, _ = gpu_module(several_kernels, *inputs())
    functions = 0
    for kernel in waiting.kernels:
        assert kernel.spec.programmatic
        for function in kernel.functions:
            lines = function.text.replace("NAME", "f").splitlines()
            assert lines[0] == "@triton.jit" and lines[1].startswith("def ")
            assert lines[2] == "    tl.extra.cuda.gdc_wait()"
            assert "gdc_wait" not in "\n".join(lines[3:])
            functions += 1
    # the column sum with the transpose (one kernel since 6dd8412's next-candidate fusion,
    # both reading x), softmax, the scatter's two functions, the scale
    assert functions >= 5
    assert not any(kernel.spec.programmatic for kernel in plain.kernels)
    assert "gdc_wait" not in plain.text


def test_interpreted_kernels_never_wait():
    _module, dtype_of, plan = gpu_module(several_kernels, *inputs())
    interpreted = triton_source.generate(plan, dtype_of, interpret=True, wait_for_prior=True)
    assert "gdc_wait" not in interpreted.text
    assert not any(kernel.spec.programmatic for kernel in interpreted.kernels)


def test_kernels_right_after_a_library_call_launch_plainly():
    """Kernels right after a library call of the graph launch plainly (nothing measured to
    gain there); the graph's first kernel and kernels after ours programmatically."""
    def function(x, weight):
        hidden = torch.relu(x) * 2                  # first kernel
        product = hidden @ weight                   # library call
        return torch.softmax(product, -1).sum(0)    # after the call, then after ours

    module, _, plan = gpu_module(function, torch.randn(64, 32), torch.randn(32, 48),
                                 wait_for_prior=True)
    steps = programmatic_steps(module.kernels)
    kinds = ["kernel" if isinstance(step, KernelPlan) else "library" for step in plan.steps]
    assert kinds[:3] == ["kernel", "library", "kernel"] and kinds.count("kernel") >= 3
    for kernel in module.kernels:
        assert (kernel.step in steps) == (kernel.step == 0 or kinds[kernel.step - 1] == "kernel")
    assert 0 in steps and 2 not in steps and len(steps) == kinds.count("kernel") - 1


def test_programmatic_launch_needs_a_gpu_and_the_setting(monkeypatch):
    assert not triton_build.programmatic_launch(torch.device("cpu"))
    monkeypatch.setattr(config, "triton_programmatic_launch", False)
    assert not triton_build.programmatic_launch(torch.device("cuda", 0))


@hopper
def test_programmatic_launches_give_eager_results_and_compile_with_launch_pdl():
    assert triton_build.programmatic_launch(torch.device("cuda"))
    compiled = check_same(several_kernels, *inputs("cuda"), atol=1e-4, rtol=1e-4, calls=3)
    # one wait per function: 5 since 6dd8412 (see the printed test above)
    assert compiled.report.source.count("tl.extra.cuda.gdc_wait()") >= 5


@hopper
def test_programmatic_launches_in_cuda_graphs_match_plain_launches(monkeypatch):
    def chain(x, weight):
        hidden = torch.relu(x @ weight) * 2          # a cuBLAS kernel before ours
        for _ in range(6):                           # dependent kernels back to back
            hidden = torch.softmax(hidden, -1).cumsum(-1) * hidden.sum(0)
        return hidden, hidden.sum(0)

    x, weight = torch.randn(256, 512, device="cuda"), torch.randn(512, 512, device="cuda")
    results = {}
    for waits in (True, False):
        monkeypatch.setattr(config, "triton_programmatic_launch", waits)
        for mode in (None, "reduce-overhead"):
            compiled = compile_function(chain, x, weight, mode=mode)
            assert ("gdc_wait" in compiled.report.source) == waits
            results[waits, mode] = [compiled(x, weight) for _ in range(3)]
    expected = chain(x, weight)
    for calls in results.values():
        for outputs in calls:
            torch.testing.assert_close(outputs, expected, atol=1e-3, rtol=1e-3)
    for mode in (None, "reduce-overhead"):      # same kernels either way, up to the tuning
        for with_wait, without in zip(results[True, mode], results[False, mode]):
            torch.testing.assert_close(with_wait, without, atol=1e-5, rtol=1e-5)
