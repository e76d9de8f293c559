#include "cc/common/transport/peer_loss.h"

#include <mutex>

namespace tfhvd {

namespace peer_loss_detail {
std::atomic<bool> declared{false};
}  // namespace peer_loss_detail

namespace {
std::mutex mutex;
int lost_rank = -1;
std::string lost_message;
}  // namespace

void DeclarePeerLost(int rank, const std::string& message) {
  std::lock_guard<std::mutex> lock(mutex);
  if (peer_loss_detail::declared.load()) return;
  lost_rank = rank;
  lost_message = message;
  peer_loss_detail::declared.store(true, std::memory_order_release);
}

Status PeerLostError() {
  std::lock_guard<std::mutex> lock(mutex);
  if (!peer_loss_detail::declared.load()) return Status();
  return Status::Unavailable(lost_message).WithPeer(lost_rank);
}

void ClearPeerLoss() {
  std::lock_guard<std::mutex> lock(mutex);
  peer_loss_detail::declared.store(false);
  lost_rank = -1;
  lost_message.clear();
}

}  // namespace tfhvd
