// framejit kernel prelude: pasted at the top of every generated C++ source (its text is part
// of the cache key). Element helpers with torch's semantics for integer division, modulo,
// shifts, NaN-propagating max/min, and bfloat16 rounding; vector math through glibc's libmvec.
// Only <stdint.h> and <omp.h>: the C++ standard headers would triple the compile time of
// every source, so the few libm functions used are declared here.
#include <stdint.h>
#include <omp.h>

#ifdef JIT_VECTOR_MATH
// Declaring these `simd` lets the compiler call libmvec's vector variants inside
// `#pragma omp simd` loops (glibc only does so itself under -ffast-math).
#define JIT_SIMD __attribute__((simd("notinbranch")))
#else
#define JIT_SIMD
#endif
#define JIT_MATH_UNARY(name) JIT_SIMD float name##f(float) noexcept; JIT_SIMD double name(double) noexcept;
#define JIT_MATH_BINARY(name) JIT_SIMD float name##f(float, float) noexcept; JIT_SIMD double name(double, double) noexcept;
#define JIT_MATH_SCALAR_UNARY(name) float name##f(float) noexcept; double name(double) noexcept;
#define JIT_MATH_SCALAR_BINARY(name) float name##f(float, float) noexcept; double name(double, double) noexcept;
extern "C" {
// The libm functions of the table of primitives (inductor/ir/primitives.py: the `cpp`
// spellings, scalar where `cpp_vector` is False), put here by codegen/cpp/source.py:
// JIT_MATH_DECLARATIONS
// The libm functions of helpers outside the table: the float path of `ops.pow` (integers
// take jit_ipow), and fmod under jit_fmod, jit_floordiv_float and jit_remainder_float.
JIT_MATH_BINARY(pow)
JIT_MATH_SCALAR_BINARY(fmod)
}

