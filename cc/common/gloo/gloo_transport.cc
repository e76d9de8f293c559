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

#include "cc/common/gloo/crypto_library.h"
#include "cc/common/gloo/http_store.h"
#include "cc/common/logging.h"
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
  // The rendezvous and the mesh are signed with the system's libcrypto: a machine
  // without one fails here, saying what to install (not as a failed rendezvous).
  Status crypto = CryptoLibrary::Load();
  if (!crypto.ok()) return crypto;
  // HOROVOD_GLOO_TIMEOUT_SECONDS bounds every collective (a frozen peer fails
  // the job instead of hanging it) and, unless HOROVOD_START_TIMEOUT
  // (--start-timeout) is set, the rendezvous. Unset, start-up gets longer
  // (ranks may still be importing TensorFlow).
  int timeout_s = static_cast<int>(std::ceil(params_.gloo_timeout_s));
  int start_timeout_s = params_.start_timeout_s > 0
                            ? static_cast<int>(std::ceil(params_.start_timeout_s))
                            : (timeout_s > 0 ? timeout_s : 120);
  int op_timeout_s = static_cast<int>(std::ceil(params_.gloo_op_timeout_s));
  if (op_timeout_s <= 0) op_timeout_s = timeout_s > 0 ? timeout_s : 30;
  std::string mesh_host;
  Status links_status;
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
    // Elastic rounds: processes of one round have done different numbers of
    // inits (a rank that joins has done none), so the round names the prefix.
    if (params_.elastic_round >= 0) prefix = "elastic." + std::to_string(params_.elastic_round);
    gloo::rendezvous::PrefixStore prefixed(prefix, store);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank_, size_);
    context->setTimeout(std::chrono::seconds(op_timeout_s));
    context->connectFullMesh(prefixed, device);
    context_ = context;
    if (params_.gloo_links == "mesh") {
      links_status = mesh_.Connect(rank_, size_, mesh_host, prefixed, params_.rendezvous_secret,
                                   std::chrono::seconds(start_timeout_s),
                                   std::chrono::seconds(op_timeout_s));
      mesh_.set_spin(std::chrono::microseconds(params_.spin_us));
      links_ = &mesh_;
    } else {
      links_status = pairs_.Connect(rank_, size_, prefixed, device,
                                    std::chrono::seconds(op_timeout_s),
                                    params_.gloo_links == "pairs_busy_poll");
      links_ = &pairs_;
    }
    if (!links_status.ok()) return;
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
  return links_status;
}

void GlooTransport::Finalize() {
  links_ = nullptr;
  pairs_.Close();
  mesh_.Close();
  context_.reset();
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
