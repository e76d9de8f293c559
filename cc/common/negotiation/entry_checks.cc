#include "cc/common/negotiation/entry_checks.h"

#include <algorithm>

#include "cc/common/algorithms/adasum_allreduce.h"

namespace tfhvd {

int PositionIn(const std::vector<int>& ranks, int rank) {
  auto it = std::lower_bound(ranks.begin(), ranks.end(), rank);
  return it != ranks.end() && *it == rank ? static_cast<int>(it - ranks.begin()) : -1;
}

namespace {

Status CheckSplits(int size, TensorTableEntry* entry) {
  const Request& q = entry->request;
  if (entry->splits.empty()) {
    if (q.shape[0] % size != 0) {
      return Status::InvalidArgument(
          "tensor '" + q.name + "': alltoall without splits needs dimension 0 (" +
          std::to_string(q.shape[0]) + ") divisible by the number of ranks (" +
          std::to_string(size) + ")");
    }
    entry->splits.assign(static_cast<size_t>(size), static_cast<int32_t>(q.shape[0] / size));
  }
  int64_t sum = 0;
  bool negative = false;
  for (int32_t v : entry->splits) { sum += v; negative |= v < 0; }
  if (entry->splits.size() != static_cast<size_t>(size) || sum != q.shape[0] || negative) {
    return Status::InvalidArgument(
        "tensor '" + q.name + "': alltoall splits must have one non-negative entry per rank (" +
        std::to_string(size) + ") summing to dimension 0 (" + std::to_string(q.shape[0]) +
        "), got " + std::to_string(entry->splits.size()) + " entries summing to " +
        std::to_string(sum));
  }
  return Status();
}

}  // namespace

Status CheckEntry(const EntryScope& scope, TensorTableEntry* entry) {
  entry->request.on_gpu = entry->gpu.on_gpu();
  Request& q = entry->request;
  const int size = static_cast<int>(scope.ranks.size());
  if ((q.type == OpType::ALLGATHER || q.type == OpType::ALLTOALL ||
       q.type == OpType::REDUCESCATTER) && q.shape.empty()) {
    return Status::InvalidArgument("tensor '" + q.name + "': " + OpTypeName(q.type) +
                                   " needs a tensor of rank >= 1, got a scalar");
  }
  if (q.type == OpType::ALLREDUCE && q.reduce_op == ReduceOp::ADASUM) {
    std::string why = AdasumAllreduce::Unsupported(size, q.dtype);
    if (!why.empty()) return Status::InvalidArgument("tensor '" + q.name + "': " + why);
  }
  if (q.type == OpType::REDUCESCATTER && q.reduce_op != ReduceOp::SUM &&
      q.reduce_op != ReduceOp::AVERAGE) {
    return Status::InvalidArgument("tensor '" + q.name +
                                   "': reducescatter supports only Sum and Average, got " +
                                   ReduceOpName(q.reduce_op));
  }
  if (q.type == OpType::BROADCAST && scope.set_id == 0 &&
      (q.root_rank < 0 || q.root_rank >= size)) {
    // FailedPrecondition, as Horovod's coordinator reports it.
    return Status::Precondition("tensor '" + q.name + "': root_rank " +
                                std::to_string(q.root_rank) + " is out of range for " +
                                std::to_string(size) + " ranks");
  }
  if (q.type == OpType::BROADCAST && scope.set_id != 0) {
    // root_rank is a global rank (as in Horovod); the set negotiates its position.
    int root = PositionIn(scope.ranks, q.root_rank);
    if (root < 0) {
      return Status::InvalidArgument("tensor '" + q.name +
                                     "': broadcast received invalid root rank " +
                                     std::to_string(q.root_rank) + " for provided process set: " +
                                     scope.label + " does not contain it");
    }
    q.root_rank = root;
  }
  if (q.type == OpType::ALLTOALL) return CheckSplits(size, entry);
  return Status();
}

}  // namespace tfhvd