// MKL VML: eager's CPU kernels compute exp, log, cos, ... of float32 and float64 with VML
// (`at::vml`, in libtorch_cpu.so); `jit_vml_<f>` gives its bits (inductor/vml.py). A source
// names the functions it uses with JIT_VML_UNARY(exp, Exp) after this prelude, and binds them
// in `jit_vml_bind(lookup)`, which the loader calls with a resolver of VML's symbols. The
// vector variants GCC calls from a vectorised loop (`_ZGV<isa>N<lanes>v_jit_vml_expf`, the
// x86 vector function ABI) hand VML their lanes in one call. Without JIT_VML (torch without
// MKL, other CPUs) they are the libm/libmvec functions above.
#ifdef JIT_VML
#define JIT_VML_MODE 0x140102LL  // VML_HA | VML_FTZDAZ_OFF | VML_ERRMODE_IGNORE, as ATen's
typedef void (*jit_vml_float_fn)(int, const float*, float*, long long);
typedef void (*jit_vml_double_fn)(int, const double*, double*, long long);
typedef float jit_f32x4 __attribute__((vector_size(16)));
typedef float jit_f32x8 __attribute__((vector_size(32)));
typedef float jit_f32x16 __attribute__((vector_size(64)));
typedef double jit_f64x2 __attribute__((vector_size(16)));
typedef double jit_f64x4 __attribute__((vector_size(32)));
typedef double jit_f64x8 __attribute__((vector_size(64)));
#define JIT_VML_VARIANT(T, V, lanes, isa, f, fn)                                                 \
  extern "C" __attribute__((visibility("hidden"))) V f##_##isa(V x)                             \
      __asm__("_ZGV" #isa "N" #lanes "v_" #f);                                                  \
  V f##_##isa(V x) { V r; fn(lanes, (const T*)&x, (T*)&r, JIT_VML_MODE); return r; }
#if defined(__AVX512F__)
#define JIT_VML_WIDE(T, V8, V16, l8, l16, f, fn)                                                \
  JIT_VML_VARIANT(T, V8, l8, c, f, fn) JIT_VML_VARIANT(T, V8, l8, d, f, fn)                     \
  JIT_VML_VARIANT(T, V16, l16, e, f, fn)
#elif defined(__AVX2__)
#define JIT_VML_WIDE(T, V8, V16, l8, l16, f, fn)                                                \
  JIT_VML_VARIANT(T, V8, l8, c, f, fn) JIT_VML_VARIANT(T, V8, l8, d, f, fn)
#elif defined(__AVX__)
#define JIT_VML_WIDE(T, V8, V16, l8, l16, f, fn) JIT_VML_VARIANT(T, V8, l8, c, f, fn)
#else
#define JIT_VML_WIDE(T, V8, V16, l8, l16, f, fn)
#endif
#define JIT_VML_ONE(T, V4, V8, V16, l4, l8, l16, f, fn)                                         \
  extern "C" { JIT_SIMD T f(T) noexcept; }                                                      \
  extern "C" __attribute__((visibility("hidden"))) T f##_1(T x) __asm__(#f);                     \
  T f##_1(T x) { T r; fn(1, &x, &r, JIT_VML_MODE); return r; }                                 \
  JIT_VML_VARIANT(T, V4, l4, b, f, fn) JIT_VML_WIDE(T, V8, V16, l8, l16, f, fn)
#define JIT_VML_UNARY(name, vml)                                                                \
  static jit_vml_float_fn jit_vms##vml; static jit_vml_double_fn jit_vmd##vml;                   \
  JIT_VML_ONE(float, jit_f32x4, jit_f32x8, jit_f32x16, 4, 8, 16, jit_vml_##name##f, jit_vms##vml) \
  JIT_VML_ONE(double, jit_f64x2, jit_f64x4, jit_f64x8, 2, 4, 8, jit_vml_##name, jit_vmd##vml) \
  static inline void jit_vml_##name##f_block(int64_t n, float* v) {                            \
    jit_vms##vml(static_cast<int>(n), v, v, JIT_VML_MODE);                                      \
  }                                                                                             \
  static inline void jit_vml_##name##_block(int64_t n, double* v) {                             \
    jit_vmd##vml(static_cast<int>(n), v, v, JIT_VML_MODE);                                      \
  }
#define JIT_VML_BIND(vml)                                                                       \
  jit_vms##vml = (jit_vml_float_fn)lookup("vms" #vml);                                          \
  jit_vmd##vml = (jit_vml_double_fn)lookup("vmd" #vml);                                         \
  bound = bound && jit_vms##vml && jit_vmd##vml;
#else
#define JIT_VML_UNARY(name, vml)                                                                \
  static inline float jit_vml_##name##f(float x) { return name##f(x); }                          \
  static inline double jit_vml_##name(double x) { return name(x); }                              \
  static inline void jit_vml_##name##f_block(int64_t n, float* v) {                            \
    _Pragma("omp simd") for (int64_t i = 0; i < n; ++i) v[i] = name##f(v[i]);                  \
  }                                                                                             \
  static inline void jit_vml_##name##_block(int64_t n, double* v) {                             \
    _Pragma("omp simd") for (int64_t i = 0; i < n; ++i) v[i] = name(v[i]);                     \
  }
#define JIT_VML_BIND(vml)
#endif

// Overloads the generated code calls without caring whether the value is float or double.
static inline float jit_fmod(float a, float b) { return fmodf(a, b); }
static inline double jit_fmod(double a, double b) { return fmod(a, b); }
static inline float jit_floor(float a) { return __builtin_floorf(a); }
static inline double jit_floor(double a) { return __builtin_floor(a); }
static inline float jit_copysign(float a, float b) { return __builtin_copysignf(a, b); }
static inline double jit_copysign(double a, double b) { return __builtin_copysign(a, b); }
static inline float jit_abs(float a) { return __builtin_fabsf(a); }
static inline double jit_abs(double a) { return __builtin_fabs(a); }
static inline float jit_inf(float) { return __builtin_inff(); }
static inline double jit_inf(double) { return __builtin_inf(); }
template <typename T> struct jit_unsigned;
template <> struct jit_unsigned<int8_t> { typedef uint8_t type; };
template <> struct jit_unsigned<uint8_t> { typedef uint8_t type; };
template <> struct jit_unsigned<int16_t> { typedef uint16_t type; };
template <> struct jit_unsigned<int32_t> { typedef uint32_t type; };
template <> struct jit_unsigned<int64_t> { typedef uint64_t type; };
template <typename U> struct jit_signed;
template <> struct jit_signed<uint32_t> { typedef int32_t type; };
template <> struct jit_signed<uint64_t> { typedef int64_t type; };
template <typename F> struct jit_bits;
template <> struct jit_bits<float> { typedef uint32_t type; };
template <> struct jit_bits<double> { typedef uint64_t type; };

