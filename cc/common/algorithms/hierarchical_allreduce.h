// Allreduce in two levels for jobs on several hosts (HOROVOD_HIERARCHICAL_ALLREDUCE):
//   1. within the host: every local rank ends with its chunk (chunk
//      RingAllreduce::OwnedChunk(local_rank)) reduced over the host: through
//      shared memory when it is mapped among the host's ranks (the whole
//      buffer), else a ring reduce-scatter over the local links;
//   2. across hosts: each local rank allreduces its chunk with the ranks of
//      the same local rank on the other hosts (the cross links: MPI_Allreduce
//      under MPI, else a gather for small chunks or a ring), so every host
//      sends each byte across the network once, spread over all its ranks;
//   3. within the host: a ring allgather of the chunks.
// Every chunk is reduced along one path, so every rank ends with the same
// bits. Needs every host to run the same number of ranks (TopologyLinks::homogeneous).
//
//   HierarchicalAllreduce h;
//   Status s = h.Run(*topo.local, *topo.cross, shm_or_null, 256 << 10,
//                    in, out, count, DataType::FLOAT32, ReduceOp::SUM);
#ifndef TFHVD_COMMON_ALGORITHMS_HIERARCHICAL_ALLREDUCE_H_
#define TFHVD_COMMON_ALGORITHMS_HIERARCHICAL_ALLREDUCE_H_

#include <cstdint>

#include "cc/common/algorithms/gather_allreduce.h"
#include "cc/common/algorithms/ring_allreduce.h"
#include "cc/common/algorithms/shm_collectives.h"
#include "cc/common/transport/link_set.h"

namespace tfhvd {

class HierarchicalAllreduce {
 public:
  // local_shm: the shared-memory allreduce among the local ranks, or nullptr.
  // Cross chunks of at most gather_max_bytes go as one gather. input may
  // equal output.
  Status Run(LinkSet& local, LinkSet& cross, ShmCollectives* local_shm, int64_t gather_max_bytes,
             const void* input, void* output, int64_t count, DataType dtype, ReduceOp op);

 private:
  Status Cross(LinkSet& cross, int64_t gather_max_bytes, const void* input, void* output,
               int64_t count, DataType dtype, ReduceOp op);
  RingAllreduce local_ring_, cross_ring_;
  GatherAllreduce cross_gather_;
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_ALGORITHMS_HIERARCHICAL_ALLREDUCE_H_
