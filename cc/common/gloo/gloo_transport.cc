#include "cc/common/gloo/gloo_transport.h"

#include <cstdlib>
#include <cstring>
#include <exception>

#include "cc/common/gloo/http_store.h"
#include "cc/common/logging.h"
#include "cc/common/reduce_kernels.h"
#include "gloo/allgather.h"
#include "gloo/allgatherv.h"
#include "gloo/allreduce.h"
#include "gloo/alltoallv.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/transport/tcp/device.h"

namespace tfhvd {

namespace {

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

std::string EnvStr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

// Runs a Gloo call, turning its exceptions into a Status: a peer that died or
// closed its connection shows up here.
template <typename F>
Status Guard(const char* what, F&& f) {
  try {
    f();
    return Status();
  } catch (const std::exception& e) {
    return Status::Unavailable(std::string("gloo ") + what +
                               " failed (a rank may have exited or crashed): " + e.what());
  }
}

// Empty buffers are legal for us but not for Gloo's unbound buffers.
char dummy_byte[8];
void* NonNull(void* p) { return p ? p : dummy_byte; }

}  // namespace

Status GlooTransport::Init(Topology* topology) {
  topology->rank = EnvInt("HOROVOD_RANK", 0);
  topology->size = EnvInt("HOROVOD_SIZE", 1);
  topology->local_rank = EnvInt("HOROVOD_LOCAL_RANK", topology->rank);
  topology->local_size = EnvInt("HOROVOD_LOCAL_SIZE", topology->size);
  topology->cross_rank = EnvInt("HOROVOD_CROSS_RANK", 0);
  topology->cross_size = EnvInt("HOROVOD_CROSS_SIZE", 1);
  rank_ = topology->rank;
  size_ = topology->size;
  if (size_ < 1 || rank_ < 0 || rank_ >= size_) {
    return Status::InvalidArgument("HOROVOD_RANK=" + std::to_string(rank_) +
                                   " is not within HOROVOD_SIZE=" + std::to_string(size_));
  }
  std::string addr = EnvStr("HOROVOD_GLOO_RENDEZVOUS_ADDR", "");
  int port = EnvInt("HOROVOD_GLOO_RENDEZVOUS_PORT", 0);
  if (addr.empty() || port <= 0) {
    return Status::InvalidArgument(
        "HOROVOD_RANK/HOROVOD_SIZE are set but HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT are "
        "not; start the program with tfhvdrun");
  }
  // HOROVOD_GLOO_TIMEOUT_SECONDS bounds both the rendezvous and every
  // collective (a frozen peer fails the job instead of hanging it). Unset,
  // start-up gets longer (ranks may still be importing TensorFlow).
  int timeout_s = EnvInt("HOROVOD_GLOO_TIMEOUT_SECONDS", 0);
  int start_timeout_s = timeout_s > 0 ? timeout_s : 120;
  int op_timeout_s = EnvInt("HOROVOD_GLOO_OP_TIMEOUT_SECONDS", timeout_s > 0 ? timeout_s : 30);
  return Guard("rendezvous", [&] {
    gloo::transport::tcp::attr attr;
    attr.hostname = EnvStr("HOROVOD_HOSTNAME", "127.0.0.1");
    std::string iface = EnvStr("HOROVOD_GLOO_IFACE", "");
    if (!iface.empty()) {
      attr.iface = iface;
      attr.hostname.clear();
    }
    auto device = gloo::transport::tcp::CreateDevice(attr);
    HttpStore store(addr, port, "gloo", std::chrono::seconds(start_timeout_s));
    // Each init() in a process rendezvouses under a fresh prefix, so that an
    // init after shutdown does not read the previous run's addresses.
    static int generation = 0;
    std::string prefix = generation == 0 ? "global" : "global." + std::to_string(generation);
    ++generation;
    gloo::rendezvous::PrefixStore prefixed(prefix, store);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank_, size_);
    context->setTimeout(std::chrono::seconds(op_timeout_s));
    context->connectFullMesh(prefixed, device);
    context_ = context;
    // Homogeneous when every host runs the same number of ranks.
    std::vector<int32_t> local_sizes(static_cast<size_t>(size_));
    int32_t mine = topology->local_size;
    gloo::AllgatherOptions opts(context_);
    opts.setInput(&mine, 1);
    opts.setOutput(local_sizes.data(), local_sizes.size());
    gloo::allgather(opts);
    topology->homogeneous = true;
    for (int32_t s : local_sizes) topology->homogeneous &= (s == local_sizes[0]);
  });
}

void GlooTransport::Finalize() { context_.reset(); }

