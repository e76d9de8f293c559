// The CUDA runtime and NCCL, found and loaded when the first GPU tensor needs them
// instead of linked: one library serves CPU and GPU machines, as TensorFlow's own wheel
// does. They come from the nvidia-* wheels that `tensorflow[and-cuda]` installs (the
// Python environment gives their lib/ folders) or from the loader's path.
//
//   GpuLibraries::SetSearchDirs({".../site-packages/nvidia/cuda_runtime/lib", ...});
//   Status s = GpuLibraries::Load();   // RecordReadyEvent: the first GPU tensor
//   cudaSetDevice(0);                  // now resolves into libcudart.so.12
#ifndef TFHVD_COMMON_GPU_GPU_LIBRARIES_H_
#define TFHVD_COMMON_GPU_GPU_LIBRARIES_H_

#include <string>
#include <vector>

#include "cc/common/common.h"

namespace tfhvd {

class GpuLibraries {
 public:
  // Directories tried before the loader's path.
  static void SetSearchDirs(std::vector<std::string> dirs);
  // Loads libcudart.so.12 and libnccl.so.2 once per process; later calls return the first
  // outcome. The error says what was tried and what to install.
  static Status Load();
  // The address of `name` in the CUDA runtime or NCCL, loading them first if needed;
  // aborts with the load's message if they cannot be loaded (callers that can fail
  // cleanly call Load first: every GPU tensor passes RecordReadyEvent).
  static void* CudaSymbol(const char* name);
  static void* NcclSymbol(const char* name);

  // Load's search, without its once-per-process memory: the CUDA runtime and NCCL from
  // `dirs` (or already in the process, or on the loader's path) into *cudart and *nccl;
  // else a Precondition saying what was tried, which library was refused and why (a
  // missing file, a runtime older than 12.5, an NCCL older than 2.18) and what to install.
  static Status Open(const std::vector<std::string>& dirs, void** cudart, void** nccl);
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_GPU_GPU_LIBRARIES_H_
