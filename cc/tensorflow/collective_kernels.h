// The collective AsyncOpKernels, one class per op, shared by every device's
// registration: CPU (collective_kernels.cc), GPU (gpu/gpu_kernels.cc, the CUDA
// variant) and any later kind (XLA) sit beside them. One ComputeAsync serves
// them all: it validates, lets the op fill its entries (allocating what it
// can) and enqueues; the core's background thread completes the op through the
// entries' callbacks, the last of which calls done().
#ifndef TFHVD_TENSORFLOW_COLLECTIVE_KERNELS_H_
#define TFHVD_TENSORFLOW_COLLECTIVE_KERNELS_H_

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cc/common/operations.h"
#include "cc/tensorflow/tf_adapter.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tfhvd {
namespace tf {

using tensorflow::AsyncOpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;


inline Status FromTF(const absl::Status& s) {
  if (s.ok()) return Status();
  if (absl::IsInvalidArgument(s)) return Status::InvalidArgument(std::string(s.message()));
  return Status::Unknown(std::string(s.message()));
}

// The one ComputeAsync of every collective kernel: check that Horovod runs,
// let the op fill its entries (request, input, output), give them to the core
// (a group at once) and complete the op through the entries' callbacks, done()
// running once after the last. Each op supplies only Prepare.
class CollectiveKernel : public AsyncOpKernel {
 public:
  explicit CollectiveKernel(OpKernelConstruction* c) : AsyncOpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("ignore_name_scope", &ignore_name_scope_));
    OP_REQUIRES_OK(c, c->GetAttr("tensor_name", &tensor_name_));
    if (c->HasAttr("process_set_id")) {
      OP_REQUIRES_OK(c, c->GetAttr("process_set_id", &process_set_id_));
    }
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

  // Starting one only enqueues it: TensorFlow may start it inline, on the
  // thread that completed its input (in a chain of collectives, the core's
  // background thread), instead of waking an inter-op thread for it.
  bool IsExpensive() override { return false; }

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) final {
    std::vector<TensorTableEntry> entries;
    Status s = CheckInitialized();
    if (s.ok()) s = Prepare(ctx, &entries);
    if (s.ok() && entries.empty()) {
      done();  // nothing to reduce (an empty group)
      return;
    }
    if (s.ok()) {
      const size_t n = entries.size();
      auto finish = Completion(ctx, std::move(done), n);
      for (auto& e : entries) e.callback = finish;
      s = grouped_ ? EnqueueGroup(Name(), std::move(entries), process_set_id_)
                   : Enqueue(std::move(entries[0]), process_set_id_);
      if (!s.ok()) {
        for (size_t i = 0; i < n; ++i) finish(s);  // no callback ran
      }
      return;
    }
    ctx->SetStatus(ToTFStatus(s));
    done();
  }

 protected:
  // Fills the entries this op hands to the core (a group's); by default the
  // one entry PrepareOne fills.
  virtual Status Prepare(OpKernelContext* ctx, std::vector<TensorTableEntry>* entries) {
    entries->resize(1);
    return PrepareOne(ctx, &entries->back());
  }
  virtual Status PrepareOne(OpKernelContext*, TensorTableEntry*) { return Status(); }

  std::string Name() const { return NegotiationName(name(), tensor_name_, ignore_name_scope_); }

  // An entry for input `index` negotiated as `name`, with the op's attrs.
  Status TensorEntry(OpKernelContext* ctx, int index, OpType type, const std::string& name,
                     TensorTableEntry* e) const {
    const Tensor& tensor = ctx->input(index);
    DataType dtype;
    if (!ToCoreDataType(tensor.dtype(), &dtype)) {
      return Status::InvalidArgument("tensor '" + name + "': unsupported dtype " +
                                     tensorflow::DataTypeString(tensor.dtype()));
    }
    e->request.type = type;
    e->request.dtype = dtype;
    e->request.name = name;
    e->request.shape = ToCoreShape(tensor.shape());
    e->request.reduce_op = reduce_op_;
    e->request.prescale = prescale_;
    e->request.postscale = postscale_;
    e->input = tensor.tensor_data().data();
    return Status();
  }

  // Output `index` shaped like input `index`, reusing its buffer when allowed.
  static Status OutputLikeInput(OpKernelContext* ctx, int index, TensorTableEntry* e) {
    Tensor* out = nullptr;
    Status s = FromTF(ctx->forward_input_or_allocate_output({index}, index,
                                                           ctx->input(index).shape(), &out));
    if (s.ok()) e->output = const_cast<char*>(out->tensor_data().data());
    return s;
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

  bool grouped_ = false;  // entries go to the core as one group
  int32_t process_set_id_ = 0;  // the process set that runs it (0: every rank)

 private:
  // A callback for each of n entries; the first error wins, done() runs once.
  static std::function<void(const Status&)> Completion(OpKernelContext* ctx, DoneCallback done,
                                                       size_t n) {
    struct Pending {
      std::atomic<size_t> remaining;
      std::mutex mutex;
      Status error;
    };
    auto pending = std::make_shared<Pending>();
    pending->remaining = n;
    return [ctx, done, pending](const Status& s) {
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(pending->mutex);
        if (pending->error.ok()) pending->error = s;
      }
      if (pending->remaining.fetch_sub(1) == 1) {
        if (!pending->error.ok()) ctx->SetStatus(ToTFStatus(pending->error));
        done();
      }
    };
  }

  ReduceOp reduce_op_ = ReduceOp::SUM;
  float prescale_ = 1.0f;
  float postscale_ = 1.0f;
  bool ignore_name_scope_ = false;
  std::string tensor_name_;
};

