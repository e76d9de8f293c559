// The compile-time half of the Horovod ops inside XLA (tf.function(jit_compile=True),
// Keras jit_compile=True): XLA op kernels that turn HorovodAllreduce,
// HorovodGroupedAllreduce, HorovodAllgather and HorovodBroadcast into one
// side-effecting custom call each (target kXlaCallTarget), whose handler
// (xla_custom_call.h) hands the buffers to the core at run time. The op's
// attributes and the name it negotiates under travel in the call's
// backend_config. The name is the node name (or tensor_name), as for the
// graph kernels: the same on every rank and in every run of the compiled code.
// Ops without a kernel here (alltoall, reducescatter, join, barrier) fail to
// compile with TensorFlow's error naming the op.
#include <string>
#include <vector>

#include "cc/common/operations.h"
#include "cc/tensorflow/tf_adapter.h"
#include "cc/tensorflow/xla/xla_call_config.h"
#include "tensorflow/compiler/tf2xla/xla_op_kernel.h"
#include "tensorflow/compiler/tf2xla/xla_op_registry.h"
#include "xla/hlo/builder/xla_builder.h"
#include "xla/shape_util.h"

namespace tfhvd {
namespace tf {

namespace {

using tensorflow::OpKernelConstruction;
using tensorflow::XlaOpKernel;
using tensorflow::XlaOpKernelContext;

// Reads the attributes every Horovod collective op has into a config.
class XlaCollectiveKernel : public XlaOpKernel {
 public:
  XlaCollectiveKernel(OpKernelConstruction* c, XlaCallKind kind) : XlaOpKernel(c) {
    config_.kind = kind;
    bool ignore_name_scope = false;
    std::string tensor_name;
    OP_REQUIRES_OK(c, c->GetAttr("ignore_name_scope", &ignore_name_scope));
    OP_REQUIRES_OK(c, c->GetAttr("tensor_name", &tensor_name));
    config_.tensor_name = NegotiationName(name(), tensor_name, ignore_name_scope);
    int32_t set = 0;
    OP_REQUIRES_OK(c, c->GetAttr("process_set_id", &set));
    config_.process_set_id = set;
    if (c->HasAttr("reduce_op")) {
      int32_t op = 1;
      OP_REQUIRES_OK(c, c->GetAttr("reduce_op", &op));
      OP_REQUIRES(c, op >= 0 && op <= 5,
                  absl::InvalidArgumentError("reduce_op must be one of Average(0), Sum(1), "
                                             "Adasum(2), Min(3), Max(4), Product(5); got " +
                                             std::to_string(op)));
      config_.reduce_op = op;
    }
    if (c->HasAttr("prescale_factor")) {
      OP_REQUIRES_OK(c, c->GetAttr("prescale_factor", &config_.prescale));
      OP_REQUIRES_OK(c, c->GetAttr("postscale_factor", &config_.postscale));
    }
    if (c->HasAttr("root_rank")) {
      int32_t root = 0;
      OP_REQUIRES_OK(c, c->GetAttr("root_rank", &root));
      config_.root_rank = root;
    }
  }

 protected:
  // The custom call on `operands` with result shape `shape`.
  xla::XlaOp Call(XlaOpKernelContext* ctx, const std::vector<xla::XlaOp>& operands,
                  const xla::Shape& shape) const {
    return xla::CustomCall(ctx->builder(), kXlaCallTarget, operands, shape,
                           EncodeXlaCallConfig(config_), /*has_side_effect=*/true,
                           /*output_operand_aliasing=*/{}, /*literal=*/nullptr,
                           xla::CustomCallSchedule::SCHEDULE_NONE,
                           xla::CustomCallApiVersion::API_VERSION_TYPED_FFI);
  }

