#include "cc/common/algorithms/gather_allreduce.h"

#include "cc/common/transport/link_collectives.h"
#include "cc/common/kernels/reduce_kernels.h"

namespace tfhvd {

Status GatherAllreduce::Run(Links& links, const void* input, void* output, int64_t count,
                            DataType dtype, ReduceOp op) {
  const size_t n = static_cast<size_t>(count);
  const size_t bytes = n * DataTypeSize(dtype);
  blocks_.resize(static_cast<size_t>(links.size()) * bytes);
  Status s = AllgatherBlocks(links, input, blocks_.data(), bytes);
  if (!s.ok()) return s;
  const char* blocks = blocks_.data();
  ReduceBuffers(dtype, op, output, blocks, blocks + bytes, n);
  for (size_t r = 2; r < static_cast<size_t>(links.size()); ++r) {
    ReduceBuffers(dtype, op, output, output, blocks + r * bytes, n);
  }
  return Status();
}

}  // namespace tfhvd
