#include "cc/common/nccl/nccl_backend.h"

#include <algorithm>
#include <cstring>

#include "cc/common/gpu/batched_copy.h"
#include "cc/common/gpu/host_staging.h"
#include "cc/common/half.h"
#include "cc/common/logging.h"
#include "cc/common/timeline/timeline.h"
#include "cc/common/transport/peer_loss.h"

namespace tfhvd {

namespace {

// NCCL's type for a reduction; false for types NCCL cannot reduce.
bool NcclType(DataType dtype, ncclDataType_t* out) {
  switch (dtype) {
    case DataType::UINT8: *out = ncclUint8; return true;
    case DataType::INT8: *out = ncclInt8; return true;
    case DataType::INT32: *out = ncclInt32; return true;
    case DataType::INT64: *out = ncclInt64; return true;
    case DataType::FLOAT16: *out = ncclFloat16; return true;
    case DataType::BFLOAT16: *out = ncclBfloat16; return true;
    case DataType::FLOAT32: *out = ncclFloat32; return true;
    case DataType::FLOAT64: *out = ncclFloat64; return true;
    default: return false;  // INT16, UINT16, BOOL: staged through the host
  }
}

ncclRedOp_t NcclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::MIN: return ncclMin;
    case ReduceOp::MAX: return ncclMax;
    case ReduceOp::PRODUCT: return ncclProd;
    default: return ncclSum;
  }
}

bool Folds(ReduceOp op) { return op == ReduceOp::SUM || op == ReduceOp::AVERAGE; }

// A PreMulSum operator multiplying by factor, as a scalar of the tensor's type.
ncclResult_t CreatePreMulSum(double factor, DataType dtype, ncclDataType_t type,
                             ncclComm_t comm, ncclRedOp_t* op) {
  union {
    double f64;
    float f32;
    uint16_t f16;
  } scalar;
  if (dtype == DataType::FLOAT64) scalar.f64 = factor;
  else if (dtype == DataType::FLOAT32) scalar.f32 = static_cast<float>(factor);
  else if (dtype == DataType::FLOAT16) scalar.f16 = FloatToHalf(static_cast<float>(factor));
  else scalar.f16 = FloatToBFloat16(static_cast<float>(factor));
  return ncclRedOpCreatePreMulSum(op, &scalar, type, ncclScalarHostImmediate, comm);
}

void Complete(TensorTableEntry& e, const Status& s) {
  if (e.callback) e.callback(s);
  e.callback = nullptr;
}

}  // namespace

Status NcclBackend::Open(Transport* transport, const Topology& topology,
                         const Parameters& params) {
  transport_ = transport;
  topology_ = topology;
  params_ = params;
  return Status();
}

void NcclBackend::Close() {
  self_.reset();
  comm_.reset();
}

const std::string& NcclBackend::Choice(OpType type) const {
  const std::string* v = nullptr;
  switch (type) {
    case OpType::ALLREDUCE: v = &params_.gpu_allreduce; break;
    case OpType::ALLGATHER: v = &params_.gpu_allgather; break;
    case OpType::BROADCAST: v = &params_.gpu_broadcast; break;
    case OpType::ALLTOALL: v = &params_.gpu_alltoall; break;
    case OpType::REDUCESCATTER: v = &params_.gpu_reducescatter; break;
    default: return params_.gpu_operations;
  }
  return v->empty() ? params_.gpu_operations : *v;
}

bool NcclBackend::RunsOnDevice(const Response& r) const {
  if (!r.on_gpu || r.kind != Response::OPERATION) return false;
  if (r.type == OpType::JOIN || r.type == OpType::BARRIER) return false;
  if (Choice(r.type) != "nccl") return false;
  if (r.type == OpType::ALLREDUCE || r.type == OpType::REDUCESCATTER) {
    ncclDataType_t type;
    if (!NcclType(r.dtype, &type)) return false;
    // Integers: NCCL has no integer scaling or average worth its rounding;
    // those go through the host, where the CPU path defines them.
    bool scaled = r.prescale != 1.0 || r.postscale != 1.0 || r.reduce_op == ReduceOp::AVERAGE;
    if (!IsFloatingPoint(r.dtype) && scaled) return false;
  }
  return true;
}

