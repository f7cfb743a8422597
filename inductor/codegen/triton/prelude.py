"""The Triton prelude: text pasted at the top of every generated module.

Input: nothing. Output: `PRELUDE`, Triton helpers with torch's semantics (NaN-propagating
max/min, integer division and modulo rounding like Python, shifts past the width, integer
powers), the combine functions of every reduction (argmax/argmin with NaN and index
tie-break, Welford), and a Philox 4x32-10 counter-based generator for random numbers.

Generated code calls only these helpers and core `triton.language` builtins, never Triton's
own `@jit` library functions (`tl.sum`, `tl.max`, `tl.rand`, ...): those are decorated when
Triton is imported, so under the CPU interpreter (`TRITON_INTERPRET=1` set only while a
module is loaded) they would not run. Mathematical functions outside `tl` go through
`libdevice`, which the CPU loader replaces with NumPy equivalents.
"""
from __future__ import annotations

PRELUDE = '''\
import triton
import triton.language as tl
try:
    from triton.language.extra import libdevice
except ImportError:  # triton without the device-neutral module
    from triton.language.extra.cuda import libdevice

# Every reduction goes through this name (the CPU loader swaps in a NumPy tree reduction).
jit_reduce = tl.reduce

# The combine functions of scans (`codegen/triton/scan.py`, through tl.associative_scan).
@triton.jit
def jit_scan_add(a, b):
    return a + b

@triton.jit
def jit_scan_mul(a, b):
    return a * b

@triton.jit
def jit_div(a, b):
    # Correctly rounded division (`/` on float32 is a faster, 2-ulp approximation on GPUs).
    if a.dtype == tl.float32:
        return tl.math.div_rn(a, b)
    else:
        return a / b


# NaN-propagating maximum and minimum (eager's max, amax, clamp): one `max.NaN` instruction
# for floats on GPUs. Written as a select, the combine of softmax's row maximum cost a fifth
# of its bandwidth at 32768 columns on an H100.
@triton.jit
def jit_maximum(a, b):
    if a.dtype.is_floating():
        return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)
    else:
        return tl.where(a >= b, a, b)


@triton.jit
def jit_minimum(a, b):
    if a.dtype.is_floating():
        return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)
    else:
        return tl.where(a <= b, a, b)


@triton.jit
def jit_fmax(a, b):
    return tl.where(b != b, a, tl.where(a != a, b, tl.where(a >= b, a, b)))


@triton.jit
def jit_fmin(a, b):
    return tl.where(b != b, a, tl.where(a != a, b, tl.where(a <= b, a, b)))


# An integer divided by zero gives what eager's CUDA kernels give (measured on an H100, torch
# 2.11): they divide in int32 (8- and 16-bit types widened, as C++ does) or int64, and the
# hardware's quotient and remainder by zero are all ones, -1 (255 for uint8); an int64
# dividend that fits in 32 unsigned bits takes the 32-bit division, whose all ones widen to
# 4294967295. Floor division subtracts one more where the dividend is negative. (On CPUs
# eager raises; the kernel reports the zero divisor through its status word.)
@triton.jit
def jit_by_zero(a):
    if a.dtype == tl.int64:
        fits = (a >= 0) & (a <= 4294967295)
        return tl.where(fits, tl.full([], 4294967295, tl.int64), tl.full([], -1, tl.int64))
    else:
        return tl.full([], -1, tl.int32).to(a.dtype)


@triton.jit
def jit_floordiv_int(a, b):
    divisor = tl.where(b == 0, 1, b)
    quotient = a // divisor
    if b.dtype.is_int_unsigned():
        return tl.where(b == 0, jit_by_zero(a), quotient)
    else:
        remainder = a % divisor
        quotient = tl.where((remainder != 0) & ((remainder < 0) != (b < 0)), quotient - 1,
                            quotient)
        by_zero = tl.where(a < 0, jit_by_zero(a) - 1, jit_by_zero(a))
        return tl.where(b == -1, -a, tl.where(b == 0, by_zero, quotient))


@triton.jit
def jit_truncdiv_int(a, b):
    divisor = tl.where(b == 0, 1, b)
    if b.dtype.is_int_unsigned():
        return tl.where(b == 0, jit_by_zero(a), a // divisor)
    else:
        return tl.where(b == -1, -a, tl.where(b == 0, jit_by_zero(a), a // divisor))


@triton.jit
def jit_remainder_int(a, b):
    if b.dtype.is_int_unsigned():
        return tl.where(b == 0, jit_by_zero(a), a % tl.where(b == 0, 1, b))
    else:
        divisor = tl.where((b == 0) | (b == -1), 1, b)
        remainder = a % divisor
        remainder = tl.where((remainder != 0) & ((remainder < 0) != (b < 0)), remainder + b,
                             remainder)
        return tl.where(b == 0, jit_by_zero(a), tl.where(b == -1, 0, remainder))


@triton.jit
def jit_fmod_int(a, b):
    if b.dtype.is_int_unsigned():
        return tl.where(b == 0, jit_by_zero(a), a % tl.where(b == 0, 1, b))
    else:
        divisor = tl.where((b == 0) | (b == -1), 1, b)
        return tl.where(b == 0, jit_by_zero(a), tl.where(b == -1, 0, a % divisor))


# erf of float32 as libdevice's `erff` computes it: a degree-6 polynomial in |x| feeding
# 1 - 2^(-|x|(1 + p)) from |x| >= 1.00296 on, else x(1 + q(x^2)), with the same fused
# multiply-adds in the same order, so the bits agree (except that denormals are not flushed,
# as in eager). On an H100, eager's erff has these bits below 1.00296 and is within one ulp
# above. libdevice's version picks the seven coefficients of the taken side by predicated
# moves: 14 of the 42 SASS instructions per element of gelu(a*w+b) on sm_90 (34 here, where
# both polynomials take theirs as immediates and a select picks one): 0.82 -> 0.95 of the
# copy bandwidth.
@triton.jit
def jit_erf(x):
    if x.dtype == tl.float32:
        t = tl.abs(x)
        u = x * x
        far = tl.fma(tl.fma(tl.fma(tl.fma(tl.fma(tl.fma(
            1.6425845387857407e-05, t, -0.0004680210549850017), t, 0.0052647641859948635), t,
            -0.034303076565265656), t, 0.1532936990261078), t, 0.9163130521774292), t,
            0.6282998323440552)
        near = tl.fma(tl.fma(tl.fma(tl.fma(tl.fma(tl.fma(
            8.483494457323104e-05, u, -0.0008213091641664505), u, 0.005213488824665546), u,
            -0.026868773624300957), u, 0.11284004896879196), u, -0.37612664699554443), u,
            0.12837915122509003)
        large = t >= 1.002959966659546
        scale = tl.where(large, -t, x)
        value = tl.fma(tl.where(large, far, near), scale, scale)
        sign = x.to(tl.uint32, bitcast=True) & tl.full([], 0x80000000, tl.uint32)
        tail = (1.0 - tl.exp2(value)).to(tl.uint32, bitcast=True) | sign
        return tl.where(large, tail.to(tl.float32, bitcast=True), value)
    else:
        return libdevice.erf(x)


# Rounding float32 to the half types (ties to even) and back. A conversion round trip
# `.to(tl.bfloat16).to(tl.float32)` was measured not to round on an H100 (Triton 3.6), so
# the way back widens the bits by integer operations the compiler cannot cancel against the
# narrowing; Triton's interpreter truncates in `.to(tl.bfloat16)`, so on CPUs the whole
# rounding is bit arithmetic (`jit_round_bf16`). float16 (rare in models) always is.
@triton.jit
def jit_round_bf16_native(value):
    narrow = value.to(tl.bfloat16).to(tl.uint16, bitcast=True)
    return (narrow.to(tl.uint32) << 16).to(tl.float32, bitcast=True)


@triton.jit
def jit_round_bf16(value):
    bits = value.to(tl.uint32, bitcast=True)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & tl.full([], 0xFFFF0000, tl.uint32)
    return tl.where(value != value, value, rounded.to(tl.float32, bitcast=True))


@triton.jit
def jit_round_fp16(value):
    bits = value.to(tl.uint32, bitcast=True)
    normal = ((bits + 0xFFF + ((bits >> 13) & 1)) & tl.full([], 0xFFFFE000, tl.uint32)).to(
        tl.float32, bitcast=True)
    tiny = libdevice.nearbyint(value * 16777216.0) * 5.9604644775390625e-08
    rounded = tl.where(tl.abs(value) < 6.103515625e-05, tiny, normal)
    rounded = tl.where(tl.abs(rounded) > 65504.0, value * float("inf"), rounded)
    return tl.where(value != value, value, rounded)


@triton.jit
def jit_floordiv_float(a, b):
    modulo = libdevice.fmod(a, b)
    quotient = jit_div(a - modulo, b)
    quotient = tl.where((modulo != 0) & ((b < 0) != (modulo < 0)), quotient - 1, quotient)
    rounded = tl.floor(quotient)
    rounded = tl.where(quotient - rounded > 0.5, rounded + 1, rounded)
    ratio = jit_div(a, b)
    rounded = tl.where(quotient == 0, libdevice.copysign(quotient - quotient, ratio), rounded)
    return tl.where(b == 0, ratio, rounded)


@triton.jit
def jit_remainder_float(a, b):
    modulo = libdevice.fmod(a, b)
    return tl.where((modulo != 0) & ((b < 0) != (modulo < 0)), modulo + b, modulo)


@triton.jit
def jit_shift_left(a, b, BITS: tl.constexpr):
    outside = (b < 0) | (b >= BITS)
    return tl.where(outside, a - a, a << tl.where(outside, b - b, b))


@triton.jit
def jit_shift_right(a, b, BITS: tl.constexpr):
    outside = (b < 0) | (b >= BITS)
    shifted = a >> tl.where(outside, b - b, b)
    return tl.where(outside, tl.where(a < 0, a - a - 1, a - a), shifted)


@triton.jit
def jit_ipow(base, exponent):
    result = base - base + 1
    power = base
    remaining = exponent
    for _ in tl.static_range(64):
        result = tl.where((remaining & 1) != 0, result * power, result)
        power = power * power
        remaining = remaining >> 1
    one = base - base + 1
    negative = tl.where(base == 1, one,
                        tl.where(base == -1, tl.where((exponent & 1) != 0, -one, one), one - one))
    return tl.where(exponent < 0, negative, result)


@triton.jit
def jit_sum(a, b):
    return a + b


@triton.jit
def jit_prod(a, b):
    return a * b


@triton.jit
def jit_any(a, b):
    return a | b


@triton.jit
def jit_all(a, b):
    return a & b


@triton.jit
def jit_argmax(value_a, index_a, value_b, index_b):
    nan_a = value_a != value_a
    nan_b = value_b != value_b
    earlier = index_b < index_a
    take = tl.where(nan_a, nan_b & earlier,
                    nan_b | (value_b > value_a) | ((value_b == value_a) & earlier))
    return tl.where(take, value_b, value_a), tl.where(take, index_b, index_a)


@triton.jit
def jit_argmin(value_a, index_a, value_b, index_b):
    nan_a = value_a != value_a
    nan_b = value_b != value_b
    earlier = index_b < index_a
    take = tl.where(nan_a, nan_b & earlier,
                    nan_b | (value_b < value_a) | ((value_b == value_a) & earlier))
    return tl.where(take, value_b, value_a), tl.where(take, index_b, index_a)


@triton.jit
def jit_welford_update(mean, m2, weight, value, mask):
    new_weight = weight + tl.where(mask, 1.0, 0.0)
    delta = value - mean
    new_mean = mean + tl.where(mask, delta / tl.where(new_weight == 0, 1.0, new_weight), 0.0)
    new_m2 = m2 + tl.where(mask, delta * (value - new_mean), 0.0)
    return new_mean, new_m2, new_weight


@triton.jit
def jit_welford_combine(mean_a, m2_a, weight_a, mean_b, m2_b, weight_b):
    weight = weight_a + weight_b
    delta = mean_b - mean_a
    fraction = tl.where(weight == 0, 0.0, weight_b / tl.where(weight == 0, 1.0, weight))
    return mean_a + delta * fraction, m2_a + m2_b + delta * delta * weight_a * fraction, weight


@triton.jit
def jit_philox(seed, offset):
    # Philox 4x32-10 of the counter (offset, 0, 0, 0) under the 64-bit key `seed`; the
    # first two 32-bit words of the result.
    c0 = offset.to(tl.uint32)
    c1 = (offset.to(tl.int64) >> 32).to(tl.uint32)
    c2 = c0 - c0
    c3 = c0 - c0
    k0 = seed.to(tl.uint32)
    k1 = (seed.to(tl.int64) >> 32).to(tl.uint32)
    multiplier0 = tl.full([], 0xD2511F53, tl.uint32)
    multiplier1 = tl.full([], 0xCD9E8D57, tl.uint32)
    step0 = tl.full([], 0x9E3779B9, tl.uint32)
    step1 = tl.full([], 0xBB67AE85, tl.uint32)
    for _ in tl.static_range(10):
        high0 = tl.umulhi(multiplier0, c0)
        high1 = tl.umulhi(multiplier1, c2)
        low0 = multiplier0 * c0
        low1 = multiplier1 * c2
        c0, c1, c2, c3 = high1 ^ c1 ^ k0, low1, high0 ^ c3 ^ k1, low0
        k0 = k0 + step0
        k1 = k1 + step1
    return c0, c1


@triton.jit
def jit_rand(seed, offset):
    first, _ = jit_philox(seed, offset)
    return (first >> 8).to(tl.float32) * 5.9604644775390625e-08


@triton.jit
def jit_randn(seed, offset):
    first, second = jit_philox(seed, offset)
    radius = ((first >> 8).to(tl.float32) + 1.0) * 5.9604644775390625e-08
    angle = (second >> 8).to(tl.float32) * 5.9604644775390625e-08
    return tl.sqrt(-2.0 * tl.log(radius)) * tl.cos(6.283185307179586 * angle)
'''
