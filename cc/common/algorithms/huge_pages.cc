#include "cc/common/algorithms/huge_pages.h"

#include <sys/mman.h>

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

namespace tfhvd {

size_t HugePages::Collapse(const void* data, size_t bytes) {
  if (bytes < kPageBytes) return 0;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = (begin + kPageBytes - 1) & ~(kPageBytes - 1);
  const uintptr_t end = (begin + bytes) & ~(kPageBytes - 1);
  size_t collapsed = 0;
  // Consecutive pages not seen yet go to the kernel in one call.
  uintptr_t run = 0;
  auto flush = [&](uintptr_t upto) {
    if (run == 0) return;
    // Either way the range is not tried again: what the kernel could not
    // collapse (a kernel before 6.1, THP "never", no free huge page, a file
    // mapping) stays on 4 KiB pages.
    if (madvise(reinterpret_cast<void*>(run), upto - run, MADV_COLLAPSE) == 0) {
      collapsed += (upto - run) / kPageBytes;
    }
    run = 0;
  };
  for (uintptr_t page = first; page < end; page += kPageBytes) {
    if (seen_.count(page) != 0 || seen_.size() >= kMaxPages) {
      flush(page);
      continue;
    }
    seen_.insert(page);
    if (run == 0) run = page;
  }
  flush(end);
  return collapsed;
}

}  // namespace tfhvd
