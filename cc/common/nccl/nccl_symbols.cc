#include "cc/common/nccl/nccl_symbols.h"

#include "cc/common/forwarder.h"
#include "cc/common/gpu/gpu_libraries.h"

#define TFHVD_NCCL_FORWARD(ret, name, params, args) \
  TFHVD_FORWARD(tfhvd::GpuLibraries::NcclSymbol, ret, name, params, args)

TFHVD_NCCL_FUNCTIONS(TFHVD_NCCL_FORWARD)
