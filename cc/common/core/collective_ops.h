// Performs one negotiated Response on this rank: stages tensors through the
// fusion buffer when needed, runs the collective, applies scaling,
// allocates variable-size outputs and completes every entry's callback.
#ifndef TFHVD_COMMON_CORE_COLLECTIVE_OPS_H_
#define TFHVD_COMMON_CORE_COLLECTIVE_OPS_H_

#include <vector>

#include "cc/common/algorithms/allgather_runner.h"
#include "cc/common/algorithms/allreduce_runner.h"
#include "cc/common/core/fusion_buffer.h"
#include "cc/common/gpu_backend.h"
#include "cc/common/negotiation/message.h"
#include "cc/common/negotiation/tensor_queue.h"
#include "cc/common/transport/transport.h"

namespace tfhvd {

class CollectiveOps {
 public:
  // allreduce runs every allreduce (the algorithm per response is its choice);
  // gpu (nullptr in the CPU variant) runs or stages responses on GPU tensors.
  CollectiveOps(Transport* transport, AllreduceRunner* allreduce, const Topology& topology,
                GpuBackend* gpu = nullptr)
      : transport_(transport),
        allreduce_(allreduce),
        allgather_(transport, allreduce->params()),
        topology_(topology),
        gpu_(gpu) {}

  // entries[i] belongs to response.names[i]; present[i] is false where this
  // rank has no such tensor (it joined early). Returns a transport failure,
  // which is fatal for the job; per-tensor errors go to the callbacks.
  Status Perform(const Response& response, std::vector<TensorTableEntry>& entries,
                 const std::vector<bool>& present);

 private:
  Status StageGpuTensors(const Response& r, std::vector<TensorTableEntry>& e,
                         const std::vector<bool>& present);
  Status Allreduce(const Response& r, std::vector<TensorTableEntry>& e,
                   const std::vector<bool>& present);
  Status Allgather(const Response& r, TensorTableEntry* e, bool present, size_t index);
  Status Broadcast(const Response& r, TensorTableEntry& e);
  Status Alltoall(const Response& r, TensorTableEntry& e);
  Status Reducescatter(const Response& r, TensorTableEntry& e);
  // Every tensor straight from its input to its output through shared memory,
  // absent ones (a joined rank's) as the op's identity; divides for Average,
  // then applies postscale.
  Status AllreduceSegments(const Response& r,
                           std::vector<TensorTableEntry>& entries,
                           const std::vector<bool>& present);
  // postscale / size for Average, postscale otherwise.
  double PostScaleFactor(const Response& r) const;
  void PostScale(const Response& r, void* buf, size_t n);

  Transport* transport_;
  AllreduceRunner* allreduce_;
  AllgatherRunner allgather_;  // over allreduce_'s host link sets
  Topology topology_;
  GpuBackend* gpu_;
  FusionBuffer fusion_;
  FusionBuffer scratch_;
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_CORE_COLLECTIVE_OPS_H_
