#include "cc/common/algorithms/shm_copies.h"

#include <unistd.h>

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace tfhvd {

void StreamCopy(char* dst, const char* src, size_t n) {
#if defined(__x86_64__)
  size_t head = (16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15;
  if (n < head + 64) {
    std::memcpy(dst, src, n);
    return;
  }
  std::memcpy(dst, src, head);
  dst += head;
  src += head;
  n -= head;
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m128i* s = reinterpret_cast<const __m128i*>(src + i);
    __m128i* d = reinterpret_cast<__m128i*>(dst + i);
    __m128i a = _mm_loadu_si128(s), b = _mm_loadu_si128(s + 1);
    __m128i c = _mm_loadu_si128(s + 2), e = _mm_loadu_si128(s + 3);
    _mm_stream_si128(d, a);
    _mm_stream_si128(d + 1, b);
    _mm_stream_si128(d + 2, c);
    _mm_stream_si128(d + 3, e);
  }
  std::memcpy(dst + i, src + i, n - i);
  _mm_sfence();  // the stores are visible before the "done" counter that follows
#else
  std::memcpy(dst, src, n);
#endif
}

void CopyOut(char* dst, const char* src, size_t n, bool streaming) {
  if (streaming) {
    StreamCopy(dst, src, n);
  } else {
    std::memcpy(dst, src, n);
  }
}

size_t StreamingThreshold() {
  long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return l3 > 0 ? static_cast<size_t>(l3) / 2 : size_t{16} << 20;
}

#if defined(__x86_64__)
__attribute__((target("clflushopt"))) void FlushLines(const char* p, size_t n) {
  const uintptr_t first = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{63};
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + n;
  for (uintptr_t line = first; line < end; line += 64) {
    _mm_clflushopt(reinterpret_cast<void*>(line));
  }
}

bool CpuCanFlushOpt() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return false;
  __cpuid_count(7, 0, a, b, c, d);
  return (b & (1u << 23)) != 0;  // CPUID.(EAX=7,ECX=0):EBX[23] = CLFLUSHOPT
}
#else
void FlushLines(const char*, size_t) {}
bool CpuCanFlushOpt() { return false; }
#endif

}  // namespace tfhvd
