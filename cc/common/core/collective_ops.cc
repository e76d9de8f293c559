#include "cc/common/core/collective_ops.h"

#include <cstring>

#include "cc/common/kernels/reduce_kernels.h"
#include "cc/common/algorithms/shm_collectives.h"
#include "cc/common/timeline/timeline.h"

namespace tfhvd {

namespace {
const char* ActivityName(OpType type) {
  switch (type) {
    case OpType::BROADCAST: return "BROADCAST";
    case OpType::ALLTOALL: return "ALLTOALL";
    case OpType::REDUCESCATTER: return "REDUCESCATTER";
    default: return "COLLECTIVE";
  }
}

void Complete(TensorTableEntry& e, const Status& s) {
  if (e.callback) e.callback(s);
  e.callback = nullptr;
}

// One tensor's collective phase, with the dtype and bytes this rank sends into it.
void TraceOne(const Response& r, const TensorTableEntry& e, size_t i, const char* activity) {
  Timeline& timeline = GlobalTimeline();
  if (!timeline.active()) return;
  timeline.ActivityStart(r.names[i], activity, r.dtype,
                         NumElements(e.request.shape) * static_cast<int64_t>(DataTypeSize(r.dtype)));
}

// Each tensor's ALLREDUCE phase, with the dtype and bytes it reduces.
void TraceAllreduce(const Response& r) {
  const int64_t elem = static_cast<int64_t>(DataTypeSize(r.dtype));
  for (size_t i = 0; i < r.names.size(); ++i)
    GlobalTimeline().ActivityStart(r.names[i], "ALLREDUCE", r.dtype, r.sizes[i] * elem);
}
}  // namespace

Status CollectiveOps::Perform(const Response& r, std::vector<TensorTableEntry>& entries,
                              const std::vector<bool>& present) {
  if (r.kind == Response::ERROR) {
    Status err(static_cast<Status::Code>(r.error_code), r.error);
    for (size_t i = 0; i < entries.size(); ++i)
      if (present[i]) Complete(entries[i], err);
    return Status();
  }
  // GPU tensors either run on the device backend as they are (every rank's
  // tensors on a GPU, and the knobs choose it: NCCL), or this rank stages its
  // GPU tensors through host memory and the CPU path below runs as usual.
  if (gpu_ != nullptr && r.on_gpu && gpu_->RunsOnDevice(r)) return gpu_->Perform(r, entries, present);
  Status s = StageGpuTensors(r, entries, present);
  if (!s.ok()) return s;
  switch (r.type) {
    case OpType::ALLREDUCE:
      return Allreduce(r, entries, present);
    case OpType::ALLGATHER:
      for (size_t i = 0; i < entries.size() && s.ok(); ++i) {
        TraceOne(r, entries[i], i, "ALLGATHER");
        s = Allgather(r, &entries[i], present[i], i);
        GlobalTimeline().ActivityEnd(r.names[i]);
      }
      return s;
    case OpType::JOIN:
      for (size_t i = 0; i < entries.size(); ++i) {
        if (!present[i]) continue;
        if (entries[i].join_result) *entries[i].join_result = r.last_joined_rank;
        Complete(entries[i], Status());
      }
      return Status();
    case OpType::BARRIER:
      for (size_t i = 0; i < entries.size(); ++i)
        if (present[i]) Complete(entries[i], Status());
      return Status();
    default:
      break;
  }
  // Single-tensor operations that every rank takes part in.
  for (size_t i = 0; i < entries.size() && s.ok(); ++i) {
    if (!present[i]) continue;
    TraceOne(r, entries[i], i, ActivityName(r.type));
    if (r.type == OpType::BROADCAST) s = Broadcast(r, entries[i]);
    if (r.type == OpType::ALLTOALL) s = Alltoall(r, entries[i]);
    if (r.type == OpType::REDUCESCATTER) s = Reducescatter(r, entries[i]);
    GlobalTimeline().ActivityEnd(r.names[i]);
  }
  return s;
}

// Copies this rank's GPU tensors to host memory for the CPU path.
Status CollectiveOps::StageGpuTensors(const Response& r, std::vector<TensorTableEntry>& entries,
                                      const std::vector<bool>& present) {
  Status failed;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (!present[i] || !entries[i].gpu.on_gpu()) continue;
    Status s = gpu_ != nullptr
                   ? gpu_->StageThroughHost(&entries[i])
                   : Status::Precondition(
                         "tensor '" + r.names[i] +
                         "' is in GPU memory, which this collective cannot take: the build has "
                         "no GPU support, or the tensor is in a process set other than the "
                         "global one (GPU tensors work in the global set only)");
    if (!s.ok() && failed.ok()) failed = s;
  }
  if (failed.ok()) return failed;
  // A device that cannot copy is broken: fail this response's tensors and stop.
  for (size_t i = 0; i < entries.size(); ++i)
    if (present[i]) Complete(entries[i], failed);
  return failed;
}