// Allreduce and broadcast write an output shaped like the input.
class AllreduceKernel : public CollectiveKernel {
 public:
  using CollectiveKernel::CollectiveKernel;
  Status PrepareOne(OpKernelContext* ctx, TensorTableEntry* e) override {
    Status s = TensorEntry(ctx, 0, OpType::ALLREDUCE, Name(), e);
    return s.ok() ? OutputLikeInput(ctx, 0, e) : s;
  }
};

class BroadcastKernel : public CollectiveKernel {
 public:
  explicit BroadcastKernel(OpKernelConstruction* c) : CollectiveKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("root_rank", &root_rank_));
  }
  Status PrepareOne(OpKernelContext* ctx, TensorTableEntry* e) override {
    Status s = TensorEntry(ctx, 0, OpType::BROADCAST, Name(), e);
    e->request.root_rank = root_rank_;
    return s.ok() ? OutputLikeInput(ctx, 0, e) : s;
  }

 private:
  int root_rank_ = 0;
};

// Allgather and reducescatter: the output shape is known after negotiation.
template <OpType kType>
class NegotiatedShapeKernel : public CollectiveKernel {
 public:
  using CollectiveKernel::CollectiveKernel;
  Status PrepareOne(OpKernelContext* ctx, TensorTableEntry* e) override {
    e->allocate_output = OutputAllocator(ctx, 0);
    return TensorEntry(ctx, 0, kType, Name(), e);
  }
};

class AlltoallKernel : public CollectiveKernel {
 public:
  using CollectiveKernel::CollectiveKernel;
  Status PrepareOne(OpKernelContext* ctx, TensorTableEntry* e) override {
    Status s = TensorEntry(ctx, 0, OpType::ALLTOALL, Name(), e);
    if (!s.ok()) return s;
    const Tensor& splits = ctx->input(1);
    if (splits.dims() > 1) {
      return Status::InvalidArgument("tensor '" + e->request.name +
                                     "': alltoall splits must be a vector");
    }
    auto flat = splits.flat<int32_t>();
    e->splits.assign(flat.data(), flat.data() + flat.size());
    Topology set;
    bool member = false;
    s = ProcessSetTopology(process_set_id_, &set, &member);
    if (!s.ok()) return s;
    // A non-member gets the enqueue's error; its output is not used.
    Tensor* received = nullptr;
    s = FromTF(ctx->allocate_output(1, tensorflow::TensorShape({member ? set.size : 0}),
                                    &received));
    if (!s.ok()) return s;
    e->received_splits = received->flat<int32_t>().data();
    e->allocate_output = OutputAllocator(ctx, 0);
    return Status();
  }
};

// N tensors negotiated as one group of entries named <name>_<i>: the core
// runs them together or fails them all.
class GroupedAllreduceKernel : public CollectiveKernel {
 public:
  explicit GroupedAllreduceKernel(OpKernelConstruction* c) : CollectiveKernel(c) {
    grouped_ = true;
  }
  Status Prepare(OpKernelContext* ctx, std::vector<TensorTableEntry>* entries) override {
    const std::string base = Name();
    entries->resize(static_cast<size_t>(ctx->num_inputs()));
    for (int i = 0; i < ctx->num_inputs(); ++i) {
      TensorTableEntry& e = (*entries)[static_cast<size_t>(i)];
      Status s = TensorEntry(ctx, i, OpType::ALLREDUCE, base + "_" + std::to_string(i), &e);
      if (s.ok()) s = OutputLikeInput(ctx, i, &e);
      if (!s.ok()) return s;
    }
    return Status();
  }
};

class JoinKernel : public CollectiveKernel {
 public:
  using CollectiveKernel::CollectiveKernel;
  Status PrepareOne(OpKernelContext* ctx, TensorTableEntry* e) override {
    e->request.type = OpType::JOIN;
    e->request.dtype = DataType::INT32;
    e->request.name = Name();
    Tensor* out = nullptr;
    Status s = FromTF(ctx->allocate_output(0, tensorflow::TensorShape({}), &out));
    if (s.ok()) e->join_result = out->flat<int32_t>().data();
    return s;
  }
};

class BarrierKernel : public CollectiveKernel {
 public:
  using CollectiveKernel::CollectiveKernel;
  Status PrepareOne(OpKernelContext*, TensorTableEntry* e) override {
    e->request.type = OpType::BARRIER;
    e->request.dtype = DataType::UINT8;
    e->request.name = Name();
    return Status();
  }
};

}  // namespace tf
}  // namespace tfhvd

#endif  // TFHVD_TENSORFLOW_COLLECTIVE_KERNELS_H_
