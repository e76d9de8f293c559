#include "cc/common/gpu/pinned_pool.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>

#include "cc/common/logging.h"

namespace tfhvd {

namespace {

struct Block {
  void* data;
  bool pinned;
};

class Pool {
 public:
  Status Get(size_t bytes, std::shared_ptr<void>* out) {
    const size_t size = RoundUp(bytes);
    Block block{nullptr, true};
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.find(size);
      if (it != free_.end()) {
        block = it->second;
        cached_ -= size;
        free_.erase(it);
      }
    }
    if (block.data == nullptr) {
      // Portable: usable as pinned memory from every device's context.
      if (cudaHostAlloc(&block.data, size, cudaHostAllocPortable) != cudaSuccess) {
        cudaGetLastError();  // not sticky; fall back to pageable memory
        block = Block{std::malloc(size), false};
        if (block.data == nullptr) {
          return Status::Unknown("out of host memory staging " + std::to_string(bytes) +
                                 " bytes of a GPU tensor");
        }
        std::call_once(warned_, [size] {
          TFHVD_LOG(WARNING) << "could not page-lock " << size
                             << " bytes of host memory; host staging uses pageable memory "
                                "(slower copies)";
        });
      }
    }
    *out = std::shared_ptr<void>(block.data, [this, size, block](void*) { Put(size, block); });
    return Status();
  }

 private:
  // Size classes: multiples of a quarter of the power of two below (at least
  // 64 KiB), so that a block wastes under a quarter of itself (a power of two
  // took 512 MiB for 256 MiB and one byte, and the cache then gave it back).
  static size_t RoundUp(size_t bytes) {
    size_t power = size_t(1) << 16;
    while (power * 2 <= bytes) power <<= 1;
    const size_t step = std::max(power / 4, size_t(1) << 16);
    return (bytes + step - 1) / step * step;
  }

  void Put(size_t size, Block block) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (cached_ + size <= PinnedPool::kMaxCachedBytes) {
        free_.emplace(size, block);
        cached_ += size;
        return;
      }
    }
    if (block.pinned) cudaFreeHost(block.data);
    else std::free(block.data);
  }

  std::mutex mutex_;
  std::multimap<size_t, Block> free_;  // by rounded size
  size_t cached_ = 0;
  std::once_flag warned_;
};

}  // namespace

Status PinnedPool::Get(size_t bytes, std::shared_ptr<void>* out) {
  static Pool* pool = new Pool();  // never freed: blocks may outlive static destructors
  return pool->Get(bytes, out);
}

}  // namespace tfhvd
