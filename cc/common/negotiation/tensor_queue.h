// The table of tensors that ops have handed to the core and that wait for the
// background thread, plus the queue of their not-yet-negotiated requests.
//
// Several ops may be in flight under one name on a rank (e.g. unnamed eager
// collectives, all named after their kind): they wait in a FIFO per name and
// only the head of each FIFO is negotiated. Taking the head releases the next
// one, so the k-th submission of a name on one rank meets the k-th submission
// of that name on every other rank.
#ifndef TFHVD_COMMON_NEGOTIATION_TENSOR_QUEUE_H_
#define TFHVD_COMMON_NEGOTIATION_TENSOR_QUEUE_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cc/common/common.h"
#include "cc/common/gpu_backend.h"
#include "cc/common/negotiation/message.h"

namespace tfhvd {

struct TensorTableEntry {
  Request request;  // name, op, dtype, shape, root, reduce op, scaling
  const void* input = nullptr;
  // Preallocated output for ops whose output shape equals the input's
  // (allreduce, broadcast); may equal input (in place).
  void* output = nullptr;
  // For ops whose output shape is known only after negotiation (allgather,
  // alltoall, reducescatter). Called from the background thread.
  std::function<Status(const Shape&, void**)> allocate_output;
  std::vector<int32_t> splits;             // alltoall: rows sent to each rank
  int32_t* received_splits = nullptr;      // alltoall: [size] rows received
  int32_t* join_result = nullptr;          // join: last rank that joined
  std::function<void(const Status&)> callback;
  // Device, stream and ready event of input/output buffers in GPU memory
  // (request.on_gpu says the same to the other ranks); host memory by default.
  GpuPlacement gpu;
  std::chrono::steady_clock::time_point enqueued;
};

class TensorQueue {
 public:
  // Queues one tensor behind any in flight under the same name; wake: also
  // wake the thread in WaitForWork (false when the caller runs the round).
  Status Add(TensorTableEntry entry, bool wake = true);
  // Queues the tensors of one group at once, so that every member reaches
  // negotiation in the same round.
  Status AddGroup(std::vector<TensorTableEntry> entries, bool wake = true);
  // Moves requests added since the last call into *out (in enqueue order).
  void PopNewRequests(std::vector<Request>* out);
  // Blocks until new requests arrive, Notify() is called or timeout passes.
  void WaitForWork(std::chrono::microseconds timeout);
  void Notify();
  // Moves the oldest entry for name out of the table (releasing the next one
  // of that name for negotiation); false if this rank has none (a rank that
  // joined early).
  bool Take(const std::string& name, TensorTableEntry* out);
  bool Contains(const std::string& name);
  // Completes every waiting entry with status, empties the table and refuses
  // later Adds with the same status.
  void FailAll(const Status& status);
  size_t size();  // entries in flight, queued ones included

 private:
  void AddLocked(TensorTableEntry entry);

  std::mutex mutex_;
  std::condition_variable cv_;
  std::unordered_map<std::string, std::deque<TensorTableEntry>> table_;
  size_t entries_ = 0;
  std::deque<Request> new_requests_;
  bool notified_ = false;
  bool closed_ = false;
  Status closed_status_;
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_NEGOTIATION_TENSOR_QUEUE_H_
