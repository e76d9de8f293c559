#include "cc/common/gpu/cuda_symbols.h"

#include "cc/common/gpu/gpu_libraries.h"

// Hidden: these serve this library's own calls only, never another library's
// (TensorFlow's own CUDA runtime).
#define TFHVD_CUDA_FORWARD(ret, name, params, args)                         \
  extern "C" __attribute__((visibility("hidden"))) ret name params {        \
    static auto fn = reinterpret_cast<ret(*) params>(                       \
        tfhvd::GpuLibraries::CudaSymbol(#name));                            \
    return fn args;                                                         \
  }

TFHVD_CUDA_FUNCTIONS(TFHVD_CUDA_FORWARD)

namespace tfhvd {

const std::vector<const char*>& CudaFunctionNames() {
#define TFHVD_CUDA_NAME(ret, name, params, args) #name,
  static const std::vector<const char*> names = {TFHVD_CUDA_FUNCTIONS(TFHVD_CUDA_NAME)};
#undef TFHVD_CUDA_NAME
  return names;
}

}  // namespace tfhvd
