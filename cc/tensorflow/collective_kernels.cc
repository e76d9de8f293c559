// CPU AsyncOpKernels of the collective ops. ComputeAsync only validates,
// allocates what it can and enqueues; the core's background thread completes
// the op through the entry's callback, which calls done().
#include <atomic>
#include <memory>
#include <mutex>

#include "cc/common/operations.h"
#include "cc/tensorflow/tf_adapter.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tfhvd {
namespace tf {

using tensorflow::AsyncOpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;

namespace {

// Shared attrs and plumbing of every collective kernel.
class CollectiveKernel : public AsyncOpKernel {
 public:
  explicit CollectiveKernel(OpKernelConstruction* c) : AsyncOpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("ignore_name_scope", &ignore_name_scope_));
    OP_REQUIRES_OK(c, c->GetAttr("tensor_name", &tensor_name_));
    if (c->HasAttr("reduce_op")) {
      int op = 1;
      OP_REQUIRES_OK(c, c->GetAttr("reduce_op", &op));
      OP_REQUIRES(c, op >= 0 && op <= 5,
                  absl::InvalidArgumentError("reduce_op must be one of Average(0), Sum(1), "
                                             "Adasum(2), Min(3), Max(4), Product(5); got " +
                                             std::to_string(op)));
      reduce_op_ = static_cast<ReduceOp>(op);
    }
    if (c->HasAttr("prescale_factor")) {
      OP_REQUIRES_OK(c, c->GetAttr("prescale_factor", &prescale_));
      OP_REQUIRES_OK(c, c->GetAttr("postscale_factor", &postscale_));
    }
  }

 protected:
  std::string Name() const {
    return NegotiationName(name(), tensor_name_, ignore_name_scope_);
  }

  // Fills the request fields shared by every tensor op.
  bool FillRequest(OpKernelContext* ctx, const DoneCallback& done, OpType type,
                   const Tensor& tensor, const std::string& name, TensorTableEntry* e) {
    Status ready = CheckInitialized();
    if (!ready.ok()) {
      ctx->SetStatus(ToTFStatus(ready));
      done();
      return false;
    }
    DataType dtype;
    if (!ToCoreDataType(tensor.dtype(), &dtype)) {
      ctx->SetStatus(absl::InvalidArgumentError(
          "tensor '" + name + "': unsupported dtype " + tensorflow::DataTypeString(tensor.dtype())));
      done();
      return false;
    }
    e->request.type = type;
    e->request.dtype = dtype;
    e->request.name = name;
    e->request.shape = ToCoreShape(tensor.shape());
    e->request.reduce_op = reduce_op_;
    e->request.prescale = prescale_;
    e->request.postscale = postscale_;
    e->input = tensor.tensor_data().data();
    return true;
  }

  static std::function<void(const Status&)> Completion(OpKernelContext* ctx,
                                                       DoneCallback done) {
    return [ctx, done](const Status& s) {
      if (!s.ok()) ctx->SetStatus(ToTFStatus(s));
      done();
    };
  }

  // Output of a shape known only after negotiation, allocated on demand.
  static std::function<Status(const Shape&, void**)> OutputAllocator(OpKernelContext* ctx,
                                                                      int index) {
    return [ctx, index](const Shape& shape, void** data) -> Status {
      Tensor* out = nullptr;
      absl::Status s = ctx->allocate_output(index, ToTFShape(shape), &out);
      if (!s.ok()) return Status::Unknown("allocating the output failed: " + std::string(s.message()));
      *data = const_cast<char*>(out->tensor_data().data());
      return Status();
    };
  }

  void EnqueueOrFail(OpKernelContext* ctx, const DoneCallback& done, TensorTableEntry e) {
    Status s = Enqueue(std::move(e));
    if (!s.ok()) {
      ctx->SetStatus(ToTFStatus(s));
      done();
    }
  }

  ReduceOp reduce_op_ = ReduceOp::SUM;
  float prescale_ = 1.0f;
  float postscale_ = 1.0f;

 private:
  bool ignore_name_scope_ = false;
  std::string tensor_name_;
};