// Average is a sum followed by one multiplication by postscale / size, as in
// Horovod (so integer averages truncate toward zero, and a postscale factor
// and the division round once, together).
double CollectiveOps::PostScaleFactor(const Response& r) const {
  double factor = r.postscale;
  if (r.reduce_op == ReduceOp::AVERAGE) factor /= static_cast<double>(topology_.size);
  return factor;
}

void CollectiveOps::PostScale(const Response& r, void* buf, size_t n) {
  ScaleBuffer(r.dtype, buf, n, PostScaleFactor(r));
}

// A fused response through shared memory: every tensor is read from its
// input and written to its output by the allreduce itself, which saves the
// two copies through the fusion buffer (each as large as the response). The
// postscale is applied inside the allreduce, while each piece is in cache.
Status CollectiveOps::AllreduceSegments(const Response& r,
                                        std::vector<TensorTableEntry>& entries,
                                        const std::vector<bool>& present) {
  Timeline& timeline = GlobalTimeline();
  const bool traced = timeline.active();
  const size_t elem = DataTypeSize(r.dtype);
  size_t absent_bytes = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (!present[i]) absent_bytes += static_cast<size_t>(r.sizes[i]) * elem;
  }
  char* identity = nullptr;  // the absent tensors' identity, reduced in place
  if (absent_bytes > 0) {
    identity = static_cast<char*>(fusion_.Get(absent_bytes + 1));
    FillIdentity(r.dtype, r.reduce_op, identity, absent_bytes / elem);
  }
  std::vector<ShmCollectives::Segment> segments;
  segments.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    if (present[i]) {
      segments.push_back({entries[i].input, entries[i].output, r.sizes[i]});
    } else {
      segments.push_back({identity, identity, r.sizes[i]});
      identity += static_cast<size_t>(r.sizes[i]) * elem;
    }
  }
  if (traced) TraceAllreduce(r);
  Status s = allreduce_->RunSegments(segments, r.dtype, r.reduce_op, PostScaleFactor(r));
  if (traced) for (const auto& name : r.names) timeline.ActivityEnd(name);
  for (size_t i = 0; i < entries.size(); ++i) {
    if (present[i]) Complete(entries[i], s);
  }
  return s;
}

