#include "cc/common/algorithms/allgather_runner.h"

#include <cstring>

#include "cc/common/algorithms/algorithm_counts.h"
#include "cc/common/algorithms/hierarchical_allgather.h"
#include "cc/common/algorithms/selection.h"

namespace tfhvd {

Status AllgatherRunner::Run(const TopologyLinks* host_links, ShmCollectives* shm, const void* in,
                            void* out, const std::vector<int64_t>& bytes_per_rank) {
  AllgatherCase c;
  c.ranks = static_cast<int>(bytes_per_rank.size());
  c.hierarchical_ready = host_links != nullptr;
  for (int64_t b : bytes_per_rank) c.bytes += b;
  c.shm_ready = shm != nullptr;
  c.backend_tuned = transport_ != nullptr && transport_->has_backend_allreduce();
  const AllgatherAlgorithm a = SelectAllgather(c, params_);
  CountAlgorithm("allgather", AllgatherAlgorithmName(a));
  switch (a) {
    case AllgatherAlgorithm::HIERARCHICAL:
      return HierarchicalAllgather::Run(*host_links, in, out, bytes_per_rank);
    case AllgatherAlgorithm::SHARED_MEMORY:
      return shm->Allgather(in, out, bytes_per_rank);
    case AllgatherAlgorithm::RING: {
      std::vector<int64_t> first(bytes_per_rank.size(), 0);
      for (size_t q = 1; q < first.size(); ++q) first[q] = first[q - 1] + bytes_per_rank[q - 1];
      Links& links = *transport_->links();
      const size_t me = static_cast<size_t>(links.rank());
      char* mine = static_cast<char*>(out) + first[me];
      if (bytes_per_rank[me] > 0 && mine != in)
        std::memcpy(mine, in, static_cast<size_t>(bytes_per_rank[me]));
      return ring_.Allgather(links, out, first, bytes_per_rank, DataType::UINT8);
    }
    case AllgatherAlgorithm::BACKEND:
      return transport_->Allgatherv(in, out, bytes_per_rank);
  }
  return Status::Unknown("no allgather algorithm selected");
}

}  // namespace tfhvd
