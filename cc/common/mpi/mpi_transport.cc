#include "cc/common/mpi/mpi_transport.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "cc/common/mpi/mpi_library.h"
#include "cc/common/mpi/mpi_link_set.h"
#include "cc/common/kernels/reduce_kernels.h"
#include "cc/common/transport/peer_loss.h"

namespace tfhvd {

namespace {

Status Check(int rc, const char* what) { return MpiCheck(rc, what); }

MPI_Datatype BuiltinType(DataType dtype) {
  switch (dtype) {
    case DataType::UINT8: return MPI_UINT8_T;
    case DataType::INT8: return MPI_INT8_T;
    case DataType::UINT16: return MPI_UINT16_T;
    case DataType::INT16: return MPI_INT16_T;
    case DataType::INT32: return MPI_INT32_T;
    case DataType::INT64: return MPI_INT64_T;
    case DataType::FLOAT32: return MPI_FLOAT;
    case DataType::FLOAT64: return MPI_DOUBLE;
    case DataType::BOOL: return MPI_C_BOOL;
    default: return MPI_DATATYPE_NULL;
  }
}

MPI_Op BuiltinOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::MIN: return MPI_MIN;
    case ReduceOp::MAX: return MPI_MAX;
    case ReduceOp::PRODUCT: return MPI_PROD;
    default: return MPI_SUM;
  }
}

// MPI user functions for 16-bit floats: inout = in (op) inout.
template <DataType D, ReduceOp O>
void Reduce16(void* in, void* inout, int* len, MPI_Datatype*) {
  ReduceBuffers(D, O, inout, in, inout, static_cast<size_t>(*len));
}

using UserFn = void (*)(void*, void*, int*, MPI_Datatype*);

template <DataType D>
UserFn Reduce16For(ReduceOp op) {
  switch (op) {
    case ReduceOp::MIN: return &Reduce16<D, ReduceOp::MIN>;
    case ReduceOp::MAX: return &Reduce16<D, ReduceOp::MAX>;
    case ReduceOp::PRODUCT: return &Reduce16<D, ReduceOp::PRODUCT>;
    default: return &Reduce16<D, ReduceOp::SUM>;
  }
}

// MPI counts are ints; large buffers go in chunks of at most this many elements.
constexpr int64_t kMaxChunk = INT_MAX / 8;

}  // namespace

bool MpiTransport::ThreadsMultiple() {
  if (!MpiLibrary::Loaded()) return false;
  int initialized = 0, finalized = 0, provided = MPI_THREAD_SINGLE;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return false;
  MPI_Query_thread(&provided);
  return provided == MPI_THREAD_MULTIPLE;
}

Status MpiTransport::Init(Topology* topology) {
  Status loaded = MpiLibrary::Load(params_.mpi_library);
  if (!loaded.ok()) return loaded;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    // As Horovod: MULTIPLE, so that other MPI users of the process (mpi4py)
    // may call MPI too; HOROVOD_MPI_THREADS_DISABLE=1 asks for SERIALIZED, the
    // least the core needs (after shutdown and a new init, a new background
    // thread makes the calls; never two at once), not FUNNELED.
    int required = params_.mpi_threads_disable ? MPI_THREAD_SERIALIZED : MPI_THREAD_MULTIPLE;
    Status s = Check(MPI_Init_thread(nullptr, nullptr, required, &provided), "MPI_Init_thread");
    if (!s.ok()) return s;
    // MPI cannot be initialised twice in a process, so it is finalised once,
    // at exit, not at hvd.shutdown().
    std::atexit([] {
      int finalized = 0;
      MPI_Finalized(&finalized);
      // MPI_Finalize waits for every peer, and a lost one never comes.
      if (!finalized && !PeerLost()) MPI_Finalize();
    });
  }
  if (has_base_) {
    MPI_Comm base = MPI_Comm_f2c(static_cast<MPI_Fint>(base_handle_));
    if (base == MPI_COMM_NULL) {
      return Status::InvalidArgument("hvd.init(comm=...): the communicator is MPI_COMM_NULL "
                                     "(this process is not in it)");
    }
    MPI_Comm_dup(base, &comm_);
  } else if (!world_ranks_.empty()) {
    // Only the listed ranks call init: a communicator of just them.
    int me = 0, world_size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    bool listed = false;
    for (int r : world_ranks_) {
      if (r < 0 || r >= world_size) {
        return Status::InvalidArgument("hvd.init(comm=[...]) names rank " + std::to_string(r) +
                                       ", but MPI_COMM_WORLD has " +
                                       std::to_string(world_size) + " ranks");
      }
      listed |= r == me;
    }
    if (!listed) {
      return Status::InvalidArgument("hvd.init(comm=[...]): this process (MPI_COMM_WORLD rank " +
                                     std::to_string(me) + ") is not in the list");
    }
    MPI_Group world, group;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, static_cast<int>(world_ranks_.size()), world_ranks_.data(), &group);
    Status s = Check(MPI_Comm_create_group(MPI_COMM_WORLD, group, 0, &comm_),
                     "MPI_Comm_create_group for hvd.init(comm=[...])");
    MPI_Group_free(&group);
    MPI_Group_free(&world);
    if (!s.ok()) return s;
  } else {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
  }
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  MPI_Comm local;
  MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
  topology->rank = rank_;
  topology->size = size_;
  MPI_Comm_rank(local, &topology->local_rank);
  MPI_Comm_size(local, &topology->local_size);
  MPI_Comm cross;
  MPI_Comm_split(comm_, topology->local_rank, rank_, &cross);
  MPI_Comm_rank(cross, &topology->cross_rank);
  MPI_Comm_size(cross, &topology->cross_size);
  int min_local = 0, max_local = 0;
  MPI_Allreduce(&topology->local_size, &min_local, 1, MPI_INT, MPI_MIN, comm_);
  MPI_Allreduce(&topology->local_size, &max_local, 1, MPI_INT, MPI_MAX, comm_);
  topology->homogeneous = min_local == max_local;
  MPI_Comm_free(&local);
  MPI_Comm_free(&cross);

  MPI_Type_contiguous(2, MPI_BYTE, &float16_type_);
  MPI_Type_commit(&float16_type_);
  MPI_Type_contiguous(2, MPI_BYTE, &bfloat16_type_);
  MPI_Type_commit(&bfloat16_type_);

  links_.Reset(comm_, rank_, size_, params_.spin_us, params_.stall_shutdown_s);
  return Status();
}

