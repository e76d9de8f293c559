#include "cc/common/gloo/gloo_transport.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>

#include "cc/common/gloo/http_store.h"
#include "cc/common/logging.h"
#include "cc/common/reduce_kernels.h"
#include "gloo/allgather.h"
#include "gloo/allgatherv.h"
#include "gloo/alltoallv.h"
#include "gloo/broadcast.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/transport/tcp/device.h"

namespace tfhvd {

namespace {

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

constexpr size_t kRingSegmentBytes = 4 << 20;

// The IPv4 address of a network interface, empty if it has none.
std::string InterfaceAddress(const std::string& iface) {
  ifaddrs* all = nullptr;
  std::string found;
  if (getifaddrs(&all) != 0) return found;
  for (ifaddrs* a = all; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr && a->ifa_addr->sa_family == AF_INET && iface == a->ifa_name) {
      char text[INET_ADDRSTRLEN] = {0};
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text,
                sizeof(text));
      found = text;
      break;
    }
  }
  freeifaddrs(all);
  return found;
}

// Empty buffers are legal for us but not for Gloo's unbound buffers.
char dummy_byte[8];
void* NonNull(void* p) { return p ? p : dummy_byte; }

}  // namespace

Status GlooTransport::Init(Topology* topology) {
  topology->rank = static_cast<int>(params_.rank);
  topology->size = static_cast<int>(params_.size);
  topology->local_rank = static_cast<int>(params_.local_rank);
  topology->local_size = static_cast<int>(params_.local_size);
  topology->cross_rank = static_cast<int>(params_.cross_rank);
  topology->cross_size = static_cast<int>(params_.cross_size);
  rank_ = topology->rank;
  size_ = topology->size;
  if (size_ < 1 || rank_ < 0 || rank_ >= size_) {
    return Status::InvalidArgument("HOROVOD_RANK=" + std::to_string(rank_) +
                                   " is not within HOROVOD_SIZE=" + std::to_string(size_));
  }
  std::string addr = params_.rendezvous_addr;
  int port = static_cast<int>(params_.rendezvous_port);
  if (addr.empty() || port <= 0) {
    return Status::InvalidArgument(
        "HOROVOD_RANK/HOROVOD_SIZE are set but HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT are "
        "not; start the program with tfhvdrun");
  }
  // HOROVOD_GLOO_TIMEOUT_SECONDS bounds both the rendezvous and every
  // collective (a frozen peer fails the job instead of hanging it). Unset,
  // start-up gets longer (ranks may still be importing TensorFlow).
  int timeout_s = static_cast<int>(std::ceil(params_.gloo_timeout_s));
  int start_timeout_s = timeout_s > 0 ? timeout_s : 120;
  int op_timeout_s = static_cast<int>(std::ceil(params_.gloo_op_timeout_s));
  if (op_timeout_s <= 0) op_timeout_s = timeout_s > 0 ? timeout_s : 30;
  // Up to this size an allreduce is latency-bound: one gather over the mesh
  // beats Gloo's ring (measured by python/benchmarks/allreduce_bench.py).
  direct_max_bytes_ = params_.gloo_direct_max_bytes;
  std::string mesh_host;
  Status mesh_status;
  Status s = Guard("rendezvous", [&] {
    gloo::transport::tcp::attr attr;
    attr.hostname = params_.hostname;
    std::string iface = params_.gloo_iface;
    mesh_host = attr.hostname;
    if (!iface.empty()) {
      attr.iface = iface;
      attr.hostname.clear();
      mesh_host = InterfaceAddress(iface);
      if (mesh_host.empty()) throw std::runtime_error("interface " + iface + " has no IPv4 address");
    }
    auto device = gloo::transport::tcp::CreateDevice(attr);
    HttpStore store(addr, port, "gloo", std::chrono::seconds(start_timeout_s),
                    params_.rendezvous_secret, size_);
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
    mesh_status = mesh_.Connect(rank_, size_, mesh_host, prefixed, params_.rendezvous_secret,
                                std::chrono::seconds(start_timeout_s),
                                std::chrono::seconds(op_timeout_s));
    if (!mesh_status.ok()) return;
    mesh_.set_spin(std::chrono::microseconds(params_.spin_us));
    // Homogeneous when every host runs the same number of ranks.
    std::vector<int32_t> local_sizes(static_cast<size_t>(size_));
    int32_t mine = topology->local_size;
    gloo::AllgatherOptions opts(context_);
    opts.setInput(&mine, 1);
    opts.setOutput(local_sizes.data(), local_sizes.size());
    gloo::allgather(opts);
    topology->homogeneous = true;
    for (int32_t n : local_sizes) topology->homogeneous &= (n == local_sizes[0]);
  });
  if (!s.ok()) return s;
  if (!mesh_status.ok()) return mesh_status;
  // One host: larger allreduces go through shared memory instead of loopback
  // TCP (HOROVOD_SHM_ALLREDUCE=0 keeps them on the socket ring).
  return shm_.OpenIfSingleHost(
      rank_, size_, topology->local_size, params_,
      [this](const std::string& mine, std::vector<std::string>* all) {
        return AllgatherStrings(mine, all);
      },
      [this] { return Barrier(); }, "the TCP ring");
}