  // Fails the compilation unless Horovod runs and this rank is in the op's set;
  // *set_size: the set's size.
  bool CheckMember(XlaOpKernelContext* ctx, int* set_size) const {
    Status s = CheckInitialized();
    Topology topology;
    bool member = false;
    if (s.ok()) s = ProcessSetTopology(static_cast<int32_t>(config_.process_set_id), &topology, &member);
    if (s.ok() && !member) {
      s = Status::InvalidArgument("tensor '" + config_.tensor_name + "': this rank is not in process set " +
                                  std::to_string(config_.process_set_id));
    }
    if (!s.ok()) {
      ctx->CtxFailure(ToTFStatus(s));
      return false;
    }
    *set_size = topology.size;
    return true;
  }

  XlaCallConfig config_;
};

// Allreduce and broadcast: one operand, a result of the same shape.
template <XlaCallKind kKind>
class XlaSameShapeKernel : public XlaCollectiveKernel {
 public:
  explicit XlaSameShapeKernel(OpKernelConstruction* c) : XlaCollectiveKernel(c, kKind) {}
  void Compile(XlaOpKernelContext* ctx) override {
    auto shape = ctx->InputXlaShape(0);
    OP_REQUIRES_OK(ctx, shape.status());
    ctx->SetOutput(0, Call(ctx, {ctx->Input(0)}, *shape));
  }
};

// N operands reduced as one group; a tuple of N results.
class XlaGroupedAllreduceKernel : public XlaCollectiveKernel {
 public:
  explicit XlaGroupedAllreduceKernel(OpKernelConstruction* c)
      : XlaCollectiveKernel(c, XlaCallKind::GROUPED_ALLREDUCE) {}
  void Compile(XlaOpKernelContext* ctx) override {
    const int n = ctx->num_inputs();
    if (n == 0) return;
    std::vector<xla::XlaOp> operands;
    std::vector<xla::Shape> shapes;
    for (int i = 0; i < n; ++i) {
      auto shape = ctx->InputXlaShape(i);
      OP_REQUIRES_OK(ctx, shape.status());
      operands.push_back(ctx->Input(i));
      shapes.push_back(*shape);
    }
    xla::XlaOp tuple = Call(ctx, operands, xla::ShapeUtil::MakeTupleShape(shapes));
    for (int i = 0; i < n; ++i) ctx->SetOutput(i, xla::GetTupleElement(tuple, i));
  }
};

// Allgather: XLA needs the result's rows at compile time, so every rank must
// send the same number of rows (this rank's rows times the set's size); the
// handler fails the op, naming the tensor, when they differ.
class XlaAllgatherKernel : public XlaCollectiveKernel {
 public:
  explicit XlaAllgatherKernel(OpKernelConstruction* c)
      : XlaCollectiveKernel(c, XlaCallKind::ALLGATHER) {}
  void Compile(XlaOpKernelContext* ctx) override {
    auto shape = ctx->InputXlaShape(0);
    OP_REQUIRES_OK(ctx, shape.status());
    OP_REQUIRES(ctx, shape->dimensions().size() >= 1,
                absl::InvalidArgumentError("allgather of tensor '" + config_.tensor_name +
                                           "' needs a tensor of rank 1 or more"));
    int set_size = 0;
    if (!CheckMember(ctx, &set_size)) return;
    xla::Shape out = *shape;
    out.set_dimensions(0, shape->dimensions(0) * set_size);
    ctx->SetOutput(0, Call(ctx, {ctx->Input(0)}, out));
  }
};

}  // namespace

REGISTER_XLA_OP(Name("HorovodAllreduce"), XlaSameShapeKernel<XlaCallKind::ALLREDUCE>);
REGISTER_XLA_OP(Name("HorovodBroadcast"), XlaSameShapeKernel<XlaCallKind::BROADCAST>);
REGISTER_XLA_OP(Name("HorovodGroupedAllreduce"), XlaGroupedAllreduceKernel);
REGISTER_XLA_OP(Name("HorovodAllgather"), XlaAllgatherKernel);

}  // namespace tf
}  // namespace tfhvd
