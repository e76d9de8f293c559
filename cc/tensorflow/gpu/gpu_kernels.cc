// GPU registrations of the collective kernels (the CUDA variant). The tensors
// stay in GPU memory; splits, received splits and join's result live in host
// memory. Ordering with TensorFlow's stream: Prepare records an event on the
// op's stream after its inputs' producers; the core's collective stream waits
// for it on the device, and the op completes only after the collective has
// finished, so TensorFlow's consumers (launched after done()) run after it.
#include "cc/common/gpu_backend.h"
#include "cc/tensorflow/collective_kernels.h"
#include "cc/tensorflow/gpu/gpu_stream_placement.h"
#include "xla/stream_executor/stream.h"
#include "xla/stream_executor/stream_executor.h"

namespace tfhvd {
namespace tf {

namespace {

// Marks every entry as a GPU tensor of this op's device and stream.
Status PlaceOnGpu(OpKernelContext* ctx, std::vector<TensorTableEntry>* entries) {
  tensorflow::DeviceContext* dc = ctx->op_device_context();
  stream_executor::Stream* stream = dc != nullptr ? dc->stream() : nullptr;
  if (stream == nullptr) {
    return Status::Precondition("op '" + ctx->op_kernel().name() +
                                "' runs on a GPU but TensorFlow gave it no stream");
  }
  void* handle = stream->platform_specific_handle().stream;
  const int device = stream->parent()->device_ordinal();
  return PlaceOnGpuStream(device, handle, entries);
}

// Any collective kernel, with its tensors on the GPU.
template <class Kernel>
class GpuKernel : public Kernel {
 public:
  using Kernel::Kernel;

 protected:
  Status Prepare(OpKernelContext* ctx, std::vector<TensorTableEntry>* entries) override {
    Status s = Kernel::Prepare(ctx, entries);
    if (!s.ok() || entries->empty()) return s;
    return PlaceOnGpu(ctx, entries);
  }
};

}  // namespace

#define TFHVD_GPU_KERNEL(NAME, CLASS) \
  REGISTER_KERNEL_BUILDER(Name(NAME).Device(tensorflow::DEVICE_GPU), GpuKernel<CLASS>)

TFHVD_GPU_KERNEL("HorovodAllreduce", AllreduceKernel);
TFHVD_GPU_KERNEL("HorovodGroupedAllreduce", GroupedAllreduceKernel);
TFHVD_GPU_KERNEL("HorovodAllgather", NegotiatedShapeKernel<OpType::ALLGATHER>);
TFHVD_GPU_KERNEL("HorovodBroadcast", BroadcastKernel);
TFHVD_GPU_KERNEL("HorovodReducescatter", NegotiatedShapeKernel<OpType::REDUCESCATTER>);
REGISTER_KERNEL_BUILDER(Name("HorovodAlltoall")
                            .Device(tensorflow::DEVICE_GPU)
                            .HostMemory("splits")
                            .HostMemory("received_splits"),
                        GpuKernel<AlltoallKernel>);
// No tensors to move: join's result and the barrier run as on the CPU.
REGISTER_KERNEL_BUILDER(Name("HorovodJoin").Device(tensorflow::DEVICE_GPU).HostMemory("output"),
                        JoinKernel);
REGISTER_KERNEL_BUILDER(Name("HorovodBarrier").Device(tensorflow::DEVICE_GPU), BarrierKernel);

}  // namespace tf
}  // namespace tfhvd
