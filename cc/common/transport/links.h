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
#ifndef TFHVD_COMMON_TRANSPORT_LINKS_H_
#define TFHVD_COMMON_TRANSPORT_LINKS_H_

#include <cstddef>

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