Status NcclBackend::Communicators(int device) {
  if (comm_ != nullptr && device != device_) {
    return Status::InvalidArgument(
        "NCCL runs one GPU per rank: rank " + std::to_string(topology_.rank) + " used device " +
        std::to_string(device_) + " and now device " + std::to_string(device) +
        " (pin each process to one GPU, e.g. with tf.config.set_visible_devices)");
  }
  if (comm_ != nullptr && comm_->aborted()) {
    return Status::Aborted("the NCCL communicator of rank " + std::to_string(topology_.rank) +
                           " was aborted after an earlier error");
  }
  if (comm_ != nullptr) return Status();
  device_ = device;
  Status s = CudaContext::ForDevice(device, &ctx_);
  if (s.ok()) s = ctx_->Activate();
  if (s.ok()) s = NcclCommunicator::Create(transport_, topology_, device, params_.nccl_timeout_s,
                                           &comm_);
  if (s.ok()) s = NcclCommunicator::CreateSelf(device, topology_.rank, params_.nccl_timeout_s,
                                               &self_);
  if (s.ok()) {
    TFHVD_LOG(DEBUG) << "NCCL communicator of " << topology_.size << " ranks on device "
                     << device;
  }
  return s;
}

// An output allocated now, on the background thread: the framework's allocator
// may hand out memory that work enqueued on its stream after the op's ready
// event still uses, so our stream also waits for an event recorded after it.
Status NcclBackend::AllocateOutput(TensorTableEntry& e, const Shape& shape, void** out) {
  Status s = e.allocate_output(shape, out);
  GpuPlacement after = e.gpu;
  if (s.ok()) s = RecordReadyEvent(after.device, after.stream, &after.ready);
  if (s.ok()) s = ctx_->WaitReady(after);
  return s;
}

Status NcclBackend::Finish(const std::string& what) {
  Status s = ctx_->Finish(params_.nccl_timeout_s, [this, &what] {
    // A peer the liveness monitor declared lost never joins this collective:
    // abort the communicator now rather than at HOROVOD_NCCL_TIMEOUT_SECONDS.
    if (PeerLost()) return PeerLostError();
    Status e = comm_->AsyncError(what);
    return e.ok() ? self_->AsyncError(what) : e;
  }, what);
  if (!s.ok()) {
    // A timed-out or failed collective may still be running: stop NCCL.
    comm_->Abort();
    self_->Abort();
    if (s.code() != Status::ABORTED) {
      s = Status(s.code(), s.message() + " (rank " + std::to_string(topology_.rank) +
                               "; the NCCL communicator was aborted)");
    }
  }
  return s;
}

Status NcclBackend::Scale(void* buf, size_t n, DataType dtype, double factor) {
  if (factor == 1.0 || n == 0) return Status();
  ncclDataType_t type = ncclFloat32;
  if (!NcclType(dtype, &type) || !IsFloatingPoint(dtype)) {
    return Status::InvalidArgument(std::string("scaling ") + DataTypeName(dtype) +
                                   " on the GPU is not supported");
  }
  ncclRedOp_t op;
  Status s = self_->Settle(CreatePreMulSum(factor, dtype, type, self_->get(), &op),
                           "ncclRedOpCreatePreMulSum");
  if (!s.ok()) return s;
  s = self_->Settle(ncclAllReduce(buf, buf, n, type, op, self_->get(), ctx_->stream()),
                    "scaling on the device");
  ncclRedOpDestroy(op, self_->get());
  return s;
}

Status NcclBackend::AllreduceOne(const Response& r, const void* in, void* out, size_t n) {
  ncclDataType_t type = ncclFloat32;
  NcclType(r.dtype, &type);
  const std::string what = std::string("ncclAllReduce of '") + r.names[0] + "'";
  if (Folds(r.reduce_op)) {
    double factor = r.prescale * r.postscale;
    if (r.reduce_op == ReduceOp::AVERAGE) factor /= static_cast<double>(topology_.size);
    if (factor == 1.0) {
      return comm_->Settle(ncclAllReduce(in, out, n, type, ncclSum, comm_->get(), ctx_->stream()),
                           what);
    }
    ncclRedOp_t op;
    Status s = comm_->Settle(CreatePreMulSum(factor, r.dtype, type, comm_->get(), &op),
                             "ncclRedOpCreatePreMulSum");
    if (!s.ok()) return s;
    s = comm_->Settle(ncclAllReduce(in, out, n, type, op, comm_->get(), ctx_->stream()), what);
    ncclRedOpDestroy(op, comm_->get());
    return s;
  }
  // Min, Max, Product: scale a copy before and the result after.
  Status s;
  if (r.prescale != 1.0) {
    s = ctx_->Copy(out, in, n * DataTypeSize(r.dtype));
    if (s.ok()) s = Scale(out, n, r.dtype, r.prescale);
    in = out;
  }
  if (s.ok()) {
    s = comm_->Settle(
        ncclAllReduce(in, out, n, type, NcclOp(r.reduce_op), comm_->get(), ctx_->stream()), what);
  }
  if (s.ok()) s = Scale(out, n, r.dtype, r.postscale);
  return s;
}