Status GlooTransport::AllgatherStrings(const std::string& mine, std::vector<std::string>* all) {
  uint64_t len = mine.size(), longest = 0;
  std::vector<uint64_t> lens(static_cast<size_t>(size_));
  Status s = mesh_.Allgather(&len, lens.data(), sizeof(len));
  if (!s.ok()) return s;
  for (uint64_t l : lens) longest = std::max(longest, l);
  std::string padded = mine;
  padded.resize(longest);
  std::string joined(longest * static_cast<size_t>(size_), '\0');
  s = mesh_.Allgather(padded.data(), &joined[0], longest);
  if (!s.ok()) return s;
  all->clear();
  for (size_t r = 0; r < static_cast<size_t>(size_); ++r) all->push_back(joined.substr(r * longest, lens[r]));
  return Status();
}

void GlooTransport::Finalize() {
  shm_.Close();
  mesh_.Close();
  context_.reset();
}

Status GlooTransport::GatherBytes(const std::string& mine, std::vector<std::string>* all) {
  if (rank_ != 0) return mesh_.SendBytes(0, mine);
  all->assign(static_cast<size_t>(size_), std::string());
  (*all)[0] = mine;
  for (int r = 1; r < size_; ++r) {
    Status s = mesh_.RecvBytes(r, &(*all)[static_cast<size_t>(r)]);
    if (!s.ok()) return s;
  }
  return Status();
}

Status GlooTransport::BroadcastBytes(std::string* data, int root) {
  if (rank_ != root) return mesh_.RecvBytes(root, data);
  for (int r = 0; r < size_; ++r) {
    if (r == root) continue;
    Status s = mesh_.SendBytes(r, *data);
    if (!s.ok()) return s;
  }
  return Status();
}

Status GlooTransport::BitwiseOr(uint64_t* words, size_t n) {
  scratch_.resize(static_cast<size_t>(size_) * n * sizeof(uint64_t));
  Status s = mesh_.Allgather(words, scratch_.data(), n * sizeof(uint64_t));
  if (!s.ok()) return s;
  const auto* all = reinterpret_cast<const uint64_t*>(scratch_.data());
  for (int r = 0; r < size_; ++r)
    for (size_t i = 0; i < n; ++i) words[i] |= all[static_cast<size_t>(r) * n + i];
  return Status();
}