Status GlooTransport::GatherBytes(const std::string& mine, std::vector<std::string>* all) {
  std::vector<int64_t> lengths(static_cast<size_t>(size_));
  Status s = Guard("gather", [&] {
    int64_t len = static_cast<int64_t>(mine.size());
    gloo::AllgatherOptions opts(context_);
    opts.setInput(&len, 1);
    opts.setOutput(lengths.data(), lengths.size());
    gloo::allgather(opts);
  });
  if (!s.ok()) return s;
  int64_t total = 0;
  for (int64_t l : lengths) total += l;
  std::string joined(static_cast<size_t>(total), '\0');
  if (total > 0) {
    s = Allgatherv(mine.data(), &joined[0], lengths);
    if (!s.ok()) return s;
  }
  if (rank_ == 0) {
    all->clear();
    int64_t offset = 0;
    for (int64_t l : lengths) {
      all->emplace_back(joined.substr(static_cast<size_t>(offset), static_cast<size_t>(l)));
      offset += l;
    }
  }
  return Status();
}

Status GlooTransport::BroadcastBytes(std::string* data, int root) {
  int64_t len = static_cast<int64_t>(data->size());
  Status s = Broadcast(&len, sizeof(len), root);
  if (!s.ok()) return s;
  data->resize(static_cast<size_t>(len));
  return len > 0 ? Broadcast(&(*data)[0], len, root) : Status();
}

Status GlooTransport::BitwiseOr(uint64_t* words, size_t n) {
  return Guard("bit-vector exchange", [&] {
    gloo::AllreduceOptions opts(context_);
    opts.setOutput(words, n);
    opts.setReduceFunction(
        [](void* c, const void* a, const void* b, size_t count) {
          auto* out = static_cast<uint64_t*>(c);
          auto* x = static_cast<const uint64_t*>(a);
          auto* y = static_cast<const uint64_t*>(b);
          for (size_t i = 0; i < count; ++i) out[i] = x[i] | y[i];
        });
    gloo::allreduce(opts);
  });
}

Status GlooTransport::Allreduce(void* buffer, int64_t count, DataType dtype, ReduceOp op) {
  if (count == 0) return Status();
  return Guard("allreduce", [&] {
    gloo::AllreduceOptions opts(context_);
    size_t n = static_cast<size_t>(count);
    switch (DataTypeSize(dtype)) {
      case 1: opts.setOutput(static_cast<uint8_t*>(buffer), n); break;
      case 2: opts.setOutput(static_cast<uint16_t*>(buffer), n); break;
      case 4: opts.setOutput(static_cast<uint32_t*>(buffer), n); break;
      default: opts.setOutput(static_cast<uint64_t*>(buffer), n); break;
    }
    opts.setReduceFunction([dtype, op](void* c, const void* a, const void* b, size_t k) {
      ReduceBuffers(dtype, op, c, a, b, k);
    });
    gloo::allreduce(opts);
  });
}

Status GlooTransport::Allgatherv(const void* in, void* out,
                                 const std::vector<int64_t>& bytes_per_rank) {
  int64_t total = 0;
  for (int64_t b : bytes_per_rank) total += b;
  if (total == 0) return Status();
  return Guard("allgather", [&] {
    gloo::AllgathervOptions opts(context_);
    std::vector<size_t> counts(bytes_per_rank.begin(), bytes_per_rank.end());
    opts.setInput(static_cast<char*>(NonNull(const_cast<void*>(in))),
                  counts[static_cast<size_t>(rank_)]);
    opts.setOutput(static_cast<char*>(out), counts);
    gloo::allgatherv(opts);
  });
}

Status GlooTransport::Broadcast(void* buffer, int64_t bytes, int root) {
  if (bytes == 0) return Status();
  return Guard("broadcast", [&] {
    gloo::BroadcastOptions opts(context_);
    opts.setOutput(static_cast<char*>(buffer), static_cast<size_t>(bytes));
    opts.setRoot(root);
    gloo::broadcast(opts);
  });
}

Status GlooTransport::Alltoallv(const void* in, const std::vector<int64_t>& send_bytes,
                                void* out, const std::vector<int64_t>& recv_bytes) {
  return Guard("alltoall", [&] {
    gloo::AlltoallvOptions opts(context_);
    opts.setInput(static_cast<char*>(NonNull(const_cast<void*>(in))), send_bytes);
    opts.setOutput(static_cast<char*>(NonNull(out)), recv_bytes);
    gloo::alltoallv(opts);
  });
}

Status GlooTransport::Barrier() {
  return Guard("barrier", [&] {
    gloo::BarrierOptions opts(context_);
    gloo::barrier(opts);
  });
}

}  // namespace tfhvd