Status CollectiveOps::Allreduce(const Response& r, std::vector<TensorTableEntry>& entries,
                                const std::vector<bool>& present) {
  const size_t elem = DataTypeSize(r.dtype);
  Timeline& timeline = GlobalTimeline();
  Status s;
  int64_t total = 0;
  for (int64_t n : r.sizes) total += n;
  // Through shared memory every rank must take the same path: the owner of
  // each chunk applies the postscale, so a rank that joined (its entries
  // absent) contributes the op's identity from scratch memory here too.
  if (r.prescale == 1.0 &&
      allreduce_->TakesSegments(total * static_cast<int64_t>(elem), r.reduce_op)) {
    return AllreduceSegments(r, entries, present);
  }
  if (entries.size() == 1 && present[0]) {
    // One tensor: the algorithm reads the input and writes the output, no
    // staging copy. A prescale must not touch the input, so it is applied to
    // a copy in the output first.
    TensorTableEntry& e = entries[0];
    size_t n = static_cast<size_t>(r.sizes[0]);
    const void* input = e.input;
    if (r.prescale != 1.0 && e.output != e.input && n > 0) {
      std::memcpy(e.output, e.input, n * elem);
      input = e.output;
    }
    if (input == e.output) ScaleBuffer(r.dtype, e.output, n, r.prescale);
    if (timeline.active()) TraceAllreduce(r);
    s = allreduce_->Run(input, e.output, static_cast<int64_t>(n), r.dtype, r.reduce_op);
    timeline.ActivityEnd(r.names[0]);
    if (s.ok()) PostScale(r, e.output, n);
    Complete(e, s);
    return s;
  }
  auto* buffer = static_cast<char*>(fusion_.Get(static_cast<size_t>(total) * elem + 1));
  size_t offset = 0;
  const bool traced = timeline.active();
  if (traced) for (const auto& name : r.names) timeline.ActivityStart(name, "MEMCPY_IN_FUSION_BUFFER");
  for (size_t i = 0; i < entries.size(); ++i) {
    size_t bytes = static_cast<size_t>(r.sizes[i]) * elem;
    if (present[i]) {
      if (bytes) std::memcpy(buffer + offset, entries[i].input, bytes);
    } else {  // a joined rank contributes the identity of the op
      FillIdentity(r.dtype, r.reduce_op, buffer + offset, static_cast<size_t>(r.sizes[i]));
    }
    offset += bytes;
  }
  if (traced) {
    for (const auto& name : r.names) timeline.ActivityEnd(name);
    TraceAllreduce(r);
  }
  ScaleBuffer(r.dtype, buffer, static_cast<size_t>(total), r.prescale);
  s = allreduce_->Run(buffer, buffer, total, r.dtype, r.reduce_op, r.sizes);
  if (s.ok()) PostScale(r, buffer, static_cast<size_t>(total));
  if (traced) {
    for (const auto& name : r.names) {
      timeline.ActivityEnd(name);
      timeline.ActivityStart(name, "MEMCPY_OUT_FUSION_BUFFER");
    }
  }
  offset = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    size_t bytes = static_cast<size_t>(r.sizes[i]) * elem;
    if (present[i]) {
      if (s.ok() && bytes) std::memcpy(entries[i].output, buffer + offset, bytes);
      Complete(entries[i], s);
    }
    offset += bytes;
  }
  if (traced) for (const auto& name : r.names) timeline.ActivityEnd(name);
  return s;
}

Status CollectiveOps::Allgather(const Response& r, TensorTableEntry* e, bool present,
                                size_t index) {
  const size_t size = static_cast<size_t>(topology_.size);
  const int64_t row_bytes = r.row_elements[index] * static_cast<int64_t>(DataTypeSize(r.dtype));
  std::vector<int64_t> bytes(size);
  int64_t rows = 0;
  for (size_t k = 0; k < size; ++k) {
    int64_t d0 = r.sizes[index * size + k];
    bytes[k] = d0 * row_bytes;
    rows += d0;
  }
  void* out = nullptr;
  Status alloc;
  if (present) {
    Shape shape = e->request.shape;
    shape[0] = rows;
    alloc = e->allocate_output(shape, &out);
  }
  if (!present || !alloc.ok()) {
    // Still take part so the other ranks are not left waiting.
    out = scratch_.Get(static_cast<size_t>(rows * row_bytes) + 1);
  }
  const void* in = present ? e->input : nullptr;
  if (!present) bytes[static_cast<size_t>(topology_.rank)] = 0;
  Status s = allgather_.Run(allreduce_->host_links(), allreduce_->shared_memory(), in, out,
                              bytes);
  if (present) Complete(*e, s.ok() ? alloc : s);
  return s;
}

