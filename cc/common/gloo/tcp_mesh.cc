#include "cc/common/gloo/tcp_mesh.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <exception>

#include "cc/common/gloo/signing.h"
#include "cc/common/transport/peer_loss.h"
#include "gloo/rendezvous/store.h"

namespace tfhvd {

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kTokenBytes = 32;
// Why a connection ends mid-job. A rank whose core stopped after an error
// closes its sockets too, so with 3+ ranks the rank named may be a survivor.
constexpr const char* kGone =
    "a rank may have exited or crashed, or stopped after another rank's failure";

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// What a connecting rank sends first: its rank and a token only a holder of
// the job's secret can compute.
std::string Token(const std::string& secret, int rank) {
  return HmacSha256(secret, "tf_hvd tcp mesh rank " + std::to_string(rank));
}

void Tune(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  int bytes = 4 << 20;  // room for a whole small collective in flight
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

// Blocking helpers used only while connecting (fd still blocking, bounded by
// SO_RCVTIMEO/SO_SNDTIMEO).
bool WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool ReadAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t k = ::recv(fd, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

void SetTimeouts(int fd, std::chrono::milliseconds t) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(t.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((t.count() % 1000) * 1000);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

Status Resolve(const std::string& host, in_addr* out) {
  if (inet_pton(AF_INET, host.c_str(), out) == 1) return Status();
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) {
    return Status::Unavailable("cannot resolve '" + host + "' for the TCP mesh");
  }
  *out = reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr;
  freeaddrinfo(found);
  return Status();
}

}  // namespace

TcpMesh::~TcpMesh() { Close(); }

void TcpMesh::Close() {
  for (int& fd : fds_) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  fds_.clear();
}

Status TcpMesh::Connect(int rank, int size, const std::string& host,
                        gloo::rendezvous::Store& store, const std::string& secret,
                        std::chrono::milliseconds connect_timeout,
                        std::chrono::milliseconds op_timeout) {
  Close();
  rank_ = rank;
  size_ = size;
  op_timeout_ = op_timeout;
  fds_.assign(static_cast<size_t>(size), -1);
  if (size == 1) return Status();

  in_addr ip{};
  Status s = Resolve(host, &ip);
  if (!s.ok()) return s;
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) return Status::Unavailable(Errno("TCP mesh socket"));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr = ip;
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listener, size) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    s = Status::Unavailable(Errno(("TCP mesh listen on " + host).c_str()));
    ::close(listener);
    return s;
  }
  char text[INET_ADDRSTRLEN] = {0};
  inet_ntop(AF_INET, &addr.sin_addr, text, sizeof(text));
  std::string mine = std::string(text) + ":" + std::to_string(ntohs(addr.sin_port));

  try {
    store.set("mesh/" + std::to_string(rank), std::vector<char>(mine.begin(), mine.end()));
    // Higher ranks connect to lower ones.
    for (int peer = 0; peer < rank; ++peer) {
      std::string key = "mesh/" + std::to_string(peer);
      store.wait({key}, connect_timeout);
      std::vector<char> value = store.get(key);
      std::string where(value.begin(), value.end());
      size_t colon = where.rfind(':');
      sockaddr_in to{};
      to.sin_family = AF_INET;
      to.sin_port = htons(static_cast<uint16_t>(std::atoi(where.c_str() + colon + 1)));
      if (colon == std::string::npos ||
          inet_pton(AF_INET, where.substr(0, colon).c_str(), &to.sin_addr) != 1) {
        throw std::runtime_error("bad TCP mesh address '" + where + "' for rank " +
                                 std::to_string(peer));
      }
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      SetTimeouts(fd, connect_timeout);
      int32_t me = rank;
      std::string token = Token(secret, rank);
      if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0 ||
          !WriteAll(fd, &me, sizeof(me)) || !WriteAll(fd, token.data(), token.size())) {
        std::string why = Errno("connect");
        ::close(fd);
        throw std::runtime_error("cannot connect to rank " + std::to_string(peer) + " at " +
                                 where + " (" + why + ")");
      }
      fds_[static_cast<size_t>(peer)] = fd;
    }
  } catch (const std::exception& e) {
    ::close(listener);
    return Status::Unavailable(std::string("TCP mesh set-up failed: ") + e.what());
  }

  // Accept the higher ranks; connections without the job's token are dropped.
  int missing = size - 1 - rank;
  auto deadline = Clock::now() + connect_timeout;
  while (missing > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd p{listener, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
      std::string who;
      for (int r = rank + 1; r < size; ++r)
        if (fds_[static_cast<size_t>(r)] < 0) who += (who.empty() ? "" : ",") + std::to_string(r);
      ::close(listener);
      return Status::Unavailable("TCP mesh set-up: rank(s) " + who + " did not connect within " +
                                 std::to_string(connect_timeout.count() / 1000) + " s");
    }
    int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    SetTimeouts(fd, std::chrono::milliseconds(2000));
    int32_t peer = -1;
    std::string token(kTokenBytes, '\0');
    if (!ReadAll(fd, &peer, sizeof(peer)) || !ReadAll(fd, &token[0], token.size()) ||
        peer <= rank || peer >= size || fds_[static_cast<size_t>(peer)] >= 0 ||
        !ConstantTimeEquals(token, Token(secret, peer))) {
      ::close(fd);  // not a rank of this job
      continue;
    }
    fds_[static_cast<size_t>(peer)] = fd;
    --missing;
  }
  ::close(listener);
  for (int fd : fds_) {
    if (fd < 0) continue;
    SetTimeouts(fd, std::chrono::milliseconds(0));
    Tune(fd);
  }
  return Status();
}

