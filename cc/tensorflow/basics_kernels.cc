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

// HorovodSize of a process set: its number of ranks, on members and others.
class SizeKernel : public tensorflow::OpKernel {
 public:
  explicit SizeKernel(tensorflow::OpKernelConstruction* c) : OpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("process_set_id", &process_set_id_));
  }
  void Compute(tensorflow::OpKernelContext* ctx) override {
    OP_REQUIRES_OK(ctx, ToTFStatus(CheckInitialized()));
    int size = GetTopology().size;
    if (process_set_id_ != 0) {
      size = -1;
      for (const auto& set : ProcessSetRanks())
        if (set.first == process_set_id_) size = static_cast<int>(set.second.size());
      OP_REQUIRES(ctx, size >= 0,
                  absl::InvalidArgumentError("Process set does not exist or has not been "
                                             "registered (process set id " +
                                             std::to_string(process_set_id_) + ")."));
    }
    tensorflow::Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, tensorflow::TensorShape({}), &out));
    out->scalar<int32_t>()() = size;
  }

 private:
  int32_t process_set_id_ = 0;
};

REGISTER_KERNEL_BUILDER(Name("HorovodSize").Device(tensorflow::DEVICE_CPU), SizeKernel);
REGISTER_KERNEL_BUILDER(Name("HorovodRank").Device(tensorflow::DEVICE_CPU),
                        TopologyKernel<&Topology::rank>);
REGISTER_KERNEL_BUILDER(Name("HorovodLocalSize").Device(tensorflow::DEVICE_CPU),
                        TopologyKernel<&Topology::local_size>);
REGISTER_KERNEL_BUILDER(Name("HorovodLocalRank").Device(tensorflow::DEVICE_CPU),
                        TopologyKernel<&Topology::local_rank>);

}  // namespace tf
}  // namespace tfhvd
