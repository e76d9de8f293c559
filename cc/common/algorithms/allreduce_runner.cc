#include "cc/common/algorithms/allreduce_runner.h"

#include <cstring>

#include "cc/common/algorithms/link_collectives.h"

namespace tfhvd {

Status AllreduceRunner::Open() {
  const bool backend = transport_->has_backend_allreduce();
  return shm_.OpenIfSingleHost(
      topology_.rank, topology_.size, topology_.local_size, params_,
      [this](const std::string& mine, std::vector<std::string>* all) {
        return AllgatherStrings(*transport_->links(), mine, all);
      },
      [this] { return transport_->Barrier(); },
      backend ? "the backend's allreduce" : "the ring over the links");
}

AllreduceCase AllreduceRunner::Case(int64_t bytes, ReduceOp op) const {
  AllreduceCase c;
  c.op = op;
  c.bytes = bytes;
  c.ranks = topology_.size;
  c.one_host = topology_.local_size == topology_.size;
  c.shm_ready = shm_.active();
  c.backend_allreduce = transport_->has_backend_allreduce();
  return c;
}

ShmAllreduce* AllreduceRunner::SharedMemoryFor(int64_t bytes, ReduceOp op) {
  return SelectAllreduce(Case(bytes, op), params_) == AllreduceAlgorithm::SHARED_MEMORY ? &shm_
                                                                                         : nullptr;
}

Status AllreduceRunner::Run(const void* input, void* output, int64_t count, DataType dtype,
                            ReduceOp op) {
  const AllreduceCase c = Case(count * static_cast<int64_t>(DataTypeSize(dtype)), op);
  switch (SelectAllreduce(c, params_)) {
    case AllreduceAlgorithm::COPY:
      if (output != input && c.bytes > 0) std::memmove(output, input, static_cast<size_t>(c.bytes));
      return Status();
    case AllreduceAlgorithm::GATHER:
      return gather_.Run(*transport_->links(), input, output, count, dtype, op);
    case AllreduceAlgorithm::SHARED_MEMORY:
      return shm_.Allreduce(input, output, count, dtype, op);
    case AllreduceAlgorithm::BACKEND:
      return transport_->BackendAllreduce(input, output, count, dtype, op);
    case AllreduceAlgorithm::RING:
      return ring_.Run(*transport_->links(), input, output, count, dtype, op);
  }
  return Status::Unknown("no allreduce algorithm selected");
}

}  // namespace tfhvd
