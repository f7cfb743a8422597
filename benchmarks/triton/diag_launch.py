"""Host cost of one Triton kernel launch on the GPU, by launch path: the `@triton.jit`
function, Triton's compiled launcher object (`CompiledKernel.run`) and the C function behind
it (what framejit's direct-launch function calls where Triton's launcher is the known one),
each against an ATen op and an empty Python call.

A diagnostic, not a benchmark:
    python -m benchmarks.triton.diag_launch [--show-source]
"""
from __future__ import annotations

import argparse
import inspect
import time

import torch
import triton
import triton.language as tl


@triton.jit
def _add_kernel(x_pointer, y_pointer, out_pointer, numel, XBLOCK: tl.constexpr):
    offsets = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    mask = offsets < numel
    value = tl.load(x_pointer + offsets, mask) + tl.load(y_pointer + offsets, mask)
    tl.store(out_pointer + offsets, value, mask)


def _per_call_us(call, count: int = 3000) -> float:
    for _ in range(100):
        call()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(count):
            call()
        best = min(best, time.perf_counter() - started)
        torch.cuda.synchronize()
    return best / count * 1e6


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--show-source", action="store_true")
    options = parser.parse_args(argv)
    x = torch.randn(1024, device="cuda")
    y = torch.randn(1024, device="cuda")
    out = torch.empty_like(x)
    compiled = _add_kernel[(8,)](x, y, out, 1024, XBLOCK=128)
    run = compiled.run
    if options.show_source:
        print(inspect.getsource(type(run)))
    stream = torch._C._cuda_getCurrentRawStream(0)
    function, metadata = compiled.function, compiled.packed_metadata
    rows = {
        "empty python call": lambda: None,
        "aten add_ (out of place into out)": lambda: torch.add(x, y, out=out),
        "triton jit kernel[grid]": lambda: _add_kernel[(8,)](x, y, out, 1024, XBLOCK=128),
        "CompiledKernel.run": lambda: run(8, 1, 1, stream, function, metadata, None, None,
                                          None, x, y, out, 1024, 128),
        "current stream lookup": lambda: torch._C._cuda_getCurrentRawStream(0),
        "3x data_ptr": lambda: (x.data_ptr(), y.data_ptr(), out.data_ptr()),
    }
    from inductor.runtime.triton_launch import _bare_launch
    bare = _bare_launch(run)
    if bare is not None:
        launch, settings = bare
        rows["bare C launch (framejit's direct path)"] = lambda: launch(
            8, 1, 1, stream, function, *settings, metadata, None, None, None, x, y, out, 1024,
            128)
    else:
        print("no bare launch for", type(run))
    for label, call in rows.items():
        print(f"{_per_call_us(call):8.2f} us  {label}", flush=True)
    expected = x + y
    out.zero_()
    for label, call in rows.items():
        if "bare" in label:
            call()
            torch.cuda.synchronize()
            print(label, "correct:", bool(torch.equal(out, expected)))
    print("triton", triton.__version__, "torch", torch.__version__)


if __name__ == "__main__":
    main()
