"""The measurements behind the C++ code generator's vectorisation choices (benchmark).

Input: nothing. Output: a table of best-of-N milliseconds for hand-written variants of the
kernels the generator emits, built with the generator's own flags, one thread:

- `exp` through libmvec (`#pragma omp simd` + `simd` declarations) at 256 and 512 bits, an
  inline polynomial, and torch's eager kernel (Sleef);
- a pointwise chain with and without `#pragma omp simd` inside an OpenMP loop;
- a long sum as a plain loop, as 16 lanes, as 64 lanes; short rows (256) with 16 and 64 lanes;
- NaN-propagating max with lanes; argmax with lanes and an index tie-break;
- softmax rows of 4096 recomputing `exp` in the last pass, or storing it in the output.

Run: `PYTHONPATH=. python -m benchmarks.inductor.vectorization`.
"""
from __future__ import annotations

import ctypes
import os
import subprocess
import tempfile

import torch

from benchmarks.timing import best_seconds
from inductor.runtime.build import has_vector_math

SOURCE = r"""
#include <stdint.h>
extern "C" {
__attribute__((simd("notinbranch"))) float expf(float) noexcept;
}
static inline float poly_exp(float x) {
  float t = x * 1.44269504088896341f;
  t = t < -127.f ? -127.f : (t > 128.f ? 128.f : t);
  float n = __builtin_rintf(t);
  float r = x - n * 0.693145751953125f - n * 1.428606765330187045e-06f;
  float p = 1.9875691500E-4f;
  p = p * r + 1.3981999507E-3f; p = p * r + 8.3334519073E-3f; p = p * r + 4.1665795894E-2f;
  p = p * r + 1.6666665459E-1f; p = p * r + 5.0000001201E-1f; p = p * r * r + r + 1.0f;
  int32_t e = (int32_t)n + 127; e = e < 0 ? 0 : e;
  union { int32_t i; float f; } u; u.i = e << 23;
  float result = p * u.f;
  result = x > 88.72283905206835f ? __builtin_inff() : result;
  return x != x ? x : result;
}
template <typename T> static inline T nan_max(T a, T b) { return (a != a || a >= b) ? a : b; }
#define EXPORT extern "C"
EXPORT void exp_libmvec(const float* __restrict__ in, float* __restrict__ out, int64_t n) {
  #pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = expf(in[i]);
}
EXPORT void exp_polynomial(const float* __restrict__ in, float* __restrict__ out, int64_t n) {
  #pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = poly_exp(in[i]);
}
EXPORT void chain_simd(const float* __restrict__ a, const float* __restrict__ b,
                       float* __restrict__ out, int64_t n) {
  #pragma omp parallel for num_threads(1)
  for (int64_t j = 0; j < n; j += 4096) {
    int64_t end = j + 4096 < n ? j + 4096 : n;
    #pragma omp simd
    for (int64_t i = j; i < end; ++i) {
      float x = a[i] * 2.0f + b[i]; x = x > 0 ? x : 0; out[i] = x * x - 1.0f;
    }
  }
}
EXPORT void chain_plain(const float* __restrict__ a, const float* __restrict__ b,
                        float* __restrict__ out, int64_t n) {
  #pragma omp parallel for num_threads(1)
  for (int64_t i = 0; i < n; ++i) {
    float x = a[i] * 2.0f + b[i]; x = x > 0 ? x : 0; out[i] = x * x - 1.0f;
  }
}
EXPORT void sum_plain(const float* __restrict__ a, float* __restrict__ out, int64_t n) {
  float acc = 0;
  for (int64_t i = 0; i < n; ++i) acc += a[i];
  out[0] = acc;
}
template <int L> static void sum_lanes(const float* __restrict__ a, float* __restrict__ out,
                                       int64_t rows, int64_t length) {
  for (int64_t row = 0; row < rows; ++row) {
    float lanes[L];
    for (int l = 0; l < L; ++l) lanes[l] = 0;
    for (int64_t b = 0; b + L <= length; b += L) {
      #pragma omp simd
      for (int64_t i = b; i < b + L; ++i) lanes[i - b] += a[row * length + i];
    }
    for (int w = L / 2; w > 0; w /= 2) {
      #pragma omp simd
      for (int l = 0; l < w; ++l) lanes[l] += lanes[l + w];
    }
    out[row] = lanes[0];
  }
}
EXPORT void sum_lanes16(const float* a, float* out, int64_t rows, int64_t length) {
  sum_lanes<16>(a, out, rows, length);
}
EXPORT void sum_lanes64(const float* a, float* out, int64_t rows, int64_t length) {
  sum_lanes<64>(a, out, rows, length);
}
EXPORT void max_lanes(const float* __restrict__ a, float* __restrict__ out, int64_t n) {
  float lanes[16];
  for (int l = 0; l < 16; ++l) lanes[l] = -__builtin_inff();
  for (int64_t b = 0; b + 16 <= n; b += 16) {
    #pragma omp simd
    for (int64_t i = b; i < b + 16; ++i) lanes[i - b] = nan_max(a[i], lanes[i - b]);
  }
  float best = -__builtin_inff();
  for (int l = 0; l < 16; ++l) best = nan_max(lanes[l], best);
  out[0] = best;
}
EXPORT void argmax_lanes(const float* __restrict__ a, int64_t* __restrict__ out, int64_t n) {
  float best[16]; int64_t where[16];
  for (int l = 0; l < 16; ++l) { best[l] = -__builtin_inff(); where[l] = 0; }
  for (int64_t b = 0; b + 16 <= n; b += 16) {
    #pragma omp simd
    for (int64_t i = b; i < b + 16; ++i) {
      float v = a[i];
      bool take = (v != v && best[i - b] == best[i - b]) || v > best[i - b];
      best[i - b] = take ? v : best[i - b]; where[i - b] = take ? i : where[i - b];
    }
  }
  float top = best[0]; int64_t at = where[0];
  for (int l = 1; l < 16; ++l) {
    bool take = (best[l] != best[l] && top == top) || best[l] > top ||
                (best[l] == top && where[l] < at);
    top = take ? best[l] : top; at = take ? where[l] : at;
  }
  out[0] = at;
}
template <bool STORE> static void softmax(const float* __restrict__ x, float* __restrict__ y,
                                          int64_t rows, int64_t length) {
  for (int64_t row = 0; row < rows; ++row) {
    const float* in = x + row * length; float* out = y + row * length;
    float m[64], s[64];
    for (int l = 0; l < 64; ++l) { m[l] = -__builtin_inff(); s[l] = 0; }
    for (int64_t b = 0; b + 64 <= length; b += 64) {
      #pragma omp simd
      for (int64_t i = b; i < b + 64; ++i) m[i - b] = nan_max(in[i], m[i - b]);
    }
    for (int w = 32; w > 0; w /= 2) {
      #pragma omp simd
      for (int l = 0; l < w; ++l) m[l] = nan_max(m[l], m[l + w]);
    }
    for (int64_t b = 0; b + 64 <= length; b += 64) {
      #pragma omp simd
      for (int64_t i = b; i < b + 64; ++i) {
        float e = expf(in[i] - m[0]); if (STORE) out[i] = e; s[i - b] += e;
      }
    }
    for (int w = 32; w > 0; w /= 2) {
      #pragma omp simd
      for (int l = 0; l < w; ++l) s[l] += s[l + w];
    }
    const float r = 1.0f / s[0];
    #pragma omp simd
    for (int64_t i = 0; i < length; ++i) out[i] = (STORE ? out[i] : expf(in[i] - m[0])) * r;
  }
}
EXPORT void softmax_recompute(const float* x, float* y, int64_t rows, int64_t length) {
  softmax<false>(x, y, rows, length);
}
EXPORT void softmax_store(const float* x, float* y, int64_t rows, int64_t length) {
  softmax<true>(x, y, rows, length);
}
"""


