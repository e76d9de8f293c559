#include "cc/common/host/malloc_tuning.h"

#include <cstdlib>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tfhvd {

bool KeepLargeBuffersInHeap() {
#if defined(__GLIBC__)
  static const bool applied = [] {
    if (std::getenv("MALLOC_MMAP_THRESHOLD_") || std::getenv("MALLOC_TRIM_THRESHOLD_")) {
      return false;
    }
    // Up to 1 GiB comes from the heap; up to 2 GiB of free heap top is kept.
    return mallopt(M_MMAP_THRESHOLD, 1 << 30) == 1 && mallopt(M_TRIM_THRESHOLD, 2 << 30) == 1;
  }();
  return applied;
#else
  return false;
#endif
}

}  // namespace tfhvd
