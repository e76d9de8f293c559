#include "cc/common/algorithms/hierarchical_allreduce.h"

#include <cstring>

namespace tfhvd {

Status HierarchicalAllreduce::Cross(LinkSet& cross, int64_t gather_max_bytes, const void* input,
                                    void* output, int64_t count, DataType dtype, ReduceOp op) {
  const int64_t bytes = count * static_cast<int64_t>(DataTypeSize(dtype));
  if (cross.size() == 1 || count == 0) {
    if (input != output && bytes > 0) std::memmove(output, input, static_cast<size_t>(bytes));
    return Status();
  }
  if (cross.has_backend_allreduce()) return cross.BackendAllreduce(input, output, count, dtype, op);
  if (bytes <= gather_max_bytes) return cross_gather_.Run(cross, input, output, count, dtype, op);
  return cross_ring_.Run(cross, input, output, count, dtype, op);
}

Status HierarchicalAllreduce::Run(LinkSet& local, LinkSet& cross, ShmCollectives* local_shm,
                                  int64_t gather_max_bytes, const void* input, void* output,
                                  int64_t count, DataType dtype, ReduceOp op) {
  const int n = local.size();
  if (n == 1) return Cross(cross, gather_max_bytes, input, output, count, dtype, op);
  Status s = local_shm != nullptr && local_shm->active()
                 ? local_shm->Allreduce(input, output, count, dtype, op)
                 : local_ring_.ReduceScatter(local, input, output, count, dtype, op);
  if (!s.ok()) return s;
  const int64_t c = RingAllreduce::OwnedChunk(local.rank(), n);
  const int64_t first = count * c / n, last = count * (c + 1) / n;
  char* chunk = static_cast<char*>(output) + first * static_cast<int64_t>(DataTypeSize(dtype));
  s = Cross(cross, gather_max_bytes, chunk, chunk, last - first, dtype, op);
  return s.ok() ? local_ring_.Allgather(local, output, count, dtype) : s;
}

}  // namespace tfhvd