void MpiTransport::Finalize() {
  for (size_t t = 0; t < 2; ++t)
    for (size_t o = 0; o < 6; ++o)
      if (ops16_made_[t][o]) MPI_Op_free(&ops16_[t][o]);
  if (float16_type_ != MPI_DATATYPE_NULL) MPI_Type_free(&float16_type_);
  if (bfloat16_type_ != MPI_DATATYPE_NULL) MPI_Type_free(&bfloat16_type_);
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

// Starts a non-blocking collective and completes it in MpiWait: MPI's
// blocking calls busy-poll the core until the slowest rank arrives.
Status MpiTransport::Finish(int rc, MPI_Request* request, const char* what) {
  Status s = Check(rc, what);
  return s.ok() ? MpiWait(request, 1, params_.spin_us, what, params_.stall_shutdown_s) : s;
}

Status MpiTransport::GatherBytes(const std::string& mine, std::vector<std::string>* all) {
  int len = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<size_t>(size_));
  MPI_Request request;
  Status s = Finish(MPI_Igather(&len, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, comm_, &request),
                    &request, "MPI_Igather");
  if (!s.ok()) return s;
  std::vector<int> displs(static_cast<size_t>(size_), 0);
  std::string joined;
  if (rank_ == 0) {
    int total = 0;
    for (int i = 0; i < size_; ++i) {
      displs[static_cast<size_t>(i)] = total;
      total += lengths[static_cast<size_t>(i)];
    }
    joined.resize(static_cast<size_t>(total));
  }
  s = Finish(MPI_Igatherv(mine.data(), len, MPI_BYTE, &joined[0], lengths.data(),
                          displs.data(), MPI_BYTE, 0, comm_, &request),
             &request, "MPI_Igatherv");
  if (!s.ok() || rank_ != 0) return s;
  all->clear();
  for (int i = 0; i < size_; ++i) {
    all->emplace_back(joined.substr(static_cast<size_t>(displs[static_cast<size_t>(i)]),
                                    static_cast<size_t>(lengths[static_cast<size_t>(i)])));
  }
  return Status();
}

Status MpiTransport::BroadcastBytes(std::string* data, int root) {
  int64_t len = static_cast<int64_t>(data->size());
  MPI_Request request;
  Status s = Finish(MPI_Ibcast(&len, 1, MPI_INT64_T, root, comm_, &request), &request,
                    "MPI_Ibcast");
  if (!s.ok()) return s;
  data->resize(static_cast<size_t>(len));
  return len > 0 ? Broadcast(&(*data)[0], len, root) : Status();
}

Status MpiTransport::BitwiseOr(uint64_t* words, size_t n) {
  // The per-round exchange is where a rank with tensors ready waits for peers
  // that are still computing: MPI's own blocking wait would busy-poll a core
  // they need, so this rank waits its own way.
  MPI_Request request;
  return Finish(MPI_Iallreduce(MPI_IN_PLACE, words, static_cast<int>(n), MPI_UINT64_T, MPI_BOR,
                               comm_, &request),
                &request, "MPI_Iallreduce (bit vector)");
}