// Set by a kernel that meets an error eager would raise (reset and returned by each entry).
static int jit_error = 0;
#define JIT_ERROR_ZERO_DIVISION 1
#define JIT_ERROR_INDEX 2
static inline void jit_fail(int code) { __atomic_store_n(&jit_error, code, __ATOMIC_RELAXED); }

// A value the optimiser must treat as opaque (no code): a scalar float sum passes through it
// after each term, so GCC never vectorises that in-order reduction. GCC 12.2 at -O3 (loop
// vectorisation after the complete unrolling of an inner loop) reorders the terms of such a
// reduction whose loads are permuted, summing the wrong elements: `torch.roll(a, 3, 1).sum()`
// gave 5.71 where eager gives 7.19 (graph fuzzer seed 5226; also flips, `7 - i`, `i ^ 1`).
#if defined(__x86_64__)
#define JIT_OPAQUE(value) __asm__("" : "+x"(value))
#elif defined(__aarch64__)
#define JIT_OPAQUE(value) __asm__("" : "+w"(value))
#else
#define JIT_OPAQUE(value) __asm__("" : "+m"(value))
#endif

// bfloat16: stored as the high half of a float, rounded to nearest even; NaN stays NaN.
static inline float bf16_to_float(uint16_t bits) {
  uint32_t word = static_cast<uint32_t>(bits) << 16;
  float value;
  __builtin_memcpy(&value, &word, sizeof(value));
  return value;
}
static inline uint16_t float_to_bf16(float value) {
  uint32_t word;
  __builtin_memcpy(&word, &value, sizeof(word));
  uint32_t rounded = (word + 0x7FFFu + ((word >> 16) & 1u)) >> 16;
  return (value != value) ? static_cast<uint16_t>(0x7FC0u) : static_cast<uint16_t>(rounded);
}
static inline float bf16_round(float value) { return bf16_to_float(float_to_bf16(value)); }
// the bits of a float bf16_round made (its low half is zero, NaN is the quiet 0x7FC0): no
// second rounding when it is stored
static inline uint16_t bf16_bits(float rounded) {
  uint32_t word;
  __builtin_memcpy(&word, &rounded, sizeof(word));
  return static_cast<uint16_t>(word >> 16);
}
// float16: stored as its bits (uint16_t), converted by integer and float operations that
// vectorise (g++ 12 ran an omp simd loop of _Float16 conversions scalar, through libgcc's
// __extendhfsf2/__truncsfhf2). Exact for every half and every float, rounded to nearest
// even; NaN as F16C's vcvtps2ph and eager's vectorised kernels: quiet, the sign and the top
// of the payload kept. The method of Maratyszcza's FP16 library (no float subnormal is made
// or read: exact under flush-to-zero too). A loaded NaN keeps its bits, a signalling one
// too (half_bits stores a copy as eager's; half_quiet makes it a float32 as eager's).
static inline float half_to_float(uint16_t bits) {
  // signed 32-bit lanes throughout: AVX2 compares them in one instruction
  const int32_t magnitude = static_cast<int32_t>(bits & 0x7FFFu);
  const uint32_t shifted = static_cast<uint32_t>(magnitude) << 13;
  // a normal: the exponent rebiased by 127 - 15
  const uint32_t normal = shifted + 0x38000000u;
  // 0.5 + m * 2^-24, less 0.5: the subnormal m * 2^-24 (and zero) exactly
  const float subnormal = __builtin_bit_cast(float, static_cast<uint32_t>(magnitude) |
                                                        0x3F000000u) - 0.5f;
  const uint32_t special = shifted | 0x7F800000u;    // infinity, NaN: the payload kept
  const uint32_t result = magnitude >= 0x7C00 ? special
      : magnitude < 0x0400 ? __builtin_bit_cast(uint32_t, subnormal) : normal;
  return __builtin_bit_cast(float, (static_cast<uint32_t>(bits & 0x8000u) << 16) | result);
}
static inline uint16_t float_to_half(float value) {
  const uint32_t word = __builtin_bit_cast(uint32_t, value);
  // |value| * 2^112 * 2^-110: past 65520 an infinity (overflow), else |value| * 4
  float base = (__builtin_fabsf(value) * 0x1p112f) * 0x1p-110f;
  // adding 2^(e + 15) to |value| * 4 (e its exponent, at least -14) leaves a half's mantissa
  // bits (fewer for subnormals), rounded to nearest even by the float add itself
  const int32_t exponent = static_cast<int32_t>(word & 0x7F800000u);
  const int32_t bias = exponent < 0x38800000 ? 0x38800000 : exponent;
  base = __builtin_bit_cast(float, static_cast<uint32_t>(bias) + 0x07800000u) + base;
  const uint32_t rounded = __builtin_bit_cast(uint32_t, base);
  const uint32_t finite = ((rounded >> 13) & 0x7C00u) + (rounded & 0x0FFFu);
  const uint32_t nan = 0x7E00u | ((word >> 13) & 0x03FFu);
  return static_cast<uint16_t>(((word >> 16) & 0x8000u) | (value != value ? nan : finite));
}
// half_to_float(float_to_half(value)) without the trip through a half's bits: a normal
// rounded to nearest even at 10 mantissa bits in place (past 65504 an infinity), below 2^-14
// to a multiple of 2^-24 by a float add (|value| + 0.5 - 0.5, exact), a NaN made quiet
static inline float half_round(float value) {
  const uint32_t word = __builtin_bit_cast(uint32_t, value);
  const int32_t magnitude = static_cast<int32_t>(word & 0x7FFFFFFFu);
  const int32_t normal = static_cast<int32_t>(
      (static_cast<uint32_t>(magnitude) + 0x0FFFu + ((word >> 13) & 1u)) & 0xFFFFE000u);
  const float small = (__builtin_fabsf(value) + 0.5f) - 0.5f;
  const int32_t nan = static_cast<int32_t>((word | 0x00400000u) & 0x7FFFE000u);
  const int32_t result = magnitude > 0x7F800000 ? nan
      : magnitude < 0x38800000 ? __builtin_bit_cast(int32_t, small)
      : normal > 0x477FE000 ? 0x7F800000 : normal;
  return __builtin_bit_cast(float, (word & 0x80000000u) | static_cast<uint32_t>(result));
}
// the bits of a float a float16 load made (a signalling NaN kept, as eager's copies keep it)
static inline uint16_t half_bits(float value) {
  const uint32_t word = __builtin_bit_cast(uint32_t, value);
  const uint32_t nan = ((word >> 16) & 0x8000u) | 0x7C00u | ((word >> 13) & 0x03FFu);
  const uint16_t rounded = float_to_half(value);
  return (word & 0x7FFFFFFFu) > 0x7F800000u ? static_cast<uint16_t>(nan) : rounded;
}
static inline float half_quiet(float value) {
  const uint32_t word = __builtin_bit_cast(uint32_t, value);
  return value != value ? __builtin_bit_cast(float, word | 0x00400000u) : value;
}

