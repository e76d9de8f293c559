#include "cc/common/kernels/reduce_last_step.h"

#include <algorithm>
#include <cstring>

#include "cc/common/kernels/reduce_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tfhvd {

namespace {

// One element as ReduceTyped and ScaleTyped compute it: combined in T, scaled
// in double, rounded back to T once.
template <typename T>
inline T Combine(ReduceOp op, T x, T y) {
  switch (op) {
    case ReduceOp::MIN: return std::min(x, y);
    case ReduceOp::MAX: return std::max(x, y);
    case ReduceOp::PRODUCT: return x * y;
    default: return x + y;
  }
}

template <typename T>
void ScalarTail(ReduceOp op, T* dst, T* copy, const T* a, const T* b, size_t from, size_t n,
                double factor) {
  for (size_t i = from; i < n; ++i) {
    T r = Combine(op, a[i], b[i]);
    if (factor != 1.0) r = static_cast<T>(factor * static_cast<double>(r));
    dst[i] = r;
    if (copy) copy[i] = r;
  }
}

#if defined(__x86_64__)
bool HaveAvx2() {
  static const bool have = __builtin_cpu_supports("avx2");
  return have;
}

// std::min/std::max pick a when the two compare equal or either is NaN
// (min: b < a ? b : a); _mm256_min_ps(b, a) returns its second operand in
// exactly those cases, so the argument order below keeps the same bits.
__attribute__((target("avx2"))) inline __m256 Combine8(ReduceOp op, __m256 x, __m256 y) {
  switch (op) {
    case ReduceOp::MIN: return _mm256_min_ps(y, x);
    case ReduceOp::MAX: return _mm256_max_ps(y, x);
    case ReduceOp::PRODUCT: return _mm256_mul_ps(x, y);
    default: return _mm256_add_ps(x, y);
  }
}

__attribute__((target("avx2"))) inline __m256d Combine4(ReduceOp op, __m256d x, __m256d y) {
  switch (op) {
    case ReduceOp::MIN: return _mm256_min_pd(y, x);
    case ReduceOp::MAX: return _mm256_max_pd(y, x);
    case ReduceOp::PRODUCT: return _mm256_mul_pd(x, y);
    default: return _mm256_add_pd(x, y);
  }
}

// float32. A factor that float32 holds exactly scales in float32: the double
// product of two floats is exact, so rounding it once to float is the float
// product. Any other factor (1/3) scales in double like ScaleTyped.
__attribute__((target("avx2"))) size_t Float32Avx(ReduceOp op, float* dst, float* copy,
                                                  const float* a, const float* b, size_t n,
                                                  double factor) {
  const bool scale = factor != 1.0;
  const bool exact = static_cast<double>(static_cast<float>(factor)) == factor;
  const __m256 f32 = _mm256_set1_ps(static_cast<float>(factor));
  const __m256d f64 = _mm256_set1_pd(factor);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 r = Combine8(op, _mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i));
    if (scale && exact) {
      r = _mm256_mul_ps(r, f32);
    } else if (scale) {
      __m128 lo = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(r)), f64));
      __m128 hi = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(r, 1)), f64));
      r = _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
    }
    _mm256_storeu_ps(dst + i, r);
    if (copy) _mm256_storeu_ps(copy + i, r);
  }
  return i;
}

__attribute__((target("avx2"))) size_t Float64Avx(ReduceOp op, double* dst, double* copy,
                                                  const double* a, const double* b, size_t n,
                                                  double factor) {
  const bool scale = factor != 1.0;
  const __m256d f = _mm256_set1_pd(factor);
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    __m256d r = Combine4(op, _mm256_loadu_pd(a + i), _mm256_loadu_pd(b + i));
    if (scale) r = _mm256_mul_pd(r, f);
    _mm256_storeu_pd(dst + i, r);
    if (copy) _mm256_storeu_pd(copy + i, r);
  }
  return i;
}
#endif

template <typename T>
void Typed(ReduceOp op, void* dst, void* copy, const void* a, const void* b, size_t n,
           double factor) {
  T* d = static_cast<T*>(dst);
  T* c = static_cast<T*>(copy);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  size_t done = 0;
#if defined(__x86_64__)
  if (HaveAvx2()) {
    if constexpr (sizeof(T) == 4) done = Float32Avx(op, d, c, x, y, n, factor);
    if constexpr (sizeof(T) == 8) done = Float64Avx(op, d, c, x, y, n, factor);
  }
#endif
  ScalarTail(op, d, c, x, y, done, n, factor);
}

}  // namespace

void ReduceScaleStore(DataType dtype, ReduceOp op, void* dst, void* copy, const void* a,
                      const void* b, size_t n, double factor) {
  switch (dtype) {
    case DataType::FLOAT32: return Typed<float>(op, dst, copy, a, b, n, factor);
    case DataType::FLOAT64: return Typed<double>(op, dst, copy, a, b, n, factor);
    default: break;
  }
  ReduceBuffers(dtype, op, dst, a, b, n);
  ScaleBuffer(dtype, dst, n, factor);
  if (copy) std::memcpy(copy, dst, n * DataTypeSize(dtype));
}

}  // namespace tfhvd