// Allreduce and broadcast write an output shaped like the input, reusing the
// input buffer when TensorFlow allows it.
class AllreduceKernel : public CollectiveKernel {
 public:
  using CollectiveKernel::CollectiveKernel;
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    const Tensor& in = ctx->input(0);
    TensorTableEntry e;
    if (!FillRequest(ctx, done, OpType::ALLREDUCE, in, Name(), &e)) return;
    Tensor* out = nullptr;
    OP_REQUIRES_OK_ASYNC(ctx, ctx->forward_input_or_allocate_output({0}, 0, in.shape(), &out),
                         done);
    e.output = const_cast<char*>(out->tensor_data().data());
    e.callback = Completion(ctx, done);
    EnqueueOrFail(ctx, done, std::move(e));
  }
};

class BroadcastKernel : public CollectiveKernel {
 public:
  explicit BroadcastKernel(OpKernelConstruction* c) : CollectiveKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("root_rank", &root_rank_));
  }
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    const Tensor& in = ctx->input(0);
    TensorTableEntry e;
    if (!FillRequest(ctx, done, OpType::BROADCAST, in, Name(), &e)) return;
    e.request.root_rank = root_rank_;
    Tensor* out = nullptr;
    OP_REQUIRES_OK_ASYNC(ctx, ctx->forward_input_or_allocate_output({0}, 0, in.shape(), &out),
                         done);
    e.output = const_cast<char*>(out->tensor_data().data());
    e.callback = Completion(ctx, done);
    EnqueueOrFail(ctx, done, std::move(e));
  }

 private:
  int root_rank_ = 0;
};

class AllgatherKernel : public CollectiveKernel {
 public:
  using CollectiveKernel::CollectiveKernel;
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    const Tensor& in = ctx->input(0);
    TensorTableEntry e;
    if (!FillRequest(ctx, done, OpType::ALLGATHER, in, Name(), &e)) return;
    e.allocate_output = OutputAllocator(ctx, 0);
    e.callback = Completion(ctx, done);
    EnqueueOrFail(ctx, done, std::move(e));
  }
};

class ReducescatterKernel : public CollectiveKernel {
 public:
  using CollectiveKernel::CollectiveKernel;
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    const Tensor& in = ctx->input(0);
    TensorTableEntry e;
    if (!FillRequest(ctx, done, OpType::REDUCESCATTER, in, Name(), &e)) return;
    e.allocate_output = OutputAllocator(ctx, 0);
    e.callback = Completion(ctx, done);
    EnqueueOrFail(ctx, done, std::move(e));
  }
};

class AlltoallKernel : public CollectiveKernel {
 public:
  using CollectiveKernel::CollectiveKernel;
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    const Tensor& in = ctx->input(0);
    const Tensor& splits = ctx->input(1);
    TensorTableEntry e;
    if (!FillRequest(ctx, done, OpType::ALLTOALL, in, Name(), &e)) return;
    OP_REQUIRES_ASYNC(ctx, splits.dims() <= 1,
                      absl::InvalidArgumentError("tensor '" + e.request.name +
                                                 "': alltoall splits must be a vector"),
                      done);
    auto flat = splits.flat<int32_t>();
    e.splits.assign(flat.data(), flat.data() + flat.size());
    Tensor* received = nullptr;
    OP_REQUIRES_OK_ASYNC(ctx,
                         ctx->allocate_output(1, tensorflow::TensorShape({GetTopology().size}),
                                              &received),
                         done);
    e.received_splits = received->flat<int32_t>().data();
    e.allocate_output = OutputAllocator(ctx, 0);
    e.callback = Completion(ctx, done);
    EnqueueOrFail(ctx, done, std::move(e));
  }
};

