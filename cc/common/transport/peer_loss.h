// A peer rank declared lost by the liveness monitor (core/liveness_monitor.h):
// one process-wide record that every blocking wait of the transports and
// algorithms checks between its naps (a relaxed load), so that a wait on a
// rank that will never answer ends at once with an error naming it, instead of
// at its own no-progress bound. Set from the monitor's thread, read by the
// background thread; cleared by the next hvd.init().
//
//   DeclarePeerLost(1, "rank 1 (on h2) stopped answering ...");
//   if (PeerLost()) return PeerLostError();   // Unavailable, .peer() == 1
#ifndef TFHVD_COMMON_TRANSPORT_PEER_LOSS_H_
#define TFHVD_COMMON_TRANSPORT_PEER_LOSS_H_

#include <atomic>
#include <string>

#include "cc/common/common.h"

namespace tfhvd {

namespace peer_loss_detail {
extern std::atomic<bool> declared;
}  // namespace peer_loss_detail

// The first declaration wins; later ones are ignored until ClearPeerLoss().
void DeclarePeerLost(int rank, const std::string& message);
// Cheap enough for a spin loop.
inline bool PeerLost() { return peer_loss_detail::declared.load(std::memory_order_relaxed); }
// The error every pending op gets (OK when no peer was declared lost).
Status PeerLostError();
void ClearPeerLoss();

}  // namespace tfhvd

#endif  // TFHVD_COMMON_TRANSPORT_PEER_LOSS_H_