Status NcclBackend::Allreduce(const Response& r, std::vector<TensorTableEntry>& entries) {
  const size_t elem = DataTypeSize(r.dtype);
  if (entries.size() == 1) {
    return AllreduceOne(r, entries[0].input, entries[0].output, static_cast<size_t>(r.sizes[0]));
  }
  int64_t total = 0;
  for (int64_t n : r.sizes) total += n;
  void* buffer = nullptr;
  Status s = fusion_.Get(device_, static_cast<size_t>(total) * elem + 1, &buffer);
  if (!s.ok()) {
    // The framework's allocator may hold the device's memory: reduce tensor by
    // tensor (still correct, only more launches).
    if (!fusion_warned_) {
      TFHVD_LOG(WARNING) << "no device memory for the fusion buffer (" << s.message()
                         << "); GPU allreduces run unfused. Let TensorFlow grow its memory "
                            "(tf.config.experimental.set_memory_growth) to fuse them.";
      fusion_warned_ = true;
    }
    s = Status();
    for (size_t i = 0; i < entries.size() && s.ok(); ++i) {
      Response one = r;
      one.names = {r.names[i]};
      s = AllreduceOne(one, entries[i].input, entries[i].output,
                       static_cast<size_t>(r.sizes[i]));
    }
    return s;
  }
  char* fused = static_cast<char*>(buffer);
  std::vector<CopyRange> in(entries.size()), out(entries.size());
  size_t offset = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    size_t bytes = static_cast<size_t>(r.sizes[i]) * elem;
    in[i] = {fused + offset, entries[i].input, bytes};
    out[i] = {entries[i].output, fused + offset, bytes};
    offset += bytes;
  }
  s = CopyAll(in);
  if (s.ok()) s = AllreduceOne(r, fused, fused, static_cast<size_t>(total));
  if (s.ok()) s = CopyAll(out);
  return s;
}

Status NcclBackend::CopyAll(const std::vector<CopyRange>& ranges) {
  if (params_.batch_d2d_memcopies && !batched_failed_) {
    // Looked up once: Get takes a process-wide lock.
    Status s = batched_ ? Status() : BatchedCopy::Get(device_, &batched_);
    if (s.ok()) return batched_->Run(ranges, ctx_->stream());
    TFHVD_LOG(WARNING) << "fused GPU allreduces copy tensor by tensor (one cudaMemcpyAsync "
                          "each): the batched-copy kernel is unavailable: "
                       << s.message();
    batched_failed_ = true;
  }
  Status s;
  for (size_t i = 0; i < ranges.size() && s.ok(); ++i) {
    s = ctx_->Copy(ranges[i].dst, ranges[i].src, ranges[i].bytes);
  }
  return s;
}

// Ragged first dimension: one ncclBroadcast per rank inside a group, each rank
// the root of its own block, straight into its place in the output (no
// padding, no extra copy); equal blocks use ncclAllGather.
Status NcclBackend::Allgather(const Response& r, TensorTableEntry& e, size_t index) {
  const size_t size = static_cast<size_t>(topology_.size);
  const size_t row_bytes = static_cast<size_t>(r.row_elements[index]) * DataTypeSize(r.dtype);
  std::vector<size_t> bytes(size);
  int64_t rows = 0;
  bool equal = true;
  for (size_t k = 0; k < size; ++k) {
    int64_t d0 = r.sizes[index * size + k];
    bytes[k] = static_cast<size_t>(d0) * row_bytes;
    equal &= bytes[k] == bytes[0];
    rows += d0;
  }
  Shape shape = e.request.shape;
  shape[0] = rows;
  void* out = nullptr;
  Status s = AllocateOutput(e, shape, &out);
  if (!s.ok()) return s;  // every rank allocates; a failure here fails the job
  const std::string what = "allgather of '" + r.names[index] + "'";
  if (equal) {
    return comm_->Settle(ncclAllGather(e.input, out, bytes[0], ncclUint8, comm_->get(),
                                       ctx_->stream()), what);
  }
  s = comm_->Settle(ncclGroupStart(), what);
  size_t offset = 0;
  for (size_t k = 0; k < size && s.ok(); ++k) {
    char* dst = static_cast<char*>(out) + offset;
    const void* src = static_cast<int>(k) == topology_.rank ? e.input : dst;
    s = comm_->Settle(ncclBroadcast(src, dst, bytes[k], ncclUint8, static_cast<int>(k),
                                    comm_->get(), ctx_->stream()), what);
    offset += bytes[k];
  }
  Status end = comm_->Settle(ncclGroupEnd(), what);
  return s.ok() ? end : s;
}