Status TcpMesh::TryOnce(Flow& f) {
  // Non-blocking calls: a small message usually goes (or has arrived) at
  // once, which saves a poll.
  if (f.send_bytes > 0) {
    ssize_t k = ::send(fds_[static_cast<size_t>(f.to)], f.send, f.send_bytes,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      f.send += k;
      f.send_bytes -= static_cast<size_t>(k);
    } else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return Status::Unavailable("lost the connection to rank " + std::to_string(f.to) + " (" +
                                 Errno("send") + "): " + kGone)
          .WithPeer(f.to);
    }
  }
  if (f.recv_bytes > 0) {
    ssize_t k = ::recv(fds_[static_cast<size_t>(f.from)], f.recv, f.recv_bytes, MSG_DONTWAIT);
    if (k > 0) {
      f.recv += k;
      f.recv_bytes -= static_cast<size_t>(k);
    } else if (k == 0) {
      return Status::Unavailable("rank " + std::to_string(f.from) +
                                 " closed its connection: " + kGone)
          .WithPeer(f.from);
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return Status::Unavailable("lost the connection to rank " + std::to_string(f.from) +
                                 " (" + Errno("recv") + "): " + kGone)
          .WithPeer(f.from);
    }
  }
  return Status();
}

Status TcpMesh::TryStarted() {
  // Bytes of a later exchange follow the earlier one's on each stream: only
  // the first unfinished send and the first unfinished receive move.
  for (Flow& f : flows_) {
    if (f.send_bytes == 0) continue;
    Flow head{f.to, f.from, f.send, f.send_bytes, nullptr, 0};
    Status s = TryOnce(head);
    if (!s.ok()) return s;
    f.send = head.send;
    f.send_bytes = head.send_bytes;
    if (f.send_bytes > 0) break;
  }
  for (Flow& f : flows_) {
    if (f.recv_bytes == 0) continue;
    Flow head{f.to, f.from, nullptr, 0, f.recv, f.recv_bytes};
    Status s = TryOnce(head);
    if (!s.ok()) return s;
    f.recv = head.recv;
    f.recv_bytes = head.recv_bytes;
    if (f.recv_bytes > 0) break;
  }
  return Status();
}

