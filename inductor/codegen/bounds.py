"""Stage "codegen", bounds mode (`config.bounds_check`, `JIT_BOUNDS_CHECK=1`): generated kernels
check every memory access against the buffer it touches.

Input: a `GraphPlan` about to be printed. Output: the element count each buffer spans
(`buffer_extents`, from its layout: sizes, strides and offset) and the pieces the printers
add: in C++, each load and store index goes through `jit_check_bounds(index, extent, site)`
(`CPP_HELPER`), which on a violation prints the kernel, the access, the buffer, the index and
the extent on stderr, makes the entry return `ERROR_BOUNDS` (the call raises `IndexError`), and
reads or writes element 0 instead; in Triton, `triton_assert` gives a `tl.device_assert` per
load and store (masked lanes excepted), compiled with `debug=True` on GPUs and enabled in
Triton's interpreter, so a violation stops the kernel with the same facts in its message.

A kernel's accesses stay within its layouts' spans whatever the memory behind them, so the
check is exact for generated kernels: inputs may be views of larger storages, but the kernel
was compiled for the layout it reads. The mode costs speed (branches in every loop, fewer
vectorised loops) and gives kernels a different text, hence separate cache entries.
"""
from __future__ import annotations

from typing import Optional

from inductor.schedule.plans import GraphPlan

ERROR_BOUNDS = 3    # the C++ entry's status for an access outside a buffer (wrapper.py raises)

CPP_HELPER = r"""
// bounds mode (inductor.config.bounds_check): every load and store checks its index.
extern "C" int dprintf(int, const char*, ...);
static int jit_bounds_reported = 0;
static inline int64_t jit_check_bounds(int64_t index, int64_t extent, const char* site) {
  if (__builtin_expect(index < 0 || index >= extent, 0)) {
    if (__atomic_exchange_n(&jit_bounds_reported, 1, __ATOMIC_RELAXED) == 0)
      dprintf(2, "framejit bounds check: %s: index %lld outside [0, %lld)\n", site,
              (long long)index, (long long)extent);
    jit_fail(3);
    return 0;
  }
  return index;
}
"""


def buffer_extents(plan: GraphPlan) -> dict:
    """Buffer name -> the number of elements its layout spans (`Layout.storage_size`)."""
    extents = {}
    for name, buffer in plan.buffers.items():
        layout = getattr(buffer, "layout", None)
        if layout is None:
            continue
        try:
            extents[name] = int(layout.storage_size())
        except TypeError:       # a symbolic size: nothing static to check against
            continue
    return extents


def is_empty(name: str, extents: Optional[dict]) -> bool:
    """Whether buffer `name` spans no element: its kernels' accesses to it are dropped (a load
    gives 0, a store nothing), whatever their index says. An indirect index into an empty
    dimension is always outside it; the index check reports that where eager raises, and the
    access itself, at the substitute index 0, read or wrote memory that is not there (a
    segmentation fault in `x.index_add_(1, index, source)` with `x` of shape (1, 0), found by
    the graph fuzzer's seed 19 in bounds mode)."""
    return extents is not None and extents.get(name) == 0


def cpp_index(index: str, name: str, extents: Optional[dict], site: str, access: str) -> str:
    """`index` wrapped in the C++ check where bounds mode gave `extents`, else as is."""
    if extents is None or name not in extents:
        return index
    return f'jit_check_bounds({index}, {extents[name]}, "{site}: {access} {name}")'


def triton_assert(offset: str, mask: Optional[str], name: str, extents: Optional[dict],
                  site: str, access: str) -> Optional[str]:
    """The `tl.device_assert` line for an access at `offset` under `mask`, or None."""
    if extents is None or name not in extents:
        return None
    extent = extents[name]
    inside = f"(({offset}) >= 0) & (({offset}) < {extent})"
    condition = f"{inside} | ~({mask})" if mask else inside
    return (f'tl.device_assert({condition}, "framejit bounds check: {site}: {access} {name} '
            f'outside [0, {extent})")')