Status NcclBackend::Broadcast(const Response& r, TensorTableEntry& e) {
  size_t bytes = static_cast<size_t>(NumElements(e.request.shape)) * DataTypeSize(r.dtype);
  return comm_->Settle(ncclBroadcast(e.input, e.output, bytes, ncclUint8, r.root_rank,
                                     comm_->get(), ctx_->stream()),
                       "broadcast of '" + r.names[0] + "'");
}

// Every rank learns the split matrix over the controller's transport, then
// one group of ncclSend/ncclRecv moves the rows (its own block is a copy).
Status NcclBackend::Alltoall(const Response& r, TensorTableEntry& e) {
  const size_t size = static_cast<size_t>(topology_.size);
  const size_t me = static_cast<size_t>(topology_.rank);
  int64_t row_elems = 1;
  for (size_t d = 1; d < e.request.shape.size(); ++d) row_elems *= e.request.shape[d];
  const size_t row_bytes = static_cast<size_t>(row_elems) * DataTypeSize(r.dtype);
  std::vector<int64_t> mine(size), matrix(size * size);
  for (size_t k = 0; k < size; ++k) mine[k] = e.splits[k];
  std::vector<int64_t> split_bytes(size, static_cast<int64_t>(size * sizeof(int64_t)));
  Status s = transport_->Allgatherv(mine.data(), matrix.data(), split_bytes);
  if (!s.ok()) return s;
  int64_t rows = 0;
  std::vector<size_t> send(size), recv(size);
  for (size_t k = 0; k < size; ++k) {
    send[k] = static_cast<size_t>(mine[k]) * row_bytes;
    int64_t from_k = matrix[k * size + me];
    recv[k] = static_cast<size_t>(from_k) * row_bytes;
    rows += from_k;
    if (e.received_splits) e.received_splits[k] = static_cast<int32_t>(from_k);
  }
  Shape shape = e.request.shape;
  shape[0] = rows;
  void* out = nullptr;
  s = AllocateOutput(e, shape, &out);
  if (!s.ok()) return s;
  const std::string what = "alltoall of '" + r.names[0] + "'";
  const char* in = static_cast<const char*>(e.input);
  char* dst = static_cast<char*>(out);
  size_t send_off = 0, recv_off = 0;
  s = comm_->Settle(ncclGroupStart(), what);
  for (size_t k = 0; k < size && s.ok(); ++k) {
    if (k == me) {
      s = ctx_->Copy(dst + recv_off, in + send_off, send[k]);
    } else {
      if (send[k]) {
        s = comm_->Settle(ncclSend(in + send_off, send[k], ncclUint8, static_cast<int>(k),
                                   comm_->get(), ctx_->stream()), what);
      }
      if (s.ok() && recv[k]) {
        s = comm_->Settle(ncclRecv(dst + recv_off, recv[k], ncclUint8, static_cast<int>(k),
                                   comm_->get(), ctx_->stream()), what);
      }
    }
    send_off += send[k];
    recv_off += recv[k];
  }
  Status end = comm_->Settle(ncclGroupEnd(), what);
  return s.ok() ? end : s;
}

