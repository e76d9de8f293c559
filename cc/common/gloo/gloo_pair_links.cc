#include "cc/common/gloo/gloo_pair_links.h"

#include <algorithm>
#include <exception>
#include <string>

#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/transport/buffer.h"
#include "gloo/transport/pair.h"

namespace tfhvd {

namespace {

// Every message of a link uses this slot; messages of a pair arrive in order
// and a receiver registers its buffer before it reads.
constexpr int kSlot = 0x7466;

Status Lost(const char* what, int peer, const std::exception& e) {
  return Status::Unavailable(std::string(what) + " rank " + std::to_string(peer) +
                             " failed (gloo: " + e.what() +
                             "): a rank may have exited or crashed, or stopped after another "
                             "rank's failure")
      .WithPeer(peer);
}

}  // namespace

GlooPairLinks::~GlooPairLinks() { Close(); }

void GlooPairLinks::Close() { context_.reset(); }

Status GlooPairLinks::Connect(int rank, int size, gloo::rendezvous::Store& store,
                              std::shared_ptr<gloo::transport::Device> device,
                              std::chrono::milliseconds timeout, bool busy_poll) {
  Close();
  rank_ = rank;
  size_ = size;
  if (size == 1) return Status();
  try {
    gloo::rendezvous::PrefixStore prefixed("links", store);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->setTimeout(timeout);
    context->connectFullMesh(prefixed, device);
    for (int peer = 0; peer < size; ++peer) {
      if (peer != rank) context->getPair(peer)->setSync(true, busy_poll);
    }
    context_ = context;
  } catch (const std::exception& e) {
    return Status::Unavailable(std::string("connecting Gloo's TCP pairs failed: ") + e.what());
  }
  return Status();
}

Status GlooPairLinks::SendOne(int to, const char* data, size_t bytes) {
  try {
    auto& pair = context_->getPair(to);
    auto buffer = pair->createSendBuffer(kSlot, const_cast<char*>(data), bytes);
    buffer->send(0, bytes, 0);  // synchronous: returns once written
    buffer->waitSend();
  } catch (const std::exception& e) {
    return Lost("sending to", to, e);
  }
  return Status();
}

Status GlooPairLinks::RecvOne(int from, char* data, size_t bytes) {
  try {
    auto& pair = context_->getPair(from);
    auto buffer = pair->createRecvBuffer(kSlot, data, bytes);
    buffer->waitRecv();  // synchronous: this thread reads the socket
  } catch (const std::exception& e) {
    return Lost("receiving from", from, e);
  }
  return Status();
}

// Send, Recv and Exchange cut a transfer into the same pieces, so a message
// sent by one may be received by another.
Status GlooPairLinks::Send(int to, const void* data, size_t bytes) {
  return Exchange(to, data, bytes, to, nullptr, 0);
}

Status GlooPairLinks::Recv(int from, void* data, size_t bytes) {
  return Exchange(from, nullptr, 0, from, data, bytes);
}

Status GlooPairLinks::Exchange(int to, const void* send, size_t send_bytes, int from,
                               void* recv, size_t recv_bytes) {
  // After the started exchanges, whose bytes go first.
  while (!flows_.empty()) {
    Status s = FinishExchange();
    if (!s.ok()) return s;
  }
  Flow f(MakeTransfer(to, send, send_bytes, from, recv, recv_bytes));
  return Run(f);
}

Status GlooPairLinks::Run(Flow& f) {
  // Write a piece, then read a piece: both sides of every link may be
  // writing at once, and each piece fits in the socket buffers, so nobody
  // blocks in a write its peer will only drain after its own write.
  while (f.done_s < f.send_bytes || f.done_r < f.recv_bytes) {
    size_t ks = std::min(kPieceBytes, f.send_bytes - f.done_s);
    size_t kr = std::min(kPieceBytes, f.recv_bytes - f.done_r);
    if (ks > 0 && !f.written) {
      Status s = SendOne(f.to, f.send + f.done_s, ks);
      if (!s.ok()) return s;
    }
    f.written = false;
    if (kr > 0) {
      Status s = RecvOne(f.from, f.recv + f.done_r, kr);
      if (!s.ok()) return s;
    }
    f.done_s += ks;
    f.done_r += kr;
  }
  return Status();
}

Status GlooPairLinks::WriteFirstPiece(Flow& f) {
  // As Exchange begins: the piece fits in the socket buffers, and the kernel
  // sends it while the caller works.
  size_t ks = std::min(kPieceBytes, f.send_bytes);
  if (ks == 0) return Status();
  f.written = true;
  return SendOne(f.to, f.send, ks);
}

Status GlooPairLinks::StartExchange(int to, const void* send, size_t send_bytes, int from,
                                    void* recv, size_t recv_bytes) {
  if (flows_.size() >= kMaxStarted) return TooManyStarted();
  flows_.push_back(Flow(MakeTransfer(to, send, send_bytes, from, recv, recv_bytes)));
  // Only the oldest exchange writes ahead: the bytes keep Exchange's order.
  Status s = flows_.size() == 1 ? WriteFirstPiece(flows_.front()) : Status();
  if (!s.ok()) flows_.clear();
  return s;
}

Status GlooPairLinks::FinishExchange() {
  if (flows_.empty()) return NothingStarted();
  Status s = Run(flows_.front());
  flows_.pop_front();
  if (s.ok() && !flows_.empty()) s = WriteFirstPiece(flows_.front());
  if (!s.ok()) flows_.clear();
  return s;
}

}  // namespace tfhvd
