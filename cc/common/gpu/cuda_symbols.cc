#include "cc/common/gpu/cuda_symbols.h"

#include "cc/common/forwarder.h"
#include "cc/common/gpu/gpu_libraries.h"

#define TFHVD_CUDA_FORWARD(ret, name, params, args) \
  TFHVD_FORWARD(tfhvd::GpuLibraries::CudaSymbol, ret, name, params, args)

TFHVD_CUDA_FUNCTIONS(TFHVD_CUDA_FORWARD)

namespace tfhvd {

const std::vector<const char*>& CudaFunctionNames() {
#define TFHVD_CUDA_NAME(ret, name, params, args) #name,
  static const std::vector<const char*> names = {TFHVD_CUDA_FUNCTIONS(TFHVD_CUDA_NAME)};
#undef TFHVD_CUDA_NAME
  return names;
}

}  // namespace tfhvd
