// framejit kernel prelude: pasted at the top of every generated C++ source (its text is part
// of the cache key). Element helpers with torch's semantics for integer division, modulo,
// shifts, NaN-propagating max/min, and bfloat16 rounding; vector math through glibc's libmvec.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>
#include <omp.h>

#ifdef JIT_VECTOR_MATH
// Declaring these `simd` lets the compiler call libmvec's vector variants inside
// `#pragma omp simd` loops (glibc only does so itself under -ffast-math).
#define JIT_SIMD __attribute__((simd("notinbranch")))
extern "C" {
JIT_SIMD float expf(float) noexcept;       JIT_SIMD double exp(double) noexcept;
JIT_SIMD float exp2f(float) noexcept;      JIT_SIMD double exp2(double) noexcept;
JIT_SIMD float expm1f(float) noexcept;     JIT_SIMD double expm1(double) noexcept;
JIT_SIMD float logf(float) noexcept;       JIT_SIMD double log(double) noexcept;
JIT_SIMD float log2f(float) noexcept;      JIT_SIMD double log2(double) noexcept;
JIT_SIMD float log10f(float) noexcept;     JIT_SIMD double log10(double) noexcept;
JIT_SIMD float log1pf(float) noexcept;     JIT_SIMD double log1p(double) noexcept;
JIT_SIMD float sinf(float) noexcept;       JIT_SIMD double sin(double) noexcept;
JIT_SIMD float cosf(float) noexcept;       JIT_SIMD double cos(double) noexcept;
JIT_SIMD float tanf(float) noexcept;       JIT_SIMD double tan(double) noexcept;
JIT_SIMD float asinf(float) noexcept;      JIT_SIMD double asin(double) noexcept;
JIT_SIMD float acosf(float) noexcept;      JIT_SIMD double acos(double) noexcept;
JIT_SIMD float atanf(float) noexcept;      JIT_SIMD double atan(double) noexcept;
JIT_SIMD float sinhf(float) noexcept;      JIT_SIMD double sinh(double) noexcept;
JIT_SIMD float coshf(float) noexcept;      JIT_SIMD double cosh(double) noexcept;
JIT_SIMD float tanhf(float) noexcept;      JIT_SIMD double tanh(double) noexcept;
JIT_SIMD float asinhf(float) noexcept;     JIT_SIMD double asinh(double) noexcept;
JIT_SIMD float acoshf(float) noexcept;     JIT_SIMD double acosh(double) noexcept;
JIT_SIMD float atanhf(float) noexcept;     JIT_SIMD double atanh(double) noexcept;
JIT_SIMD float erff(float) noexcept;       JIT_SIMD double erf(double) noexcept;
JIT_SIMD float erfcf(float) noexcept;      JIT_SIMD double erfc(double) noexcept;
JIT_SIMD float powf(float, float) noexcept;  JIT_SIMD double pow(double, double) noexcept;
JIT_SIMD float atan2f(float, float) noexcept; JIT_SIMD double atan2(double, double) noexcept;
JIT_SIMD float hypotf(float, float) noexcept; JIT_SIMD double hypot(double, double) noexcept;
}
#endif

// Set by a kernel that meets an error eager would raise (reset and returned by each entry).
static int jit_error = 0;
#define JIT_ERROR_ZERO_DIVISION 1
#define JIT_ERROR_INDEX 2
static inline void jit_fail(int code) { __atomic_store_n(&jit_error, code, __ATOMIC_RELAXED); }

// bfloat16: stored as the high half of a float, rounded to nearest even; NaN stays NaN.
static inline float bf16_to_float(uint16_t bits) {
  uint32_t word = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &word, sizeof(value));
  return value;
}
static inline uint16_t float_to_bf16(float value) {
  uint32_t word;
  std::memcpy(&word, &value, sizeof(word));
  uint32_t rounded = (word + 0x7FFFu + ((word >> 16) & 1u)) >> 16;
  return (value != value) ? static_cast<uint16_t>(0x7FC0u) : static_cast<uint16_t>(rounded);
}
static inline float bf16_round(float value) { return bf16_to_float(float_to_bf16(value)); }
static inline float half_round(float value) { return static_cast<float>(static_cast<_Float16>(value)); }

// NaN-propagating maximum and minimum (torch.maximum / torch.minimum / amax / clamp).
template <typename T> static inline T jit_max(T a, T b) { return (a != a || a > b) ? a : b; }
template <typename T> static inline T jit_min(T a, T b) { return (a != a || a < b) ? a : b; }