Status GlooTransport::DirectAllreduce(const void* input, void* output, int64_t count,
                                      DataType dtype, ReduceOp op) {
  const size_t bytes = static_cast<size_t>(count) * DataTypeSize(dtype);
  scratch_.resize(static_cast<size_t>(size_) * bytes);
  Status s = mesh_.Allgather(input, scratch_.data(), bytes);
  if (!s.ok()) return s;
  const char* blocks = scratch_.data();
  ReduceBuffers(dtype, op, output, blocks, blocks + bytes, static_cast<size_t>(count));
  for (int r = 2; r < size_; ++r) {
    ReduceBuffers(dtype, op, output, output, blocks + static_cast<size_t>(r) * bytes,
                  static_cast<size_t>(count));
  }
  return Status();
}

Status GlooTransport::Allreduce(const void* input, void* output, int64_t count, DataType dtype,
                                ReduceOp op) {
  if (count == 0) return Status();
  const int64_t bytes = count * static_cast<int64_t>(DataTypeSize(dtype));
  if (size_ == 1) {  // tfhvdrun -np 1: nothing to combine
    if (output != input) std::memmove(output, input, static_cast<size_t>(bytes));
    return Status();
  }
  if (bytes <= direct_max_bytes_) {
    return DirectAllreduce(input, output, count, dtype, op);
  }
  if (shm_.active() && bytes >= params_.shm_min_bytes) {
    return shm_.Allreduce(input, output, count, dtype, op);
  }
  return RingAllreduce(input, output, count, dtype, op);
}

Status GlooTransport::RingAllreduce(const void* input, void* output, int64_t count,
                                   DataType dtype, ReduceOp op) {
  const size_t elem = DataTypeSize(dtype);
  const size_t n = static_cast<size_t>(size_);
  const size_t r = static_cast<size_t>(rank_);
  // Chunk c covers elements [begin(c), begin(c+1)).
  auto begin = [&](size_t c) { return static_cast<size_t>(count) * c / n; };
  const char* in = static_cast<const char*>(input);
  char* out = static_cast<char*>(output);
  const int next = static_cast<int>((r + 1) % n), prev = static_cast<int>((r + n - 1) % n);
  const size_t segment = kRingSegmentBytes / elem;
  scratch_.resize(segment * elem);
  // Reduce-scatter: at step s send chunk r-s, receive chunk r-s-1 and combine
  // it with this rank's input; chunk r+1 ends fully reduced here. Each chunk
  // is reduced along one path, so every rank ends with the same bits.
  for (size_t s = 0; s + 1 < n; ++s) {
    size_t send_c = (r + n - s) % n, recv_c = (r + 2 * n - s - 1) % n;
    const char* send = (s == 0 ? in : out) + begin(send_c) * elem;
    size_t send_len = begin(send_c + 1) - begin(send_c);
    size_t recv_first = begin(recv_c), recv_len = begin(recv_c + 1) - recv_first;
    for (size_t done_s = 0, done_r = 0; done_s < send_len || done_r < recv_len;) {
      size_t ks = std::min(segment, send_len - done_s), kr = std::min(segment, recv_len - done_r);
      Status st = mesh_.Exchange(next, send + done_s * elem, ks * elem, prev, scratch_.data(),
                                 kr * elem);
      if (!st.ok()) return st;
      size_t at = (recv_first + done_r) * elem;
      ReduceBuffers(dtype, op, out + at, in + at, scratch_.data(), kr);
      done_s += ks;
      done_r += kr;
    }
  }
  // Allgather: pass the reduced chunks around the ring.
  for (size_t s = 0; s + 1 < n; ++s) {
    size_t send_c = (r + 1 + n - s) % n, recv_c = (r + n - s) % n;
    Status st = mesh_.Exchange(next, out + begin(send_c) * elem,
                               (begin(send_c + 1) - begin(send_c)) * elem, prev,
                               out + begin(recv_c) * elem,
                               (begin(recv_c + 1) - begin(recv_c)) * elem);
    if (!st.ok()) return st;
  }
  return Status();
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
  uint64_t word = 0;
  return BitwiseOr(&word, 1);
}

}  // namespace tfhvd
