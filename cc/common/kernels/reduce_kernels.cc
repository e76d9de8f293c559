#include "cc/common/kernels/reduce_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "cc/common/half.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tfhvd {

namespace {

template <typename T>
void ReduceTyped(ReduceOp op, T* dst, const T* a, const T* b, size_t n) {
  switch (op) {
    case ReduceOp::MIN:
      for (size_t i = 0; i < n; ++i) dst[i] = std::min(a[i], b[i]);
      break;
    case ReduceOp::MAX:
      for (size_t i = 0; i < n; ++i) dst[i] = std::max(a[i], b[i]);
      break;
    case ReduceOp::PRODUCT:
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<T>(a[i] * b[i]);
      break;
    default:
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<T>(a[i] + b[i]);
      break;
  }
}

// 16-bit floats: widen to float, combine, round once.
template <float (*ToF)(uint16_t), uint16_t (*FromF)(float)>
void Reduce16(ReduceOp op, uint16_t* dst, const uint16_t* a, const uint16_t* b,
              size_t n) {
  for (size_t i = 0; i < n; ++i) {
    float x = ToF(a[i]), y = ToF(b[i]), r;
    switch (op) {
      case ReduceOp::MIN: r = std::fmin(x, y); break;
      case ReduceOp::MAX: r = std::fmax(x, y); break;
      case ReduceOp::PRODUCT: r = x * y; break;
      default: r = x + y; break;
    }
    dst[i] = FromF(r);
  }
}

#if defined(__x86_64__)
// 8 lanes at a time with the CPU's half<->float conversions (F16C), which
// round to nearest even exactly like FloatToHalf; the tail goes through the
// scalar path.
__attribute__((target("avx2,f16c"))) size_t Reduce16HalfAvx(ReduceOp op, uint16_t* dst,
                                                             const uint16_t* a,
                                                             const uint16_t* b, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
    __m256 y = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
    __m256 r;
    switch (op) {
      case ReduceOp::MIN: r = _mm256_min_ps(x, y); break;
      case ReduceOp::MAX: r = _mm256_max_ps(x, y); break;
      case ReduceOp::PRODUCT: r = _mm256_mul_ps(x, y); break;
      default: r = _mm256_add_ps(x, y); break;
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  return i;
}

// bfloat16 widens by a shift and narrows with round-to-nearest-even in
// integer lanes (NaNs stay NaN).
__attribute__((target("avx2"))) size_t Reduce16BFloatAvx(ReduceOp op, uint16_t* dst,
                                                         const uint16_t* a, const uint16_t* b,
                                                         size_t n) {
  size_t i = 0;
  const __m256i round_base = _mm256_set1_epi32(0x7FFF);
  const __m256i one = _mm256_set1_epi32(1);
  for (; i + 8 <= n; i += 8) {
    __m256i xa = _mm256_slli_epi32(
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i))), 16);
    __m256i xb = _mm256_slli_epi32(
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i))), 16);
    __m256 x = _mm256_castsi256_ps(xa), y = _mm256_castsi256_ps(xb), r;
    switch (op) {
      case ReduceOp::MIN: r = _mm256_min_ps(x, y); break;
      case ReduceOp::MAX: r = _mm256_max_ps(x, y); break;
      case ReduceOp::PRODUCT: r = _mm256_mul_ps(x, y); break;
      default: r = _mm256_add_ps(x, y); break;
    }
    __m256i bits = _mm256_castps_si256(r);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), one);
    __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(round_base, lsb)), 16);
    // NaN lanes keep their top bits with the quiet bit set.
    __m256 nan_mask = _mm256_cmp_ps(r, r, _CMP_UNORD_Q);
    __m256i nan_bits = _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x40));
    rounded = _mm256_blendv_epi8(rounded, nan_bits, _mm256_castps_si256(nan_mask));
    // Pack 8 x 32-bit lanes (values < 65536) to 16-bit.
    __m256i packed = _mm256_packus_epi32(rounded, rounded);
    packed = _mm256_permute4x64_epi64(packed, 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_castsi256_si128(packed));
  }
  return i;
}

bool HaveAvx2F16c() {
  static const bool have = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return have;
}
#endif

// As Horovod scales on the CPU: every element multiplied by the factor in
// double precision, then converted back to T (integers truncate toward zero,
// as a C++ conversion does; float32 rounds once from the double product).
template <typename T>
void ScaleTyped(T* buf, size_t n, double factor) {
  for (size_t i = 0; i < n; ++i) {
    buf[i] = static_cast<T>(factor * static_cast<double>(buf[i]));
  }
}

// 16-bit floats are scaled in float32, with the factor rounded to float32
// first, then rounded once to 16 bits (Horovod's float16 path).
template <float (*ToF)(uint16_t), uint16_t (*FromF)(float)>
void Scale16(uint16_t* buf, size_t n, double factor) {
  const float f = static_cast<float>(factor);
  for (size_t i = 0; i < n; ++i) buf[i] = FromF(f * ToF(buf[i]));
}

template <typename T>
void DivideTyped(T* buf, size_t n, int64_t divisor) {
  for (size_t i = 0; i < n; ++i) buf[i] = static_cast<T>(buf[i] / static_cast<T>(divisor));
}

