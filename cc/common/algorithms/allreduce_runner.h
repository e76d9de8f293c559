// Runs an allreduce with the algorithm selection.h picks, over the
// transport's links (or the transport's own allreduce where the table says
// so). Owns the algorithms' state: the shared-memory regions, scratch buffers.
//
//   AllreduceRunner runner(transport, topology, params);
//   Status s = runner.Open();                     // collective, after Init
//   s = runner.Run(in, out, count, DataType::FLOAT32, ReduceOp::SUM);
//   runner.Close();                               // before transport->Finalize()
#ifndef TFHVD_COMMON_ALGORITHMS_ALLREDUCE_RUNNER_H_
#define TFHVD_COMMON_ALGORITHMS_ALLREDUCE_RUNNER_H_

#include <cstdint>

#include "cc/common/algorithms/adasum_allreduce.h"
#include "cc/common/algorithms/gather_allreduce.h"
#include "cc/common/algorithms/hierarchical_allreduce.h"
#include "cc/common/algorithms/ring_allreduce.h"
#include "cc/common/algorithms/selection.h"
#include "cc/common/algorithms/shm_collectives.h"
#include "cc/common/algorithms/topology_links.h"
#include "cc/common/parameters.h"
#include "cc/common/transport/transport.h"

namespace tfhvd {

class AllreduceRunner {
 public:
  AllreduceRunner(Transport* transport, const Topology& topology, const Parameters& params)
      : transport_(transport), topology_(topology), params_(params) {}

  // Collective: maps the shared-memory regions when every rank is on this
  // host; on several hosts with HOROVOD_HIERARCHICAL_ALLREDUCE or
  // HOROVOD_HIERARCHICAL_ALLGATHER, opens the local and cross link sets (and,
  // for the allreduce, shared memory among the local ranks).
  Status Open();
  void Close() {
    local_shm_.Close();
    topology_links_.Close();
    shm_.Close();
  }

  // input may equal output. tensor_counts: the element counts of the tensors
  // of a fused response (Adasum combines each with its own coefficients).
  Status Run(const void* input, void* output, int64_t count, DataType dtype, ReduceOp op,
             const std::vector<int64_t>& tensor_counts = {});

  // Reduce-scatter (a reducescatter's rows): rank q ends with the reduction
  // of elements [first[q], first[q] + counts[q]) of every rank's input in
  // output (counts[rank] elements), multiplied by postscale. The allreduce's
  // table picks the way: shared memory and the ring move only the slices
  // (half an allreduce's bytes); where it picks a one-round or hierarchical
  // allreduce (latency-bound sizes), that allreduce runs and each rank keeps
  // its slice. scratch: room for the whole input (the ring's partial sums).
  Status ReduceScatter(const void* input, void* output, const std::vector<int64_t>& first,
                       const std::vector<int64_t>& counts, DataType dtype, ReduceOp op,
                       double postscale, void* scratch);

  // Whether a fused response of `bytes` goes through shared memory, which
  // reduces its tensors from their inputs into their outputs (RunSegments)
  // in place of a fusion-buffer copy in and out.
  bool TakesSegments(int64_t bytes, ReduceOp op) const;
  // The tensors of a fused response reduced as one, each from its input into
  // its output, multiplied by postscale. Only where TakesSegments.
  Status RunSegments(const std::vector<ShmCollectives::Segment>& segments, DataType dtype,
                     ReduceOp op, double postscale);
  // The shared-memory region of every rank when it is mapped (the job on one
  // host), for the negotiation's bit vector; nullptr otherwise.
  ShmCollectives* shared_memory() { return shm_.active() ? &shm_ : nullptr; }

  // Autotune: hierarchical allreduce on or off from the next allreduce on
  // (every rank switches at the same round). Only takes effect where the
  // hierarchical links are open (hierarchical_ready()).
  void SetHierarchical(bool on) { params_.hierarchical_allreduce = on; }
  bool hierarchical_ready() const { return hierarchical_ready_; }

  // The local and cross link sets when they are open and every host runs the
  // same number of ranks (the hierarchical allgather runs over them), else
  // nullptr.
  const TopologyLinks* host_links() const {
    return hierarchical_ready_ ? &topology_links_ : nullptr;
  }
  const Parameters& params() const { return params_; }

 private:
  AllreduceCase Case(int64_t bytes, ReduceOp op) const;
  Status OpenHierarchical();

  Transport* transport_;
  Topology topology_;
  Parameters params_;
  ShmCollectives shm_;
  GatherAllreduce gather_;
  RingAllreduce ring_;
  AdasumAllreduce adasum_;
  TopologyLinks topology_links_;
  ShmCollectives local_shm_;  // among this host's ranks, for the hierarchical allreduce
  HierarchicalAllreduce hierarchical_;
  bool hierarchical_ready_ = false;
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_ALGORITHMS_ALLREDUCE_RUNNER_H_
