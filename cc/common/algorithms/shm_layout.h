// The layout of a rank's shared-memory region (shm_collectives.h), known to
// the collectives' files alone: a header page of progress counters, the
// negotiation's two word buffers, then the rank's slots.
//
//   region: [ShmHeader | pad to kHeaderBytes][OrWords buffer 0][buffer 1][slot 0]...[slot kSlots-1]
#ifndef TFHVD_COMMON_ALGORITHMS_SHM_LAYOUT_H_
#define TFHVD_COMMON_ALGORITHMS_SHM_LAYOUT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "cc/common/algorithms/shm_collectives.h"

namespace tfhvd {
namespace shm {

// Slots per rank, used in turn: a rank stages up to kSlots blocks ahead of
// what its peers have consumed. Two made the ranks hand the CPU to each other
// at every block on a busy host; more leave more slots cold between calls
// (experiments/single-op-time/).
constexpr size_t kSlots = 4;
constexpr size_t kHeaderBytes = 4096;     // keeps the slots page-aligned
// The negotiation's words, two buffers used in turn (OrWords).
constexpr size_t kOrBufferBytes = 4096;
constexpr size_t kOrBytes = 2 * kOrBufferBytes;
static_assert(ShmCollectives::kMaxOrWords * sizeof(uint64_t) <= kOrBufferBytes,
              "OrWords' words must fit one buffer");
// Blocks staged, reduced and consumed; negotiation rounds (OrWords).
enum Counter { kStaged = 0, kReduced = 1, kConsumed = 2, kRounds = 3, kCounters = 4 };

}  // namespace shm

// The start of every rank's region: its progress counters (blocks staged,
// reduced and consumed, counted since Open; each on its own cache line) and
// its process id, so a waiting peer can tell a dead rank from a slow one.
struct ShmHeader {
  struct alignas(64) Line {
    std::atomic<uint64_t> value;
  };
  Line counters[shm::kCounters];
  alignas(64) int32_t pid;
  // Bumped after every counter store: the futex word peers sleep on, and how
  // many of them do (the publisher wakes them only then).
  alignas(64) std::atomic<uint32_t> events;
  std::atomic<uint32_t> sleepers;
  // Rank 0's choice for the current block: peers flush the lines they read.
  alignas(64) std::atomic<uint32_t> readers_flush;
};
static_assert(sizeof(ShmHeader) <= shm::kHeaderBytes, "the header must fit its page");

}  // namespace tfhvd

#endif  // TFHVD_COMMON_ALGORITHMS_SHM_LAYOUT_H_
