// Negotiation messages: a rank's Request for one tensor, the coordinator's
// Response for one (possibly fused) operation, and their list forms, with a
// compact binary wire encoding.
#ifndef TFHVD_COMMON_NEGOTIATION_MESSAGE_H_
#define TFHVD_COMMON_NEGOTIATION_MESSAGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "cc/common/autotune/tuned_parameters.h"
#include "cc/common/common.h"

namespace tfhvd {

struct Request {
  int32_t rank = 0;
  OpType type = OpType::ALLREDUCE;
  DataType dtype = DataType::FLOAT32;
  std::string name;
  Shape shape;
  int32_t root_rank = 0;
  ReduceOp reduce_op = ReduceOp::SUM;
  double prescale = 1.0;
  double postscale = 1.0;
  // Grouped allreduce: the group's id (its name, the same on every rank) and
  // how many tensors it has; empty/0 for a tensor outside any group. A group
  // is negotiated, validated and performed together, all or nothing.
  std::string group;
  int32_t group_size = 0;
  // The tensor is in GPU memory on this rank (TensorTableEntry::gpu).
  bool on_gpu = false;
};

struct RequestList {
  std::vector<Request> requests;
  bool shutdown = false;
};

struct Response {
  enum Type : uint8_t { OPERATION = 0, ERROR = 1 };
  Type kind = OPERATION;
  OpType type = OpType::ALLREDUCE;
  DataType dtype = DataType::FLOAT32;
  std::vector<std::string> names;
  // ALLREDUCE: elements per tensor. ALLGATHER: dim0 of every rank, tensor-major
  // (names.size() * size entries). Others: unused.
  std::vector<int64_t> sizes;
  // ALLGATHER: elements per row per tensor (lets a joined rank take part).
  std::vector<int64_t> row_elements;
  int32_t root_rank = 0;
  ReduceOp reduce_op = ReduceOp::SUM;
  double prescale = 1.0;
  double postscale = 1.0;
  int32_t last_joined_rank = -1;
  bool cacheable = false;
  // Every rank's tensors are in GPU memory: a GPU backend (NCCL) may run it.
  // Otherwise GPU tensors are staged through host memory on their rank.
  bool on_gpu = false;
  uint8_t error_code = 0;  // Status::Code when kind == ERROR
  std::string error;
  // The grouped allreduce its tensors belong to ("" for none, or tensors of
  // several groups fused together); HOROVOD_DISABLE_GROUP_FUSION reads it.
  std::string group;
};

struct ResponseList {
  std::vector<Response> responses;
  bool shutdown = false;
  // Set in a round where the coordinator switched the tuned parameters.
  bool has_tuned = false;
  TunedParameters tuned;
  // Filled by the controller (never sent): when shutdown is set, the ranks
  // that asked for it, by how (hvd.shutdown() called / the process exiting).
  std::vector<int> shutdown_called_by;
  std::vector<int> exiting;
};

std::string SerializeRequestList(const RequestList& list);
bool ParseRequestList(const std::string& bytes, RequestList* list);
std::string SerializeResponseList(const ResponseList& list);
bool ParseResponseList(const std::string& bytes, ResponseList* list);

}  // namespace tfhvd

#endif  // TFHVD_COMMON_NEGOTIATION_MESSAGE_H_
