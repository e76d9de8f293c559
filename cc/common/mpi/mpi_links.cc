#include "cc/common/mpi/mpi_links.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <thread>

#include "cc/common/transport/peer_loss.h"

namespace tfhvd {

namespace {

// MPI counts are ints: larger transfers go in pieces of at most this size.
constexpr size_t kMaxPiece = INT_MAX / 2;
constexpr int kTag = 7;
// Sleep between tests once the spin is over (the shared-memory allreduce naps
// as long between checks of its peers' counters).
constexpr int64_t kNapUs = 50;

std::string Peer(const char* what, int peer) {
  return std::string(what) + " rank " + std::to_string(peer);
}

// A failed transfer names the peer and why that usually happens.
Status Lost(Status s) {
  if (s.ok()) return s;
  return Status(s.code(), s.message() + " (a rank may have exited or crashed)");
}

}  // namespace

Status MpiCheck(int rc, const std::string& what) {
  if (rc == MPI_SUCCESS) return Status();
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return Status::Unavailable("MPI " + what + " failed: " + std::string(text, len));
}

Status MpiWait(MPI_Request* requests, int n, int64_t spin_us, const std::string& what,
               double limit_s) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto spin_until = start + std::chrono::microseconds(spin_us);
  // Naps stay short: MPI offers no way to sleep until a message arrives (the
  // Gloo transport sleeps in poll(), which wakes at once), so the nap length is
  // the latency added when the peer arrives during one. Long naps (they grew to
  // 1 ms) delayed every round whose peer came late, e.g. after backprop.
  const auto nap = std::chrono::microseconds(kNapUs);
  for (;;) {
    int done = 0;
    Status s = MpiCheck(MPI_Testall(n, requests, &done, MPI_STATUSES_IGNORE), what);
    if (!s.ok() || done) return s;
    if (PeerLost()) return PeerLostError();  // that rank will not answer
    if (limit_s > 0 && Clock::now() - start > std::chrono::duration<double>(limit_s)) {
      return Status::DeadlineExceeded(
          "MPI " + what + " made no progress for " + std::to_string(static_cast<int>(limit_s)) +
          " s (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS): that rank is stalled or dead");
    }
    if (Clock::now() < spin_until) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(nap);
    }
  }
}

Status MpiLinks::Send(int to, const void* data, size_t bytes) {
  return Exchange(to, data, bytes, to, nullptr, 0);
}

Status MpiLinks::Recv(int from, void* data, size_t bytes) {
  return Exchange(from, nullptr, 0, from, data, bytes);
}

Status MpiLinks::Post(int to, const char* send, size_t send_bytes, int from, char* recv,
                      size_t recv_bytes, Posted* p) {
  p->n = 0;
  p->to = to;
  p->from = from;
  p->sending = send_bytes > 0;
  p->receiving = recv_bytes > 0;
  if (recv_bytes > 0) {
    Status s = Lost(MpiCheck(MPI_Irecv(recv, static_cast<int>(recv_bytes), MPI_BYTE, from, kTag,
                                       comm_, &p->requests[p->n++]),
                             Peer("receive from", from)));
    if (!s.ok()) return s;
  }
  if (send_bytes > 0) {
    Status s = Lost(MpiCheck(MPI_Isend(send, static_cast<int>(send_bytes), MPI_BYTE, to, kTag,
                                       comm_, &p->requests[p->n++]),
                             Peer("send to", to)));
    if (!s.ok()) return s;
  }
  return Status();
}

Status MpiLinks::Complete(Posted* p) {
  if (p->n == 0) return Status();
  std::string what = !p->sending     ? Peer("receive from", p->from)
                     : !p->receiving ? Peer("send to", p->to)
                                     : Peer("send to", p->to) + " / " + Peer("receive from", p->from);
  return Lost(MpiWait(p->requests, p->n, spin_us_, what, limit_s_))
      .WithPeer(p->receiving ? p->from : p->to);
}

Status MpiLinks::Exchange(int to, const void* send, size_t send_bytes, int from, void* recv,
                          size_t recv_bytes) {
  // After the started exchanges, whose messages were posted first.
  while (!posted_.empty()) {
    Status s = FinishExchange();
    if (!s.ok()) return s;
  }
  const char* out = static_cast<const char*>(send);
  char* in = static_cast<char*>(recv);
  for (size_t done_s = 0, done_r = 0; done_s < send_bytes || done_r < recv_bytes;) {
    size_t ks = std::min(kMaxPiece, send_bytes - done_s);
    size_t kr = std::min(kMaxPiece, recv_bytes - done_r);
    Posted p;
    Status s = Post(to, out + done_s, ks, from, in + done_r, kr, &p);
    if (s.ok()) s = Complete(&p);
    if (!s.ok()) return s;
    done_s += ks;
    done_r += kr;
  }
  return Status();
}

Status MpiLinks::StartExchange(int to, const void* send, size_t send_bytes, int from,
                               void* recv, size_t recv_bytes) {
  if (posted_.size() >= kMaxStarted) return TooManyStarted();
  Status s;
  if (send_bytes > kMaxPiece || recv_bytes > kMaxPiece) {
    // Beyond one MPI count: the whole transfer now (after the started ones),
    // and an empty entry for its FinishExchange.
    s = Exchange(to, send, send_bytes, from, recv, recv_bytes);
    if (s.ok()) posted_.emplace_back();
  } else {
    posted_.emplace_back();
    s = Post(to, static_cast<const char*>(send), send_bytes, from, static_cast<char*>(recv),
             recv_bytes, &posted_.back());
  }
  if (!s.ok()) posted_.clear();
  return s;
}

Status MpiLinks::FinishExchange() {
  if (posted_.empty()) return NothingStarted();
  Status s = Complete(&posted_.front());
  posted_.pop_front();
  if (!s.ok()) posted_.clear();
  return s;
}

}  // namespace tfhvd
