// Synchronous kernels of HorovodSize/Rank/LocalSize/LocalRank.
#include "cc/common/operations.h"
#include "cc/tensorflow/tf_adapter.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tfhvd {
namespace tf {

namespace {

template <int Topology::*Field>
class TopologyKernel : public tensorflow::OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(tensorflow::OpKernelContext* ctx) override {
    OP_REQUIRES_OK(ctx, ToTFStatus(CheckInitialized()));
    tensorflow::Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, tensorflow::TensorShape({}), &out));
    out->scalar<int32_t>()() = GetTopology().*Field;
  }
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("HorovodSize").Device(tensorflow::DEVICE_CPU),
                        TopologyKernel<&Topology::size>);
REGISTER_KERNEL_BUILDER(Name("HorovodRank").Device(tensorflow::DEVICE_CPU),
                        TopologyKernel<&Topology::rank>);
REGISTER_KERNEL_BUILDER(Name("HorovodLocalSize").Device(tensorflow::DEVICE_CPU),
                        TopologyKernel<&Topology::local_size>);
REGISTER_KERNEL_BUILDER(Name("HorovodLocalRank").Device(tensorflow::DEVICE_CPU),
                        TopologyKernel<&Topology::local_rank>);

}  // namespace tf
}  // namespace tfhvd
