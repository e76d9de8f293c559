// The GPU backend of the CUDA variant: runs responses on GPU tensors with NCCL
// when every rank's tensors are on a GPU and the HOROVOD_GPU_* knobs choose
// NCCL, and stages GPU tensors through host memory otherwise.
//
// Ordering: the collective runs on the backend's own stream after waiting (on
// the device) for each tensor's ready event, recorded on the framework's
// stream when the op was enqueued. The background thread then waits for the
// backend's own event (polling NCCL's async error, bounded by
// HOROVOD_NCCL_TIMEOUT_SECONDS) before it completes the ops, so the framework's
// consumers, launched after completion, see the results.
#ifndef TFHVD_COMMON_NCCL_NCCL_BACKEND_H_
#define TFHVD_COMMON_NCCL_NCCL_BACKEND_H_

#include <memory>
#include <string>
#include <vector>

#include "cc/common/gpu/batched_copy.h"
#include "cc/common/gpu/cuda_context.h"
#include "cc/common/gpu_backend.h"
#include "cc/common/negotiation/message.h"
#include "cc/common/nccl/nccl_communicator.h"
#include "cc/common/parameters.h"
#include "cc/common/negotiation/tensor_queue.h"
#include "cc/common/transport/transport.h"

namespace tfhvd {

class NcclBackend : public GpuBackend {
 public:
  Status Open(Transport* transport, const Topology& topology, const Parameters& params) override;
  void Close() override;
  bool RunsOnDevice(const Response& r) const override;
  Status Perform(const Response& r, std::vector<TensorTableEntry>& entries,
                 const std::vector<bool>& present) override;
  Status StageThroughHost(TensorTableEntry* entry) override;

 private:
  // What carries op `type` on GPU tensors ("nccl", "mpi", "gloo").
  const std::string& Choice(OpType type) const;
  // The job's communicator and the one-rank one used for scaling, on device.
  Status Communicators(int device);
  // Multiplies n elements at buf by factor on the device (PreMulSum on the
  // one-rank communicator); nothing when factor is 1.
  Status Scale(void* buf, size_t n, DataType dtype, double factor);
  // An allreduce of n elements in -> out with r's op; Sum/Average fold the
  // scaling factors into one PreMulSum operator.
  Status AllreduceOne(const Response& r, const void* in, void* out, size_t n);
  Status Allreduce(const Response& r, std::vector<TensorTableEntry>& entries);
  // The fusion buffer's copies on our stream: one batched kernel launch
  // (HOROVOD_BATCH_D2D_MEMCOPIES), else one cudaMemcpyAsync per range.
  Status CopyAll(const std::vector<CopyRange>& ranges);
  Status Allgather(const Response& r, TensorTableEntry& e, size_t index);
  Status Broadcast(const Response& r, TensorTableEntry& e);
  Status Alltoall(const Response& r, TensorTableEntry& e);
  Status Reducescatter(const Response& r, TensorTableEntry& e);
  // e.allocate_output, ordered after the framework stream's work so far.
  Status AllocateOutput(TensorTableEntry& e, const Shape& shape, void** out);
  // Waits for everything enqueued on the stream, polling NCCL's async errors.
  Status Finish(const std::string& what);

  Transport* transport_ = nullptr;
  Topology topology_;
  Parameters params_;
  int device_ = -1;
  CudaContext* ctx_ = nullptr;
  std::unique_ptr<NcclCommunicator> comm_;
  std::unique_ptr<NcclCommunicator> self_;
  DeviceBuffer fusion_;
  bool fusion_warned_ = false;
  const BatchedCopy* batched_ = nullptr;  // the device's copier, once found
  bool batched_failed_ = false;           // warned once; copies go range by range
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_NCCL_NCCL_BACKEND_H_
