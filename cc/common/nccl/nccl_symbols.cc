#include "cc/common/nccl/nccl_symbols.h"

#include "cc/common/gpu/gpu_libraries.h"

// Hidden, as cc/common/gpu/cuda_symbols.cc.
#define TFHVD_NCCL_FORWARD(ret, name, params, args)                         \
  extern "C" __attribute__((visibility("hidden"))) ret name params {        \
    static auto fn = reinterpret_cast<ret(*) params>(                       \
        tfhvd::GpuLibraries::NcclSymbol(#name));                            \
    return fn args;                                                         \
  }

TFHVD_NCCL_FUNCTIONS(TFHVD_NCCL_FORWARD)
