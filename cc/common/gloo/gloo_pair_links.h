// Links between ranks over Gloo's own TCP pairs in synchronous mode.
//
// A context of its own (a second full mesh, separate from the one Gloo's
// collectives use) whose pairs are switched to synchronous mode: Gloo's
// device thread stops watching their sockets and the calling thread writes
// and reads them itself (a blocking write, a blocking read bounded by the
// job's op timeout), so a message costs no thread hand-off. Messages use
// bound buffers: Gloo's unbound buffers complete only through the device
// thread, which a synchronous pair no longer has.
//
//   GlooPairLinks links;
//   Status s = links.Connect(rank, size, store, device, timeout);
//   s = links.Exchange(next, mine, n, prev, theirs, n);
#ifndef TFHVD_COMMON_GLOO_GLOO_PAIR_LINKS_H_
#define TFHVD_COMMON_GLOO_GLOO_PAIR_LINKS_H_

#include <chrono>
#include <deque>
#include <memory>

#include "cc/common/transport/links.h"

namespace gloo {
class Context;
namespace rendezvous { class Store; }
namespace transport { class Device; }
}  // namespace gloo

namespace tfhvd {

class GlooPairLinks : public Links {
 public:
  // Largest piece Exchange writes before reading: both sides of a link may
  // write at once, so two pieces must fit in the socket buffers (Gloo raises
  // SO_SNDBUF to the message size; Linux's default cap gives 416 KiB, plus
  // the receiver's buffer).
  static constexpr size_t kPieceBytes = 256 << 10;

  GlooPairLinks() = default;
  ~GlooPairLinks() override;
  GlooPairLinks(const GlooPairLinks&) = delete;
  GlooPairLinks& operator=(const GlooPairLinks&) = delete;

  // Collective: connects to every other rank through store (under its own
  // key prefix) on device. timeout bounds the connection and every transfer.
  // busy_poll: a waiting read spins on the socket (MSG_DONTWAIT) until data
  // or the timeout instead of sleeping in the kernel: lower latency, but a
  // waiting rank keeps a core busy for as long as it waits.
  Status Connect(int rank, int size, gloo::rendezvous::Store& store,
                 std::shared_ptr<gloo::transport::Device> device,
                 std::chrono::milliseconds timeout, bool busy_poll);
  void Close();

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status Send(int to, const void* data, size_t bytes) override;
  Status Recv(int from, void* data, size_t bytes) override;
  Status Exchange(int to, const void* send, size_t send_bytes, int from, void* recv,
                  size_t recv_bytes) override;
  // The oldest started exchange has its first piece written (the kernel sends
  // it while the caller works); FinishExchange does the rest as Exchange
  // would. Exchange runs after the started exchanges.
  Status StartExchange(int to, const void* send, size_t send_bytes, int from, void* recv,
                       size_t recv_bytes) override;
  Status FinishExchange() override;

 private:
  // One transfer's progress; written: piece done_s is written, not yet read.
  struct Flow : Transfer {
    explicit Flow(const Transfer& t) : Transfer(t) {}
    size_t done_s = 0, done_r = 0;
    bool written = false;
  };
  Status Run(Flow& f);
  Status WriteFirstPiece(Flow& f);

  // One message of at most kPieceBytes.
  Status SendOne(int to, const char* data, size_t bytes);
  Status RecvOne(int from, char* data, size_t bytes);

  std::shared_ptr<gloo::Context> context_;
  int rank_ = 0, size_ = 1;
  std::deque<Flow> flows_;  // started exchanges, oldest first
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_GLOO_GLOO_PAIR_LINKS_H_