Status TcpMesh::Drive(bool all) {
  const auto start = Clock::now();
  // The op timeout bounds a wait without progress, not a whole transfer: a
  // long one over a slow link moves on as long as bytes keep moving.
  auto deadline = start + op_timeout_;
  auto owed_now = [this] {  // bytes the queued flows still have to move
    size_t n = 0;
    for (const Flow& f : flows_) n += f.send_bytes + f.recv_bytes;
    return n;
  };
  size_t owed = owed_now();
  // Spin only when this is the only transfer under way: with a later one
  // started, the link stays busy while this thread sleeps in poll, so the
  // wake-up costs nothing, and on a host whose cores are shared a spinning
  // rank takes the core a peer needs to produce the next piece.
  const auto spin_until = flows_.size() == 1 ? start + spin_ : start;
  for (;;) {
    Status s = TryStarted();
    if (!s.ok()) return s;
    while (!flows_.empty() && flows_.front().send_bytes == 0 && flows_.front().recv_bytes == 0) {
      flows_.pop_front();
      if (!all) return Status();
    }
    if (flows_.empty()) return Status();
    if (owed_now() != owed) {
      owed = owed_now();
      deadline = Clock::now() + op_timeout_;
    }
    // The peer usually answers within microseconds: retrying for a moment,
    // yielding the core meanwhile, saves the sleep and wake-up of a poll.
    if (spin_.count() > 0 && Clock::now() < spin_until) {
      sched_yield();
      continue;
    }
    pollfd p[2];
    nfds_t n = 0;
    int peer = -1;  // whom a timeout names: the first rank still owing bytes
    for (const Flow& f : flows_) {
      if (f.send_bytes == 0) continue;
      p[n++] = {fds_[static_cast<size_t>(f.to)], POLLOUT, 0};
      peer = f.to;
      break;
    }
    for (const Flow& f : flows_) {
      if (f.recv_bytes == 0) continue;
      p[n++] = {fds_[static_cast<size_t>(f.from)], POLLIN, 0};
      peer = f.from;
      break;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      return Status::Unavailable(
          "no progress with rank " + std::to_string(peer) + " for " +
          std::to_string(op_timeout_.count() / 1000) +
          " s (HOROVOD_GLOO_OP_TIMEOUT_SECONDS): that rank is stalled, dead or unreachable")
          .WithPeer(peer);
    }
    // A peer the liveness monitor declared lost will not answer: stop now.
    if (PeerLost()) return PeerLostError();
    // Woken at least every 200 ms to look at the liveness monitor's verdict.
    int rc = ::poll(p, n, static_cast<int>(std::min<int64_t>(left.count(), 200)));
    if (rc < 0 && errno != EINTR) return Status::Unavailable(Errno("TCP mesh poll"));
  }
}

Status TcpMesh::Exchange(int to, const void* send, size_t send_bytes, int from, void* recv,
                         size_t recv_bytes) {
  // After the started exchanges, whose bytes go first.
  flows_.push_back(Flow(MakeTransfer(to, send, send_bytes, from, recv, recv_bytes)));
  Status s = Drive(true);
  if (!s.ok()) flows_.clear();
  return s;
}

Status TcpMesh::StartExchange(int to, const void* send, size_t send_bytes, int from,
                              void* recv, size_t recv_bytes) {
  // What the socket buffers take now goes out (and what has arrived comes in);
  // the kernel keeps sending and receiving while the caller works.
  if (flows_.size() >= kMaxStarted) return TooManyStarted();
  flows_.push_back(Flow(MakeTransfer(to, send, send_bytes, from, recv, recv_bytes)));
  Status s = TryStarted();
  if (!s.ok()) flows_.clear();
  return s;
}

Status TcpMesh::FinishExchange() {
  if (flows_.empty()) return NothingStarted();
  Status s = Drive(false);
  if (!s.ok()) flows_.clear();
  return s;
}

Status TcpMesh::Send(int to, const void* data, size_t bytes) {
  return Exchange(to, data, bytes, to, nullptr, 0);
}

Status TcpMesh::Recv(int from, void* data, size_t bytes) {
  return Exchange(from, nullptr, 0, from, data, bytes);
}

}  // namespace tfhvd
