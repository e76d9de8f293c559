// Runs an allgather with the algorithm selection.h picks: the hierarchical
// one over the host link sets (opened by AllreduceRunner::Open for either
// hierarchical knob), shared memory on one host, the ring over the links
// (Gloo), else the transport's own allgather (MPI).
//
//   AllgatherRunner allgather(transport, params);
//   Status s = allgather.Run(allreduce_runner.host_links(), allreduce_runner.shared_memory(),
//                            in, out, bytes_per_rank);
#ifndef TFHVD_COMMON_ALGORITHMS_ALLGATHER_RUNNER_H_
#define TFHVD_COMMON_ALGORITHMS_ALLGATHER_RUNNER_H_

#include <cstdint>
#include <vector>

#include "cc/common/algorithms/ring_allreduce.h"
#include "cc/common/algorithms/shm_collectives.h"
#include "cc/common/algorithms/topology_links.h"
#include "cc/common/parameters.h"
#include "cc/common/transport/transport.h"

namespace tfhvd {

class AllgatherRunner {
 public:
  AllgatherRunner(Transport* transport, const Parameters& params)
      : transport_(transport), params_(params) {}

  // host_links: the local and cross link sets of a job on several hosts with
  // the same number of ranks each, or nullptr. Every rank contributes
  // bytes_per_rank[rank] bytes from in; out receives them all in rank order.
  // shm: the job's shared-memory regions when every rank is on this host,
  // else nullptr.
  Status Run(const TopologyLinks* host_links, ShmCollectives* shm, const void* in, void* out,
             const std::vector<int64_t>& bytes_per_rank);

 private:
  Transport* transport_;
  Parameters params_;
  RingAllreduce ring_;
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_ALGORITHMS_ALLGATHER_RUNNER_H_