template <float (*ToF)(uint16_t), uint16_t (*FromF)(float)>
void Divide16(uint16_t* buf, size_t n, int64_t divisor) {
  for (size_t i = 0; i < n; ++i)
    buf[i] = FromF(ToF(buf[i]) / static_cast<float>(divisor));
}

template <typename T>
void FillTyped(ReduceOp op, T* buf, size_t n) {
  T value = 0;
  if (op == ReduceOp::PRODUCT) value = 1;
  if (op == ReduceOp::MIN) value = std::numeric_limits<T>::has_infinity
                                       ? std::numeric_limits<T>::infinity()
                                       : std::numeric_limits<T>::max();
  if (op == ReduceOp::MAX) value = std::numeric_limits<T>::has_infinity
                                       ? -std::numeric_limits<T>::infinity()
                                       : std::numeric_limits<T>::lowest();
  std::fill(buf, buf + n, value);
}

uint16_t Identity16(ReduceOp op, bool bf16) {
  float v = 0.0f;
  if (op == ReduceOp::PRODUCT) v = 1.0f;
  if (op == ReduceOp::MIN) v = std::numeric_limits<float>::infinity();
  if (op == ReduceOp::MAX) v = -std::numeric_limits<float>::infinity();
  return bf16 ? FloatToBFloat16(v) : FloatToHalf(v);
}

}  // namespace

#define TFHVD_DISPATCH(DTYPE, CALL_T, CALL_HALF, CALL_BF16)      \
  switch (DTYPE) {                                              \
    case DataType::UINT8: { using T = uint8_t; CALL_T; } break;  \
    case DataType::BOOL: { using T = uint8_t; CALL_T; } break;   \
    case DataType::INT8: { using T = int8_t; CALL_T; } break;    \
    case DataType::UINT16: { using T = uint16_t; CALL_T; } break;\
    case DataType::INT16: { using T = int16_t; CALL_T; } break;  \
    case DataType::INT32: { using T = int32_t; CALL_T; } break;  \
    case DataType::INT64: { using T = int64_t; CALL_T; } break;  \
    case DataType::FLOAT32: { using T = float; CALL_T; } break;  \
    case DataType::FLOAT64: { using T = double; CALL_T; } break; \
    case DataType::FLOAT16: { CALL_HALF; } break;                \
    case DataType::BFLOAT16: { CALL_BF16; } break;               \
  }

void ReduceBuffers(DataType dtype, ReduceOp op, void* dst, const void* a,
                   const void* b, size_t n) {
  auto* d16 = static_cast<uint16_t*>(dst);
  auto* a16 = static_cast<const uint16_t*>(a);
  auto* b16 = static_cast<const uint16_t*>(b);
  size_t done = 0;
#if defined(__x86_64__)
  if ((dtype == DataType::FLOAT16 || dtype == DataType::BFLOAT16) && HaveAvx2F16c()) {
    done = dtype == DataType::FLOAT16 ? Reduce16HalfAvx(op, d16, a16, b16, n)
                                      : Reduce16BFloatAvx(op, d16, a16, b16, n);
    d16 += done;
    a16 += done;
    b16 += done;
  }
#endif
  n -= done;
  TFHVD_DISPATCH(dtype,
      ReduceTyped<T>(op, static_cast<T*>(dst), static_cast<const T*>(a),
                     static_cast<const T*>(b), n),
      (Reduce16<HalfToFloat, FloatToHalf>(op, d16, a16, b16, n)),
      (Reduce16<BFloat16ToFloat, FloatToBFloat16>(op, d16, a16, b16, n)))
}

void ScaleBuffer(DataType dtype, void* buf, size_t n, double factor) {
  if (factor == 1.0) return;
  auto* b16 = static_cast<uint16_t*>(buf);
  TFHVD_DISPATCH(dtype, ScaleTyped<T>(static_cast<T*>(buf), n, factor),
                 (Scale16<HalfToFloat, FloatToHalf>(b16, n, factor)),
                 (Scale16<BFloat16ToFloat, FloatToBFloat16>(b16, n, factor)))
}

void DivideBuffer(DataType dtype, void* buf, size_t n, int64_t divisor) {
  if (divisor == 1) return;
  auto* b16 = static_cast<uint16_t*>(buf);
  TFHVD_DISPATCH(dtype, DivideTyped<T>(static_cast<T*>(buf), n, divisor),
                 (Divide16<HalfToFloat, FloatToHalf>(b16, n, divisor)),
                 (Divide16<BFloat16ToFloat, FloatToBFloat16>(b16, n, divisor)))
}

void FillIdentity(DataType dtype, ReduceOp op, void* buf, size_t n) {
  auto* b16 = static_cast<uint16_t*>(buf);
  TFHVD_DISPATCH(dtype, FillTyped<T>(op, static_cast<T*>(buf), n),
                 (std::fill(b16, b16 + n, Identity16(op, false))),
                 (std::fill(b16, b16 + n, Identity16(op, true))))
}

#undef TFHVD_DISPATCH

}  // namespace tfhvd