// Integer division and modulo with torch's rounding; division by zero raises in eager.
template <typename T> static inline T jit_truncdiv(T a, T b) {
  if (b == 0) { jit_fail(JIT_ERROR_ZERO_DIVISION); return 0; }
  if (b == -1) return static_cast<T>(-a);
  return static_cast<T>(a / b);
}
template <typename T> static inline T jit_floordiv_int(T a, T b) {
  if (b == 0) { jit_fail(JIT_ERROR_ZERO_DIVISION); return 0; }
  if (b == -1) return static_cast<T>(-a);
  T quotient = static_cast<T>(a / b);
  T remainder = static_cast<T>(a % b);
  return (remainder != 0 && ((remainder < 0) != (b < 0))) ? static_cast<T>(quotient - 1) : quotient;
}
template <typename T> static inline T jit_remainder_int(T a, T b) {
  if (b == 0) { jit_fail(JIT_ERROR_ZERO_DIVISION); return 0; }
  if (b == -1) return 0;
  T remainder = static_cast<T>(a % b);
  return (remainder != 0 && ((remainder < 0) != (b < 0))) ? static_cast<T>(remainder + b) : remainder;
}
template <typename T> static inline T jit_fmod_int(T a, T b) {
  if (b == 0) { jit_fail(JIT_ERROR_ZERO_DIVISION); return 0; }
  if (b == -1) return 0;
  return static_cast<T>(a % b);
}
// Floating floor division and modulo as torch computes them (fmod first, then correct).
template <typename T> static inline T jit_floordiv_float(T a, T b) {
  if (b == 0) return a / b;
  T mod = std::fmod(a, b);
  T div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= T(1);
  T floor_div;
  if (div != 0) {
    floor_div = std::floor(div);
    if (div - floor_div > T(0.5)) floor_div += T(1);
  } else {
    floor_div = std::copysign(T(0), a / b);
  }
  return floor_div;
}
template <typename T> static inline T jit_remainder_float(T a, T b) {
  T mod = std::fmod(a, b);
  return (mod != 0 && ((b < 0) != (mod < 0))) ? mod + b : mod;
}
// Shifts past the width give 0 (or -1 for negative values shifted right), as in torch.
template <typename T> static inline T jit_shift_left(T a, T b) {
  using U = typename std::make_unsigned<T>::type;
  return (b < 0 || b >= static_cast<T>(sizeof(T) * 8)) ? T(0)
                                                        : static_cast<T>(static_cast<U>(a) << b);
}
template <typename T> static inline T jit_shift_right(T a, T b) {
  if (b < 0 || b >= static_cast<T>(sizeof(T) * 8)) return a < 0 ? T(-1) : T(0);
  return static_cast<T>(a >> b);
}
template <typename T> static inline T jit_ipow(T base, T exponent) {
  if (exponent < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exponent & 1) ? -1 : 1;
    return 0;
  }
  T result = 1;
  while (exponent) {
    if (exponent & 1) result = static_cast<T>(result * base);
    base = static_cast<T>(base * base);
    exponent >>= 1;
  }
  return result;
}
template <typename T> static inline T jit_sign(T a) {
  return a > T(0) ? T(1) : (a < T(0) ? T(-1) : a);
}
template <typename T> static inline int64_t jit_wrap_index(T value, int64_t size) {
  int64_t index = static_cast<int64_t>(value);
  index = index < 0 ? index + size : index;
  if (index < 0 || index >= size) { jit_fail(JIT_ERROR_INDEX); index = 0; }
  return index;
}

// Welford accumulation (mean, sum of squared deviations, count) and its merge.
template <typename T> struct Welford { T mean; T m2; T count; };
template <typename T> static inline Welford<T> welford_merge(Welford<T> a, Welford<T> b) {
  if (b.count == 0) return a;
  if (a.count == 0) return b;
  T count = a.count + b.count;
  T delta = b.mean - a.mean;
  T factor = b.count / count;
  return {a.mean + delta * factor, a.m2 + b.m2 + delta * delta * a.count * factor, count};
}

// Argmax/argmin: prefer NaN, then the larger (smaller) value, then the earlier index.
template <typename T> static inline bool argmax_takes(T value, int64_t index, T best, int64_t best_index) {
  if (best != best) return value != value && index < best_index;
  if (value != value) return true;
  return value > best || (value == best && index < best_index);
}
template <typename T> static inline bool argmin_takes(T value, int64_t index, T best, int64_t best_index) {
  if (best != best) return value != value && index < best_index;
  if (value != value) return true;
  return value < best || (value == best && index < best_index);
}