// Rows split as the CPU path splits them (the first dim0 % size ranks one
// more): ncclReduceScatter when even, else one ncclReduce per rank in a group.
Status NcclBackend::Reducescatter(const Response& r, TensorTableEntry& e) {
  const int64_t size = topology_.size;
  const int64_t rank = topology_.rank;
  const size_t elem = DataTypeSize(r.dtype);
  const int64_t dim0 = e.request.shape.empty() ? 1 : e.request.shape[0];
  const int64_t row_elems = dim0 ? NumElements(e.request.shape) / dim0 : 0;
  const RowSplit split{dim0, size};
  Shape shape = e.request.shape;
  shape[0] = split.rows(rank);
  void* out = nullptr;
  Status s = AllocateOutput(e, shape, &out);
  if (!s.ok()) return s;
  ncclDataType_t type = ncclFloat32;
  NcclType(r.dtype, &type);
  double factor = r.prescale * r.postscale;
  if (r.reduce_op == ReduceOp::AVERAGE) factor /= static_cast<double>(size);
  ncclRedOp_t op = ncclSum;
  const std::string what = "reducescatter of '" + r.names[0] + "'";
  if (factor != 1.0) {
    s = comm_->Settle(CreatePreMulSum(factor, r.dtype, type, comm_->get(), &op),
                      "ncclRedOpCreatePreMulSum");
    if (!s.ok()) return s;
  }
  if (dim0 % size == 0) {
    s = comm_->Settle(ncclReduceScatter(e.input, out, static_cast<size_t>(split.rows(0) * row_elems),
                                        type, op, comm_->get(), ctx_->stream()), what);
  } else {
    s = comm_->Settle(ncclGroupStart(), what);
    const char* in = static_cast<const char*>(e.input);
    for (int64_t k = 0; k < size && s.ok(); ++k) {
      const int64_t first = split.first(k);
      size_t count = static_cast<size_t>(split.rows(k) * row_elems);
      s = comm_->Settle(ncclReduce(in + static_cast<size_t>(first * row_elems) * elem, out, count,
                                   type, op, static_cast<int>(k), comm_->get(), ctx_->stream()),
                        what);
    }
    Status end = comm_->Settle(ncclGroupEnd(), what);
    if (s.ok()) s = end;
  }
  if (factor != 1.0) ncclRedOpDestroy(op, comm_->get());
  return s;
}

Status NcclBackend::Perform(const Response& r, std::vector<TensorTableEntry>& entries,
                            const std::vector<bool>& present) {
  int device = -1;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (present[i]) { device = entries[i].gpu.device; break; }
  }
  Status s = device >= 0 ? Communicators(device)
                         : Status::Precondition("a GPU response without a GPU tensor");
  if (s.ok()) s = ctx_->Activate();
  for (size_t i = 0; i < entries.size() && s.ok(); ++i) {
    if (present[i]) s = ctx_->WaitReady(entries[i].gpu);
  }
  Timeline& timeline = GlobalTimeline();
  const bool traced = timeline.active();
  const char* activity = r.type == OpType::ALLREDUCE ? "NCCL_ALLREDUCE"
                         : r.type == OpType::ALLGATHER ? "NCCL_ALLGATHER"
                         : r.type == OpType::BROADCAST ? "NCCL_BCAST"
                         : r.type == OpType::ALLTOALL ? "NCCL_ALLTOALL"
                                                      : "NCCL_REDUCESCATTER";
  if (traced) for (const auto& name : r.names) timeline.ActivityStart(name, activity);
  if (s.ok()) {
    switch (r.type) {
      case OpType::ALLREDUCE: s = Allreduce(r, entries); break;
      case OpType::ALLGATHER:
        for (size_t i = 0; i < entries.size() && s.ok(); ++i) s = Allgather(r, entries[i], i);
        break;
      case OpType::BROADCAST: s = Broadcast(r, entries[0]); break;
      case OpType::ALLTOALL: s = Alltoall(r, entries[0]); break;
      case OpType::REDUCESCATTER: s = Reducescatter(r, entries[0]); break;
      default: s = Status::Precondition(std::string("NCCL cannot run ") + OpTypeName(r.type));
    }
  }
  if (s.ok()) s = Finish(std::string(activity) + " of '" + r.names[0] + "'" +
                         (r.names.size() > 1 ? " and " + std::to_string(r.names.size() - 1) +
                                                   " more"
                                             : ""));
  if (traced) for (const auto& name : r.names) timeline.ActivityEnd(name);
  for (size_t i = 0; i < entries.size(); ++i) {
    if (present[i]) Complete(entries[i], s);
  }
  // An NCCL failure leaves the communicator aborted and the other ranks
  // unsynchronised: it ends the job's collectives (every pending op fails
  // with this message).
  return s;
}

Status NcclBackend::StageThroughHost(TensorTableEntry* entry) {
  return tfhvd::StageThroughHost(entry, params_.nccl_timeout_s);
}

std::unique_ptr<GpuBackend> CreateGpuBackend() { return std::unique_ptr<GpuBackend>(new NcclBackend()); }

bool NcclBuilt() { return true; }

}  // namespace tfhvd