// With F16C (AVX2, not AVX-512: its loops call other variants) a vectorised loop converts
// with vcvtph2ps/vcvtps2ph as eager does: g++ calls the AVX2 vector variants
// (`_ZGVdN8v_<name>`, the x86 vector function ABI) of these `declare simd` functions, defined
// here through GCC's builtins (<immintrin.h> alone took 1.3 s to compile). vcvtph2ps quiets
// a signalling NaN: its quiet bit is put back (half_bits stores a copy's bits as eager's).
// vcvtps2ph rounds to nearest even, a NaN as float_to_half. Scalar calls (a loop's
// tail, loops g++ leaves scalar) take the software functions, exact as the variants.
#if defined(__F16C__) && defined(__AVX2__) && !defined(__AVX512F__) && defined(_OPENMP)
typedef int jit_i32x4 __attribute__((vector_size(16)));
typedef int jit_i32x8 __attribute__((vector_size(32)));
typedef short jit_i16x8 __attribute__((vector_size(16)));
typedef unsigned short jit_u16x8 __attribute__((vector_size(16)));
typedef float jit_half_f32x8 __attribute__((vector_size(32)));
extern "C" {
#pragma omp declare simd simdlen(8) notinbranch
__attribute__((const)) float jit_half_to_float_f16c(int32_t bits) noexcept;
#pragma omp declare simd simdlen(8) notinbranch
__attribute__((const)) int32_t jit_float_to_half_f16c(float value) noexcept;
__attribute__((weak, visibility("hidden"))) float jit_half_to_float_1(int32_t bits) noexcept
    __asm__("jit_half_to_float_f16c");
float jit_half_to_float_1(int32_t bits) noexcept {
  return half_to_float(static_cast<uint16_t>(bits));
}
__attribute__((weak, visibility("hidden"))) int32_t jit_float_to_half_1(float value) noexcept
    __asm__("jit_float_to_half_f16c");
int32_t jit_float_to_half_1(float value) noexcept { return float_to_half(value); }
__attribute__((weak, visibility("hidden"))) jit_half_f32x8 jit_half_to_float_d(jit_i32x8 bits)
    noexcept __asm__("_ZGVdN8v_jit_half_to_float_f16c");
jit_half_f32x8 jit_half_to_float_d(jit_i32x8 bits) noexcept {
  const jit_i32x4 low = {bits[0], bits[1], bits[2], bits[3]};
  const jit_i32x4 high = {bits[4], bits[5], bits[6], bits[7]};
  const jit_half_f32x8 value = __builtin_ia32_vcvtph2ps256(
      (jit_i16x8)__builtin_ia32_packusdw128(low, high));
  const jit_i32x8 quieted = ~(bits << 13) & 0x00400000;    // a signalling NaN's lanes
  return (jit_half_f32x8)((jit_i32x8)value ^ ((value != value) & quieted));
}
__attribute__((weak, visibility("hidden"))) jit_i32x8 jit_float_to_half_d(jit_half_f32x8 value)
    noexcept __asm__("_ZGVdN8v_jit_float_to_half_f16c");
jit_i32x8 jit_float_to_half_d(jit_half_f32x8 value) noexcept {
  // 8: round to nearest even, no precision exception (_MM_FROUND_NO_EXC)
  return __builtin_convertvector((jit_u16x8)__builtin_ia32_vcvtps2ph256(value, 8), jit_i32x8);
}
#pragma omp declare simd simdlen(8) notinbranch
__attribute__((const)) float jit_half_round_f16c(float value) noexcept;
__attribute__((weak, visibility("hidden"))) float jit_half_round_1(float value) noexcept
    __asm__("jit_half_round_f16c");
float jit_half_round_1(float value) noexcept { return half_round(value); }
__attribute__((weak, visibility("hidden"))) jit_half_f32x8 jit_half_round_d(jit_half_f32x8 value)
    noexcept __asm__("_ZGVdN8v_jit_half_round_f16c");
jit_half_f32x8 jit_half_round_d(jit_half_f32x8 value) noexcept {
  return __builtin_ia32_vcvtph2ps256(__builtin_ia32_vcvtps2ph256(value, 8));
}
}
// half_bits and half_quiet selecting by masks: g++ 12 vectorises no loop that has both a
// call and a branch to if-convert
static inline uint16_t jit_half_bits_f16c(float value) {
  const uint32_t word = __builtin_bit_cast(uint32_t, value);
  const uint32_t nan = ((word >> 16) & 0x8000u) | 0x7C00u | ((word >> 13) & 0x03FFu);
  const uint32_t rounded = static_cast<uint32_t>(jit_float_to_half_f16c(value));
  const uint32_t mask = 0u - static_cast<uint32_t>((word & 0x7FFFFFFFu) > 0x7F800000u);
  return static_cast<uint16_t>(rounded ^ ((rounded ^ nan) & mask));
}
static inline float jit_half_quiet_f16c(float value) {
  const uint32_t word = __builtin_bit_cast(uint32_t, value);
  const uint32_t mask = 0u - static_cast<uint32_t>(value != value);
  return __builtin_bit_cast(float, word | (mask & 0x00400000u));
}
#else
static inline float jit_half_to_float_f16c(int32_t bits) {
  return half_to_float(static_cast<uint16_t>(bits));
}
static inline int32_t jit_float_to_half_f16c(float value) { return float_to_half(value); }
static inline float jit_half_round_f16c(float value) { return half_round(value); }
static inline uint16_t jit_half_bits_f16c(float value) { return half_bits(value); }
static inline float jit_half_quiet_f16c(float value) { return half_quiet(value); }
#endif

