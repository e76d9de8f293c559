// Many device-to-device copies in one kernel launch: a fused response's copies
// into and out of the device fusion buffer. Every cudaMemcpyAsync costs the
// host microseconds, so a fused group of a few dozen tensors spent about half
// its time launching copies (the figures: docs/gpu.md); a launch copies up
// to kMaxRanges ranges. The kernel is compiled at first use with NVRTC
// (runtime_compiler.h); without NVRTC, Get fails and the caller copies range
// by range. HOROVOD_BATCH_D2D_MEMCOPIES=0 keeps the per-range copies.
//
//   const BatchedCopy* copy = nullptr;
//   Status s = BatchedCopy::Get(device, &copy);   // compiled once, loaded once per device
//   if (s.ok()) s = copy->Run({{dst0, src0, bytes0}, {dst1, src1, bytes1}}, stream);
#ifndef TFHVD_COMMON_GPU_BATCHED_COPY_H_
#define TFHVD_COMMON_GPU_BATCHED_COPY_H_

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <vector>

#include "cc/common/common.h"

namespace tfhvd {

struct CopyRange {
  void* dst;
  const void* src;
  size_t bytes;
};

class BatchedCopy {
 public:
  // Ranges per launch: the kernel takes them by value (64 x 24 bytes, within
  // the 4 KiB of kernel parameters every GPU accepts).
  static constexpr int kMaxRanges = 64;
  static constexpr int kThreads = 256;

  // The copier for a device (cudaSetDevice(device) on the calling thread); the
  // same error on every call when NVRTC is missing or the kernel cannot be
  // compiled or loaded (then copy range by range).
  static Status Get(int device, const BatchedCopy** out);
  // The kernel's CUDA C++ (compiled by Get; also for a test that compiles it
  // without a GPU).
  static const std::string& Source();

  // Enqueues the copies on stream (ranges must not overlap; empty ones are
  // skipped): ceil(n / kMaxRanges) launches.
  Status Run(const std::vector<CopyRange>& ranges, cudaStream_t stream) const;

 private:
  using Launch = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void**, void**);
  BatchedCopy(CUfunction function, Launch launch) : function_(function), launch_(launch) {}
  CUfunction function_;  // in the device's primary context
  Launch launch_;        // cuLaunchKernel
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_GPU_BATCHED_COPY_H_
