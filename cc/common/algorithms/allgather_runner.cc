#include "cc/common/algorithms/allgather_runner.h"

#include "cc/common/algorithms/algorithm_counts.h"
#include "cc/common/algorithms/hierarchical_allgather.h"
#include "cc/common/algorithms/selection.h"

namespace tfhvd {

Status AllgatherRunner::Run(const TopologyLinks* host_links, ShmAllreduce* shm, const void* in,
                            void* out, const std::vector<int64_t>& bytes_per_rank) {
  AllgatherCase c;
  c.ranks = static_cast<int>(bytes_per_rank.size());
  c.hierarchical_ready = host_links != nullptr;
  for (int64_t b : bytes_per_rank) c.bytes += b;
  c.shm_ready = shm != nullptr;
  const AllgatherAlgorithm a = SelectAllgather(c, params_);
  CountAlgorithm("allgather", AllgatherAlgorithmName(a));
  switch (a) {
    case AllgatherAlgorithm::HIERARCHICAL:
      return HierarchicalAllgather::Run(*host_links, in, out, bytes_per_rank);
    case AllgatherAlgorithm::SHARED_MEMORY:
      return shm->Allgather(in, out, bytes_per_rank);
    case AllgatherAlgorithm::BACKEND:
      return transport_->Allgatherv(in, out, bytes_per_rank);
  }
  return Status::Unknown("no allgather algorithm selected");
}

}  // namespace tfhvd