def build(width: int) -> ctypes.CDLL:
    directory = tempfile.mkdtemp(prefix="vectorization-")
    source = os.path.join(directory, "variants.cpp")
    with open(source, "w") as handle:
        handle.write(SOURCE)
    library = os.path.join(directory, f"variants{width}.so")
    flags = ["-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math", "-fopenmp",
             "-fwrapv", "-shared", "-fPIC", f"-mprefer-vector-width={width}"]
    subprocess.run(["g++", *flags, source, "-o", library] +
                   (["-lmvec"] if has_vector_math() else []), check=True)
    return ctypes.CDLL(library)


def best_ms(function, repeats: int = 30) -> float:
    """The shortest of `repeats` calls after a warm-up, in milliseconds."""
    return best_seconds(function, repeats) * 1e3


def main() -> None:
    torch.set_num_threads(1)
    narrow, wide = build(256), build(512)
    n = 1 << 22
    x, y, out = torch.randn(n), torch.randn(n), torch.empty(n)
    index = torch.empty(1, dtype=torch.int64)
    rows = torch.empty(n // 256)
    pointer = lambda tensor: ctypes.c_void_p(tensor.data_ptr())  # noqa: E731
    count = ctypes.c_int64(n)
    cases = [
        ("exp, libmvec, 256-bit", lambda: narrow.exp_libmvec(pointer(x), pointer(out), count)),
        ("exp, libmvec, 512-bit", lambda: wide.exp_libmvec(pointer(x), pointer(out), count)),
        ("exp, inline polynomial, 512-bit",
         lambda: wide.exp_polynomial(pointer(x), pointer(out), count)),
        ("exp, torch eager (Sleef)", lambda: torch.exp(x, out=out)),
        ("pointwise chain, omp simd", lambda: wide.chain_simd(pointer(x), pointer(y),
                                                              pointer(out), count)),
        ("pointwise chain, plain loop", lambda: wide.chain_plain(pointer(x), pointer(y),
                                                                 pointer(out), count)),
        ("sum of 4M, plain loop", lambda: wide.sum_plain(pointer(x), pointer(out), count)),
        ("sum of 4M, 16 lanes", lambda: wide.sum_lanes16(pointer(x), pointer(out),
                                                         ctypes.c_int64(1), count)),
        ("sum of 4M, 64 lanes", lambda: wide.sum_lanes64(pointer(x), pointer(out),
                                                         ctypes.c_int64(1), count)),
        ("16384 rows of 256, 16 lanes", lambda: wide.sum_lanes16(
            pointer(x), pointer(rows), ctypes.c_int64(n // 256), ctypes.c_int64(256))),
        ("16384 rows of 256, 64 lanes", lambda: wide.sum_lanes64(
            pointer(x), pointer(rows), ctypes.c_int64(n // 256), ctypes.c_int64(256))),
        ("max with NaN, 16 lanes", lambda: wide.max_lanes(pointer(x), pointer(out), count)),
        ("argmax, 16 lanes", lambda: wide.argmax_lanes(pointer(x), pointer(index), count)),
        ("argmax, torch eager", lambda: x.argmax()),
        ("softmax 1024x4096, recompute exp", lambda: wide.softmax_recompute(
            pointer(x), pointer(out), ctypes.c_int64(1024), ctypes.c_int64(4096))),
        ("softmax 1024x4096, store exp", lambda: wide.softmax_store(
            pointer(x), pointer(out), ctypes.c_int64(1024), ctypes.c_int64(4096))),
        ("softmax 1024x4096, torch eager", lambda: torch.softmax(x.view(1024, 4096), -1)),
    ]
    print(f"load average {os.getloadavg()[0]:.2f}, one thread, best of 30")
    print("| variant | ms |\n|---|---:|")
    for name, function in cases:
        print(f"| {name} | {best_ms(function):.3f} |")


if __name__ == "__main__":
    main()
