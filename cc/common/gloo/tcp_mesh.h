// A full mesh of TCP connections between the ranks of a Gloo job, read and
// written directly by the calling (background) thread: the links
// (cc/common/transport/links.h) of HOROVOD_GLOO_LINKS=mesh.
//
// Gloo's TCP device hands every message to its own event-loop thread and back
// through a condition variable: two thread wake-ups per message, which on a
// busy host cost more than the message itself (docs/performance.md, "Gloo's
// links"). The per-cycle negotiation and small allreduces are
// latency-bound, so they go over these sockets instead: one blocking poll and
// read per message. Connections are set up through the job's rendezvous store
// and every connecting rank proves it belongs to the job with a token derived
// from the rendezvous secret. Errors name the peer rank.
#ifndef TFHVD_COMMON_GLOO_TCP_MESH_H_
#define TFHVD_COMMON_GLOO_TCP_MESH_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "cc/common/transport/links.h"

namespace gloo { namespace rendezvous { class Store; } }

namespace tfhvd {

class TcpMesh : public Links {
 public:
  TcpMesh() = default;
  ~TcpMesh() override;
  TcpMesh(const TcpMesh&) = delete;
  TcpMesh& operator=(const TcpMesh&) = delete;

  // Listens on host (an IPv4 address or name), publishes the address in the
  // store and connects to every other rank. secret authenticates peers.
  Status Connect(int rank, int size, const std::string& host, gloo::rendezvous::Store& store,
                 const std::string& secret, std::chrono::milliseconds connect_timeout,
                 std::chrono::milliseconds op_timeout);
  void Close();
  // How long a transfer retries without sleeping before it polls (not while a
  // later started exchange keeps the link busy).
  void set_spin(std::chrono::microseconds spin) { spin_ = spin; }

  // Links: Exchange never deadlocks when both sides send first (non-blocking
  // sockets, one poll over both directions).
  Status Exchange(int to, const void* send, size_t send_bytes, int from, void* recv,
                  size_t recv_bytes) override;
  Status Send(int to, const void* data, size_t bytes) override;
  Status Recv(int from, void* data, size_t bytes) override;
  // StartExchange writes and reads what the sockets take at once; the kernel
  // keeps sending and receiving (its buffers hold up to 4 MiB a way) until
  // FinishExchange. Exchange runs after the started exchanges.
  Status StartExchange(int to, const void* send, size_t send_bytes, int from, void* recv,
                       size_t recv_bytes) override;
  Status FinishExchange() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

 private:
  // One transfer's progress: what is left to send to `to` and receive from `from`.
  using Flow = Transfer;
  // One non-blocking send and receive call each.
  Status TryOnce(Flow& f);
  // TryOnce on the first unfinished send and receive of the queued flows.
  Status TryStarted();
  // Moves the queued flows until the oldest is done (all: every one), or the
  // op timeout passes.
  Status Drive(bool all);

  int rank_ = 0, size_ = 1;
  std::vector<int> fds_;  // fds_[r]: socket to rank r (-1 for this rank)
  std::chrono::milliseconds op_timeout_{30000};
  std::chrono::microseconds spin_{0};
  std::deque<Flow> flows_;  // started exchanges (and a running Exchange), oldest first
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_GLOO_TCP_MESH_H_
