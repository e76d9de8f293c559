// A persistent, growable host buffer reused by every fused or staged
// collective, so the hot path does not allocate.
#ifndef TFHVD_COMMON_CORE_FUSION_BUFFER_H_
#define TFHVD_COMMON_CORE_FUSION_BUFFER_H_

#include <cstddef>
#include <cstdlib>

namespace tfhvd {

class FusionBuffer {
 public:
  FusionBuffer() = default;
  FusionBuffer(const FusionBuffer&) = delete;
  FusionBuffer& operator=(const FusionBuffer&) = delete;
  ~FusionBuffer() { std::free(data_); }

  // Returns a 64-byte aligned buffer of at least bytes; keeps it for reuse.
  void* Get(size_t bytes) {
    if (bytes > capacity_) {
      std::free(data_);
      capacity_ = (bytes + 63) / 64 * 64;
      data_ = std::aligned_alloc(64, capacity_);
    }
    return data_;
  }

 private:
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_CORE_FUSION_BUFFER_H_