// signbit as the top bit of a float's bits, `v < 0` for integers: GCC 12 crashed
// ("unrecognizable insn") vectorising __builtin_signbit of widened bfloat16 loads in an omp
// simd loop, and __builtin_signbit takes no integer.
static inline bool jit_signbit(float value) {
  uint32_t word;
  __builtin_memcpy(&word, &value, sizeof(word));
  return (word >> 31) != 0;
}
static inline bool jit_signbit(double value) {
  uint64_t word;
  __builtin_memcpy(&word, &value, sizeof(word));
  return (word >> 63) != 0;
}
template <typename T> static inline bool jit_signbit(T value) { return value < T(0); }
// A float converted to int32 or int64 as eager's kernels convert it on x86 (cvttss2si and
// its kin): NaN and values outside the type's range give the type's minimum, the "integer
// indefinite". A plain static_cast is undefined there, and GCC's vectorised conversion gave 0
// (graph fuzzer seed 16154: `(x // y).long()` of a NaN). A select on both sides vectorises.
// Without AVX-512 DQ, x86 has no vector conversion of float to int64, and the loop ran
// scalar (float32 -> int64 of 1024x1024: 1.1-1.3 ms against eager's 0.8-0.9): int64 results
// are made from the float's bits there, in vectorisable integer operations (the significand
// placed with its leading bit at bit 62, shifted right by what the exponent leaves, then the
// sign); the same values, the indefinite included.
template <typename U, typename F> static inline int64_t jit_float_bits_to_int64(F value) {
  constexpr int fraction = sizeof(F) == 4 ? 23 : 52;
  constexpr int32_t bias = sizeof(F) == 4 ? 127 : 1023;
  U word;
  __builtin_memcpy(&word, &value, sizeof(word));
  const int32_t exponent = static_cast<int32_t>((word >> fraction) & (bias * 2 + 1));
  const uint64_t significand =
      static_cast<uint64_t>((word & ((U(1) << fraction) - 1)) | (U(1) << fraction))
      << (62 - fraction);
  int32_t count = bias + 62 - exponent;   // below 0: |value| >= 2^63; above 62: |value| < 1
  count = count > 63 ? 63 : count;
  count = count < 0 ? 0 : count;
  const uint64_t magnitude = significand >> count;
  const int64_t sign = static_cast<int64_t>(static_cast<typename jit_signed<U>::type>(word) >>
                                            (sizeof(F) * 8 - 1));   // 0 or -1
  const int64_t converted = (static_cast<int64_t>(magnitude) ^ sign) - sign;
  return exponent - bias >= 63 ? INT64_MIN : converted;
}
// An int64 converted to float32 as cvtsi2ss does (round to nearest even from all 64 bits).
// Without AVX-512 DQ x86 has no vector conversion of int64, and a loop with one ran scalar
// whole; here it is made of vectorisable 64-bit integer and float64 operations. Beyond 2^53
// (where float64 is not exact) the value is first rounded to odd at 2^11: the low 11 bits
// cleared and bit 11 set if any was set, which leaves at most 53 significant bits and keeps
// the single rounding to float32 (whose unit there is 2^30 or more) that of the integer.
// Then int64 -> float64 exactly: the signed high half and the low half placed in float64
// significands (2^84 + (h + 2^31)*2^32, 2^52 + l), the offsets subtracted, one rounding-free
// sum. A lone conversion is cheaper scalar: lines.py turns this back into a cast in loops
// that do nothing else (scalar_conversions).
static inline float jit_int64_to_float(int64_t value) {
#if defined(__x86_64__) && !defined(__AVX512DQ__)
  const uint64_t bits = static_cast<uint64_t>(value);
  const uint64_t odd = (bits & ~0x7FFULL) | (((bits & 0x7FFULL) + 0x7FFULL) & 0x800ULL);
  const uint64_t exact = bits + (1ULL << 53) > (1ULL << 54) ? odd : bits;  // |value| > 2^53
  const uint64_t high_word = (exact >> 32) ^ 0x4530000080000000ULL;
  const uint64_t low_word = (exact & 0xFFFFFFFFULL) | 0x4330000000000000ULL;
  double high, low;
  __builtin_memcpy(&high, &high_word, 8);
  __builtin_memcpy(&low, &low_word, 8);
  return static_cast<float>((high - (0x1p84 + 0x1p63 + 0x1p52)) + low);
#else
  return static_cast<float>(value);
#endif
}
template <typename I, typename F> static inline I jit_float_to_int(F value) {
#if defined(__x86_64__) && !defined(__AVX512DQ__)
  if constexpr (sizeof(I) == 8) {
    return jit_float_bits_to_int64<typename jit_bits<F>::type>(value);
  }
#endif
  const F low = static_cast<F>(sizeof(I) == 8 ? -9223372036854775808.0 : -2147483648.0);
  const bool inside = value >= low && value < -low;
  const I converted = static_cast<I>(inside ? value : F(0));
  return inside ? converted : static_cast<I>(sizeof(I) == 8 ? INT64_MIN : INT32_MIN);
}

