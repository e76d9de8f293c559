// Page-locked host memory for host staging, kept for reuse. A copy between the
// device and pageable memory goes through the driver's own bounce buffers, and
// a fresh host buffer per op is zero-filled and page-faulted each time: a
// staged allreduce ran several times slower that way (the figures:
// docs/gpu.md, "Host staging uses page-locked blocks").
// Blocks are rounded up to a power of two so that steps of the same shapes
// reuse them; freed blocks stay cached up to a bound.
//
//   std::shared_ptr<void> block;
//   Status s = PinnedPool::Get(bytes, &block);   // block.get(): >= bytes, pinned
//   // ... when the last copy of `block` goes, the memory returns to the pool
#ifndef TFHVD_COMMON_GPU_PINNED_POOL_H_
#define TFHVD_COMMON_GPU_PINNED_POOL_H_

#include <cstddef>
#include <memory>

#include "cc/common/common.h"

namespace tfhvd {

class PinnedPool {
 public:
  // A block of at least `bytes` (> 0) of page-locked host memory. Where the
  // system refuses to pin more, pageable memory instead (correct, slower;
  // logged once).
  static Status Get(size_t bytes, std::shared_ptr<void>* out);

  // Most bytes of free blocks kept for reuse; more are given back.
  static constexpr size_t kMaxCachedBytes = size_t(1) << 30;
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_GPU_PINNED_POOL_H_