// N tensors negotiated as N entries named <name>_<i>; done() runs once the
// last one completes.
class GroupedAllreduceKernel : public CollectiveKernel {
 public:
  using CollectiveKernel::CollectiveKernel;
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    const int n = ctx->num_inputs();
    if (n == 0) {
      done();
      return;
    }
    auto remaining = std::make_shared<std::atomic<int>>(n);
    auto error = std::make_shared<std::pair<std::mutex, Status>>();
    auto finish_one = [ctx, done, remaining, error](const Status& s) {
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(error->first);
        if (error->second.ok()) error->second = s;
      }
      if (remaining->fetch_sub(1) == 1) {
        if (!error->second.ok()) ctx->SetStatus(ToTFStatus(error->second));
        done();
      }
    };
    const std::string base = Name();
    for (int i = 0; i < n; ++i) {
      const Tensor& in = ctx->input(i);
      TensorTableEntry e;
      Status s = CheckInitialized();
      DataType dtype;
      if (s.ok() && !ToCoreDataType(in.dtype(), &dtype)) {
        s = Status::InvalidArgument("unsupported dtype");
      }
      Tensor* out = nullptr;
      if (s.ok()) {
        absl::Status a = ctx->forward_input_or_allocate_output({i}, i, in.shape(), &out);
        if (!a.ok()) s = Status::Unknown(std::string(a.message()));
      }
      if (s.ok()) {
        e.request.type = OpType::ALLREDUCE;
        e.request.dtype = dtype;
        e.request.name = base + "_" + std::to_string(i);
        e.request.shape = ToCoreShape(in.shape());
        e.request.reduce_op = reduce_op_;
        e.request.prescale = prescale_;
        e.request.postscale = postscale_;
        e.input = in.tensor_data().data();
        e.output = const_cast<char*>(out->tensor_data().data());
        e.callback = finish_one;
        s = Enqueue(std::move(e));
      }
      if (!s.ok()) {
        // This and every later tensor will not be enqueued: account for them.
        for (int k = i; k < n; ++k) finish_one(s);
        return;
      }
    }
  }
};

class JoinKernel : public CollectiveKernel {
 public:
  using CollectiveKernel::CollectiveKernel;
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    Status ready = CheckInitialized();
    OP_REQUIRES_OK_ASYNC(ctx, ToTFStatus(ready), done);
    Tensor* out = nullptr;
    OP_REQUIRES_OK_ASYNC(ctx, ctx->allocate_output(0, tensorflow::TensorShape({}), &out), done);
    TensorTableEntry e;
    e.request.type = OpType::JOIN;
    e.request.dtype = DataType::INT32;
    e.request.name = Name();
    e.join_result = out->flat<int32_t>().data();
    e.callback = Completion(ctx, done);
    EnqueueOrFail(ctx, done, std::move(e));
  }
};

class BarrierKernel : public CollectiveKernel {
 public:
  using CollectiveKernel::CollectiveKernel;
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    Status ready = CheckInitialized();
    OP_REQUIRES_OK_ASYNC(ctx, ToTFStatus(ready), done);
    TensorTableEntry e;
    e.request.type = OpType::BARRIER;
    e.request.dtype = DataType::UINT8;
    e.request.name = Name();
    e.callback = Completion(ctx, done);
    EnqueueOrFail(ctx, done, std::move(e));
  }
};

}  // namespace

#define TFHVD_CPU_KERNEL(NAME, CLASS) \
  REGISTER_KERNEL_BUILDER(Name(NAME).Device(tensorflow::DEVICE_CPU), CLASS)

TFHVD_CPU_KERNEL("HorovodAllreduce", AllreduceKernel);
TFHVD_CPU_KERNEL("HorovodGroupedAllreduce", GroupedAllreduceKernel);
TFHVD_CPU_KERNEL("HorovodAllgather", AllgatherKernel);
TFHVD_CPU_KERNEL("HorovodBroadcast", BroadcastKernel);
TFHVD_CPU_KERNEL("HorovodAlltoall", AlltoallKernel);
TFHVD_CPU_KERNEL("HorovodReducescatter", ReducescatterKernel);
TFHVD_CPU_KERNEL("HorovodJoin", JoinKernel);
TFHVD_CPU_KERNEL("HorovodBarrier", BarrierKernel);

}  // namespace tf
}  // namespace tfhvd