// One step of logcumsumexp (codegen/cpp/scan.py): `x` the line's next element, `y` the running
// value, in eager's order: log1p(exp(low - high)) + high of the smaller and the larger (NaN
// in `y` taking both places); where both are the same infinity the step gives `x`.
#define JIT_LOG_ADD_EXP(T, LOG1P, EXP)                                                      \
  static inline T jit_log_add_exp(T x, T y) {                                               \
    const T low = (y != y) ? y : ((y < x) ? y : x);                                         \
    const T high = (y != y) ? y : ((x < y) ? y : x);                                        \
    if (low == high && !__builtin_isfinite(low)) return x;                                  \
    return LOG1P(EXP(low - high)) + high;                                                   \
  }
// libm's scalar functions under names declared without `simd`: the vector variants differ
// from them in the last bit, and a scan's loop across lines is vectorised.
extern "C" float jit_scalar_expf(float) noexcept __asm__("expf");
extern "C" float jit_scalar_log1pf(float) noexcept __asm__("log1pf");
extern "C" double jit_scalar_exp(double) noexcept __asm__("exp");
extern "C" double jit_scalar_log1p(double) noexcept __asm__("log1p");
JIT_LOG_ADD_EXP(float, jit_scalar_log1pf, jit_scalar_expf)
JIT_LOG_ADD_EXP(double, jit_scalar_log1p, jit_scalar_exp)

