"""Which kernel shapes reach the copy bandwidth on the streaming cases framejit misses
(gelu(a*w+b) with broadcast rows, sum over the first dimension, softmax over 32768): hand-written
Triton variants of the generated kernels, each timed alone, in GB/s of the bytes it must move.

A diagnostic for the Triton code generator's choices, not a benchmark of framejit:
    python -m benchmarks.experiments.diag_streaming [--cases gelu,sum_first,sum_onepass,softmax]
    (also sum_parts, sum_generated, sum_wide, sum_pdl, pdl_chain, pdl_library)
"""
from __future__ import annotations

import argparse

import torch
import triton
import triton.language as tl
from triton.testing import do_bench

from benchmarks.timing import cuda_event_seconds

ELEMENTS = 64 * 1024 * 1024


@triton.jit
def _round_bf16(value):
    narrow = value.to(tl.bfloat16).to(tl.uint16, bitcast=True)
    return (narrow.to(tl.uint32) << 16).to(tl.float32, bitcast=True)


@triton.jit
def gelu_flat(a, w, b, out, numel, COLUMNS: tl.constexpr, XBLOCK: tl.constexpr,
              DECOMPOSE: tl.constexpr, ROUND: tl.constexpr, MASK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    mask = xindex < numel
    column = xindex % COLUMNS
    if DECOMPOSE:
        place = COLUMNS * (xindex // COLUMNS) + column
    else:
        place = xindex
    if MASK:
        x = tl.load(a + place, mask, other=0).to(tl.float32)
        scale = tl.load(w + column, mask, other=0).to(tl.float32)
        shift = tl.load(b + column, mask, other=0).to(tl.float32)
    else:
        x = tl.load(a + place).to(tl.float32)
        scale = tl.load(w + column).to(tl.float32)
        shift = tl.load(b + column).to(tl.float32)
    value = x * scale
    if ROUND:
        value = _round_bf16(value)
    value = value + shift
    if ROUND:
        value = _round_bf16(value)
    value = value * 0.5 * (tl.math.erf(value * 0.7071067811865476) + 1.0)
    if MASK:
        tl.store(out + place, value.to(tl.bfloat16), mask)
    else:
        tl.store(out + place, value.to(tl.bfloat16))


@triton.jit
def gelu_tile(a, w, b, out, rows, COLUMNS: tl.constexpr, YBLOCK: tl.constexpr,
              XBLOCK: tl.constexpr):
    row = tl.program_id(1) * YBLOCK + tl.arange(0, YBLOCK)[:, None]
    column = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[None, :]
    scale = tl.load(w + column).to(tl.float32)
    shift = tl.load(b + column).to(tl.float32)
    place = row * COLUMNS + column
    x = tl.load(a + place).to(tl.float32)
    value = _round_bf16(_round_bf16(x * scale) + shift)
    value = value * 0.5 * (tl.math.erf(value * 0.7071067811865476) + 1.0)
    tl.store(out + place, value.to(tl.bfloat16))


@triton.jit
def softmax_persistent(x, out, ROW: tl.constexpr, RECIPROCAL: tl.constexpr):
    offsets = tl.program_id(0) * ROW + tl.arange(0, ROW)
    value = tl.load(x + offsets).to(tl.float32)
    value = tl.exp(value - tl.max(value, 0))
    total = tl.sum(value, 0)
    if RECIPROCAL:
        value = value * (1.0 / total)
    else:
        value = tl.math.div_rn(value, total)
    tl.store(out + offsets, value.to(tl.bfloat16))


@triton.jit
def _nan_maximum(a, b):
    return tl.where((a != a) | (a >= b), a, b)


@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def softmax_generated(x, out, rows, ROW: tl.constexpr, XBLOCK: tl.constexpr,
                      MASK: tl.constexpr, NANMAX: tl.constexpr, ROUND: tl.constexpr):
    """The generated persistent form ([XBLOCK, ROW] tiles, masks, NaN-propagating maximum,
    explicit rounding before the store), each feature switchable."""
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    rindex = tl.arange(0, ROW)[None, :]
    mask = (xindex < rows) & (rindex < ROW)
    if MASK:
        value = tl.load(x + ROW * xindex + rindex, mask, other=0).to(tl.float32)
        high = tl.where(mask, value, float("-inf"))
    else:
        value = tl.load(x + ROW * xindex + rindex).to(tl.float32)
        high = value
    if NANMAX:
        peak = tl.reduce(high, 1, _nan_maximum)[:, None]
    else:
        peak = tl.max(high, 1)[:, None]
    value = tl.exp(value - peak)
    if MASK:
        total = tl.reduce(tl.where(mask, value, 0.0), 1, _add)[:, None]
    else:
        total = tl.sum(value, 1)[:, None]
    value = value * tl.math.div_rn(tl.full([], 1.0, tl.float32), total)
    if ROUND:
        value = _round_bf16(value)
    if MASK:
        tl.store(out + ROW * xindex + rindex, value.to(tl.bfloat16), mask)
    else:
        tl.store(out + ROW * xindex + rindex, value.to(tl.bfloat16))


@triton.jit
def softmax_looped(x, out, ROW: tl.constexpr, RBLOCK: tl.constexpr):
    base = tl.program_id(0) * ROW
    peak = tl.full([RBLOCK], float("-inf"), tl.float32)
    total = tl.zeros([RBLOCK], tl.float32)
    for start in range(0, ROW, RBLOCK):
        value = tl.load(x + base + start + tl.arange(0, RBLOCK)).to(tl.float32)
        higher = tl.maximum(peak, value)
        total = total * tl.exp(peak - higher) + tl.exp(value - higher)
        peak = higher
    row_peak = tl.max(peak, 0)
    row_total = tl.sum(total * tl.exp(peak - row_peak), 0)
    for start in range(0, ROW, RBLOCK):
        offsets = base + start + tl.arange(0, RBLOCK)
        value = tl.load(x + offsets).to(tl.float32)
        value = tl.math.div_rn(tl.exp(value - row_peak), row_total)
        tl.store(out + offsets, value.to(tl.bfloat16))


@triton.jit
def _chunk_sum(x, rows, column, start, COLUMNS: tl.constexpr, CHUNK: tl.constexpr,
               XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    """The columns' sums over rows [start, start + CHUNK), as [1, XBLOCK]."""
    accumulator = tl.zeros([RBLOCK, XBLOCK], tl.float32)
    for offset in range(0, CHUNK, RBLOCK):
        inside = offset + tl.arange(0, RBLOCK)[:, None]
        row = start + inside
        accumulator += tl.load(x + row * COLUMNS + column, (row < rows) & (inside < CHUNK),
                               other=0).to(tl.float32)
    return tl.sum(accumulator, 0)[None, :]


@triton.jit
def sum_partial(x, partial, rows, COLUMNS: tl.constexpr, CHUNK: tl.constexpr,
                XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    column = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[None, :]
    total = _chunk_sum(x, rows, column, tl.program_id(1) * CHUNK, COLUMNS, CHUNK, XBLOCK, RBLOCK)
    tl.store(partial + tl.program_id(1) * COLUMNS + column, total)


@triton.jit
def sum_rows_partial(x, partial, rows, COLUMNS: tl.constexpr, CHUNK: tl.constexpr,
                     XBLOCK: tl.constexpr, RBLOCK: tl.constexpr):
    """One program per chunk of whole rows (contiguous memory), all columns, block by block."""
    start = tl.program_id(0) * CHUNK
    for column_start in tl.static_range(0, COLUMNS, XBLOCK):
        column = column_start + tl.arange(0, XBLOCK)[None, :]
        tl.store(partial + tl.program_id(0) * COLUMNS + column,
                 _chunk_sum(x, rows, column, start, COLUMNS, CHUNK, XBLOCK, RBLOCK))


@triton.jit
def sum_onepass(x, partial, tickets, out, rows, COLUMNS: tl.constexpr, CHUNK: tl.constexpr,
                SPLIT: tl.constexpr, SBLOCK: tl.constexpr, XBLOCK: tl.constexpr,
                RBLOCK: tl.constexpr):
    """Partials as in `sum_partial`; the last program of each column block to finish (a ticket
    counter per block) combines them, so the sum is one kernel and stays deterministic."""
    block = tl.program_id(0)
    column = block * XBLOCK + tl.arange(0, XBLOCK)[None, :]
    total = _chunk_sum(x, rows, column, tl.program_id(1) * CHUNK, COLUMNS, CHUNK, XBLOCK, RBLOCK)
    tl.store(partial + tl.program_id(1) * COLUMNS + column, total)
    tl.debug_barrier()
    ticket = tl.atomic_add(tickets + block, 1, sem="acq_rel")
    if ticket == SPLIT - 1:
        part = tl.arange(0, SBLOCK)[:, None]
        values = tl.load(partial + part * COLUMNS + column, part < SPLIT, other=0,
                         cache_modifier=".cg")
        tl.store(out + column, tl.sum(values, 0)[None, :].to(tl.bfloat16))
        tl.atomic_xchg(tickets + block, 0)


@triton.jit
def sum_combine(partial, out, COLUMNS: tl.constexpr, SPLIT: tl.constexpr,
                SBLOCK: tl.constexpr, XBLOCK: tl.constexpr):
    column = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[None, :]
    part = tl.arange(0, SBLOCK)[:, None]
    values = tl.load(partial + part * COLUMNS + column, part < SPLIT, other=0)
    tl.store(out + column, tl.sum(values, 0)[None, :].to(tl.bfloat16))


@triton.jit
def sum_combine_looped(partial, out, COLUMNS: tl.constexpr, SPLIT: tl.constexpr,
                       SBLOCK: tl.constexpr, XBLOCK: tl.constexpr):
    column = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[None, :]
    accumulator = tl.zeros([SBLOCK, XBLOCK], tl.float32)
    for start in range(0, SPLIT, SBLOCK):
        part = start + tl.arange(0, SBLOCK)[:, None]
        accumulator += tl.load(partial + part * COLUMNS + column, part < SPLIT, other=0)
    tl.store(out + column, tl.sum(accumulator, 0)[None, :].to(tl.bfloat16))


def report(case: str, variant: str, nbytes: int, milliseconds: float, copy: float) -> None:
    rate = nbytes / milliseconds / 1e6
    print(f"{case:10s} {variant:48s} {milliseconds * 1e3:8.1f} us {rate:7.0f} GB/s "
          f"{rate / copy:5.2f} of copy", flush=True)


def gelu_cases(copy: float) -> None:
    columns = 4096
    a = torch.randn(ELEMENTS // columns, columns, device="cuda", dtype=torch.bfloat16)
    w, b = (torch.randn(columns, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    out = torch.empty_like(a)
    nbytes = 2 * a.numel() * 2 + 4 * columns
    for decompose, round_, mask in ((1, 1, 1), (0, 1, 1), (0, 0, 1), (0, 1, 0), (0, 0, 0)):
        for block, warps in ((512, 2), (1024, 4), (2048, 8), (1024, 2), (2048, 4), (4096, 8)):
            def launch():
                gelu_flat[(triton.cdiv(a.numel(), block),)](
                    a, w, b, out, a.numel(), COLUMNS=columns, XBLOCK=block, DECOMPOSE=decompose,
                    ROUND=round_, MASK=mask, num_warps=warps)
            report("gelu", f"flat dec={decompose} round={round_} mask={mask} X={block} w={warps}",
                   nbytes, do_bench(launch, rep=200), copy)
    for y, x, warps in ((8, 256, 4), (16, 256, 8), (4, 512, 4), (8, 512, 8), (32, 128, 8)):
        def launch():
            gelu_tile[(columns // x, a.shape[0] // y)](a, w, b, out, a.shape[0], COLUMNS=columns,
                                                       YBLOCK=y, XBLOCK=x, num_warps=warps)
        report("gelu", f"tile Y={y} X={x} w={warps}", nbytes, do_bench(launch, rep=200), copy)


def softmax_cases(copy: float) -> None:
    row = 32768
    x = torch.randn(ELEMENTS // row, row, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(x)
    nbytes = 2 * x.numel() * 2
    for reciprocal in (0, 1):
        for warps in (8, 16, 32):
            def launch():
                softmax_persistent[(x.shape[0],)](x, out, ROW=row, RECIPROCAL=reciprocal,
                                                  num_warps=warps)
            report("softmax", f"persistent reciprocal={reciprocal} w={warps}", nbytes,
                   do_bench(launch, rep=200), copy)
    for mask, nanmax, round_ in ((1, 1, 1), (0, 1, 1), (1, 0, 1), (1, 1, 0), (0, 0, 0),
                                 (1, 0, 0)):
        for warps in (16, 32):
            def launch():
                softmax_generated[(x.shape[0],)](x, out, x.shape[0], ROW=row, XBLOCK=1,
                                                 MASK=mask, NANMAX=nanmax, ROUND=round_,
                                                 num_warps=warps)
            report("softmax", f"generated mask={mask} nanmax={nanmax} round={round_} w={warps}",
                   nbytes, do_bench(launch, rep=200), copy)
    for block, warps in ((2048, 4), (4096, 8), (8192, 16), (4096, 4), (8192, 8)):
        def launch():
            softmax_looped[(x.shape[0],)](x, out, ROW=row, RBLOCK=block, num_warps=warps)
        report("softmax", f"looped R={block} w={warps}", nbytes, do_bench(launch, rep=200), copy)


def _time_sum(x, out, copy: float, label: str, split: int, xblock: int, rblock: int,
              warps: int, stages: int = 0, whole_rows: bool = False) -> None:
    """Time one two-kernel sum over the first dimension: partials (by column blocks and row
    chunks, or whole-row chunks), then their combine."""
    rows, columns = x.shape
    chunk = triton.cdiv(rows, split)
    partial = torch.empty(split, columns, device="cuda", dtype=torch.float32)
    extra = {"num_stages": stages} if stages else {}

    def launch():
        if whole_rows:
            sum_rows_partial[(split,)](x, partial, rows, COLUMNS=columns, CHUNK=chunk,
                                       XBLOCK=xblock, RBLOCK=rblock, num_warps=warps)
        else:
            sum_partial[(columns // xblock, split)](x, partial, rows, COLUMNS=columns,
                                                    CHUNK=chunk, XBLOCK=xblock, RBLOCK=rblock,
                                                    num_warps=warps, **extra)
        sum_combine[(columns // 64,)](partial, out, COLUMNS=columns, SPLIT=split,
                                      SBLOCK=triton.next_power_of_2(split), XBLOCK=64,
                                      num_warps=4)
    variant = f"{label}split={split} X={xblock} R={rblock} w={warps}" + \
        (f" stages={stages}" if stages else "")
    report("sum_first", variant, x.numel() * 2 + columns * 2, do_bench(launch, rep=100), copy)
    torch.testing.assert_close(out.float(), x.float().sum(0), rtol=2e-2, atol=1e-1)


def sum_cases(copy: float) -> None:
    columns = 4096
    x = torch.randn(ELEMENTS // columns, columns, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(columns, device="cuda", dtype=torch.bfloat16)
    shapes = ((64, 64, 8), (128, 32, 8), (256, 16, 8), (256, 32, 8), (512, 16, 8), (128, 64, 8),
              (512, 8, 4), (256, 8, 4), (1024, 8, 8))
    for split in (9, 16, 32, 64, 128):
        for xblock, rblock, warps in shapes:
            _time_sum(x, out, copy, "", split, xblock, rblock, warps)
    for split, xblock, rblock, warps, stages in (
            (16, 64, 64, 8, 1), (16, 64, 64, 8, 2), (16, 64, 64, 8, 4), (16, 128, 32, 8, 3),
            (16, 128, 32, 8, 4), (32, 256, 16, 8, 4), (128, 512, 8, 4, 4)):
        _time_sum(x, out, copy, "", split, xblock, rblock, warps, stages)
    for split, xblock, rblock, warps in ((132, 512, 8, 4), (264, 512, 8, 4), (264, 1024, 4, 4),
                                         (528, 512, 8, 4), (264, 256, 16, 4), (132, 1024, 8, 8)):
        _time_sum(x, out, copy, "rows ", split, xblock, rblock, warps, whole_rows=True)


def _rotated_sum_inputs():
    """Three [ELEMENTS / 4096, 4096] bf16 inputs (rotated so L2 serves no repeat), the
    first-dim sum's output, and the bytes it must move."""
    columns = 4096
    inputs = [torch.randn(ELEMENTS // columns, columns, device="cuda", dtype=torch.bfloat16)
              for _ in range(3)]
    out = torch.empty(columns, device="cuda", dtype=torch.bfloat16)
    return inputs, out, inputs[0].numel() * 2 + columns * 2


def sum_onepass_cases(copy: float) -> None:
    """Two kernels (the generated shape) over splits and block shapes, and one kernel with a
    last-program combine, timed back to back over three rotated inputs (no L2 reuse), as
    `streaming.py` times the product."""
    inputs, out, nbytes = _rotated_sum_inputs()
    rows, columns = inputs[0].shape
    shapes = [(split, xblock, rblock, warps) for split in (4, 6, 8, 9, 12, 16)
              for xblock, rblock, warps in ((64, 64, 8), (128, 32, 8), (64, 32, 4))]
    for split, xblock, rblock, warps in shapes:
        chunk = triton.cdiv(rows, split)
        partial = torch.empty(split, columns, device="cuda", dtype=torch.float32)
        tickets = torch.zeros(columns // xblock, device="cuda", dtype=torch.int32)
        sblock = triton.next_power_of_2(split)

        def two(call):
            sum_partial[(columns // xblock, split)](inputs[call % 3], partial, rows,
                                                    COLUMNS=columns, CHUNK=chunk, XBLOCK=xblock,
                                                    RBLOCK=rblock, num_warps=warps)
            sum_combine[(columns // 256,)](partial, out, COLUMNS=columns, SPLIT=split,
                                           SBLOCK=sblock, XBLOCK=256, num_warps=4)

        def one(call):
            sum_onepass[(columns // xblock, split)](inputs[call % 3], partial, tickets, out, rows,
                                                    COLUMNS=columns, CHUNK=chunk, SPLIT=split,
                                                    SBLOCK=sblock, XBLOCK=xblock, RBLOCK=rblock,
                                                    num_warps=warps)
        ways = [("batched two-kernel ", two)]
        if (xblock, rblock, warps) == (64, 64, 8) and split in (8, 16):
            ways.append(("batched one-pass ", one))
        for label, launch in ways:
            try:
                milliseconds = cuda_event_seconds(launch, [(0,), (1,), (2,)]) * 1e3
                launch(0)
                torch.testing.assert_close(out.float(), inputs[0].float().sum(0), rtol=2e-2,
                                           atol=1e-1)
            except Exception as error:  # a variant that fails to compile or run is reported
                print(f"sum_first  {label}split={split} X={xblock}: {type(error).__name__}: "
                      f"{str(error)[:200]}", flush=True)
                continue
            report("sum_first", f"{label}split={split} X={xblock} R={rblock} w={warps}", nbytes,
                   milliseconds, copy)
        assert int(tickets.sum()) == 0, "a ticket counter was not reset"


def sum_wide_cases(copy: float) -> None:
    """Two kernels whose partial programs read wide column tiles (up to whole rows, contiguous
    memory) over many row chunks; the combine loops over the partials. Batched as
    `sum_onepass`."""
    inputs, out, nbytes = _rotated_sum_inputs()
    rows, columns = inputs[0].shape
    shapes = [(split, 4096, rblock, warps) for split in (132, 264, 528)
              for rblock, warps in ((1, 8), (2, 8), (2, 16), (4, 16))]
    shapes += [(split, 2048, rblock, warps) for split in (66, 132, 264)
               for rblock, warps in ((2, 8), (4, 8))]
    shapes += [(split, 1024, rblock, warps) for split in (33, 66, 132)
               for rblock, warps in ((4, 4), (8, 8))]
    shapes += [(split, 512, rblock, warps) for split in (16, 33, 66)
               for rblock, warps in ((8, 4), (16, 8))]
    shapes += [(split, 256, rblock, warps) for split in (8, 16, 33)
               for rblock, warps in ((16, 4), (32, 8))]
    for split, xblock, rblock, warps in shapes:
        chunk = triton.cdiv(rows, split)
        partial = torch.empty(split, columns, device="cuda", dtype=torch.float32)

        def two(call):
            sum_partial[(columns // xblock, split)](inputs[call % 3], partial, rows,
                                                    COLUMNS=columns, CHUNK=chunk, XBLOCK=xblock,
                                                    RBLOCK=rblock, num_warps=warps)
            sum_combine_looped[(columns // 128,)](partial, out, COLUMNS=columns, SPLIT=split,
                                                  SBLOCK=16, XBLOCK=128, num_warps=4)
        try:
            milliseconds = cuda_event_seconds(two, [(0,), (1,), (2,)]) * 1e3
            two(0)
            torch.testing.assert_close(out.float(), inputs[0].float().sum(0), rtol=2e-2,
                                       atol=1e-1)
        except Exception as error:
            print(f"sum_first  wide split={split} X={xblock}: {type(error).__name__}: "
                  f"{str(error)[:200]}", flush=True)
            continue
        report("sum_first", f"wide split={split} X={xblock} R={rblock} w={warps}", nbytes,
               milliseconds, copy)


@triton.jit
def rows_sum(x, out, COLUMNS: tl.constexpr, RBLOCK: tl.constexpr):
    """Sum of each row (the reads of `x.sum(1)`), one program per row."""
    row = tl.program_id(0)
    accumulator = tl.zeros([RBLOCK], tl.float32)
    for start in range(0, COLUMNS, RBLOCK):
        accumulator += tl.load(x + row * COLUMNS + start + tl.arange(0, RBLOCK)).to(tl.float32)
    tl.store(out + row, tl.sum(accumulator, 0).to(tl.bfloat16))


def sum_parts_cases(copy: float) -> None:
    """Where the first-dimension sum's time goes: the partial kernel alone, the combine alone,
    both, next to a whole-row sum of the same input (`x.sum(1)`'s reads) and a copy of the same
    bytes. Batched as `sum_onepass`; every line reports GB/s of the sum's bytes."""
    inputs, out, nbytes = _rotated_sum_inputs()
    rows, columns = inputs[0].shape
    row_out = torch.empty(rows, device="cuda", dtype=torch.bfloat16)
    half = [torch.empty(inputs[0].numel() // 2, device="cuda", dtype=torch.bfloat16)
            for _ in range(2)]
    sources = [x.view(-1)[: x.numel() // 2] for x in inputs]

    def copy_half(call):  # moves the sum's bytes: half read, half written
        half[call % 2].copy_(sources[call % 3])

    def row_sum(call):
        rows_sum[(rows,)](inputs[call % 3], row_out, COLUMNS=columns, RBLOCK=2048, num_warps=8)

    for label, launch in (("copy of the same bytes", copy_half), ("rows sum (x.sum(1))", row_sum)):
        milliseconds = cuda_event_seconds(launch, [(0,), (1,), (2,)]) * 1e3
        report("sum_parts", label, nbytes, milliseconds, copy)
    for split, xblock, rblock, warps in ((8, 64, 64, 8), (16, 64, 32, 4), (64, 64, 32, 4),
                                         (128, 64, 16, 4), (32, 128, 32, 8), (256, 64, 16, 4),
                                         (264, 4096, 4, 16)):
        chunk = triton.cdiv(rows, split)
        partial = torch.empty(split, columns, device="cuda", dtype=torch.float32)
        sblock = min(16, triton.next_power_of_2(split))

        def first(call):
            sum_partial[(columns // xblock, split)](inputs[call % 3], partial, rows,
                                                    COLUMNS=columns, CHUNK=chunk, XBLOCK=xblock,
                                                    RBLOCK=rblock, num_warps=warps)

        def second(call):
            sum_combine_looped[(columns // 64,)](partial, out, COLUMNS=columns, SPLIT=split,
                                                 SBLOCK=sblock, XBLOCK=64, num_warps=4)

        def both(call):
            first(call)
            second(call)
        shape = f"split={split} X={xblock} R={rblock} w={warps}"
        for label, launch in (("partial", first), ("combine", second), ("both", both)):
            report("sum_parts", f"{label} {shape}", nbytes,
                   cuda_event_seconds(launch, [(0,), (1,), (2,)]) * 1e3, copy)
        both(0)
        torch.testing.assert_close(out.float(), inputs[0].float().sum(0), rtol=2e-2, atol=1e-1)


def _generated_sum_module(variant: str, text_edits: dict, transform=None):
    """The generated first-dimension sum's module (as `tests/triton/conftest.gpu_module` prints
    it for a 132-SM GPU), with `text_edits` applied, imported from a file."""
    import importlib.util
    import os
    import tempfile
    from inductor.codegen.triton import source as triton_source
    from inductor.decompose import trace_aten
    from inductor.lower import lower
    from inductor.schedule.scheduler import schedule
    from inductor.schedule.tiling import Target, tile
    example = torch.empty(ELEMENTS // 4096, 4096, dtype=torch.bfloat16)
    graph = torch.fx.symbolic_trace(lambda x: x.sum(0))
    aten_graph = trace_aten(graph, [example])
    plan = schedule(lower(aten_graph.module, aten_graph.fake_inputs, aten_graph.output_strides))
    tile(plan, Target("cuda", torch.cuda.get_device_properties(0).multi_processor_count, 32768))
    module = triton_source.generate(plan, lambda name: plan.buffers[name].get_dtype(),
                                    interpret=False)
    text = module.text
    for old, new in text_edits.items():
        assert old in text, old
        text = text.replace(old, new)
    if transform is not None:
        text = transform(text)
    path = os.path.join(tempfile.mkdtemp(), f"sum_{variant}.py")
    with open(path, "w") as handle:
        handle.write(text)
    spec = importlib.util.spec_from_file_location(f"sum_{variant}", path)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    kernel = module.kernels[0]
    return [getattr(loaded, function.name) for function in kernel.functions], kernel.spec


def sum_generated_cases(copy: float) -> None:
    """The generated first-dimension sum's own kernels, launched directly (no wrapper), partial
    and combine alone and together, then with one thing changed at a time."""
    inputs, out, nbytes = _rotated_sum_inputs()
    columns = inputs[0].shape[1]
    # Edits of the printed text, tried one at a time (at f55e3ee the row mask had been the
    # 10%: `{"xmask & rmask, other=0)": "xmask)"}` when it was still printed).
    variants = {"as generated": {}}
    shapes = ((64, 64, 8, 512), (64, 64, 8, 64), (64, 128, 8, 64), (64, 64, 4, 64),
              (32, 128, 8, 64), (128, 64, 8, 64), (128, 32, 8, 64), (64, 32, 4, 64),
              (32, 64, 4, 64), (64, 128, 16, 64))
    for name, edits in variants.items():
        (partial_kernel, combine_kernel), spec = _generated_sum_module(
            name.replace(" ", "_").replace(".", "_"), edits)
        workspace = torch.empty(spec.split, columns, device="cuda", dtype=torch.float32)
        for xblock, rblock, warps, combine_x in shapes:

            def first(call):
                partial_kernel[(columns // xblock, spec.split)](
                    inputs[call % 3], out, workspace, XBLOCK=xblock, RBLOCK=rblock,
                    num_warps=warps)

            def second(call):
                combine_kernel[(columns // combine_x,)](
                    inputs[call % 3], out, workspace, XBLOCK=combine_x,
                    SBLOCK=triton.next_power_of_2(spec.split), num_warps=4)

            def both(call):
                first(call)
                second(call)
            shape = f"{name}: split={spec.split} X={xblock} R={rblock} w={warps} combine X={combine_x}"
            for label, launch in (("partial", first), ("both", both)):
                report("sum_gen", f"{label} {shape}", nbytes,
                       cuda_event_seconds(launch, [(0,), (1,), (2,)]) * 1e3, copy)
            both(0)
            torch.testing.assert_close(out.float(), inputs[0].float().sum(0), rtol=2e-2,
                                       atol=1e-1)


def _with_grid_dependency(text: str, names: tuple) -> str:
    """`text` with `gdc_wait(); gdc_launch_dependents()` first in each kernel named in
    `names` (programmatic dependent launch: a kernel launched with `launch_pdl=True` may start
    while its predecessor runs, and waits for it before touching memory)."""
    import re
    for name in names:
        wait = "    tl.extra.cuda.gdc_wait()\n    tl.extra.cuda.gdc_launch_dependents()\n"
        text = re.sub(rf"(def {name}_[0-9a-f]+\(.*\):\n)", lambda match: match.group(1) + wait,
                      text)
    return text


def sum_pdl_cases(copy: float) -> None:
    """The generated first-dimension sum (split=8 X=64 R=64 w=8, combine X=64) with
    programmatic dependent launch: the combine alone launched early (it waits for the partial
    kernel), or both kernels (each call's partial also overlaps the previous call's combine)."""
    inputs, out, nbytes = _rotated_sum_inputs()
    columns = inputs[0].shape[1]
    for name, kernels, pdl in (("as generated", (), (False, False)),
                               ("pdl combine", ("triton_partial", "triton_combine"), (False, True)),
                               ("pdl both", ("triton_partial", "triton_combine"), (True, True)),
                               ("gdc without pdl", ("triton_partial", "triton_combine"),
                                (False, False))):
        (partial_kernel, combine_kernel), spec = _generated_sum_module(
            "pdl_" + name.replace(" ", "_"), {},
            lambda text, kernels=kernels: _with_grid_dependency(text, kernels))
        workspace = torch.empty(spec.split, columns, device="cuda", dtype=torch.float32)

        def both(call):
            partial_kernel[(columns // 64, spec.split)](
                inputs[call % 3], out, workspace, XBLOCK=64, RBLOCK=64, num_warps=8,
                launch_pdl=pdl[0])
            combine_kernel[(columns // 64,)](
                inputs[call % 3], out, workspace, XBLOCK=64,
                SBLOCK=triton.next_power_of_2(spec.split), num_warps=4, launch_pdl=pdl[1])
        try:
            milliseconds = cuda_event_seconds(both, [(0,), (1,), (2,)]) * 1e3
            both(0)
            torch.cuda.synchronize()
            torch.testing.assert_close(out.float(), inputs[0].float().sum(0), rtol=2e-2,
                                       atol=1e-1)
        except Exception as error:  # noqa: BLE001  (a Triton without PDL: reported)
            print(f"sum_pdl    {name}: {type(error).__name__}: {str(error)[:300]}", flush=True)
            continue
        report("sum_pdl", f"both {name}", nbytes, milliseconds, copy)


@triton.jit
def chain_step(x, out, XBLOCK: tl.constexpr, PDL: tl.constexpr, TRIGGER: tl.constexpr):
    """out = x * 0.5 + 1; with PDL, waits for the previous kernel first and lets the next one
    launch at the start (TRIGGER 1), after the store (2) or only at exit (0)."""
    if PDL:
        tl.extra.cuda.gdc_wait()
    if TRIGGER == 1:
        tl.extra.cuda.gdc_launch_dependents()
    index = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    tl.store(out + index, (tl.load(x + index).to(tl.float32) * 0.5 + 1.0).to(tl.bfloat16))
    if TRIGGER == 2:
        tl.extra.cuda.gdc_launch_dependents()


def _recorded(launch):
    """A CUDA graph of what `launch` enqueues (run once eagerly first: compiles, warms up)."""
    launch()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        launch()
    return graph


def _replay_microseconds(graph, kernels: int, replays: int) -> float:
    """Median over 7 batches of `replays` replays of `graph` (after one warm-up replay), by
    CUDA events: microseconds per kernel, where one replay runs `kernels` kernels (or kernel
    pairs)."""
    return cuda_event_seconds(graph.replay, [()], repeats=replays, trials=7) / kernels * 1e6


def pdl_chain_cases(copy: float) -> None:
    """A chain of 100 dependent pointwise kernels (ping-pong between two buffers) replayed as
    a CUDA graph, with and without programmatic dependent launch: the time per kernel, i.e.
    what launch gaps cost between short kernels and how much PDL hides."""
    for elements in (65536, 1 << 20, 1 << 22, 1 << 23, 1 << 25):
        buffers = [torch.randn(elements, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
        reference = None
        for pdl, trigger in ((False, 0), (True, 1), (True, 2), (True, 0)):
            def chain():
                for step in range(100):
                    chain_step[(elements // 1024,)](buffers[step % 2], buffers[1 - step % 2],
                                                   XBLOCK=1024, PDL=pdl, TRIGGER=trigger,
                                                   num_warps=4, launch_pdl=pdl)
            start = buffers[0].clone()
            try:
                graph = _recorded(chain)
                buffers[0].copy_(start)
                graph.replay()
                torch.cuda.synchronize()
                result = buffers[0].clone()
                if reference is None:
                    reference = result
                else:
                    torch.testing.assert_close(result, reference, rtol=0, atol=0)
                microseconds = _replay_microseconds(graph, 100, 10)
            except Exception as error:  # noqa: BLE001
                print(f"pdl_chain  {elements} pdl={pdl} trigger={trigger}: "
                      f"{type(error).__name__}: {str(error)[:300]}", flush=True)
                continue
            rate = 4 * elements / microseconds / 1e3
            print(f"pdl_chain  {elements:9d} elements pdl={pdl!s:5s} trigger={trigger} "
                  f"{microseconds:7.2f} us per kernel {rate:7.0f} GB/s {rate / copy:5.2f} of copy",
                  flush=True)


def pdl_library_cases(copy: float) -> None:
    """Does a library kernel signal its dependents early? A CUDA graph of 20 pairs (a cuBLAS
    matrix product or a cuDNN convolution, then a pointwise kernel of ours over its result)
    with ours launched plainly or programmatically (waiting first, `launch_pdl`): if the
    library kernel triggers early, ours occupies SMs while it runs, and the pair slows."""
    import torch.nn.functional as F
    cases = {
        "matmul 4096x4096x1024": (lambda a, b: torch.mm(a, b),
                                  (torch.randn(4096, 1024), torch.randn(1024, 4096))),
        "matmul 2048x768x768": (lambda a, b: torch.mm(a, b),
                                (torch.randn(2048, 768), torch.randn(768, 768))),
        "matmul 2048x3072x768": (lambda a, b: torch.mm(a, b),
                                 (torch.randn(2048, 768), torch.randn(768, 3072))),
        "conv 16x64x56x56 3x3": (lambda a, b: F.conv2d(a, b, padding=1),
                                 (torch.randn(16, 64, 56, 56), torch.randn(64, 64, 3, 3))),
        "conv 16x256x14x14 3x3": (lambda a, b: F.conv2d(a, b, padding=1),
                                  (torch.randn(16, 256, 14, 14), torch.randn(256, 256, 3, 3))),
    }
    for name, (library, arguments) in cases.items():
        arguments = [value.to("cuda", torch.bfloat16) for value in arguments]
        produced = library(*arguments)
        out = torch.empty_like(produced)
        elements = produced.numel()
        assert elements % 1024 == 0
        timings = {}
        for pdl in (False, True, False, True):
            def pairs():
                for _ in range(20):
                    result = library(*arguments)
                    chain_step[(elements // 1024,)](result, out, XBLOCK=1024, PDL=pdl,
                                                   TRIGGER=0, num_warps=4, launch_pdl=pdl)
            try:
                graph = _recorded(pairs)
                graph.replay()
                torch.cuda.synchronize()
                torch.testing.assert_close(out.float(), (library(*arguments).float() * 0.5 + 1),
                                           rtol=2e-2, atol=2e-2)
                microseconds = _replay_microseconds(graph, 20, 5)
            except Exception as error:  # noqa: BLE001
                print(f"pdl_lib    {name} pdl={pdl}: {type(error).__name__}: {str(error)[:300]}",
                      flush=True)
                break
            timings.setdefault(pdl, []).append(microseconds)
        print(f"pdl_lib    {name:24s} per pair: plain "
              f"{' / '.join(f'{value:.2f}' for value in timings.get(False, []))} us, "
              f"programmatic {' / '.join(f'{value:.2f}' for value in timings.get(True, []))} us",
              flush=True)


def copy_bandwidth() -> float:
    """GB/s of a device-to-device copy of 256 Mi bf16 elements (read once, written once)."""
    source = torch.randn(256 * 1024 * 1024, device="cuda", dtype=torch.bfloat16)
    target = torch.empty_like(source)
    return 2 * source.numel() * 2 / do_bench(lambda: target.copy_(source), rep=200) / 1e6


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", default="gelu,sum_first,softmax")
    options = parser.parse_args(argv)
    copy = copy_bandwidth()
    print(f"copy {copy:.0f} GB/s", flush=True)
    cases = {"gelu": gelu_cases, "sum_first": sum_cases, "sum_onepass": sum_onepass_cases,
             "sum_parts": sum_parts_cases, "sum_generated": sum_generated_cases,
             "sum_wide": sum_wide_cases, "sum_pdl": sum_pdl_cases, "pdl_chain": pdl_chain_cases,
             "pdl_library": pdl_library_cases, "softmax": softmax_cases}
    for name in options.cases.split(","):
        if name not in cases:
            parser.error(f"unknown case {name!r}; known: {', '.join(cases)}")
        cases[name](copy)


if __name__ == "__main__":
    main()