Status MpiTransport::OpenLinkSet(const std::vector<int>& members,
                                 std::unique_ptr<LinkSet>* out) {
  return MpiLinkSet::Open(this, comm_, members, params_.spin_us, params_.stall_shutdown_s, out);
}

Status MpiTransport::AllreduceOver(MPI_Comm comm, const void* input, void* output, int64_t count,
                                   DataType dtype, ReduceOp op) {
  MPI_Datatype type = BuiltinType(dtype);
  MPI_Op mpi_op = BuiltinOp(op);
  if (dtype == DataType::FLOAT16 || dtype == DataType::BFLOAT16) {
    bool half = dtype == DataType::FLOAT16;
    type = half ? float16_type_ : bfloat16_type_;
    size_t t = half ? 0 : 1, o = static_cast<size_t>(op);
    if (!ops16_made_[t][o]) {
      UserFn fn = half ? Reduce16For<DataType::FLOAT16>(op) : Reduce16For<DataType::BFLOAT16>(op);
      MPI_Op_create(fn, /*commute=*/1, &ops16_[t][o]);
      ops16_made_[t][o] = true;
    }
    MPI_Op user = ops16_[t][o];
    mpi_op = user;
  }
  const bool in_place = input == output;
  auto* out = static_cast<char*>(output);
  const auto* in = static_cast<const char*>(input);
  const int64_t elem = static_cast<int64_t>(DataTypeSize(dtype));
  for (int64_t done = 0; done < count; done += kMaxChunk) {
    int n = static_cast<int>(std::min(kMaxChunk, count - done));
    const void* send = in_place ? MPI_IN_PLACE : in + done * elem;
    MPI_Request request;
    Status s = Finish(MPI_Iallreduce(send, out + done * elem, n, type, mpi_op, comm, &request),
                      &request, "MPI_Iallreduce");
    if (!s.ok()) return s;
  }
  return Status();
}

Status MpiTransport::Allgatherv(const void* in, void* out,
                                const std::vector<int64_t>& bytes_per_rank) {
  std::vector<int> counts(static_cast<size_t>(size_)), displs(static_cast<size_t>(size_));
  int64_t offset = 0;
  for (int i = 0; i < size_; ++i) {
    int64_t b = bytes_per_rank[static_cast<size_t>(i)];
    if (b > INT_MAX || offset > INT_MAX) {
      return Status::InvalidArgument("allgather of more than 2 GiB is not supported over MPI");
    }
    counts[static_cast<size_t>(i)] = static_cast<int>(b);
    displs[static_cast<size_t>(i)] = static_cast<int>(offset);
    offset += b;
  }
  MPI_Request request;
  return Finish(MPI_Iallgatherv(in, counts[static_cast<size_t>(rank_)], MPI_BYTE, out,
                                counts.data(), displs.data(), MPI_BYTE, comm_, &request),
                &request, "MPI_Iallgatherv");
}

Status MpiTransport::Broadcast(void* buffer, int64_t bytes, int root) {
  auto* p = static_cast<char*>(buffer);
  for (int64_t done = 0; done < bytes; done += INT_MAX) {
    int n = static_cast<int>(std::min<int64_t>(INT_MAX, bytes - done));
    MPI_Request request;
    Status s = Finish(MPI_Ibcast(p + done, n, MPI_BYTE, root, comm_, &request), &request,
                      "MPI_Ibcast");
    if (!s.ok()) return s;
  }
  return Status();
}

Status MpiTransport::Alltoallv(const void* in, const std::vector<int64_t>& send_bytes,
                               void* out, const std::vector<int64_t>& recv_bytes) {
  size_t n = static_cast<size_t>(size_);
  std::vector<int> sc(n), sd(n), rc(n), rd(n);
  int64_t so = 0, ro = 0;
  for (size_t i = 0; i < n; ++i) {
    if (so > INT_MAX || ro > INT_MAX || send_bytes[i] > INT_MAX || recv_bytes[i] > INT_MAX) {
      return Status::InvalidArgument("alltoall of more than 2 GiB is not supported over MPI");
    }
    sc[i] = static_cast<int>(send_bytes[i]);
    sd[i] = static_cast<int>(so);
    rc[i] = static_cast<int>(recv_bytes[i]);
    rd[i] = static_cast<int>(ro);
    so += send_bytes[i];
    ro += recv_bytes[i];
  }
  MPI_Request request;
  return Finish(MPI_Ialltoallv(in, sc.data(), sd.data(), MPI_BYTE, out, rc.data(), rd.data(),
                               MPI_BYTE, comm_, &request),
                &request, "MPI_Ialltoallv");
}

Status MpiTransport::Barrier() {
  MPI_Request request;
  return Finish(MPI_Ibarrier(comm_, &request), &request, "MPI_Ibarrier");
}

}  // namespace tfhvd