Status CollectiveOps::Broadcast(const Response& r, TensorTableEntry& e) {
  int64_t bytes = NumElements(e.request.shape) * static_cast<int64_t>(DataTypeSize(r.dtype));
  if (topology_.rank == r.root_rank && e.output != e.input && bytes > 0) {
    std::memcpy(e.output, e.input, static_cast<size_t>(bytes));
  }
  Status s = transport_->Broadcast(e.output, bytes, r.root_rank);
  Complete(e, s);
  return s;
}

Status CollectiveOps::Alltoall(const Response& r, TensorTableEntry& e) {
  const size_t size = static_cast<size_t>(topology_.size);
  const size_t me = static_cast<size_t>(topology_.rank);
  int64_t row_elems = 1;
  for (size_t d = 1; d < e.request.shape.size(); ++d) row_elems *= e.request.shape[d];
  const int64_t row_bytes = row_elems * static_cast<int64_t>(DataTypeSize(r.dtype));
  // Every rank learns how many rows every other rank sends it.
  std::vector<int64_t> mine(size), matrix(size * size);
  for (size_t k = 0; k < size; ++k) mine[k] = e.splits[k];
  std::vector<int64_t> split_bytes(size, static_cast<int64_t>(size * sizeof(int64_t)));
  Status s = transport_->Allgatherv(mine.data(), matrix.data(), split_bytes);
  if (!s.ok()) {
    Complete(e, s);
    return s;
  }
  std::vector<int64_t> send(size), recv(size);
  int64_t rows = 0;
  for (size_t k = 0; k < size; ++k) {
    send[k] = mine[k] * row_bytes;
    int64_t from_k = matrix[k * size + me];
    recv[k] = from_k * row_bytes;
    rows += from_k;
    if (e.received_splits) e.received_splits[k] = static_cast<int32_t>(from_k);
  }
  Shape shape = e.request.shape;
  shape[0] = rows;
  void* out = nullptr;
  Status alloc = e.allocate_output(shape, &out);
  if (!alloc.ok()) out = scratch_.Get(static_cast<size_t>(rows * row_bytes) + 1);
  s = transport_->Alltoallv(e.input, send, out, recv);
  Complete(e, s.ok() ? alloc : s);
  return s;
}

Status CollectiveOps::Reducescatter(const Response& r, TensorTableEntry& e) {
  const int64_t size = topology_.size;
  const size_t elem = DataTypeSize(r.dtype);
  const int64_t dim0 = e.request.shape.empty() ? 1 : e.request.shape[0];
  const int64_t row_elems = dim0 ? NumElements(e.request.shape) / dim0 : 0;
  const int64_t total = NumElements(e.request.shape);
  const RowSplit split{dim0, size};
  std::vector<int64_t> first(static_cast<size_t>(size)), counts(static_cast<size_t>(size));
  for (int64_t k = 0; k < size; ++k) {
    first[static_cast<size_t>(k)] = split.first(k) * row_elems;
    counts[static_cast<size_t>(k)] = split.rows(k) * row_elems;
  }
  Shape shape = e.request.shape;
  shape[0] = split.rows(topology_.rank);
  const int64_t mine = counts[static_cast<size_t>(topology_.rank)];
  void* out = nullptr;
  Status alloc = e.allocate_output(shape, &out);
  // A rank whose output cannot be allocated still takes part.
  if (!alloc.ok()) out = scratch_.Get(static_cast<size_t>(mine) * elem + 1);
  // The fusion buffer holds the algorithm's partial sums, and first the
  // prescaled input (the input itself must not change).
  auto* buffer = static_cast<char*>(fusion_.Get(static_cast<size_t>(total) * elem + 1));
  const void* input = e.input;
  if (r.prescale != 1.0) {
    if (total) std::memcpy(buffer, e.input, static_cast<size_t>(total) * elem);
    ScaleBuffer(r.dtype, buffer, static_cast<size_t>(total), r.prescale);
    input = buffer;
  }
  Status s = allreduce_->ReduceScatter(input, out, first, counts, r.dtype, r.reduce_op,
                                       PostScaleFactor(r), buffer);
  Complete(e, s.ok() ? alloc : s);
  return s;
}

}  // namespace tfhvd
