// Links between ranks: the point-to-point byte transfers every allreduce
// algorithm (cc/common/algorithms/) is written against. A backend (Gloo's TCP
// pairs or the own socket mesh, MPI, one local process) implements this and
// nothing else the algorithms see, so an algorithm never knows which library
// carries its bytes.
//
// Every call blocks the calling (background) thread until its bytes have gone
// out / arrived, and both sides of a transfer agree on the byte counts. Every
// error is a Status naming the peer rank; a lost peer says "a rank may have
// exited or crashed".
//
//   Links* links = transport->links();
//   Status s = links->Exchange(next, mine, n, prev, theirs, n);  // a ring step
//
//   s = links->StartExchange(next, mine, n, prev, theirs, n);  // the same, in two
//   Reduce(previous_piece);                                    // halves: work while
//   s = links->FinishExchange();                               // the bytes move
#ifndef TFHVD_COMMON_TRANSPORT_LINKS_H_
#define TFHVD_COMMON_TRANSPORT_LINKS_H_

#include <cstddef>
#include <deque>
#include <string>

#include "cc/common/common.h"

namespace tfhvd {

class Links {
 public:
  virtual ~Links() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  virtual Status Send(int to, const void* data, size_t bytes) = 0;
  virtual Status Recv(int from, void* data, size_t bytes) = 0;
  // Sends send_bytes to rank `to` while receiving recv_bytes from rank `from`
  // (to and from may be the same peer). Never deadlocks when both sides of a
  // link call Exchange at once, each sending first.
  virtual Status Exchange(int to, const void* send, size_t send_bytes, int from, void* recv,
                          size_t recv_bytes) = 0;

  // Exchange in two halves, so the caller can work (reduce the piece that came
  // before) while bytes move: StartExchange hands over and takes in what it
  // can without waiting, FinishExchange waits for the oldest started exchange
  // to end. Up to kMaxStarted exchanges may be started and not finished (so a
  // ring keeps the next piece in flight while it waits for this one); their
  // bytes go on the wire in the order they were started, exactly as the same
  // sequence of Exchange calls would send them, so a peer may answer either
  // way. send must stay unchanged and recv untouched until the exchange is
  // finished. After an error every started exchange is dropped. The default
  // starts nothing and runs each Exchange in FinishExchange: correct for every
  // backend, without the overlap.
  static constexpr size_t kMaxStarted = 2;
  virtual Status StartExchange(int to, const void* send, size_t send_bytes, int from,
                               void* recv, size_t recv_bytes) {
    if (started_.size() >= kMaxStarted) return TooManyStarted();
    started_.push_back(MakeTransfer(to, send, send_bytes, from, recv, recv_bytes));
    return Status();
  }
  virtual Status FinishExchange() {
    if (started_.empty()) return NothingStarted();
    Transfer e = started_.front();
    started_.pop_front();
    Status s = Exchange(e.to, e.send, e.send_bytes, e.from, e.recv, e.recv_bytes);
    if (!s.ok()) started_.clear();
    return s;
  }

 protected:
  // One exchange's arguments, kept by StartExchange until it is finished.
  struct Transfer {
    int to, from;
    const char* send;
    size_t send_bytes;
    char* recv;
    size_t recv_bytes;
  };
  static Transfer MakeTransfer(int to, const void* send, size_t send_bytes, int from,
                               void* recv, size_t recv_bytes) {
    return Transfer{to, from, static_cast<const char*>(send), send_bytes,
                    static_cast<char*>(recv), recv_bytes};
  }
  static Status TooManyStarted() {
    return Status::Precondition("StartExchange: " + std::to_string(kMaxStarted) +
                                " exchanges are already started and not finished");
  }
  static Status NothingStarted() {
    return Status::Precondition("FinishExchange without a started exchange");
  }

 private:
  std::deque<Transfer> started_;
};

// The links of a job of one process: there is no peer to talk to.
class SelfLinks : public Links {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Status Send(int to, const void*, size_t) override { return NoPeer(to); }
  Status Recv(int from, void*, size_t) override { return NoPeer(from); }
  Status Exchange(int to, const void*, size_t, int, void*, size_t) override {
    return NoPeer(to);
  }

 private:
  static Status NoPeer(int peer) {
    return Status::InvalidArgument("no rank " + std::to_string(peer) +
                                   " in a job of one process");
  }
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_TRANSPORT_LINKS_H_