// NaN-propagating maximum and minimum (torch.maximum / torch.minimum / amax / clamp).
// Ties keep the first operand (so maximum(-0.0, 0.0) is -0.0, as in eager). Written as one
// select on two comparisons joined by `|`: GCC 12 left a chain of `(a != a || a >= b) ? a : b`
// scalar (resnet18's 3x3 max pooling, 13.5 ms against 0.67 ms vectorised).
template <typename T> static inline T jit_max(T a, T b) { return ((a < b) | (b != b)) ? b : a; }
template <typename T> static inline T jit_min(T a, T b) { return ((b < a) | (b != b)) ? b : a; }

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
  T mod = jit_fmod(a, b);
  T div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= T(1);
  T floor_div;
  if (div != 0) {
    floor_div = jit_floor(div);
    if (div - floor_div > T(0.5)) floor_div += T(1);
  } else {
    floor_div = jit_copysign(T(0), a / b);
  }
  return floor_div;
}
template <typename T> static inline T jit_remainder_float(T a, T b) {
  T mod = jit_fmod(a, b);
  return (mod != 0 && ((b < 0) != (mod < 0))) ? mod + b : mod;
}
// Shifts past the width give 0 (or -1 for negative values shifted right), as in torch.
template <typename T> static inline T jit_shift_left(T a, T b) {
  typedef typename jit_unsigned<T>::type U;
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
// sign(NaN) and sign(-0.0) are 0, as in eager.
template <typename T> static inline T jit_sign(T a) {
  return static_cast<T>((T(0) < a) - (a < T(0)));
}
// An index out of range sets `error` (a flag local to the loop, reported after it: a call
// here would keep the loop from vectorising) and reads element 0 instead.
template <typename T> static inline int64_t jit_wrap_index(T value, int64_t size, int& error,
                                                    bool live = true) {
  int64_t index = static_cast<int64_t>(value);
  index = index < 0 ? index + size : index;
  const bool outside = index < 0 || index >= size;
  error |= outside & live;   // a lane a mask does not select reads nothing
  return outside ? 0 : index;
}

// Welford accumulation (mean, sum of squared deviations, count) and its merge.
template <typename T> struct Welford { T mean; T m2; T count; };
template <typename T> static inline Welford<T> welford_merge(Welford<T> a, Welford<T> b) {
  if (b.count == 0) return a;
  if (a.count == 0) return b;
  T count = a.count + b.count;
  T delta = b.mean - a.mean;
  T factor = b.count / count;
  // An infinite mean deviates from every other element by inf - inf = NaN, as eager's
  // sequential update finds; the product below would give inf.
  T spread = __builtin_isfinite(delta) ? delta * delta * a.count * factor : delta - delta;
  return {a.mean + delta * factor, a.m2 + b.m2 + spread, count};
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
