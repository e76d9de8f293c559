// The CPU variant: no GPU backend (the CUDA variant compiles cc/common/gpu/ and
// cc/common/nccl/ instead of this file; see BUILD).
#include "cc/common/gpu_backend.h"

namespace tfhvd {

std::unique_ptr<GpuBackend> CreateGpuBackend() { return nullptr; }
bool CudaBuilt() { return false; }
bool NcclBuilt() { return false; }
void SetGpuLibraryDirs(std::vector<std::string>) {}
Status LoadGpuLibraries() {
  return Status::Precondition("this tf_hvd build has no CUDA support");
}

Status RecordReadyEvent(int, void*, std::shared_ptr<GpuEvent>*) {
  return Status::Precondition(
      "this tf_hvd build has no CUDA support (build it with tools/build/build_lib.sh --cuda)");
}

}  // namespace tfhvd
